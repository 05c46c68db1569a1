//! Formats and their detection by content.
//!
//! Each format module describes itself in one [`FormatSpec`] (name, title, extensions,
//! magic, reader, writer, capabilities, options); the registry in [`crate::formats`]
//! lists them, one line per format, and generates the [`Format`] enum from that list.
//! Everything here — detection, names, extensions, `can_read`/`can_write` — reads the
//! registry, so a new format needs its folder, its registry line and its Cargo feature
//! (see [`crate::formats`]). A format built without its feature is still detected and
//! named, by a stand-in with no reader or writer: [`Format::is_built`].
//!
//! [`Format::detect`] looks only at the first bytes (a magic table, as `image` does). The
//! file extension is a hint for the *output* format of a conversion, never for reading.

use std::fmt;
use std::path::Path;

use crate::any::{Access, OpenFn};
use crate::convert::{Capabilities, WriteFn};
use crate::error::{Error, ErrorKind, Result};

pub use crate::formats::Format;

/// One format as its module describes it. Built with [`FormatSpec::new`] and the `const`
/// setters, so a field added later does not break existing descriptions:
///
/// ```
/// # use tessera::format::FormatSpec;
/// const SPEC: FormatSpec = FormatSpec::new("demo", "Demo v1")
///     .extensions(&["demo"])
///     .magic(&[b"DEMO"]);
/// assert_eq!(SPEC.name, "demo");
/// ```
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct FormatSpec {
    /// The short name used by the CLI (`--to`), JSON output and Python.
    pub name: &'static str,
    /// A human title with version (`zTensor v1.0`).
    pub title: &'static str,
    /// File extensions, the preferred one first.
    pub extensions: &'static [&'static str],
    /// Other names the format is known by (`--to ztensor2`), besides `name`.
    pub aliases: &'static [&'static str],
    /// Magic prefixes; the longest one that matches wins.
    pub magic: &'static [&'static [u8]],
    /// A test on the first [`DETECT_LEN`] bytes: alone, for formats without a magic
    /// (safetensors); with `magic`, to tell apart formats that share one.
    pub sniff: Option<fn(&[u8]) -> bool>,
    /// The reader and how it reads, when implemented.
    pub reader: Option<(OpenFn, Access)>,
    /// The writer, when implemented.
    pub writer: Option<WriteFn>,
    /// What the format can hold, when Tessera writes it.
    pub capabilities: Option<fn() -> Capabilities>,
    /// Shown in `tessera formats`: a container of tensors (not a side file, an envelope
    /// or a delta).
    pub listed: bool,
    /// A file holds exactly one tensor (`.npy`): not a model, left out of the conversion
    /// matrix and the tour.
    pub single_tensor: bool,
    /// The libFuzzer target (`fuzz/fuzz_targets/<name>.rs`) and test-data folder
    /// (`crates/tessera/tests/data/<name>/`) that cover this format's reader; formats
    /// that share a reader share it.
    pub fuzz_target: Option<&'static str>,
    /// The writer options the format takes ([`crate::options`]); any other is refused.
    pub options: &'static [crate::options::OptionSpec],
    /// The error when a detected format has no reader or writer (defaults to "… is
    /// detected but not supported yet").
    pub not_supported: Option<(ErrorKind, &'static str)>,
}

