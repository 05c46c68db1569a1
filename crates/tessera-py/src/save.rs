//! `_tessera.save`: writes tensors handed over from Python in any writable format.
//!
//! The tensors arrive as `(name, dtype, shape, layout, [(role, data), …])`, data being
//! `bytes` or a contiguous `uint8` numpy array; both are borrowed in place (no copy) by a
//! [`TensorSource`] the writers stream from, with the GIL released. Options go through the library's option
//! parser ([`WriteOptions::set`], the names `tessera convert -O` takes) into [`WriteOptions`],
//! and into the loss-allowing [`ConvertOptions`].

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Cursor;
use std::path::PathBuf;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use tessera::convert;
use tessera::formats::{all_options, check_options, find_option};
use tessera::options::{OptionKind, OptionValue};
use tessera::set::Split;
use tessera::tensor::Part;
use tessera::{
    ConvertOptions, DType, Error, Format, Layout, Metadata, TensorInfo, TensorSource, TensorView,
    WriteOptions,
};

use crate::progress::PyProgress;
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

/// A keyword argument's value as the library's option parser takes it: Python's own
/// types (bool, int, str, bytes, lists, `os.PathLike`, `uuid.UUID`), keys as bytes.
fn py_value(name: &str, v: &Bound<'_, PyAny>) -> PyResult<OptionValue> {
    let kind = find_option(name).map(|o| (o.name, o.kind));
    if let Some((opt, OptionKind::Secret)) = kind {
        if let Ok(s) = v.cast::<PyString>() {
            // A key or passphrase given as str is its UTF-8 bytes; a signing key as str
            // is a path.
            if opt != "sign_key" {
                return Ok(OptionValue::Bytes(s.to_cow()?.as_bytes().to_vec()));
            }
        }
        if let Ok(b) = v.cast::<PyBytes>() {
            return Ok(OptionValue::Bytes(b.as_bytes().to_vec()));
        }
        if opt == "sign_key" {
            let path: PathBuf = v.extract().map_err(|_| {
                PyTypeError::new_err("sign_key must be a 32-byte seed or a key file path")
            })?;
            let seed = tessera::signing::ed25519::load_secret_key(&path).py()?;
            return Ok(OptionValue::Bytes(seed.to_vec()));
        }
        return Err(PyTypeError::new_err(format!("{opt} must be bytes or str")));
    }
    if let Ok(b) = v.extract::<bool>() {
        return Ok(OptionValue::Bool(b));
    }
    if let Ok(i) = v.extract::<i64>() {
        return Ok(OptionValue::Int(i));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(OptionValue::Text(s.to_cow()?.into_owned()));
    }
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(OptionValue::Bytes(b.as_bytes().to_vec()));
    }
    if let Some((_, OptionKind::Hex(_))) = kind {
        // uuid.UUID and similar objects expose their bytes as `.bytes`.
        if let Ok(b) = v.getattr("bytes") {
            return Ok(OptionValue::Bytes(b.extract()?));
        }
    }
    if let Ok(p) = v.extract::<PathBuf>() {
        return Ok(OptionValue::Text(p.to_string_lossy().into_owned()));
    }
    if let Ok(items) = v.extract::<Vec<Bound<'_, PyAny>>>() {
        return items
            .iter()
            .map(|i| py_value(name, i))
            .collect::<PyResult<_>>()
            .map(OptionValue::List);
    }
    Err(PyTypeError::new_err(format!(
        "option {name}: unsupported value type {}",
        v.get_type().name()?
    )))
}

/// Keyword arguments that are not writer options: the losses a conversion may make,
/// `compression_level` (the level of `compression=True` / `"zstd"`) and `durable`
/// (`False`: atomic but not fsynced, [`WriteOptions::no_fsync`]).
const CONVERT_OPTIONS: &[&str] = &[
    "durable",
    "cast",
    "densify",
    "drop_metadata",
    "compression_level",
    "dequantize",
    "quantize",
];

