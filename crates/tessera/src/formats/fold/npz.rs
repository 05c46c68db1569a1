//! `NPZ0` chunk payloads: `numpy.savez_compressed` zips, read as tensors
//! `<chunk>/<array>` with the crate's npy module ([`NpzFile`]: its zip checks, `.npy`
//! header parser, byte swapping and Fortran → C reordering). FOLD's rule on top: an
//! array type we cannot read — object arrays (`|O`, which numpy would unpickle) first of
//! all — is an `Unsupported` error, never unpickled; the fold reader reports the chunk's
//! tensors as not readable (verify: "not checked"), not as damage.

use crate::any::ReadOptions;
use crate::dtype::DType;
use crate::error::Result;
use crate::formats::npy::{ByteOrder, NpzFile};
use crate::limits::Limits;
use crate::model::TensorSource;

/// One array of an npz.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    /// Member name without `.npy`.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape (C order).
    pub shape: Vec<u64>,
    /// True when stored big-endian (bytes are swapped on read).
    pub big_endian: bool,
}

fn open<'p>(payload: &'p [u8], limits: &Limits) -> Result<NpzFile<'p>> {
    let opts = ReadOptions {
        limits: limits.clone(),
        ..ReadOptions::default()
    };
    NpzFile::parse(payload, &opts)
}

/// Lists the arrays of an npz payload (reads only the npy headers), and the npy
/// module's warnings about it (ambiguous ml_dtypes descrs, ignored trailing bytes).
pub fn list(payload: &[u8], limits: &Limits) -> Result<(Vec<Array>, Vec<String>)> {
    let z = open(payload, limits)?;
    let arrays = z
        .tensor_infos()
        .iter()
        .map(|t| Array {
            name: t.name.clone(),
            dtype: t.dtype,
            shape: t.shape.clone(),
            big_endian: z
                .header(&t.name)
                .is_some_and(|h| h.order == ByteOrder::Big && h.dtype.size() > 1),
        })
        .collect();
    Ok((arrays, crate::model::Container::warnings(&z)))
}

/// Reads one array's little-endian, C-order bytes, bounded by its declared shape.
pub fn read(payload: &[u8], name: &str, limits: &Limits) -> Result<Vec<u8>> {
    let z = open(payload, limits)?;
    let view = z.tensor(name)?;
    view.data()?; // one dense part
                  // An inflated or reordered array is already owned: take it without copying.
    let part = view.parts.into_iter().next();
    Ok(part.map(|p| p.bytes.into_owned()).unwrap_or_default())
}