impl FormatSpec {
    /// A format known by name and title only: detected by nothing, neither read nor
    /// written. Add the rest with the setters.
    pub const fn new(name: &'static str, title: &'static str) -> FormatSpec {
        FormatSpec {
            name,
            title,
            extensions: &[],
            aliases: &[],
            magic: &[],
            sniff: None,
            reader: None,
            writer: None,
            capabilities: None,
            listed: true,
            single_tensor: false,
            fuzz_target: None,
            not_supported: None,
            options: &[],
        }
    }
    /// File extensions, the preferred one first.
    pub const fn extensions(mut self, e: &'static [&'static str]) -> FormatSpec {
        self.extensions = e;
        self
    }
    /// Other names for the format.
    pub const fn aliases(mut self, a: &'static [&'static str]) -> FormatSpec {
        self.aliases = a;
        self
    }
    /// Magic prefixes.
    pub const fn magic(mut self, m: &'static [&'static [u8]]) -> FormatSpec {
        self.magic = m;
        self
    }
    /// A content test (see [`FormatSpec::sniff`]).
    pub const fn sniff(mut self, f: fn(&[u8]) -> bool) -> FormatSpec {
        self.sniff = Some(f);
        self
    }
    /// The reader, how it reads, and the fuzz target that covers it.
    pub const fn reader(mut self, open: OpenFn, access: Access, fuzz: &'static str) -> FormatSpec {
        self.reader = Some((open, access));
        self.fuzz_target = Some(fuzz);
        self
    }
    /// The writer and what it can hold.
    pub const fn writer(mut self, write: WriteFn, caps: fn() -> Capabilities) -> FormatSpec {
        self.writer = Some(write);
        self.capabilities = Some(caps);
        self
    }
    /// The writer options the format takes.
    pub const fn options(mut self, o: &'static [crate::options::OptionSpec]) -> FormatSpec {
        self.options = o;
        self
    }
    /// Not listed by `tessera formats` (a side file, an envelope, a delta).
    pub const fn unlisted(mut self) -> FormatSpec {
        self.listed = false;
        self
    }
    /// A file holds exactly one tensor.
    pub const fn single_tensor(mut self) -> FormatSpec {
        self.single_tensor = true;
        self
    }
    /// The error for this format when it cannot be read or written.
    pub const fn not_supported(mut self, kind: ErrorKind, message: &'static str) -> FormatSpec {
        self.not_supported = Some((kind, message));
        self
    }
}

impl fmt::Debug for FormatSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FormatSpec")
            .field("name", &self.name)
            .field("title", &self.title)
            .field("extensions", &self.extensions)
            .field("read", &self.reader.map(|r| r.1))
            .field("write", &self.writer.is_some())
            .finish_non_exhaustive()
    }
}

/// How many leading bytes [`Format::detect`] wants to see.
/// 512: a PyTorch zip is told from an npz by its first record's name, which can be long.
pub const DETECT_LEN: usize = 512;

impl Format {
    /// Detects the format from the first bytes of a file (at least [`DETECT_LEN`] when
    /// the file is that long): the longest matching magic (with its sniff test, if the
    /// format has one), else the first format whose sniff test alone accepts the bytes.
    pub fn detect(head: &[u8]) -> Option<Format> {
        let sniffed = |f: Format| f.spec().sniff.is_none_or(|s| s(head));
        let mut best: Option<(usize, Format)> = None;
        for f in Format::ALL {
            for m in f.spec().magic {
                // Longest magic wins; on a tie, a format whose sniff test accepted the
                // bytes beats one that has none (a PyTorch zip over a plain zip = npz).
                let better = match best {
                    None => true,
                    Some((len, b)) => {
                        m.len() > len
                            || (m.len() == len
                                && f.spec().sniff.is_some()
                                && b.spec().sniff.is_none())
                    }
                };
                if head.starts_with(m) && better && sniffed(f) {
                    best = Some((m.len(), f));
                }
            }
        }
        if let Some((_, f)) = best {
            return Some(f);
        }
        Format::ALL
            .into_iter()
            .find(|f| f.spec().magic.is_empty() && f.spec().sniff.is_some() && sniffed(*f))
    }

    /// Like [`Format::detect`], but an `UnknownFormat` error when nothing matches.
    pub fn detect_or_err(head: &[u8]) -> Result<Format> {
        Format::detect(head).ok_or_else(|| {
            let shown: String = head
                .iter()
                .take(8)
                .map(|b| {
                    if b.is_ascii_graphic() {
                        (*b as char).to_string()
                    } else {
                        format!("\\x{b:02x}")
                    }
                })
                .collect();
            Error::new(
                crate::ErrorKind::UnknownFormat,
                format!("unknown format: no known magic at the start of the file (starts with \"{shown}\")"),
            )
        })
    }