/// Maps the keyword options of `tessera.save` / `convert` to the writer's options
/// (through the library's one parser, the names `tessera convert -O` takes) and the
/// converter's loss-allowing options. An unknown name is a `TypeError`, as for any
/// unexpected keyword argument.
pub fn parse_options(opts: Option<&Bound<'_, PyDict>>) -> PyResult<(WriteOptions, ConvertOptions)> {
    let mut w = WriteOptions::default();
    let mut c = ConvertOptions::default();
    let Some(opts) = opts else {
        return Ok((w, c));
    };
    let level: Option<i64> = match opts.get_item("compression_level")? {
        Some(v) if !v.is_none() => Some(v.extract()?),
        _ => None,
    };
    for (k, v) in opts.iter() {
        let key: String = k.extract()?;
        match key.as_str() {
            "durable" => w.no_fsync = !v.extract::<bool>()?,
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
                c.quantize =
                    Some(tessera::quant::QuantKind::from_name(&name).ok_or_else(|| {
                        invalid(format!(
                            "quantize: {name:?} is not q8_0, q4_0, q4_1, q5_0 or q5_1"
                        ))
                    })?);
            }
            "compression_level" => {
                if !opts.contains("compression")? {
                    if let Some(l) = level {
                        w.set("compression", OptionValue::Int(l)).py()?;
                    }
                }
            }
            name => {
                let Some(o) = find_option(name) else {
                    let mut known: Vec<&str> = all_options().iter().map(|o| o.name).collect();
                    known.extend(CONVERT_OPTIONS);
                    return Err(PyTypeError::new_err(format!(
                        "unknown save option {name:?}; known: {}",
                        known.join(", ")
                    )));
                };
                if v.is_none() {
                    if o.name == "compression" {
                        w.set("compression", OptionValue::Bool(false)).py()?;
                    }
                    continue;
                }
                let mut value = py_value(o.name, &v)?;
                if o.name == "compression" {
                    // compression=True or "zstd" with compression_level=N: zstd at N.
                    let plain_zstd = matches!(&value, OptionValue::Bool(true))
                        || matches!(&value, OptionValue::Text(s) if s.eq_ignore_ascii_case("zstd"));
                    if let (true, Some(l)) = (plain_zstd, level) {
                        value = OptionValue::Int(l);
                    }
                }
                w.set(name, value).py()?;
            }
        }
    }
    Ok((w, c))
}

/// Resolves the output format from its name, or from the path's extension.
pub fn resolve_format(format: Option<&str>, path: Option<&PathBuf>) -> PyResult<Format> {
    // A set of a format's own index kind (format="aeroset", or a path NAME.aeroset.json):
    // written as a set at an index path.
    let file_name = path
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned());
    let by_path = file_name
        .as_deref()
        .and_then(tessera::formats::indexed_set_for_name);
    if let Some((f, hooks)) = format.and_then(tessera::formats::indexed_set_named) {
        // A kind that is a directory (format="dcp") takes the directory as its path.
        if by_path.is_none() && !hooks.ranks {
            return Err(invalid(format!(
                "format={:?} writes a set whose index is NAME{}: give such a path",
                hooks.name, hooks.suffix
            )));
        }
        return Ok(f);
    }
    if let (None, Some((f, _))) = (format, by_path) {
        return Ok(f);
    }
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
/// It also reports progress, when asked: `progress(done_bytes, total_bytes)` after each
/// tensor, in the tensors' dense bytes (Python's `progress=True` passes a bar, see
/// `tessera/_progress.py`).
pub(crate) struct Interruptible<'a, S: TensorSource + ?Sized> {
    inner: &'a S,
    raised: std::sync::Mutex<Option<PyErr>>,
    progress: Option<PyProgress>,
}

impl<'a, S: TensorSource + ?Sized> Interruptible<'a, S> {
    pub(crate) fn new(inner: &'a S) -> Interruptible<'a, S> {
        Interruptible {
            inner,
            raised: std::sync::Mutex::new(None),
            progress: None,
        }
    }

    /// Reports to `progress` (a Python callable) after each tensor.
    pub(crate) fn with_progress(mut self, progress: Option<&Py<PyAny>>) -> Self {
        let total = tessera::verify::progress_total(self.inner.tensor_infos());
        self.progress =
            progress.map(|p| PyProgress::new(Python::attach(|py| p.clone_ref(py)), total));
        self
    }

    /// Adds `n` bytes done and calls the progress callable; an exception it raises
    /// stops the work as Ctrl-C does.
    fn advance(&self, n: u64) -> tessera::Result<()> {
        let Some(p) = &self.progress else {
            return Ok(());
        };
        if !p.advance(n) {
            if let (Ok(mut r), Some(e)) = (self.raised.lock(), p.take_raised()) {
                *r = Some(e);
            }
            return Err(Error::invalid_input("the progress callable raised"));
        }
        Ok(())
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
        let v = self.inner.tensor(name)?;
        self.advance(tessera::verify::progress_bytes(&v.info))?;
        Ok(v)
    }
    fn tensors(&self, names: &[&str]) -> Vec<tessera::Result<tessera::TensorView<'_>>> {
        if self.check().is_err() {
            return names
                .iter()
                .map(|_| Err(Error::invalid_input("interrupted")))
                .collect();
        }
        let got = self.inner.tensors(names);
        got.into_iter()
            .map(|r| {
                let v = r?;
                self.advance(tessera::verify::progress_bytes(&v.info))?;
                Ok(v)
            })
            .collect()
    }
    fn interrupted(&self) -> tessera::Result<()> {
        self.check()?;
        self.inner.interrupted()
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
    fn chunk_stored(&self, name: &str) -> tessera::Result<Option<tessera::StoredChunk<'_>>> {
        self.check()?;
        self.inner.chunk_stored(name)
    }
}

