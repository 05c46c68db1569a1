//! AERO v0.1 (`aero-v0.1.md`), with IHSH (AIP-0001) and PHSH (AIP-0002), byte-compatible
//! with the original `aerotensor` writer (`write_model`).
//!
//! # Layout (all little-endian)
//!
//! | offset | size | what |
//! | --- | --- | --- |
//! | 0 | 96 | header: `AERO`, major 0, minor 1, header_size 96, toc_offset, toc_length, string_table_offset, string_table_length, file_flags (0), uuid\[16\], reserved\[28\] (0) |
//! | 96 | 16 | TOC header: entry_count, reserved0, reserved1 (0) |
//! | 112 | 80·n | TOC entries: fourcc, chunk_flags, chunk_offset, chunk_length, chunk_ulen, name_off, name_len, reserved0 (0), blake3_256 of the uncompressed payload |
//! | 112+80n | … | string table: names NUL-terminated, padded with zeros to 8 |
//! | align16 | … | payloads in TOC order, each 16-byte aligned, zero padding between |
//!
//! Chunks written, in this order (as `write_model` does): `IHSH control.integrity`
//! (flags 0x8, only with `--control-integrity`), `MJSN meta.json` (0x0), `MMSG manifest`
//! (0x1, zstd level 6), `TIDX tensors` (0x5, zstd level 6), then per shard
//! `WTSH weights.shard{N}` (0x2) followed by `PHSH weights.shard{N}.phsh` (0x8, only with
//! `--page-hashes`), then any opaque chunk carried from the source (flag 0x8, its own
//! fourcc when it is four ASCII letters/digits, else `BLOB`). msgpack maps keep the
//! original's key order; integers take their smallest encoding.
//!
//! ```
//! use std::borrow::Cow;
//! use tessera::convert::{write_to, WriteOptions};
//! use tessera::formats::aero::{AeroFile, AeroOptions};
//! use tessera::{DType, Format, Model, TensorInfo, TensorView, VerifyOptions, Container};
//!
//! let mut m = Model::new();
//! m.metadata.insert("model_name", "tiny");
//! let w = TensorInfo::dense("w", DType::F32, vec![2]);
//! m.push(TensorView::dense(w, Cow::Owned([1f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect()))?)?;
//! let opts = WriteOptions::default()
//!     .with(AeroOptions::default().page_hashes(Some(4096)).control_integrity(true));
//! let mut out = std::io::Cursor::new(Vec::new());
//! write_to(Format::Aero, &m, &mut out, &opts)?;
//! let bytes = out.into_inner();
//!
//! let file = AeroFile::open(&bytes, &Default::default())?;
//! assert!(file.tensor("w")?.is_borrowed()); // zero-copy
//! file.tensor_checked("w")?; // only the PHSH pages "w" touches are hashed
//! assert!(file.verify(&VerifyOptions::default().control_only(true)).is_ok());
//! # Ok::<(), tessera::Error>(())
//! ```
//!
//! # What we read
//!
//! Everything the spec and the two original readers check, plus what they leave out:
//! header `reserved` bytes, TOC `reserved0/1` and entry `reserved0` must be zero; version
//! exactly 0.1; `MAX_ENTRY_COUNT`, `MAX_STRING_TABLE`, `MAX_METADATA_ULEN` and our
//! [`crate::Limits`]; every offset and length checked against the file size with checked
//! arithmetic; zstd decoded with `chunk_ulen` as the exact output bound; the BLAKE3 of
//! MJSN, MMSG and TIDX checked at open (mandatory for metadata, as the original);
//! tensor names ≤ 4096 bytes, rank ≤ 32, no duplicates, `data_off + data_len` inside the
//! shard, `data_len` equal to the dense size. Unknown fourccs are listed as chunks and
//! skipped (a warning when not marked optional); unknown flag bits and unknown TIDX/MMSG
//! keys are ignored. Unaligned payloads or tensors, compressed WTSH/IHSH/PHSH, non-zero
//! padding and an MMSG `chunks`/`shards` list that disagrees with the TOC are warnings,
//! not errors (the originals accept them). Against hostile files: chunk names may not
//! total more bytes than the string table (shared names would multiply memory), the
//! TIDX is decoded one entry at a time, and every msgpack decode caps the values it
//! builds (8 Mi per chunk, 64 Ki per tensor entry).
//!
//! Opening reads the header, the TOC entries, the string table and the metadata chunks
//! (MJSN, MMSG, TIDX) by range — never a shard. Each tensor is then read by range:
//! [`read::AeroFile::tensor`] returns `Cow::Borrowed` slices of the mapped WTSH payload
//! (zero-copy) from an in-memory source and one owned read otherwise (a compressed
//! WTSH — legal for readers, never written — is decoded once, cached, and its tensors
//! returned as owned copies). Opening hashes nothing big; `verify` does, reading large
//! ranges in 16 MiB blocks over a source that is not in memory (PHSH pages in batches):
//!
//! - full: IHSH, BLAKE3 of every chunk (chunks in parallel, large ones with
//!   `update_rayon`), every PHSH page, every `hash_b3`;
//! - `--control` ([`crate::VerifyOptions::control_only`]): only IHSH — BLAKE3 of
//!   `[0, payloads_start)` with every TOC entry's hash field read as zeros. The
//!   original reads only `covered_ranges[0][1]`; we hash every listed range (each must
//!   lie inside the file) and fail when they leave part of the control region out, since
//!   a matching digest then proves nothing about that part. No IHSH: "not checked";
//! - `--tensor NAME` ([`crate::VerifyOptions::tensors`]): IHSH, then for each tensor its
//!   `hash_b3`, the PHSH pages it overlaps (not the rest of the shard) or, with neither,
//!   its shard's BLAKE3. [`read::AeroFile::tensor_checked`] does the same on read, and
//!   it is what `tensor()` does when the file was opened with `ReadOptions::verify` (the
//!   default): each tensor hashed once, a shard's BLAKE3 once for all its tensors, only
//!   the PHSH pages a tensor touches; `chunk()` checks the chunk's BLAKE3 once.
//!
//! # Metadata mapping
//!
//! `meta.json` (MJSN) is the file metadata: reading it gives our [`crate::Metadata`]
//! (keys in file order). Writing, MJSN is `json.dumps(metadata, sort_keys=True,
//! separators=(",", ":"))` exactly as Python prints it, and MMSG `model` is
//! `{name: metadata["model_name"], architecture: metadata["architecture"]}` (else GGUF's
//! `general.name`/`general.architecture`, as the original's converter, else ""), so a
//! file from the original (keys `architecture`, `model_name`, …) comes back byte for
//! byte. Key order is not kept: like the original, MJSN is a JSON object
//! with sorted keys, and that is the order a reader sees. When JSON cannot hold the
//! metadata exactly — bytes, non-finite floats, integers beyond 64 bits — MJSN still
//! gets its JSON form (bytes as `{"$bytes": hex}`, non-finite floats as strings) and
//! MMSG gets one extra key after `shards`, `tessera_metadata`, holding the exact tree as
//! msgpack; our reader prefers it, the original readers ignore unknown MMSG keys. Other
//! formats' metadata thus lands in `meta.json` as is (GGUF's `general.architecture`
//! stays a key of that name; only `model_name`/`architecture` feed MMSG `model`).
//!
//! # Tensor attributes
//!
//! - `quant_id` and `quant_params` of a dense tensor are kept as attributes of those names
//!   and written back; a non-zero TIDX `flags` is kept as `aero_flags`.
//! - Other attributes of a dense tensor (GPTRS `requires_grad`, …) are written under an
//!   extra TIDX key after the spec's, `tessera_attrs` (a map), and read back from it;
//!   the original readers ignore unknown TIDX keys.
//! - A packed tensor (dtype 0x8000) reads as `Layout::Other(name)`, dtype `u8`, one part
//!   `data`, with `quant_params` flattened into the attributes (`{"ggml_type": 2}`) and
//!   `quant_id` kept. `name` is `quant_params["layout"]` when present, else what the
//!   `quant_id`'s entry of `meta.json["quant_descriptors"]` implies (codec `ggml`,
//!   quant_name `Q4_0` → `ggml_q4_0`; another codec → its name), else `packed`.
//! - Writing, any one-part `Layout::Other` tensor of dtype `u8` (GGUF's `ggml_q4_0`, a
//!   zTensor v2 `dense:f4_e2m1` …; another storage type is refused, as it would read
//!   back as `u8`) becomes dtype
//!   0x8000 the way the original's `gguf_to_aero` writes it: `quant_params` = its
//!   attributes (`{"ggml_type": 2}`), `quant_id` = the index of its descriptor
//!   `{"id", "quant_name": "Q4_0", "codec": "ggml", "params": {"ggml_type": 2}}` in
//!   `meta.json["quant_descriptors"]` (reused when the metadata has it, added when not;
//!   an added list rides only in `meta.json`, the exact metadata in MMSG, so the
//!   metadata reads back unchanged), plus `quant_params["layout"]` when the descriptor
//!   does not reproduce the layout name. It comes back byte-exact with the same layout
//!   name and attributes (plus `quant_id`). See [`quant`].
//!
//! # Writer
//!
//! Offsets are planned from the tensor list (`shape` × dtype for dense tensors; packed
//! tensors are asked for once for their length), the control region and metadata chunks
//! written, then each shard streamed one tensor at a time while its BLAKE3 and page
//! digests are computed; the TOC is patched with those hashes at the end (`Write + Seek`).
//! Options: `shard_size` (default 2 GiB; tensors in order, a shard takes a tensor unless
//! it would exceed the size, an empty shard always accepts), `tensor_hashes` (`hash_b3`,
//! computed in a first pass so the TIDX is final before the shards — the original's
//! in-place rewrite corrupts its own shard), `control_integrity` (IHSH, 256-byte
//! zero-padded payload), `page_hashes` (PHSH page size; the layout reserves `80 +
//! len(shard name) + 32·pages` bytes as the original does, or the payload's size when
//! larger; empty shards get none), `uuid`
//! (random v4 otherwise). Inside a shard each tensor starts at the next multiple of its
//! element size (packed data: anywhere), zero-padded — see Deviations.
//! Unlike the other formats there is no public push-style `AeroWriter` (`write_tensor`
//! one tensor at a time): the TIDX, written before the data, holds each packed
//! tensor's length and, with `tensor_hashes`, each tensor's digest, which only the
//! bytes give; so the writer takes a `TensorSource` and reads it twice: a first pass
//! of its own (plan), then the stream, a [`crate::write::StreamWriter`] the driver
//! ([`crate::write::drive`]) feeds shard by shard with its read-ahead and interruption
//! checks, writing the chunks between the shards as it reaches them.
//! [`write::write_in_shards`] takes the shards instead as ranges of the tensors (what
//! `tessera convert --shards N` / `--max-shard-size` plan, `crate::set::write`): one file,
//! one `WTSH weights.shard{i}` (and its PHSH) per range, TIDX `shard_id` naming it.
//! Tensor data is never compressed (the spec says a WTSH is never compressed), so AERO
//! declares no `compression` option and lists no compression in its capabilities; a
//! request for one is refused. MMSG and TIDX are always zstd level 6.
//!
//! # AEROSET
//!
//! Models in several AERO files (`model.aeroset.json`, `index.aero`, `part-NNN.aero`):
//! [`set`], reached through the codec's `indexed_set` hooks; its layout, checks and
//! deviations open that module.
//!
//! # Deviations
//!
//! - Our writer fixes the original's two known bugs (`tensor_hash=True` overwriting the
//!   shard; f1d395d leaving entry 0's hash zero without IHSH).
//! - Tensor placement: the original packs tensors back to back, so an `f32` after three
//!   `u8` sits at an odd offset and a typed zero-copy view of it is impossible. We align
//!   each tensor to its element size (≤ 8; RESOLUTIONS allows aligning inside a shard and
//!   every reader accepts it). The two layouts are identical whenever tensor sizes are
//!   multiples of the next element size — as in every sample. Reading, unaligned tensors
//!   are reported as a warning.
//! - PHSH reserve: the original reserves `80 + len(shard name) + 32·pages` bytes for a
//!   PHSH payload that takes about `59 + 34·pages`; from 18 pages on (a 2 GiB shard has
//!   512 pages of 4 MiB) the payload outgrows the reserve and, when another chunk
//!   follows, overlaps it. We reserve `max(that, the payload)`: identical layout up to
//!   17 pages, a valid file beyond.
//! - Our writer refuses tensor names over 4096 bytes and ranks over 32 (the C++ reader's
//!   caps), so what it writes the originals can read.
//! - The original's low-level `write(add_control_integrity=True)` files fail IHSH
//!   validation (digest over the un-zeroed region); they fail ours too, as they should.
//! - msgpack is decoded by a small bounded decoder over `rmp`'s markers into our own
//!   [`crate::Value`] (no `rmpv`): lengths are checked against the bytes left, depth is
//!   capped, extension types are refused.

