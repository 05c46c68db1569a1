//! `_tessera.File`: an opened container, any format, detected by content.
//!
//! Descriptions (tensor infos, metadata, chunks) are copied out once at open; tensor
//! bytes are fetched on demand with the GIL released, and come back as [`Buffer`]s that
//! borrow the mapped file when the format stores them raw.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use tessera::quant::adapt;
use tessera::{
    ChunkInfo, Container, DType, FileData, Format, Layout, Metadata, ReadOptions, TensorInfo,
    TensorSource, TensorView, VerifyOptions,
};

use crate::fill::Reader;
use crate::owner::{copy_parts, Buffer, PartBytes, Shared};
use crate::progress::PyProgress;
use crate::values::{map_to_py, IntoPy};
use tessera::set::OpenedFile;
use tessera::Load;
use tessera::Opened;

/// The check of a page manifest (`pages=`). A stub until page manifests exist.
fn page_check(path: &std::path::Path) -> tessera::Result<Box<dyn tessera::slice::RangeCheck>> {
    Err(tessera::Error::unsupported(format!(
        "pages={}: page manifests are not built yet",
        path.display()
    )))
}

/// A tensor handed to Python: its description and its parts.
type TensorOut<'py> = (Bound<'py, PyDict>, Vec<(String, Buffer)>);

/// An opened tensor container.
#[pyclass(frozen, module = "tessera._tessera", name = "File")]
pub struct File {
    shared: Arc<Shared>,
    format: &'static str,
    title: &'static str,
    version: String,
    path: Option<PathBuf>,
    infos: Vec<TensorInfo>,
    metadata: Metadata,
    chunks: Vec<ChunkInfo>,
    warnings: Vec<String>,
    mapped: bool,
    /// A descriptor of the mapped file, for the positional reads of copying loads
    /// ([`crate::fill`]); `None` for bytes, sets, or a path that changed at open.
    reader: Option<Reader>,
    /// The signed manifest reads are held to (`open(..., signature=, public_key=)`).
    signed: Option<crate::signed::SignedCheck>,
    /// The options the file was opened with (`verify`: reads check stored digests).
    opts: ReadOptions,
    /// The tensors the file stores a digest for (their copies are checked copies).
    digested: HashSet<String>,
    /// The container opened again over private `pread`s of the same file (see
    /// [`File::checked_copy`]), once a checked copy asks for it.
    private: Mutex<Option<Arc<Opened>>>,
}

fn open_data(opened: Opened, path: Option<PathBuf>, opts: &ReadOptions) -> tessera::Result<File> {
    let mapped = opened.is_mapped();
    let reader = match (&opened, &path, opened.file_regions().as_slice()) {
        (Opened::File(_), Some(p), [map]) if mapped => Reader::open(p, map),
        _ => None,
    };
    let shared = Arc::new(Shared::new(opened));
    let file = shared.with(|c: &dyn Container| File {
        shared: shared.clone(),
        format: c.format().name(),
        title: c.format().title(),
        version: c.version(),
        path,
        infos: c.tensor_infos().to_vec(),
        metadata: c.metadata().clone(),
        chunks: c.chunks().to_vec(),
        warnings: c.warnings(),
        mapped,
        reader,
        signed: None,
        opts: opts.clone(),
        digested: c
            .tensor_infos()
            .iter()
            // GPTRS's base_id hashes the name, not the bytes.
            .filter(|i| i.storage.digests.iter().any(|d| d != "base_id"))
            .map(|i| i.name.clone())
            .collect(),
        private: Mutex::new(None),
    });
    Ok(file)
}

fn read_options(
    salvage: bool,
    verify: bool,
    hmac_key: Option<Vec<u8>>,
    age_identities: Option<Vec<String>>,
    age_passphrase: Option<String>,
    path: Option<PathBuf>,
) -> ReadOptions {
    ReadOptions::default()
        .salvage(salvage)
        .verify(verify)
        .hmac_key(hmac_key)
        .age_identities(age_identities.unwrap_or_default())
        .age_passphrase(age_passphrase)
        .path(path)
}

