//! OpenSSF model-signing bundles, read and written (the `model-signing` package, 1.x,
//! its `key` method: ECDSA P-256 keys).
//!
//! # The bundle
//!
//! A Sigstore bundle (JSON, media type `application/vnd.dev.sigstore.bundle.v0.3+json`)
//! whose `verificationMaterial.publicKey.hint` is the hex SHA-256 of the signer's public
//! key in PEM, and whose `dsseEnvelope` holds:
//!
//! - `payload`: base64 of an in-toto statement (`_type`
//!   `https://in-toto.io/Statement/v1`) with one subject — the model's name and, as
//!   `digest.sha256`, the SHA-256 over every resource digest in order — the predicate
//!   type `https://model_signing/signature/v1.0`, and a predicate holding
//!   `serialization` (`method` `files` or `shards`, `hash_type`, `allow_symlinks`,
//!   `ignore_paths`, `shard_size`) and `resources` (`name`, `algorithm`, hex `digest`);
//!   see [`super::files`] for how files become resources;
//! - `payloadType` `application/vnd.in-toto+json`;
//! - `signatures[0].sig`: base64 of the DER ECDSA signature (SHA-256) over the DSSE
//!   pre-authentication encoding `"DSSEv1 " len(type) " " type " " len(payload) " "
//!   payload` (lengths in ASCII decimal).
//!
//! # Tessera's addition
//!
//! A bundle Tessera writes carries, beside `serialization` and `resources`, a predicate
//! field `tessera`: `{"type": "tessera-manifest/1", "manifest": {…}}` with the tensor
//! manifest of [`super`] (identity and per-tensor digests). model-signing 1.x ignores
//! predicate fields it does not know, so `model_signing verify key` checks the files as
//! usual; `tessera verify` checks the files and the tensors, and with only the tensors
//! (`--tensors-only`) a conversion of the signed model.
//!
//! # Deviations
//!
//! Bundles signed with a certificate or by Sigstore's keyless flow (a certificate in
//! the verification material) and the pre-1.0 predicate
//! (`https://model_signing/Digests/v0.1`, with its buggy PAE) are refused as
//! unsupported; only P-256 keys are read (model-signing also takes P-384 and P-521).

use base64::Engine as _;
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

use super::files::{self, HashType, Method, Resource, Serialization};
use super::key::{PublicKey, SecretKey};
use super::{Manifest, ManifestDoc};
use crate::error::{Error, Result};

/// The bundle media type model-signing writes and reads.
pub const MEDIA_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
/// The DSSE payload type.
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
/// The in-toto statement type.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// model-signing's predicate type.
pub const PREDICATE_TYPE: &str = "https://model_signing/signature/v1.0";
/// The `type` of Tessera's predicate field.
pub const TESSERA_TYPE: &str = "tessera-manifest/1";
/// The layer name of the bundle's own checks in verify reports.
pub const LAYER: &str = "model-signing";

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Whether `bytes` look like a Sigstore bundle (a JSON object whose `mediaType` names
/// one), as opposed to a Tessera signature file.
pub fn is_bundle(bytes: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Probe {
        #[serde(rename = "mediaType")]
        media_type: Option<String>,
    }
    serde_json::from_slice::<Probe>(bytes)
        .ok()
        .and_then(|p| p.media_type)
        .is_some_and(|m| m.starts_with("application/vnd.dev.sigstore.bundle"))
}

/// A parsed (not yet verified) bundle.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// The public key hint (hex SHA-256 of the signer's PEM public key), when present.
    pub hint: Option<String>,
    /// The DSSE payload (the in-toto statement's JSON bytes).
    pub payload: Vec<u8>,
    /// The DER ECDSA signature.
    pub signature: Vec<u8>,
}

/// The signed statement of a verified bundle.
#[derive(Debug, Clone)]
pub struct Statement {
    /// The subject's name (informative: the model's file or directory name).
    pub model_name: String,
    /// How the files were hashed.
    pub serialization: Serialization,
    /// Every resource, in the statement's order.
    pub resources: Vec<Resource>,
    /// Tessera's tensor manifest, when Tessera wrote the bundle.
    pub tensors: Option<Manifest>,
}

/// DSSE's pre-authentication encoding of an in-toto payload.
fn pae(payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {PAYLOAD_TYPE} {} ",
        PAYLOAD_TYPE.len(),
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

/// The model-signing key hint: the hex SHA-256 of the PEM public key.
fn key_hint(key: &p256::ecdsa::VerifyingKey) -> Result<String> {
    let pem = PublicKey::EcdsaP256(*key).to_file_text()?;
    Ok(crate::util::hex(&Sha256::digest(pem.as_bytes())))
}

fn bad(what: impl std::fmt::Display) -> Error {
    Error::malformed(format!("model-signing bundle: {what}"))
}

fn field<'a>(v: &'a Value, name: &str, within: &str) -> Result<&'a Value> {
    v.get(name)
        .ok_or_else(|| bad(format!("{within} has no {name:?}")))
}

