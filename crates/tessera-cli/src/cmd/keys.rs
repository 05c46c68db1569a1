//! `tessera keygen` and key loading for the verbs that sign or check signatures.

use std::io::Write;
use std::path::Path;

use crate::cli::KeygenArgs;

/// Reads an Ed25519 secret key file.
pub fn load_secret_key(path: &Path) -> anyhow::Result<[u8; 32]> {
    Ok(tessera::util::keys::load_secret_key(path)?)
}

/// Reads an Ed25519 public key file.
pub fn load_public_key(path: &Path) -> anyhow::Result<[u8; 32]> {
    Ok(tessera::util::keys::load_public_key(path)?)
}

/// Runs `tessera keygen -o KEY`.
pub fn run_keygen(args: &KeygenArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    if !args.force {
        let public = tessera::util::keys::public_path(&args.output);
        for p in [&args.output, &public] {
            if std::fs::symlink_metadata(p).is_ok() {
                return Err(anyhow::Error::new(tessera::Error::invalid_input(format!(
                    "{} exists: a key is never overwritten without --force",
                    p.display()
                ))));
            }
        }
    }
    let public = tessera::util::keys::write_key_pair(&args.output)?;
    writeln!(
        out,
        "secret key: {}\npublic key: {}.pub ({})",
        args.output.display(),
        args.output.display(),
        tessera::util::hex(&public)
    )?;
    Ok(0)
}
