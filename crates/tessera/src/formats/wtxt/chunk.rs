//! Decoding an array's chunks in parallel, checking each chunk's layers.

use rayon::prelude::*;

use super::armor::{self, ArmorFault};
use super::read::{ArrayRef, ChunkRef};
use super::write::xor_at;
use crate::util::hex;

/// What went wrong with one chunk, at which line, on which layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkFault {
    /// Chunk index.
    pub ix: u64,
    /// The line of the problem (the `ch` line for hash mismatches).
    pub line: usize,
    /// `armor`, `parity`, `base64`, `crc32c`, `sha256`.
    pub layer: &'static str,
    /// What was found.
    pub detail: String,
    /// True when the text breaks the grammar (Malformed), false for a checksum (Integrity).
    pub malformed: bool,
}

impl ChunkFault {
    /// `array "R" chunk 000007 (line 123)`.
    pub fn subject(&self, array: &str) -> String {
        format!("array {array:?} chunk {:06} (line {})", self.ix, self.line)
    }
}

/// The decoded bytes of an array, its faults and the fastxor of its chunks (placed at
/// `base` in the concatenation of all arrays).
pub struct Decoded {
    /// Raw bytes (damaged chunks hold whatever decoded, or zeros).
    pub buf: Vec<u8>,
    /// Every fault, in chunk order.
    pub faults: Vec<ChunkFault>,
    /// fastxor contribution.
    pub xor: u64,
}

/// Decodes chunk `c` of `data` into `out` (its raw length) and checks its layers
/// (armor, parity, base64, crc32c, and sha256 when `chunk_sha`); the first fault.
pub(super) fn check_one(
    data: &[u8],
    c: &ChunkRef,
    out: &mut [u8],
    scratch: &mut Vec<u8>,
    chunk_sha: bool,
) -> Option<ChunkFault> {
    let ix = c.ch.ix;
    let fault = |line: usize, layer: &'static str, detail: String, malformed: bool| {
        Some(ChunkFault {
            ix,
            line,
            layer,
            detail,
            malformed,
        })
    };
    if let Some((line, what)) = &c.damage {
        return fault(*line, "armor", what.clone(), true);
    }
    let first = c.line_no + 1;
    match armor::decode_chunk(&data[c.text.clone()], out, scratch) {
        Ok(()) => {}
        Err(ArmorFault::Line(i, what)) => return fault(first + i as usize, "armor", what, true),
        Err(ArmorFault::Parity(i, found, want)) => {
            return fault(
                first + i as usize,
                "parity",
                format!(
                    "parity nibble {} but the line gives {}",
                    found as char, want as char
                ),
                false,
            )
        }
        Err(ArmorFault::Base64(i)) => {
            return fault(
                first + i.unwrap_or(0) as usize,
                "base64",
                "not valid base64 (character outside the alphabet or misplaced padding)".into(),
                true,
            )
        }
    }
    let crc = crate::util::crc32c(out);
    if crc != c.ch.crc32c {
        return fault(
            c.line_no,
            "crc32c",
            format!("expected {:08x}, computed {crc:08x}", c.ch.crc32c),
            false,
        );
    }
    if chunk_sha {
        let sha = crate::util::sha256(out);
        if sha != c.ch.sha256 {
            return fault(
                c.line_no,
                "sha256",
                format!("expected {}, computed {}", hex(&c.ch.sha256), hex(&sha)),
                false,
            );
        }
    }
    None
}

/// Decodes every chunk of `a` in parallel; `chunk_sha` also checks each chunk's SHA-256.
pub fn decode_array(data: &[u8], a: &ArrayRef, chunk_sha: bool, base: u64) -> Decoded {
    decode_array_into(data, a, chunk_sha, base, Vec::new())
}

/// [`decode_array`] into a recycled buffer (its pages are already mapped, which saves
/// the page faults of a fresh allocation per array).
pub fn decode_array_into(
    data: &[u8],
    a: &ArrayRef,
    chunk_sha: bool,
    base: u64,
    mut buf: Vec<u8>,
) -> Decoded {
    // A recycled buffer is only truncated or extended: every byte is written by the
    // decode below (a chunk whose text does not decode is zeroed), so zeroing it first is wasted work.
    buf.resize(a.arr.bytes as usize, 0);
    let mut slices: Vec<&mut [u8]> = Vec::with_capacity(a.chunks.len());
    let mut rest: &mut [u8] = &mut buf;
    for c in &a.chunks {
        let (head, tail) = rest.split_at_mut(c.ch.len as usize);
        slices.push(head);
        rest = tail;
    }
    let results: Vec<(Option<ChunkFault>, u64)> = a
        .chunks
        .par_iter()
        .zip(slices.into_par_iter())
        .map_init(Vec::new, |scratch, (c, out)| {
            let f = check_one(data, c, out, scratch, chunk_sha);
            // A chunk whose text did not decode leaves nothing of its own in `out`.
            if f.as_ref()
                .is_some_and(|f| !matches!(f.layer, "crc32c" | "sha256"))
            {
                out.fill(0);
            }
            let x = xor_at(out, base + c.ch.off);
            (f, x)
        })
        .collect();
    let mut xor = 0;
    let mut faults = Vec::new();
    for (f, x) in results {
        xor ^= x;
        faults.extend(f);
    }
    Decoded { buf, faults, xor }
}
