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
//!
//! Every `unsafe` operation is in its own `unsafe { }` block with its `SAFETY:` argument
//! (`unsafe_op_in_unsafe_fn` is denied): the intrinsics need the CPU features that
//! [`super::block`] and [`super::histogram`] check before calling in, and the loads and
//! stores stay inside the slice or buffer the loop bounds. From Rust 1.87 on, the
//! register-only intrinsics are safe to call inside a `#[target_feature]` function, so
//! some of these blocks are not needed there; the MSRV (1.86) needs them, hence
//! `unused_unsafe` is allowed in this module.

#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![allow(unused_unsafe)]

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
        // SAFETY: an unaligned load of 32 bytes, which `load8`'s contract makes
        // readable; the CPU has AVX (contract).
        unsafe { _mm256_loadu_ps(p.cast()) }
    }
}
impl Lanes for Bf16 {
    #[inline(always)]
    unsafe fn load8(&self, p: *const u8) -> __m256 {
        // SAFETY: an unaligned load of 16 bytes, readable by `load8`'s contract.
        let h = unsafe { _mm_loadu_si128(p.cast()) };
        // SAFETY: register-only; the CPU has AVX2 (contract).
        unsafe { _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h))) }
    }
}
impl Lanes for F16 {
    #[inline(always)]
    unsafe fn load8(&self, p: *const u8) -> __m256 {
        // SAFETY: an unaligned load of 16 bytes, readable by `load8`'s contract.
        let h = unsafe { _mm_loadu_si128(p.cast()) };
        // SAFETY: register-only; the CPU has F16C (contract).
        unsafe { _mm256_cvtph_ps(h) }
    }
}
impl Lanes for Int16 {
    #[inline(always)]
    unsafe fn load8(&self, p: *const u8) -> __m256 {
        // SAFETY: an unaligned load of 16 bytes, readable by `load8`'s contract.
        let h = unsafe { _mm_loadu_si128(p.cast()) };
        // SAFETY: register-only; the CPU has AVX2 (contract).
        unsafe {
            let w = if self.signed {
                _mm256_cvtepi16_epi32(h)
            } else {
                _mm256_cvtepu16_epi32(h)
            };
            _mm256_cvtepi32_ps(w)
        }
    }
}
impl Lanes for Byte {
    #[inline(always)]
    unsafe fn load8(&self, p: *const u8) -> __m256 {
        // SAFETY: an unaligned load of 8 bytes, readable by `load8`'s contract.
        let b = unsafe { _mm_loadl_epi64(p.cast()) };
        // SAFETY: register-only; the CPU has AVX2 (contract).
        unsafe {
            let w = if self.signed {
                _mm256_cvtepi8_epi32(b)
            } else {
                _mm256_cvtepu8_epi32(b)
            };
            _mm256_cvtepi32_ps(w)
        }
    }
}
impl Lanes for E5M2 {
    #[inline(always)]
    unsafe fn load8(&self, p: *const u8) -> __m256 {
        // SAFETY: an unaligned load of 8 bytes, readable by `load8`'s contract.
        let b = unsafe { _mm_loadl_epi64(p.cast()) };
        // Each byte to the top of a 16-bit half.
        // SAFETY: register-only; the CPU has F16C (contract).
        unsafe { _mm256_cvtph_ps(_mm_unpacklo_epi8(_mm_setzero_si128(), b)) }
    }
}
impl Lanes for E4M3 {
    #[inline(always)]
    unsafe fn load8(&self, p: *const u8) -> __m256 {
        // SAFETY: an unaligned load of 8 bytes, readable by `load8`'s contract.
        let b = unsafe { _mm_loadl_epi64(p.cast()) };
        // SAFETY: register-only; the CPU has AVX2 (contract).
        unsafe {
            let x = _mm256_cvtepu8_epi32(b);
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
}
impl Lanes for Table8 {
    #[inline(always)]
    unsafe fn load8(&self, p: *const u8) -> __m256 {
        // SAFETY: an unaligned load of 8 bytes, readable by `load8`'s contract.
        let b = unsafe { _mm_loadl_epi64(p.cast()) };
        // SAFETY: each index is a zero-extended byte (0..=255), so every gathered f32 is
        // inside the 256-entry table `self.0`; the CPU has AVX2 (contract).
        unsafe { _mm256_i32gather_ps::<4>(self.0.as_ptr(), _mm256_cvtepu8_epi32(b)) }
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
        // SAFETY: the CPU has the features (this function's contract); `m` is at most
        // TILE and `tile` holds `m` elements.
        if !unsafe { tile_finite(d, tile, m, &mut s) } {
            super::tile_slow(d, tile, m, &mut s);
        }
        at += m;
    }
    s
}

/// Adds the `m` elements of `tile` to `s` and returns true, or returns false (adding
/// nothing) when one of them is NaN or infinite.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; `m <= TILE` and `tile.len() == m * D::N`.
#[inline(always)]
unsafe fn tile_finite<D: Lanes>(d: D, tile: &[u8], m: usize, s: &mut Stats) -> bool {
    debug_assert!(m <= TILE && tile.len() == m * D::N);
    let groups = m / LANES;
    let p = tile.as_ptr();
    let half = 8 * D::N;
    // SAFETY (every register-only block below): the CPU has AVX2 and FMA (contract).
    let zero = unsafe { _mm256_setzero_ps() };
    let (mut mn0, mut mn1, mut mx0, mut mx1, mut z0, mut z1, mut sum) = unsafe {
        (
            _mm256_set1_ps(f32::INFINITY),
            _mm256_set1_ps(f32::INFINITY),
            _mm256_set1_ps(f32::NEG_INFINITY),
            _mm256_set1_ps(f32::NEG_INFINITY),
            _mm256_setzero_si256(),
            _mm256_setzero_si256(),
            [_mm256_setzero_pd(); 4],
        )
    };
    // The tile widened to f64 for the second pass (8 KiB, in L1): widening again there
    // would cost as many shuffle-port operations as the whole first pass.
    let mut buf = std::mem::MaybeUninit::<[f64; TILE]>::uninit();
    let out = buf.as_mut_ptr().cast::<f64>();
    for g in 0..groups {
        // SAFETY: group `g` is the bytes `g * LANES * N .. (g + 1) * LANES * N` of
        // `tile`, inside it as `g < m / LANES`: two loads of `8 * N` bytes each.
        let (v0, v1) = unsafe {
            let q = p.add(g * LANES * D::N);
            (d.load8(q), d.load8(q.add(half)))
        };
        // SAFETY: register-only (contract).
        let w = unsafe {
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
            widen(v0, v1)
        };
        for k in 0..4 {
            // SAFETY: register-only add; the store writes f64s `g * LANES + 4k ..
            // + 4` of `buf`, inside its TILE as `(g + 1) * LANES <= m <= TILE`.
            unsafe {
                sum[k] = _mm256_add_pd(sum[k], w[k]);
                _mm256_storeu_pd(out.add(g * LANES + 4 * k), w[k]);
            }
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
    // SAFETY: each store writes 8 f32/u32 (or 4 f64) lanes at an offset that leaves
    // room for them in these LANES-element arrays.
    unsafe {
        _mm256_storeu_ps(mn.as_mut_ptr(), mn0);
        _mm256_storeu_ps(mn.as_mut_ptr().add(8), mn1);
        _mm256_storeu_ps(mx.as_mut_ptr(), mx0);
        _mm256_storeu_ps(mx.as_mut_ptr().add(8), mx1);
        _mm256_storeu_si256(zeros.as_mut_ptr().cast(), z0);
        _mm256_storeu_si256(zeros.as_mut_ptr().add(8).cast(), z1);
        for (k, v) in sum.iter().enumerate() {
            _mm256_storeu_pd(sums.as_mut_ptr().add(4 * k), *v);
        }
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
    // SAFETY: register-only (contract).
    let (mv, mut m2) = unsafe { (_mm256_set1_pd(mean), [_mm256_setzero_pd(); 4]) };
    // The next tile, into L1 while this one's second pass computes (the hardware
    // prefetcher alone leaves the loads of the first pass waiting on memory).
    let ahead = p.wrapping_add(m * D::N);
    for g in 0..groups {
        // SAFETY: a prefetch is a hint that never faults, whatever the address (which
        // `wrapping_add` computes without claiming it is in bounds).
        unsafe { _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(g * LANES * D::N).cast()) };
        for (k, acc) in m2.iter_mut().enumerate() {
            // SAFETY: reads f64s `g * LANES + 4k .. + 4` of `buf`, which the first pass
            // wrote (the same `g` and `k`); FMA is there (contract).
            unsafe {
                let dv = _mm256_sub_pd(_mm256_loadu_pd(out.add(g * LANES + 4 * k)), mv);
                *acc = _mm256_fmadd_pd(dv, dv, *acc);
            }
        }
    }
    let mut dev = [0f64; LANES];
    for (k, v) in m2.iter().enumerate() {
        // SAFETY: writes f64s `4k .. 4k + 4` of the LANES-element `dev`.
        unsafe { _mm256_storeu_pd(dev.as_mut_ptr().add(4 * k), *v) };
    }
    for (l, b) in tail.chunks_exact(D::N).enumerate() {
        let dv = f64::from(d.dec(b)) - mean;
        dev[l] += dv * dv;
    }
    super::add_tile(s, &mn, &mx, &zeros, m, mean, pairwise(&dev));
    true
}

/// Sixteen f32 lanes as four vectors of f64, in order.
///
/// # Safety
/// The CPU has AVX.
#[inline(always)]
unsafe fn widen(v0: __m256, v1: __m256) -> [__m256d; 4] {
    // SAFETY: register-only; the CPU has AVX (contract).
    unsafe {
        [
            _mm256_cvtps_pd(_mm256_castps256_ps128(v0)),
            _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v0)),
            _mm256_cvtps_pd(_mm256_castps256_ps128(v1)),
            _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v1)),
        ]
    }
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
    // SAFETY: register-only; the CPU has AVX2 (contract).
    let (lo, hi, norm, zero, top, outside, near_lo, near_hi, magic, pack) = unsafe {
        (
            _mm256_set1_pd(grid.lo),
            _mm256_set1_pd(grid.hi),
            _mm256_set1_pd(grid.norm),
            _mm256_setzero_pd(),
            _mm256_set1_pd((bins - 1) as f64),
            _mm256_set1_pd(bins as f64),
            _mm256_set1_pd(eps),
            _mm256_set1_pd(1.0 - eps),
            _mm256_set1_pd(4_503_599_627_370_496.0),
            // The low 32 bits of each 64-bit lane, into the low half.
            _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7),
        )
    };
    // Four bins (f64 lanes) of four values: which are close to an edge, and the bins.
    let four = |v: __m256d| {
        // SAFETY: register-only; the CPU has AVX2 (contract).
        unsafe {
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
        }
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
            // SAFETY: elements `8g .. 8g + 8` of `tile`, inside it as `g < m / 8`; the
            // CPU has the features `load8` needs (contract).
            let v = unsafe { d.load8(p.add(g * 8 * D::N)) };
            // SAFETY: register-only (contract).
            let (lo4, hi4) = unsafe {
                (
                    _mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                    _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v)),
                )
            };
            let (n0, k0) = four(lo4);
            let (n1, k1) = four(hi4);
            // SAFETY: two 16-byte stores to `idx[8g .. 8g + 8]`, inside its TILE
            // entries as `8g + 8 <= m <= TILE`.
            unsafe {
                let out = idx.as_mut_ptr().add(g * 8).cast::<__m128i>();
                _mm_storeu_si128(out, k0);
                _mm_storeu_si128(out.add(1), k1);
            }
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
    // SAFETY: register-only; the CPU has AVX2 (contract).
    let (lo, hi, norm, zero, top, outside, near_lo, near_hi) = unsafe {
        (
            _mm256_set1_ps(grid.lo as f32),
            _mm256_set1_ps(grid.hi as f32),
            _mm256_set1_ps(grid.norm as f32),
            _mm256_setzero_ps(),
            _mm256_set1_ps((bins - 1) as f32),
            _mm256_set1_epi32(bins as i32),
            _mm256_set1_ps(eps),
            _mm256_set1_ps(1.0 - eps),
        )
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
            // SAFETY: elements `8g .. 8g + 8` of `tile`, inside it as `g < m / 8`; the
            // CPU has the features `load8` needs (contract).
            let v = unsafe { d.load8(p.add(g * 8 * D::N)) };
            // SAFETY: register-only (contract).
            let (k, near_mask) = unsafe {
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
                (k, _mm256_movemask_ps(_mm256_and_ps(near, inside)))
            };
            // SAFETY: a 32-byte store to `idx[8g .. 8g + 8]`, inside its TILE entries
            // as `8g + 8 <= m <= TILE`.
            unsafe { _mm256_storeu_si256(idx.as_mut_ptr().add(g * 8).cast(), k) };
            if near_mask != 0 {
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