/// Opens a file (memory-mapped unless `mmap=False`), detecting the format by content, or
/// a model set by its index, any of its shards, or its directory (`tessera::open_path`).
/// With `verify`, every tensor or chunk read checks the digests the file stores for its
/// bytes first (once each; still zero-copy where stored raw).
#[pyfunction]
/// With `signature` (a `tessera sign` file's bytes) and `public_key`, the file is held
/// to that signed manifest (see `crate::signed`).
/// `shard`: open the file alone, never the model set it is a shard of.
/// `token`: a bearer token for an `http(s)://` location's own host; `token_host`: send
/// `TESSERA_HTTP_TOKEN` there (the CLI's `--token`). Neither is ever shown.
/// `cache`: a remote location's fetched ranges go through the disk cache
/// (`tessera::remote`'s `cache.rs`; the CLI's `--no-cache` is `cache=False`).
#[pyo3(signature = (path, *, mmap=true, salvage=false, verify=true, hmac_key=None, age_identities=None, age_passphrase=None, signature=None, public_key=None, shard=false, token=None, token_host=false, cache=true))]
#[allow(clippy::too_many_arguments)]
pub fn open_file(
    py: Python<'_>,
    path: PathBuf,
    mmap: bool,
    salvage: bool,
    verify: bool,
    hmac_key: Option<Vec<u8>>,
    age_identities: Option<Vec<String>>,
    age_passphrase: Option<String>,
    signature: Option<Vec<u8>>,
    public_key: Option<Vec<u8>>,
    shard: bool,
    token: Option<String>,
    token_host: bool,
    cache: bool,
) -> PyResult<File> {
    let opts = read_options(
        salvage,
        verify,
        hmac_key,
        age_identities,
        age_passphrase,
        Some(path.clone()),
    )
    .shard_only(shard)
    .load(if mmap { Load::Map } else { Load::Read })
    .remote(
        tessera::RemoteOptions::default()
            .token(token_host)
            .bearer_token(token)
            .cache(cache),
    );
    py.detach(|| {
        let opened = tessera::open_path(&path, &opts)?;
        let mut file = open_data(opened, Some(path.clone()), &opts)?;
        match (signature, public_key) {
            (Some(sig), Some(key)) => {
                file.signed = Some(crate::signed::SignedCheck::new(&sig, &key, &file.infos)?);
            }
            (None, None) => {}
            _ => {
                return Err(tessera::Error::invalid_input(
                    "signature and public_key go together",
                ))
            }
        }
        Ok(file)
    })
    .map_err(crate::values::open_error)
}

/// Opens bytes already in memory (they are copied once).
#[pyfunction]
#[pyo3(signature = (data, *, salvage=false, verify=true, hmac_key=None, age_identities=None, age_passphrase=None))]
pub fn open_bytes(
    py: Python<'_>,
    data: &[u8],
    salvage: bool,
    verify: bool,
    hmac_key: Option<Vec<u8>>,
    age_identities: Option<Vec<String>>,
    age_passphrase: Option<String>,
) -> PyResult<File> {
    let opts = read_options(
        salvage,
        verify,
        hmac_key,
        age_identities,
        age_passphrase,
        None,
    );
    py.detach(|| {
        let file = OpenedFile::from_data(FileData::Owned(data.to_vec()), &opts)?;
        open_data(Opened::File(file), None, &opts)
    })
    .py()
}

/// An MXFP4 pair as `File.mx_pairs` gives it: (X, X_blocks, X_scales, X's description).
type MxPairOut<'py> = (String, String, String, Bound<'py, PyDict>);

/// A tensor description as a dict.
pub fn info_to_py<'py>(py: Python<'py>, info: &TensorInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &info.name)?;
    // What users know the element type as (`q8_0` for a GGUF packed tensor), and the
    // type of the stored bytes (`u8` there, the same otherwise).
    d.set_item("dtype", info.dtype_label())?;
    d.set_item("storage_dtype", info.dtype.name())?;
    // The dense bytes: what progress counts (None for a shape whose size overflows).
    d.set_item("nbytes", info.dense_nbytes().ok())?;
    d.set_item("shape", info.shape.clone())?;
    d.set_item("layout", info.layout.name())?;
    d.set_item("attrs", map_to_py(py, &info.attrs)?)?;
    let s = PyDict::new(py);
    s.set_item("offset", info.storage.offset)?;
    s.set_item("stored_bytes", info.storage.stored_bytes)?;
    s.set_item("encoding", &info.storage.encoding)?;
    s.set_item("digests", info.storage.digests.clone())?;
    d.set_item("storage", s)?;
    Ok(d)
}

