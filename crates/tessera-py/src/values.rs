//! Conversions between Tessera's values and Python's: errors to the exception classes
//! of `tessera.errors`, metadata trees to dicts and back.

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple,
};
use tessera::{ErrorKind, Map, Value};

/// The exception class of `tessera.errors` for a kind.
fn class_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Io => "IoError",
        ErrorKind::UnknownFormat => "UnknownFormatError",
        ErrorKind::UnsupportedVersion => "UnsupportedVersionError",
        ErrorKind::Malformed => "FormatError",
        ErrorKind::Integrity => "IntegrityError",
        ErrorKind::LimitExceeded => "LimitError",
        ErrorKind::Unsupported => "UnsupportedError",
        ErrorKind::InvalidInput => "InvalidInputError",
        ErrorKind::NotFound => "NotFoundError",
        // A kind added later: the base class.
        _ => "TesseraError",
    }
}

/// Converts a Tessera error to an instance of its `tessera.errors` class, with the
/// attributes `kind`, `format`, `subject` and `offset` set.
pub fn to_py_err(e: tessera::Error) -> PyErr {
    raise_as(e, false)
}

/// An error opening a path: `NotFound` there is a file or remote object that does not
/// exist (a missing tensor name is only ever found later), raised as
/// `TesseraFileNotFoundError` (a `FileNotFoundError`, `errno` ENOENT) rather than as
/// `NotFoundError` (a `KeyError`, for tensor and chunk names).
pub fn open_error(e: tessera::Error) -> PyErr {
    let missing = e.kind() == ErrorKind::NotFound;
    raise_as(e, missing)
}

fn raise_as(e: tessera::Error, missing_file: bool) -> PyErr {
    Python::attach(|py| match make_exception(py, &e, missing_file) {
        Ok(err) => err,
        Err(import_failed) => PyRuntimeError::new_err(format!(
            "{e} (and tessera.errors could not be imported: {import_failed})"
        )),
    })
}

fn make_exception(py: Python<'_>, e: &tessera::Error, missing_file: bool) -> PyResult<PyErr> {
    let module = py.import("tessera.errors")?;
    // OS errors get the class Python itself would raise (FileNotFoundError, …), still a
    // TesseraError, with errno and strerror set.
    let errno = if missing_file {
        Some(libc::ENOENT)
    } else {
        e.os_error()
    };
    let name = match (e.kind(), errno) {
        (_, Some(libc::ENOENT)) if missing_file => "TesseraFileNotFoundError",
        (tessera::ErrorKind::Io, Some(n)) => match n {
            libc::ENOENT => "TesseraFileNotFoundError",
            libc::EISDIR => "TesseraIsADirectoryError",
            libc::EACCES | libc::EPERM => "TesseraPermissionError",
            _ => class_name(e.kind()),
        },
        (k, _) => class_name(k),
    };
    let class = module.getattr(name)?;
    let exc = class.call1((e.render(&python_hint),))?;
    // The structured refusal: `exc.hints` (keyword names) and `exc.refusals`
    // (`(tensor or None, reason, keyword or None)` each).
    let hints: Vec<&str> = e.hints().into_iter().map(python_keyword).collect();
    exc.setattr("hints", hints)?;
    let refusals: Vec<(Option<String>, String, Option<&str>)> = e
        .refusals()
        .iter()
        .map(|r| {
            (
                r.tensor.clone(),
                r.reason.clone(),
                r.hint.map(python_keyword),
            )
        })
        .collect();
    exc.setattr("refusals", refusals)?;
    if let Some(n) = errno {
        exc.setattr("errno", n)?;
        exc.setattr("strerror", std::io::Error::from_raw_os_error(n).to_string())?;
        if let Some(f) = e.file().or(e.subject()) {
            exc.setattr("filename", f)?;
        }
    }
    exc.setattr("kind", e.kind().name())?;
    exc.setattr("format", e.format().map(|f| f.name()))?;
    exc.setattr("subject", e.subject())?;
    exc.setattr("offset", e.offset())?;
    Ok(PyErr::from_value(exc))
}

