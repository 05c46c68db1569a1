//! The text armor of a chunk: base64 in 76-column lines, each followed by a space and its
//! parity nibble (RESOLUTIONS 1–3).
//!
//! Encoding and decoding use `base64-simd` (standard alphabet, padded): a chunk is one
//! base64 stream, encoded whole and then cut into lines, or gathered from its lines and
//! decoded whole.

use base64_simd::{Out, STANDARD};

/// Base64 characters per full line.
pub const WIDTH: usize = 76;

/// The parity nibble of a line's base64 characters: XOR of their ASCII bytes, low 4 bits.
pub fn parity(chars: &[u8]) -> u8 {
    if let Ok(line) = <&[u8; WIDTH]>::try_from(chars) {
        return parity_full(line);
    }
    let mut words = chars.chunks_exact(8);
    let mut acc = 0u64;
    for w in &mut words {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        acc ^= u64::from_le_bytes(a);
    }
    let mut x = acc.to_le_bytes().iter().fold(0u8, |a, b| a ^ b);
    for b in words.remainder() {
        x ^= b;
    }
    x & 0xf
}

/// [`parity`] of a full line, unrolled: nine words and four bytes, folded.
#[inline(always)]
fn parity_full(line: &[u8; WIDTH]) -> u8 {
    let word = |i: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&line[i * 8..i * 8 + 8]);
        u64::from_le_bytes(a)
    };
    let mut acc = (0..WIDTH / 8).fold(0u64, |acc, i| acc ^ word(i));
    acc ^= u64::from(u32::from_le_bytes([line[72], line[73], line[74], line[75]]));
    acc ^= acc >> 32;
    acc ^= acc >> 16;
    acc ^= acc >> 8;
    (acc as u8) & 0xf
}

/// The lowercase hex digit of a nibble.
pub fn hex_digit(n: u8) -> u8 {
    b"0123456789abcdef"[(n & 0xf) as usize]
}

/// Base64 characters of a chunk of `len` raw bytes (padding included).
pub fn b64_chars(len: u64) -> u64 {
    len.div_ceil(3) * 4
}

/// `lines=` of a chunk of `len` raw bytes: `ceil(ceil(len/3)*4/76)`.
pub fn lines_for(len: u64) -> u64 {
    b64_chars(len).div_ceil(WIDTH as u64)
}

/// Bytes the base64 lines of a chunk of `len` raw bytes occupy in the file (with LFs).
pub fn text_len(len: u64) -> u64 {
    let chars = b64_chars(len);
    let lines = lines_for(len);
    chars + lines * 3
}

/// Appends the armored lines of `raw` (one chunk) to `out`; `scratch` is reused.
pub fn encode_chunk(raw: &[u8], scratch: &mut Vec<u8>, out: &mut Vec<u8>) {
    let n = STANDARD.encoded_length(raw.len());
    // Only grows (and zero-fills) when needed: the encoder overwrites what it uses.
    scratch.resize(n.max(scratch.len()), 0);
    let enc = STANDARD.encode(raw, Out::from_slice(&mut scratch[..n]));
    out.reserve(text_len(raw.len() as u64) as usize);
    for line in enc.chunks(WIDTH) {
        out.extend_from_slice(line);
        out.push(b' ');
        out.push(hex_digit(parity(line)));
        out.push(b'\n');
    }
}

/// Why a chunk's text did not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArmorFault {
    /// A line breaks the armor (width, separator, nibble, LF); the index of the line
    /// within the chunk, and what is wrong.
    Line(u64, String),
    /// A line's parity nibble does not match; the index of the line within the chunk.
    Parity(u64, u8, u8),
    /// The base64 does not decode (a character outside the alphabet, misplaced padding);
    /// the index of the first offending line when found.
    Base64(Option<u64>),
}

