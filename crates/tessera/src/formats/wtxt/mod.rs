//! WTXT/Chunks v1.1 — not implemented yet.

use crate::any::OpenFn;
use crate::convert::{Capabilities, MetadataSupport, WriteFn};
#[allow(unused_imports)]
use crate::dtype::DType;
use crate::format::Format;

/// Reader entry point (not implemented yet).
pub const OPEN: Option<OpenFn> = None;
/// Writer entry point (not implemented yet).
pub const WRITE: Option<WriteFn> = None;

/// What WTXT/Chunks v1.1 can hold.
pub fn capabilities() -> Capabilities {
    Capabilities {
        format: Format::Wtxt,
        dtypes: &[
            DType::F32,
            DType::F64,
            DType::I8,
            DType::I16,
            DType::I32,
            DType::I64,
            DType::U8,
            DType::U16,
            DType::U32,
            DType::U64,
            DType::F16,
            DType::BF16,
            DType::Bool,
            DType::F8E4M3FN,
            DType::F8E5M2,
        ],
        sparse: false,
        other_layouts: false,
        metadata: MetadataSupport::None,
        chunks: false,
        compression: &[],
        integrity: &[
            "line parity",
            "crc32c",
            "sha256",
            "hmac-sha256",
            "sha256_all",
            "merkle",
            "fastxor",
            "ed25519",
        ],
        zero_copy: false,
    }
}
