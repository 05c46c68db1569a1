//! Signing keys of either algorithm Tessera signs with, read from files.
//!
//! Every key file `tessera keygen` writes is PEM, typed by its label, as OpenSSL,
//! Python's `cryptography` and OpenSSF model-signing write them:
//!
//! - a secret key as PKCS#8 (`BEGIN PRIVATE KEY`: Ed25519 per RFC 8410, or ECDSA
//!   P-256) or SEC1 (`BEGIN EC PRIVATE KEY`, P-256);
//! - a public key as SubjectPublicKeyInfo (`BEGIN PUBLIC KEY`, Ed25519 or P-256).
//!
//! Encrypted PEM keys and other curves are refused, saying so. A secret key file given
//! where a public key is wanted (`verify --public-key`), or a public one where a secret
//! key is wanted (`sign --key`), is refused (`InvalidInput`), naming the file and never
//! printing its content.
//!
//! # The old untyped form
//!
//! Before, `keygen` wrote an Ed25519 key as one bare line of 64 hex digits (32 raw bytes
//! were accepted too), the same for the secret seed and the public key. Such files are
//! still read; their kind is told apart where it can be:
//!
//! - as a public key, a bare file is refused when `FILE.pub` exists and holds the public
//!   key its content derives (it is the secret half of a keygen pair), or when, on Unix,
//!   its name does not end in `.pub` and it is readable by its owner alone (mode 0600,
//!   as keygen writes secret keys; public keys are 0644);
//! - as a secret key, a bare file whose name ends in `.pub` is refused (keygen's name
//!   for the public half);
//! - at verification, a bare key whose derived public key is the signer's is refused
//!   ([`SECRET_KEY_GIVEN`]): it is the signer's secret key.
//!
//! What passes those is taken as what the caller asked for: 32 bytes cannot say more.
//!
//! Keys are shown only by their keyid ([`PublicKey::keyid`]), never their bytes.

use std::path::Path;

use base64::Engine as _;
use p256::ecdsa::{SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use sha2::{Digest as _, Sha256};

use crate::error::{Error, Result};

/// The algorithm names used in signature files and on the command line.
pub const ED25519: &str = "ed25519";
/// See [`ED25519`].
pub const ECDSA_P256: &str = "ecdsa-p256";

pub use crate::verify::SECRET_KEY_GIVEN;

/// PKCS#8 v1 of an Ed25519 seed (RFC 8410): this prefix, then the 32 bytes.
const ED25519_PKCS8: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];
/// SubjectPublicKeyInfo of an Ed25519 public key (RFC 8410): this prefix, then the key.
const ED25519_SPKI: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

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

/// What a key file or key bytes hold, told by their form.
enum Parsed {
    Secret(SecretKey),
    Public(PublicKey),
    /// The old untyped Ed25519 form: 64 hex digits or 32 raw bytes, secret or public.
    Bare([u8; 32]),
}

fn is_pem(bytes: &[u8]) -> bool {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    bytes[start..].starts_with(b"-----BEGIN")
}

fn read(path: &Path) -> Result<Vec<u8>> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::from(e).at_subject(path.display().to_string()))?;
    if meta.len() > 1 << 20 {
        return Err(Error::invalid_input(format!(
            "{}: not a key file ({} bytes)",
            path.display(),
            meta.len()
        )));
    }
    std::fs::read(path).map_err(|e| Error::from(e).at_subject(path.display().to_string()))
}

/// The first PEM block's label and decoded body.
fn pem_block(text: &str) -> Result<(String, Vec<u8>)> {
    let bad = || Error::invalid_input("a PEM key file whose armour or base64 is damaged");
    let start = text.find("-----BEGIN ").ok_or_else(bad)?;
    let rest = &text[start + "-----BEGIN ".len()..];
    let end = rest.find("-----").ok_or_else(bad)?;
    let label = rest[..end].to_string();
    let body = &rest[end + 5..];
    let footer = format!("-----END {label}-----");
    let stop = body.find(&footer).ok_or_else(bad)?;
    let mut b64 = String::new();
    for line in body[..stop].lines() {
        if line.contains(':') {
            // RFC 1421 headers: an old-style encrypted key (Proc-Type: 4,ENCRYPTED).
            return Ok((format!("ENCRYPTED {label}"), Vec::new()));
        }
        b64.push_str(line.trim());
    }
    let der = base64::engine::general_purpose::STANDARD
        .decode(b64.as_bytes())
        .map_err(|_| bad())?;
    Ok((label, der))
}

