//! The statistics of a block with AVX2, FMA and F16C intrinsics (x86-64 only, chosen at
//! run time by [`super::block`]).
//!
//! The portable loop in `mod.rs` is written for the compiler's vectoriser, but it keeps
//! its accumulators in 128-bit registers and spills some of them; this one holds every
//! accumulator in a 256-bit register and decodes eight elements straight from the
//! file's bytes. Per tile of [`TILE`] elements:
//!
//! 1. one pass: min, max, zeros, and the sum in f64 lanes, keeping the widened tile in
//!    an 8 KiB buffer (the conversions to f64 and the 128-bit extracts all go to one
//!    shuffle port; doing them once instead of twice took a tile from 3.9 to 5.5 GB/s
//!    of bf16 per core in cache, f32 from 9.0 to 12.3);
//! 2. a tile that holds a non-finite element (a lane's sum is then NaN or infinite,
//!    which a sum of finite f32 values in f64 never is) is handed back to the portable
//!    path (rare: it counts them and packs the finite ones); otherwise
//! 3. one pass over that buffer: the squared deviations from the tile's mean, by FMA,
//!    prefetching the next tile into L1 as it goes: without that, the loads of every
//!    first pass waited on memory while the second computed, and a 256 MiB f32 tensor
//!    was summarised at 0.56× of a plain all-core read; with it, 0.79–1.0×.
//!
//! The lanes are the portable loop's: element `i` of a tile goes to lane `i % 16` of
//! min, max, zeros and the sums, and the lanes are reduced the same way, so min, max,
//! zeros and mean are bit for bit the portable path's; the squared deviations differ
//! only by FMA's single rounding.

#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::{
    pairwise, Bf16, Byte, Counts, Decode, Grid, Int16, Stats, Table8, E4M3, E4M3_BIAS, E4M3_SUB,
    E5M2, F16, F32, LANES, TILE,
};

/// Eight elements as f32 lanes.
pub(in crate::values) trait Lanes: Decode {
    /// The eight elements at `p`.
    ///
    /// # Safety
    /// `8 * Self::N` bytes from `p` are readable, and the CPU has AVX2, FMA and F16C.
    unsafe fn load8(&self, p: *const u8) -> __m256;
}

impl Lanes for F32 {
    #[inline(always)]
    unsafe fn load8(&self, p: *const u8) -> __m256 {
        _mm256_loadu_ps(p.cast())
    }
}
impl Lanes for Bf16 {
    #[inline(always)]
    unsafe fn load8(&self, p: *const u8) -> __m256 {
        let h = _mm_loadu_si128(p.cast());
        _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
    }
}
impl Lanes for F16 {
    #[inline(always)]
    unsafe fn load8(&self, p: *const u8) -> __m256 {
        _mm256_cvtph_ps(_mm_loadu_si128(p.cast()))
    }
}
impl Lanes for Int16 {
    #[inline(always)]
    unsafe fn load8(&self, p: *const u8) -> __m256 {
        let h = _mm_loadu_si128(p.cast());
        let w = if self.signed {
            _mm256_cvtepi16_epi32(h)
        } else {
            _mm256_cvtepu16_epi32(h)
        };
        _mm256_cvtepi32_ps(w)
    }
}
impl Lanes for Byte {
    #[inline(always)]
    unsafe fn load8(&self, p: *const u8) -> __m256 {
        let b = _mm_loadl_epi64(p.cast());
        let w = if self.signed {
            _mm256_cvtepi8_epi32(b)
        } else {
            _mm256_cvtepu8_epi32(b)
        };
        _mm256_cvtepi32_ps(w)
    }
}
impl Lanes for E5M2 {
    #[inline(always)]
    unsafe fn load8(&self, p: *const u8) -> __m256 {
        // Each byte to the top of a 16-bit half.
        let b = _mm_loadl_epi64(p.cast());
        _mm256_cvtph_ps(_mm_unpacklo_epi8(_mm_setzero_si128(), b))
    }
}
impl Lanes for E4M3 {
    #[inline(always)]
    unsafe fn load8(&self, p: *const u8) -> __m256 {
        let x = _mm256_cvtepu8_epi32(_mm_loadl_epi64(p.cast()));
        let mag = _mm256_and_si256(x, _mm256_set1_epi32(0x7f));
        let sign = _mm256_slli_epi32::<24>(_mm256_and_si256(x, _mm256_set1_epi32(0x80)));
        let normal = _mm256_castsi256_ps(_mm256_add_epi32(
            _mm256_slli_epi32::<20>(mag),
            _mm256_set1_epi32(E4M3_BIAS as i32),
        ));
        // Magnitudes under 8 are subnormal: the mantissa (the magnitude itself) × 2^-9.
        let sub = _mm256_mul_ps(_mm256_cvtepi32_ps(mag), _mm256_set1_ps(E4M3_SUB));
        let is_sub = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(8), mag));
        let v = _mm256_blendv_ps(normal, sub, is_sub);
        let nan = _mm256_castsi256_ps(_mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7f)));
        let v = _mm256_blendv_ps(v, _mm256_set1_ps(f32::NAN), nan);
        _mm256_or_ps(v, _mm256_castsi256_ps(sign))
    }
}
impl Lanes for Table8 {
    #[inline(always)]
    unsafe fn load8(&self, p: *const u8) -> __m256 {
        let idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64(p.cast()));
        // Every index is a byte: inside the 256-entry table.
        _mm256_i32gather_ps::<4>(self.0.as_ptr(), idx)
    }
}

