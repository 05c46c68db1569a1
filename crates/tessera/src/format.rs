//! What each format *is*: its identity (name, title, extensions, aliases, magic, content
//! test, Cargo feature), and detection by content.
//!
//! This module is a leaf: it imports nothing of the library, so everything can name a
//! [`Format`] (errors, capabilities, reports) without depending on any reader or writer.
//! The rule a newcomer can hold: *the core never names a format; formats name the core.*
//!
//! A format's identity is one line of the `identities!` table below and is always
//! compiled, whatever the Cargo features: a file of a format this build left out is still
//! recognised and refused by name. What a format can *do* — its reader, writer,
//! capabilities, options and how it makes sets — is its codec, one line of the table in
//! [`crate::formats`], beside the formats' folders. Both tables match on every
//! [`Format`], so a variant added here without its codec line is a compile error.
//!
//! [`Format::detect`] looks only at the first bytes (a magic table, as `image` does). The
//! file extension is a hint for the *output* format of a conversion, never for reading.

use std::fmt;
use std::path::Path;

pub mod sniff;

/// A format's identity: how it is named, recognised and built.
///
/// Built with [`Identity::new`] and the `const` setters:
///
/// ```
/// # use tessera::format::Identity;
/// const DEMO: Identity = Identity::new("demo", "Demo v1", "demo")
///     .extensions(&["demo"])
///     .magic(&[b"DEMO"]);
/// assert_eq!(DEMO.name, "demo");
/// ```
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct Identity {
    /// The short name used by the CLI (`--to`), JSON output and Python.
    pub name: &'static str,
    /// A human title with version (`zTensor v1.0`).
    pub title: &'static str,
    /// The Cargo feature that builds the format's reader and writer.
    pub feature: &'static str,
    /// File extensions, the preferred one first.
    pub extensions: &'static [&'static str],
    /// Other names the format is known by (`--to ztensor2`), besides `name`.
    pub aliases: &'static [&'static str],
    /// Magic prefixes; the longest one that matches wins.
    pub magic: &'static [&'static [u8]],
    /// A test on the first [`DETECT_LEN`] bytes: alone, for formats without a magic
    /// (safetensors); with `magic`, to tell apart formats that share one.
    pub sniff: Option<fn(&[u8]) -> bool>,
    /// Shown in `tessera formats`: a container of tensors (not a side file, an envelope
    /// or a delta).
    pub listed: bool,
    /// A file holds exactly one tensor (`.npy`): not a model, left out of the conversion
    /// matrix and the tour.
    pub single_tensor: bool,
}

impl Identity {
    /// A format known by name, title and Cargo feature; add the rest with the setters.
    pub const fn new(name: &'static str, title: &'static str, feature: &'static str) -> Self {
        Identity {
            name,
            title,
            feature,
            extensions: &[],
            aliases: &[],
            magic: &[],
            sniff: None,
            listed: true,
            single_tensor: false,
        }
    }
    /// File extensions, the preferred one first.
    pub const fn extensions(mut self, e: &'static [&'static str]) -> Self {
        self.extensions = e;
        self
    }
    /// Other names for the format.
    pub const fn aliases(mut self, a: &'static [&'static str]) -> Self {
        self.aliases = a;
        self
    }
    /// Magic prefixes.
    pub const fn magic(mut self, m: &'static [&'static [u8]]) -> Self {
        self.magic = m;
        self
    }
    /// A content test (see [`Identity::sniff`]).
    pub const fn sniff(mut self, f: fn(&[u8]) -> bool) -> Self {
        self.sniff = Some(f);
        self
    }
    /// Not listed by `tessera formats` (a side file, an envelope, a delta).
    pub const fn unlisted(mut self) -> Self {
        self.listed = false;
        self
    }
    /// A file holds exactly one tensor.
    pub const fn single_tensor(mut self) -> Self {
        self.single_tensor = true;
        self
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("name", &self.name)
            .field("title", &self.title)
            .field("feature", &self.feature)
            .field("extensions", &self.extensions)
            .finish_non_exhaustive()
    }
}