fn string<'a>(v: &'a Value, name: &str, within: &str) -> Result<&'a str> {
    field(v, name, within)?
        .as_str()
        .ok_or_else(|| bad(format!("{within}.{name} is not a string")))
}

fn b64(s: &str, what: &str) -> Result<Vec<u8>> {
    B64.decode(s.trim())
        .map_err(|e| bad(format!("{what} is not base64: {e}")))
}

impl Bundle {
    /// Parses a bundle's JSON (structure only; [`Bundle::verify`] checks the signature).
    pub fn parse(bytes: &[u8]) -> Result<Bundle> {
        if bytes.len() as u64 > super::MAX_SIGNATURE_FILE {
            return Err(Error::limit(format!(
                "signature file of {} bytes (at most {})",
                bytes.len(),
                super::MAX_SIGNATURE_FILE
            )));
        }
        let doc: Value =
            serde_json::from_slice(bytes).map_err(|e| bad(format!("not JSON: {e}")))?;
        let media = string(&doc, "mediaType", "the bundle")?;
        if media != MEDIA_TYPE {
            return Err(Error::unsupported(format!(
                "bundle media type {media:?} (this reads {MEDIA_TYPE}, as model-signing 1.x writes)"
            )));
        }
        let material = field(&doc, "verificationMaterial", "the bundle")?;
        if material.get("certificate").is_some() || material.get("x509CertificateChain").is_some() {
            return Err(Error::unsupported(
                "a bundle signed with a certificate or by Sigstore; Tessera verifies \
                 model-signing's key-signed bundles (`model_signing sign key`)",
            ));
        }
        let hint = material
            .get("publicKey")
            .and_then(|k| k.get("hint"))
            .and_then(Value::as_str)
            .filter(|h| !h.is_empty())
            .map(str::to_string);
        let env = field(&doc, "dsseEnvelope", "the bundle")?;
        let kind = string(env, "payloadType", "dsseEnvelope")?;
        if kind != PAYLOAD_TYPE {
            return Err(Error::unsupported(format!(
                "DSSE payload type {kind:?} (expected {PAYLOAD_TYPE})"
            )));
        }
        let payload = b64(string(env, "payload", "dsseEnvelope")?, "the payload")?;
        let sigs = field(env, "signatures", "dsseEnvelope")?
            .as_array()
            .ok_or_else(|| bad("dsseEnvelope.signatures is not a list"))?;
        let first = sigs
            .first()
            .ok_or_else(|| bad("dsseEnvelope.signatures is empty"))?;
        let signature = b64(string(first, "sig", "the signature")?, "the signature")?;
        Ok(Bundle {
            hint,
            payload,
            signature,
        })
    }

    /// Checks the signature with the trusted `key` (the hint, when present, must name
    /// it), then parses the statement and checks its subject digest against its
    /// resources.
    pub fn verify(&self, key: &PublicKey) -> Result<Statement> {
        let PublicKey::EcdsaP256(vk) = key else {
            return Err(Error::invalid_input(format!(
                "a model-signing bundle is checked with an ECDSA P-256 PEM public key, not \
                 an {} key",
                key.algorithm()
            )));
        };
        if let Some(hint) = &self.hint {
            let want = key_hint(vk)?;
            if !hint.eq_ignore_ascii_case(&want) {
                return Err(Error::integrity(format!(
                    "signed by the key with hint {hint}, not by the trusted key"
                )));
            }
        }
        let sig = p256::ecdsa::DerSignature::from_bytes(&self.signature)
            .map_err(|_| bad("the signature is not a DER ECDSA signature"))?;
        vk.verify(&pae(&self.payload), &sig).map_err(|_| {
            Error::integrity("the ECDSA signature does not match the bundle's statement")
        })?;
        parse_statement(&self.payload)
    }
}

