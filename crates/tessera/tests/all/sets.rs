//! Model sets made by the real tools (`data/sets/gen.py`: huggingface_hub's splitter +
//! safetensors.numpy, gguf-py's GGUFWriter with split_max_tensors), read by Tessera and
//! checked against the manifest numpy wrote; and every set-level fault, each refused by
//! a plain open and named by an audit's `verify`.

use crate::common::sets as common;

use std::path::Path;

use common::{data, hex, manifest};
use sha2::{Digest, Sha256};
use tessera::{open_path, ErrorKind, Opened, ReadOptions, Status, VerifyOptions};

fn dtype(numpy: &str) -> &'static str {
    match numpy {
        "float32" => "f32",
        "float16" => "f16",
        "float64" => "f64",
        "int32" => "i32",
        other => panic!("unexpected dtype {other}"),
    }
}

fn check_against_manifest(opened: &Opened, set: &serde_json::Value) {
    let c = opened.container();
    let s = opened.as_set().expect("a set");
    let want = set["tensors"].as_object().unwrap();
    let names: Vec<&str> = c.tensor_infos().iter().map(|t| t.name.as_str()).collect();
    let want_names: Vec<&str> = want.keys().map(String::as_str).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, want_names, "every tensor, once");
    for info in c.tensor_infos() {
        let w = &want[&info.name];
        assert_eq!(info.dtype.to_string(), dtype(w["dtype"].as_str().unwrap()));
        let shape: Vec<u64> = w["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(info.shape, shape, "{}", info.name);
        assert_eq!(s.shard_of(&info.name), w["shard"].as_str(), "{}", info.name);
        let t = c.tensor(&info.name).unwrap();
        let digest = hex(&Sha256::digest(t.data().unwrap()));
        assert_eq!(digest, w["sha256"].as_str().unwrap(), "{}", info.name);
    }
    let shards: Vec<&str> = s.shards().iter().map(|s| s.name.as_str()).collect();
    let want_shards: Vec<&str> = set["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(shards, want_shards);
    for (k, v) in set["metadata"].as_object().unwrap() {
        assert_eq!(
            c.metadata().get(k).map(|m| m.to_json()),
            Some(v.clone()),
            "metadata {k}"
        );
    }
    assert!(c
        .metadata()
        .keys()
        .all(|k| k != "total_size" && !k.starts_with("split.")));
    assert!(c
        .version()
        .contains(&format!("set of {} shards", shards.len())));
    let report = c.verify(&VerifyOptions::default());
    assert!(report.is_ok(), "{report:?}");
    assert!(report
        .checks
        .iter()
        .any(|k| k.subject.starts_with(shards[0]) && k.subject.contains(": ")));
}

#[test]
fn hf_set_opens_by_index_shard_or_directory() {
    let m = manifest();
    let set = &m["hf"];
    let mut ways = vec![data("hf"), data("hf/model.safetensors.index.json")];
    for s in set["shards"].as_array().unwrap() {
        ways.push(data(&format!("hf/{}", s.as_str().unwrap())));
    }
    for p in ways {
        let o = open_path(&p, &ReadOptions::default()).unwrap();
        check_against_manifest(&o, set);
        // Index order: the weight_map's.
        let names: Vec<&str> = o
            .container()
            .tensor_infos()
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(names[0], "embed.weight");
        assert_eq!(*names.last().unwrap(), "scale");
        assert_eq!(o.container().format(), tessera::Format::Safetensors);
    }
}

#[test]
fn gguf_splits_open_by_any_split_or_directory() {
    let m = manifest();
    let set = &m["gguf"];
    let mut ways = vec![data("gguf")];
    for s in set["shards"].as_array().unwrap() {
        ways.push(data(&format!("gguf/{}", s.as_str().unwrap())));
    }
    for p in ways {
        let o = open_path(&p, &ReadOptions::default()).unwrap();
        check_against_manifest(&o, set);
        let names: Vec<&str> = o
            .container()
            .tensor_infos()
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(names[0], "token_embd.weight", "split order");
        assert_eq!(o.container().format(), tessera::Format::Gguf);
    }
}

#[test]
fn a_plain_file_opens_alone() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/safetensors/mixed.safetensors");
    let o = open_path(&p, &ReadOptions::default()).unwrap();
    assert!(o.as_set().is_none());
    assert!(o.file_bytes().is_some());
}

