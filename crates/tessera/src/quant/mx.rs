//! OCP microscaling FP4 (MXFP4) as models store it: two plain `u8` tensors side by side,
//! as in gpt-oss checkpoints (safetensors):
//!
//! | tensor | shape | holds |
//! | --- | --- | --- |
//! | `<name>_blocks` | (…, G, 16) | 32 E2M1 codes per block, two per byte, the even element in the low nibble |
//! | `<name>_scales` | (…, G) | one E8M0 exponent per block: 2^(s − 127) |
//!
//! Element `j` of block `g` is `E2M1(code) × 2^(scale[g] − 127)`. `--dequantize f32|f16|bf16`
//! makes such a pair one float tensor `<name>` of shape (…, G·32), placed where
//! `<name>_blocks` was; without it the pair passes as the two `u8` tensors it is.
//!
//! A pair is found by its names and shapes only: `X_blocks` dense `u8` of rank ≥ 2 with a
//! last dimension of 16, `X_scales` dense `u8` of the blocks' shape less that dimension,
//! and no tensor named `X`. Anything else is left alone.
//!
//! Deviation: the E8M0 code 0xFF is NaN, as the OCP MX specification (and ml_dtypes'
//! `float8_e8m0fnu`) has it; transformers' `convert_moe_packed_tensors` computes 2^128
//! for it. The model-specific transpose transformers applies after decoding gpt-oss's
//! expert weights is not part of the format and is not done here.

use std::borrow::Cow;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{Layout, TensorInfo, TensorView};

use super::f32_to_bytes;

/// Suffix of the codes tensor.
pub const BLOCKS: &str = "_blocks";
/// Suffix of the scales tensor.
pub const SCALES: &str = "_scales";
/// Bytes per block (32 four-bit codes).
const BLOCK_BYTES: u64 = 16;

/// An MXFP4 pair in a source: the tensor it becomes and the two it is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MxPair {
    /// The dequantized tensor's name (`X`).
    pub name: String,
    /// `X_blocks`.
    pub blocks: String,
    /// `X_scales`.
    pub scales: String,
}

/// The MXFP4 pairs among `infos`, in the order of their `_blocks` tensors.
pub fn pairs(infos: &[TensorInfo]) -> Vec<MxPair> {
    let by_name: std::collections::HashMap<&str, &TensorInfo> =
        infos.iter().map(|i| (i.name.as_str(), i)).collect();
    let mut out = Vec::new();
    for b in infos {
        let Some(stem) = b.name.strip_suffix(BLOCKS) else {
            continue;
        };
        let scales = format!("{stem}{SCALES}");
        let Some(s) = by_name.get(scales.as_str()) else {
            continue;
        };
        let plain_u8 = |i: &TensorInfo| i.layout == Layout::Dense && i.dtype == DType::U8;
        let shaped = b.shape.len() >= 2
            && b.shape.last() == Some(&BLOCK_BYTES)
            && s.shape[..] == b.shape[..b.shape.len() - 1];
        if plain_u8(b) && plain_u8(s) && shaped && !by_name.contains_key(stem) {
            out.push(MxPair {
                name: stem.to_string(),
                blocks: b.name.clone(),
                scales,
            });
        }
    }
    out
}

/// The description of the tensor `pair` becomes, dequantized to `to`.
pub fn pair_info(pair: &MxPair, blocks: &TensorInfo, to: DType) -> Result<TensorInfo> {
    let mut shape = blocks.shape.clone();
    shape.pop();
    let groups = shape.pop().unwrap_or(0);
    let row = groups
        .checked_mul(2 * BLOCK_BYTES)
        .ok_or_else(|| Error::malformed(format!("tensor {:?}: too many blocks", pair.blocks)))?;
    shape.push(row);
    let info = TensorInfo::dense(pair.name.clone(), to, shape);
    info.numel()?;
    Ok(info)
}

/// The E2M1 values of the 16 codes (sign, two exponent bits, one mantissa bit).
const E2M1: [f32; 16] = [
    0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
];