pub mod codec;
mod index;
mod plan;
pub mod quant;
pub mod raw;
pub mod read;
pub mod set;
pub mod verify;
pub mod write;

use std::borrow::Cow;

use crate::any::{Access, ReadOptions};
use crate::dtype::DType;
use crate::error::Result;
use crate::format::Format;
use crate::formats::Codec;
use crate::metadata::Metadata;
use crate::model::{Container, TensorSource};
use crate::options::{self, OptionKind};
use crate::source::SourceRef;
use crate::tensor::{ChunkInfo, TensorInfo, TensorView};
use crate::verify::{VerifyOptions, VerifyReport};
use crate::write::SetStyle;
use crate::write::{Capabilities, MetadataSupport};

pub use raw::{dtype_from_u16, dtype_to_u16};
pub use read::AeroFile;

fn open<'d>(src: SourceRef<'d>, opts: &ReadOptions) -> Result<Box<dyn Container + 'd>> {
    let mut f = AeroFile::open(src, &opts.limits)?;
    f.verify = opts.verify;
    Ok(Box::new(f))
}

options::format_options! {
    /// AERO's writer options (`-O name=value`, Python keywords, or
    /// `WriteOptions::default().with(AeroOptions::default().tensor_hashes(true))`).
    pub struct AeroOptions {
        shared: [],
        /// The largest shard (`WTSH` chunk), in bytes.
        pub shard_size: Option<u64> = (OptionKind::Size, "maximum shard size"),
        /// A BLAKE3 hash per tensor (`hash_b3`).
        pub tensor_hashes: bool = (OptionKind::Bool, "store a BLAKE3 hash per tensor (hash_b3)"),
        /// The control-plane integrity chunk (`IHSH`).
        pub control_integrity: bool = (OptionKind::Bool, "add the IHSH control-integrity chunk"),
        /// Page hashes (`PHSH`) with this page size; the bare option means 4 MiB.
        pub page_hashes: Option<u64> = (OptionKind::Size, "add PHSH page hashes with this page size",
            flag: "4M"),
        /// A fixed file UUID, for byte-deterministic output.
        pub uuid: Option<[u8; 16]> = (OptionKind::Hex(16), "fixed file UUID for byte-deterministic output"),
        /// An AEROSET's shards per part file (aerotensor's `max_part_shards`; default 4).
        pub max_part_shards: Option<u64> = (OptionKind::Int, "AEROSET: shards per part file (default 4)"),
        /// Write as aerotensor's converters do ([`plan::metadata_for`]): tensors in name
        /// order, packed back to back, `meta.json` of `model_name`, `architecture` and
        /// `source_format` only (safetensors in, with `uuid`: its converter's bytes).
        pub aerotensor: bool = (OptionKind::Bool, "as aerotensor's converters write: tensors in name order packed back to back, meta.json of model_name, architecture and source_format only"),
    }
}