/// Opens `dir` plainly (must fail with `kind`, naming `words`) and for audit (must
/// open, and its verify must fail exactly the layer `layer`).
fn fault(dir: &str, kind: ErrorKind, words: &str, layer: &str) {
    let e = match open_path(&data(dir), &ReadOptions::default()) {
        Ok(_) => panic!("{dir}: opened"),
        Err(e) => e,
    };
    assert_eq!(e.kind(), kind, "{dir}: {e}");
    assert!(e.to_string().contains(words), "{dir}: {e}");
    let audit = ReadOptions::default().audit(true);
    let o = open_path(&data(dir), &audit).unwrap();
    let report = o.container().verify(&VerifyOptions::default());
    let failed: Vec<&str> = report.failures().map(|c| c.layer.as_str()).collect();
    assert!(failed.contains(&layer), "{dir}: {failed:?}");
    assert!(!o.container().warnings().is_empty(), "{dir}");
    // The audit open says why a plain one refuses the set (`tessera inspect` exits
    // with it).
    let refusal = o.as_set().and_then(tessera::ModelSet::refusal);
    let refusal = refusal.unwrap_or_else(|| panic!("{dir}: no refusal"));
    assert_eq!(refusal.kind(), ErrorKind::Integrity, "{dir}: {refusal}");
    assert!(refusal.to_string().contains(layer), "{dir}: {refusal}");
}

#[test]
fn missing_shard() {
    fault(
        "hf_missing_shard",
        ErrorKind::Io,
        "model-00002-of-00004.safetensors",
        "shard present",
    );
    fault(
        "gguf_missing_split",
        ErrorKind::Io,
        "tiny-00002-of-00003.gguf",
        "shard present",
    );
}

#[test]
fn extra_shard_the_index_never_names() {
    fault(
        "hf_unindexed_shard",
        ErrorKind::Integrity,
        "model-00003-of-00004.safetensors (present)",
        "shards indexed",
    );
}

#[test]
fn tensor_the_index_omits() {
    fault(
        "hf_omitted_tensor",
        ErrorKind::Integrity,
        "tensors in shards the index omits",
        "tensors indexed",
    );
}

#[test]
fn tensor_in_two_shards() {
    fault(
        "hf_two_shards",
        ErrorKind::Integrity,
        "in more than one shard",
        "tensors in one shard",
    );
}

#[test]
fn index_naming_a_missing_tensor() {
    fault(
        "hf_missing_tensor",
        ErrorKind::Integrity,
        "\"ghost.weight\"",
        "tensors present",
    );
}

#[test]
fn wrong_split_count() {
    fault(
        "gguf_wrong_count",
        ErrorKind::Integrity,
        "split.count is 4, expected 3",
        "split.count",
    );
}

#[test]
fn truncated_shard() {
    fault(
        "hf_truncated",
        ErrorKind::Malformed,
        "model-00002-of-00004.safetensors",
        "shard present",
    );
    fault(
        "gguf_truncated",
        ErrorKind::Malformed,
        "tiny-00003-of-00003.gguf",
        "shard present",
    );
}

#[test]
fn total_size_mismatch_is_reported_not_fatal() {
    let o = open_path(&data("hf_total_size"), &ReadOptions::default()).unwrap();
    let report = o.container().verify(&VerifyOptions::default());
    let bad: Vec<_> = report.failures().collect();
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(bad[0].layer, "total_size");
    assert!(bad[0].detail.as_deref().unwrap().contains("2185"));
    assert!(report.checks.iter().any(|c| c.status == Status::Ok));
}

#[test]
fn hostile_shard_name_is_refused_even_for_audit() {
    for audit in [false, true] {
        let o = ReadOptions::default().audit(audit);
        let e = open_path(&data("hf_hostile_name"), &o).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::Malformed);
        assert!(e.to_string().contains("../outside.safetensors"), "{e}");
    }
}

#[test]
fn index_over_the_size_limit_is_refused() {
    let mut o = ReadOptions::default();
    o.limits.max_index_bytes = 64;
    let e = open_path(&data("hf/model.safetensors.index.json"), &o)
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
}

