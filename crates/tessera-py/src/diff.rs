//! `File.diff`'s result: [`tessera::diff::DiffReport`] as a dict, the same shape as
//! `tessera diff --json` (without the paths), metadata values as Python objects.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tessera::diff::{DiffReport, TensorDiff};

use crate::values::value_to_py;

fn tensor_to_py<'py>(py: Python<'py>, d: &TensorDiff) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("name", &d.name)?;
    out.set_item("dtype", d.dtype.clone())?;
    out.set_item("shape", d.shape.clone())?;
    out.set_item("layout", d.layout.clone())?;
    out.set_item("bytes_equal", d.bytes_equal)?;
    let v = d.values.as_ref();
    out.set_item("elements_compared", v.map(|v| v.compared))?;
    out.set_item("elements_differing", v.map(|v| v.differing))?;
    out.set_item("nonfinite_mismatches", v.map(|v| v.nonfinite_mismatches))?;
    out.set_item("max_abs_diff", v.map(|v| v.max_abs))?;
    out.set_item("max_rel_diff", v.map(|v| v.max_rel))?;
    out.set_item("rms_diff", v.map(|v| v.rms()))?;
    Ok(out)
}

/// The report as a dict: `same`, `tensors_same`, `metadata_same`, `tolerance`, `added`,
/// `removed`, `changed` and `within_tolerance` (one dict per tensor), `metadata`
/// (`added`, `removed`, `changed`, `values`: key → (a, b), `not_compared`).
pub fn report_to_py<'py>(py: Python<'py>, r: &DiffReport) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("same", r.same())?;
    out.set_item("tensors_same", r.tensors_same())?;
    out.set_item("metadata_same", r.metadata_same())?;
    let tol = PyDict::new(py);
    tol.set_item("atol", r.tolerance.atol)?;
    tol.set_item("rtol", r.tolerance.rtol)?;
    out.set_item("tolerance", tol)?;
    out.set_item("added", &r.added)?;
    out.set_item("removed", &r.removed)?;
    let tensors = |list: &[TensorDiff]| -> PyResult<Bound<'py, PyList>> {
        let items = list
            .iter()
            .map(|d| tensor_to_py(py, d))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    };
    out.set_item("changed", tensors(&r.changed)?)?;
    out.set_item("within_tolerance", tensors(&r.within_tolerance)?)?;
    let m = &r.metadata;
    let meta = PyDict::new(py);
    meta.set_item("added", &m.added)?;
    meta.set_item("removed", &m.removed)?;
    meta.set_item("changed", &m.changed)?;
    let values = PyDict::new(py);
    for (k, a, b) in &m.values {
        let side = |v: &Option<tessera::Value>| -> PyResult<Bound<'py, PyAny>> {
            match v {
                Some(v) => value_to_py(py, v),
                None => Ok(py.None().into_bound(py)),
            }
        };
        values.set_item(k, (side(a)?, side(b)?))?;
    }
    meta.set_item("values", values)?;
    let not_compared = PyList::empty(py);
    for (k, side, why) in &m.not_compared {
        let d = PyDict::new(py);
        d.set_item("key", k)?;
        d.set_item("in", *side)?;
        d.set_item("reason", why)?;
        not_compared.append(d)?;
    }
    meta.set_item("not_compared", not_compared)?;
    out.set_item("metadata", meta)?;
    Ok(out)
}
