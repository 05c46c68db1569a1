//! `STEN` chunk payloads: a small safetensors file holding one logical tensor.
//!
//! A private, minimal safetensors encoder/decoder (8-byte little-endian header length,
//! a JSON header padded with spaces to a multiple of 8, then the data, contiguous). It
//! exists because the crate's safetensors module was written in parallel; the two can
//! be unified later. See the module docs of `formats::fold` for the mapping.

use std::io::Read;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::metadata::{Map, Value};
use crate::tensor::{Layout, TensorInfo, TensorView};

/// `__metadata__` keys we write.
pub const KEY_LAYOUT: &str = "tessera.layout";
/// The logical dtype when the stored one is not it.
pub const KEY_DTYPE: &str = "tessera.dtype";
/// The logical shape (JSON list) when the stored one is not it.
pub const KEY_SHAPE: &str = "tessera.shape";
/// Per-tensor attributes (JSON object).
pub const KEY_ATTRS: &str = "tessera.attrs";
/// Largest safetensors header we parse inside a chunk.
const MAX_HEADER: u64 = 100 << 20;

/// The safetensors name of a dtype, when safetensors has it.
pub fn st_name(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::Bool => "BOOL",
        DType::U8 => "U8",
        DType::I8 => "I8",
        DType::U16 => "U16",
        DType::I16 => "I16",
        DType::U32 => "U32",
        DType::I32 => "I32",
        DType::U64 => "U64",
        DType::I64 => "I64",
        DType::F16 => "F16",
        DType::BF16 => "BF16",
        DType::F32 => "F32",
        DType::F64 => "F64",
        DType::F8E4M3FN => "F8_E4M3",
        DType::F8E5M2 => "F8_E5M2",
        DType::F8E8M0 => "F8_E8M0",
        DType::C64 => "C64",
        DType::F8E4M3FNUZ | DType::F8E5M2FNUZ | DType::C128 => return None,
    })
}

fn from_st_name(s: &str) -> Option<DType> {
    DType::ALL.into_iter().find(|d| st_name(*d) == Some(s))
}

/// One stored safetensors entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The key.
    pub key: String,
    /// Its dtype.
    pub dtype: DType,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Byte range inside the payload (absolute from the payload start).
    pub range: (u64, u64),
}

/// A parsed STEN header.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Header {
    /// `__metadata__` (string values).
    pub metadata: Vec<(String, String)>,
    /// Entries in header order.
    pub entries: Vec<Entry>,
    /// Where the data starts (8 + header length).
    pub data_start: u64,
}

