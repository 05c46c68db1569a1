//! A Ctrl-C (SIGINT, SIGTERM) that a long remote operation answers itself.
//!
//! A signal handler can remove local temporaries ([`super::atomic::remove_temporaries`])
//! but cannot make network requests. An upload to object storage, interrupted, must
//! abort its multipart upload (whose parts cost money until aborted) and delete the
//! objects the run already completed; only the uploading thread can. So while such an
//! operation runs ([`handling`]), a handler passes the signal on with [`defer`] and
//! returns; the operation sees [`requested`], stops, cleans up and returns an error
//! that says what it removed. A second signal is not deferred (the handler then exits
//! at once: the user asked twice).

use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

/// Operations running that answer an interrupt themselves.
static HANDLING: AtomicUsize = AtomicUsize::new(0);
/// The signal passed on (0: none).
static REQUESTED: AtomicI32 = AtomicI32::new(0);

/// For a signal handler (async-signal-safe: atomic operations only): passes signal
/// `sig` on to the operation that answers it and returns true, when one runs and no
/// signal was passed on before; else false, and the handler does what it does without
/// one (remove the temporaries and exit).
pub fn defer(sig: i32) -> bool {
    HANDLING.load(Ordering::Acquire) > 0
        && REQUESTED
            .compare_exchange(0, sig, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
}

/// The signal passed on by [`defer`], if any.
pub fn requested() -> Option<i32> {
    match REQUESTED.load(Ordering::Acquire) {
        0 => None,
        s => Some(s),
    }
}

/// While this lives, [`defer`] passes signals on.
#[cfg_attr(not(feature = "remote"), allow(dead_code))]
pub(crate) struct Handling(());

impl Drop for Handling {
    fn drop(&mut self) {
        HANDLING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Marks an operation that answers an interrupt itself, until the value is dropped.
#[cfg_attr(not(feature = "remote"), allow(dead_code))]
pub(crate) fn handling() -> Handling {
    HANDLING.fetch_add(1, Ordering::AcqRel);
    Handling(())
}

/// The error of an operation stopped by a signal passed on; `done` says what it undid.
#[cfg_attr(not(feature = "remote"), allow(dead_code))]
pub(crate) fn error(done: &str) -> crate::Error {
    let what = match requested() {
        Some(s) if s == libc::SIGTERM => "terminated",
        _ => "interrupted",
    };
    crate::Error::new(crate::ErrorKind::Io, format!("{what}: {done}"))
}
