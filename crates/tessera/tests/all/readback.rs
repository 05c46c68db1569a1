//! The read-back rule (issue 29): whatever a conversion writes without an error, Tessera
//! reads back equal. For every readable source — every valid vector under `tests/data/`
//! and the interop samples, a generated model of every dtype with odd, scalar and empty
//! shapes, sparse tensors and metadata, and a model of two arrays over 16 MiB of odd
//! sizes — and every format Tessera writes, the conversion runs with the options a user
//! would pass after a refusal (`cast`, `densify`, `drop_metadata`, `dequantize`: only
//! those the refusal names). A write refused with an error is fine. A write that
//! succeeds must open, pass `verify`, hold the same tensors — dtype, shape, layout and
//! every part's bytes equal to what the prepared source handed the writer — and the
//! metadata the target can hold. Failures are collected and reported together, each
//! naming the source, the target and the tensor.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use tessera::convert::{capabilities, prepare, write_file, Compression, Digest, MetadataSupport};
use tessera::{
    ConvertOptions, DType, Format, Hint, Layout, Model, ReadOptions, TensorInfo, TensorSource,
    TensorView, Value, VerifyOptions, WriteOptions,
};

use crate::common::matrix;
use crate::common::vectors as classified;

use classified::{vectors, Expect};
use matrix::{model_of, Spec};

/// Every format Tessera writes (single-array formats too: they refuse a model of
/// several tensors, and must write the one-tensor models right).
fn targets() -> Vec<Format> {
    Format::ALL
        .into_iter()
        .filter(|f| f.can_read() && f.can_write())
        .collect()
}

/// The options a user passes after a refusal: each one the refusal's hints name, until
/// the preparation succeeds or no new hint comes (then the refusal stands).
fn user_options(src: &dyn TensorSource, target: Format) -> Option<ConvertOptions> {
    let mut o = ConvertOptions::default();
    for _ in 0..5 {
        let e = match prepare(src, target, o) {
            Ok(_) => return Some(o),
            Err(e) => e,
        };
        let before = o;
        for h in e.hints() {
            o = match h {
                Hint::Cast => o.cast(true),
                Hint::Densify => o.densify(true),
                Hint::DropMetadata => o.drop_metadata(true),
                Hint::Dequantize if o.dequantize.is_none() => o.dequantize(Some(DType::F32)),
                _ => o,
            };
        }
        if o == before {
            return None;
        }
    }
    None
}

fn describe(info: &TensorInfo) -> String {
    format!("{} {:?} {}", info.dtype, info.shape, info.layout)
}

/// Where `got` differs from `want` (dtype, shape, layout, parts by role).
fn tensor_differences(want: &TensorView<'_>, got: &TensorView<'_>) -> Option<String> {
    let (w, g) = (&want.info, &got.info);
    if (w.dtype, &w.shape, &w.layout) != (g.dtype, &g.shape, &g.layout) {
        return Some(format!("wrote {}, read {}", describe(w), describe(g)));
    }
    let mut roles: Vec<&str> = want.parts.iter().map(|p| p.role.as_str()).collect();
    let mut got_roles: Vec<&str> = got.parts.iter().map(|p| p.role.as_str()).collect();
    roles.sort_unstable();
    got_roles.sort_unstable();
    if roles != got_roles {
        return Some(format!("wrote parts {roles:?}, read {got_roles:?}"));
    }
    for p in &want.parts {
        let b = got.part(&p.role).unwrap_or_default();
        if b != p.bytes.as_ref() {
            let at = b.iter().zip(p.bytes.iter()).position(|(x, y)| x != y);
            return Some(format!(
                "part {:?}: {} bytes written, {} read, first difference at {:?}",
                p.role,
                p.bytes.len(),
                b.len(),
                at
            ));
        }
    }
    None
}

