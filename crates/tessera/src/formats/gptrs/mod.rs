//! GPTRS v2 — not implemented yet.

use crate::any::OpenFn;
use crate::convert::{Capabilities, MetadataSupport, WriteFn};
#[allow(unused_imports)]
use crate::dtype::DType;
use crate::format::Format;

/// Reader entry point (not implemented yet).
pub const OPEN: Option<OpenFn> = None;
/// Checkpoint writer entry point (not implemented yet).
pub const WRITE_CHECKPOINT: Option<WriteFn> = None;
/// Archive writer entry point (not implemented yet).
pub const WRITE_ARCHIVE: Option<WriteFn> = None;

/// What GPTRS v2 can hold.
pub fn capabilities(format: Format) -> Capabilities {
    Capabilities {
        format,
        dtypes: &[DType::F32, DType::F16, DType::BF16, DType::I32],
        sparse: false,
        other_layouts: false,
        metadata: if format == Format::GptrsCheckpoint {
            MetadataSupport::Tree
        } else {
            MetadataSupport::None
        },
        chunks: false,
        compression: &[],
        integrity: &["base_id"],
        zero_copy: true,
    }
}
