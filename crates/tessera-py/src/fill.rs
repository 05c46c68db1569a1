//! Owned loads at disk speed: filling destination buffers from a mapped file with
//! parallel positional reads.
//!
//! `load_file` (copy=True) hands out arrays the caller owns. Copying them out of the
//! memory map is one page fault per 4 KiB (64 KiB with fault-around) of a cold file,
//! each a small synchronous read on one thread: the disk idles between faults. Here the
//! copies are cut into [`PIECE`]-sized pieces (aligned in the file) that 2–8 threads
//! take in file order and fill with `pread(2)` straight into the destination, so the
//! device sees large requests from several threads at once, the destination's huge
//! pages are written once, and no page of the file is mapped into the process. A hot
//! file gets the same: a kernel copy per piece, on every core.
//!
//! `pread` reads the file the map was made from: [`Reader::open`] keeps a descriptor
//! only when it names the same inode, of the same length, as the mapped path at open
//! (checked after the map was made). Without one (bytes given to `load`, a file read
//! whole, a model set, a non-Unix platform) the pieces are copied from the map, still
//! in parallel. A short read (the file truncated under us) is an error, never garbage.
//!
//! Hand-written: no crate does "scatter this list of file ranges into these buffers on
//! N threads"; it is std's `FileExt::read_at` and scoped threads.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The largest single read (and copy), aligned to this in the file: 8 MiB.
pub const PIECE: usize = 8 << 20;

/// Below this many bytes in all, one thread does everything (threads cost more).
const PARALLEL_FROM: usize = 16 << 20;

/// A descriptor of the mapped file, for positional reads.
pub struct Reader {
    file: File,
    /// Address and length of the file's map.
    base: usize,
    len: usize,
}

impl Reader {
    /// A descriptor of `path` when it is still the file mapped at `map` (same length,
    /// and the path named the same inode before and after this open); `None` otherwise.
    pub fn open(path: &Path, map: &[u8]) -> Option<Reader> {
        let file = File::open(path).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() != map.len() as u64 {
            return None;
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let now = std::fs::metadata(path).ok()?;
            if (now.dev(), now.ino()) != (meta.dev(), meta.ino()) {
                return None;
            }
        }
        Some(Reader {
            file,
            base: map.as_ptr() as usize,
            len: map.len(),
        })
    }

    /// The mapped file as a [`tessera::source::ByteSource`] read with `pread` through a
    /// second descriptor of the same inode: every read is a fresh private buffer. The
    /// checked copies of [`crate::file`] open the container again over it, so that the
    /// reader checks the stored digests over the very bytes it returns (no map in
    /// between that could change after the check).
    pub fn source(&self) -> tessera::Result<PrivateReads> {
        Ok(PrivateReads {
            file: self.file.try_clone()?,
            len: self.len as u64,
        })
    }

    /// The file offset of `src` when it lies in the mapped file.
    fn offset_of(&self, src: &[u8]) -> Option<u64> {
        let off = (src.as_ptr() as usize).checked_sub(self.base)?;
        (off.checked_add(src.len())? <= self.len).then_some(off as u64)
    }
}

/// See [`Reader::source`].
pub struct PrivateReads {
    file: File,
    len: u64,
}

impl tessera::source::ByteSource for PrivateReads {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, len: u64) -> tessera::Result<std::borrow::Cow<'_, [u8]>> {
        let end = offset.checked_add(len).filter(|&e| e <= self.len);
        let Some(_) = end else {
            return Err(tessera::source::truncated(offset, len, self.len));
        };
        // In the file's length (checked above): not an allocation sized by the file alone.
        let n = usize::try_from(len)
            .map_err(|_| tessera::Error::invalid_input("a read larger than memory"))?;
        let mut buf = vec![0u8; n];
        read_at(&self.file, &mut buf, offset)?;
        Ok(std::borrow::Cow::Owned(buf))
    }
    fn kind(&self) -> &'static str {
        "pread"
    }
}

