//! A bounded reader of protobuf's wire format over a [`SourceRef`], for the few ONNX
//! messages Tessera reads.
//!
//! A [`Cursor`] walks the fields of one message, `[start, end)` of the file: it reads
//! tags and varints from a small window of the source (the whole slice when the file is
//! in memory, 4 KiB reads otherwise), and hands a length-delimited field back as its
//! byte range, checked against the bytes left in the message, without reading it. A
//! sub-message is read by a new cursor over that range (the callers descend a fixed
//! number of levels, never by recursion the file drives); a field nobody asked for is
//! skipped by its length. Nothing is allocated from a number in the file.

use std::borrow::Cow;

use crate::error::{Error, Result};
use crate::source::SourceRef;

/// How many bytes a cursor over a source that is not in memory reads at a time.
const WINDOW: u64 = 4096;

/// A field's value as the wire states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Value {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1: the value, little-endian.
    Fixed64(u64),
    /// Wire type 5: the value, little-endian.
    Fixed32(u32),
    /// Wire type 2: `(offset, length)` in the file, inside the message.
    Bytes(u64, u64),
}

/// One field: its number and value.
#[derive(Debug, Clone, Copy)]
pub(super) struct Field {
    pub number: u32,
    pub value: Value,
    /// Where its tag starts in the file (for errors).
    pub at: u64,
}

/// The fields of one message, `[pos, end)` of the source, in order.
pub(super) struct Cursor<'d> {
    src: SourceRef<'d>,
    pos: u64,
    end: u64,
    /// Bytes of the source from `buf_at`.
    buf: Cow<'d, [u8]>,
    buf_at: u64,
    /// What the message is, for errors (`ModelProto`, `initializer 3`…).
    what: &'static str,
}

impl<'d> Cursor<'d> {
    /// A cursor over `[start, start + len)` of `src`, which the caller has checked lies
    /// inside the source.
    pub(super) fn new(src: SourceRef<'d>, start: u64, len: u64, what: &'static str) -> Cursor<'d> {
        let (buf, buf_at) = match src.as_slice() {
            Some(s) => (Cow::Borrowed(s), 0),
            None => (Cow::Borrowed(&[][..]), start),
        };
        Cursor {
            src,
            pos: start,
            end: start.saturating_add(len).min(src.len()),
            buf,
            buf_at,
            what,
        }
    }

    /// The cursor over a length-delimited field's bytes (a sub-message), starting with
    /// this cursor's window when the field starts inside it (no second read of it).
    pub(super) fn sub(&self, off: u64, len: u64, what: &'static str) -> Cursor<'d> {
        let mut c = Cursor::new(self.src, off, len, what);
        let inside = off >= self.buf_at && off - self.buf_at < self.buf.len() as u64;
        if inside {
            c.buf = self.buf.clone();
            c.buf_at = self.buf_at;
        }
        c
    }

    fn error(&self, at: u64, message: impl std::fmt::Display) -> Error {
        Error::malformed(format!("{}: {message}", self.what)).at_offset(at)
    }

    /// The byte at `pos`, reading a window when it is not buffered.
    fn byte(&mut self, pos: u64) -> Result<u8> {
        if pos >= self.end {
            return Err(self.error(
                pos,
                format!(
                    "truncated: a field runs past the end of the message at byte {}",
                    self.end
                ),
            ));
        }
        let rel = pos.wrapping_sub(self.buf_at);
        if pos < self.buf_at || rel >= self.buf.len() as u64 {
            let n = WINDOW.min(self.end - pos);
            self.buf = self.src.read_at(pos, n)?;
            self.buf_at = pos;
            return self
                .buf
                .first()
                .copied()
                .ok_or_else(|| self.error(pos, "empty read"));
        }
        Ok(self.buf[rel as usize])
    }

    /// A varint at the cursor: at most 10 bytes, the tenth at most 1.
    pub(super) fn varint(&mut self) -> Result<u64> {
        let at = self.pos;
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.byte(self.pos)?;
            self.pos += 1;
            if i == 9 && b > 1 {
                return Err(self.error(at, "a varint overflows 64 bits"));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.error(at, "a varint runs over 10 bytes"))
    }

    fn fixed(&mut self, n: u64) -> Result<u64> {
        let mut v = 0u64;
        for i in 0..n {
            v |= u64::from(self.byte(self.pos)?) << (8 * i);
            self.pos += 1;
        }
        Ok(v)
    }

    /// The next field, or `None` at the end of the message. A length-delimited field's
    /// bytes are skipped, their range returned.
    pub(super) fn next_field(&mut self) -> Result<Option<Field>> {
        if self.pos >= self.end {
            return Ok(None);
        }
        let at = self.pos;
        let tag = self.varint()?;
        let number = tag >> 3;
        if number == 0 || number > (1 << 29) - 1 {
            return Err(self.error(at, format!("field number {number} is not valid")));
        }
        let value = match tag & 7 {
            0 => Value::Varint(self.varint()?),
            1 => Value::Fixed64(self.fixed(8)?),
            5 => Value::Fixed32(self.fixed(4)? as u32),
            2 => {
                let len = self.varint()?;
                let left = self.end - self.pos;
                if len > left {
                    return Err(self.error(
                        at,
                        format!(
                            "truncated: field {number} says {len} bytes, {left} are left in the message"
                        ),
                    ));
                }
                let off = self.pos;
                self.pos += len;
                Value::Bytes(off, len)
            }
            w => {
                return Err(self.error(
                    at,
                    format!("field {number} has wire type {w}, which protobuf 3 does not use"),
                ))
            }
        };
        Ok(Some(Field {
            number: number as u32,
            value,
            at,
        }))
    }

    /// The bytes `[off, off + len)`, which [`Cursor::next_field`] checked lie inside the
    /// message: borrowed from a source in memory.
    pub(super) fn bytes(&self, off: u64, len: u64) -> Result<Cow<'d, [u8]>> {
        let rel = off.wrapping_sub(self.buf_at);
        if off >= self.buf_at && rel.saturating_add(len) <= self.buf.len() as u64 {
            if let Cow::Borrowed(b) = self.buf {
                return Ok(Cow::Borrowed(&b[rel as usize..(rel + len) as usize]));
            }
            return Ok(Cow::Owned(
                self.buf[rel as usize..(rel + len) as usize].to_vec(),
            ));
        }
        self.src.read_at(off, len)
    }
}

