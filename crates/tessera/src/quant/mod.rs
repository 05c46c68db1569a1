//! ggml block quantizations: decode packed tensors to floats, and encode floats into the
//! legacy block types, bit-identical to gguf-py 0.19.0's `gguf.quants`.
//!
//! # The block format, not a file format
//!
//! A packed tensor is a run of ggml blocks of one type ([`GgmlType`]: ggml's type id,
//! elements and bytes per block; `types.rs`), described in Tessera as dtype `u8`, the
//! logical shape, layout `ggml_<type>` ([`LAYOUT_PREFIX`]) and attribute `ggml_type`
//! ([`ATTR_GGML_TYPE`]). That is ggml's block format, which GGUF stores but does not
//! own: zTensor and AERO carry such tensors too. So the table and the kernels live here,
//! below the formats and naming none: GGUF's reader and writer (`formats/gguf/`, which
//! keeps what is GGUF's: the tensor info, the metadata value types, alignment, byte
//! order), `convert` (`ConvertOptions::dequantize`/`quantize`, through [`adapt`]) and
//! `values::dequantize` use it. Which targets `--quantize` may write is each format's
//! codec's to say (`Codec::quantizes`: GGUF).
//!
//! Always compiled, whatever the features: the kernels need no optional dependency
//! (rayon and half are the core's), and a packed tensor can come from any format that
//! keeps `ggml_*` layouts, so a build with `ztensor` alone dequantizes one too.
//!
//! # What is done
//!
//! | family | dequantize | quantize |
//! | --- | --- | --- |
//! | legacy ([`legacy`]) | Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 | Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 |
//! | k-quants ([`kquants`]) | Q2_K, Q3_K, Q4_K, Q5_K, Q6_K | — |
//! | others ([`other`]) | TQ1_0, TQ2_0, MXFP4, NVFP4, IQ4_NL, IQ4_XS | — |
//! | grid IQ ([`iq`]) | IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S | — |
//!
//! Besides ggml's blocks, [`mx`] decodes MXFP4 stored as a `_blocks` + `_scales` pair of
//! plain `u8` tensors (gpt-oss checkpoints) into one float tensor.
//!
//! The grid IQ types decode through ggml's codebooks, generated from gguf-py into
//! `iq_tables.bin` (see [`iq`]). gguf-py cannot decode Q8_1, Q8_K or Q1_0, so there is
//! no reference to be identical to; they are refused (`Unsupported`, naming the tensor
//! and the type).
//!
//! # Bit-identical to numpy
//!
//! gguf-py computes in numpy float32, one ufunc at a time. Each block function here does
//! the same operations in the same order, each rounded to f32 (Rust never fuses
//! `a * b + c` into an FMA on its own): `d * q`, `d * q + m`, `(d * sc) * q - (dmin * m)`
//! exactly as the numpy expression groups them. f16 scales are decoded exactly (every
//! f16 is an f32). Where numpy's behaviour is platform-defined we follow it on x86-64,
//! where gguf-py runs in practice: a float that is NaN or outside the i32 range becomes
//! 0 when cast to `uint8`/`int8` (the `cvttss2si` "integer indefinite" value, truncated),
//! and in-range values wrap modulo 256. `max`/`min`/`argmax` propagate NaN as numpy's do.
//! Which of `-0.0`/`0.0` a block's `min`/`max` returns follows numpy 2.x's AVX2
//! reduction order (see `np_reduce`); gguf-py itself, run where numpy uses another
//! SIMD width, may store the other zero as a Q4_1/Q5_1 minimum — the only byte that can
//! differ, and the decoded floats are equal.
//!
//! # Hostile input
//!
//! A tensor whose byte length is not a whole number of blocks, or whose element count
//! does not match its blocks, is a `Malformed` error naming the tensor; nothing here
//! indexes past a checked block or allocates more than the checked element count.
//! Large tensors are decoded and encoded in parallel over blocks (rayon).
//!
//! Hand-written: no Rust crate decodes ggml blocks bit-identically to gguf-py (the
//! `ggml`-binding crates link llama.cpp's C, which rounds differently in places and is a
//! heavy build).

pub mod adapt;
pub mod iq;
pub mod kquants;
pub mod legacy;
pub mod mx;
pub mod other;
mod types;

