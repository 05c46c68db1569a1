//! zTensor v1.0 — not implemented yet.

use crate::any::OpenFn;
use crate::convert::{Capabilities, MetadataSupport, WriteFn};
#[allow(unused_imports)]
use crate::dtype::DType;
use crate::format::Format;

/// Reader entry point (not implemented yet).
pub const OPEN: Option<OpenFn> = None;
/// Writer entry point (not implemented yet).
pub const WRITE: Option<WriteFn> = None;

/// What zTensor v1.0 can hold.
pub fn capabilities() -> Capabilities {
    Capabilities {
        format: Format::Ztensor,
        dtypes: &[
            DType::F32,
            DType::F16,
            DType::F64,
            DType::BF16,
            DType::I8,
            DType::I16,
            DType::I32,
            DType::I64,
            DType::U8,
            DType::U16,
            DType::U32,
            DType::U64,
            DType::Bool,
        ],
        sparse: true,
        other_layouts: true,
        metadata: MetadataSupport::Strings,
        chunks: false,
        compression: &["zstd"],
        integrity: &["crc32c", "sha256"],
        zero_copy: true,
    }
}