/// Reads the header from the start of a payload of `payload_len` bytes.
pub fn read_header(mut r: impl Read, payload_len: u64) -> Result<Header> {
    let mut n8 = [0u8; 8];
    r.read_exact(&mut n8)
        .map_err(|e| Error::malformed("STEN payload shorter than 8 bytes").with_source(e))?;
    let n = u64::from_le_bytes(n8);
    if n > MAX_HEADER || n.saturating_add(8) > payload_len {
        return Err(Error::malformed(format!(
            "STEN header length {n} exceeds the payload ({payload_len} bytes)"
        )));
    }
    let mut text = Vec::new();
    r.take(n)
        .read_to_end(&mut text)
        .map_err(|e| Error::malformed("STEN header unreadable").with_source(e))?;
    if text.len() as u64 != n {
        return Err(Error::malformed("STEN header truncated"));
    }
    let j: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| Error::malformed("STEN header is not JSON").with_source(e))?;
    let obj = j
        .as_object()
        .ok_or_else(|| Error::malformed("STEN header is not a JSON object"))?;
    let data_start = 8 + n;
    let mut h = Header {
        data_start,
        ..Header::default()
    };
    for (k, v) in obj {
        if k == "__metadata__" {
            let m = v
                .as_object()
                .ok_or_else(|| Error::malformed("STEN __metadata__ is not an object"))?;
            for (mk, mv) in m {
                let s = mv.as_str().ok_or_else(|| {
                    Error::malformed(format!("STEN __metadata__ {mk:?} is not a string"))
                })?;
                h.metadata.push((mk.clone(), s.to_string()));
            }
            continue;
        }
        let bad = |why: &str| Error::malformed(format!("STEN entry {k:?}: {why}"));
        let dt = v["dtype"].as_str().ok_or_else(|| bad("no dtype"))?;
        let dtype = from_st_name(dt).ok_or_else(|| {
            Error::unsupported(format!("STEN entry {k:?}: unsupported dtype {dt:?}"))
        })?;
        let shape = v["shape"]
            .as_array()
            .ok_or_else(|| bad("no shape"))?
            .iter()
            .map(|d| d.as_u64().ok_or_else(|| bad("bad shape")))
            .collect::<Result<Vec<u64>>>()?;
        let offs = v["data_offsets"]
            .as_array()
            .filter(|a| a.len() == 2)
            .ok_or_else(|| bad("no data_offsets"))?;
        let (b, e) = match (offs[0].as_u64(), offs[1].as_u64()) {
            (Some(b), Some(e)) if b <= e => (b, e),
            _ => return Err(bad("bad data_offsets")),
        };
        let want = crate::tensor::dense_nbytes(dtype, &shape)?;
        if e - b != want {
            return Err(bad(&format!(
                "{} bytes for {dt} {shape:?}, needs {want}",
                e - b
            )));
        }
        let (ab, ae) = (
            data_start
                .checked_add(b)
                .ok_or_else(|| bad("offset overflow"))?,
            data_start
                .checked_add(e)
                .ok_or_else(|| bad("offset overflow"))?,
        );
        if ae > payload_len {
            return Err(bad("data_offsets run past the payload"));
        }
        h.entries.push(Entry {
            key: k.clone(),
            dtype,
            shape,
            range: (ab, ae),
        });
    }
    Ok(h)
}

/// Named byte ranges (absolute in the payload) making up one tensor.
pub type PartRanges = Vec<(String, (u64, u64))>;

/// What a STEN chunk holds: logical tensors with the byte ranges of their parts.
pub fn logical_tensors(chunk: &str, h: &Header) -> Result<Vec<(TensorInfo, PartRanges)>> {
    let meta = |k: &str| {
        h.metadata
            .iter()
            .find(|(mk, _)| mk == k)
            .map(|(_, v)| v.as_str())
    };
    let attrs = match meta(KEY_ATTRS) {
        Some(text) => match crate::util::pyjson::loads(text.as_bytes(), 64)? {
            Value::Map(m) => m,
            _ => return Err(Error::malformed(format!("{KEY_ATTRS} is not an object"))),
        },
        None => Map::new(),
    };
    if meta(KEY_LAYOUT).is_some() || meta(KEY_DTYPE).is_some() {
        // One logical tensor named after the chunk, its parts keyed by role.
        let layout = Layout::from_name(meta(KEY_LAYOUT).unwrap_or("dense"));
        let dtype = match meta(KEY_DTYPE) {
            Some(n) => DType::from_name(n)
                .ok_or_else(|| Error::unsupported(format!("STEN: unknown dtype {n:?}")))?,
            None => h
                .entries
                .iter()
                .find(|e| e.key == "values" || e.key == "data")
                .map(|e| e.dtype)
                .ok_or_else(|| Error::malformed("STEN: no values/data entry"))?,
        };
        let shape = match meta(KEY_SHAPE) {
            Some(s) => serde_json::from_str::<Vec<u64>>(s)
                .map_err(|e| Error::malformed(format!("STEN: bad {KEY_SHAPE}")).with_source(e))?,
            None => h
                .entries
                .iter()
                .find(|e| e.key == "data")
                .map(|e| e.shape.clone())
                .ok_or_else(|| Error::malformed(format!("STEN: no {KEY_SHAPE}")))?,
        };
        let mut info = TensorInfo::dense(chunk, dtype, shape);
        info.layout = layout;
        info.attrs = attrs;
        let parts = h.entries.iter().map(|e| (e.key.clone(), e.range)).collect();
        return Ok(vec![(info, parts)]);
    }
    if h.entries.len() == 1 && h.entries[0].key == chunk {
        let e = &h.entries[0];
        let mut info = TensorInfo::dense(chunk, e.dtype, e.shape.clone());
        info.attrs = attrs;
        return Ok(vec![(info, vec![("data".into(), e.range)])]);
    }
    // A plain safetensors file (pyfolds HEAD's torch_state): one tensor per entry.
    Ok(h.entries
        .iter()
        .map(|e| {
            (
                TensorInfo::dense(format!("{chunk}/{}", e.key), e.dtype, e.shape.clone()),
                vec![("data".to_string(), e.range)],
            )
        })
        .collect())
}

