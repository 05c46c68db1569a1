//! Restore: the newest generation of a ring that verifies. Each generation the log says
//! is written (and not dropped) is checked, newest first: its sidecar agrees with the
//! log (files, sizes, root); the snapshot opens and every integrity layer of its format
//! passes (`Container::verify`); its tensors' identity root is the one logged; the chain
//! holds (its recorded predecessor root is the root the log has for that predecessor);
//! with a public key, its detached signature is by that key over that root. The first
//! that passes is returned with the generations skipped and why.

use std::path::{Path, PathBuf};

use super::ring::{self, Sidecar, State};
use super::wal;
use crate::any::ReadOptions;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::set::Opened;
use crate::verify::VerifyOptions;

/// What [`restore`] checks with.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct RestoreOptions {
    /// How the snapshots are opened (HMAC key, age identities, limits).
    pub read: ReadOptions,
    /// The key the signatures must be by (each generation must then be signed).
    #[cfg(feature = "signing")]
    pub public_key: Option<crate::signing::key::PublicKey>,
    /// Restore this generation (still checked), not the newest good one.
    pub generation: Option<u64>,
}

/// A restored generation.
pub struct Restored {
    /// Its number.
    pub generation: u64,
    /// Its sidecar (step, time, format, root, metadata…).
    pub sidecar: Sidecar,
    /// The snapshot's path.
    pub path: PathBuf,
    /// Its format.
    pub format: Format,
    /// The snapshot, opened (read its tensors from `opened.container()`).
    pub opened: Opened,
    /// Newer generations skipped, and why.
    pub skipped: Vec<(u64, String)>,
    /// What reading the log reported (torn lines).
    pub log_problems: Vec<String>,
}

/// Checks generation `gen` of the ring at `dir` as [`restore`] does; returns its sidecar
/// and the opened snapshot, or why it fails.
pub fn check_generation(
    dir: &Path,
    state: &State,
    gen: u64,
    opts: &RestoreOptions,
) -> Result<(Sidecar, PathBuf, Opened)> {
    let g = state
        .gens
        .get(&gen)
        .filter(|g| !g.dropped)
        .ok_or_else(|| Error::not_found(format!("generation {gen} is not in the ring")))?;
    let (file, bytes, root) = g
        .written
        .clone()
        .ok_or_else(|| Error::not_found(format!("generation {gen} was never written")))?;
    let s = ring::read_sidecar(dir, gen)?;
    if s.root != root {
        return Err(Error::integrity(format!(
            "sidecar root {} is not the logged {root}",
            s.root
        )));
    }
    if s.files.first().map(|(n, _)| n) != Some(&file) {
        return Err(Error::integrity(format!(
            "sidecar does not list the logged file {file}"
        )));
    }
    let total: u64 = s.files.iter().map(|(_, b)| b).sum();
    if total != bytes {
        return Err(Error::integrity(format!(
            "sidecar lists {total} bytes, the log {bytes}"
        )));
    }
    for (name, want) in &s.files {
        let p = dir.join(name);
        let have = std::fs::metadata(&p)
            .map_err(|e| Error::integrity(format!("{name}: {e}")))?
            .len();
        if have != *want {
            return Err(Error::integrity(format!(
                "{name}: {have} bytes, {want} written (truncated or replaced)"
            )));
        }
    }
    if let Some(p) = s.prev_gen {
        if let Some((_, _, proot)) = state
            .gens
            .get(&p)
            .filter(|pg| !pg.dropped)
            .and_then(|pg| pg.written.as_ref())
        {
            if s.prev_root.as_ref() != Some(proot) {
                return Err(Error::integrity(format!(
                    "broken chain: its predecessor {p}'s root is {proot}, it names {}",
                    s.prev_root.as_deref().unwrap_or("none")
                )));
            }
        }
    }
    let path = dir.join(&file);
    let ropts = opts.read.clone().path(Some(path.clone()));
    let opened = crate::set::open_path(&path, &ropts)?;
    let c = opened.container();
    let vopts = VerifyOptions {
        hmac_key: ropts.hmac_key.clone(),
        path: Some(path.clone()),
        ..VerifyOptions::default()
    };
    let report = c.verify(&vopts);
    if !report.is_ok() {
        let what: Vec<String> = report
            .failures()
            .take(3)
            .map(|f| format!("{f:?}"))
            .collect();
        return Err(Error::integrity(format!(
            "{file} does not verify: {}",
            what.join("; ")
        )));
    }
    let id = crate::identity::model_id(c, false)?;
    if id.root.to_prefixed() != root {
        return Err(Error::integrity(format!(
            "{file}: its tensors' identity is {}, {root} was written",
            id.root.to_prefixed()
        )));
    }
    #[cfg(feature = "signing")]
    if let Some(pk) = &opts.public_key {
        let sig_name = format!("{file}.sig");
        if !s.files.iter().any(|(n, _)| *n == sig_name) {
            return Err(Error::integrity(format!("{file} is not signed")));
        }
        let bytes = std::fs::read(dir.join(&sig_name))
            .map_err(|e| Error::integrity(format!("{sig_name}: {e}")))?;
        let sm = crate::signing::SignedManifest::parse(&bytes)?;
        sm.check_signature(pk)?;
        if sm.id != id.root {
            return Err(Error::integrity(format!(
                "{sig_name} signs {}, not this snapshot",
                sm.id.to_prefixed()
            )));
        }
    }
    Ok((s, path, opened))
}

/// The newest generation of the ring at `dir` that verifies (or
/// [`RestoreOptions::generation`]), naming those skipped. Reads only: the ring may be in
/// use by a Snapshotter meanwhile.
pub fn restore(dir: impl AsRef<Path>, opts: &RestoreOptions) -> Result<Restored> {
    let dir = dir.as_ref();
    if !dir.join(wal::LOG).exists() {
        return Err(Error::not_found(format!(
            "{}: no snapshot ring here (no {})",
            dir.display(),
            wal::LOG
        )));
    }
    let log = wal::read(dir)?;
    let state = State::from_log(&log);
    let mut skipped = Vec::new();
    let gens: Vec<u64> = match opts.generation {
        Some(g) => vec![g],
        None => state.live().rev().map(|g| g.gen).collect(),
    };
    for gen in gens {
        match check_generation(dir, &state, gen, opts) {
            Ok((sidecar, path, opened)) => {
                let format = opened.container().format();
                return Ok(Restored {
                    generation: gen,
                    sidecar,
                    path,
                    format,
                    opened,
                    skipped,
                    log_problems: log.problems,
                });
            }
            Err(e) => skipped.push((gen, e.to_string())),
        }
    }
    let why: Vec<String> = skipped
        .iter()
        .map(|(g, e)| format!("generation {g}: {e}"))
        .collect();
    Err(Error::integrity(format!(
        "{}: no generation verifies{}{}",
        dir.display(),
        if why.is_empty() { "" } else { ": " },
        why.join("; ")
    )))
}
