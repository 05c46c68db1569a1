//! HDF5 — a reader for the files h5py writes by default (plain h5py files, Keras
//! `.h5` / `.weights.h5`).
//!
//! # Layout (what we read)
//!
//! | part | what |
//! | --- | --- |
//! | superblock v0 / v1 at byte 0 | signature `\x89HDF\r\n\x1a\n`, versions, sizes of offsets and lengths (2, 4 or 8 bytes), base address, end-of-file address, the root group's symbol table entry |
//! | object header v1 | version 1, message count, header size; messages (type, size, flags) 8-byte aligned; continuation messages (`0x10`) add blocks |
//! | symbol-table group | symbol table message (`0x11`): a B-tree v1 of group nodes (`TREE`, type 0) whose leaves are symbol table nodes (`SNOD`) of entries (name offset in the group's local heap `HEAP`, object header address) |
//! | dataset | dataspace (`0x01`, simple or scalar), datatype (`0x03`), data layout v3 (`0x08`: compact, contiguous, chunked with a B-tree v1 chunk index, type 1), filter pipeline (`0x0B`, v1/v2), fill value (`0x04`/`0x05`) |
//! | attribute | attribute message (`0x0C`, v1–v3) in the object header; variable-length strings in global heap collections (`GCOL`) |
//!
//! A dataset is the tensor named by its path from the root without the leading `/`
//! (`dense/dense/kernel:0`). An attribute is metadata: the root's by its name, a group's
//! or dataset's as `path/name`. Numbers become integers or floats (a 1-D array a list,
//! deeper arrays nested lists), strings (fixed-length or variable-length, ASCII or
//! UTF-8) strings, h5py's bool (an int8 enum `FALSE`/`TRUE`) booleans.
//!
//! # What we support
//!
//! - Datatypes: fixed-point (1, 2, 4, 8 bytes, signed or not) and IEEE floats (2, 4, 8
//!   bytes), either byte order (big-endian data is swapped into owned little-endian
//!   bytes), h5py's bool enum.
//! - Layouts: contiguous (read by range, zero-copy when little-endian), compact,
//!   chunked (chunks placed into the array, partial edge chunks cut, missing chunks
//!   the fill value); filters deflate (`flate2`) and shuffle. A contiguous dataset never
//!   written (undefined address) reads as its fill value.
//! - Open reads the metadata only (superblock, object headers, heaps, group B-trees);
//!   each dataset is read when asked, its chunk B-tree walked then.
//!
//! # What is refused (`Unsupported`, naming what)
//!
//! Superblock v2/v3 and object header v2 (files written with `libver="latest"` or by
//! HDF5 ≥ 1.10 defaults outside h5py), new-style groups (link messages), dense
//! attribute storage, layout message versions other than 3, filters other than deflate
//! and shuffle (named: `lzf`, `fletcher32`, `szip`, `blosc`, …), datatypes other than
//! the above (compound, so complex numbers; opaque, references, arrays, time) for
//! datasets. An attribute of a type we cannot represent is skipped with a warning.
//! Soft links are skipped with a warning (a symbol table entry of cache type 2).
//!
//! # Why a hand-written reader
//!
//! The pure-Rust HDF5 crates are large and their behaviour on hostile input is unknown;
//! libhdf5 bindings need a C library. What h5py writes by default is a small, stable
//! subset, read here with every address, size and count checked against the file and
//! [`crate::limits::Limits`]: metadata reads are bounded by `max_index_bytes` in total,
//! datasets and attributes by `max_entries`, ranks by `max_rank`, names by
//! `max_name_len`, group depth by `max_depth`, decoded bytes by `max_decoded_bytes`
//! (inflation stops at the chunk's size); a group that contains itself (a cycle) is an
//! error, a B-tree node or continuation block reached twice too. HDF5 files written by
//! h5py carry no checksums (fletcher32 is opt-in and refused), so `verify` checks the
//! structure only.

mod read;

pub use read::Hdf5File;

use crate::any::{Access, ReadOptions};
use crate::error::Result;
use crate::formats::Codec;
use crate::model::Container;
use crate::source::SourceRef;

fn open<'d>(src: SourceRef<'d>, opts: &ReadOptions) -> Result<Box<dyn Container + 'd>> {
    Ok(Box::new(Hdf5File::parse(src, opts)?))
}

/// HDF5 in the codec table: a reader only.
pub const CODEC: Codec = Codec::new().reader(open, Access::Ranges, "hdf5");
