//! Verification reports.
//!
//! `verify` runs every integrity layer a format has and reports each one per tensor,
//! chunk or file: [`Status::Ok`], [`Status::Failed`], [`Status::NotChecked`] (a layer
//! is present but we cannot check it, e.g. an unknown digest algorithm),
//! [`Status::Unauthenticated`] (an HMAC or signature slot without a key to check it) or
//! [`Status::Repaired`] (ECC fixed the bytes).
//!
//! Progress: [`VerifyOptions::progress`] is called as a verify finishes each tensor's
//! (or chunk's) bytes. The measure is the tensors' dense bytes
//! ([`progress_total`]), the same as the CLI's bar on `convert`: each format hands
//! out its tensors' shares as it checks the bytes behind them (a format that checks
//! a tensor's bytes in several passes splits its share between them; one that has
//! nothing to check counts a tensor done when it gets to it), so a whole verify adds
//! up to [`progress_total`] of the file's `tensor_infos()`.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::tensor::TensorInfo;

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    /// The layer holds.
    Ok,
    /// The layer fails: the bytes are not what the file promised.
    Failed,
    /// Present but not checked (unknown algorithm, missing key for a layer that needs one
    /// to be meaningful, …); the detail says why.
    NotChecked,
    /// An authentication layer that could not be checked without a key, or that is
    /// absent (all-zero HMAC slot).
    Unauthenticated,
    /// The bytes failed but error correction restored them.
    Repaired,
}

impl Status {
    /// Lower-case name for output (`ok`, `failed`, `not checked`, …).
    pub const fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::NotChecked => "not checked",
            Status::Unauthenticated => "unauthenticated",
            Status::Repaired => "repaired",
        }
    }
}

/// One check of one layer on one subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What was checked: `tensor "w"`, `chunk "blob"`, `file`, `line 12`, `page 3`…
    pub subject: String,
    /// The layer: `crc32c`, `sha256`, `blake3`, `hmac`, `signature`, `manifest_hash`…
    pub layer: String,
    /// The outcome.
    pub status: Status,
    /// Why, when not plainly ok (expected vs found, bytes repaired, …).
    pub detail: Option<String>,
}

/// All checks of one `verify` run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Checks in file order.
    pub checks: Vec<Check>,
    /// Non-fatal observations (unaligned offsets, newer minor version, …).
    pub warnings: Vec<String>,
}

