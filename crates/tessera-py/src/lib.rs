//! The native part of the `tessera` Python package (`tessera._tessera`).
//!
//! Thin: it opens files ([`file`]), copies owned loads out with parallel positional
//! reads ([`fill`]), hands tensor bytes to numpy without a copy
//! ([`owner`], the only module with `unsafe`), writes tensors ([`save`]) and maps
//! errors and metadata ([`values`]); [`diff`] renders the library's comparison. The Python layer (`python/tessera/`) turns the
//! buffers into numpy arrays or torch tensors and provides the safetensors-style API.

mod diff;
mod file;
mod fill;
mod owner;
mod progress;
mod save;
mod signed;
mod snapshot;
mod values;
mod wtxt;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tessera::{DType, Format};

/// Every format Tessera knows: name, title, extensions, whether it can be read and
/// written today, and what it can hold.
#[pyfunction]
fn formats(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for f in Format::ALL {
        let d = PyDict::new(py);
        d.set_item("name", f.name())?;
        d.set_item("title", f.title())?;
        d.set_item("extensions", f.extensions().to_vec())?;
        d.set_item("readable", f.can_read())?;
        d.set_item("writable", f.can_write())?;
        d.set_item(
            "options",
            f.codec().options.iter().map(|o| o.name).collect::<Vec<_>>(),
        )?;
        if let Some(c) = tessera::convert::capabilities(f) {
            d.set_item(
                "dtypes",
                c.dtypes.iter().map(|d| d.name()).collect::<Vec<_>>(),
            )?;
            d.set_item("sparse", c.sparse)?;
            d.set_item("other_layouts", c.other_layouts)?;
            d.set_item("metadata", c.metadata.name())?;
            d.set_item("chunks", c.chunks)?;
            d.set_item("compression", c.compression.to_vec())?;
            d.set_item("integrity", c.integrity.to_vec())?;
            d.set_item("zero_copy", c.zero_copy)?;
        }
        out.append(d)?;
    }
    Ok(out)
}

/// Canonical dtype names with their element sizes.
#[pyfunction]
fn dtypes() -> Vec<(&'static str, usize)> {
    DType::ALL.iter().map(|d| (d.name(), d.size())).collect()
}

/// Packed sub-byte elements (`f4_e2m1`, `f6_e2m3`, `f6_e3m2`) one code per byte (the
/// ml_dtypes layout), `numel` of them.
#[pyfunction]
fn unpack_bits<'py>(
    py: Python<'py>,
    dtype: &str,
    data: &[u8],
    numel: usize,
) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
    use values::IntoPy;
    let d = DType::parse(dtype).py()?;
    let codes = tessera::dtype::unpack(d, data, numel)
        .ok_or_else(|| {
            tessera::Error::invalid_input(format!(
                "{numel} elements of {d} do not fit in {} bytes (or {d} is not packed)",
                data.len()
            ))
        })
        .py()?;
    Ok(pyo3::types::PyBytes::new(py, &codes))
}

/// One code per byte packed as a sub-byte dtype stores them.
#[pyfunction]
fn pack_bits<'py>(
    py: Python<'py>,
    dtype: &str,
    codes: &[u8],
) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
    use values::IntoPy;
    let d = DType::parse(dtype).py()?;
    let packed = tessera::dtype::pack(d, codes).py()?;
    Ok(pyo3::types::PyBytes::new(py, &packed))
}

/// The canonical name of a dtype name or alias (`float32` → `f32`).
#[pyfunction]
fn canonical_dtype(name: &str) -> PyResult<&'static str> {
    use values::IntoPy;
    DType::parse(name).map(DType::name).py()
}

/// The format a file's first bytes announce, or None.
#[pyfunction]
fn detect(head: &[u8]) -> Option<&'static str> {
    Format::detect(head).map(Format::name)
}

/// The Ed25519 public key (32 bytes) of a secret key seed (32 bytes), for
/// `File.verify(public_key=…)` on files saved with `sign_key=`.
#[pyfunction]
fn public_key(py: Python<'_>, secret: Vec<u8>) -> PyResult<Bound<'_, pyo3::types::PyBytes>> {
    use values::IntoPy;
    let seed = <[u8; 32]>::try_from(secret.as_slice())
        .map_err(|_| {
            tessera::Error::invalid_input(format!(
                "an Ed25519 secret key is 32 bytes, got {}",
                secret.len()
            ))
        })
        .py()?;
    Ok(pyo3::types::PyBytes::new(
        py,
        &tessera::signing::ed25519::public_key(&seed),
    ))
}

/// A key file read with the CLI's rules (`tessera::signing::key`), as PEM text: the
/// public key file at `path` when `public`, else the secret one (a file of the wrong
/// kind is refused).
#[pyfunction]
fn _read_key_file(path: std::path::PathBuf, public: bool) -> PyResult<String> {
    use tessera::signing::key::{PublicKey, SecretKey};
    use values::IntoPy;
    if public {
        PublicKey::load(&path).and_then(|k| k.to_file_text()).py()
    } else {
        SecretKey::load(&path).and_then(|k| k.to_file_text()).py()
    }
}

#[pymodule]
fn _tessera(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<file::File>()?;
    m.add_class::<owner::Buffer>()?;
    m.add_function(wrap_pyfunction!(file::open_file, m)?)?;
    m.add_function(wrap_pyfunction!(file::open_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(save::save, m)?)?;
    m.add_class::<snapshot::NativeSnapshotter>()?;
    m.add_function(wrap_pyfunction!(snapshot::snapshot_restore, m)?)?;
    m.add_function(wrap_pyfunction!(formats, m)?)?;
    m.add_function(wrap_pyfunction!(dtypes, m)?)?;
    m.add_function(wrap_pyfunction!(canonical_dtype, m)?)?;
    m.add_function(wrap_pyfunction!(unpack_bits, m)?)?;
    m.add_function(wrap_pyfunction!(pack_bits, m)?)?;
    m.add_function(wrap_pyfunction!(detect, m)?)?;
    m.add_function(wrap_pyfunction!(public_key, m)?)?;
    m.add_function(wrap_pyfunction!(_read_key_file, m)?)?;
    m.add_function(wrap_pyfunction!(wtxt::wtxt_delta, m)?)?;
    m.add_function(wrap_pyfunction!(wtxt::wtxt_apply, m)?)?;
    m.add_function(wrap_pyfunction!(wtxt::wtxt_sign, m)?)?;
    m.add_function(wrap_pyfunction!(wtxt::wtxt_finalize, m)?)?;
    m.add_function(wrap_pyfunction!(wtxt::wtxt_encrypt, m)?)?;
    m.add_function(wrap_pyfunction!(wtxt::wtxt_decrypt, m)?)?;
    Ok(())
}