pub use types::{GgmlType, ATTR_GGML_TYPE, GGML_TYPES, LAYOUT_PREFIX};

use rayon::prelude::*;

use crate::dtype::DType;
use crate::error::{Error, Result};

/// Decodes a run of whole blocks (`bytes`, `out`, block size, type size). Each is a
/// loop over one block function, so the block function inlines into it.
type DequantFn = fn(&[u8], &mut [f32], usize, usize);
/// Encodes a run of whole blocks (`x`, `out`, block size, type size).
type QuantFn = fn(&[f32], &mut [u8], usize, usize);

/// The run decoder for a block function `fn(block bytes, block floats)`.
macro_rules! runs {
    ($f:path) => {
        |b: &[u8], o: &mut [f32], bs: usize, ts: usize| {
            for (ob, bb) in o.chunks_exact_mut(bs).zip(b.chunks_exact(ts)) {
                $f(bb, ob);
            }
        }
    };
}
/// The run encoder for a block function `fn(block floats, block bytes)`.
macro_rules! quant_runs {
    ($f:path) => {
        |x: &[f32], o: &mut [u8], bs: usize, ts: usize| {
            for (ob, xb) in o.chunks_exact_mut(ts).zip(x.chunks_exact(bs)) {
                $f(xb, ob);
            }
        }
    };
}

/// Blocks per parallel work item.
const BLOCKS_PER_TASK: usize = 2048;

/// The block decoder of a ggml type, when we have one.
fn dequant_fn(name: &str) -> Option<DequantFn> {
    Some(match name {
        "Q4_0" => runs!(legacy::dequant_q4_0),
        "Q4_1" => runs!(legacy::dequant_q4_1),
        "Q5_0" => runs!(legacy::dequant_q5_0),
        "Q5_1" => runs!(legacy::dequant_q5_1),
        "Q8_0" => runs!(legacy::dequant_q8_0),
        "Q2_K" => runs!(kquants::dequant_q2_k),
        "Q3_K" => runs!(kquants::dequant_q3_k),
        "Q4_K" => runs!(kquants::dequant_q4_k),
        "Q5_K" => runs!(kquants::dequant_q5_k),
        "Q6_K" => runs!(kquants::dequant_q6_k),
        "TQ1_0" => runs!(other::dequant_tq1_0),
        "TQ2_0" => runs!(other::dequant_tq2_0),
        "MXFP4" => runs!(other::dequant_mxfp4),
        "NVFP4" => runs!(other::dequant_nvfp4),
        "IQ4_NL" => runs!(other::dequant_iq4_nl),
        "IQ4_XS" => runs!(other::dequant_iq4_xs),
        "IQ2_XXS" => runs!(iq::dequant_iq2_xxs),
        "IQ2_XS" => runs!(iq::dequant_iq2_xs),
        "IQ2_S" => runs!(iq::dequant_iq2_s),
        "IQ3_XXS" => runs!(iq::dequant_iq3_xxs),
        "IQ3_S" => runs!(iq::dequant_iq3_s),
        "IQ1_S" => runs!(iq::dequant_iq1_s),
        "IQ1_M" => runs!(iq::dequant_iq1_m),
        _ => return None,
    })
}

/// True when [`dequantize`] decodes `ty`.
pub fn can_dequantize(ty: GgmlType) -> bool {
    dequant_fn(ty.name).is_some()
}

/// Decodes the packed blocks `bytes` of tensor `name` (type `ty`, `numel` elements) to
/// f32, as `gguf.quants.dequantize` does.
pub fn dequantize(name: &str, ty: GgmlType, bytes: &[u8], numel: u64) -> Result<Vec<f32>> {
    let f = dequant_fn(ty.name).ok_or_else(|| {
        Error::unsupported(format!(
            "tensor {name:?}: dequantizing {} is not supported (gguf-py's reference cannot \
             or Tessera does not yet)",
            ty.name
        ))
    })?;
    let (bs, ts) = (ty.block_size as usize, ty.type_size as usize);
    if bytes.len() % ts != 0 {
        return Err(Error::malformed(format!(
            "tensor {name:?}: {} bytes are not a whole number of {} blocks ({ts} bytes each)",
            bytes.len(),
            ty.name
        )));
    }
    let blocks = bytes.len() / ts;
    if (blocks as u64).checked_mul(bs as u64) != Some(numel) {
        return Err(Error::malformed(format!(
            "tensor {name:?}: {blocks} {} blocks hold {} elements, the shape has {numel}",
            ty.name,
            blocks as u128 * bs as u128
        )));
    }
    let mut out = vec![0f32; blocks * bs];
    let run = |(o, b): (&mut [f32], &[u8])| f(b, o, bs, ts);
    if blocks > BLOCKS_PER_TASK {
        out.par_chunks_mut(bs * BLOCKS_PER_TASK)
            .zip(bytes.par_chunks(ts * BLOCKS_PER_TASK))
            .for_each(run);
    } else {
        run((&mut out, bytes));
    }
    Ok(out)
}

