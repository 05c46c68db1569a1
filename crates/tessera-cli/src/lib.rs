//! The `tessera` command line: one module per verb under `cmd/`, each with a
//! `run(args, out)` that tests call in-process.
//!
//! Exit codes: 0 ok, 1 integrity failure, 2 usage (bad arguments, missing file or
//! tensor), 3 unknown or unsupported format, 4 malformed file.

pub mod cli;
pub mod cmd;
pub mod output;
pub mod term;

use std::io::Write;

pub use cli::{Cli, Command};
use tessera::ErrorKind;

/// Runs a parsed command line, writing its report to `out`. Returns the exit code.
pub fn run(cli: Cli, out: &mut dyn Write) -> anyhow::Result<u8> {
    match cli.command {
        Command::Inspect(a) => cmd::inspect::run(&a, out),
        Command::Verify(a) => cmd::verify::run(&a, out),
        Command::Convert(a) => cmd::convert::run(&a, out),
        Command::Extract(a) => cmd::extract::run(&a, out),
        Command::Diff(a) => cmd::diff::run(&a, out),
        Command::Formats(a) => cmd::formats::run(&a, out),
        Command::Tour(a) => cmd::tour::run(&a, out),
        Command::Keygen(a) => cmd::keys::run_keygen(&a, out),
        Command::Repair(a) => cmd::repair::run(&a, out),
        Command::Wtxt(a) => cmd::wtxt::run(&a, out),
    }
}

/// The exit code for an error: the kind of the first `tessera::Error` in its chain.
pub fn exit_code_for(e: &anyhow::Error) -> u8 {
    for cause in e.chain() {
        if let Some(te) = cause.downcast_ref::<tessera::Error>() {
            return match te.kind() {
                ErrorKind::Integrity => 1,
                ErrorKind::InvalidInput | ErrorKind::NotFound | ErrorKind::Io => 2,
                ErrorKind::UnknownFormat
                | ErrorKind::UnsupportedVersion
                | ErrorKind::Unsupported => 3,
                ErrorKind::Malformed | ErrorKind::LimitExceeded => 4,
            };
        }
    }
    2
}
