//! [`GptrsFile`]: parse and validate a checkpoint or archive, then serve zero-copy
//! tensor views.

use std::borrow::Cow;
use std::collections::HashMap;

use super::config;
use super::raw::{self, IndexEntry, Kind, VERSION};
use crate::error::{Error, Result};
use crate::format::Format;
use crate::limits::Limits;
use crate::metadata::{Map, Metadata, Value};
use crate::model::{Container, TensorSource};
use crate::source::SourceRef;
use crate::tensor::{dense_nbytes, Part, Storage, TensorInfo, TensorView};
use crate::util::bytes::ByteReader;
use crate::util::hex;
use crate::verify::{Status, VerifyOptions, VerifyReport};

/// An opened GPTRS v2 checkpoint (`GPTRSCHK`) or tensor archive (`GPTRSTEN`).
#[derive(Debug)]
pub struct GptrsFile<'d> {
    src: SourceRef<'d>,
    kind: Kind,
    /// The header, config and index (`0..data_start`), read at open.
    head: Cow<'d, [u8]>,
    /// Where `config_json` lies in `head`.
    config_at: Option<(usize, usize)>,
    legacy_config: bool,
    metadata: Metadata,
    data_start: u64,
    entries: Vec<IndexEntry>,
    infos: Vec<TensorInfo>,
    by_name: HashMap<String, usize>,
    warnings: Vec<String>,
    /// Refuse a tensor whose stored non-zero `base_id` is not BLAKE3(name) when it is
    /// read (`ReadOptions::verify`, on when opened through [`crate::open`]).
    pub(crate) check_reads: bool,
}

/// Reads a u32 length and checks it against `max` and the bytes of the file (`file_len`)
/// that follow it.
fn u32_len(
    r: &mut ByteReader<'_>,
    file_len: u64,
    what: &str,
    max: u64,
    max_what: &str,
) -> Result<u64> {
    let at = r.pos() as u64;
    let n = r.u32_le(what)? as u64;
    Limits::check(max_what, n, max).map_err(|e| e.at_offset(at))?;
    let follow = file_len.saturating_sub(r.pos() as u64);
    if n > follow {
        return Err(
            Error::malformed(format!("{what} is {n} but only {follow} bytes follow")).at_offset(at),
        );
    }
    Ok(n)
}

/// The length of the header, config and index (where the data starts), from small reads
/// of the length fields. A length that [`GptrsFile::parse`] will refuse (over the limit,
/// past the end) stops the count there: parsing then fails on it with its message.
fn head_len(src: SourceRef<'_>, limits: &Limits) -> Result<u64> {
    let len = src.len();
    let u32_of = |b: &[u8]| -> Option<u64> {
        <[u8; 4]>::try_from(b)
            .ok()
            .map(|a| u32::from_le_bytes(a) as u64)
    };
    let u32_at = |at: u64| -> Result<Option<u64>> { Ok(u32_of(&src.read_up_to(at, 4)?)) };
    let fits = |n: u64, at: u64| n <= limits.max_index_bytes && n <= len.saturating_sub(at);
    // magic, version, then config_len (checkpoint) or index_len (archive).
    let first16 = src.read_up_to(0, 16)?;
    let Some(first) = first16.get(12..16).and_then(u32_of) else {
        return Ok(len.min(16));
    };
    let mut end = 16u64;
    let index_len = if first16.starts_with(raw::MAGIC_CHECKPOINT) {
        if !fits(first, end) {
            return Ok(end);
        }
        end += first;
        let Some(n) = u32_at(end)? else {
            return Ok(len);
        };
        end += 4;
        n
    } else {
        first
    };
    if !fits(index_len, end) {
        return Ok(end);
    }
    Ok(end + index_len)
}

