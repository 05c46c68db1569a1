//! The encoding companion of the WTXT writer ([`ArrayEncoder`]): what the rayon pool
//! makes of one array before the writer takes it — its SHA-256 and HMAC (the `arr`
//! line) and the `ch` blocks of its first segment with their fastxor shares — run by
//! the driver ([`crate::write::drive`]) on the arrays of a batch while the writing
//! thread writes the previous batch. The writer adds each array to `sha256_all` (beside
//! writing its text) and encodes the rest of an array over one segment
//! ([`encode_segment`], on the pool) a segment at a time, so such an array's text is
//! never held whole.

use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use super::armor;
use super::raw::{ArrLine, ChLine};
use super::write::{hmac, xor_at, Chunking};
use super::WtxtOptions;
use crate::error::{Error, Result};
use crate::tensor::TensorView;
use crate::write::WriteSeek;

/// Raw bytes of one segment of a big array, encoded in parallel (about: a segment is a
/// whole number of chunks, [`segment_len`]).
pub const SEGMENT: u64 = 16 << 20;
/// Raw bytes of arrays read and encoded as one batch of the driver
/// ([`crate::write::StreamWriter::read_ahead`]): the text of a batch is written while
/// it is still in cache.
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

/// One array as the pool made it ([`ArrayEncoder::encode`]).
pub struct EncodedArray {
    /// The `arr` line (no newline): what `sha256_all` takes before the bytes.
    pub line: String,
    /// The `ch` blocks of the first segment.
    pub texts: Vec<Vec<u8>>,
    /// The XOR of their fastxor shares.
    pub xor: u64,
    /// Raw bytes they cover (the whole array unless it is over one segment).
    pub first: usize,
}

/// Where an array sits: its byte length, its place in the concatenation of all arrays
/// (for fastxor) and its chunking.
#[derive(Debug, Clone, Copy)]
pub struct Placed {
    /// Raw bytes.
    pub bytes: u64,
    /// Offset in the concatenation of all arrays.
    pub base: u64,
    /// How it is cut into chunks.
    pub chunking: Chunking,
}

/// Where each array's HMAC salt comes from (spec §10: "rotate `salt` per generation so
/// HMACs don't collide across identical content").
#[derive(Clone, Debug)]
pub enum Salts {
    /// A fresh random salt per array (the default).
    Random,
    /// One given salt for every array of every generation (`fixed_salt`: byte-exact test
    /// vectors; identical content in two generations gets the same HMAC).
    Fixed([u8; 8]),
    /// Reproducible and rotating (`salt_seed`): the first 8 bytes of
    /// SHA-256(`"WTXT salt\0"` ‖ seed ‖ generation as u64 LE ‖ array name), so the same
    /// input gives the same bytes while identical content in two generations, or two
    /// arrays of one, gets different HMACs.
    Derived {
        /// The seed.
        seed: Vec<u8>,
        /// The generation written.
        generation: u64,
    },
}

impl Salts {
    /// The salt of array `name`.
    pub fn salt(&self, name: &str) -> [u8; 8] {
        match self {
            Salts::Random => rand::random(),
            Salts::Fixed(s) => *s,
            Salts::Derived { seed, generation } => {
                use sha2::Digest;
                let mut h = sha2::Sha256::new();
                h.update(b"WTXT salt\0");
                h.update((seed.len() as u64).to_le_bytes());
                h.update(seed);
                h.update(generation.to_le_bytes());
                h.update(name.as_bytes());
                let d = h.finalize();
                let mut out = [0u8; 8];
                out.copy_from_slice(&d[..8]);
                out
            }
        }
    }
}

