//! [`NpzFile`]: a zip of `NAME.npy` members (`np.savez`, `np.savez_compressed`).
//!
//! The zip central directory is parsed by the `zip` crate through a `Read + Seek` view of
//! the source ([`super::zipsrc`]): opening reads the end of central directory, the
//! central directory, each member's local header and the first bytes of each member (its
//! `.npy` header; inflated from a bounded prefix for a deflated member) — never a
//! member's array data. Member data is then read by range when asked: stored members are
//! zero-copy from an in-memory source, deflated ones are inflated with `flate2`, bounded
//! by the size the directory declares.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::io::{BufReader, Read};

use super::header::NpyHeader;
use super::read::{self, ArrayLayout};
use super::zipsrc::SourceReader;
use crate::any::ReadOptions;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::limits::Limits;
use crate::metadata::Metadata;
use crate::model::{Container, TensorSource};
use crate::source::SourceRef;
use crate::tensor::{TensorInfo, TensorView};
use crate::verify::{VerifyOptions, VerifyReport};

/// How a member is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Stored,
    Deflated,
}

/// One `.npy` member.
#[derive(Debug, Clone)]
struct Member {
    /// The zip entry name (`w.npy`).
    entry: String,
    method: Method,
    /// Absolute offset and length of the stored (maybe compressed) bytes.
    data_start: u64,
    compressed: u64,
    /// Declared uncompressed size and CRC-32.
    size: u64,
    crc32: u32,
    layout: ArrayLayout,
}

/// An opened `.npz` file.
#[derive(Debug)]
pub struct NpzFile<'data> {
    src: SourceRef<'data>,
    members: Vec<Member>,
    infos: Vec<TensorInfo>,
    index: HashMap<String, usize>,
    metadata: Metadata,
    warnings: Vec<String>,
    limits: Limits,
    /// Check members' CRC-32 before handing bytes out ([`ReadOptions::verify`]);
    /// deflated members are checked as they are inflated whatever this says.
    verify: bool,
    /// Per member: set once a stored (uncompressed, zero-copy) member's CRC-32 matched.
    checked: Vec<std::sync::OnceLock<()>>,
}

fn zip_err(e: zip::result::ZipError) -> Error {
    Error::malformed(format!("zip: {e}"))
}

/// Counts the central directory records by walking their signatures from the first one
/// (the `zip` crate keeps one entry per name, so duplicates would vanish silently).
/// Reads from `start` to the end of the file: the directory and its end record.
fn count_central_records(src: SourceRef<'_>, start: u64) -> Result<usize> {
    let data = src.read_at(start.min(src.len()), src.len().saturating_sub(start))?;
    let mut pos = 0usize;
    let mut n = 0;
    while let Some(h) = data.get(pos..pos.saturating_add(46)) {
        if &h[..4] != b"PK\x01\x02" {
            break;
        }
        let var = u16::from_le_bytes([h[28], h[29]]) as usize
            + u16::from_le_bytes([h[30], h[31]]) as usize
            + u16::from_le_bytes([h[32], h[33]]) as usize;
        pos += 46 + var;
        n += 1;
    }
    Ok(n)
}

/// The `.npy` header of a stored member: its first bytes, no more than the header.
fn stored_head<'d>(
    src: SourceRef<'d>,
    start: u64,
    len: u64,
    limits: &Limits,
) -> Result<Cow<'d, [u8]>> {
    let pre = src.read_at(start, len.min(12))?;
    let hlen = match (pre.get(6), pre.len()) {
        (Some(1), 12) => u16::from_le_bytes([pre[8], pre[9]]) as u64 + 10,
        (Some(2 | 3), 12) => u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]) as u64 + 12,
        // Too short or an unknown version: the header parser says which.
        _ => return Ok(pre),
    };
    limits
        .check_index(hlen)
        .map_err(|e| e.at_offset(start + 8))?;
    src.read_at(start, hlen.min(len))
}