/// The statistics of `bytes` read as `D` elements (a trailing partial element is
/// ignored).
///
/// # Safety
/// The CPU has AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn block<D: Lanes>(d: D, bytes: &[u8]) -> Stats {
    let mut s = Stats::default();
    let n = bytes.len() / D::N;
    let mut at = 0;
    while at < n {
        let m = (n - at).min(TILE);
        let tile = &bytes[at * D::N..(at + m) * D::N];
        s.count += m as u64;
        if !tile_finite(d, tile, m, &mut s) {
            super::tile_slow(d, tile, m, &mut s);
        }
        at += m;
    }
    s
}

/// Adds the `m` elements of `tile` to `s` and returns true, or returns false (adding
/// nothing) when one of them is NaN or infinite.
#[inline(always)]
unsafe fn tile_finite<D: Lanes>(d: D, tile: &[u8], m: usize, s: &mut Stats) -> bool {
    let groups = m / LANES;
    let p = tile.as_ptr();
    let half = 8 * D::N;
    let zero = _mm256_setzero_ps();
    let (mut mn0, mut mn1) = (_mm256_set1_ps(f32::INFINITY), _mm256_set1_ps(f32::INFINITY));
    let (mut mx0, mut mx1) = (
        _mm256_set1_ps(f32::NEG_INFINITY),
        _mm256_set1_ps(f32::NEG_INFINITY),
    );
    let (mut z0, mut z1) = (_mm256_setzero_si256(), _mm256_setzero_si256());
    let mut sum = [_mm256_setzero_pd(); 4];
    // The tile widened to f64 for the second pass (8 KiB, in L1): widening again there
    // would cost as many shuffle-port operations as the whole first pass.
    let mut buf = std::mem::MaybeUninit::<[f64; TILE]>::uninit();
    let out = buf.as_mut_ptr().cast::<f64>();
    for g in 0..groups {
        let q = p.add(g * LANES * D::N);
        let v0 = d.load8(q);
        let v1 = d.load8(q.add(half));
        mn0 = _mm256_min_ps(v0, mn0);
        mn1 = _mm256_min_ps(v1, mn1);
        mx0 = _mm256_max_ps(v0, mx0);
        mx1 = _mm256_max_ps(v1, mx1);
        // A true comparison is all ones: -1.
        z0 = _mm256_sub_epi32(
            z0,
            _mm256_castps_si256(_mm256_cmp_ps::<_CMP_EQ_OQ>(v0, zero)),
        );
        z1 = _mm256_sub_epi32(
            z1,
            _mm256_castps_si256(_mm256_cmp_ps::<_CMP_EQ_OQ>(v1, zero)),
        );
        let w = widen(v0, v1);
        for k in 0..4 {
            sum[k] = _mm256_add_pd(sum[k], w[k]);
            _mm256_storeu_pd(out.add(g * LANES + 4 * k), w[k]);
        }
    }
    let tail = &tile[groups * LANES * D::N..m * D::N];
    if tail.chunks_exact(D::N).any(|b| !d.dec(b).is_finite()) {
        return false;
    }
    let mut mn = [0f32; LANES];
    let mut mx = [0f32; LANES];
    let mut zeros = [0u32; LANES];
    let mut sums = [0f64; LANES];
    _mm256_storeu_ps(mn.as_mut_ptr(), mn0);
    _mm256_storeu_ps(mn.as_mut_ptr().add(8), mn1);
    _mm256_storeu_ps(mx.as_mut_ptr(), mx0);
    _mm256_storeu_ps(mx.as_mut_ptr().add(8), mx1);
    _mm256_storeu_si256(zeros.as_mut_ptr().cast(), z0);
    _mm256_storeu_si256(zeros.as_mut_ptr().add(8).cast(), z1);
    for (k, v) in sum.iter().enumerate() {
        _mm256_storeu_pd(sums.as_mut_ptr().add(4 * k), *v);
    }
    // A lane's sum of at most TILE / LANES finite f32 values cannot overflow an f64, and
    // a NaN or an infinity makes it NaN or infinite: so this is the non-finite check.
    if !sums.iter().all(|v| v.is_finite()) {
        return false;
    }
    for (l, b) in tail.chunks_exact(D::N).enumerate() {
        let v = d.dec(b);
        mn[l] = if v < mn[l] { v } else { mn[l] };
        mx[l] = if v > mx[l] { v } else { mx[l] };
        zeros[l] += u32::from(v == 0.0);
        sums[l] += f64::from(v);
    }
    let mean = pairwise(&sums) / m as f64;
    let mv = _mm256_set1_pd(mean);
    let mut m2 = [_mm256_setzero_pd(); 4];
    // The next tile, into L1 while this one's second pass computes (the hardware
    // prefetcher alone leaves the loads of the first pass waiting on memory).
    let ahead = p.wrapping_add(m * D::N);
    for g in 0..groups {
        _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(g * LANES * D::N).cast());
        let b = out.add(g * LANES);
        for (k, acc) in m2.iter_mut().enumerate() {
            let dv = _mm256_sub_pd(_mm256_loadu_pd(b.add(4 * k)), mv);
            *acc = _mm256_fmadd_pd(dv, dv, *acc);
        }
    }
    let mut dev = [0f64; LANES];
    for (k, v) in m2.iter().enumerate() {
        _mm256_storeu_pd(dev.as_mut_ptr().add(4 * k), *v);
    }
    for (l, b) in tail.chunks_exact(D::N).enumerate() {
        let dv = f64::from(d.dec(b)) - mean;
        dev[l] += dv * dv;
    }
    super::add_tile(s, &mn, &mx, &zeros, m, mean, pairwise(&dev));
    true
}

