//! Element values: comparing two tensors with a tolerance (`tessera diff`) and value
//! statistics (`tessera stats`, `verify --values`).
//!
//! Elements are decoded to `f64` ([`DType::element_as_f64`]: every float including bf16
//! and fp8, every integer, bool as 0/1; the real part of a complex number). Both
//! functions work on a dense byte slice and keep constant state, so a caller streams a
//! tensor through them in blocks ([`Stats::add`], [`ValueDiff::add`]) and memory stays
//! at one block.
//!
//! Closeness is numpy's `isclose(a, b, rtol, atol)`: `|a - b| <= atol + rtol * |b|`, `b`
//! the second file's element. NaN is equal to NaN (numpy's `equal_nan=True`: a file
//! compared with itself has no differences), an infinity equals the same infinity only;
//! a NaN or infinity against anything else is a non-finite mismatch, counted apart from
//! the errors, whose maximum and RMS are over the finite pairs.

use crate::dtype::DType;

/// Numeric tolerance for equality (numpy `isclose`); both zero means exact.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tolerance {
    /// Absolute tolerance.
    pub atol: f64,
    /// Relative tolerance, times `|b|`.
    pub rtol: f64,
}

impl Tolerance {
    /// numpy `isclose(a, b, rtol, atol, equal_nan=True)`.
    pub fn close(&self, a: f64, b: f64) -> bool {
        if a == b || (a.is_nan() && b.is_nan()) {
            return true;
        }
        if !a.is_finite() || !b.is_finite() {
            return false;
        }
        (a - b).abs() <= self.atol + self.rtol * b.abs()
    }
}

/// How the elements of two tensors of one shape differ.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ValueDiff {
    /// Elements compared.
    pub compared: u64,
    /// Elements not close (finite or not).
    pub differing: u64,
    /// Of those, pairs where one side is NaN or an infinity the other does not match.
    pub nonfinite_mismatches: u64,
    /// max |a - b| over finite pairs.
    pub max_abs: f64,
    /// max |a - b| / |b| over finite pairs that differ (infinite where `b` is 0).
    pub max_rel: f64,
    sum_sq: f64,
    finite: u64,
}

impl ValueDiff {
    /// Compares elements `a[i]` (dtype `da`) with `b[i]` (dtype `db`) for every `i` both
    /// slices hold whole.
    pub fn add(&mut self, da: DType, a: &[u8], db: DType, b: &[u8], tol: &Tolerance) {
        let n = da.elements_in(a.len()).min(db.elements_in(b.len()));
        for i in 0..n {
            let (Some(x), Some(y)) = (da.element_as_f64(a, i), db.element_as_f64(b, i)) else {
                continue;
            };
            self.compared += 1;
            let close = tol.close(x, y);
            if !close {
                self.differing += 1;
            }
            if x.is_finite() && y.is_finite() {
                let d = (x - y).abs();
                self.finite += 1;
                self.sum_sq += d * d;
                self.max_abs = self.max_abs.max(d);
                if d > 0.0 {
                    let rel = if y == 0.0 { f64::INFINITY } else { d / y.abs() };
                    self.max_rel = self.max_rel.max(rel);
                }
            } else if !close {
                self.nonfinite_mismatches += 1;
            }
        }
    }
    /// Root mean square of `a - b` over the finite pairs.
    pub fn rms(&self) -> f64 {
        if self.finite == 0 {
            0.0
        } else {
            (self.sum_sq / self.finite as f64).sqrt()
        }
    }
}

mod fast;

/// Bytes per parallel block in [`Stats::of`].
const BLOCK: usize = 1 << 20;

/// Value statistics of one tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// Elements seen.
    pub count: u64,
    /// NaN elements.
    pub nan: u64,
    /// +Inf elements.
    pub pos_inf: u64,
    /// -Inf elements.
    pub neg_inf: u64,
    /// Elements equal to zero (either sign).
    pub zeros: u64,
    /// Smallest finite element (`None` when there is none).
    pub min: Option<f64>,
    /// Largest finite element.
    pub max: Option<f64>,
    // Welford's running mean and sum of squared deviations, over finite elements.
    finite: u64,
    mean: f64,
    m2: f64,
}

