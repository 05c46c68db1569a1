//! [`FoldWriter`]: the streaming writer. Each chunk is first [`Encoded`] — compressed
//! (zstd, one frame with its content size), CRC-32C, SHA-256 and parity computed — which
//! needs no writer, so it is the encoding companion of [`StenStream`], the writer of
//! tensors the driver ([`crate::write::drive`]) feeds: a batch of tensors is encoded on
//! every core while the previous batch is written; then each chunk's header, payload
//! and parity are written in order. `finish` writes the index and patches the global
//! header, as pyfolds does. Peak memory is two batches of compressed chunks (a batch is
//! [`crate::write::stream::READ_AHEAD`] of input, or one tensor), not the file.

use std::borrow::Cow;
use std::io::{Seek, SeekFrom, Write};

use sha2::Digest as _;

use super::ecc;
use super::raw::{
    ChunkHeader, FileHeader, CHUNK_HEADER_LEN, FLAG_COMP_NONE, FLAG_COMP_ZSTD, FORMAT_NAME,
    HEADER_LEN, MAX_CHUNK_SIZE, VERSION,
};
use crate::error::{Error, Result};
use crate::metadata::{Map, Value};
use crate::options::Compression;
use crate::tensor::TensorView;
use crate::util::pyjson::{dumps_map, DumpOptions};
use crate::write::{Encoder, StreamWriter};

struct IndexEntry {
    name: String,
    ctype: String,
    flags: u32,
    offset: u64,
    comp_len: u64,
    uncomp_len: u64,
    crc32c: u32,
    sha256: String,
    ecc_len: u64,
    /// A copied chunk's own `ecc_algo` (the writer's otherwise).
    ecc_algo: Option<String>,
}

/// What [`FoldWriter::copy_chunk`] did with a stored chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Copied {
    /// Header, payload and parity as stored.
    AsStored,
    /// The payload as stored, the parity computed anew.
    NewParity,
    /// Stored raw in the source, compressed now.
    Compressed,
}

/// Streams a FOLD file into `W`.
pub struct FoldWriter<W: Write + Seek> {
    w: W,
    base: u64,
    pos: u64,
    level: Option<i32>,
    ecc: Option<u8>,
    entries: Vec<IndexEntry>,
}

/// A chunk ready to be written: its compressed payload (none when stored as it is:
/// the caller's pieces are written), digests and parity. Made on any thread.
pub struct Encoded {
    flags: u32,
    uncomp_len: u64,
    zstd: Option<Vec<u8>>,
    comp_len: u64,
    crc: u32,
    sha: [u8; 32],
    parity: Vec<u8>,
}

impl Encoded {
    /// Compresses (with `level`) the concatenation of `pieces`, hashes the stored bytes
    /// and computes their parity (`ecc` parity bytes per block).
    pub fn new(pieces: &[&[u8]], level: Option<i32>, ecc: Option<u8>) -> Result<Encoded> {
        let uncomp_len: u64 = pieces.iter().map(|p| p.len() as u64).sum();
        if uncomp_len > MAX_CHUNK_SIZE {
            return Err(Error::unsupported(format!(
                "chunk is {uncomp_len} bytes; FOLD chunks are limited to {MAX_CHUNK_SIZE} (spec §2.1)"
            )));
        }
        let zstd = match level {
            None => None,
            Some(level) => {
                let mut z = Vec::new();
                crate::util::zstd_encode(pieces, level, true, &mut z)?;
                Some(z)
            }
        };
        let stored: Vec<&[u8]> = match &zstd {
            Some(z) => vec![z],
            None => pieces.to_vec(),
        };
        let mut crc = 0u32;
        let mut sha = sha2::Sha256::new();
        let mut enc = ecc.map(ecc::Encoder::new).transpose()?;
        let mut comp_len = 0u64;
        // One pass per 1 MiB, so each layer finds the bytes in cache.
        for piece in stored {
            comp_len += piece.len() as u64;
            for b in piece.chunks(1 << 20) {
                crc = crc32c::crc32c_append(crc, b);
                sha.update(b);
                if let Some(e) = &mut enc {
                    e.update(b);
                }
            }
        }
        let parity = enc.map(ecc::Encoder::finish).unwrap_or_default();
        if comp_len > MAX_CHUNK_SIZE || parity.len() as u64 > MAX_CHUNK_SIZE {
            return Err(Error::unsupported(format!(
                "{comp_len} stored bytes and {} parity bytes; FOLD chunks are limited to {MAX_CHUNK_SIZE}",
                parity.len()
            )));
        }
        Ok(Encoded {
            flags: if level.is_some() {
                FLAG_COMP_ZSTD
            } else {
                FLAG_COMP_NONE
            },
            uncomp_len,
            zstd,
            comp_len,
            crc,
            sha: sha.finalize().into(),
            parity,
        })
    }
}

