//! [`NpyFile`]: one `.npy` array, zero-copy when stored little-endian in C order; and the
//! array decoding shared with `.npz` members (byte swapping, Fortran → C order).

use std::borrow::Cow;

use super::header::{self, ByteOrder, NpyHeader};
use crate::any::ReadOptions;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::limits::Limits;
use crate::metadata::Metadata;
use crate::model::{Container, TensorSource};
use crate::source::SourceRef;
use crate::tensor::{Storage, TensorInfo, TensorView};
use crate::verify::{Status, VerifyOptions, VerifyReport};

/// The name a `.npy` file's one tensor gets: the file holds no name, and using the file
/// stem would make the same array differ by name between two files (`diff a.npy b.npy`).
pub const NPY_TENSOR_NAME: &str = "array";

/// An array's header plus where its data lies, before decoding.
#[derive(Debug, Clone)]
pub struct ArrayLayout {
    /// The parsed header.
    pub header: NpyHeader,
    /// Data bytes as stored.
    pub nbytes: u64,
    /// Bytes after the data (numpy ignores them; we warn).
    pub trailing: u64,
}

/// Parses a `.npy` image's header and checks that the data it announces is there.
pub fn layout(data: &[u8], limits: &Limits) -> Result<ArrayLayout> {
    layout_of_header(data, data.len() as u64, limits)
}

/// The first bytes of a `.npy` image in `src`: its preamble and header dict, no more
/// (the header length is read from the preamble and checked against `limits` first).
pub fn read_head<'d>(src: SourceRef<'d>, limits: &Limits) -> Result<Cow<'d, [u8]>> {
    let pre = src.read_up_to(0, 12)?;
    let hlen = match (pre.get(6), pre.len()) {
        (Some(1), 12) => u16::from_le_bytes([pre[8], pre[9]]) as u64 + 10,
        (Some(2 | 3), 12) => u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]) as u64 + 12,
        // Too short or an unknown version: the header parser says which.
        _ => return Ok(pre),
    };
    limits.check_index(hlen).map_err(|e| e.at_offset(8))?;
    src.read_up_to(0, hlen)
}

/// Like [`layout`], from the first bytes of an image (at least its header) and the
/// image's total size.
pub fn layout_of_header(head: &[u8], total: u64, limits: &Limits) -> Result<ArrayLayout> {
    let h = header::parse(head, limits)?;
    let nbytes = crate::tensor::dense_nbytes(h.dtype, &h.shape)?;
    limits.check_decoded(nbytes)?;
    let avail = total.saturating_sub(h.data_offset as u64);
    if avail < nbytes {
        return Err(Error::malformed(format!(
            "truncated: {} {:?} of {} needs {nbytes} data bytes, {avail} present",
            h.descr, h.shape, h.dtype
        ))
        .at_offset(h.data_offset as u64));
    }
    Ok(ArrayLayout {
        trailing: avail - nbytes,
        header: h,
        nbytes,
    })
}

/// True when the stored bytes already are canonical (little-endian, C order).
pub fn is_canonical(h: &NpyHeader) -> bool {
    let swap = h.order == ByteOrder::Big && h.dtype.size() > 1;
    let transpose = h.fortran_order && h.shape.iter().filter(|&&d| d > 1).count() > 1;
    !swap && !transpose
}

/// Canonical bytes from stored ones: borrowed when already canonical, otherwise swapped
/// to little-endian and/or transposed from Fortran to C order.
pub fn decode<'d>(h: &NpyHeader, stored: Cow<'d, [u8]>) -> Cow<'d, [u8]> {
    if is_canonical(h) {
        return stored;
    }
    let mut bytes = stored.into_owned();
    if h.order == ByteOrder::Big && h.dtype.size() > 1 {
        // Complex numbers swap each of their two components.
        let unit = match h.dtype {
            DType::C64 | DType::C128 => h.dtype.size() / 2,
            d => d.size(),
        };
        for el in bytes.chunks_exact_mut(unit) {
            el.reverse();
        }
    }
    if h.fortran_order {
        bytes = fortran_to_c(&bytes, &h.shape, h.dtype.size());
    }
    Cow::Owned(bytes)
}