    /// The short name used by the CLI (`--to`), JSON output and Python.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// A human title with version (`zTensor v1.0`).
    pub fn title(self) -> &'static str {
        self.spec().title
    }

    /// File extensions, the preferred one first.
    pub fn extensions(self) -> &'static [&'static str] {
        self.spec().extensions
    }

    /// Parses a name (`ztensor`, `zt`, `safetensors`, …) or an extension.
    pub fn from_name(s: &str) -> Option<Format> {
        let s = s.trim_start_matches('.').to_ascii_lowercase();
        Format::ALL.into_iter().find(|f| {
            f.name() == s
                || f.spec().aliases.contains(&s.as_str())
                || f.extensions().contains(&s.as_str())
        })
    }

    /// The output format a path's extension asks for.
    pub fn from_path(path: &Path) -> Option<Format> {
        path.extension()
            .and_then(|e| e.to_str())
            .and_then(Format::from_name)
    }

    /// True when Tessera can read tensors from this format today.
    pub fn can_read(self) -> bool {
        self.spec().reader.is_some()
    }

    /// True when Tessera can write this format today.
    pub fn can_write(self) -> bool {
        self.spec().writer.is_some()
    }

    /// The error for a detected format that is not implemented (yet).
    pub fn not_supported_yet(self) -> Error {
        match self.spec().not_supported {
            Some((kind, message)) => Error::new(kind, message),
            None => Error::unsupported(format!(
                "{} is detected but not supported yet",
                self.title()
            )),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_every_magic() {
        assert_eq!(Format::detect(b"ZTEN1000...."), Some(Format::Ztensor));
        assert_eq!(
            Format::detect(b"\x89ZT2\r\n\x1a\n"),
            Some(Format::ZtensorV2)
        );
        assert_eq!(Format::detect(b"FOLDv1\0\0\0"), Some(Format::Fold));
        assert_eq!(Format::detect(b"AERO\x01\x00"), Some(Format::Aero));
        assert_eq!(Format::detect(b"GPTRSCHK"), Some(Format::GptrsCheckpoint));
        assert_eq!(Format::detect(b"GPTRSTEN"), Some(Format::GptrsArchive));
        assert_eq!(Format::detect(b"WTXT 1\nmeta"), Some(Format::Wtxt));
        assert_eq!(
            Format::detect(b"WTXT-DELTA 2 base"),
            Some(Format::WtxtDelta)
        );
        assert_eq!(Format::detect(b"\x93NUMPY\x01\x00"), Some(Format::Npy));
        assert_eq!(Format::detect(b"PK\x03\x04"), Some(Format::Npz));
        assert_eq!(Format::detect(b"GGUF\x03\0\0\0"), Some(Format::Gguf));
        assert_eq!(
            Format::detect(b"\x10\0\0\0\0\0\0\0{\"__metadata__\""),
            Some(Format::Safetensors)
        );
        assert_eq!(Format::detect(b"hello world"), None);
        assert_eq!(Format::detect(b""), None);
    }

    #[test]
    fn names_and_extensions() {
        assert_eq!(Format::from_name("zt"), Some(Format::Ztensor));
        assert_eq!(Format::from_name(".mind"), Some(Format::Fold));
        assert_eq!(Format::from_name("ztensor2"), Some(Format::ZtensorV2));
        assert_eq!(Format::from_name("bin"), Some(Format::Pytorch));
        assert_eq!(
            Format::from_path(Path::new("a/b.gptrsten")),
            Some(Format::GptrsArchive)
        );
        for f in Format::ALL {
            assert_eq!(Format::from_name(f.name()), Some(f));
        }
    }

    #[test]
    fn the_registry_is_consistent() {
        let mut names = std::collections::HashSet::new();
        let mut exts = std::collections::HashSet::new();
        let mut magics = std::collections::HashSet::new();
        for f in Format::ALL {
            let s = f.spec();
            assert!(names.insert(s.name), "{}: name used twice", s.name);
            for e in s.extensions {
                assert!(exts.insert(*e), "{}: extension {e} used twice", s.name);
            }
            for m in s.magic {
                // Two formats may share a magic only when a sniff test tells them apart.
                assert!(
                    magics.insert(*m) || s.sniff.is_some(),
                    "{}: magic {m:?} used twice",
                    s.name
                );
                assert!(m.len() <= DETECT_LEN);
                let mut head = m.to_vec();
                head.resize(DETECT_LEN, 0);
                if s.sniff.is_none() {
                    assert_eq!(Format::detect(&head), Some(f), "{}", s.name);
                }
            }
            assert!(
                !s.magic.is_empty() || s.sniff.is_some(),
                "{}: nothing detects it",
                s.name
            );
            assert_eq!(s.reader.is_some(), s.fuzz_target.is_some(), "{}", s.name);
            assert_eq!(s.writer.is_some(), s.capabilities.is_some(), "{}", s.name);
            if let Some(caps) = s.capabilities {
                assert_eq!(
                    caps().format,
                    f,
                    "{}: capabilities name another format",
                    s.name
                );
            }
            if !f.can_read() || !f.can_write() {
                let e = f.not_supported_yet();
                assert!(!e.to_string().is_empty());
            }
        }
    }
}