impl<W: Write + Seek> FoldWriter<W> {
    /// Starts a file at `w`'s position: writes the header with `index_off = 0` (an
    /// unfinished file is rejected by every reader).
    pub fn new(mut w: W, compression: Compression, ecc: Option<u8>) -> Result<FoldWriter<W>> {
        let ecc = match ecc {
            None | Some(0) => None,
            Some(n) if n <= 254 => Some(n),
            Some(n) => {
                return Err(Error::invalid_input(format!(
                    "ecc {n}: Reed-Solomon parity must be 1..=254 bytes per block"
                )))
            }
        };
        let level = match compression {
            Compression::None => None,
            Compression::Zstd(l) => Some(l),
        };
        let base = w.stream_position()?;
        let h = FileHeader {
            header_len: HEADER_LEN as u32,
            index_off: 0,
            index_len: 0,
        };
        w.write_all(&h.to_bytes())?;
        Ok(FoldWriter {
            w,
            base,
            pos: HEADER_LEN,
            level,
            ecc,
            entries: Vec::new(),
        })
    }

    fn check_new(&self, name: &str, ctype: [u8; 4]) -> Result<()> {
        if self.entries.iter().any(|e| e.name == name) {
            return Err(Error::invalid_input(format!(
                "duplicate chunk name {name:?}"
            )));
        }
        if !ctype.iter().all(|b| b.is_ascii() && *b != 0) {
            return Err(Error::invalid_input("ctype must be 4 ASCII characters"));
        }
        Ok(())
    }

    /// Adds a chunk whose payload is the concatenation of `pieces`.
    pub fn add_chunk(&mut self, name: &str, ctype: [u8; 4], pieces: &[&[u8]]) -> Result<()> {
        self.check_new(name, ctype)?;
        let enc = Encoded::new(pieces, self.level, self.ecc)
            .map_err(|e| e.at_subject(format!("chunk {name:?}")))?;
        self.put(name, ctype, pieces, enc)
    }

    /// Writes an encoded chunk: header, payload (the zstd frame, or `pieces`), parity.
    fn put(&mut self, name: &str, ctype: [u8; 4], pieces: &[&[u8]], e: Encoded) -> Result<()> {
        let offset = self.pos;
        let header = ChunkHeader {
            ctype,
            flags: e.flags,
            uncomp_len: e.uncomp_len,
            comp_len: e.comp_len,
            crc32c: e.crc,
            ecc_len: e.parity.len() as u32,
        };
        self.w.write_all(&header.to_bytes())?;
        match &e.zstd {
            Some(z) => self.w.write_all(z)?,
            None => {
                for p in pieces {
                    self.w.write_all(p)?;
                }
            }
        }
        self.w.write_all(&e.parity)?;
        self.pos = offset + CHUNK_HEADER_LEN + e.comp_len + e.parity.len() as u64;
        self.entries.push(IndexEntry {
            name: name.to_string(),
            ctype: String::from_utf8_lossy(&ctype).into_owned(),
            flags: e.flags,
            offset,
            comp_len: e.comp_len,
            uncomp_len: e.uncomp_len,
            crc32c: e.crc,
            sha256: crate::util::hex(&e.sha),
            ecc_len: e.parity.len() as u64,
            ecc_algo: None,
        });
        Ok(())
    }

