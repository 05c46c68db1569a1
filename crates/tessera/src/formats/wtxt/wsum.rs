//! WSUM: the one-line finalization of a streamed WTXT-S (RESOLUTIONS 14).
//!
//! `WSUM 1 sha256_all=… merkle_prev=… merkle_this=… fastxor=…[ sign=<b64> keyid=<hex16>]`
//! then LF; the signature covers the line's bytes before ` sign=`.

use std::path::{Path, PathBuf};

use super::header::{bad, check_text, fields, hex_n, Root, Sign};
use crate::error::Result;
use crate::util::hex;

/// `<file>.wsum`.
pub fn wsum_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".wsum");
    PathBuf::from(p)
}

/// A parsed WSUM line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wsum {
    /// The root values it finalizes.
    pub root: Root,
    /// The optional signature.
    pub sign: Option<Sign>,
}

impl Wsum {
    /// A WSUM for `root`, signed when a seed is given.
    pub fn new(root: Root, seed: Option<&[u8; 32]>) -> Wsum {
        let mut w = Wsum { root, sign: None };
        if let Some(s) = seed {
            w.sign = Some(Sign::create(s, w.unsigned_line().as_bytes()));
        }
        w
    }

    /// The line up to (not including) ` sign=`.
    pub fn unsigned_line(&self) -> String {
        format!(
            "WSUM 1 sha256_all={} merkle_prev={} merkle_this={} fastxor={:016x}",
            hex(&self.root.sha256_all),
            hex(&self.root.merkle_prev),
            hex(&self.root.merkle_this),
            self.root.fastxor
        )
    }

    /// The whole file.
    pub fn text(&self) -> String {
        match &self.sign {
            None => format!("{}\n", self.unsigned_line()),
            Some(s) => format!(
                "{} sign={} keyid={}\n",
                self.unsigned_line(),
                s.b64(),
                hex(&s.keyid)
            ),
        }
    }

    /// Parses a WSUM file (exactly one LF-terminated line).
    pub fn parse(data: &[u8]) -> Result<Wsum> {
        let line = data
            .strip_suffix(b"\n")
            .filter(|l| !l.contains(&b'\n'))
            .ok_or_else(|| bad(1, "wsum: one line ending in LF expected"))?;
        let line = check_text(line, 1)?;
        let (keys, signed): (&[&str], bool) = if line.contains(" sign=") {
            (
                &[
                    "sha256_all",
                    "merkle_prev",
                    "merkle_this",
                    "fastxor",
                    "sign",
                    "keyid",
                ],
                true,
            )
        } else {
            (
                &["sha256_all", "merkle_prev", "merkle_this", "fastxor"],
                false,
            )
        };
        let f = fields(line, "WSUM 1", keys, 1)?;
        let x: [u8; 8] = hex_n(f[3], "wsum fastxor", 1)?;
        let root = Root {
            sha256_all: hex_n(f[0], "wsum sha256_all", 1)?,
            merkle_prev: hex_n(f[1], "wsum merkle_prev", 1)?,
            merkle_this: hex_n(f[2], "wsum merkle_this", 1)?,
            fastxor: u64::from_be_bytes(x),
        };
        let sign = if signed {
            Some(Sign::from_values(f[4], f[5], 1)?)
        } else {
            None
        };
        Ok(Wsum { root, sign })
    }
}
