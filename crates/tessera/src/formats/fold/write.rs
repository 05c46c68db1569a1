//! [`FoldWriter`]: the streaming writer. Each chunk is written as it comes (header
//! placeholder, payload streamed through zstd, CRC-32C, SHA-256 and the parity encoder,
//! parity, then the chunk header patched); `finish` writes the index and patches the
//! global header, as pyfolds does. Peak memory is one chunk's parity plus zstd's
//! buffers, not the payload.

use std::io::{Seek, SeekFrom, Write};

use sha2::Digest as _;

use super::ecc;
use super::raw::{
    ChunkHeader, FileHeader, CHUNK_HEADER_LEN, FLAG_COMP_NONE, FLAG_COMP_ZSTD, FORMAT_NAME,
    HEADER_LEN, MAX_CHUNK_SIZE, VERSION,
};
use crate::convert::Compression;
use crate::error::{Error, Result};
use crate::metadata::{Map, Value};
use crate::util::pyjson::{dumps_map, DumpOptions};

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
}

/// Everything the payload passes through on its way to the file.
struct Sink<'a, W: Write> {
    w: &'a mut W,
    count: u64,
    crc: u32,
    sha: sha2::Sha256,
    ecc: Option<ecc::Encoder>,
}

impl<W: Write> Write for Sink<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.w.write(buf)?;
        let b = &buf[..n];
        self.count += n as u64;
        self.crc = crc32c::crc32c_append(self.crc, b);
        self.sha.update(b);
        if let Some(e) = &mut self.ecc {
            e.update(b);
        }
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
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
                    "--ecc {n}: Reed-Solomon parity must be 1..=254 bytes per block"
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

    /// Adds a chunk whose payload is the concatenation of `pieces`.
    pub fn add_chunk(&mut self, name: &str, ctype: [u8; 4], pieces: &[&[u8]]) -> Result<()> {
        if self.entries.iter().any(|e| e.name == name) {
            return Err(Error::invalid_input(format!(
                "duplicate chunk name {name:?}"
            )));
        }
        if !ctype.iter().all(|b| b.is_ascii() && *b != 0) {
            return Err(Error::invalid_input("ctype must be 4 ASCII characters"));
        }
        let uncomp_len: u64 = pieces.iter().map(|p| p.len() as u64).sum();
        if uncomp_len > MAX_CHUNK_SIZE {
            return Err(Error::unsupported(format!(
                "chunk {name:?} is {uncomp_len} bytes; FOLD chunks are limited to {MAX_CHUNK_SIZE} (spec §2.1)"
            )));
        }
        let offset = self.pos;
        self.w.write_all(&[0u8; CHUNK_HEADER_LEN as usize])?;
        let mut sink = Sink {
            w: &mut self.w,
            count: 0,
            crc: 0,
            sha: sha2::Sha256::new(),
            ecc: self.ecc.map(ecc::Encoder::new).transpose()?,
        };
        let flags = match self.level {
            None => {
                for p in pieces {
                    sink.write_all(p)?;
                }
                FLAG_COMP_NONE
            }
            Some(level) => {
                let mut z = zstd::stream::write::Encoder::new(&mut sink, level)?;
                z.set_pledged_src_size(Some(uncomp_len))?;
                z.include_contentsize(true)?;
                z.include_checksum(false)?;
                for p in pieces {
                    z.write_all(p)?;
                }
                z.finish()?;
                FLAG_COMP_ZSTD
            }
        };
        let Sink {
            count: comp_len,
            crc,
            sha,
            ecc: enc,
            ..
        } = sink;
        let parity = enc.map(ecc::Encoder::finish).unwrap_or_default();
        if comp_len > MAX_CHUNK_SIZE || parity.len() as u64 > MAX_CHUNK_SIZE {
            return Err(Error::unsupported(format!(
                "chunk {name:?}: {comp_len} stored bytes and {} parity bytes; FOLD chunks are limited to {MAX_CHUNK_SIZE}",
                parity.len()
            )));
        }
        self.w.write_all(&parity)?;
        let header = ChunkHeader {
            ctype,
            flags,
            uncomp_len,
            comp_len,
            crc32c: crc,
            ecc_len: parity.len() as u32,
        };
        let end = self.base + offset + CHUNK_HEADER_LEN + comp_len + parity.len() as u64;
        self.w.seek(SeekFrom::Start(self.base + offset))?;
        self.w.write_all(&header.to_bytes())?;
        self.w.seek(SeekFrom::Start(end))?;
        self.pos = end - self.base;
        self.entries.push(IndexEntry {
            name: name.to_string(),
            ctype: String::from_utf8_lossy(&ctype).into_owned(),
            flags,
            offset,
            comp_len,
            uncomp_len,
            crc32c: crc,
            sha256: crate::util::hex(&sha.finalize()),
            ecc_len: parity.len() as u64,
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
