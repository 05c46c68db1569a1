//! age ASCII-armored encryption of a whole file (RESOLUTIONS 16), with the `age` crate
//! (default features off, `armor` on): X25519 recipients (`age1…`) or a passphrase
//! (scrypt). Decryption is bounded by `Limits::max_decoded_bytes`.

use std::io::{Read, Write};
use std::str::FromStr;

use age::armor::{ArmoredReader, ArmoredWriter, Format as ArmorFormat};
use age::secrecy::SecretString;

use crate::any::ReadOptions;
use crate::error::{Error, Result};

fn io(e: std::io::Error) -> Error {
    Error::from(e)
}

/// Encrypts `plain` for X25519 `recipients` (`age1…`) or with a passphrase, armored.
pub fn encrypt(plain: &[u8], recipients: &[String], passphrase: Option<&str>) -> Result<Vec<u8>> {
    let enc = match (recipients.is_empty(), passphrase) {
        (true, Some(p)) => age::Encryptor::with_user_passphrase(SecretString::from(p.to_string())),
        (false, None) => {
            let rs = recipients
                .iter()
                .map(|r| {
                    age::x25519::Recipient::from_str(r)
                        .map_err(|e| Error::invalid_input(format!("age recipient {r:?}: {e}")))
                })
                .collect::<Result<Vec<_>>>()?;
            age::Encryptor::with_recipients(rs.iter().map(|r| r as &dyn age::Recipient))
                .map_err(|e| Error::invalid_input(format!("age: {e}")))?
        }
        (true, None) => return Err(Error::invalid_input("age: give recipients or a passphrase")),
        (false, Some(_)) => {
            return Err(Error::invalid_input(
                "age: recipients and a passphrase cannot be combined",
            ))
        }
    };
    let mut out = Vec::with_capacity(plain.len() * 4 / 3 + 1024);
    let armored = ArmoredWriter::wrap_output(&mut out, ArmorFormat::AsciiArmor).map_err(io)?;
    let mut w = enc.wrap_output(armored).map_err(io)?;
    w.write_all(plain).map_err(io)?;
    w.finish().and_then(|a| a.finish()).map_err(io)?;
    Ok(out)
}

/// Decrypts an age-armored file with the identities or passphrase of `opts`. Errors
/// say `age:` once (as the format, whichever path called).
pub fn decrypt(data: &[u8], opts: &ReadOptions) -> Result<Vec<u8>> {
    decrypt_inner(data, opts).map_err(|e| e.in_format(crate::Format::AgeArmor))
}

fn decrypt_inner(data: &[u8], opts: &ReadOptions) -> Result<Vec<u8>> {
    let dec = age::Decryptor::new_buffered(ArmoredReader::new(data))
        .map_err(|e| Error::malformed(format!("{e}")))?;
    let reader = if dec.is_scrypt() {
        let p = opts.age_passphrase.as_ref().ok_or_else(|| {
            Error::invalid_input("the file is passphrase-encrypted")
                .with_hint(crate::refusal::Hint::Passphrase)
        })?;
        let id = age::scrypt::Identity::new(SecretString::from(p.clone()));
        dec.decrypt(std::iter::once(&id as &dyn age::Identity))
    } else {
        if opts.age_identities.is_empty() {
            return Err(Error::invalid_input("the file is encrypted to recipients")
                .with_hint(crate::refusal::Hint::Identity));
        }
        let ids = opts
            .age_identities
            .iter()
            .map(|s| {
                age::x25519::Identity::from_str(s)
                    .map_err(|e| Error::invalid_input(format!("age identity: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        dec.decrypt(ids.iter().map(|i| i as &dyn age::Identity))
    }
    .map_err(|e| {
        Error::integrity(format!(
            "cannot decrypt (wrong passphrase, or not encrypted to these identities): {e}"
        ))
    })?;
    let cap = opts.limits.max_decoded_bytes;
    let mut out = Vec::new();
    reader
        .take(cap.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| Error::integrity(format!("{e}")))?;
    if out.len() as u64 > cap {
        return Err(Error::limit(format!(
            "decrypted data over the {cap}-byte limit"
        )));
    }
    Ok(out)
}

/// A fresh X25519 identity and its recipient (`AGE-SECRET-KEY-1…`, `age1…`).
pub fn generate_identity() -> (String, String) {
    use age::secrecy::ExposeSecret;
    let id = age::x25519::Identity::generate();
    (
        id.to_string().expose_secret().to_string(),
        id.to_public().to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x25519_round_trip_and_wrong_identity() {
        let (id, rcpt) = generate_identity();
        let enc = encrypt(b"WTXT 1\nhello\n", &[rcpt], None).unwrap();
        assert!(enc.starts_with(b"-----BEGIN AGE ENCRYPTED FILE-----"));
        assert!(enc.iter().all(|&b| b == b'\n' || (0x20..0x7f).contains(&b)));
        let opts = ReadOptions {
            age_identities: vec![id],
            ..Default::default()
        };
        assert_eq!(decrypt(&enc, &opts).unwrap(), b"WTXT 1\nhello\n");
        let (other, _) = generate_identity();
        let bad = ReadOptions {
            age_identities: vec![other],
            ..Default::default()
        };
        assert!(decrypt(&enc, &bad).is_err());
        assert!(decrypt(&enc, &ReadOptions::default()).is_err());
    }
}
