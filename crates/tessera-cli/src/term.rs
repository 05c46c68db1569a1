//! Text from a file never reaches a terminal raw.
//!
//! Tensor names, metadata keys and values, chunk names and error messages quoting them
//! come from files, and a file can hold bytes that a terminal obeys: ESC sequences that
//! clear the screen, retitle the window or write the clipboard (OSC 52), C1 controls
//! (U+0080–U+009F, U+009B is a one-character CSI), DEL, and the Unicode bidi controls
//! that reorder what is shown (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C).
//!
//! Two layers, so that nothing depends on remembering to call a function:
//! - [`escape`] renders one value for a line of human output: every control character,
//!   newline and tab included (a name holding `\n` cannot forge a line), as `\u{…}`.
//! - [`SafeWriter`] wraps stdout and stderr as a whole: whatever is written, every
//!   control character except the newline and tab of our own layout is escaped the
//!   same way, and in `--json` output the characters JSON allows raw (DEL, C1, bidi)
//!   are escaped as `\u00XX` / `\uXXXX`, which keeps it valid JSON.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write};

/// Characters that must not reach a terminal raw (newline and tab are decided by the
/// caller).
pub fn is_unsafe(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}'
        | '\u{200e}'
        | '\u{200f}'
        | '\u{61c}')
}

fn push_escaped(out: &mut String, c: char) {
    let _ = write!(out, "\\u{:04x}", c as u32);
}

/// One value for human output: every unsafe character, newline and tab included,
/// written as `\u00XX`. Borrowed when there is nothing to escape.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A writer that escapes every unsafe character in what passes through it, except the
/// newline and tab our own output uses. Bytes that are not UTF-8 are written as `\xNN`.
pub struct SafeWriter<W: Write> {
    inner: W,
    /// The start of a UTF-8 sequence split across two writes.
    pending: Vec<u8>,
}

impl<W: Write> SafeWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> SafeWriter<W> {
        SafeWriter {
            inner,
            pending: Vec::new(),
        }
    }

    fn emit(&mut self, s: &str) -> io::Result<()> {
        if !s.chars().any(|c| is_unsafe(c) && c != '\n' && c != '\t') {
            return self.inner.write_all(s.as_bytes());
        }
        let mut out = String::with_capacity(s.len() + 8);
        for c in s.chars() {
            if is_unsafe(c) && c != '\n' && c != '\t' {
                push_escaped(&mut out, c);
            } else {
                out.push(c);
            }
        }
        self.inner.write_all(out.as_bytes())
    }
}

impl<W: Write> Write for SafeWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut data = std::mem::take(&mut self.pending);
        data.extend_from_slice(buf);
        let mut rest = &data[..];
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    self.emit(s)?;
                    break;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    // `good` is valid UTF-8 by construction.
                    self.emit(std::str::from_utf8(good).unwrap_or_default())?;
                    match e.error_len() {
                        // An incomplete sequence at the end: wait for the next write.
                        None => {
                            self.pending = bad.to_vec();
                            break;
                        }
                        Some(n) => {
                            let mut hex = String::new();
                            for b in &bad[..n] {
                                let _ = write!(hex, "\\x{b:02x}");
                            }
                            self.inner.write_all(hex.as_bytes())?;
                            rest = &bad[n..];
                        }
                    }
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            let mut hex = String::new();
            for b in std::mem::take(&mut self.pending) {
                let _ = write!(hex, "\\x{b:02x}");
            }
            self.inner.write_all(hex.as_bytes())?;
        }
        self.inner.flush()
    }
}

impl<W: Write> Drop for SafeWriter<W> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// A warning or note on stderr, escaped.
pub fn warn(msg: &str) {
    let mut e = SafeWriter::new(io::stderr().lock());
    let _ = writeln!(e, "{}", escape(msg));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_every_class() {
        let s = "a\x1b]52;c;QUJD\x07b\u{9b}2J\u{202e}x\u{7f}\n\t";
        let e = escape(s);
        assert_eq!(
            e,
            "a\\u001b]52;c;QUJD\\u0007b\\u009b2J\\u202ex\\u007f\\u000a\\u0009"
        );
        assert!(matches!(escape("plain ü 名"), Cow::Borrowed(_)));
    }

    #[test]
    fn writer_keeps_layout_and_escapes_the_rest_even_split() {
        let mut out = Vec::new();
        {
            let mut w = SafeWriter::new(&mut out);
            let s = "x\u{9b}y\n\u{202e}\tz\x1b".as_bytes();
            // Byte by byte: multi-byte characters split across writes.
            for b in s {
                w.write_all(&[*b]).unwrap();
            }
            w.write_all(b"\xff!").unwrap();
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "x\\u009by\n\\u202e\tz\\u001b\\xff!"
        );
    }

    #[test]
    fn json_stays_valid() {
        let v = serde_json::json!({"k\u{9b}": "v\u{202e}\u{7f}\u{1b}"});
        let mut out = Vec::new();
        {
            let mut w = SafeWriter::new(&mut out);
            write!(w, "{}", serde_json::to_string(&v).unwrap()).unwrap();
        }
        let text = String::from_utf8(out).unwrap();
        assert!(!text.chars().any(is_unsafe), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
    }
}
