//! A bounds-checked little/big-endian reader over a byte slice. Every read past the end
//! is a `Malformed` error that says what was being read and at which offset.

use crate::error::{Error, Result};

/// A cursor over `data` that never panics.
#[derive(Debug, Clone)]
pub struct ByteReader<'a> {
    data: &'a [u8],
    pos: usize,
}

macro_rules! int_readers {
    ($($le:ident $be:ident $t:ty;)*) => {$(
        /// Reads a little-endian integer.
        pub fn $le(&mut self, what: &str) -> Result<$t> {
            let b = self.take(std::mem::size_of::<$t>(), what)?;
            Ok(<$t>::from_le_bytes(b.try_into().map_err(|_| Error::malformed(what.to_string()))?))
        }
        /// Reads a big-endian integer.
        pub fn $be(&mut self, what: &str) -> Result<$t> {
            let b = self.take(std::mem::size_of::<$t>(), what)?;
            Ok(<$t>::from_be_bytes(b.try_into().map_err(|_| Error::malformed(what.to_string()))?))
        }
    )*};
}

impl<'a> ByteReader<'a> {
    /// A reader at offset 0.
    pub fn new(data: &'a [u8]) -> ByteReader<'a> {
        ByteReader { data, pos: 0 }
    }
    /// A reader at `pos`.
    pub fn at(data: &'a [u8], pos: usize) -> ByteReader<'a> {
        ByteReader { data, pos }
    }
    /// Current offset.
    pub fn pos(&self) -> usize {
        self.pos
    }
    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.data.len().saturating_sub(self.pos)
    }
    /// Takes `n` bytes, or a `Malformed` error naming `what`.
    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        match end {
            Some(end) => {
                let s = &self.data[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(Error::malformed(format!(
                "truncated: {what} needs {n} bytes, {} left",
                self.remaining()
            ))
            .at_offset(self.pos as u64)),
        }
    }
    /// Takes `n` bytes where `n` came from the file as a u64.
    pub fn take_u64(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        match usize::try_from(n) {
            Ok(n) => self.take(n, what),
            Err(_) => Err(Error::malformed(format!("{what}: length {n} is too large"))
                .at_offset(self.pos as u64)),
        }
    }
    /// Reads one byte.
    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }
    int_readers! {
        u16_le u16_be u16;
        u32_le u32_be u32;
        u64_le u64_be u64;
        i32_le i32_be i32;
        i64_le i64_be i64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_reports_truncation_with_offset() {
        let mut r = ByteReader::new(&[1, 0, 0, 0, 0, 0, 0, 2, 9]);
        assert_eq!(r.u32_le("a").unwrap(), 1);
        assert_eq!(r.u32_be("b").unwrap(), 2);
        let e = r.u16_le("c").unwrap_err();
        assert_eq!(e.offset(), Some(8));
        assert!(e.to_string().contains("c needs 2 bytes, 1 left"));
        assert!(r.take_u64(u64::MAX, "d").is_err());
    }
}
