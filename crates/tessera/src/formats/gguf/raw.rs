//! GGUF on-disk tables: the magic, the metadata value types (`gguf_type`) and the ggml
//! tensor types (`ggml_type`) with their block sizes, named as ggml's `docs/gguf.md` and
//! gguf-py's `constants.py` name them.

use crate::dtype::DType;
use crate::error::Result;
use crate::util::bytes::ByteReader;

/// `GGUF` read as a little-endian u32.
pub const GGUF_MAGIC: &[u8; 4] = b"GGUF";
/// The version we write.
pub const GGUF_VERSION: u32 = 3;
/// `general.alignment` when the file does not set it.
pub const GGUF_DEFAULT_ALIGNMENT: u64 = 32;
/// The key that sets the data alignment.
pub const KEY_ALIGNMENT: &str = "general.alignment";

/// A metadata value type (`enum gguf_metadata_value_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GgufType {
    /// 0
    Uint8,
    /// 1
    Int8,
    /// 2
    Uint16,
    /// 3
    Int16,
    /// 4
    Uint32,
    /// 5
    Int32,
    /// 6
    Float32,
    /// 7: one byte, 0 or 1.
    Bool,
    /// 8: u64 length + UTF-8 bytes, no terminator.
    String,
    /// 9: u32 item type + u64 count + items.
    Array,
    /// 10
    Uint64,
    /// 11
    Int64,
    /// 12
    Float64,
}

impl GgufType {
    /// Every type, in tag order.
    pub const ALL: [GgufType; 13] = [
        GgufType::Uint8,
        GgufType::Int8,
        GgufType::Uint16,
        GgufType::Int16,
        GgufType::Uint32,
        GgufType::Int32,
        GgufType::Float32,
        GgufType::Bool,
        GgufType::String,
        GgufType::Array,
        GgufType::Uint64,
        GgufType::Int64,
        GgufType::Float64,
    ];

    /// The type of tag `v`, if known.
    pub fn from_u32(v: u32) -> Option<GgufType> {
        GgufType::ALL.get(usize::try_from(v).ok()?).copied()
    }

    /// The tag.
    pub fn tag(self) -> u32 {
        GgufType::ALL.iter().position(|&t| t == self).unwrap_or(0) as u32
    }

    /// Bytes of a scalar of this type (`None` for strings and arrays).
    pub fn scalar_size(self) -> Option<usize> {
        Some(match self {
            GgufType::Uint8 | GgufType::Int8 | GgufType::Bool => 1,
            GgufType::Uint16 | GgufType::Int16 => 2,
            GgufType::Uint32 | GgufType::Int32 | GgufType::Float32 => 4,
            GgufType::Uint64 | GgufType::Int64 | GgufType::Float64 => 8,
            GgufType::String | GgufType::Array => return None,
        })
    }

    /// The fewest bytes one value of this type occupies (for count checks).
    pub fn min_size(self) -> u64 {
        match self {
            GgufType::String => 8,
            GgufType::Array => 12,
            t => t.scalar_size().unwrap_or(1) as u64,
        }
    }

    /// The short name used in Tessera's type annotations (`u32`, `f32`, `str`, …).
    pub fn short_name(self) -> &'static str {
        match self {
            GgufType::Uint8 => "u8",
            GgufType::Int8 => "i8",
            GgufType::Uint16 => "u16",
            GgufType::Int16 => "i16",
            GgufType::Uint32 => "u32",
            GgufType::Int32 => "i32",
            GgufType::Float32 => "f32",
            GgufType::Bool => "bool",
            GgufType::String => "str",
            GgufType::Array => "array",
            GgufType::Uint64 => "u64",
            GgufType::Int64 => "i64",
            GgufType::Float64 => "f64",
        }
    }

    /// Parses a short name.
    pub fn from_short_name(s: &str) -> Option<GgufType> {
        GgufType::ALL.iter().copied().find(|t| t.short_name() == s)
    }

    /// The integer range of an integer type.
    pub fn int_range(self) -> Option<(i128, i128)> {
        Some(match self {
            GgufType::Uint8 => (0, u8::MAX as i128),
            GgufType::Int8 => (i8::MIN as i128, i8::MAX as i128),
            GgufType::Uint16 => (0, u16::MAX as i128),
            GgufType::Int16 => (i16::MIN as i128, i16::MAX as i128),
            GgufType::Uint32 => (0, u32::MAX as i128),
            GgufType::Int32 => (i32::MIN as i128, i32::MAX as i128),
            GgufType::Uint64 => (0, u64::MAX as i128),
            GgufType::Int64 => (i64::MIN as i128, i64::MAX as i128),
            _ => return None,
        })
    }
}

