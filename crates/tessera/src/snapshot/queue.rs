//! The resend queue: where written generations go next. Each push target has a worker
//! thread that takes the oldest generation the target lacks (the log says which:
//! written, not dropped, no `pushed` record for the target), pushes it, and logs
//! `pushed` — or logs `failed TARGET reason`, waits (exponential backoff) and tries the
//! same generation again, so a target receives generations once each and in order. The
//! queue is the log: a new Snapshotter (or `tessera snapshots push`) on the same ring
//! resumes it.
//!
//! A target is a [`PushTarget`]; [`target_for`] is the one place a URL becomes one.
//! Here: a directory (`file://DIR` or a plain path), which gets `DIR/gen-NNNNNNNNN/` with
//! the generation's files, each copied atomically, the sidecar last.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ring::{self, Sidecar};
use super::wal::Record;
use super::Core;
use crate::error::{Error, Result};

/// Where generations are pushed.
pub trait PushTarget: Send + Sync {
    /// What the log and `tessera snapshots` show.
    fn url(&self) -> String;
    /// Sends one generation. Idempotent: pushing twice is harmless.
    fn push(&self, item: &PushItem) -> Result<()>;
}

/// One generation to push.
#[derive(Debug, Clone)]
pub struct PushItem {
    /// The generation.
    pub generation: u64,
    /// The step, when given.
    pub step: Option<u64>,
    /// The format's name.
    pub format: String,
    /// Its files (name in the ring, path), the snapshot first and the sidecar last.
    pub files: Vec<(String, PathBuf)>,
    /// Its identity root (`blake3:…`).
    pub digest: String,
    /// What a target may attach (gen, step, time, format, digest, prev, the caller's
    /// metadata as `meta.KEY`).
    pub annotations: BTreeMap<String, String>,
}

impl PushItem {
    /// The item of a generation, from its sidecar.
    pub fn from_ring(dir: &Path, gen: u64) -> Result<PushItem> {
        let s: Sidecar = ring::read_sidecar(dir, gen)?;
        let mut files: Vec<(String, PathBuf)> = s
            .files
            .iter()
            .map(|(n, _)| (n.clone(), dir.join(n)))
            .collect();
        let side = ring::sidecar_name(gen);
        files.push((side.clone(), dir.join(side)));
        let mut annotations = BTreeMap::new();
        annotations.insert("generation".into(), gen.to_string());
        if let Some(st) = s.step {
            annotations.insert("step".into(), st.to_string());
        }
        annotations.insert("time".into(), s.time.clone());
        annotations.insert("format".into(), s.format.clone());
        annotations.insert("digest".into(), s.root.clone());
        if let Some(p) = &s.prev_root {
            annotations.insert("prev".into(), p.clone());
        }
        for (k, v) in &s.metadata {
            annotations.insert(format!("meta.{k}"), v.clone());
        }
        Ok(PushItem {
            generation: gen,
            step: s.step,
            format: s.format,
            files,
            digest: s.root,
            annotations,
        })
    }
}

/// Options for the targets [`target_for`] makes (none are needed by a directory).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct TargetOptions {
    /// How the transport targets (`s3://`, `http(s)://`, `git+…`, `oci://`) are
    /// reached: endpoint, credentials, Git LFS, the Git clone's directory (see
    /// [`crate::push::PushOptions`]).
    pub push: crate::push::PushOptions,
}

impl TargetOptions {
    /// Sets the transport options.
    pub fn push(mut self, push: crate::push::PushOptions) -> TargetOptions {
        self.push = push;
        self
    }
}

/// The target a URL names: `file://DIR` or a plain directory path, or a transport
/// target of [`crate::push`] — `s3://bucket/prefix/`, `http(s)://host/dir/` (HTTP
/// PUT), `git+file|ssh|https://…` (the `git` and `git-lfs` programs) or
/// `oci://host[:port]/repo[:tag]` (an OCI artifact). Another scheme is refused with
/// "unsupported target scheme".
pub fn target_for(url: &str, opts: &TargetOptions) -> Result<Box<dyn PushTarget>> {
    if let Some(path) = url.strip_prefix("file://") {
        if path.is_empty() {
            return Err(Error::invalid_input(format!("{url}: no directory")));
        }
        return Ok(Box::new(DirTarget::new(path)));
    }
    if let Some((scheme, _)) = url.split_once("://") {
        let known = ["s3", "http", "https", "oci"].contains(&scheme) || scheme.starts_with("git+");
        if !known {
            return Err(Error::unsupported(format!(
                "{url}: unsupported target scheme {scheme}:// (snapshots push to file://, \
                 plain directories, s3://, http(s)://, git+file|ssh|https:// and oci://)"
            )));
        }
        let target = crate::push::Target::parse(url)?;
        return Ok(Box::new(Transport {
            target,
            opts: opts.push.clone(),
        }));
    }
    Ok(Box::new(DirTarget::new(url)))
}

/// A [`crate::push::Target`] as a queue target: each generation published as one
/// artifact (its files, generation, step, format, identity and annotations); a push
/// that finds the same generation there already succeeds.
struct Transport {
    target: crate::push::Target,
    opts: crate::push::PushOptions,
}

impl PushTarget for Transport {
    fn url(&self) -> String {
        self.target.display()
    }

