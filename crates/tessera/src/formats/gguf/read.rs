//! [`GgufFile`]: parse and validate a GGUF file, serve its tensors zero-copy.
//!
//! The index (header, metadata, tensor infos) has no stated length: opening reads a
//! prefix of the file and parses it, and reads further (doubling, up to
//! `Limits::max_index_bytes`) only when the index runs past it. A source in memory is
//! parsed in place. Tensor data is read by range when asked.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::any::ReadOptions;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::limits::Limits;
use crate::metadata::{Map, Metadata, Value};
use crate::model::{Container, TensorSource};
use crate::source::SourceRef;
use crate::tensor::{Layout, Part, Storage, TensorInfo, TensorView};
use crate::util::bytes::ByteReader;
use crate::verify::{Status, VerifyOptions, VerifyReport};

use super::meta::{is_default, ValueReader, JSON_ANNOTATION, JSON_KEYS_KEY};
use super::raw::{
    align_up, Endian, GgmlType, GgufType, ATTR_GGML_TYPE, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC,
    KEY_ALIGNMENT,
};

/// How much of a file not in memory the first read takes to find the index: enough for
/// metadata without a vocabulary; a larger index is read on in steps that double what
/// was read, so the bytes read stay under twice the index.
const INITIAL_READ: u64 = 32 << 10;
/// The fewest bytes a KV pair occupies: key length, type, a one-byte value.
const MIN_KV: u64 = 8 + 4 + 1;
/// The fewest bytes a tensor info occupies: name length, n_dims, type, offset.
const MIN_TENSOR_INFO: u64 = 8 + 4 + 4 + 8;
/// ggml's `GGML_MAX_DIMS` and `GGML_MAX_NAME`: llama.cpp refuses files beyond them.
const GGML_MAX_DIMS: usize = 4;
const GGML_MAX_NAME: usize = 64;
/// The deepest array nesting we recurse into, even when `Limits::max_depth` is higher.
const MAX_NESTING: usize = 256;

/// An opened GGUF file.
#[derive(Debug)]
pub struct GgufFile<'d> {
    src: SourceRef<'d>,
    version: u32,
    metadata: Metadata,
    /// Each key's GGUF value type when some differ from what our writer would infer.
    metadata_types: Option<Map>,
    infos: Vec<TensorInfo>,
    /// Absolute byte range of each tensor's data.
    ranges: Vec<(u64, u64)>,
    /// Tensor name → index, so lookups stay O(1) on models with many tensors.
    index: HashMap<String, usize>,
    alignment: u64,
    data_offset: u64,
    endian: Endian,
    warnings: Vec<String>,
    /// Why llama.cpp would refuse the data layout (tensors not packed in tensor-info
    /// order, or the final padding missing), if it would.
    layout_problem: Option<String>,
    /// The bytes after the last tensor's padding, described, if there are any.
    trailing: Option<String>,
}