/// Sixteen f32 lanes as four vectors of f64, in order.
#[inline(always)]
unsafe fn widen(v0: __m256, v1: __m256) -> [__m256d; 4] {
    [
        _mm256_cvtps_pd(_mm256_castps256_ps128(v0)),
        _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v0)),
        _mm256_cvtps_pd(_mm256_castps256_ps128(v1)),
        _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v1)),
    ]
}

/// Adds the finite elements of `bytes` (read as `D`) that fall in the grid's range to
/// `h` (`grid.bins` counters) by numpy's rule, as [`Grid::bin`] does. A position
/// `(v - lo) * norm` farther than `eps` from a whole number is in bin `floor` of it;
/// eight elements of which one is closer go through [`Grid::bin`].
///
/// # Safety
/// The CPU has AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn histogram<D: Lanes>(d: D, bytes: &[u8], grid: &Grid, eps: f64, h: &mut [u64]) {
    let n = bytes.len() / D::N;
    let bins = h.len();
    let lo = _mm256_set1_pd(grid.lo);
    let hi = _mm256_set1_pd(grid.hi);
    let norm = _mm256_set1_pd(grid.norm);
    let zero = _mm256_setzero_pd();
    let top = _mm256_set1_pd((bins - 1) as f64);
    let outside = _mm256_set1_pd(bins as f64);
    let near_lo = _mm256_set1_pd(eps);
    let near_hi = _mm256_set1_pd(1.0 - eps);
    let magic = _mm256_set1_pd(4_503_599_627_370_496.0);
    // The low 32 bits of each 64-bit lane, into the low half.
    let pack = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    // Four bins (f64 lanes) of four values: which are close to an edge, and the bins.
    let four = |v: __m256d| {
        let inside = _mm256_and_pd(
            _mm256_cmp_pd::<_CMP_GE_OQ>(v, lo),
            _mm256_cmp_pd::<_CMP_LE_OQ>(v, hi),
        );
        let t = _mm256_mul_pd(_mm256_sub_pd(v, lo), norm);
        let t = _mm256_min_pd(_mm256_max_pd(t, zero), top);
        let kf = _mm256_floor_pd(t);
        let frac = _mm256_sub_pd(t, kf);
        let near = _mm256_or_pd(
            _mm256_cmp_pd::<_CMP_LT_OQ>(frac, near_lo),
            _mm256_cmp_pd::<_CMP_GT_OQ>(frac, near_hi),
        );
        let k = _mm256_blendv_pd(outside, kf, inside);
        let k = _mm256_castpd_si256(_mm256_add_pd(k, magic));
        let k = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(k, pack));
        (_mm256_movemask_pd(_mm256_and_pd(near, inside)), k)
    };
    let mut idx = [0u32; TILE];
    let mut counts = Counts::new(bins);
    let mut at = 0;
    while at < n {
        let m = (n - at).min(TILE);
        let tile = &bytes[at * D::N..(at + m) * D::N];
        let p = tile.as_ptr();
        let groups = m / 8;
        for g in 0..groups {
            let v = d.load8(p.add(g * 8 * D::N));
            let (n0, k0) = four(_mm256_cvtps_pd(_mm256_castps256_ps128(v)));
            let (n1, k1) = four(_mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v)));
            let out = idx.as_mut_ptr().add(g * 8).cast::<__m128i>();
            _mm_storeu_si128(out, k0);
            _mm_storeu_si128(out.add(1), k1);
            if n0 | n1 != 0 {
                let q = &tile[g * 8 * D::N..(g + 1) * 8 * D::N];
                for (k, b) in idx[g * 8..g * 8 + 8].iter_mut().zip(q.chunks_exact(D::N)) {
                    *k = grid.bin(f64::from(d.dec(b)));
                }
            }
        }
        let rest = &tile[groups * 8 * D::N..];
        for (k, b) in idx[groups * 8..m].iter_mut().zip(rest.chunks_exact(D::N)) {
            *k = grid.bin(f64::from(d.dec(b)));
        }
        counts.add(&idx[..m], h);
        at += m;
    }
}