impl<'d> GptrsFile<'d> {
    /// Parses and validates the file `src` holds, reading its header, config and index
    /// only (the bytes before the data); each tensor is read when asked. Every
    /// structural rule is checked here (see the module docs); base-id mismatches are
    /// warnings here and failures in `verify`.
    pub fn parse(src: impl Into<SourceRef<'d>>, limits: &Limits) -> Result<GptrsFile<'d>> {
        let src = src.into();
        let file_len = src.len();
        let head = src.read_at(0, head_len(src, limits)?)?;
        let data = &head[..];
        let mut r = ByteReader::new(data);
        let magic = r.take(8, "magic")?;
        let kind = if magic == raw::MAGIC_CHECKPOINT {
            Kind::Checkpoint
        } else if magic == raw::MAGIC_ARCHIVE {
            Kind::Archive
        } else {
            return Err(Error::malformed(
                "not a GPTRS file (magic is neither GPTRSCHK nor GPTRSTEN)",
            )
            .at_offset(0));
        };
        let version = r.u32_le("version")?;
        if version != VERSION {
            let hint = if version == 1 {
                " (v1, gpt.rs before 2025-12-28, has no index)"
            } else {
                ""
            };
            return Err(Error::unsupported_version(format!(
                "version {version}{hint} is not supported; only version 2"
            ))
            .at_offset(8));
        }
        let mut warnings = Vec::new();
        let (config_at, legacy_config, metadata) = if kind == Kind::Checkpoint {
            let at = r.pos() as u64 + 4;
            let n = u32_len(
                &mut r,
                file_len,
                "config_len",
                limits.max_index_bytes,
                "config_len",
            )?;
            let raw_json = r.take_u64(n, "config_json")?;
            let parsed = config::parse(raw_json, limits).map_err(|e| e.at_offset(at))?;
            if parsed.legacy {
                warnings.push(
                    "config_json is a legacy untagged GPT config; read as kind \"gpt\"".into(),
                );
            }
            (
                Some((at as usize, raw_json.len())),
                parsed.legacy,
                parsed.metadata,
            )
        } else {
            (None, false, Map::new())
        };
        let index_len = u32_len(
            &mut r,
            file_len,
            "index_len",
            limits.max_index_bytes,
            "index_len",
        )?;
        let index_start = r.pos();
        let index = r.take_u64(index_len, "index")?;
        let data_start = r.pos() as u64;

        // A reader over the file up to the end of the index: offsets stay absolute and
        // nothing reads past the index.
        let mut ir = ByteReader::at(&data[..index_start + index.len()], index_start);
        let count = ir.u32_le("tensor_count")? as u64;
        limits
            .check_entries(count)
            .map_err(|e| e.at_offset(index_start as u64))?;
        let need = count.saturating_mul(kind.min_entry());
        let room = ir.remaining() as u64;
        if need > room {
            return Err(Error::malformed(format!(
                "tensor_count {count} needs at least {need} index bytes, {room} follow"
            ))
            .at_offset(index_start as u64));
        }
        // `count` is now bounded by the index length.
        let count = count as usize;
        let mut entries = Vec::with_capacity(count);
        let mut infos = Vec::with_capacity(count);
        let mut by_name = HashMap::with_capacity(count);
        for i in 0..count {
            let start = ir.pos() as u64;
            let e = read_entry(&mut ir, kind, limits, file_len, data_start).map_err(|e| {
                if looks_like_bincode(index) {
                    return Error::unsupported_version(
                        "the index is the one-day bincode variant of v2 (gpt.rs 2f8370f, \
                             2025-12-27), not the v2 of the spec; it is not supported",
                    )
                    .at_offset(index_start as u64);
                }
                e.at_subject(format!("index entry {i}")).at_offset(start)
            })?;
            if by_name.insert(e.name.clone(), i).is_some() {
                return Err(
                    Error::malformed(format!("duplicate tensor name {:?}", e.name))
                        .at_subject(format!("index entry {i}"))
                        .at_offset(start),
                );
            }
            if e.requires_grad > 1 {
                warnings.push(format!(
                    "tensor {:?}: requires_grad byte is {} (writers emit 0 or 1; read as true)",
                    e.name, e.requires_grad
                ));
            }
            let computed = raw::base_id(&e.name);
            if kind.has_base_id() && e.stored_base_id != [0; 16] && e.stored_base_id != computed {
                warnings.push(format!(
                    "tensor {:?}: stored base_id {} differs from BLAKE3(name) {} (gpt.rs refuses this file)",
                    e.name,
                    hex(&e.stored_base_id),
                    hex(&computed)
                ));
            }
            infos.push(info_of(&e, kind)?);
            entries.push(e);
        }
        if ir.remaining() != 0 {
            return Err(Error::malformed(format!(
                "{} trailing bytes after the last index entry (index_len {index_len})",
                ir.remaining()
            ))
            .at_offset(ir.pos() as u64));
        }
        check_overlaps(&entries)?;
        lint_layout(&entries, data_start, file_len, &mut warnings);
        Ok(GptrsFile {
            src,
            kind,
            head,
            config_at,
            legacy_config,
            metadata,
            data_start,
            entries,
            infos,
            by_name,
            warnings,
            check_reads: false,
        })
    }

    /// Checkpoint or archive.
    pub fn kind(&self) -> Kind {
        self.kind
    }
    /// The index entries as stored, in file order.
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }
    /// Absolute offset of the first byte after the index.
    pub fn data_start(&self) -> u64 {
        self.data_start
    }
    /// The raw `config_json` bytes (checkpoints).
    pub fn config_json(&self) -> Option<&[u8]> {
        self.config_at.and_then(|(at, n)| self.head.get(at..at + n))
    }
    /// True when the config was a legacy untagged GPT config.
    pub fn is_legacy_config(&self) -> bool {
        self.legacy_config
    }
    /// The tensor whose `BaseParamId` (BLAKE3(name)[..16] as a little-endian u128, what
    /// gpt.rs's streaming loader asks for) is `id`, computed from the names as gpt.rs
    /// does (stored ids are not trusted).
    pub fn name_for_base_id(&self, id: u128) -> Option<&str> {
        let want = id.to_le_bytes();
        self.entries
            .iter()
            .find(|e| raw::base_id(&e.name) == want)
            .map(|e| e.name.as_str())
    }
    /// The first stored non-zero base_id that differs from BLAKE3(name), as an
    /// `Integrity` error (what gpt.rs's loader refuses); `Ok` otherwise.
    pub fn check_base_ids(&self) -> Result<()> {
        self.entries
            .iter()
            .try_for_each(|e| check_base_id(self.kind, e))
    }
}

