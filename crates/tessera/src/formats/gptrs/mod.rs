//! GPTRS v2: gpt.rs checkpoints (`GPTRSCHK`, `.gptrs`) and tensor archives
//! (`GPTRSTEN`, `.gptrsten`). One reader opens both magics.
//!
//! # Layout (all little-endian, no padding, no alignment)
//!
//! | field | type | notes |
//! | --- | --- | --- |
//! | `magic` | 8 bytes | `GPTRSCHK` or `GPTRSTEN` |
//! | `version` | u32 | 2 (v1 and anything else: `UnsupportedVersion`) |
//! | `config_len` | u32 | checkpoint only |
//! | `config_json` | `config_len` bytes | checkpoint only; gpt.rs `ModelConfig` |
//! | `index_len` | u32 | |
//! | `index_bytes` | `index_len` bytes | `tensor_count` u32, then the entries |
//! | `data_bytes` | rest | raw C-order little-endian payloads at `offset_abs` |
//!
//! Index entry: `name_len` u32, `name_bytes`, `stored_base_id` u128 (checkpoint only),
//! `rank` u32, `dims` u64×rank, `dtype_tag` u32 (0 f32, 1 f16, 2 bf16, 3 i32),
//! `requires_grad` u8, `offset_abs` u64 (absolute), `byte_len` u64.
//!
//! # What we support
//!
//! - Read and write both kinds, all four dtype tags both ways (the original Rust code
//!   materializes only f32/i32).
//! - `base_id` = the first 16 bytes of BLAKE3(name) ([`raw::base_id`]). The writer stores
//!   it (`GptrsOptions::zero_base_id` / `--zero-base-id` store 0, as the Python exporter
//!   does). `verify` reports per tensor: stored non-zero and equal → ok; different →
//!   failed (an integrity failure: gpt.rs refuses such a file; also a warning on open and
//!   [`GptrsFile::check_base_ids`] as an `Integrity` error); stored 0 → "not checked"
//!   (nothing was stored to check; gpt.rs computes the id from the name). A checked read
//!   (`ReadOptions::verify`, the default: `tensor`, `extract`, `convert`, Python) of a
//!   tensor whose stored id differs fails with that `Integrity` error; `--no-verify`
//!   reads it, as it skips any digest.
//! - The config JSON becomes file metadata: the top-level keys of a tagged config
//!   (`kind`, `config`, `runtime` when present, any other key as stored) as value trees,
//!   in file order; a legacy untagged GPT config reads as `{kind: "gpt", config: …}`
//!   with a warning (see [`config`]). The writer writes the metadata back as compact JSON
//!   in its key order; a GPTRS→GPTRS rewrite with unchanged metadata copies the config
//!   bytes verbatim (so a legacy config stays legacy and float spellings survive).
//! - `requires_grad` is `TensorInfo::attrs["requires_grad"]` (Bool) and is written back
//!   (a source without it writes 0). A 0 byte reads as no attribute, not `false`: the
//!   byte cannot tell "false" from "never said" (our writer stores 0 for a source that
//!   never said it, e.g. safetensors), so `inspect` shows `requires_grad` only where the
//!   file sets it. gpt.rs loads a missing flag as false, so nothing changes for it.
//! - Opening reads the header, the config and the index only (the bytes before the
//!   data: a few small reads to find their length, then one range); each tensor is read
//!   by range when asked. Reads are zero-copy from an in-memory source (`Cow::Borrowed`
//!   from the mapped file; data is unaligned, as the format has no alignment) and one
//!   owned buffer per tensor otherwise (`pread`).
//! - The writer sorts by name (byte order, as both originals do), lays the data out
//!   contiguously right after the index, and streams: header and index first (offsets
//!   are planned from the shapes), then one tensor at a time.
//!
//! # Decisions where the spec is silent
//!
//! - **A checkpoint from a source with no GPTRS config** (safetensors, NumPy…): written
//!   with `kind` `"tensors"` and the source's metadata as `config` (an empty object when
//!   it has none), with a note in the write report. gpt.rs's reader accepts any string
//!   kind, so the tensors load; only its model builder asks for a known kind. When the
//!   source's metadata has a string `kind`, it is written as is; a `config`/`runtime`
//!   that arrives as JSON text (safetensors keeps string metadata only) is stored as the
//!   JSON it spells, with a note. Use `.gptrsten` for a plain tensor bundle.
//! - **Scalars**: the spec allows rank 0 and our writer stores a true scalar as rank 0
//!   (lossless); the original Python exporter writes numpy 0-d arrays as shape `[1]`,
//!   which we read as the rank-1 shape it is.
//! - **Names**: checkpoint names must be ASCII (gpt.rs's `base_param_id` refuses others;
//!   so do our reader and writer); archive names are any UTF-8. Empty names are allowed.
//! - **`requires_grad`** bytes other than 0/1 read as true with a warning (gpt.rs after
//!   `babb530` calls the byte reserved and writes 0).
//!
//! # Stricter than the original reader
//!
//! Hard errors (`Malformed` unless noted), each with the entry and byte offset:
//! truncation anywhere; `config_len`/`index_len` over the bytes that follow or over
//! `Limits::max_index_bytes` (`LimitExceeded`); `tensor_count` over
//! `Limits::max_entries` (`LimitExceeded`) or larger than the index can hold (45 bytes
//! per checkpoint entry, 29 per archive entry, checked before anything is allocated);
//! name length / rank over the limits; non-UTF-8 names; unknown dtype tags; duplicate
//! names; `byte_len != product(dims) × dtype size` (overflow checked); `offset_abs`
//! inside the header or index; data past the end of the file; overlapping data
//! ranges; trailing bytes after the last index entry; config JSON that is not a
//! `ModelConfig` or nests deeper than `Limits::max_depth` (`LimitExceeded`).
//! Warnings (the original writers never produce them, the spec does not forbid them):
//! unsorted names, gaps or out-of-order data, bytes after the last tensor,
//! `requires_grad` > 1, base-id mismatches, legacy config.

