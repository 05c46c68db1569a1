//! The encoding pipeline of the writer: arrays in steps, hashed, added to
//! `sha256_all` and encoded on the rayon pool while the calling thread writes the
//! previous step's text.

use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::armor;
use super::raw::{ArrLine, ChLine};
use super::write::{hmac, xor_at, Chunking};
use super::WtxtOptions;
use crate::error::{Error, Result};
use crate::model::TensorSource;
use crate::tensor::{TensorInfo, TensorView};
use crate::write::WriteSeek;

/// Raw bytes encoded per parallel batch of one big array (about: a segment is a whole
/// number of chunks, [`segment_len`]).
pub const SEGMENT: u64 = 16 << 20;
/// Raw bytes of small arrays grouped into one pipeline step.
pub const STEP: u64 = 4 << 20;
/// Raw bytes one task hashes and encodes (arrays up to this size stay on one core, so
/// the encoding pass finds them in cache after the SHA-256 pass).
pub const TASK: usize = 2 << 20;

/// The bytes of one segment of an array cut into `chunk`-byte chunks: the largest
/// multiple of `chunk` within [`SEGMENT`] (one chunk when a chunk is larger), so that
/// segments end on chunk boundaries and no chunk is cut in two.
pub fn segment_len(chunk: u64) -> usize {
    (SEGMENT / chunk).max(1).saturating_mul(chunk) as usize
}

fn joined<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> Result<T> {
    h.join().map_err(|_| {
        Error::new(
            crate::error::ErrorKind::Io,
            "wtxt: a worker thread panicked",
        )
    })
}

/// One array of a step, once hashed: its `arr` line and its bytes.
type Hashed<'v> = (String, TensorView<'v>);

