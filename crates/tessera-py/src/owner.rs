//! Keeping a file's bytes alive for as long as Python holds arrays into them.
//!
//! This is the one module of the extension with `unsafe` (reading a numpy array's bytes
//! in place), and the one place where raw pointers are handed to numpy. The pieces:
//!
//! - [`Opened`] (the library's): a file's bytes ([`tessera::FileData`], usually a
//!   read-only mmap) and the [`Container`] parsed from them, or a model set's shards,
//!   each such a pair. It owns every byte its container borrows.
//! - [`Shared`]: an `Opened` (`Send + Sync`, no lock), shared (`Arc`) by the Python `File` object
//!   and by every [`Buffer`] that points into the mapping.
//! - [`Buffer`]: a Python object exposing numpy's `__array_interface__` over either a
//!   range of a mapped file (read-only, zero-copy; it holds the `Arc<Shared>` so the
//!   map outlives every array), a decoded buffer it owns (writable), or a copy of a
//!   mapped range it owns, alone or in a chunk packed with other copies (writable; what
//!   safetensors' API returns). `np.asarray(buf)`
//!   makes the array; numpy keeps `buf` as the array's `base`, so the bytes live exactly
//!   as long as the last array or view of them.
//!
//! Writable arrays only ever point into memory Rust owns mutably and no longer touches
//! (a `Vec<u8>` or an [`OwnedBytes`], pointer taken through `&mut`): the read-only map
//! is never exposed writable, and nothing Rust holds as `&[u8]` is written through.
//!
//! `__array_interface__` rather than the buffer protocol: the extension is built once for
//! every CPython ≥ 3.9 (abi3), and the buffer protocol is only in the limited API from 3.11.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use tessera::source::OwnedBytes;
use tessera::{Container, Opened};

/// An opened file shared between the `File` object and the arrays borrowing its bytes.
///
/// No lock: the library's `Container` is `Send + Sync`, so any number of threads may
/// read through it at once with the GIL released.
pub struct Shared {
    opened: Opened,
    /// Address and length of each file's bytes (stable: an mmap, or a heap buffer that
    /// is never resized), to tell zero-copy borrows from decoded buffers.
    regions: Vec<(usize, usize)>,
}

impl Shared {
    /// Wraps an opened file.
    pub fn new(opened: Opened) -> Shared {
        let regions = opened
            .file_regions()
            .iter()
            .map(|d| (d.as_ptr() as usize, d.len()))
            .collect();
        Shared { opened, regions }
    }

    /// Runs `f` on the container. Call it with the GIL released (`py.detach`) when `f`
    /// decodes, hashes or reads: other threads may run their own reads meanwhile.
    pub fn with<R>(&self, f: impl FnOnce(&dyn Container) -> R) -> R {
        f(self.opened.container())
    }

    /// True for a model set (several files).
    pub fn is_set(&self) -> bool {
        self.opened.as_set().is_some()
    }

    /// The address of `bytes` when they are a sub-slice of one of the files' bytes.
    pub fn mapped_at(&self, bytes: &[u8]) -> Option<usize> {
        let p = bytes.as_ptr() as usize;
        self.regions.iter().find_map(|&(base, len)| {
            let off = p.checked_sub(base)?;
            (off.checked_add(bytes.len())? <= len).then_some(p)
        })
    }
}

/// Where a part's bytes are.
pub enum PartBytes {
    /// A range of a file's bytes (zero-copy), by address.
    Mapped { ptr: usize, len: usize },
    /// Decoded bytes.
    Owned(Vec<u8>),
    /// A copy of borrowed bytes (an anonymous huge-page map when large).
    Copied(OwnedBytes),
    /// A copy of borrowed bytes at `ptr` inside a chunk shared with other copies (see
    /// [`copy_parts`]); `ptr` was taken through `&mut` before the chunk was shared.
    Packed {
        chunk: Arc<OwnedBytes>,
        ptr: usize,
        len: usize,
    },
}

/// Target size of the shared chunks [`copy_parts`] fills (a multiple of 2 MiB).
pub const PACK_CHUNK: usize = 16 << 20;