impl<'d> GgufFile<'d> {
    /// Parses and validates the file `src` holds, reading its index only.
    pub fn parse(src: impl Into<SourceRef<'d>>, limits: &Limits) -> Result<GgufFile<'d>> {
        let src = src.into();
        let total = src.len();
        if let Some(all) = src.as_slice() {
            return Self::parse_index(src, all, total, limits);
        }
        // The index ends before `max_index_bytes` (checked as it is parsed) plus the
        // alignment padding; whatever the file says, no more is read to find it.
        let cap = total.min(limits.max_index_bytes.saturating_add(1 << 16));
        let mut head = src.read_at(0, cap.min(INITIAL_READ))?.into_owned();
        loop {
            match Self::parse_index(src, &head, total, limits) {
                // A failure inside a prefix may only mean the prefix was too short.
                Err(_) if (head.len() as u64) < cap => {
                    let have = head.len() as u64;
                    let next = cap.min(have.saturating_mul(2));
                    head.extend_from_slice(&src.read_at(have, next - have)?);
                }
                done => return done,
            }
        }
    }

    /// Parses the index from `data`, the first bytes of a `total`-byte file.
    fn parse_index(
        src: SourceRef<'d>,
        data: &[u8],
        total: u64,
        limits: &Limits,
    ) -> Result<GgufFile<'d>> {
        let mut r = ByteReader::new(data);
        let magic = r.take(4, "magic")?;
        if magic != GGUF_MAGIC {
            return Err(Error::malformed("not a GGUF file (bad magic)").at_offset(0));
        }
        let raw_version = r.u32_le("version")?;
        // A big-endian file's version reads as 0x0?000000 here (gguf-py's test too).
        let endian = Endian {
            big: raw_version & 0xffff == 0 && raw_version != 0,
        };
        let version = if endian.big {
            raw_version.swap_bytes()
        } else {
            raw_version
        };
        match version {
            2 | 3 => {}
            1 => {
                return Err(Error::unsupported_version(
                    "GGUF v1 (32-bit counts) is not supported; v2 and v3 are",
                ))
            }
            v => {
                return Err(Error::unsupported_version(format!(
                    "GGUF version {v} is not supported (2 and 3 are)"
                )))
            }
        }
        let tensor_count = endian.u64(&mut r, "tensor_count")?;
        let kv_count = endian.u64(&mut r, "metadata_kv_count")?;
        limits.check_entries(tensor_count)?;
        limits.check_entries(kv_count)?;
        let room = total.saturating_sub(r.pos() as u64);
        let need = kv_count
            .checked_mul(MIN_KV)
            .and_then(|a| a.checked_add(tensor_count.checked_mul(MIN_TENSOR_INFO)?));
        if need.is_none_or(|n| n > room) {
            return Err(Error::malformed(format!(
                "{tensor_count} tensors and {kv_count} metadata keys cannot fit in the {room} bytes left"
            ))
            .at_offset(8));
        }

        let mut warnings = Vec::new();
        let mut vr = ValueReader {
            item_budget: limits.max_entries,
            // Capped: each level is a stack frame, whatever the caller allows.
            max_depth: limits.max_depth.min(MAX_NESTING),
            saw_non_utf8: false,
            endian,
        };
        // (key, value, annotation) in file order, and key → index: `Map::insert` is
        // linear, and a hostile file may hold millions of keys.
        let mut entries: Vec<(String, Value, Value)> = Vec::new();
        let mut keys: HashMap<String, usize> = HashMap::new();
        let mut alignment = GGUF_DEFAULT_ALIGNMENT;
        for i in 0..kv_count {
            let at = r.pos() as u64;
            let key = read_name(&mut r, endian, limits, "metadata key")
                .map_err(|e| e.at_subject(format!("metadata key {i}")))?;
            let subject = || format!("metadata {key:?}");
            if keys.contains_key(&key) {
                return Err(Error::malformed("duplicate key")
                    .at_subject(subject())
                    .at_offset(at));
            }
            let tpos = r.pos() as u64;
            let tag = endian
                .u32(&mut r, "value type")
                .map_err(|e| e.at_subject(subject()))?;
            let ty = GgufType::from_u32(tag).ok_or_else(|| {
                Error::malformed(format!("unknown value type {tag}"))
                    .at_subject(subject())
                    .at_offset(tpos)
            })?;
            let (value, ann) = vr
                .read(&mut r, ty, 0)
                .map_err(|e| e.at_subject(subject()))?;
            if key == KEY_ALIGNMENT {
                alignment = check_alignment(ty, &value).map_err(|e| e.at_offset(at))?;
            }
            limits.check_index(r.pos() as u64)?;
            keys.insert(key.clone(), entries.len());
            entries.push((key, value, ann));
        }
        if vr.saw_non_utf8 {
            warnings.push("some string values are not UTF-8; they are kept as bytes".into());
        }

        let mut raw = Vec::new();
        let mut index = HashMap::new();
        for i in 0..tensor_count {
            let at = r.pos() as u64;
            let info = read_tensor_info(&mut r, endian, limits, &mut warnings)
                .map_err(|e| e.at_subject(format!("tensor info {i}")).at_offset(at))?;
            if index.insert(info.0.name.clone(), raw.len()).is_some() {
                return Err(Error::malformed("duplicate tensor name")
                    .at_subject(format!("tensor {:?}", info.0.name))
                    .at_offset(at));
            }
            limits.check_index(r.pos() as u64)?;
            raw.push(info);
        }
        let data_offset = align_up(r.pos() as u64, alignment)
            .ok_or_else(|| Error::malformed("data section offset overflows"))?;

        let mut infos = Vec::with_capacity(raw.len());
        let mut ranges = Vec::with_capacity(raw.len());
        let mut expected = 0u64;
        let mut canonical = true;
        for (mut info, rel, nbytes) in raw {
            let subject = format!("tensor {:?}", info.name);
            if rel % alignment != 0 {
                return Err(Error::malformed(format!(
                    "data offset {rel} is not a multiple of the alignment {alignment}"
                ))
                .at_subject(subject));
            }
            let abs = data_offset
                .checked_add(rel)
                .ok_or_else(|| Error::malformed("data offset overflows").at_subject(&subject))?;
            crate::limits::check_range(abs, nbytes, total, "tensor data")
                .map_err(|e| e.at_subject(&subject))?;
            canonical &= rel == expected;
            expected = align_up(rel.saturating_add(nbytes), alignment).unwrap_or(u64::MAX);
            let encoding = if swaps(endian, &info) {
                "raw-big-endian"
            } else {
                "raw"
            };
            info.storage = Storage {
                offset: Some(abs),
                stored_bytes: nbytes,
                encoding: encoding.into(),
                digests: Vec::new(),
            };
            infos.push(info);
            ranges.push((abs, nbytes));
        }
        let layout_problem = if !canonical {
            Some("tensor data is not packed in tensor-info order (llama.cpp refuses such files)")
        } else if expected > 0 && data_offset.saturating_add(expected) > total {
            Some("the file ends before the padding after the last tensor (llama.cpp refuses such files)")
        } else {
            None
        };
        warnings.extend(layout_problem.map(String::from));
        // Bytes after the last tensor and its padding belong to no tensor: gguf-py,
        // llama.cpp and Tessera write none. Kept as a warning here and a failed check
        // in `verify` (a file truncated or overwritten in its middle, or appended to).
        let data_end = ranges
            .iter()
            .map(|&(abs, n)| abs.saturating_add(n))
            .max()
            .map_or(data_offset, |e| align_up(e, alignment).unwrap_or(u64::MAX));
        let trailing = (total > data_end).then(|| {
            let n = total - data_end;
            format!(
                "{n} trailing byte{} after the end of the tensor data (byte {data_end}; \
                 the file ends at byte {total}): they belong to no tensor",
                if n == 1 { "" } else { "s" }
            )
        });
        warnings.extend(trailing.clone());
        if endian.big {
            warnings.push(
                "big-endian file: plain tensors are byte-swapped on reading (not zero-copy); \
                 BF16 and quantized blocks are kept as stored, as gguf-py writes them"
                    .into(),
            );
        }
        restore_json(&mut entries, &keys, &mut warnings)?;
        let carries_types = entries.iter().any(|(_, v, ann)| !is_default(ann, v));
        let mut types = Vec::with_capacity(if carries_types { entries.len() } else { 0 });
        let mut values = Vec::with_capacity(entries.len());
        for (k, v, ann) in entries {
            if carries_types {
                types.push((k.clone(), ann));
            }
            values.push((k, v));
        }
        let metadata = Metadata::from_unique(values);
        // The value types ride beside the metadata (`metadata_types`), never in it.
        let metadata_types = carries_types.then(|| Map::from_unique(types));
        Ok(GgufFile {
            src,
            version,
            metadata,
            metadata_types,
            infos,
            ranges,
            index,
            alignment,
            data_offset,
            endian,
            warnings,
            layout_problem: layout_problem.map(String::from),
            trailing,
        })
    }

