//! safetensors — not implemented yet.

use crate::any::OpenFn;
use crate::convert::{Capabilities, MetadataSupport, WriteFn};
#[allow(unused_imports)]
use crate::dtype::DType;
use crate::format::Format;

/// Reader entry point (not implemented yet).
pub const OPEN: Option<OpenFn> = None;
/// Writer entry point (not implemented yet).
pub const WRITE: Option<WriteFn> = None;

/// What safetensors can hold.
pub fn capabilities() -> Capabilities {
    Capabilities {
        format: Format::Safetensors,
        dtypes: &[
            DType::Bool,
            DType::U8,
            DType::I8,
            DType::F8E5M2,
            DType::F8E4M3FN,
            DType::F8E8M0,
            DType::I16,
            DType::U16,
            DType::F16,
            DType::BF16,
            DType::I32,
            DType::U32,
            DType::F32,
            DType::C64,
            DType::F64,
            DType::I64,
            DType::U64,
        ],
        sparse: false,
        other_layouts: false,
        metadata: MetadataSupport::Strings,
        chunks: false,
        compression: &[],
        integrity: &[],
        zero_copy: true,
    }
}
