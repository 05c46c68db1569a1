//! The GGUF v3 writer. The header (KVs and tensor infos) is planned from the tensor
//! descriptions alone; the data then streams one tensor at a time, each padded to the
//! alignment, exactly as gguf-py's `GGUFWriter` lays a file out.

use std::io::Write;

use crate::convert::{WriteOptions, WriteReport, WriteSeek};
use crate::error::{Error, Result};
use crate::metadata::Value;
use crate::model::TensorSource;
use crate::tensor::{Layout, TensorInfo};

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

/// Encodes the metadata KVs; returns (bytes, count, alignment).
fn encode_metadata(src: &dyn TensorSource, notes: &mut Vec<String>) -> Result<(Vec<u8>, u64, u64)> {
    let meta = src.metadata();
    // The value types: beside the metadata when the source is a GGUF file (a key of
    // that name is then the file's own), else in it, as conversions to other formats
    // keep them.
    let side = src.metadata_types();
    let from_gguf = src.source_format() == Some(crate::format::Format::Gguf);
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
            let from_gguf = src.source_format() == Some(crate::format::Format::Gguf);
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

/// Writes `src` as GGUF v3. See the module docs for the mapping.
pub fn write(
    src: &dyn TensorSource,
    out: &mut dyn WriteSeek,
    _opts: &WriteOptions,
) -> Result<WriteReport> {
    let mut notes = Vec::new();
    // llama.cpp refuses a model without it ("key not found in model:
    // general.architecture"); gguf-py and Tessera read such a file.
    if src.metadata().get(ARCHITECTURE_KEY).is_none() {
        notes.push(format!(
            "no {ARCHITECTURE_KEY} in the metadata: llama.cpp will not load this GGUF"
        ));
    }
    let (kv, kv_count, alignment) = encode_metadata(src, &mut notes)?;
    let plans = src
        .tensor_infos()
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

    let mut w = std::io::BufWriter::with_capacity(1 << 20, &mut *out);
    w.write_all(&head)?;
    pad(&mut w, data_start - head_len)?;
    for p in &plans {
        let view = src.tensor(&p.name)?;
        let bytes = match (&view.info.layout, view.parts.as_slice()) {
            (Layout::Dense, _) => view.data()?,
            (_, [part]) if part.role == "data" => part.bytes.as_ref(),
            _ => {
                return Err(Error::invalid_input(format!(
                    "tensor {:?}: a packed ggml tensor has exactly one part, \"data\"",
                    p.name
                )))
            }
        };
        if bytes.len() as u64 != p.nbytes {
            return Err(Error::invalid_input(format!(
                "tensor {:?}: {} bytes, {} {:?} needs {}",
                p.name,
                bytes.len(),
                p.ty.name,
                view.info.shape,
                p.nbytes
            )));
        }
        w.write_all(bytes)?;
        let padded = align_up(p.nbytes, alignment).unwrap_or(p.nbytes);
        pad(&mut w, padded - p.nbytes)?;
    }
    w.flush()?;
    Ok(WriteReport {
        notes,
        ..Default::default()
    })
}