fn chunk_to_py<'py>(py: Python<'py>, c: &ChunkInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &c.name)?;
    d.set_item("kind", &c.kind)?;
    d.set_item("len", c.len)?;
    d.set_item("offset", c.storage.offset)?;
    d.set_item("stored_bytes", c.storage.stored_bytes)?;
    d.set_item("encoding", &c.storage.encoding)?;
    d.set_item("holds_tensors", c.holds_tensors)?;
    Ok(d)
}

/// The dtype `dequantize=` names (f32, f16 or bf16), as `convert --dequantize` takes it.
fn dequantize_dtype(name: Option<&str>) -> tessera::Result<Option<DType>> {
    let Some(name) = name else { return Ok(None) };
    let d = DType::from_name(name).ok_or_else(|| {
        tessera::Error::invalid_input(format!(
            "dequantize: unknown dtype {name:?} (f32, f16 or bf16)"
        ))
    })?;
    adapt::check_dequantize(Some(d))?;
    Ok(Some(d))
}

impl File {
    /// Whether a copy (`copy=True`) of tensor `name` is a checked copy: reads check
    /// digests, the file stores some for it, and the map's file is open for `pread`.
    /// Then the tensor is read through [`File::private`]: the reader reads the stored
    /// bytes into a private buffer, checks the digests over that buffer, and hands
    /// out that buffer (or what it decodes from it). The copy handed out is the bytes
    /// that were checked, even if the file changes under the map meanwhile; a copy
    /// taken from the map after checking the map would not be.
    fn checked_copy(&self, name: &str) -> bool {
        self.opts.verify && self.reader.is_some() && self.digested.contains(name)
    }

    /// The container over private reads of the mapped file (opened on first use).
    fn private(&self) -> tessera::Result<Arc<Opened>> {
        let mut slot = self
            .private
            .lock()
            .map_err(|_| tessera::Error::invalid_input("internal: a reader panicked"))?;
        if let Some(o) = slot.as_ref() {
            return Ok(o.clone());
        }
        let reader = self
            .reader
            .as_ref()
            .ok_or_else(|| tessera::Error::invalid_input("internal: no descriptor"))?;
        let file = OpenedFile::from_source(Box::new(reader.source()?), &self.opts)?;
        let o = Arc::new(Opened::File(file));
        *slot = Some(o.clone());
        Ok(o)
    }

    /// Tensor `name` of `src` as handed out ([`Self::finish`]); with `dequantize`, the
    /// name of an MXFP4 pair (`X` for `X_blocks` + `X_scales`) is the pair decoded, its
    /// two tensors held to the signed manifest first.
    fn read<'a>(
        &self,
        src: &'a dyn tessera::Container,
        name: &str,
        densify: bool,
        dequantize: Option<DType>,
    ) -> tessera::Result<TensorView<'a>> {
        if let Some(to) = dequantize {
            let infos = src.tensor_infos();
            if !infos.iter().any(|i| i.name == name) {
                let pairs = tessera::quant::mx::pairs(infos);
                if let Some(p) = pairs.iter().find(|p| p.name == name) {
                    let (blocks, scales) = (src.tensor(&p.blocks)?, src.tensor(&p.scales)?);
                    if let Some(s) = &self.signed {
                        s.check(&blocks)?;
                        s.check(&scales)?;
                    }
                    let info = tessera::quant::mx::pair_info(p, &blocks.info, to)?;
                    return tessera::quant::mx::dequantize_pair(&blocks, &scales, &info);
                }
            }
        }
        self.finish(src.tensor(name)?, densify, dequantize)
    }

    /// A view as handed out: held to the signed manifest, densified, dequantized, as
    /// asked.
    fn finish<'a>(
        &self,
        mut v: TensorView<'a>,
        densify: bool,
        dequantize: Option<DType>,
    ) -> tessera::Result<TensorView<'a>> {
        if let Some(s) = &self.signed {
            s.check(&v)?;
        }
        if densify && matches!(v.info.layout, Layout::SparseCsr | Layout::SparseCoo) {
            v = tessera::sparse::densify(v)?;
        }
        if let Some(to) = dequantize {
            let mut notes = Vec::new();
            if let Some((info, step)) = adapt::plan(&v.info, Some(to), None, &mut notes)? {
                v = adapt::apply(step, v, &info)?;
            }
        }
        Ok(v)
    }
}