fn parse_statement(payload: &[u8]) -> Result<Statement> {
    let st: Value =
        serde_json::from_slice(payload).map_err(|e| bad(format!("statement is not JSON: {e}")))?;
    let kind = string(&st, "_type", "the statement")?;
    if kind != STATEMENT_TYPE {
        return Err(Error::unsupported(format!(
            "in-toto statement type {kind:?} (expected {STATEMENT_TYPE})"
        )));
    }
    let ptype = string(&st, "predicateType", "the statement")?;
    if ptype != PREDICATE_TYPE {
        return Err(Error::unsupported(format!(
            "predicate type {ptype:?} (this reads {PREDICATE_TYPE}, model-signing 1.x)"
        )));
    }
    let subjects = field(&st, "subject", "the statement")?
        .as_array()
        .ok_or_else(|| bad("subject is not a list"))?;
    let [subject] = subjects.as_slice() else {
        return Err(bad(format!("{} subjects (expected one)", subjects.len())));
    };
    let model_name = string(subject, "name", "the subject")?.to_string();
    let root = string(
        field(subject, "digest", "the subject")?,
        "sha256",
        "subject.digest",
    )?;
    let pred = field(&st, "predicate", "the statement")?;
    let ser = field(pred, "serialization", "the predicate")?;
    let method = match string(ser, "method", "serialization")? {
        "files" => Method::Files,
        "shards" => {
            let size = field(ser, "shard_size", "serialization")?;
            let n = size
                .as_u64()
                .or_else(|| {
                    size.as_f64()
                        .filter(|f| f.fract() == 0.0 && *f >= 1.0 && *f < 9e15)
                        .map(|f| f as u64)
                })
                .filter(|n| *n > 0)
                .ok_or_else(|| bad(format!("shard_size {size} is not a positive integer")))?;
            Method::Shards(n)
        }
        other => {
            return Err(Error::unsupported(format!(
                "model-signing serialization {other:?} (Tessera checks files and shards)"
            )))
        }
    };
    let hash = HashType::parse(string(ser, "hash_type", "serialization")?)?;
    let allow_symlinks = ser
        .get("allow_symlinks")
        .map(|v| {
            v.as_bool()
                .ok_or_else(|| bad("allow_symlinks is not a boolean"))
        })
        .transpose()?
        .unwrap_or(false);
    let mut ignore_paths = Vec::new();
    if let Some(list) = ser.get("ignore_paths") {
        for p in list
            .as_array()
            .ok_or_else(|| bad("ignore_paths is not a list"))?
        {
            ignore_paths.push(
                p.as_str()
                    .ok_or_else(|| bad("an ignore path is not a string"))?
                    .to_string(),
            );
        }
    }
    let list = field(pred, "resources", "the predicate")?
        .as_array()
        .ok_or_else(|| bad("resources is not a list"))?;
    let mut resources = Vec::with_capacity(list.len());
    for r in list {
        let name = string(r, "name", "a resource")?.to_string();
        let digest = crate::util::unhex(string(r, "digest", "a resource")?)
            .ok_or_else(|| bad(format!("resource {name:?}: the digest is not hex")))?;
        resources.push(Resource {
            algorithm: string(r, "algorithm", "a resource")?.to_string(),
            name,
            digest,
        });
    }
    let got = crate::util::hex(&files::root_digest(&resources));
    if !got.eq_ignore_ascii_case(root) {
        return Err(Error::integrity(format!(
            "model-signing bundle: the subject digest {root} does not match its resources ({got})"
        )));
    }
    let tensors = match pred.get("tessera") {
        None => None,
        Some(t) => {
            let doc: TesseraDoc = serde_json::from_value(t.clone())
                .map_err(|e| bad(format!("the tessera predicate: {e}")))?;
            if doc.kind != TESSERA_TYPE {
                return Err(Error::unsupported(format!(
                    "tessera predicate of type {:?} (this reads {TESSERA_TYPE})",
                    doc.kind
                )));
            }
            Some(Manifest::from_doc(&doc.manifest)?)
        }
    };
    Ok(Statement {
        model_name,
        serialization: Serialization {
            method,
            hash,
            allow_symlinks,
            ignore_paths,
        },
        resources,
        tensors,
    })
}

