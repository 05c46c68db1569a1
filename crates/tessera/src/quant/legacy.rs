//! The legacy 32-element block types, both ways.
//!
//! | type | bytes | layout |
//! | --- | --- | --- |
//! | Q4_0 | 18 | d: f16, qs: 16 × (q\[j\] \| q\[j+16\] << 4); x = d · (q − 8) |
//! | Q4_1 | 20 | d: f16, m: f16, qs: 16; x = d · q + m |
//! | Q5_0 | 22 | d: f16, qh: u32 (bit j = bit 4 of q\[j\]), qs: 16; x = d · (q − 16) |
//! | Q5_1 | 24 | d: f16, m: f16, qh: u32, qs: 16; x = d · q + m |
//! | Q8_0 | 34 | d: f16, qs: 32 × i8; x = q · d |
//!
//! Quantizing follows gguf-py's numpy code step by step: Q8_0 rounds half away from zero
//! (`np_roundf`), the others truncate `x · (1/d) + 8.5` (or `+ 16.5`, `+ 0.5`) and clip;
//! the scale of Q4_0/Q5_0 is the element of largest magnitude (the first, on ties)
//! divided by −8 or −16; `1/d` is 0 when `d` is 0.

use super::{f16_at, f16_bytes, inv, np_max, np_min, np_u8};

/// Low nibble for elements 0..16, high nibble for 16..32, of `qs[j % 16]`.
#[inline]
fn nibble(qs: &[u8], j: usize) -> u8 {
    if j < 16 {
        qs[j] & 0x0F
    } else {
        qs[j - 16] >> 4
    }
}

/// Q4_0 block → 32 floats.
pub fn dequant_q4_0(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let qs = &b[2..18];
    for (j, o) in out.iter_mut().enumerate() {
        *o = d * ((nibble(qs, j) as i8 - 8) as f32);
    }
}

/// Q4_1 block → 32 floats.
pub fn dequant_q4_1(b: &[u8], out: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qs = &b[4..20];
    for (j, o) in out.iter_mut().enumerate() {
        *o = d * (nibble(qs, j) as f32) + m;
    }
}

/// Q5_0 block → 32 floats.
pub fn dequant_q5_0(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let qs = &b[6..22];
    for (j, o) in out.iter_mut().enumerate() {
        let q = nibble(qs, j) | ((((qh >> j) & 1) as u8) << 4);
        *o = d * ((q as i8 - 16) as f32);
    }
}

/// Q5_1 block → 32 floats.
pub fn dequant_q5_1(b: &[u8], out: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let qs = &b[8..24];
    for (j, o) in out.iter_mut().enumerate() {
        let q = nibble(qs, j) | ((((qh >> j) & 1) as u8) << 4);
        *o = d * (q as f32) + m;
    }
}

/// Q8_0 block → 32 floats.
pub fn dequant_q8_0(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    for (o, &q) in out.iter_mut().zip(&b[2..34]) {
        *o = (q as i8 as f32) * d;
    }
}

/// gguf-py's `np_roundf` (round half away from zero) followed by numpy's cast to int8,
/// as the stored byte. Below 2^23 in magnitude, `floor(a)` is `a as i32` and
/// `floor(2 · (a − floor(a)))` is 1 exactly when the (exact) fraction is at least ½;
/// anything else (NaN, infinities, huge values) takes the literal float steps.
#[inline]
fn np_roundf_i8(n: f32) -> u8 {
    let a = n.abs();
    if a < 8_388_608.0 {
        let fl = a as i32;
        let b = fl + ((a - fl as f32) >= 0.5) as i32;
        let q = if n < 0.0 { -b } else { b };
        return q as u8;
    }
    np_u8(np_roundf(n))
}

/// gguf-py's `np_roundf`: round half away from zero, through the same float steps.
#[inline]
fn np_roundf(n: f32) -> f32 {
    let a = n.abs();
    let floored = a.floor();
    let b = floored + (2.0 * (a - floored)).floor();
    let sign = if n.is_nan() {
        n
    } else if n > 0.0 {
        1.0
    } else if n < 0.0 {
        -1.0
    } else {
        0.0
    };
    sign * b
}

/// The element of largest magnitude (`take_along_axis(x, argmax(abs(x)))`): the first
/// on ties, the first NaN if any.
#[inline]
fn absmax_element(x: &[f32]) -> f32 {
    let mut best = 0usize;
    let mut best_abs = f32::NEG_INFINITY;
    for (i, &v) in x.iter().enumerate() {
        if v.is_nan() {
            return v;
        }
        if v.abs() > best_abs {
            best_abs = v.abs();
            best = i;
        }
    }
    x.get(best).copied().unwrap_or(0.0)
}

