//! Where file bytes come from, and how readers ask for them: by range.
//!
//! A reader never assumes the whole file is in memory. It asks a [`SourceRef`] for the
//! ranges it needs — the header, the index, then one tensor's bytes when asked — and
//! gets them **borrowed** when the source is in memory (a memory map, a buffer: zero
//! copy, exactly as a `&[u8]` would give) or **owned** when they had to be read
//! (positional reads with `pread`, later a remote object). The implementations:
//!
//! - [`FileData`]: a read-only memory map of the file (or an owned buffer);
//! - [`PreadFile`]: positional reads (`pread`), one owned buffer per range — no map, so a
//!   file truncated under the reader is an error, never `SIGBUS`;
//! - `Vec<u8>` / `&[u8]`: an in-memory buffer;
//! - [`CountingSource`]: wraps another and counts the ranges and bytes read (what tests
//!   use to show that opening a file touches only its index).
//!
//! `unsafe` here is the mmap call (the other places allowed it are listed in
//! docs/architecture.md).
use std::borrow::Cow;
use std::fs::File;
use std::ops::{Deref, DerefMut};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

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
            // Sequential, not WILLNEED: WILLNEED would read the whole file into the page
            // cache at open (an open that needs only the index, or a file bigger than
            // RAM, would pay for all of it); sequential advice reads ahead of the pages
            // actually touched and lets the kernel drop them behind. Advisory: a failed
            // hint changes nothing.
            let _ = map.advise(memmap2::Advice::Sequential);
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

/// Anything a reader can read a file's bytes from, by range.
///
/// `read_at` returns borrowed bytes when the source holds them in memory and owned ones
/// otherwise; a range that runs past the end is a `Malformed` "truncated" error naming
/// the range and the length, never a short read.
pub trait ByteSource: Send + Sync {
    /// The length in bytes.
    fn len(&self) -> u64;
    /// True for an empty source.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `len` bytes at `offset`.
    fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>>;
    /// Several ranges at once, in order (a remote source fetches them concurrently).
    fn read_ranges(&self, ranges: &[(u64, u64)]) -> Result<Vec<Cow<'_, [u8]>>> {
        ranges.iter().map(|&(o, n)| self.read_at(o, n)).collect()
    }
    /// The whole file as one slice when it is already in memory (a map or a buffer), so
    /// that reads borrow without a call per range.
    fn as_slice(&self) -> Option<&[u8]> {
        None
    }
    /// What kind of source this is, for messages and benchmarks (`mmap`, `pread`, …).
    fn kind(&self) -> &'static str;
}

/// The error for a range past the end of a source.
pub fn truncated(offset: u64, len: u64, total: u64) -> Error {
    let end = offset.saturating_add(len);
    Error::malformed(format!(
        "truncated: bytes [{offset}, {end}) are needed but the file ends at {total}"
    ))
    .at_offset(offset.min(total))
}

/// Checks `[offset, offset + len)` against `total` and returns it as `usize` indices.
fn slice_range(offset: u64, len: u64, total: u64) -> Result<std::ops::Range<usize>> {
    match offset.checked_add(len) {
        Some(end) if end <= total => Ok(offset as usize..end as usize),
        _ => Err(truncated(offset, len, total)),
    }
}

fn slice_at(data: &[u8], offset: u64, len: u64) -> Result<&[u8]> {
    let r = slice_range(offset, len, data.len() as u64)?;
    Ok(&data[r])
}

impl ByteSource for FileData {
    fn len(&self) -> u64 {
        (**self).len() as u64
    }
    fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        slice_at(self, offset, len).map(Cow::Borrowed)
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(self)
    }
    fn kind(&self) -> &'static str {
        if self.is_mapped() {
            "mmap"
        } else {
            "memory"
        }
    }
}

impl ByteSource for Vec<u8> {
    fn len(&self) -> u64 {
        self.as_slice().len() as u64
    }
    fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        slice_at(self, offset, len).map(Cow::Borrowed)
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(self)
    }
    fn kind(&self) -> &'static str {
        "memory"
    }
}

