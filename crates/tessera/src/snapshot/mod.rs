//! Snapshots from a live training loop (the WTXT spec's §15 pipeline, for every writable
//! format): [`Snapshotter::request`] logs one fsynced line, pins the generation (a copy
//! into a staging arena reused between generations, or references under `copy=False`)
//! and returns; a background thread writes it into the ring (atomically, chained to the
//! previous generation, signed, HMAC'd and age-armored as asked), a worker per push
//! target sends it on, and [`restore`] returns the newest generation that verifies.
//!
//! ```text
//!  training thread            emitter thread                 one worker per target
//!  request(state)             recv job                        oldest gen it lacks
//!   ├ policy: arena free?      ├ identity root (BLAKE3)         ├ push (PushTarget)
//!   │  backlog < max?          ├ write gen-N.<ext> (atomic)     ├ log `pushed` / `failed`
//!   ├ log `requested` (fsync)  ├ .sig, gen-N.json (atomic)      └ backoff, same gen again
//!   ├ copy into the arena      ├ log `written` (fsync)
//!   └ send job, return gen     ├ give the arena back
//!                              └ drop beyond `keep` (log `dropped`, then the files)
//! ```
//!
//! The ring's layout and the log's records: [`ring`], [`wal`]. A crash (SIGKILL) at any
//! point leaves: a `requested` generation without `written` (its files, complete or
//! not, are removed by the next open, which logs `failed … interrupted`), or a written
//! one whose pushes resume. One process uses a ring at a time (a lock file
//! `.snapshots.lock.<writer>`, removed when its process has ended).
//!
//! Formats: the snapshot goes through the format's writer ([`crate::convert`]); a
//! format whose codec declares `generation` and `prev` options (WTXT) gets the
//! generation number and the previous generation's file to chain its merkle from; a
//! format with metadata gets `tessera.snapshot.*` keys (gen, step, time, prev root)
//! beside the caller's; every generation has its sidecar.

mod emit;
pub mod queue;
pub mod restore;
pub mod ring;
pub mod stage;
pub mod wal;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use queue::{target_for, Backoff, DirTarget, DrainReport, PushItem, PushTarget, TargetOptions};
pub use restore::{check_generation, restore, RestoreOptions, Restored};
pub use stage::{Pinned, PinnedTensor};

use crate::error::{Error, Result};
use crate::format::Format;
use crate::model::TensorSource;
use crate::options::WriteOptions;
use ring::State;
use stage::Arena;
use wal::{Record, Wal};

/// What to do when a request finds the pipeline behind (the previous generation still
/// being written, or `max_backlog` generations waiting for a push).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backlog {
    /// Skip this request: `request` returns `None` at once and counts it
    /// ([`Snapshotter::skipped`]); the hot path never waits.
    #[default]
    Skip,
    /// Wait until the pipeline catches up.
    Block,
}

impl Backlog {
    /// `"skip"` or `"block"`.
    pub fn parse(s: &str) -> Result<Backlog> {
        match s {
            "skip" => Ok(Backlog::Skip),
            "block" => Ok(Backlog::Block),
            _ => Err(Error::invalid_input(format!(
                "on_backlog={s:?}: \"skip\" or \"block\""
            ))),
        }
    }
}

/// How a [`Snapshotter`] writes and keeps generations.
#[non_exhaustive]
pub struct SnapshotOptions {
    /// The format of the snapshots (any writable one).
    pub format: Format,
    /// Generations kept in the ring (the newest), at least 1.
    pub keep: usize,
    /// Every generation divisible by this is kept for good (0: none).
    pub keep_every: u64,
    /// The format's writer options (`hmac_key`, `age_recipients`, `sign_key` for
    /// WTXT's own `sign` line, compression, …), as `tessera convert -O` takes them.
    pub write: WriteOptions,
    /// Sign every generation's tensor manifest (a detached `.sig` beside it).
    #[cfg(feature = "signing")]
    pub sign_key: Option<crate::signing::key::SecretKey>,
    /// Push targets (URLs, [`target_for`]).
    pub push: Vec<String>,
    /// Push targets already made (tests, targets of the caller's own).
    pub targets: Vec<Box<dyn PushTarget>>,
    /// Options for the targets `push` names.
    pub target_options: TargetOptions,
    /// The backlog policy.
    pub on_backlog: Backlog,
    /// Generations waiting for a push before the policy applies (default: `keep`).
    pub max_backlog: Option<usize>,
    /// Retry timing of pushes.
    pub backoff: Backoff,
}

