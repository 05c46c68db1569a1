//! [`super::Stats`] and histogram counts of one block of f32, bf16, f16, 16-bit integer
//! or one-byte elements (fp8, u8, i8, bool: through a 256-entry table), the dtypes every
//! value of which is exact in f32; `wide.rs` does f64 and 32/64-bit integers the same
//! way in f64 lanes. Complex numbers take the element-by-element path in `values.rs`.
//!
//! A block (about 1 MiB, one rayon task) is walked in tiles of [`TILE`] elements:
//!
//! 1. a tile that holds a NaN or an infinity has its non-finite elements counted and
//!    its finite ones packed to the front (the rare path);
//! 2. one pass: min, max, zeros (u32 lanes) and the sum (f64 lanes, so a sum is as
//!    exact as an f64 accumulation over the tile);
//! 3. one pass: the sum of squared deviations from the tile's mean (f64 lanes) — the
//!    numerically sound two-pass variance, per tile;
//! 4. tiles merge into the block by Chan's update, blocks into the tensor the same way.
//!
//! Two implementations of each, chosen at run time:
//!
//! - `avx2.rs` (x86-64 with AVX2, FMA and F16C): intrinsics over the file's bytes, eight
//!   elements decoded per step, every accumulator in a register. Its histogram takes
//!   `floor((v - lo) * norm)` as the bin unless that position is within rounding of a
//!   whole number, where it applies numpy's edge rule ([`Grid::bin`]). The position is
//!   computed in f32, eight elements a step, when the grid's ends are f32 values and
//!   f32's rounding stays far below a bin ([`Grid::slack32`]: the usual case, a
//!   histogram over a tensor's own min and max), else in f64.
//! - the portable loops here, written for the compiler's vectoriser (the baseline build
//!   has SSE2 only; the histogram is also compiled with AVX2 enabled). Each tile is
//!   decoded to f32 into a stack buffer first, so every pass after the decode reads L1.
//!
//! Both put element `i` of a tile in lane `i % 16` and reduce the lanes alike, so they
//! agree bit for bit except the squared deviations (FMA rounds once); a test checks
//! every decoder on both.

use super::Stats;

#[cfg(target_arch = "x86_64")]
mod avx2;
pub(super) mod wide;

pub(super) use wide::{Int32, Int64, F64};

/// Elements per tile: 4 KiB of f32, a few tiles fit L1 beside everything else.
const TILE: usize = 1024;
/// Independent accumulators per pass: enough for two AVX2 registers of f32.
const LANES: usize = 16;

/// How one element's bytes become an f32 (exactly: every dtype decoded here has only
/// values an f32 holds).
pub(super) trait Decode: Copy {
    /// Bytes per element.
    const N: usize;
    /// The element at the start of `b` (`b.len() >= N`).
    fn dec(&self, b: &[u8]) -> f32;
}

/// Little-endian f32.
#[derive(Clone, Copy)]
pub(super) struct F32;
/// Little-endian bfloat16: the top half of an f32.
#[derive(Clone, Copy)]
pub(super) struct Bf16;
/// Little-endian IEEE half.
#[derive(Clone, Copy)]
pub(super) struct F16;
/// Little-endian 16-bit integers, signed or not.
#[derive(Clone, Copy)]
pub(super) struct Int16 {
    pub signed: bool,
}
/// u8, i8 and bool (whose bytes read as u8) as integers.
#[derive(Clone, Copy)]
pub(super) struct Byte {
    pub signed: bool,
}
/// fp8 E5M2: the top byte of an IEEE half.
#[derive(Clone, Copy)]
pub(super) struct E5M2;
/// fp8 E4M3FN (no infinities; `S.1111.111` is NaN): a normal value's seven magnitude
/// bits become an f32's exponent and mantissa, rebiased; a subnormal is its mantissa
/// times 2^-9 (never subnormal f32 arithmetic, which x86 runs slowly).
#[derive(Clone, Copy)]
pub(super) struct E4M3;
/// Any other one-byte dtype (fp8 FNUZ, E8M0): a table of its 256 values.
#[derive(Clone, Copy)]
pub(super) struct Table8(pub [f32; 256]);