/// A file read with positional reads (`pread`): every range is an owned buffer, the file
/// is never mapped. Slower to hand out tensors than a map (one copy), but a file that
/// shrinks under the reader is an I/O error rather than a `SIGBUS`, and it is the shape
/// of every remote source.
#[derive(Debug)]
pub struct PreadFile {
    file: File,
    len: u64,
}

impl PreadFile {
    /// Opens `path` for positional reads.
    pub fn open(path: &Path) -> Result<PreadFile> {
        let named = |e: std::io::Error| Error::from(e).at_subject(path.display().to_string());
        let file = File::open(path).map_err(named)?;
        let meta = file.metadata().map_err(named)?;
        if meta.is_dir() {
            #[cfg(unix)]
            let e = std::io::Error::from_raw_os_error(libc::EISDIR);
            #[cfg(not(unix))]
            let e = std::io::Error::other("is a directory");
            return Err(named(e));
        }
        Ok(PreadFile {
            file,
            len: meta.len(),
        })
    }
}

impl ByteSource for PreadFile {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        let r = slice_range(offset, len, self.len)?;
        // The length is checked against the file's: never an allocation sized by an
        // unchecked number.
        let mut buf = vec![0u8; r.len()];
        read_exact_at(&self.file, &mut buf, offset).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Error::malformed(format!(
                    "truncated: the file became shorter while it was read (bytes [{offset}, {}))",
                    offset + len
                ))
                .at_offset(offset)
            } else {
                Error::from(e).at_offset(offset)
            }
        })?;
        Ok(Cow::Owned(buf))
    }
    fn kind(&self) -> &'static str {
        "pread"
    }
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_read(buf, offset) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Wraps a source and counts what is read through it: calls and bytes. A reader that
/// borrows from an in-memory source is counted too (the range it asked for), so the
/// count says what a remote source would have had to fetch.
#[derive(Debug)]
pub struct CountingSource<S> {
    inner: S,
    calls: AtomicU64,
    bytes: AtomicU64,
}

impl<S: ByteSource> CountingSource<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> CountingSource<S> {
        CountingSource {
            inner,
            calls: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }
    /// Ranges read so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
    /// Bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
    /// Sets both counts back to zero.
    pub fn reset(&self) {
        self.calls.store(0, Ordering::Relaxed);
        self.bytes.store(0, Ordering::Relaxed);
    }
}

impl<S: ByteSource> ByteSource for CountingSource<S> {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(len, Ordering::Relaxed);
        self.inner.read_at(offset, len)
    }
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
    // No `as_slice`: every read goes through `read_at`, so every byte is counted.
}

/// A reader's handle on its source: `Copy`, and every range it returns lives as long as
/// the source (`'d`). Built from a `&[u8]`, a [`FileData`], a `Vec<u8>` or any
/// `&dyn ByteSource`; an in-memory source is kept as its slice, so reads from it cost
/// a bounds check, as indexing a `&[u8]` does.
#[derive(Clone, Copy)]
pub struct SourceRef<'d> {
    inner: Inner<'d>,
}

#[derive(Clone, Copy)]
enum Inner<'d> {
    Slice(&'d [u8], &'static str),
    Dyn(&'d dyn ByteSource),
}

impl std::fmt::Debug for SourceRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SourceRef({}, {} bytes)", self.kind(), self.len())
    }
}