impl SnapshotOptions {
    /// Snapshots in `format`, 5 kept, no target.
    pub fn new(format: Format) -> SnapshotOptions {
        SnapshotOptions {
            format,
            keep: 5,
            keep_every: 0,
            write: WriteOptions::default(),
            #[cfg(feature = "signing")]
            sign_key: None,
            push: Vec::new(),
            targets: Vec::new(),
            target_options: TargetOptions::default(),
            on_backlog: Backlog::Skip,
            max_backlog: None,
            backoff: Backoff::default(),
        }
    }
}

pub(crate) struct Inner {
    wal: Wal,
    pub(crate) state: State,
    /// The staging arena, `None` while the emitter has it.
    arena: Option<Arena>,
    pub(crate) stop_pushes: bool,
    pub(crate) idle_targets: BTreeSet<String>,
    skipped: u64,
    errors: Vec<String>,
}

/// What the threads share.
pub(crate) struct Core {
    pub(crate) dir: PathBuf,
    format: Format,
    keep: usize,
    keep_every: u64,
    max_backlog: usize,
    on_backlog: Backlog,
    has_targets: bool,
    write: WriteOptions,
    #[cfg(feature = "signing")]
    sign_key: Option<crate::signing::key::SecretKey>,
    inner: Mutex<Inner>,
    pub(crate) cond: Condvar,
}

impl Core {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn wait<'a>(
        &self,
        g: MutexGuard<'a, Inner>,
        timeout: Option<Duration>,
    ) -> MutexGuard<'a, Inner> {
        match timeout {
            Some(t) => {
                self.cond
                    .wait_timeout(g, t)
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
            None => self.cond.wait(g).unwrap_or_else(|p| p.into_inner()),
        }
    }

    /// Appends a record to the log (fsynced) and folds it into the state.
    pub(crate) fn log(&self, r: Record) -> Result<()> {
        let mut inner = self.lock();
        let out = inner.wal.append(&r);
        if out.is_ok() {
            inner.state.apply(&r);
        }
        drop(inner);
        self.cond.notify_all();
        out
    }

    /// Drops what the ring may let go: logs `dropped`, then removes the files.
    pub(crate) fn retain(&self) {
        let drop_now = self.lock().state.to_drop(self.keep, self.keep_every);
        for gen in drop_now {
            if self.log(Record::Dropped { gen }).is_ok() {
                for f in ring::files_of(&self.dir, gen) {
                    let _ = std::fs::remove_file(f);
                }
            }
        }
    }
}

/// Test hook (feature `test-hooks`, never in a user's build):
/// `TESSERA_TEST_SNAPSHOT_PAUSE=<stage>` stops the thread at `stage` (`pin`, `write`,
/// `sidecar`, `written`, `push`) for good, after creating the file
/// `TESSERA_TEST_SNAPSHOT_PAUSE_FILE` names, so a test can SIGKILL the process there.
#[cfg(feature = "test-hooks")]
pub(crate) fn hook(stage: &str) {
    if std::env::var("TESSERA_TEST_SNAPSHOT_PAUSE").as_deref() == Ok(stage) {
        if let Some(f) = std::env::var_os("TESSERA_TEST_SNAPSHOT_PAUSE_FILE") {
            let _ = std::fs::write(f, stage);
        }
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}

#[cfg(not(feature = "test-hooks"))]
pub(crate) fn hook(_: &str) {}

const LOCK_PREFIX: &str = ".snapshots.lock.";

/// Takes the ring's lock (a file named after this process), after removing those of
/// processes that have ended.
fn take_lock(dir: &Path) -> Result<PathBuf> {
    crate::util::atomic::sweep_stale(dir, LOCK_PREFIX, "", false);
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if let Some(n) = e.file_name().to_str() {
                if n.starts_with(LOCK_PREFIX) {
                    return Err(Error::invalid_input(format!(
                        "{}: the ring is in use by another snapshotter ({n}); one \
                         process writes a ring at a time",
                        dir.display()
                    )));
                }
            }
        }
    }
    let p = dir.join(format!(
        "{LOCK_PREFIX}{}.0",
        crate::util::atomic::writer_tag()
    ));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&p)
        .map_err(|e| Error::from(e).at_subject(p.display().to_string()))?;
    Ok(p)
}