/// A stored non-zero `base_id` that differs from BLAKE3(name) as an `Integrity` error
/// naming the tensor: gpt.rs's loader refuses such a file, so a checked read refuses
/// the tensor (stored 0 means "not stored": nothing to check).
fn check_base_id(kind: Kind, e: &IndexEntry) -> Result<()> {
    let computed = raw::base_id(&e.name);
    if kind.has_base_id() && e.stored_base_id != [0; 16] && e.stored_base_id != computed {
        return Err(Error::integrity(format!(
            "base_id mismatch: stored {}, BLAKE3(name) gives {} (gpt.rs refuses this file; \
             --no-verify reads it)",
            hex(&e.stored_base_id),
            hex(&computed)
        ))
        .at_subject(format!("tensor {:?}", e.name)));
    }
    Ok(())
}

/// The short-lived "v2 bincode" index starts with a u64 entry count and a u64 name
/// length, then the name. Read as the spec's index, the first entry then has name_len
/// 0; this tells the two apart when parsing the spec's way has failed.
fn looks_like_bincode(index: &[u8]) -> bool {
    let u64_at = |o: usize| -> Option<u64> {
        Some(u64::from_le_bytes(index.get(o..o + 8)?.try_into().ok()?))
    };
    let (Some(count), Some(name_len)) = (u64_at(0), u64_at(8)) else {
        return false;
    };
    if count == 0 || count > u32::MAX as u64 || !(1..=4096).contains(&name_len) {
        return false;
    }
    index
        .get(16..16 + name_len as usize)
        .is_some_and(|n| n.iter().all(|b| b.is_ascii_graphic()))
}