/// 2^(s − 127); NaN for 0xFF (OCP MX's E8M0).
fn e8m0(s: u8) -> f64 {
    if s == 0xFF {
        f64::NAN
    } else {
        f64::powi(2.0, i32::from(s) - 127)
    }
}

/// The pair's two views decoded into the dense tensor `info` ([`pair_info`]).
pub fn dequantize_pair(
    blocks: &TensorView<'_>,
    scales: &TensorView<'_>,
    info: &TensorInfo,
) -> Result<TensorView<'static>> {
    let (b, s) = (blocks.data()?, scales.data()?);
    let groups = s.len();
    if b.len() as u64 != groups as u64 * BLOCK_BYTES {
        return Err(Error::malformed(format!(
            "tensor {:?}: {} bytes of blocks for {groups} scales (16 bytes each)",
            blocks.info.name,
            b.len()
        )));
    }
    let mut v = vec![0f32; b.len() * 2];
    use rayon::prelude::*;
    const GROUPS_PER_TASK: usize = 4096;
    (v.par_chunks_mut(32 * GROUPS_PER_TASK))
        .zip(b.par_chunks(16 * GROUPS_PER_TASK))
        .zip(s.par_chunks(GROUPS_PER_TASK))
        .for_each(|((out, codes), scales)| {
            for ((o, c), &sc) in (out.chunks_exact_mut(32))
                .zip(codes.chunks_exact(16))
                .zip(scales)
            {
                let k = e8m0(sc);
                for (pair, &byte) in o.chunks_exact_mut(2).zip(c) {
                    pair[0] = (f64::from(E2M1[usize::from(byte & 0x0F)]) * k) as f32;
                    pair[1] = (f64::from(E2M1[usize::from(byte >> 4)]) * k) as f32;
                }
            }
        });
    let bytes = f32_to_bytes(&info.name, &v, info.dtype)?;
    TensorView::dense(info.clone(), Cow::Owned(bytes)).map(TensorView::into_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u8_tensor(name: &str, shape: Vec<u64>) -> TensorInfo {
        TensorInfo::dense(name, DType::U8, shape)
    }

    #[test]
    fn pairs_are_found_by_names_and_shapes_only() {
        let infos = vec![
            u8_tensor("a_blocks", vec![2, 3, 16]),
            u8_tensor("a_scales", vec![2, 3]),
            u8_tensor("b_blocks", vec![2, 16]),
            u8_tensor("b_scales", vec![3]), // wrong shape
            u8_tensor("c_blocks", vec![4, 16]),
            u8_tensor("c_scales", vec![4]),
            u8_tensor("c", vec![1]), // the name is taken
            TensorInfo::dense("d_blocks", DType::I8, vec![1, 16]),
            u8_tensor("d_scales", vec![1]),
        ];
        let got = pairs(&infos);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].name, "a");
        let info = pair_info(&got[0], &infos[0], DType::BF16).unwrap();
        assert_eq!(info.shape, vec![2, 96]);
    }

    #[test]
    fn codes_scale_by_powers_of_two_low_nibble_first() {
        let info = TensorInfo::dense("x", DType::F32, vec![32]);
        let mut codes = vec![0u8; 16];
        codes[0] = 0x21; // element 0: code 1 (0.5); element 1: code 2 (1.0)
        codes[15] = 0xF7; // element 30: 6.0; element 31: -6.0
        let blocks = TensorView::dense(u8_tensor("x_blocks", vec![1, 16]), codes.into()).unwrap();
        let scales = TensorView::dense(u8_tensor("x_scales", vec![1]), vec![129u8].into()).unwrap();
        let v = dequantize_pair(&blocks, &scales, &info).unwrap();
        let f: Vec<f32> = (v.data().unwrap().chunks_exact(4))
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!((f[0], f[1], f[30], f[31]), (2.0, 4.0, 24.0, -24.0));
        assert!(f[2..30].iter().all(|&x| x == 0.0));
        let nan = TensorView::dense(u8_tensor("x_scales", vec![1]), vec![0xFFu8].into()).unwrap();
        let v = dequantize_pair(&blocks, &nan, &info).unwrap();
        assert!(f32::from_le_bytes(v.data().unwrap()[..4].try_into().unwrap()).is_nan());
    }
}