/// Reorders a column-major array into row-major order.
fn fortran_to_c(src: &[u8], shape: &[u64], size: usize) -> Vec<u8> {
    // With no elements the other dimensions may be huge: nothing to reorder. Otherwise
    // every partial product of the shape is at most the element count, which fits.
    if src.is_empty() || shape.contains(&0) {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(src.len());
    let rank = shape.len();
    // Column-major strides in elements; every product fits (the byte length fits).
    let mut fstride = vec![1usize; rank];
    for i in 1..rank {
        fstride[i] = fstride[i - 1] * shape[i - 1] as usize;
    }
    let total: usize = shape.iter().map(|&d| d as usize).product();
    let mut idx = vec![0u64; rank];
    for _ in 0..total {
        let off: usize = idx
            .iter()
            .zip(&fstride)
            .map(|(&i, &s)| i as usize * s)
            .sum();
        out.extend_from_slice(&src[off * size..(off + 1) * size]);
        // Odometer, last axis fastest (C order).
        for ax in (0..rank).rev() {
            idx[ax] += 1;
            if idx[ax] < shape[ax] {
                break;
            }
            idx[ax] = 0;
        }
    }
    out
}

/// A storage description for an array.
pub fn storage(l: &ArrayLayout, offset: Option<u64>, stored: u64, container: &str) -> Storage {
    let mut enc = container.to_string();
    if l.header.order == ByteOrder::Big && l.header.dtype.size() > 1 {
        enc.push_str(", big-endian");
    }
    if l.header.fortran_order {
        enc.push_str(", fortran order");
    }
    Storage {
        offset,
        stored_bytes: stored,
        encoding: enc,
        digests: Vec::new(),
    }
}

/// An opened `.npy` file: one tensor named [`NPY_TENSOR_NAME`].
#[derive(Debug)]
pub struct NpyFile<'data> {
    src: SourceRef<'data>,
    layout: ArrayLayout,
    infos: Vec<TensorInfo>,
    metadata: Metadata,
    warnings: Vec<String>,
}

impl<'data> NpyFile<'data> {
    /// Parses and validates a `.npy` file: reads its header only; the array is read
    /// when asked.
    pub fn parse(src: impl Into<SourceRef<'data>>, opts: &ReadOptions) -> Result<NpyFile<'data>> {
        let src = src.into();
        let head = read_head(src, &opts.limits)?;
        let layout = layout_of_header(&head, src.len(), &opts.limits)?;
        let h = &layout.header;
        let mut info = TensorInfo::dense(NPY_TENSOR_NAME, h.dtype, h.shape.clone());
        info.storage = storage(&layout, Some(h.data_offset as u64), layout.nbytes, "raw");
        let mut warnings = Vec::new();
        if let Some(a) = &h.ambiguity {
            warnings.push(a.clone());
        }
        if layout.trailing > 0 {
            warnings.push(format!(
                "{} bytes after the array data are ignored",
                layout.trailing
            ));
        }
        Ok(NpyFile {
            src,
            infos: vec![info],
            layout,
            metadata: Metadata::new(),
            warnings,
        })
    }

    /// The parsed header.
    pub fn header(&self) -> &NpyHeader {
        &self.layout.header
    }
}

impl TensorSource for NpyFile<'_> {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        if name != NPY_TENSOR_NAME {
            return Err(Error::not_found(format!(
                "no tensor named {name:?} (a .npy file holds one, {NPY_TENSOR_NAME:?})"
            )));
        }
        let h = &self.layout.header;
        let stored = self.src.read_at(h.data_offset as u64, self.layout.nbytes)?;
        TensorView::dense(self.infos[0].clone(), decode(h, stored))
    }
    fn source_format(&self) -> Option<Format> {
        Some(Format::Npy)
    }
    fn raw_extent(&self, name: &str) -> Result<Option<crate::slice::RawExtent<'_>>> {
        if name != NPY_TENSOR_NAME {
            return Err(Error::no_tensor(name));
        }
        let h = &self.layout.header;
        // Fortran order is transposed when read: cut from the whole array.
        if h.fortran_order && h.shape.iter().filter(|&&d| d > 1).count() > 1 {
            return Ok(None);
        }
        Ok(Some(crate::slice::RawExtent {
            src: self.src,
            offset: h.data_offset as u64,
            big_endian: h.order == ByteOrder::Big && h.dtype.size() > 1,
            whole_digests: Vec::new(),
            own_check: None,
        }))
    }
}

impl Container for NpyFile<'_> {
    fn format(&self) -> Format {
        Format::Npy
    }
    fn version(&self) -> String {
        let (a, b) = self.layout.header.version;
        format!("{a}.{b}")
    }
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport {
        // No checksum: the array is done as soon as it is reached.
        opts.advance_tensors(&self.infos);
        let mut r = VerifyReport {
            warnings: self.warnings.clone(),
            ..Default::default()
        };
        r.ok("file", "structure");
        r.push(
            "file",
            "checksum",
            Status::NotChecked,
            Some(".npy stores no checksums; the header and data length were validated".into()),
        );
        r
    }
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fortran_transpose() {
        // 2x3 column-major: columns (0,3) (1,4) (2,5) stored as 0 3 1 4 2 5.
        let src = [0u8, 3, 1, 4, 2, 5];
        assert_eq!(fortran_to_c(&src, &[2, 3], 1), [0, 1, 2, 3, 4, 5]);
        assert_eq!(fortran_to_c(&[], &[0, 3], 4), Vec::<u8>::new());
        assert_eq!(fortran_to_c(&[7, 8], &[], 2), [7, 8]);
        // Hostile: zero elements, huge other dimensions (partial products overflow).
        let big = 1u64 << 40;
        assert_eq!(fortran_to_c(&[], &[big, big, 0], 4), Vec::<u8>::new());
    }
}