/// How Python spells a [`tessera::Hint`] in an error message: as the keyword argument.
pub fn python_hint(h: tessera::Hint) -> String {
    use tessera::Hint;
    match h {
        Hint::Cast => "use cast=True".into(),
        Hint::Densify => "use densify=True".into(),
        Hint::DropMetadata => "use drop_metadata=True".into(),
        Hint::Dequantize => "use dequantize=\"f32\", \"f16\" or \"bf16\"".into(),
        Hint::Salvage => "salvage=True reads the rest".into(),
        Hint::AcceptLoss => "the loss is reported".into(),
        Hint::NoVerify => "verify=False skips the digests".into(),
        Hint::Passphrase => "give age_passphrase=".into(),
        Hint::Identity => "give age_identities=".into(),
        other => format!("option {}", other.name()),
    }
}

/// The keyword argument a hint names, for `exc.hints`.
fn python_keyword(h: tessera::Hint) -> &'static str {
    use tessera::Hint;
    match h {
        Hint::Cast => "cast",
        Hint::Densify => "densify",
        Hint::DropMetadata => "drop_metadata",
        Hint::Dequantize => "dequantize",
        Hint::Salvage => "salvage",
        Hint::AcceptLoss => "accept_loss",
        Hint::NoVerify => "verify",
        Hint::Passphrase => "age_passphrase",
        Hint::Identity => "age_identities",
        other => other.name(),
    }
}

/// `Result<T, tessera::Error>` → `PyResult<T>`.
pub trait IntoPy<T> {
    /// Maps the error.
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for tessera::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py_err)
    }
}

/// A metadata value as a Python object: ints, floats, strings, bytes, lists and dicts
/// (insertion order kept).
pub fn value_to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::Float(f) => PyFloat::new(py, *f).into_any(),
        Value::Str(s) => PyString::new(py, s).into_any(),
        Value::Bytes(b) => PyBytes::new(py, b).into_any(),
        Value::List(l) => {
            let items = l
                .iter()
                .map(|x| value_to_py(py, x))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any()
        }
        Value::Map(m) => map_to_py(py, m)?.into_any(),
        // A kind of value added later: its text.
        other => PyString::new(py, &other.to_string()).into_any(),
    })
}

/// A metadata map as a dict.
pub fn map_to_py<'py>(py: Python<'py>, m: &Map) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in m.iter() {
        d.set_item(k, value_to_py(py, v)?)?;
    }
    Ok(d)
}

/// A Python object as a metadata value. Accepts None, bool, int, float, str, bytes,
/// lists/tuples and dicts with string keys, nested up to 64 levels.
pub fn py_to_value(obj: &Bound<'_, PyAny>, depth: usize) -> PyResult<Value> {
    if depth > 64 {
        return Err(PyTypeError::new_err("metadata nests deeper than 64 levels"));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        let i: i128 = obj
            .extract()
            .map_err(|_| PyTypeError::new_err("metadata integer does not fit in 128 bits"))?;
        return Ok(Value::Int(i));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(Value::Float(f.value()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::Str(s.to_cow()?.into_owned()));
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Value::Bytes(b.as_bytes().to_vec()));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(Value::Bytes(b.to_vec()));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        return Ok(Value::Map(dict_to_map(d, depth + 1)?));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let mut out = Vec::new();
        for item in obj.try_iter()? {
            out.push(py_to_value(&item?, depth + 1)?);
        }
        return Ok(Value::List(out));
    }
    Err(PyTypeError::new_err(format!(
        "metadata values must be None, bool, int, float, str, bytes, list or dict, not {}",
        obj.get_type().name()?
    )))
}

/// A dict with string keys as a metadata map.
pub fn dict_to_map(d: &Bound<'_, PyDict>, depth: usize) -> PyResult<Map> {
    let mut m = Map::new();
    for (k, v) in d.iter() {
        let key: String = k
            .extract()
            .map_err(|_| PyTypeError::new_err("metadata keys must be strings"))?;
        m.insert(key, py_to_value(&v, depth)?);
    }
    Ok(m)
}
