//! GGUF — not implemented yet.

use crate::any::OpenFn;
use crate::convert::{Capabilities, MetadataSupport, WriteFn};
#[allow(unused_imports)]
use crate::dtype::DType;
use crate::format::Format;

/// Reader entry point (not implemented yet).
pub const OPEN: Option<OpenFn> = None;
/// Writer entry point (not implemented yet).
pub const WRITE: Option<WriteFn> = None;

/// What GGUF can hold.
pub fn capabilities() -> Capabilities {
    Capabilities {
        format: Format::Gguf,
        dtypes: &[
            DType::F32,
            DType::F16,
            DType::BF16,
            DType::F64,
            DType::I8,
            DType::I16,
            DType::I32,
            DType::I64,
        ],
        sparse: false,
        other_layouts: true,
        metadata: MetadataSupport::Tree,
        chunks: false,
        compression: &[],
        integrity: &[],
        zero_copy: true,
    }
}
