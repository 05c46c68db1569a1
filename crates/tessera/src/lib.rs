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
//! ```no_run
//! use tessera::ReadOptions;
//! let opened = tessera::open_path("model.safetensors", &ReadOptions::default())?;
//! let w = opened.container().tensor("w")?.to_vec::<f32>()?;
//! # Ok::<(), tessera::Error>(())
//! ```
//!
//! ```no_run
//! use tessera::{FileData, ReadOptions};
//! let data = FileData::open("model.zt".as_ref())?;
//! let file = tessera::open(&data, &ReadOptions::default())?;
//! for info in file.tensor_infos() {
//!     let t = file.tensor(&info.name)?; // zero-copy when stored raw
//!     println!("{} {} {:?} {} bytes", info.name, info.dtype, info.shape, t.nbytes());
//! }
//! # Ok::<(), tessera::Error>(())
//! ```
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
pub mod limits;
pub mod metadata;
pub mod model;
pub mod options;
pub mod refusal;
pub mod remote;
pub mod set;
mod setters;
#[cfg(feature = "signing")]
pub mod signing;
pub mod source;
pub mod sparse;
pub mod tensor;
/// Internals the CLI, the benchmarks, the Python crate and the fuzz targets share
/// (atomic writes, Python-compatible JSON, key files): not a stable API.
#[doc(hidden)]
pub mod util;
pub mod values;
pub mod verify;

pub use any::{open, Load, ReadOptions};
pub use convert::{ConvertOptions, WriteOptions};
pub use dtype::DType;
pub use element::Element;
pub use error::{Error, ErrorKind, Result};
pub use format::Format;
pub use limits::Limits;
pub use metadata::{Map, Metadata, Value};
pub use model::{Container, Model, TensorSource};
pub use refusal::{Hint, Refusal};
pub use remote::{Location, RemoteOptions};
pub use set::{open_path, ModelSet, Opened};
pub use source::FileData;
pub use tensor::{ChunkInfo, Layout, Part, Storage, TensorInfo, TensorView};
pub use verify::{
    layer_kind, Check, LayerKind, LayerSummary, ProgressHook, Status, VerifyOptions, VerifyReport,
};

/// Converts the file, model set or URL at `src` (any readable format, detected by
/// content; opened as [`open_path`] opens it) into the format `dst`'s extension names,
/// atomically, with default writer options; a loss (cast, densify, drop metadata) only
/// where `opts` allows it. For writer options or an explicit format, open the source
/// and use [`convert::convert_file`].
///
/// ```no_run
/// tessera::convert_path("model.safetensors", "model.zt", &tessera::ConvertOptions::default())?;
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
