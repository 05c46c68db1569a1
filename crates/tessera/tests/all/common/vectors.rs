//! The vector files under `tests/data/` and the interop samples, classified by the one
//! naming scheme (see `vectors.rs`, whose harness runs them; `readback.rs` converts the
//! valid ones).
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{json, Value as J};
use tessera::ErrorKind;

pub fn data_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

// ---------------------------------------------------------------------------------
// Expectations
// ---------------------------------------------------------------------------------

/// What a vector must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Opens, every tensor reads, verify passes.
    Valid,
    /// Opens, every tensor reads; verify is not asserted (the reason says why).
    Reads,
    /// Opens; reads and verify are not asserted (the reason says why).
    Opens,
    /// Open or the first checked read fails with this kind.
    Fails(Kind),
    /// Opens; verify reports at least one failure.
    VerifyFail,
    /// Rejected somehow: an error on open or read, other than `Unsupported` on a read
    /// (structural access), or a verify failure. For corpora that only say "reject".
    Reject,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Malformed,
    Limit,
    /// `Unsupported` or `UnsupportedVersion`.
    Unsupported,
    UnsupportedVersion,
    Integrity,
    UnknownFormat,
    /// A file of a set is missing.
    Io,
}

impl Kind {
    pub fn matches(self, k: ErrorKind) -> bool {
        match self {
            Kind::Malformed => k == ErrorKind::Malformed,
            Kind::Limit => k == ErrorKind::LimitExceeded,
            Kind::Unsupported => k == ErrorKind::Unsupported || k == ErrorKind::UnsupportedVersion,
            Kind::UnsupportedVersion => k == ErrorKind::UnsupportedVersion,
            Kind::Integrity => k == ErrorKind::Integrity,
            Kind::UnknownFormat => k == ErrorKind::UnknownFormat,
            Kind::Io => k == ErrorKind::Io,
        }
    }
}

impl Expect {
    /// From a name (the scheme's prefix, or a `vectors.json` `expect` value).
    pub fn parse(word: &str) -> Option<Expect> {
        Some(match word {
            "valid" | "ok" => Expect::Valid,
            "reads" => Expect::Reads,
            "opens" => Expect::Opens,
            "malformed" => Expect::Fails(Kind::Malformed),
            "limit" => Expect::Fails(Kind::Limit),
            "unsupported" => Expect::Fails(Kind::Unsupported),
            "unsupported-version" => Expect::Fails(Kind::UnsupportedVersion),
            "integrity" => Expect::Fails(Kind::Integrity),
            "unknown-format" => Expect::Fails(Kind::UnknownFormat),
            "io" => Expect::Fails(Kind::Io),
            "verify-fail" => Expect::VerifyFail,
            "reject" => Expect::Reject,
            _ => return None,
        })
    }

    /// The outcome a file name states, by the one naming scheme.
    pub fn from_name(file_name: &str) -> Option<Expect> {
        const PREFIXES: [(&str, &str); 8] = [
            ("valid-", "valid"),
            ("ok-", "ok"),
            ("malformed-", "malformed"),
            ("limit-", "limit"),
            ("unsupported-", "unsupported"),
            ("integrity-", "integrity"),
            ("verify-fail-", "verify-fail"),
            ("unknown-format-", "unknown-format"),
        ];
        PREFIXES
            .iter()
            .find(|(p, _)| file_name.starts_with(p))
            .and_then(|(_, w)| Expect::parse(w))
    }

    /// Whether the file's tensors are listed in a golden (the file reads whole).
    pub fn has_golden(self) -> bool {
        matches!(self, Expect::Valid | Expect::Reads)
    }
}

/// One vector: a file, or a directory opened as a set.
#[derive(Debug, Clone)]
pub struct Vector {
    /// The format folder (`aero`, `npy`, …).
    pub folder: String,
    /// Path relative to the folder; a directory ends in `/`.
    pub rel: String,
    pub expect: Expect,
    /// Truncations of this file may read (the reason), from `vectors.json`.
    pub truncation_ok: Option<String>,
    /// Opened from its bytes alone (`"open": "bytes"`), not by path: no sibling files.
    pub by_bytes: bool,
    /// An interop sample (`tests/interop-samples/<folder>/<rel>`), not a file of
    /// `tests/data/`; its golden lives in `tests/data/interop-samples/<folder>/`.
    pub sample: bool,
}

impl Vector {
    pub fn path(&self) -> PathBuf {
        if self.sample {
            return samples_root().join(&self.folder).join(&self.rel);
        }
        data_root()
            .join(&self.folder)
            .join(self.rel.trim_end_matches('/'))
    }
    pub fn label(&self) -> String {
        let pre = if self.sample { "interop-samples/" } else { "" };
        format!("{pre}{}/{}", self.folder, self.rel)
    }
    pub fn is_dir(&self) -> bool {
        self.rel.ends_with('/')
    }
    pub fn golden_path(&self) -> PathBuf {
        let p = if self.sample {
            data_root().join("interop-samples").join(self.label())
        } else {
            self.path()
        };
        let mut s = p.into_os_string();
        s.push(".golden.json");
        PathBuf::from(s)
    }
}

/// `*` matches any run of characters (including `/`).
pub fn glob(pat: &str, s: &str) -> bool {
    match pat.split_once('*') {
        None => pat == s,
        Some((head, rest)) => {
            let Some(s) = s.strip_prefix(head) else {
                return false;
            };
            (0..=s.len()).any(|i| s.is_char_boundary(i) && glob(rest, &s[i..]))
        }
    }
}

