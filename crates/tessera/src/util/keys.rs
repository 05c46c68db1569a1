//! Ed25519 key files, as `tessera keygen` writes them.
//!
//! A secret key file holds the 32-byte seed as 64 hex digits on one line; the public key
//! file (`KEY.pub`) holds the 32-byte public key the same way. Files holding exactly 32
//! raw bytes are accepted too.

use std::path::Path;

use ed25519_dalek::{SigningKey, VerifyingKey};

use crate::error::{Error, Result};

fn read32(path: &Path, what: &str) -> Result<[u8; 32]> {
    let bytes =
        std::fs::read(path).map_err(|e| Error::from(e).at_subject(path.display().to_string()))?;
    if bytes.len() == 32 {
        let mut k = [0u8; 32];
        k.copy_from_slice(&bytes);
        return Ok(k);
    }
    let text = String::from_utf8_lossy(&bytes);
    let hex = text.split_whitespace().last().unwrap_or("");
    let v = super::unhex(hex).filter(|v| v.len() == 32).ok_or_else(|| {
        Error::invalid_input(format!(
            "{}: not an Ed25519 {what} (64 hex digits or 32 raw bytes)",
            path.display()
        ))
    })?;
    let mut k = [0u8; 32];
    k.copy_from_slice(&v);
    Ok(k)
}

/// Reads a secret key (seed) file.
pub fn load_secret_key(path: &Path) -> Result<[u8; 32]> {
    read32(path, "secret key")
}

/// Reads a public key file and checks it is a valid curve point.
pub fn load_public_key(path: &Path) -> Result<[u8; 32]> {
    let k = read32(path, "public key")?;
    VerifyingKey::from_bytes(&k).map_err(|_| {
        Error::invalid_input(format!(
            "{}: not a valid Ed25519 public key",
            path.display()
        ))
    })?;
    Ok(k)
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

/// Writes `path` (secret, mode 0600 on Unix) and `path.pub` (public, 0644); returns the
/// public key. Existing files are replaced (the CLI refuses that without `--force`).
pub fn write_key_pair(path: &Path) -> Result<[u8; 32]> {
    let seed = generate_seed();
    let public = public_key(&seed);
    let pub_path = public_path(path);
    super::atomic::write_atomic(path, |w| {
        use std::io::Write;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            w.get_ref()
                .set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
        writeln!(w, "{}", super::hex(&seed))?;
        Ok(())
    })?;
    super::atomic::write_atomic(&pub_path, |w| {
        use std::io::Write;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            w.get_ref()
                .set_permissions(std::fs::Permissions::from_mode(0o644))?;
        }
        writeln!(w, "{}", super::hex(&public))?;
        Ok(())
    })?;
    Ok(public)
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
