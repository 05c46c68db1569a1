//! [`super::Stats`] of one block of f32, bf16 or f16 elements, written so that the
//! compiler vectorises it: elements decoded to f32, eight independent lanes per
//! accumulator, non-finite elements masked by selects rather than branches. Two passes
//! over the block (it is about 1 MiB, so the second reads from cache): counts, min,
//! max and the sum, then the sum of squared deviations from the block's mean — the
//! numerically sound two-pass variance, merged across blocks by Chan's update.

use super::Stats;

const LANES: usize = 8;

/// The statistics of `bytes` read as `N`-byte elements decoded by `dec`.
pub(super) fn block<const N: usize>(bytes: &[u8], dec: fn([u8; N]) -> f32) -> Stats {
    let n = bytes.len() / N;
    let bytes = &bytes[..n * N];
    let load = |c: &[u8]| {
        let mut a = [0u8; N];
        a.copy_from_slice(c);
        dec(a)
    };
    let mut nan = [0u64; LANES];
    let mut pinf = [0u64; LANES];
    let mut ninf = [0u64; LANES];
    let mut zeros = [0u64; LANES];
    let mut mn = [f32::INFINITY; LANES];
    let mut mx = [f32::NEG_INFINITY; LANES];
    let mut sum = [0f64; LANES];
    let wide = bytes.chunks_exact(N * LANES);
    let tail = wide.remainder();
    let mut step = |l: usize, x: f32| {
        let fin = x.is_finite();
        nan[l] += u64::from(x.is_nan());
        pinf[l] += u64::from(x == f32::INFINITY);
        ninf[l] += u64::from(x == f32::NEG_INFINITY);
        zeros[l] += u64::from(x == 0.0);
        mn[l] = mn[l].min(if fin { x } else { f32::INFINITY });
        mx[l] = mx[l].max(if fin { x } else { f32::NEG_INFINITY });
        sum[l] += if fin { f64::from(x) } else { 0.0 };
    };
    for c in wide {
        for (l, e) in c.chunks_exact(N).enumerate() {
            step(l, load(e));
        }
    }
    for (l, e) in tail.chunks_exact(N).enumerate() {
        step(l, load(e));
    }
    let total = |v: &[u64; LANES]| v.iter().sum::<u64>();
    let (nan, pinf, ninf, zeros) = (total(&nan), total(&pinf), total(&ninf), total(&zeros));
    let finite = n as u64 - nan - pinf - ninf;
    let mut s = Stats {
        count: n as u64,
        nan,
        pos_inf: pinf,
        neg_inf: ninf,
        zeros,
        ..Stats::default()
    };
    if finite == 0 {
        return s;
    }
    let mean = sum.iter().sum::<f64>() / finite as f64;
    let mut m2 = [0f64; LANES];
    let mut dev = |l: usize, x: f32| {
        let d = if x.is_finite() {
            f64::from(x) - mean
        } else {
            0.0
        };
        m2[l] += d * d;
    };
    for c in bytes.chunks_exact(N * LANES) {
        for (l, e) in c.chunks_exact(N).enumerate() {
            dev(l, load(e));
        }
    }
    for (l, e) in tail.chunks_exact(N).enumerate() {
        dev(l, load(e));
    }
    s.min = Some(f64::from(mn.iter().copied().fold(f32::INFINITY, f32::min)));
    s.max = Some(f64::from(
        mx.iter().copied().fold(f32::NEG_INFINITY, f32::max),
    ));
    s.finite = finite;
    s.mean = mean;
    s.m2 = m2.iter().sum();
    s
}

/// Little-endian f32.
pub(super) fn f32_le(b: [u8; 4]) -> f32 {
    f32::from_le_bytes(b)
}

/// Little-endian bfloat16: the top half of an f32.
pub(super) fn bf16_le(b: [u8; 2]) -> f32 {
    f32::from_bits(u32::from(u16::from_le_bytes(b)) << 16)
}

/// Little-endian IEEE half.
pub(super) fn f16_le(b: [u8; 2]) -> f32 {
    half::f16::from_le_bytes(b).to_f32()
}