    /// Copies a chunk another FOLD file stores ([`crate::tensor::StoredChunk`]: its
    /// header, stored payload and parity) under `name`, byte for byte, after checking
    /// that the header agrees with the bytes and that the payload has the CRC-32C of the
    /// header and the SHA-256 of the source's index entry. With `ecc` (`Some(n)`, as the
    /// writer's `ecc` option; `n = 0`: none) the parity is computed anew over the same
    /// payload. A chunk stored raw is compressed when this writer compresses (the
    /// stored form is then not kept: it is encoded as [`FoldWriter::add_chunk`] does).
    pub fn copy_chunk(
        &mut self,
        name: &str,
        stored: &crate::tensor::StoredChunk<'_>,
        ecc: Option<u8>,
    ) -> Result<Copied> {
        let subject = || format!("chunk {name:?}");
        if stored.format != crate::format::Format::Fold {
            return Err(Error::invalid_input(format!(
                "a {} chunk cannot be copied into FOLD",
                stored.format.title()
            ))
            .at_subject(subject()));
        }
        let joined: Vec<u8>;
        let (head, payload, parity): (&[u8], &[u8], &[u8]) = match stored.pieces.as_slice() {
            [h, p, e] if h.len() == CHUNK_HEADER_LEN as usize => (h, p, e),
            pieces => {
                joined = pieces.iter().flat_map(|p| p.iter().copied()).collect();
                let h = joined.get(..CHUNK_HEADER_LEN as usize).ok_or_else(|| {
                    Error::malformed("stored chunk shorter than its header").at_subject(subject())
                })?;
                let rest = &joined[h.len()..];
                let comp = ChunkHeader::parse(h)?.comp_len;
                let comp = usize::try_from(comp)
                    .ok()
                    .filter(|&c| c <= rest.len())
                    .ok_or_else(|| {
                        Error::malformed("stored chunk shorter than its comp_len")
                            .at_subject(subject())
                    })?;
                (h, &rest[..comp], &rest[comp..])
            }
        };
        let mut header = ChunkHeader::parse(head).map_err(|e| e.at_subject(subject()))?;
        self.check_new(name, header.ctype)?;
        if header.comp_len != payload.len() as u64
            || u64::from(header.ecc_len) != parity.len() as u64
            || header.uncomp_len > MAX_CHUNK_SIZE
            || header.comp_len > MAX_CHUNK_SIZE
            || !matches!(header.flags, FLAG_COMP_NONE | FLAG_COMP_ZSTD)
            || (header.flags == FLAG_COMP_NONE && header.uncomp_len != header.comp_len)
        {
            return Err(
                Error::malformed("stored chunk: its header does not describe its bytes")
                    .at_subject(subject()),
            );
        }
        if crc32c::crc32c(payload) != header.crc32c {
            return Err(Error::integrity("stored chunk: CRC-32C mismatch").at_subject(subject()));
        }
        let sha = crate::util::hex(&crate::util::sha256(payload));
        if let Some(want) = stored.params.get("sha256").and_then(Value::as_str) {
            if !want.eq_ignore_ascii_case(&sha) {
                return Err(
                    Error::integrity("stored chunk: SHA-256 mismatch").at_subject(subject())
                );
            }
        }
        if header.flags == FLAG_COMP_NONE && self.level.is_some() {
            // Compressed now; the parity asked for, else the kind the source's had.
            let nsym = match ecc {
                Some(n) => Some(n).filter(|&n| n > 0),
                None if parity.is_empty() => None,
                None => (stored.params.get("ecc_algo").and_then(Value::as_str))
                    .and_then(|a| ecc::parse_algo(a).ok().flatten()),
            };
            let enc =
                Encoded::new(&[payload], self.level, nsym).map_err(|e| e.at_subject(subject()))?;
            let algo = ecc::algo_name(nsym);
            self.put(name, header.ctype, &[payload], enc)?;
            if let Some(last) = self.entries.last_mut() {
                last.ecc_algo = Some(algo);
            }
            return Ok(Copied::Compressed);
        }
        let (parity, ecc_algo): (Cow<'_, [u8]>, String) = match ecc {
            None => {
                let algo = stored
                    .params
                    .get("ecc_algo")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| ecc::algo_name(None));
                (Cow::Borrowed(parity), algo)
            }
            Some(0) => (Cow::Borrowed(&[][..]), ecc::algo_name(None)),
            Some(n) => {
                let mut enc = ecc::Encoder::new(n)?;
                enc.update(payload);
                (Cow::Owned(enc.finish()), ecc::algo_name(Some(n)))
            }
        };
        let how = match ecc {
            None => Copied::AsStored,
            Some(_) => Copied::NewParity,
        };
        header.ecc_len = u32::try_from(parity.len())
            .map_err(|_| Error::unsupported("parity too long").at_subject(subject()))?;
        let offset = self.pos;
        self.w.write_all(&header.to_bytes())?;
        self.w.write_all(payload)?;
        self.w.write_all(&parity)?;
        self.pos = offset + CHUNK_HEADER_LEN + header.comp_len + parity.len() as u64;
        self.entries.push(IndexEntry {
            name: name.to_string(),
            ctype: String::from_utf8_lossy(&header.ctype).into_owned(),
            flags: header.flags,
            offset,
            comp_len: header.comp_len,
            uncomp_len: header.uncomp_len,
            crc32c: header.crc32c,
            sha256: sha,
            ecc_len: parity.len() as u64,
            ecc_algo: Some(ecc_algo),
        });
        Ok(how)
    }

    /// Writes the index (metadata + `chunk_hashes` + `manifest_hash`, then the chunk
    /// list) and patches the global header. Returns the writer, positioned at the end.
    pub fn finish(mut self, metadata: &Map, created_at_unix: f64) -> Result<W> {
        let mut meta = metadata.clone();
        meta.remove("chunk_hashes");
        meta.remove("manifest_hash");
        let hashes: Map = self
            .entries
            .iter()
            .map(|e| (e.name.clone(), Value::Str(e.sha256.clone())))
            .collect();
        meta.insert("chunk_hashes", hashes);
        let mh = super::check::manifest_hash(&meta);
        meta.insert("manifest_hash", mh);
        let algo = ecc::algo_name(self.ecc);
        let chunks: Vec<Value> = self
            .entries
            .iter()
            .map(|e| {
                let mut m = Map::new();
                m.insert("name", e.name.as_str());
                m.insert("ctype", e.ctype.as_str());
                m.insert("flags", u64::from(e.flags));
                m.insert("offset", e.offset);
                m.insert("header_len", CHUNK_HEADER_LEN);
                m.insert("comp_len", e.comp_len);
                m.insert("uncomp_len", e.uncomp_len);
                m.insert("crc32c", u64::from(e.crc32c));
                m.insert("sha256", e.sha256.as_str());
                m.insert(
                    "ecc_algo",
                    // As pyfolds: the codec's name even when an empty payload has no parity.
                    e.ecc_algo.as_deref().unwrap_or(algo.as_str()),
                );
                m.insert("ecc_len", e.ecc_len);
                Value::Map(m)
            })
            .collect();
        let mut index = Map::new();
        index.insert("format", FORMAT_NAME);
        index.insert("version", VERSION);
        index.insert("created_at_unix", created_at_unix);
        index.insert("metadata", meta);
        index.insert("chunks", chunks);
        let text = dumps_map(&index, DumpOptions::INDEX);
        let index_off = self.pos;
        self.w.write_all(text.as_bytes())?;
        let end = self.base + index_off + text.len() as u64;
        self.w.seek(SeekFrom::Start(self.base))?;
        let h = FileHeader {
            header_len: HEADER_LEN as u32,
            index_off,
            index_len: text.len() as u64,
        };
        self.w.write_all(&h.to_bytes())?;
        self.w.seek(SeekFrom::Start(end))?;
        self.w.flush()?;
        Ok(self.w)
    }
}

