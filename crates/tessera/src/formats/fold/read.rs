//! [`FoldFile`]: parse and validate a FOLD file, list its chunks and tensors, read them.

use std::borrow::Cow;

use super::index::parse_entry;
pub use super::index::{EccState, Entry, HashField};
use super::raw::{
    FileHeader, FLAG_COMP_ZSTD, FORMAT_NAME, HEADER_LEN, KNOWN_VERSIONS, MAX_INDEX_SIZE,
};
use super::{ecc, npz, sten, tsav};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::metadata::{Map, Value};
use crate::source::{Prefetched, SourceRef};
use crate::tensor::{ChunkInfo, Part, Storage, TensorInfo, TensorView};

#[derive(Debug, Clone)]
enum TensorSrc {
    Sten {
        chunk: usize,
        parts: Vec<(String, (u64, u64))>,
    },
    Npz {
        chunk: usize,
        array: String,
        big_endian: bool,
    },
    /// A tensor of a `TSAV` chunk (`tsav.rs`), by its name inside the payload.
    Tsav { chunk: usize, name: String },
}

/// A chunk's stored payload and its parity bytes.
pub type Stored<'d> = (Cow<'d, [u8]>, Cow<'d, [u8]>);

/// A payload after the integrity checks, with what ECC had to do.
#[derive(Debug)]
pub struct Checked<'d> {
    /// The stored (compressed) payload, repaired if needed.
    pub bytes: Cow<'d, [u8]>,
    /// Set when ECC repaired it.
    pub repair: Option<ecc::Corrected>,
}

/// An opened FOLD file.
pub struct FoldFile<'d> {
    pub(super) src: SourceRef<'d>,
    pub(super) limits: Limits,
    pub(super) header: FileHeader,
    pub(super) version: String,
    pub(super) created_at: Option<f64>,
    /// The index metadata as stored (with `chunk_hashes` and `manifest_hash`).
    pub(super) raw_metadata: Map,
    metadata: Map,
    pub(super) entries: Vec<Entry>,
    chunk_infos: Vec<ChunkInfo>,
    infos: Vec<TensorInfo>,
    srcs: Vec<TensorSrc>,
    pub(super) warnings: Vec<String>,
    /// Chunks whose tensors could not be listed, and why (reported by verify).
    pub(super) damaged: Vec<(usize, Error)>,
    /// `STEN` chunks were listed from their first bytes, unchecked
    /// ([`FoldFile::sten_header_lazy`]): verify reports those that fail their CRC-32C
    /// beyond repair as an eager open would have.
    pub(super) lazy: bool,
    /// Check every read payload's CRC-32C, SHA-256 and `chunk_hashes` entry
    /// ([`crate::ReadOptions::verify`]); off, payloads are used unchecked.
    verify: bool,
    /// Per chunk: set once its stored payload passed every check unrepaired, so a chunk
    /// read again (one tensor after another of an NPZ0) is hashed once.
    verified: Vec<std::sync::OnceLock<()>>,
    /// The decoded tensors of the last `TSAV` chunk read (`tsav.rs`).
    tsav: tsav::Cache,
    /// Read-ahead of `STEN` chunks ([`FoldFile::decoded_ahead`]).
    ahead: std::sync::Mutex<Ahead<'d>>,
}

/// What [`FoldFile::decoded_ahead`] keeps between calls: the chunk asked for last, and
/// the next tensor chunk, decoded (and checked) beside it.
#[derive(Default)]
struct Ahead<'d> {
    last: Option<usize>,
    next: Option<(usize, Result<Cow<'d, [u8]>>)>,
}

/// The chunk types whose payload is tensors: a damaged one may never pass for an
/// opaque chunk (that would drop its tensors without a word).
fn holds_tensors(ctype: &str) -> bool {
    matches!(ctype, "STEN" | "NPZ0")
}