/// Copies borrowed parts into buffers the caller will own, in one parallel pass
/// ([`crate::fill`]: positional reads through `reader` where a part is in its file).
/// Parts of 2 MiB and more each get their own anonymous map advised for huge pages.
/// Smaller ones are packed back to back (64-byte aligned), in order, into shared chunks
/// of about [`PACK_CHUNK`] bytes, each such a map: a tensor too small for a huge page of
/// its own still gets its copy without 4 KiB page faults. A chunk lives as long as any
/// array in it. A group of small parts under 2 MiB in all gets plain separate copies.
pub fn copy_parts(
    parts: &[&[u8]],
    reader: Option<&crate::fill::Reader>,
) -> tessera::Result<Vec<PartBytes>> {
    const ALIGN: usize = 64;
    let align = |n: usize, to: usize| n.div_ceil(to).saturating_mul(to);
    let huge = OwnedBytes::HUGE_THRESHOLD;
    // Destinations: (buffer, [(part index, offset)], packed), one part per buffer but
    // in packed chunks.
    type Dest = (OwnedBytes, Vec<(usize, usize)>, bool);
    let mut buffers: Vec<Dest> = Vec::new();
    let small: Vec<usize> = (0..parts.len())
        .filter(|&i| parts[i].len() < huge)
        .collect();
    for (i, p) in parts.iter().enumerate() {
        if p.len() >= huge {
            buffers.push((OwnedBytes::zeroed(p.len())?, vec![(i, 0)], false));
        }
    }
    let mut start = 0;
    while start < small.len() {
        // The small parts [start, end) and their offsets in one chunk. Each is under
        // 2 MiB and a group stops at PACK_CHUNK, so nothing here can overflow.
        let (mut end, mut used, mut members) = (start, 0usize, Vec::new());
        while end < small.len() {
            let off = align(used, ALIGN);
            let next = off.saturating_add(parts[small[end]].len());
            if next > PACK_CHUNK && end > start {
                break;
            }
            members.push((small[end], off));
            used = next;
            end += 1;
        }
        if used < huge {
            for (i, _) in members {
                buffers.push((OwnedBytes::zeroed(parts[i].len())?, vec![(i, 0)], false));
            }
        } else {
            buffers.push((OwnedBytes::zeroed(align(used, huge))?, members, true));
        }
        start = end;
    }
    // Fill every destination range, then hand out pointers taken through `&mut`.
    let mut ptrs: Vec<Option<usize>> = vec![None; parts.len()];
    {
        let mut jobs = Vec::with_capacity(parts.len());
        for (buf, members, _) in buffers.iter_mut() {
            let mut rest: &mut [u8] = buf;
            let mut at = 0;
            for &(i, off) in members.iter() {
                let (_, tail) = std::mem::take(&mut rest).split_at_mut(off - at);
                let (dst, tail) = tail.split_at_mut(parts[i].len());
                // Through `&mut`: numpy will write here; Rust never reads it again.
                ptrs[i] = Some(dst.as_mut_ptr() as usize);
                jobs.push(crate::fill::Job { src: parts[i], dst });
                rest = tail;
                at = off + parts[i].len();
            }
        }
        crate::fill::fill(jobs, reader)?;
    }
    let mut out: Vec<Option<PartBytes>> = (0..parts.len()).map(|_| None).collect();
    for (buf, members, packed) in buffers {
        if packed {
            let chunk = Arc::new(buf);
            for (i, _) in members {
                out[i] = ptrs[i].map(|ptr| PartBytes::Packed {
                    chunk: chunk.clone(),
                    ptr,
                    len: parts[i].len(),
                });
            }
        } else if let Some(&(i, _)) = members.first() {
            out[i] = Some(PartBytes::Copied(buf));
        }
    }
    out.into_iter()
        .map(|p| p.ok_or_else(|| tessera::Error::invalid_input("internal: a copied part lost")))
        .collect()
}

impl PartBytes {
    /// Classifies a part: a borrow of the file becomes a range (or, with `copy`, a
    /// fresh copy of it), any other borrow a copy; owned (decoded) bytes are moved, never
    /// copied. Copies go through [`OwnedBytes::copy_from`] (huge pages when large: a
    /// fresh buffer's page faults dominate a plain copy). Call it with the GIL released.
    pub fn from_cow(
        shared: &Shared,
        bytes: std::borrow::Cow<'_, [u8]>,
        copy: bool,
    ) -> tessera::Result<PartBytes> {
        Ok(match bytes {
            std::borrow::Cow::Borrowed(b) => match shared.mapped_at(b) {
                Some(ptr) if !copy => PartBytes::Mapped { ptr, len: b.len() },
                _ => PartBytes::Copied(OwnedBytes::copy_from(b)?),
            },
            std::borrow::Cow::Owned(v) => PartBytes::Owned(v),
        })
    }

    /// Makes the Python buffer object.
    pub fn into_buffer(self, shared: &Arc<Shared>) -> Buffer {
        match self {
            PartBytes::Mapped { ptr, len } => Buffer {
                ptr,
                len,
                writable: false,
                _keep: Keep::File(shared.clone()),
            },
            PartBytes::Owned(mut v) => Buffer {
                ptr: v.as_mut_ptr() as usize,
                len: v.len(),
                writable: true,
                _keep: Keep::Owned(v),
            },
            PartBytes::Copied(mut o) => {
                // Through `&mut`: numpy will write here, and Rust never reads it again.
                let bytes: &mut [u8] = &mut o;
                Buffer {
                    ptr: bytes.as_mut_ptr() as usize,
                    len: bytes.len(),
                    writable: true,
                    _keep: Keep::Copied(o),
                }
            }
            PartBytes::Packed { chunk, ptr, len } => Buffer {
                ptr,
                len,
                writable: true,
                _keep: Keep::Packed(chunk),
            },
        }
    }
}

