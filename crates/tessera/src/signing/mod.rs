//! Detached signatures over a model's content identity, valid for every conversion of it.
//!
//! `tessera sign` hashes every tensor ([`crate::identity`]), writes the per-tensor
//! digests and the identity into a manifest, and signs the manifest with Ed25519. Because
//! the digests cover what readers hand out and not the container, the signature still
//! verifies after the model is converted to any other format, resharded, or rewritten;
//! a changed byte, name, dtype, shape or layout, a missing tensor or an added one fails
//! it, naming the tensor. Verifying only some tensors (`--tensor NAME`) hashes only
//! those: the manifest is signed as a whole, so the other entries need not be read.
//!
//! # The signature file (`tessera-signed-manifest/1`)
//!
//! A JSON object:
//!
//! ```json
//! {
//!   "type": "tessera-signed-manifest/1",
//!   "manifest": {
//!     "id": "blake3:…",
//!     "metadata": null,
//!     "tensors": [{"name": "w", "dtype": "f32", "shape": [2, 3],
//!                  "layout": "dense", "digest": "blake3:…"}]
//!   },
//!   "signature": {"algorithm": "ed25519", "public_key": "<64 hex>", "value": "<128 hex>"}
//! }
//! ```
//!
//! With an ECDSA P-256 key (`tessera keygen --algorithm ecdsa-p256`, or any PEM P-256 key
//! such as OpenSSF model-signing uses) the `signature` is `{"algorithm": "ecdsa-p256",
//! "public_key": <66 hex: the compressed SEC1 point>, "value": <128 hex: r ‖ s>}`, an
//! ECDSA signature with SHA-256 over the same message.
//!
//! The signed message is `"tessera-signed-manifest/1\0"` followed by the manifest
//! re-encoded canonically (the object above with exactly those keys in that order, no
//! whitespace, serde_json's string escaping), so whitespace or key order added by
//! another tool does not matter. The manifest's `id` must equal the identity recomputed
//! from its own entries ([`crate::identity::identity`]): the identity and the entries
//! cannot disagree. Tensors are listed in name order; duplicates are refused.

pub mod bundle;
pub mod ed25519;
pub mod embed;
pub mod files;
pub mod key;

use std::collections::HashMap;

use ed25519_dalek::{Signer, SigningKey, Verifier, VerifyingKey};
use key::{PublicKey, SecretKey};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::identity::{self, Digest, TensorId};
use crate::model::TensorSource;
use crate::verify::{Status, VerifyReport};

/// The `type` of a signature file.
pub const TYPE: &str = "tessera-signed-manifest/1";
/// The layer name in verify reports.
pub const LAYER: &str = "signed manifest";
/// Signature files larger than this are refused before parsing.
pub const MAX_SIGNATURE_FILE: u64 = 256 << 20;
pub use crate::verify::NO_SIGNATURE;

/// Whether `layer` is one that checks a signature: WTXT's `signature`, [`LAYER`] (a
/// signed manifest, detached or embedded), [`bundle::LAYER`] (model-signing).
pub fn is_signature_layer(layer: &str) -> bool {
    layer == "signature" || layer == LAYER || layer == bundle::LAYER
}

