//! On-disk structures, named as the spec names them (all big-endian).

use crate::error::{Error, Result};
use crate::util::bytes::ByteReader;

/// `b"FOLDv1\0\0"`.
pub const MAGIC: &[u8; 8] = b"FOLDv1\0\0";
/// Size of the global header (`HEADER_FMT = ">8sIQQ"`).
pub const HEADER_LEN: u64 = 28;
/// Size of a chunk header (`CHUNK_HDR_FMT = ">4sIQQII"`).
pub const CHUNK_HEADER_LEN: u64 = 32;
/// Spec §2.1: hard limit on the JSON index.
pub const MAX_INDEX_SIZE: u64 = 100 * 1024 * 1024;
/// Spec §2.1: per-chunk limit (compressed and decompressed) for untrusted input.
pub const MAX_CHUNK_SIZE: u64 = 1024 * 1024 * 1024;
/// `flags` value: payload stored as is.
pub const FLAG_COMP_NONE: u32 = 0;
/// `flags` value: payload is one zstd frame.
pub const FLAG_COMP_ZSTD: u32 = 1;
/// The index `format` value.
pub const FORMAT_NAME: &str = "fold";
/// The `version` we write.
pub const VERSION: &str = "1.2.0";
/// Versions pyfolds knows; others only warn.
pub const KNOWN_VERSIONS: [&str; 3] = ["1.0.0", "1.1.0", "1.2.0"];

/// The global header at offset 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    /// Must be 28.
    pub header_len: u32,
    /// Absolute offset of the JSON index.
    pub index_off: u64,
    /// Length of the JSON index.
    pub index_len: u64,
}

impl FileHeader {
    /// Parses and checks the header (spec §6.1: size, magic, `header_len == 28`,
    /// `index_off >= header_len`).
    pub fn parse(data: &[u8]) -> Result<FileHeader> {
        if (data.len() as u64) < HEADER_LEN {
            return Err(Error::malformed(format!(
                "truncated header: {} bytes, the header needs {HEADER_LEN}",
                data.len()
            )));
        }
        let mut r = ByteReader::new(data);
        let magic = r.take(8, "magic")?;
        if magic != MAGIC {
            return Err(Error::malformed("bad magic (expected \"FOLDv1\\0\\0\")").at_offset(0));
        }
        let header_len = r.u32_be("header_len")?;
        let index_off = r.u64_be("index_off")?;
        let index_len = r.u64_be("index_len")?;
        if u64::from(header_len) != HEADER_LEN {
            return Err(Error::malformed(format!(
                "header_len is {header_len}, must be {HEADER_LEN}"
            ))
            .at_offset(8));
        }
        if index_off < HEADER_LEN {
            return Err(Error::malformed(format!(
                "index_off {index_off} is inside the header (an unfinished file has 0 here)"
            ))
            .at_offset(12));
        }
        Ok(FileHeader {
            header_len,
            index_off,
            index_len,
        })
    }

    /// The 28 header bytes.
    pub fn to_bytes(&self) -> [u8; 28] {
        let mut b = [0u8; 28];
        b[..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&self.header_len.to_be_bytes());
        b[12..20].copy_from_slice(&self.index_off.to_be_bytes());
        b[20..28].copy_from_slice(&self.index_len.to_be_bytes());
        b
    }
}

/// The 32-byte header before each chunk's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    /// Four ASCII bytes (`TSAV`, `JSON`, `NPZ0`, `STEN`, …).
    pub ctype: [u8; 4],
    /// 0 = none, 1 = zstd.
    pub flags: u32,
    /// Size after decompression.
    pub uncomp_len: u64,
    /// Size of the stored payload.
    pub comp_len: u64,
    /// CRC-32C of the stored payload.
    pub crc32c: u32,
    /// Size of the parity bytes after the payload.
    pub ecc_len: u32,
}

impl ChunkHeader {
    /// Parses a chunk header from its 32 bytes.
    pub fn parse(b: &[u8]) -> Result<ChunkHeader> {
        let mut r = ByteReader::new(b);
        let mut ctype = [0u8; 4];
        ctype.copy_from_slice(r.take(4, "ctype")?);
        Ok(ChunkHeader {
            ctype,
            flags: r.u32_be("flags")?,
            uncomp_len: r.u64_be("uncomp_len")?,
            comp_len: r.u64_be("comp_len")?,
            crc32c: r.u32_be("crc32c")?,
            ecc_len: r.u32_be("ecc_len")?,
        })
    }

    /// The 32 header bytes.
    pub fn to_bytes(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        b[..4].copy_from_slice(&self.ctype);
        b[4..8].copy_from_slice(&self.flags.to_be_bytes());
        b[8..16].copy_from_slice(&self.uncomp_len.to_be_bytes());
        b[16..24].copy_from_slice(&self.comp_len.to_be_bytes());
        b[24..28].copy_from_slice(&self.crc32c.to_be_bytes());
        b[28..32].copy_from_slice(&self.ecc_len.to_be_bytes());
        b
    }
}

/// A `ctype` for display: the four bytes when printable ASCII, else hex.
pub fn ctype_str(c: &[u8; 4]) -> String {
    if c.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        c.iter().map(|b| *b as char).collect()
    } else {
        crate::util::hex(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_checks() {
        // The header of pyfolds102_zstd.fold as ORIGINALS.md §1.2 shows it.
        let real =
            crate::util::unhex("464f4c44763100000000001c00000000000001800000000000000341").unwrap();
        let h = FileHeader::parse(&real).unwrap();
        assert_eq!((h.index_off, h.index_len), (0x180, 0x341));
        assert_eq!(h.to_bytes().as_slice(), real.as_slice());
        let mut bad = real.clone();
        bad[11] = 29;
        assert!(FileHeader::parse(&bad)
            .unwrap_err()
            .to_string()
            .contains("header_len"));
        let mut unfinished = real.clone();
        unfinished[12..28].fill(0);
        assert!(FileHeader::parse(&unfinished).is_err());
        assert!(FileHeader::parse(&real[..27]).is_err());
    }
}
