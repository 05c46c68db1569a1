//! Where file bytes come from: a memory map, or an owned buffer.
//!
//! This is the one module allowed `unsafe` (the mmap call). Readers take `&[u8]` and
//! never know which one they got.

use std::fs::File;
use std::ops::Deref;
use std::path::Path;

use crate::error::{Error, Result};

/// The bytes of a file: mapped when possible, owned otherwise (empty files, stdin,
/// decrypted or downloaded data).
pub enum FileData {
    /// A read-only private memory map of the whole file.
    Mapped(memmap2::Mmap),
    /// An owned buffer.
    Owned(Vec<u8>),
}

impl FileData {
    /// Maps `path` read-only. Empty files (which cannot be mapped) become an empty buffer.
    pub fn open(path: &Path) -> Result<FileData> {
        let file =
            File::open(path).map_err(|e| Error::from(e).at_subject(path.display().to_string()))?;
        let len = file.metadata()?.len();
        if len == 0 {
            return Ok(FileData::Owned(Vec::new()));
        }
        #[allow(unsafe_code)]
        // SAFETY: the map is read-only and private. Tessera never writes to a file it has
        // mapped: every write goes to a temporary sibling that is renamed over the
        // target, which replaces the directory entry and leaves this inode intact. Another
        // process truncating the file while we read it could still raise SIGBUS; that is
        // the accepted contract of every mmap-based reader (safetensors, numpy.memmap).
        let map = unsafe { memmap2::MmapOptions::new().map(&file) }
            .map_err(|e| Error::from(e).at_subject(path.display().to_string()))?;
        #[cfg(unix)]
        {
            // Reads are mostly sequential; a failed hint changes nothing.
            let _ = map.advise(memmap2::Advice::WillNeed);
        }
        Ok(FileData::Mapped(map))
    }

    /// Reads `path` fully into memory (no map).
    pub fn read(path: &Path) -> Result<FileData> {
        let v = std::fs::read(path)
            .map_err(|e| Error::from(e).at_subject(path.display().to_string()))?;
        Ok(FileData::Owned(v))
    }

    /// True when the bytes are a memory map.
    pub fn is_mapped(&self) -> bool {
        matches!(self, FileData::Mapped(_))
    }
}

impl Deref for FileData {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileData::Mapped(m) => m,
            FileData::Owned(v) => v,
        }
    }
}

impl AsRef<[u8]> for FileData {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl From<Vec<u8>> for FileData {
    fn from(v: Vec<u8>) -> FileData {
        FileData::Owned(v)
    }
}