impl Default for Stats {
    fn default() -> Stats {
        Stats {
            count: 0,
            nan: 0,
            pos_inf: 0,
            neg_inf: 0,
            zeros: 0,
            min: None,
            max: None,
            finite: 0,
            mean: 0.0,
            m2: 0.0,
        }
    }
}

impl Stats {
    /// Adds every whole element of `bytes` (dtype `dtype`, little-endian).
    pub fn add(&mut self, dtype: DType, bytes: &[u8]) {
        let n = dtype.elements_in(bytes.len());
        for i in 0..n {
            if let Some(x) = dtype.element_as_f64(bytes, i) {
                self.push(x);
            }
        }
    }
    /// The statistics of a whole dense tensor's bytes, computed in parallel over blocks
    /// of about 1 MiB and merged; f32, bf16, f16, 16-bit and one-byte dtypes (fp8, u8,
    /// i8, bool), f64 and 32/64-bit integers by vectorised loops (`values/fast/`), complex
    /// element by element.
    ///
    /// Packed sub-byte dtypes are decoded element by element, every nibble or 6-bit
    /// group of `bytes` an element (an odd `f4_e2m1` tensor's padding nibble included:
    /// cast such a tensor to f32 first, as `tessera stats` does).
    pub fn of(dtype: DType, bytes: &[u8]) -> Stats {
        use rayon::prelude::*;
        if let Some(codes) = packed_codes(dtype, bytes) {
            return fast::block(fast::Table8::of(dtype), &codes);
        }
        let size = dtype.size().max(1);
        let block = (BLOCK / size).max(1) * size;
        bytes
            .par_chunks(block)
            .map(|b| match dtype {
                DType::F32 => fast::block(fast::F32, b),
                DType::BF16 => fast::block(fast::Bf16, b),
                DType::F16 => fast::block(fast::F16, b),
                DType::I16 | DType::U16 => fast::block(
                    fast::Int16 {
                        signed: dtype == DType::I16,
                    },
                    b,
                ),
                DType::U8 | DType::Bool => fast::block(fast::Byte { signed: false }, b),
                DType::I8 => fast::block(fast::Byte { signed: true }, b),
                DType::F8E5M2 => fast::block(fast::E5M2, b),
                DType::F8E4M3FN => fast::block(fast::E4M3, b),
                d if d.size() == 1 => fast::block(fast::Table8::of(d), b),
                DType::F64 => fast::wide::block(fast::F64, b),
                DType::I32 | DType::U32 => fast::wide::block(
                    fast::Int32 {
                        signed: dtype == DType::I32,
                    },
                    b,
                ),
                DType::I64 | DType::U64 => fast::wide::block(
                    fast::Int64 {
                        signed: dtype == DType::I64,
                    },
                    b,
                ),
                _ => {
                    let mut s = Stats::default();
                    s.add(dtype, b);
                    s
                }
            })
            .reduce(Stats::default, |mut a, b| {
                a.merge(&b);
                a
            })
    }
    /// Adds the elements another [`Stats`] saw (Chan et al.'s parallel update of the
    /// mean and the sum of squared deviations).
    pub fn merge(&mut self, o: &Stats) {
        self.count += o.count;
        self.nan += o.nan;
        self.pos_inf += o.pos_inf;
        self.neg_inf += o.neg_inf;
        self.zeros += o.zeros;
        self.min = match (self.min, o.min) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.max = match (self.max, o.max) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if o.finite == 0 {
            return;
        }
        if self.finite == 0 {
            (self.finite, self.mean, self.m2) = (o.finite, o.mean, o.m2);
            return;
        }
        let n = (self.finite + o.finite) as f64;
        let delta = o.mean - self.mean;
        self.mean += delta * o.finite as f64 / n;
        self.m2 += o.m2 + delta * delta * self.finite as f64 * o.finite as f64 / n;
        self.finite += o.finite;
    }
    /// Adds one value.
    pub fn push(&mut self, x: f64) {
        self.count += 1;
        if x.is_nan() {
            self.nan += 1;
            return;
        }
        if x == f64::INFINITY {
            self.pos_inf += 1;
            return;
        }
        if x == f64::NEG_INFINITY {
            self.neg_inf += 1;
            return;
        }
        if x == 0.0 {
            self.zeros += 1;
        }
        self.min = Some(self.min.map_or(x, |m| m.min(x)));
        self.max = Some(self.max.map_or(x, |m| m.max(x)));
        self.finite += 1;
        let delta = x - self.mean;
        self.mean += delta / self.finite as f64;
        self.m2 += delta * (x - self.mean);
    }
    /// Mean of the finite elements (`None` when there is none).
    pub fn mean(&self) -> Option<f64> {
        (self.finite > 0).then_some(self.mean)
    }
    /// Population standard deviation of the finite elements (numpy's `std`, `ddof=0`).
    pub fn std(&self) -> Option<f64> {
        (self.finite > 0).then(|| (self.m2 / self.finite as f64).sqrt())
    }
    /// NaN and infinite elements.
    pub fn non_finite(&self) -> u64 {
        self.nan + self.pos_inf + self.neg_inf
    }
}

