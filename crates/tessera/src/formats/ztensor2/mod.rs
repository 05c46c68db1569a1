//! zTensor v2 (`\x89ZT2\r\n\x1a\n`, footer version 2), read by range.
//!
//! # Byte layout (spec `ztensor-v2-spec.md`, Draft 4)
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 8 | magic `89 5A 54 32 0D 0A 1A 0A` |
//! | 8 | … | blob heap: every blob at a multiple of 4096, at or past 4096 (canonical: 65536); zero padding between |
//! | `manifest_offset` | `manifest_length` | the manifest blob: one deterministic-CBOR map |
//! | `S - 40` | 8 | `manifest_offset`, u64 LE (0 in a data shard) |
//! | `S - 32` | 8 | `manifest_length`, u64 LE |
//! | `S - 24` | 8 | `manifest_hash`, XXH3-64 of the manifest bytes, u64 LE |
//! | `S - 16` | 4 | `version`, u32 LE, `2` |
//! | `S - 12` | 4 | reserved (ignored) |
//! | `S - 8` | 8 | the magic again |
//!
//! Manifest: `{attributes?, shards?, objects}`; an object is `{shape, layout,
//! attributes?, parts}`, a part `{dtype, type?, blob: [offset, length], shard?,
//! encoding?, decoded_length?, digest?}`. Digests (`xxh3:<16 hex>`, `sha256:<64 hex>`)
//! cover the decoded bytes.
//!
//! # Reading ([`Ztensor2File`])
//!
//! Opening reads two ranges, the footer and the manifest, and checks spec §3.6: magic
//! at both ends, footer version 2, manifest inside the data region, 4096-aligned, at
//! most 1 GiB (and `Limits::max_index_bytes`), its XXH3-64 (an `Integrity` error); the
//! CBOR deterministic (`cbor.rs`: shortest heads and floats, one NaN, sorted keys, no
//! duplicates, no tags or indefinite lengths, 32 levels); the schema (required fields,
//! `blob` of exactly two integers, `decoded_length` iff `encoding`, logical type on its
//! required dtype, names 1..=1024 bytes without NUL, rank ≤ 64, shape product without
//! overflow, attributes maps with text keys, shard names, every `shard` in the table);
//! every blob 4096-aligned, ≥ 4096, inside its file's data region; blob references into
//! one file (the manifest included) identical or disjoint; the layout rules of `dense`
//! (one `data` part, the size equation), `zt.sparse_csr/1` and `zt.sparse_coo/1` (exact
//! parts, u32/u64 index parts, size equations).
//!
//! Tensors (listed in name order): `dense` → [`Layout::Dense`](crate::Layout); the
//! sparse profiles → `SparseCsr` / `SparseCoo` with u32 index parts widened to u64 on
//! read, their stored type kept in the `zt.part_types` attribute so that a v2 rewrite
//! stores them as u32 again (both index parts, when every index fits); logical types onto [`crate::DType`] (`bool`, the five fp8 types, `f4_e2m1`
//! (two per byte, low nibble first, as [`DType::F4E2M1`] stores it), `complex64`/`128`).
//! A sparse object whose values are `f4_e2m1` is kept raw like an unknown layout (below).
//! A `dense` object whose type has no DType (a type from a later spec such as
//! `x.future/1`) is
//! [`Layout::undecoded`](crate::Layout::undecoded) (`dense:x.future/1`): its logical shape,
//! its storage type as dtype, its stored bytes as the part, the type as what `inspect`
//! and Python show (`dtype_label`); it is rewritten as the same object, carried by
//! formats that keep layouts by name (FOLD, zTensor v1, AERO when stored as u8) and
//! refused by the others naming the type. Every other layout (`zt.quant_group/1`,
//! `zt.mx/1`, `gguf.*/1`, vendor ids) and a sparse object whose values have no DType is
//! [`Layout::Other`](crate::Layout) with the layout id and every part kept raw, never
//! dropped; the attribute `zt.part_types` (part → `dtype` or `dtype:type`) records the
//! part types so a rewrite states them again.
//!
//! A tensor read returns raw parts borrowed from an in-memory source (zero-copy) and
//! `zt.zstd-seekable/1` parts decoded to exactly `decoded_length` (bounded by
//! `Limits::max_decoded_bytes`). With `ReadOptions::verify` every `xxh3`/`sha256`
//! digest is checked over the decoded bytes before they are handed out, once per tensor
//! (an `Integrity` error naming the tensor and part); other algorithms pass unchecked.
//! Data rules: `bool` bytes 0/1, the odd trailing `f4_e2m1` nibble zero, CSR/COO
//! structure (indices in range, indptr monotone from 0 to nnz, CSR column indices
//! strictly increasing within a row, COO coordinates unique). A data shard's footer
//! must have offset and hash 0 with its length 0. `verify` reports the manifest hash,
//! each part's digest, and each tensor's structure.
//!
//! Tested against files ztensor 2.1.2 wrote (`tests/data/ztensor2/gen.py`) and the
//! reference conformance corpus (`tests/data/ztensor2/conformance/`): every valid file
//! opens, every reject file is refused at open, on read or in `verify`.
//!
//! # Writing ([`Ztensor2Writer`], streaming)
//!
//! Canonical form (spec §6.3), byte-identical to ztensor 2.1.2's canonical `Writer`
//! for the same tensors: the magic; objects in ascending name order (the writer sorts
//! the source's names; [`Ztensor2Writer::add_tensor`] refuses another order), each
//! object's parts in part-name order, each blob at the next 64 KiB boundary (the first
//! at 65536) with zero padding, a part whose bytes equal an earlier part's sharing that
//! blob (found by XXH3-128 and length, confirmed on the bytes, reread from the source
//! so no blob is kept in memory), an `xxh3` digest on every part; then the manifest
//! blob at the next boundary and the footer. The manifest is deterministic CBOR
//! (`attributes` only when the file has metadata; per object `shape`, `layout`,
//! `attributes` only when it has some, `parts`; per part `dtype`, `type` when the
//! dtype is a logical type, `blob`, `digest`). Memory stays near two read-ahead batches
//! ([`crate::write::drive`]).
//!
//! Tessera's dtypes map to `(dtype, type)`: the 12 storage types as themselves, `bool`
//! and the fp8 types to `u8` + their logical type, `c64`/`c128` to `f32`/`f64` +
//! `complex64`/`complex128`. CSR/COO go out as `zt.sparse_csr/1`/`zt.sparse_coo/1`
//! with u64 index parts; an undecoded `dense:<type>` as `dense` with its dtype and
//! `type`; other layouts under their own id with the part types from `zt.part_types`
//! (the attribute itself is not written). Metadata and tensor
//! attributes become CBOR maps (integers, floats in their shortest width, strings,
//! bytes, lists, maps).
//!
//! On request, non-canonical files: `Compression::Zstd` writes every part as
//! `zt.zstd-seekable/1` (checksummed 1 MiB frames and the seek table, as ztensor
//! 2.1.2 lays them out; a part's frames are compressed on every core and concatenated
//! in order) with `decoded_length`; `Digest::Sha256` writes `sha256`
//! digests instead of `xxh3`. `Digest::Crc32c` has no v2 counterpart: xxh3 is written
//! and the report says so.
//!
//! Shard sets (spec §7, not canonical form: rule 6): [`Ztensor2Writer::finish_data_shard`]
//! ends a data shard (blobs, then a footer with no manifest) and hands back its
//! objects; [`Ztensor2Writer::add_shard`] states them in a root's manifest with
//! `"shard": name` on every part and adds the table entry (size, whole-file digest).
//! `set::convert_set` drives them (`--max-shard-size` / `--shards` with `--to
//! ztensor2`): data shards `<stem>-0000i-of-0000n.zt` named `0000i-of-0000n`, SHA-256
//! shard digests, the root `<stem>.zt` holding no blobs of its own. Identical parts are
//! shared within a shard, not across shards.
//!
//! # `zt.content/1`
//!
//! [`Ztensor2File::content_digest`]: the model's content digest as the reference
//! implementation defines it (`content.rs`), from the manifest alone: equal for a model
//! in one file or a shard set, raw or zstd, whenever the part digests use one
//! algorithm. Not in ztensor 2.1.2 (nor in its Python API); checked against a value
//! computed by Python (`cbor2`, `hashlib`) in `tests/data/ztensor2/shards/gen.py`.
//!
//! # Deviations from the spec, and why
//!
//! - A layout that is not a registered id (a GGUF tensor's `ggml_q8_0`, say) is written
//!   under that name; the spec asks vendors for a namespaced id, and no mapping to
//!   `gguf.<type>/1` is made yet.
//! - The writer does not check names for NFC (canonical form requires it; the names
//!   come from a file that was read, and ztensor 2.1.2 refuses non-NFC names).
//!
//! - Shards (spec §7): a reader over one source cannot open sibling files, so the root
//!   alone lists every tensor and refuses (`Unsupported`, naming the shard) to read a
//!   part stored in a shard; references into shards are still checked against the
//!   table's sizes. Opened by path (`set/zt2_shards.rs`, positional resolution
//!   `<stem>-<name>.zt`), the shard files are handed to
//!   [`Ztensor2File::with_shards`], which checks each one's size against the table and
//!   its footer (magic, version), and their parts read as the root's (digests checked
//!   as for local parts). The whole-file shard digest (`xxh3` or `sha256`) is checked by
//!   `verify` (layer `shard digest`) and by a checked read, once per shard, before the
//!   first part read from it (the whole shard is hashed then, lazily: opening hashes
//!   nothing); another algorithm is not checked (as for part digests). When the
//!   positional file is missing or of
//!   another size, the opener falls back to the spec's resolution by identity (a file
//!   in the same directory with the table's size and whole-file digest; see
//!   `set/zt2_shards.rs`). A data shard (no manifest) opens with no tensors and a
//!   warning.
//! - `zt.zstd-seekable/1` is decoded as one stream (every frame, the seek table
//!   skipped as a skippable frame); the frame rules (checksums present, ≤ 16 MiB, equal
//!   sizes) are not checked, zstd checks each checksum that is present.
//! - Padding bytes are not read (the spec lets readers ignore them).
//! - Names are not checked for NFC (the spec leaves that to writers).

