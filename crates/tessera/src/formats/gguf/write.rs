//! The GGUF v3 writer. The header (KVs and tensor infos) is planned from the tensor
//! descriptions alone; the data then streams one tensor at a time, each padded to the
//! alignment, exactly as gguf-py's `GGUFWriter` lays a file out.

use std::io::Write;

use crate::error::{Error, Result};
use crate::metadata::{Map, Metadata, Value};
use crate::model::TensorSource;
use crate::options::WriteOptions;
use crate::tensor::{Layout, TensorInfo, TensorView};
use crate::write::{InOrder, StreamWriter, WriteReport, WriteSeek};

use super::meta::{annotations, encode_kv, JSON_ANNOTATION, JSON_KEYS_KEY, TYPES_KEY};
use super::raw::{
    align_up, GgmlType, GgufType, ATTR_GGML_TYPE, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VERSION,
    KEY_ALIGNMENT,
};

/// One tensor as it will be stored.
struct Planned {
    name: String,
    ty: GgmlType,
    /// Innermost first.
    dims: Vec<u64>,
    nbytes: u64,
}

/// The ggml type and size of a tensor, or why GGUF cannot store it.
fn plan_tensor(info: &TensorInfo, notes: &mut Vec<String>) -> Result<Planned> {
    let name = &info.name;
    let numel = info.numel()?;
    let ty = match &info.layout {
        Layout::Dense => GgmlType::from_dtype(info.dtype).ok_or_else(|| {
            Error::unsupported(format!(
                "tensor {name:?} is {}; GGUF cannot store it",
                info.dtype
            ))
            .with_hint(crate::refusal::Hint::Cast)
        })?,
        Layout::Other(l) => {
            let ty = GgmlType::from_layout_name(l).ok_or_else(|| {
                Error::unsupported(format!(
                    "tensor {name:?} has layout {l:?}; GGUF stores only ggml_* packed layouts"
                ))
            })?;
            match info.attrs.get(ATTR_GGML_TYPE) {
                None => {}
                Some(Value::Int(id)) if *id == ty.id as i128 => {}
                Some(Value::Str(s)) if s.parse::<u32>().ok() == Some(ty.id) => {}
                Some(other) => {
                    return Err(Error::invalid_input(format!(
                        "tensor {name:?}: layout {l:?} but {ATTR_GGML_TYPE} = {other}"
                    )))
                }
            }
            if info.dtype != crate::dtype::DType::U8 {
                return Err(Error::invalid_input(format!(
                    "tensor {name:?}: packed layout {l:?} must be stored as u8, not {}",
                    info.dtype
                )));
            }
            ty
        }
        l => {
            return Err(Error::unsupported(format!(
                "tensor {name:?} is {l}; GGUF stores only dense tensors"
            ))
            .with_hint(crate::refusal::Hint::Densify))
        }
    };
    let dims: Vec<u64> = info.shape.iter().rev().copied().collect();
    let ne0 = dims.first().copied().unwrap_or(1);
    let nbytes = ty.nbytes(ne0, numel).ok_or_else(|| {
        Error::invalid_input(format!(
            "tensor {name:?}: {} needs the last dimension ({ne0}) to be a multiple of {}",
            ty.name, ty.block_size
        ))
    })?;
    if dims.iter().any(|&d| d > i64::MAX as u64) {
        return Err(Error::invalid_input(format!(
            "tensor {name:?}: a dimension exceeds i64"
        )));
    }
    if dims.len() > 4 {
        notes.push(format!(
            "tensor {name:?} has {} dimensions; ggml/llama.cpp handle at most 4",
            dims.len()
        ));
    }
    if name.len() > 64 {
        notes.push(format!(
            "tensor {name:?}: name longer than 64 bytes; llama.cpp refuses it"
        ));
    }
    let extra = info.attrs.keys().filter(|k| *k != ATTR_GGML_TYPE).count();
    if extra > 0 {
        notes.push(format!(
            "tensor {name:?}: {extra} attributes dropped (GGUF has no per-tensor attributes)"
        ));
    }
    Ok(Planned {
        name: name.clone(),
        ty,
        dims,
        nbytes,
    })
}