/// Whether a metadata value came back as the target holds it: the same value, as JSON
/// (maps compare without their key order: CBOR and MessagePack writers sort keys; bytes
/// are `{"$bytes": hex}` in a format whose metadata is JSON text); in a strings-only
/// format, the string itself or the JSON text of another value.
fn same_value(want: &Value, got: &Value, support: MetadataSupport) -> bool {
    if want.to_json() == got.to_json() {
        return true;
    }
    match (support, got) {
        (MetadataSupport::Strings, Value::Str(s)) => {
            serde_json::from_str::<serde_json::Value>(s).is_ok_and(|j| j == want.to_json())
        }
        _ => false,
    }
}

/// How a conversion went.
enum Outcome {
    /// Refused with an error (a fine outcome).
    Refused,
    /// Written; the problems reading it back (none: read back equal).
    Written(Vec<String>),
}

/// Converts `src` into `target` in `dir` as a user would, and reads the file back.
fn check(src: &dyn TensorSource, target: Format, dir: &Path) -> Outcome {
    check_with(src, target, dir, &WriteOptions::default())
}

/// [`check`] with writer options.
fn check_with(src: &dyn TensorSource, target: Format, dir: &Path, wopts: &WriteOptions) -> Outcome {
    let Some(opts) = user_options(src, target) else {
        return Outcome::Refused;
    };
    let prepared = match prepare(src, target, opts) {
        Ok(p) => p,
        Err(e) => return Outcome::Written(vec![format!("prepare failed the second time: {e}")]),
    };
    let ext = target.extensions().first().copied().unwrap_or("out");
    let path = dir.join(format!("out-{}.{ext}", target.name()));
    let wopts = wopts.clone().no_fsync(true);
    if write_file(target, &prepared, &path, &wopts).is_err() {
        return Outcome::Refused;
    }
    Outcome::Written(read_back(&prepared, target, &path))
}

/// What differs between the file at `path` and the `prepared` source it was written from.
fn read_back(prepared: &dyn TensorSource, target: Format, path: &Path) -> Vec<String> {
    let mut bad = Vec::new();
    let back = match tessera::open_path(path, &ReadOptions::default()) {
        Ok(b) => b,
        Err(e) => return vec![format!("written, but does not open: {e}")],
    };
    let c = back.container();
    if c.format() != target {
        bad.push(format!("written, but read as {}", c.format()));
    }
    for f in c.verify(&VerifyOptions::default()).failures() {
        bad.push(format!(
            "verify: {} [{}] {}",
            f.subject,
            f.layer,
            f.detail.as_deref().unwrap_or("")
        ));
    }
    let mut want_names: Vec<&str> = prepared
        .tensor_infos()
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    let mut got_names: Vec<&str> = c.tensor_infos().iter().map(|t| t.name.as_str()).collect();
    // A single-array format (`.npy`) stores no name: its one array reads as its own.
    let unnamed = target.identity().single_tensor && want_names.len() == 1 && got_names.len() == 1;
    want_names.sort_unstable();
    got_names.sort_unstable();
    if want_names != got_names && !unnamed {
        bad.push(format!("wrote tensors {want_names:?}, read {got_names:?}"));
    }
    for info in prepared.tensor_infos() {
        let name = &info.name;
        let want = match prepared.tensor(name) {
            Ok(v) => v,
            Err(e) => {
                bad.push(format!(
                    "tensor {name:?}: the source did not read again: {e}"
                ));
                continue;
            }
        };
        let read_as = if unnamed { got_names[0] } else { name };
        match c.tensor(read_as) {
            Err(e) => bad.push(format!("tensor {name:?} does not read back: {e}")),
            Ok(got) => {
                if let Some(d) = tensor_differences(&want, &got) {
                    bad.push(format!("tensor {name:?}: {d}"));
                }
            }
        }
    }
    let support = capabilities(target).map_or(MetadataSupport::None, |c| c.metadata);
    if support != MetadataSupport::None {
        for (k, v) in prepared.metadata().iter() {
            match c.metadata().get(k) {
                None => bad.push(format!("metadata {k:?} lost")),
                Some(g) if !same_value(v, g, support) => bad.push(format!(
                    "metadata {k:?}: wrote {}, read {}",
                    v.display_short(),
                    g.display_short()
                )),
                Some(_) => {}
            }
        }
    }
    bad
}