/// One copy: `src` (a range of the mapped file, or any bytes) into `dst`, same length.
pub struct Job<'a> {
    /// Where the bytes are now.
    pub src: &'a [u8],
    /// Where they go.
    pub dst: &'a mut [u8],
}

/// Fills every `dst` with its `src`, reading through `reader` where `src` is in its
/// file, on several threads when there is enough to do.
pub fn fill(jobs: Vec<Job<'_>>, reader: Option<&Reader>) -> tessera::Result<()> {
    let total: usize = jobs.iter().map(|j| j.src.len()).sum();
    let mut pieces: Vec<Job<'_>> = Vec::new();
    for job in jobs {
        if job.src.len() != job.dst.len() {
            return Err(tessera::Error::invalid_input(
                "internal: a copy's source and destination differ in length",
            ));
        }
        // Cut at PIECE-aligned file offsets (or source addresses): whole aligned
        // requests for the device.
        let start = reader
            .and_then(|r| r.offset_of(job.src))
            .map(|o| o as usize)
            .unwrap_or(job.src.as_ptr() as usize);
        let (mut src, mut dst) = (job.src, job.dst);
        let mut at = start;
        while !src.is_empty() {
            let room = PIECE - at % PIECE;
            let n = room.min(src.len());
            let (s, rest_s) = src.split_at(n);
            let (d, rest_d) = std::mem::take(&mut dst).split_at_mut(n);
            pieces.push(Job { src: s, dst: d });
            src = rest_s;
            dst = rest_d;
            at += n;
        }
    }
    // File order: the threads advance through the file together.
    if let Some(r) = reader {
        pieces.sort_by_key(|p| r.offset_of(p.src).unwrap_or(u64::MAX));
    }
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(2, 8)
        .min(pieces.len());
    if total < PARALLEL_FROM || threads < 2 {
        for p in pieces {
            copy_piece(p, reader)?;
        }
        return Ok(());
    }
    let slots: Vec<Mutex<Option<Job<'_>>>> =
        pieces.into_iter().map(|p| Mutex::new(Some(p))).collect();
    let next = AtomicUsize::new(0);
    let failed: Mutex<Option<tessera::Error>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(slot) = slots.get(i) else { break };
                let piece = slot.lock().ok().and_then(|mut g| g.take());
                let Some(piece) = piece else { continue };
                if let Err(e) = copy_piece(piece, reader) {
                    if let Ok(mut f) = failed.lock() {
                        f.get_or_insert(e);
                    }
                    // The others stop at their next piece.
                    next.store(slots.len(), Ordering::Relaxed);
                    break;
                }
            });
        }
    });
    match failed.into_inner() {
        Ok(Some(e)) => Err(e),
        _ => Ok(()),
    }
}

/// One piece: a positional read when its source is in the reader's file, else a copy.
fn copy_piece(p: Job<'_>, reader: Option<&Reader>) -> tessera::Result<()> {
    match reader.and_then(|r| Some((r, r.offset_of(p.src)?))) {
        Some((r, off)) => read_at(&r.file, p.dst, off),
        None => {
            p.dst.copy_from_slice(p.src);
            Ok(())
        }
    }
}

#[cfg(unix)]
fn read_at(file: &File, dst: &mut [u8], off: u64) -> tessera::Result<()> {
    use std::os::unix::fs::FileExt;
    let len = dst.len();
    file.read_exact_at(dst, off).map_err(|e| {
        tessera::Error::from(e).at_subject(format!(
            "reading {len} bytes at offset {off} of the mapped file (changed on disk?)"
        ))
    })
}

#[cfg(not(unix))]
fn read_at(file: &File, dst: &mut [u8], off: u64) -> tessera::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    // One descriptor shared by the threads: seek + read must not interleave.
    static LOCK: Mutex<()> = Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let mut f = file;
    f.seek(SeekFrom::Start(off))?;
    f.read_exact(dst)?;
    Ok(())
}