/// A ggml type gguf-py's reference can quantize to, and so can we.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuantKind {
    /// 8-bit, one f16 scale per 32.
    Q8_0,
    /// 4-bit, one f16 scale per 32.
    Q4_0,
    /// 4-bit, f16 scale and minimum per 32.
    Q4_1,
    /// 5-bit, one f16 scale per 32.
    Q5_0,
    /// 5-bit, f16 scale and minimum per 32.
    Q5_1,
}

impl QuantKind {
    /// Every kind, for option parsing and help texts.
    pub const ALL: [QuantKind; 5] = [
        QuantKind::Q8_0,
        QuantKind::Q4_0,
        QuantKind::Q4_1,
        QuantKind::Q5_0,
        QuantKind::Q5_1,
    ];
    /// The lower-case name (`q8_0`).
    pub fn name(self) -> &'static str {
        match self {
            QuantKind::Q8_0 => "q8_0",
            QuantKind::Q4_0 => "q4_0",
            QuantKind::Q4_1 => "q4_1",
            QuantKind::Q5_0 => "q5_0",
            QuantKind::Q5_1 => "q5_1",
        }
    }
    /// Parses a name, any case.
    pub fn from_name(s: &str) -> Option<QuantKind> {
        QuantKind::ALL
            .iter()
            .copied()
            .find(|k| k.name().eq_ignore_ascii_case(s))
    }
    /// The ggml type it writes.
    pub fn ggml_type(self) -> GgmlType {
        let id = match self {
            QuantKind::Q8_0 => 8,
            QuantKind::Q4_0 => 2,
            QuantKind::Q4_1 => 3,
            QuantKind::Q5_0 => 6,
            QuantKind::Q5_1 => 7,
        };
        // The table holds every id above (tested).
        GgmlType::from_id(id).unwrap_or(GGML_TYPES[0])
    }
    fn block_fn(self) -> QuantFn {
        match self {
            QuantKind::Q8_0 => quant_runs!(legacy::quant_q8_0),
            QuantKind::Q4_0 => quant_runs!(legacy::quant_q4_0),
            QuantKind::Q4_1 => quant_runs!(legacy::quant_q4_1),
            QuantKind::Q5_0 => quant_runs!(legacy::quant_q5_0),
            QuantKind::Q5_1 => quant_runs!(legacy::quant_q5_1),
        }
    }
}

impl std::fmt::Display for QuantKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a tensor of `shape` and `dtype` stays float under `--quantize kind`, as
/// llama.cpp's converter keeps it: not a float, 1-D (or a scalar), or a row length that
/// is not a whole number of blocks. `None` when it is quantized.
pub fn keep_float_reason(kind: QuantKind, dtype: DType, shape: &[u64]) -> Option<String> {
    if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16 | DType::F64) {
        return Some(format!("{dtype} is not a float type"));
    }
    if shape.len() < 2 {
        return Some(format!("{}-D", shape.len()));
    }
    let bs = kind.ggml_type().block_size;
    let row = shape.last().copied().unwrap_or(0);
    if row % bs != 0 {
        return Some(format!("row length {row} is not a multiple of {bs}"));
    }
    None
}

