//! `_tessera.save`: writes tensors handed over from Python in any writable format.
//!
//! The tensors arrive as `(name, dtype, shape, layout, [(role, data), …])`, data being
//! `bytes` or a contiguous `uint8` numpy array; both are borrowed in place (no copy) by a
//! [`TensorSource`] the writers stream from, with the GIL released. Options map one to one onto [`WriteOptions`] and the
//! loss-allowing [`ConvertOptions`].

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Cursor;
use std::path::PathBuf;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use tessera::convert::{self, Compression, Digest};
use tessera::tensor::Part;
use tessera::{
    ConvertOptions, DType, Error, Format, Layout, Metadata, TensorInfo, TensorSource, TensorView,
    WriteOptions,
};

use crate::values::{dict_to_map, to_py_err, IntoPy};

/// Tensors borrowed from Python bytes objects.
struct PySource<'a> {
    metadata: Metadata,
    infos: Vec<TensorInfo>,
    parts: Vec<Vec<(String, &'a [u8])>>,
    index: HashMap<String, usize>,
}

impl TensorSource for PySource<'_> {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> tessera::Result<TensorView<'_>> {
        let i = *self
            .index
            .get(name)
            .ok_or_else(|| Error::not_found(format!("no tensor named {name:?}")))?;
        let v = TensorView {
            info: self.infos[i].clone(),
            parts: self.parts[i]
                .iter()
                .map(|(role, b)| Part {
                    role: role.clone(),
                    bytes: Cow::Borrowed(*b),
                })
                .collect(),
        };
        Ok(v)
    }
}

/// One tensor as Python hands it over.
type PyTensor<'py> = (
    String,
    String,
    Vec<u64>,
    String,
    Vec<(String, Bound<'py, PyAny>)>,
);

fn invalid(msg: String) -> PyErr {
    to_py_err(Error::invalid_input(msg))
}

fn parse_compression(v: &Bound<'_, PyAny>, level: Option<i32>) -> PyResult<Compression> {
    if v.is_none() {
        return Ok(Compression::None);
    }
    if let Ok(b) = v.extract::<bool>() {
        return Ok(if b {
            Compression::Zstd(level.unwrap_or(3))
        } else {
            Compression::None
        });
    }
    if let Ok(l) = v.extract::<i32>() {
        return Ok(Compression::Zstd(l));
    }
    let s: String = v.extract().map_err(|_| {
        PyTypeError::new_err("compression must be None, a bool, a zstd level or a str")
    })?;
    let lower = s.to_ascii_lowercase();
    match lower.split_once(':') {
        None if lower == "none" || lower == "raw" => Ok(Compression::None),
        None if lower == "zstd" => Ok(Compression::Zstd(level.unwrap_or(3))),
        Some(("zstd", l)) => l
            .parse()
            .map(Compression::Zstd)
            .map_err(|_| invalid(format!("bad zstd level in compression {s:?}"))),
        _ => Err(invalid(format!(
            "unknown compression {s:?} (expected \"none\", \"zstd\" or \"zstd:LEVEL\")"
        ))),
    }
}

fn parse_digest(s: &str) -> PyResult<Digest> {
    match s.to_ascii_lowercase().as_str() {
        "crc32c" => Ok(Digest::Crc32c),
        "sha256" => Ok(Digest::Sha256),
        _ => Err(invalid(format!(
            "unknown digest {s:?} (expected \"crc32c\" or \"sha256\")"
        ))),
    }
}

fn fixed<const N: usize>(what: &str, v: &Bound<'_, PyAny>) -> PyResult<[u8; N]> {
    // uuid.UUID and similar objects expose their bytes as `.bytes`.
    let b: Vec<u8> = match v.extract::<Vec<u8>>() {
        Ok(b) if !v.is_instance_of::<PyString>() => b,
        _ => match v.getattr("bytes") {
            Ok(b) => b.extract()?,
            Err(_) => {
                let s: String = v.extract()?;
                tessera::util::unhex(s.trim().replace('-', "").as_str())
                    .ok_or_else(|| invalid(format!("{what} is neither bytes nor hex")))?
            }
        },
    };
    <[u8; N]>::try_from(b.as_slice())
        .map_err(|_| invalid(format!("{what} must be {N} bytes, got {}", b.len())))
}

fn key_bytes(v: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(s.to_cow()?.as_bytes().to_vec());
    }
    v.extract::<Vec<u8>>()
        .map_err(|_| PyTypeError::new_err("hmac_key must be bytes or str"))
}

fn sign_key(v: &Bound<'_, PyAny>) -> PyResult<[u8; 32]> {
    if let Ok(b) = v.cast::<PyBytes>() {
        return <[u8; 32]>::try_from(b.as_bytes()).map_err(|_| {
            invalid(format!(
                "sign_key must be a 32-byte Ed25519 seed or a key file path, got {} bytes",
                b.as_bytes().len()
            ))
        });
    }
    let path: PathBuf = v
        .extract()
        .map_err(|_| PyTypeError::new_err("sign_key must be 32 bytes or a key file path"))?;
    tessera::util::keys::load_secret_key(&path).py()
}