/// With a trusted key given, a signature is required: when no check of `report` checked
/// a signature with it (passed or failed), a failure is put first, [`NO_SIGNATURE`]. A
/// file that carries no signature, or whose signature a conversion dropped, never
/// passes a verification that names a key.
pub fn require_signature(report: &mut VerifyReport) {
    let checked = report
        .checks
        .iter()
        .any(|c| is_signature_layer(&c.layer) && matches!(c.status, Status::Ok | Status::Failed));
    if !checked {
        let mut r = VerifyReport::default();
        r.failed("signature", "signature", NO_SIGNATURE);
        r.checks.append(&mut report.checks);
        report.checks = r.checks;
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    #[serde(rename = "type")]
    kind: String,
    manifest: ManifestDoc,
    signature: SignatureDoc,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestDoc {
    id: String,
    metadata: Option<String>,
    tensors: Vec<EntryDoc>,
    /// The page manifest signed with the tensors ([`crate::pages::PageManifest::digest`]);
    /// absent (not null) when none was, so manifests signed without one encode as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pages: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryDoc {
    name: String,
    dtype: String,
    shape: Vec<u64>,
    layout: String,
    digest: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignatureDoc {
    algorithm: String,
    public_key: String,
    value: String,
}

/// A tensor manifest: the model's identity and per-tensor digests (what Tessera signs,
/// in its own signature file or inside an OpenSSF model-signing bundle).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The identity (see [`crate::identity`]).
    pub id: Digest,
    /// The metadata digest, when the signer included metadata.
    pub metadata: Option<Digest>,
    /// Per-tensor entries, in name order.
    pub tensors: Vec<TensorId>,
    /// The digest of the page manifest signed with it, if any.
    pub pages: Option<Digest>,
}

impl Manifest {
    /// The manifest of a computed identity.
    pub fn of(id: &identity::ModelId) -> Manifest {
        Manifest {
            id: id.root,
            metadata: id.metadata,
            tensors: id.tensors.clone(),
            pages: None,
        }
    }

    fn to_doc(&self) -> ManifestDoc {
        manifest_doc(self.id, self.metadata, &self.tensors, self.pages)
    }

    /// Checks a parsed manifest's structure: digest syntax, name order, and the id
    /// against its own entries.
    fn from_doc(m: &ManifestDoc) -> Result<Manifest> {
        let bad = |what: String| Error::malformed(format!("signed manifest: {what}"));
        let digest = |s: &str, what: &str| {
            Digest::parse(s).ok_or_else(|| bad(format!("{what}: {s:?} is not blake3:<64 hex>")))
        };
        let mut tensors = Vec::with_capacity(m.tensors.len());
        for e in &m.tensors {
            tensors.push(TensorId {
                name: e.name.clone(),
                dtype: e.dtype.clone(),
                shape: e.shape.clone(),
                layout: e.layout.clone(),
                digest: digest(&e.digest, &format!("tensor {:?}", e.name))?,
            });
        }
        for w in tensors.windows(2) {
            if w[0].name.as_bytes() >= w[1].name.as_bytes() {
                return Err(bad(format!(
                    "tensors out of name order or repeated at {:?}",
                    w[1].name
                )));
            }
        }
        let metadata = m
            .metadata
            .as_deref()
            .map(|s| digest(s, "metadata"))
            .transpose()?;
        let id = digest(&m.id, "id")?;
        let pages = m.pages.as_deref().map(|s| digest(s, "pages")).transpose()?;
        let recomputed = identity::identity(&tensors, metadata);
        if recomputed != id {
            return Err(Error::integrity(format!(
                "signed manifest: the id {id} does not match its own entries ({recomputed})"
            )));
        }
        Ok(Manifest {
            id,
            metadata,
            tensors,
            pages,
        })
    }

    /// Checks `src`'s tensors (or only `only`, hashing only those) against this
    /// manifest, one check per tensor under [`LAYER`]; without `only`, tensors the
    /// manifest lacks and the metadata (when signed) too. Tensors that cannot be read
    /// are failures, not errors. The caller checks the signature over the manifest.
    pub fn check(&self, src: &dyn TensorSource, only: &[String], report: &mut VerifyReport) {
        check_tensors(&self.tensors, self.metadata, src, only, report);
    }
}

/// A signed manifest: the model's identity, its per-tensor digests, and who signed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedManifest {
    /// The identity (see [`crate::identity`]).
    pub id: Digest,
    /// The metadata digest, when the signer included metadata.
    pub metadata: Option<Digest>,
    /// Per-tensor entries, in name order.
    pub tensors: Vec<TensorId>,
    /// The digest of the page manifest signed with the tensors, if any: a page
    /// manifest that matches it is covered by the signature.
    pub pages: Option<Digest>,
    /// The signer's public key.
    pub public_key: PublicKey,
    /// The signature over the manifest's message: 64 bytes for either algorithm
    /// (Ed25519's, or ECDSA's r ‖ s).
    pub signature: [u8; 64],
}

fn manifest_doc(
    id: Digest,
    metadata: Option<Digest>,
    tensors: &[TensorId],
    pages: Option<Digest>,
) -> ManifestDoc {
    ManifestDoc {
        pages: pages.map(|d| d.to_prefixed()),
        id: id.to_prefixed(),
        metadata: metadata.map(|d| d.to_prefixed()),
        tensors: tensors
            .iter()
            .map(|t| EntryDoc {
                name: t.name.clone(),
                dtype: t.dtype.clone(),
                shape: t.shape.clone(),
                layout: t.layout.clone(),
                digest: t.digest.to_prefixed(),
            })
            .collect(),
    }
}

fn message(doc: &ManifestDoc) -> Result<Vec<u8>> {
    let mut msg = TYPE.as_bytes().to_vec();
    msg.push(0);
    serde_json::to_writer(&mut msg, doc)
        .map_err(|e| Error::invalid_input(format!("encoding the manifest: {e}")))?;
    Ok(msg)
}

impl SignedManifest {
    /// Hashes every tensor of `src` (and its metadata when `with_metadata`) and signs the
    /// manifest with `key` (Ed25519 or ECDSA P-256).
    pub fn sign(src: &dyn TensorSource, with_metadata: bool, key: &SecretKey) -> Result<Self> {
        let id = identity::model_id(src, with_metadata)?;
        Self::sign_id(&id, key)
    }

    /// Signs an identity already computed.
    pub fn sign_id(id: &identity::ModelId, key: &SecretKey) -> Result<Self> {
        Self::sign_id_with_pages(id, None, key)
    }

    /// Signs an identity already computed together with a page manifest of the same
    /// tensors (refused, naming the first difference, when its entries are not the
    /// identity's), so that the signature covers every page.
    pub fn sign_id_with_pages(
        id: &identity::ModelId,
        pages: Option<&crate::pages::PageManifest>,
        key: &SecretKey,
    ) -> Result<Self> {
        if let Some(m) = pages {
            same_tensors(&id.tensors, m)?;
        }
        let pages = pages.map(|m| m.digest());
        let doc = manifest_doc(id.root, id.metadata, &id.tensors, pages);
        let msg = message(&doc)?;
        let signature = match key {
            SecretKey::Ed25519(seed) => SigningKey::from_bytes(seed).sign(&msg).to_bytes(),
            SecretKey::EcdsaP256(k) => {
                let sig: p256::ecdsa::Signature = p256::ecdsa::signature::Signer::sign(k, &msg);
                sig.to_bytes().into()
            }
        };
        Ok(SignedManifest {
            id: id.root,
            metadata: id.metadata,
            tensors: id.tensors.clone(),
            pages,
            public_key: key.public(),
            signature,
        })
    }

    fn doc(&self) -> FileDoc {
        FileDoc {
            kind: TYPE.to_string(),
            manifest: manifest_doc(self.id, self.metadata, &self.tensors, self.pages),
            signature: SignatureDoc {
                algorithm: self.public_key.algorithm().into(),
                public_key: self.public_key.to_hex(),
                value: crate::util::hex(&self.signature),
            },
        }
    }

    /// The signature file's text (indented JSON, a final newline).
    pub fn to_json(&self) -> Result<String> {
        let mut s = serde_json::to_string_pretty(&self.doc())
            .map_err(|e| Error::invalid_input(format!("encoding the signature file: {e}")))?;
        s.push('\n');
        Ok(s)
    }

    /// The canonical form of an embedded signature ([`embed::KEY`]): the document of
    /// [`SignedManifest::to_json`], fields in the same order, as compact JSON (one line,
    /// no whitespace between tokens, no trailing newline, non-ASCII kept as UTF-8).
    pub fn to_compact_json(&self) -> Result<String> {
        serde_json::to_string(&self.doc())
            .map_err(|e| Error::invalid_input(format!("encoding the signature: {e}")))
    }

    /// Parses a signature file. Its structure is checked here (type, algorithm, digest
    /// and key syntax, name order, the identity against its entries); the signature
    /// itself is checked by [`SignedManifest::check_signature`].
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        if bytes.len() as u64 > MAX_SIGNATURE_FILE {
            return Err(Error::limit(format!(
                "signature file of {} bytes (at most {MAX_SIGNATURE_FILE})",
                bytes.len()
            )));
        }
        let bad = |what: String| Error::malformed(format!("signature file: {what}"));
        let doc: FileDoc =
            serde_json::from_slice(bytes).map_err(|e| bad(format!("not a {TYPE} file: {e}")))?;
        if doc.kind != TYPE {
            return Err(Error::unsupported(format!(
                "signature file of type {:?}; this reads {TYPE}",
                doc.kind
            )));
        }
        let algorithm = doc.signature.algorithm.as_str();
        if algorithm != key::ED25519 && algorithm != key::ECDSA_P256 {
            return Err(Error::unsupported(format!(
                "signature algorithm {algorithm:?} (this reads {} and {})",
                key::ED25519,
                key::ECDSA_P256
            )));
        }
        let fixed = |s: &str, n: usize, what: &str| {
            crate::util::unhex(s)
                .filter(|v| v.len() == n)
                .ok_or_else(|| bad(format!("{what} is not {} hex digits", 2 * n)))
        };
        let public_key =
            PublicKey::from_hex(algorithm, &doc.signature.public_key).ok_or_else(|| {
                bad(format!(
                    "public_key is not an {algorithm} public key in hex"
                ))
            })?;
        let mut signature = [0u8; 64];
        signature.copy_from_slice(&fixed(&doc.signature.value, 64, "signature value")?);
        let Manifest {
            id,
            metadata,
            tensors,
            pages,
        } = Manifest::from_doc(&doc.manifest)?;
        Ok(SignedManifest {
            id,
            metadata,
            tensors,
            pages,
            public_key,
            signature,
        })
    }

    /// Checks the signature against `public_key` (the key the caller trusts; a manifest
    /// signed by another key fails, saying so).
    pub fn check_signature(&self, public_key: &PublicKey) -> Result<()> {
        if public_key.is_secret_of(&self.public_key) {
            return Err(Error::invalid_input(key::SECRET_KEY_GIVEN));
        }
        if &self.public_key != public_key {
            // Only the signer's keyid: the trusted key came from a file that may not be
            // what it claims, and nothing derived from a secret is ever printed.
            return Err(Error::integrity(format!(
                "signed by the {} key with keyid {}, not by the trusted key",
                self.public_key.algorithm(),
                self.public_key.keyid(),
            )));
        }
        let doc = manifest_doc(self.id, self.metadata, &self.tensors, self.pages);
        let msg = message(&doc)?;
        let ok = match public_key {
            PublicKey::Ed25519(k) => VerifyingKey::from_bytes(k)
                .map_err(|_| Error::invalid_input("not a valid Ed25519 public key"))?
                .verify(&msg, &ed25519_dalek::Signature::from_bytes(&self.signature))
                .is_ok(),
            PublicKey::EcdsaP256(k) => p256::ecdsa::Signature::from_slice(&self.signature)
                .is_ok_and(|sig| p256::ecdsa::signature::Verifier::verify(k, &msg, &sig).is_ok()),
        };
        if ok {
            Ok(())
        } else {
            Err(Error::integrity(format!(
                "the {} signature does not match the manifest",
                public_key.algorithm()
            )))
        }
    }

    /// Verifies `src` against this manifest with the trusted `public_key`: the
    /// signature, then every tensor (or only `only`, hashing only those), each reported
    /// per tensor in the returned report under [`LAYER`]. Tensors that cannot be read are
    /// failures, not errors.
    pub fn verify(
        &self,
        src: &dyn TensorSource,
        public_key: &PublicKey,
        only: &[String],
    ) -> VerifyReport {
        let mut report = VerifyReport::default();
        match self.check_signature(public_key) {
            Ok(()) => report.ok("signature", LAYER),
            Err(e) => {
                report.failed("signature", LAYER, e.message().to_string());
                return report;
            }
        }
        check_tensors(&self.tensors, self.metadata, src, only, &mut report);
        report
    }
}

