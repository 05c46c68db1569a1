//! Where file bytes come from: a memory map, or an owned buffer.
//!
//! This is the one module allowed `unsafe` (the mmap call). Readers take `&[u8]` and
//! never know which one they got.

use std::fs::File;
use std::ops::{Deref, DerefMut};
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
        let meta = file.metadata()?;
        if meta.is_dir() {
            // Mapping a directory fails with ENODEV ("No such device"): say what it is.
            #[cfg(unix)]
            let e = std::io::Error::from_raw_os_error(libc::EISDIR);
            #[cfg(not(unix))]
            let e = std::io::Error::other("is a directory");
            return Err(Error::from(e).at_subject(path.display().to_string()));
        }
        let len = meta.len();
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

/// An owned, page-aligned byte buffer for loading tensors out of a file.
///
/// Large buffers (2 MiB and up) are anonymous memory maps advised to use transparent
/// huge pages: copying a big tensor into a fresh `Vec` is dominated by 4 KiB page faults,
/// and huge pages cut those by 512x. Small buffers are plain `Vec`s.
pub struct OwnedBytes {
    inner: OwnedInner,
}

enum OwnedInner {
    Anon(memmap2::MmapMut),
    Heap(Vec<u8>),
}

impl OwnedBytes {
    /// Threshold above which an anonymous huge-page mapping is used.
    pub const HUGE_THRESHOLD: usize = 2 << 20;

    /// Copies `src` into a new buffer.
    pub fn copy_from(src: &[u8]) -> Result<OwnedBytes> {
        if src.len() < Self::HUGE_THRESHOLD {
            return Ok(OwnedBytes {
                inner: OwnedInner::Heap(src.to_vec()),
            });
        }
        let mut map = memmap2::MmapMut::map_anon(src.len())
            .map_err(|e| Error::from(e).at_subject("allocating an owned tensor buffer"))?;
        #[cfg(target_os = "linux")]
        {
            // Advisory: without THP support the copy still works, with 4 KiB pages.
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        map.copy_from_slice(src);
        Ok(OwnedBytes {
            inner: OwnedInner::Anon(map),
        })
    }

    /// A zero-filled buffer of `len` bytes, to be filled in place (through `DerefMut`):
    /// an anonymous map advised for huge pages when `len` is 2 MiB or more (its pages
    /// cost nothing until written), a `Vec` otherwise.
    pub fn zeroed(len: usize) -> Result<OwnedBytes> {
        if len < Self::HUGE_THRESHOLD {
            return Ok(OwnedBytes {
                inner: OwnedInner::Heap(vec![0; len]),
            });
        }
        let map = memmap2::MmapMut::map_anon(len)
            .map_err(|e| Error::from(e).at_subject("allocating an owned tensor buffer"))?;
        #[cfg(target_os = "linux")]
        {
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        Ok(OwnedBytes {
            inner: OwnedInner::Anon(map),
        })
    }

    /// True when backed by an anonymous (huge-page advised) map.
    pub fn is_huge(&self) -> bool {
        matches!(self.inner, OwnedInner::Anon(_))
    }
}

impl Deref for OwnedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.inner {
            OwnedInner::Anon(m) => m,
            OwnedInner::Heap(v) => v,
        }
    }
}

impl DerefMut for OwnedBytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.inner {
            OwnedInner::Anon(m) => m,
            OwnedInner::Heap(v) => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_bytes_copy_small_and_large() {
        let small = vec![3u8; 100];
        let o = OwnedBytes::copy_from(&small).unwrap();
        assert_eq!(&*o, &small[..]);
        assert!(!o.is_huge());
        let large: Vec<u8> = (0..(3usize << 20)).map(|i| i as u8).collect();
        let o = OwnedBytes::copy_from(&large).unwrap();
        assert_eq!(&*o, &large[..]);
        assert!(o.is_huge());
        let mut z = OwnedBytes::zeroed(large.len()).unwrap();
        assert!(z.is_huge() && z.iter().all(|&b| b == 0));
        z.copy_from_slice(&large);
        assert_eq!(&*z, &large[..]);
        let z = OwnedBytes::zeroed(10).unwrap();
        assert!(!z.is_huge() && *z == [0u8; 10]);
    }

    #[test]
    fn empty_file_maps_to_empty_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("empty");
        std::fs::write(&p, b"").unwrap();
        let d = FileData::open(&p).unwrap();
        assert!(d.is_empty());
        assert!(!d.is_mapped());
    }
}
