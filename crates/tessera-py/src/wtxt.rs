//! `tessera.wtxt`: the CLI's WTXT verbs for Python — `delta`, `apply`, `sign`,
//! `finalize`, `encrypt`, `decrypt` — over the same library calls, each output written
//! atomically (a temporary sibling renamed into place), the GIL released while they
//! run. Keys: a signing key is a 32-byte seed (`bytes`) or a key file's path; an HMAC key
//! is `bytes` (or `str`, its UTF-8 bytes).

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use tessera::formats::wtxt::{crypt, delta, wsum, WtxtFile};
use tessera::{FileData, ReadOptions, Result};

use crate::values::IntoPy;

fn parse<'a>(path: &Path, data: &'a FileData) -> Result<WtxtFile<'a>> {
    let opts = ReadOptions::default().path(Some(path.to_path_buf()));
    WtxtFile::parse(Cow::Borrowed(data), &opts).map_err(|e| {
        e.in_format(tessera::Format::Wtxt)
            .in_file(path.display().to_string())
    })
}

fn save(path: &Path, bytes: &[u8]) -> Result<()> {
    tessera::util::atomic::write_bytes_atomic(path, bytes)
}

/// A signing key: a 32-byte seed, or a key file's path.
fn seed_of(key: &Bound<'_, PyAny>) -> PyResult<[u8; 32]> {
    if let Ok(b) = key.cast::<PyBytes>() {
        return <[u8; 32]>::try_from(b.as_bytes()).map_err(|_| {
            PyTypeError::new_err(format!(
                "a signing key is a 32-byte seed or a key file path, got {} bytes",
                b.as_bytes().len()
            ))
        });
    }
    let path: PathBuf = key
        .extract()
        .map_err(|_| PyTypeError::new_err("a signing key is a 32-byte seed or a key file path"))?;
    tessera::signing::ed25519::load_secret_key(&path).py()
}

fn hmac_of(key: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(s) = key.cast::<PyString>() {
        return Ok(s.to_cow()?.as_bytes().to_vec());
    }
    key.extract::<Vec<u8>>()
        .map_err(|_| PyTypeError::new_err("hmac_key must be bytes or str"))
}

/// Writes the chunks that changed from `base` to `target` as a DELTA v2 file at `out`;
/// returns its size. `with_target_root` adds Tessera's extension (the target's `cap` and
/// `root` lines and HMACs), which rebuilds any target byte for byte.
#[pyfunction]
#[pyo3(signature = (base, target, out, *, with_target_root=false))]
pub fn wtxt_delta(
    py: Python<'_>,
    base: PathBuf,
    target: PathBuf,
    out: PathBuf,
    with_target_root: bool,
) -> PyResult<u64> {
    py.detach(|| {
        let (bd, td) = (FileData::open(&base)?, FileData::open(&target)?);
        let (b, t) = (parse(&base, &bd)?, parse(&target, &td)?);
        let d = if with_target_root {
            delta::make_with_target_root(&b, &t)?
        } else {
            delta::make(&b, &t)?
        };
        save(&out, &d)?;
        Ok(d.len() as u64)
    })
    .py()
}

/// Applies the delta at `delta_path` to `base`, writing the target snapshot at `out`
/// (unsigned unless `sign_key` re-signs it).
#[pyfunction]
#[pyo3(signature = (base, delta_path, out, *, sign_key=None))]
pub fn wtxt_apply(
    py: Python<'_>,
    base: PathBuf,
    delta_path: PathBuf,
    out: PathBuf,
    sign_key: Option<Bound<'_, PyAny>>,
) -> PyResult<()> {
    let seed = sign_key.as_ref().map(seed_of).transpose()?;
    py.detach(|| {
        let bd = FileData::open(&base)?;
        let dd = std::fs::read(&delta_path)
            .map_err(|e| tessera::Error::from(e).in_file(delta_path.display().to_string()))?;
        let mut t = delta::apply(&parse(&base, &bd)?, &dd)?;
        if let Some(s) = &seed {
            t = delta::sign(&t, s)?;
        }
        save(&out, &t)
    })
    .py()
}

