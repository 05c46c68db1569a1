//! Formats and their detection by content.
//!
//! [`Format::detect`] looks only at the first bytes (a magic table, as `image` does). The
//! file extension is a hint for the *output* format of a conversion, never for reading.

use std::fmt;
use std::path::Path;

use crate::error::{Error, Result};

/// Every format Tessera knows, implemented or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Format {
    /// WTXT/Chunks v1.1 snapshot (`WTXT 1`).
    Wtxt,
    /// WTXT DELTA v2 (`WTXT-DELTA 2`).
    WtxtDelta,
    /// WSUM finalization line of a streamed WTXT (`WSUM 1`).
    Wsum,
    /// An age ASCII-armored encrypted file (typically a WTXT snapshot).
    AgeArmor,
    /// zTensor v1.0 / v1.1 (`ZTEN1000`).
    Ztensor,
    /// zTensor v2 (`\x89ZT2\r\n\x1a\n`).
    ZtensorV2,
    /// FOLD `.fold` / `.mind` (`FOLDv1\0\0`).
    Fold,
    /// AERO v0.1 (`AERO`).
    Aero,
    /// GPTRS v2 checkpoint (`GPTRSCHK`).
    GptrsCheckpoint,
    /// GPTRS v2 tensor archive (`GPTRSTEN`).
    GptrsArchive,
    /// safetensors (u64 header length, then a JSON object).
    Safetensors,
    /// NumPy `.npy` (`\x93NUMPY`).
    Npy,
    /// NumPy `.npz` (a zip of `.npy` members).
    Npz,
    /// GGUF v2/v3 (`GGUF`).
    Gguf,
    /// PyTorch checkpoint (`torch.save`: a zip with `<archive>/data.pkl`, or legacy).
    Pytorch,
}

/// Magic prefixes, longest first where they share bytes.
const MAGIC: &[(&[u8], Format)] = &[
    (b"WTXT-DELTA 2", Format::WtxtDelta),
    (b"WTXT 1\n", Format::Wtxt),
    (b"WSUM 1", Format::Wsum),
    (b"-----BEGIN AGE ENCRYPTED FILE-----", Format::AgeArmor),
    (b"ZTEN1000", Format::Ztensor),
    (b"\x89ZT2\r\n\x1a\n", Format::ZtensorV2),
    (b"FOLDv1\0\0", Format::Fold),
    (b"GPTRSCHK", Format::GptrsCheckpoint),
    (b"GPTRSTEN", Format::GptrsArchive),
    (b"AERO", Format::Aero),
    (b"\x93NUMPY", Format::Npy),
    (b"PK\x03\x04", Format::Npz),
    (b"PK\x05\x06", Format::Npz),
    (b"GGUF", Format::Gguf),
];

/// How many leading bytes [`Format::detect`] wants to see.
pub const DETECT_LEN: usize = 512;

impl Format {
    /// Every format, in table order.
    pub const ALL: [Format; 15] = [
        Format::Wtxt,
        Format::WtxtDelta,
        Format::Wsum,
        Format::AgeArmor,
        Format::Ztensor,
        Format::ZtensorV2,
        Format::Fold,
        Format::Aero,
        Format::GptrsCheckpoint,
        Format::GptrsArchive,
        Format::Safetensors,
        Format::Npy,
        Format::Npz,
        Format::Gguf,
        Format::Pytorch,
    ];

    /// Detects the format from the first bytes of a file (at least [`DETECT_LEN`] when
    /// the file is that long).
    pub fn detect(head: &[u8]) -> Option<Format> {
        use crate::formats::pytorch;
        if pytorch::is_zip_checkpoint(head) || pytorch::is_legacy(head) {
            return Some(Format::Pytorch);
        }
        for (magic, f) in MAGIC {
            if head.starts_with(magic) {
                return Some(*f);
            }
        }
        // safetensors: u64 LE header length, then a JSON object.
        if head.len() >= 9 && head[8] == b'{' {
            let n = u64::from_le_bytes([
                head[0], head[1], head[2], head[3], head[4], head[5], head[6], head[7],
            ]);
            if n >= 2 {
                return Some(Format::Safetensors);
            }
        }
        None
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
    pub const fn name(self) -> &'static str {
        match self {
            Format::Wtxt => "wtxt",
            Format::WtxtDelta => "wtxt-delta",
            Format::Wsum => "wsum",
            Format::AgeArmor => "age",
            Format::Ztensor => "ztensor",
            Format::ZtensorV2 => "ztensor-v2",
            Format::Fold => "fold",
            Format::Aero => "aero",
            Format::GptrsCheckpoint => "gptrs",
            Format::GptrsArchive => "gptrsten",
            Format::Safetensors => "safetensors",
            Format::Npy => "npy",
            Format::Npz => "npz",
            Format::Gguf => "gguf",
            Format::Pytorch => "pytorch",
        }
    }