/// Checks that a page manifest describes exactly `tensors` (same names, dtypes, shapes,
/// layouts and tensor digests).
fn same_tensors(tensors: &[TensorId], m: &crate::pages::PageManifest) -> Result<()> {
    if m.tensors.len() != tensors.len() {
        return Err(Error::invalid_input(format!(
            "the page manifest lists {} tensors, the model has {}: it describes another model",
            m.tensors.len(),
            tensors.len()
        )));
    }
    for (t, p) in tensors.iter().zip(&m.tensors) {
        if *t != p.id {
            return Err(Error::invalid_input(format!(
                "the page manifest's entry for tensor {:?} differs from the model's ({}, {}): \
                 it describes another model",
                p.id.name, p.id.digest, t.digest
            )));
        }
    }
    Ok(())
}

impl SignedManifest {
    /// Whether `m` is the page manifest this signature covers: its digest is the one
    /// signed (and so are its tensor entries). Err says why not.
    pub fn covers_pages(&self, m: &crate::pages::PageManifest) -> Result<()> {
        match self.pages {
            None => Err(Error::integrity(
                "the signature covers no page manifest (signed without --pages)",
            )),
            Some(d) if d != m.digest() => Err(Error::integrity(format!(
                "the page manifest's digest {} is not the one signed ({d}): it was altered \
                 or belongs to another signing",
                m.digest()
            ))),
            Some(_) => same_tensors(&self.tensors, m),
        }
    }
}

