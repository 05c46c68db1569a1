//! safetensors — reader and writer, byte-identical to the `safetensors` package (0.8.0).
//!
//! # Layout
//!
//! | bytes | what |
//! | --- | --- |
//! | 0..8 | `N`, u64 little-endian: length of the JSON header |
//! | 8..8+N | UTF-8 JSON object, padded with spaces so that `N % 8 == 0` |
//! | 8+N.. | the byte buffer: every tensor's raw little-endian, row-major bytes |
//!
//! The header maps each tensor name to `{"dtype":"F32","shape":[2,3],"data_offsets":[b,e]}`
//! (offsets relative to the byte buffer) and may hold `"__metadata__"`, an object of
//! string values.
//!
//! # What the writer emits (found by writing files with the package and reading them)
//!
//! - Compact JSON (`serde_json::to_string`: no spaces, non-ASCII as raw UTF-8, `"`, `\`
//!   and control characters escaped, `/` not), `__metadata__` first when there is any.
//! - Tensors sorted by dtype **rank** descending, then by name bytewise ascending. The
//!   rank is the position in the original's `Dtype` enum: BOOL < F4 < F6_E2M3 < F6_E3M2
//!   < U8 < I8 < F8_E5M2 < F8_E4M3 < F8_E8M0 < F8_E4M3FNUZ < F8_E5M2FNUZ < I16 < U16 < F16
//!   < BF16 < I32 < U32 < F32 < C64 < F64 < I64 < U64 (so U64 first, BOOL last; U16 before
//!   I16; this is not "by element size").
//! - Data back to back from offset 0, no padding between tensors; the header is padded
//!   with spaces (0x20) to a multiple of 8, so the buffer starts 8-aligned.
//!
//! # Deviations, and why
//!
//! - `__metadata__` order: the package keeps it in a Rust `HashMap`, so its order changes
//!   from run to run (we observed `{"k2",…,"k0"}` then `{"k5",…,"k3"}` for the same
//!   input). We write it in our metadata's insertion order, so our output is
//!   deterministic; it is byte-identical to the package's whenever the metadata has at
//!   most one key.
//! - Empty metadata is written as no `__metadata__` at all. The package writes
//!   `"__metadata__":{}` for `metadata={}`, and with no tensors it even writes the
//!   invalid header `{},"__metadata__":{}}` that its own loader rejects.
//! - Metadata values that are not strings (our metadata is a value tree) are written as
//!   compact JSON text, and read back as strings: safetensors holds strings only.
//! - Per-tensor attributes cannot be stored: the writer drops them and says so in the
//!   write report (conversions from formats that have them lose them).
//! - Duplicate keys in the header are a `Malformed` error naming the key (the original
//!   keeps the last one, then fails on the offsets).
//! - Unknown fields inside a tensor entry are ignored, as the original does.
//! - Sub-byte dtypes (F4, F6_E2M3, F6_E3M2) are held packed as stored: the header's
//!   shape is the logical one (what torch's `float4_e2m1fn_x2` saves: its last dimension
//!   doubled) and the bytes are `numel × bits / 8`, which must be whole (the original's
//!   rule; a 5-element F4 tensor is refused both ways). The original does not say how
//!   values sit in a byte: we read F4 low nibble first, as torch/gpt-oss MXFP4 blocks and
//!   zTensor v2 pack them, and F6 as a little-endian bit stream (element `i` at bits
//!   `6i..6i+6`), the same rule. c128 cannot be written (safetensors has no name for it).
//!
//! # Validation and limits (the original's checks, each a clear error)
//!
//! Header length ≤ 100,000,000 bytes (the original's `MAX_HEADER_SIZE`) and ≤
//! `Limits::max_index_bytes` (`LimitExceeded`), inside the file, UTF-8, a JSON object;
//! tensors sorted by `data_offsets` must tile the buffer exactly: start at 0, no gap, no
//! overlap, `end ≥ begin`, `end - begin == size(dtype) × Π shape` (checked multiplication),
//! the last ending at the end of the file; `__metadata__` is null or an object of
//! strings. Rank, name length and tensor count are checked against `Limits`.
//! Opening reads the first 8 bytes and the header; each tensor is read by range when
//! asked — zero-copy (a borrowed slice) from a memory map.

mod raw;
mod read;
mod write;

/// The parsed (not yet validated) JSON header, for FOLD's STEN chunks.
#[cfg(feature = "fold")]
pub(crate) use raw::Header;
pub use raw::{check_whole_bytes, dtype_from_name, dtype_name, MAX_HEADER_SIZE};
pub use read::SafetensorsFile;
pub use write::{header_in_order, metadata_string, SafetensorsWriter};

use crate::any::{Access, ReadOptions};
use crate::dtype::DType;
use crate::error::Result;
use crate::format::Format;
use crate::formats::{Codec, MetadataMarker};
use crate::model::Container;
use crate::source::SourceRef;
use crate::write::SetStyle;
use crate::write::{Capabilities, MetadataSupport};

fn open<'d>(src: SourceRef<'d>, opts: &ReadOptions) -> Result<Box<dyn Container + 'd>> {
    Ok(Box::new(SafetensorsFile::parse(src, opts)?))
}

/// safetensors in the codec table. It has no magic: a u64 header length, then a
/// JSON object.
pub const CODEC: Codec = Codec::new()
    .marker(FRAMEWORK_MARKER)
    .reader(open, Access::Ranges, "safetensors")
    .writer(write::write, capabilities)
    .sets(SetStyle::HfIndex);

/// The framework key `transformers`, `safetensors.torch` and the others write
/// (`{"format": "pt"}`): not model metadata.
pub const FRAMEWORK_MARKER: MetadataMarker = MetadataMarker {
    key: "format",
    values: &["pt", "tf", "flax", "np", "numpy", "mlx"],
    what: "safetensors' framework marker",
};

/// What safetensors can hold.
pub fn capabilities() -> Capabilities {
    Capabilities {
        format: Format::Safetensors,
        dtypes: &[
            DType::Bool,
            DType::F4E2M1,
            DType::F6E2M3,
            DType::F6E3M2,
            DType::U8,
            DType::I8,
            DType::F8E5M2,
            DType::F8E4M3FN,
            DType::F8E8M0,
            DType::F8E4M3FNUZ,
            DType::F8E5M2FNUZ,
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
        chunk_copies: false,
        typed_metadata: false,
    }
}
