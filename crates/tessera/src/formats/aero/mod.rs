//! AERO v0.1 — not implemented yet.

use crate::any::OpenFn;
use crate::convert::{Capabilities, MetadataSupport, WriteFn};
#[allow(unused_imports)]
use crate::dtype::DType;
use crate::format::Format;

/// Reader entry point (not implemented yet).
pub const OPEN: Option<OpenFn> = None;
/// Writer entry point (not implemented yet).
pub const WRITE: Option<WriteFn> = None;

/// What AERO v0.1 can hold.
pub fn capabilities() -> Capabilities {
    Capabilities {
        format: Format::Aero,
        dtypes: &[
            DType::F32,
            DType::F16,
            DType::BF16,
            DType::F64,
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
        sparse: false,
        other_layouts: false,
        metadata: MetadataSupport::Tree,
        chunks: true,
        compression: &["zstd"],
        integrity: &["blake3", "hash_b3", "ihsh", "phsh"],
        zero_copy: true,
    }
}
