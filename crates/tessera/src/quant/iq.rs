//! The grid ("lattice") IQ types: each group of 4 or 8 weights is one row of a fixed
//! codebook, scaled and signed. Decoding only, as gguf-py 0.19.0's `gguf.quants`.
//!
//! | type | elements | bytes | layout (in order) |
//! | --- | --- | --- | --- |
//! | IQ2_XXS | 256 | 66 | d: f16, 8 × (4 grid indices: u8, then u32: 4 × 7-bit sign indices, 4-bit scale) |
//! | IQ2_XS | 256 | 74 | d: f16, qs: 32 × u16 (9-bit grid index, 7-bit sign index), scales: 8 (4-bit pairs) |
//! | IQ2_S | 256 | 82 | d: f16, qs: 32 (grid index low bits), signs: 32, qh: 8 (2 high bits per index), scales: 8 |
//! | IQ3_XXS | 256 | 98 | d: f16, qs: 64 (grid indices, 4 weights each), 8 × u32 (4 × 7-bit sign indices, 4-bit scale) |
//! | IQ3_S | 256 | 110 | d: f16, qs: 64, qh: 8 (the 9th index bit), signs: 32, scales: 4 (4-bit pairs) |
//! | IQ1_S | 256 | 50 | d: f16, qs: 32, qh: 8 × u16 (3 high index bits × 4, 3-bit scale, delta sign) |
//! | IQ1_M | 256 | 56 | qs: 32, qh: 16 (3 high index bits + delta sign per nibble), 4 × u16 scales (3-bit × 4, top nibbles form d: f16) |
//!
//! A scale is `d · (0.5 + s) · 0.25` (IQ2), `d · (0.5 + s) · 0.5` (IQ3_XXS), `d · (1 + 2s)`
//! (IQ3_S, IQ1); a weight is `scale · grid · sign` (the sign ±1 from a sign byte, or
//! `ksigns[7-bit index]`), or `scale · (grid + delta)` with `delta = ±0.125` (IQ1).
//! Each product is rounded to f32 in numpy's order, as in the other block modules.
//!
//! # The tables
//!
//! `iq_tables.bin` holds ggml's sign table `ksigns_iq2xs` and the grids `iq2xxs_grid`,
//! `iq2xs_grid`, `iq2s_grid`, `iq3xxs_grid`, `iq3s_grid` and `iq1s_grid` (IQ1_M uses
//! IQ1_S's), one byte per value: ggml format constants that a file's indices point
//! into, so any reader needs them. They are not typed in by hand: `gen_iq_tables.py`
//! (beside this file) reads them from gguf-py 0.19.0 (PyPI `gguf`, MIT licence; the
//! version pinned in `tests/requirements.txt`), which carries them as packed hex, and
//! writes the file; its docstring gives the section layout, which the constants below
//! repeat (the total length is checked at compile time). Regenerate with
//! `python gen_iq_tables.py` in this directory.

use super::f16_at;

/// The tables, sections back to back (see `gen_iq_tables.py`).
const TABLES: &[u8; 33920] = include_bytes!("iq_tables.bin");
const KSIGNS_AT: usize = 0;
const IQ2XXS_AT: usize = KSIGNS_AT + 128;
const IQ2XS_AT: usize = IQ2XXS_AT + 256 * 8;
const IQ2S_AT: usize = IQ2XS_AT + 512 * 8;
const IQ3XXS_AT: usize = IQ2S_AT + 1024 * 8;
const IQ3S_AT: usize = IQ3XXS_AT + 256 * 4;
const IQ1S_AT: usize = IQ3S_AT + 512 * 4;
const _: () = assert!(IQ1S_AT + 2048 * 8 == TABLES.len());

/// `R` rows of `C` bytes from `TABLES` at `at`.
const fn rows<const R: usize, const C: usize>(at: usize) -> [[u8; C]; R] {
    let mut out = [[0u8; C]; R];
    let mut r = 0;
    while r < R {
        let mut c = 0;
        while c < C {
            out[r][c] = TABLES[at + r * C + c];
            c += 1;
        }
        r += 1;
    }
    out
}

static KSIGNS: [[u8; 128]; 1] = rows(KSIGNS_AT);
static IQ2XXS: [[u8; 8]; 256] = rows(IQ2XXS_AT);
static IQ2XS: [[u8; 8]; 512] = rows(IQ2XS_AT);
static IQ2S: [[u8; 8]; 1024] = rows(IQ2S_AT);
static IQ3XXS: [[u8; 4]; 256] = rows(IQ3XXS_AT);
static IQ3S: [[u8; 4]; 512] = rows(IQ3S_AT);
/// IQ1 grid values are -1, 0, 1, stored as i8 bytes.
static IQ1S: [[u8; 8]; 2048] = rows(IQ1S_AT);

const IQ1_DELTA: f32 = 0.125;

/// The sign byte for a 7-bit sign index.
#[inline]
fn ksigns(i: u32) -> u8 {
    KSIGNS[0][(i & 0x7F) as usize]
}

/// ±1 from bit `i` of a sign byte (set: negative), as numpy's `np.where`.
#[inline]
fn sign(bits: u8, i: usize) -> f32 {
    if (bits >> i) & 1 == 0 {
        1.0
    } else {
        -1.0
    }
}

#[inline]
fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}

