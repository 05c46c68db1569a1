//! Signing keys of either algorithm Tessera signs with, read from files.
//!
//! - **Ed25519**: `tessera keygen` files ([`crate::util::keys`]): the 32-byte seed or
//!   public key as 64 hex digits (or 32 raw bytes).
//! - **ECDSA P-256**: PEM, as OpenSSL, Python's `cryptography` and OpenSSF model-signing
//!   write them — a secret key as PKCS#8 (`BEGIN PRIVATE KEY`) or SEC1 (`BEGIN EC
//!   PRIVATE KEY`), a public key as SubjectPublicKeyInfo (`BEGIN PUBLIC KEY`). Encrypted
//!   PEM keys and other curves are refused, saying so.
//!
//! A file is recognised by its content: text starting with `-----BEGIN` is PEM, anything
//! else an Ed25519 key file.

use std::path::Path;

use p256::ecdsa::{SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};

use crate::error::{Error, Result};

/// The algorithm names used in signature files and on the command line.
pub const ED25519: &str = "ed25519";
/// See [`ED25519`].
pub const ECDSA_P256: &str = "ecdsa-p256";

/// A secret (signing) key.
#[derive(Clone)]
pub enum SecretKey {
    /// An Ed25519 seed.
    Ed25519([u8; 32]),
    /// An ECDSA P-256 key.
    EcdsaP256(SigningKey),
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretKey({})", self.algorithm())
    }
}

/// A public (verifying) key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublicKey {
    /// An Ed25519 public key.
    Ed25519([u8; 32]),
    /// An ECDSA P-256 public key.
    EcdsaP256(VerifyingKey),
}

fn is_pem(bytes: &[u8]) -> bool {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    bytes[start..].starts_with(b"-----BEGIN")
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::from(e).at_subject(path.display().to_string()))
}

fn pem_text<'a>(bytes: &'a [u8], path: &Path) -> Result<&'a str> {
    std::str::from_utf8(bytes).map_err(|_| {
        Error::invalid_input(format!("{}: a PEM file that is not text", path.display()))
    })
}

/// 32 raw bytes, or 64 hex digits (surrounding whitespace allowed).
fn raw_or_hex(bytes: &[u8], what: &str) -> Result<[u8; 32]> {
    if let Ok(k) = <[u8; 32]>::try_from(bytes) {
        return Ok(k);
    }
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|t| crate::util::unhex(t.trim()))
        .and_then(|v| <[u8; 32]>::try_from(v).ok())
        .ok_or_else(|| {
            Error::invalid_input(format!(
                "not a key: an Ed25519 {what} is 32 bytes or 64 hex digits, an ECDSA P-256 \
                 key PEM text; got {} bytes",
                bytes.len()
            ))
        })
}

impl SecretKey {
    /// Reads a secret key file of either kind (see the module docs).
    pub fn load(path: &Path) -> Result<SecretKey> {
        let bytes = read(path)?;
        if !is_pem(&bytes) {
            return crate::util::keys::load_secret_key(path).map(SecretKey::Ed25519);
        }
        SecretKey::from_pem(pem_text(&bytes, path)?)
            .map_err(|e| Error::invalid_input(format!("{}: {}", path.display(), e.message())))
    }

    /// A key given as bytes (Python's API): PEM text (ECDSA P-256), 32 raw bytes or 64 hex
    /// digits (an Ed25519 seed).
    pub fn from_bytes(bytes: &[u8]) -> Result<SecretKey> {
        if is_pem(bytes) {
            let text = std::str::from_utf8(bytes)
                .map_err(|_| Error::invalid_input("a PEM secret key that is not text"))?;
            return SecretKey::from_pem(text);
        }
        raw_or_hex(bytes, "secret key").map(SecretKey::Ed25519)
    }

