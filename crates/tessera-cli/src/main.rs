//! The `tessera` binary: parse arguments, run the verb, map errors to exit codes.
//!
//! Signals: SIGINT and SIGTERM remove every temporary file and directory a write in
//! progress has (the target is untouched: it is replaced only by the final rename; a
//! set's shards wait in a hidden directory until all are written) and exit with the
//! conventional 130 / 143. During an upload to object storage the signal is passed on
//! instead (`tessera::util::interrupt`): the upload stops, aborts its multipart upload,
//! deletes the objects the run had completed and removes its staging directory, says
//! so, and the process exits 130 / 143; a second signal exits at once. SIGBUS, which a memory-mapped input raises when another
//! process truncates it while it is read, does the same and exits 2 with a message that
//! says so, instead of a bare "Bus error".

use std::process::ExitCode;

use clap::Parser;

#[cfg(unix)]
#[allow(unsafe_code)]
mod signals {
    use libc::c_int;

    extern "C" fn on_signal(sig: c_int) {
        // Async-signal-safe only: atomic operations, unlink(2) and the calls that remove
        // a directory (getdents64, unlinkat), write(2), _exit(2).
        if sig != libc::SIGBUS && tessera::util::interrupt::defer(sig) {
            let msg: &[u8] = b"\ntessera: stopping the upload and deleting what this run uploaded \
(signal again to stop at once)\n";
            // SAFETY: write(2) is async-signal-safe; the slice is static.
            unsafe {
                libc::write(2, msg.as_ptr().cast(), msg.len());
            }
            return;
        }
        let removed = tessera::util::atomic::remove_temporaries() > 0;
        let (msg, code): (&[u8], c_int) = match sig {
            libc::SIGINT => (b"\ntessera: interrupted", 130),
            libc::SIGTERM => (b"\ntessera: terminated", 143),
            _ => (
                b"\ntessera: an input file shrank or became unreadable while it was being read \
(truncated by another process?); stopped",
                2,
            ),
        };
        let tail: &[u8] = if removed {
            b"; the output in progress was removed\n"
        } else {
            b"\n"
        };
        // SAFETY: write(2) and _exit(2) are async-signal-safe; the slices are static.
        unsafe {
            libc::write(2, msg.as_ptr().cast(), msg.len());
            libc::write(2, tail.as_ptr().cast(), tail.len());
            libc::_exit(code);
        }
    }

    /// Installs the handler for SIGINT, SIGTERM and SIGBUS.
    pub fn install() {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGBUS] {
            // SAFETY: a zeroed sigaction with a valid handler address and an empty mask is
            // a valid argument; the handler only makes async-signal-safe calls.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
                libc::sigemptyset(&mut sa.sa_mask);
                // A signal passed on to an upload returns: system calls it interrupted
                // resume rather than fail.
                sa.sa_flags = libc::SA_RESTART;
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    }
}

fn main() -> ExitCode {
    #[cfg(unix)]
    signals::install();
    let cli = tessera_cli::Cli::parse();
    // Everything printed passes through the escaper: text from a file never reaches
    // the terminal raw (see `term`).
    let mut stdout = tessera_cli::term::SafeWriter::new(std::io::stdout().lock());
    let result = tessera_cli::run(cli, &mut stdout);
    drop(stdout);
    // A signal passed on to an upload (which stopped, cleaned up and says what it
    // removed in its error): the conventional exit code.
    let interrupted = tessera::util::interrupt::requested().map(|s| (128 + s.clamp(0, 127)) as u8);
    if let (Some(code), Ok(_)) = (interrupted, &result) {
        tessera_cli::term::warn("tessera: interrupted after the output was complete");
        return ExitCode::from(code);
    }
    match result {
        Ok(code) => ExitCode::from(code),
        // `tessera inspect big.gguf | head`: the reader closed the pipe; not an error.
        Err(e) if tessera_cli::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // A refusal lists one reason per line (the library's "\n  " separator);
            // each line is escaped on its own.
            let msg = format!("tessera: {}", tessera_cli::render_error(&e));
            for line in msg.split("\n  ") {
                let indent = if line.starts_with("tessera: ") {
                    ""
                } else {
                    "  "
                };
                tessera_cli::term::warn(&format!("{indent}{line}"));
            }
            ExitCode::from(interrupted.unwrap_or_else(|| tessera_cli::exit_code_for(&e)))
        }
    }
}