/// Encodes `x` (whole blocks, row-major) as `kind`, as `gguf.quants.quantize` does.
pub fn quantize(name: &str, kind: QuantKind, x: &[f32]) -> Result<Vec<u8>> {
    let ty = kind.ggml_type();
    let (bs, ts) = (ty.block_size as usize, ty.type_size as usize);
    if x.len() % bs != 0 {
        return Err(Error::invalid_input(format!(
            "tensor {name:?}: {} elements are not a whole number of {} blocks of {bs}",
            x.len(),
            ty.name
        )));
    }
    let blocks = x.len() / bs;
    let f = kind.block_fn();
    let mut out = vec![0u8; blocks * ts];
    let run = |(o, v): (&mut [u8], &[f32])| f(v, o, bs, ts);
    if blocks > BLOCKS_PER_TASK {
        out.par_chunks_mut(ts * BLOCKS_PER_TASK)
            .zip(x.par_chunks(bs * BLOCKS_PER_TASK))
            .for_each(run);
    } else {
        run((&mut out, x));
    }
    Ok(out)
}

/// Dense floats (`F32`, `F16`, `BF16`, `F64`, little-endian) as f32, as numpy's
/// `astype(np.float32)` gives them (f64 rounds to nearest even; a finite value that
/// overflows f32 is refused).
pub fn floats_to_f32(name: &str, dtype: DType, data: &[u8]) -> Result<Vec<f32>> {
    let bad = || {
        Error::invalid_input(format!(
            "tensor {name:?}: {} bytes are not whole {dtype} elements",
            data.len()
        ))
    };
    if data.len() % dtype.size() != 0 {
        return Err(bad());
    }
    Ok(match dtype {
        DType::F32 => data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        DType::F16 => data
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        DType::BF16 => data
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        DType::F64 => {
            let mut out = Vec::with_capacity(data.len() / 8);
            for c in data.chunks_exact(8) {
                let v = f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
                let n = v as f32;
                if v.is_finite() && !n.is_finite() {
                    return Err(Error::invalid_input(format!(
                        "tensor {name:?}: value {v} overflows f32; quantization refused"
                    )));
                }
                out.push(n);
            }
            out
        }
        _ => {
            return Err(Error::unsupported(format!(
                "tensor {name:?}: {dtype} is not a float type"
            )))
        }
    })
}

/// f32 values as little-endian `to` bytes (F32, F16 or BF16, rounding to nearest even).
/// A finite value that becomes infinite in F16 is refused, naming the tensor.
pub fn f32_to_bytes(name: &str, v: &[f32], to: DType) -> Result<Vec<u8>> {
    let size = to.size();
    let mut out = vec![0u8; v.len() * size];
    let conv = |(o, x): (&mut [u8], &[f32])| -> Result<()> {
        for (ob, &f) in o.chunks_exact_mut(size).zip(x) {
            match to {
                DType::F32 => ob.copy_from_slice(&f.to_le_bytes()),
                DType::F16 => {
                    let h = half::f16::from_f32(f);
                    if f.is_finite() && h.is_infinite() {
                        return Err(Error::unsupported(format!(
                            "tensor {name:?}: value {f} overflows f16; dequantize to f32 \
                             or bf16, which hold it"
                        )));
                    }
                    ob.copy_from_slice(&h.to_le_bytes());
                }
                DType::BF16 => ob.copy_from_slice(&half::bf16::from_f32(f).to_le_bytes()),
                _ => {
                    return Err(Error::unsupported(format!(
                        "tensor {name:?}: dequantizing to {to} (f32, f16 or bf16)"
                    )))
                }
            }
        }
        Ok(())
    };
    const PER_TASK: usize = 1 << 16;
    if v.len() > PER_TASK {
        out.par_chunks_mut(size * PER_TASK)
            .zip(v.par_chunks(PER_TASK))
            .try_for_each(conv)?;
    } else {
        conv((&mut out, v))?;
    }
    Ok(out)
}

// ---- helpers shared by the block functions ----

/// The f16 at `b[i..i + 2]` (little-endian), exactly, as f32.
#[inline]
pub(crate) fn f16_at(b: &[u8], i: usize) -> f32 {
    half::f16::from_le_bytes([b[i], b[i + 1]]).to_f32()
}

/// An f32 as numpy's `astype(np.float16)` stores it, little-endian.
#[inline]
pub(crate) fn f16_bytes(v: f32) -> [u8; 2] {
    half::f16::from_f32(v).to_le_bytes()
}