/// [`histogram`] with the positions in f32, eight elements per step (the grid's `lo`
/// and `hi` are f32 values, [`Grid::slack32`]): no widening to f64, and the bins come
/// out as i32 lanes without a shuffle. Elements closer than `eps` to an edge take
/// [`Grid::bin`], as in [`histogram`].
///
/// # Safety
/// The CPU has AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn histogram32<D: Lanes>(
    d: D,
    bytes: &[u8],
    grid: &Grid,
    eps: f32,
    h: &mut [u64],
) {
    let n = bytes.len() / D::N;
    let bins = h.len();
    let lo = _mm256_set1_ps(grid.lo as f32);
    let hi = _mm256_set1_ps(grid.hi as f32);
    let norm = _mm256_set1_ps(grid.norm as f32);
    let zero = _mm256_setzero_ps();
    let top = _mm256_set1_ps((bins - 1) as f32);
    let outside = _mm256_set1_epi32(bins as i32);
    let near_lo = _mm256_set1_ps(eps);
    let near_hi = _mm256_set1_ps(1.0 - eps);
    let mut idx = [0u32; TILE];
    let mut counts = Counts::new(bins);
    let mut at = 0;
    while at < n {
        let m = (n - at).min(TILE);
        let tile = &bytes[at * D::N..(at + m) * D::N];
        let p = tile.as_ptr();
        let groups = m / 8;
        for g in 0..groups {
            let v = d.load8(p.add(g * 8 * D::N));
            // False for NaN (ordered comparisons).
            let inside = _mm256_and_ps(
                _mm256_cmp_ps::<_CMP_GE_OQ>(v, lo),
                _mm256_cmp_ps::<_CMP_LE_OQ>(v, hi),
            );
            // max(t, 0) with t first turns NaN into 0.
            let t = _mm256_mul_ps(_mm256_sub_ps(v, lo), norm);
            let t = _mm256_min_ps(_mm256_max_ps(t, zero), top);
            let kf = _mm256_floor_ps(t);
            let frac = _mm256_sub_ps(t, kf);
            let near = _mm256_or_ps(
                _mm256_cmp_ps::<_CMP_LT_OQ>(frac, near_lo),
                _mm256_cmp_ps::<_CMP_GT_OQ>(frac, near_hi),
            );
            let k = _mm256_blendv_epi8(
                outside,
                _mm256_cvttps_epi32(kf),
                _mm256_castps_si256(inside),
            );
            _mm256_storeu_si256(idx.as_mut_ptr().add(g * 8).cast(), k);
            if _mm256_movemask_ps(_mm256_and_ps(near, inside)) != 0 {
                let q = &tile[g * 8 * D::N..(g + 1) * 8 * D::N];
                for (k, b) in idx[g * 8..g * 8 + 8].iter_mut().zip(q.chunks_exact(D::N)) {
                    *k = grid.bin(f64::from(d.dec(b)));
                }
            }
        }
        let rest = &tile[groups * 8 * D::N..];
        for (k, b) in idx[groups * 8..m].iter_mut().zip(rest.chunks_exact(D::N)) {
            *k = grid.bin(f64::from(d.dec(b)));
        }
        counts.add(&idx[..m], h);
        at += m;
    }
}