/// Edges of `bins` equal-width bins over `[lo, hi]` as numpy's `histogram` makes them
/// (`linspace`; a range of one value widened by 0.5 each side).
pub fn histogram_edges(lo: f64, hi: f64, bins: usize) -> Vec<f64> {
    let (lo, hi) = if lo == hi {
        (lo - 0.5, hi + 0.5)
    } else {
        (lo, hi)
    };
    let bins = bins.max(1);
    let step = (hi - lo) / bins as f64;
    let mut e: Vec<f64> = (0..=bins).map(|i| lo + i as f64 * step).collect();
    e[bins] = hi;
    e
}

/// The elements of a packed sub-byte buffer one per byte (their codes, which the
/// dtype's [`fast::Table8`] decodes), or `None` for a dtype of whole bytes.
fn packed_codes(dtype: DType, bytes: &[u8]) -> Option<Vec<u8>> {
    if !dtype.is_packed() {
        return None;
    }
    crate::dtype::unpack(dtype, bytes, dtype.elements_in(bytes.len()))
}

/// Counts of the finite elements of `bytes` (dtype `dtype`) in the bins of `edges`
/// ([`histogram_edges`]), by numpy's rule: bin `i` holds `edges[i] <= x < edges[i+1]`,
/// the last also `x == edges[bins]`; elements outside are not counted. In parallel over
/// blocks.
pub fn histogram(dtype: DType, bytes: &[u8], edges: &[f64]) -> Vec<u64> {
    use rayon::prelude::*;
    let bins = edges.len().saturating_sub(1);
    if bins == 0 {
        return Vec::new();
    }
    let (lo, hi) = (edges[0], edges[bins]);
    let norm = bins as f64 / (hi - lo);
    if let Some(codes) = packed_codes(dtype, bytes) {
        let mut h = vec![0u64; bins];
        fast::histogram(fast::Table8::of(dtype), &codes, edges, norm, &mut h);
        return h;
    }
    let size = dtype.size().max(1);
    let block = (BLOCK / size).max(1) * size;
    let count = |b: &[u8]| {
        let mut h = vec![0u64; bins];
        match dtype {
            DType::F32 => fast::histogram(fast::F32, b, edges, norm, &mut h),
            DType::BF16 => fast::histogram(fast::Bf16, b, edges, norm, &mut h),
            DType::F16 => fast::histogram(fast::F16, b, edges, norm, &mut h),
            DType::I16 | DType::U16 => {
                let d = fast::Int16 {
                    signed: dtype == DType::I16,
                };
                fast::histogram(d, b, edges, norm, &mut h)
            }
            DType::U8 | DType::Bool => {
                fast::histogram(fast::Byte { signed: false }, b, edges, norm, &mut h)
            }
            DType::I8 => fast::histogram(fast::Byte { signed: true }, b, edges, norm, &mut h),
            DType::F8E5M2 => fast::histogram(fast::E5M2, b, edges, norm, &mut h),
            DType::F8E4M3FN => fast::histogram(fast::E4M3, b, edges, norm, &mut h),
            d if d.size() == 1 => fast::histogram(fast::Table8::of(d), b, edges, norm, &mut h),
            DType::F64 => fast::histogram_wide(fast::F64, b, edges, norm, &mut h),
            DType::I32 | DType::U32 => {
                let d = fast::Int32 {
                    signed: dtype == DType::I32,
                };
                fast::histogram_wide(d, b, edges, norm, &mut h)
            }
            DType::I64 | DType::U64 => {
                let d = fast::Int64 {
                    signed: dtype == DType::I64,
                };
                fast::histogram_wide(d, b, edges, norm, &mut h)
            }
            _ => {
                for i in 0..b.len() / size {
                    let Some(x) = dtype.element_as_f64(b, i) else {
                        continue;
                    };
                    if !(x >= lo && x <= hi) {
                        continue;
                    }
                    let mut k = (((x - lo) * norm) as usize).min(bins - 1);
                    if x < edges[k] {
                        k = k.saturating_sub(1);
                    } else if k + 1 < bins && x >= edges[k + 1] {
                        k += 1;
                    }
                    h[k] += 1;
                }
            }
        }
        h
    };
    bytes.par_chunks(block).map(count).reduce(
        || vec![0u64; bins],
        |mut a, b| {
            a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
            a
        },
    )
}