const OPTIONS: &[&str] = &[
    "compression",
    "compression_level",
    "digests",
    "ecc",
    "hmac_key",
    "sign_key",
    "prev",
    "generation",
    "timestamp",
    "build",
    "host",
    "cuda",
    "rows_per_chunk",
    "streaming",
    "fixed_salt",
    "shard_size",
    "tensor_hashes",
    "control_integrity",
    "page_hashes",
    "uuid",
    "zero_base_id",
    "cast",
    "densify",
    "drop_metadata",
    "dequantize",
    "quantize",
];

/// Maps the keyword options of `tessera.save` to the writer's and converter's options.
pub fn parse_options(opts: Option<&Bound<'_, PyDict>>) -> PyResult<(WriteOptions, ConvertOptions)> {
    let mut w = WriteOptions::default();
    let mut c = ConvertOptions::default();
    let Some(opts) = opts else {
        return Ok((w, c));
    };
    let level: Option<i32> = match opts.get_item("compression_level")? {
        Some(v) if !v.is_none() => Some(v.extract()?),
        _ => None,
    };
    for (k, v) in opts.iter() {
        let key: String = k.extract()?;
        if v.is_none() && key != "compression" {
            continue;
        }
        match key.as_str() {
            "compression" => w.compression = parse_compression(&v, level)?,
            "compression_level" => {
                if !opts.contains("compression")? {
                    w.compression = Compression::Zstd(v.extract()?);
                }
            }
            "digests" => {
                w.digests = if let Ok(s) = v.cast::<PyString>() {
                    vec![parse_digest(&s.to_cow()?)?]
                } else {
                    v.extract::<Vec<String>>()?
                        .iter()
                        .map(|s| parse_digest(s))
                        .collect::<PyResult<_>>()?
                }
            }
            "ecc" => w.ecc = Some(v.extract()?),
            "hmac_key" => w.hmac_key = Some(key_bytes(&v)?),
            "sign_key" => w.sign_key = Some(sign_key(&v)?),
            "prev" => w.prev = Some(v.extract()?),
            "generation" => w.generation = Some(v.extract()?),
            "timestamp" => w.timestamp = Some(v.extract()?),
            "build" => w.build = Some(v.extract()?),
            "host" => w.host = Some(v.extract()?),
            "cuda" => w.cuda = Some(v.extract()?),
            "rows_per_chunk" => w.rows_per_chunk = Some(v.extract()?),
            "streaming" => w.streaming = v.extract()?,
            "fixed_salt" => w.fixed_salt = Some(fixed::<8>("fixed_salt", &v)?),
            "shard_size" => w.shard_size = Some(v.extract()?),
            "tensor_hashes" => w.tensor_hashes = v.extract()?,
            "control_integrity" => w.control_integrity = v.extract()?,
            "page_hashes" => w.page_hashes = Some(v.extract()?),
            "uuid" => w.uuid = Some(fixed::<16>("uuid", &v)?),
            "zero_base_id" => w.zero_base_id = v.extract()?,
            "cast" => c.cast = v.extract()?,
            "densify" => c.densify = v.extract()?,
            "drop_metadata" => c.drop_metadata = v.extract()?,
            "dequantize" => {
                let name: String = v.extract()?;
                c.dequantize = Some(DType::from_name(&name).ok_or_else(|| {
                    invalid(format!(
                        "dequantize: unknown dtype {name:?} (f32, f16, bf16)"
                    ))
                })?);
            }
            "quantize" => {
                let name: String = v.extract()?;
                c.quantize = Some(
                    tessera::formats::gguf::quants::QuantKind::from_name(&name).ok_or_else(
                        || {
                            invalid(format!(
                                "quantize: {name:?} is not q8_0, q4_0, q4_1, q5_0 or q5_1"
                            ))
                        },
                    )?,
                );
            }
            other => {
                return Err(PyTypeError::new_err(format!(
                    "unknown save option {other:?}; known: {}",
                    OPTIONS.join(", ")
                )))
            }
        }
    }
    Ok((w, c))
}

/// Resolves the output format from its name, or from the path's extension.
pub fn resolve_format(format: Option<&str>, path: Option<&PathBuf>) -> PyResult<Format> {
    let f = match (format, path) {
        (Some(name), _) => {
            Format::from_name(name).ok_or_else(|| invalid(format!("unknown format {name:?}")))?
        }
        (None, Some(p)) => Format::from_path(p).ok_or_else(|| {
            invalid(format!(
                "cannot tell the format from {:?}; pass format=",
                p.display().to_string()
            ))
        })?,
        (None, None) => {
            return Err(PyValueError::new_err(
                "format= is required when writing to bytes",
            ))
        }
    };
    Ok(f)
}

/// A source that looks for a pending signal (Ctrl-C) before handing out each tensor and
/// chunk, so that a long write stops within one tensor of it: the writer then fails, the
/// atomic writer removes its temporary, and the caller re-raises the Python exception
/// kept here (`KeyboardInterrupt`) with [`Interruptible::result`].
pub(crate) struct Interruptible<'a, S: TensorSource + ?Sized> {
    inner: &'a S,
    raised: std::sync::Mutex<Option<PyErr>>,
}