#[pymethods]
impl File {
    /// The format's short name (`safetensors`, `ztensor`, …).
    #[getter]
    fn format(&self) -> &'static str {
        self.format
    }
    /// The format's title with version (`zTensor v1.0`).
    #[getter]
    fn title(&self) -> &'static str {
        self.title
    }
    /// The version the file states.
    #[getter]
    fn version(&self) -> &str {
        &self.version
    }
    /// The path it was opened from, if any.
    #[getter]
    fn path(&self) -> Option<PathBuf> {
        self.path.clone()
    }
    /// True when the bytes are memory-mapped.
    #[getter]
    fn mapped(&self) -> bool {
        self.mapped
    }
    /// True when copying loads read the file with positional reads (a mapped file whose
    /// path still names it) rather than copying from the map.
    #[getter]
    fn positional_reads(&self) -> bool {
        self.reader.is_some()
    }
    /// Non-fatal observations made while opening.
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
    /// File metadata as a dict.
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        map_to_py(py, &self.metadata)
    }
    /// Tensor names in file order.
    fn names(&self) -> Vec<String> {
        self.infos.iter().map(|i| i.name.clone()).collect()
    }
    /// The MXFP4 pairs (`X_blocks` + `X_scales`, gpt-oss) a `dequantize=` read turns into
    /// one tensor: `[(X, X_blocks, X_scales, description of X as dtype)]`, for a dtype given.
    #[pyo3(signature = (dequantize=None))]
    fn mx_pairs<'py>(
        &self,
        py: Python<'py>,
        dequantize: Option<&str>,
    ) -> PyResult<Vec<MxPairOut<'py>>> {
        let Some(to) = dequantize_dtype(dequantize).py()? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for p in tessera::quant::mx::pairs(&self.infos) {
            let blocks = self.infos.iter().find(|i| i.name == p.blocks);
            let Some(blocks) = blocks else { continue };
            let info = tessera::quant::mx::pair_info(&p, blocks, to).py()?;
            out.push((p.name, p.blocks, p.scales, info_to_py(py, &info)?));
        }
        Ok(out)
    }
    /// Every tensor's description, in file order.
    fn tensor_infos<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .infos
            .iter()
            .map(|i| info_to_py(py, i))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }
    /// Opaque chunks' descriptions, in file order.
    fn chunks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .chunks
            .iter()
            .map(|c| chunk_to_py(py, c))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }
    /// One chunk's decoded bytes.
    fn chunk<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = py
            .detach(|| self.shared.with(|c| c.chunk(name).map(|b| b.into_owned())))
            .py()?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// One tensor: `(info, [(role, Buffer), …])`. Parts borrow the mapped file when the
    /// format stores them raw, unless `copy=True`: then every part is owned and writable
    /// (raw parts are copied, with the GIL released, into fresh huge-page-advised
    /// buffers; decoded parts are already owned). `densify=True` turns a sparse tensor
    /// into a dense one; `dequantize` ("f32", "f16", "bf16") decodes a GGUF packed
    /// tensor as `convert --dequantize` does. A copy of a tensor the file stores digests
    /// for is a checked copy ([`File::checked_copy`]).
    #[pyo3(signature = (name, *, densify=false, copy=false, dequantize=None))]
    fn tensor<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        densify: bool,
        copy: bool,
        dequantize: Option<&str>,
    ) -> PyResult<TensorOut<'py>> {
        let shared = &self.shared;
        let reader = self.reader.as_ref();
        let (info, parts) = py
            .detach(|| {
                let to = dequantize_dtype(dequantize)?;
                let private = match copy && self.checked_copy(name) {
                    true => Some(self.private()?),
                    false => None,
                };
                shared.with(|c| {
                    let src = private.as_ref().map_or(c, |o| o.container());
                    let v = self.read(src, name, densify, to)?;
                    let parts = v
                        .parts
                        .into_iter()
                        .map(|p| {
                            let b = match p.bytes {
                                std::borrow::Cow::Borrowed(b) if copy => {
                                    copy_parts(&[b], reader)?.pop().ok_or_else(|| {
                                        tessera::Error::invalid_input("internal: copy lost")
                                    })?
                                }
                                bytes => PartBytes::from_cow(shared, bytes, copy)?,
                            };
                            Ok((p.role, b))
                        })
                        .collect::<tessera::Result<Vec<(String, PartBytes)>>>()?;
                    Ok::<_, tessera::Error>((v.info, parts))
                })
            })
            .py()?;
        let parts = parts
            .into_iter()
            .map(|(role, b)| (role, b.into_buffer(shared)))
            .collect();
        Ok((info_to_py(py, &info)?, parts))
    }

    /// Several tensors, in the order of `names`, each as `tensor` returns it. With
    /// `copy=True` all raw parts are copied in one parallel pass of positional reads
    /// ([`crate::fill`]); those under 2 MiB packed together into shared huge-page chunks
    /// of about 16 MiB (larger ones each get their own buffer): fast, but an array keeps
    /// its whole chunk alive. This is the drop-ins' `load_file`.
    #[pyo3(signature = (names, *, densify=false, copy=false, dequantize=None))]
    fn tensors<'py>(
        &self,
        py: Python<'py>,
        names: Vec<String>,
        densify: bool,
        copy: bool,
        dequantize: Option<&str>,
    ) -> PyResult<Vec<TensorOut<'py>>> {
        enum Slot {
            Ready(PartBytes),
            // A part to copy, by its index in the batch `copy_parts` fills at once.
            Batch(usize),
        }
        let shared = &self.shared;
        let reader = self.reader.as_ref();
        let loaded = py
            .detach(|| {
                let to = dequantize_dtype(dequantize)?;
                let private = match copy && names.iter().any(|n| self.checked_copy(n)) {
                    true => Some(self.private()?),
                    false => None,
                };
                shared.with(|c| {
                    use rayon::prelude::*;
                    let mut batch: Vec<&[u8]> = Vec::new();
                    let mut slots = Vec::with_capacity(names.len());
                    // Read, checked and densified in parallel: compressed formats
                    // decompress and hash on every core.
                    let views: Vec<tessera::Result<tessera::TensorView<'_>>> = names
                        .par_iter()
                        .map(|name| {
                            let src = match &private {
                                Some(o) if self.checked_copy(name) => o.container(),
                                _ => c,
                            };
                            self.read(src, name, densify, to)
                        })
                        .collect();
                    for v in views {
                        let v = v?;
                        let mut parts = Vec::with_capacity(v.parts.len());
                        for p in v.parts {
                            let slot = match p.bytes {
                                std::borrow::Cow::Borrowed(b) if copy => {
                                    batch.push(b);
                                    Slot::Batch(batch.len() - 1)
                                }
                                bytes => Slot::Ready(PartBytes::from_cow(shared, bytes, copy)?),
                            };
                            parts.push((p.role, slot));
                        }
                        slots.push((v.info, parts));
                    }
                    let mut packed: Vec<Option<PartBytes>> =
                        copy_parts(&batch, reader)?.into_iter().map(Some).collect();
                    let mut out = Vec::with_capacity(slots.len());
                    for (info, parts) in slots {
                        let parts = parts
                            .into_iter()
                            .map(|(role, slot)| match slot {
                                Slot::Ready(b) => Ok((role, b)),
                                Slot::Batch(i) => packed
                                    .get_mut(i)
                                    .and_then(Option::take)
                                    .map(|b| (role, b))
                                    .ok_or_else(|| {
                                        tessera::Error::invalid_input("internal: packed part lost")
                                    }),
                            })
                            .collect::<tessera::Result<Vec<_>>>()?;
                        out.push((info, parts));
                    }
                    Ok::<_, tessera::Error>(out)
                })
            })
            .py()?;
        loaded
            .into_iter()
            .map(|(info, parts)| {
                let parts = parts
                    .into_iter()
                    .map(|(role, b)| (role, b.into_buffer(shared)))
                    .collect();
                Ok((info_to_py(py, &info)?, parts))
            })
            .collect()
    }

    /// Slices of tensors (`tessera::slice::read_slice`): `requests` is a list of
    /// `(name, index)`, an index a list of `(kind, a, b, c)` items — `("i", n, _, _)` a
    /// position, `("r", start, stop, step)` a range, `("e", _, _, _)` an ellipsis. Read
    /// in parallel (on a pool of `threads` threads when given) with the GIL released.
    /// Returns, per request, `(info, buffer, unverified)`: the slice's description, its
    /// bytes (owned, writable) and why it was not checked (`None` when it was, or when
    /// there was nothing to check). `pages`: a page manifest to check the ranges read.
    #[pyo3(signature = (requests, *, pages=None, threads=None))]
    #[allow(clippy::type_complexity)]
    fn slices<'py>(
        &self,
        py: Python<'py>,
        requests: Vec<(String, Vec<(String, Option<i64>, Option<i64>, Option<i64>)>)>,
        pages: Option<PathBuf>,
        threads: Option<usize>,
    ) -> PyResult<Vec<(Bound<'py, PyDict>, Buffer, Option<String>)>> {
        use tessera::slice::Index;
        let mut parsed = Vec::with_capacity(requests.len());
        for (name, items) in requests {
            let mut index = Vec::with_capacity(items.len());
            for (kind, a, b, c) in items {
                index.push(match kind.as_str() {
                    "i" => Index::At(a.unwrap_or(0)),
                    "r" => Index::Range {
                        start: a,
                        stop: b,
                        step: c,
                    },
                    "e" => Index::Ellipsis,
                    other => {
                        return Err(pyo3::exceptions::PyValueError::new_err(format!(
                            "internal: index item kind {other:?}"
                        )))
                    }
                });
            }
            parsed.push((name, index));
        }
        let shared = &self.shared;
        let got = py
            .detach(|| {
                let check = match &pages {
                    Some(p) => Some(page_check(p)?),
                    None => None,
                };
                let read = || {
                    use rayon::prelude::*;
                    shared.with(|c| {
                        parsed
                            .par_iter()
                            .map(|(name, index)| {
                                let mut s =
                                    tessera::slice::read_slice(c, name, index, check.as_deref())?;
                                if self.signed.is_some() && check.is_none() {
                                    let why = format!(
                                        "slice of tensor {name:?} is unverified: the signed \
                                         manifest's digest covers the whole tensor"
                                    );
                                    s.unverified.get_or_insert(why);
                                }
                                Ok(s)
                            })
                            .collect::<tessera::Result<Vec<_>>>()
                    })
                };
                match threads {
                    Some(n) => rayon::ThreadPoolBuilder::new()
                        .num_threads(n.max(1))
                        .build()
                        .map_err(|e| tessera::Error::invalid_input(format!("threads={n}: {e}")))?
                        .install(read),
                    None => read(),
                }
            })
            .py()?;
        got.into_iter()
            .map(|s| {
                let buf = PartBytes::Owned(s.data).into_buffer(shared);
                Ok((info_to_py(py, &s.info)?, buf, s.unverified))
            })
            .collect()
    }

    /// Runs every integrity layer the format has. Returns
    /// `{"ok": bool, "checks": [{subject, layer, status, detail}], "warnings": [...]}`.
    /// `progress`, a callable, gets `(done_bytes, total_bytes)` as the tensors are
    /// checked (their dense bytes: `tessera::VerifyOptions::progress`), one call at a
    /// time although the checks run on several threads; an exception it raises is
    /// raised when the verify ends.
    #[pyo3(signature = (*, hmac_key=None, public_key=None, control_only=false, tensors=None, progress=None))]
    fn verify<'py>(
        &self,
        py: Python<'py>,
        hmac_key: Option<Vec<u8>>,
        public_key: Option<Vec<u8>>,
        control_only: bool,
        tensors: Option<Vec<String>>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        // Any public key form (32 bytes, hex, PEM); a secret key is refused. With a key,
        // a signature is required, embedded ones checked too, as `tessera verify` does.
        let key = match public_key {
            None => None,
            Some(k) => Some(tessera::signing::key::PublicKey::from_bytes(&k).py()?),
        };
        let ed25519 = match &key {
            Some(tessera::signing::key::PublicKey::Ed25519(k)) => Some(*k),
            _ => None,
        };
        let only = tensors.clone().unwrap_or_default();
        let mut opts = VerifyOptions::default()
            .hmac_key(hmac_key)
            .public_key(ed25519)
            .control_only(control_only)
            .tensors(tensors.unwrap_or_default())
            .path(self.path.clone())
            .progress(None);
        let total = self
            .shared
            .with(|c| tessera::verify::progress_total(c.tensor_infos()));
        let hook = progress.map(|p| std::sync::Arc::new(PyProgress::new(p, total)));
        if let Some(h) = &hook {
            let h = h.clone();
            opts = opts.with_progress(move |n| {
                h.advance(n);
            });
        }
        let report = py.detach(|| {
            self.shared.with(|c| {
                let mut report = c.verify(&opts);
                if let Some(k) = &key {
                    tessera::signing::embed::check_with_key(c, k, &only, &mut report);
                }
                report
            })
        });
        if let Some(e) = hook.and_then(|h| h.take_raised()) {
            return Err(e);
        }
        report_dict(py, &report)
    }

    /// The content identity (`tessera-id/1`, see `tessera::identity`): `{"id", "metadata",
    /// "tensors": [{name, dtype, shape, layout, digest}]}`, hashed with the GIL released.
    #[pyo3(signature = (*, metadata=false))]
    fn identity<'py>(&self, py: Python<'py>, metadata: bool) -> PyResult<Bound<'py, PyDict>> {
        let id = py
            .detach(|| {
                self.shared
                    .with(|c| tessera::identity::model_id(c, metadata))
            })
            .py()?;
        let d = PyDict::new(py);
        d.set_item("id", id.root.to_prefixed())?;
        d.set_item("metadata", id.metadata.map(|m| m.to_prefixed()))?;
        let tensors = PyList::empty(py);
        for t in &id.tensors {
            let td = PyDict::new(py);
            td.set_item("name", &t.name)?;
            td.set_item("dtype", &t.dtype)?;
            td.set_item("shape", t.shape.clone())?;
            td.set_item("layout", &t.layout)?;
            td.set_item("digest", t.digest.to_prefixed())?;
            tensors.append(td)?;
        }
        d.set_item("tensors", tensors)?;
        Ok(d)
    }

    /// Writes the page manifest (`tessera-pages/1`, see `tessera::pages`: a BLAKE3
    /// digest per page of every tensor) atomically to `output`, hashed with the GIL
    /// released; `page_size` as `tessera id --pages` takes it (`"1M"`, `"4096"`).
    /// Returns the JSON text.
    #[pyo3(signature = (page_size, output))]
    fn write_page_manifest(
        &self,
        py: Python<'_>,
        page_size: String,
        output: PathBuf,
    ) -> PyResult<String> {
        py.detach(|| {
            let size = tessera::options::parse_size(&page_size)?;
            let text = self
                .shared
                .with(|c| tessera::pages::PageManifest::compute(c, size, &mut |_| {})?.to_json())?;
            tessera::util::atomic::write_bytes_atomic(&output, format!("{text}\n").as_bytes())?;
            Ok::<_, tessera::Error>(text)
        })
        .py()
    }

    /// Signs the tensor manifest with a secret key (a 32-byte Ed25519 seed, or an ECDSA
    /// P-256 key as PEM text); returns the signature file's text
    /// (`tessera-signed-manifest/1`).
    #[pyo3(signature = (secret_key, *, metadata=false))]
    fn sign(&self, py: Python<'_>, secret_key: Vec<u8>, metadata: bool) -> PyResult<String> {
        let key = tessera::signing::key::SecretKey::from_bytes(&secret_key).py()?;
        py.detach(|| {
            self.shared
                .with(|c| tessera::signing::SignedManifest::sign(c, metadata, &key)?.to_json())
        })
        .py()
    }

    /// `tessera sign --embed`: writes `output` as this file, in its own format, with the
    /// signed manifest in its metadata under `tessera.signature`, in the canonical
    /// compact JSON (`SignedManifest::to_compact_json`); returns that text.
    #[pyo3(signature = (secret_key, output, *, metadata=false))]
    fn sign_embedded(
        &self,
        py: Python<'_>,
        secret_key: Vec<u8>,
        output: PathBuf,
        metadata: bool,
    ) -> PyResult<String> {
        use tessera::signing::embed::{self, Reframed};
        let key = tessera::signing::key::SecretKey::from_bytes(&secret_key).py()?;
        if self.shared.is_set() {
            return Err(tessera::Error::unsupported(
                "a model set: embed=True signs one file (sign the set with a detached signature)",
            ))
            .py();
        }
        py.detach(|| {
            self.shared.with(|c| {
                let format = c.format();
                embed::check_format(format)?;
                let zt = |f| matches!(f, Format::Ztensor | Format::ZtensorV2);
                if let Some(named) = Format::from_path(&output) {
                    if named != format && !(zt(named) && zt(format)) {
                        return Err(tessera::Error::invalid_input(format!(
                            "{} names a {} file, but embed=True writes the file as it is ({}); convert it first",
                            output.display(),
                            named.title(),
                            format.title()
                        )));
                    }
                }
                let src: &dyn TensorSource = c;
                let id = tessera::identity::model_id(&Reframed::without_signature(src), metadata)?;
                let text = tessera::signing::SignedManifest::sign_id(&id, &key)?.to_compact_json()?;
                tessera::convert::convert_file(
                    &Reframed::with_signature(src, &text),
                    format,
                    &output,
                    tessera::ConvertOptions::default(),
                    &tessera::WriteOptions::default(),
                )?;
                Ok(text)
            })
        })
        .py()
    }

    /// Compares this file with `other` (tensors by name, dtype, shape, values within
    /// `atol`/`rtol`, metadata), with the GIL released: see `tessera.diff`.
    #[pyo3(signature = (other, *, atol=0.0, rtol=0.0))]
    fn diff<'py>(
        &self,
        py: Python<'py>,
        other: PyRef<'py, File>,
        atol: f64,
        rtol: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let opts = tessera::diff::DiffOptions::new().atol(atol).rtol(rtol);
        let other = other.shared.clone();
        let report = py
            .detach(|| {
                self.shared
                    .with(|a| other.with(|b| tessera::diff::diff(a, b, &opts)))
            })
            .py()?;
        crate::diff::report_to_py(py, &report)
    }

    /// Checks the tensors against a detached signature (`sign`'s text or bytes) with the
    /// trusted public key (32 Ed25519 bytes, or PEM text); only `tensors` when given. Same shape as `verify`.
    #[pyo3(signature = (signature, public_key, *, tensors=None))]
    fn verify_signature<'py>(
        &self,
        py: Python<'py>,
        signature: Vec<u8>,
        public_key: Vec<u8>,
        tensors: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let key = tessera::signing::key::PublicKey::from_bytes(&public_key).py()?;
        let signed = tessera::signing::SignedManifest::parse(&signature).py()?;
        let only = tensors.unwrap_or_default();
        let report = py.detach(|| self.shared.with(|c| signed.verify(c, &key, &only)));
        report_dict(py, &report)
    }

    /// Converts the whole file (tensors, metadata, opaque chunks) into another format at
    /// `path`, streaming tensor by tensor with the GIL released. Returns the notes of what
    /// was cast, densified or dropped (each only when its option allows it).
    /// With `max_shard_size` or `shards`, a model set (see `tessera.save`).
    #[pyo3(signature = (path, *, format=None, options=None, progress=None, max_shard_size=None, shards=None))]
    #[allow(clippy::too_many_arguments)]
    fn convert<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        format: Option<&str>,
        options: Option<Bound<'py, PyDict>>,
        progress: Option<Py<PyAny>>,
        max_shard_size: Option<u64>,
        shards: Option<u32>,
    ) -> PyResult<(Vec<String>, Vec<String>)> {
        let format = crate::save::resolve_format(format, Some(&path))?;
        let split = crate::save::split(max_shard_size, shards).py()?;
        let (wopts, copts) = crate::save::parse_options(options.as_ref())?;
        tessera::formats::check_options(format, &wopts).py()?;
        let (r, raised) = py.detach(|| {
            self.shared.with(|c| {
                let src: &dyn TensorSource = c;
                let guarded = crate::save::Interruptible::new(src).with_progress(progress.as_ref());
                let r = crate::save::convert_to_path(&guarded, format, &path, copts, &wopts, split);
                (r, guarded.take_raised())
            })
        });
        if let Some(e) = raised {
            return Err(e);
        }
        r.py()
    }

    fn __repr__(&self) -> String {
        let path = self
            .path
            .as_ref()
            .map(|p| {
                // A URL's secrets (a presigned signature, a token) redacted, as the CLI
                // shows it.
                let shown = tessera::Location::from_path(p)
                    .map(|l| l.display())
                    .unwrap_or_else(|_| p.display().to_string());
                format!(" {shown:?}")
            })
            .unwrap_or_default();
        format!(
            "<tessera.File{path} {} {}, {} tensors>",
            self.title,
            self.version,
            self.infos.len()
        )
    }
}

/// A verify report as `{"ok", "checks": [{subject, layer, status, detail}], "warnings"}`.
fn report_dict<'py>(
    py: Python<'py>,
    report: &tessera::VerifyReport,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("ok", report.is_ok())?;
    let checks = PyList::empty(py);
    for c in &report.checks {
        let cd = PyDict::new(py);
        cd.set_item("subject", &c.subject)?;
        cd.set_item("layer", &c.layer)?;
        cd.set_item("status", c.status.name())?;
        cd.set_item("detail", &c.detail)?;
        checks.append(cd)?;
    }
    d.set_item("checks", checks)?;
    d.set_item("warnings", report.warnings.clone())?;
    Ok(d)
}