impl<'d> SourceRef<'d> {
    /// A handle on any source (kept as a slice when the source has one).
    pub fn new(src: &'d dyn ByteSource) -> SourceRef<'d> {
        match src.as_slice() {
            Some(s) => SourceRef {
                inner: Inner::Slice(s, src.kind()),
            },
            None => SourceRef {
                inner: Inner::Dyn(src),
            },
        }
    }
    /// The length in bytes.
    pub fn len(&self) -> u64 {
        match self.inner {
            Inner::Slice(s, _) => s.len() as u64,
            Inner::Dyn(d) => d.len(),
        }
    }
    /// True for an empty source.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `len` bytes at `offset` (a "truncated" error past the end).
    pub fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'d, [u8]>> {
        match self.inner {
            Inner::Slice(s, _) => slice_at(s, offset, len).map(Cow::Borrowed),
            Inner::Dyn(d) => d.read_at(offset, len),
        }
    }
    /// `len` bytes at `offset`, for a part of the file called `what`: a range past the
    /// end says "`what`: the file ends at byte N; its index puts it at a..b"
    /// ([`crate::limits::past_end`]).
    pub fn slice(&self, offset: u64, len: u64, what: &str) -> Result<Cow<'d, [u8]>> {
        let total = self.len();
        let end = offset.checked_add(len).ok_or_else(|| {
            Error::malformed(format!("{what}: offset {offset} + length {len} overflows"))
        })?;
        if end > total {
            return Err(crate::limits::past_end(what, offset, end, total));
        }
        self.read_at(offset, len)
    }
    /// Checks that `[offset, offset + len)` lies inside the source, with the errors of
    /// [`SourceRef::slice`], without reading it.
    pub fn check_range(&self, offset: u64, len: u64, what: &str) -> Result<()> {
        let total = self.len();
        let end = offset.checked_add(len).ok_or_else(|| {
            Error::malformed(format!("{what}: offset {offset} + length {len} overflows"))
        })?;
        if end > total {
            return Err(crate::limits::past_end(what, offset, end, total));
        }
        Ok(())
    }
    /// Up to `len` bytes at `offset`: fewer when the file ends first (for reading a
    /// header whose length is not known yet).
    pub fn read_up_to(&self, offset: u64, len: u64) -> Result<Cow<'d, [u8]>> {
        let total = self.len();
        let offset = offset.min(total);
        self.read_at(offset, len.min(total - offset))
    }
    /// Several ranges at once.
    pub fn read_ranges(&self, ranges: &[(u64, u64)]) -> Result<Vec<Cow<'d, [u8]>>> {
        match self.inner {
            Inner::Slice(s, _) => ranges
                .iter()
                .map(|&(o, n)| slice_at(s, o, n).map(Cow::Borrowed))
                .collect(),
            Inner::Dyn(d) => d.read_ranges(ranges),
        }
    }
    /// Whether reading a range twice gives the same bytes (the file is in memory), so
    /// that a digest checked on one read holds for the next: readers check a tensor
    /// once. Over `pread` or a remote source every read is a fresh buffer, which a
    /// reader checks again before handing it out.
    pub fn rereads_same(&self) -> bool {
        self.as_slice().is_some()
    }
    /// The whole file as one slice, when it is in memory.
    pub fn as_slice(&self) -> Option<&'d [u8]> {
        match self.inner {
            Inner::Slice(s, _) => Some(s),
            Inner::Dyn(_) => None,
        }
    }
    /// The whole file as one slice, for a reader that needs it in memory
    /// ([`crate::any::Access::Whole`]: `tessera::open` reads such a file into memory
    /// before calling its reader, so this fails only when a caller skips that).
    pub fn in_memory(&self) -> Result<&'d [u8]> {
        self.as_slice().ok_or_else(|| {
            Error::unsupported(format!(
                "this reader needs the whole file in memory, and the {} source is not",
                self.kind()
            ))
        })
    }
    /// The whole file: borrowed when in memory, read otherwise (for formats that must
    /// scan the whole file, such as WTXT's text).
    pub fn read_all(&self) -> Result<Cow<'d, [u8]>> {
        self.read_at(0, self.len())
    }
    /// Hands `[offset, offset + len)` to `f` in pieces: the whole range at once when
    /// the source is in memory (borrowed, no copy), else blocks of at most `block`
    /// bytes read one after the other — so hashing or scanning a large range over
    /// `pread` holds one block in memory, not the range. Fails like
    /// [`SourceRef::slice`] when the range runs past the end (before calling `f`).
    pub fn for_each_block(
        &self,
        offset: u64,
        len: u64,
        block: u64,
        what: &str,
        mut f: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        if self.as_slice().is_some() || len <= block {
            return f(&self.slice(offset, len, what)?);
        }
        // Check the whole range first, so a range past the end fails before any work.
        self.check_range(offset, len, what)?;
        let block = block.max(1);
        let mut at = offset;
        let end = offset + len;
        while at < end {
            let n = block.min(end - at);
            f(&self.read_at(at, n)?)?;
            at += n;
        }
        Ok(())
    }
    /// What kind of source this is (`mmap`, `pread`, `memory`, …).
    pub fn kind(&self) -> &'static str {
        match self.inner {
            Inner::Slice(_, k) => k,
            Inner::Dyn(d) => d.kind(),
        }
    }
}

