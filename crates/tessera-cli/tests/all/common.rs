//! Helpers the CLI tests share.
#![allow(dead_code)]

use std::process::{Command, Output};

/// The `tessera` binary this crate builds.
pub fn tessera() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
}

/// Runs `tessera` with `args`.
pub fn run(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut c = tessera();
    for a in args {
        c.arg(a);
    }
    c.output().unwrap()
}

/// What a run printed: its stdout, then its stderr.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