impl Statement {
    /// Hashes the model at `root` as the statement's serialization says (skipping
    /// `extra_ignore` too: the signature file when it lies inside the model directory)
    /// and reports each signed resource under [`LAYER`]: ok, changed, missing, or a file
    /// that was not signed. Errors are those of reading the directory.
    pub fn check_files(
        &self,
        root: &std::path::Path,
        extra_ignore: &[String],
        report: &mut crate::VerifyReport,
    ) -> Result<()> {
        let actual = files::hash_model(root, &self.serialization, extra_ignore)?;
        let layer = format!("{LAYER} {}", self.serialization.hash.name());
        let got: std::collections::HashMap<&str, &Resource> =
            actual.iter().map(|r| (r.name.as_str(), r)).collect();
        let mut signed = std::collections::HashSet::new();
        for want in &self.resources {
            signed.insert(want.name.as_str());
            let subject = format!("file {:?}", want.name);
            match got.get(want.name.as_str()) {
                None => report.failed(subject, &layer, "signed, but missing"),
                Some(r) if r.digest != want.digest => report.failed(
                    subject,
                    &layer,
                    format!(
                        "digest {} differs from the signed {}",
                        crate::util::hex(&r.digest),
                        crate::util::hex(&want.digest)
                    ),
                ),
                Some(_) => report.ok(subject, &layer),
            }
        }
        for r in &actual {
            if !signed.contains(r.name.as_str()) {
                report.failed(
                    format!("file {:?}", r.name),
                    &layer,
                    "present, but not signed",
                );
            }
        }
        Ok(())
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TesseraDoc {
    #[serde(rename = "type")]
    kind: String,
    manifest: ManifestDoc,
}

/// Writes a bundle over `resources` (already hashed and sorted, see
/// [`files::hash_model`]) and, when given, Tessera's tensor manifest, signed with the
/// ECDSA P-256 `key`. Returns the bundle's JSON text.
pub fn sign(
    model_name: &str,
    serialization: &Serialization,
    resources: &[Resource],
    tensors: Option<&Manifest>,
    key: &SecretKey,
) -> Result<String> {
    let SecretKey::EcdsaP256(sk) = key else {
        return Err(Error::invalid_input(format!(
            "a model-signing bundle is signed with an ECDSA P-256 PEM key, not an {} key",
            key.algorithm()
        )));
    };
    let mut ser = json!({
        "method": match serialization.method { Method::Files => "files", Method::Shards(_) => "shards" },
        "hash_type": serialization.hash.name(),
        "allow_symlinks": serialization.allow_symlinks,
    });
    if let Method::Shards(n) = serialization.method {
        ser["shard_size"] = json!(n);
    }
    if !serialization.ignore_paths.is_empty() {
        ser["ignore_paths"] = json!(serialization.ignore_paths);
    }
    let mut predicate = json!({
        "serialization": ser,
        "resources": resources.iter().map(|r| json!({
            "name": r.name,
            "algorithm": r.algorithm,
            "digest": crate::util::hex(&r.digest),
        })).collect::<Vec<_>>(),
    });
    if let Some(m) = tensors {
        let doc = TesseraDoc {
            kind: TESSERA_TYPE.into(),
            manifest: m.to_doc(),
        };
        predicate["tessera"] = serde_json::to_value(doc)
            .map_err(|e| Error::invalid_input(format!("encoding the manifest: {e}")))?;
    }
    let statement = json!({
        "_type": STATEMENT_TYPE,
        "subject": [{
            "name": model_name,
            "digest": {"sha256": crate::util::hex(&files::root_digest(resources))},
        }],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    });
    let payload = serde_json::to_vec_pretty(&statement)
        .map_err(|e| Error::invalid_input(format!("encoding the statement: {e}")))?;
    let sig: p256::ecdsa::DerSignature = sk.sign(&pae(&payload));
    let bundle = json!({
        "mediaType": MEDIA_TYPE,
        "verificationMaterial": {
            "publicKey": {"hint": key_hint(sk.verifying_key())?},
            "tlogEntries": [],
        },
        "dsseEnvelope": {
            "payload": B64.encode(&payload),
            "payloadType": PAYLOAD_TYPE,
            "signatures": [{"sig": B64.encode(sig.as_bytes()), "keyid": ""}],
        },
    });
    serde_json::to_string(&bundle)
        .map_err(|e| Error::invalid_input(format!("encoding the bundle: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pae_is_dsse_v1() {
        assert_eq!(
            pae(b"{}"),
            b"DSSEv1 28 application/vnd.in-toto+json 2 {}".to_vec()
        );
    }

    #[test]
    fn sign_then_verify_and_tamper() {
        let key = SecretKey::generate(super::super::key::ECDSA_P256).unwrap();
        let ser = Serialization {
            method: Method::Files,
            hash: HashType::Sha256,
            allow_symlinks: false,
            ignore_paths: vec![],
        };
        let res = vec![Resource {
            name: ".".into(),
            algorithm: "sha256".into(),
            digest: Sha256::digest(b"x").to_vec(),
        }];
        let text = sign("m", &ser, &res, None, &key).unwrap();
        assert!(is_bundle(text.as_bytes()));
        let b = Bundle::parse(text.as_bytes()).unwrap();
        let st = b.verify(&key.public()).unwrap();
        assert_eq!(st.resources, res);
        assert_eq!(st.serialization, ser);
        let other = SecretKey::generate(super::super::key::ECDSA_P256).unwrap();
        let e = b.verify(&other.public()).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Integrity);
        let mut forged = b.clone();
        forged.hint = None;
        let last = forged.payload.len() - 2;
        forged.payload[last] ^= 1;
        assert_eq!(
            forged.verify(&key.public()).unwrap_err().kind(),
            crate::ErrorKind::Integrity
        );
    }
}