/// A field's varint, or a malformed error naming the field.
pub(super) fn as_varint(f: &Field, what: &str) -> Result<u64> {
    match f.value {
        Value::Varint(v) => Ok(v),
        _ => Err(wrong_type(f, what, "a varint")),
    }
}

/// A field's byte range, or a malformed error naming the field.
pub(super) fn as_bytes(f: &Field, what: &str) -> Result<(u64, u64)> {
    match f.value {
        Value::Bytes(o, n) => Ok((o, n)),
        _ => Err(wrong_type(f, what, "length-delimited")),
    }
}

/// The error for a field of the wrong wire type.
pub(super) fn wrong_type(f: &Field, what: &str, want: &str) -> Error {
    Error::malformed(format!(
        "{what} (field {}) is not {want} on the wire",
        f.number
    ))
    .at_offset(f.at)
}

/// Decodes the packed varints of `bytes` in order, calling `each` with every value; a
/// varint cut off by the end is an error.
pub(super) fn packed_varints(bytes: &[u8], mut each: impl FnMut(u64) -> Result<()>) -> Result<()> {
    let mut i = 0;
    while i < bytes.len() {
        let mut v = 0u64;
        let mut k = 0;
        loop {
            let Some(&b) = bytes.get(i) else {
                return Err(Error::malformed(
                    "a packed varint is cut off by the end of its field",
                ));
            };
            i += 1;
            if k == 9 && b > 1 {
                return Err(Error::malformed("a packed varint overflows 64 bits"));
            }
            v |= u64::from(b & 0x7f) << (7 * k);
            k += 1;
            if b & 0x80 == 0 {
                break;
            }
        }
        each(v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(bytes: &[u8]) -> Result<Vec<(u32, Value)>> {
        let src = SourceRef::from(bytes);
        let mut c = Cursor::new(src, 0, bytes.len() as u64, "test");
        let mut out = Vec::new();
        while let Some(f) = c.next_field()? {
            out.push((f.number, f.value));
        }
        Ok(out)
    }

    #[test]
    fn reads_every_wire_type() {
        let got = fields(&[
            0x08, 0x96, 0x01, // 1: varint 150
            0x12, 0x02, b'h', b'i', // 2: bytes at 5..7
            0x1d, 1, 0, 0, 0, // 3: fixed32 1
            0x21, 2, 0, 0, 0, 0, 0, 0, 0, // 4: fixed64 2
        ])
        .unwrap();
        assert_eq!(
            got,
            [
                (1, Value::Varint(150)),
                (2, Value::Bytes(5, 2)),
                (3, Value::Fixed32(1)),
                (4, Value::Fixed64(2))
            ]
        );
    }

    #[test]
    fn refuses_what_does_not_fit() {
        // A length past the end of the message.
        let e = fields(&[0x12, 0x05, b'h']).unwrap_err();
        assert!(e.to_string().contains("5 bytes, 1 are left"), "{e}");
        // A varint cut off, one over 10 bytes, one over 64 bits.
        assert!(fields(&[0x08, 0x80]).is_err());
        assert!(
            fields(&[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])
                .is_err()
        );
        let e = fields(&[
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02,
        ])
        .unwrap_err();
        assert!(e.to_string().contains("overflows"), "{e}");
        // Groups and field number 0.
        assert!(fields(&[0x0b]).is_err());
        assert!(fields(&[0x00, 0x00]).is_err());
        let mut n = 0;
        assert!(packed_varints(&[0x01, 0x80], |_| {
            n += 1;
            Ok(())
        })
        .is_err());
    }

    #[test]
    fn reads_through_windows_over_a_source_not_in_memory() {
        // 3000 fields of 3 bytes: more than one 4 KiB window.
        let mut bytes = Vec::new();
        for i in 0..3000u32 {
            bytes.extend([0x08, 0x80 | (i & 0x7f) as u8, (i >> 7) as u8]);
        }
        let v = bytes.clone();
        let src = SourceRef::new(&v as &dyn crate::source::ByteSource);
        let counting = crate::source::CountingSource::new(bytes.clone());
        let src2 = SourceRef::new(&counting as &dyn crate::source::ByteSource);
        for s in [src, src2] {
            let mut c = Cursor::new(s, 0, bytes.len() as u64, "test");
            let mut i = 0u64;
            while let Some(f) = c.next_field().unwrap() {
                assert_eq!(f.value, Value::Varint(i));
                i += 1;
            }
            assert_eq!(i, 3000);
        }
        assert!(counting.bytes() <= bytes.len() as u64 + 4096);
    }
}