    /// A human title with version (`zTensor v1.0`).
    pub const fn title(self) -> &'static str {
        match self {
            Format::Wtxt => "WTXT/Chunks v1.1",
            Format::WtxtDelta => "WTXT DELTA v2",
            Format::Wsum => "WTXT WSUM",
            Format::AgeArmor => "age-encrypted (ASCII armor)",
            Format::Ztensor => "zTensor v1.0",
            Format::ZtensorV2 => "zTensor v2",
            Format::Fold => "FOLD v1.2",
            Format::Aero => "AERO v0.1",
            Format::GptrsCheckpoint => "GPTRS v2 checkpoint",
            Format::GptrsArchive => "GPTRS v2 tensor archive",
            Format::Safetensors => "safetensors",
            Format::Npy => "NumPy .npy",
            Format::Npz => "NumPy .npz",
            Format::Gguf => "GGUF",
            Format::Pytorch => "PyTorch checkpoint",
        }
    }

    /// File extensions, the preferred one first.
    pub const fn extensions(self) -> &'static [&'static str] {
        match self {
            Format::Wtxt => &["wtxt"],
            Format::WtxtDelta => &["wtxtdelta"],
            Format::Wsum => &["wsum"],
            Format::AgeArmor => &["age"],
            Format::Ztensor => &["zt", "ztensor"],
            // `.zt` is v1's: v2 is picked by --to ztensor2 or --zt-version 2.
            Format::ZtensorV2 => &[],
            Format::Fold => &["fold", "mind"],
            Format::Aero => &["aero"],
            Format::GptrsCheckpoint => &["gptrs"],
            Format::GptrsArchive => &["gptrsten"],
            Format::Safetensors => &["safetensors"],
            Format::Npy => &["npy"],
            Format::Npz => &["npz"],
            Format::Gguf => &["gguf"],
            Format::Pytorch => &["pt", "pth", "bin", "ckpt"],
        }
    }

    /// Parses a name (`ztensor`, `zt`, `safetensors`, …) or an extension.
    pub fn from_name(s: &str) -> Option<Format> {
        let s = s.trim_start_matches('.').to_ascii_lowercase();
        if s == "ztensor2" {
            return Some(Format::ZtensorV2);
        }
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s || f.extensions().contains(&s.as_str()))
    }

    /// The output format a path's extension asks for.
    pub fn from_path(path: &Path) -> Option<Format> {
        path.extension()
            .and_then(|e| e.to_str())
            .and_then(Format::from_name)
    }

    /// True when Tessera can read tensors from this format today.
    pub fn can_read(self) -> bool {
        crate::any::reader_for(self).is_some()
    }

    /// True when Tessera can write this format today.
    pub fn can_write(self) -> bool {
        crate::convert::writer_for(self).is_some()
    }

    /// The error for a detected format that is not implemented (yet).
    pub fn not_supported_yet(self) -> Error {
        match self {
            Format::ZtensorV2 => {
                Error::unsupported_version("zTensor v2 is not supported (only v1.0 and v1.1)")
            }
            Format::WtxtDelta => Error::unsupported(
                "a WTXT delta holds changed chunks, not a model: apply it to its base with \
                 `tessera wtxt apply BASE DELTA -o OUT`",
            ),
            f => Error::unsupported(format!("{} is detected but not supported yet", f.title())),
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
        assert_eq!(Format::from_name("ztensor2"), Some(Format::ZtensorV2));
        assert_eq!(Format::from_name(".mind"), Some(Format::Fold));
        assert_eq!(
            Format::from_path(Path::new("a/b.gptrsten")),
            Some(Format::GptrsArchive)
        );
        for f in Format::ALL {
            assert_eq!(Format::from_name(f.name()), Some(f));
        }
    }
}