/// AERO in the codec table.
pub const CODEC: Codec = Codec::new()
    .one_file_sets(write_groups)
    .reader(open, Access::Ranges, "aero")
    .writer(write::write, capabilities)
    .options(AeroOptions::OPTIONS)
    .sets(SetStyle::OneFile)
    .indexed_set(set::HOOKS);

/// A set in one file: each group of tensors a `WTSH` shard ([`write::write_in_shards`]).
fn write_groups(
    src: &dyn TensorSource,
    out: &mut dyn crate::write::WriteSeek,
    opts: &crate::options::WriteOptions,
    groups: &[std::ops::Range<usize>],
) -> Result<crate::write::WriteReport> {
    write::write_in_shards(src, out, opts, Some(groups))
}

impl TensorSource for AeroFile<'_> {
    fn metadata(&self) -> &Metadata {
        AeroFile::metadata(self)
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        AeroFile::tensor_infos(self)
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        self.tensor_read(name)
    }
    fn chunks(&self) -> &[ChunkInfo] {
        self.chunk_infos()
    }
    fn chunk(&self, name: &str) -> Result<Cow<'_, [u8]>> {
        let i = self
            .toc()
            .iter()
            .position(|c| c.name == name)
            .ok_or_else(|| crate::Error::not_found(format!("no chunk named {name:?}")))?;
        if self.verify {
            self.check_chunk(i)?;
        }
        self.chunk_payload(i)
    }
    fn source_format(&self) -> Option<Format> {
        Some(Format::Aero)
    }
    fn raw_extent(&self, name: &str) -> Result<Option<crate::slice::RawExtent<'_>>> {
        self.raw_extent_of(name)
    }
}

impl Container for AeroFile<'_> {
    fn format(&self) -> Format {
        Format::Aero
    }
    fn version(&self) -> String {
        format!(
            "{}.{}",
            self.header().version_major,
            self.header().version_minor
        )
    }
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport {
        verify::verify(self, opts)
    }
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}

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
        other_layouts: true,
        metadata: MetadataSupport::Tree,
        chunks: true,
        compression: &[],
        integrity: &["blake3", "hash_b3", "ihsh", "phsh"],
        zero_copy: true,
        chunk_copies: false,
        typed_metadata: false,
    }
}