/// Encodes every array, in steps of about [`STEP`] bytes: while this thread writes the
/// previous step's text, the pool hashes the step's arrays (SHA-256, HMAC), adds the
/// previous step's arrays to `sha256_all` and encodes the step's chunks. An array over
/// [`SEGMENT`] bytes is its own step and is encoded a segment at a time, its share of
/// `sha256_all` running beside. `fastxor` and `sha256_all` carry on across calls;
/// `total` is the bytes of arrays before these (their place in the XOR stream), and is
/// advanced past them. Writes no trailer ([`end_arrays`]).
pub fn encode_arrays<'s>(
    src: &'s dyn TensorSource,
    arrays: &[(&TensorInfo, u64, Chunking)],
    opts: &WtxtOptions,
    out: &mut dyn WriteSeek,
    all: &mut Sha256,
    fastxor: &mut u64,
    total: &mut u64,
) -> Result<()> {
    let mut pending: Vec<Hashed<'s>> = Vec::new();
    let mut unwritten: Vec<Vec<u8>> = Vec::new();
    let mut spare: Vec<Vec<u8>> = Vec::new();
    let mut i = 0;
    while i < arrays.len() {
        // The step: arrays up to STEP bytes (at least one).
        let mut j = i + 1;
        let mut size = arrays[i].1;
        while j < arrays.len() && size + arrays[j].1 <= STEP {
            size += arrays[j].1;
            j += 1;
        }
        let step = &arrays[i..j];
        let mut views = Vec::with_capacity(step.len());
        for (info, bytes, _) in step {
            let v = src.tensor(&info.name)?;
            let n = v.data()?.len() as u64;
            if n != *bytes {
                return Err(Error::invalid_input(format!(
                    "tensor {:?}: {n} bytes, {bytes} expected",
                    info.name
                )));
            }
            views.push(v);
        }
        let salts: Vec<[u8; 8]> = step
            .iter()
            .map(|_| match (&opts.hmac_key, opts.fixed_salt) {
                (None, _) => [0; 8],
                (Some(_), Some(s)) => s,
                (Some(_), None) => rand::random(),
            })
            .collect();
        let datas: Vec<&[u8]> = views.iter().map(|v| v.data().unwrap_or(&[])).collect();
        let firsts: Vec<usize> = datas
            .iter()
            .zip(step)
            .map(|(d, (_, _, ch))| d.len().min(segment_len(ch.chunk)))
            .collect();
        let bases: Vec<u64> = step
            .iter()
            .scan(*total, |t, (_, b, _)| {
                let base = *t;
                *t += b;
                Some(base)
            })
            .collect();
        let to_write = std::mem::take(&mut unwritten);
        let prev = std::mem::take(&mut pending);
        let key = &opts.hmac_key;
        // Per array: its SHA-256, HMAC and, per chunk of its first segment, the text and
        // fastxor share.
        let mut shas = vec![[0u8; 32]; datas.len()];
        let mut macs = vec![[0u8; 32]; datas.len()];
        let mut slots: Vec<Vec<(Vec<u8>, u64)>> = datas
            .iter()
            .zip(&firsts)
            .zip(step)
            .map(|((_, f), (_, _, ch))| {
                (0..f.div_ceil(ch.chunk as usize))
                    .map(|_| (spare.pop().unwrap_or_default(), 0))
                    .collect()
            })
            .collect();
        let all_ref = &mut *all;
        let written = rayon::in_place_scope(|s| {
            // The previous step's share of sha256_all, in order, on one task.
            s.spawn(|_| {
                for (line, v) in &prev {
                    all_ref.update(line.as_bytes());
                    all_ref.update(v.data().unwrap_or(&[]));
                }
            });
            for (k, ((sha, mac), slot)) in shas
                .iter_mut()
                .zip(macs.iter_mut())
                .zip(slots.iter_mut())
                .enumerate()
            {
                let (d, salt, chunk, base) =
                    (datas[k], salts[k], step[k].2.chunk as usize, bases[k]);
                let seg = &d[..firsts[k]];
                if seg.len() <= TASK {
                    // Small: one task hashes the array, then encodes its chunks while
                    // the bytes are still in this core's cache.
                    s.spawn(move |_| {
                        *sha = crate::util::sha256(d);
                        if let Some(key) = key {
                            *mac = hmac(key, &salt, d);
                        }
                        let mut scratch = Vec::new();
                        for (i, (t, x)) in slot.iter_mut().enumerate() {
                            let off = i * chunk;
                            let raw = &seg[off..(off + chunk).min(seg.len())];
                            *x = encode_into(t, raw, i as u64, off as u64, base, &mut scratch);
                        }
                    });
                } else {
                    s.spawn(move |_| *sha = crate::util::sha256(d));
                    if let Some(key) = key {
                        s.spawn(move |_| *mac = hmac(key, &salt, d));
                    }
                    let per = (TASK / chunk).max(1);
                    for (j, group) in slot.chunks_mut(per).enumerate() {
                        s.spawn(move |_| {
                            let mut scratch = Vec::new();
                            for (g, (t, x)) in group.iter_mut().enumerate() {
                                let i = j * per + g;
                                let off = i * chunk;
                                let raw = &seg[off..(off + chunk).min(seg.len())];
                                *x = encode_into(t, raw, i as u64, off as u64, base, &mut scratch);
                            }
                        });
                    }
                }
            }
            // Meanwhile this thread writes the previous step's text.
            to_write.iter().try_for_each(|t| out.write_all(t))
        });
        written?;
        // Written text buffers are reused (fresh ones would fault their pages in again).
        spare.extend(to_write.into_iter().filter(|v| v.capacity() >= 4096));
        let texts: Vec<Vec<Vec<u8>>> = slots
            .into_iter()
            .map(|v| {
                v.into_iter()
                    .map(|(t, x)| {
                        *fastxor ^= x;
                        t
                    })
                    .collect()
            })
            .collect();
        drop(prev);
        // The arr line of each array still to add to sha256_all (None: already added).
        let mut lines: Vec<Option<String>> = Vec::with_capacity(step.len());
        for (k, ((info, bytes, ch), text)) in step.iter().zip(texts).enumerate() {
            let line = ArrLine {
                name: info.name.clone(),
                dtype: info.dtype,
                shape: info.shape.clone(),
                bytes: *bytes,
                sha256: shas[k],
                hmac: macs[k],
                salt: salts[k],
            }
            .line();
            let mut head = format!("{line}\n");
            if let Some(idx) = &ch.idx {
                head.push_str(&idx.line());
                head.push('\n');
            }
            unwritten.push(head.into_bytes());
            unwritten.extend(text);
            let data = datas[k];
            if firsts[k] < data.len() {
                // A big array (alone in its step): the rest of its segments, with its
                // share of sha256_all on a thread of its own.
                for t in unwritten.drain(..) {
                    out.write_all(&t)?;
                }
                let all_ref = &mut *all;
                std::thread::scope(|ts| -> Result<()> {
                    let h = ts.spawn(|| {
                        all_ref.update(line.as_bytes());
                        all_ref.update(data);
                    });
                    let mut pos = firsts[k];
                    let mut r = Ok(());
                    while pos < data.len() && r.is_ok() {
                        let end = (pos + segment_len(ch.chunk)).min(data.len());
                        let texts = encode_segment(data, pos, end, ch.chunk, bases[k], fastxor);
                        r = texts.iter().try_for_each(|t| out.write_all(t));
                        pos = end;
                    }
                    joined(h)?;
                    Ok(r?)
                })?;
                unwritten.push(b"endarr\n".to_vec());
                lines.push(None);
            } else {
                unwritten.push(b"endarr\n".to_vec());
                lines.push(Some(line));
            }
        }
        drop(datas);
        for (line, v) in lines.into_iter().zip(views) {
            if let Some(line) = line {
                pending.push((line, v));
            }
        }
        *total += size;
        i = j;
    }
    // The last step's share of sha256_all, beside writing its text.
    let all_ref = &mut *all;
    std::thread::scope(|ts| -> Result<()> {
        let h = ts.spawn(|| {
            for (line, v) in &pending {
                all_ref.update(line.as_bytes());
                all_ref.update(v.data().unwrap_or(&[]));
            }
        });
        let written = unwritten.iter().try_for_each(|t| out.write_all(t));
        joined(h)?;
        Ok(written?)
    })?;
    Ok(())
}