impl VerifyReport {
    /// Records a check.
    pub fn push(
        &mut self,
        subject: impl Into<String>,
        layer: impl Into<String>,
        status: Status,
        detail: Option<String>,
    ) {
        self.checks.push(Check {
            subject: subject.into(),
            layer: layer.into(),
            status,
            detail,
        });
    }
    /// Records an ok check.
    pub fn ok(&mut self, subject: impl Into<String>, layer: impl Into<String>) {
        self.push(subject, layer, Status::Ok, None);
    }
    /// Records a failed check with its detail.
    pub fn failed(
        &mut self,
        subject: impl Into<String>,
        layer: impl Into<String>,
        detail: impl Into<String>,
    ) {
        self.push(subject, layer, Status::Failed, Some(detail.into()));
    }
    /// Records `ok` or `failed` from a comparison.
    pub fn compare(
        &mut self,
        subject: impl Into<String>,
        layer: impl Into<String>,
        expected: &str,
        found: &str,
    ) {
        if expected.eq_ignore_ascii_case(found) {
            self.ok(subject, layer);
        } else {
            self.failed(
                subject,
                layer,
                format!("expected {expected}, computed {found}"),
            );
        }
    }
    /// True when no check failed.
    pub fn is_ok(&self) -> bool {
        !self.checks.iter().any(|c| c.status == Status::Failed)
    }
    /// The failed checks.
    pub fn failures(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| c.status == Status::Failed)
    }
    /// The checks whose bytes failed but were restored by error correction: the file
    /// reads correctly, and it is damaged.
    pub fn repairs(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| c.status == Status::Repaired)
    }
    /// The checks that compared bytes with a stored digest, MAC or signature (ok,
    /// failed or repaired): what "verified" means. Structure checks, a set's own checks
    /// and layers present but not checked do not count.
    pub fn digest_checks(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| {
            c.status != Status::NotChecked
                && c.status != Status::Unauthenticated
                && layer_kind(&c.layer) == LayerKind::Digest
        })
    }
    /// One line per layer, in the order the layers first appear: how many subjects it
    /// checked, and how many of those failed, were repaired, or were not checked.
    pub fn by_layer(&self) -> Vec<LayerSummary> {
        let mut out: Vec<LayerSummary> = Vec::new();
        for c in &self.checks {
            let i = match out.iter().position(|l| l.layer == c.layer) {
                Some(i) => i,
                None => {
                    out.push(LayerSummary {
                        layer: c.layer.clone(),
                        kind: layer_kind(&c.layer),
                        ok: 0,
                        failed: 0,
                        repaired: 0,
                        not_checked: 0,
                        unauthenticated: 0,
                        why_not: None,
                    });
                    out.len() - 1
                }
            };
            let l = &mut out[i];
            if matches!(c.status, Status::NotChecked | Status::Unauthenticated) {
                // The reason the layer was not checked, when every such check gives one.
                if l.not_checked + l.unauthenticated == 0 {
                    l.why_not = c.detail.clone();
                } else if l.why_not != c.detail {
                    l.why_not = None;
                }
            }
            match c.status {
                Status::Ok => l.ok += 1,
                Status::Failed => l.failed += 1,
                Status::Repaired => l.repaired += 1,
                Status::NotChecked => l.not_checked += 1,
                Status::Unauthenticated => l.unauthenticated += 1,
            }
        }
        out
    }
}

/// What a layer is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayerKind {
    /// Bytes compared with a stored digest, MAC, parity or signature.
    Digest,
    /// The file's structure: offsets, sizes, decoding, sparse indices.
    Structure,
    /// A model set's own checks: shards present, each tensor in the shard its index
    /// names, counts and sizes.
    Set,
}

impl LayerKind {
    /// `digest`, `structure` or `set` (as reports show it).
    pub fn name(self) -> &'static str {
        match self {
            LayerKind::Digest => "digest",
            LayerKind::Structure => "structure",
            LayerKind::Set => "set",
        }
    }
}

/// The detail of the failure a verification with a trusted public key reports when the
/// file carries no signature that key was checked against: a key given means a
/// signature is required.
pub const NO_SIGNATURE: &str = "no signature found for this key";

/// The detail of a failed signature check whose "public" key is the signer's secret key
/// (an untyped Ed25519 key file given as the public key).
pub const SECRET_KEY_GIVEN: &str =
    "the key given as the public key is the signer's secret key, not its public key";

/// Classifies a layer name as the readers report it.
pub fn layer_kind(layer: &str) -> LayerKind {
    match layer {
        // GPTRS's base_id is BLAKE3 of the tensor's name, not of its data: a check of
        // the index, not of the bytes.
        "structure" | "layout" | "data" | "decode" | "zstd" | "uncomp_len" | "checksum"
        | "digest" | "base_id" | "trailing bytes" => LayerKind::Structure,
        "shard present"
        | "shard format"
        | "shard size"
        | "shards indexed"
        | "tensors in one shard"
        | "tensors present"
        | "tensors indexed"
        | "index lists each tensor once"
        | "total_size"
        | "split.no"
        | "split.count"
        | "split.tensors.count" => LayerKind::Set,
        _ => LayerKind::Digest,
    }
}

/// One layer's counts in a [`VerifyReport`] ([`VerifyReport::by_layer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerSummary {
    /// The layer's name.
    pub layer: String,
    /// What the layer is about.
    pub kind: LayerKind,
    /// Subjects that passed.
    pub ok: usize,
    /// Subjects that failed.
    pub failed: usize,
    /// Subjects repaired by error correction.
    pub repaired: usize,
    /// Subjects present but not checked.
    pub not_checked: usize,
    /// Subjects without a key to authenticate them.
    pub unauthenticated: usize,
    /// Why the layer was not checked, when every unchecked subject gives one reason.
    pub why_not: Option<String>,
}