    /// The data alignment (`general.alignment`, default 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }
    /// Absolute offset of the data section.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }
}

/// Consumes our `tessera.json_keys` KV: the values of the keys it lists go back from
/// JSON text to the values they were (annotated `json`).
fn restore_json(
    entries: &mut Vec<(String, Value, Value)>,
    keys: &HashMap<String, usize>,
    warnings: &mut Vec<String>,
) -> Result<()> {
    let Some(&at) = keys.get(JSON_KEYS_KEY) else {
        return Ok(());
    };
    let (_, list, ann) = entries.remove(at);
    let listed = match (&list, ann.as_str()) {
        (Value::List(listed), Some("[str]")) => listed,
        _ => {
            return Err(Error::unsupported(format!(
            "the key {JSON_KEYS_KEY:?} is reserved by Tessera and is not an array of strings here"
        )))
        }
    };
    for key in listed.iter().filter_map(Value::as_str) {
        // Indices past the removed entry moved down by one.
        let slot = keys
            .get(key)
            .filter(|&&i| i != at)
            .map(|&i| if i > at { i - 1 } else { i });
        let parsed = match slot.map(|i| &entries[i].1) {
            Some(Value::Str(text)) => serde_json::from_str::<serde_json::Value>(text).ok(),
            _ => None,
        };
        match (slot, parsed) {
            (Some(i), Some(j)) => {
                entries[i].1 = Value::from_json(&j);
                entries[i].2 = Value::Str(JSON_ANNOTATION.into());
            }
            _ => warnings.push(format!(
                "metadata {key:?} is listed in {JSON_KEYS_KEY:?} but is not JSON text; kept as is"
            )),
        }
    }
    Ok(())
}

