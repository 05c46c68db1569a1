//! The zip side of a `torch.save` archive: its records, read by range.
//!
//! The central directory is parsed by the `zip` crate through a `Read + Seek` adapter
//! over the source, so opening reads the directory and the local headers only; record
//! bytes are then read by range (borrowed from an in-memory source when stored).

use std::borrow::Cow;
use std::io::{Read, Seek, SeekFrom};

use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::source::SourceRef;

/// How a record is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Raw (what torch writes).
    Stored,
    /// Deflated (an archive re-packed by another tool).
    Deflated,
}

/// One zip record.
#[derive(Debug, Clone)]
pub struct Record {
    /// Its name (`archive/data/0`).
    pub name: String,
    /// How it is stored.
    pub method: Method,
    /// Absolute offset of its stored bytes.
    pub start: u64,
    /// Stored length.
    pub compressed: u64,
    /// Uncompressed length.
    pub size: u64,
    /// The CRC-32 the directory declares.
    pub crc32: u32,
}

/// `Read + Seek` over a [`SourceRef`], for the `zip` crate.
struct Reader<'d> {
    src: SourceRef<'d>,
    pos: u64,
}

impl Read for Reader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let got = self
            .src
            .read_up_to(self.pos, buf.len() as u64)
            .map_err(std::io::Error::other)?;
        buf[..got.len()].copy_from_slice(&got);
        self.pos += got.len() as u64;
        Ok(got.len())
    }
}

impl Seek for Reader<'_> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let base = match to {
            SeekFrom::Start(n) => {
                self.pos = n;
                return Ok(n);
            }
            SeekFrom::End(d) => (self.src.len(), d),
            SeekFrom::Current(d) => (self.pos, d),
        };
        self.pos = base
            .0
            .checked_add_signed(base.1)
            .ok_or_else(|| std::io::Error::other("seek out of range"))?;
        Ok(self.pos)
    }
}

fn zip_err(e: zip::result::ZipError) -> Error {
    Error::malformed(format!("zip: {e}"))
}

/// Lists the records of the zip in `src`, each checked to lie inside the file, none
/// overlapping another, none encrypted, stored or deflated only.
pub fn records(src: SourceRef<'_>, limits: &Limits) -> Result<Vec<Record>> {
    let mut zip = zip::ZipArchive::new(Reader { src, pos: 0 }).map_err(zip_err)?;
    limits.check_entries(zip.len() as u64)?;
    let mut out = Vec::with_capacity(zip.len());
    let mut spans = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let f = zip.by_index_raw(i).map_err(zip_err)?;
        let name = std::str::from_utf8(f.name_raw())
            .map_err(|_| Error::malformed("zip record name is not UTF-8"))?
            .to_string();
        limits.check_name(name.len() as u64)?;
        let subject = format!("record {name:?}");
        if f.encrypted() {
            return Err(Error::unsupported("encrypted zip record").at_subject(subject));
        }
        let method = match f.compression() {
            zip::CompressionMethod::Stored => Method::Stored,
            zip::CompressionMethod::Deflated => Method::Deflated,
            m => {
                return Err(Error::unsupported(format!(
                    "zip compression {m} (stored and deflate are read)"
                ))
                .at_subject(subject))
            }
        };
        let r = Record {
            name,
            method,
            start: f.data_start(),
            compressed: f.compressed_size(),
            size: f.size(),
            crc32: f.crc32(),
        };
        let header = f.header_start();
        drop(f);
        crate::limits::check_range(r.start, r.compressed, src.len(), "record data")
            .map_err(|e| e.at_subject(&subject))?;
        limits
            .check_decoded(r.size)
            .map_err(|e| e.at_subject(&subject))?;
        if r.method == Method::Stored && r.size != r.compressed {
            return Err(Error::malformed(format!(
                "stored record declares {} bytes but holds {}",
                r.size, r.compressed
            ))
            .at_subject(subject));
        }
        spans.push((header, r.start + r.compressed, i));
        out.push(r);
    }
    spans.sort();
    if let Some(w) = spans.windows(2).find(|w| w[1].0 < w[0].1) {
        return Err(Error::malformed(format!(
            "zip records {:?} and {:?} overlap",
            out[w[0].2].name, out[w[1].2].name
        )));
    }
    let mut seen = std::collections::HashSet::with_capacity(out.len());
    if !out.iter().all(|r| seen.insert(r.name.as_str())) {
        return Err(Error::malformed("zip directory repeats a record name"));
    }
    Ok(out)
}

/// The whole uncompressed content of a record: borrowed when stored and in memory.
/// A deflated record is inflated (never past its declared size) and its CRC-32 checked.
pub fn content<'d>(src: SourceRef<'d>, r: &Record) -> Result<Cow<'d, [u8]>> {
    let stored = src.read_at(r.start, r.compressed)?;
    if r.method == Method::Stored {
        return Ok(stored);
    }
    let cap = crate::limits::to_usize(r.size, "record size")?;
    let mut out = Vec::with_capacity(cap.min(1 << 20));
    flate2::read::DeflateDecoder::new(&stored[..])
        .take(r.size.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| Error::malformed(format!("deflate: corrupt compressed data: {e}")))?;
    if out.len() as u64 != r.size {
        return Err(Error::malformed(format!(
            "deflate: inflates to {} bytes, {} declared",
            out.len(),
            r.size
        )));
    }
    check_crc(r, &out)?;
    Ok(Cow::Owned(out))
}

/// Compares `bytes` (a record's whole content) with the CRC-32 the directory declares.
pub fn check_crc(r: &Record, bytes: &[u8]) -> Result<()> {
    let crc = crc32fast::hash(bytes);
    if crc != r.crc32 {
        return Err(Error::integrity(format!(
            "crc32 mismatch: directory says {:08x}, data gives {crc:08x}",
            r.crc32
        ))
        .at_subject(format!("record {:?}", r.name)));
    }
    Ok(())
}
