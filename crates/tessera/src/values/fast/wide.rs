//! [`Stats`] and histogram counts of one block of the dtypes an f32 cannot hold: f64,
//! 32- and 64-bit integers (i64 and u64 rounded to the nearest f64, as
//! `DType::element_as_f64` does). The same plan as the f32 kernels in `mod.rs`, in f64
//! lanes: tiles of [`TILE`] elements decoded into a stack buffer; a tile of f64 with a
//! NaN or an infinity counts them and packs the finite ones; min, max, zeros and the sum
//! in one pass, the squared deviations from the tile's mean in a second; tiles merged
//! by Chan's update. Written for the vectoriser, and on x86-64 compiled a second time
//! with AVX2 and chosen at run time.

use super::{add_tile_f64, Counts, Grid, Stats, LANES, TILE};

/// How one element's bytes become an f64.
pub(in crate::values) trait Decode64: Copy {
    /// Bytes per element.
    const N: usize;
    /// Whether the dtype has NaN and infinities.
    const FLOAT: bool;
    /// The element at the start of `b` (`b.len() >= N`).
    fn dec(&self, b: &[u8]) -> f64;
}

/// Little-endian f64.
#[derive(Clone, Copy)]
pub(in crate::values) struct F64;
/// Little-endian 32-bit integers, signed or not.
#[derive(Clone, Copy)]
pub(in crate::values) struct Int32 {
    pub signed: bool,
}
/// Little-endian 64-bit integers, signed or not (rounded to the nearest f64).
#[derive(Clone, Copy)]
pub(in crate::values) struct Int64 {
    pub signed: bool,
}

