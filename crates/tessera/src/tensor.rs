//! Tensors: shapes, layouts, descriptions and views.
//!
//! A tensor is a [`TensorInfo`] (name, dtype, shape, layout, attributes, how it is
//! stored) plus its bytes as one or more named [`Part`]s. A dense tensor has one part,
//! `data`; a CSR tensor has `values`, `indices` (u64) and `indptr` (u64); a COO tensor has
//! `values` and `coords` (u64, ndim × nnz, row-major); any other layout keeps the
//! components it was stored with, by name (zTensor's `quantized_4bit`, GGUF's packed
//! quantized blocks, …), and is round-tripped, never dropped.
//!
//! Part bytes are a `Cow`: borrowed straight from the mapped file when the stored bytes
//! already are the canonical form (raw, little-endian, row-major), owned when they had
//! to be decoded (zstd, base64, big-endian).

use std::borrow::Cow;
use std::fmt;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::metadata::Map;

pub mod sparse;

/// Number of elements of `shape` (1 for a scalar), with overflow checked.
pub fn numel(shape: &[u64]) -> Result<u64> {
    shape.iter().try_fold(1u64, |acc, &d| {
        acc.checked_mul(d)
            .ok_or_else(|| Error::malformed(format!("shape {shape:?} overflows u64")))
    })
}

/// Bytes of a dense tensor of `dtype` and `shape`, with overflow checked.
pub fn dense_nbytes(dtype: DType, shape: &[u64]) -> Result<u64> {
    dtype
        .nbytes(numel(shape)?)
        .ok_or_else(|| Error::malformed(format!("shape {shape:?} of {dtype} overflows u64")))
}

/// The bits of a packed sub-byte tensor's last byte past its last element must be zero
/// (zTensor v2's rule for `f4_e2m1`; Tessera's for every packed dtype), so the same values
/// are always the same bytes.
pub fn check_padding(info: &TensorInfo, data: &[u8]) -> Result<()> {
    if !info.dtype.is_packed() {
        return Ok(());
    }
    let used = numel(&info.shape)?.wrapping_mul(info.dtype.bits() as u64) % 8;
    if let (Some(&last), true) = (data.last(), used != 0) {
        if last >> used != 0 {
            return Err(Error::malformed(format!(
                "tensor {:?}: the unused high bits of the last {} byte are not zero",
                info.name, info.dtype
            )));
        }
    }
    Ok(())
}

/// The prefix of [`Layout::undecoded`] layouts.
pub const UNDECODED_PREFIX: &str = "dense:";

/// How a tensor's parts make up its values.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layout {
    /// Row-major, one part `data`.
    Dense,
    /// Compressed sparse row: `values`, `indices` (u64), `indptr` (u64, rows + 1).
    SparseCsr,
    /// Coordinate list: `values`, `coords` (u64, ndim × nnz, row-major).
    SparseCoo,
    /// Any other layout, by name, with whatever components it has.
    Other(String),
}

