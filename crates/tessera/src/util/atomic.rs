//! Crash-safe file replacement.
//!
//! [`write_atomic`] writes into a temporary file in the target's directory, flushes and
//! fsyncs it, renames it over the target and fsyncs the directory. A crash or an error at
//! any point leaves either the complete old file or the complete new one under the
//! target name, never a mix; on error the temporary file is removed.
//!
//! Durability ([`Durability`]): by default ([`Durability::Fsync`]) the new file and the
//! rename are on disk when the write returns. [`Durability::NoFsync`] (Python's
//! `durable=False`, `tessera convert --no-fsync`) skips every fsync and keeps the rest:
//! the rename still replaces the target in one step and a failure still leaves nothing
//! behind, so a reader never sees a half file; but after a power loss or an OS crash
//! the target may be the old file, or (on filesystems that do not order data before
//! the rename) an empty or partly written one. A process crash loses nothing either
//! way: the page cache survives it.
//!
//! Side files ([`write_atomic_group`]): a small sibling that must match the main file
//! (WTXT's `.wsum`) is written to its own temporary and committed with it, the old
//! sibling removed before the main rename and the new one renamed in after it, so a
//! crash never leaves a main file beside a sibling of another write.
//!
//! Overlapped write-back (Linux, durable writes): the temporary file is wrapped in a
//! [`SyncingFile`] that, every [`WRITEBACK_STEP`] bytes written, asks the kernel to
//! start writing the finished range out (`sync_file_range(SYNC_FILE_RANGE_WRITE)`,
//! which does not wait) and waits for the range before it (so dirty pages stay bounded
//! at about two steps). The disk thus works while later tensors are still being
//! written, and the final fsync has at most the last two steps left to flush. Ranges
//! that a writer later rewrites (a header patched after the data) are simply dirty
//! again and go out with the fsync. Elsewhere the wrapper does nothing and the fsync
//! does all the work. Past a quarter of the machine's memory (1 GiB at least), each
//! range waited for also leaves the page cache (`POSIX_FADV_DONTNEED`): converting a
//! file bigger than RAM keeps its cache footprint bounded instead of evicting
//! everything else; smaller files stay cached for the read that often follows.
//!
//! Permissions: a new file gets what the user's umask gives (`0666 & !umask`, 0644
//! usually), as `open(2)` would, not the 0600 of a temporary file; a replaced file
//! keeps its mode.
//!
//! Interruption: every live temporary file, and every temporary directory ([`TempDir`]:
//! a model set being assembled, an upload's staging), is listed in a lock-free table
//! that [`remove_temporaries`] empties with nothing but atomic loads and system calls
//! (`unlink`, `getdents64`, `unlinkat`), so a signal handler (the CLI's, for SIGINT,
//! SIGTERM and SIGBUS) can remove them before the process exits.
//!
//! Stale temporaries: a temporary's name says who writes it, `.{name}.{tag}.{random}.tmp`
//! with the tag `{host}-{boot}-{pid}-{start}` ([`writer_tag`]: host name and PID
//! namespace, boot, process id and start time). A process killed by SIGKILL, or a
//! machine that lost power, leaves its temporaries; the next write to the same target
//! removes those whose writer has ended ([`sweep_stale`]) and never one of a live
//! writer (same process id, same start time), of another host or PID namespace, or of
//! another user. Set directories and staging directories are named and swept alike.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::error::{Error, Result};

/// Live temporary files, as NUL-terminated paths owned by the table (`CString::into_raw`).
/// Slots beyond the first free one are simply not used: 64 concurrent writes per process
/// is far beyond what Tessera does; a write that finds no slot still works, it just
/// cannot be cleaned up by a signal handler (the next write to its target removes it,
/// [`sweep_stale`]).
static LIVE: [AtomicPtr<std::ffi::c_char>; 64] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; 64];

/// Live temporary directories (a model set being assembled, an upload's staging), as
/// [`LIVE`] lists files; [`remove_temporaries`] removes them with what they hold.
static LIVE_DIRS: [AtomicPtr<std::ffi::c_char>; 16] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; 16];

