//! [`super::Stats`] and histogram counts of one block of f32, bf16, f16, 16-bit integer
//! or one-byte elements (fp8, u8, i8, bool: through a 256-entry table), written so that
//! the compiler vectorises them. Every value of these dtypes is exact in f32; wider
//! integers and f64 take the element-by-element path in `values.rs`.
//!
//! A block (about 1 MiB, one rayon task) is walked in tiles of [`TILE`] elements
//! decoded to f32 into a stack buffer, so every pass after the decode reads L1:
//!
//! 1. the tile's largest `|bits|` says whether it holds a NaN or an infinity. Most
//!    tiles hold none and go straight on; a tile that does has its non-finite elements
//!    counted and its finite ones packed to the front (the rare path);
//! 2. one pass: min, max, zeros (u32 lanes) and the sum (f64 lanes, so a sum is as
//!    exact as an f64 accumulation over the tile);
//! 3. one pass: the sum of squared deviations from the tile's mean (f64 lanes) — the
//!    numerically sound two-pass variance, per tile;
//! 4. tiles merge into the block by Chan's update, blocks into the tensor the same way.
//!
//! On x86-64 the same code is compiled a second time with AVX2 and chosen at run time
//! when the CPU has it (the binary stays portable; the baseline build has SSE2 only).

use super::Stats;

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
/// Any one-byte dtype (the fp8 floats, u8, i8, bool): a table of its 256 values.
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
impl Decode for F16 {
    const N: usize = 2;
    #[inline(always)]
    fn dec(&self, b: &[u8]) -> f32 {
        half::f16::from_le_bytes([b[0], b[1]]).to_f32()
    }
}

/// The statistics of `bytes` read as `D` elements (a trailing partial element is
/// ignored).
pub(super) fn block<D: Decode>(d: D, bytes: &[u8]) -> Stats {
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
unsafe fn block_avx2<D: Decode>(d: D, bytes: &[u8]) -> Stats {
    block_any(d, bytes)
}

#[inline(always)]
fn block_any<D: Decode>(d: D, bytes: &[u8]) -> Stats {
    let mut s = Stats::default();
    let mut buf = [0f32; TILE];
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
        let finite = if has_non_finite(x) {
            pack_finite(x, &mut s)
        } else {
            m
        };
        tile_moments(&x[..finite], &mut s);
    }
    s
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
    let lo = f64::from(mn.iter().copied().fold(f32::INFINITY, f32::min));
    let hi = f64::from(mx.iter().copied().fold(f32::NEG_INFINITY, f32::max));
    let tile = Stats {
        count: 0,
        nan: 0,
        pos_inf: 0,
        neg_inf: 0,
        zeros: zeros.iter().map(|&z| u64::from(z)).sum(),
        min: Some(lo),
        max: Some(hi),
        finite: x.len() as u64,
        mean,
        m2: pairwise(&m2),
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
pub(super) fn histogram<D: Decode>(d: D, bytes: &[u8], edges: &[f64], norm: f64, h: &mut [u64]) {
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
    let (lo, hi) = (edges[0], edges[bins]);
    // Edges as `histogram_edges` makes them (numpy's linspace) are `lo + i * step`, so
    // the correction below can recompute an edge instead of looking it up; other edges
    // are looked up.
    let step = (hi - lo) / bins as f64;
    let edge = |i: usize| if i == bins { hi } else { lo + i as f64 * step };
    let arithmetic = edges.iter().enumerate().all(|(i, &e)| e == edge(i));
    let top = (bins - 1) as f64;
    let mut buf = [0f32; TILE];
    // A bin per element, computed in a vectorisable pass (`bins`: outside, or not
    // finite), then counted into four copies in turn so that repeated bins do not wait
    // on each other's stores.
    let mut idx = [0u32; TILE];
    let mut counts = vec![0u32; 4 * (bins + 1)];
    for tile in bytes.chunks(TILE * D::N) {
        let m = tile.len() / D::N;
        if m == 0 {
            break;
        }
        let x = &mut buf[..m];
        for (v, b) in x.iter_mut().zip(tile.chunks_exact(D::N)) {
            *v = d.dec(b);
        }
        if arithmetic {
            let binsf = bins as f64;
            for (k, &v) in idx[..m].iter_mut().zip(x.iter()) {
                let v = f64::from(v);
                let inside = (v >= lo) & (v <= hi); // false for NaN
                                                    // max/min (not clamp) also turn NaN into 0: the bin is in [0, bins).
                                                    // Its integer is read from the bits of 2^52 + bin (exact, and unlike
                                                    // a saturating `as` conversion it vectorises).
                let kf = ((v - lo) * norm).max(0.0).min(top).floor();
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
                *k = if inside { k1 } else { bins as u32 };
            }
        } else {
            for (k, &v) in idx[..m].iter_mut().zip(x.iter()) {
                let v = f64::from(v);
                if !(v >= lo && v <= hi) {
                    *k = bins as u32;
                    continue;
                }
                let mut b = (((v - lo) * norm).clamp(0.0, top)) as usize;
                if v < edges[b] {
                    b = b.saturating_sub(1);
                } else if b + 1 < bins && v >= edges[b + 1] {
                    b += 1;
                }
                *k = b as u32;
            }
        }
        {
            let (c0, rest) = counts.split_at_mut(bins + 1);
            let (c1, rest) = rest.split_at_mut(bins + 1);
            let (c2, c3) = rest.split_at_mut(bins + 1);
            let mut it = idx[..m].chunks_exact(4);
            for q in &mut it {
                c0[q[0] as usize] += 1;
                c1[q[1] as usize] += 1;
                c2[q[2] as usize] += 1;
                c3[q[3] as usize] += 1;
            }
            for &k in it.remainder() {
                c0[k as usize] += 1;
            }
        }
        // u32 counters: folded out per tile, so any block size is safe.
        for (b, t) in h.iter_mut().enumerate() {
            *t += (0..4)
                .map(|j| u64::from(counts[j * (bins + 1) + b]))
                .sum::<u64>();
        }
        counts.fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The portable build (what runs without AVX2) gives what the dispatched one does.
    #[test]
    fn portable_and_dispatched_paths_agree() {
        let v: Vec<f32> = (0..50_000)
            .map(|i| match i % 9_999 {
                3 => f32::NAN,
                4 => f32::NEG_INFINITY,
                _ => ((i * 7919) % 2001) as f32 / 500.0 - 2.0,
            })
            .collect();
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(block(F32, &bytes), block_any(F32, &bytes));
        let edges = crate::values::histogram_edges(-2.0, 2.0, 40);
        let norm = 40.0 / 4.0;
        let (mut a, mut b) = (vec![0u64; 40], vec![0u64; 40]);
        histogram(F32, &bytes, &edges, norm, &mut a);
        histogram_any(F32, &bytes, &edges, norm, &mut b);
        assert_eq!(a, b);
        // Every finite element is in [-2, 2]: 12 of the 50,000 are not finite.
        assert_eq!(a.iter().sum::<u64>(), 50_000 - 12);
    }
}