/// numpy's float32 → uint8 cast on x86-64: truncate toward zero through i32, wrap to
/// 8 bits; NaN and values outside the i32 range give 0. (It truncates, so gguf-py's
/// `np.trunc` before the cast needs no step of its own.)
#[inline]
pub(crate) fn np_u8(x: f32) -> u8 {
    if x.is_nan() || !(-2147483648.0..2147483648.0).contains(&x) {
        0
    } else {
        (x as i32) as u8
    }
}

/// `np.max` / `np.min` over a block, as numpy 2.x reduces a contiguous float32 row on
/// x86-64 with AVX2: the first element seeds eight lanes, the rest go through 8-wide
/// `maxps`/`minps` (which keep the second operand on equality), a horizontal tree
/// (lanes i and i+4, then 0 and 2, then 0 and 1), then the leftover elements one by one
/// (again keeping the new one on equality). Values are always the true max/min; the
/// order only decides the sign of a zero result (`-0.0` vs `0.0`), which gguf-py stores
/// as the Q4_1/Q5_1 minimum. A NaN anywhere gives NaN, as in numpy.
#[inline]
fn np_reduce(x: &[f32], better: fn(f32, f32) -> bool) -> f32 {
    if let Some(&n) = x.iter().find(|v| v.is_nan()) {
        return n;
    }
    let Some((&first, rest)) = x.split_first() else {
        return f32::NAN;
    };
    // _mm_max_ps(a, b): a if a is better, else b.
    let pick = |a: f32, b: f32| if better(a, b) { a } else { b };
    let mut acc = [first; 8];
    let mut lanes = rest.chunks_exact(8);
    for v in &mut lanes {
        for (a, &b) in acc.iter_mut().zip(v) {
            *a = pick(*a, b);
        }
    }
    let h: [f32; 4] = std::array::from_fn(|i| pick(acc[i], acc[i + 4]));
    let mut r = pick(pick(h[0], h[2]), pick(h[1], h[3]));
    for &b in lanes.remainder() {
        r = pick(r, b);
    }
    r
}

/// `np.max` over a block (see [`np_reduce`]).
#[inline]
pub(crate) fn np_max(x: &[f32]) -> f32 {
    np_reduce(x, |a, b| a > b)
}

/// `np.min` over a block (see [`np_reduce`]).
#[inline]
pub(crate) fn np_min(x: &[f32]) -> f32 {
    np_reduce(x, |a, b| a < b)
}

/// `1 / d` where `d != 0`, else 0 (`np.where(d == 0, 0, 1 / d)`).
#[inline]
pub(crate) fn inv(d: f32) -> f32 {
    if d == 0.0 {
        0.0
    } else {
        1.0 / d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_name_their_types() {
        for k in QuantKind::ALL {
            assert_eq!(k.ggml_type().name.to_ascii_lowercase(), k.name());
            assert_eq!(QuantKind::from_name(&k.name().to_uppercase()), Some(k));
        }
    }

    #[test]
    fn ragged_bytes_are_refused() {
        let q8 = QuantKind::Q8_0.ggml_type();
        let e = dequantize("w", q8, &[0u8; 35], 32).unwrap_err();
        assert!(e.to_string().contains("\"w\""), "{e}");
        let e = dequantize("w", q8, &[0u8; 34], 64).unwrap_err();
        assert!(e.to_string().contains("64"), "{e}");
        assert_eq!(dequantize("w", q8, &[], 0).unwrap(), Vec::<f32>::new());
    }

    #[test]
    fn numpy_casts() {
        assert_eq!(np_u8(f32::NAN), 0);
        assert_eq!(np_u8(f32::INFINITY), 0);
        assert_eq!(np_u8(300.0), 44);
        assert_eq!(np_u8(-1.0), 255);
        assert_eq!(np_u8(16.9), 16);
        assert!(np_max(&[1.0, f32::NAN, 3.0]).is_nan());
    }

    #[test]
    fn keep_float_reasons() {
        let k = QuantKind::Q8_0;
        assert!(keep_float_reason(k, DType::F32, &[64]).is_some());
        assert!(keep_float_reason(k, DType::F32, &[2, 33]).is_some());
        assert!(keep_float_reason(k, DType::I32, &[2, 32]).is_some());
        assert!(keep_float_reason(k, DType::BF16, &[2, 64]).is_none());
    }
}
