//! `tessera repair IN -o OUT`: FOLD Reed-Solomon repair (not implemented yet).

use std::io::Write;

use crate::cli::RepairArgs;

/// Runs the verb.
pub fn run(_args: &RepairArgs, _out: &mut dyn Write) -> anyhow::Result<u8> {
    Err(tessera::Error::unsupported("repair: FOLD is not supported yet").into())
}