fn parse_pem(bytes: &[u8]) -> Result<Parsed> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| Error::invalid_input("a PEM file that is not text"))?;
    let (label, der) = pem_block(text)?;
    if label.contains("ENCRYPTED") {
        return Err(Error::unsupported(
            "an encrypted PEM key (decrypt it first: openssl pkey -in KEY -out PLAIN)",
        ));
    }
    match label.as_str() {
        "PRIVATE KEY" if der.len() == 48 && der.starts_with(&ED25519_PKCS8) => {
            let mut seed = [0u8; 32];
            seed.copy_from_slice(&der[16..]);
            Ok(Parsed::Secret(SecretKey::Ed25519(seed)))
        }
        "PRIVATE KEY" | "EC PRIVATE KEY" => SecretKey::from_p256_pem(text).map(Parsed::Secret),
        "PUBLIC KEY" if der.len() == 44 && der.starts_with(&ED25519_SPKI) => {
            let mut k = [0u8; 32];
            k.copy_from_slice(&der[12..]);
            ed25519_dalek::VerifyingKey::from_bytes(&k)
                .map_err(|_| Error::invalid_input("not a valid Ed25519 public key"))?;
            Ok(Parsed::Public(PublicKey::Ed25519(k)))
        }
        "PUBLIC KEY" => PublicKey::from_p256_pem(text).map(Parsed::Public),
        other => Err(Error::unsupported(format!(
            "a PEM {other:?} block: a key file holds a PRIVATE KEY or EC PRIVATE KEY (secret) \
             or a PUBLIC KEY"
        ))),
    }
}

/// 32 raw bytes, or 64 hex digits (surrounding whitespace allowed; a word before the
/// digits too, the last word counting, as the old reader allowed).
fn parse_bare(bytes: &[u8]) -> Result<[u8; 32]> {
    if let Ok(k) = <[u8; 32]>::try_from(bytes) {
        return Ok(k);
    }
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|t| t.split_whitespace().last())
        .and_then(crate::util::unhex)
        .and_then(|v| <[u8; 32]>::try_from(v).ok())
        .ok_or_else(|| {
            Error::invalid_input(format!(
                "not a key: a key file is PEM (tessera keygen), or an Ed25519 key in the \
                 old form, 64 hex digits or 32 raw bytes; got {} bytes",
                bytes.len()
            ))
        })
}

fn parse(bytes: &[u8]) -> Result<Parsed> {
    if is_pem(bytes) {
        parse_pem(bytes)
    } else {
        parse_bare(bytes).map(Parsed::Bare)
    }
}

fn in_file(path: &Path, e: Error) -> Error {
    Error::new(e.kind(), format!("{}: {}", path.display(), e.message()))
}

fn named_pub(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".pub"))
}

/// True when the file is readable by its owner alone (Unix; never elsewhere).
fn owner_only(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 == 0)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

/// Whether the untyped `bare` read from `path` is the secret half of a keygen pair:
/// `path.pub` holds the public key it derives.
fn has_matching_pub(path: &Path, bare: &[u8; 32]) -> bool {
    let public = crate::signing::ed25519::public_path(path);
    let Ok(bytes) = std::fs::read(&public) else {
        return false;
    };
    let derived = crate::signing::ed25519::public_key(bare);
    match parse(&bytes) {
        Ok(Parsed::Public(PublicKey::Ed25519(k))) | Ok(Parsed::Bare(k)) => k == derived,
        _ => false,
    }
}

