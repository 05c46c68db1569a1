//! FOLD v1.2 — not implemented yet.

use crate::any::OpenFn;
use crate::convert::{Capabilities, MetadataSupport, WriteFn};
#[allow(unused_imports)]
use crate::dtype::DType;
use crate::format::Format;

/// Reader entry point (not implemented yet).
pub const OPEN: Option<OpenFn> = None;
/// Writer entry point (not implemented yet).
pub const WRITE: Option<WriteFn> = None;

/// What FOLD v1.2 can hold.
pub fn capabilities() -> Capabilities {
    Capabilities {
        format: Format::Fold,
        dtypes: &DType::ALL,
        sparse: false,
        other_layouts: false,
        metadata: MetadataSupport::Tree,
        chunks: true,
        compression: &["zstd"],
        integrity: &[
            "crc32c",
            "sha256",
            "chunk_hashes",
            "manifest_hash",
            "reed-solomon",
        ],
        zero_copy: false,
    }
}