/// `check` with a panic counted as a failure.
fn check_caught(src: &dyn TensorSource, target: Format, dir: &Path) -> Outcome {
    catch_unwind(AssertUnwindSafe(|| check(src, target, dir))).unwrap_or_else(|p| {
        let m = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Outcome::Written(vec![format!("PANICKED: {m}")])
    })
}

/// A source of one tensor of `src`, with `src`'s metadata.
fn one_tensor(src: &dyn TensorSource, name: &str) -> tessera::Result<Model> {
    let mut m = Model::new();
    m.metadata = src.metadata().clone();
    m.push(src.tensor(name)?.into_owned())?;
    Ok(m)
}

/// What the conversions of one test did.
#[derive(Default)]
struct Tally {
    /// Files written (and read back).
    written: usize,
    /// Conversions refused with an error.
    refused: usize,
    /// What did not read back, each naming the source and the target.
    failures: Vec<String>,
}

impl Tally {
    fn add(&mut self, outcome: Outcome, label: &str, target: Format) {
        match outcome {
            Outcome::Refused => self.refused += 1,
            Outcome::Written(problems) => {
                self.written += 1;
                for p in problems {
                    self.failures
                        .push(format!("{label} -> {}: {p}", target.name()));
                }
            }
        }
    }

    /// Fails with every failure; `at_least` files must have been written.
    fn report(&self, what: &str, at_least: usize) {
        eprintln!(
            "{what}: {} files written and read back, {} conversions refused",
            self.written, self.refused
        );
        assert!(
            self.failures.is_empty(),
            "{} conversion(s) of {what} wrote a file that does not read back:\n  {}",
            self.failures.len(),
            self.failures.join("\n  ")
        );
        assert!(
            self.written >= at_least,
            "{what}: only {} files written",
            self.written
        );
    }
}

/// Runs `check` for every target. Where a target refuses the whole source (one tensor
/// it cannot hold refuses the file), each tensor goes alone too, so that what the
/// target does hold is written and read back.
fn through_every_target(label: &str, src: &dyn TensorSource, t: &mut Tally) {
    let dir = tempfile::tempdir().unwrap();
    for target in targets() {
        match check_caught(src, target, dir.path()) {
            Outcome::Refused if src.tensor_infos().len() > 1 => {
                t.refused += 1;
                for info in src.tensor_infos() {
                    if let Ok(m) = one_tensor(src, &info.name) {
                        let alone = format!("{label}, tensor {:?} alone", info.name);
                        t.add(check_caught(&m, target, dir.path()), &alone, target);
                    }
                }
            }
            outcome => t.add(outcome, label, target),
        }
    }
}

#[test]
fn every_valid_vector_reads_back_from_every_target() {
    let mut t = Tally::default();
    let mut n = 0;
    for v in vectors() {
        if v.expect != Expect::Valid {
            continue;
        }
        n += 1;
        let label = v.label();
        if v.by_bytes {
            let data = std::fs::read(v.path()).unwrap();
            match tessera::open(&data, &ReadOptions::default()) {
                Ok(c) => through_every_target(&label, c.as_ref(), &mut t),
                Err(e) => t.failures.push(format!("{label}: does not open: {e}")),
            };
        } else {
            match tessera::open_path(&v.path(), &ReadOptions::default()) {
                Ok(o) => through_every_target(&label, o.container(), &mut t),
                Err(e) => t.failures.push(format!("{label}: does not open: {e}")),
            }
        }
    }
    assert!(n > 100, "only {n} valid vectors");
    t.report("the valid vectors", 1000);
}

fn spec(name: &str, dtype: DType, shape: &[u64], seed: u8) -> Spec {
    Spec {
        name: name.into(),
        dtype,
        shape: shape.to_vec(),
        seed,
    }
}

