//! zTensor v1.0 (`ZTEN1000`), read and written; v1.1 files (footer magic) read too.
//!
//! # Byte layout
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 8 | magic `ZTEN1000` |
//! | 8 | … | components: each starts at a multiple of 64, zero padding before it |
//! | `S - 8 - n` | n | CBOR manifest (right after the last component, unaligned) |
//! | `S - 8` | 8 | `n`, u64 little-endian |
//! | (`S`) | (8) | (v1.1 only: footer magic `ZTEN1000`; then `n` sits at `S - 16`) |
//!
//! The manifest is a CBOR map `{version, generator, attributes, tensors}`; each tensor
//! is `{dtype, shape, format, components}` and each component `{offset, length
//! [, encoding][, digest]}`. Layouts: `dense` (`data`), `sparse_csr`
//! (`values`, `indices` u64, `indptr` u64), `sparse_coo` (`values`, `coords` u64,
//! ndim × nnz row-major), and any other name, kept as [`crate::Layout::Other`] with its
//! components as parts, in sorted order.
//!
//! # Reading ([`ZtensorFile`])
//!
//! Every check of spec §7.1 and more, each a clear error naming the tensor and offset:
//! magic; `manifest_size` within the file (and under `Limits::max_index_bytes`); the
//! manifest is one CBOR map with no trailing bytes, walked by our own CBOR cursor
//! (item heads read in place, texts borrowed) into our own structs (every length checked against the bytes left before
//! allocating, nesting limited, duplicate keys rejected in O(n log n), indefinite
//! lengths refused); version per §6.1 (`1.0` read, a newer `1.x` read with a warning in
//! [`crate::Container::warnings`], `2.x` and other majors an `UnsupportedVersion`
//! error, "zTensor v2 is not supported"; a `1.x` file with x ≥ 1 but without the v1.1
//! footer magic is read by the v1.0 rule with a second warning, as §6.1's "warn,
//! proceed" asks, not refused); dtype
//! known; rank, names and counts within [`crate::Limits`]; shape products checked for
//! overflow; every component inside the data area (`8 <= offset`, `offset + length <=`
//! manifest start, no overflow); required components present; raw dense `length ==
//! product(shape) * dtype_size`; CSR 2-D. Reading a tensor also validates sparse
//! structure (indptr monotone from 0 to nnz, indices in range).
//!
//! Raw components are borrowed from the file (zero-copy). zstd components are decoded as
//! a stream (the original's frames carry no content size), bounded: dense `data` must
//! decode to exactly `product(shape) * dtype_size` (which must be within
//! `Limits::max_decoded_bytes`); sparse components to at most what `numel` allows
//! (`nnz <= numel`), CSR `indptr` to exactly `(rows + 1) * 8`; other components to at
//! most `Limits::max_decoded_bytes` and `32768 ×` their stored length (no zstd frame
//! expands more than that).
//!
//! `verify` checks `crc32c:` (hex in either case, `0x` optional) and `sha256:` digests
//! over the stored bytes, per component; other algorithms are reported "not checked",
//! a tensor without any digest too. Tensors that need decoding (zstd, sparse) get a
//! `structure` check (decode + validate). Non-zero bytes between the components (the
//! spec requires zero padding) are reported as a verify warning.
//!
//! Reads are checked too: with `ReadOptions::verify` (the default) `tensor()` checks
//! every stored `crc32c`/`sha256` digest of the tensor's components before returning
//! them (once per tensor; raw components stay borrowed), an `Integrity` error naming
//! the tensor, component and algorithm otherwise; an unknown algorithm is let through
//! (it cannot be checked) and shows as "not checked" in `verify`.
//!
//! Attributes become the file [`crate::Metadata`]: string values as they are (a string
//! that looks like JSON stays a string); other CBOR values, which the original reader
//! rejects, are read into our value tree rather than refused.
//!
//! zTensor v1.1 (`ztensor` 1.0.2 on PyPI, crate 1.1): the footer magic, `objects` for
//! `tensors`, per-component `dtype` (short names `f32`, `i64`, …), per-object
//! `attributes` (kept as tensor attrs) are read; sparse index components of a narrower
//! integer dtype are widened to u64. A v2 file (`\x89ZT2…`) is detected by
//! [`crate::Format`] and refused as not supported.
//!
//! # Deviations from the spec and the original, and why
//!
//! - `manifest_size == FILE_SIZE - 16` is accepted (§7.1 says `<`): it is what a file
//!   with no components is, and the original writes and accepts it.
//! - Unaligned component offsets are accepted with a warning (§7.1: SHOULD warn). The
//!   original reader refuses them; a misaligned raw tensor is still read zero-copy (the
//!   borrowed slice is simply not 64-byte aligned).
//! - Components may not overlap the magic, the manifest or each other (empty ones
//!   aside); the original checks none of this. Overlaps would let a small file make
//!   `verify` hash, or a reader decode, the same bytes again and again.
//! - A known layout with extra components keeps them as extra parts, with a warning.
//! - An unknown `encoding` lists the tensor but reading it is `Unsupported`.
//! - Attribute values other than strings are read (the original fails on them).
//! - Tensors are listed in file order (by the offset of their first component), not in
//!   the manifest's name order, so a same-format rewrite gives back the same bytes.
//! - Warnings are capped at 32 per file (a hostile file could raise one per component).
//!
//! # Writing ([`ZtensorWriter`], streaming)
//!
//! Byte-compatible with ztensor 1.0.0 (crate) / 1.0.1 (PyPI): magic; each component
//! zero-padded to the next multiple of 64 and written in layout order (CSR `values,
//! indices, indptr`; COO `values, coords`; other layouts: their parts in order), tensors
//! in source order; the manifest right after the last component, then its u64 LE size.
//! The manifest is a definite-length CBOR map with minimal integers in the key order
//! `version, generator, attributes, tensors`, `version` `"1.0"`, `tensors` and
//! `components` sorted by key, `encoding` omitted for raw, `"zstd"` otherwise (a
//! streaming frame without content size, as `zstd::encode_all` writes), `digest`
//! `crc32c:0x%08X` (uppercase; the default, so `verify` has something to check — the
//! original stores none unless asked) or `sha256:<lowercase hex>` over the stored
//! bytes, none with `digests=none`. One digest per component, so asking for both is an
//! error.
//!
//! - `generator` is `tessera v<version>` (the original writes `zTensor-Rust v0.1.0`);
//!   everything else is byte-identical for the same tensors.
//! - Metadata: string values as they are, any other value as its JSON text.
//! - Per-tensor attributes (`requires_grad`, `ggml_type`, …): zTensor v1.0 has no place
//!   for them; they are dropped and each drop is listed in the write report (printed by
//!   `tessera convert`).
//! - A scalar is written with shape `[]` (the original's reader reads it as 1 element;
//!   its Python writer stores a 0-d array as `[1]`).
//! - dtypes: the 13 of the spec; others are refused (`tessera convert --cast`).