/// Generates [`Format`] (one variant per line, documented by the line's doc comment),
/// [`Format::ALL`], [`Format::identity`] and [`Format::is_built`]. A line is
/// `Variant: "feature" => Identity::new(name, title, "feature")…,`; the feature is
/// written twice because `cfg!` needs it as a literal, and a const check holds the two
/// equal.
macro_rules! identities {
    ($( $(#[$doc:meta])* $variant:ident : $feature:literal => $identity:expr, )*) => {
        /// Every format Tessera knows, implemented or not: one variant per line of the
        /// identity table in `format.rs`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Format {
            $( $(#[$doc])* $variant, )*
        }

        impl Format {
            /// Every format, in table order.
            pub const ALL: [Format; <[&str]>::len(&[$(stringify!($variant)),*])] =
                [$(Format::$variant),*];

            /// The format's identity: name, title, extensions, magic, feature.
            pub const fn identity(self) -> &'static Identity {
                match self {
                    $( Format::$variant => {
                        const I: Identity = $identity;
                        &I
                    } )*
                }
            }

            /// True when the crate was built with the format's Cargo feature (its
            /// reader and writer, where it has them, are in this build).
            pub const fn is_built(self) -> bool {
                match self {
                    $( Format::$variant => cfg!(feature = $feature), )*
                }
            }
        }

        const _: () = {
            $( assert!(
                same(Format::$variant.identity().feature, $feature),
                concat!("the identity line of ", stringify!($variant), " names two features")
            ); )*
        };
    };
}

/// `a == b` for `&str`, in a `const` context (the tables' feature checks).
pub(crate) const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

identities! {
    /// WTXT/Chunks v1.1 snapshot (`WTXT 1`).
    Wtxt: "wtxt" => Identity::new("wtxt", "WTXT/Chunks v1.1", "wtxt")
        .extensions(&["wtxt"])
        .magic(&[b"WTXT 1\n"]),
    /// WTXT DELTA v2 (`WTXT-DELTA 2`): detected, applied with `tessera wtxt apply`.
    WtxtDelta: "wtxt" => Identity::new("wtxt-delta", "WTXT DELTA v2", "wtxt")
        .extensions(&["wtxtdelta"])
        .magic(&[b"WTXT-DELTA 2"])
        .unlisted(),
    /// WSUM finalization line of a streamed WTXT (`WSUM 1`).
    Wsum: "wtxt" => Identity::new("wsum", "WTXT WSUM", "wtxt")
        .extensions(&["wsum"])
        .magic(&[b"WSUM 1"])
        .unlisted(),
    /// An age ASCII-armored encrypted file (typically a WTXT snapshot).
    AgeArmor: "age" => Identity::new("age", "age-encrypted (ASCII armor)", "age")
        .extensions(&["age"])
        .magic(&[b"-----BEGIN AGE ENCRYPTED FILE-----"])
        .unlisted(),
    /// zTensor v1.0 / v1.1 (`ZTEN1000`).
    Ztensor: "ztensor" => Identity::new("ztensor", "zTensor v1.0", "ztensor")
        .extensions(&["zt", "ztensor"])
        .magic(&[b"ZTEN1000"]),
    /// zTensor v2 (`\x89ZT2\r\n\x1a\n`).
    ZtensorV2: "ztensor" => Identity::new("ztensor-v2", "zTensor v2", "ztensor")
        .aliases(&["ztensor2"])
        .magic(&[b"\x89ZT2\r\n\x1a\n"]),
    /// FOLD `.fold` / `.mind` (`FOLDv1\0\0`).
    Fold: "fold" => Identity::new("fold", "FOLD v1.2", "fold")
        .extensions(&["fold", "mind"])
        .magic(&[b"FOLDv1\0\0"]),
    /// AERO v0.1 (`AERO`).
    Aero: "aero" => Identity::new("aero", "AERO v0.1", "aero")
        .extensions(&["aero"])
        .magic(&[b"AERO"]),
    /// GPTRS v2 checkpoint (`GPTRSCHK`).
    GptrsCheckpoint: "gptrs" => Identity::new("gptrs", "GPTRS v2 checkpoint", "gptrs")
        .extensions(&["gptrs"])
        .magic(&[b"GPTRSCHK"]),
    /// GPTRS v2 tensor archive (`GPTRSTEN`).
    GptrsArchive: "gptrs" => Identity::new("gptrsten", "GPTRS v2 tensor archive", "gptrs")
        .extensions(&["gptrsten"])
        .magic(&[b"GPTRSTEN"]),
    /// safetensors (u64 header length, then a JSON object).
    Safetensors: "safetensors" => Identity::new("safetensors", "safetensors", "safetensors")
        .extensions(&["safetensors"])
        .sniff(sniff::safetensors),
    /// NumPy `.npy` (`\x93NUMPY`).
    Npy: "npy" => Identity::new("npy", "NumPy .npy", "npy")
        .extensions(&["npy"])
        .magic(&[b"\x93NUMPY"])
        .single_tensor(),
    /// NumPy `.npz` (a zip of `.npy` members).
    Npz: "npy" => Identity::new("npz", "NumPy .npz", "npy")
        .extensions(&["npz"])
        .magic(&[b"PK\x03\x04", b"PK\x05\x06"]),
    /// GGUF v2/v3 (`GGUF`).
    Gguf: "gguf" => Identity::new("gguf", "GGUF", "gguf")
        .extensions(&["gguf"])
        .magic(&[b"GGUF"]),
    /// PyTorch checkpoint (`torch.save`: a zip with `<archive>/data.pkl`, or legacy).
    Pytorch: "pytorch" => Identity::new("pytorch", "PyTorch checkpoint", "pytorch")
        .extensions(&["pt", "pth", "bin", "ckpt"])
        .magic(&[b"PK\x03\x04", b"\x80"])
        .sniff(sniff::pytorch),
    /// PyTorch Distributed Checkpoint: a directory of `.metadata` (a pickle) and
    /// `__R_N.distcp` files (read and written as a set: `formats/dcp`).
    Dcp: "dcp" => Identity::new("dcp", "PyTorch Distributed Checkpoint", "dcp")
        .sniff(sniff::dcp_metadata),
    /// ONNX model (`.onnx`: a protobuf `ModelProto`, no magic).
    Onnx: "onnx" => Identity::new("onnx", "ONNX", "onnx")
        .extensions(&["onnx"])
        .sniff(sniff::onnx),
    /// HDF5 (h5py, Keras `.h5`): superblock v0/v1 at byte 0 (`\x89HDF\r\n\x1a\n`).
    Hdf5: "hdf5" => Identity::new("hdf5", "HDF5", "hdf5")
        .extensions(&["h5", "hdf5"])
        .magic(&[b"\x89HDF\r\n\x1a\n"]),
}

/// How many leading bytes [`Format::detect`] wants to see.
/// 512: a PyTorch zip is told from an npz by its first record's name, which can be long.
pub const DETECT_LEN: usize = 512;

impl Format {
    /// Detects the format from the first bytes of a file (at least [`DETECT_LEN`] when
    /// the file is that long): the longest matching magic (with its sniff test, if the
    /// format has one), else the first format whose sniff test alone accepts the bytes.
    pub fn detect(head: &[u8]) -> Option<Format> {
        let sniffed = |f: Format| f.identity().sniff.is_none_or(|s| s(head));
        let mut best: Option<(usize, Format)> = None;
        for f in Format::ALL {
            for m in f.identity().magic {
                // Longest magic wins; on a tie, a format whose sniff test accepted the
                // bytes beats one that has none (a PyTorch zip over a plain zip = npz).
                let better = match best {
                    None => true,
                    Some((len, b)) => {
                        m.len() > len
                            || (m.len() == len
                                && f.identity().sniff.is_some()
                                && b.identity().sniff.is_none())
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
            .find(|f| f.identity().magic.is_empty() && f.identity().sniff.is_some() && sniffed(*f))
    }

    /// The first bytes of a file, for a message that says what it starts with (up to 8
    /// bytes, printable ASCII as is, the rest as `\xNN`).
    pub fn shown_head(head: &[u8]) -> String {
        head.iter()
            .take(8)
            .map(|b| {
                if b.is_ascii_graphic() {
                    (*b as char).to_string()
                } else {
                    format!("\\x{b:02x}")
                }
            })
            .collect()
    }

    /// The short name used by the CLI (`--to`), JSON output and Python.
    pub fn name(self) -> &'static str {
        self.identity().name
    }

    /// A human title with version (`zTensor v1.0`).
    pub fn title(self) -> &'static str {
        self.identity().title
    }

    /// File extensions, the preferred one first.
    pub fn extensions(self) -> &'static [&'static str] {
        self.identity().extensions
    }

    /// The Cargo feature that builds this format's reader and writer.
    pub fn feature(self) -> &'static str {
        self.identity().feature
    }

    /// Parses a name (`ztensor`, `zt`, `safetensors`, …) or an extension.
    pub fn from_name(s: &str) -> Option<Format> {
        let s = s.trim_start_matches('.').to_ascii_lowercase();
        Format::ALL.into_iter().find(|f| {
            f.name() == s
                || f.identity().aliases.contains(&s.as_str())
                || f.extensions().contains(&s.as_str())
        })
    }

    /// The output format a path's extension asks for.
    pub fn from_path(path: &Path) -> Option<Format> {
        path.extension()
            .and_then(|e| e.to_str())
            .and_then(Format::from_name)
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
    fn the_identities_are_consistent() {
        let mut names = std::collections::HashSet::new();
        let mut exts = std::collections::HashSet::new();
        let mut magics = std::collections::HashSet::new();
        for f in Format::ALL {
            let s = f.identity();
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
        }
    }

    #[test]
    fn shows_a_files_first_bytes_escaped() {
        assert_eq!(Format::shown_head(b"AB\x00\x1b[31mXYZ"), "AB\\x00\\x1b[31m");
    }
}