/// A tensor's `STEN` chunk as the encoding companion makes it: the safetensors header
/// (length prefix included), the positions of the view's parts in payload order, and
/// the chunk encoded.
pub struct StenChunk {
    head: Vec<u8>,
    order: Vec<usize>,
    enc: Encoded,
}

/// The `STEN` chunk of `view` (compressed with `level`, `ecc` parity bytes per block).
fn sten_chunk(view: &TensorView<'_>, level: Option<i32>, ecc: Option<u8>) -> Result<StenChunk> {
    view.validate()?;
    let (head, parts) = super::sten::encode_header(view)?;
    // The parts' positions in the view (the pieces are its parts' bytes).
    let order = parts
        .iter()
        .map(|b| {
            view.parts
                .iter()
                .position(|p| std::ptr::eq(p.bytes.as_ref(), *b))
                .ok_or_else(|| Error::invalid_input("a STEN piece is not a part"))
        })
        .collect::<Result<Vec<usize>>>()?;
    let enc = Encoded::new(&pieces(&head, &order, view), level, ecc)?;
    Ok(StenChunk { head, order, enc })
}

/// The payload of a `STEN` chunk in pieces: its header, then the parts in `order`.
fn pieces<'a>(head: &'a [u8], order: &[usize], view: &'a TensorView<'_>) -> Vec<&'a [u8]> {
    std::iter::once(head)
        .chain(order.iter().map(|&i| view.parts[i].bytes.as_ref()))
        .collect()
}