/// True when a tensor's stored bytes are big-endian elements: plain multi-byte types
/// in a big-endian file, except BF16 (gguf-py stores it as bytes, unswapped).
fn swaps(endian: Endian, info: &TensorInfo) -> bool {
    endian.big
        && info.layout == Layout::Dense
        && info.dtype.size() > 1
        && info.dtype != crate::dtype::DType::BF16
}

fn check_alignment(ty: GgufType, value: &Value) -> Result<u64> {
    let a = value.as_int().unwrap_or(0);
    if ty != GgufType::Uint32 {
        return Err(Error::malformed(format!(
            "{KEY_ALIGNMENT} is {}, not u32",
            ty.short_name()
        )));
    }
    if a <= 0 || a & (a - 1) != 0 {
        return Err(Error::malformed(format!(
            "{KEY_ALIGNMENT} is {a}, not a power of two"
        )));
    }
    Ok(a as u64)
}

fn read_name(r: &mut ByteReader<'_>, e: Endian, limits: &Limits, what: &str) -> Result<String> {
    let at = r.pos() as u64;
    let len = e.u64(r, what)?;
    limits.check_name(len).map_err(|e| e.at_offset(at))?;
    let b = r.take_u64(len, what)?;
    std::str::from_utf8(b)
        .map(str::to_string)
        .map_err(|_| Error::malformed(format!("{what} is not UTF-8")).at_offset(at))
}

/// One tensor info: the description (storage unset), the relative offset, the size.
fn read_tensor_info(
    r: &mut ByteReader<'_>,
    e: Endian,
    limits: &Limits,
    warnings: &mut Vec<String>,
) -> Result<(TensorInfo, u64, u64)> {
    let name = read_name(r, e, limits, "tensor name")?;
    let subject = format!("tensor {name:?}");
    let mut inner = || -> Result<(TensorInfo, u64, u64)> {
        let n_dims = e.u32(r, "n_dims")?;
        limits.check_rank(n_dims as u64)?;
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            let at = r.pos() as u64;
            let d = e.u64(r, "dimension")?;
            if d > i64::MAX as u64 {
                return Err(Error::malformed(format!("dimension {d} exceeds i64")).at_offset(at));
            }
            dims.push(d);
        }
        let at = r.pos() as u64;
        let id = e.u32(r, "ggml type")?;
        let ty = GgmlType::from_id(id)
            .ok_or_else(|| Error::unsupported(format!("unknown ggml type {id}")).at_offset(at))?;
        let rel = e.u64(r, "offset")?;
        // GGUF lists dimensions innermost first; our shapes are row-major.
        let shape: Vec<u64> = dims.iter().rev().copied().collect();
        let numel = crate::tensor::numel(&shape)?;
        let ne0 = dims.first().copied().unwrap_or(1);
        if ne0 % ty.block_size != 0 {
            return Err(Error::malformed(format!(
                "{} needs the innermost dimension ({ne0}) to be a multiple of {}",
                ty.name, ty.block_size
            )));
        }
        let nbytes = ty.nbytes(ne0, numel).ok_or_else(|| {
            Error::malformed(format!("{} {shape:?} overflows u64 bytes", ty.name))
        })?;
        let info = match ty.dtype {
            Some(dtype) => TensorInfo::dense(name.clone(), dtype, shape),
            None => {
                let mut attrs = Map::new();
                attrs.insert(ATTR_GGML_TYPE, Value::Int(id as i128));
                TensorInfo {
                    name: name.clone(),
                    dtype: crate::dtype::DType::U8,
                    shape,
                    layout: Layout::Other(ty.layout_name()),
                    attrs,
                    storage: Storage::default(),
                }
            }
        };
        if n_dims as usize > GGML_MAX_DIMS {
            warnings.push(format!(
                "tensor {name:?} has {n_dims} dimensions; ggml handles at most {GGML_MAX_DIMS}"
            ));
        }
        if name.len() > GGML_MAX_NAME {
            warnings.push(format!(
                "tensor {name:?} has a name longer than ggml's {GGML_MAX_NAME} bytes"
            ));
        }
        Ok((info, rel, nbytes))
    };
    inner().map_err(|e| e.at_subject(subject))
}

