//! Crash-safe file replacement.
//!
//! [`write_atomic`] writes into a temporary file in the target's directory, flushes and
//! fsyncs it and the directory, renames it over the target and fsyncs the directory
//! again. A crash or an error at
//! any point leaves either the complete old file or the complete new one under the
//! target name, never a mix; on error the temporary file is removed.
//!
//! Permissions: a new file gets what the user's umask gives (`0666 & !umask`, 0644
//! usually), as `open(2)` would, not the 0600 of a temporary file; a replaced file
//! keeps its mode.
//!
//! Interruption: every live temporary is listed in a lock-free table that
//! [`remove_temporaries`] empties with nothing but atomic loads and `unlink(2)`, so a
//! signal handler (the CLI's, for SIGINT, SIGTERM and SIGBUS) can remove them before
//! the process exits.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::error::{Error, Result};

/// Live temporary files, as NUL-terminated paths owned by the table (`CString::into_raw`).
/// Slots beyond the first free one are simply not used: 64 concurrent writes per process
/// is far beyond what Tessera does; a write that finds no slot still works, it just
/// cannot be cleaned up by a signal handler.
static LIVE: [AtomicPtr<std::ffi::c_char>; 64] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; 64];

/// A registration in [`LIVE`], removed on drop.
struct Live(Option<usize>);

#[cfg(test)]
thread_local! {
    /// The slot the calling thread registered last (tests only: other tests write
    /// concurrently, so counting slots says nothing about one's own).
    static LAST_SLOT: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

impl Live {
    fn register(path: &Path) -> Live {
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
                return Live(None);
            };
            let raw = c.into_raw();
            for (i, slot) in LIVE.iter().enumerate() {
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
                    return Live(Some(i));
                }
            }
            // No free slot: take the string back.
            #[allow(unsafe_code)]
            // SAFETY: `raw` came from `CString::into_raw` just above and was not shared.
            drop(unsafe { std::ffi::CString::from_raw(raw) });
        }
        #[cfg(not(unix))]
        let _ = path;
        Live(None)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            let raw = LIVE[i].swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !raw.is_null() {
                #[allow(unsafe_code)]
                // SAFETY: only `register` stores pointers, from `CString::into_raw`, and
                // the swap gave this one to us alone.
                drop(unsafe { std::ffi::CString::from_raw(raw) });
            }
        }
    }
}

/// Removes every temporary file a write in progress has open; returns how many.
/// Async-signal-safe (atomic loads and `unlink(2)` only): for signal handlers that are
/// about to end the process. The slots are left as they are (the process is ending).
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
    n
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

/// Writes a file atomically through `fill`, which gets a buffered `Write + Seek`.
pub fn write_atomic<T>(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> Result<T>,
) -> Result<T> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(|e| {
            Error::from(e).at_subject(format!("creating a temporary file in {}", dir.display()))
        })?;
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
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let value = fill(&mut w)?; // on error, tmp_path's Drop removes the file
    w.flush()?;
    let file = w.into_inner().map_err(|e| Error::from(e.into_error()))?;
    file.sync_all()?;
    drop(file);
    // The temporary file's directory entry is durable before the rename, the rename
    // itself after it.
    sync_dir(&dir);
    tmp_path
        .persist(path)
        .map_err(|e| Error::from(e.error).at_subject(path.display().to_string()))?;
    drop(live);
    sync_dir(&dir);
    Ok(value)
}

/// Writes `bytes` to `path` atomically.
pub fn write_bytes_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic(path, |w| Ok(w.write_all(bytes)?))
}

fn sync_dir(dir: &Path) {
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
}