impl Table8 {
    /// The table of `dtype` (one byte per element), from its element decoder.
    pub(super) fn of(dtype: crate::dtype::DType) -> Table8 {
        let mut t = [0f32; 256];
        for (b, v) in t.iter_mut().enumerate() {
            // Every one-byte value is exact in f32 (E8M0's 2^-127 as a subnormal).
            *v = dtype
                .element_as_f64(&[b as u8], 0)
                .map_or(f32::NAN, |x| x as f32);
        }
        Table8(t)
    }
}

impl Decode for F32 {
    const N: usize = 4;
    #[inline(always)]
    fn dec(&self, b: &[u8]) -> f32 {
        f32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
}
impl Decode for Bf16 {
    const N: usize = 2;
    #[inline(always)]
    fn dec(&self, b: &[u8]) -> f32 {
        f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16)
    }
}
impl Decode for Int16 {
    const N: usize = 2;
    #[inline(always)]
    fn dec(&self, b: &[u8]) -> f32 {
        match self.signed {
            true => f32::from(i16::from_le_bytes([b[0], b[1]])),
            false => f32::from(u16::from_le_bytes([b[0], b[1]])),
        }
    }
}
impl Decode for Table8 {
    const N: usize = 1;
    #[inline(always)]
    fn dec(&self, b: &[u8]) -> f32 {
        self.0[usize::from(b[0])]
    }
}
impl Decode for Byte {
    const N: usize = 1;
    #[inline(always)]
    fn dec(&self, b: &[u8]) -> f32 {
        match self.signed {
            true => f32::from(b[0] as i8),
            false => f32::from(b[0]),
        }
    }
}
impl Decode for E5M2 {
    const N: usize = 1;
    #[inline(always)]
    fn dec(&self, b: &[u8]) -> f32 {
        half::f16::from_bits(u16::from(b[0]) << 8).to_f32()
    }
}
impl Decode for E4M3 {
    const N: usize = 1;
    #[inline(always)]
    fn dec(&self, b: &[u8]) -> f32 {
        let m = u32::from(b[0] & 0x7f);
        let v = if m == 0x7f {
            f32::NAN
        } else if m < 8 {
            // Subnormal: mantissa × 2^-9 (exact; no subnormal f32 arithmetic).
            m as f32 * E4M3_SUB
        } else {
            f32::from_bits((m << 20) + E4M3_BIAS)
        };
        if b[0] & 0x80 != 0 {
            -v
        } else {
            v
        }
    }
}
/// An E4M3FN magnitude `m` (normal) placed as `m << 20` plus this is its f32: the
/// exponent rebiased from 7 to 127.
pub(super) const E4M3_BIAS: u32 = 120 << 23;
/// The weight of an E4M3FN subnormal's mantissa: 2^-9.
pub(super) const E4M3_SUB: f32 = 1.0 / 512.0;

impl Decode for F16 {
    const N: usize = 2;
    #[inline(always)]
    fn dec(&self, b: &[u8]) -> f32 {
        half::f16::from_le_bytes([b[0], b[1]]).to_f32()
    }
}

/// The kernels a dtype has: the portable loop ([`Decode`]) everywhere, and on x86-64
/// eight lanes at a time ([`avx2::Lanes`]).
#[cfg(target_arch = "x86_64")]
pub(super) trait Kernel: avx2::Lanes {}
#[cfg(target_arch = "x86_64")]
impl<T: avx2::Lanes> Kernel for T {}
/// The kernels a dtype has: the portable loop ([`Decode`]).
#[cfg(not(target_arch = "x86_64"))]
pub(super) trait Kernel: Decode {}
#[cfg(not(target_arch = "x86_64"))]
impl<T: Decode> Kernel for T {}

/// Whether this CPU runs the AVX2 kernels (`avx2.rs`).
#[cfg(target_arch = "x86_64")]
fn has_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
}

/// The statistics of `bytes` read as `D` elements (a trailing partial element is
/// ignored).
pub(super) fn block<D: Kernel>(d: D, bytes: &[u8]) -> Stats {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: the CPU has AVX2, FMA and F16C (checked just above).
        #[allow(unsafe_code)]
        return unsafe { avx2::block(d, bytes) };
    }
    block_any(d, bytes)
}

/// [`block`] by the portable loop.
fn block_any<D: Decode>(d: D, bytes: &[u8]) -> Stats {
    let mut s = Stats::default();
    for tile in bytes.chunks(TILE * D::N) {
        let m = tile.len() / D::N;
        if m == 0 {
            break;
        }
        s.count += m as u64;
        tile_slow(d, tile, m, &mut s);
    }
    s
}