/// True when `info` is stored as ggml's packed blocks (GGUF's quantized tensors, layout
/// `ggml_q8_0`, …, in any format that carries them): its values are read through
/// [`dequantize`].
pub fn is_quantized(info: &crate::tensor::TensorInfo) -> bool {
    matches!(&info.layout, crate::tensor::Layout::Other(l) if l.starts_with(crate::quant::LAYOUT_PREFIX))
}

/// The dense `to` view (F32, F16 or BF16) of a tensor stored as ggml's packed blocks,
/// decoded bit-identically to gguf-py's `gguf.quants.dequantize` (then rounded to `to`
/// to nearest even), as `convert --dequantize` does; any other tensor is returned
/// unchanged. The decoded tensor keeps the name, shape and attributes (less the ggml
/// type). The one library entry point for a dequantizing read: `extract`, `stats` and
/// `diff --dequantize` use it, and so do Python's `dequantize=` loaders.
///
/// Errors: `InvalidInput` for another `to`; `Unsupported` for a ggml type Tessera does
/// not decode (Q8_1, Q8_K, Q1_0) or a value that overflows F16 (f32 and bf16 hold it);
/// `Malformed` for blocks that do not match the shape.
pub fn dequantize(
    view: crate::tensor::TensorView<'_>,
    to: DType,
) -> crate::Result<crate::tensor::TensorView<'_>> {
    use crate::quant::adapt;
    adapt::check_dequantize(Some(to))?;
    if adapt::packed_type(&view.info).is_none() {
        return Ok(view);
    }
    let mut notes = Vec::new();
    match adapt::plan(&view.info, Some(to), None, &mut notes)? {
        Some((info, step)) => adapt::apply(step, view, &info),
        None => Ok(view),
    }
}

