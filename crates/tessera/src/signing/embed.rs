//! Signed manifests carried inside the model file, in its metadata (`tessera sign
//! --embed`).
//!
//! The signed manifest is stored as a string under the metadata key [`KEY`]
//! (`tessera.signature`), in its canonical form: the signature file's document as
//! compact JSON ([`super::SignedManifest::to_compact_json`]: one line, no whitespace,
//! no trailing newline; a reader accepts any JSON spelling of it), in any format whose
//! metadata can hold a string: safetensors `__metadata__`, a GGUF key/value, a zTensor attribute,
//! FOLD, AERO and GPTRS metadata. It covers what a detached signature covers — every
//! tensor (name, dtype, shape, layout, bytes) and, when signed with `--metadata`, the
//! metadata **without the `tessera.signature` key itself** — so it stays valid when the
//! file is converted into another format that keeps the key, and `tessera verify FILE
//! --public-key K` finds and checks it. Formats without metadata (NumPy, GPTRS tensor
//! archives, WTXT, which has its own in-file signature) are refused.

use std::borrow::Cow;

use crate::error::{Error, Result};
use crate::metadata::{Metadata, Value};
use crate::model::TensorSource;
use crate::tensor::{ChunkInfo, TensorInfo, TensorView};
use crate::verify::VerifyReport;
use crate::Format;

use super::key::PublicKey;
use super::SignedManifest;

/// The metadata key that holds an embedded signature.
pub const KEY: &str = "tessera.signature";

/// A source seen with other metadata: without the embedded signature (what is signed
/// and checked), or with a new one (what is written).
pub struct Reframed<'a> {
    inner: &'a dyn TensorSource,
    metadata: Metadata,
}

impl<'a> Reframed<'a> {
    /// `inner` without its [`KEY`].
    pub fn without_signature(inner: &'a dyn TensorSource) -> Reframed<'a> {
        let mut metadata = inner.metadata().clone();
        metadata.remove(KEY);
        Reframed { inner, metadata }
    }

    /// `inner` with `signature` (a signature file's text) under [`KEY`], replacing any.
    pub fn with_signature(inner: &'a dyn TensorSource, signature: &str) -> Reframed<'a> {
        let mut r = Reframed::without_signature(inner);
        r.metadata.insert(KEY, signature);
        r
    }
}

impl TensorSource for Reframed<'_> {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        self.inner.tensor_infos()
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        self.inner.tensor(name)
    }
    fn tensors(&self, names: &[&str]) -> Vec<Result<TensorView<'_>>> {
        self.inner.tensors(names)
    }
    fn interrupted(&self) -> Result<()> {
        self.inner.interrupted()
    }
    fn chunks(&self) -> &[ChunkInfo] {
        self.inner.chunks()
    }
    fn chunk(&self, name: &str) -> Result<Cow<'_, [u8]>> {
        self.inner.chunk(name)
    }
    fn source_format(&self) -> Option<Format> {
        self.inner.source_format()
    }
    fn metadata_types(&self) -> Option<&crate::metadata::Map> {
        self.inner.metadata_types()
    }
    fn chunk_stored(&self, name: &str) -> Result<Option<crate::tensor::StoredChunk<'_>>> {
        self.inner.chunk_stored(name)
    }
    fn raw_extent(&self, name: &str) -> Result<Option<crate::slice::RawExtent<'_>>> {
        self.inner.raw_extent(name)
    }
}

/// The signed manifest embedded in `src`, if there is one (parsed, not yet checked).
pub fn embedded(src: &dyn TensorSource) -> Option<Result<SignedManifest>> {
    let value = src.metadata().get(KEY)?;
    Some(match value {
        Value::Str(s) => SignedManifest::parse(s.as_bytes()),
        _ => Err(Error::malformed(format!(
            "metadata {KEY:?} is not a string (an embedded signature is the text of a \
             signature file)"
        ))),
    })
}