/// A registration in [`LIVE`] or [`LIVE_DIRS`], removed on drop.
struct Live(Option<(&'static [AtomicPtr<std::ffi::c_char>], usize)>);

#[cfg(test)]
thread_local! {
    /// The slot the calling thread registered last (tests only: other tests write
    /// concurrently, so counting slots says nothing about one's own).
    static LAST_SLOT: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

impl Live {
    fn register(path: &Path) -> Live {
        Live::register_in(&LIVE, path)
    }

    fn register_in(table: &'static [AtomicPtr<std::ffi::c_char>], path: &Path) -> Live {
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
                return Live(None);
            };
            let raw = c.into_raw();
            for (i, slot) in table.iter().enumerate() {
                if slot
                    .compare_exchange(
                        std::ptr::null_mut(),
                        raw,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    )
                    .is_ok()
                {
                    #[cfg(test)]
                    LAST_SLOT.with(|s| s.set(Some(i)));
                    return Live(Some((table, i)));
                }
            }
            // No free slot: take the string back.
            #[allow(unsafe_code)]
            // SAFETY: `raw` came from `CString::into_raw` just above and was not shared.
            drop(unsafe { std::ffi::CString::from_raw(raw) });
        }
        #[cfg(not(unix))]
        let _ = (table, path);
        Live(None)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Some((table, i)) = self.0 {
            let raw = table[i].swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !raw.is_null() {
                #[allow(unsafe_code)]
                // SAFETY: only `register_in` stores pointers, from `CString::into_raw`,
                // and the swap gave this one to us alone.
                drop(unsafe { std::ffi::CString::from_raw(raw) });
            }
        }
    }
}

/// Removes every temporary file a write in progress has open, and every temporary
/// directory (a set being assembled, an upload's staging) with what it holds; returns
/// how many. Async-signal-safe (atomic loads, `open`, `getdents64`, `unlinkat`, `close`
/// only, no allocation): for signal handlers that are about to end the process. The
/// slots are left as they are (the process is ending). Outside Linux a directory is
/// removed only when empty; the next write beside it removes the rest ([`sweep_stale`]).
pub fn remove_temporaries() -> usize {
    let mut n = 0;
    #[cfg(unix)]
    for slot in &LIVE {
        let p = slot.load(Ordering::Acquire);
        if !p.is_null() {
            #[allow(unsafe_code)]
            // SAFETY: a non-null slot holds a NUL-terminated path from `CString::into_raw`.
            unsafe {
                libc::unlink(p);
            }
            n += 1;
        }
    }
    #[cfg(unix)]
    for slot in &LIVE_DIRS {
        let p = slot.load(Ordering::Acquire);
        if !p.is_null() {
            #[allow(unsafe_code)]
            // SAFETY: as above.
            unsafe {
                remove_tree(p);
            }
            n += 1;
        }
    }
    n
}

/// Removes the directory `path` and everything in it, four levels deep at most, with
/// async-signal-safe system calls only (a stack buffer for `getdents64`).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
unsafe fn remove_tree(path: *const std::ffi::c_char) {
    // SAFETY (callers): `path` is a NUL-terminated string.
    unsafe { remove_tree_at(libc::AT_FDCWD, path, 4) }
}

#[cfg(all(unix, not(target_os = "linux")))]
#[allow(unsafe_code)]
unsafe fn remove_tree(path: *const std::ffi::c_char) {
    // SAFETY (callers): `path` is a NUL-terminated string.
    unsafe {
        libc::rmdir(path);
    }
}

/// Removes `name` (relative to the directory `parent`, or a path with `AT_FDCWD`): a
/// directory with its entries (depth levels below it at most), or a file.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
unsafe fn remove_tree_at(parent: libc::c_int, name: *const std::ffi::c_char, depth: u32) {
    // SAFETY: `name` is NUL-terminated (callers: a table entry, or a name getdents64
    // returned, which the kernel terminates within its record); `buf` outlives every
    // call that writes it; every descriptor opened is closed.
    unsafe {
        let fd = libc::openat(
            parent,
            name,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        );
        if fd < 0 {
            libc::unlinkat(parent, name, 0);
            return;
        }
        let mut buf = [0u8; 2048];
        // Removing entries while reading the directory may make a read skip some: read
        // again from the start until a pass finds nothing (a few passes at most).
        for _ in 0..8 {
            libc::lseek(fd, 0, libc::SEEK_SET);
            let mut found = false;
            loop {
                let got = libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len());
                if got <= 0 {
                    break;
                }
                let got = (got as usize).min(buf.len());
                // struct linux_dirent64: d_ino u64, d_off i64, d_reclen u16, d_type u8,
                // d_name (NUL-terminated) at offset 19.
                let mut off = 0usize;
                while off + 20 <= got {
                    let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
                    if reclen < 20 || off + reclen > got {
                        break;
                    }
                    let at = |i: usize| buf.get(off + 19 + i).copied().unwrap_or(0);
                    let dots = at(0) == b'.' && (at(1) == 0 || (at(1) == b'.' && at(2) == 0));
                    if !dots {
                        found = true;
                        let entry = buf.as_ptr().add(off + 19).cast::<std::ffi::c_char>();
                        if libc::unlinkat(fd, entry, 0) != 0 && depth > 0 {
                            remove_tree_at(fd, entry, depth - 1);
                        }
                    }
                    off += reclen;
                }
            }
            if !found {
                break;
            }
        }
        libc::close(fd);
        libc::unlinkat(parent, name, libc::AT_REMOVEDIR);
    }
}

/// Who wrote a temporary: its name carries `{host}-{boot}-{pid}-{start}` ([`writer_tag`]),
/// so that a later write can tell a temporary whose writer is gone (killed, crashed,
/// the machine restarted) from one a live process is still writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Writer {
    /// A hash of the host name and the PID namespace: a process id means something
    /// only within them (folders shared between machines or containers).
    host: u32,
    /// A hash of the kernel's boot id (Linux; 0 elsewhere or unknown).
    boot: u32,
    /// The process id.
    pid: u32,
    /// The process's start time in clock ticks since boot (Linux; 0 elsewhere or
    /// unknown): a reused process id has another.
    start: u64,
}