/// A progress hook: called with the bytes just verified, from whichever thread
/// verified them (formats verify in parallel), so it must be `Send + Sync`.
#[derive(Clone)]
pub struct ProgressHook(Arc<dyn Fn(u64) + Send + Sync>);

impl ProgressHook {
    /// Wraps `f`.
    pub fn new(f: impl Fn(u64) + Send + Sync + 'static) -> ProgressHook {
        ProgressHook(Arc::new(f))
    }
    /// Reports `bytes` more done.
    pub fn call(&self, bytes: u64) {
        (self.0)(bytes)
    }
}

impl fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProgressHook(..)")
    }
}

/// What one tensor counts for in a verify's progress: its dense bytes (0 when they
/// overflow `u64`; a reader refuses such a shape anyway).
pub fn progress_bytes(info: &TensorInfo) -> u64 {
    info.dense_nbytes().unwrap_or(0)
}

/// The sum a whole verify reports through [`VerifyOptions::progress`]: the dense bytes
/// of every tensor listed (saturating).
pub fn progress_total(infos: &[TensorInfo]) -> u64 {
    infos
        .iter()
        .fold(0u64, |a, t| a.saturating_add(progress_bytes(t)))
}

/// Share `k` of `n` of `bytes`, for a format that checks a tensor's bytes in `n`
/// passes: the `n` shares add up to `bytes` exactly.
pub fn progress_share(bytes: u64, n: u64, k: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    bytes / n + u64::from(k < bytes % n)
}

/// What `verify` is given beyond the file. Its `Debug` never shows the HMAC key.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct VerifyOptions {
    /// HMAC key (WTXT `hmac=`).
    pub hmac_key: Option<Vec<u8>>,
    /// Ed25519 public key (32 bytes) for signatures.
    pub public_key: Option<[u8; 32]>,
    /// Only the control-plane integrity (AERO IHSH).
    pub control_only: bool,
    /// Only what reading these tensors touches (AERO PHSH pages).
    pub tensors: Vec<String>,
    /// Path of the file, for formats with sibling files (WTXT `.wsum`).
    pub path: Option<PathBuf>,
    /// Called as bytes are verified. The measure is the tensors' dense bytes
    /// ([`progress_bytes`]), whatever their stored form (compressed, quantized,
    /// sparse): over a whole verify the calls add up to [`progress_total`] of the
    /// container's `tensor_infos()` — also with `control_only` or `tensors`, which
    /// count the tensors they skip as done. Chunks that hold no tensors count nothing.
    /// Called from several threads at once where a format verifies in parallel.
    pub progress: Option<ProgressHook>,
}

impl fmt::Debug for VerifyOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let VerifyOptions {
            hmac_key,
            public_key,
            control_only,
            tensors,
            path,
            progress,
        } = self;
        f.debug_struct("VerifyOptions")
            .field(
                "hmac_key",
                &if hmac_key.is_some() {
                    "<redacted>"
                } else {
                    "none"
                },
            )
            .field("public_key", public_key)
            .field("control_only", control_only)
            .field("tensors", tensors)
            .field("path", path)
            .field("progress", progress)
            .finish()
    }
}

crate::setters::setters!(VerifyOptions {
    /// Sets `hmac_key` (WTXT `hmac=`).
    hmac_key: Option<Vec<u8>>,
    /// Sets `public_key`, the Ed25519 public key for signatures.
    public_key: Option<[u8; 32]>,
    /// Sets `control_only`: only the control-plane integrity (AERO IHSH).
    control_only: bool,
    /// Sets `tensors`: only what reading these tensors touches (AERO PHSH pages).
    tensors: Vec<String>,
    /// Sets `path`, the file's path (for sibling files such as WTXT's `.wsum`).
    path: Option<PathBuf>,
    /// Sets `progress`, the hook called as bytes are verified (see `with_progress`).
    progress: Option<ProgressHook>,
});