mod cbor;
mod content;
mod layout;
mod raw;
mod read;
pub mod shards;
mod write;

pub use layout::{COO, CSR, PART_TYPES};
pub use raw::{Digest, Footer, PartRef, ALIGN_CANONICAL, ALIGN_FLOOR, FOOTER_LEN, MAGIC};
pub use read::{Ztensor2File, ZSTD_SEEKABLE};
pub use write::{write, ShardObjects, Ztensor2Writer};

use crate::any::{Access, ReadOptions};
use crate::dtype::DType;
use crate::error::Result;
use crate::format::Format;
use crate::formats::Codec;
use crate::model::Container;
use crate::options;
use crate::source::SourceRef;
use crate::write::SetStyle;
use crate::write::{Capabilities, MetadataSupport};

fn open<'d>(src: SourceRef<'d>, opts: &ReadOptions) -> Result<Box<dyn Container + 'd>> {
    Ok(Box::new(Ztensor2File::parse(src, opts)?))
}

/// zTensor v2 in the codec table. `.zt` stays v1's extension: v2 is picked by
/// `--to ztensor2` (or `ztensor-v2`) or `--zt-version 2`.
pub const CODEC: Codec = Codec::new()
    .shard_table(shards::HOOKS)
    .reader(open, Access::Ranges, "ztensor2")
    .writer(write, capabilities)
    .options(&[options::COMPRESSION, options::DIGESTS])
    .sets(SetStyle::ShardTable);

/// The dtypes zTensor v2 holds.
const DTYPES: [DType; 21] = {
    let mut out = [DType::Bool; 21];
    let (mut i, mut o) = (0, 0);
    while i < DType::ALL.len() {
        if !matches!(DType::ALL[i], DType::F6E2M3 | DType::F6E3M2) {
            out[o] = DType::ALL[i];
            o += 1;
        }
        i += 1;
    }
    out
};

/// What zTensor v2 can hold.
pub fn capabilities() -> Capabilities {
    Capabilities {
        format: Format::ZtensorV2,
        // Every dtype but the 6-bit floats, which Appendix A does not register.
        dtypes: &DTYPES,
        sparse: true,
        other_layouts: true,
        metadata: MetadataSupport::Tree,
        chunks: false,
        compression: &["zt.zstd-seekable/1"],
        integrity: &["xxh3", "sha256", "manifest xxh3-64"],
        zero_copy: true,
        chunk_copies: false,
        typed_metadata: false,
    }
}