/// The header bytes (length prefix included) for `view`, and the parts to write after
/// it, in order.
pub fn encode_header<'a>(view: &'a TensorView<'_>) -> Result<(Vec<u8>, Vec<&'a [u8]>)> {
    let info = &view.info;
    let mut meta = serde_json::Map::new();
    let native = st_name(info.dtype);
    let dense_native = info.layout == Layout::Dense && native.is_some();
    if info.layout != Layout::Dense {
        meta.insert(KEY_LAYOUT.into(), info.layout.name().into());
    }
    if !dense_native {
        meta.insert(KEY_DTYPE.into(), info.dtype.name().into());
        meta.insert(
            KEY_SHAPE.into(),
            serde_json::to_string(&info.shape)
                .unwrap_or_default()
                .into(),
        );
    }
    if !info.attrs.is_empty() {
        meta.insert(
            KEY_ATTRS.into(),
            crate::util::pyjson::dumps_map(&info.attrs, crate::util::pyjson::DumpOptions::INDEX)
                .into(),
        );
    }
    let mut header = serde_json::Map::new();
    if !meta.is_empty() {
        header.insert("__metadata__".into(), serde_json::Value::Object(meta));
    }
    let mut parts = Vec::new();
    let mut off = 0u64;
    let mut add = |key: &str, dt: &str, shape: Vec<u64>, bytes: &'a [u8]| {
        let end = off + bytes.len() as u64;
        header.insert(
            key.to_string(),
            serde_json::json!({"dtype": dt, "shape": shape, "data_offsets": [off, end]}),
        );
        off = end;
        parts.push(bytes);
    };
    let raw = |b: &[u8]| vec![b.len() as u64];
    match &info.layout {
        Layout::Dense if dense_native => add(
            &info.name,
            native.unwrap_or("U8"),
            info.shape.clone(),
            view.data()?,
        ),
        Layout::Dense => {
            let d = view.data()?;
            add("data", "U8", raw(d), d)
        }
        Layout::SparseCsr | Layout::SparseCoo => {
            for p in &view.parts {
                let b = p.bytes.as_ref();
                if p.role == "values" {
                    match native {
                        Some(dt) => {
                            add("values", dt, vec![(b.len() / info.dtype.size()) as u64], b)
                        }
                        None => add("values", "U8", raw(b), b),
                    }
                } else if p.role == "coords" && !info.shape.is_empty() {
                    let ndim = info.shape.len() as u64;
                    add("coords", "U64", vec![ndim, b.len() as u64 / 8 / ndim], b)
                } else {
                    add(&p.role, "U64", vec![b.len() as u64 / 8], b)
                }
            }
        }
        Layout::Other(_) => {
            for p in &view.parts {
                add(&p.role, "U8", raw(&p.bytes), &p.bytes)
            }
        }
    }
    let mut text = serde_json::to_vec(&serde_json::Value::Object(header))
        .map_err(|e| Error::invalid_input("STEN header").with_source(e))?;
    while text.len() % 8 != 0 {
        text.push(b' ');
    }
    let mut out = Vec::with_capacity(8 + text.len());
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(&text);
    Ok((out, parts))
}