pub fn files_under(dir: &Path, base: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files_under(&p, base, out);
        } else {
            out.push(
                p.strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/"),
            );
        }
    }
}

/// Every vector of every folder, or the list of unclassified files and bad entries.
pub fn classify() -> (Vec<Vector>, Vec<String>) {
    let mut vectors = Vec::new();
    let mut problems = Vec::new();
    let mut folders: Vec<PathBuf> = std::fs::read_dir(data_root())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    folders.sort();
    for dir in folders {
        let folder = dir.file_name().unwrap().to_string_lossy().into_owned();
        let listing: J = match std::fs::read(dir.join("vectors.json")) {
            Ok(b) => {
                serde_json::from_slice(&b).unwrap_or_else(|e| panic!("{folder}/vectors.json: {e}"))
            }
            Err(_) => json!({}),
        };
        let helpers: Vec<String> = listing["helpers"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|h| h["file"].as_str().unwrap_or_else(|| h.as_str().unwrap()))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let listed = listing["vectors"].as_object().cloned().unwrap_or_default();
        let mut used: BTreeSet<String> = BTreeSet::new();
        let mut files = Vec::new();
        files_under(&dir, &dir, &mut files);
        for rel in files {
            let base = rel.rsplit('/').next().unwrap();
            if (base.starts_with("gen") && base.ends_with(".py"))
                || rel == "vectors.json"
                || base.ends_with(".golden.json")
            {
                continue;
            }
            // A listed directory covers every file under it.
            if let Some(d) = listed
                .keys()
                .find(|k| k.ends_with('/') && rel.starts_with(k.as_str()))
            {
                used.insert(d.clone());
                continue;
            }
            if let Some(h) = helpers.iter().find(|h| glob(h, &rel)) {
                used.insert(format!("helper {h}"));
                continue;
            }
            let mut by_bytes = false;
            let (expect, truncation_ok) = if let Some(e) = listed.get(&rel) {
                by_bytes = e["open"] == "bytes";
                used.insert(rel.clone());
                let word = e["expect"].as_str().unwrap_or("");
                if e["why"].as_str().is_none_or(str::is_empty) {
                    problems.push(format!("{folder}/{rel}: vectors.json entry has no \"why\""));
                }
                match Expect::parse(word) {
                    Some(x) => (x, e["truncation_ok"].as_str().map(str::to_string)),
                    None => {
                        problems.push(format!("{folder}/{rel}: unknown expect {word:?}"));
                        continue;
                    }
                }
            } else if let Some(x) = Expect::from_name(base) {
                (x, None)
            } else {
                problems.push(format!(
                    "{folder}/{rel}: unclassified (name it by the scheme, list it in \
                     {folder}/vectors.json, or list it there as a helper)"
                ));
                continue;
            };
            vectors.push(Vector {
                folder: folder.clone(),
                rel,
                expect,
                truncation_ok,
                by_bytes,
                sample: false,
            });
        }
        for (k, e) in &listed {
            if k.ends_with('/') {
                let Some(x) = Expect::parse(e["expect"].as_str().unwrap_or("")) else {
                    problems.push(format!("{folder}/{k}: unknown expect {:?}", e["expect"]));
                    continue;
                };
                if used.contains(k) {
                    vectors.push(Vector {
                        folder: folder.clone(),
                        rel: k.clone(),
                        expect: x,
                        truncation_ok: None,
                        by_bytes: false,
                        sample: false,
                    });
                }
            }
            if !used.contains(k) {
                problems.push(format!(
                    "{folder}/vectors.json lists {k}, which is not there"
                ));
            }
        }
        for h in &helpers {
            if !used.contains(&format!("helper {h}")) {
                problems.push(format!("{folder}/vectors.json: helper {h} matches nothing"));
            }
        }
    }
    vectors.sort_by_key(|v| v.label());
    (vectors, problems)
}

pub fn samples_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop-samples")
}

/// The interop samples the MANIFEST lists (`interop_manifest.rs` checks that the list is
/// exactly the files, with their SHA-256). Each was written by the reference
/// implementation and must read whole and verify: the MANIFEST's notes say so even for
/// `…_BROKEN_ECC.fold`, whose CRC and SHA-256 pass.
pub fn interop_samples() -> Vec<Vector> {
    let text = std::fs::read_to_string(samples_root().join("MANIFEST.md")).unwrap();
    let list = text
        .split("\nsha256:\n")
        .nth(1)
        .expect("MANIFEST has a sha256: list");
    let mut out: Vec<Vector> = list
        .lines()
        .filter_map(|l| {
            let (hex, name) = l.split_once("  ")?;
            (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(name)
        })
        .map(|name| {
            let (folder, rel) = name.trim().split_once('/').unwrap();
            Vector {
                folder: folder.into(),
                rel: rel.into(),
                expect: Expect::Valid,
                truncation_ok: None,
                by_bytes: false,
                sample: true,
            }
        })
        .collect();
    assert!(out.len() >= 11, "MANIFEST lists {} samples", out.len());
    out.sort_by_key(Vector::label);
    out
}

/// Every vector of `tests/data/`, then the interop samples.
pub fn vectors() -> Vec<Vector> {
    let (mut v, problems) = classify();
    assert!(
        problems.is_empty(),
        "{} problem(s) classifying tests/data:\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
    v.extend(interop_samples());
    v
}
