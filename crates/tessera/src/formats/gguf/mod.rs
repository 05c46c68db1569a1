//! GGUF v3 (and v2 for reading) — the llama.cpp/ggml model format.
//!
//! The spec is ggml's `docs/gguf.md`; the reference peer is the `gguf` PyPI package
//! (gguf-py 0.19: `GGUFReader`, `GGUFWriter`, `constants.py`).
//!
//! # Byte layout (little-endian; v3 also allows big-endian files, which we read)
//!
//! | field | type | notes |
//! | --- | --- | --- |
//! | magic | `GGUF` | |
//! | version | u32 | 3 (2 is read too; 1 is refused) |
//! | tensor_count | u64 | checked against `Limits::max_entries` and the bytes left |
//! | metadata_kv_count | u64 | likewise |
//! | metadata_kv × n | key: string, value_type: u32, value | string = u64 length + UTF-8 bytes |
//! | tensor_info × n | name: string, n_dims: u32, dims: u64 × n_dims, type: u32 (ggml_type), offset: u64 | dims innermost first; offset relative to the data section |
//! | padding | zeros | to `general.alignment` (u32, default 32) |
//! | tensor data | | each tensor at its offset (a multiple of the alignment), padded to the alignment |
//!
//! Value types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool, 8 string,
//! 9 array (u32 item type, u64 count, items; items may themselves be arrays), 10 u64,
//! 11 i64, 12 f64.
//!
//! # Mapping to Tessera
//!
//! - **Shapes.** GGUF stores `ne[0]` (the innermost, fastest-varying dimension) first;
//!   our shapes are row-major, so `shape = dims.reverse()` on reading and the reverse on
//!   writing. A GGUF `[4096, 32000]` token embedding is our `[32000, 4096]`.
//! - **Plain tensors** (F32, F16, BF16, F64, I8, I16, I32, I64) are dense tensors, served
//!   zero-copy from the mapped file.
//! - **Quantized tensors** (Q4_0 … Q8_K, IQ*, TQ*, MXFP4, NVFP4, Q1_0: every type in
//!   gguf-py's `GGML_QUANT_SIZES`) are kept packed: dtype `u8`, shape the *logical*
//!   row-major shape, layout `Other("ggml_<lower-case type name>")` (e.g. `ggml_q4_0`),
//!   attribute `ggml_type` = the type id, one part `data` with the packed blocks
//!   (zero-copy). Their size is `numel / block_size * type_size`, and the innermost
//!   dimension must be a whole number of blocks. Formats that keep `Other` layouts
//!   (zTensor, AERO) carry them, so GGUF → zTensor/AERO → GGUF is byte-exact.
//!   The writer takes the type from the layout name and checks `ggml_type` agrees.
//!   The types (ids, block geometry) and their kernels are ggml's block formats, not
//!   GGUF's file format: [`crate::quant`], format-neutral (a zTensor or AERO file
//!   holding `ggml_*` tensors dequantizes without this module), decodes most of them
//!   to floats (`convert --dequantize f32|f16|bf16`, `ConvertOptions::dequantize`) and
//!   encodes float tensors as Q8_0/Q4_0/Q4_1/Q5_0/Q5_1 (`convert --quantize`: GGUF
//!   targets, its codec's `quantizes`), bit-identical to gguf-py's `gguf.quants`; its
//!   module docs list the types done. What is GGUF's: the tensor info that stores the
//!   type id, the metadata value types, alignment and byte order (`raw.rs`).
//! - **Metadata.** Each KV becomes a metadata entry, in file order: integers → `Int`,
//!   floats → `Float`, bool, string (`Bytes` if not UTF-8, with a warning), arrays →
//!   `List`, arrays of u8 → `Bytes`, nested arrays → nested lists. The GGUF type of every
//!   key (a map key → `u32`, `f32`, `[str]`, `[[u8]]`, …; see [`meta`]) rides beside the
//!   metadata, never in it: `TensorSource::metadata_types`, shown by `inspect --json`
//!   as `metadata_types` — only when some key's type is not the one our writer would
//!   infer from its value (real GGUF files always have such keys; files we wrote from
//!   another format's metadata never do, so A → GGUF → A gives back exactly A's
//!   metadata). The writer uses each key's annotation when the value fits it, so GGUF →
//!   GGUF rewrites the metadata byte-exact. A conversion into another format keeps the
//!   map in that file's metadata under `tessera.gguf_types` (unless the source has a key
//!   of that name), and the writer reads it back from a non-GGUF source, so GGUF →
//!   zTensor → GGUF keeps the types too. Keys without an annotation (metadata from other formats) get
//!   an inferred type: strings stay GGUF strings, ints `i32`/`i64`/`u64`, floats `f64`,
//!   bytes `[u8]`, homogeneous lists arrays. Maps, nulls and mixed lists (ints with
//!   floats included), which GGUF has no type for, are written as GGUF strings holding
//!   their JSON text, with a note in the report, and their keys are listed in one extra
//!   KV, `tessera.json_keys` (array of strings, written last and only when needed): our
//!   reader consumes it and restores those values (annotated `json`), so a model's
//!   metadata survives A → GGUF → A; other GGUF readers see the JSON text. (Bytes nested
//!   inside such a map come back as `{"$bytes": hex}`.)
//!   `general.alignment` is always written as u32 and sets the writer's alignment.
//! - **Layout.** The writer lays files out exactly as `GGUFWriter` does (KVs, tensor
//!   infos, zero padding, each tensor padded including the last), so the same inputs
//!   give byte-identical files: rewriting any gguf-py file reproduces it byte for byte
//!   (tested). Differences from gguf-py for inputs *without* type annotations: we add
//!   no `general.architecture` (gguf-py always does), floats default to f64 (gguf-py's
//!   inference picks f32, which would lose precision), and we write empty arrays and
//!   empty strings (gguf-py's `add_array`/`add_string` skip them; its reader reads
//!   them).
//!
//! # Deviations and choices
//!
//! - Unknown ggml type ids (e.g. the removed 4, 5, 31–33, 36–38) are an `Unsupported`
//!   error naming the tensor: without a block size the data cannot be delimited, and
//!   keeping a guessed size would risk a silent loss in conversions.
//! - Unknown metadata value types are `Malformed` (the value cannot be skipped).
//! - Duplicate keys and tensor names, bools other than 0/1, `general.alignment` that is
//!   not a u32 power of two, tensor offsets that are not multiples of the alignment or
//!   run past the end of the file: `Malformed`. Offsets out of order or overlapping,
//!   and a missing final padding, are accepted with a warning (llama.cpp refuses them;
//!   gguf-py does not). Bytes after the last tensor's padding (no writer puts any
//!   there) are accepted with a warning on opening and fail `verify`'s "trailing
//!   bytes" check.
//! - More than 4 dimensions or names over 64 bytes: accepted with a warning (ggml
//!   limits, not the format's); the writer notes them.
//! - A file's own `tessera.gguf_types` key is ordinary metadata (read, rewritten as a
//!   KV). A `tessera.json_keys` key that is not an array of strings is refused
//!   (`Unsupported`); a listed key whose value is not JSON text is kept as a string,
//!   with a warning.
//! - Big-endian files (v3; the version field reads as `0x03000000`, gguf-py's test) are
//!   read: every header number in big-endian order; F16/F32/F64/I16/I32/I64 tensors are
//!   byte-swapped into our little-endian form (owned, not zero-copy, encoding
//!   `raw-big-endian`); BF16 and quantized blocks are kept as stored, because gguf-py
//!   (which writes every big-endian GGUF in practice) stores them as bytes, unswapped.
//!   Rewriting a big-endian file gives the little-endian file gguf-py writes from the
//!   same inputs (tested). We write little-endian only. GGUF v1 is refused
//!   (`UnsupportedVersion`).
//! - GGUF has no checksums: `verify` validates the structure and reports the checksum
//!   layer as not checked.
//!
//! # Limits (hostile files)
//!
//! gguf-py trusts counts and hangs or allocates on tiny files with huge counts. Here:
//! tensor and KV counts are checked against `Limits::max_entries` *and* against the
//! bytes left (each KV needs at least 13 bytes, each tensor info 24); every string
//! length against the bytes left (keys and tensor names also against
//! `Limits::max_name_len`); every array length times its item's minimum size against
//! the bytes left, and all array items of a file together against
//! `Limits::max_entries`; array nesting against `Limits::max_depth` (and never beyond 256, so a raised
//! limit cannot overflow the stack); the header size
//! against `Limits::max_index_bytes`; `n_dims` against `Limits::max_rank`; dimensions
//! against i64 and their product against u64 overflow; tensor ranges against the file.

pub mod meta;
pub mod raw;
pub mod read;
pub mod write;

use crate::any::Access;
use crate::dtype::DType;
use crate::format::Format;
use crate::formats::Codec;
use crate::write::SetStyle;
use crate::write::{Capabilities, MetadataSupport};

pub use read::GgufFile;
pub use write::GgufWriter;

/// GGUF in the codec table.
pub const CODEC: Codec = Codec::new()
    .reader(read::open, Access::Ranges, "gguf")
    .writer(write::write, capabilities)
    .sets(SetStyle::GgufSplit)
    .quantizes();

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
        // Only the packed `ggml_*` layouts (quantized tensors); the writer refuses others.
        other_layouts: true,
        metadata: MetadataSupport::Tree,
        chunks: false,
        compression: &[],
        integrity: &[],
        zero_copy: true,
        chunk_copies: false,
        typed_metadata: true,
    }
}
