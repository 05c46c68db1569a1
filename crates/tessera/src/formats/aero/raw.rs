//! On-disk structures of AERO v0.1, named as the spec names them.

use crate::error::{Error, Result};
use crate::util::bytes::ByteReader;

/// `"AERO"`.
pub const MAGIC: &[u8; 4] = b"AERO";
/// Size of the file header.
pub const HEADER_SIZE: u64 = 96;
/// Size of the TOC header.
pub const TOC_HEADER_SIZE: u64 = 16;
/// Size of one TOC entry.
pub const TOC_ENTRY_SIZE: u64 = 80;
/// Offset of the `blake3_256` field inside a TOC entry.
pub const TOC_HASH_FIELD: u64 = 48;

/// Spec limit: TOC entries per file.
pub const MAX_ENTRY_COUNT: u64 = 1_000_000;
/// Spec limit: string table bytes (512 MiB, as both originals check it).
pub const MAX_STRING_TABLE: u64 = 512 << 20;
/// Spec limit: uncompressed size of a metadata chunk (2 GiB).
pub const MAX_METADATA_ULEN: u64 = 2 << 30;
/// The C++ reader's cap on a tensor name.
pub const MAX_TENSOR_NAME: usize = 4096;
/// The C++ reader's cap on a rank.
pub const MAX_RANK: usize = 32;

/// Chunk flag: payload is zstd-compressed.
pub const COMPRESSED_ZSTD: u32 = 0x1;
/// Chunk flag: should be mapped for performance.
pub const CHUNK_IS_MMAP_CRITICAL: u32 = 0x2;
/// Chunk flag: holds an index structure.
pub const CHUNK_IS_INDEX: u32 = 0x4;
/// Chunk flag: readers may skip it.
pub const CHUNK_IS_OPTIONAL: u32 = 0x8;

/// Default PHSH page size (4 MiB), as the original.
pub const PHSH_PAGE_SIZE_DEFAULT: u64 = 4 << 20;
/// IHSH payload size: msgpack zero-padded to 256 bytes.
pub const IHSH_PAYLOAD_SIZE: usize = 256;
/// Default maximum shard size of the original writer (2 GiB).
pub const DEFAULT_MAX_SHARD: u64 = 2 << 30;

/// The 96-byte file header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHeader {
    /// `0`.
    pub version_major: u16,
    /// `1`.
    pub version_minor: u16,
    /// `96`.
    pub header_size: u32,
    /// Byte offset of the TOC.
    pub toc_offset: u64,
    /// Bytes of the TOC.
    pub toc_length: u64,
    /// Byte offset of the string table.
    pub string_table_offset: u64,
    /// Bytes of the string table (padded).
    pub string_table_length: u64,
    /// Reserved, must be 0.
    pub file_flags: u64,
    /// File identity.
    pub uuid: [u8; 16],
    /// Must be zeros.
    pub reserved: [u8; 28],
}

/// The 16-byte TOC header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TocHeader {
    /// Number of entries.
    pub entry_count: u32,
    /// Must be 0.
    pub reserved0: u32,
    /// Must be 0.
    pub reserved1: u64,
}

/// One 80-byte TOC entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TocEntry {
    /// Chunk type tag.
    pub fourcc: [u8; 4],
    /// Flag bits.
    pub chunk_flags: u32,
    /// Absolute offset of the payload.
    pub chunk_offset: u64,
    /// Stored length.
    pub chunk_length: u64,
    /// Uncompressed length.
    pub chunk_ulen: u64,
    /// Offset of the name in the string table.
    pub name_off: u32,
    /// Length of the name (no NUL).
    pub name_len: u32,
    /// Must be 0.
    pub reserved0: u64,
    /// BLAKE3-256 of the uncompressed payload.
    pub blake3_256: [u8; 32],
}

fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[..N]);
    a
}

impl FileHeader {
    /// Parses the header (the caller checked the magic; the length is checked here).
    pub fn parse(data: &[u8]) -> Result<FileHeader> {
        let mut r = ByteReader::new(data);
        let magic = r.take(4, "magic")?;
        if magic != MAGIC {
            return Err(Error::malformed("bad magic, expected \"AERO\"").at_offset(0));
        }
        Ok(FileHeader {
            version_major: r.u16_le("version_major")?,
            version_minor: r.u16_le("version_minor")?,
            header_size: r.u32_le("header_size")?,
            toc_offset: r.u64_le("toc_offset")?,
            toc_length: r.u64_le("toc_length")?,
            string_table_offset: r.u64_le("string_table_offset")?,
            string_table_length: r.u64_le("string_table_length")?,
            file_flags: r.u64_le("file_flags")?,
            uuid: arr(r.take(16, "uuid")?),
            reserved: arr(r.take(28, "reserved")?),
        })
    }