fn check_tensors(
    tensors: &[TensorId],
    metadata: Option<Digest>,
    src: &dyn TensorSource,
    only: &[String],
    report: &mut VerifyReport,
) {
    let signed: HashMap<&str, &TensorId> = tensors.iter().map(|t| (t.name.as_str(), t)).collect();
    let present: HashMap<&str, ()> = src
        .tensor_infos()
        .iter()
        .map(|i| (i.name.as_str(), ()))
        .collect();
    let partial = !only.is_empty();
    let wanted: Vec<&str> = if partial {
        only.iter().map(String::as_str).collect()
    } else {
        tensors.iter().map(|t| t.name.as_str()).collect()
    };
    for name in wanted {
        let subject = format!("tensor {name:?}");
        let Some(entry) = signed.get(name) else {
            report.failed(subject, LAYER, "not in the signed manifest");
            continue;
        };
        if !present.contains_key(name) {
            report.failed(subject, LAYER, "signed, but missing from the file");
            continue;
        }
        match src.tensor(name) {
            Ok(view) => {
                let got = identity::tensor_digest(&view);
                if got == entry.digest {
                    report.ok(subject, LAYER);
                } else {
                    report.failed(subject, LAYER, mismatch(entry, &view, got));
                }
            }
            Err(e) => report.failed(subject, LAYER, format!("cannot be read: {e}")),
        }
    }
    if partial {
        let unchecked = src.tensor_infos().len().saturating_sub(only.len());
        if unchecked > 0 {
            report.push(
                format!("{unchecked} other tensors"),
                LAYER,
                Status::NotChecked,
                Some("only the tensors named were verified".into()),
            );
        }
    } else {
        for info in src.tensor_infos() {
            if !signed.contains_key(info.name.as_str()) {
                report.failed(
                    format!("tensor {:?}", info.name),
                    LAYER,
                    "in the file, but not in the signed manifest",
                );
            }
        }
        match metadata {
            Some(want) => {
                let got = identity::metadata_digest(src.metadata());
                if got == want {
                    report.ok("metadata", LAYER);
                } else {
                    report.failed("metadata", LAYER, "the metadata differs from the signed");
                }
            }
            None => report.push(
                "metadata",
                LAYER,
                Status::NotChecked,
                Some("the signer did not include metadata".into()),
            ),
        }
    }
}