pub mod config;
pub mod raw;
pub mod read;
pub mod write;

use crate::any::{Access, ReadOptions};
use crate::dtype::DType;
use crate::error::Result;
use crate::format::Format;
use crate::formats::Codec;
use crate::model::{Container, TensorSource};
use crate::options;
use crate::options::WriteOptions;
use crate::source::SourceRef;
use crate::write::{Capabilities, MetadataSupport, WriteReport, WriteSeek};

pub use raw::{base_id, Kind};
pub use read::GptrsFile;
pub use write::{GptrsWriter, PlannedTensor};

fn open<'d>(src: SourceRef<'d>, opts: &ReadOptions) -> Result<Box<dyn Container + 'd>> {
    let mut file = GptrsFile::parse(src, &opts.limits)?;
    file.check_reads = opts.verify;
    Ok(Box::new(file))
}

fn write_checkpoint(
    src: &dyn TensorSource,
    out: &mut dyn WriteSeek,
    opts: &WriteOptions,
) -> Result<WriteReport> {
    write::write_source(src, out, opts, Kind::Checkpoint)
}

fn write_archive(
    src: &dyn TensorSource,
    out: &mut dyn WriteSeek,
    opts: &WriteOptions,
) -> Result<WriteReport> {
    write::write_source(src, out, opts, Kind::Archive)
}

options::format_options! {
    /// GPTRS's writer options.
    pub struct GptrsOptions {
        shared: [],
        /// Store `base_id` 0, as the original Python exporter does.
        pub zero_base_id: bool = (options::OptionKind::Bool,
            "store base_id 0 as the original Python exporter does"),
    }
}

/// The GPTRS v2 checkpoint (`GPTRSCHK`) in the codec table.
pub const CHECKPOINT_CODEC: Codec = Codec::new()
    .reader(open, Access::Ranges, "gptrs")
    .writer(write_checkpoint, || capabilities(Format::GptrsCheckpoint))
    .options(GptrsOptions::OPTIONS);

/// The GPTRS v2 tensor archive (`GPTRSTEN`) in the codec table.
pub const ARCHIVE_CODEC: Codec = Codec::new()
    .reader(open, Access::Ranges, "gptrs")
    .writer(write_archive, || capabilities(Format::GptrsArchive))
    .options(GptrsOptions::OPTIONS);

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
        integrity: if format == Format::GptrsCheckpoint {
            &["base_id"]
        } else {
            &[]
        },
        zero_copy: true,
        chunk_copies: false,
        typed_metadata: false,
    }
}