impl SecretKey {
    /// Reads a secret key file of either algorithm (see the module docs); a public key
    /// file is refused.
    pub fn load(path: &Path) -> Result<SecretKey> {
        let bytes = read(path)?;
        match parse(&bytes).map_err(|e| in_file(path, e))? {
            Parsed::Secret(k) => Ok(k),
            Parsed::Public(_) => Err(Error::invalid_input(format!(
                "{} is a public key file; signing takes the secret key (tessera keygen -o \
                 KEY writes the secret KEY and the public KEY.pub)",
                path.display()
            ))),
            Parsed::Bare(_) if named_pub(path) => Err(Error::invalid_input(format!(
                "{} is named .pub: an untyped key file of that name is a public key; signing \
                 takes the secret key (tessera keygen -o KEY writes the secret KEY)",
                path.display()
            ))),
            Parsed::Bare(seed) => Ok(SecretKey::Ed25519(seed)),
        }
    }

    /// A key given as bytes (Python's API): PEM text, or an Ed25519 seed as 32 raw bytes
    /// or 64 hex digits. A PEM public key is refused.
    pub fn from_bytes(bytes: &[u8]) -> Result<SecretKey> {
        match parse(bytes)? {
            Parsed::Secret(k) => Ok(k),
            Parsed::Public(_) => Err(Error::invalid_input(
                "a public key given where a secret (signing) key is wanted",
            )),
            Parsed::Bare(seed) => Ok(SecretKey::Ed25519(seed)),
        }
    }

    /// Parses a PEM secret key: Ed25519 (PKCS#8) or ECDSA P-256 (PKCS#8 or SEC1).
    pub fn from_pem(text: &str) -> Result<SecretKey> {
        match parse_pem(text.as_bytes())? {
            Parsed::Secret(k) => Ok(k),
            _ => Err(Error::invalid_input(
                "a public key given where a secret (signing) key is wanted",
            )),
        }
    }

    fn from_p256_pem(text: &str) -> Result<SecretKey> {
        if let Ok(k) = SigningKey::from_pkcs8_pem(text) {
            return Ok(SecretKey::EcdsaP256(k));
        }
        if let Ok(k) = p256::SecretKey::from_sec1_pem(text) {
            return Ok(SecretKey::EcdsaP256(SigningKey::from(k)));
        }
        Err(Error::unsupported(
            "not an Ed25519 or ECDSA P-256 private key in PEM (PKCS#8 or SEC1); other \
             curves and algorithms are not supported",
        ))
    }

    /// A fresh random key of `algorithm` ([`ED25519`] or [`ECDSA_P256`]).
    pub fn generate(algorithm: &str) -> Result<SecretKey> {
        match algorithm {
            ED25519 => Ok(SecretKey::Ed25519(crate::signing::ed25519::generate_seed())),
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
            SecretKey::Ed25519(seed) => {
                PublicKey::Ed25519(crate::signing::ed25519::public_key(seed))
            }
            SecretKey::EcdsaP256(k) => PublicKey::EcdsaP256(*k.verifying_key()),
        }
    }

    /// The key file's text: PKCS#8 PEM (`BEGIN PRIVATE KEY`), as OpenSSL writes it.
    pub fn to_file_text(&self) -> Result<String> {
        match self {
            SecretKey::Ed25519(seed) => {
                let mut der = ED25519_PKCS8.to_vec();
                der.extend_from_slice(seed);
                Ok(pem("PRIVATE KEY", &der))
            }
            SecretKey::EcdsaP256(k) => k
                .to_pkcs8_pem(p256::pkcs8::LineEnding::LF)
                .map(|s| s.to_string())
                .map_err(|e| Error::invalid_input(format!("encoding the key: {e}"))),
        }
    }
}