impl<'a, S: TensorSource + ?Sized> Interruptible<'a, S> {
    pub(crate) fn new(inner: &'a S) -> Interruptible<'a, S> {
        Interruptible {
            inner,
            raised: std::sync::Mutex::new(None),
        }
    }

    fn check(&self) -> tessera::Result<()> {
        if let Err(e) = Python::attach(|py| py.check_signals()) {
            if let Ok(mut r) = self.raised.lock() {
                *r = Some(e);
            }
            return Err(Error::invalid_input("interrupted"));
        }
        Ok(())
    }

    /// The signal's exception, if one was raised while the work ran.
    pub(crate) fn take_raised(&self) -> Option<PyErr> {
        self.raised.lock().ok().and_then(|mut g| g.take())
    }

    /// The outcome of work done over this source: the signal's exception if one was
    /// raised, else `r` as a Python result.
    pub(crate) fn result<T>(&self, r: tessera::Result<T>) -> PyResult<T> {
        match self.take_raised() {
            Some(e) => Err(e),
            None => r.py(),
        }
    }
}

impl<S: TensorSource + ?Sized> TensorSource for Interruptible<'_, S> {
    fn metadata(&self) -> &Metadata {
        self.inner.metadata()
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        self.inner.tensor_infos()
    }
    fn tensor(&self, name: &str) -> tessera::Result<tessera::TensorView<'_>> {
        self.check()?;
        self.inner.tensor(name)
    }
    fn chunks(&self) -> &[tessera::ChunkInfo] {
        self.inner.chunks()
    }
    fn chunk(&self, name: &str) -> tessera::Result<Cow<'_, [u8]>> {
        self.check()?;
        self.inner.chunk(name)
    }
    fn source_format(&self) -> Option<tessera::Format> {
        self.inner.source_format()
    }
    fn metadata_types(&self) -> Option<&tessera::Map> {
        self.inner.metadata_types()
    }
}

/// Writes tensors to `path` (atomically) or, without a path, returns the file's bytes.
/// Returns `(notes, extra_files, bytes_or_None)`.
#[pyfunction]
#[pyo3(signature = (tensors, path=None, *, format=None, metadata=None, options=None))]
#[allow(clippy::type_complexity)]
pub fn save<'py>(
    py: Python<'py>,
    tensors: Vec<PyTensor<'py>>,
    path: Option<PathBuf>,
    format: Option<&str>,
    metadata: Option<Bound<'py, PyDict>>,
    options: Option<Bound<'py, PyDict>>,
) -> PyResult<(Vec<String>, Vec<PathBuf>, Option<Bound<'py, PyBytes>>)> {
    let format = resolve_format(format, path.as_ref())?;
    let (wopts, copts) = parse_options(options.as_ref())?;
    let metadata = match &metadata {
        Some(d) => dict_to_map(d, 0)?,
        None => Metadata::new(),
    };
    let mut src = PySource {
        metadata,
        infos: Vec::with_capacity(tensors.len()),
        parts: Vec::with_capacity(tensors.len()),
        index: HashMap::with_capacity(tensors.len()),
    };
    for (i, (name, dtype, shape, layout, parts)) in tensors.iter().enumerate() {
        let dtype = DType::parse(dtype).py()?;
        if src.index.insert(name.clone(), i).is_some() {
            return Err(invalid(format!("duplicate tensor name {name:?}")));
        }
        let mut info = TensorInfo::dense(name.clone(), dtype, shape.clone());
        info.layout = Layout::from_name(layout);
        let parts: Vec<(String, &[u8])> = parts
            .iter()
            .map(|(role, b)| Ok((role.clone(), crate::owner::object_bytes(b)?)))
            .collect::<PyResult<_>>()?;
        src.infos.push(info);
        src.parts.push(parts);
    }
    let guarded = Interruptible::new(&src);
    let out = py.detach(
        || -> tessera::Result<(Vec<String>, Vec<PathBuf>, Option<Vec<u8>>)> {
            // The caller's tensors: a bad one is invalid input, not a malformed file.
            for info in &src.infos {
                src.tensor(&info.name)?
                    .validate()
                    .map_err(|e| Error::invalid_input(e.message().to_string()))?;
            }
            match &path {
                Some(p) => {
                    let r = convert::convert_file(&guarded, format, p, copts, &wopts)?;
                    Ok((r.notes, r.extra_files, None))
                }
                None => {
                    let prepared = convert::prepare(&guarded, format, copts)?;
                    let mut cur = Cursor::new(Vec::new());
                    let r = convert::write_to(format, &prepared, &mut cur, &wopts)?;
                    let mut notes = prepared.notes().to_vec();
                    notes.extend(r.notes);
                    Ok((notes, r.extra_files, Some(cur.into_inner())))
                }
            }
        },
    );
    let (notes, extra, bytes) = guarded.result(out)?;
    Ok((notes, extra, bytes.map(|b| PyBytes::new(py, &b))))
}