#[inline]
fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// Eight weights `db · row · sign`.
#[inline]
fn signed_row(out: &mut [f32], db: f32, row: &[u8; 8], signs: u8) {
    for (i, o) in out.iter_mut().enumerate() {
        *o = db * row[i] as f32 * sign(signs, i);
    }
}

/// IQ2_XXS block → 256 floats.
pub fn dequant_iq2_xxs(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    for (g, chunk) in out.chunks_exact_mut(32).enumerate() {
        let at = 2 + 8 * g;
        let aux = u32_at(b, at + 4);
        let db = d * (0.5 + (aux >> 28) as f32) * 0.25;
        for (k, sub) in chunk.chunks_exact_mut(8).enumerate() {
            let row = &IQ2XXS[b[at + k] as usize];
            signed_row(sub, db, row, ksigns(aux >> (7 * k)));
        }
    }
}

/// IQ2_XS block → 256 floats.
pub fn dequant_iq2_xs(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    for (j, chunk) in out.chunks_exact_mut(16).enumerate() {
        let s = (b[66 + j / 2] >> (4 * (j % 2))) & 0x0F;
        let db = d * (0.5 + s as f32) * 0.25;
        for (h, sub) in chunk.chunks_exact_mut(8).enumerate() {
            let q = u16_at(b, 2 + 2 * (2 * j + h));
            let row = &IQ2XS[(q & 511) as usize];
            signed_row(sub, db, row, ksigns(u32::from(q >> 9)));
        }
    }
}

/// IQ2_S block → 256 floats.
pub fn dequant_iq2_s(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    for (j, chunk) in out.chunks_exact_mut(16).enumerate() {
        let s = (b[74 + j / 2] >> (4 * (j % 2))) & 0x0F;
        let db = d * (0.5 + s as f32) * 0.25;
        for (h, sub) in chunk.chunks_exact_mut(8).enumerate() {
            let m = 2 * j + h;
            let high = (b[66 + m / 4] >> (2 * (m % 4))) & 3;
            let idx = b[2 + m] as usize | (high as usize) << 8;
            signed_row(sub, db, &IQ2S[idx], b[34 + m]);
        }
    }
}

/// IQ3_XXS block → 256 floats.
pub fn dequant_iq3_xxs(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    for (g, chunk) in out.chunks_exact_mut(32).enumerate() {
        let aux = u32_at(b, 66 + 4 * g);
        let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
        for (k, sub) in chunk.chunks_exact_mut(8).enumerate() {
            let signs = ksigns(aux >> (7 * k));
            for (i, o) in sub.iter_mut().enumerate() {
                let row = &IQ3XXS[b[2 + 8 * g + 2 * k + i / 4] as usize];
                *o = db * row[i % 4] as f32 * sign(signs, i);
            }
        }
    }
}

/// IQ3_S block → 256 floats.
pub fn dequant_iq3_s(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    for (g, chunk) in out.chunks_exact_mut(32).enumerate() {
        let s = (b[106 + g / 2] >> (4 * (g % 2))) & 0x0F;
        let db = d * (1 + 2 * s) as f32;
        for (i, o) in chunk.iter_mut().enumerate() {
            let e = 32 * g + i;
            let m = e / 4;
            let high = (b[66 + m / 8] >> (m % 8)) & 1;
            let row = &IQ3S[b[2 + m] as usize | (high as usize) << 8];
            *o = db * row[e % 4] as f32 * sign(b[74 + e / 8], e % 8);
        }
    }
}

/// `dl · (grid + delta)` for eight IQ1 weights.
#[inline]
fn iq1_row(out: &mut [f32], dl: f32, idx: usize, delta: f32) {
    let row = &IQ1S[idx];
    for (i, o) in out.iter_mut().enumerate() {
        *o = dl * (row[i] as i8 as f32 + delta);
    }
}

/// IQ1_S block → 256 floats.
pub fn dequant_iq1_s(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    for (g, chunk) in out.chunks_exact_mut(32).enumerate() {
        let h = u16_at(b, 34 + 2 * g);
        let dl = d * (2 * ((h >> 12) & 7) + 1) as f32;
        let delta = if h & 0x8000 == 0 {
            IQ1_DELTA
        } else {
            -IQ1_DELTA
        };
        for (t, sub) in chunk.chunks_exact_mut(8).enumerate() {
            let idx = b[2 + 4 * g + t] as usize | (((h >> (3 * t)) & 7) as usize) << 8;
            iq1_row(sub, dl, idx, delta);
        }
    }
}

/// IQ1_M block → 256 floats.
pub fn dequant_iq1_m(b: &[u8], out: &mut [f32]) {
    let sc = [u16_at(b, 48), u16_at(b, 50), u16_at(b, 52), u16_at(b, 54)];
    let d_bits = (sc[0] >> 12) | (sc[1] >> 12) << 4 | (sc[2] >> 12) << 8 | (sc[3] >> 12) << 12;
    let d = half::f16::from_bits(d_bits).to_f32();
    for (m, sub) in out.chunks_exact_mut(8).enumerate() {
        let g = m / 2;
        let s = (sc[g / 4] >> (3 * (g % 4))) & 7;
        let dl = d * (2 * s + 1) as f32;
        let nib = (b[32 + m / 2] >> (4 * (m % 2))) & 0x0F;
        let delta = if nib & 0x08 == 0 {
            IQ1_DELTA
        } else {
            -IQ1_DELTA
        };
        let idx = b[m] as usize | ((nib & 7) as usize) << 8;
        iq1_row(sub, dl, idx, delta);
    }
}