/// Refuses entry names a careless extractor would turn into a path escape.
fn check_entry_name(name: &str) -> Result<()> {
    let bad = name.starts_with('/')
        || name.contains('\\')
        || name.contains('\0')
        || name.split('/').any(|c| c == ".." || c.is_empty())
        || name.as_bytes().get(1) == Some(&b':');
    if bad {
        return Err(Error::malformed(format!(
            "zip entry name {name:?} is an absolute or escaping path"
        )));
    }
    Ok(())
}

/// Inflates a raw deflate stream, refusing to produce more than `max` bytes.
fn inflate(input: &[u8], max: u64, want_exact: bool) -> Result<Vec<u8>> {
    let cap = crate::limits::to_usize(max, "member size")?;
    let mut out = Vec::with_capacity(cap.min(1 << 20));
    flate2::read::DeflateDecoder::new(input)
        .take(max.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| Error::malformed(format!("deflate: corrupt compressed data: {e}")))?;
    if out.len() as u64 > max {
        return Err(Error::malformed(format!(
            "deflate: inflates to more than the declared {max} bytes"
        )));
    }
    if want_exact && out.len() as u64 != max {
        return Err(Error::malformed(format!(
            "deflate: inflates to {} bytes, {max} declared",
            out.len()
        )));
    }
    Ok(out)
}

/// Reads only the `.npy` header of a deflated member, inflating from a small buffered
/// reader over its compressed bytes (so only a prefix of them is read).
fn inflate_header(input: SourceReader<'_>, size: u64, limits: &Limits) -> Result<Vec<u8>> {
    let input = BufReader::with_capacity(512, input);
    let mut dec = flate2::bufread::DeflateDecoder::new(input).take(size);
    let mut pre = Vec::with_capacity(12);
    (&mut dec)
        .take(12)
        .read_to_end(&mut pre)
        .map_err(|e| Error::malformed(format!("deflate: corrupt compressed data: {e}")))?;
    let total = match pre.get(6..8) {
        Some([1, 0]) if pre.len() >= 10 => 10 + u16::from_le_bytes([pre[8], pre[9]]) as u64,
        Some([2 | 3, 0]) if pre.len() >= 12 => {
            let h = u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]) as u64;
            limits.check_index(h)?;
            12 + h
        }
        // Let the header parser name the problem.
        _ => return Ok(pre),
    };
    let rest = total.saturating_sub(pre.len() as u64);
    (&mut dec)
        .take(rest)
        .read_to_end(&mut pre)
        .map_err(|e| Error::malformed(format!("deflate: corrupt compressed data: {e}")))?;
    Ok(pre)
}

