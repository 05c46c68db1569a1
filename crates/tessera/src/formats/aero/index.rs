//! The metadata chunks of an [`AeroFile`]: MJSN/MMSG (file metadata, manifest
//! cross-check) and the TIDX tensor index, decoded into our own structures with every
//! number checked.

use std::collections::HashMap;

use super::codec;
use super::quant::{layout_from_descriptor, QUANT_DESCRIPTORS};
use super::raw::*;
use super::read::{AeroFile, TensorLoc, MMSG_EXACT_METADATA};
use crate::error::{Error, Result};
use crate::metadata::{Map, Value};
use crate::tensor::{Layout, Storage, TensorInfo};
use crate::util::hex;
use crate::DType;

/// Most msgpack values built for one manifest-like chunk (MMSG, PHSH, an unknown TIDX key).
pub(super) const MAX_MANIFEST_VALUES: u64 = 8 << 20;
/// Most msgpack values in one TIDX tensor entry.
const MAX_ENTRY_VALUES: u64 = 1 << 16;

impl AeroFile<'_> {
    fn decode_msgpack(&self, i: usize) -> Result<Value> {
        let c = &self.chunks[i];
        let bytes = self.metadata_chunk(i)?;
        let (v, used) = codec::decode(&bytes, self.limits.max_depth, MAX_MANIFEST_VALUES)
            .map_err(|e| e.at_subject(c.subject()))?;
        if bytes[used..].iter().any(|&b| b != 0) {
            return Err(Error::malformed("trailing bytes after the msgpack value")
                .at_subject(c.subject())
                .at_offset(c.entry.chunk_offset + used as u64));
        }
        Ok(v)
    }

    pub(super) fn load_metadata(&mut self) -> Result<()> {
        let mut meta = None;
        let mut model = None;
        if let Some(i) = self.single(b"MMSG")? {
            let v = self.decode_msgpack(i)?;
            let m = match v {
                Value::Map(m) => m,
                _ => {
                    return Err(Error::malformed("MMSG manifest is not a map")
                        .at_subject(self.chunks[i].subject()))
                }
            };
            if let Some(Value::Map(exact)) = m.get(MMSG_EXACT_METADATA) {
                meta = Some(exact.clone());
            }
            model = m.get("model").and_then(Value::as_map).cloned();
            self.check_manifest(&m);
        }
        if let Some(i) = self.single(b"MJSN")? {
            let bytes = self.metadata_chunk(i)?;
            let j: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
                Error::malformed("meta.json is not valid JSON")
                    .with_source(e)
                    .at_subject(self.chunks[i].subject())
            })?;
            let mjsn = match Value::from_json(&j) {
                Value::Map(m) => m,
                other => {
                    let mut m = Map::new();
                    m.insert("meta.json", other);
                    m
                }
            };
            if let Some(Value::List(l)) = mjsn.get(QUANT_DESCRIPTORS) {
                self.descriptors = l.iter().filter_map(Value::as_map).cloned().collect();
            }
            meta.get_or_insert(mjsn);
        }
        self.metadata = match (meta, model) {
            (Some(m), _) => m,
            (None, Some(model)) => {
                let mut m = Map::new();
                for (k, to) in [("name", "model_name"), ("architecture", "architecture")] {
                    if let Some(v) = model.get(k) {
                        m.insert(to, v.clone());
                    }
                }
                m
            }
            (None, None) => Map::new(),
        };
        Ok(())
    }

    /// The MMSG `chunks` and `shards` lists must agree with the TOC (the original readers
    /// do not look; a disagreement is a warning, since no hash may cover a changed fourcc).
    fn check_manifest(&mut self, m: &Map) {
        let int = |v: Option<&Value>| {
            v.and_then(Value::as_int)
                .and_then(|i| usize::try_from(i).ok())
        };
        let mut bad = Vec::new();
        for e in m.get("chunks").and_then(Value::as_list).unwrap_or(&[]) {
            let Some(e) = e.as_map() else { continue };
            let (Some(i), Some(f)) = (
                int(e.get("toc_index")),
                e.get("fourcc").and_then(Value::as_str),
            ) else {
                continue;
            };
            match self.chunks.get(i) {
                Some(c) if c.fourcc() == f => {}
                Some(c) => bad.push(format!(
                    "TOC entry {i} is {} ({:?}), MMSG says {f}",
                    c.fourcc(),
                    c.name
                )),
                None => bad.push(format!(
                    "MMSG lists TOC entry {i} ({f}), the TOC has {}",
                    self.chunks.len()
                )),
            }
        }
        for s in m.get("shards").and_then(Value::as_list).unwrap_or(&[]) {
            let Some(s) = s.as_map() else { continue };
            let (Some(i), Some(size)) = (int(s.get("toc_index")), int(s.get("size_bytes"))) else {
                continue;
            };
            match self.chunks.get(i) {
                Some(c) if &c.entry.fourcc == b"WTSH" && c.entry.chunk_ulen == size as u64 => {}
                _ => bad.push(format!(
                    "MMSG shard at TOC entry {i} of {size} bytes does not match the TOC"
                )),
            }
        }
        for b in bad {
            self.warnings
                .push(format!("manifest disagrees with the TOC: {b}"));
        }
    }

    /// Decodes the TIDX one tensor entry at a time, so memory follows the tensors, not
    /// whatever a hostile index claims.
    pub(super) fn load_tidx(&mut self) -> Result<()> {
        let Some(ti) = self.single(b"TIDX")? else {
            return Ok(());
        };
        let c = &self.chunks[ti];
        let (subject, base) = (c.subject(), c.entry.chunk_offset);
        let bytes = self.metadata_chunk(ti)?;
        let at = |e: Error| e.at_subject(subject.clone());
        let mut d = codec::Decoder::new(&bytes, self.limits.max_depth, u64::MAX);
        let (mut infos, mut locs, mut by_name) = (Vec::new(), Vec::new(), HashMap::new());
        let mut shard_of: HashMap<u64, usize> = HashMap::new();
        let mut found = false;
        for _ in 0..d.map_len().map_err(at)? {
            if d.key().map_err(at)? != "tensors" {
                d.value_bounded(MAX_MANIFEST_VALUES).map_err(at)?; // unknown key: ignored
                continue;
            }
            if found {
                return Err(at(Error::malformed("TIDX has two \"tensors\" keys")));
            }
            found = true;
            let n = d.array_len().map_err(at)?;
            self.limits.check_entries(n as u64).map_err(at)?;
            for i in 0..n {
                let entry = d.value_bounded(MAX_ENTRY_VALUES).map_err(at)?;
                let (info, loc) = self
                    .tidx_entry(&entry, &mut shard_of)
                    .map_err(|e| e.at_subject(format!("TIDX tensor {i}")))?;
                if by_name.insert(info.name.clone(), infos.len()).is_some() {
                    return Err(at(Error::malformed(format!(
                        "duplicate tensor name {:?}",
                        info.name
                    ))));
                }
                infos.push(info);
                locs.push(loc);
            }
        }
        if !found {
            return Err(at(Error::malformed("TIDX has no \"tensors\" array")));
        }
        if bytes[d.pos()..].iter().any(|&b| b != 0) {
            return Err(
                at(Error::malformed("trailing bytes after the msgpack value"))
                    .at_offset(base + d.pos() as u64),
            );
        }
        drop(bytes);
        let unaligned: Vec<&TensorInfo> = infos
            .iter()
            .filter(|t| {
                t.layout == Layout::Dense
                    && t.storage.offset.unwrap_or(0) % t.dtype.size() as u64 != 0
            })
            .collect();
        if let Some(first) = unaligned.first() {
            self.warnings.push(format!(
                "{} tensors are not aligned to their element size (first {:?} at byte {}); \
                 typed views of them need a copy",
                unaligned.len(),
                first.name,
                first.storage.offset.unwrap_or(0)
            ));
        }
        (self.infos, self.locs, self.by_name) = (infos, locs, by_name);
        Ok(())
    }

    fn tidx_entry(
        &self,
        t: &Value,
        shard_of: &mut HashMap<u64, usize>,
    ) -> Result<(TensorInfo, TensorLoc)> {
        let m = t
            .as_map()
            .ok_or_else(|| Error::malformed("entry is not a map"))?;
        let uint = |k: &str| -> Result<u64> {
            match m.get(k) {
                Some(Value::Int(i)) => u64::try_from(*i)
                    .map_err(|_| Error::malformed(format!("{k} {i} is out of range"))),
                Some(_) => Err(Error::malformed(format!("{k} is not an integer"))),
                None => Err(Error::malformed(format!("missing {k:?}"))),
            }
        };
        let name = m
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::malformed("missing or non-string \"name\""))?
            .to_string();
        let ctx = |e: Error| e.at_subject(format!("tensor {name:?}"));
        if name.len() > MAX_TENSOR_NAME {
            return Err(ctx(Error::limit(format!(
                "name is {} bytes, over {MAX_TENSOR_NAME}",
                name.len()
            ))));
        }
        let code = uint("dtype").map_err(ctx)?;
        let dims = m
            .get("shape")
            .and_then(Value::as_list)
            .ok_or_else(|| ctx(Error::malformed("missing or non-array \"shape\"")))?;
        if dims.len() > MAX_RANK.min(self.limits.max_rank) {
            return Err(ctx(Error::limit(format!(
                "rank {} is over {MAX_RANK}",
                dims.len()
            ))));
        }
        let shape = dims
            .iter()
            .map(|d| match d {
                Value::Int(i) => u64::try_from(*i)
                    .map_err(|_| Error::malformed(format!("negative dimension {i}"))),
                _ => Err(Error::malformed("shape holds a non-integer")),
            })
            .collect::<Result<Vec<u64>>>()
            .map_err(ctx)?;
        let shard_id = uint("shard_id").map_err(ctx)?;
        let data_off = uint("data_off").map_err(ctx)?;
        let data_len = uint("data_len").map_err(ctx)?;
        let flags = match m.get("flags") {
            None => 0,
            Some(_) => uint("flags").map_err(ctx)?,
        };
        let hash_b3 = match m.get("hash_b3") {
            None => None,
            Some(Value::Str(s)) if s.is_empty() => None,
            Some(Value::Str(s)) => {
                let b = crate::util::unhex(s)
                    .filter(|b| b.len() == 32)
                    .ok_or_else(|| ctx(Error::malformed("hash_b3 is not 64 hex digits")))?;
                let mut h = [0u8; 32];
                h.copy_from_slice(&b);
                Some(h)
            }
            Some(_) => return Err(ctx(Error::malformed("hash_b3 is not a string"))),
        };
        if self.index_only {
            // An AEROSET's index: the shard is in a part (checked there).
            data_off.checked_add(data_len).ok_or_else(|| {
                ctx(Error::malformed(format!(
                    "data_off {data_off} + data_len {data_len} overflows"
                )))
            })?;
        }
        let chunk = match shard_of.get(&shard_id) {
            _ if self.index_only => usize::MAX,
            Some(&c) => c,
            None => {
                let want = format!("weights.shard{shard_id}");
                let c = self
                    .chunks
                    .iter()
                    .position(|c| &c.entry.fourcc == b"WTSH" && c.name == want)
                    .ok_or_else(|| {
                        ctx(Error::malformed(format!(
                            "shard_id {shard_id}: no WTSH chunk {want:?}"
                        )))
                    })?;
                shard_of.insert(shard_id, c);
                c
            }
        };
        let shard = match self.chunks.get(chunk) {
            Some(c) => c.entry.clone(),
            // index_only: no shard here; the entry's own numbers stand.
            None => TocEntry {
                fourcc: *b"WTSH",
                chunk_flags: 0,
                chunk_offset: 0,
                chunk_length: u64::MAX,
                chunk_ulen: u64::MAX,
                name_off: 0,
                name_len: 0,
                reserved0: 0,
                blake3_256: [0; 32],
            },
        };
        let end = data_off.checked_add(data_len);
        if end.is_none_or(|e| e > shard.chunk_ulen) {
            return Err(ctx(Error::malformed(format!(
                "data_off {data_off} + data_len {data_len} exceeds shard {shard_id} ({} bytes)",
                shard.chunk_ulen
            ))));
        }
        let mut attrs = Map::new();
        let quant_params = match m.get("quant_params") {
            None | Some(Value::Null) => None,
            Some(Value::Map(q)) => Some(q.clone()),
            Some(_) => return Err(ctx(Error::malformed("quant_params is not a map"))),
        };
        let quant_id = match m.get("quant_id") {
            None | Some(Value::Null) => None,
            Some(Value::Int(i)) => Some(*i),
            Some(_) => return Err(ctx(Error::malformed("quant_id is not an integer"))),
        };
        let (dtype, layout) = if code == DTYPE_PACKED as u64 {
            // Packed: the codec parameters become attributes; the layout is named by
            // quant_params["layout"], else by the quant_id's descriptor.
            let mut q = quant_params.unwrap_or_default();
            let described = quant_id.and_then(|id| {
                self.descriptors
                    .iter()
                    .find(|d| d.get("id").and_then(Value::as_int) == Some(id))
                    .and_then(layout_from_descriptor)
            });
            // An AEROSET's index.aero has no meta.json (aerotensor's): its descriptors
            // are in the parts, so a ggml block type names the layout, as the parts'
            // descriptors do.
            let ggml = (self.index_only && self.descriptors.is_empty())
                .then(|| q.get("ggml_type").and_then(Value::as_int))
                .flatten()
                .and_then(|t| u32::try_from(t).ok())
                .and_then(crate::quant::GgmlType::from_id)
                .map(crate::quant::GgmlType::layout_name);
            let layout = match q.remove("layout") {
                Some(Value::Str(s)) => s,
                _ => described.or(ggml).unwrap_or_else(|| "packed".to_string()),
            };
            if let Some(id) = quant_id {
                attrs.insert("quant_id", Value::Int(id));
            }
            for (k, v) in q {
                attrs.insert(k, v);
            }
            (DType::U8, Layout::Other(layout))
        } else {
            let dtype = u16::try_from(code)
                .ok()
                .and_then(dtype_from_u16)
                .ok_or_else(|| ctx(Error::unsupported(format!("unknown dtype code {code}"))))?;
            let want = crate::tensor::dense_nbytes(dtype, &shape).map_err(ctx)?;
            if want != data_len {
                return Err(ctx(Error::malformed(format!(
                    "data_len {data_len} but {dtype} {shape:?} needs {want} bytes"
                ))));
            }
            if let Some(id) = quant_id {
                attrs.insert("quant_id", Value::Int(id));
            }
            if let Some(q) = quant_params {
                attrs.insert("quant_params", Value::Map(q));
            }
            (dtype, Layout::Dense)
        };
        if flags != 0 {
            attrs.insert("aero_flags", Value::Int(flags as i128));
        }
        match m.get(TIDX_ATTRS) {
            None => {}
            Some(Value::Map(extra)) => {
                for (k, v) in extra.iter() {
                    attrs.insert(k, v.clone());
                }
            }
            Some(_) => return Err(ctx(Error::malformed(format!("{TIDX_ATTRS} is not a map")))),
        }
        let info = TensorInfo {
            name,
            dtype,
            shape,
            layout,
            attrs,
            storage: Storage {
                offset: (!self.index_only).then(|| shard.chunk_offset.saturating_add(data_off)),
                stored_bytes: data_len,
                encoding: if shard.is_zstd() { "zstd" } else { "raw" }.into(),
                digests: hash_b3
                    .iter()
                    .map(|h| format!("blake3:{}", hex(h)))
                    .collect(),
            },
        };
        let loc = TensorLoc {
            chunk,
            shard_id,
            data_off,
            data_len,
            hash_b3,
        };
        Ok((info, loc))
    }
}