/// Signs a snapshot (or a `.wsum`) with an Ed25519 key, in place or to `out`; returns
/// the key id (16 hex digits).
#[pyfunction]
#[pyo3(signature = (path, key, *, out=None))]
pub fn wtxt_sign(
    py: Python<'_>,
    path: PathBuf,
    key: Bound<'_, PyAny>,
    out: Option<PathBuf>,
) -> PyResult<String> {
    let seed = seed_of(&key)?;
    py.detach(|| {
        let data = std::fs::read(&path)
            .map_err(|e| tessera::Error::from(e).in_file(path.display().to_string()))?;
        let signed = delta::sign(&data, &seed)?;
        save(out.as_ref().unwrap_or(&path), &signed)?;
        let public = tessera::signing::ed25519::public_key(&seed);
        Ok(tessera::util::hex(&tessera::formats::wtxt::header::keyid(
            &public,
        )))
    })
    .py()
}

/// Writes the WSUM of a streamed snapshot (WTXT-S) written without one, after checking
/// every array (and their HMACs when `hmac_key` is given): `out` (default
/// `path + ".wsum"`, which must not exist yet), chained to `prev`'s `merkle_this` when
/// given, signed with `sign_key` when given. Returns the WSUM's path.
#[pyfunction]
#[pyo3(signature = (path, *, out=None, prev=None, sign_key=None, hmac_key=None))]
pub fn wtxt_finalize(
    py: Python<'_>,
    path: PathBuf,
    out: Option<PathBuf>,
    prev: Option<PathBuf>,
    sign_key: Option<Bound<'_, PyAny>>,
    hmac_key: Option<Bound<'_, PyAny>>,
) -> PyResult<PathBuf> {
    let seed = sign_key.as_ref().map(seed_of).transpose()?;
    let hmac = hmac_key.as_ref().map(hmac_of).transpose()?;
    py.detach(|| {
        wsum::finalize_file(
            &path,
            out.as_deref(),
            prev.as_deref(),
            hmac.as_deref(),
            seed.as_ref(),
        )
    })
    .py()
}

/// Encrypts a file with age (ASCII armor) for `recipients` (`age1…`) or a passphrase.
#[pyfunction]
#[pyo3(signature = (path, out, *, recipients=Vec::new(), passphrase=None))]
pub fn wtxt_encrypt(
    py: Python<'_>,
    path: PathBuf,
    out: PathBuf,
    recipients: Vec<String>,
    passphrase: Option<String>,
) -> PyResult<()> {
    py.detach(|| {
        let data = std::fs::read(&path)
            .map_err(|e| tessera::Error::from(e).in_file(path.display().to_string()))?;
        let enc = crypt::encrypt(&data, &recipients, passphrase.as_deref())?;
        save(&out, &enc)
    })
    .py()
}

/// Decrypts an age-armored file with `identities` (`AGE-SECRET-KEY-1…` strings) or a
/// passphrase.
#[pyfunction]
#[pyo3(signature = (path, out, *, identities=Vec::new(), passphrase=None))]
pub fn wtxt_decrypt(
    py: Python<'_>,
    path: PathBuf,
    out: PathBuf,
    identities: Vec<String>,
    passphrase: Option<String>,
) -> PyResult<()> {
    py.detach(|| {
        let data = std::fs::read(&path)
            .map_err(|e| tessera::Error::from(e).in_file(path.display().to_string()))?;
        let opts = ReadOptions::default()
            .path(Some(path.clone()))
            .age_identities(identities)
            .age_passphrase(passphrase);
        let plain = crypt::decrypt(&data, &opts)?;
        save(&out, &plain)
    })
    .py()
}