impl Decode64 for F64 {
    const N: usize = 8;
    const FLOAT: bool = true;
    #[inline(always)]
    fn dec(&self, b: &[u8]) -> f64 {
        f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }
}
impl Decode64 for Int32 {
    const N: usize = 4;
    const FLOAT: bool = false;
    #[inline(always)]
    fn dec(&self, b: &[u8]) -> f64 {
        let w = [b[0], b[1], b[2], b[3]];
        match self.signed {
            true => f64::from(i32::from_le_bytes(w)),
            false => f64::from(u32::from_le_bytes(w)),
        }
    }
}
impl Decode64 for Int64 {
    const N: usize = 8;
    const FLOAT: bool = false;
    #[inline(always)]
    fn dec(&self, b: &[u8]) -> f64 {
        let w = [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
        match self.signed {
            true => i64::from_le_bytes(w) as f64,
            false => u64::from_le_bytes(w) as f64,
        }
    }
}

/// The statistics of `bytes` read as `D` elements (a trailing partial element is
/// ignored).
pub(in crate::values) fn block<D: Decode64>(d: D, bytes: &[u8]) -> Stats {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        #[allow(unsafe_code)]
        return unsafe { block_avx2(d, bytes) };
    }
    block_any(d, bytes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
unsafe fn block_avx2<D: Decode64>(d: D, bytes: &[u8]) -> Stats {
    block_any(d, bytes)
}

#[inline(always)]
fn block_any<D: Decode64>(d: D, bytes: &[u8]) -> Stats {
    let mut s = Stats::default();
    let mut buf = [0f64; TILE];
    for tile in bytes.chunks(TILE * D::N) {
        let m = tile.len() / D::N;
        if m == 0 {
            break;
        }
        let x = &mut buf[..m];
        for (v, b) in x.iter_mut().zip(tile.chunks_exact(D::N)) {
            *v = d.dec(b);
        }
        s.count += m as u64;
        let finite = if D::FLOAT && has_non_finite(x) {
            pack_finite(x, &mut s)
        } else {
            m
        };
        moments(&x[..finite], &mut s);
    }
    s
}

/// Whether any of `x` is NaN or infinite (exponent all ones), without an early exit
/// so that it vectorises.
#[inline(always)]
fn has_non_finite(x: &[f64]) -> bool {
    let mut top = [0u64; LANES];
    let mut it = x.chunks_exact(LANES);
    for c in &mut it {
        for l in 0..LANES {
            top[l] = top[l].max(c[l].to_bits() & 0x7fff_ffff_ffff_ffff);
        }
    }
    let tail = it
        .remainder()
        .iter()
        .map(|v| v.to_bits() & 0x7fff_ffff_ffff_ffff);
    top.iter().copied().chain(tail).max().unwrap_or(0) >= 0x7ff0_0000_0000_0000
}

/// Counts the NaN and infinite elements of `x` into `s` and moves the finite ones to
/// the front, in order; returns how many are finite.
#[cold]
fn pack_finite(x: &mut [f64], s: &mut Stats) -> usize {
    let mut k = 0;
    for i in 0..x.len() {
        let v = x[i];
        if v.is_finite() {
            x[k] = v;
            k += 1;
        } else if v.is_nan() {
            s.nan += 1;
        } else if v > 0.0 {
            s.pos_inf += 1;
        } else {
            s.neg_inf += 1;
        }
    }
    k
}

/// Adds the finite values `x` to `s` (two passes over the tile, as `mod.rs`'s f32
/// tiles).
#[inline(always)]
fn moments(x: &[f64], s: &mut Stats) {
    if x.is_empty() {
        return;
    }
    let mut mn = [f64::INFINITY; LANES];
    let mut mx = [f64::NEG_INFINITY; LANES];
    let mut zeros = [0u32; LANES];
    let mut sum = [0f64; LANES];
    let mut it = x.chunks_exact(LANES);
    for c in &mut it {
        for l in 0..LANES {
            let v = c[l];
            mn[l] = if v < mn[l] { v } else { mn[l] };
            mx[l] = if v > mx[l] { v } else { mx[l] };
            zeros[l] += u32::from(v == 0.0);
            sum[l] += v;
        }
    }
    for (l, &v) in it.remainder().iter().enumerate() {
        mn[l] = if v < mn[l] { v } else { mn[l] };
        mx[l] = if v > mx[l] { v } else { mx[l] };
        zeros[l] += u32::from(v == 0.0);
        sum[l] += v;
    }
    let mean = super::pairwise(&sum) / x.len() as f64;
    let mut m2 = [0f64; LANES];
    let mut it = x.chunks_exact(LANES);
    for c in &mut it {
        for l in 0..LANES {
            let d = c[l] - mean;
            m2[l] += d * d;
        }
    }
    for (l, &v) in it.remainder().iter().enumerate() {
        let d = v - mean;
        m2[l] += d * d;
    }
    let m2 = super::pairwise(&m2);
    if !(mean.is_finite() && m2.is_finite()) {
        // Values near f64's limits overflow a sum: Welford's update, one at a time,
        // keeps the mean finite (the count was added by the caller).
        let mut w = Stats::default();
        x.iter().for_each(|&v| w.push(v));
        w.count = 0;
        s.merge(&w);
        return;
    }
    add_tile_f64(s, &mn, &mx, &zeros, x.len(), mean, m2);
}

/// Adds the finite elements of `bytes` (read as `D`) in the grid's range to `h`, by
/// numpy's rule ([`Grid::bin`]).
pub(in crate::values) fn histogram<D: Decode64>(d: D, bytes: &[u8], grid: &Grid, h: &mut [u64]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        #[allow(unsafe_code)]
        return unsafe { histogram_avx2(d, bytes, grid, h) };
    }
    histogram_any(d, bytes, grid, h)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
unsafe fn histogram_avx2<D: Decode64>(d: D, bytes: &[u8], grid: &Grid, h: &mut [u64]) {
    histogram_any(d, bytes, grid, h)
}

#[inline(always)]
fn histogram_any<D: Decode64>(d: D, bytes: &[u8], grid: &Grid, h: &mut [u64]) {
    let mut idx = [0u32; TILE];
    let mut counts = Counts::new(h.len());
    for tile in bytes.chunks(TILE * D::N) {
        let m = tile.len() / D::N;
        for (k, b) in idx[..m].iter_mut().zip(tile.chunks_exact(D::N)) {
            *k = grid.bin(d.dec(b));
        }
        counts.add(&idx[..m], h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    /// Every wide dtype against the element-by-element statistics and histogram, on
    /// random bytes (every f64 bit pattern: NaN, infinities, subnormals, huge values)
    /// and on small values, over lengths around the lanes and tiles.
    #[test]
    fn wide_dtypes_agree_with_the_element_path() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for dtype in [DType::F64, DType::I32, DType::U32, DType::I64, DType::U64] {
            for n in [0usize, 1, 15, 17, 1024, 1025, 3001] {
                for small in [false, true] {
                    let bytes: Vec<u8> = (0..n)
                        .flat_map(|i| {
                            let r = next();
                            let v = match (small, dtype) {
                                (false, _) => r,
                                (true, DType::F64) => ((r % 2001) as f64 / 8.0 - 125.0).to_bits(),
                                // Small integers, some negative: sign-extended bits.
                                (true, _) => ((r % 2001) as i64 - 1000 + (i % 3) as i64) as u64,
                            };
                            v.to_le_bytes()[..dtype.size()].to_vec()
                        })
                        .collect();
                    let what = format!("{dtype}, {n} elements, small {small}");
                    let fast = crate::values::Stats::of(dtype, &bytes);
                    let mut want = Stats::default();
                    want.add(dtype, &bytes);
                    assert_eq!(
                        (fast.count, fast.nan, fast.pos_inf, fast.neg_inf, fast.zeros),
                        (want.count, want.nan, want.pos_inf, want.neg_inf, want.zeros),
                        "{what}"
                    );
                    assert_eq!((fast.min, fast.max), (want.min, want.max), "{what}");
                    if let (Some(a), Some(b)) = (fast.mean(), want.mean()) {
                        let scale = want
                            .max
                            .unwrap_or(0.0)
                            .abs()
                            .max(want.min.unwrap_or(0.0).abs());
                        assert!(
                            (a - b).abs() <= 1e-12 * scale.max(1.0),
                            "{what}: {a} vs {b}"
                        );
                    }
                    if let (Some(a), Some(b)) = (fast.std(), want.std()) {
                        if a.is_finite() && b.is_finite() {
                            assert!((a - b).abs() <= 1e-9 * b.max(1.0), "{what}: {a} vs {b}");
                        }
                    }
                    if let (Some(lo), Some(hi)) = (want.min, want.max) {
                        let edges = crate::values::histogram_edges(lo, hi, 40);
                        if edges.iter().all(|e| e.is_finite()) && hi - lo < f64::MAX {
                            let got = crate::values::histogram(dtype, &bytes, &edges);
                            let mut h = vec![0u64; 40];
                            for i in 0..n {
                                let Some(x) = dtype.element_as_f64(&bytes, i) else {
                                    continue;
                                };
                                let k = super::super::bin_by_edges(
                                    x,
                                    &edges,
                                    40.0 / (edges[40] - edges[0]),
                                );
                                if (k as usize) < 40 {
                                    h[k as usize] += 1;
                                }
                            }
                            assert_eq!(got, h, "{what}");
                        }
                    }
                }
            }
        }
    }
}
