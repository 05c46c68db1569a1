//! # Tessera
//!
//! Read, write, verify, convert and diff tensor containers: WTXT/Chunks v1.1, zTensor
//! v1.0, FOLD, AERO v0.1, GPTRS v2, safetensors, NumPy and GGUF — behind one model of
//! tensors, so any of them converts into any other. Tessera never trusts a file: every
//! length and offset is checked, decompression is bounded, and `verify` runs every
//! integrity layer a format has.
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
//! chunk, and stay zero-copy where the bytes are stored raw. Set `verify: false` for
//! unchecked reads; `Container::verify` audits every layer at once.
#![warn(missing_docs)]
// No unwrap/expect on anything that can come from a file; tests may unwrap.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod any;
pub mod cast;
pub mod convert;
pub mod diff;
pub mod dtype;
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
pub mod remote;
pub mod set;
pub mod signing;
pub mod source;
pub mod sparse;
pub mod tensor;
pub mod util;
pub mod values;
pub mod verify;

pub use any::{open, ReadOptions};
pub use convert::{ConvertOptions, WriteOptions};
pub use dtype::DType;
pub use error::{Error, ErrorKind, Result};
pub use format::Format;
pub use limits::Limits;
pub use metadata::{Map, Metadata, Value};
pub use model::{Container, Model, TensorSource};
pub use remote::Location;
pub use set::{open_location, open_path, ModelSet, Opened};
pub use source::FileData;
pub use tensor::{ChunkInfo, Layout, Part, Storage, TensorInfo, TensorView};
pub use verify::{layer_kind, Check, LayerKind, LayerSummary, Status, VerifyOptions, VerifyReport};