    /// The 96 bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(96);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&self.version_major.to_le_bytes());
        b.extend_from_slice(&self.version_minor.to_le_bytes());
        b.extend_from_slice(&self.header_size.to_le_bytes());
        for v in [
            self.toc_offset,
            self.toc_length,
            self.string_table_offset,
            self.string_table_length,
            self.file_flags,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&self.uuid);
        b.extend_from_slice(&self.reserved);
        b
    }
}

impl TocHeader {
    /// Parses the TOC header.
    pub fn parse(r: &mut ByteReader<'_>) -> Result<TocHeader> {
        Ok(TocHeader {
            entry_count: r.u32_le("TOC entry_count")?,
            reserved0: r.u32_le("TOC reserved0")?,
            reserved1: r.u64_le("TOC reserved1")?,
        })
    }
    /// The 16 bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(16);
        b.extend_from_slice(&self.entry_count.to_le_bytes());
        b.extend_from_slice(&self.reserved0.to_le_bytes());
        b.extend_from_slice(&self.reserved1.to_le_bytes());
        b
    }
}

impl TocEntry {
    /// Parses one entry.
    pub fn parse(r: &mut ByteReader<'_>) -> Result<TocEntry> {
        Ok(TocEntry {
            fourcc: arr(r.take(4, "fourcc")?),
            chunk_flags: r.u32_le("chunk_flags")?,
            chunk_offset: r.u64_le("chunk_offset")?,
            chunk_length: r.u64_le("chunk_length")?,
            chunk_ulen: r.u64_le("chunk_ulen")?,
            name_off: r.u32_le("name_off")?,
            name_len: r.u32_le("name_len")?,
            reserved0: r.u64_le("reserved0")?,
            blake3_256: arr(r.take(32, "blake3_256")?),
        })
    }
    /// The 80 bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(80);
        b.extend_from_slice(&self.fourcc);
        b.extend_from_slice(&self.chunk_flags.to_le_bytes());
        b.extend_from_slice(&self.chunk_offset.to_le_bytes());
        b.extend_from_slice(&self.chunk_length.to_le_bytes());
        b.extend_from_slice(&self.chunk_ulen.to_le_bytes());
        b.extend_from_slice(&self.name_off.to_le_bytes());
        b.extend_from_slice(&self.name_len.to_le_bytes());
        b.extend_from_slice(&self.reserved0.to_le_bytes());
        b.extend_from_slice(&self.blake3_256);
        b
    }
    /// The fourcc as text (non-ASCII bytes escaped).
    pub fn fourcc_str(&self) -> String {
        fourcc_text(&self.fourcc)
    }
    /// True when the payload is zstd-compressed.
    pub fn is_zstd(&self) -> bool {
        self.chunk_flags & COMPRESSED_ZSTD != 0
    }
}

/// A fourcc as text, non-printable bytes as `\xNN`.
pub fn fourcc_text(f: &[u8; 4]) -> String {
    f.iter()
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                (b as char).to_string()
            } else {
                format!("\\x{b:02x}")
            }
        })
        .collect()
}

/// `v` rounded up to a multiple of `a` (a power of two), checked.
pub fn align_up(v: u64, a: u64) -> Result<u64> {
    v.checked_add(a - 1)
        .map(|x| x & !(a - 1))
        .ok_or_else(|| Error::malformed(format!("offset {v} overflows when aligned")))
}

/// dtype code → (DType, element size), `None` for packed (0x8000) or unknown codes.
pub fn dtype_from_u16(code: u16) -> Option<crate::DType> {
    use crate::DType::*;
    Some(match code {
        0 => F16,
        1 => F32,
        2 => BF16,
        3 => F64,
        4 => I8,
        5 => U8,
        6 => I16,
        7 => U16,
        8 => I32,
        9 => U32,
        10 => I64,
        11 => U64,
        12 => Bool,
        _ => return None,
    })
}

/// TIDX key (after the spec's) under which Tessera keeps tensor attributes AERO has no
/// field for; readers ignore unknown TIDX keys.
pub const TIDX_ATTRS: &str = "tessera_attrs";

/// The packed dtype code (quantized / codec data).
pub const DTYPE_PACKED: u16 = 0x8000;

/// DType → code, `None` for types AERO cannot name.
pub fn dtype_to_u16(d: crate::DType) -> Option<u16> {
    (0u16..=12).find(|&c| dtype_from_u16(c) == Some(d))
}
