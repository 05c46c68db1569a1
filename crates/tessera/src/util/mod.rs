//! Small shared pieces: hex, bounded byte reading, zstd with an output bound, atomic
//! file writes, Python-compatible JSON.

pub mod atomic;
pub mod bytes;
pub mod clock;
pub mod interrupt;
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
    // An exact size that the input can produce (no zstd block expands more than 32768
    // times, frame headers included): one allocation of that size, decoded into
    // directly with this thread's reused context. A larger claim is a lie the streaming
    // path below finds out without trusting it.
    if exact && max_out <= (input.len() as u64).saturating_mul(ZSTD_MAX_EXPANSION) {
        return zstd_decode_exact(input, cap);
    }
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

thread_local! {
    /// This thread's zstd compression context, reused across calls.
    static CCTX: std::cell::RefCell<Option<zstd::zstd_safe::CCtx<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Compresses the concatenation of `pieces` into one zstd frame at `level`, appended to
/// `out`, with this thread's reused context: byte for byte what
/// `zstd::stream::write::Encoder::new(out, level)` writes for the same input, with
/// `content_size` the frame states its size (`set_pledged_src_size` and
/// `include_contentsize(true)`), without it the frame has none. No checksum.
pub fn zstd_encode(
    pieces: &[&[u8]],
    level: i32,
    content_size: bool,
    out: &mut Vec<u8>,
) -> Result<()> {
    use std::io::Write;
    use zstd::zstd_safe::CParameter;
    let total: u64 = pieces.iter().map(|p| p.len() as u64).sum();
    out.reserve(zstd::zstd_safe::compress_bound(crate::limits::to_usize(
        total, "chunk",
    )?));
    CCTX.with(|c| -> std::io::Result<()> {
        let mut slot = c.borrow_mut();
        let ctx = match slot.as_mut() {
            Some(ctx) => ctx,
            None => slot.insert(zstd::zstd_safe::CCtx::create()),
        };
        // Every parameter a fresh encoder would have, set again: a reused context
        // keeps what the last user set.
        let mut enc = zstd::stream::write::Encoder::with_context(out, ctx);
        enc.set_parameter(CParameter::CompressionLevel(level))?;
        enc.include_checksum(false)?;
        enc.include_contentsize(true)?;
        if content_size {
            enc.set_pledged_src_size(Some(total))?;
        }
        for p in pieces {
            enc.write_all(p)?;
        }
        enc.finish().map(drop)
    })
    .map_err(|e| Error::invalid_input(format!("zstd: {e}")))
}

/// No zstd frame produces more than this many bytes per input byte (a 4-byte RLE block
/// expands to at most one 128 KiB block).
const ZSTD_MAX_EXPANSION: u64 = 32 * 1024;

thread_local! {
    /// This thread's zstd decoding context, reused across calls (small tensors would
    /// otherwise pay a context's setup each).
    static DCTX: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// How many bytes the zstd stream `input` decodes to, counting no further than `n + 1`
/// (more than `n` is reported as `n + 1`), with no buffer handed out: what `verify`
/// checks of a chunk whose bytes it does not keep. Up to [`ZSTD_CHECK_BUFFER`] bytes it
/// decodes in one pass into a buffer of this thread's, reused while at most 16 MiB (its
/// pages already mapped); a larger claim is streamed into nothing.
pub fn zstd_decoded_len(input: &[u8], n: u64) -> Result<u64> {
    use std::io::Read;
    thread_local! {
        static OUT: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    if n <= ZSTD_CHECK_BUFFER && n <= (input.len() as u64).saturating_mul(ZSTD_MAX_EXPANSION) {
        let got = OUT.with(|o| {
            let mut out = o.borrow_mut();
            let n = n as usize;
            // Only grows (zero-filled once); the decoder overwrites what it uses.
            if out.len() < n {
                out.resize(n, 0);
            }
            let got = with_dctx(|dec| dec.decompress_to_buffer(input, &mut out[..n]));
            // Kept for the next chunk only while small: no thread holds on to more.
            if out.len() as u64 > ZSTD_CHECK_KEEP {
                *out = Vec::new();
            }
            got
        });
        return match got {
            Ok(m) => Ok(m as u64),
            // The one error a full buffer gives: the data goes on past it.
            Err(e) if e.to_string().contains("too small") => Ok(n.saturating_add(1)),
            Err(e) => Err(Error::malformed("zstd: corrupt compressed data").with_source(e)),
        };
    }
    let dec = zstd::stream::read::Decoder::with_buffer(input)
        .map_err(|e| Error::malformed("zstd: cannot start decoding").with_source(e))?;
    std::io::copy(&mut dec.take(n.saturating_add(1)), &mut std::io::sink())
        .map_err(|e| Error::malformed("zstd: corrupt compressed data").with_source(e))
}

/// Largest output [`zstd_decoded_len`] decodes into a buffer (one per thread).
pub const ZSTD_CHECK_BUFFER: u64 = 64 << 20;

/// Largest buffer [`zstd_decoded_len`] keeps for the thread's next call.
const ZSTD_CHECK_KEEP: u64 = 16 << 20;

/// Runs `f` with this thread's reused decoding context.
fn with_dctx<T>(
    f: impl FnOnce(&mut zstd::bulk::Decompressor<'static>) -> std::io::Result<T>,
) -> std::io::Result<T> {
    DCTX.with(|c| {
        let mut slot = c.borrow_mut();
        let dec = match slot.as_mut() {
            Some(d) => d,
            None => slot.insert(zstd::bulk::Decompressor::new()?),
        };
        f(dec)
    })
}

/// What decoding into a buffer of `n` bytes gave, as [`zstd_decode_bounded`] reports it.
fn exact_result(got: std::io::Result<usize>, n: usize) -> Result<()> {
    match got {
        Ok(m) if m == n => Ok(()),
        Ok(m) => Err(Error::malformed(format!(
            "zstd: decompresses to {m} bytes, {n} declared"
        ))),
        // The one error a full buffer gives: the data goes on past it.
        Err(e) if e.to_string().contains("too small") => Err(Error::malformed(format!(
            "zstd: decompresses to more than the declared {n} bytes"
        ))),
        Err(e) => Err(Error::malformed("zstd: corrupt compressed data").with_source(e)),
    }
}

/// Decodes `input` into a buffer of exactly `n` bytes (see [`zstd_decode_bounded`]).
fn zstd_decode_exact(input: &[u8], n: usize) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(n);
    let got = with_dctx(|dec| dec.decompress_to_buffer(input, &mut out));
    exact_result(got, n)?;
    if out.len() != n {
        return Err(Error::malformed(format!(
            "zstd: decompresses to {} bytes, {n} declared",
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
    fn zstd_decoded_len_counts_up_to_one_past_the_bound() {
        let data = vec![7u8; 10_000];
        let z = zstd::bulk::compress(&data, 3).unwrap();
        // Into the reused buffer, twice (the second call reuses it).
        for _ in 0..2 {
            assert_eq!(zstd_decoded_len(&z, 10_000).unwrap(), 10_000);
            assert_eq!(zstd_decoded_len(&z, 20_000).unwrap(), 10_000);
            assert_eq!(zstd_decoded_len(&z, 9_999).unwrap(), 10_000);
        }
        // A claim the input cannot produce: streamed, counted the same way.
        let claim = z.len() as u64 * ZSTD_MAX_EXPANSION + 1;
        assert_eq!(zstd_decoded_len(&z, claim).unwrap(), 10_000);
        assert!(zstd_decoded_len(&z[..z.len() - 1], 10_000).is_err());
        assert!(zstd_decoded_len(b"not zstd", 100).is_err());
    }

    #[test]
    fn zstd_bound_is_enforced() {
        let data = vec![7u8; 10_000];
        let z = zstd::bulk::compress(&data, 3).unwrap();
        assert_eq!(zstd_decode_bounded(&z, 10_000, true).unwrap(), data);
        assert!(zstd_decode_bounded(&z, 9_999, false).is_err());
        assert!(zstd_decode_bounded(&z, 20_000, true).is_err());
        assert!(zstd_decode_bounded(b"not zstd", 100, false).is_err());
        assert!(zstd_decode_bounded(b"not zstd", 100, true).is_err());
        // Exact, decoded in place: too short, too long, truncated, two frames.
        let e = zstd_decode_bounded(&z, 9_999, true).unwrap_err();
        assert!(e.to_string().contains("more than"), "{e}");
        let e = zstd_decode_bounded(&z, 10_001, true).unwrap_err();
        assert!(e.to_string().contains("10000 bytes"), "{e}");
        assert!(zstd_decode_bounded(&z[..z.len() - 1], 10_000, true).is_err());
        let mut two = z.clone();
        two.extend_from_slice(&z);
        assert_eq!(
            zstd_decode_bounded(&two, 20_000, true).unwrap().len(),
            20_000
        );
        // A frame without a content size (as zTensor's writers make) decodes too.
        let mut s = Vec::new();
        let mut enc = zstd::stream::write::Encoder::new(&mut s, 3).unwrap();
        std::io::Write::write_all(&mut enc, &data).unwrap();
        enc.finish().unwrap();
        assert_eq!(zstd_decode_bounded(&s, 10_000, true).unwrap(), data);
        // The reused context writes what a fresh encoder writes, frame for frame.
        let big: Vec<u8> = (0..300_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for (pieces, level) in [
            (vec![&big[..7], &big[7..]], 3),
            (vec![&data[..]], 19),
            (vec![], 1),
        ] {
            for content_size in [true, false] {
                let mut want = Vec::new();
                let mut e = zstd::stream::write::Encoder::new(&mut want, level).unwrap();
                if content_size {
                    let n = pieces.iter().map(|p| p.len() as u64).sum();
                    e.set_pledged_src_size(Some(n)).unwrap();
                    e.include_contentsize(true).unwrap();
                    e.include_checksum(false).unwrap();
                }
                for p in &pieces {
                    std::io::Write::write_all(&mut e, p).unwrap();
                }
                e.finish().unwrap();
                let mut got = vec![9u8];
                zstd_encode(&pieces, level, content_size, &mut got).unwrap();
                assert_eq!(
                    got[1..],
                    want[..],
                    "level {level}, content size {content_size}"
                );
            }
        }
        // A claim beyond what the input can expand to is not allocated: it fails.
        assert!(zstd_decode_bounded(&z, 1 << 40, true).is_err());
    }
}