/// Decodes the armored lines `text` (exactly [`text_len`]`(out.len())` bytes) of a chunk
/// into `out`, checking every line's layout and parity. `scratch` is reused.
pub fn decode_chunk(text: &[u8], out: &mut [u8], scratch: &mut Vec<u8>) -> Result<(), ArmorFault> {
    let len = out.len() as u64;
    let chars = b64_chars(len) as usize;
    let lines = lines_for(len);
    if text.len() as u64 != text_len(len) {
        return Err(ArmorFault::Line(
            0,
            "chunk text has the wrong length".into(),
        ));
    }
    scratch.clear();
    scratch.reserve(chars);
    let mut pos = 0usize;
    let mut left = chars;
    for i in 0..lines {
        let w = left.min(WIDTH);
        let line = &text[pos..pos + w + 3];
        let (body, tail) = line.split_at(w);
        if tail[0] != b' ' || tail[2] != b'\n' {
            return Err(ArmorFault::Line(
                i,
                format!("expected {w} base64 characters, a space and a parity digit"),
            ));
        }
        let want = hex_digit(parity(body));
        if tail[1] != want {
            if !tail[1].is_ascii_hexdigit() || tail[1].is_ascii_uppercase() {
                return Err(ArmorFault::Line(
                    i,
                    "parity is not one lowercase hex digit".into(),
                ));
            }
            if let Some(p) = body.iter().position(|&c| !is_b64(c)) {
                let what = match body[p] {
                    b'\r' => "a CR (LF line ends only)".to_string(),
                    b'\t' => "a tab".to_string(),
                    b' ' => "a space".to_string(),
                    c if (0x21..0x7f).contains(&c) => format!("{:?} (not base64)", c as char),
                    c => format!("byte 0x{c:02x} (printable ASCII only)"),
                };
                return Err(ArmorFault::Line(i, format!("column {}: {what}", p + 1)));
            }
            return Err(ArmorFault::Parity(i, tail[1], want));
        }
        scratch.extend_from_slice(body);
        pos += w + 3;
        left -= w;
    }
    match STANDARD.decoded_length(scratch) {
        Ok(n) if n == out.len() => {}
        _ => return Err(ArmorFault::Base64(find_bad_line(scratch))),
    }
    STANDARD
        .decode(scratch, Out::from_slice(out))
        .map(|_| ())
        .map_err(|_| ArmorFault::Base64(find_bad_line(scratch)))
}

fn is_b64(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'+' || c == b'/' || c == b'='
}

fn find_bad_line(chars: &[u8]) -> Option<u64> {
    let n = chars.len();
    chars.chunks(WIDTH).enumerate().find_map(|(i, l)| {
        let last = (i + 1) * WIDTH >= n;
        let bad = l.iter().enumerate().any(|(j, &c)| {
            let pad_ok = last && c == b'=' && l.len() - j <= 2;
            !(c.is_ascii_alphanumeric() || c == b'+' || c == b'/' || pad_ok)
        });
        bad.then_some(i as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_parity_is_a() {
        let l = b"TWFuIGlzIGRpc3Rpbmd1aXNoZWQsIG5vdCBvbmx5IGJ5IGhpcyByZWFzb24sIGJ1dCBieSB0aGlz";
        assert_eq!(l.len(), 76);
        assert_eq!(hex_digit(parity(l)), b'a');
    }

    #[test]
    fn line_counts_follow_the_formula() {
        assert_eq!(lines_for(4096), 72);
        assert_eq!(lines_for(65536), 1150);
        assert_eq!(lines_for(32768), 575);
        assert_eq!(lines_for(57), 1);
        assert_eq!(lines_for(58), 2);
        assert_eq!(lines_for(1), 1);
    }

    #[test]
    fn round_trip_every_tail() {
        let mut s = Vec::new();
        for n in [1usize, 2, 3, 56, 57, 58, 114, 1000] {
            let raw: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
            let mut t = Vec::new();
            encode_chunk(&raw, &mut s, &mut t);
            assert_eq!(t.len() as u64, text_len(n as u64));
            let mut back = vec![0u8; n];
            decode_chunk(&t, &mut back, &mut s).unwrap();
            assert_eq!(back, raw);
            let mut bad = t.clone();
            bad[3] = if bad[3] == b'A' { b'B' } else { b'A' };
            assert!(matches!(
                decode_chunk(&bad, &mut back, &mut s),
                Err(ArmorFault::Parity(0, _, _))
            ));
        }
    }
}
