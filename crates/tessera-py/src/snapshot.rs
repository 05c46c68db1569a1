//! `tessera.Snapshotter` and `tessera.restore` (the native half; the Python layer turns
//! numpy arrays and torch tensors into the `(name, dtype, shape, layout, parts)` items
//! `save` takes). `request(copy=True)` copies the arrays into the staging arena with
//! the GIL released (the arrays are borrowed for the copy only); `copy=False` holds the
//! arrays (Python references) until the generation is written, and the writing thread
//! reads each array's bytes under the GIL when it needs them. Every call that may wait
//! (a blocking backlog, `wait`, `close`) releases the GIL, so that thread can take it.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tessera::snapshot::{
    Backlog, Pinned, PinnedTensor, RestoreOptions, SnapshotOptions, Snapshotter,
};
use tessera::{DType, Error, Metadata, TensorInfo, TensorSource, TensorView};

use crate::values::IntoPy;

type Item<'py> = (
    String,
    String,
    Vec<u64>,
    String,
    Vec<(String, Bound<'py, PyAny>)>,
);

fn invalid(msg: String) -> PyErr {
    crate::values::to_py_err(Error::invalid_input(msg))
}

fn dense_info(
    name: &str,
    dtype: &str,
    shape: &[u64],
    layout: &str,
    parts: usize,
) -> PyResult<TensorInfo> {
    if layout != "dense" || parts != 1 {
        return Err(invalid(format!(
            "tensor {name:?}: snapshots take dense tensors (not {layout})"
        )));
    }
    let d = DType::parse(dtype).py()?;
    Ok(TensorInfo::dense(name.to_string(), d, shape.to_vec()))
}

/// The caller's arrays, borrowed for one copy.
struct Borrowed<'a> {
    infos: Vec<TensorInfo>,
    data: Vec<&'a [u8]>,
    index: HashMap<String, usize>,
    metadata: Metadata,
}

impl TensorSource for Borrowed<'_> {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> tessera::Result<TensorView<'_>> {
        let i = tessera::model::tensor_position(&self.index, name)?;
        TensorView::dense(self.infos[i].clone(), Cow::Borrowed(self.data[i]))
    }
}

/// An array held under `copy=False`: read under the GIL by the writing thread.
struct Held(Py<PyAny>);

impl Pinned for Held {
    fn bytes(&self) -> tessera::Result<Cow<'_, [u8]>> {
        Python::attach(|py| {
            let b = self.0.bind(py);
            crate::owner::object_bytes(b)
                .map(|s| Cow::Owned(s.to_vec()))
                .map_err(|e| Error::invalid_input(format!("a pinned array: {e}")))
        })
    }
}

/// The native snapshotter (`tessera.Snapshotter` wraps it).
#[pyclass(module = "tessera._tessera")]
pub struct NativeSnapshotter {
    inner: Option<Snapshotter>,
}

impl NativeSnapshotter {
    fn get(&self) -> PyResult<&Snapshotter> {
        self.inner
            .as_ref()
            .ok_or_else(|| invalid("the Snapshotter is closed".into()))
    }
}