    /// Parses a PEM ECDSA P-256 secret key (PKCS#8 or SEC1).
    pub fn from_pem(text: &str) -> Result<SecretKey> {
        if text.contains("ENCRYPTED") {
            return Err(Error::unsupported(
                "an encrypted PEM key (decrypt it first: openssl pkey -in KEY -out PLAIN)",
            ));
        }
        if let Ok(k) = SigningKey::from_pkcs8_pem(text) {
            return Ok(SecretKey::EcdsaP256(k));
        }
        if let Ok(k) = p256::SecretKey::from_sec1_pem(text) {
            return Ok(SecretKey::EcdsaP256(SigningKey::from(k)));
        }
        Err(Error::unsupported(
            "not an ECDSA P-256 private key in PEM (PKCS#8 or SEC1); other curves and \
             algorithms are not supported",
        ))
    }

    /// A fresh random key of `algorithm` ([`ED25519`] or [`ECDSA_P256`]).
    pub fn generate(algorithm: &str) -> Result<SecretKey> {
        match algorithm {
            ED25519 => Ok(SecretKey::Ed25519(crate::util::keys::generate_seed())),
            ECDSA_P256 => Ok(SecretKey::EcdsaP256(SigningKey::random(
                &mut rand::rngs::OsRng,
            ))),
            other => Err(Error::invalid_input(format!(
                "unknown key algorithm {other:?} (use {ED25519} or {ECDSA_P256})"
            ))),
        }
    }

    /// The algorithm name.
    pub fn algorithm(&self) -> &'static str {
        match self {
            SecretKey::Ed25519(_) => ED25519,
            SecretKey::EcdsaP256(_) => ECDSA_P256,
        }
    }

    /// The matching public key.
    pub fn public(&self) -> PublicKey {
        match self {
            SecretKey::Ed25519(seed) => PublicKey::Ed25519(crate::util::keys::public_key(seed)),
            SecretKey::EcdsaP256(k) => PublicKey::EcdsaP256(*k.verifying_key()),
        }
    }

    /// The key file's text: 64 hex digits (Ed25519) or PKCS#8 PEM (ECDSA).
    pub fn to_file_text(&self) -> Result<String> {
        match self {
            SecretKey::Ed25519(seed) => Ok(format!("{}\n", crate::util::hex(seed))),
            SecretKey::EcdsaP256(k) => k
                .to_pkcs8_pem(p256::pkcs8::LineEnding::LF)
                .map(|s| s.to_string())
                .map_err(|e| Error::invalid_input(format!("encoding the key: {e}"))),
        }
    }
}

impl PublicKey {
    /// Reads a public key file of either kind (see the module docs).
    pub fn load(path: &Path) -> Result<PublicKey> {
        let bytes = read(path)?;
        if !is_pem(&bytes) {
            return crate::util::keys::load_public_key(path).map(PublicKey::Ed25519);
        }
        PublicKey::from_pem(pem_text(&bytes, path)?)
            .map_err(|e| Error::invalid_input(format!("{}: {}", path.display(), e.message())))
    }

    /// A key given as bytes (Python's API): PEM text (ECDSA P-256), 32 raw bytes or 64 hex
    /// digits (Ed25519).
    pub fn from_bytes(bytes: &[u8]) -> Result<PublicKey> {
        if is_pem(bytes) {
            let text = std::str::from_utf8(bytes)
                .map_err(|_| Error::invalid_input("a PEM public key that is not text"))?;
            return PublicKey::from_pem(text);
        }
        let k = raw_or_hex(bytes, "public key")?;
        ed25519_dalek::VerifyingKey::from_bytes(&k)
            .map_err(|_| Error::invalid_input("not a valid Ed25519 public key"))?;
        Ok(PublicKey::Ed25519(k))
    }

    /// Parses a PEM SubjectPublicKeyInfo ECDSA P-256 key.
    pub fn from_pem(text: &str) -> Result<PublicKey> {
        VerifyingKey::from_public_key_pem(text)
            .map(PublicKey::EcdsaP256)
            .map_err(|_| {
                Error::unsupported(
                    "not an ECDSA P-256 public key in PEM (SubjectPublicKeyInfo); other \
                     curves and algorithms are not supported",
                )
            })
    }

