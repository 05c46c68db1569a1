//! On-disk pieces of GPTRS v2, named as the spec names them: the two magics, the
//! version, the dtype tags, one index entry, and `BaseParamId`.

use crate::dtype::DType;
use crate::error::{Error, Result};

/// Magic of a checkpoint.
pub const MAGIC_CHECKPOINT: &[u8; 8] = b"GPTRSCHK";
/// Magic of a tensor archive.
pub const MAGIC_ARCHIVE: &[u8; 8] = b"GPTRSTEN";
/// The only version this module reads and writes.
pub const VERSION: u32 = 2;

/// Smallest index entry of a checkpoint: name_len, base_id, rank, dtype_tag,
/// requires_grad, offset_abs, byte_len (empty name, rank 0).
pub const MIN_ENTRY_CHECKPOINT: u64 = 4 + 16 + 4 + 4 + 1 + 8 + 8;
/// Smallest index entry of an archive (no base_id).
pub const MIN_ENTRY_ARCHIVE: u64 = 4 + 4 + 4 + 1 + 8 + 8;

/// Which of the two GPTRS files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `GPTRSCHK`: config JSON, index with base ids, data.
    Checkpoint,
    /// `GPTRSTEN`: index without base ids, data.
    Archive,
}

impl Kind {
    /// The magic bytes.
    pub const fn magic(self) -> &'static [u8; 8] {
        match self {
            Kind::Checkpoint => MAGIC_CHECKPOINT,
            Kind::Archive => MAGIC_ARCHIVE,
        }
    }
    /// The format it is.
    pub const fn format(self) -> crate::format::Format {
        match self {
            Kind::Checkpoint => crate::format::Format::GptrsCheckpoint,
            Kind::Archive => crate::format::Format::GptrsArchive,
        }
    }
    /// True when index entries carry a `stored_base_id`.
    pub const fn has_base_id(self) -> bool {
        matches!(self, Kind::Checkpoint)
    }
    /// The smallest possible index entry.
    pub const fn min_entry(self) -> u64 {
        match self {
            Kind::Checkpoint => MIN_ENTRY_CHECKPOINT,
            Kind::Archive => MIN_ENTRY_ARCHIVE,
        }
    }
}

/// `dtype_tag` → dtype: 0 f32, 1 f16, 2 bf16, 3 i32.
pub fn dtype_from_tag(tag: u32) -> Option<DType> {
    Some(match tag {
        0 => DType::F32,
        1 => DType::F16,
        2 => DType::BF16,
        3 => DType::I32,
        _ => return None,
    })
}

/// dtype → `dtype_tag`, `None` for dtypes GPTRS cannot hold.
pub fn tag_from_dtype(d: DType) -> Option<u32> {
    Some(match d {
        DType::F32 => 0,
        DType::F16 => 1,
        DType::BF16 => 2,
        DType::I32 => 3,
        _ => return None,
    })
}

/// `BaseParamId` of a parameter name as it is stored: the first 16 bytes of
/// BLAKE3(name) (the u128 little-endian). gpt.rs requires names to be ASCII.
pub fn base_id(name: &str) -> [u8; 16] {
    let h = blake3::hash(name.as_bytes());
    let mut id = [0u8; 16];
    id.copy_from_slice(&h.as_bytes()[..16]);
    id
}

/// One index entry, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// `name_bytes`, UTF-8.
    pub name: String,
    /// `stored_base_id` (checkpoints only; all zero = not stored).
    pub stored_base_id: [u8; 16],
    /// `dims`.
    pub dims: Vec<u64>,
    /// `dtype_tag`.
    pub dtype_tag: u32,
    /// `requires_grad` (writers emit 0/1; readers treat non-zero as true).
    pub requires_grad: u8,
    /// `offset_abs`: absolute file offset of the data.
    pub offset_abs: u64,
    /// `byte_len`.
    pub byte_len: u64,
}

impl IndexEntry {
    /// Bytes this entry takes in the index.
    pub fn encoded_len(&self, kind: Kind) -> u64 {
        let base = if kind.has_base_id() { 16 } else { 0 };
        4 + self.name.len() as u64 + base + 4 + 8 * self.dims.len() as u64 + 4 + 1 + 8 + 8
    }

    /// Appends the entry's bytes to `out`.
    pub fn encode(&self, kind: Kind, out: &mut Vec<u8>) -> Result<()> {
        let name_len = u32::try_from(self.name.len()).map_err(|_| {
            Error::invalid_input(format!(
                "tensor name of {} bytes is too long",
                self.name.len()
            ))
        })?;
        let rank = u32::try_from(self.dims.len())
            .map_err(|_| Error::invalid_input(format!("rank {} is too large", self.dims.len())))?;
        out.extend_from_slice(&name_len.to_le_bytes());
        out.extend_from_slice(self.name.as_bytes());
        if kind.has_base_id() {
            out.extend_from_slice(&self.stored_base_id);
        }
        out.extend_from_slice(&rank.to_le_bytes());
        for d in &self.dims {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&self.dtype_tag.to_le_bytes());
        out.push(self.requires_grad);
        out.extend_from_slice(&self.offset_abs.to_le_bytes());
        out.extend_from_slice(&self.byte_len.to_le_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_id_known_answers() {
        // ORIGINALS.md §4.3 and interop-samples/MANIFEST.md.
        let hex = |n: &str| crate::util::hex(&base_id(n));
        assert_eq!(hex("wte.weight"), "10d3771c3b1a3b8b353f26aace0f5e45");
        assert_eq!(hex("b"), "10e5cf3d3c8a4f9f3468c8cc58eea848");
        assert_eq!(hex("scalar"), "69f7be926770eacb1496531f004dc0b9");
        assert_eq!(
            hex("h.0.attn.c_attn.weight"),
            "4259691eecde8709ead373dc496cb5f0"
        );
        assert_eq!(
            u128::from_le_bytes(base_id("wte.weight")),
            0x455e0fceaa263f358b3b1a3b1c77d310
        );
    }

    #[test]
    fn tags_round_trip() {
        for tag in 0..4 {
            let d = dtype_from_tag(tag).unwrap();
            assert_eq!(tag_from_dtype(d), Some(tag));
        }
        assert_eq!(dtype_from_tag(4), None);
        assert_eq!(tag_from_dtype(DType::F64), None);
    }
}