impl<'d> FoldFile<'d> {
    /// Opens `data` as the library's reader does: payloads checked on read as
    /// `opts.verify` says; a tensor chunk whose tensors cannot be listed (damaged beyond
    /// repair, malformed) fails the open, unless `opts.salvage` (its tensors are then
    /// reported lost in `warnings()`) or `opts.audit` (inspect / verify).
    pub fn open(src: impl Into<SourceRef<'d>>, opts: &crate::ReadOptions) -> Result<FoldFile<'d>> {
        Self::parse_inner(
            src.into(),
            &opts.limits,
            opts.verify,
            opts.salvage || opts.audit,
            opts.salvage,
        )
    }

    /// Parses and validates `data` (spec §6 steps 1–3; integrity is checked on read and
    /// by `verify`). Lenient: a tensor chunk whose tensors cannot be listed is kept as a
    /// damaged chunk with a warning (for `verify` and `repair`).
    pub fn parse(src: impl Into<SourceRef<'d>>, limits: &Limits) -> Result<FoldFile<'d>> {
        Self::parse_inner(src.into(), limits, true, true, true)
    }

    /// `eager`: list each tensor chunk from bytes that passed their CRC-32C (reading
    /// every tensor chunk whole: `parse`, and `--salvage`, which must know at open which
    /// tensors are lost); otherwise from the chunk's first bytes alone, its checks done
    /// when its bytes are first used (see [`FoldFile::sten_header_lazy`]).
    fn parse_inner(
        src: SourceRef<'d>,
        limits: &Limits,
        verify: bool,
        lenient: bool,
        eager: bool,
    ) -> Result<FoldFile<'d>> {
        let header = FileHeader::parse(&src.read_up_to(0, HEADER_LEN)?)?;
        if header.index_len > MAX_INDEX_SIZE {
            return Err(Error::limit(format!(
                "index_len {} exceeds MAX_INDEX_SIZE ({MAX_INDEX_SIZE})",
                header.index_len
            ))
            .at_offset(20));
        }
        limits.check_index(header.index_len)?;
        let index = src.slice(header.index_off, header.index_len, "index")?;
        let mut warnings = Vec::new();
        let end = header.index_off + header.index_len;
        if end < src.len() {
            warnings.push(format!(
                "{} bytes after the index (index ends at {end}, file at {})",
                src.len() - end,
                src.len()
            ));
        }
        // Python's JSON dialect (NaN, big ints), as pyfolds reads it.
        let j = crate::util::pyjson::loads(&index, limits.max_depth.saturating_add(2)).map_err(
            |e| Error::malformed(format!("index: {}", e.message())).at_offset(header.index_off),
        )?;
        let top = j.as_map().ok_or_else(|| {
            Error::malformed("index is not a JSON object").at_offset(header.index_off)
        })?;
        match top.get("format").and_then(Value::as_str) {
            Some(FORMAT_NAME) => {}
            other => {
                return Err(Error::malformed(format!(
                    "index format is {other:?}, expected \"fold\""
                )))
            }
        }
        let version = match top.get("version") {
            Some(Value::Str(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => "1.0.0".into(),
        };
        if !KNOWN_VERSIONS.contains(&version.as_str()) {
            warnings.push(format!(
                "unknown FOLD version {version:?} (known: 1.0.0, 1.1.0, 1.2.0)"
            ));
        }
        let created_at = match top.get("created_at_unix") {
            Some(Value::Float(f)) => Some(*f),
            Some(Value::Int(i)) => Some(*i as f64),
            _ => None,
        };
        let raw_metadata = match top.get("metadata") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Map(m)) => m.clone(),
            Some(_) => return Err(Error::malformed("index metadata is not an object")),
        };
        let mut metadata = raw_metadata.clone();
        metadata.remove("chunk_hashes");
        metadata.remove("manifest_hash");
        let list = match top.get("chunks") {
            Some(Value::List(a)) => a.as_slice(),
            None => &[],
            Some(_) => return Err(Error::malformed("index chunks is not a list")),
        };
        limits.check_entries(list.len() as u64)?;
        // Every chunk header (and, listing lazily, the first bytes of each STEN
        // payload) in one batch: a remote file then opens in a few requests, not one
        // per chunk. Bounds are checked by `parse_entry`; this only reads ahead.
        // (The first bytes only from a remote source: locally each costs a read of a
        // few hundred bytes, fewer than the batch would read.)
        let firsts = !eager && src.kind() == "remote";
        let pre = Prefetched::new(src, &prefetch_ranges(list, firsts))?;
        let psrc = SourceRef::new(&pre);
        let mut entries: Vec<Entry> = Vec::with_capacity(list.len());
        for (i, e) in list.iter().enumerate() {
            let entry = parse_entry(psrc, &header, e, i, limits)?;
            if entries.iter().any(|x| x.name == entry.name) {
                return Err(Error::malformed(format!(
                    "duplicate chunk name {:?}",
                    entry.name
                )));
            }
            entries.push(entry);
        }
        // Chunks must not overlap.
        let mut spans: Vec<(u64, u64, usize)> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let end = e.payload_off() + e.header.comp_len + u64::from(e.header.ecc_len);
                (e.offset, end, i)
            })
            .collect();
        spans.sort_unstable();
        for w in spans.windows(2) {
            if w[1].0 < w[0].1 {
                return Err(Error::malformed(format!(
                    "chunks {:?} and {:?} overlap",
                    entries[w[0].2].name, entries[w[1].2].name
                ))
                .at_offset(w[1].0));
            }
        }
        for e in &entries {
            if let Some(m) = &e.header_mismatch {
                warnings.push(format!("{}: {m}", e.subject()));
            }
        }
        let mut f = FoldFile {
            src,
            limits: limits.clone(),
            header,
            version,
            created_at,
            raw_metadata,
            metadata,
            entries,
            chunk_infos: Vec::new(),
            infos: Vec::new(),
            srcs: Vec::new(),
            warnings,
            damaged: Vec::new(),
            lazy: !eager,
            verify,
            verified: Vec::new(),
            tsav: Default::default(),
            ahead: Default::default(),
        };
        f.verified = (0..f.entries.len()).map(|_| Default::default()).collect();
        f.list_contents(lenient, (!eager).then_some(psrc))?;
        Ok(f)
    }

    /// Lists the chunks and their tensors. `lazy`: the prefetched source STEN headers
    /// are read from without checking their chunk first.
    fn list_contents(&mut self, lenient: bool, lazy: Option<SourceRef<'_>>) -> Result<()> {
        // In memory, the `STEN` chunks' checks and headers are read on every core
        // first (nothing but the parsed header is kept), then listed in file order as
        // below; a source read by range is read one chunk at a time.
        let mut headers: Vec<Option<Result<sten::Header>>> = Vec::new();
        if self.src.as_slice().is_some() {
            use rayon::prelude::*;
            headers = (0..self.entries.len())
                .into_par_iter()
                .map(|i| {
                    (&self.entries[i].header.ctype == b"STEN").then(|| match lazy {
                        Some(p) => self.sten_header_lazy(i, p),
                        None => self.sten_header(i),
                    })
                })
                .collect();
        }
        for i in 0..self.entries.len() {
            let e = &self.entries[i];
            let ctype = e.ctype();
            let listed_before = self.srcs.len();
            let holds = match ctype.as_str() {
                "STEN" => {
                    let h = match (headers.get_mut(i).and_then(Option::take), lazy) {
                        (Some(h), _) => h,
                        (None, Some(p)) => self.sten_header_lazy(i, p),
                        (None, None) => self.sten_header(i),
                    };
                    h.and_then(|h| self.list_sten(i, &h))
                }
                "NPZ0" => self.list_npz(i),
                "TSAV" => Ok(self.list_tsav(i)),
                _ => Ok(false),
            };
            let holds = match holds {
                Ok(h) => h,
                Err(err) if lenient => {
                    let msg = format!(
                        "{}: {} chunk whose tensors cannot be read (lost to a conversion): {err}",
                        self.entries[i].subject(),
                        ctype
                    );
                    self.warnings.push(msg.clone());
                    self.damaged.push((i, err));
                    false
                }
                Err(err) => {
                    let hint = if err.kind() == crate::ErrorKind::Integrity {
                        "; a full verify reports every layer, a repair restores chunks with ECC"
                    } else {
                        ""
                    };
                    return Err(Error::new(
                        err.kind(),
                        format!(
                            "{} chunk holds tensors and cannot be read: {}{hint}",
                            ctype,
                            err.message()
                        ),
                    )
                    .with_hint(crate::refusal::Hint::Salvage)
                    .at_subject(self.entries[i].subject())
                    .at_offset(self.entries[i].payload_off()));
                }
            };
            // A damaged tensor chunk (lenient open) still holds tensors: it is never
            // carried or dropped as if it were an opaque chunk.
            let holds = holds || holds_tensors(&ctype);
            // A TSAV chunk whose tensors were listed (just above) holds copies of them.
            let copies = match ctype.as_str() {
                "TSAV" => (self.srcs.len() - listed_before) as u64,
                _ => 0,
            };
            let e = &self.entries[i];
            self.chunk_infos.push(ChunkInfo {
                name: e.name.clone(),
                kind: ctype,
                len: Some(e.header.uncomp_len),
                storage: self.storage(i),
                holds_tensors: holds,
                copies: (copies > 0).then_some(copies),
            });
        }
        Ok(())
    }

    fn storage(&self, i: usize) -> Storage {
        let e = &self.entries[i];
        let mut encoding = if e.header.flags == FLAG_COMP_ZSTD {
            "zstd"
        } else {
            "raw"
        }
        .to_string();
        if e.ecc != EccState::None {
            encoding.push_str(&format!("+{}", e.ecc_algo));
        }
        Storage {
            offset: Some(e.payload_off()),
            stored_bytes: e.header.comp_len,
            encoding,
            digests: vec!["crc32c".into(), "sha256".into()],
        }
    }

    /// The safetensors header of `STEN` chunk `i`, read from its checked stored bytes.
    fn sten_header(&self, i: usize) -> Result<sten::Header> {
        // Check (and repair) the stored bytes first, CRC-32C only, so the listing never
        // comes from damaged bytes; then decode just the safetensors header.
        // Listing at open checks CRC-32C only (and repairs): the full check (SHA-256,
        // chunk_hashes) runs when the tensor's bytes are read, so opening stays cheap.
        let stored = self.checked(i, false)?.bytes;
        let e = &self.entries[i];
        match e.header.flags {
            FLAG_COMP_ZSTD => zstd::stream::read::Decoder::with_buffer(stored.as_ref())
                .map_err(|err| Error::malformed("zstd").with_source(err))
                .and_then(|d| sten::read_header(d, e.header.uncomp_len)),
            _ => sten::read_header(stored.as_ref(), e.header.uncomp_len),
        }
    }

    /// The safetensors header of `STEN` chunk `i`, read from the first bytes of its
    /// stored payload (through `pre`, which holds them when prefetched), unchecked: the
    /// chunk's CRC-32C and SHA-256 are checked when its bytes are first used, and the
    /// tensor read re-reads the header from the checked bytes and insists it says the
    /// same. A header these bytes do not give (damaged, perhaps) is read as
    /// [`FoldFile::sten_header`] reads it: from the checked, or repaired, payload.
    fn sten_header_lazy(&self, i: usize, pre: SourceRef<'_>) -> Result<sten::Header> {
        let e = &self.entries[i];
        let (at, len) = (e.payload_off(), e.header.comp_len);
        let lazy = match e.header.flags {
            FLAG_COMP_ZSTD => {
                let stored = crate::formats::npy::SourceReader::range(pre, at, len);
                let stored = std::io::BufReader::with_capacity(16 << 10, stored);
                zstd::stream::read::Decoder::with_buffer(stored)
                    .map_err(|err| Error::malformed("zstd").with_source(err))
                    .and_then(|d| sten::read_header(d, e.header.uncomp_len))
            }
            // Raw: the 8-byte length, then exactly the header.
            _ => pre.read_up_to(at, 8.min(len)).and_then(|n8| {
                let n = match <[u8; 8]>::try_from(n8.as_ref()) {
                    Ok(b) => u64::from_le_bytes(b),
                    Err(_) => return Err(Error::malformed("STEN payload shorter than 8 bytes")),
                };
                let whole = n
                    .checked_add(8)
                    .filter(|&w| w <= len && w <= sten::MAX_HEADER + 8);
                let Some(whole) = whole else {
                    return Err(Error::malformed(format!(
                        "STEN header length {n} exceeds the payload"
                    )));
                };
                let b = pre.read_at(at, whole)?;
                sten::read_header(b.as_ref(), e.header.uncomp_len)
            }),
        };
        lazy.or_else(|_| self.sten_header(i))
    }

    /// Whether the tensors listed at open for `STEN` chunk `i` are those its checked
    /// (perhaps repaired) payload lists: false only when a lazy listing
    /// ([`FoldFile::sten_header_lazy`]) came from damaged bytes ECC has since restored.
    pub(super) fn listing_holds(&self, i: usize) -> Result<bool> {
        let payload = self.decompress(i, self.checked(i, false)?.bytes)?;
        let h = sten::read_header(payload.as_ref(), payload.len() as u64)?;
        let again = sten::logical_tensors(&self.entries[i].name, &h)?;
        let listed: Vec<_> = (self.infos.iter().zip(&self.srcs))
            .filter_map(|(t, s)| match s {
                TensorSrc::Sten { chunk, parts } if *chunk == i => Some((t, parts)),
                _ => None,
            })
            .collect();
        Ok(listed.len() == again.len()
            && listed.iter().zip(&again).all(|((t, p), (a, q))| {
                t.name == a.name && t.dtype == a.dtype && t.shape == a.shape && *p == q
            }))
    }

    fn list_sten(&mut self, i: usize, h: &sten::Header) -> Result<bool> {
        let name = self.entries[i].name.clone();
        for (mut info, parts) in sten::logical_tensors(&name, h)? {
            self.limits.check_name(info.name.len() as u64)?;
            if self.infos.iter().any(|t| t.name == info.name) {
                return Err(Error::malformed(format!(
                    "duplicate tensor name {:?}",
                    info.name
                )));
            }
            info.storage = self.storage(i);
            self.infos.push(info);
            self.srcs.push(TensorSrc::Sten { chunk: i, parts });
        }
        Ok(true)
    }

    /// A `TSAV` chunk's tensors (`tsav.rs`); the chunk stays opaque. Anything the
    /// PyTorch reader refuses is a warning, never a failed open.
    fn list_tsav(&mut self, i: usize) -> bool {
        let subject = self.entries[i].subject();
        let listed = self
            .checked(i, false)
            .and_then(|c| self.decompress(i, c.bytes))
            .and_then(|p| tsav::list(&p, &self.limits));
        let (entries, warnings) = match listed {
            Ok(l) => l,
            Err(e) => {
                self.warnings.push(format!(
                    "{subject}: TSAV payload kept opaque, its tensors not read: {e}"
                ));
                return false;
            }
        };
        let chunk = self.entries[i].name.clone();
        let names: Vec<String> = (entries.iter())
            .map(|t| format!("{chunk}/{}", t.name))
            .collect();
        if let Some(n) = names
            .iter()
            .find(|n| self.infos.iter().any(|t| &t.name == *n))
        {
            self.warnings.push(format!(
                "{subject}: TSAV payload kept opaque: tensor name {n:?} is taken"
            ));
            return false;
        }
        self.warnings
            .extend(warnings.into_iter().map(|w| format!("{subject}: {w}")));
        for (t, name) in entries.into_iter().zip(names) {
            let mut info = TensorInfo::dense(name, t.dtype, t.shape);
            info.storage = self.storage(i);
            info.storage.encoding.push_str("+torch");
            self.infos.push(info);
            self.srcs.push(TensorSrc::Tsav {
                chunk: i,
                name: t.name,
            });
        }
        false
    }

    fn list_npz(&mut self, i: usize) -> Result<bool> {
        // CRC-32C at open, as for STEN; the full check when a tensor is read.
        let payload = self.decompress(i, self.checked(i, false)?.bytes)?;
        let (arrays, warnings) = npz::list(&payload, &self.limits)?;
        let chunk = self.entries[i].name.clone();
        let subject = self.entries[i].subject();
        self.warnings
            .extend(warnings.into_iter().map(|w| format!("{subject}: {w}")));
        for a in arrays {
            let name = format!("{chunk}/{}", a.name);
            if self.infos.iter().any(|t| t.name == name) {
                return Err(Error::malformed(format!("duplicate tensor name {name:?}")));
            }
            let mut info = TensorInfo::dense(name, a.dtype, a.shape);
            info.storage = self.storage(i);
            info.storage.encoding.push_str("+npz");
            self.infos.push(info);
            self.srcs.push(TensorSrc::Npz {
                chunk: i,
                array: a.name,
                big_endian: a.big_endian,
            });
        }
        Ok(true)
    }

    /// The stored payload and parity of chunk `i`, read by range (borrowed from an
    /// in-memory source; bounds were checked at open).
    pub fn stored(&self, i: usize) -> Result<Stored<'d>> {
        Ok((self.stored_payload(i)?, self.parity(i)?))
    }

    /// The stored payload of chunk `i`, read by range.
    pub fn stored_payload(&self, i: usize) -> Result<Cow<'d, [u8]>> {
        let e = &self.entries[i];
        self.src
            .slice(e.payload_off(), e.header.comp_len, "chunk payload")
            .map_err(|err| err.at_subject(e.subject()))
    }

    /// The parity bytes of chunk `i`, read by range (only when a repair needs them).
    pub fn parity(&self, i: usize) -> Result<Cow<'d, [u8]>> {
        let e = &self.entries[i];
        self.src
            .slice(
                e.payload_off() + e.header.comp_len,
                u64::from(e.header.ecc_len),
                "chunk parity",
            )
            .map_err(|err| err.at_subject(e.subject()))
    }

    /// Checks chunk `i` (CRC-32C; SHA-256 too when `full`) and repairs it with its
    /// parity when a check fails. An `Integrity` error when it cannot be restored.
    pub fn checked(&self, i: usize, full: bool) -> Result<Checked<'d>> {
        let e = &self.entries[i];
        let comp = self.stored_payload(i)?;
        let sha_ok = |b: &[u8]| match &e.sha256 {
            HashField::Sha256(h) => crate::util::sha256(b) == *h,
            HashField::Other(_) => true,
        };
        let crc_ok = crate::util::crc32c(&comp) == e.header.crc32c;
        if crc_ok && (!full || sha_ok(&comp)) {
            return Ok(Checked {
                bytes: comp,
                repair: None,
            });
        }
        let what = if crc_ok { "SHA-256" } else { "CRC-32C" };
        let nsym = match &e.ecc {
            EccState::Rs(n) => *n,
            EccState::None => {
                return Err(
                    Error::integrity(format!("{what} mismatch and no ECC to repair it"))
                        .at_subject(e.subject())
                        .at_offset(e.payload_off()),
                )
            }
            EccState::Unusable(why) => {
                return Err(
                    Error::integrity(format!("{what} mismatch; ECC unusable: {why}"))
                        .at_subject(e.subject())
                        .at_offset(e.payload_off()),
                )
            }
        };
        let parity = self.parity(i)?;
        let fixed = ecc::correct(&comp, &parity, nsym).map_err(|err| {
            Error::integrity(format!("{what} mismatch; {}", err.message()))
                .at_subject(e.subject())
                .at_offset(e.payload_off())
        })?;
        if crate::util::crc32c(&fixed.data) != e.header.crc32c || !sha_ok(&fixed.data) {
            return Err(Error::integrity(format!(
                "{what} mismatch; rs({nsym}) decoding did not restore the recorded checksums"
            ))
            .at_subject(e.subject())
            .at_offset(e.payload_off()));
        }
        let mut fixed = fixed;
        let bytes = std::mem::take(&mut fixed.data);
        Ok(Checked {
            bytes: Cow::Owned(bytes),
            repair: Some(fixed),
        })
    }

    /// Decompresses a checked payload of chunk `i`, bounded by `uncomp_len`.
    pub fn decompress(&self, i: usize, comp: Cow<'d, [u8]>) -> Result<Cow<'d, [u8]>> {
        let e = &self.entries[i];
        match e.header.flags {
            FLAG_COMP_ZSTD => crate::util::zstd_decode_bounded(&comp, e.header.uncomp_len, true)
                .map(Cow::Owned)
                .map_err(|err| err.at_subject(e.subject())),
            _ if comp.len() as u64 != e.header.uncomp_len => Err(Error::malformed(format!(
                "uncompressed chunk: comp_len {} != uncomp_len {}",
                comp.len(),
                e.header.uncomp_len
            ))
            .at_subject(e.subject())),
            _ => Ok(comp),
        }
    }

    /// Chunk `i`'s stored payload for reading: with `verify`, checked (CRC-32C, SHA-256,
    /// its `chunk_hashes` entry) and repaired by ECC if needed, once per chunk. Without
    /// `verify`, CRC-32C only (it is what triggers the ECC repair, and costs little),
    /// as FOLD readers always did.
    pub fn payload(&self, i: usize) -> Result<Cow<'d, [u8]>> {
        if self.verified[i].get().is_some() && self.src.rereads_same() {
            return self.stored_payload(i);
        }
        if !self.verify {
            return Ok(self.checked(i, false)?.bytes);
        }
        let e = &self.entries[i];
        if let (Some(want), HashField::Sha256(have)) = (
            self.raw_metadata
                .get("chunk_hashes")
                .and_then(Value::as_map)
                .and_then(|h| h.get(&e.name))
                .and_then(Value::as_str),
            &e.sha256,
        ) {
            let want = want.strip_prefix("sha256:").unwrap_or(want);
            if !want.eq_ignore_ascii_case(&crate::util::hex(have)) {
                return Err(Error::integrity(format!(
                    "chunk_hashes mismatch: metadata lists {want}, the index entry says {}",
                    crate::util::hex(have)
                ))
                .at_subject(e.subject()));
            }
        }
        let c = self.checked(i, true)?;
        if c.repair.is_none() {
            let _ = self.verified[i].set(());
        }
        Ok(c.bytes)
    }

    /// Records that chunk `i`'s stored payload passed every check unrepaired (`verify`
    /// did them), so reading it does not hash it again.
    pub(super) fn mark_verified(&self, i: usize) {
        let _ = self.verified[i].set(());
    }

    /// Whether chunk `i`'s stored payload passed every check unrepaired.
    pub(super) fn is_verified(&self, i: usize) -> bool {
        self.verified[i].get().is_some()
    }

    /// Chunk `i`'s decoded bytes: [`FoldFile::payload`], decompressed.
    ///
    /// A compressed, mapped chunk not yet checked is decompressed on a second core while
    /// its digests are checked; the result is used only when the check passed without
    /// a repair (same bytes), and nothing is handed out before the check.
    pub fn decoded(&self, i: usize) -> Result<Cow<'d, [u8]>> {
        if self.verify
            && self.verified[i].get().is_none()
            && self.entries[i].header.flags == FLAG_COMP_ZSTD
        {
            if let Ok(Cow::Borrowed(stored)) = self.stored_payload(i) {
                let (checked, early) = rayon::join(
                    || self.payload(i),
                    || self.decompress(i, Cow::Borrowed(stored)),
                );
                let c = checked?;
                // Set by `payload` only when the stored bytes passed unrepaired.
                if self.verified[i].get().is_some() {
                    return early;
                }
                return self.decompress(i, c);
            }
        }
        let c = self.payload(i)?;
        self.decompress(i, c)
    }

    /// [`FoldFile::decoded`] of `STEN` chunk `i`, reading ahead: when the tensors are
    /// read in file order (a conversion, a load), the next `STEN` chunk that still needs
    /// work (decompression or its digests) is decoded on another core beside `i` and
    /// kept for the next call, so two chunks decode at once. Memory: one chunk ahead.
    /// The chunk kept is checked exactly as `decoded` checks it (its error, if any, is
    /// the one returned when it is asked for); a call past it drops it.
    fn decoded_ahead(&self, i: usize) -> Result<Cow<'d, [u8]>> {
        // Called on a pool thread, the caller is itself parallel (`tensors` reads on
        // every core): the cores are busy already, and two threads sharing the one
        // read-ahead slot would each drop the chunk the other decoded ahead.
        if rayon::current_thread_index().is_some() {
            return self.decoded(i);
        }
        let (cached, forward) = match self.ahead.lock() {
            Ok(mut a) => {
                let forward = a.last.is_none_or(|l| l < i);
                a.last = Some(i);
                // Kept while it may still be asked for (another tensor of chunk `i`
                // may come first); dropped once passed.
                let cached = match a.next.take() {
                    Some((j, r)) if j == i => Some(r),
                    Some((j, r)) if j > i && !forward => {
                        a.next = Some((j, r));
                        None
                    }
                    _ => None,
                };
                (cached, forward)
            }
            Err(_) => (None, false),
        };
        if let Some(r) = cached {
            return r;
        }
        let next = forward
            .then(|| {
                (i + 1..self.entries.len()).find(|&j| {
                    let e = &self.entries[j];
                    &e.header.ctype == b"STEN"
                        && (e.header.flags == FLAG_COMP_ZSTD
                            || (self.verify && self.verified[j].get().is_none()))
                })
            })
            .flatten();
        let Some(j) = next else {
            return self.decoded(i);
        };
        let (r, ahead) = rayon::join(|| self.decoded(i), || self.decoded(j));
        if let Ok(mut a) = self.ahead.lock() {
            a.next = Some((j, ahead));
        }
        r
    }

    /// The global header.
    pub fn header(&self) -> FileHeader {
        self.header
    }
    /// The index `created_at_unix`.
    pub fn created_at_unix(&self) -> Option<f64> {
        self.created_at
    }
    /// The index `metadata` as stored (with `chunk_hashes` and `manifest_hash`).
    pub fn index_metadata(&self) -> &Map {
        &self.raw_metadata
    }

    /// The index entries.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    fn chunk_index(&self, name: &str) -> Result<usize> {
        self.entries
            .iter()
            .position(|e| e.name == name)
            .ok_or_else(|| Error::not_found(format!("no chunk named {name:?}")))
    }

    /// One tensor.
    pub fn tensor_view(&self, name: &str) -> Result<TensorView<'d>> {
        let Some(t) = self.infos.iter().position(|t| t.name == name) else {
            // A tensor chunk too damaged to list its tensors: say so, not "not found".
            for (i, err) in &self.damaged {
                if self.entries[*i].name == name {
                    let mut e = Error::new(err.kind(), err.message());
                    if let Some(s) = err.subject() {
                        e = e.at_subject(s);
                    }
                    if let Some(o) = err.offset() {
                        e = e.at_offset(o);
                    }
                    return Err(e);
                }
            }
            return Err(Error::no_tensor(name));
        };
        let info = self.infos[t].clone();
        let subject = || format!("tensor {name:?}");
        let view = match &self.srcs[t] {
            TensorSrc::Sten { chunk, parts } => {
                let payload = self.decoded_ahead(*chunk)?;
                // The header was read at open, perhaps from unchecked bytes: re-read it
                // from the checked payload and insist it says the same.
                let h = sten::read_header(payload.as_ref(), payload.len() as u64)?;
                let again = sten::logical_tensors(&self.entries[*chunk].name, &h)?;
                if !again.iter().any(|(i, p)| i.name == info.name && p == parts) {
                    return Err(Error::integrity("STEN header changed after checking")
                        .at_subject(subject()));
                }
                let parts = match payload {
                    Cow::Borrowed(b) => parts
                        .iter()
                        .map(|(role, (s, e))| Part {
                            role: role.clone(),
                            bytes: Cow::Borrowed(&b[*s as usize..*e as usize]),
                        })
                        .collect(),
                    Cow::Owned(mut v) if parts.len() == 1 => {
                        let (role, (s, e)) = &parts[0];
                        v.truncate(*e as usize);
                        v.drain(..*s as usize);
                        vec![Part {
                            role: role.clone(),
                            bytes: Cow::Owned(v),
                        }]
                    }
                    Cow::Owned(v) => parts
                        .iter()
                        .map(|(role, (s, e))| Part {
                            role: role.clone(),
                            bytes: Cow::Owned(v[*s as usize..*e as usize].to_vec()),
                        })
                        .collect(),
                };
                TensorView { info, parts }
            }
            TensorSrc::Tsav { chunk, name } => {
                let bytes =
                    (self.tsav).read(*chunk, name, || self.decoded(*chunk), &self.limits)?;
                TensorView {
                    info,
                    parts: vec![Part {
                        role: "data".into(),
                        bytes: Cow::Owned(bytes),
                    }],
                }
            }
            TensorSrc::Npz { chunk, array, .. } => {
                let payload = self.decoded(*chunk)?;
                let bytes = npz::read(&payload, array, &self.limits)?;
                TensorView {
                    info,
                    parts: vec![Part {
                        role: "data".into(),
                        bytes: Cow::Owned(bytes),
                    }],
                }
            }
        };
        view.validate().map_err(|e| e.at_subject(subject()))?;
        Ok(view)
    }

    /// Chunk `name` as stored, for a FOLD writer to copy byte for byte: its 32-byte
    /// header with the index entry's values, the stored payload as [`FoldFile::payload`]
    /// checks it (repaired by the parity when needed), and the parity; `params` holds the
    /// index entry's `sha256` (when it is one) and `ecc_algo`.
    pub fn stored_chunk(&self, name: &str) -> Result<crate::tensor::StoredChunk<'d>> {
        let i = self.chunk_index(name)?;
        let payload = self.payload(i)?;
        let parity = self.parity(i)?;
        let e = &self.entries[i];
        let mut params = Map::new();
        if let HashField::Sha256(h) = &e.sha256 {
            params.insert("sha256", crate::util::hex(h));
        }
        params.insert("ecc_algo", e.ecc_algo.as_str());
        Ok(crate::tensor::StoredChunk {
            format: crate::format::Format::Fold,
            pieces: vec![Cow::Owned(e.header.to_bytes().to_vec()), payload, parity],
            params,
        })
    }

    /// One chunk's decoded bytes.
    pub fn chunk_bytes(&self, name: &str) -> Result<Cow<'d, [u8]>> {
        let i = self.chunk_index(name)?;
        self.decoded(i)
    }

    pub(super) fn user_metadata(&self) -> &Map {
        &self.metadata
    }
    pub(super) fn chunk_infos(&self) -> &[ChunkInfo] {
        &self.chunk_infos
    }
    pub(super) fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    /// Per chunk, the verify progress of the tensors it holds (their dense bytes).
    pub(super) fn chunk_progress(&self) -> Vec<u64> {
        let mut out = vec![0u64; self.entries.len()];
        for (t, s) in self.infos.iter().zip(&self.srcs) {
            let (TensorSrc::Sten { chunk, .. }
            | TensorSrc::Npz { chunk, .. }
            | TensorSrc::Tsav { chunk, .. }) = s;
            if let Some(o) = out.get_mut(*chunk) {
                *o = o.saturating_add(crate::verify::progress_bytes(t));
            }
        }
        out
    }
    /// Whether tensor `name` is stored big-endian in an npz (for inspect).
    pub fn is_big_endian(&self, name: &str) -> bool {
        self.infos.iter().zip(&self.srcs).any(|(t, s)| {
            t.name == name
                && matches!(
                    s,
                    TensorSrc::Npz {
                        big_endian: true,
                        ..
                    }
                )
        })
    }
}