    fn push(&self, item: &PushItem) -> Result<()> {
        let artifact = crate::push::Artifact {
            generation: item.generation,
            step: item.step,
            format: item.format.clone(),
            files: item.files.clone(),
            digest: item.digest.clone(),
            annotations: item.annotations.clone(),
        };
        self.target.push(&artifact, &self.opts).map(|_| ())
    }
}

/// A directory target: `DIR/gen-NNNNNNNNN/` per generation.
#[derive(Debug, Clone)]
pub struct DirTarget {
    dir: PathBuf,
}

impl DirTarget {
    /// The target at `dir` (created on the first push).
    pub fn new(dir: impl Into<PathBuf>) -> DirTarget {
        DirTarget { dir: dir.into() }
    }
}

impl PushTarget for DirTarget {
    fn url(&self) -> String {
        let abs = std::path::absolute(&self.dir).unwrap_or_else(|_| self.dir.clone());
        format!("file://{}", abs.display())
    }

    fn push(&self, item: &PushItem) -> Result<()> {
        let dest = self.dir.join(ring::stem(item.generation));
        std::fs::create_dir_all(&dest)
            .map_err(|e| Error::from(e).at_subject(dest.display().to_string()))?;
        for (i, (name, src)) in item.files.iter().enumerate() {
            if i == 1 {
                super::hook("push");
            }
            let to = dest.join(name);
            crate::util::atomic::write_atomic(&to, |w| {
                let mut f = std::fs::File::open(src)
                    .map_err(|e| Error::from(e).at_subject(src.display().to_string()))?;
                std::io::copy(&mut f, w)?;
                Ok(())
            })?;
        }
        Ok(())
    }
}

/// Retry timing: the first wait, doubled per failure up to `max`.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    /// The first wait.
    pub first: Duration,
    /// The longest.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff {
            first: Duration::from_millis(500),
            max: Duration::from_secs(60),
        }
    }
}

fn reason(e: &Error) -> String {
    let s = e.to_string();
    // One line in the log, bounded.
    let s = s.replace(['\n', '\r'], " ");
    if s.len() > 500 {
        let mut end = 500;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &s[..end])
    } else {
        s
    }
}

/// Pushes `gen` to `target` once and logs the outcome.
fn attempt(core: &Core, target: &dyn PushTarget, url: &str, gen: u64) -> Result<()> {
    let r = PushItem::from_ring(&core.dir, gen).and_then(|item| target.push(&item));
    match &r {
        Ok(()) => {
            core.log(Record::Pushed {
                gen,
                target: url.to_string(),
            })?;
            core.retain();
        }
        Err(e) => {
            let _ = core.log(Record::Failed {
                gen,
                target: Some(url.to_string()),
                reason: reason(e),
            });
        }
    }
    r
}

/// A target's worker: pushes what the target lacks, oldest first, until the Snapshotter
/// stops it.
pub(crate) fn worker(core: Arc<Core>, target: Box<dyn PushTarget>, backoff: Backoff) {
    let url = target.url();
    let mut wait = backoff.first;
    loop {
        let next = {
            let mut inner = core.lock();
            loop {
                if inner.stop_pushes {
                    return;
                }
                if let Some(g) = inner.state.pending(&url).first() {
                    break *g;
                }
                inner.idle_targets.insert(url.clone());
                core.cond.notify_all();
                inner = core.wait(inner, None);
            }
        };
        core.lock().idle_targets.remove(&url);
        match attempt(&core, target.as_ref(), &url, next) {
            Ok(()) => wait = backoff.first,
            Err(_) => {
                let until = Instant::now() + wait;
                let mut inner = core.lock();
                while !inner.stop_pushes && Instant::now() < until {
                    let left = until.saturating_duration_since(Instant::now());
                    inner = core.wait(inner, Some(left));
                }
                wait = (wait * 2).min(backoff.max);
            }
        }
    }
}

/// What [`super::Snapshotter::push_pending`] did.
#[derive(Debug, Clone, Default)]
pub struct DrainReport {
    /// Generations pushed, per target.
    pub pushed: Vec<(u64, String)>,
    /// What is still pending: (generation, target, last failure).
    pub left: Vec<(u64, String, String)>,
}

/// Pushes every pending generation to each target in turn, in order, each tried up to
/// `attempts` times with `backoff` between tries; a target stops at its first
/// generation that still fails (later ones would arrive out of order).
pub(crate) fn drain(
    core: &Core,
    targets: &[Box<dyn PushTarget>],
    attempts: u32,
    backoff: Backoff,
) -> DrainReport {
    let mut report = DrainReport::default();
    for t in targets {
        let url = t.url();
        let pending = core.lock().state.pending(&url);
        let mut stuck: Option<String> = None;
        for gen in pending {
            if let Some(why) = &stuck {
                report.left.push((gen, url.clone(), why.clone()));
                continue;
            }
            let mut wait = backoff.first;
            let mut last = None;
            for i in 0..attempts.max(1) {
                if i > 0 {
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(backoff.max);
                }
                match attempt(core, t.as_ref(), &url, gen) {
                    Ok(()) => {
                        last = None;
                        break;
                    }
                    Err(e) => last = Some(reason(&e)),
                }
            }
            match last {
                None => report.pushed.push((gen, url.clone())),
                Some(why) => {
                    report.left.push((gen, url.clone(), why.clone()));
                    stuck = Some(format!("after generation {gen}, which failed: {why}"));
                }
            }
        }
    }
    report
}