/// Says what differs between a signed entry and the tensor read.
fn mismatch(entry: &TensorId, view: &crate::TensorView<'_>, got: Digest) -> String {
    let i = &view.info;
    if i.dtype.name() != entry.dtype {
        format!("dtype {} was signed as {}", i.dtype.name(), entry.dtype)
    } else if i.shape != entry.shape {
        format!("shape {:?} was signed as {:?}", i.shape, entry.shape)
    } else if i.layout.name() != entry.layout {
        format!("layout {} was signed as {}", i.layout.name(), entry.layout)
    } else {
        format!(
            "content digest {got} differs from the signed {}",
            entry.digest
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DType, Model, TensorInfo, TensorView};
    use std::borrow::Cow;

    fn model(v: f32) -> Model {
        let mut m = Model::new();
        for n in ["b", "a"] {
            let bytes: Vec<u8> = [v, 2.0].iter().flat_map(|f| f.to_le_bytes()).collect();
            let info = TensorInfo::dense(n, DType::F32, vec![2]);
            m.push(TensorView::dense(info, Cow::Owned(bytes)).unwrap())
                .unwrap();
        }
        m
    }

    fn keys() -> [SecretKey; 2] {
        [
            SecretKey::Ed25519([7u8; 32]),
            SecretKey::generate(key::ECDSA_P256).unwrap(),
        ]
    }

    #[test]
    fn sign_parse_verify() {
        for key in keys() {
            let public = key.public();
            let s = SignedManifest::sign(&model(1.0), false, &key).unwrap();
            let text = s.to_json().unwrap();
            assert!(text.contains(key.algorithm()), "{text}");
            let back = SignedManifest::parse(text.as_bytes()).unwrap();
            assert_eq!(back, s);
            assert!(back.verify(&model(1.0), &public, &[]).is_ok());
            let r = back.verify(&model(3.0), &public, &[]);
            assert_eq!(r.failures().count(), 2, "{r:?}");
            let others = [
                SecretKey::Ed25519([9u8; 32]),
                SecretKey::generate(key::ECDSA_P256).unwrap(),
            ];
            for other in others {
                assert!(!back.verify(&model(1.0), &other.public(), &[]).is_ok());
            }
        }
    }

    #[test]
    fn a_signature_of_the_other_algorithm_or_a_changed_value_fails() {
        let [ed, ec] = keys();
        let s = SignedManifest::sign(&model(1.0), false, &ec).unwrap();
        // The ECDSA manifest presented as signed by the Ed25519 key: refused.
        let mut swapped = s.clone();
        swapped.public_key = ed.public();
        assert!(swapped.check_signature(&ed.public()).is_err());
        let mut flipped = s.clone();
        flipped.signature[10] ^= 1;
        let e = flipped.check_signature(&ec.public()).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Integrity);
        assert!(e.to_string().contains("ecdsa-p256"), "{e}");
    }

    #[test]
    fn a_tampered_manifest_is_refused() {
        let key = SecretKey::Ed25519([7u8; 32]);
        let public = key.public();
        let s = SignedManifest::sign(&model(1.0), false, &key).unwrap();
        let text = s.to_json().unwrap();
        // Edit one entry's digest: the id no longer matches its entries.
        let d = s.tensors[0].digest.to_prefixed();
        let forged = text.replacen(&d, &Digest([0; 32]).to_prefixed(), 1);
        let e = SignedManifest::parse(forged.as_bytes()).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Integrity, "{e}");
        // Edit the entry and the id consistently: the signature fails.
        let mut t = s.tensors.clone();
        t[0].digest = Digest([0; 32]);
        let id = identity::identity(&t, None);
        let forged = text
            .replacen(&d, &Digest([0; 32]).to_prefixed(), 1)
            .replacen(&s.id.to_prefixed(), &id.to_prefixed(), 1);
        let parsed = SignedManifest::parse(forged.as_bytes()).unwrap();
        assert!(parsed.check_signature(&public).is_err());
    }

    /// Counts the tensors read through it.
    struct Counting<'a>(&'a Model, std::sync::atomic::AtomicUsize);

    impl TensorSource for Counting<'_> {
        fn metadata(&self) -> &crate::Metadata {
            self.0.metadata()
        }
        fn tensor_infos(&self) -> &[TensorInfo] {
            self.0.tensor_infos()
        }
        fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.0.tensor(name)
        }
    }

    #[test]
    fn partial_verification_reads_only_the_named_tensors() {
        let key = SecretKey::Ed25519([7u8; 32]);
        let public = key.public();
        let m = model(1.0);
        let s = SignedManifest::sign(&m, false, &key).unwrap();
        let counting = Counting(&m, std::sync::atomic::AtomicUsize::new(0));
        let r = s.verify(&counting, &public, &["a".to_string()]);
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(counting.1.load(std::sync::atomic::Ordering::Relaxed), 1);
        let r = s.verify(&counting, &public, &[]);
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(counting.1.load(std::sync::atomic::Ordering::Relaxed), 3);
    }
}
