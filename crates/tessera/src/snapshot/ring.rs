//! The ring: a directory of generations, its log ([`super::wal`]) and per generation
//! `gen-NNNNNNNNN.<ext>` (the snapshot), `gen-NNNNNNNNN.json` (the sidecar) and, when
//! signed, `gen-NNNNNNNNN.<ext>.sig` (a detached signed manifest). The state of every
//! generation is folded from the log; the sidecar says what a generation is (format,
//! identity root, its predecessor's root, files and sizes) for whoever reads the ring
//! without its log (a push target's copy).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::wal::{Log, Record};
use crate::error::{Error, Result};

/// A generation's sidecar (`gen-NNNNNNNNN.json`), written after its files and fsynced.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Sidecar {
    /// The generation.
    pub gen: u64,
    /// The training step, when given.
    pub step: Option<u64>,
    /// When it was requested (`YYYY-MM-DDTHH:MM:SSZ`).
    pub time: String,
    /// The format's name.
    pub format: String,
    /// Content identity root of its tensors (`blake3:…`).
    pub root: String,
    /// The previous written generation and its root, when there was one.
    pub prev_gen: Option<u64>,
    /// Its root.
    pub prev_root: Option<String>,
    /// Its files (name in the ring, bytes), the snapshot first; the sidecar is not
    /// listed.
    pub files: Vec<(String, u64)>,
    /// The caller's metadata.
    pub metadata: BTreeMap<String, String>,
    /// Tessera's version that wrote it.
    pub writer: String,
}

/// The stem of a generation's files.
pub fn stem(gen: u64) -> String {
    format!("gen-{gen:09}")
}

/// A generation's sidecar name.
pub fn sidecar_name(gen: u64) -> String {
    format!("{}.json", stem(gen))
}

/// Reads and checks a generation's sidecar.
pub fn read_sidecar(dir: &Path, gen: u64) -> Result<Sidecar> {
    let p = dir.join(sidecar_name(gen));
    let md =
        std::fs::metadata(&p).map_err(|e| Error::from(e).at_subject(p.display().to_string()))?;
    if md.len() > 16 << 20 {
        return Err(Error::malformed(format!("{}: over 16 MiB", p.display())));
    }
    let bytes =
        std::fs::read(&p).map_err(|e| Error::from(e).at_subject(p.display().to_string()))?;
    let s: Sidecar = serde_json::from_slice(&bytes)
        .map_err(|e| Error::malformed(format!("{}: {e}", p.display())))?;
    if s.gen != gen {
        return Err(Error::malformed(format!(
            "{}: says gen {}",
            p.display(),
            s.gen
        )));
    }
    for (f, _) in &s.files {
        if !f.starts_with(&stem(gen)) || f.contains('/') || f.contains('\\') {
            return Err(Error::malformed(format!(
                "{}: file {f:?} is not one of this generation's",
                p.display()
            )));
        }
    }
    Ok(s)
}

/// What the log says of one generation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gen {
    /// The generation.
    pub gen: u64,
    /// The step.
    pub step: Option<u64>,
    /// When requested.
    pub time: String,
    /// The `written` record: (main file, bytes, root).
    pub written: Option<(String, u64, String)>,
    /// Why its write failed, if it did.
    pub failed: Option<String>,
    /// Targets that hold it.
    pub pushed: BTreeSet<String>,
    /// The last push failure per target (cleared by a push).
    pub push_failures: BTreeMap<String, String>,
    /// Dropped from the ring.
    pub dropped: bool,
}

/// The ring's state folded from its log.
#[derive(Debug, Clone, Default)]
pub struct State {
    /// Generations by number.
    pub gens: BTreeMap<u64, Gen>,
    /// Push targets, in the order first recorded.
    pub targets: Vec<String>,
}

impl State {
    /// Folds the records.
    pub fn from_log(log: &Log) -> State {
        let mut s = State::default();
        for r in &log.records {
            s.apply(r);
        }
        s
    }