#[pymethods]
impl NativeSnapshotter {
    #[new]
    #[pyo3(signature = (dir, format, keep, keep_every, options, sign_key, push, on_backlog, max_backlog, backoff))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        dir: PathBuf,
        format: &str,
        keep: usize,
        keep_every: u64,
        options: Option<Bound<'_, PyDict>>,
        sign_key: Option<Vec<u8>>,
        push: Vec<String>,
        on_backlog: &str,
        max_backlog: Option<usize>,
        backoff: Option<(f64, f64)>,
    ) -> PyResult<Self> {
        let format = crate::save::resolve_format(Some(format), None)?;
        let (write, _) = crate::save::parse_options(options.as_ref())?;
        let mut o = SnapshotOptions::new(format);
        o.keep = keep;
        o.keep_every = keep_every;
        o.write = write;
        o.push = push;
        o.on_backlog = Backlog::parse(on_backlog).py()?;
        o.max_backlog = max_backlog;
        if let Some((first, max)) = backoff {
            o.backoff = tessera::snapshot::Backoff {
                first: Duration::from_secs_f64(first.max(0.0)),
                max: Duration::from_secs_f64(max.max(0.0)),
            };
        }
        if let Some(k) = sign_key {
            o.sign_key = Some(tessera::signing::key::SecretKey::from_bytes(&k).py()?);
        }
        let s = py.detach(|| Snapshotter::open(&dir, o)).py()?;
        Ok(NativeSnapshotter { inner: Some(s) })
    }

    /// Pins and queues a generation; `None` when skipped.
    #[pyo3(signature = (tensors, step=None, metadata=None, copy=true))]
    fn request(
        &self,
        py: Python<'_>,
        tensors: Vec<Item<'_>>,
        step: Option<u64>,
        metadata: Option<BTreeMap<String, String>>,
        copy: bool,
    ) -> PyResult<Option<u64>> {
        let s = self.get()?;
        let metadata = metadata.unwrap_or_default();
        if copy {
            let mut src = Borrowed {
                infos: Vec::with_capacity(tensors.len()),
                data: Vec::with_capacity(tensors.len()),
                index: HashMap::new(),
                metadata: Metadata::new(),
            };
            for (name, dtype, shape, layout, parts) in &tensors {
                let info = dense_info(name, dtype, shape, layout, parts.len())?;
                if src.index.insert(name.clone(), src.infos.len()).is_some() {
                    return Err(invalid(format!("duplicate tensor name {name:?}")));
                }
                src.data.push(crate::owner::object_bytes(&parts[0].1)?);
                src.infos.push(info);
            }
            for (i, info) in src.infos.iter().enumerate() {
                TensorView::dense(info.clone(), Cow::Borrowed(src.data[i]))
                    .and_then(|t| t.validate())
                    .map_err(|e| Error::invalid_input(e.message().to_string()))
                    .py()?;
            }
            py.detach(|| s.request(&src, step, metadata)).py()
        } else {
            let mut pinned = Vec::with_capacity(tensors.len());
            for (name, dtype, shape, layout, parts) in &tensors {
                let info = dense_info(name, dtype, shape, layout, parts.len())?;
                let bytes = crate::owner::object_bytes(&parts[0].1)?;
                TensorView::dense(info.clone(), Cow::Borrowed(bytes))
                    .and_then(|t| t.validate())
                    .map_err(|e| Error::invalid_input(e.message().to_string()))
                    .py()?;
                pinned.push(PinnedTensor {
                    info,
                    bytes: Arc::new(Held(parts[0].1.clone().unbind())),
                });
            }
            py.detach(|| s.request_pinned(pinned, step, metadata)).py()
        }
    }

    /// Whether generation `gen` is still being written.
    fn pinned(&self, gen: u64) -> PyResult<bool> {
        Ok(self.get()?.pinned(gen))
    }

    /// Waits for generation `gen` to be written.
    #[pyo3(signature = (gen, timeout=None))]
    fn wait(&self, py: Python<'_>, gen: u64, timeout: Option<f64>) -> PyResult<()> {
        let s = self.get()?;
        let t = timeout.map(|t| Duration::from_secs_f64(t.max(0.0)));
        py.detach(|| s.wait(gen, t)).py()
    }

    /// Waits until nothing is being written.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let s = self.get()?;
        py.detach(|| s.flush());
        Ok(())
    }

    /// Waits up to `timeout` seconds for every target to hold every generation.
    fn wait_pushed(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let s = self.get()?;
        Ok(py.detach(|| s.wait_pushed(Duration::from_secs_f64(timeout.max(0.0)))))
    }

    /// Requests skipped under `on_backlog="skip"`.
    fn skipped(&self) -> PyResult<u64> {
        Ok(self.get()?.skipped())
    }

    /// Per target: the generations it lacks.
    fn pending(&self) -> PyResult<Vec<(String, Vec<u64>)>> {
        Ok(self.get()?.pending())
    }

    /// Write failures so far.
    fn errors(&self) -> PyResult<Vec<String>> {
        Ok(self.get()?.errors())
    }

    /// What opening the ring found and cleaned.
    fn recovered(&self) -> PyResult<Vec<String>> {
        Ok(self.get()?.recovered.clone())
    }

    /// Bytes the staging arena holds.
    fn arena_bytes(&self) -> PyResult<u64> {
        Ok(self.get()?.arena_bytes())
    }

    /// The ring's generations: (gen, step, time, written, failed reason, pushed targets).
    fn generations<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let st = self.get()?.state();
        let out = PyList::empty(py);
        for g in st.gens.values().filter(|g| !g.dropped) {
            let d = PyDict::new(py);
            d.set_item("generation", g.gen)?;
            d.set_item("step", g.step)?;
            d.set_item("time", &g.time)?;
            d.set_item("written", g.written.is_some())?;
            d.set_item("failed", g.failed.clone())?;
            d.set_item("pushed", g.pushed.iter().cloned().collect::<Vec<_>>())?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// Waits for the writes and up to `push_timeout` seconds for the pushes; stops.
    fn close(&mut self, py: Python<'_>, push_timeout: f64) -> PyResult<()> {
        if let Some(s) = self.inner.take() {
            py.detach(|| s.close(Duration::from_secs_f64(push_timeout.max(0.0))))
                .py()?;
        }
        Ok(())
    }

    /// Whether it is closed.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_none()
    }
}