/// What [`FoldFile::open`] reads ahead from the index `list` (before checking it: a
/// range the entries' checks later refuse is never used): each chunk's 32-byte header,
/// and when listing lazily the first bytes of each `STEN` payload — its safetensors
/// header, or the compressed bytes that inflate to it (zstd's first block: up to 128
/// KiB).
fn prefetch_ranges(list: &[Value], lazy: bool) -> Vec<(u64, u64)> {
    const STEN_RAW: u64 = 4 << 10;
    const STEN_ZSTD: u64 = 144 << 10;
    let int = |m: &Map, k: &str| {
        m.get(k)
            .and_then(Value::as_int)
            .and_then(|v| u64::try_from(v).ok())
    };
    list.iter()
        .filter_map(Value::as_map)
        .filter_map(|m| {
            let off = int(m, "offset")?;
            let sten = lazy && m.get("ctype").and_then(Value::as_str) == Some("STEN");
            let first = match (sten, int(m, "flags")) {
                (false, _) => 0,
                (true, Some(f)) if f == u64::from(FLAG_COMP_ZSTD) => STEN_ZSTD,
                (true, _) => STEN_RAW,
            };
            let first = first.min(int(m, "comp_len").unwrap_or(0));
            Some((off, super::raw::CHUNK_HEADER_LEN + first))
        })
        .collect()
}
