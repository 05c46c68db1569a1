//! [`FoldWriter`]: the streaming writer. Each chunk is first [`Encoded`] — compressed
//! (zstd, one frame with its content size), CRC-32C, SHA-256 and parity computed — which
//! needs no writer, so `write_chunks` encodes a batch of chunks on every core while
//! the previous batch is written; then its header, payload and parity are written in
//! order. `finish` writes the index and patches the global header, as pyfolds does.
//! Peak memory is two batches of compressed chunks (a batch is [`BATCH_BYTES`] of
//! input, or one chunk), not the file.

use std::io::{Seek, SeekFrom, Write};

use rayon::prelude::*;
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

/// Input bytes of one batch of chunks encoded in parallel (at least one chunk).
pub const BATCH_BYTES: u64 = 64 << 20;

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
}

/// Streams a FOLD file into `W`.
pub struct FoldWriter<W: Write + Seek> {
    w: W,
    base: u64,
    pos: u64,
    level: Option<i32>,
    ecc: Option<u8>,
    entries: Vec<IndexEntry>,
    /// [`BATCH_BYTES`] (smaller in tests, to cross batches).
    batch: u64,
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

/// A tensor's `STEN` chunk to write: its safetensors header and the view whose parts
/// follow it (in `order`).
pub struct TensorChunk<'a> {
    /// Chunk name.
    pub name: String,
    /// The safetensors header (length prefix included).
    pub head: Vec<u8>,
    /// The tensor.
    pub view: TensorView<'a>,
    /// Indices into `view.parts`, in payload order.
    pub order: Vec<usize>,
}

impl TensorChunk<'_> {
    fn pieces(&self) -> Vec<&[u8]> {
        std::iter::once(&self.head[..])
            .chain(
                self.order
                    .iter()
                    .map(|&i| self.view.parts[i].bytes.as_ref()),
            )
            .collect()
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
            batch: BATCH_BYTES,
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

    /// Adds `STEN` chunks in order, encoding them on the rayon pool a batch at a time
    /// while this thread writes the previous batch. `next` yields the chunks (an error
    /// ends the write).
    pub fn add_tensor_chunks<'a>(
        &mut self,
        mut next: impl FnMut() -> Option<Result<TensorChunk<'a>>>,
    ) -> Result<()> {
        let (level, ecc) = (self.level, self.ecc);
        let encode = |batch: &[TensorChunk<'a>]| -> Vec<Result<Encoded>> {
            batch
                .par_iter()
                .map(|c| Encoded::new(&c.pieces(), level, ecc))
                .collect()
        };
        let budget = self.batch;
        crate::util::pipeline::encode_while_writing(
            self,
            budget,
            |w, batch: &[TensorChunk<'a>]| {
                let c = match next()? {
                    Ok(c) => c,
                    Err(e) => return Some(Err(e)),
                };
                if let Err(e) = w.check_new(&c.name, *b"STEN") {
                    return Some(Err(e));
                }
                if batch.iter().any(|b| b.name == c.name) {
                    return Some(Err(Error::invalid_input(format!(
                        "duplicate chunk name {:?}",
                        c.name
                    ))));
                }
                let size = c.pieces().iter().map(|p| p.len() as u64).sum::<u64>();
                Some(Ok((c, size)))
            },
            encode,
            |w, chunks, enc| w.put_all(chunks, enc),
            "fold",
        )
    }

    fn put_all(&mut self, chunks: Vec<TensorChunk<'_>>, enc: Vec<Result<Encoded>>) -> Result<()> {
        for (c, e) in chunks.into_iter().zip(enc) {
            // A name of the batch written just before was not yet listed when it was read.
            self.check_new(&c.name, *b"STEN")?;
            let e = e.map_err(|e| e.at_subject(format!("tensor {:?}", c.name)))?;
            self.put(&c.name, *b"STEN", &c.pieces(), e)?;
        }
        Ok(())
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
        });
        Ok(())
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
                    algo.as_str(),
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
        let chunk = |v: &TensorView<'static>| {
            let (head, _) = super::super::sten::encode_header(v).unwrap();
            TensorChunk {
                name: v.info.name.clone(),
                head,
                view: v.clone(),
                order: vec![0],
            }
        };
        for (compression, ecc) in [
            (Compression::Zstd(3), Some(16)),
            (Compression::None, Some(4)),
            (Compression::Zstd(1), None),
        ] {
            let mut one = FoldWriter::new(Cursor::new(Vec::new()), compression, ecc).unwrap();
            for v in &views {
                let c = chunk(v);
                one.add_chunk(&c.name, *b"STEN", &c.pieces()).unwrap();
            }
            let one = one.finish(&Map::new(), 0.0).unwrap().into_inner();
            for batch in [1, 10_000, BATCH_BYTES] {
                let mut w = FoldWriter::new(Cursor::new(Vec::new()), compression, ecc).unwrap();
                w.batch = batch;
                let mut it = views.iter();
                w.add_tensor_chunks(|| it.next().map(|v| Ok(chunk(v))))
                    .unwrap();
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