fn read_entry(
    r: &mut ByteReader<'_>,
    kind: Kind,
    limits: &Limits,
    file_len: u64,
    data_start: u64,
) -> Result<IndexEntry> {
    let at = r.pos() as u64;
    let name_len = r.u32_le("name_len")? as u64;
    limits.check_name(name_len).map_err(|e| e.at_offset(at))?;
    let name_bytes = r.take_u64(name_len, "name_bytes")?;
    let name = std::str::from_utf8(name_bytes)
        .map_err(|_| Error::malformed("tensor name is not UTF-8").at_offset(at + 4))?
        .to_string();
    if kind == Kind::Checkpoint && !name.is_ascii() {
        return Err(Error::malformed(format!(
            "checkpoint tensor name {name:?} is not ASCII (gpt.rs base ids need ASCII names)"
        ))
        .at_offset(at + 4));
    }
    let wrap = |e: Error| e.at_subject(format!("tensor {name:?}"));
    let mut stored_base_id = [0u8; 16];
    if kind.has_base_id() {
        stored_base_id.copy_from_slice(r.take(16, "stored_base_id").map_err(wrap)?);
    }
    let rank_at = r.pos() as u64;
    let rank = r.u32_le("rank").map_err(wrap)? as u64;
    limits
        .check_rank(rank)
        .map_err(|e| wrap(e.at_offset(rank_at)))?;
    let mut dims = Vec::with_capacity(rank as usize);
    for _ in 0..rank {
        dims.push(r.u64_le("dims").map_err(wrap)?);
    }
    let tag_at = r.pos() as u64;
    let dtype_tag = r.u32_le("dtype_tag").map_err(wrap)?;
    let dtype = raw::dtype_from_tag(dtype_tag).ok_or_else(|| {
        wrap(
            Error::malformed(format!(
                "unknown dtype_tag {dtype_tag} (0 f32, 1 f16, 2 bf16, 3 i32)"
            ))
            .at_offset(tag_at),
        )
    })?;
    let requires_grad = r.u8("requires_grad").map_err(wrap)?;
    let off_at = r.pos() as u64;
    let offset_abs = r.u64_le("offset_abs").map_err(wrap)?;
    let byte_len = r.u64_le("byte_len").map_err(wrap)?;
    let want = dense_nbytes(dtype, &dims).map_err(|e| wrap(e.at_offset(rank_at)))?;
    if byte_len != want {
        return Err(wrap(
            Error::malformed(format!(
                "byte_len {byte_len} does not match {dtype} {dims:?} ({want} bytes)"
            ))
            .at_offset(off_at + 8),
        ));
    }
    if offset_abs < data_start {
        return Err(wrap(
            Error::malformed(format!(
                "offset_abs {offset_abs} points into the header or index (data starts at {data_start})"
            ))
            .at_offset(off_at),
        ));
    }
    let end = offset_abs.checked_add(byte_len).filter(|&e| e <= file_len);
    if end.is_none() {
        return Err(wrap(
            Error::malformed(format!(
                "data range {offset_abs} + {byte_len} runs past the end of the file ({file_len} bytes)"
            ))
            .at_offset(off_at),
        ));
    }
    Ok(IndexEntry {
        name,
        stored_base_id,
        dims,
        dtype_tag,
        requires_grad,
        offset_abs,
        byte_len,
    })
}

fn info_of(e: &IndexEntry, kind: Kind) -> Result<TensorInfo> {
    let dtype = raw::dtype_from_tag(e.dtype_tag)
        .ok_or_else(|| Error::malformed(format!("unknown dtype_tag {}", e.dtype_tag)))?;
    let mut info = TensorInfo::dense(e.name.clone(), dtype, e.dims.clone());
    // 0 is "not set": see the module docs (no invented `requires_grad: false`).
    if e.requires_grad != 0 {
        info.attrs.insert("requires_grad", Value::Bool(true));
    }
    info.storage = Storage {
        offset: Some(e.offset_abs),
        stored_bytes: e.byte_len,
        encoding: "raw".into(),
        digests: if kind.has_base_id() && e.stored_base_id != [0; 16] {
            vec!["base_id".into()]
        } else {
            Vec::new()
        },
    };
    Ok(info)
}

/// Overlapping data ranges are an error (the original does not check).
fn check_overlaps(entries: &[IndexEntry]) -> Result<()> {
    let mut ranges: Vec<(u64, u64, usize)> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.byte_len > 0)
        .map(|(i, e)| (e.offset_abs, e.offset_abs + e.byte_len, i))
        .collect();
    ranges.sort_unstable();
    for w in ranges.windows(2) {
        let (a, b) = (w[0], w[1]);
        if b.0 < a.1 {
            return Err(Error::malformed(format!(
                "data of tensor {:?} ({}..{}) overlaps tensor {:?} ({}..{})",
                entries[b.2].name, b.0, b.1, entries[a.2].name, a.0, a.1
            ))
            .at_subject(format!("tensor {:?}", entries[b.2].name))
            .at_offset(b.0));
        }
    }
    Ok(())
}

