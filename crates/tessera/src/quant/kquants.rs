//! The k-quants: 256-element super-blocks with 6-bit or 8-bit sub-block scales.
//! Decoding only (gguf-py's reference does not quantize them).
//!
//! | type | bytes | layout (in order) |
//! | --- | --- | --- |
//! | Q2_K | 84 | scales: 16 (low nibble scale, high nibble min), qs: 64 (2-bit), d: f16, dmin: f16 |
//! | Q3_K | 110 | hmask: 32, qs: 64 (2-bit), scales: 12 (16 × 6-bit, −32), d: f16 |
//! | Q4_K | 144 | d: f16, dmin: f16, scales: 12 (8 scales + 8 mins, 6-bit), qs: 128 (4-bit) |
//! | Q5_K | 176 | d: f16, dmin: f16, scales: 12, qh: 32, qs: 128 |
//! | Q6_K | 210 | ql: 128, qh: 64, scales: 16 × i8, d: f16 |
//!
//! The 2-bit fields of a 32-byte group hold four consecutive runs of 32 elements
//! (shifts 0, 2, 4, 6); the 4-bit fields two (shifts 0, 4); high-bit masks hold one run
//! per bit. Each float is computed as gguf-py groups it: `(d · sc) · q − (dmin · m)`.

use super::f16_at;

/// The 2-bit value of element `e` (0..256) of a 64-byte field: group `e / 128`, shift
/// `2 · ((e % 128) / 32)`.
#[inline]
fn two_bits(qs: &[u8], e: usize) -> u8 {
    (qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3
}

/// Q2_K block → 256 floats.
pub fn dequant_q2_k(b: &[u8], out: &mut [f32]) {
    let scales = &b[0..16];
    let qs = &b[16..80];
    let (d, dmin) = (f16_at(b, 80), f16_at(b, 82));
    for (j, chunk) in out.chunks_exact_mut(16).enumerate() {
        let dl = d * ((scales[j] & 0x0F) as f32);
        let ml = dmin * ((scales[j] >> 4) as f32);
        for (i, o) in chunk.iter_mut().enumerate() {
            let q = two_bits(qs, j * 16 + i) as f32;
            *o = dl * q - ml;
        }
    }
}

/// Q3_K block → 256 floats.
pub fn dequant_q3_k(b: &[u8], out: &mut [f32]) {
    let hmask = &b[0..32];
    let qs = &b[32..96];
    let sc = &b[96..108];
    let d = f16_at(b, 108);
    for (j, chunk) in out.chunks_exact_mut(16).enumerate() {
        let low = if j < 8 { sc[j] & 0x0F } else { sc[j - 8] >> 4 };
        let high = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
        let scale = ((low | (high << 4)) as i8).wrapping_sub(32) as f32;
        let dl = d * scale;
        for (i, o) in chunk.iter_mut().enumerate() {
            let e = j * 16 + i;
            let ql = two_bits(qs, e) as i8;
            let h = ((hmask[e % 32] >> (e / 32)) & 1) ^ 1;
            let q = ql.wrapping_sub((h << 2) as i8) as f32;
            *o = dl * q;
        }
    }
}

/// The 8 scales and 8 mins of Q4_K/Q5_K (6 bits each, packed in 12 bytes).
#[inline]
fn scale_min(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for i in 0..4 {
        sc[i] = s[i] & 0x3F;
        sc[4 + i] = (s[8 + i] & 0x0F) | ((s[i] >> 2) & 0x30);
        mn[i] = s[4 + i] & 0x3F;
        mn[4 + i] = (s[8 + i] >> 4) | ((s[4 + i] >> 2) & 0x30);
    }
    (sc, mn)
}

/// The 4-bit value of element `e` of a 128-byte field: sub-block `e / 32` is the low
/// (even) or high (odd) nibble of bytes `(e / 64) · 32 ..`.
#[inline]
fn k_nibble(qs: &[u8], e: usize) -> u8 {
    let j = e / 32;
    (qs[(j / 2) * 32 + e % 32] >> (4 * (j % 2))) & 0x0F
}

/// Q4_K block → 256 floats.
pub fn dequant_q4_k(b: &[u8], out: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let (sc, mn) = scale_min(&b[4..16]);
    let qs = &b[16..144];
    for (j, chunk) in out.chunks_exact_mut(32).enumerate() {
        let dl = d * (sc[j] as f32);
        let dm = dmin * (mn[j] as f32);
        for (i, o) in chunk.iter_mut().enumerate() {
            *o = dl * (k_nibble(qs, j * 32 + i) as f32) - dm;
        }
    }
}

/// Q5_K block → 256 floats.
pub fn dequant_q5_k(b: &[u8], out: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let (sc, mn) = scale_min(&b[4..16]);
    let qh = &b[16..48];
    let qs = &b[48..176];
    for (j, chunk) in out.chunks_exact_mut(32).enumerate() {
        let dl = d * (sc[j] as f32);
        let dm = dmin * (mn[j] as f32);
        for (i, o) in chunk.iter_mut().enumerate() {
            let q = k_nibble(qs, j * 32 + i) | (((qh[i] >> j) & 1) << 4);
            *o = dl * (q as f32) - dm;
        }
    }
}

/// Q6_K block → 256 floats.
pub fn dequant_q6_k(b: &[u8], out: &mut [f32]) {
    let ql = &b[0..128];
    let qh = &b[128..192];
    let scales = &b[192..208];
    let d = f16_at(b, 208);
    for (j, chunk) in out.chunks_exact_mut(16).enumerate() {
        let dl = d * (scales[j] as i8 as f32);
        for (i, o) in chunk.iter_mut().enumerate() {
            let e = j * 16 + i;
            let h = e / 128;
            let low = (ql[h * 64 + e % 64] >> (4 * ((e % 128) / 64))) & 0x0F;
            let high = two_bits(qh, e);
            let q = ((low | (high << 4)) as i8).wrapping_sub(32) as f32;
            *o = dl * q;
        }
    }
}