/// 32 floats → Q8_0 block.
pub fn quant_q8_0(x: &[f32], out: &mut [u8]) {
    let mut amax = 0f32;
    for &v in x {
        let a = v.abs();
        if a.is_nan() {
            amax = a;
            break;
        }
        if a > amax {
            amax = a;
        }
    }
    let d = amax / 127.0;
    let id = inv(d);
    out[..2].copy_from_slice(&f16_bytes(d));
    for (o, &v) in out[2..34].iter_mut().zip(x) {
        *o = np_roundf_i8(v * id);
    }
}

/// Packs 32 4-bit values: byte j = q[j] | q[j + 16] << 4.
#[inline]
fn pack_nibbles(q: &[u8; 32], out: &mut [u8]) {
    for j in 0..16 {
        out[j] = (q[j] & 0x0F) | (q[j + 16] << 4);
    }
}

/// Bit 4 of each of 32 values as a little-endian u32 (`np.packbits(..., "little")`).
#[inline]
fn high_bits(q: &[u8; 32]) -> [u8; 4] {
    let mut qh = 0u32;
    for (j, &v) in q.iter().enumerate() {
        if v >> 4 != 0 {
            qh |= 1 << j;
        }
    }
    qh.to_le_bytes()
}

/// 32 floats → Q4_0 block.
pub fn quant_q4_0(x: &[f32], out: &mut [u8]) {
    let d = absmax_element(x) / -8.0;
    let id = inv(d);
    let mut q = [0u8; 32];
    for (qi, &v) in q.iter_mut().zip(x) {
        *qi = np_u8(v * id + 8.5).min(15);
    }
    out[..2].copy_from_slice(&f16_bytes(d));
    pack_nibbles(&q, &mut out[2..18]);
}

/// 32 floats → Q4_1 block.
pub fn quant_q4_1(x: &[f32], out: &mut [u8]) {
    let (max, min) = (np_max(x), np_min(x));
    let d = (max - min) / 15.0;
    let id = inv(d);
    let mut q = [0u8; 32];
    for (qi, &v) in q.iter_mut().zip(x) {
        *qi = np_u8((v - min) * id + 0.5).min(15);
    }
    out[..2].copy_from_slice(&f16_bytes(d));
    out[2..4].copy_from_slice(&f16_bytes(min));
    pack_nibbles(&q, &mut out[4..20]);
}

/// 32 floats → Q5_0 block.
pub fn quant_q5_0(x: &[f32], out: &mut [u8]) {
    let d = absmax_element(x) / -16.0;
    let id = inv(d);
    let mut q = [0u8; 32];
    for (qi, &v) in q.iter_mut().zip(x) {
        *qi = np_u8(v * id + 16.5).min(31);
    }
    out[..2].copy_from_slice(&f16_bytes(d));
    out[2..6].copy_from_slice(&high_bits(&q));
    pack_nibbles(&q, &mut out[6..22]);
}

/// 32 floats → Q5_1 block.
pub fn quant_q5_1(x: &[f32], out: &mut [u8]) {
    let (max, min) = (np_max(x), np_min(x));
    let d = (max - min) / 31.0;
    let id = inv(d);
    let mut q = [0u8; 32];
    for (qi, &v) in q.iter_mut().zip(x) {
        *qi = np_u8((v - min) * id + 0.5).min(31);
    }
    out[..2].copy_from_slice(&f16_bytes(d));
    out[2..4].copy_from_slice(&f16_bytes(min));
    out[4..8].copy_from_slice(&high_bits(&q));
    pack_nibbles(&q, &mut out[8..24]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_round_is_the_literal_float_steps() {
        let mut vals = vec![
            0.0f32, -0.0, 0.5, -0.5, 1.5, -2.5, 126.5, -127.49999, 8388607.5,
        ];
        vals.extend([f32::NAN, f32::INFINITY, -1e30, 3e9, -3e9, 1e-40]);
        let mut x = 0x1234_5678u32;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            vals.push(f32::from_bits(x));
            vals.push((x >> 8) as f32 / 65536.0 - 128.0);
        }
        for v in vals {
            assert_eq!(np_roundf_i8(v), np_u8(np_roundf(v)), "{v:e}");
        }
    }
}