/// The lines after the last array: `audit` (when set) and `endwtxt`.
pub fn end_arrays(opts: &WtxtOptions, out: &mut dyn WriteSeek) -> Result<()> {
    if let Some(audit) = &opts.audit {
        check_audit(audit)?;
        out.write_all(b"audit ")?;
        out.write_all(audit.as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.write_all(b"endwtxt\n")?;
    Ok(())
}

/// An `audit` value: printable ASCII `key=value` fields separated by single spaces, a
/// value either a token (no space, `=` or `"`) or a quoted string without `"`.
pub fn check_audit(audit: &str) -> Result<()> {
    let bad =
        |why: &str| crate::error::Error::invalid_input(format!("audit line {audit:?}: {why}"));
    if audit.is_empty() {
        return Err(bad("is empty"));
    }
    let b = audit.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let key_start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        if i == key_start || i >= b.len() || b[i] != b'=' {
            return Err(bad(
                "expects key=value fields (keys of letters, digits and _)",
            ));
        }
        i += 1;
        if i < b.len() && b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if !(0x20..0x7f).contains(&b[i]) {
                    return Err(bad("quoted values hold printable ASCII only"));
                }
                i += 1;
            }
            if i >= b.len() {
                return Err(bad("unterminated quote"));
            }
            i += 1;
        } else {
            let v = i;
            while i < b.len() && b[i] != b' ' {
                if !(0x21..0x7f).contains(&b[i]) || b[i] == b'=' || b[i] == b'"' {
                    return Err(bad(
                        "token values are printable ASCII without space, = or \"",
                    ));
                }
                i += 1;
            }
            if i == v {
                return Err(bad("empty value"));
            }
        }
        if i < b.len() {
            if b[i] != b' ' || i + 1 == b.len() {
                return Err(bad("fields are separated by single spaces"));
            }
            i += 1;
        }
    }
    Ok(())
}

/// The `ch` block of one chunk and its fastxor share (`base`: the array's offset in the
/// concatenation of all arrays).
fn encode_one(raw: &[u8], ix: u64, off: u64, base: u64, scratch: &mut Vec<u8>) -> (Vec<u8>, u64) {
    let mut t = Vec::new();
    let x = encode_into(&mut t, raw, ix, off, base, scratch);
    (t, x)
}

/// [`encode_one`] into a reused buffer (cleared first); returns the fastxor share.
fn encode_into(
    t: &mut Vec<u8>,
    raw: &[u8],
    ix: u64,
    off: u64,
    base: u64,
    scratch: &mut Vec<u8>,
) -> u64 {
    t.clear();
    let line = ChLine {
        ix,
        off,
        len: raw.len() as u64,
        sha256: crate::util::sha256(raw),
        crc32c: crate::util::crc32c(raw),
    }
    .line();
    t.reserve(line.len() + armor::text_len(raw.len() as u64) as usize + 8);
    t.extend_from_slice(line.as_bytes());
    t.push(b'\n');
    armor::encode_chunk(raw, scratch, t);
    t.extend_from_slice(b"endch\n");
    xor_at(raw, base + off)
}

/// Encodes the chunks of `data[from..to]` (chunk-aligned) as `ch` blocks, in parallel.
/// `base` is the array's offset in the concatenation of all arrays (for fastxor).
fn encode_segment(
    data: &[u8],
    from: usize,
    to: usize,
    chunk: u64,
    base: u64,
    fastxor: &mut u64,
) -> Vec<Vec<u8>> {
    let chunk = chunk as usize;
    let seg = &data[from..to];
    let first_ix = from / chunk;
    let parts: Vec<(Vec<u8>, u64)> = seg
        .par_chunks(chunk)
        .enumerate()
        .map_init(Vec::new, |scratch, (i, raw)| {
            let ix = (first_ix + i) as u64;
            encode_one(raw, ix, ix * chunk as u64, base, scratch)
        })
        .collect();
    parts
        .into_iter()
        .map(|(t, x)| {
            *fastxor ^= x;
            t
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_end_on_chunk_boundaries() {
        // 2 rows of 3000 f32: 24000-byte chunks, which do not divide 16 MiB.
        for chunk in [
            1,
            24_000,
            24_004,
            32 * 1024,
            SEGMENT - 1,
            SEGMENT,
            SEGMENT + 1,
        ] {
            let s = segment_len(chunk) as u64;
            assert_eq!(s % chunk, 0, "chunk {chunk}");
            assert!(s <= SEGMENT.max(chunk), "chunk {chunk}");
            assert!(s + chunk > SEGMENT || s == chunk, "chunk {chunk}");
        }
    }
}