/// With `--dequantize`, the tensor `name` made of an MXFP4 pair (`name_blocks` +
/// `name_scales`, [`crate::quant::mx`]) of `src`, decoded to `to` as `convert
/// --dequantize` does; `None` when `src` has a tensor of that name or no such pair.
pub fn dequantized_pair(
    src: &dyn crate::model::TensorSource,
    name: &str,
    to: DType,
) -> crate::Result<Option<crate::tensor::TensorView<'static>>> {
    use crate::quant::mx;
    crate::quant::adapt::check_dequantize(Some(to))?;
    let infos = src.tensor_infos();
    if infos.iter().any(|i| i.name == name) {
        return Ok(None);
    }
    let Some(pair) = mx::pairs(infos).into_iter().find(|p| p.name == name) else {
        return Ok(None);
    };
    let blocks = src.tensor(&pair.blocks)?;
    let info = mx::pair_info(&pair, &blocks.info, to)?;
    let scales = src.tensor(&pair.scales)?;
    mx::dequantize_pair(&blocks, &scales, &info).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn closeness_is_numpys() {
        let t = Tolerance {
            atol: 0.0,
            rtol: 0.1,
        };
        assert!(t.close(1.05, 1.0));
        assert!(!t.close(1.0, 0.9)); // 0.1 > 0.1 * 0.9
        assert!(t.close(f64::NAN, f64::NAN));
        assert!(t.close(f64::INFINITY, f64::INFINITY));
        assert!(!t.close(f64::INFINITY, f64::NEG_INFINITY));
        assert!(!t.close(f64::NAN, 1.0));
        let exact = Tolerance::default();
        assert!(!exact.close(1.0, 1.0 + 1e-12));
    }

    #[test]
    fn diffs_separate_nonfinite_from_errors() {
        let a = f32s(&[1.0, 2.0, f32::NAN, 4.0, f32::NAN, 0.5]);
        let b = f32s(&[1.0, 2.5, 3.0, 4.0, f32::NAN, 0.0]);
        let mut d = ValueDiff::default();
        d.add(DType::F32, &a, DType::F32, &b, &Tolerance::default());
        assert_eq!(d.compared, 6);
        assert_eq!(d.differing, 3);
        assert_eq!(d.nonfinite_mismatches, 1);
        assert_eq!(d.max_abs, 0.5);
        assert_eq!(d.max_rel, f64::INFINITY); // 0.5 against 0
        let rms = ((0.25f64 + 0.25) / 4.0).sqrt();
        assert!((d.rms() - rms).abs() < 1e-12);
    }

    #[test]
    fn stats_count_what_is_not_finite() {
        let mut s = Stats::default();
        s.add(
            DType::F32,
            &f32s(&[
                1.0,
                -3.0,
                0.0,
                f32::NAN,
                f32::INFINITY,
                f32::NEG_INFINITY,
                2.0,
            ]),
        );
        assert_eq!(
            (s.count, s.nan, s.pos_inf, s.neg_inf, s.zeros),
            (7, 1, 1, 1, 1)
        );
        assert_eq!((s.min, s.max), (Some(-3.0), Some(2.0)));
        assert_eq!(s.mean(), Some(0.0));
        assert!((s.std().unwrap() - 3.5f64.sqrt()).abs() < 1e-12);
        assert_eq!(Stats::default().mean(), None);
    }

    #[test]
    fn parallel_blocks_merge_to_the_same_statistics() {
        // 3 MiB of f32 with NaNs and infinities: several blocks.
        let v: Vec<f32> = (0..(3 << 18))
            .map(|i| match i % 1000 {
                7 => f32::NAN,
                8 => f32::INFINITY,
                _ => ((i % 97) as f32 - 40.0) * 0.25,
            })
            .collect();
        let f16s = |v: &[f32], bf: bool| -> Vec<u8> {
            v.iter()
                .flat_map(|&x| match bf {
                    true => half::bf16::from_f32(x).to_le_bytes(),
                    false => half::f16::from_f32(x).to_le_bytes(),
                })
                .collect()
        };
        // The vectorised blocks (f32, bf16, f16) against the element-by-element path,
        // with an odd tail (not a whole number of lanes).
        for (dtype, mut bytes) in [
            (DType::F32, f32s(&v)),
            (DType::BF16, f16s(&v, true)),
            (DType::F16, f16s(&v, false)),
        ] {
            bytes.extend_from_within(..dtype.size() * 5);
            let par = Stats::of(dtype, &bytes);
            let mut seq = Stats::default();
            seq.add(dtype, &bytes);
            assert_eq!(
                (
                    par.count,
                    par.nan,
                    par.pos_inf,
                    par.neg_inf,
                    par.zeros,
                    par.min,
                    par.max
                ),
                (
                    seq.count,
                    seq.nan,
                    seq.pos_inf,
                    seq.neg_inf,
                    seq.zeros,
                    seq.min,
                    seq.max
                ),
                "{dtype}"
            );
            assert!((par.mean().unwrap() - seq.mean().unwrap()).abs() < 1e-9);
            assert!((par.std().unwrap() - seq.std().unwrap()).abs() < 1e-9);
        }
        let empty = Stats::of(DType::F32, &f32s(&[f32::NAN, 0.0, f32::NEG_INFINITY]));
        assert_eq!(
            (empty.count, empty.nan, empty.neg_inf, empty.zeros),
            (3, 1, 1, 1)
        );
        assert_eq!((empty.min, empty.max), (Some(0.0), Some(0.0)));
    }

    #[test]
    fn fast_histograms_count_as_the_element_path_does() {
        // Values on and beside the edges, NaN and Inf, tiles with and without them; the
        // f32/bf16/f16 paths against the element-by-element path on the same values as
        // f64 (every one exactly representable).
        let mut v: Vec<f32> = (0..200_000)
            .map(|i| ((i * 7919) % 4001) as f32 / 1000.0 - 2.0)
            .collect();
        v[100] = f32::NAN;
        v[5000] = f32::INFINITY;
        v[150_000] = f32::NEG_INFINITY;
        v[7] = -2.0;
        v[8] = 2.0;
        for (dtype, bytes, back) in [
            (
                DType::F32,
                f32s(&v),
                v.iter().map(|&x| f64::from(x)).collect::<Vec<_>>(),
            ),
            (
                DType::BF16,
                v.iter()
                    .flat_map(|&x| half::bf16::from_f32(x).to_le_bytes())
                    .collect(),
                v.iter()
                    .map(|&x| f64::from(half::bf16::from_f32(x).to_f32()))
                    .collect(),
            ),
            (
                DType::F16,
                v.iter()
                    .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
                    .collect(),
                v.iter()
                    .map(|&x| f64::from(half::f16::from_f32(x).to_f32()))
                    .collect(),
            ),
        ] {
            let wide: Vec<u8> = back.iter().flat_map(|x| x.to_le_bytes()).collect();
            for (lo, hi, bins) in [(-2.0, 2.0, 40), (-1.0, 1.5, 7), (0.25, 0.25, 3)] {
                let edges = histogram_edges(lo, hi, bins);
                let fast = histogram(dtype, &bytes, &edges);
                assert_eq!(
                    fast,
                    histogram(DType::F64, &wide, &edges),
                    "{dtype} {lo}..{hi}"
                );
                assert!(fast.iter().sum::<u64>() > 0, "{dtype} {lo}..{hi}");
            }
            let (a, b) = (Stats::of(dtype, &bytes), Stats::of(DType::F64, &wide));
            assert_eq!(
                (a.count, a.nan, a.pos_inf, a.neg_inf, a.zeros, a.min, a.max),
                (b.count, b.nan, b.pos_inf, b.neg_inf, b.zeros, b.min, b.max),
                "{dtype}"
            );
            assert!(
                (a.mean().unwrap() - b.mean().unwrap()).abs() < 1e-12,
                "{dtype}"
            );
            assert!(
                (a.std().unwrap() - b.std().unwrap()).abs() < 1e-12,
                "{dtype}"
            );
        }
    }

    #[test]
    fn one_byte_and_16_bit_dtypes_take_the_fast_path_to_the_same_results() {
        // Every byte value many times (fp8 NaN and infinities included), and 16-bit
        // integers over their whole range; against the element-by-element path.
        let bytes: Vec<u8> = (0..300_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let fast = |d: &DType| d.size() == 1 || matches!(d, DType::I16 | DType::U16);
        for dtype in DType::ALL.into_iter().filter(fast) {
            let par = Stats::of(dtype, &bytes);
            let mut seq = Stats::default();
            seq.add(dtype, &bytes);
            assert_eq!(
                (
                    par.count,
                    par.nan,
                    par.pos_inf,
                    par.neg_inf,
                    par.zeros,
                    par.min,
                    par.max
                ),
                (
                    seq.count,
                    seq.nan,
                    seq.pos_inf,
                    seq.neg_inf,
                    seq.zeros,
                    seq.min,
                    seq.max
                ),
                "{dtype}"
            );
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
            assert!(close(par.mean().unwrap(), seq.mean().unwrap()), "{dtype}");
            assert!(close(par.std().unwrap(), seq.std().unwrap()), "{dtype}");
            // The histogram against the f64 path on the same values.
            let wide: Vec<u8> = (0..dtype.elements_in(bytes.len()))
                .flat_map(|i| dtype.element_as_f64(&bytes, i).unwrap().to_le_bytes())
                .collect();
            let edges = histogram_edges(par.min.unwrap(), par.max.unwrap(), 40);
            let h = histogram(dtype, &bytes, &edges);
            assert_eq!(h, histogram(DType::F64, &wide, &edges), "{dtype}");
            assert_eq!(
                h.iter().sum::<u64>(),
                par.count - par.non_finite(),
                "{dtype}"
            );
        }
    }
}