/// One ggml tensor type: its id, its name and its block geometry (`GGML_QUANT_SIZES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GgmlType {
    /// The id stored in the tensor info.
    pub id: u32,
    /// The upper-case name (`Q4_0`, `BF16`, …).
    pub name: &'static str,
    /// Elements per block (1 for plain types).
    pub block_size: u64,
    /// Bytes per block.
    pub type_size: u64,
    /// The dense dtype, for plain types.
    pub dtype: Option<DType>,
}

const QK_K: u64 = 256;

macro_rules! ggml_types {
    ($($id:literal $name:ident $bs:expr, $ts:expr, $dt:expr;)*) => {
        /// Every ggml type gguf-py 0.19 knows, in id order.
        pub const GGML_TYPES: &[GgmlType] = &[$(GgmlType {
            id: $id,
            name: stringify!($name),
            block_size: $bs,
            type_size: $ts,
            dtype: $dt,
        }),*];
    };
}

ggml_types! {
    0 F32 1, 4, Some(DType::F32);
    1 F16 1, 2, Some(DType::F16);
    2 Q4_0 32, 2 + 16, None;
    3 Q4_1 32, 2 + 2 + 16, None;
    6 Q5_0 32, 2 + 4 + 16, None;
    7 Q5_1 32, 2 + 2 + 4 + 16, None;
    8 Q8_0 32, 2 + 32, None;
    9 Q8_1 32, 4 + 4 + 32, None;
    10 Q2_K 256, 2 + 2 + QK_K / 16 + QK_K / 4, None;
    11 Q3_K 256, 2 + QK_K / 4 + QK_K / 8 + 12, None;
    12 Q4_K 256, 2 + 2 + QK_K / 2 + 12, None;
    13 Q5_K 256, 2 + 2 + QK_K / 2 + QK_K / 8 + 12, None;
    14 Q6_K 256, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16, None;
    15 Q8_K 256, 4 + QK_K + QK_K / 8, None;
    16 IQ2_XXS 256, 2 + QK_K / 4, None;
    17 IQ2_XS 256, 2 + QK_K / 4 + QK_K / 32, None;
    18 IQ3_XXS 256, 2 + QK_K / 4 + QK_K / 8, None;
    19 IQ1_S 256, 2 + QK_K / 8 + QK_K / 16, None;
    20 IQ4_NL 32, 2 + 16, None;
    21 IQ3_S 256, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4, None;
    22 IQ2_S 256, 2 + QK_K / 4 + QK_K / 16, None;
    23 IQ4_XS 256, 2 + 2 + QK_K / 2 + QK_K / 64, None;
    24 I8 1, 1, Some(DType::I8);
    25 I16 1, 2, Some(DType::I16);
    26 I32 1, 4, Some(DType::I32);
    27 I64 1, 8, Some(DType::I64);
    28 F64 1, 8, Some(DType::F64);
    29 IQ1_M 256, QK_K / 8 + QK_K / 16 + QK_K / 32, None;
    30 BF16 1, 2, Some(DType::BF16);
    34 TQ1_0 256, 2 + 4 * 13, None;
    35 TQ2_0 256, 2 + 64, None;
    39 MXFP4 32, 1 + 16, None;
    40 NVFP4 64, 4 + 32, None;
    41 Q1_0 128, 2 + 16, None;
}

