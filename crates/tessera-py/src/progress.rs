//! Progress reported to a Python callable, `progress(done_bytes, total_bytes)`: what
//! `progress=True` (a bar, `tessera/_progress.py`) or the caller's own callable gets.
//!
//! The work runs with the GIL released, on several threads where the library works in
//! parallel (verify), so each call takes the lock on the count first and then the GIL:
//! the calls are made one at a time, and `done` never goes back. (The other order
//! could deadlock: one thread holding the GIL waiting for the count, another holding
//! the count waiting for the GIL.) An exception the callable raises is kept for the
//! caller to raise, and the callable is not called again.

use std::sync::Mutex;

use pyo3::prelude::*;

/// A Python progress callable and the count so far.
pub(crate) struct PyProgress {
    callable: Py<PyAny>,
    total: u64,
    done: Mutex<u64>,
    raised: Mutex<Option<PyErr>>,
}

impl PyProgress {
    /// Reports to `callable` against `total` bytes.
    pub(crate) fn new(callable: Py<PyAny>, total: u64) -> PyProgress {
        PyProgress {
            callable,
            total,
            done: Mutex::new(0),
            raised: Mutex::new(None),
        }
    }

    /// Adds `n` bytes done and calls the callable with `(done, total)` (`total` grows
    /// to `done` should the work read more than it announced). False when the callable
    /// raised, now or before: the exception is kept for [`PyProgress::take_raised`].
    pub(crate) fn advance(&self, n: u64) -> bool {
        let Ok(mut done) = self.done.lock() else {
            return false;
        };
        if self.raised.lock().map_or(true, |r| r.is_some()) {
            return false;
        }
        *done = done.saturating_add(n);
        let (d, total) = (*done, self.total.max(*done));
        match Python::attach(|py| self.callable.call1(py, (d, total)).map(|_| ())) {
            Ok(()) => true,
            Err(e) => {
                if let Ok(mut r) = self.raised.lock() {
                    *r = Some(e);
                }
                false
            }
        }
    }

    /// The exception the callable raised, if it did.
    pub(crate) fn take_raised(&self) -> Option<PyErr> {
        self.raised.lock().ok().and_then(|mut r| r.take())
    }
}
