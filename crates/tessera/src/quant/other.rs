//! Ternary, microscaling and non-linear 4-bit block types. Decoding only.
//!
//! | type | elements | bytes | layout (in order) |
//! | --- | --- | --- | --- |
//! | TQ1_0 | 256 | 54 | qs: 48 + qh: 4 (five, resp. four, base-3 digits per byte, scaled by 256/243), d: f16 |
//! | TQ2_0 | 256 | 66 | qs: 64 (2-bit, value − 1), d: f16 |
//! | MXFP4 | 32 | 17 | e: E8M0 scale (halved), qs: 16 (E2M1 codes, low nibbles first) |
//! | NVFP4 | 64 | 36 | d: 4 × UE4M3 (one per 16, halved), qs: 32 (E2M1 codes, 8 bytes per 16) |
//! | IQ4_NL | 32 | 18 | d: f16, qs: 16 (4-bit indices into a 16-value codebook) |
//! | IQ4_XS | 256 | 136 | d: f16, scales_h: u16, scales_l: 4, qs: 128 (8 × 32 codebook indices) |
//!
//! The E2M1 values are stored doubled (so they are integers) and the scale halved, as
//! ggml does; the IQ4 codebook is ggml's `kvalues_iq4nl`.

use super::f16_at;

/// E2M1 code → its value × 2.
const E2M1_X2: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];
/// The IQ4_NL/IQ4_XS codebook.
const IQ4_VALUES: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];
const POW3: [u8; 5] = [1, 3, 9, 27, 81];

/// A ternary digit stored as a byte scaled by 256/243, times its power of 3: -1, 0 or 1.
#[inline]
fn trit(byte: u8, pow: u8) -> f32 {
    let v = byte.wrapping_mul(pow) as u16;
    (((v * 3) >> 8) as i8 - 1) as f32
}

/// TQ1_0 block → 256 floats.
pub fn dequant_tq1_0(b: &[u8], out: &mut [f32]) {
    let qs = &b[0..48];
    let qh = &b[48..52];
    let d = f16_at(b, 52);
    for (e, o) in out.iter_mut().enumerate() {
        let q = if e < 160 {
            trit(qs[e % 32], POW3[e / 32])
        } else if e < 240 {
            let e = e - 160;
            trit(qs[32 + e % 16], POW3[e / 16])
        } else {
            let e = e - 240;
            trit(qh[e % 4], POW3[e / 4])
        };
        *o = d * q;
    }
}

/// TQ2_0 block → 256 floats.
pub fn dequant_tq2_0(b: &[u8], out: &mut [f32]) {
    let qs = &b[0..64];
    let d = f16_at(b, 64);
    for (e, o) in out.iter_mut().enumerate() {
        let q = (qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        *o = d * ((q as i8 - 1) as f32);
    }
}

/// ggml's `e8m0_to_fp32_half`: 2^(e − 128), with the two smallest as subnormals.
#[inline]
fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        ((e - 1) as u32) << 23
    };
    f32::from_bits(bits)
}

/// Low nibble of `qs[j]` for j < half, high nibble of `qs[j − half]` after.
#[inline]
fn split_nibble(qs: &[u8], j: usize, half: usize) -> usize {
    (if j < half {
        qs[j] & 0x0F
    } else {
        qs[j - half] >> 4
    }) as usize
}

/// MXFP4 block → 32 floats.
pub fn dequant_mxfp4(b: &[u8], out: &mut [f32]) {
    let d = e8m0_half(b[0]);
    let qs = &b[1..17];
    for (j, o) in out.iter_mut().enumerate() {
        *o = d * (E2M1_X2[split_nibble(qs, j, 16)] as f32);
    }
}

/// gguf-py's `ue4m3_to_fp32`: unsigned E4M3 (bias 7, the top bit ignored), halved;
/// 0x00 and 0x7F are 0.
#[inline]
fn ue4m3_half(x: u8) -> f32 {
    if x == 0 || x == 0x7F {
        return 0.0;
    }
    let exp = ((x >> 3) & 0x0F) as i32;
    let man = (x & 7) as f32;
    let raw = if exp == 0 {
        man * (1.0 / 512.0)
    } else {
        (1.0 + man / 8.0) * 2f32.powi(exp - 7)
    };
    raw * 0.5
}

/// NVFP4 block → 64 floats.
pub fn dequant_nvfp4(b: &[u8], out: &mut [f32]) {
    let qs = &b[4..36];
    for (k, chunk) in out.chunks_exact_mut(16).enumerate() {
        let d = ue4m3_half(b[k]);
        let sub = &qs[k * 8..k * 8 + 8];
        for (i, o) in chunk.iter_mut().enumerate() {
            *o = d * (E2M1_X2[split_nibble(sub, i, 8)] as f32);
        }
    }
}

/// IQ4_NL block → 32 floats.
pub fn dequant_iq4_nl(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let qs = &b[2..18];
    for (j, o) in out.iter_mut().enumerate() {
        *o = d * (IQ4_VALUES[split_nibble(qs, j, 16)] as f32);
    }
}

/// IQ4_XS block → 256 floats.
pub fn dequant_iq4_xs(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let sh = u16::from_le_bytes([b[2], b[3]]);
    let sl = &b[4..8];
    let qs = &b[8..136];
    for (j, chunk) in out.chunks_exact_mut(32).enumerate() {
        let low = (sl[j / 2] >> (4 * (j % 2))) & 0x0F;
        let high = ((sh >> (2 * j)) as u8) & 3;
        let scale = ((low | (high << 4)) as i8).wrapping_sub(32) as f32;
        let dl = d * scale;
        let sub = &qs[j * 16..j * 16 + 16];
        for (i, o) in chunk.iter_mut().enumerate() {
            *o = dl * (IQ4_VALUES[split_nibble(sub, i, 16)] as f32);
        }
    }
}