/// Adds the `m` elements of `tile` to `s` (all but their count): decoded into a buffer,
/// non-finite ones counted and set aside, the rest by [`tile_moments`].
#[inline(always)]
fn tile_slow<D: Decode>(d: D, tile: &[u8], m: usize, s: &mut Stats) {
    let mut buf = [0f32; TILE];
    let x = &mut buf[..m];
    for (v, b) in x.iter_mut().zip(tile.chunks_exact(D::N)) {
        *v = d.dec(b);
    }
    let finite = if has_non_finite(x) {
        pack_finite(x, s)
    } else {
        m
    };
    tile_moments(&x[..finite], s);
}

/// Whether any of `x` is NaN or infinite (exponent all ones).
#[inline(always)]
fn has_non_finite(x: &[f32]) -> bool {
    let mut top = [0u32; LANES];
    let mut it = x.chunks_exact(LANES);
    for c in &mut it {
        for l in 0..LANES {
            top[l] = top[l].max(c[l].to_bits() & 0x7fff_ffff);
        }
    }
    let tail = it.remainder().iter().map(|v| v.to_bits() & 0x7fff_ffff);
    top.iter().copied().chain(tail).max().unwrap_or(0) >= 0x7f80_0000
}

/// Counts the NaN and infinite elements of `x` into `s` and moves the finite ones to
/// the front, in order; returns how many are finite.
#[cold]
fn pack_finite(x: &mut [f32], s: &mut Stats) -> usize {
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

/// Adds the finite values `x` to `s`: min, max, zeros, then mean and squared
/// deviations by two passes over the tile, merged by Chan's update.
#[inline(always)]
fn tile_moments(x: &[f32], s: &mut Stats) {
    if x.is_empty() {
        return;
    }
    let mut mn = [f32::INFINITY; LANES];
    let mut mx = [f32::NEG_INFINITY; LANES];
    let mut zeros = [0u32; LANES];
    let mut sum = [0f64; LANES];
    let mut it = x.chunks_exact(LANES);
    for c in &mut it {
        for l in 0..LANES {
            let v = c[l];
            mn[l] = if v < mn[l] { v } else { mn[l] };
            mx[l] = if v > mx[l] { v } else { mx[l] };
            zeros[l] += u32::from(v == 0.0);
            sum[l] += f64::from(v);
        }
    }
    let tail = it.remainder();
    for (l, &v) in tail.iter().enumerate() {
        mn[l] = if v < mn[l] { v } else { mn[l] };
        mx[l] = if v > mx[l] { v } else { mx[l] };
        zeros[l] += u32::from(v == 0.0);
        sum[l] += f64::from(v);
    }
    let n = x.len() as f64;
    let mean = pairwise(&sum) / n;
    let mut m2 = [0f64; LANES];
    let mut it = x.chunks_exact(LANES);
    for c in &mut it {
        for l in 0..LANES {
            let d = f64::from(c[l]) - mean;
            m2[l] += d * d;
        }
    }
    for (l, &v) in it.remainder().iter().enumerate() {
        let d = f64::from(v) - mean;
        m2[l] += d * d;
    }
    add_tile(s, &mn, &mx, &zeros, x.len(), mean, pairwise(&m2));
}

/// Merges into `s` a tile of `n` finite elements, given per lane its min, max and
/// zeros, and its mean and sum of squared deviations.
#[inline(always)]
fn add_tile(
    s: &mut Stats,
    mn: &[f32; LANES],
    mx: &[f32; LANES],
    zeros: &[u32; LANES],
    n: usize,
    mean: f64,
    m2: f64,
) {
    let lo = f64::from(mn.iter().copied().fold(f32::INFINITY, f32::min));
    let hi = f64::from(mx.iter().copied().fold(f32::NEG_INFINITY, f32::max));
    merge_tile(s, lo, hi, zeros, n, mean, m2);
}

/// [`add_tile`] with f64 lanes (`wide.rs`).
#[inline(always)]
fn add_tile_f64(
    s: &mut Stats,
    mn: &[f64; LANES],
    mx: &[f64; LANES],
    zeros: &[u32; LANES],
    n: usize,
    mean: f64,
    m2: f64,
) {
    let lo = mn.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = mx.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    merge_tile(s, lo, hi, zeros, n, mean, m2);
}

#[inline(always)]
fn merge_tile(s: &mut Stats, lo: f64, hi: f64, zeros: &[u32; LANES], n: usize, mean: f64, m2: f64) {
    let tile = Stats {
        count: 0,
        nan: 0,
        pos_inf: 0,
        neg_inf: 0,
        zeros: zeros.iter().map(|&z| u64::from(z)).sum(),
        min: Some(lo),
        max: Some(hi),
        finite: n as u64,
        mean,
        m2,
    };
    s.merge(&tile);
}

/// The sum of the lanes, pairwise.
#[inline(always)]
fn pairwise(v: &[f64; LANES]) -> f64 {
    let mut a = *v;
    let mut w = LANES;
    while w > 1 {
        w /= 2;
        for i in 0..w {
            a[i] += a[i + w];
        }
    }
    a[0]
}

/// Adds the finite elements of `bytes` (read as `D`) that fall in `[edges[0],
/// edges[bins]]` to `h` (`bins` counters), by numpy's rule (see
/// [`super::histogram`]). `norm` is `bins / (hi - lo)`.
pub(super) fn histogram<D: Kernel>(d: D, bytes: &[u8], edges: &[f64], norm: f64, h: &mut [u64]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() && !h.is_empty() && edges.len() == h.len() + 1 {
        let grid = Grid::new(edges, norm);
        if let Some(eps) = grid.slack32() {
            // SAFETY: the CPU has AVX2, FMA and F16C (checked just above).
            #[allow(unsafe_code)]
            return unsafe { avx2::histogram32(d, bytes, &grid, eps, h) };
        }
        if let Some(eps) = grid.slack() {
            // SAFETY: the CPU has AVX2, FMA and F16C (checked just above).
            #[allow(unsafe_code)]
            return unsafe { avx2::histogram(d, bytes, &grid, eps, h) };
        }
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        #[allow(unsafe_code)]
        return unsafe { histogram_avx2(d, bytes, edges, norm, h) };
    }
    histogram_any(d, bytes, edges, norm, h)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
unsafe fn histogram_avx2<D: Decode>(d: D, bytes: &[u8], edges: &[f64], norm: f64, h: &mut [u64]) {
    histogram_any(d, bytes, edges, norm, h)
}

#[inline(always)]
fn histogram_any<D: Decode>(d: D, bytes: &[u8], edges: &[f64], norm: f64, h: &mut [u64]) {
    let bins = h.len();
    if bins == 0 || edges.len() != bins + 1 {
        return;
    }
    let grid = Grid::new(edges, norm);
    let mut buf = [0f32; TILE];
    // A bin per element, computed in a vectorisable pass (`bins`: outside, or not
    // finite), then counted.
    let mut idx = [0u32; TILE];
    let mut counts = Counts::new(bins);
    for tile in bytes.chunks(TILE * D::N) {
        let m = tile.len() / D::N;
        if m == 0 {
            break;
        }
        let x = &mut buf[..m];
        for (v, b) in x.iter_mut().zip(tile.chunks_exact(D::N)) {
            *v = d.dec(b);
        }
        if grid.arithmetic {
            for (k, &v) in idx[..m].iter_mut().zip(x.iter()) {
                *k = grid.bin(f64::from(v));
            }
        } else {
            for (k, &v) in idx[..m].iter_mut().zip(x.iter()) {
                *k = bin_by_edges(f64::from(v), edges, norm);
            }
        }
        counts.add(&idx[..m], h);
    }
}

/// [`histogram`] for the dtypes of `wide.rs` (f64, 32- and 64-bit integers).
pub(super) fn histogram_wide<D: wide::Decode64>(
    d: D,
    bytes: &[u8],
    edges: &[f64],
    norm: f64,
    h: &mut [u64],
) {
    if h.is_empty() || edges.len() != h.len() + 1 {
        return;
    }
    let grid = Grid::new(edges, norm);
    if grid.arithmetic {
        return wide::histogram(d, bytes, &grid, h);
    }
    let bins = h.len();
    for b in bytes.chunks_exact(D::N) {
        let k = bin_by_edges(d.dec(b), edges, norm) as usize;
        if k < bins {
            h[k] += 1;
        }
    }
}

/// Equal-width bins over `[lo, hi]`: what a bin needs.
#[derive(Clone, Copy)]
pub(super) struct Grid {
    lo: f64,
    hi: f64,
    step: f64,
    norm: f64,
    bins: usize,
    /// Whether every edge is `lo + i * step` (as `histogram_edges` makes them), so an
    /// edge can be recomputed instead of looked up.
    arithmetic: bool,
}

impl Grid {
    /// The grid of `edges` (at least two), `norm` being `bins / (hi - lo)`.
    fn new(edges: &[f64], norm: f64) -> Grid {
        let bins = edges.len() - 1;
        let (lo, hi) = (edges[0], edges[bins]);
        let step = (hi - lo) / bins as f64;
        let mut g = Grid {
            lo,
            hi,
            step,
            norm,
            bins,
            arithmetic: false,
        };
        g.arithmetic = edges.iter().enumerate().all(|(i, &e)| e == g.edge(i));
        g
    }

    /// How close (in bins) a value's position `(v - lo) * norm` must come to a whole
    /// number before rounding could put it in another bin than numpy's rule does: the
    /// rounding of that position (a few ulps of `bins`) plus that of the edges (a few
    /// ulps of `|lo| + |hi|`, in bins), with a wide margin. `None` when the edges are not
    /// arithmetic, or so fine against their magnitude that most values would be close.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(super) fn slack(&self) -> Option<f64> {
        let ulps = self.bins as f64 + (self.lo.abs() + self.hi.abs()) * self.norm;
        let eps = ulps * f64::EPSILON * 256.0;
        (self.arithmetic && eps.is_finite() && eps < 1e-3).then_some(eps)
    }

    /// [`Grid::slack`] for positions computed in f32 (`(v - lo) * norm` with `lo`, `hi`
    /// and `norm` rounded to f32): the error of that position is a few f32 ulps of the
    /// same quantity, so the same bound with f32's epsilon, and a margin of 16. `None`
    /// also when `lo` or `hi` is not an f32 (an element between `lo` and its f32 would be
    /// counted inside or outside wrongly), or when the position's range overflows f32.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(super) fn slack32(&self) -> Option<f32> {
        let exact = |x: f64| f64::from(x as f32) == x;
        let ulps = self.bins as f64 + (self.lo.abs() + self.hi.abs()) * self.norm;
        let eps = ulps * f64::from(f32::EPSILON) * 16.0;
        let fits = (self.hi - self.lo).abs() * self.norm < f64::from(f32::MAX) / 4.0
            && self.norm < f64::from(f32::MAX);
        (self.arithmetic
            && exact(self.lo)
            && exact(self.hi)
            && fits
            && self.bins < 1 << 24
            && eps.is_finite()
            && eps < 1e-2)
            .then_some(eps as f32)
    }

    /// Edge `i` as numpy's `linspace` makes it.
    #[inline(always)]
    fn edge(&self, i: usize) -> f64 {
        if i == self.bins {
            self.hi
        } else {
            self.lo + i as f64 * self.step
        }
    }

    /// The bin of `v` by numpy's rule (`bins` when outside or NaN), the edges being
    /// arithmetic. Written without branches so that a loop of it vectorises.
    #[inline(always)]
    pub(super) fn bin(&self, v: f64) -> u32 {
        let (lo, hi, step) = (self.lo, self.hi, self.step);
        let binsf = self.bins as f64;
        let top = binsf - 1.0;
        let inside = (v >= lo) & (v <= hi); // false for NaN
                                            // max/min (not clamp) also turn NaN into 0: the bin is in [0, bins). Its
                                            // integer is read from the bits of 2^52 + bin (exact, and unlike a saturating
                                            // `as` conversion it vectorises).
        let kf = ((v - lo) * self.norm).max(0.0).min(top).floor();
        let k0 = (kf + 4_503_599_627_370_496.0).to_bits() as u32;
        // numpy's correction: the division may land one bin off an edge.
        let e1 = if kf + 1.0 == binsf {
            hi
        } else {
            lo + (kf + 1.0) * step
        };
        let below = (v < lo + kf * step) & (k0 > 0);
        let above = !below & (kf + 1.0 < binsf) & (v >= e1);
        let k1 = k0 - u32::from(below) + u32::from(above);
        if inside {
            k1
        } else {
            self.bins as u32
        }
    }
}