impl VerifyOptions {
    /// These options with `f` as the progress hook.
    pub fn with_progress(mut self, f: impl Fn(u64) + Send + Sync + 'static) -> VerifyOptions {
        self.progress = Some(ProgressHook::new(f));
        self
    }
    /// Reports `bytes` more verified to the hook, if any (nothing for 0).
    pub fn advance(&self, bytes: u64) {
        if let (Some(p), true) = (&self.progress, bytes > 0) {
            p.call(bytes);
        }
    }
    /// Reports each of `infos` done, one call per tensor: what a format whose verify
    /// has nothing to check in the tensors' bytes does.
    pub fn advance_tensors<'a>(&self, infos: impl IntoIterator<Item = &'a TensorInfo>) {
        if self.progress.is_some() {
            for t in infos {
                self.advance(progress_bytes(t));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_options_debug_never_shows_the_hmac_key() {
        let o = VerifyOptions {
            hmac_key: Some(b"hmac-secret".to_vec()),
            ..VerifyOptions::default()
        };
        let text = format!("{o:?}");
        assert!(
            !text.contains("hmac-secret") && !text.contains("104, 109"),
            "{text}"
        );
        assert!(text.contains("<redacted>"), "{text}");
    }

    #[test]
    fn layers_are_counted_and_structure_is_not_a_digest() {
        let mut r = VerifyReport::default();
        r.ok("tensor \"a\"", "crc32c");
        r.failed("tensor \"b\"", "crc32c", "expected 1, computed 2");
        r.push(
            "tensor \"c\"",
            "digest",
            Status::NotChecked,
            Some("none stored".into()),
        );
        r.push(
            "tensor \"d\"",
            "digest",
            Status::NotChecked,
            Some("none stored".into()),
        );
        r.ok("tensor \"c\"", "structure");
        r.push(
            "chunk \"x\"",
            "sha256",
            Status::Repaired,
            Some("3 bytes fixed".into()),
        );
        let layers = r.by_layer();
        let names: Vec<&str> = layers.iter().map(|l| l.layer.as_str()).collect();
        assert_eq!(names, ["crc32c", "digest", "structure", "sha256"]);
        assert_eq!((layers[0].ok, layers[0].failed), (1, 1));
        assert_eq!(layers[1].not_checked, 2);
        assert_eq!(layers[1].why_not.as_deref(), Some("none stored"));
        assert_eq!(layers[0].why_not, None);
        assert_eq!(layers[2].kind, LayerKind::Structure);
        assert_eq!(layers[3].repaired, 1);
        assert_eq!(r.digest_checks().count(), 3);
        assert_eq!(r.repairs().count(), 1);

        let mut only_structure = VerifyReport::default();
        only_structure.ok("file", "structure");
        only_structure.push("file", "checksum", Status::NotChecked, None);
        only_structure.ok("model.safetensors.index.json", "total_size");
        assert_eq!(only_structure.digest_checks().count(), 0);
    }

    #[test]
    fn shares_add_up_and_the_hook_sums_what_it_is_given() {
        for bytes in [0u64, 1, 2, 7, 1000, u64::MAX] {
            for n in 1..5 {
                let sum = (0..n).fold(0u64, |a, k| a + progress_share(bytes, n, k));
                assert_eq!(sum, bytes, "{bytes} in {n}");
            }
        }
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let o = VerifyOptions::default().with_progress(move |n| s2.lock().unwrap().push(n));
        o.advance(5);
        o.advance(0);
        let a = TensorInfo::dense("a", crate::DType::F32, vec![2, 3]);
        let b = TensorInfo::dense("b", crate::DType::U8, vec![u64::MAX, 2]);
        o.advance_tensors([&a, &b]);
        assert_eq!(*seen.lock().unwrap(), [5, 24]);
        assert_eq!(progress_total(&[a, b]), 24);
        assert_eq!(format!("{:?}", o.progress.unwrap()), "ProgressHook(..)");
        VerifyOptions::default().advance(3); // no hook: nothing happens
    }
}
