//! GGUF on-disk tables: the magic, the metadata value types (`gguf_type`), named as
//! ggml's `docs/gguf.md` and gguf-py's `constants.py` name them, and the byte order.
//! The tensor types a tensor info names (`ggml_type`: ids, block sizes) are ggml's
//! block formats, not GGUF's: they live in [`crate::quant`] with the kernels that
//! decode them, and are re-exported here for the reader and writer.

use crate::error::Result;
use crate::util::bytes::ByteReader;

pub use crate::quant::{GgmlType, ATTR_GGML_TYPE, GGML_TYPES, LAYOUT_PREFIX};

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
}