/// FNV-1a, 32 bits: a short stable tag (not a security measure).
fn fnv32(parts: &[&[u8]]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for p in parts {
        for &b in *p {
            h ^= u32::from(b);
            h = h.wrapping_mul(0x0100_0193);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The start time of process `pid` in clock ticks since boot (`/proc/PID/stat`,
/// field 22), when it can be read.
fn start_of(pid: u32) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name (field 2) may hold spaces and parentheses: fields 3 on
        // follow the last ')'.
        let rest = &stat[stat.rfind(')')? + 1..];
        rest.split_whitespace().nth(19)?.parse().ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

impl Writer {
    /// This process.
    fn me() -> &'static Writer {
        static ME: std::sync::OnceLock<Writer> = std::sync::OnceLock::new();
        ME.get_or_init(|| {
            let pid = std::process::id();
            #[cfg(unix)]
            let host_name = {
                let mut buf = [0u8; 256];
                #[allow(unsafe_code)]
                // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`.
                let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
                let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
                if r == 0 {
                    buf[..end].to_vec()
                } else {
                    Vec::new()
                }
            };
            #[cfg(not(unix))]
            let host_name = Vec::new();
            let ns = std::fs::read_link("/proc/self/ns/pid")
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                .map(|b| fnv32(&[b.trim().as_bytes()]))
                .unwrap_or(0);
            Writer {
                host: fnv32(&[&host_name, ns.as_bytes()]),
                boot,
                pid,
                start: start_of(pid).unwrap_or(0),
            }
        })
    }

    /// `{host:08x}-{boot:08x}-{pid}-{start}`.
    fn tag(&self) -> String {
        format!(
            "{:08x}-{:08x}-{}-{}",
            self.host, self.boot, self.pid, self.start
        )
    }

    fn parse(tag: &str) -> Option<Writer> {
        let mut it = tag.split('-');
        let hex = |s: &str| (s.len() == 8).then(|| u32::from_str_radix(s, 16).ok())?;
        let w = Writer {
            host: hex(it.next()?)?,
            boot: hex(it.next()?)?,
            pid: it.next()?.parse().ok()?,
            start: it.next()?.parse().ok()?,
        };
        it.next().is_none().then_some(w)
    }

    /// Whether this writer has certainly ended. Unknown counts as running: a process of
    /// another host or PID namespace, a process whose start time cannot be read.
    fn gone(&self) -> bool {
        let me = Writer::me();
        if self.host != me.host {
            return false;
        }
        if self.boot != 0 && me.boot != 0 && self.boot != me.boot {
            return true; // written before the machine last started
        }
        if self.pid == me.pid {
            return self.start != 0 && me.start != 0 && self.start != me.start;
        }
        if !process_runs(self.pid) {
            return true;
        }
        match start_of(self.pid) {
            Some(s) if self.start != 0 => s != self.start,
            _ => false,
        }
    }
}

/// This process's writer tag, as temporary names carry it (see [`sweep_stale`]).
pub fn writer_tag() -> String {
    Writer::me().tag()
}

/// Removes the entries of `dir` named `{prefix}{writer tag}.{random}{suffix}` (the
/// names [`temporary_for`], [`temp_dir`] and [`staging_dir`] give) whose writer has
/// ended ([`Writer::gone`]) and that belong to this user: files, or directories when
/// `dirs`. A process killed with SIGKILL (or a machine that lost power) cannot remove
/// its temporaries; the next write to the same target does. Returns how many.
pub fn sweep_stale(dir: &Path, prefix: &str, suffix: &str, dirs: bool) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(writer) = name
            .to_str()
            .and_then(|s| s.strip_prefix(prefix))
            .and_then(|s| s.strip_suffix(suffix))
            .and_then(|s| s.rsplit_once('.'))
            .and_then(|(tag, _)| Writer::parse(tag))
        else {
            continue;
        };
        if !writer.gone() {
            continue;
        }
        let path = e.path();
        let Ok(md) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        #[cfg(unix)]
        let ours = {
            use std::os::unix::fs::MetadataExt;
            #[allow(unsafe_code)]
            // SAFETY: geteuid has no preconditions.
            let me = unsafe { libc::geteuid() };
            md.uid() == me
        };
        #[cfg(not(unix))]
        let ours = true;
        if !ours {
            continue;
        }
        let removed = if dirs && md.is_dir() {
            std::fs::remove_dir_all(&path).is_ok()
        } else if !dirs && md.is_file() {
            std::fs::remove_file(&path).is_ok()
        } else {
            false
        };
        n += usize::from(removed);
    }
    n
}

/// A temporary directory, named after its writer ([`writer_tag`]), listed for
/// [`remove_temporaries`] while it lives and removed with its content when dropped.
pub struct TempDir {
    // Field order: the directory goes before its registration (a signal in between
    // finds nothing to remove, never a directory left unlisted).
    dir: tempfile::TempDir,
    _live: Live,
}

impl TempDir {
    /// Its path.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// A new temporary directory in `parent` named `{prefix}{writer tag}.{random}` (a model
/// set is assembled in `.{stem}.set.{tag}.{random}` beside its target). Those of
/// writers that have ended are removed first ([`sweep_stale`]).
pub fn temp_dir(parent: &Path, prefix: &str) -> std::io::Result<TempDir> {
    sweep_stale(parent, prefix, "", true);
    let dir = tempfile::Builder::new()
        .prefix(&format!("{prefix}{}.", writer_tag()))
        .tempdir_in(parent)?;
    let live = Live::register_in(&LIVE_DIRS, dir.path());
    Ok(TempDir { dir, _live: live })
}

/// The name of a staging directory starts with this, then the writer tag and a dot.
const STAGING_PREFIX: &str = ".tessera-staging.";

/// A new staging directory in `parent` (uploads stage in the system temporary
/// directory), named after this process ([`writer_tag`]), removed when dropped and by
/// [`remove_temporaries`]. Staging directories of writers that have ended are removed
/// first: one killed by SIGKILL during an upload cannot remove its own.
pub fn staging_dir(parent: &Path) -> Result<TempDir> {
    temp_dir(parent, STAGING_PREFIX).map_err(|e| {
        Error::from(e).at_subject(format!(
            "creating a staging directory in {}",
            parent.display()
        ))
    })
}

/// The error for a file or directory that cannot be created in the output folder
/// `dir`, in the user's terms: the folder they named, not the hidden temporary's path
/// (tempfile's error carries it), with the OS error number kept for exit codes.
pub(crate) fn create_error(e: std::io::Error, dir: &Path) -> Error {
    let code = e.raw_os_error().or(match e.kind() {
        std::io::ErrorKind::NotFound => Some(libc::ENOENT),
        std::io::ErrorKind::PermissionDenied => Some(libc::EACCES),
        std::io::ErrorKind::NotADirectory => Some(libc::ENOTDIR),
        std::io::ErrorKind::StorageFull => Some(libc::ENOSPC),
        std::io::ErrorKind::ReadOnlyFilesystem => Some(libc::EROFS),
        _ => None,
    });
    let err = match code {
        Some(c) => Error::from(std::io::Error::from_raw_os_error(c)),
        None => Error::from(e),
    };
    let what = if dir.exists() {
        format!(
            "cannot create a file in the output folder {}",
            dir.display()
        )
    } else {
        format!("the output folder {} does not exist", dir.display())
    };
    err.at_subject(what)
}

/// Whether process `pid` exists (or may: an unknown answer counts as running).
fn process_runs(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return true;
        };
        if pid <= 0 {
            return true;
        }
        #[allow(unsafe_code)]
        // SAFETY: signal 0 only checks that the process exists; nothing is sent.
        let r = unsafe { libc::kill(pid, 0) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

/// The mode a new file gets from the process umask (`0666 & !umask`).
#[cfg(unix)]
fn umask_mode() -> u32 {
    #[allow(unsafe_code)]
    // SAFETY: umask(2) cannot fail; it is set back at once. (Not thread-safe against a
    // concurrent umask change, which no part of Tessera makes.)
    let mask = unsafe {
        let m = libc::umask(0o022);
        libc::umask(m);
        m
    };
    0o666 & !(mask as u32)
}

/// Whether an atomic write waits for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// fsync the file and its directory before and after the rename (the default): the
    /// new file survives a power loss once the write returns.
    #[default]
    Fsync,
    /// No fsync: still atomic (temporary file, rename), not flushed. See the module docs.
    NoFsync,
}

impl Durability {
    /// `Fsync` when `durable`, else `NoFsync`.
    pub fn from_durable(durable: bool) -> Durability {
        if durable {
            Durability::Fsync
        } else {
            Durability::NoFsync
        }
    }
}

/// How many bytes a [`SyncingFile`] lets accumulate before it starts their write-back.
pub const WRITEBACK_STEP: u64 = 16 << 20;

/// The temporary file of an atomic write: a [`File`] (reachable through `Deref`) that,
/// for durable writes on Linux, starts the write-back of each finished
/// [`WRITEBACK_STEP`] of output while the rest is still being written (module docs).
pub struct SyncingFile {
    file: File,
    /// Start write-back as the output grows (durable writes on Linux).
    overlap: bool,
    /// The write position.
    pos: u64,
    /// Bytes `[0, kicked)` have had their write-back started.
    kicked: u64,
    /// The start of the range before the last one kicked (waited for next time).
    previous: u64,
    /// Written-out ranges that end beyond this offset leave the page cache.
    cache_budget: u64,
}

#[cfg(test)]
thread_local! {
    /// Tests only: a page-cache budget in place of the machine's.
    static CACHE_BUDGET: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// How much of a durable write stays in the page cache once written out: a quarter of
/// the machine's memory, 1 GiB at least. A file that fits (a checkpoint read back soon
/// after) keeps its cache; a conversion bigger than that drops each range behind it
/// once the disk has it, instead of pushing everything else out of the cache.
fn cache_budget() -> u64 {
    #[cfg(test)]
    if let Some(b) = CACHE_BUDGET.with(|b| b.get()) {
        return b;
    }
    #[cfg(unix)]
    {
        #[allow(unsafe_code)]
        // SAFETY: sysconf only reads its integer argument.
        let (pages, size) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        if pages > 0 && size > 0 {
            return ((pages as u64).saturating_mul(size as u64) / 4).max(1 << 30);
        }
    }
    u64::MAX
}

impl SyncingFile {
    fn new(file: File, durability: Durability) -> SyncingFile {
        let overlap = durability == Durability::Fsync && cfg!(target_os = "linux");
        SyncingFile {
            file,
            overlap,
            pos: 0,
            kicked: 0,
            previous: 0,
            cache_budget: if overlap { cache_budget() } else { u64::MAX },
        }
    }

    /// Starts write-back of `[kicked, pos)` when a step has accumulated, after waiting
    /// for the range kicked the time before (bounded dirty memory, no stall on the
    /// newest range).
    fn after_write(&mut self) {
        if !self.overlap || self.pos < self.kicked.saturating_add(WRITEBACK_STEP) {
            return;
        }
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::io::AsRawFd;
            let fd = self.file.as_raw_fd();
            let (start, end) = (self.kicked, self.pos);
            if end <= start {
                return;
            }
            #[allow(unsafe_code)]
            // SAFETY: sync_file_range only reads its integer arguments; the fd is ours
            // and open. Its result is advisory here (the final fsync decides), so an
            // error (EINVAL on a filesystem without it, ESPIPE) just turns it off.
            let ok = unsafe {
                // (A length of 0 would mean "to the end of the file": skip it.)
                let wait = if start > self.previous {
                    libc::sync_file_range(
                        fd,
                        self.previous as libc::off64_t,
                        (start - self.previous) as libc::off64_t,
                        libc::SYNC_FILE_RANGE_WAIT_BEFORE
                            | libc::SYNC_FILE_RANGE_WRITE
                            | libc::SYNC_FILE_RANGE_WAIT_AFTER,
                    )
                } else {
                    0
                };
                // The waited range is on disk: past the budget, its clean pages go.
                if wait == 0 && start > self.previous && start > self.cache_budget {
                    libc::posix_fadvise(
                        fd,
                        self.previous as libc::off64_t,
                        (start - self.previous) as libc::off64_t,
                        libc::POSIX_FADV_DONTNEED,
                    );
                }
                let kick = libc::sync_file_range(
                    fd,
                    start as libc::off64_t,
                    (end - start) as libc::off64_t,
                    libc::SYNC_FILE_RANGE_WRITE,
                );
                wait == 0 && kick == 0
            };
            if !ok {
                self.overlap = false;
            }
            self.previous = start;
            self.kicked = end;
        }
    }
}

impl std::ops::Deref for SyncingFile {
    type Target = File;
    fn deref(&self) -> &File {
        &self.file
    }
}

impl Write for SyncingFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // At most a step at a time when overlapping, so that one large tensor's bytes
        // are sent to disk (and, past the budget, dropped) as they are written.
        let cap = if self.overlap {
            WRITEBACK_STEP as usize
        } else {
            usize::MAX
        };
        let n = self.file.write(&buf[..buf.len().min(cap)])?;
        self.pos = self.pos.saturating_add(n as u64);
        self.after_write();
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Seek for SyncingFile {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        self.pos = self.file.seek(to)?;
        Ok(self.pos)
    }
}

/// Writes a file atomically and durably through `fill`, which gets a buffered
/// `Write + Seek`.
pub fn write_atomic<T>(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<SyncingFile>) -> Result<T>,
) -> Result<T> {
    write_atomic_with(path, Durability::Fsync, fill)
}

