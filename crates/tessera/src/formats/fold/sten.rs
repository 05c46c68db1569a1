//! `STEN` chunk payloads: a small safetensors file holding one logical tensor.
//!
//! The safetensors side is the crate's safetensors module: its header parser
//! (`safetensors::Header`: duplicate keys refused, `__metadata__` strings only), its
//! dtype names, and its header text ([`safetensors::header_in_order`]; entries in part
//! order, so the reader gives the parts back in the view's order; a single-tensor
//! payload is exactly what the package writes). What stays here is FOLD's convention on
//! top (see the module docs of `formats::fold`): the `tessera.*` keys, parts as entries
//! keyed by role, and reading the header alone from a stream (a compressed chunk is
//! listed without inflating its data), with byte ranges checked against the payload.
//! [`safetensors::SafetensorsFile::parse`] is not used: it needs the whole file in
//! memory, and its whole-file rules (no gaps, data ending at the end) were never FOLD's.

use std::io::Read;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::formats::safetensors;
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
/// Largest safetensors header we parse inside a chunk (safetensors' own bound).
pub const MAX_HEADER: u64 = safetensors::MAX_HEADER_SIZE;

/// The safetensors name FOLD stores a dtype under, when stored natively: safetensors'
/// own names, except the fnuz float8 types, which FOLD has always stored as `U8` bytes
/// with `tessera.dtype` (kept so the bytes we write do not change; reading accepts
/// either).
pub fn st_name(d: DType) -> Option<&'static str> {
    match d {
        // Packed sub-byte floats too: safetensors refuses an odd F4 count, FOLD does not.
        DType::F8E4M3FNUZ | DType::F8E5M2FNUZ | DType::F4E2M1 | DType::F6E2M3 | DType::F6E3M2 => {
            None
        }
        d => safetensors::dtype_name(d).map(|(name, _rank)| name),
    }
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
    let parsed: safetensors::Header = serde_json::from_slice(&text)
        .map_err(|e| Error::malformed("STEN header is not a safetensors header").with_source(e))?;
    let data_start = 8 + n;
    let mut h = Header {
        data_start,
        metadata: parsed.metadata.unwrap_or_default(),
        ..Header::default()
    };
    for (k, v) in parsed.tensors {
        let bad = |why: &str| Error::malformed(format!("STEN entry {k:?}: {why}"));
        let dt = v.dtype.as_str();
        let dtype = safetensors::dtype_from_name(dt).map_err(|_| {
            Error::unsupported(format!("STEN entry {k:?}: unsupported dtype {dt:?}"))
        })?;
        let shape = v.shape;
        let (b, e) = match v.data_offsets {
            (b, e) if b <= e => (b, e),
            _ => return Err(bad("bad data_offsets")),
        };
        safetensors::check_whole_bytes(dtype, &shape).map_err(|e| bad(e.message()))?;
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
            key: k,
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
/// it, in order. The header text is the safetensors module's, entries in part order.
pub fn encode_header<'a>(view: &'a TensorView<'_>) -> Result<(Vec<u8>, Vec<&'a [u8]>)> {
    let info = &view.info;
    let mut meta = Map::new();
    let native = st_name(info.dtype);
    let dense_native = info.layout == Layout::Dense && native.is_some();
    if info.layout != Layout::Dense {
        meta.insert(KEY_LAYOUT, Value::Str(info.layout.name().into()));
    }
    if !dense_native {
        meta.insert(KEY_DTYPE, Value::Str(info.dtype.name().into()));
        meta.insert(
            KEY_SHAPE,
            Value::Str(serde_json::to_string(&info.shape).unwrap_or_default()),
        );
    }
    if !info.attrs.is_empty() {
        meta.insert(
            KEY_ATTRS,
            Value::Str(crate::util::pyjson::dumps_map(
                &info.attrs,
                crate::util::pyjson::DumpOptions::INDEX,
            )),
        );
    }
    // Entries as (key, dtype, shape, bytes).
    let mut entries: Vec<(String, DType, Vec<u64>, &'a [u8])> = Vec::new();
    let raw = |b: &[u8]| vec![b.len() as u64];
    match &info.layout {
        Layout::Dense if dense_native => entries.push((
            info.name.clone(),
            info.dtype,
            info.shape.clone(),
            view.data()?,
        )),
        Layout::Dense => {
            let d = view.data()?;
            entries.push(("data".into(), DType::U8, raw(d), d))
        }
        Layout::SparseCsr | Layout::SparseCoo => {
            for p in &view.parts {
                let b = p.bytes.as_ref();
                if p.role == "values" {
                    match native {
                        Some(_) => entries.push((
                            "values".into(),
                            info.dtype,
                            vec![(b.len() / info.dtype.size()) as u64],
                            b,
                        )),
                        None => entries.push(("values".into(), DType::U8, raw(b), b)),
                    }
                } else if p.role == "coords" && !info.shape.is_empty() {
                    let ndim = info.shape.len() as u64;
                    entries.push((
                        "coords".into(),
                        DType::U64,
                        vec![ndim, b.len() as u64 / 8 / ndim],
                        b,
                    ))
                } else {
                    entries.push((p.role.clone(), DType::U64, vec![b.len() as u64 / 8], b))
                }
            }
        }
        Layout::Other(_) => {
            for p in &view.parts {
                entries.push((p.role.clone(), DType::U8, raw(&p.bytes), &p.bytes))
            }
        }
    }
    let infos: Vec<TensorInfo> = entries
        .iter()
        .map(|(k, d, shape, _)| TensorInfo::dense(k.clone(), *d, shape.clone()))
        .collect();
    for (info, (k, _, _, b)) in infos.iter().zip(&entries) {
        if info.dense_nbytes()? != b.len() as u64 {
            return Err(Error::invalid_input(format!(
                "STEN part {k:?}: {} bytes do not fill {} {:?}",
                b.len(),
                info.dtype,
                info.shape
            )));
        }
    }
    // Parts keep the view's order (the reader gives them back in header order).
    let header = safetensors::header_in_order(&infos, &meta)?;
    let parts = entries.into_iter().map(|(.., b)| b).collect();
    Ok((header, parts))
}