impl<'data> NpzFile<'data> {
    /// Parses the zip directory and every member's `.npy` header (see the module docs
    /// for what that reads).
    pub fn parse(src: impl Into<SourceRef<'data>>, opts: &ReadOptions) -> Result<NpzFile<'data>> {
        let src = src.into();
        let limits = &opts.limits;
        let mut zip = zip::ZipArchive::new(SourceReader::new(src)).map_err(zip_err)?;
        limits.check_entries(zip.len() as u64)?;
        let mut members = Vec::with_capacity(zip.len());
        let mut infos = Vec::with_capacity(zip.len());
        let mut index = HashMap::with_capacity(zip.len());
        let mut warnings = Vec::new();
        let mut seen_entries = HashSet::new();
        let mut spans: Vec<(u64, u64, String)> = Vec::new();
        for i in 0..zip.len() {
            let f = zip.by_index_raw(i).map_err(zip_err)?;
            let entry = std::str::from_utf8(f.name_raw())
                .map_err(|_| Error::malformed("zip entry name is not UTF-8"))?
                .to_string();
            let subject = format!("member {entry:?}");
            limits.check_name(entry.len() as u64)?;
            check_entry_name(&entry)?;
            if !seen_entries.insert(entry.clone()) {
                return Err(Error::malformed("duplicate zip entry").at_subject(subject));
            }
            if f.is_dir() {
                continue;
            }
            if f.encrypted() {
                return Err(
                    Error::unsupported("encrypted zip entries are not supported")
                        .at_subject(subject),
                );
            }
            let method = match f.compression() {
                zip::CompressionMethod::Stored => Method::Stored,
                zip::CompressionMethod::Deflated => Method::Deflated,
                m => {
                    return Err(Error::unsupported(format!(
                        "zip compression {m} is not supported (stored and deflate are)"
                    ))
                    .at_subject(subject))
                }
            };
            let Some(name) = entry.strip_suffix(".npy") else {
                return Err(Error::unsupported(
                    "not a .npy member (an .npz holds NAME.npy arrays only)",
                )
                .at_subject(subject));
            };
            let (header_start, data_start, compressed, size, crc32) = (
                f.header_start(),
                f.data_start(),
                f.compressed_size(),
                f.size(),
                f.crc32(),
            );
            drop(f);
            limits
                .check_decoded(size)
                .map_err(|e| e.at_subject(&subject))?;
            src.check_range(data_start, compressed, "member data")
                .map_err(|e| e.at_subject(&subject))?;
            spans.push((header_start, data_start + compressed, entry.clone()));
            let layout = match method {
                Method::Stored => {
                    if size != compressed {
                        return Err(Error::malformed(format!(
                            "stored member declares {size} bytes but holds {compressed}"
                        ))
                        .at_subject(subject));
                    }
                    stored_head(src, data_start, compressed, limits)
                        .and_then(|head| read::layout_of_header(&head, compressed, limits))
                }
                Method::Deflated => {
                    let stored = SourceReader::range(src, data_start, compressed);
                    let head = inflate_header(stored, size, limits)?;
                    read::layout_of_header(&head, size, limits)
                }
            }
            .map_err(|e| e.at_subject(&subject))?;
            if let Some(a) = &layout.header.ambiguity {
                warnings.push(format!("{subject}: {a}"));
            }
            if layout.trailing > 0 {
                warnings.push(format!(
                    "{subject}: {} bytes after the array data are ignored",
                    layout.trailing
                ));
            }
            let h = &layout.header;
            let mut info = TensorInfo::dense(name, h.dtype, h.shape.clone());
            let container = match method {
                Method::Stored => "npz-stored",
                Method::Deflated => "npz-deflate",
            };
            let offset = match method {
                Method::Stored => Some(data_start + h.data_offset as u64),
                Method::Deflated => Some(data_start),
            };
            info.storage = read::storage(&layout, offset, compressed, container);
            info.storage.digests.push("crc32".into());
            index.insert(name.to_string(), infos.len());
            infos.push(info);
            members.push(Member {
                entry,
                method,
                data_start,
                compressed,
                size,
                crc32,
                layout,
            });
        }
        if count_central_records(
            src,
            zip.offset().saturating_add(zip.central_directory_start()),
        )? > zip.len()
        {
            return Err(Error::malformed(
                "zip central directory repeats an entry name (duplicate arrays)",
            ));
        }
        // Members sharing bytes are how overlapping-entry zip bombs multiply one
        // compressed stream; numpy never writes them.
        spans.sort();
        if let Some(w) = spans.windows(2).find(|w| w[1].0 < w[0].1) {
            return Err(Error::malformed(format!(
                "zip members {:?} and {:?} overlap",
                w[0].2, w[1].2
            )));
        }
        let checked = (0..members.len()).map(|_| Default::default()).collect();
        Ok(NpzFile {
            verify: opts.verify,
            checked,
            src,
            members,
            infos,
            index,
            metadata: Metadata::new(),
            warnings,
            limits: limits.clone(),
        })
    }

    /// The `.npy` header of array `name` (the member `name.npy`), as parsed at open.
    pub fn header(&self, name: &str) -> Option<&NpyHeader> {
        self.index
            .get(name)
            .map(|&i| &self.members[i].layout.header)
    }

    fn stored(&self, m: &Member) -> Result<Cow<'data, [u8]>> {
        // In bounds: checked in parse().
        self.src.slice(m.data_start, m.compressed, "member data")
    }

