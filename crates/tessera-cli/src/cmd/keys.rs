//! `tessera keygen` and key loading for the verbs that sign or check signatures.

use std::io::Write;
use std::path::Path;

use tessera::signing::key::{PublicKey, SecretKey};

use crate::cli::KeygenArgs;

/// Reads an Ed25519 secret key file.
pub fn load_secret_key(path: &Path) -> anyhow::Result<[u8; 32]> {
    Ok(tessera::signing::ed25519::load_secret_key(path)?)
}

/// Reads a secret key file of either algorithm (a public key file is refused).
pub fn load_any_secret_key(path: &Path) -> anyhow::Result<SecretKey> {
    Ok(SecretKey::load(path)?)
}

/// Reads a public key file of either algorithm (a secret key file is refused).
pub fn load_any_public_key(path: &Path) -> anyhow::Result<PublicKey> {
    Ok(PublicKey::load(path)?)
}

/// Runs `tessera keygen -o KEY [--algorithm ALG]`.
pub fn run_keygen(args: &KeygenArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    if !args.force {
        let public = tessera::signing::ed25519::public_path(&args.output);
        for p in [&args.output, &public] {
            if std::fs::symlink_metadata(p).is_ok() {
                return Err(anyhow::Error::new(tessera::Error::invalid_input(format!(
                    "{} exists: a key is never overwritten without --force",
                    p.display()
                ))));
            }
        }
    }
    let key = SecretKey::generate(&args.algorithm)?;
    let public = tessera::signing::key::write_key_pair(&args.output, &key)?;
    writeln!(
        out,
        "secret key: {}\npublic key: {}.pub ({} keyid {})",
        args.output.display(),
        args.output.display(),
        public.algorithm(),
        public.keyid()
    )?;
    Ok(0)
}