/// What the original writers never produce but the spec does not forbid: warnings.
fn lint_layout(entries: &[IndexEntry], data_start: u64, file_len: u64, w: &mut Vec<String>) {
    if entries.windows(2).any(|p| p[0].name > p[1].name) {
        w.push("tensors are not sorted by name (the original writers sort them)".into());
    }
    let mut expect = data_start;
    for e in entries {
        if e.offset_abs != expect {
            w.push(format!(
                "tensor {:?}: data at {} where a contiguous layout puts it at {expect} \
                 (gaps or out-of-order data; the original writers are contiguous)",
                e.name, e.offset_abs
            ));
            break;
        }
        expect += e.byte_len;
    }
    let end = entries
        .iter()
        .map(|e| e.offset_abs + e.byte_len)
        .max()
        .unwrap_or(data_start)
        .max(data_start);
    if end < file_len {
        w.push(format!(
            "{} bytes after the last tensor's data are not described by the index",
            file_len - end
        ));
    }
}

impl TensorSource for GptrsFile<'_> {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let i = crate::model::tensor_position(&self.by_name, name)?;
        let e = &self.entries[i];
        if self.check_reads {
            check_base_id(self.kind, e)?;
        }
        let bytes = self
            .src
            .slice(e.offset_abs, e.byte_len, "tensor data")
            .map_err(|err| err.at_subject(format!("tensor {name:?}")))?;
        Ok(TensorView {
            info: self.infos[i].clone(),
            parts: vec![Part {
                role: "data".into(),
                bytes,
            }],
        })
    }
    fn chunk(&self, name: &str) -> Result<Cow<'_, [u8]>> {
        match self.config_json() {
            Some(raw) if name == config::RAW_CONFIG_CHUNK => Ok(Cow::Borrowed(raw)),
            _ => Err(Error::not_found(format!("no chunk named {name:?}"))),
        }
    }
    fn source_format(&self) -> Option<Format> {
        Some(self.kind.format())
    }
    fn raw_extent(&self, name: &str) -> Result<Option<crate::slice::RawExtent<'_>>> {
        let i = crate::model::tensor_position(&self.by_name, name)?;
        let e = &self.entries[i];
        let info = &self.infos[i];
        if self.check_reads {
            check_base_id(self.kind, e)?;
        }
        if info.layout != crate::tensor::Layout::Dense || e.byte_len != info.dense_nbytes()? {
            return Ok(None);
        }
        Ok(Some(crate::slice::RawExtent {
            src: self.src,
            offset: e.offset_abs,
            start: 0,
            big_endian: false,
            whole_digests: Vec::new(),
            own_check: None,
        }))
    }
}

impl Container for GptrsFile<'_> {
    fn format(&self) -> Format {
        self.kind.format()
    }
    fn version(&self) -> String {
        VERSION.to_string()
    }
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport {
        // No checksum of tensor data: every tensor is done as soon as it is reached.
        opts.advance_tensors(&self.infos);
        let mut rep = VerifyReport::default();
        rep.push(
            "file",
            "structure",
            Status::Ok,
            Some(format!(
                "header, index and {} data ranges validated",
                self.entries.len()
            )),
        );
        if self.kind.has_base_id() {
            for e in &self.entries {
                let subject = format!("tensor {:?}", e.name);
                let computed = raw::base_id(&e.name);
                if e.stored_base_id == [0; 16] {
                    rep.push(
                        subject,
                        "base_id",
                        Status::NotChecked,
                        Some(format!(
                            "stored 0 (not stored, as the Python exporter writes); \
                             BLAKE3(name) gives {}",
                            hex(&computed)
                        )),
                    );
                } else if e.stored_base_id == computed {
                    rep.ok(subject, "base_id");
                } else {
                    rep.failed(
                        subject,
                        "base_id",
                        format!(
                            "stored {}, BLAKE3(name) gives {}",
                            hex(&e.stored_base_id),
                            hex(&computed)
                        ),
                    );
                }
            }
        }
        rep.push(
            "file",
            "data",
            Status::NotChecked,
            Some("GPTRS stores no checksum of tensor data".into()),
        );
        rep.warnings = self.warnings.clone();
        rep
    }
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}
