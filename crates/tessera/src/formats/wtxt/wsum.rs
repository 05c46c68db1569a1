//! WSUM: the one-line finalization of a streamed WTXT-S (RESOLUTIONS 14).
//!
//! `WSUM 1 sha256_all=… merkle_prev=… merkle_this=… fastxor=…[ sign=<b64> keyid=<hex16>]`
//! then LF; the signature covers the line's bytes before ` sign=`.

use std::path::{Path, PathBuf};

use super::header::{bad, check_text, fields, hex_n, Root, Sign};
use super::read::WtxtFile;
use crate::error::{Error, Result};
use crate::util::hex;

/// `<file>.wsum`.
pub fn wsum_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".wsum");
    PathBuf::from(p)
}

/// The WSUM of a WTXT-S written without one (`tessera wtxt finalize`): every array is
/// checked first (chunk parity, base64, CRC-32C, SHA-256; the HMACs too when
/// `hmac_key` is given), and a file with any damaged array is refused, naming it — a
/// WSUM over damaged bytes would vouch for them. `merkle_prev` chains it to the
/// previous snapshot (its `merkle_this`; zeros for none); `seed` signs it. A file with
/// a `root` line is already final and is refused.
pub fn finalize(
    f: &WtxtFile<'_>,
    merkle_prev: [u8; 32],
    hmac_key: Option<&[u8]>,
    seed: Option<&[u8; 32]>,
) -> Result<Wsum> {
    if f.root.is_some() {
        return Err(Error::invalid_input(
            "this WTXT has a root line: it is final already (finalize writes the WSUM of a \
             WTXT-S, whose header says root_pending)",
        ));
    }
    if let Some((what, why)) = f.lost.first() {
        return Err(Error::integrity(format!(
            "cannot finalize: {what} was lost ({why})"
        )));
    }
    let opts = crate::verify::VerifyOptions::default().hmac_key(hmac_key.map(<[u8]>::to_vec));
    let (report, sha256_all, fastxor) = super::verify::check_arrays(f, &opts);
    if let Some(c) = report.failures().next() {
        return Err(Error::integrity(format!(
            "cannot finalize: {} fails its {} check{}",
            c.subject,
            c.layer,
            c.detail
                .as_deref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        )));
    }
    let merkle_this = super::header::merkle_this(&merkle_prev, &sha256_all, &f.meta);
    Ok(Wsum::new(
        Root {
            sha256_all,
            merkle_prev,
            merkle_this,
            fastxor,
        },
        seed,
    ))
}

/// What the next generation chains from: the `merkle_this` of the snapshot at `path`
/// (its root line, or the WSUM beside a WTXT-S) and its `gen`.
pub fn chain_from(path: &Path) -> Result<([u8; 32], Option<u64>)> {
    let data = crate::source::FileData::open(path)?;
    let ropts = crate::any::ReadOptions::default().path(Some(path.to_path_buf()));
    let f = WtxtFile::parse(std::borrow::Cow::Borrowed(&data), &ropts)
        .map_err(|e| e.at_subject(format!("prev {}", path.display())))?;
    let root = f.final_root().ok_or_else(|| {
        Error::invalid_input(format!(
            "prev {}: a WTXT-S without its WSUM has no merkle_this to chain from",
            path.display()
        ))
    })?;
    Ok((root.merkle_this, f.meta.gen.parse().ok()))
}

/// [`finalize`] of the WTXT-S at `path`, written atomically to `out` (default
/// `path.wsum`), which must not exist yet: a snapshot is finalized once. `prev` is the
/// previous snapshot to chain from. Returns where the WSUM went. What `tessera wtxt
/// finalize` and Python's `tessera.wtxt.finalize` call.
pub fn finalize_file(
    path: &Path,
    out: Option<&Path>,
    prev: Option<&Path>,
    hmac_key: Option<&[u8]>,
    seed: Option<&[u8; 32]>,
) -> Result<PathBuf> {
    let dest = out.map_or_else(|| wsum_path(path), Path::to_path_buf);
    if dest.exists() {
        return Err(Error::invalid_input(format!(
            "{} exists: a snapshot is finalized once (remove it, or name another output)",
            dest.display()
        )));
    }
    let merkle_prev = match prev {
        Some(p) => chain_from(p)?.0,
        None => [0; 32],
    };
    let data = crate::source::FileData::open(path)?;
    let ropts = crate::any::ReadOptions::default().path(Some(path.to_path_buf()));
    let f = WtxtFile::parse(std::borrow::Cow::Borrowed(&data), &ropts)
        .map_err(|e| e.in_file(path.display().to_string()))?;
    let w = finalize(&f, merkle_prev, hmac_key, seed)
        .map_err(|e| e.in_file(path.display().to_string()))?;
    crate::util::atomic::write_bytes_atomic(&dest, w.text().as_bytes())?;
    Ok(dest)
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