/// The bin of `v` by numpy's rule, looking the edges up (`bins` when outside or NaN).
#[inline(always)]
fn bin_by_edges(v: f64, edges: &[f64], norm: f64) -> u32 {
    let bins = edges.len() - 1;
    let (lo, hi) = (edges[0], edges[bins]);
    if !(v >= lo && v <= hi) {
        return bins as u32;
    }
    let mut b = (((v - lo) * norm).clamp(0.0, (bins - 1) as f64)) as usize;
    if v < edges[b] {
        b = b.saturating_sub(1);
    } else if b + 1 < bins && v >= edges[b + 1] {
        b += 1;
    }
    b as u32
}

/// Bin counters in four copies, used in turn so that repeated bins do not wait on each
/// other's stores; u32, folded out per tile, so any block size is safe.
pub(super) struct Counts {
    c: Vec<u32>,
    w: usize,
}

impl Counts {
    pub(super) fn new(bins: usize) -> Counts {
        Counts {
            c: vec![0u32; 4 * (bins + 1)],
            w: bins + 1,
        }
    }

    /// Counts the bins `idx` (at most [`TILE`]; `bins` is the outside slot) into `h`.
    #[inline(always)]
    pub(super) fn add(&mut self, idx: &[u32], h: &mut [u64]) {
        let w = self.w;
        {
            let (c0, rest) = self.c.split_at_mut(w);
            let (c1, rest) = rest.split_at_mut(w);
            let (c2, c3) = rest.split_at_mut(w);
            let mut it = idx.chunks_exact(8);
            for q in &mut it {
                let q: &[u32; 8] = q.try_into().unwrap_or(&[0; 8]);
                c0[q[0] as usize] += 1;
                c1[q[1] as usize] += 1;
                c2[q[2] as usize] += 1;
                c3[q[3] as usize] += 1;
                c0[q[4] as usize] += 1;
                c1[q[5] as usize] += 1;
                c2[q[6] as usize] += 1;
                c3[q[7] as usize] += 1;
            }
            for &k in it.remainder() {
                c0[k as usize] += 1;
            }
        }
        for (b, t) in h.iter_mut().enumerate() {
            *t += (0..4).map(|j| u64::from(self.c[j * w + b])).sum::<u64>();
        }
        self.c.fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    /// Buffers to check the kernels on: lengths around the 16-lane groups and the
    /// tiles, random bytes (every bit pattern: NaN, infinities, subnormals, ±0), and
    /// structured values with NaN and Inf placed in a group, in a tail and nowhere.
    fn buffers(size: usize) -> Vec<Vec<u8>> {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut random = |n: usize| -> Vec<u8> {
            (0..n)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 32) as u8
                })
                .collect()
        };
        let mut out = Vec::new();
        for n in [0, 1, 15, 16, 17, 31, 1023, 1024, 1025, 5003] {
            out.push(random(n * size));
        }
        let structured = |n: usize, bad: &[usize]| -> Vec<u8> {
            let v: Vec<f32> = (0..n)
                .map(|i| {
                    if bad.contains(&i) {
                        [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][i % 3]
                    } else {
                        ((i * 7919) % 2001) as f32 / 500.0 - 2.0
                    }
                })
                .collect();
            match size {
                4 => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                2 => v
                    .iter()
                    .flat_map(|x| half::bf16::from_f32(*x).to_le_bytes())
                    .collect(),
                _ => v.iter().map(|x| (x * 30.0) as i8 as u8).collect(),
            }
        };
        out.push(structured(50_000, &[]));
        out.push(structured(50_000, &[3, 9_999, 20_000, 49_999]));
        out.push(structured(1_040, &[1_030]));
        out
    }

    fn agree<D: Kernel>(name: &str, d: D) {
        for bytes in buffers(D::N) {
            let (a, b) = (block(d, &bytes), block_any(d, &bytes));
            let what = format!("{name}, {} bytes", bytes.len());
            assert_eq!(
                (a.count, a.nan, a.pos_inf, a.neg_inf, a.zeros, a.finite),
                (b.count, b.nan, b.pos_inf, b.neg_inf, b.zeros, b.finite),
                "{what}"
            );
            assert_eq!(
                (a.min.map(f64::to_bits), a.max.map(f64::to_bits)),
                (b.min.map(f64::to_bits), b.max.map(f64::to_bits)),
                "{what}"
            );
            // The mean is the same sum in the same lanes; the squared deviations differ
            // by FMA's rounding only.
            assert_eq!(a.mean.to_bits(), b.mean.to_bits(), "{what}");
            let tol = 1e-12 * b.m2.abs().max(1e-300);
            assert!((a.m2 - b.m2).abs() <= tol, "{what}: {} vs {}", a.m2, b.m2);
            // Grids: one the values' edges fall on (every element a whole number of
            // bins, each close to an edge), ordinary ones, ones over f32 ends that are
            // not round (the f32-position kernel: `Grid::slack32`), fine ones, one
            // whose ends are not f32 values, and one too fine for its magnitude to take
            // a fast path.
            for (lo, hi, bins) in [
                (-2.0, 2.0, 40),
                (-60.0, 60.0, 120),
                (-1.0, 1.5, 7),
                (f64::from(-1.3f32), f64::from(1.7f32), 40),
                (f64::from(-0.77f32), f64::from(2.13f32), 1000),
                (f64::from(0.1f32), f64::from(0.9f32), 65_536),
                (-1.3, 1.7, 40),
                (1.0, 1.0 + 1e-9, 40),
            ] {
                let edges = crate::values::histogram_edges(lo, hi, bins);
                let norm = bins as f64 / (edges[bins] - edges[0]);
                let (mut x, mut y) = (vec![0u64; bins], vec![0u64; bins]);
                histogram(d, &bytes, &edges, norm, &mut x);
                histogram_any(d, &bytes, &edges, norm, &mut y);
                assert_eq!(x, y, "{what}, {lo}..{hi}");
            }
        }
    }

    /// What the dispatched kernels (AVX2 on x86-64 when the CPU has it) give is what
    /// the portable loop gives, for every decoder.
    #[test]
    fn dispatched_and_portable_paths_agree() {
        agree("f32", F32);
        agree("bf16", Bf16);
        agree("f16", F16);
        agree("i16", Int16 { signed: true });
        agree("u16", Int16 { signed: false });
        agree("f8e4m3fn table", Table8::of(DType::F8E4M3FN));
        agree("f8e4m3fnuz table", Table8::of(DType::F8E4M3FNUZ));
        agree("u8", Byte { signed: false });
        agree("i8", Byte { signed: true });
        agree("f8e5m2", E5M2);
        agree("f8e4m3fn", E4M3);
    }

    /// The fp8 and byte decoders give every byte what the dtype's element decoder does
    /// (NaN as NaN).
    #[test]
    fn byte_decoders_match_the_element_decoders() {
        type Dec<'a> = &'a dyn Fn(&[u8]) -> f32;
        let kinds: [(DType, Dec); 5] = [
            (DType::U8, &|b| Byte { signed: false }.dec(b)),
            (DType::Bool, &|b| Byte { signed: false }.dec(b)),
            (DType::I8, &|b| Byte { signed: true }.dec(b)),
            (DType::F8E5M2, &|b| E5M2.dec(b)),
            (DType::F8E4M3FN, &|b| E4M3.dec(b)),
        ];
        for (dtype, dec) in kinds {
            for b in 0..=255u8 {
                let want = dtype.element_as_f64(&[b], 0).unwrap_or(f64::NAN);
                let got = f64::from(dec(&[b]));
                // Bit for bit (so -0 stays -0), or both NaN.
                assert!(
                    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                    "{dtype} byte {b:#04x}: {got} vs {want}"
                );
            }
        }
    }

    /// The fast histogram counts whole numbers on the edges as numpy's rule does: bin
    /// `i` holds `edges[i] <= x < edges[i+1]`, the last bin also its upper edge.
    #[test]
    fn values_on_edges_fall_in_the_upper_bin() {
        let v: Vec<f32> = (-20..=20).map(|i| i as f32).collect();
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        let edges = crate::values::histogram_edges(-20.0, 20.0, 40);
        let mut h = vec![0u64; 40];
        histogram(F32, &bytes, &edges, 1.0, &mut h);
        let mut want = vec![1u64; 40];
        want[39] = 2;
        assert_eq!(h, want);
    }
}