/// Checks the signature embedded in `src` with the trusted `key` (all tensors, or only
/// `only`), the metadata without [`KEY`] when it was signed; `None` when `src` carries
/// none.
pub fn verify_embedded(
    src: &dyn TensorSource,
    key: &PublicKey,
    only: &[String],
) -> Option<VerifyReport> {
    let signed = match embedded(src)? {
        Ok(s) => s,
        Err(e) => {
            let mut r = VerifyReport::default();
            r.failed("embedded signature", super::LAYER, e.to_string());
            return Some(r);
        }
    };
    Some(signed.verify(&Reframed::without_signature(src), key, only))
}

/// What a trusted `key` checks in `src` beside the format's own layers (which the caller
/// ran, WTXT's signature with the key among them, into `report`): the embedded signature
/// when there is one, its checks put first, then [`super::require_signature`]: no
/// signature checked with the key is a failure.
pub fn check_with_key(
    src: &dyn TensorSource,
    key: &PublicKey,
    only: &[String],
    report: &mut VerifyReport,
) {
    if let Some(mut r) = verify_embedded(src, key, only) {
        r.checks.append(&mut report.checks);
        report.checks = r.checks;
    }
    super::require_signature(report);
}

/// Refuses a format whose metadata cannot carry an embedded signature, saying why.
pub fn check_format(format: Format) -> Result<()> {
    let caps = crate::convert::capabilities(format).ok_or_else(|| format.not_supported_yet())?;
    if caps.metadata == crate::convert::MetadataSupport::None {
        let hint = match format.codec().own_signature {
            Some(how) => format!(" ({how})"),
            None => "; use a detached signature".to_string(),
        };
        return Err(Error::unsupported(format!(
            "{} files have no metadata to carry a signature{hint}",
            format.title()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reframed_forwards_every_method() {
        let p = crate::model::probe::Probe::new();
        crate::model::probe::check_forwards(&Reframed::without_signature(&p), &[]);
    }
    use crate::signing::key::SecretKey;
    use crate::{DType, Model};

    #[test]
    fn an_embedded_signature_covers_the_metadata_but_not_itself() {
        let mut m = Model::new();
        m.metadata.insert("note", "kept");
        let info = TensorInfo::dense("w", DType::F32, vec![1]);
        m.push(TensorView::dense(info, Cow::Owned(vec![0, 0, 128, 63])).unwrap())
            .unwrap();
        let key = SecretKey::Ed25519([3; 32]);
        let id = crate::identity::model_id(&Reframed::without_signature(&m), true).unwrap();
        let text = SignedManifest::sign_id(&id, &key)
            .unwrap()
            .to_json()
            .unwrap();
        let signed = Reframed::with_signature(&m, &text);
        let r = verify_embedded(&signed, &key.public(), &[]).unwrap();
        assert!(r.is_ok(), "{r:?}");
        // Another metadata value fails the metadata check, named.
        let mut m2 = m.clone();
        m2.metadata.insert("note", "changed");
        let r = verify_embedded(&Reframed::with_signature(&m2, &text), &key.public(), &[]).unwrap();
        assert_eq!(r.failures().count(), 1, "{r:?}");
        assert!(r.failures().all(|c| c.subject == "metadata"), "{r:?}");
        assert!(verify_embedded(&m, &key.public(), &[]).is_none());
        assert!(check_format(Format::Npy).is_err());
        assert!(check_format(Format::Safetensors).is_ok());
    }

    /// A format that signs itself is named with how (its codec's `own_signature`); any
    /// other without metadata points at a detached signature.
    #[test]
    fn a_refusal_says_where_a_signature_can_go() {
        let npy = check_format(Format::Npy).unwrap_err().to_string();
        assert!(npy.ends_with("; use a detached signature"), "{npy}");
        if Format::Wtxt.is_built() {
            let wtxt = check_format(Format::Wtxt).unwrap_err().to_string();
            assert!(
                wtxt.ends_with("(WTXT has its own: tessera wtxt sign)"),
                "{wtxt}"
            );
        }
    }
}
