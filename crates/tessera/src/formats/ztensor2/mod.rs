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
//! CBOR deterministic ([`cbor`]: shortest heads and floats, one NaN, sorted keys, no
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
//! read; logical types onto [`crate::DType`] (`bool`, the five fp8 types,
//! `complex64`/`128`). Every other layout (`zt.quant_group/1`, `zt.mx/1`, `gguf.*/1`,
//! vendor ids) and a dense or sparse object whose type has no DType (`f4_e2m1`, unknown
//! types) is [`Layout::Other`](crate::Layout) with the layout id and every part kept
//! raw, never dropped; the attribute `zt.part_types` (part → `dtype` or `dtype:type`)
//! records the part types so a rewrite states them again.
//!
//! A tensor read returns raw parts borrowed from an in-memory source (zero-copy) and
//! `zt.zstd-seekable/1` parts decoded to exactly `decoded_length` (bounded by
//! `Limits::max_decoded_bytes`). With `ReadOptions::verify` every `xxh3`/`sha256`
//! digest is checked over the decoded bytes before they are handed out, once per tensor
//! (an `Integrity` error naming the tensor and part); other algorithms pass unchecked.
//! Data rules: `bool` bytes 0/1, the odd trailing `f4_e2m1` nibble zero, CSR/COO
//! structure (indices in range, indptr monotone). `verify` reports the manifest hash,
//! each part's digest, and each tensor's structure.
//!
//! # Deviations from the spec, and why
//!
//! - Parts stored in another shard are listed but reading them is `Unsupported`: a
//!   reader over one source cannot open sibling files. Their references are still
//!   checked against the shard table's sizes. A data shard (no manifest) opens with no
//!   tensors and a warning.
//! - `zt.zstd-seekable/1` is decoded as one stream (every frame, the seek table
//!   skipped as a skippable frame); the frame rules (checksums present, ≤ 16 MiB, equal
//!   sizes) are not checked, zstd checks each checksum that is present.
//! - Padding bytes are not read (the spec lets readers ignore them).
//! - Names are not checked for NFC (the spec leaves that to writers).

mod cbor;
mod layout;
mod raw;
mod read;

pub use layout::{COO, CSR, PART_TYPES};
pub use raw::{Digest, Footer, PartRef, ALIGN_CANONICAL, ALIGN_FLOOR, FOOTER_LEN, MAGIC};
pub use read::{Ztensor2File, ZSTD_SEEKABLE};

use crate::any::{OpenFn, ReadOptions};
use crate::error::Result;
use crate::model::Container;
use crate::source::SourceRef;

fn open<'d>(src: SourceRef<'d>, opts: &ReadOptions) -> Result<Box<dyn Container + 'd>> {
    Ok(Box::new(Ztensor2File::parse(src, opts)?))
}

/// Reader entry point.
pub const OPEN: Option<OpenFn> = Some(open);