/// Encodes the metadata KVs; returns (bytes, count, alignment). `side` is the value
/// types held beside the metadata (a GGUF source's own); `from_gguf` says the metadata
/// is a GGUF file's, so a `tessera.gguf_types` key in it is that file's own key.
fn encode_metadata(
    meta: &Metadata,
    side: Option<&Map>,
    from_gguf: bool,
    notes: &mut Vec<String>,
) -> Result<(Vec<u8>, u64, u64)> {
    // The value types: beside the metadata when the source is a GGUF file (a key of
    // that name is then the file's own), else in it, as conversions to other formats
    // keep them.
    // The key carries our annotations only in metadata that went through another format.
    let legacy = side.is_none() && !from_gguf;
    let anns = match side {
        Some(t) => t.clone(),
        None if legacy => annotations(meta),
        None => crate::metadata::Map::new(),
    };
    // A hash index: `Map::get` is linear and a source may hold millions of keys.
    let anns: std::collections::HashMap<&str, &Value> = anns.iter().collect();
    let mut out = Vec::new();
    let mut count = 0u64;
    let mut alignment = GGUF_DEFAULT_ALIGNMENT;
    let mut json_keys = Vec::new();
    for (key, value) in meta.iter() {
        if (legacy && key == TYPES_KEY) || key == JSON_KEYS_KEY {
            continue;
        }
        if key == KEY_ALIGNMENT {
            alignment = alignment_value(value)?;
            let u32_ann = Value::Str(GgufType::Uint32.short_name().into());
            encode_kv(
                &mut out,
                key,
                &Value::Int(alignment as i128),
                Some(&u32_ann),
            )?;
        } else if encode_kv(&mut out, key, value, anns.get(key).copied())? {
            // Nothing to report when the value already was JSON text in a GGUF source.
            let ann = anns.get(key).and_then(|a| a.as_str());
            if ann != Some(JSON_ANNOTATION) && !from_gguf {
                notes.push(format!(
                    "metadata {key:?}: GGUF has no type for this value; stored as JSON text \
                     (listed in {JSON_KEYS_KEY:?}, which Tessera reads back)"
                ));
            }
            json_keys.push(Value::Str(key.to_string()));
        }
        count += 1;
    }
    if !json_keys.is_empty() {
        let ann = Value::Str("[str]".into());
        encode_kv(&mut out, JSON_KEYS_KEY, &Value::List(json_keys), Some(&ann))?;
        count += 1;
    }
    Ok((out, count, alignment))
}