enum Keep {
    // All are held only to keep the memory `ptr` points into alive. Moving a `Vec` or an
    // `OwnedBytes` (a map) does not move the bytes it owns.
    File(#[allow(dead_code)] Arc<Shared>),
    Owned(#[allow(dead_code)] Vec<u8>),
    Copied(#[allow(dead_code)] OwnedBytes),
    // A chunk of copies: each `Buffer` into it has its own disjoint range.
    Packed(#[allow(dead_code)] Arc<OwnedBytes>),
}

/// Bytes numpy can wrap without a copy (`np.asarray(buffer)` gives a 1-D `uint8` array).
#[pyclass(frozen, module = "tessera._tessera")]
pub struct Buffer {
    // The pointer is valid for `len` bytes for as long as `_keep` lives: `_keep` holds
    // either the file's mapping (never unmapped while an `Arc<Shared>` exists, never
    // written) or the `Vec` / `OwnedBytes` the pointer was taken from through `&mut`
    // (never touched again by Rust but to drop it, so numpy may write into it when
    // `writable`; the buffers sharing a packed chunk have disjoint ranges of it).
    ptr: usize,
    len: usize,
    writable: bool,
    _keep: Keep,
}

#[pymethods]
impl Buffer {
    /// numpy's array interface (version 3): a 1-D `uint8` array over the bytes.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("version", 3)?;
        d.set_item("shape", PyTuple::new(py, [self.len])?)?;
        d.set_item("typestr", "|u1")?;
        d.set_item("data", (self.ptr, !self.writable))?;
        Ok(d)
    }

    /// Number of bytes.
    fn __len__(&self) -> usize {
        self.len
    }

    /// True when the bytes are a range of the mapped file (zero-copy, read-only).
    #[getter]
    fn borrowed(&self) -> bool {
        matches!(self._keep, Keep::File(_))
    }

    /// True when the bytes are a copy held in an anonymous map advised for transparent
    /// huge pages (copies of 2 MiB and more, and copies packed together).
    #[getter]
    fn huge_pages(&self) -> bool {
        match &self._keep {
            Keep::Copied(o) => o.is_huge(),
            Keep::Packed(c) => c.is_huge(),
            _ => false,
        }
    }

    /// True when the bytes share a chunk with other tensors' copies (see `packed` in
    /// `File.tensors`).
    #[getter]
    fn packed(&self) -> bool {
        matches!(self._keep, Keep::Packed(_))
    }

    fn __repr__(&self) -> String {
        format!(
            "<tessera buffer of {} bytes, {}>",
            self.len,
            if self.borrowed() {
                "borrowed from the mapped file"
            } else {
                "owned"
            }
        )
    }
}

/// The bytes of a Python object handed to `save`: a `bytes` object, or a C-contiguous
/// 1-D `uint8` numpy array (a real `numpy.ndarray`, whose `__array_interface__` numpy
/// itself fills in), which is read in place, without a copy.
///
/// The slice lives as long as the borrow of `obj`, which keeps the array (and so its
/// memory) alive: numpy refuses to resize an array that others reference. Another Python
/// thread that writes into the array while `save` runs with the GIL released makes the
/// output hold a mix of old and new values, as with any zero-copy writer (numpy's own
/// `tofile`, safetensors); that is the caller's race, documented in `tessera.save`.
pub fn object_bytes<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<&'a [u8]> {
    use pyo3::exceptions::PyTypeError;
    use pyo3::types::PyBytes;
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(b.as_bytes());
    }
    let bad =
        || PyTypeError::new_err("tensor data must be bytes or a C-contiguous 1-D uint8 array");
    // Only numpy's own arrays: an arbitrary object could describe any address.
    let ndarray = obj.py().import("numpy")?.getattr("ndarray")?;
    if !obj.is_instance(&ndarray)? {
        return Err(bad());
    }
    let ai = obj.getattr("__array_interface__").map_err(|_| bad())?;
    let ai = ai.cast::<PyDict>().map_err(|_| bad())?;
    let typestr: String = ai.get_item("typestr")?.ok_or_else(bad)?.extract()?;
    let shape: Vec<usize> = ai.get_item("shape")?.ok_or_else(bad)?.extract()?;
    let strides_ok = match ai.get_item("strides")? {
        None => true,
        Some(s) if s.is_none() => true,
        Some(s) => s.extract::<Vec<isize>>().map(|v| v == [1]).unwrap_or(false),
    };
    let has_offset = ai.get_item("offset")?.is_some_and(|o| !o.is_none());
    if typestr != "|u1" || shape.len() != 1 || !strides_ok || has_offset {
        return Err(bad());
    }
    let (ptr, _readonly): (usize, bool) = ai.get_item("data")?.ok_or_else(bad)?.extract()?;
    let len = shape[0];
    if len == 0 {
        return Ok(&[]);
    }
    if ptr == 0 {
        return Err(bad());
    }
    #[allow(unsafe_code)]
    // SAFETY: numpy's array interface promises `len` contiguous bytes (1-D, itemsize 1,
    // unit stride, checked above) at `ptr`, valid while the array lives; `obj` keeps it
    // alive for the returned lifetime and numpy will not resize or free a referenced
    // array. Rust only reads the bytes. Concurrent writes from another Python thread are
    // the caller's race (see above): they can change the values written, never the
    // memory's validity.
    let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
    Ok(bytes)
}
