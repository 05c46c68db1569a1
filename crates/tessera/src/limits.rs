//! Limits on what a reader accepts from a file.
//!
//! Every count, length and size read from a file is checked against these before anything
//! is allocated from it. The defaults are generous for real models and small enough that
//! a hostile 100-byte file cannot make us allocate gigabytes.

use crate::error::{Error, Result};

/// Caps applied while reading. `Limits::default()` suits real models.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest index/header/manifest we parse (bytes). Default 256 MiB.
    pub max_index_bytes: u64,
    /// Most tensors (or chunks) in one file. Default 10,000,000.
    pub max_entries: u64,
    /// Largest rank. Default 64.
    pub max_rank: usize,
    /// Longest tensor or chunk name in bytes. Default 65,536.
    pub max_name_len: usize,
    /// Largest decoded (decompressed, decoded-from-text) tensor or chunk. Default 64 GiB.
    pub max_decoded_bytes: u64,
    /// Deepest nesting of metadata values. Default 64.
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_index_bytes: 256 << 20,
            max_entries: 10_000_000,
            max_rank: 64,
            max_name_len: 65_536,
            max_decoded_bytes: 64 << 30,
            max_depth: 64,
        }
    }
}

impl Limits {
    /// Errors with `LimitExceeded` when `value > max`, naming `what`.
    pub fn check(what: &str, value: u64, max: u64) -> Result<()> {
        if value > max {
            Err(Error::limit(format!(
                "{what} is {value}, over the limit of {max}"
            )))
        } else {
            Ok(())
        }
    }

    /// Checks an index size.
    pub fn check_index(&self, len: u64) -> Result<()> {
        Limits::check("index size", len, self.max_index_bytes)
    }
    /// Checks an entry count.
    pub fn check_entries(&self, n: u64) -> Result<()> {
        Limits::check("entry count", n, self.max_entries)
    }
    /// Checks a rank.
    pub fn check_rank(&self, rank: u64) -> Result<()> {
        Limits::check("rank", rank, self.max_rank as u64)
    }
    /// Checks a name length.
    pub fn check_name(&self, len: u64) -> Result<()> {
        Limits::check("name length", len, self.max_name_len as u64)
    }
    /// Checks a decoded size.
    pub fn check_decoded(&self, len: u64) -> Result<()> {
        Limits::check("decoded size", len, self.max_decoded_bytes)
    }
}

/// `u64` → `usize`, or a `LimitExceeded` error naming `what` (only fails on 32-bit hosts).
pub fn to_usize(v: u64, what: &str) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::limit(format!("{what} {v} does not fit in memory")))
}

/// The error for a range `[off, end)` that a file's index gives but the `total`-byte
/// file does not reach: named as the truncation it usually is. Every reader's range
/// checks ([`check_range`], [`fn@slice`], `SourceRef::slice`) make it here.
pub fn past_end(what: &str, off: u64, end: u64, total: u64) -> Error {
    Error::malformed(format!(
        "{what}: the file ends at byte {total}; its index puts it at {off}..{end} \
         (truncated, or a damaged offset)"
    ))
    .at_offset(off)
}

/// Checks that `[off, off + len)` lies within a `total`-byte file, with the same message
/// as [`fn@slice`].
pub fn check_range(off: u64, len: u64, total: u64, what: &str) -> Result<()> {
    let end = off.checked_add(len).ok_or_else(|| {
        Error::malformed(format!("{what}: offset {off} + length {len} overflows"))
    })?;
    if end > total {
        return Err(past_end(what, off, end, total));
    }
    Ok(())
}

/// Returns `&data[off..off+len]`, or a `Malformed` error naming `what` when the range
/// overflows or runs past the end.
pub fn slice<'a>(data: &'a [u8], off: u64, len: u64, what: &str) -> Result<&'a [u8]> {
    let end = off.checked_add(len).ok_or_else(|| {
        Error::malformed(format!("{what}: offset {off} + length {len} overflows"))
    })?;
    if end > data.len() as u64 {
        return Err(past_end(what, off, end, data.len() as u64));
    }
    // Both fit in usize: end <= data.len().
    Ok(&data[off as usize..end as usize])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn slice_checks_bounds_and_overflow() {
        let d = [1u8, 2, 3, 4];
        assert_eq!(slice(&d, 1, 2, "x").unwrap(), &[2, 3]);
        assert_eq!(slice(&d, 4, 0, "x").unwrap(), &[] as &[u8]);
        assert_eq!(
            slice(&d, 3, 2, "x").unwrap_err().kind(),
            ErrorKind::Malformed
        );
        assert_eq!(
            slice(&d, u64::MAX, 2, "x").unwrap_err().kind(),
            ErrorKind::Malformed
        );
    }

    #[test]
    fn a_range_past_the_end_is_named_as_a_truncation() {
        let e = check_range(100, 50, 120, "tensor \"w\" data").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Malformed);
        let m = e.to_string();
        assert!(
            m.contains("the file ends at byte 120")
                && m.contains("100..150")
                && m.contains("truncated"),
            "{m}"
        );
        let m = slice(&[0u8; 4], 2, 4, "x").unwrap_err().to_string();
        assert!(m.contains("the file ends at byte 4"), "{m}");
    }

    #[test]
    fn check_reports_limit() {
        let e = Limits::default().check_rank(65).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LimitExceeded);
        assert!(e.to_string().contains("rank is 65"));
    }
}