/// PEM armour with LF line ends and 64-column base64.
fn pem(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

impl PublicKey {
    /// Reads a public key file of either algorithm (see the module docs); a secret key
    /// file is refused, and so is an untyped one that can be told to be secret.
    pub fn load(path: &Path) -> Result<PublicKey> {
        let bytes = read(path)?;
        let secret = || {
            Error::invalid_input(format!(
                "{} is a secret key file; verifying takes the public key (tessera keygen -o \
                 KEY writes it as KEY.pub)",
                path.display()
            ))
        };
        match parse(&bytes).map_err(|e| in_file(path, e))? {
            Parsed::Public(k) => Ok(k),
            Parsed::Secret(_) => Err(secret()),
            Parsed::Bare(k) => {
                if !named_pub(path) && has_matching_pub(path, &k) {
                    return Err(Error::invalid_input(format!(
                        "{} is a secret key file (its public key is {}); verifying takes \
                         the public key",
                        path.display(),
                        crate::signing::ed25519::public_path(path).display()
                    )));
                }
                if !named_pub(path) && owner_only(path) {
                    return Err(Error::invalid_input(format!(
                        "{} looks like a secret key file: an untyped key readable by its owner \
                         alone, as tessera keygen wrote secret keys; verifying takes the public \
                         key (KEY.pub). If this is a public key, name it *.pub or make it \
                         readable (chmod 644)",
                        path.display()
                    )));
                }
                PublicKey::from_bare(k).map_err(|_| {
                    Error::invalid_input(format!(
                        "{}: not a valid Ed25519 public key (a secret key file? verifying \
                         takes the public key, KEY.pub)",
                        path.display()
                    ))
                })
            }
        }
    }

    fn from_bare(k: [u8; 32]) -> Result<PublicKey> {
        ed25519_dalek::VerifyingKey::from_bytes(&k)
            .map_err(|_| Error::invalid_input("not a valid Ed25519 public key"))?;
        Ok(PublicKey::Ed25519(k))
    }

    /// A key given as bytes (Python's API): PEM text, or an Ed25519 key as 32 raw bytes
    /// or 64 hex digits. A PEM secret key is refused.
    pub fn from_bytes(bytes: &[u8]) -> Result<PublicKey> {
        match parse(bytes)? {
            Parsed::Public(k) => Ok(k),
            Parsed::Secret(_) => Err(Error::invalid_input(
                "a secret key given where a public key is wanted (give its public key)",
            )),
            Parsed::Bare(k) => PublicKey::from_bare(k),
        }
    }

    /// Parses a PEM SubjectPublicKeyInfo key (Ed25519 or ECDSA P-256).
    pub fn from_pem(text: &str) -> Result<PublicKey> {
        match parse_pem(text.as_bytes())? {
            Parsed::Public(k) => Ok(k),
            _ => Err(Error::invalid_input(
                "a secret key given where a public key is wanted (give its public key)",
            )),
        }
    }

    fn from_p256_pem(text: &str) -> Result<PublicKey> {
        VerifyingKey::from_public_key_pem(text)
            .map(PublicKey::EcdsaP256)
            .map_err(|_| {
                Error::unsupported(
                    "not an Ed25519 or ECDSA P-256 public key in PEM (SubjectPublicKeyInfo); \
                     other curves and algorithms are not supported",
                )
            })
    }

    /// True when `self`, read from an untyped key, is in fact the seed of `signer`: the
    /// secret key given where its public key is wanted.
    pub fn is_secret_of(&self, signer: &PublicKey) -> bool {
        match self {
            PublicKey::Ed25519(k) => &SecretKey::Ed25519(*k).public() == signer,
            PublicKey::EcdsaP256(_) => false,
        }
    }

    /// The key's id, what messages show of it (never the key itself): the first 8 bytes
    /// of the SHA-256 of its raw form (Ed25519's 32 bytes, P-256's compressed point), as
    /// 16 hex digits. For Ed25519 it is WTXT's `keyid`.
    pub fn keyid(&self) -> String {
        let raw = match self {
            PublicKey::Ed25519(k) => k.to_vec(),
            PublicKey::EcdsaP256(k) => k.to_encoded_point(true).as_bytes().to_vec(),
        };
        crate::util::hex(&Sha256::digest(&raw)[..8])
    }

    /// The algorithm name.
    pub fn algorithm(&self) -> &'static str {
        match self {
            PublicKey::Ed25519(_) => ED25519,
            PublicKey::EcdsaP256(_) => ECDSA_P256,
        }
    }

    /// The key file's text: SubjectPublicKeyInfo PEM with LF line ends and 64-column
    /// base64, byte for byte what OpenSSL and `cryptography` write (model-signing hashes
    /// that text for its key hint).
    pub fn to_file_text(&self) -> Result<String> {
        match self {
            PublicKey::Ed25519(k) => {
                let mut der = ED25519_SPKI.to_vec();
                der.extend_from_slice(k);
                Ok(pem("PUBLIC KEY", &der))
            }
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
        (
            crate::signing::ed25519::public_path(path),
            &public_text,
            0o644,
        ),
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
    fn secret_key_debug_never_shows_the_key() {
        let text = format!("{:?}", SecretKey::Ed25519([0xA7; 32]));
        assert!(
            !text.contains("167") && !text.to_lowercase().contains("a7"),
            "{text}"
        );
        let p256 = SecretKey::generate(ECDSA_P256).unwrap();
        assert_eq!(format!("{p256:?}"), "SecretKey(ecdsa-p256)");
    }

    #[test]
    fn p256_pairs_round_trip_through_pem_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        let key = SecretKey::generate(ECDSA_P256).unwrap();
        let public = write_key_pair(&p, &key).unwrap();
        let back = SecretKey::load(&p).unwrap();
        assert_eq!(back.public(), public);
        let pub_back = PublicKey::load(&crate::signing::ed25519::public_path(&p)).unwrap();
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

    #[test]
    fn ed25519_files_are_typed_pem_and_each_kind_refuses_the_other() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        // RFC 8032's first test key.
        let seed: [u8; 32] =
            crate::util::unhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
                .unwrap()
                .try_into()
                .unwrap();
        let key = SecretKey::Ed25519(seed);
        let public = write_key_pair(&p, &key).unwrap();
        let pub_path = crate::signing::ed25519::public_path(&p);
        let text = std::fs::read_to_string(&p).unwrap();
        // The PKCS#8 OpenSSL writes for this seed (`openssl pkey`).
        assert_eq!(
            text,
            "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n-----END PRIVATE KEY-----\n"
        );
        assert!(std::fs::read_to_string(&pub_path)
            .unwrap()
            .starts_with("-----BEGIN PUBLIC KEY-----\n"));
        assert_eq!(PublicKey::load(&pub_path).unwrap(), public);
        assert_eq!(SecretKey::load(&p).unwrap().public(), public);
        let e = PublicKey::load(&p).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("is a secret key file"), "{e}");
        assert!(!e.to_string().contains("MC4C"), "{e}");
        let e = SecretKey::load(&pub_path).unwrap_err();
        assert!(e.to_string().contains("is a public key file"), "{e}");
        assert!(PublicKey::from_bytes(text.as_bytes()).is_err());
        assert!(SecretKey::from_bytes(public.to_file_text().unwrap().as_bytes()).is_err());
        // The keyid is WTXT's.
        assert_eq!(
            public.keyid(),
            crate::util::hex(&Sha256::digest(crate::signing::ed25519::public_key(&seed))[..8])
        );
        // The old untyped pair still reads; its secret half is refused as public.
        let hex_seed = crate::util::hex(&seed);
        std::fs::write(&p, format!("{hex_seed}\n")).unwrap();
        std::fs::write(&pub_path, format!("{}\n", public.to_hex())).unwrap();
        assert_eq!(SecretKey::load(&p).unwrap().public(), public);
        assert_eq!(PublicKey::load(&pub_path).unwrap(), public);
        let e = PublicKey::load(&p).unwrap_err();
        assert!(e.to_string().contains("is a secret key file"), "{e}");
        assert!(!e.to_string().contains(&hex_seed), "{e}");
        let e = SecretKey::load(&pub_path).unwrap_err();
        assert!(e.to_string().contains("named .pub"), "{e}");
        // This seed is no curve point: refused as a public key, the message guessing why.
        std::fs::write(&p, format!("{hex_seed}\n")).unwrap();
        std::fs::remove_file(&pub_path).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let e = PublicKey::load(&p).unwrap_err();
        assert!(e.to_string().contains("a secret key file?"), "{e}");
        // RFC 8032's third seed is one: read as public, it is known for what it is by
        // the key it derives.
        let seed3 = "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7";
        let signer = SecretKey::from_bytes(seed3.as_bytes()).unwrap().public();
        assert_eq!(
            signer.to_hex(),
            "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025"
        );
        let as_public = PublicKey::from_bytes(seed3.as_bytes()).unwrap();
        assert!(as_public.is_secret_of(&signer));
        assert!(!signer.is_secret_of(&signer));
    }
}