    /// Folds one record.
    pub fn apply(&mut self, r: &Record) {
        match r {
            Record::Target { url } => {
                if !self.targets.contains(url) {
                    self.targets.push(url.clone());
                }
            }
            Record::Requested { gen, step, time } => {
                let g = self.gens.entry(*gen).or_default();
                g.gen = *gen;
                g.step = *step;
                g.time = time.clone();
            }
            Record::Written {
                gen,
                file,
                bytes,
                root,
            } => {
                let g = self.gens.entry(*gen).or_default();
                g.gen = *gen;
                g.written = Some((file.clone(), *bytes, root.clone()));
            }
            Record::Failed {
                gen,
                target,
                reason,
            } => {
                let g = self.gens.entry(*gen).or_default();
                g.gen = *gen;
                match target {
                    Some(t) => {
                        g.push_failures.insert(t.clone(), reason.clone());
                    }
                    None => g.failed = Some(reason.clone()),
                }
            }
            Record::Pushed { gen, target } => {
                let g = self.gens.entry(*gen).or_default();
                g.gen = *gen;
                g.push_failures.remove(target);
                g.pushed.insert(target.clone());
            }
            Record::Dropped { gen } => {
                let g = self.gens.entry(*gen).or_default();
                g.gen = *gen;
                g.dropped = true;
            }
        }
    }

    /// The next generation number.
    pub fn next_gen(&self) -> u64 {
        self.gens.keys().next_back().map_or(0, |g| g + 1)
    }

    /// Generations in the ring (written, not dropped), oldest first.
    pub fn live(&self) -> impl DoubleEndedIterator<Item = &Gen> {
        self.gens
            .values()
            .filter(|g| g.written.is_some() && !g.dropped)
    }

    /// The newest generation in the ring.
    pub fn last_written(&self) -> Option<&Gen> {
        self.live().next_back()
    }

    /// Generations `target` does not hold yet, oldest first.
    pub fn pending(&self, target: &str) -> Vec<u64> {
        self.live()
            .filter(|g| !g.pushed.contains(target))
            .map(|g| g.gen)
            .collect()
    }

    /// Whether every target holds `g`.
    pub fn fully_pushed(&self, g: &Gen) -> bool {
        self.targets.iter().all(|t| g.pushed.contains(t))
    }

    /// Generations with at least one pending push.
    pub fn backlog(&self) -> usize {
        self.live().filter(|g| !self.fully_pushed(g)).count()
    }

    /// Generations the ring may drop now: beyond the newest `keep`, never one a target
    /// still lacks, never a `keep_every` one.
    pub fn to_drop(&self, keep: usize, keep_every: u64) -> Vec<u64> {
        let live: Vec<&Gen> = self.live().collect();
        let old = live.len().saturating_sub(keep.max(1));
        live[..old]
            .iter()
            .filter(|g| !(keep_every > 0 && g.gen % keep_every == 0))
            .filter(|g| self.fully_pushed(g))
            .map(|g| g.gen)
            .collect()
    }
}

/// The files of generation `gen` now in `dir` (its stem's), by name.
pub fn files_of(dir: &Path, gen: u64) -> Vec<PathBuf> {
    let stem = stem(gen);
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| {
            e.file_name().to_str().is_some_and(|n| {
                n.strip_prefix(&stem)
                    .is_some_and(|rest| rest.starts_with('.'))
            })
        })
        .map(|e| e.path())
        .collect()
}

/// Removes what a crash left in the ring: temporaries of writers that have ended, and
/// the files of generations the log does not say are written (or says are dropped).
/// Returns the names removed.
pub fn remove_leftovers(dir: &Path, state: &State) -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return removed;
    };
    let mut temp_targets = BTreeSet::new();
    for e in rd.flatten() {
        let Some(name) = e.file_name().to_str().map(String::from) else {
            continue;
        };
        // `.{target}.{writer}.{random}.tmp`: util::atomic's temporaries.
        if let Some(rest) = name
            .strip_prefix(".gen-")
            .and_then(|r| r.strip_suffix(".tmp"))
        {
            if let Some((before, _)) = rest.rsplit_once('.').and_then(|(a, _)| a.rsplit_once('.')) {
                temp_targets.insert(format!(".gen-{before}."));
            }
            continue;
        }
        let Some(num) = name
            .strip_prefix("gen-")
            .and_then(|r| r.split('.').next())
            .and_then(|n| (n.len() == 9).then(|| n.parse::<u64>().ok())?)
        else {
            continue;
        };
        let keep = state
            .gens
            .get(&num)
            .is_some_and(|g| g.written.is_some() && !g.dropped);
        if !keep && std::fs::remove_file(e.path()).is_ok() {
            removed.push(name);
        }
    }
    for prefix in temp_targets {
        let n = crate::util::atomic::sweep_stale(dir, &prefix, ".tmp", false);
        if n > 0 {
            removed.push(format!("{n} temporary file(s) {prefix}*"));
        }
    }
    if !removed.is_empty() {
        crate::util::atomic::sync_dir(dir);
    }
    removed
}
