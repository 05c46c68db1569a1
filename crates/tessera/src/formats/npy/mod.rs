//! NumPy .npy/.npz — not implemented yet.

use crate::any::OpenFn;
use crate::convert::{Capabilities, MetadataSupport, WriteFn};
#[allow(unused_imports)]
use crate::dtype::DType;
use crate::format::Format;

/// Reader entry point (not implemented yet).
pub const OPEN: Option<OpenFn> = None;
/// .npy writer entry point (not implemented yet).
pub const WRITE_NPY: Option<WriteFn> = None;
/// .npz writer entry point (not implemented yet).
pub const WRITE_NPZ: Option<WriteFn> = None;

/// What NumPy .npy/.npz can hold.
pub fn capabilities(format: Format) -> Capabilities {
    Capabilities {
        format,
        dtypes: &DType::ALL,
        sparse: false,
        other_layouts: false,
        metadata: MetadataSupport::None,
        chunks: false,
        compression: if format == Format::Npz {
            &["deflate"]
        } else {
            &[]
        },
        integrity: if format == Format::Npz {
            &["crc32"]
        } else {
            &[]
        },
        zero_copy: format == Format::Npy,
    }
}