/// A [`FoldWriter`] taking tensors (one `STEN` chunk each, named after the tensor) in
/// `order`, from the driver: the chunks are encoded on the pool ([`Encoded`]), then
/// written in order. `finish` gives the writer back, for its index.
pub struct StenStream<W: Write + Seek> {
    /// The file.
    pub w: FoldWriter<W>,
    /// The tensors' names, in the order they are written.
    pub order: Vec<String>,
}

impl<W: Write + Seek> StreamWriter for StenStream<W> {
    type Encoded = StenChunk;
    type Done = FoldWriter<W>;
    fn order(&self) -> Vec<String> {
        self.order.clone()
    }
    fn encoder(&self) -> Option<Encoder<StenChunk>> {
        let (level, ecc) = (self.w.level, self.w.ecc);
        Some(Box::new(move |view: &TensorView<'_>| {
            sten_chunk(view, level, ecc)
                .map_err(|e| e.at_subject(format!("tensor {:?}", view.info.name)))
        }))
    }
    fn write_tensor(
        &mut self,
        name: &str,
        view: TensorView<'_>,
        chunk: Option<StenChunk>,
    ) -> Result<()> {
        let subject = || format!("tensor {name:?}");
        self.w.check_new(name, *b"STEN")?;
        let c = match chunk {
            Some(c) => c,
            None => {
                sten_chunk(&view, self.w.level, self.w.ecc).map_err(|e| e.at_subject(subject()))?
            }
        };
        let pieces = pieces(&c.head, &c.order, &view);
        self.w.put(name, *b"STEN", &pieces, c.enc)
    }
    fn finish(self) -> Result<FoldWriter<W>> {
        Ok(self.w)
    }
}

/// Seconds since the epoch of `YYYY-MM-DDTHH:MM:SSZ`.
pub fn parse_timestamp(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    // Days from civil (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + mi * 60 + se) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chunks encoded in parallel batches come out byte for byte as one at a time.
    #[test]
    fn batches_write_what_one_at_a_time_writes() {
        use crate::dtype::DType;
        use crate::tensor::TensorInfo;
        use std::io::Cursor;
        let views: Vec<TensorView<'static>> = (0..6u8)
            .map(|i| {
                let data: Vec<u8> = (0..3000u32 * u32::from(i + 1))
                    .map(|x| (x * 5 + u32::from(i)) as u8 % 11)
                    .collect();
                let n = data.len() as u64;
                TensorView::dense(
                    TensorInfo::dense(format!("t{i}"), DType::U8, vec![n]),
                    data.into(),
                )
                .unwrap()
            })
            .collect();
        let mut model = crate::model::Model::new();
        for v in &views {
            model.push(v.clone()).unwrap();
        }
        let order: Vec<String> = views.iter().map(|v| v.info.name.clone()).collect();
        for (compression, ecc) in [
            (Compression::Zstd(3), Some(16)),
            (Compression::None, Some(4)),
            (Compression::Zstd(1), None),
        ] {
            let mut one = FoldWriter::new(Cursor::new(Vec::new()), compression, ecc).unwrap();
            for v in &views {
                let (head, _) = super::super::sten::encode_header(v).unwrap();
                one.add_chunk(&v.info.name, *b"STEN", &[&head, v.data().unwrap()])
                    .unwrap();
            }
            let one = one.finish(&Map::new(), 0.0).unwrap().into_inner();
            for batch in [1, 10_000, crate::write::stream::READ_AHEAD] {
                let w = StenStream {
                    w: FoldWriter::new(Cursor::new(Vec::new()), compression, ecc).unwrap(),
                    order: order.clone(),
                };
                let w = crate::write::stream::drive_by(&model, w, batch).unwrap();
                let got = w.finish(&Map::new(), 0.0).unwrap().into_inner();
                assert_eq!(got, one, "batch {batch}");
            }
        }
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(
            parse_timestamp("2026-11-22T00:30:10Z"),
            Some(1_795_307_410.0)
        );
        assert_eq!(parse_timestamp("2000-02-29T12:00:00Z"), Some(951_825_600.0));
        assert_eq!(parse_timestamp("2026-13-01T00:00:00Z"), None);
        assert_eq!(parse_timestamp("yesterday"), None);
    }
}