impl TensorSource for GgufFile<'_> {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn metadata_types(&self) -> Option<&Map> {
        self.metadata_types.as_ref()
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let i = crate::model::tensor_position(&self.index, name)?;
        let (off, len) = self.ranges[i];
        let bytes = self.src.slice(off, len, "tensor data")?;
        let info = self.infos[i].clone();
        match info.layout {
            Layout::Dense if swaps(self.endian, &info) => {
                let size = info.dtype.size();
                let mut owned = bytes.into_owned();
                for el in owned.chunks_exact_mut(size) {
                    el.reverse();
                }
                TensorView::dense(info, Cow::Owned(owned))
            }
            Layout::Dense => TensorView::dense(info, bytes),
            _ => Ok(TensorView {
                info,
                parts: vec![Part {
                    role: "data".into(),
                    bytes,
                }],
            }),
        }
    }
    fn source_format(&self) -> Option<Format> {
        Some(Format::Gguf)
    }
    fn raw_extent(&self, name: &str) -> Result<Option<crate::slice::RawExtent<'_>>> {
        let i = crate::model::tensor_position(&self.index, name)?;
        let info = &self.infos[i];
        // Packed ggml blocks are cut from the whole tensor (refused but whole rows).
        if info.layout != Layout::Dense || self.ranges[i].1 != info.dense_nbytes()? {
            return Ok(None);
        }
        Ok(Some(crate::slice::RawExtent {
            src: self.src,
            offset: self.ranges[i].0,
            start: 0,
            big_endian: swaps(self.endian, info),
            whole_digests: Vec::new(),
            own_check: None,
        }))
    }
}

impl Container for GgufFile<'_> {
    fn format(&self) -> Format {
        Format::Gguf
    }
    fn version(&self) -> String {
        self.version.to_string()
    }
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport {
        // No checksum: every tensor is done as soon as it is reached.
        opts.advance_tensors(&self.infos);
        let mut rep = VerifyReport {
            warnings: self.warnings.clone(),
            ..Default::default()
        };
        rep.ok("file", "structure");
        // GGUF has no checksum, so the data layout is the one check that catches a
        // damaged shape or offset that still stays inside the file: gguf-py and our
        // writer pack tensors in order with alignment padding, as llama.cpp requires.
        match &self.layout_problem {
            None => rep.ok("file", "layout"),
            Some(p) => rep.failed("file", "layout", p.clone()),
        }
        match &self.trailing {
            None => rep.ok("file", "trailing bytes"),
            Some(t) => rep.failed("file", "trailing bytes", t.clone()),
        }
        rep.push(
            "file",
            "checksum",
            Status::NotChecked,
            Some("GGUF stores no checksums; only the structure was validated".into()),
        );
        rep
    }
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}

/// The [`crate::any::OpenFn`] for GGUF.
pub fn open<'d>(
    src: crate::source::SourceRef<'d>,
    opts: &ReadOptions,
) -> Result<Box<dyn Container + 'd>> {
    Ok(Box::new(GgufFile::parse(src, &opts.limits)?))
}
