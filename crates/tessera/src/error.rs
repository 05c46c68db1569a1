//! The one error type.
//!
//! An [`Error`] carries a [`ErrorKind`], the format it came from, an optional subject
//! (tensor or chunk name) and byte offset, a message and an optional source. Its
//! `Display` reads context first, lower-case, and says where:
//! `aero: tensor "w" at byte 176: data_off + data_len exceeds the shard`.
//!
//! [`ErrorKind::Malformed`] (the file breaks its spec) and [`ErrorKind::Integrity`] (a
//! checksum, HMAC or signature fails) are distinct: `verify`, the CLI exit codes and the
//! Python exception classes branch on them.

use std::fmt;

use crate::format::Format;
use crate::refusal::{Hint, Refusal};

/// What went wrong, coarsely.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An I/O error from the operating system.
    Io,
    /// The bytes match no known format.
    UnknownFormat,
    /// The format is known but this version of it is not supported.
    UnsupportedVersion,
    /// The file breaks its format's spec.
    Malformed,
    /// A checksum, hash, HMAC or signature does not match.
    Integrity,
    /// A number in the file exceeds one of our [`crate::Limits`].
    LimitExceeded,
    /// A valid request we do not support (a format not implemented yet, a lossy conversion
    /// without the option that allows it, …).
    Unsupported,
    /// The caller's input is invalid (bad option, bad tensor data).
    InvalidInput,
    /// A named tensor or chunk does not exist.
    NotFound,
}

impl ErrorKind {
    /// A short lower-case name.
    pub const fn name(self) -> &'static str {
        match self {
            ErrorKind::Io => "io",
            ErrorKind::UnknownFormat => "unknown format",
            ErrorKind::UnsupportedVersion => "unsupported version",
            ErrorKind::Malformed => "malformed",
            ErrorKind::Integrity => "integrity",
            ErrorKind::LimitExceeded => "limit exceeded",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::InvalidInput => "invalid input",
            ErrorKind::NotFound => "not found",
        }
    }
}

struct Inner {
    kind: ErrorKind,
    file: Option<String>,
    /// The OS error number of an `Io` error (`ENOENT`, `EISDIR`, `EACCES`, …).
    os_error: Option<i32>,
    format: Option<Format>,
    subject: Option<String>,
    offset: Option<u64>,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    /// Whether `Display` appends the source (`false` when the message already says
    /// it: an error made from an `io::Error` keeps it only for `source()`).
    show_source: bool,
    /// Options that would lift this error (rendered by the front end: `--cast`, `cast=True`).
    hints: Vec<Hint>,
    /// Every refusal of a conversion, when this error is one (see [`crate::refusal`]).
    refusals: Vec<Refusal>,
}

/// Tessera's error: see the module docs.
pub struct Error(Box<Inner>);