fn alignment_value(v: &Value) -> Result<u64> {
    let a = match v {
        Value::Int(i) => Some(*i),
        Value::Str(s) => s.trim().parse::<i128>().ok(),
        _ => None,
    };
    match a {
        Some(a) if a > 0 && a <= u32::MAX as i128 && a & (a - 1) == 0 => Ok(a as u64),
        _ => Err(Error::invalid_input(format!(
            "{KEY_ALIGNMENT} must be a power of two that fits u32, not {v}"
        ))),
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

const ZEROS: [u8; 256] = [0; 256];

fn pad(w: &mut impl Write, n: u64) -> Result<()> {
    let mut left = n;
    while left > 0 {
        let k = left.min(ZEROS.len() as u64) as usize;
        w.write_all(&ZEROS[..k])?;
        left -= k as u64;
    }
    Ok(())
}

/// The key llama.cpp needs to load a model.
pub const ARCHITECTURE_KEY: &str = "general.architecture";

/// A streaming GGUF v3 writer. [`GgufWriter::new`] writes the header (KVs and tensor
/// infos: it needs every tensor's dtype, shape and layout, not its bytes);
/// [`GgufWriter::write_tensor`] then takes each tensor's bytes (a packed `ggml_*`
/// tensor's blocks as they are) in [`GgufWriter::order`], the order given, each padded
/// to the alignment; [`GgufWriter::finish`] checks that all came.
pub struct GgufWriter<W: Write> {
    out: std::io::BufWriter<W>,
    plans: Vec<Planned>,
    next: InOrder,
    alignment: u64,
    notes: Vec<String>,
}

impl<W: Write> GgufWriter<W> {
    /// Plans the file and writes its header. The GGUF value type of each metadata key
    /// comes from `types` (key → `u32`, `[str]`, … as [`super::meta`] names them, what
    /// a GGUF source's `TensorSource::metadata_types` gives), else from a
    /// `tessera.gguf_types` key in `metadata` (what conversions to other formats keep),
    /// else from the value. Errors name a tensor GGUF cannot store, or a duplicate name.
    pub fn new(
        out: W,
        infos: &[TensorInfo],
        metadata: &Metadata,
        types: Option<&Map>,
    ) -> Result<Self> {
        Self::plan(out, infos, metadata, types, false)
    }

    fn plan(
        out: W,
        infos: &[TensorInfo],
        metadata: &Metadata,
        types: Option<&Map>,
        from_gguf: bool,
    ) -> Result<Self> {
        let mut notes = Vec::new();
        // llama.cpp refuses a model without it ("key not found in model:
        // general.architecture"); gguf-py and Tessera read such a file. A split after
        // the first (`split.no` > 0) carries no model keys: llama.cpp reads them from
        // the first.
        let later_split = matches!(metadata.get("split.no"), Some(Value::Int(n)) if *n > 0);
        if metadata.get(ARCHITECTURE_KEY).is_none() && !later_split {
            notes.push(format!(
                "no {ARCHITECTURE_KEY} in the metadata: llama.cpp will not load this GGUF"
            ));
        }
        let (kv, kv_count, alignment) = encode_metadata(metadata, types, from_gguf, &mut notes)?;
        let plans = infos
            .iter()
            .map(|i| plan_tensor(i, &mut notes))
            .collect::<Result<Vec<_>>>()?;
        let mut seen = std::collections::HashSet::new();
        if let Some(p) = plans.iter().find(|p| !seen.insert(p.name.as_str())) {
            return Err(Error::invalid_input(format!(
                "duplicate tensor name {:?}: GGUF readers refuse it",
                p.name
            )));
        }

        let mut head = Vec::with_capacity(24 + kv.len());
        head.extend_from_slice(GGUF_MAGIC);
        head.extend_from_slice(&GGUF_VERSION.to_le_bytes());
        head.extend_from_slice(&(plans.len() as u64).to_le_bytes());
        head.extend_from_slice(&kv_count.to_le_bytes());
        head.extend_from_slice(&kv);
        let mut offset = 0u64;
        for p in &plans {
            put_str(&mut head, &p.name);
            head.extend_from_slice(&(p.dims.len() as u32).to_le_bytes());
            for d in &p.dims {
                head.extend_from_slice(&d.to_le_bytes());
            }
            head.extend_from_slice(&p.ty.id.to_le_bytes());
            head.extend_from_slice(&offset.to_le_bytes());
            offset = offset
                .checked_add(p.nbytes)
                .and_then(|o| align_up(o, alignment))
                .ok_or_else(|| Error::invalid_input("total tensor size overflows u64"))?;
        }
        let head_len = head.len() as u64;
        let data_start = align_up(head_len, alignment)
            .ok_or_else(|| Error::invalid_input("header size overflows"))?;

        let mut out = std::io::BufWriter::with_capacity(1 << 20, out);
        out.write_all(&head)?;
        pad(&mut out, data_start - head_len)?;
        Ok(GgufWriter {
            out,
            plans,
            next: InOrder::new(),
            alignment,
            notes,
        })
    }

    /// Tensor names in the order their bytes must be given (the order of `infos`).
    pub fn order(&self) -> impl Iterator<Item = &str> {
        self.plans.iter().map(|p| p.name.as_str())
    }

    /// What the plan noticed that GGUF readers may not take (no architecture key, ranks
    /// over 4, long names, dropped attributes, values stored as JSON text).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Writes the next tensor's bytes (`name` must be the next in [`Self::order`]) and
    /// the padding after them.
    pub fn write_tensor(&mut self, name: &str, data: &[u8]) -> Result<()> {
        let p = self.next.next(&self.plans, name, |p| &p.name)?;
        if data.len() as u64 != p.nbytes {
            return Err(Error::invalid_input(format!(
                "tensor {name:?}: {} bytes, {} of {:?} (innermost first) needs {}",
                data.len(),
                p.ty.name,
                p.dims,
                p.nbytes
            )));
        }
        self.out.write_all(data)?;
        let padded = align_up(p.nbytes, self.alignment).unwrap_or(p.nbytes);
        pad(&mut self.out, padded - p.nbytes)?;
        self.next.advance();
        Ok(())
    }

    /// Checks every planned tensor was written, flushes and returns the sink.
    pub fn finish(self) -> Result<W> {
        (self.next).all_written("GGUF writer", &self.plans, |p| &p.name)?;
        self.out
            .into_inner()
            .map_err(|e| Error::from(e.into_error()))
    }
}

/// The driver's view of the writer: a dense tensor's bytes, or a packed one's `data`.
impl<W: Write> StreamWriter for GgufWriter<W> {
    type Encoded = ();
    type Done = W;
    fn order(&self) -> Vec<String> {
        self.order().map(str::to_string).collect()
    }
    fn write_tensor(&mut self, name: &str, view: TensorView<'_>, _: Option<()>) -> Result<()> {
        let bytes = match (&view.info.layout, view.parts.as_slice()) {
            (Layout::Dense, _) => view.data()?,
            (_, [part]) if part.role == "data" => part.bytes.as_ref(),
            _ => {
                return Err(Error::invalid_input(format!(
                    "tensor {name:?}: a packed ggml tensor has exactly one part, \"data\""
                )))
            }
        };
        self.write_tensor(name, bytes)
    }
    fn finish(self) -> Result<W> {
        self.finish()
    }
}

/// Writes `src` as GGUF v3. See the module docs for the mapping.
pub fn write(
    src: &dyn TensorSource,
    out: &mut dyn WriteSeek,
    _opts: &WriteOptions,
) -> Result<WriteReport> {
    let from_gguf = src.source_format() == Some(crate::format::Format::Gguf);
    let mut w = GgufWriter::plan(
        &mut *out,
        src.tensor_infos(),
        src.metadata(),
        src.metadata_types(),
        from_gguf,
    )?;
    let notes = std::mem::take(&mut w.notes);
    crate::write::drive(src, w)?.flush()?;
    Ok(WriteReport {
        notes,
        ..Default::default()
    })
}