impl<'d> From<&'d [u8]> for SourceRef<'d> {
    fn from(s: &'d [u8]) -> SourceRef<'d> {
        SourceRef {
            inner: Inner::Slice(s, "memory"),
        }
    }
}

impl<'d, const N: usize> From<&'d [u8; N]> for SourceRef<'d> {
    fn from(s: &'d [u8; N]) -> SourceRef<'d> {
        SourceRef::from(&s[..])
    }
}

impl<'d, S: ByteSource> From<&'d S> for SourceRef<'d> {
    fn from(s: &'d S) -> SourceRef<'d> {
        SourceRef::new(s)
    }
}

impl<'d> From<&'d dyn ByteSource> for SourceRef<'d> {
    fn from(s: &'d dyn ByteSource) -> SourceRef<'d> {
        SourceRef::new(s)
    }
}

/// An owned, page-aligned byte buffer for loading tensors out of a file. Hidden from
/// the docs: the Python crate's loads use it, it is not a stable API.
///
///
/// Large buffers (2 MiB and up) are anonymous memory maps advised to use transparent
/// huge pages: copying a big tensor into a fresh `Vec` is dominated by 4 KiB page faults,
/// and huge pages cut those by 512x. Small buffers are plain `Vec`s.
#[doc(hidden)]
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

/// A source with some of its ranges read ahead of use, in one batch
/// ([`ByteSource::read_ranges`]: a remote source fetches them in a few coalesced
/// requests): a reader that will read many small, scattered pieces at open (FOLD's
/// chunk headers, an npz's local headers) asks for them all at once, then reads them
/// one by one from here. A read the batch holds whole is answered from it; any other
/// goes to the source. Over an in-memory source nothing is read ahead.
pub struct Prefetched<'d> {
    inner: SourceRef<'d>,
    /// Disjoint segments `(offset, bytes)`, sorted by offset.
    segments: Vec<(u64, Cow<'d, [u8]>)>,
}