/// `Result<T, tessera::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error of `kind` with a message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error(Box::new(Inner {
            kind,
            file: None,
            os_error: None,
            format: None,
            subject: None,
            offset: None,
            message: message.into(),
            source: None,
            show_source: true,
            hints: Vec::new(),
            refusals: Vec::new(),
        }))
    }

    /// `Malformed`: the file breaks its spec.
    pub fn malformed(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Malformed, message)
    }
    /// `Integrity`: a checksum, hash, HMAC or signature failed.
    pub fn integrity(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Integrity, message)
    }
    /// `LimitExceeded`.
    pub fn limit(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::LimitExceeded, message)
    }
    /// `Unsupported`.
    pub fn unsupported(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Unsupported, message)
    }
    /// `InvalidInput`.
    pub fn invalid_input(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::InvalidInput, message)
    }
    /// `NotFound`.
    pub fn not_found(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::NotFound, message)
    }
    /// `NotFound` for a tensor name no reader has: "no tensor named …", the same words
    /// from every format.
    pub fn no_tensor(name: &str) -> Error {
        Error::not_found(format!("no tensor named {name:?}"))
    }
    /// `UnsupportedVersion`.
    pub fn unsupported_version(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::UnsupportedVersion, message)
    }

    /// Sets the format, whose name is shown first in the message (`ztensor: …`), unless
    /// one is set.
    pub fn in_format(mut self, format: Format) -> Error {
        self.0.format.get_or_insert(format);
        self
    }
    /// Sets the subject (`tensor "w"`, `chunk "blob"`, `line 12`), unless one is set.
    pub fn at_subject(mut self, subject: impl Into<String>) -> Error {
        if self.0.subject.is_none() {
            self.0.subject = Some(subject.into());
        }
        self
    }
    /// Sets the file the problem is in, shown first (`model.zt: ztensor: tensor "w": …`),
    /// unless one is set.
    pub fn in_file(mut self, file: impl Into<String>) -> Error {
        if self.0.file.is_none() {
            self.0.file = Some(file.into());
        }
        self
    }
    /// The file, if known.
    pub fn file(&self) -> Option<&str> {
        self.0.file.as_deref()
    }
    /// The OS error number, for an error that came from the operating system.
    pub fn os_error(&self) -> Option<i32> {
        self.0.os_error
    }
    /// Sets the byte offset where the problem is, unless one is set.
    pub fn at_offset(mut self, offset: u64) -> Error {
        self.0.offset.get_or_insert(offset);
        self
    }
    /// Attaches an underlying cause.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Error {
        self.0.source = Some(Box::new(source));
        self.0.show_source = true;
        self
    }

    /// The kind.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }
    /// The format name, if known.
    pub fn format(&self) -> Option<Format> {
        self.0.format
    }
    /// The subject (tensor, chunk, line), if known.
    pub fn subject(&self) -> Option<&str> {
        self.0.subject.as_deref()
    }
    /// The byte offset, if known.
    pub fn offset(&self) -> Option<u64> {
        self.0.offset
    }
    /// The bare message, without context.
    pub fn message(&self) -> &str {
        &self.0.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_with(f, &|h| format!("option: {}", h.name()))
    }
}

impl Error {
    /// The message as `Display` writes it, with each [`Hint`] spelled by `hint` (the
    /// CLI passes `use --cast`, Python `use cast=True`; `Display` says `option: cast`).
    pub fn render(&self, hint: &dyn Fn(Hint) -> String) -> String {
        let mut s = String::new();
        let _ = self.write_with(&mut s, hint);
        s
    }

    fn write_with(&self, f: &mut dyn fmt::Write, hint: &dyn Fn(Hint) -> String) -> fmt::Result {
        let i = &self.0;
        let mut ctx = Vec::new();
        if let Some(file) = &i.file {
            ctx.push(file.clone());
        }
        if let Some(fmt) = i.format {
            ctx.push(fmt.name().to_string());
        }
        match (&i.subject, i.offset) {
            (Some(s), Some(o)) => ctx.push(format!("{s} at byte {o}")),
            (Some(s), None) => ctx.push(s.clone()),
            (None, Some(o)) => ctx.push(format!("at byte {o}")),
            (None, None) => {}
        }
        for c in &ctx {
            write!(f, "{c}: ")?;
        }
        self.write_message(f, hint)?;
        if let (Some(src), true) = (&i.source, i.show_source) {
            write!(f, ": {src}")?;
        }
        Ok(())
    }

    /// The message, its refusals grouped one per line, then its hints.
    fn write_message(&self, f: &mut dyn fmt::Write, hint: &dyn Fn(Hint) -> String) -> fmt::Result {
        let i = &self.0;
        let lines = crate::refusal::render(&i.refusals, hint);
        match lines.as_slice() {
            [] => f.write_str(&i.message)?,
            [one] => f.write_str(one)?,
            many => {
                write!(f, "{}:", i.message)?;
                for l in many {
                    write!(f, "\n  {l}")?;
                }
            }
        }
        for h in &i.hints {
            write!(f, " ({})", hint(*h))?;
        }
        Ok(())
    }

    /// Adds a hint: an option that would lift this error.
    pub fn with_hint(mut self, hint: Hint) -> Error {
        if !self.0.hints.contains(&hint) {
            self.0.hints.push(hint);
        }
        self
    }