impl Layout {
    /// The name zTensor uses (`dense`, `sparse_csr`, `sparse_coo`, or the other name).
    pub fn name(&self) -> &str {
        match self {
            Layout::Dense => "dense",
            Layout::SparseCsr => "sparse_csr",
            Layout::SparseCoo => "sparse_coo",
            Layout::Other(s) => s,
        }
    }
    /// Parses a layout name; unknown names become [`Layout::Other`].
    pub fn from_name(s: &str) -> Layout {
        match s {
            "dense" => Layout::Dense,
            "sparse_csr" => Layout::SparseCsr,
            "sparse_coo" => Layout::SparseCoo,
            other => Layout::Other(other.to_string()),
        }
    }
    /// The layout of a dense tensor whose element type Tessera carries but does not
    /// decode (zTensor v2's `f4_e2m1`, two values per byte, or a logical type from a later
    /// spec): `dense:<type>`. Such a tensor has the logical shape, its storage type as
    /// `dtype`, and one part `data` holding the stored bytes, which need not be
    /// `numel × dtype size` of them. Formats that keep other layouts by name carry it as
    /// it is; the others refuse it, naming the type ([`Layout::undecoded_type`]).
    pub fn undecoded(logical_type: &str) -> Layout {
        Layout::Other(format!("{UNDECODED_PREFIX}{logical_type}"))
    }
    /// The element type of a [`Layout::undecoded`] layout.
    pub fn undecoded_type(&self) -> Option<&str> {
        match self {
            Layout::Other(l) => l.strip_prefix(UNDECODED_PREFIX).filter(|t| !t.is_empty()),
            _ => None,
        }
    }
    /// The part roles this layout requires, in write order (empty for `Other`).
    pub fn required_parts(&self) -> &'static [&'static str] {
        match self {
            Layout::Dense => &["data"],
            Layout::SparseCsr => &["values", "indices", "indptr"],
            Layout::SparseCoo => &["values", "coords"],
            Layout::Other(_) => &[],
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a tensor sits in its file (for `inspect`). Empty for in-memory tensors.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Storage {
    /// Absolute byte offset of the first stored byte, when the format has one.
    pub offset: Option<u64>,
    /// Bytes the tensor occupies in the file (all parts, as stored).
    pub stored_bytes: u64,
    /// `raw`, `zstd`, `base64`, `npz-deflate`, …
    pub encoding: String,
    /// Digests or hashes the file stores for it (`crc32c`, `sha256`, `blake3` …).
    pub digests: Vec<String>,
}

/// What a tensor is, without its bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    /// Name, unique within a file.
    pub name: String,
    /// Element type (of `values` for sparse layouts; the storage type for `Other`).
    pub dtype: DType,
    /// Logical shape; empty for a scalar; zero-size dimensions allowed.
    pub shape: Vec<u64>,
    /// Layout.
    pub layout: Layout,
    /// Per-tensor attributes a format carries (`requires_grad`, `quant_id`, `ggml_type`…).
    pub attrs: Map,
    /// Where and how it is stored.
    pub storage: Storage,
}

impl TensorInfo {
    /// A dense tensor description with no attributes.
    pub fn dense(name: impl Into<String>, dtype: DType, shape: Vec<u64>) -> TensorInfo {
        TensorInfo {
            name: name.into(),
            dtype,
            shape,
            layout: Layout::Dense,
            attrs: Map::new(),
            storage: Storage::default(),
        }
    }
    /// Number of logical elements, checked.
    pub fn numel(&self) -> Result<u64> {
        numel(&self.shape)
    }
    /// The element type as users know it: the ggml type (`q8_0`, `q4_k`, …) for a GGUF
    /// packed-block tensor (layout `ggml_<type>`, whose `dtype` is only the `u8` of its
    /// storage), the logical type of an [undecoded](Layout::undecoded) one (`f4_e2m1`),
    /// the dtype's name otherwise. What `inspect`, `diff` and Python show.
    pub fn dtype_label(&self) -> &str {
        if let Some(t) = self.layout.undecoded_type() {
            return t;
        }
        match &self.layout {
            Layout::Other(l) => l.strip_prefix("ggml_").unwrap_or(self.dtype.name()),
            _ => self.dtype.name(),
        }
    }

    /// Bytes of the dense form, checked.
    pub fn dense_nbytes(&self) -> Result<u64> {
        dense_nbytes(self.dtype, &self.shape)
    }
}

/// One named byte range of a tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct Part<'d> {
    /// `data`, `values`, `indices`, `indptr`, `coords`, or a component name.
    pub role: String,
    /// Canonical bytes (little-endian).
    pub bytes: Cow<'d, [u8]>,
}

/// A tensor with its bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorView<'d> {
    /// The description.
    pub info: TensorInfo,
    /// The parts, in the layout's order.
    pub parts: Vec<Part<'d>>,
}