    /// A deflated member's whole uncompressed `.npy` image.
    fn inflated(&self, m: &Member) -> Result<Vec<u8>> {
        inflate(&self.stored(m)?, m.size, true)
    }

    /// The CRC-32 of a member's uncompressed image: a stored member hashed in place (in
    /// blocks over a source that is not in memory), a deflated one inflated.
    fn crc_of(&self, m: &Member) -> Result<u32> {
        match m.method {
            Method::Stored => {
                let mut h = crc32fast::Hasher::new();
                self.src.for_each_block(
                    m.data_start,
                    m.compressed,
                    16 << 20,
                    "member data",
                    |b| {
                        h.update(b);
                        Ok(())
                    },
                )?;
                Ok(h.finalize())
            }
            Method::Deflated => Ok(crc32fast::hash(&self.inflated(m)?)),
        }
    }
}

fn crc_mismatch(want: u32, got: u32) -> Error {
    Error::integrity(format!(
        "crc32 mismatch: directory says {want:08x}, data gives {got:08x}"
    ))
}

impl TensorSource for NpzFile<'_> {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let i = crate::model::tensor_position(&self.index, name)?;
        let m = &self.members[i];
        let subject = || format!("tensor {name:?} (member {:?})", m.entry);
        let h = &m.layout.header;
        let (off, n) = (h.data_offset, m.layout.nbytes as usize);
        let stored = match m.method {
            Method::Stored => {
                // The array bytes by range (zero-copy from memory); with a check, the
                // header and any trailing bytes too, for the member's CRC-32.
                let at = m.data_start + off as u64;
                let data = self
                    .src
                    .slice(at, n as u64, "member data")
                    .map_err(|e| e.at_subject(subject()))?;
                if self.verify && (self.checked[i].get().is_none() || !self.src.rereads_same()) {
                    let rest = m.compressed - off as u64 - n as u64;
                    let parts = self
                        .src
                        .read_ranges(&[(m.data_start, off as u64), (at + n as u64, rest)])
                        .map_err(|e| e.at_subject(subject()))?;
                    let mut h = crc32fast::Hasher::new();
                    h.update(&parts[0]);
                    h.update(&data);
                    h.update(&parts[1]);
                    let crc = h.finalize();
                    if crc != m.crc32 {
                        return Err(crc_mismatch(m.crc32, crc).at_subject(subject()));
                    }
                    let _ = self.checked[i].set(());
                }
                data
            }
            Method::Deflated => {
                let mut v = self.inflated(m).map_err(|e| e.at_subject(subject()))?;
                let crc = crc32fast::hash(&v);
                if crc != m.crc32 {
                    return Err(crc_mismatch(m.crc32, crc).at_subject(subject()));
                }
                // The header inflated at open must still be the header now.
                let again = read::layout(&v, &self.limits).map_err(|e| e.at_subject(subject()))?;
                if again.header != m.layout.header {
                    return Err(
                        Error::malformed("header changed between reads").at_subject(subject())
                    );
                }
                v.truncate(off + n);
                v.drain(..off);
                Cow::Owned(v)
            }
        };
        TensorView::dense(self.infos[i].clone(), read::decode(h, stored))
    }
    fn source_format(&self) -> Option<Format> {
        Some(Format::Npz)
    }
}

impl Container for NpzFile<'_> {
    fn format(&self) -> Format {
        Format::Npz
    }
    fn version(&self) -> String {
        "zip".into()
    }
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport {
        let mut r = VerifyReport {
            warnings: self.warnings.clone(),
            ..Default::default()
        };
        for (m, info) in self.members.iter().zip(&self.infos) {
            let subject = format!("tensor {:?}", info.name);
            match self.crc_of(m) {
                Ok(crc) => {
                    r.compare(
                        subject,
                        "crc32",
                        &format!("{:08x}", m.crc32),
                        &format!("{crc:08x}"),
                    );
                }
                Err(e) => r.failed(subject, "crc32", format!("cannot decompress: {e}")),
            }
            opts.advance(crate::verify::progress_bytes(info));
        }
        r
    }
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}