    /// `Unsupported`: every refusal of a conversion, rendered grouped under `header`
    /// (or alone, when they make one group).
    pub fn refused(header: impl Into<String>, refusals: Vec<Refusal>) -> Error {
        let mut e = Error::unsupported(header);
        e.0.refusals = refusals;
        e
    }

    /// The options that would lift this error: its own hints and its refusals', each
    /// once, in order.
    pub fn hints(&self) -> Vec<Hint> {
        let mut out = self.0.hints.clone();
        for h in self.0.refusals.iter().filter_map(|r| r.hint) {
            if !out.contains(&h) {
                out.push(h);
            }
        }
        out
    }

    /// Every refusal, when this error refuses a conversion.
    pub fn refusals(&self) -> &[Refusal] {
        &self.0.refusals
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error({:?}: {})", self.0.kind, self)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .source
            .as_ref()
            .map(|s| s.as_ref() as &(dyn std::error::Error + 'static))
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        // EFAULT: the kernel could not read a buffer we passed it, which for Tessera
        // means a memory-mapped input shrank under us (another process truncated it).
        #[cfg(unix)]
        if e.raw_os_error() == Some(libc::EFAULT) {
            let mut err = Error::new(
                ErrorKind::Io,
                "an input file shrank or became unreadable while it was being read (truncated by another process?)",
            );
            err.0.os_error = Some(libc::EFAULT);
            err.0.source = Some(Box::new(e));
            err.0.show_source = false;
            return err;
        }
        let msg = e.to_string();
        // An unexpected EOF while reading a file is a truncation, not an OS failure.
        let kind = if e.kind() == std::io::ErrorKind::UnexpectedEof {
            ErrorKind::Malformed
        } else {
            ErrorKind::Io
        };
        let mut err = Error::new(kind, msg);
        err.0.os_error = e.raw_os_error();
        // Kept for `source()` (its `kind()` inspectable by a downcast); the message
        // already says it, so `Display` does not repeat it.
        err.0.source = Some(Box::new(e));
        err.0.show_source = false;
        err
    }
}

/// Adds context to a `Result<T, Error>` in one call.
pub trait ResultExt<T> {
    /// Sets the format on the error.
    fn in_format(self, format: Format) -> Result<T>;
    /// Sets the subject on the error.
    fn at_subject(self, subject: impl FnOnce() -> String) -> Result<T>;
}

impl<T> ResultExt<T> for Result<T> {
    fn in_format(self, format: Format) -> Result<T> {
        self.map_err(|e| e.in_format(format))
    }
    fn at_subject(self, subject: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| e.at_subject(subject()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_are_kept_as_the_source() {
        use std::error::Error as _;
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "no entry");
        let e = Error::from(io).in_file("m.bin");
        assert_eq!(e.to_string(), "m.bin: no entry", "Display says it once");
        let src = e.source().expect("the io::Error is the source");
        let io = src.downcast_ref::<std::io::Error>().expect("an io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::PermissionDenied);
        assert_eq!(e.kind(), ErrorKind::Io);
        let eof = Error::from(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        assert_eq!(eof.kind(), ErrorKind::Malformed);
        let io = eof
            .source()
            .and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(
            io.map(|e| e.kind()),
            Some(std::io::ErrorKind::UnexpectedEof)
        );
        // A source given explicitly is still shown.
        let e = Error::malformed("bad").with_source(std::fmt::Error);
        assert!(e.to_string().starts_with("bad: "), "{e}");
    }

    #[test]
    fn display_puts_context_first() {
        let e = Error::malformed("chunk_offset + chunk_length exceeds file size")
            .at_subject("TOC entry 3")
            .at_offset(176)
            .in_format(Format::Aero);
        assert_eq!(
            e.to_string(),
            "aero: TOC entry 3 at byte 176: chunk_offset + chunk_length exceeds file size"
        );
        assert_eq!(e.kind(), ErrorKind::Malformed);
    }

    #[test]
    fn first_context_wins() {
        let e = Error::integrity("crc mismatch")
            .at_subject("tensor \"a\"")
            .at_subject("outer");
        assert_eq!(e.subject(), Some("tensor \"a\""));
    }
}
