//! The vector files in `tests/data/<fmt>/`, every format through one harness.
//!
//! Every file under `tests/data/` is one of:
//!
//! - a **vector** whose expected outcome its name states (one scheme for every format):
//!   `valid-*` / `ok-*` open, every tensor reads (checked), `verify` passes;
//!   `malformed-*`, `limit-*`, `unsupported-*`, `integrity-*` fail, on open or on the
//!   first checked tensor read, with [`ErrorKind::Malformed`], `LimitExceeded`,
//!   `Unsupported` (or `UnsupportedVersion`), `Integrity`; `verify-fail-*` open and
//!   `verify` reports a failure;
//! - a vector (or a directory opened as one set) listed in its folder's `vectors.json`
//!   with the outcome and the reason, for files whose names predate the scheme (or that
//!   other tests reference by name);
//! - a helper file: `gen*.py`, `vectors.json`, `*.golden.json`, or a pattern in the
//!   folder's `vectors.json` `helpers` list.
//!
//! A file that is none of these fails the harness: a new vector is never silently
//! ignored. Failures are collected and reported together, naming the file, what was
//! expected and what happened; a panic is a failure too.
//!
//! The interop samples (`tests/interop-samples/`, written by the reference
//! implementations) join as valid vectors, driven by the list in their `MANIFEST.md`;
//! their goldens live in `tests/data/interop-samples/`, checked against
//! `tests/data/interop-samples/expected.json`, the MANIFEST's notes on each sample
//! transcribed (`gen_expected.py`).
//!
//! Beyond the outcome:
//!
//! - **truncation**: every valid single-file vector cut at a set of points (0, 1, 8, a
//!   few near the start, len/4, len/2, len − 1, …) must fail with an error when opened
//!   and read, never panic and never read as if whole;
//! - **golden output**: the tensor list of every valid vector (name, dtype, shape, layout
//!   and a SHA-256 of each part's bytes; the chunks, by name, type and SHA-256, where
//!   the format has them) is compared with the committed
//!   `<file>.golden.json` beside it; `TESSERA_BLESS=1 cargo test --test vectors`
//!   rewrites them. A golden is written by the code under test, so it is a **change
//!   detector, not a correctness oracle**: where the folder's generator wrote an
//!   independent listing (`expected.json`, `manifest.json`, `*.values.json`, made by the
//!   Python tools that wrote the vectors), every golden is also checked against it, and
//!   a bless refuses to write a golden that disagrees with it.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use serde_json::{json, Value as J};
use sha2::{Digest, Sha256};
use tessera::{Container, ErrorKind, ReadOptions, VerifyOptions};

use crate::common::vectors as classified;
use classified::{data_root, files_under, glob, vectors, Expect, Kind, Vector};

impl Vector {
    fn run(&self) -> Outcome {
        if self.by_bytes {
            run_bytes(&std::fs::read(self.path()).unwrap())
        } else {
            run_path(&self.path())
        }
    }
}

// ---------------------------------------------------------------------------------
// Running a vector
// ---------------------------------------------------------------------------------

/// What opening, reading and verifying a vector did.
#[derive(Debug)]
enum Outcome {
    Panicked(String),
    /// Kind, message, and the format the error names.
    OpenFailed(ErrorKind, String, Option<tessera::Format>),
    Opened {
        /// The first failed checked read: tensor, kind, message.
        read_error: Option<(String, ErrorKind, String)>,
        verify_failures: Vec<String>,
        /// Name, dtype, shape, layout, part digests: for the golden.
        summary: J,
    },
}

impl Outcome {
    fn describe(&self) -> String {
        match self {
            Outcome::Panicked(m) => format!("PANICKED: {m}"),
            Outcome::OpenFailed(k, m, _) => format!("open failed ({}): {m}", k.name()),
            Outcome::Opened {
                read_error: Some((t, k, m)),
                ..
            } => format!("opened; reading {t:?} failed ({}): {m}", k.name()),
            Outcome::Opened {
                verify_failures, ..
            } if !verify_failures.is_empty() => {
                format!(
                    "opened, read; verify failed: {}",
                    verify_failures.join("; ")
                )
            }
            Outcome::Opened { .. } => "opened, read, verified".into(),
        }
    }

