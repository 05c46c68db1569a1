//! Small shared pieces: hex, bounded byte reading, zstd with an output bound, atomic
//! file writes, Python-compatible JSON.

pub mod atomic;
pub mod bytes;
pub mod keys;
pub mod pyjson;

use crate::error::{Error, Result};

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const H: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(H[(b >> 4) as usize] as char);
        s.push(H[(b & 15) as usize] as char);
    }
    s
}

/// Decodes hex (either case). `None` on odd length or a non-hex digit.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    if b.len() % 2 != 0 {
        return None;
    }
    let nib = |c: u8| -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    };
    b.chunks_exact(2)
        .map(|p| Some(nib(p[0])? << 4 | nib(p[1])?))
        .collect()
}

/// SHA-256 of `data`.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(data).into()
}

/// CRC-32C (Castagnoli) of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Decompresses a zstd stream (frames with or without a content size), refusing to
/// produce more than `max_out` bytes. `exact`: the output must be exactly `max_out`.
pub fn zstd_decode_bounded(input: &[u8], max_out: u64, exact: bool) -> Result<Vec<u8>> {
    use std::io::Read;
    let cap = crate::limits::to_usize(max_out, "decompressed size")?;
    let mut dec = zstd::stream::read::Decoder::with_buffer(input)
        .map_err(|e| Error::malformed("zstd: cannot start decoding").with_source(e))?;
    // Start small: the bound comes from the file and may be a lie.
    let mut out = Vec::with_capacity(cap.min(1 << 20));
    let mut limited = (&mut dec).take(max_out.saturating_add(1));
    limited
        .read_to_end(&mut out)
        .map_err(|e| Error::malformed("zstd: corrupt compressed data").with_source(e))?;
    if out.len() as u64 > max_out {
        return Err(Error::malformed(format!(
            "zstd: decompresses to more than the declared {max_out} bytes"
        )));
    }
    if exact && out.len() as u64 != max_out {
        return Err(Error::malformed(format!(
            "zstd: decompresses to {} bytes, {max_out} declared",
            out.len()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip() {
        assert_eq!(hex(&[0, 0xab, 0xff]), "00abff");
        assert_eq!(unhex("00ABff"), Some(vec![0, 0xab, 0xff]));
        assert_eq!(unhex("0"), None);
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn crc32c_known_answer() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn zstd_bound_is_enforced() {
        let data = vec![7u8; 10_000];
        let z = zstd::bulk::compress(&data, 3).unwrap();
        assert_eq!(zstd_decode_bounded(&z, 10_000, true).unwrap(), data);
        assert!(zstd_decode_bounded(&z, 9_999, false).is_err());
        assert!(zstd_decode_bounded(&z, 20_000, true).is_err());
        assert!(zstd_decode_bounded(b"not zstd", 100, false).is_err());
    }
}