#[test]
fn hostile_indexes_built_here() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("model.safetensors.index.json");
    for (text, kind) in [
        (
            r#"{"weight_map": {"a": "/etc/passwd"}}"#,
            ErrorKind::Malformed,
        ),
        (r#"{"weight_map": {"a": ".."}}"#, ErrorKind::Malformed),
        (
            r#"{"weight_map": {"a": "x\\y.safetensors"}}"#,
            ErrorKind::Malformed,
        ),
        (r#"{"weight_map": ["a"]}"#, ErrorKind::Malformed),
        (r#"{"metadata": {}}"#, ErrorKind::Malformed),
        (
            r#"{"weight_map": {"a": "s.safetensors", "a": "s.safetensors"}}"#,
            ErrorKind::Integrity,
        ),
    ] {
        std::fs::write(&idx, text).unwrap();
        let e = open_path(&idx, &ReadOptions::default()).err().unwrap();
        // A duplicate is reported before the (missing) shard is opened only in audit;
        // a plain open fails on the first problem, the missing shard.
        if kind == ErrorKind::Integrity {
            assert_eq!(e.kind(), ErrorKind::Io, "{text}: {e}");
            let audit = ReadOptions::default().audit(true);
            let o = open_path(&idx, &audit).unwrap();
            let r = o.container().verify(&VerifyOptions::default());
            assert!(
                r.failures()
                    .any(|c| c.layer == "index lists each tensor once"),
                "{r:?}"
            );
        } else {
            assert_eq!(e.kind(), kind, "{text}: {e}");
        }
    }
    let mut o = ReadOptions::default();
    o.limits.max_entries = 1;
    std::fs::write(
        &idx,
        r#"{"weight_map": {"a": "s.safetensors", "b": "s.safetensors"}}"#,
    )
    .unwrap();
    let e = open_path(&idx, &o).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
}

#[test]
fn directory_without_a_model_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let e = open_path(dir.path(), &ReadOptions::default())
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert_eq!(e.os_error(), Some(libc::EISDIR), "{e}");
    assert!(e.to_string().contains("no model in it"), "{e}");
}

/// A source whose tensor `bad` fails to read (a digest mismatch, say).
struct Failing<'a> {
    inner: &'a dyn tessera::Container,
    bad: &'a str,
}

impl tessera::TensorSource for Failing<'_> {
    fn metadata(&self) -> &tessera::Metadata {
        self.inner.metadata()
    }
    fn tensor_infos(&self) -> &[tessera::TensorInfo] {
        self.inner.tensor_infos()
    }
    fn tensor(&self, name: &str) -> tessera::Result<tessera::TensorView<'_>> {
        if name == self.bad {
            return Err(tessera::Error::integrity("test: this tensor fails"));
        }
        self.inner.tensor(name)
    }
    fn source_format(&self) -> Option<tessera::Format> {
        self.inner.source_format()
    }
    fn metadata_types(&self) -> Option<&tessera::Metadata> {
        self.inner.metadata_types()
    }
}

#[test]
fn written_sets_read_back_equal() {
    use tessera::set::{convert_set, Split};
    let src = open_path(&data("hf"), &ReadOptions::default()).unwrap();
    let c = src.container();
    for (format, ext, split, shards) in [
        (
            tessera::Format::Safetensors,
            "safetensors",
            Split::MaxBytes(600),
            4,
        ),
        (tessera::Format::Gguf, "gguf", Split::Shards(4), 4),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join(format!("m.{ext}"));
        let r = convert_set(
            c,
            format,
            &out,
            split,
            Default::default(),
            &Default::default(),
        )
        .unwrap();
        let extra = usize::from(format == tessera::Format::Safetensors);
        assert_eq!(r.files.len(), shards + extra, "{:?}", r.files);
        let back = open_path(dir.path(), &ReadOptions::default()).unwrap();
        let b = back.container();
        assert_eq!(back.as_set().unwrap().shards().len(), shards);
        assert!(b.verify(&VerifyOptions::default()).is_ok());
        let names = |c: &dyn tessera::Container| -> Vec<String> {
            c.tensor_infos().iter().map(|t| t.name.clone()).collect()
        };
        assert_eq!(names(b), names(c), "order kept");
        for info in c.tensor_infos() {
            assert_eq!(
                b.tensor(&info.name).unwrap().data().unwrap(),
                c.tensor(&info.name).unwrap().data().unwrap()
            );
        }
        assert_eq!(
            b.metadata().get("producer").and_then(|v| v.as_str()),
            Some("tessera gen.py")
        );
        // No temporary directory left behind.
        let left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}

#[test]
fn a_failed_set_write_leaves_nothing() {
    use tessera::set::{convert_set, Split};
    let src = open_path(&data("hf"), &ReadOptions::default()).unwrap();
    let failing = Failing {
        inner: src.container(),
        bad: "lm_head.weight",
    };
    for format in [tessera::Format::Safetensors, tessera::Format::Gguf] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("m.out");
        let e = convert_set(
            &failing,
            format,
            &out,
            Split::Shards(3),
            Default::default(),
            &Default::default(),
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("this tensor fails"), "{e}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "nothing of the set remains"
        );
    }
}