/// Writes a file atomically through `fill`, fsynced or not as `durability` says.
pub fn write_atomic_with<T>(
    path: &Path,
    durability: Durability,
    fill: impl FnOnce(&mut BufWriter<SyncingFile>) -> Result<T>,
) -> Result<T> {
    write_atomic_group(path, durability, |w| Ok((fill(w)?, Vec::new())))
}

/// A test hook (see `AT_STEP`).
#[cfg(test)]
type StepHook = Box<dyn FnMut(&'static str)>;

#[cfg(test)]
thread_local! {
    /// Tests only: called at each step of [`write_atomic_group`]'s commit, to look at
    /// the files as a crash at that point would leave them.
    static AT_STEP: std::cell::RefCell<Option<StepHook>> = std::cell::RefCell::new(None);
}

#[cfg(test)]
fn at_step(step: &'static str) {
    AT_STEP.with(|h| {
        if let Some(f) = h.borrow_mut().as_mut() {
            f(step)
        }
    })
}

#[cfg(not(test))]
fn at_step(_: &'static str) {}

/// A small sibling that must appear together with the main file of an atomic write
/// (WTXT's `.wsum`): its target path and its whole content. See [`write_atomic_group`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideFile {
    /// Where it goes.
    pub path: PathBuf,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// A temporary sibling of `path`, `.{name}.{writer tag}.{random}.tmp`, registered for
/// removal by [`remove_temporaries`], with the mode `path` has (or the umask's for a
/// new file).
fn temporary_for(path: &Path) -> Result<(File, tempfile::TempPath, Live, PathBuf)> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    // Temporaries of this target left by writers that have ended (SIGKILL, a crash):
    // removed now, as their writer could not.
    let prefix = format!(".{name}.");
    sweep_stale(&dir, &prefix, ".tmp", false);
    let tmp = tempfile::Builder::new()
        .prefix(&format!("{prefix}{}.", writer_tag()))
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(|e| create_error(e, &dir))?;
    let (file, tmp_path) = tmp.into_parts();
    let live = Live::register(&tmp_path);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // The replaced file's mode, or the umask's for a new file (tempfile made 0600).
        let mode = std::fs::metadata(path)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or_else(umask_mode);
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    Ok((file, tmp_path, live, dir))
}

/// [`write_atomic_with`] for a main file and the side files `fill` returns with its
/// value, committed so that a side file appears with its main file or not at all.
///
/// Every temporary is written (and fsynced when durable) first. Then, in this order:
/// 1. each side file's old target is removed (and the directory fsynced when durable);
/// 2. the main file is renamed into place;
/// 3. each side file is renamed into place; the directory is fsynced when durable.
///
/// A crash (or an error) between any two steps leaves the old pair (before 1), the
/// old main file alone (1–2), the new main file alone (2–3), or the new pair: never a
/// main file beside a side file of another write. A main file without its side file
/// is reported as such by its reader (a WTXT-S without `.wsum` is "unfinalized"),
/// where a stale side file would fail its checks as damage. Nothing can make two
/// renames one step, so a missing side file is the state a crash may leave.
pub fn write_atomic_group<T>(
    path: &Path,
    durability: Durability,
    fill: impl FnOnce(&mut BufWriter<SyncingFile>) -> Result<(T, Vec<SideFile>)>,
) -> Result<T> {
    let durable = durability == Durability::Fsync;
    let (file, tmp_path, live, dir) = temporary_for(path)?;
    let mut w = BufWriter::with_capacity(1 << 20, SyncingFile::new(file, durability));
    let (value, sides) = fill(&mut w)?; // on error, tmp_path's Drop removes the file
    w.flush()?;
    let file = w
        .into_inner()
        .map_err(|e| Error::from(e.into_error()))?
        .file;
    if durable {
        file.sync_all()?;
    }
    drop(file);
    let mut staged = Vec::with_capacity(sides.len());
    for side in &sides {
        let (mut f, tp, l, d) = temporary_for(&side.path)?;
        f.write_all(&side.bytes)
            .map_err(|e| Error::from(e).at_subject(side.path.display().to_string()))?;
        if durable {
            f.sync_all()?;
        }
        staged.push((tp, l, d, &side.path));
    }
    at_step("staged");
    let mut removed = Vec::new();
    for (_, _, d, target) in &staged {
        match std::fs::remove_file(target) {
            Ok(()) => removed.push(d.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::from(e).at_subject(target.display().to_string())),
        }
    }
    if durable {
        for d in &removed {
            sync_dir(d);
        }
    }
    at_step("old side files removed");
    // No directory fsync before the rename: the file's data and inode are on disk, and
    // the one after the rename makes the new name durable (a crash before it leaves
    // the old name or the new one, each naming a complete file).
    replace(tmp_path, path)?;
    drop(live);
    at_step("main renamed");
    let mut dirs = vec![dir];
    for (tp, l, d, target) in staged {
        tp.persist(target)
            .map_err(|e| Error::from(e.error).at_subject(target.display().to_string()))?;
        drop(l);
        at_step("side renamed");
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    if durable {
        for d in &dirs {
            sync_dir(d);
        }
    }
    Ok(value)
}

/// Renames the finished temporary `tmp` to `path` in one step.
///
/// When `path` is an existing regular file (Linux), the two are swapped with
/// `renameat2(RENAME_EXCHANGE)` and the old file, now under the temporary's name, is
/// removed. A plain `rename(2)` over an existing file is the same single step for a
/// reader, but ext4 (`auto_da_alloc`, its default) treats it as "replace without
/// fsync" and writes the whole new file out inside the rename: about 0.8 s for 1 GiB
/// on the benchmark machine, which made `durable=False` saves over an old file as slow
/// as durable ones (`docs/benchmarks.md`). A crash between the swap and the removal
/// leaves the old file under the temporary's hidden name, as a crash during the write
/// leaves the temporary; the target holds the old or the new file at every moment.
/// The old file's name goes before this returns; its space is freed on a thread of its
/// own ([`rename_over`]).
/// Where the swap is not available (another OS, a filesystem without it, a new target,
/// a target that is not a regular file), a plain rename.
fn replace(tmp: tempfile::TempPath, path: &Path) -> Result<()> {
    rename_over(&tmp, path).map_err(|e| Error::from(e).at_subject(path.display().to_string()))?;
    // Renamed (or, after a swap, removed): nothing is left to delete under its name.
    let _ = tmp.keep();
    Ok(())
}

/// `rename(from, to)` in one step, swapping with an existing regular file at `to` and
/// removing it rather than renaming over it (Linux; see [`replace`]): for the writers
/// that stage whole directories (model sets) as for single files. On an error `from`
/// is still there, for the caller to remove.
pub(crate) fn rename_over(from: &Path, to: &Path) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    if std::fs::symlink_metadata(to).is_ok_and(|m| m.file_type().is_file()) && exchange(from, to) {
        // `from` names the old file now. A directory swapped in under us (between the
        // check above and the swap) goes back, and the plain rename below reports it.
        if !std::fs::symlink_metadata(from).is_ok_and(|m| m.is_dir()) {
            // Freeing a large file's cached pages and blocks is the slow part (0.3 s
            // per GiB here), and it happens when the last reference goes: a descriptor
            // opened first and closed on another thread takes it off the caller's
            // time. The name is gone before this returns; if the process ends first,
            // the kernel frees the file as it closes the descriptor.
            // The new file is in place whatever happens next: a failed removal leaves
            // the old one under the hidden name, as a crash here would.
            let old = File::open(from).ok();
            let _ = std::fs::remove_file(from);
            if let Some(old) = old {
                let _ = std::thread::Builder::new()
                    .name("tessera-free-old".into())
                    .spawn(move || drop(old));
            }
            return Ok(());
        }
        if !exchange(from, to) {
            return Err(std::io::Error::other(format!(
                "{} became a directory during the write (now at {})",
                to.display(),
                from.display()
            )));
        }
    }
    std::fs::rename(from, to)
}

/// Swaps the directory entries `a` and `b` (`renameat2(RENAME_EXCHANGE)`); false when
/// the system cannot (then nothing changed).
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let (Ok(a), Ok(b)) = (
        std::ffi::CString::new(a.as_os_str().as_bytes()),
        std::ffi::CString::new(b.as_os_str().as_bytes()),
    ) else {
        return false;
    };
    #[allow(unsafe_code)]
    // SAFETY: both paths are NUL-terminated strings that live across the call;
    // renameat2 only reads them.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    r == 0
}