/// The encoding companion: the writer's plan (array name → [`Placed`]) and keys. Text
/// buffers written by the writer come back to it ([`ArrayEncoder::reuse`]): fresh ones
/// would fault their pages in again.
#[derive(Clone)]
pub struct ArrayEncoder {
    plan: Arc<std::collections::HashMap<String, Placed>>,
    hmac_key: Option<Vec<u8>>,
    salts: Salts,
    spare: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl ArrayEncoder {
    /// The companion of a writer whose arrays are `plan`.
    pub fn new(
        plan: std::collections::HashMap<String, Placed>,
        hmac_key: Option<Vec<u8>>,
        salts: Salts,
    ) -> ArrayEncoder {
        ArrayEncoder {
            plan: Arc::new(plan),
            hmac_key,
            salts,
            spare: Arc::default(),
        }
    }

    /// Where array `name` starts in the concatenation of all arrays (0 if unplanned).
    pub fn base(&self, name: &str) -> u64 {
        self.plan.get(name).map_or(0, |p| p.base)
    }

    /// Gives written text buffers back for reuse.
    pub fn reuse(&self, texts: Vec<Vec<u8>>) {
        if let Ok(mut spare) = self.spare.lock() {
            spare.extend(texts.into_iter().filter(|v| v.capacity() >= 4096));
        }
    }

    fn buffer(&self) -> Vec<u8> {
        self.spare
            .lock()
            .ok()
            .and_then(|mut s| s.pop())
            .unwrap_or_default()
    }

    /// Hashes one array (SHA-256, HMAC with a fresh salt) and encodes the chunks of its
    /// first segment: in one task when that segment is at most [`TASK`] bytes (the
    /// chunks found in cache after the hash), else the hashes and groups of chunks as
    /// tasks of their own.
    pub fn encode(&self, view: &TensorView<'_>) -> Result<EncodedArray> {
        let info = &view.info;
        let p = self.plan.get(&info.name).ok_or_else(|| {
            Error::invalid_input(format!("tensor {:?} is not planned", info.name))
        })?;
        let d = view.data()?;
        if d.len() as u64 != p.bytes {
            return Err(Error::invalid_input(format!(
                "tensor {:?}: {} bytes, {} expected",
                info.name,
                d.len(),
                p.bytes
            )));
        }
        let salt = match (&self.hmac_key, &self.salts) {
            (None, _) => [0; 8],
            (Some(_), salts) => salts.salt(&info.name),
        };
        let chunk = p.chunking.chunk as usize;
        let first = d.len().min(segment_len(p.chunking.chunk));
        let seg = &d[..first];
        let base = p.base;
        let mut slots: Vec<(Vec<u8>, u64)> = (0..first.div_ceil(chunk))
            .map(|_| (self.buffer(), 0))
            .collect();
        let (mut sha, mut mac) = ([0u8; 32], [0u8; 32]);
        let key = self.hmac_key.as_deref();
        let encode_group = |j: usize, per: usize, group: &mut [(Vec<u8>, u64)]| {
            let mut scratch = Vec::new();
            for (g, (t, x)) in group.iter_mut().enumerate() {
                let i = j * per + g;
                let off = i * chunk;
                let raw = &seg[off..(off + chunk).min(seg.len())];
                *x = encode_into(t, raw, i as u64, off as u64, base, &mut scratch);
            }
        };
        if seg.len() <= TASK {
            sha = crate::util::sha256(d);
            if let Some(key) = key {
                mac = hmac(key, &salt, d);
            }
            let n = slots.len();
            encode_group(0, n, &mut slots);
        } else {
            let per = (TASK / chunk).max(1);
            rayon::scope(|s| {
                let (sha, mac) = (&mut sha, &mut mac);
                s.spawn(move |_| *sha = crate::util::sha256(d));
                if let Some(key) = key {
                    s.spawn(move |_| *mac = hmac(key, &salt, d));
                }
                for (j, group) in slots.chunks_mut(per).enumerate() {
                    let encode_group = &encode_group;
                    s.spawn(move |_| encode_group(j, per, group));
                }
            });
        }
        let line = ArrLine {
            name: info.name.clone(),
            dtype: info.dtype,
            shape: info.shape.clone(),
            bytes: p.bytes,
            sha256: sha,
            hmac: mac,
            salt,
        }
        .line();
        let mut xor = 0u64;
        let texts = slots
            .into_iter()
            .map(|(t, x)| {
                xor ^= x;
                t
            })
            .collect();
        Ok(EncodedArray {
            line,
            texts,
            xor,
            first,
        })
    }
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
pub fn encode_segment(
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
