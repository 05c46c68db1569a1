//! NumPy `.npy` and `.npz` — reader and writers, compatible with `np.save`, `np.savez`,
//! `np.savez_compressed` and `np.load`.
//!
//! # `.npy` layout
//!
//! | bytes | what |
//! | --- | --- |
//! | 0..6 | magic `\x93NUMPY` |
//! | 6, 7 | version major, minor: 1.0, 2.0 or 3.0 |
//! | 8..10 (v1) / 8..12 (v2, v3) | header length, u16 / u32 little-endian |
//! | then | the header: a Python dict literal `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }` padded with spaces and a `\n` (latin-1 in v1/v2, UTF-8 in v3) |
//! | then | the array bytes, `size(descr) × Π shape` of them |
//!
//! The header dict is parsed by a small strict hand-written parser (`header.rs`): no
//! crate parses NumPy's header, which is a Python literal, not JSON. It accepts what
//! `ast.literal_eval` would for the three keys — single or double quotes, whitespace,
//! a trailing comma, Python 2 `L` suffixes — and nothing else: exactly the keys `descr`,
//! `fortran_order`, `shape`, no duplicates, no escapes, no trailing text.
//!
//! # `.npz` layout
//!
//! A zip archive of `NAME.npy` members, stored (`np.savez`) or deflated
//! (`np.savez_compressed`). The zip directory is parsed by the `zip` crate over a
//! `Read + Seek` view of the source (opening reads the directory, the local headers and
//! each member's `.npy` header, never array data); member data is read by range when
//! asked (stored members zero-copy from an in-memory source) or inflated with `flate2`,
//! never past the size the directory declares. The zip CRC-32 of each member
//! is its integrity layer: `verify` checks it for every member; reading a deflated
//! member checks it too (a zero-copy read of a stored member does not: that is what
//! `verify` is for).
//!
//! # What we support
//!
//! - dtypes `b1`, `u1`–`u8`, `i1`–`i8`, `f2`, `f4`, `f8`, `c8`, `c16` in either byte
//!   order; big-endian arrays are swapped into owned little-endian bytes.
//! - `fortran_order: True` arrays are transposed into owned C-order bytes.
//! - Little-endian C-order arrays are zero-copy (`.npy`, and stored `.npz` members).
//! - bf16 and fp8 as ml_dtypes saves them. ml_dtypes' `np.save` writes `<V2` for
//!   bfloat16, `<f1` for float8_e5m2 and `<V1` for every other 1-byte type
//!   (float8_e4m3fn, e4m3fnuz, e5m2fnuz, e8m0fnu, int4, …). We read `<f1` as f8_e5m2,
//!   `<V2` as bf16 and `<V1` as f8_e4m3fn; the last two are guesses (a plain NumPy
//!   2-byte or 1-byte void reads the same way) and the reader says so in its warnings.
//! - Writing: exactly what `np.save` writes (header bytes included: sorted keys, reprs,
//!   the 21-digit growth padding, 64-byte alignment, version 1.0 unless the header
//!   needs 2.0), with bf16 as `<V2` and **every** fp8 flavour as `<V1`, because NumPy
//!   cannot load ml_dtypes' `<f1`. `np.load` gives a void array with the exact bytes;
//!   `.view(ml_dtypes.bfloat16)` (or the fp8 type) gives the values. Only bf16 and
//!   f8_e4m3fn come back as themselves, so `capabilities()` lists no other fp8 type and
//!   a conversion of one into NumPy needs `--cast`; `extract` writes them as `<V1`.
//!
//! # Choices
//!
//! - A `.npy` file's one tensor is named `array` (the file holds no name; the file stem
//!   would make the same array differ between two files in `diff`). Writing `.npy`
//!   needs a source of exactly one tensor.
//! - An `.npz` member `NAME.npy` is the tensor `NAME` (as `np.load(...)[NAME]`); names
//!   may contain `/`. Writing refuses names that are empty, absolute or contain `..`.
//! - Compression: `.npz` members are stored by default; **any** compression request
//!   (`--compress zstd` or `zstd:L`) gives deflate, the only method NumPy reads, at level
//!   L clamped to 1–9 (so 3 by default: on float weights it compresses about as well as
//!   NumPy's level 6 at several times the speed); `.npy` has none.
//! - Output is deterministic: zip timestamps are fixed at 1980-01-01 00:00, permissions
//!   0644, zip64 only for members of 4 GiB or more.
//! - No file metadata and no per-tensor attributes: conversions need
//!   `--drop-metadata`; attributes are dropped with a note.
//!
//! # Hostile input
//!
//! Header length ≤ `Limits::max_index_bytes`, rank ≤ `max_rank`, data size checked
//! (`checked_mul`) and ≤ `max_decoded_bytes`, data present in the file; bytes after the
//! data are ignored with a warning (as `np.load` does). In `.npz`: entry count ≤
//! `max_entries`; every member's data range inside the file; stored members' sizes must
//! agree; declared sizes ≤ `max_decoded_bytes`; inflation stops at the declared size
//! (zip bombs end there); duplicate entry names, absolute or `..` paths, encrypted
//! entries, other compression methods and non-`.npy` members are errors.

mod header;
mod npz;
mod read;
mod write;
mod zipsrc;

pub use header::{descr_for, dtype_from_descr, ByteOrder, NpyHeader};
pub use npz::NpzFile;
pub use read::{NpyFile, NPY_TENSOR_NAME};
pub use write::NpzWriter;
#[cfg(feature = "fold")]
pub(crate) use zipsrc::SourceReader;

use crate::any::{Access, ReadOptions};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::formats::Codec;
use crate::model::Container;
use crate::options;
use crate::source::SourceRef;
use crate::write::SetStyle;
use crate::write::{Capabilities, MetadataSupport};

fn open<'d>(src: SourceRef<'d>, opts: &ReadOptions) -> Result<Box<dyn Container + 'd>> {
    let head = src.read_up_to(0, crate::format::DETECT_LEN as u64)?;
    match Format::detect(&head) {
        Some(Format::Npy) => Ok(Box::new(NpyFile::parse(src, opts)?)),
        Some(Format::Npz) => Ok(Box::new(NpzFile::parse(src, opts)?)),
        _ => Err(Error::malformed(
            "neither a .npy (\\x93NUMPY) nor a zip (PK) file",
        )),
    }
}

/// NumPy `.npy` in the codec table (one array per file).
pub const NPY_CODEC: Codec = Codec::new()
    .reader(open, Access::Ranges, "npy")
    .writer(write::write_npy, || capabilities(Format::Npy))
    .sets(SetStyle::None);

/// NumPy `.npz` (a zip of `.npy` members) in the codec table.
pub const NPZ_CODEC: Codec = Codec::new()
    .reader(open, Access::Ranges, "npy")
    .writer(write::write_npz, || capabilities(Format::Npz))
    .options(&[options::COMPRESSION]);

/// The dtypes that survive a NumPy round trip (see the module docs on fp8).
const DTYPES: &[DType] = &[
    DType::Bool,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
    DType::F8E4M3FN,
    DType::C64,
    DType::C128,
];

/// What NumPy .npy/.npz can hold.
pub fn capabilities(format: Format) -> Capabilities {
    Capabilities {
        format,
        dtypes: DTYPES,
        sparse: false,
        other_layouts: false,
        metadata: MetadataSupport::None,
        chunks: false,
        compression: if format == Format::Npz {
            &["deflate"]
        } else {
            &[]
        },
        integrity: if format == Format::Npz {
            &["crc32"]
        } else {
            &[]
        },
        zero_copy: true,
        chunk_copies: false,
        typed_metadata: false,
    }
}