mod entry;
mod manifest;
mod raw;
mod read;
mod write;

pub use entry::{Component, Encoding};
pub use raw::{dtype_from_name, dtype_name, parse_digest, ParsedDigest, ALIGNMENT, MAGIC};
pub use read::ZtensorFile;
pub use write::{write, ZtensorWriter, GENERATOR};

use crate::any::{Access, ReadOptions};
use crate::dtype::DType;
use crate::error::Result;
use crate::format::Format;
use crate::formats::Codec;
use crate::model::Container;
use crate::options;
use crate::source::SourceRef;
use crate::write::{Capabilities, MetadataSupport};

fn open<'d>(src: SourceRef<'d>, opts: &ReadOptions) -> Result<Box<dyn Container + 'd>> {
    Ok(Box::new(ZtensorFile::parse(src, opts)?))
}

/// zTensor v1 in the codec table.
pub const CODEC: Codec = Codec::new()
    .reader(open, Access::Ranges, "ztensor")
    .writer(write, capabilities)
    .options(&[options::COMPRESSION, options::DIGESTS]);

/// What zTensor v1.0 can hold.
pub fn capabilities() -> Capabilities {
    Capabilities {
        format: Format::Ztensor,
        dtypes: &[
            DType::F32,
            DType::F16,
            DType::F64,
            DType::BF16,
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
        sparse: true,
        other_layouts: true,
        metadata: MetadataSupport::Strings,
        chunks: false,
        compression: &["zstd"],
        integrity: &["crc32c", "sha256"],
        zero_copy: true,
        chunk_copies: false,
        typed_metadata: false,
    }
}
