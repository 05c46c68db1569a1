//! Verification reports.
//!
//! `verify` runs every integrity layer a format has and reports each one per tensor,
//! chunk or file: [`Status::Ok`], [`Status::Failed`], [`Status::NotChecked`] (a layer
//! is present but we cannot check it, e.g. an unknown digest algorithm),
//! [`Status::Unauthenticated`] (an HMAC or signature slot without a key to check it) or
//! [`Status::Repaired`] (ECC fixed the bytes).

use std::path::PathBuf;

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

/// What `verify` is given beyond the file.
#[derive(Debug, Clone, Default)]
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
}