struct Job {
    gen: u64,
    step: Option<u64>,
    time: String,
    metadata: BTreeMap<String, String>,
    arena: Arena,
}

/// Snapshots of a live state into a ring directory. See the module's documentation.
pub struct Snapshotter {
    core: Arc<Core>,
    tx: Option<mpsc::Sender<Job>>,
    emitter: Option<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
    targets: Vec<String>,
    lock: PathBuf,
    /// What the open found: torn log lines, leftovers removed, interrupted generations.
    pub recovered: Vec<String>,
}

impl Snapshotter {
    /// Opens (creating) the ring at `dir`: reads its log, removes what a crash left,
    /// logs interrupted generations as failed, starts the writer and a worker per target
    /// (each resuming the pushes its target lacks).
    pub fn open(dir: impl AsRef<Path>, mut opts: SnapshotOptions) -> Result<Snapshotter> {
        let dir = dir.as_ref().to_path_buf();
        if !opts.format.can_write() {
            return Err(Error::unsupported(format!(
                "{} is not a format Tessera writes",
                opts.format.title()
            )));
        }
        crate::formats::check_options(opts.format, &opts.write)?;
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::from(e).at_subject(dir.display().to_string()))?;
        let lock = take_lock(&dir)?;
        let opened = (|| -> Result<(Wal, State, Vec<String>)> {
            let log = wal::read(&dir)?;
            let mut recovered = log.problems.clone();
            let mut wal = Wal::open(&dir, &log)?;
            let mut state = State::from_log(&log);
            let interrupted: Vec<u64> = state
                .gens
                .values()
                .filter(|g| g.written.is_none() && g.failed.is_none() && !g.dropped)
                .map(|g| g.gen)
                .collect();
            for gen in interrupted {
                let r = Record::Failed {
                    gen,
                    target: None,
                    reason: "interrupted before it was written (found at open)".into(),
                };
                wal.append(&r)?;
                state.apply(&r);
                recovered.push(format!("generation {gen} was interrupted: not written"));
            }
            for name in ring::remove_leftovers(&dir, &state) {
                recovered.push(format!("removed leftover {name}"));
            }
            Ok((wal, state, recovered))
        })();
        let (mut wal, mut state, recovered) = match opened {
            Ok(x) => x,
            Err(e) => {
                let _ = std::fs::remove_file(&lock);
                return Err(e);
            }
        };
        let mut targets = std::mem::take(&mut opts.targets);
        for url in &opts.push {
            match target_for(url, &opts.target_options) {
                Ok(t) => targets.push(t),
                Err(e) => {
                    let _ = std::fs::remove_file(&lock);
                    return Err(e);
                }
            }
        }
        for t in &targets {
            let url = t.url();
            if !state.targets.contains(&url) {
                let r = Record::Target { url };
                wal.append(&r)?;
                state.apply(&r);
            }
        }
        let urls: Vec<String> = targets.iter().map(|t| t.url()).collect();
        // Only the targets of this Snapshotter count for the backlog and the ring's
        // drops; targets recorded earlier keep their pending generations in the log.
        state.targets = urls.clone();
        let core = Arc::new(Core {
            dir: dir.clone(),
            format: opts.format,
            keep: opts.keep.max(1),
            keep_every: opts.keep_every,
            max_backlog: opts.max_backlog.unwrap_or(opts.keep).max(1),
            on_backlog: opts.on_backlog,
            has_targets: !targets.is_empty(),
            write: opts.write,
            #[cfg(feature = "signing")]
            sign_key: opts.sign_key,
            inner: Mutex::new(Inner {
                wal,
                state,
                arena: Some(Arena::default()),
                stop_pushes: false,
                idle_targets: BTreeSet::new(),
                skipped: 0,
                errors: Vec::new(),
            }),
            cond: Condvar::new(),
        });
        let (tx, rx) = mpsc::channel::<Job>();
        let c = core.clone();
        let emitter = std::thread::Builder::new()
            .name("tessera-snapshot".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    emit::run(&c, job);
                }
            })
            .map_err(Error::from)?;
        let mut workers = Vec::new();
        for t in targets {
            let c = core.clone();
            let backoff = opts.backoff;
            workers.push(
                std::thread::Builder::new()
                    .name("tessera-push".into())
                    .spawn(move || queue::worker(c, t, backoff))
                    .map_err(Error::from)?,
            );
        }
        Ok(Snapshotter {
            core,
            tx: Some(tx),
            emitter: Some(emitter),
            workers,
            targets: urls,
            lock,
            recovered,
        })
    }

    /// The ring's directory.
    pub fn dir(&self) -> &Path {
        &self.core.dir
    }

    /// Waits (or not: [`Backlog::Skip`]) for the pipeline; then `None` when skipped.
    fn admit(&self) -> Option<MutexGuard<'_, Inner>> {
        let mut inner = self.core.lock();
        loop {
            let busy = inner.arena.is_none();
            let behind = self.core.has_targets && inner.state.backlog() >= self.core.max_backlog;
            if !busy && !behind {
                return Some(inner);
            }
            match self.core.on_backlog {
                Backlog::Skip => {
                    inner.skipped += 1;
                    return None;
                }
                Backlog::Block => inner = self.core.wait(inner, None),
            }
        }
    }

    /// Logs the request and takes the arena.
    fn start(
        &self,
        mut inner: MutexGuard<'_, Inner>,
        step: Option<u64>,
    ) -> Result<(u64, String, Arena)> {
        let gen = inner.state.next_gen();
        let time = crate::util::clock::utc_string(crate::util::clock::stamp_secs()?);
        let r = Record::Requested {
            gen,
            step,
            time: time.clone(),
        };
        inner.wal.append(&r)?;
        inner.state.apply(&r);
        let arena = inner.arena.take().unwrap_or_default();
        Ok((gen, time, arena))
    }

    fn abandon(&self, gen: u64, arena: Arena, e: &Error) {
        let _ = self.core.log(Record::Failed {
            gen,
            target: None,
            reason: e.to_string(),
        });
        self.core.lock().arena = Some(arena);
        self.core.cond.notify_all();
    }

    fn send(&self, job: Job) -> Result<()> {
        let tx = self
            .tx
            .as_ref()
            .ok_or_else(|| Error::invalid_input("the snapshotter is closed"))?;
        tx.send(job)
            .map_err(|_| Error::invalid_input("the snapshot thread has stopped"))
    }

    /// Snapshots `src` (its dense tensors): logs the request, copies the tensors into
    /// the staging arena and returns the generation — or `None` when the pipeline is
    /// behind and the policy is [`Backlog::Skip`]. The write happens in the background.
    pub fn request(
        &self,
        src: &dyn TensorSource,
        step: Option<u64>,
        metadata: BTreeMap<String, String>,
    ) -> Result<Option<u64>> {
        let Some(inner) = self.admit() else {
            return Ok(None);
        };
        let (gen, time, mut arena) = self.start(inner, step)?;
        hook("pin");
        if let Err(e) = arena.copy_from(src, crate::metadata::Metadata::new()) {
            self.abandon(gen, arena, &e);
            return Err(e);
        }
        self.send(Job {
            gen,
            step,
            time,
            metadata,
            arena,
        })?;
        Ok(Some(gen))
    }

    /// Snapshots tensors the caller holds and promises not to change until the
    /// generation is written ([`Snapshotter::pinned`] says when): nothing is copied
    /// now. Else as [`Snapshotter::request`].
    pub fn request_pinned(
        &self,
        tensors: Vec<PinnedTensor>,
        step: Option<u64>,
        metadata: BTreeMap<String, String>,
    ) -> Result<Option<u64>> {
        let Some(inner) = self.admit() else {
            return Ok(None);
        };
        let (gen, time, mut arena) = self.start(inner, step)?;
        if let Err(e) = arena.hold(tensors, crate::metadata::Metadata::new()) {
            self.abandon(gen, arena, &e);
            return Err(e);
        }
        self.send(Job {
            gen,
            step,
            time,
            metadata,
            arena,
        })?;
        Ok(Some(gen))
    }

    /// Whether generation `gen` is still being written (its tensors still read).
    pub fn pinned(&self, gen: u64) -> bool {
        let inner = self.core.lock();
        inner
            .state
            .gens
            .get(&gen)
            .is_some_and(|g| g.written.is_none() && g.failed.is_none())
    }

    /// Waits until generation `gen` is written (Ok) or failed (the reason), or, with a
    /// timeout, until it passes (an error saying so).
    pub fn wait(&self, gen: u64, timeout: Option<Duration>) -> Result<()> {
        let until = timeout.map(|t| Instant::now() + t);
        let mut inner = self.core.lock();
        loop {
            match inner.state.gens.get(&gen) {
                None => return Err(Error::not_found(format!("no generation {gen} in the ring"))),
                Some(g) if g.written.is_some() => return Ok(()),
                Some(g) => {
                    if let Some(why) = &g.failed {
                        return Err(Error::invalid_input(format!(
                            "generation {gen} failed: {why}"
                        )));
                    }
                }
            }
            let left = match until {
                Some(u) => {
                    let l = u.saturating_duration_since(Instant::now());
                    if l.is_zero() {
                        return Err(Error::invalid_input(format!(
                            "generation {gen} is not written yet"
                        )));
                    }
                    Some(l)
                }
                None => None,
            };
            inner = self.core.wait(inner, left);
        }
    }

    /// Waits until no generation is being written.
    pub fn flush(&self) {
        let mut inner = self.core.lock();
        while inner.arena.is_none() {
            inner = self.core.wait(inner, None);
        }
    }

    /// Waits until every target holds every generation in the ring, at most `timeout`.
    /// Returns whether they do.
    pub fn wait_pushed(&self, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        let mut inner = self.core.lock();
        loop {
            let done = self
                .targets
                .iter()
                .all(|t| inner.state.pending(t).is_empty());
            if done {
                return true;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            inner = self.core.wait(inner, Some(left));
        }
    }

    /// Requests skipped by [`Backlog::Skip`].
    pub fn skipped(&self) -> u64 {
        self.core.lock().skipped
    }

    /// Write failures so far (each also a `failed` record in the log).
    pub fn errors(&self) -> Vec<String> {
        self.core.lock().errors.clone()
    }

    /// The ring's state as the log says.
    pub fn state(&self) -> State {
        self.core.lock().state.clone()
    }

    /// Generations (written, in the ring) each target of this snapshotter lacks.
    pub fn pending(&self) -> Vec<(String, Vec<u64>)> {
        let inner = self.core.lock();
        self.targets
            .iter()
            .map(|t| (t.clone(), inner.state.pending(t)))
            .collect()
    }

    /// Bytes the staging arena holds as its own copies (0 while a write has it).
    pub fn arena_bytes(&self) -> u64 {
        self.core
            .lock()
            .arena
            .as_ref()
            .map_or(0, Arena::owned_bytes)
    }

    /// Pushes what `targets` lack now, on this thread (`tessera snapshots push`): see
    /// [`queue`]. Use a Snapshotter opened without targets for it.
    pub fn push_pending(
        &self,
        targets: &[Box<dyn PushTarget>],
        attempts: u32,
        backoff: Backoff,
    ) -> Result<DrainReport> {
        {
            let mut inner = self.core.lock();
            for t in targets {
                let url = t.url();
                if !inner.state.targets.contains(&url) {
                    let r = Record::Target { url };
                    inner.wal.append(&r)?;
                    inner.state.apply(&r);
                }
            }
        }
        let report = queue::drain(&self.core, targets, attempts, backoff);
        Ok(report)
    }

    /// Waits for the writes, then up to `push_timeout` for the pushes, and stops; pushes
    /// still pending stay queued in the log for the next Snapshotter or `tessera
    /// snapshots push`.
    pub fn close(mut self, push_timeout: Duration) -> Result<()> {
        self.shutdown(push_timeout);
        Ok(())
    }

    fn shutdown(&mut self, push_timeout: Duration) {
        self.tx = None;
        if let Some(h) = self.emitter.take() {
            let _ = h.join();
        }
        if !self.workers.is_empty() && !push_timeout.is_zero() {
            self.wait_pushed(push_timeout);
        }
        self.core.lock().stop_pushes = true;
        self.core.cond.notify_all();
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
        let _ = std::fs::remove_file(&self.lock);
    }
}

impl Drop for Snapshotter {
    /// As [`Snapshotter::close`] without waiting for pushes.
    fn drop(&mut self) {
        if self.emitter.is_some() || !self.workers.is_empty() {
            self.shutdown(Duration::ZERO);
        }
    }
}
