//! The `tessera` command line: one module per verb under `cmd/`, each with a
//! `run(args, out)` that tests call in-process.
//!
//! Exit codes (each means one thing; README has the table): 0 ok, 1 integrity failure
//! (for `diff`: differences), 2 usage (bad arguments, a missing input file, a directory
//! where a file is wanted, an unknown tensor), 3 unknown or unsupported format,
//! 4 malformed file (or over a reader limit), 5 I/O failure (permission denied, disk
//! full, a read or write the operating system refused), 6 `convert --salvage` lost
//! tensors (the rest written; `--accept-loss` makes it 0), 130/143 interrupted.

pub mod cli;
pub mod cmd;
pub mod flags;
pub mod output;
pub mod term;

use std::io::Write;

pub use cli::{Cli, Command};
use tessera::ErrorKind;

/// Runs a parsed command line, writing its report to `out`. Returns the exit code.
pub fn run(cli: Cli, out: &mut dyn Write) -> anyhow::Result<u8> {
    output::set_no_cache(cli.no_cache);
    match cli.command {
        Command::Inspect(a) => cmd::inspect::run(&a, out),
        Command::Verify(a) => cmd::verify::run(&a, out),
        Command::Convert(a) => cmd::convert::run(&a, out),
        Command::Extract(a) => cmd::extract::run(&a, out),
        Command::Diff(a) => cmd::diff::run(&a, out),
        Command::Stats(a) => cmd::stats::run(&a, out),
        Command::Formats(a) => cmd::formats::run(&a, out),
        Command::Tour(a) => cmd::tour::run(&a, out),
        Command::Keygen(a) => cmd::keys::run_keygen(&a, out),
        Command::Repair(a) => cmd::repair::run(&a, out),
        Command::Id(a) => cmd::id::run(&a, out),
        Command::Sign(a) => cmd::sign::run(&a, out),
        Command::Push(a) => cmd::push::run(&a, out),
        Command::Wtxt(a) => cmd::wtxt::run(&a, out),
        Command::Snapshots(a) => cmd::snapshots::run(&a, out),
    }
}

/// How the CLI spells a [`tessera::Hint`] in an error message: as its flag.
pub fn cli_hint(h: tessera::Hint) -> String {
    use tessera::Hint;
    match h {
        Hint::Cast => "use --cast".into(),
        Hint::Densify => "use --densify".into(),
        Hint::DropMetadata => "use --drop-metadata".into(),
        Hint::Dequantize => "use --dequantize f32|f16|bf16".into(),
        Hint::Salvage => "--salvage reads the rest".into(),
        Hint::AcceptLoss => "--accept-loss says the loss is expected".into(),
        Hint::NoVerify => "--no-verify skips the digests".into(),
        Hint::Passphrase => "give --passphrase-file".into(),
        Hint::Identity => "give --identity".into(),
        other => format!("option {}", other.name()),
    }
}

/// An error as the CLI prints it: each context, then the library error with its hints
/// spelled as flags ([`cli_hint`]). The library error's own `Display` ends the line
/// (it includes its source).
pub fn render_error(e: &anyhow::Error) -> String {
    let mut parts = Vec::new();
    for cause in e.chain() {
        if let Some(te) = cause.downcast_ref::<tessera::Error>() {
            parts.push(te.render(&cli_hint));
            break;
        }
        parts.push(cause.to_string());
    }
    parts.join(": ")
}

/// Exit code for an I/O failure that is not the user's usage (permission denied, disk
/// full, …).
pub const EXIT_IO: u8 = 5;

/// True for an OS error that means "the path you gave is not a file I can read": a
/// usage error (exit 2), not an I/O failure. `EFAULT` is a mapped input that another
/// process truncated while we read it (exit 2, as the SIGBUS handler does).
fn is_usage_os_error(code: Option<i32>) -> bool {
    matches!(
        code,
        Some(libc::ENOENT | libc::EISDIR | libc::ENOTDIR | libc::ENAMETOOLONG | libc::EFAULT)
    )
}

/// True when the error is a write to a closed stdout (`tessera inspect … | head`): not
/// a failure, the reader has what it wanted.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<tessera::Error>()
                .is_some_and(|te| te.os_error() == Some(libc::EPIPE))
    })
}

/// The exit code for an error: the kind of the first `tessera::Error` in its chain, or
/// else the first OS error's.
pub fn exit_code_for(e: &anyhow::Error) -> u8 {
    for cause in e.chain() {
        if let Some(te) = cause.downcast_ref::<tessera::Error>() {
            return match te.kind() {
                ErrorKind::Integrity => 1,
                ErrorKind::Io if is_usage_os_error(te.os_error()) => 2,
                ErrorKind::Io => EXIT_IO,
                ErrorKind::InvalidInput | ErrorKind::NotFound => 2,
                ErrorKind::UnknownFormat
                | ErrorKind::UnsupportedVersion
                | ErrorKind::Unsupported => 3,
                // Malformed, LimitExceeded, and any kind added later: the input's fault.
                _ => 4,
            };
        }
    }
    for cause in e.chain() {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return if is_usage_os_error(io.raw_os_error()) {
                2
            } else {
                EXIT_IO
            };
        }
    }
    2
}
