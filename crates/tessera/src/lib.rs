//! # Tessera
//!
//! Read, write, verify, convert and diff tensor containers: WTXT/Chunks v1.1, zTensor
//! v1.0, FOLD, AERO v0.1, GPTRS v2, safetensors, NumPy and GGUF — behind one model of
//! tensors, so any of them converts into any other. Tessera never trusts a file: every
//! length and offset is checked, decompression is bounded, and `verify` runs every
//! integrity layer a format has.
//!
//! Two ways in: [`open_path`] takes a path or a URL (a file, a model set by its index,
//! any shard or its directory; `s3://` and `http(s)://` read by range), [`open`] bytes
//! already in hand; both take [`ReadOptions`] (checks, limits, keys, `load` for mapping
//! or reading local files, `remote` for endpoints and tokens).
//!
//! ```
//! use tessera::{ReadOptions, TensorView};
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("model.safetensors");
//! # let mut m = tessera::Model::new();
//! # m.push(TensorView::from_slice("w", vec![2], &[1.0f32, 2.0])?)?;
//! # tessera::convert::write_file(tessera::Format::Safetensors, &m, &path, &Default::default())?;
//! // A file (format detected by content), a model set (its index, a shard or its
//! // directory) or a URL; files are mapped read-only.
//! let opened = tessera::open_path(&path, &ReadOptions::default())?;
//! let file = opened.container();
//! for info in file.tensor_infos() {
//!     let t = file.tensor(&info.name)?; // zero-copy when stored raw
//!     println!("{} {} {:?} {} bytes", info.name, info.dtype, info.shape, t.nbytes());
//! }
//! // Bytes already in memory (or a `FileData` map) open with `tessera::open`.
//! let bytes = std::fs::read(&path)?;
//! let file = tessera::open(&bytes[..], &ReadOptions::default())?;
//! assert_eq!(file.tensor("w")?.to_vec::<f32>()?, [1.0, 2.0]);
//! # Ok::<(), tessera::Error>(())
//! ```
//!
//! More in `crates/tessera/examples/` (`cargo run -p tessera --example read_typed`,
//! `convert`, `diff_identity`, `remote`).
//!
//! Reads are checked: with [`ReadOptions::verify`] (on by default) `tensor()` and
//! `chunk()` compare every digest the format stores for those bytes (zTensor
//! crc32c/sha256, FOLD CRC-32C/SHA-256 with ECC repair, AERO BLAKE3 / `hash_b3` / PHSH
//! pages, WTXT chunk digests, npz CRC-32) before handing them out, once per tensor or
//! chunk, and stay zero-copy where the bytes are stored raw.
//! `ReadOptions::default().verify(false)` reads unchecked; `Container::verify` audits
//! every layer at once.
#![warn(missing_docs)]
// No unwrap/expect on anything that can come from a file; tests may unwrap.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod any;
pub mod cast;
pub mod convert;
pub mod diff;
pub mod dtype;
pub mod element;
pub mod error;
pub mod format;
pub mod formats;
#[doc(hidden)]
pub mod fuzzing;
pub mod identity;
#[cfg(test)]
mod layers;
pub mod limits;
pub mod metadata;
pub mod model;
pub mod options;
pub mod pages;
pub mod quant;
pub mod refusal;
pub mod remote;
pub mod set;
mod setters;
#[cfg(feature = "signing")]
pub mod signing;
pub mod slice;
pub mod source;
pub use tensor::sparse;
pub mod tensor;
/// Internals the CLI, the benchmarks, the Python crate and the fuzz targets share
/// (atomic writes, Python-compatible JSON, key files): not a stable API.
#[doc(hidden)]
pub mod util;
pub mod values;
pub mod verify;
pub mod write;

pub use any::{Load, ReadOptions};
pub use convert::ConvertOptions;
pub use dtype::DType;
pub use element::Element;
pub use error::{Error, ErrorKind, Result};
pub use format::Format;
pub use formats::open;
pub use limits::Limits;
pub use metadata::{Map, Metadata, Value};
pub use model::{Container, Model, TensorSource};
pub use options::WriteOptions;
pub use refusal::{Hint, Refusal};
pub use remote::{Location, RemoteOptions};
pub use set::{open_path, ModelSet, Opened};
pub use source::FileData;
pub use tensor::{ChunkInfo, Layout, Part, Storage, StoredChunk, TensorInfo, TensorView};
pub use verify::{
    layer_kind, Check, LayerKind, LayerSummary, ProgressHook, Status, VerifyOptions, VerifyReport,
};

/// Converts the file, model set or URL at `src` (any readable format, detected by
/// content; opened as [`open_path`] opens it) into the format `dst`'s extension names,
/// atomically, with default writer options; a loss (cast, densify, drop metadata) only
/// where `opts` allows it. For writer options or an explicit format, open the source
/// and use [`convert::convert_file`].
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// # std::env::set_current_dir(dir.path())?;
/// # let mut m = tessera::Model::new();
/// # m.push(tessera::TensorView::from_slice("w", vec![2], &[1.0f64, 2.0])?)?;
/// # tessera::convert::write_file(tessera::Format::Safetensors, &m, "model.safetensors".as_ref(), &Default::default())?;
/// let report =
///     tessera::convert_path("model.safetensors", "model.zt", &tessera::ConvertOptions::default())?;
/// assert!(report.notes.is_empty()); // nothing lost
/// // The same tensors in another container: the same content identity.
/// let id = |p: &str| tessera::identity::model_id(tessera::open_path(p, &tessera::ReadOptions::default())?.container(), false);
/// assert_eq!(id("model.safetensors")?, id("model.zt")?);
/// # Ok::<(), tessera::Error>(())
/// ```
pub fn convert_path(
    src: impl AsRef<std::path::Path>,
    dst: impl AsRef<std::path::Path>,
    opts: &ConvertOptions,
) -> Result<convert::WriteReport> {
    let dst = dst.as_ref();
    let format = Format::from_path(dst).ok_or_else(|| {
        Error::invalid_input(format!(
            "{}: no format is named by this extension",
            dst.display()
        ))
    })?;
    let opened = open_path(src.as_ref(), &ReadOptions::default())?;
    convert::convert_file(
        opened.container(),
        format,
        dst,
        *opts,
        &WriteOptions::default(),
    )
}