#[test]
fn every_dtype_and_odd_shape_reads_back_from_every_target() {
    let shapes: [&[u64]; 6] = [&[], &[0], &[3, 0, 2], &[1], &[3, 5, 7], &[2, 1, 3]];
    let mut specs = Vec::new();
    for (i, d) in DType::ALL.into_iter().enumerate() {
        for (j, s) in shapes.iter().enumerate() {
            specs.push(spec(&format!("{d}.{j}"), d, s, (i * 7 + j) as u8));
        }
    }
    let mut t = Tally::default();
    // One model of everything (most targets refuse some dtype and need `cast`), then one
    // model per dtype, so that what a target holds is also written as it is (a refused
    // model goes through tensor by tensor: single-array formats get their one array).
    let mut m = model_of(&specs, true);
    m.metadata.insert("epoch", 3i64);
    m.metadata.insert("nested", {
        let mut n = tessera::Map::new();
        n.insert("lr", 0.5);
        n.insert("tags", Value::List(vec!["a".into(), "b".into()]));
        n
    });
    through_every_target("every dtype", &m, &mut t);
    for d in DType::ALL {
        let one: Vec<Spec> = specs.iter().filter(|s| s.dtype == d).cloned().collect();
        through_every_target(&format!("{d} model"), &model_of(&one, false), &mut t);
    }
    t.report("generated models", 200);
}

/// A CSR and a COO tensor (densified where the target has no sparse layout).
#[test]
fn sparse_tensors_read_back_from_every_target() {
    let u64s = |v: &[u64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let part = |role: &str, bytes: Vec<u8>| tessera::Part {
        role: role.into(),
        bytes: bytes.into(),
    };
    let mut csr = TensorInfo::dense("csr", DType::F32, vec![3, 4]);
    csr.layout = Layout::SparseCsr;
    let mut coo = TensorInfo::dense("coo", DType::F32, vec![2, 3, 5]);
    coo.layout = Layout::SparseCoo;
    let mut m = Model::new();
    m.push(TensorView {
        info: csr,
        parts: vec![
            part("values", f32s(&[1.5, -2.0, 3.0, 4.5])),
            part("indices", u64s(&[1, 3, 0, 2])),
            part("indptr", u64s(&[0, 2, 2, 4])),
        ],
    })
    .unwrap();
    m.push(TensorView {
        info: coo,
        parts: vec![
            part("values", f32s(&[7.0, -8.0, 9.0])),
            part("coords", u64s(&[0, 1, 1, 2, 0, 1, 4, 0, 3])),
        ],
    })
    .unwrap();
    let mut t = Tally::default();
    through_every_target("sparse model", &m, &mut t);
    t.report("a sparse model", 4);
}

/// Two arrays over 16 MiB of odd sizes (WTXT once wrote the chunk across its 16 MiB
/// segment boundary twice): an f32 1500 × 3001 and a bf16 2901 × 3001.
#[test]
fn large_odd_arrays_read_back_from_every_target() {
    let m = model_of(
        &[
            spec("big.f32", DType::F32, &[1500, 3001], 5),
            spec("big.bf16", DType::BF16, &[2901, 3001], 9),
        ],
        false,
    );
    let mut t = Tally::default();
    through_every_target("large model", &m, &mut t);
    // The writers' own ways of cutting large arrays: zstd frames and blocks (zTensor v1
    // and v2, FOLD), digests, WTXT row blocks of an odd number of rows and its HMAC.
    let dir = tempfile::tempdir().unwrap();
    for target in targets() {
        let declares = |o: &str| target.codec().options.iter().any(|s| s.name == o);
        let (mut w, mut how) = (WriteOptions::default(), Vec::new());
        if declares("compression") {
            w = w.compression(Compression::Zstd(1));
            how.push("zstd");
        }
        if declares("digests") {
            w = w.digests(vec![Digest::Sha256]);
            how.push("sha256 digests");
        }
        if declares("rows_per_chunk") {
            w = w.with(
                tessera::formats::wtxt::WtxtOptions::default()
                    .rows_per_chunk(Some(7))
                    .hmac_key(Some(b"key".to_vec())),
            );
            how.push("7 rows per chunk, hmac");
        }
        if !how.is_empty() {
            let label = format!("large model ({})", how.join(", "));
            t.add(check_with(&m, target, dir.path(), &w), &label, target);
        }
    }
    t.report("a model of two arrays over 16 MiB", 12);
}