impl Drop for NativeSnapshotter {
    fn drop(&mut self) {
        if let Some(s) = self.inner.take() {
            // The writer thread may need the GIL (copy=False); Python holds it while
            // dropping this object, so release it for the join.
            Python::attach(|py| py.detach(|| drop(s)));
        }
    }
}

/// The newest good generation of a ring: `(generation, path, sidecar as a dict, skipped,
/// log problems)`.
#[pyfunction]
#[pyo3(signature = (ring, public_key=None, generation=None, hmac_key=None, identities=Vec::new(), passphrase=None))]
#[allow(clippy::type_complexity)]
pub fn snapshot_restore<'py>(
    py: Python<'py>,
    ring: PathBuf,
    public_key: Option<Vec<u8>>,
    generation: Option<u64>,
    hmac_key: Option<Vec<u8>>,
    identities: Vec<String>,
    passphrase: Option<String>,
) -> PyResult<(
    u64,
    String,
    Bound<'py, PyDict>,
    Vec<(u64, String)>,
    Vec<String>,
)> {
    let mut o = RestoreOptions::default();
    if let Some(k) = public_key {
        o.public_key = Some(tessera::signing::key::PublicKey::from_bytes(&k).py()?);
    }
    o.generation = generation;
    o.read.hmac_key = hmac_key;
    o.read.age_identities = identities;
    o.read.age_passphrase = passphrase;
    let r = py.detach(|| tessera::snapshot::restore(&ring, &o)).py()?;
    let sc = &r.sidecar;
    let sidecar = PyDict::new(py);
    sidecar.set_item("generation", sc.gen)?;
    sidecar.set_item("step", sc.step)?;
    sidecar.set_item("time", &sc.time)?;
    sidecar.set_item("format", &sc.format)?;
    sidecar.set_item("root", &sc.root)?;
    sidecar.set_item("prev_generation", sc.prev_gen)?;
    sidecar.set_item("prev_root", sc.prev_root.clone())?;
    sidecar.set_item("files", sc.files.clone())?;
    sidecar.set_item("metadata", sc.metadata.clone())?;
    Ok((
        r.generation,
        r.path.display().to_string(),
        sidecar,
        r.skipped,
        r.log_problems,
    ))
}