/// Writes `bytes` to `path` atomically.
pub fn write_bytes_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic(path, |w| Ok(w.write_all(bytes)?))
}

/// Fsyncs a directory (a rename in it becomes durable); see [`write_atomic`].
pub(crate) fn sync_dir(dir: &Path) {
    // Directory fsync makes the rename durable; not every platform or filesystem allows
    // opening a directory, and the rename has happened either way.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_write_keeps_the_old_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.bin");
        std::fs::write(&p, b"old").unwrap();
        let r: Result<()> = write_atomic(&p, |w| {
            w.write_all(b"partial")?;
            Err(Error::invalid_input("boom"))
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        write_bytes_atomic(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
    }

    #[test]
    fn replacing_a_file_swaps_in_a_new_inode_and_removes_the_old() {
        for durability in [Durability::Fsync, Durability::NoFsync] {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("t.bin");
            std::fs::write(&p, b"old").unwrap();
            // A reader that has the old file open, and a hard link to it elsewhere,
            // keep the old bytes: the new file is a new inode, never a write in place.
            let mut reader = File::open(&p).unwrap();
            let other = tempfile::tempdir().unwrap();
            let link = other.path().join("link.bin");
            std::fs::hard_link(&p, &link).unwrap();
            write_atomic_with(&p, durability, |w| Ok(w.write_all(b"new")?)).unwrap();
            assert_eq!(std::fs::read(&p).unwrap(), b"new");
            let mut old = Vec::new();
            std::io::Read::read_to_end(&mut reader, &mut old).unwrap();
            assert_eq!(old, b"old");
            assert_eq!(std::fs::read(&link).unwrap(), b"old");
            // Nothing else is left in the folder: the old file under the temporary's
            // name was removed.
            let names: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(names, vec![std::ffi::OsString::from("t.bin")]);
            #[cfg(unix)]
            {
                use std::os::unix::fs::MetadataExt;
                assert_eq!(std::fs::metadata(&link).unwrap().nlink(), 1);
            }
        }
    }

    #[test]
    fn a_directory_or_a_symlink_at_the_target_is_treated_as_rename_treats_it() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("d");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("inside"), b"kept").unwrap();
        assert!(write_bytes_atomic(&d, b"new").is_err());
        assert_eq!(std::fs::read(d.join("inside")).unwrap(), b"kept");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        #[cfg(unix)]
        {
            // A symlink is replaced by the file; what it pointed to is left alone.
            let target = dir.path().join("target.bin");
            std::fs::write(&target, b"old").unwrap();
            let l = dir.path().join("l.bin");
            std::os::unix::fs::symlink(&target, &l).unwrap();
            write_bytes_atomic(&l, b"new").unwrap();
            assert!(std::fs::symlink_metadata(&l).unwrap().is_file());
            assert_eq!(std::fs::read(&l).unwrap(), b"new");
            assert_eq!(std::fs::read(&target).unwrap(), b"old");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
        }
    }

    #[test]
    fn without_fsync_writes_are_still_atomic() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.bin");
        std::fs::write(&p, b"old").unwrap();
        let r: Result<()> = write_atomic_with(&p, Durability::NoFsync, |w| {
            w.write_all(&[7u8; 3 << 20])?;
            Err(Error::invalid_input("boom"))
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        write_atomic_with(&p, Durability::NoFsync, |w| Ok(w.write_all(b"new")?)).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    /// Writes past several write-back steps, in small and in large writes, with a header
    /// patched at the end (a seek back): the file holds exactly what was written, with
    /// and without the overlapped write-back.
    #[test]
    fn overlapped_write_back_keeps_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let step = WRITEBACK_STEP as usize;
        let big: Vec<u8> = (0..2 * step + 12_345)
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        for durability in [Durability::Fsync, Durability::NoFsync] {
            let p = dir.path().join(format!("{durability:?}.bin"));
            write_atomic_with(&p, durability, |w| {
                w.write_all(&[0u8; 8])?;
                for piece in big.chunks(100_003) {
                    w.write_all(piece)?;
                }
                w.write_all(&big)?;
                w.seek(SeekFrom::Start(0))?;
                w.write_all(b"HEADER!!")?;
                w.seek(SeekFrom::End(0))?;
                w.write_all(b"tail")?;
                Ok(())
            })
            .unwrap();
            let got = std::fs::read(&p).unwrap();
            assert_eq!(got.len(), 8 + 2 * big.len() + 4, "{durability:?}");
            assert_eq!(&got[..8], b"HEADER!!");
            assert!(got[8..8 + big.len()] == big[..], "{durability:?}");
            assert!(got[8 + big.len()..8 + 2 * big.len()] == big[..]);
            assert_eq!(&got[got.len() - 4..], b"tail");
        }
    }

    /// Past the cache budget, ranges already on disk leave the page cache; the bytes
    /// are all there. (Checked with mincore(2) where the filesystem can drop pages:
    /// tmpfs keeps them, so there only the bytes are checked.)
    #[cfg(target_os = "linux")]
    #[test]
    fn a_durable_write_past_the_cache_budget_drops_what_is_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let step = WRITEBACK_STEP as usize;
        let data: Vec<u8> = (0..6 * step).map(|i| (i * 7 % 253) as u8).collect();
        // Pages of steps 2 to 4 in the page cache right after a durable write (the
        // first step is within the test's budget; the last ones were not waited for).
        let resident = |name: &str, budget: Option<u64>| -> (usize, usize) {
            let p = dir.path().join(name);
            CACHE_BUDGET.with(|b| b.set(budget));
            write_atomic(&p, |w| Ok(w.write_all(&data)?)).unwrap();
            CACHE_BUDGET.with(|b| b.set(None));
            let f = File::open(&p).unwrap();
            #[allow(unsafe_code)]
            let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
            let len = 3 * step;
            let mut vec = vec![0u8; len.div_ceil(4096)];
            #[allow(unsafe_code)]
            // SAFETY: [step, 4 * step) lies in the map (6 steps long) and starts on a
            // page boundary; `vec` has a byte per page.
            let r = unsafe {
                libc::mincore(
                    map.as_ptr().add(step) as *mut libc::c_void,
                    len,
                    vec.as_mut_ptr(),
                )
            };
            assert_eq!(r, 0);
            let n = vec.iter().filter(|&&v| v & 1 == 1).count();
            assert!(map[..] == data[..]);
            (n, vec.len())
        };
        let (kept, pages) = resident("kept.bin", None);
        let (left, _) = resident("dropped.bin", Some(step as u64));
        // Where the filesystem keeps written pages cached at all (not tmpfs, which never
        // drops them), the machine's budget keeps them and the test's budget of one
        // step drops those already waited for.
        if kept > pages / 2 {
            assert!(left < pages / 4, "{left} of {pages} pages still cached");
        } else {
            eprintln!("this filesystem did not keep the written pages cached: not checked");
        }
    }

    /// At every step of the commit (where a crash could stop it), the main file and its
    /// side file are the old pair, the old main alone, the new main alone or the new
    /// pair: never a mix. Fsynced and not.
    #[test]
    fn side_files_appear_with_the_main_file_or_not_at_all() {
        use std::sync::{Arc, Mutex};
        for durability in [Durability::Fsync, Durability::NoFsync] {
            let dir = tempfile::tempdir().unwrap();
            let main = dir.path().join("m.wtxt");
            let side = dir.path().join("m.wtxt.wsum");
            std::fs::write(&main, b"old main").unwrap();
            std::fs::write(&side, b"old side").unwrap();
            type Seen = Vec<(&'static str, Vec<u8>, Option<Vec<u8>>)>;
            let seen: Arc<Mutex<Seen>> = Arc::default();
            let (m2, s2, seen2) = (main.clone(), side.clone(), seen.clone());
            AT_STEP.with(|h| {
                *h.borrow_mut() = Some(Box::new(move |step| {
                    let m = std::fs::read(&m2).unwrap();
                    let s = std::fs::read(&s2).ok();
                    seen2.lock().unwrap().push((step, m, s));
                }))
            });
            write_atomic_group(&main, durability, |w| {
                w.write_all(b"new main")?;
                let s = SideFile {
                    path: side.clone(),
                    bytes: b"new side".to_vec(),
                };
                Ok(((), vec![s]))
            })
            .unwrap();
            AT_STEP.with(|h| *h.borrow_mut() = None);
            let seen = seen.lock().unwrap();
            let state = |m: &[u8], s: &Option<Vec<u8>>| match (m, s.as_deref()) {
                (b"old main", Some(b"old side")) => "old pair",
                (b"old main", None) => "old main alone",
                (b"new main", None) => "new main alone",
                (b"new main", Some(b"new side")) => "new pair",
                _ => "mixed",
            };
            let states: Vec<(&str, &str)> = seen
                .iter()
                .map(|(step, m, s)| (*step, state(m, s)))
                .collect();
            assert_eq!(
                states,
                vec![
                    ("staged", "old pair"),
                    ("old side files removed", "old main alone"),
                    ("main renamed", "new main alone"),
                    ("side renamed", "new pair"),
                ],
                "{durability:?}"
            );
            // Only the two files remain (no temporaries).
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
        }
    }

    /// A side file that cannot be committed (its target is a directory) fails the
    /// write before anything is renamed: the old main file stays, no temporary is left.
    #[test]
    fn a_side_file_that_fails_leaves_the_old_files() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("m.wtxt");
        let side = dir.path().join("m.wtxt.wsum");
        std::fs::write(&main, b"old main").unwrap();
        std::fs::create_dir(&side).unwrap();
        std::fs::write(side.join("x"), b"x").unwrap();
        let r = write_atomic_group(&main, Durability::NoFsync, |w| {
            w.write_all(b"new main")?;
            let s = SideFile {
                path: side.clone(),
                bytes: b"new side".to_vec(),
            };
            Ok(((), vec![s]))
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read(&main).unwrap(), b"old main");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[cfg(unix)]
    #[test]
    fn new_files_follow_the_umask_and_replaced_files_keep_their_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("new.bin");
        write_bytes_atomic(&p, b"x").unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, umask_mode(), "new file: {mode:o}");
        assert_ne!(mode, 0o600, "a temporary file's mode leaked through");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_bytes_atomic(&p, b"y").unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
    }

    #[test]
    fn live_temporaries_are_listed_until_the_write_ends() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.bin");
        let mut seen = None;
        write_atomic(&p, |w| {
            // This thread's registration: its slot holds a path until the write ends
            // (no other write can take an occupied slot).
            let slot = LAST_SLOT
                .with(|s| s.get())
                .expect("the temporary is registered");
            let ptr = LIVE[slot].load(Ordering::Acquire);
            assert!(!ptr.is_null());
            seen = Some((slot, ptr));
            Ok(w.write_all(b"z")?)
        })
        .unwrap();
        let (slot, ptr) = seen.unwrap();
        // Released: empty, or taken since by another test's write (a new string).
        assert_ne!(LIVE[slot].load(Ordering::Acquire), ptr);
        assert!(!dir.path().read_dir().unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".tmp")));
    }

    /// The writer tag of a process that has ended (its id is free until reused, which
    /// only keeps its temporaries one more time), and of a live child with its true
    /// start time and with another.
    fn tags() -> (String, String, String, std::process::Child) {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let me = *Writer::me();
        let dead = Writer { pid: dead, ..me }.tag();
        let sleeper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = sleeper.id();
        let start = start_of(pid).unwrap_or(0);
        let live = Writer { pid, start, ..me }.tag();
        let reused = Writer {
            pid,
            start: start.wrapping_add(1),
            ..me
        }
        .tag();
        (dead, live, reused, sleeper)
    }

    #[test]
    fn staging_directories_of_ended_processes_are_swept() {
        let parent = tempfile::tempdir().unwrap();
        let (dead, live_tag, _, mut sleeper) = tags();
        let stale = parent.path().join(format!("{STAGING_PREFIX}{dead}.abc"));
        std::fs::create_dir(&stale).unwrap();
        std::fs::write(stale.join("model-00001-of-00002.safetensors"), b"x").unwrap();
        // A live process's, ours, and names that only look alike.
        let live = parent
            .path()
            .join(format!("{STAGING_PREFIX}{live_tag}.keep"));
        std::fs::create_dir(&live).unwrap();
        let mine = parent
            .path()
            .join(format!("{STAGING_PREFIX}{}.mine", writer_tag()));
        std::fs::create_dir(&mine).unwrap();
        let other = parent.path().join(".tessera-staging.notapid.x");
        std::fs::create_dir(&other).unwrap();
        let file = parent.path().join(format!("{STAGING_PREFIX}{dead}.file"));
        std::fs::write(&file, b"a file, not a staging directory").unwrap();

        let made = staging_dir(parent.path()).unwrap();
        assert!(
            !stale.exists(),
            "the ended process's staging directory is removed"
        );
        assert!(live.exists() && mine.exists() && other.exists() && file.exists());
        let name = made
            .path()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            name.starts_with(&format!("{STAGING_PREFIX}{}.", writer_tag())),
            "{name}"
        );
        let kept = made.path().to_path_buf();
        drop(made);
        assert!(!kept.exists(), "removed when dropped");
        let _ = sleeper.kill();
        let _ = sleeper.wait();
    }

    /// A write removes the temporaries of its own target whose writer has ended (a
    /// SIGKILL leaves them), and keeps those of a live writer (this process, another
    /// one), of another host, of another target, and names it did not make.
    #[test]
    fn a_write_removes_stale_temporaries_of_its_target_only() {
        let dir = tempfile::tempdir().unwrap();
        let (dead, live, reused, mut sleeper) = tags();
        let me = *Writer::me();
        let foreign = Writer {
            host: me.host ^ 1,
            pid: 1 << 30,
            ..me
        }
        .tag();
        let earlier_boot = Writer {
            boot: me.boot ^ 1,
            pid: std::process::id(),
            ..me
        }
        .tag();
        let name = |tag: &str, target: &str| format!(".{target}.{tag}.AbC123.tmp");
        let stale = [name(&dead, "t.bin"), name(&reused, "t.bin")];
        let mut kept = vec![
            name(&live, "t.bin"),
            name(&writer_tag(), "t.bin"),
            name(&foreign, "t.bin"),
            name(&dead, "other.bin"),
            ".t.bin.AbC123.tmp".to_string(),
            format!(".t.bin.{dead}.tmp"),
        ];
        if me.boot != 0 {
            // Written before the machine last started: gone, whatever runs under its id.
            std::fs::write(dir.path().join(name(&earlier_boot, "t.bin")), b"x").unwrap();
        } else {
            kept.push(name(&earlier_boot, "t.bin"));
        }
        for n in stale.iter().chain(&kept) {
            std::fs::write(dir.path().join(n), b"x").unwrap();
        }
        write_bytes_atomic(&dir.path().join("t.bin"), b"new").unwrap();
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        kept.push("t.bin".into());
        kept.sort();
        assert_eq!(left, kept);
        let _ = sleeper.kill();
        let _ = sleeper.wait();
    }

    #[test]
    fn writer_tags_parse_back() {
        let me = *Writer::me();
        assert_eq!(Writer::parse(&me.tag()), Some(me));
        assert!(!me.gone());
        for bad in [
            "",
            "1-2-3-4",
            "0000000g-00000000-1-2",
            "00000000-00000000-1-2-3",
        ] {
            assert_eq!(Writer::parse(bad), None, "{bad}");
        }
    }

    /// The signal-safe removal takes a directory with files and a subdirectory.
    #[cfg(target_os = "linux")]
    #[test]
    fn remove_tree_removes_a_directory_with_its_content() {
        let parent = tempfile::tempdir().unwrap();
        let top = parent.path().join(".m.set.x");
        std::fs::create_dir_all(top.join("inner/deeper")).unwrap();
        for i in 0..300 {
            std::fs::write(
                top.join(format!("shard-{i:05}-with-a-longer-name.bin")),
                b"x",
            )
            .unwrap();
        }
        std::fs::write(top.join("inner/a"), b"a").unwrap();
        std::fs::write(top.join("inner/deeper/b"), b"b").unwrap();
        let beside = parent.path().join("beside.bin");
        std::fs::write(&beside, b"kept").unwrap();
        let c = std::ffi::CString::new(top.to_str().unwrap()).unwrap();
        #[allow(unsafe_code)]
        // SAFETY: a NUL-terminated path.
        unsafe {
            remove_tree(c.as_ptr());
        }
        assert!(!top.exists());
        assert_eq!(std::fs::read(&beside).unwrap(), b"kept");
    }
}
