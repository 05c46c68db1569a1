//! [`SourceReader`]: `Read + Seek` over a range of a [`SourceRef`], for the `zip` crate
//! (which parses the directory from a reader) and `flate2` (which inflates from one).
//!
//! The `zip` crate reads in small pieces (2 KiB windows backwards for the end of the
//! central directory, then a few bytes at a time per record), so reads are served from
//! one cached block of at most [`BLOCK`] bytes: over `pread` a directory costs a few
//! reads, not one per field. A block never reaches past the range, and a read larger
//! than a block goes straight to the source.
use std::borrow::Cow;
use std::io::{self, Read, Seek, SeekFrom};

use crate::source::SourceRef;

/// The largest block read ahead (small: the local header read of each member must not
/// pull that member's data in with it).
pub const BLOCK: u64 = 1024;

/// A reader over `[start, end)` of a source; positions are relative to `start`.
pub struct SourceReader<'d> {
    src: SourceRef<'d>,
    start: u64,
    end: u64,
    pos: u64,
    /// The cached block and its absolute offset.
    cache: Option<(u64, Cow<'d, [u8]>)>,
}

impl<'d> SourceReader<'d> {
    /// A reader over the whole source.
    pub fn new(src: SourceRef<'d>) -> SourceReader<'d> {
        SourceReader::range(src, 0, src.len())
    }
    /// A reader over `len` bytes at `start` (clamped to the source).
    pub fn range(src: SourceRef<'d>, start: u64, len: u64) -> SourceReader<'d> {
        let start = start.min(src.len());
        let end = start.saturating_add(len).min(src.len());
        SourceReader {
            src,
            start,
            end,
            pos: 0,
            cache: None,
        }
    }
}

fn io_err(e: crate::Error) -> io::Error {
    io::Error::other(e.to_string())
}

impl Read for SourceReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let at = self.start.saturating_add(self.pos);
        let left = self.end.saturating_sub(at);
        let n = (buf.len() as u64).min(left);
        if n == 0 {
            return Ok(0);
        }
        if let Some(s) = self.src.as_slice() {
            // In memory: copy straight from the slice.
            buf[..n as usize].copy_from_slice(&s[at as usize..(at + n) as usize]);
        } else if n > BLOCK {
            let b = self.src.read_at(at, n).map_err(io_err)?;
            buf[..n as usize].copy_from_slice(&b);
        } else {
            let hit =
                matches!(&self.cache, Some((o, b)) if *o <= at && at + n <= *o + b.len() as u64);
            if !hit {
                let len = BLOCK.min(self.end - at);
                self.cache = Some((at, self.src.read_at(at, len).map_err(io_err)?));
            }
            if let Some((o, b)) = &self.cache {
                let i = (at - o) as usize;
                buf[..n as usize].copy_from_slice(&b[i..i + n as usize]);
            }
        }
        self.pos += n;
        Ok(n as usize)
    }
}

impl Seek for SourceReader<'_> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let len = self.end - self.start;
        let new = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        match new {
            Some(p) => {
                self.pos = p;
                Ok(p)
            }
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek before the start",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::CountingSource;

    #[test]
    fn reads_and_seeks_like_a_cursor_over_the_range() {
        let bytes: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let counted = CountingSource::new(bytes.clone());
        for src in [SourceRef::from(&bytes[..]), SourceRef::from(&counted)] {
            let mut r = SourceReader::range(src, 100, 4000);
            let mut small = [0u8; 10];
            r.seek(SeekFrom::End(-10)).unwrap();
            r.read_exact(&mut small).unwrap();
            assert_eq!(&small, &bytes[4090..4100]);
            assert_eq!(r.read(&mut small).unwrap(), 0, "end of the range");
            r.seek(SeekFrom::Start(5)).unwrap();
            let mut all = Vec::new();
            r.read_to_end(&mut all).unwrap();
            assert_eq!(all, &bytes[105..4100]);
            assert!(r.seek(SeekFrom::Current(-5000)).is_err());
        }
        assert!(counted.bytes() <= 4000 + 2 * BLOCK, "{}", counted.bytes());
    }
}