impl<'d> Prefetched<'d> {
    /// Reads `ranges` (`(offset, len)`, clamped to the source; overlapping ones merged)
    /// from `inner` in one batch.
    pub fn new(inner: SourceRef<'d>, ranges: &[(u64, u64)]) -> Result<Prefetched<'d>> {
        let mut segments = Vec::new();
        if inner.as_slice().is_none() {
            let total = inner.len();
            let mut rs: Vec<(u64, u64)> = ranges
                .iter()
                .filter(|&&(o, _)| o < total)
                .map(|&(o, n)| (o, o.saturating_add(n).min(total)))
                .filter(|&(o, e)| e > o)
                .collect();
            rs.sort_unstable();
            let mut merged: Vec<(u64, u64)> = Vec::with_capacity(rs.len());
            for (o, e) in rs {
                match merged.last_mut() {
                    Some(last) if o <= last.1 => last.1 = last.1.max(e),
                    _ => merged.push((o, e)),
                }
            }
            let asked: Vec<(u64, u64)> = merged.iter().map(|&(o, e)| (o, e - o)).collect();
            let got = inner.read_ranges(&asked)?;
            segments = merged.iter().map(|&(o, _)| o).zip(got).collect();
        }
        Ok(Prefetched { inner, segments })
    }

    /// Adds bytes the caller read itself (`bytes` at `offset` of the source).
    pub fn insert(&mut self, offset: u64, bytes: Cow<'d, [u8]>) {
        if self.inner.as_slice().is_some() {
            return;
        }
        let i = self.segments.partition_point(|(o, _)| *o <= offset);
        self.segments.insert(i, (offset, bytes));
    }

    /// `[offset, offset + len)` when one segment holds it whole.
    fn held(&self, offset: u64, len: u64) -> Option<&[u8]> {
        let i = self.segments.partition_point(|(o, _)| *o <= offset);
        let (o, b) = self.segments.get(i.checked_sub(1)?)?;
        let at = offset - o;
        let end = at.checked_add(len)?;
        (end <= b.len() as u64).then(|| &b[at as usize..end as usize])
    }
}

impl ByteSource for Prefetched<'_> {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        match self.held(offset, len) {
            Some(b) => Ok(Cow::Borrowed(b)),
            None => self.inner.read_at(offset, len),
        }
    }
    fn as_slice(&self) -> Option<&[u8]> {
        self.inner.as_slice()
    }
    fn kind(&self) -> &'static str {
        self.inner.kind()
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
    fn every_source_gives_the_same_ranges_and_refuses_past_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        std::fs::write(&p, &bytes).unwrap();
        let mapped = FileData::open(&p).unwrap();
        let pread = PreadFile::open(&p).unwrap();
        let counted = CountingSource::new(PreadFile::open(&p).unwrap());
        let sources: [SourceRef<'_>; 5] = [
            SourceRef::from(&bytes[..]),
            SourceRef::from(&bytes),
            SourceRef::from(&mapped),
            SourceRef::from(&pread),
            SourceRef::from(&counted),
        ];
        for s in sources {
            assert_eq!(s.len(), 10_000, "{s:?}");
            assert_eq!(&*s.read_at(17, 300).unwrap(), &bytes[17..317], "{s:?}");
            assert_eq!(&*s.read_at(10_000, 0).unwrap(), b"", "{s:?}");
            assert_eq!(
                &*s.read_up_to(9_990, 100).unwrap(),
                &bytes[9_990..],
                "{s:?}"
            );
            let rs = s.read_ranges(&[(0, 4), (5_000, 8)]).unwrap();
            assert_eq!(&*rs[1], &bytes[5_000..5_008]);
            for (o, n) in [(9_999, 2), (u64::MAX, 1), (1, u64::MAX)] {
                let e = s.read_at(o, n).unwrap_err();
                assert_eq!(e.kind(), crate::ErrorKind::Malformed, "{s:?}");
                assert!(e.to_string().contains("truncated"), "{e}");
            }
        }
        assert!(matches!(
            SourceRef::from(&mapped).read_at(0, 4).unwrap(),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            SourceRef::from(&pread).read_at(0, 4).unwrap(),
            Cow::Owned(_)
        ));
        // 300 + 0 + 10 + 12 bytes in 5 calls, plus 3 refused ranges (counted as asked).
        assert_eq!(counted.calls(), 8);
        counted.reset();
        assert_eq!((counted.calls(), counted.bytes()), (0, 0));
        assert_eq!(SourceRef::from(&pread).kind(), "pread");
        assert_eq!(SourceRef::from(&mapped).kind(), "mmap");
    }

    #[test]
    fn for_each_block_hands_out_the_range_whole_from_memory_and_in_blocks_otherwise() {
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i % 253) as u8).collect();
        let counted = CountingSource::new(bytes.clone());
        for (src, want_calls) in [
            (SourceRef::from(&bytes[..]), 1),
            (SourceRef::from(&counted), 4),
        ] {
            let mut got = Vec::new();
            let mut calls = 0;
            src.for_each_block(100, 3_500, 1_000, "r", |b| {
                calls += 1;
                assert!(b.len() <= 1_000 || want_calls == 1);
                got.extend_from_slice(b);
                Ok(())
            })
            .unwrap();
            assert_eq!((calls, &got[..]), (want_calls, &bytes[100..3_600]));
            // A range past the end fails before any block is handed out.
            let mut touched = false;
            let e = src
                .for_each_block(9_000, 2_000, 100, "tail", |_| {
                    touched = true;
                    Ok(())
                })
                .unwrap_err();
            assert!(!touched && e.to_string().contains("tail"), "{e}");
            assert!(src.check_range(0, 10_000, "all").is_ok());
            assert!(src.check_range(u64::MAX, 2, "x").is_err());
        }
        assert_eq!(counted.bytes(), 3_500);
    }

    #[test]
    fn pread_of_a_file_that_shrank_is_an_error_not_a_signal() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![1u8; 4096]).unwrap();
        let src = PreadFile::open(&p).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(100)
            .unwrap();
        let e = src.read_at(0, 4096).unwrap_err();
        assert!(e.to_string().contains("became shorter"), "{e}");
    }

    #[test]
    fn pread_of_a_directory_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let e = PreadFile::open(dir.path()).unwrap_err();
        assert!(e.to_string().to_lowercase().contains("directory"), "{e}");
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