/// Prefix of the layout name of a packed (quantized) tensor: `ggml_q4_0`, …
pub const LAYOUT_PREFIX: &str = "ggml_";
/// The tensor attribute that holds the ggml type id of a packed tensor.
pub const ATTR_GGML_TYPE: &str = "ggml_type";

impl GgmlType {
    /// The type with id `id`.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        GGML_TYPES.iter().copied().find(|t| t.id == id)
    }
    /// The plain type that stores `dtype`.
    pub fn from_dtype(dtype: DType) -> Option<GgmlType> {
        GGML_TYPES.iter().copied().find(|t| t.dtype == Some(dtype))
    }
    /// The type whose layout name is `layout` (`ggml_q4_0` → Q4_0).
    pub fn from_layout_name(layout: &str) -> Option<GgmlType> {
        let rest = layout.strip_prefix(LAYOUT_PREFIX)?;
        GGML_TYPES
            .iter()
            .copied()
            .find(|t| t.dtype.is_none() && t.name.eq_ignore_ascii_case(rest))
    }
    /// The layout name of a packed type (`ggml_q4_0`).
    pub fn layout_name(self) -> String {
        format!("{LAYOUT_PREFIX}{}", self.name.to_ascii_lowercase())
    }
    /// Bytes of a tensor of this type whose innermost dimension is `ne0` and which has
    /// `numel` elements; `None` when `ne0` is not a whole number of blocks or on overflow.
    pub fn nbytes(self, ne0: u64, numel: u64) -> Option<u64> {
        if ne0 % self.block_size != 0 {
            return None;
        }
        (numel / self.block_size).checked_mul(self.type_size)
    }
}

/// Reads GGUF integers in a file's byte order (GGUF v3 allows big-endian files).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endian {
    /// True for a big-endian file.
    pub big: bool,
}

macro_rules! endian_readers {
    ($($name:ident $le:ident $be:ident $t:ty;)*) => {
        impl Endian {$(
            /// Reads one integer in this byte order.
            pub fn $name(self, r: &mut ByteReader<'_>, what: &str) -> Result<$t> {
                if self.big { r.$be(what) } else { r.$le(what) }
            }
        )*}
    };
}

endian_readers! {
    u16 u16_le u16_be u16;
    u32 u32_le u32_be u32;
    u64 u64_le u64_be u64;
    i32 i32_le i32_be i32;
    i64 i64_le i64_be i64;
}

/// Rounds `x` up to a multiple of `align` (a power of two), checked.
pub fn align_up(x: u64, align: u64) -> Option<u64> {
    let r = x % align;
    if r == 0 {
        Some(x)
    } else {
        x.checked_add(align - r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip() {
        for (i, t) in GgufType::ALL.iter().enumerate() {
            assert_eq!(t.tag(), i as u32);
            assert_eq!(GgufType::from_u32(i as u32), Some(*t));
            assert_eq!(GgufType::from_short_name(t.short_name()), Some(*t));
        }
        assert_eq!(GgufType::from_u32(13), None);
    }

    #[test]
    fn ggml_table_is_consistent() {
        for t in GGML_TYPES {
            assert_eq!(GgmlType::from_id(t.id), Some(*t));
            match t.dtype {
                Some(d) => {
                    assert_eq!(t.block_size, 1);
                    assert_eq!(t.type_size, d.size() as u64);
                }
                None => assert_eq!(GgmlType::from_layout_name(&t.layout_name()), Some(*t)),
            }
        }
        assert_eq!(GgmlType::from_id(4), None);
        let q4 = GgmlType::from_id(2).unwrap();
        assert_eq!(q4.nbytes(64, 128), Some(72));
        assert_eq!(q4.nbytes(48, 48), None);
    }
}
