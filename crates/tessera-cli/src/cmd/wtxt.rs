//! `tessera wtxt delta|apply|sign|encrypt|decrypt` (not implemented yet).

use std::io::Write;

use crate::cli::WtxtArgs;

/// Runs the verb.
pub fn run(_args: &WtxtArgs, _out: &mut dyn Write) -> anyhow::Result<u8> {
    Err(tessera::Error::unsupported("wtxt: WTXT is not supported yet").into())
}