impl<'d> TensorView<'d> {
    /// A dense tensor from its bytes. Checks the length against dtype and shape.
    pub fn dense(info: TensorInfo, data: Cow<'d, [u8]>) -> Result<TensorView<'d>> {
        let want = info.dense_nbytes()?;
        if data.len() as u64 != want {
            return Err(Error::invalid_input(format!(
                "tensor {:?}: {} bytes given, {} {:?} needs {want}",
                info.name,
                data.len(),
                info.dtype,
                info.shape
            )));
        }
        check_padding(&info, &data)?;
        Ok(TensorView {
            info,
            parts: vec![Part {
                role: "data".into(),
                bytes: data,
            }],
        })
    }

    /// The part named `role`.
    pub fn part(&self, role: &str) -> Option<&[u8]> {
        self.parts
            .iter()
            .find(|p| p.role == role)
            .map(|p| p.bytes.as_ref())
    }

    /// The dense bytes, or an `Unsupported` error for other layouts.
    pub fn data(&self) -> Result<&[u8]> {
        if self.info.layout != Layout::Dense {
            return Err(Error::unsupported(format!(
                "tensor {:?} is {}, not dense",
                self.info.name, self.info.layout
            )));
        }
        self.part("data")
            .ok_or_else(|| Error::malformed(format!("tensor {:?} has no data", self.info.name)))
    }

    /// True when every part borrows the file (zero-copy).
    pub fn is_borrowed(&self) -> bool {
        self.parts
            .iter()
            .all(|p| matches!(p.bytes, Cow::Borrowed(_)))
    }

    /// Total bytes over all parts.
    pub fn nbytes(&self) -> u64 {
        self.parts.iter().map(|p| p.bytes.len() as u64).sum()
    }

    /// Detaches from the file: every part owned.
    pub fn into_owned(self) -> TensorView<'static> {
        TensorView {
            info: self.info,
            parts: self
                .parts
                .into_iter()
                .map(|p| Part {
                    role: p.role,
                    bytes: Cow::Owned(p.bytes.into_owned()),
                })
                .collect(),
        }
    }

    /// Checks that the parts agree with the layout, dtype and shape: every required part
    /// present, sizes consistent, sparse indices in range. Returns `Malformed` errors.
    pub fn validate(&self) -> Result<()> {
        let name = &self.info.name;
        for role in self.info.layout.required_parts() {
            if self.part(role).is_none() {
                return Err(Error::malformed(format!(
                    "tensor {name:?} ({}) lacks its {role:?} part",
                    self.info.layout
                )));
            }
        }
        match &self.info.layout {
            Layout::Dense => {
                let want = self.info.dense_nbytes()?;
                let got = self.data()?.len() as u64;
                if got != want {
                    return Err(Error::malformed(format!(
                        "tensor {name:?}: {got} bytes, {} {:?} needs {want}",
                        self.info.dtype, self.info.shape
                    )));
                }
            }
            Layout::SparseCsr => crate::tensor::sparse::check_csr(self)?,
            Layout::SparseCoo => crate::tensor::sparse::check_coo(self)?,
            Layout::Other(l) => {
                let one_data = self.parts.len() == 1 && self.part("data").is_some();
                if self.info.layout.undecoded_type().is_some() && !one_data {
                    return Err(Error::malformed(format!(
                        "tensor {name:?} ({l}) has one part, \"data\", not {:?}",
                        self.parts.iter().map(|p| &p.role).collect::<Vec<_>>()
                    )));
                }
            }
        }
        Ok(())
    }
}

/// An opaque chunk: bytes with a type tag (FOLD `TSAV`, AERO `MJSN`, unknown fourccs…).
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkInfo {
    /// Name, unique within a file.
    pub name: String,
    /// The format's type tag (`TSAV`, `JSON`, `MJSN`, …).
    pub kind: String,
    /// Decoded length when known.
    pub len: Option<u64>,
    /// How it is stored.
    pub storage: Storage,
    /// True when the chunk is the storage of tensors (AERO WTSH, FOLD NPZ0/STEN), so it
    /// is not carried as an opaque chunk by conversions.
    pub holds_tensors: bool,
    /// The chunk stays opaque but also holds a copy of this many tensors the container
    /// lists as its own (`<chunk>/<name>`: FOLD's `TSAV`). A target whose
    /// [`crate::write::Capabilities::chunk_copies`] is false gets those tensors once, as
    /// tensors, and the chunk is dropped with a note.
    pub copies: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numel_handles_scalars_zero_dims_and_overflow() {
        assert_eq!(numel(&[]).unwrap(), 1);
        assert_eq!(numel(&[3, 0, 5]).unwrap(), 0);
        assert_eq!(numel(&[2, 3]).unwrap(), 6);
        assert!(numel(&[u64::MAX, 2]).is_err());
        assert!(dense_nbytes(DType::F64, &[u64::MAX / 4]).is_err());
    }

    #[test]
    fn dense_view_checks_length() {
        let info = TensorInfo::dense("w", DType::F32, vec![2]);
        assert!(TensorView::dense(info.clone(), Cow::Owned(vec![0; 8])).is_ok());
        assert!(TensorView::dense(info, Cow::Owned(vec![0; 7])).is_err());
    }
}