    /// The first error on open or read, if any.
    fn error_kind(&self) -> Option<ErrorKind> {
        match self {
            Outcome::OpenFailed(k, ..) => Some(*k),
            Outcome::Opened {
                read_error: Some((_, k, _)),
                ..
            } => Some(*k),
            _ => None,
        }
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".into())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn sha256(b: &[u8]) -> String {
    hex(&Sha256::digest(b))
}

/// Keeps the first read error, but an `Unsupported` one (structural access only) gives
/// way to a later error of another kind.
fn note(slot: &mut Option<(String, ErrorKind, String)>, what: String, e: &tessera::Error) {
    let replace = slot
        .as_ref()
        .is_none_or(|(_, k, _)| *k == ErrorKind::Unsupported && e.kind() != ErrorKind::Unsupported);
    if replace {
        *slot = Some((what, e.kind(), e.to_string()));
    }
}

/// Reads every tensor and chunk (checked), verifies, and lists them.
fn exercise(c: &dyn Container) -> Outcome {
    let mut read_error = None;
    let mut tensors = Vec::new();
    for info in c.tensor_infos() {
        match c.tensor(&info.name) {
            Ok(view) => {
                let parts: serde_json::Map<String, J> = view
                    .parts
                    .iter()
                    .map(|p| (p.role.clone(), J::String(sha256(&p.bytes))))
                    .collect();
                tensors.push(json!({
                    "name": info.name,
                    "dtype": info.dtype.name(),
                    "shape": info.shape,
                    "layout": info.layout.name(),
                    "parts": parts,
                }));
            }
            Err(e) => note(&mut read_error, info.name.clone(), &e),
        }
    }
    // Chunks (FOLD, AERO, …): each reads; their digests join the golden.
    let mut chunks = Vec::new();
    for ch in c.chunks() {
        match c.chunk(&ch.name) {
            Ok(bytes) => chunks.push(json!({
                "name": ch.name,
                "kind": ch.kind,
                "sha256": sha256(&bytes),
            })),
            Err(e) => note(&mut read_error, format!("chunk {}", ch.name), &e),
        }
    }
    let report = c.verify(&VerifyOptions::default());
    let verify_failures = report
        .failures()
        .map(|ch| {
            format!(
                "{} [{}]{}",
                ch.subject,
                ch.layer,
                ch.detail
                    .as_deref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default()
            )
        })
        .collect();
    Outcome::Opened {
        read_error,
        verify_failures,
        summary: {
            let mut j = json!({
                "format": c.format().to_string(),
                "tensors": tensors,
            });
            if !chunks.is_empty() {
                j["chunks"] = J::Array(chunks);
            }
            j
        },
    }
}

fn run_path(path: &Path) -> Outcome {
    catch_unwind(AssertUnwindSafe(|| {
        match tessera::open_path(path, &ReadOptions::default()) {
            Err(e) => Outcome::OpenFailed(e.kind(), e.to_string(), e.format()),
            Ok(opened) => exercise(opened.container()),
        }
    }))
    .unwrap_or_else(|p| Outcome::Panicked(panic_message(p)))
}

fn run_bytes(data: &[u8]) -> Outcome {
    catch_unwind(AssertUnwindSafe(|| {
        match tessera::open(data, &ReadOptions::default()) {
            Err(e) => Outcome::OpenFailed(e.kind(), e.to_string(), e.format()),
            Ok(c) => exercise(c.as_ref()),
        }
    }))
    .unwrap_or_else(|p| Outcome::Panicked(panic_message(p)))
}

/// `None` when the outcome is what the vector expects, else why not.
fn judge(expect: Expect, o: &Outcome) -> Option<String> {
    let ok = match (expect, o) {
        (_, Outcome::Panicked(_)) => false,
        (
            Expect::Valid,
            Outcome::Opened {
                read_error,
                verify_failures,
                ..
            },
        ) => read_error.is_none() && verify_failures.is_empty(),
        (Expect::Reads, Outcome::Opened { read_error, .. }) => read_error.is_none(),
        (Expect::Opens, Outcome::Opened { .. }) => true,
        (Expect::Fails(k), o) => o.error_kind().is_some_and(|e| k.matches(e)),
        (
            Expect::VerifyFail,
            Outcome::Opened {
                verify_failures, ..
            },
        ) => !verify_failures.is_empty(),
        (Expect::Reject, Outcome::OpenFailed(..)) => true,
        (
            Expect::Reject,
            Outcome::Opened {
                read_error,
                verify_failures,
                ..
            },
        ) => {
            read_error
                .as_ref()
                .is_some_and(|(_, k, _)| *k != ErrorKind::Unsupported)
                || !verify_failures.is_empty()
        }
        _ => false,
    };
    (!ok).then(|| o.describe())
}

// ---------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------

#[test]
fn every_data_file_is_a_classified_vector_or_a_helper() {
    let v = vectors();
    // Counts per folder and outcome, to see the coverage at a glance (`--nocapture`).
    let mut counts: BTreeMap<(String, String), usize> = BTreeMap::new();
    for x in &v {
        *counts
            .entry((x.folder.clone(), format!("{:?}", x.expect)))
            .or_default() += 1;
    }
    for ((folder, expect), n) in counts {
        eprintln!("{folder:>14} {expect:<32} {n}");
    }
    assert!(v.len() > 200, "only {} vectors", v.len());
}

#[test]
fn every_vector_gives_the_outcome_it_states() {
    let mut failures = Vec::new();
    let v = vectors();
    for x in &v {
        let o = x.run();
        if let Some(why) = judge(x.expect, &o) {
            failures.push(format!(
                "{}: expected {:?}, got: {why}",
                x.label(),
                x.expect
            ));
        }
        // A file's error on open says which format's reader refused it (a set's may be
        // about the set; no format is known for unknown bytes or a missing file).
        if let Outcome::OpenFailed(k, m, None) = &o {
            let formatless = [ErrorKind::UnknownFormat, ErrorKind::Io];
            if !x.is_dir() && !formatless.contains(k) {
                failures.push(format!("{}: the error names no format: {m}", x.label()));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} vectors failed:\n  {}",
        failures.len(),
        v.len(),
        failures.join("\n  ")
    );
}

/// Where a file of `len` bytes is cut.
fn cut_points(len: usize) -> Vec<usize> {
    let mut v: BTreeSet<usize> = [0, 1, 2, 4, 8, 12, 16, 24, 32, 64]
        .into_iter()
        .chain([len / 4, len / 2, 3 * len / 4, len.saturating_sub(8)])
        .chain([len.saturating_sub(1)])
        .collect();
    v.retain(|&k| k < len);
    v.into_iter().collect()
}

#[test]
fn truncated_valid_vectors_fail_cleanly() {
    let mut failures = Vec::new();
    let mut tolerated = Vec::new();
    let mut n = 0;
    for x in vectors() {
        if !x.expect.has_golden() || x.is_dir() {
            continue;
        }
        let data = std::fs::read(x.path()).unwrap();
        let whole = run_bytes(&data);
        for k in cut_points(data.len()) {
            n += 1;
            let o = run_bytes(&data[..k]);
            match &o {
                Outcome::Panicked(m) => {
                    failures.push(format!("{} cut at {k}: PANICKED: {m}", x.label()))
                }
                Outcome::OpenFailed(..) => {}
                Outcome::Opened {
                    read_error: Some((_, k2, _)),
                    ..
                } if *k2 != ErrorKind::Unsupported => {}
                Outcome::Opened {
                    verify_failures,
                    summary,
                    ..
                } => {
                    let same = matches!(&whole, Outcome::Opened { summary: s, .. } if s == summary);
                    match (&x.truncation_ok, same) {
                        (Some(_), true) => tolerated.push(format!("{} at {k}", x.label())),
                        _ => failures.push(format!(
                            "{} cut at {k} of {}: read {} ({} verify failure(s))",
                            x.label(),
                            data.len(),
                            if same {
                                "the same tensors as the whole file"
                            } else {
                                "DIFFERENT tensors"
                            },
                            verify_failures.len()
                        )),
                    }
                }
            }
        }
    }
    eprintln!(
        "{n} truncations; read whole, as vectors.json allows: {}",
        tolerated.join(", ")
    );
    assert!(
        failures.is_empty(),
        "{} of {n} truncations did not fail cleanly:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}

// ---------------------------------------------------------------------------------
// Golden output, and the independent listings it is checked against
// ---------------------------------------------------------------------------------

/// A tensor as an independent listing states it; `None` fields are not stated.
#[derive(Debug, Default)]
struct Stated {
    dtype: Option<String>,
    shape: Option<Vec<u64>>,
    layout: Option<String>,
    /// Part role → SHA-256 of its bytes.
    parts: BTreeMap<String, String>,
}

fn read_json(path: &Path) -> Option<J> {
    let b = std::fs::read(path).ok()?;
    Some(serde_json::from_slice(&b).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

fn shape_of(j: &J) -> Option<Vec<u64>> {
    j.as_array()?.iter().map(J::as_u64).collect()
}

/// A dtype name in a listing as Tessera names it; `None` when it names no dtype
/// (a GGML block type, a zTensor `f32:complex64` …): then only the bytes are compared.
fn dtype_name(s: &str) -> Option<String> {
    tessera::DType::from_name(s).map(|d| d.name().to_string())
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// `{name: {dtype, shape, hex | sha256}}` (npy, safetensors, pytorch, sets, wtxt).
fn stated_map(tensors: &J) -> BTreeMap<String, Stated> {
    let mut out = BTreeMap::new();
    for (name, t) in tensors.as_object().unwrap() {
        let digest = t["sha256"]
            .as_str()
            .map(str::to_string)
            .or_else(|| t["hex"].as_str().map(|h| sha256(&unhex(h))));
        out.insert(
            name.clone(),
            Stated {
                dtype: t["dtype"].as_str().and_then(dtype_name),
                shape: shape_of(&t["shape"]),
                layout: None,
                parts: digest
                    .into_iter()
                    .map(|d| ("data".to_string(), d))
                    .collect(),
            },
        );
    }
    out
}

/// An independent listing: where it comes from, the tensors it states, and the chunks
/// (name → type and, where stated, SHA-256) when it states them.
struct Listing {
    source: String,
    tensors: BTreeMap<String, Stated>,
    chunks: Option<BTreeMap<String, (String, Option<String>)>>,
}

/// The independent listing for a vector, if one exists.
fn independent(v: &Vector) -> Option<Listing> {
    let (source, tensors) = independent_tensors(v)?;
    let mut chunks = None;
    if v.sample {
        let j = read_json(&data_root().join("interop-samples/expected.json"))?;
        let e = &j[format!("{}/{}", v.folder, v.rel)];
        chunks = e["chunks"].as_object().map(|m| {
            m.iter()
                .map(|(name, c)| {
                    let kind = c["kind"].as_str().unwrap().to_string();
                    let digest = c["sha256"].as_str().map(str::to_string);
                    (name.clone(), (kind, digest))
                })
                .collect()
        });
    }
    Some(Listing {
        source,
        tensors,
        chunks,
    })
}

/// The tensors of a vector's independent listing, if its generator wrote one (or, for
/// an interop sample, its MANIFEST notes transcribed).
fn independent_tensors(v: &Vector) -> Option<(String, BTreeMap<String, Stated>)> {
    let dir = data_root().join(&v.folder);
    let rel = v.rel.as_str();
    if v.sample {
        let j = read_json(&data_root().join("interop-samples/expected.json"))?;
        let e = j.get(format!("{}/{}", v.folder, v.rel))?;
        let mut out = BTreeMap::new();
        for (name, t) in e["tensors"].as_object()? {
            out.insert(
                name.clone(),
                Stated {
                    dtype: t["dtype"].as_str().and_then(dtype_name),
                    shape: shape_of(&t["shape"]),
                    layout: None,
                    parts: t["parts"]
                        .as_object()?
                        .iter()
                        .map(|(r, d)| (r.clone(), d.as_str().unwrap().to_string()))
                        .collect(),
                },
            );
        }
        return Some(("data/interop-samples/expected.json".into(), out));
    }
    match v.folder.as_str() {
        "npy" => {
            let j = read_json(&dir.join("expected.json"))?;
            let t = j.get(rel)?;
            Some(("npy/expected.json".into(), stated_map(t)))
        }
        "hdf5" => {
            let j = read_json(&dir.join("expected.json"))?;
            Some((
                "hdf5/expected.json".into(),
                stated_map(&j.get(rel)?["tensors"]),
            ))
        }
        "safetensors" => {
            let j = read_json(&dir.join("expected.json"))?;
            Some((
                "safetensors/expected.json".into(),
                stated_map(&j.get(rel)?["tensors"]),
            ))
        }
        "onnx" => {
            let j = read_json(&dir.join("expected.json"))?;
            Some((
                "onnx/expected.json".into(),
                stated_map(&j.get(rel)?["tensors"]),
            ))
        }
        "pytorch" => {
            let j = read_json(&dir.join("manifest.json"))?;
            Some((
                "pytorch/manifest.json".into(),
                stated_map(&j.get(rel)?["tensors"]),
            ))
        }
        "sets" => {
            let key = rel.trim_end_matches('/');
            ["manifest.json", "manifest_more.json"]
                .iter()
                .find_map(|m| {
                    let j = read_json(&dir.join(m))?;
                    let tensors = stated_map(&j.get(key)?["tensors"]);
                    Some((format!("sets/{m}"), tensors))
                })
        }
        "aeroset" if rel == "valid-aerotensor/" => {
            let j = read_json(&dir.join("expected.json"))?;
            Some(("aeroset/expected.json".into(), stated_map(&j["tensors"])))
        }
        "dcp" => {
            let j = read_json(&dir.join("expected.json"))?;
            Some((
                "dcp/expected.json".into(),
                stated_map(&j.get(rel)?["tensors"]),
            ))
        }
        "wtxt" => {
            let stem = rel.strip_suffix(".wtxt")?;
            let j = read_json(&dir.join(format!("{stem}.values.json")))?;
            Some((format!("wtxt/{stem}.values.json"), stated_map(&j)))
        }
        "gguf" => {
            let j = read_json(&dir.join("manifest.json"))?;
            let mut out = BTreeMap::new();
            for t in j.get(rel)?["tensors"].as_array()? {
                let ty = t["ggml_type"].as_str().unwrap_or("");
                out.insert(
                    t["name"].as_str().unwrap().to_string(),
                    Stated {
                        dtype: dtype_name(ty),
                        shape: shape_of(&t["shape"]),
                        layout: Some(match dtype_name(ty) {
                            Some(_) => "dense".into(),
                            None => format!("ggml_{}", ty.to_lowercase()),
                        }),
                        parts: t["sha256"]
                            .as_str()
                            .map(|d| ("data".to_string(), d.to_string()))
                            .into_iter()
                            .collect(),
                    },
                );
            }
            Some(("gguf/manifest.json".into(), out))
        }
        "ztensor2" => {
            let (label, tensors) = if rel == "shards/model.zt" {
                let j = read_json(&dir.join("shards/expected.json"))?;
                ("ztensor2/shards/expected.json", j["tensors"].clone())
            } else {
                let j = read_json(&dir.join("expected.json"))?;
                (
                    "ztensor2/expected.json",
                    j["valid"].get(rel)?["tensors"].clone(),
                )
            };
            let mut out = BTreeMap::new();
            for (name, t) in tensors.as_object()? {
                let parts = t["parts"]
                    .as_object()?
                    .iter()
                    .map(|(role, p)| {
                        // Tessera hands sparse indices out as u64; the generator
                        // lists that digest too where the file stores u32.
                        let d = p["sha256_as_u64"]
                            .as_str()
                            .or(p["sha256"].as_str())
                            .or(p.as_str())
                            .unwrap();
                        (role.clone(), d.trim_start_matches("sha256:").to_string())
                    })
                    .collect();
                out.insert(
                    name.clone(),
                    Stated {
                        dtype: t["dtype"].as_str().and_then(dtype_name),
                        shape: shape_of(&t["shape"]),
                        layout: None,
                        parts,
                    },
                );
            }
            Some((label.into(), out))
        }
        _ => None,
    }
}

/// Where a golden disagrees with the independent listing.
fn disagreements(golden: &J, listing: &Listing) -> Vec<String> {
    let stated = &listing.tensors;
    let mut out = Vec::new();
    if let Some(chunks) = &listing.chunks {
        let got: BTreeMap<&str, (&str, &str)> = golden["chunks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let s = |k: &str| c[k].as_str().unwrap_or("");
                (s("name"), (s("kind"), s("sha256")))
            })
            .collect();
        for (name, (kind, digest)) in chunks {
            match got.get(name.as_str()) {
                None => out.push(format!("chunk {name} missing")),
                Some((k, d)) => {
                    if k != kind {
                        out.push(format!("chunk {name}: type {k}, listing says {kind}"));
                    }
                    if digest.as_ref().is_some_and(|x| x != d) {
                        out.push(format!("chunk {name}: sha256 {d}, listing differs"));
                    }
                }
            }
        }
    }
    let tensors = golden["tensors"].as_array().cloned().unwrap_or_default();
    let names: BTreeSet<&str> = tensors.iter().filter_map(|t| t["name"].as_str()).collect();
    let want: BTreeSet<&str> = stated.keys().map(String::as_str).collect();
    if names != want {
        out.push(format!("tensor names {names:?}, listing has {want:?}"));
    }
    for t in &tensors {
        let name = t["name"].as_str().unwrap_or("");
        let Some(s) = stated.get(name) else { continue };
        if let Some(d) = &s.dtype {
            if t["dtype"].as_str() != Some(d) {
                out.push(format!("{name}: dtype {}, listing says {d}", t["dtype"]));
            }
        }
        if let Some(sh) = &s.shape {
            if shape_of(&t["shape"]).as_ref() != Some(sh) {
                out.push(format!("{name}: shape {}, listing says {sh:?}", t["shape"]));
            }
        }
        if let Some(l) = &s.layout {
            if t["layout"].as_str() != Some(l) {
                out.push(format!("{name}: layout {}, listing says {l}", t["layout"]));
            }
        }
        for (role, d) in &s.parts {
            if t["parts"][role].as_str() != Some(d) {
                out.push(format!(
                    "{name}: part {role} sha256 {}, listing says {d}",
                    t["parts"][role]
                ));
            }
        }
    }
    out
}

#[test]
fn golden_tensor_lists_match_and_agree_with_the_independent_listings() {
    let bless = std::env::var_os("TESSERA_BLESS").is_some_and(|v| v == "1");
    let mut failures = Vec::new();
    let (mut checked, mut cross_checked, mut blessed) = (0, 0, 0);
    let vs = vectors();
    let goldens: BTreeSet<PathBuf> = vs
        .iter()
        .filter(|v| v.expect.has_golden())
        .map(Vector::golden_path)
        .collect();
    // A golden without its valid vector is stale.
    let mut all = Vec::new();
    files_under(&data_root(), &data_root(), &mut all);
    for rel in all.iter().filter(|r| r.ends_with(".golden.json")) {
        let p = data_root().join(rel);
        if !goldens.contains(&p) {
            if bless {
                std::fs::remove_file(&p).unwrap();
            } else {
                failures.push(format!("{rel}: no valid vector beside it (stale golden)"));
            }
        }
    }
    for v in vs.iter().filter(|v| v.expect.has_golden()) {
        let o = v.run();
        let Outcome::Opened { summary, .. } = o else {
            failures.push(format!("{}: {}", v.label(), o.describe()));
            continue;
        };
        let listing = independent(v);
        let gp = v.golden_path();
        if bless {
            if let Some(l) = &listing {
                let d = disagreements(&summary, l);
                if !d.is_empty() {
                    failures.push(format!(
                        "{}: not blessed, disagrees with {}: {}",
                        v.label(),
                        l.source,
                        d.join("; ")
                    ));
                    continue;
                }
            }
            let text = serde_json::to_string_pretty(&summary).unwrap() + "\n";
            if std::fs::read_to_string(&gp).ok().as_deref() != Some(&text) {
                std::fs::create_dir_all(gp.parent().unwrap()).unwrap();
                std::fs::write(&gp, text).unwrap();
                blessed += 1;
            }
            continue;
        }
        let Some(golden) = read_json(&gp) else {
            failures.push(format!(
                "{}: no golden (run TESSERA_BLESS=1 cargo test --test vectors)",
                v.label()
            ));
            continue;
        };
        checked += 1;
        if golden != summary {
            failures.push(format!(
                "{}: differs from its golden (TESSERA_BLESS=1 rewrites it)\n    golden: {}\n    now:    {}",
                v.label(),
                golden,
                summary
            ));
        }
        if let Some(l) = &listing {
            cross_checked += 1;
            let d = disagreements(&golden, l);
            if !d.is_empty() {
                failures.push(format!(
                    "{}: golden disagrees with {}: {}",
                    v.label(),
                    l.source,
                    d.join("; ")
                ));
            }
        }
    }
    eprintln!("{checked} goldens checked, {cross_checked} against an independent listing, {blessed} blessed");
    assert!(
        failures.is_empty(),
        "{} golden failure(s):\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}

/// Prints what every file under `tests/data/` does when opened by path, classified or
/// not: a help for writing a `vectors.json` entry
/// (`cargo test --test vectors -- --ignored --nocapture survey`).
#[test]
#[ignore]
fn survey() {
    let mut files = Vec::new();
    files_under(&data_root(), &data_root(), &mut files);
    for rel in files {
        let o = run_path(&data_root().join(&rel));
        let mut d = o.describe();
        d.truncate(200);
        println!("SURVEY {rel} => {d}");
    }
}

/// The harness itself: names map to outcomes, and a wrong outcome is caught.
#[test]
fn the_scheme_and_the_judge_catch_wrong_outcomes() {
    assert_eq!(Expect::from_name("valid-x.aero"), Some(Expect::Valid));
    assert_eq!(Expect::from_name("ok-x.gptrs"), Some(Expect::Valid));
    assert_eq!(
        Expect::from_name("verify-fail-x.aero"),
        Some(Expect::VerifyFail)
    );
    assert_eq!(
        Expect::from_name("limit-x.zt"),
        Some(Expect::Fails(Kind::Limit))
    );
    assert_eq!(Expect::from_name("x.zt"), None);
    assert_eq!(Expect::from_name("read_malformed-x.zt"), None);
    let opened = |read_error: Option<ErrorKind>, verify: bool| Outcome::Opened {
        read_error: read_error.map(|k| ("t".into(), k, "e".into())),
        verify_failures: if verify { vec![] } else { vec!["v".into()] },
        summary: json!({}),
    };
    let failed = |k| Outcome::OpenFailed(k, "e".into(), None);
    let malformed = Expect::Fails(Kind::Malformed);
    assert!(judge(Expect::Valid, &opened(None, true)).is_none());
    assert!(judge(Expect::Valid, &opened(None, false)).is_some());
    assert!(judge(Expect::Valid, &opened(Some(ErrorKind::Integrity), true)).is_some());
    assert!(judge(Expect::Valid, &Outcome::Panicked("p".into())).is_some());
    assert!(judge(malformed, &failed(ErrorKind::Malformed)).is_none());
    assert!(judge(malformed, &opened(Some(ErrorKind::Malformed), true)).is_none());
    assert!(judge(malformed, &failed(ErrorKind::LimitExceeded)).is_some());
    assert!(judge(malformed, &opened(None, false)).is_some());
    assert!(judge(Expect::VerifyFail, &opened(None, true)).is_some());
    assert!(judge(Expect::VerifyFail, &opened(None, false)).is_none());
    assert!(judge(Expect::Reject, &opened(Some(ErrorKind::Unsupported), true)).is_some());
    assert!(judge(Expect::Reject, &opened(Some(ErrorKind::Malformed), true)).is_none());
    let unsupported = Expect::Fails(Kind::Unsupported);
    assert!(judge(unsupported, &failed(ErrorKind::UnsupportedVersion)).is_none());
    assert!(glob("quants/*", "quants/q4_0.f32"));
    assert!(glob("*.pem", "key.pub.pem"));
    assert!(!glob("*.pem", "key.sig"));
}