    /// The algorithm name.
    pub fn algorithm(&self) -> &'static str {
        match self {
            PublicKey::Ed25519(_) => ED25519,
            PublicKey::EcdsaP256(_) => ECDSA_P256,
        }
    }

    /// The key file's text: 64 hex digits (Ed25519) or SubjectPublicKeyInfo PEM with LF
    /// line ends and 64-column base64, byte for byte what OpenSSL and `cryptography`
    /// write (model-signing hashes that text for its key hint).
    pub fn to_file_text(&self) -> Result<String> {
        match self {
            PublicKey::Ed25519(k) => Ok(format!("{}\n", crate::util::hex(k))),
            PublicKey::EcdsaP256(k) => k
                .to_public_key_pem(p256::pkcs8::LineEnding::LF)
                .map_err(|e| Error::invalid_input(format!("encoding the key: {e}"))),
        }
    }

    /// The key as hex: Ed25519's 32 bytes, or P-256's compressed SEC1 point (33 bytes).
    pub fn to_hex(&self) -> String {
        match self {
            PublicKey::Ed25519(k) => crate::util::hex(k),
            PublicKey::EcdsaP256(k) => crate::util::hex(k.to_encoded_point(true).as_bytes()),
        }
    }

    /// Parses [`PublicKey::to_hex`]'s output for `algorithm`.
    pub fn from_hex(algorithm: &str, hex: &str) -> Option<PublicKey> {
        let bytes = crate::util::unhex(hex)?;
        match algorithm {
            ED25519 => {
                let k: [u8; 32] = bytes.try_into().ok()?;
                ed25519_dalek::VerifyingKey::from_bytes(&k).ok()?;
                Some(PublicKey::Ed25519(k))
            }
            ECDSA_P256 if bytes.len() == 33 => VerifyingKey::from_sec1_bytes(&bytes)
                .ok()
                .map(PublicKey::EcdsaP256),
            _ => None,
        }
    }
}

/// Writes a key pair: `path` (secret, mode 0600 on Unix) and `path.pub` (public, 0644).
/// Existing files are replaced (the CLI refuses that without `--force`).
pub fn write_key_pair(path: &Path, key: &SecretKey) -> Result<PublicKey> {
    let public = key.public();
    let secret_text = key.to_file_text()?;
    let public_text = public.to_file_text()?;
    for (p, text, mode) in [
        (path.to_path_buf(), &secret_text, 0o600),
        (crate::util::keys::public_path(path), &public_text, 0o644),
    ] {
        crate::util::atomic::write_atomic(&p, |w| {
            use std::io::Write;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                w.get_ref()
                    .set_permissions(std::fs::Permissions::from_mode(mode))?;
            }
            #[cfg(not(unix))]
            let _ = mode;
            w.write_all(text.as_bytes())?;
            Ok(())
        })?;
    }
    Ok(public)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p256_pairs_round_trip_through_pem_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        let key = SecretKey::generate(ECDSA_P256).unwrap();
        let public = write_key_pair(&p, &key).unwrap();
        let back = SecretKey::load(&p).unwrap();
        assert_eq!(back.public(), public);
        let pub_back = PublicKey::load(&crate::util::keys::public_path(&p)).unwrap();
        assert_eq!(pub_back, public);
        assert_eq!(
            PublicKey::from_hex(ECDSA_P256, &public.to_hex()),
            Some(public)
        );
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with("-----BEGIN PRIVATE KEY-----\n"), "{text}");
        // An Ed25519 key file is read as one.
        let e = dir.path().join("e");
        write_key_pair(&e, &SecretKey::generate(ED25519).unwrap()).unwrap();
        assert_eq!(SecretKey::load(&e).unwrap().algorithm(), ED25519);
        // A PEM that is not a key is refused, naming the file.
        std::fs::write(
            &p,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let err = SecretKey::load(&p).unwrap_err();
        assert!(err.to_string().contains("P-256"), "{err}");
    }
}
