//! ggml's tensor types: the table of block formats (id, name, elements per block,
//! bytes per block; `GGML_QUANT_SIZES` in gguf-py's `constants.py`, `enum ggml_type`
//! in ggml.h) and how a packed tensor of one is described in Tessera (layout
//! `ggml_<name>`, attribute `ggml_type`).
//!
//! The id is ggml's number for the type, not a GGUF invention: GGUF stores it in each
//! tensor info, and Tessera's `ggml_type` attribute carries it in any format that keeps
//! packed tensors (zTensor, AERO), so it belongs to the block format.

use crate::dtype::DType;

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

#[cfg(test)]
mod tests {
    use super::*;

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
