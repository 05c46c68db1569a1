//! ONNX (`.onnx`) — reader of a model's initializers (its weights) and header; no
//! writer.
//!
//! # Layout
//!
//! An ONNX model is one protobuf message, `ModelProto` (onnx/onnx.proto, IR version
//! 3–11), with no magic, no index and no checksum. What Tessera reads of it:
//!
//! | message | fields read (number) |
//! | --- | --- |
//! | `ModelProto` | `ir_version` (1), `producer_name` (2), `producer_version` (3), `domain` (4), `model_version` (5), `doc_string` (6), `graph` (7), `opset_import` (8: `domain` 1, `version` 2), `metadata_props` (14: `key` 1, `value` 2) |
//! | `GraphProto` | `name` (2), `initializer` (5), `input` (11), `output` (12); `sparse_initializer` (15) is refused |
//! | `TensorProto` | `dims` (1), `data_type` (2), `float_data` (4), `int32_data` (5), `string_data` (6), `int64_data` (7), `name` (8), `raw_data` (9), `double_data` (10), `uint64_data` (11), `external_data` (13), `data_location` (14); `segment` (3) is refused |
//! | `ValueInfoProto` → `TypeProto` → `Tensor` → `TensorShapeProto` → `Dimension` | name, elem_type, each dim's `dim_value` or `dim_param` |
//!
//! Every other field (the nodes, value_info, functions, training_info, subgraphs in
//! node attributes) is skipped by its length without being read.
//!
//! - **Initializers → tensors**, named as in the graph, in file order. `data_type`
//!   maps to Tessera's dtypes: FLOAT f32, DOUBLE f64, FLOAT16 f16, BFLOAT16 bf16, the
//!   (U)INT8/16/32/64 integers, BOOL, COMPLEX64/128 c64/c128, FLOAT8E4M3FN, E4M3FNUZ,
//!   E5M2, E5M2FNUZ, E8M0, and FLOAT4E2M1 (two per byte, the first in the low nibble,
//!   as ONNX and Tessera both pack it). UINT4, INT4, UINT2 and INT2 have no Tessera dtype
//!   and are refused by name (`Unsupported`); STRING initializers are not tensors: they
//!   are listed in the metadata key `onnx.string_initializers` (`{name: {dims,
//!   values}}`, a value that is not UTF-8 as `{"$bytes": hex}`) with a warning.
//! - **Data**: `raw_data` (little-endian, as ONNX specifies) is a range of the file,
//!   read zero-copy from a map; the typed fields are decoded when the tensor is read —
//!   `float_data` for FLOAT and COMPLEX64, `double_data` for DOUBLE and COMPLEX128,
//!   `int64_data` for INT64, `uint64_data` for UINT32 and UINT64, `int32_data` for every
//!   other type (FLOAT16/BFLOAT16 as their bit patterns, FLOAT8 as the byte, FLOAT4E2M1
//!   as a byte of two values), each value checked to fit the type, packed or not on the
//!   wire. A tensor holds its data in exactly one of these; its byte or value count
//!   must match its dims.
//! - **External data** (`data_location` EXTERNAL, `external_data` entries
//!   `location`, `offset`, `length`, `checksum`): `location` is a path relative to the
//!   model's directory; an absolute path, a `..` component, or a link that leads out of
//!   the directory is refused (a link inside it is followed; the `onnx` package 1.23
//!   refuses every link, so neither reads external data from a Hugging Face cache's
//!   snapshot, whose files are links into `blobs/`). The file is mapped (read, with `Load::Read`) at open and
//!   the range checked against its length and the tensor's size; `offset` defaults to
//!   0 and `length` to the rest of the file, as the `onnx` package reads them. A
//!   `checksum` is the SHA-1 of the whole file (onnx's ExternalData.md): a checked read
//!   (`ReadOptions::verify`) hashes the file once and refuses the tensor when it
//!   differs; `verify` reports it per file. A model opened without a local path (bytes,
//!   a URL) whose initializers are external is refused at open, naming the location.
//! - **Metadata** (keys under `onnx.`, the model's own header: provenance, left out
//!   with a note by a conversion to a format without metadata): `onnx.ir_version` and
//!   `onnx.model_version` (integers), `onnx.producer_name`, `onnx.producer_version`,
//!   `onnx.domain`, `onnx.doc_string`, `onnx.graph.name` (strings, when present),
//!   `onnx.opset_import` (JSON text `{domain: version}`, the default domain as `""`),
//!   `onnx.graph.inputs` and `onnx.graph.outputs` (JSON text: a list of `{name, kind,
//!   type, shape}`, a dim a number, a parameter's name, or null). `metadata_props`
//!   are kept as they are, key → string (a key the reader gives itself wins, with a
//!   warning).
//!
//! # The protobuf reader, and why it is written here
//!
//! `wire.rs` reads protobuf's wire format directly instead of declaring the messages
//! for `prost`: `prost` decodes a message from one contiguous buffer and copies every
//! `bytes` field into a `Vec` (or a `Bytes` over a buffer it must own), so a 2 GB model
//! would be read whole and its `raw_data` copied at open. Here a length-delimited field
//! is a checked byte range of the source, so opening reads the fields above and skips
//! the rest, `raw_data` is never copied at open (nor at read, from a map), and a model
//! opened over `pread` or a remote source reads a few KiB per message. Every length is
//! checked against the bytes left in its message before it is used, every count
//! (initializers, dims, opsets, metadata) against `Limits`, and the text of the
//! metadata in all against `Limits::max_index_bytes`; the reader descends a fixed
//! number of message levels, never by recursion, so nesting in the file costs nothing.
//! ONNX has no index, so opening scans the model's fields (not its data).
//!
//! # Deviations, and what is refused
//!
//! - Read only: Tessera does not write ONNX (the codec's refusal says so).
//! - Refused: sparse initializers, segmented tensors, the 2- and 4-bit integer types;
//!   initializers of subgraphs and of `training_info` are not listed (they are not the
//!   model's weights as `onnx.numpy_helper` walks `graph.initializer`).
//! - Validation the `onnx` package does not do at load (its checker does some): a
//!   model without `ir_version` or `graph`, with IR version ≥ 3 and no
//!   `opset_import`, an initializer without a name, with a duplicate name, without a
//!   `data_type`, with data in two fields or none for a non-empty tensor, is
//!   `Malformed`.

mod read;
mod sha1;
mod wire;

pub use read::{type_name, OnnxFile, PREFIX};

use crate::any::{Access, ReadOptions};
use crate::error::{ErrorKind, Result};
use crate::formats::Codec;
use crate::model::Container;
use crate::source::SourceRef;

fn open<'d>(src: SourceRef<'d>, opts: &ReadOptions) -> Result<Box<dyn Container + 'd>> {
    Ok(Box::new(OnnxFile::parse(src, opts)?))
}

/// ONNX in the codec table: read by range (its fields scanned, its data not), never
/// written.
pub const CODEC: Codec = Codec::new()
    .reader(open, Access::Ranges, "onnx")
    .provenance(PREFIX)
    .refusal(
        ErrorKind::Unsupported,
        "ONNX is read-only in Tessera: it reads a model's initializers and header, and does not write models",
    );
