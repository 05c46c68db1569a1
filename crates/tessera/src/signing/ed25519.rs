//! Ed25519 key files, as `tessera keygen` writes them: PEM, typed (see
//! [`crate::signing::key`], which reads them, the old untyped 64-hex-digit form too),
//! and the Ed25519 helpers the WTXT signatures and `tessera keygen` use.

use std::path::Path;

use ed25519_dalek::SigningKey;

use crate::error::{Error, Result};
use crate::signing::key::{PublicKey, SecretKey};

/// Reads an Ed25519 secret key file (a public key file, or a key of another
/// algorithm, is refused).
pub fn load_secret_key(path: &Path) -> Result<[u8; 32]> {
    match SecretKey::load(path)? {
        SecretKey::Ed25519(seed) => Ok(seed),
        other => Err(Error::invalid_input(format!(
            "{}: an {} key; this signature is Ed25519",
            path.display(),
            other.algorithm()
        ))),
    }
}

/// Reads an Ed25519 public key file and checks it is a valid curve point (a secret key
/// file, or a key of another algorithm, is refused).
pub fn load_public_key(path: &Path) -> Result<[u8; 32]> {
    match PublicKey::load(path)? {
        PublicKey::Ed25519(k) => Ok(k),
        other => Err(Error::invalid_input(format!(
            "{}: an {} key; this signature is Ed25519",
            path.display(),
            other.algorithm()
        ))),
    }
}

/// The public key of a seed.
pub fn public_key(seed: &[u8; 32]) -> [u8; 32] {
    SigningKey::from_bytes(seed).verifying_key().to_bytes()
}

/// A fresh random seed from the operating system.
pub fn generate_seed() -> [u8; 32] {
    let mut csprng = rand::rngs::OsRng;
    SigningKey::generate(&mut csprng).to_bytes()
}

/// Where the public key of the secret key at `path` goes: `path.pub`.
pub fn public_path(path: &Path) -> std::path::PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".pub");
    std::path::PathBuf::from(p)
}

/// Writes a fresh Ed25519 pair: `path` (secret, mode 0600 on Unix) and `path.pub`
/// (public, 0644); returns the public key. Existing files are replaced (the CLI refuses
/// that without `--force`).
pub fn write_key_pair(path: &Path) -> Result<[u8; 32]> {
    let seed = generate_seed();
    crate::signing::key::write_key_pair(path, &SecretKey::Ed25519(seed))?;
    Ok(public_key(&seed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_pair_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        let public = write_key_pair(&p).unwrap();
        let seed = load_secret_key(&p).unwrap();
        assert_eq!(public_key(&seed), public);
        assert_eq!(load_public_key(&dir.path().join("k.pub")).unwrap(), public);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&p), 0o600);
            assert_eq!(mode(&public_path(&p)), 0o644);
            // Replacing a pair whose files had looser / tighter modes still gives these.
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
            write_key_pair(&p).unwrap();
            assert_eq!(mode(&p), 0o600);
        }
        std::fs::write(&p, "nothex").unwrap();
        assert!(load_secret_key(&p).is_err());
    }
}