/// `max_shard_size=` / `shards=` as the library's [`Split`] (a model set), or `None`.
pub(crate) fn split(
    max_shard_size: Option<u64>,
    shards: Option<u32>,
) -> tessera::Result<Option<Split>> {
    match (max_shard_size, shards) {
        (Some(_), Some(_)) => Err(Error::invalid_input("max_shard_size and shards: give one")),
        (Some(0), _) | (_, Some(0)) => Err(Error::invalid_input(
            "max_shard_size and shards must be positive",
        )),
        (Some(n), None) => Ok(Some(Split::MaxBytes(n))),
        (None, Some(n)) => Ok(Some(Split::Shards(n))),
        (None, None) => Ok(None),
    }
}

/// Converts `src` into `path`: a local path (or `file://` URL), written atomically; or an
/// `s3://` URL, written in a local staging directory, then uploaded (one object appears
/// only complete; see `tessera::remote::write_staged`). Returns the notes and the other
/// files written beside it (their URLs for an upload). With `split`, a model set
/// (`tessera::set::convert_set`, as `tessera convert --max-shard-size`): every file it
/// wrote is reported, the index last.
pub(crate) fn convert_to_path(
    src: &dyn TensorSource,
    format: Format,
    path: &std::path::Path,
    copts: ConvertOptions,
    wopts: &WriteOptions,
    split: Option<Split>,
) -> tessera::Result<(Vec<String>, Vec<String>)> {
    let dest = tessera::Location::from_path(path)?;
    let remote = tessera::remote::RemoteOptions::default();
    // An index of the format's own set kind (NAME.aeroset.json) is always a set.
    let split = match (split, format.codec().indexed_set) {
        (None, Some(h)) if tessera::set::write::indexed_output(format, None, path)?.is_some() => {
            Some(Split::MaxBytes(h.default_shard_size))
        }
        (s, _) => s,
    };
    if let Some(split) = split {
        let (notes, files) = tessera::remote::write_at(&dest, &remote, |local| {
            // A set that is a directory (format="dcp") is written at its index inside it.
            let at = tessera::set::write::indexed_output(format, None, local)?
                .unwrap_or_else(|| local.to_path_buf());
            let r = tessera::set::convert_set(src, format, &at, split, copts, wopts)?;
            Ok((r.notes, r.files.clone()))
        })?;
        // One file (one shard; an AERO set) is the file at `path`: nothing beside it.
        let files = if files.len() == 1 { Vec::new() } else { files };
        return Ok((notes, files));
    }
    let (notes, mut files) = tessera::remote::write_at(&dest, &remote, |local| {
        let r = convert::convert_file(src, format, local, copts, wopts)?;
        let mut files = r.extra_files.clone();
        files.push(local.to_path_buf());
        Ok((r.notes, files))
    })?;
    // The main file is known to the caller; the others are reported.
    files.pop();
    Ok((notes, files))
}

/// Writes tensors to `path` (atomically) or, without a path, returns the file's bytes.
/// Returns `(notes, extra_files, bytes_or_None)`.
#[pyfunction]
#[pyo3(signature = (tensors, path=None, *, format=None, metadata=None, options=None, progress=None, max_shard_size=None, shards=None))]
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
pub fn save<'py>(
    py: Python<'py>,
    tensors: Vec<PyTensor<'py>>,
    path: Option<PathBuf>,
    format: Option<&str>,
    metadata: Option<Bound<'py, PyDict>>,
    options: Option<Bound<'py, PyDict>>,
    progress: Option<Py<PyAny>>,
    max_shard_size: Option<u64>,
    shards: Option<u32>,
) -> PyResult<(Vec<String>, Vec<String>, Option<Bound<'py, PyBytes>>)> {
    let format = resolve_format(format, path.as_ref())?;
    let split = split(max_shard_size, shards).py()?;
    if split.is_some() && path.is_none() {
        return Err(invalid(
            "max_shard_size / shards write a model set: pass a path".into(),
        ));
    }
    let (wopts, copts) = parse_options(options.as_ref())?;
    check_options(format, &wopts).py()?;
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
    let guarded = Interruptible::new(&src).with_progress(progress.as_ref());
    let out = py.detach(
        || -> tessera::Result<(Vec<String>, Vec<String>, Option<Vec<u8>>)> {
            // The caller's tensors: a bad one is invalid input, not a malformed file.
            for info in &src.infos {
                src.tensor(&info.name)?
                    .validate()
                    .map_err(|e| Error::invalid_input(e.message().to_string()))?;
            }
            match &path {
                Some(p) => {
                    let (notes, extra) =
                        convert_to_path(&guarded, format, p, copts, &wopts, split)?;
                    Ok((notes, extra, None))
                }
                None => {
                    let prepared = convert::prepare(&guarded, format, copts)?;
                    let mut cur = Cursor::new(Vec::new());
                    let r = convert::write_to(format, &prepared, &mut cur, &wopts)?;
                    let mut notes = prepared.notes().to_vec();
                    notes.extend(r.notes);
                    let extra = r
                        .extra_files
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect();
                    Ok((notes, extra, Some(cur.into_inner())))
                }
            }
        },
    );
    let (notes, extra, bytes) = guarded.result(out)?;
    Ok((notes, extra, bytes.map(|b| PyBytes::new(py, &b))))
}
