//! AEROSET (`model.aeroset.json` + `index.aero` + `part-NNN.aero`): sets written by
//! aerotensor's `write_aeroset` read equal to numpy's values (tests/data/aeroset/, gen.py),
//! parts open lazily, hostile indexes fail naming what and where, and our writer's sets
//! read back, verify, and leave nothing behind when the write fails.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tessera::set::{convert_set, Split};
use tessera::{
    open_path, ConvertOptions, DType, ErrorKind, Format, Metadata, Model, ReadOptions, TensorInfo,
    TensorSource, TensorView, VerifyOptions, WriteOptions,
};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/aeroset")
}

fn expected() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(data().join("expected.json")).unwrap()).unwrap()
}

/// A copy of the aerotensor set in a temporary directory, to damage.
fn copy_set() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(data().join("valid-aerotensor")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, d.path().join(p.file_name().unwrap())).unwrap();
    }
    d
}

fn values_f64(v: &TensorView<'_>) -> Vec<f64> {
    match v.info.dtype {
        DType::F32 => v
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        DType::F64 => v.to_vec::<f64>().unwrap(),
        DType::F16 => (v.to_vec::<half::f16>().unwrap().into_iter())
            .map(f64::from)
            .collect(),
        DType::I8 => v
            .to_vec::<i8>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        DType::I32 => v
            .to_vec::<i32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        d => panic!("no values for {d}"),
    }
}

fn flat(j: &serde_json::Value, out: &mut Vec<serde_json::Value>) {
    match j.as_array() {
        Some(a) => a.iter().for_each(|x| flat(x, out)),
        None => out.push(j.clone()),
    }
}

#[test]
fn a_set_written_by_aerotensor_reads_equal_to_numpy() {
    let want = expected();
    for at in [
        data().join("valid-aerotensor/model.aeroset.json"),
        data().join("valid-aerotensor"),
    ] {
        let opened = open_path(&at, &ReadOptions::default()).unwrap();
        let c = opened.container();
        assert_eq!(c.format(), Format::Aero);
        let order: Vec<&str> = c.tensor_infos().iter().map(|t| t.name.as_str()).collect();
        let want_order: Vec<&str> = (want["order"].as_array().unwrap().iter())
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(order, want_order);
        assert_eq!(
            c.metadata().get("model_name").unwrap().as_str(),
            Some("tiny-set")
        );
        assert_eq!(
            c.metadata().get("architecture").unwrap().as_str(),
            Some("llama")
        );
        for (name, e) in want["tensors"].as_object().unwrap() {
            let v = c.tensor(name).unwrap();
            assert_eq!(v.info.dtype.name(), e["dtype"].as_str().unwrap(), "{name}");
            let shape: Vec<u64> = (e["shape"].as_array().unwrap().iter())
                .map(|d| d.as_u64().unwrap())
                .collect();
            assert_eq!(v.info.shape, shape, "{name}");
            let bytes = &v.parts[0].bytes;
            assert_eq!(
                format!("{:x}", Sha256::digest(bytes)),
                e["sha256"].as_str().unwrap(),
                "{name}"
            );
            if let Some(layout) = e["layout"].as_str() {
                assert_eq!(v.info.layout.to_string(), layout, "{name}");
                assert_eq!(
                    c.tensor_infos()
                        .iter()
                        .find(|t| &t.name == name)
                        .unwrap()
                        .layout,
                    v.info.layout
                );
                continue;
            }
            let mut vals = Vec::new();
            flat(&e["values"], &mut vals);
            if v.info.dtype == DType::Bool {
                let got: Vec<bool> = v.to_vec::<bool>().unwrap();
                let w: Vec<bool> = vals.iter().map(|x| x.as_bool().unwrap()).collect();
                assert_eq!(got, w, "{name}");
            } else {
                let w: Vec<f64> = vals.iter().map(|x| x.as_f64().unwrap()).collect();
                assert_eq!(values_f64(&v), w, "{name}");
            }
        }
        let r = c.verify(&VerifyOptions::default());
        assert!(r.is_ok(), "{r:?}");
        // The parts' SHA-256 and the index's are checked, each part as an AERO file.
        for layer in ["sha256", "size", "phsh", "hash_b3", "ihsh", "global TIDX"] {
            assert!(
                r.checks.iter().any(|c| c.layer == layer),
                "no {layer} check"
            );
        }
    }
}

#[test]
fn parts_are_opened_only_when_a_tensor_in_them_is_read() {
    let d = copy_set();
    std::fs::remove_file(d.path().join("part-002.aero")).unwrap();
    let opened = open_path(
        &d.path().join("model.aeroset.json"),
        &ReadOptions::default(),
    )
    .unwrap();
    let c = opened.container();
    assert_eq!(c.tensor_infos().len(), 9);
    // part-000.aero holds the first tensor; part-002.aero (missing) the last.
    c.tensor("embed.weight").unwrap();
    let e = c.tensor("head.weight").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert!(e.to_string().contains("part-002.aero"), "{e}");
}

/// Edits the copy's JSON index.
fn edit(d: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let p = d.join("model.aeroset.json");
    let mut j: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    f(&mut j);
    std::fs::write(&p, serde_json::to_vec(&j).unwrap()).unwrap();
}

#[test]
fn hostile_indexes_fail_naming_what_and_where() {
    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: Vec<(&str, Edit, ErrorKind, &str)> = vec![
        (
            "global size lies",
            Box::new(|j| j["global_tidx"]["size_bytes"] = 5.into()),
            ErrorKind::Integrity,
            "index.aero",
        ),
        (
            "file url",
            Box::new(|j| j["parts"][0]["path"] = "file:///etc/passwd".into()),
            ErrorKind::Malformed,
            "parts[0]",
        ),
        (
            "subdirectory",
            Box::new(|j| j["parts"][1]["path"] = "sub/part-001.aero".into()),
            ErrorKind::Malformed,
            "parts[1]",
        ),
        (
            "two parts, one path",
            Box::new(|j| j["parts"][1]["path"] = "part-000.aero".into()),
            ErrorKind::Integrity,
            "parts[0] and parts[1]",
        ),
        (
            "shard id not a number",
            Box::new(|j| j["parts"][0]["shards"][0] = "zero".into()),
            ErrorKind::Malformed,
            "parts[0]",
        ),
        (
            "no global_tidx",
            Box::new(|j| {
                j.as_object_mut().unwrap().remove("global_tidx");
            }),
            ErrorKind::Malformed,
            "global_tidx",
        ),
        (
            "bad sha256",
            Box::new(|j| j["parts"][0]["sha256"] = "xyz".into()),
            ErrorKind::Malformed,
            "sha256",
        ),
        (
            "base_url of another scheme",
            Box::new(|j| j["base_url"] = "ftp://example.com/m".into()),
            ErrorKind::Malformed,
            "base_url",
        ),
    ];
    for (what, f, kind, names) in cases {
        let d = copy_set();
        edit(d.path(), f);
        let e = match open_path(
            &d.path().join("model.aeroset.json"),
            &ReadOptions::default(),
        ) {
            Ok(_) => panic!("{what}: opened"),
            Err(e) => e,
        };
        assert_eq!(e.kind(), kind, "{what}: {e}");
        assert!(e.to_string().contains(names), "{what}: {e}");
    }
}

#[test]
fn a_v02_index_with_cache_hints_reads_as_v01() {
    let d = copy_set();
    edit(d.path(), |j| {
        j["format"]["version"] = serde_json::json!([0, 2]);
        j["cache"] = serde_json::json!({"enabled": true, "recommended": true});
    });
    let opened = open_path(
        &d.path().join("model.aeroset.json"),
        &ReadOptions::default(),
    )
    .unwrap();
    assert!(opened.container().tensor("head.weight").is_ok());
}

#[test]
fn a_part_whose_bytes_changed_is_named_by_verify_and_by_the_read() {
    let d = copy_set();
    let p = d.path().join("part-001.aero");
    let mut b = std::fs::read(&p).unwrap();
    // The last byte of part-001's first shard payload region: find "layer.0.scale"'s
    // bytes (f64 1.5) and change one.
    let needle = 1.5f64.to_le_bytes();
    let at = b.windows(8).position(|w| w == needle).unwrap();
    b[at] ^= 1;
    std::fs::write(&p, &b).unwrap();
    let opened = open_path(
        &d.path().join("model.aeroset.json"),
        &ReadOptions::default(),
    )
    .unwrap();
    let c = opened.container();
    let r = c.verify(&VerifyOptions::default());
    let failed: Vec<String> = r
        .failures()
        .map(|c| format!("{} {}", c.subject, c.layer))
        .collect();
    assert!(
        failed.iter().any(|f| f == "part-001.aero sha256"),
        "{failed:?}"
    );
    let e = c.tensor("layer.0.scale").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    assert!(e.to_string().contains("part-001.aero"), "{e}");
    // Without checks the bytes are handed out as stored.
    let o = ReadOptions::default().verify(false);
    let opened = open_path(&d.path().join("model.aeroset.json"), &o).unwrap();
    assert!(opened.container().tensor("layer.0.scale").is_ok());
}

fn model() -> Model {
    let mut m = Model::new();
    m.metadata.insert("model_name", "ours");
    m.metadata.insert("architecture", "mlp");
    for t in 0..7u32 {
        let vals: Vec<f32> = (0..8).map(|i| (t * 10 + i) as f32).collect();
        let info = TensorInfo::dense(format!("t{t}"), DType::F32, vec![8]);
        let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        m.push(TensorView::dense(info, Cow::Owned(bytes)).unwrap())
            .unwrap();
    }
    m
}

#[test]
fn our_sets_read_back_equal_and_verify() {
    let d = tempfile::tempdir().unwrap();
    let index = d.path().join("model.aeroset.json");
    let mut opts = WriteOptions::default().no_fsync(true);
    opts.set(
        "max_part_shards",
        tessera::options::OptionValue::Text("2".into()),
    )
    .unwrap();
    opts.set("tensor_hashes", tessera::options::OptionValue::Bool(true))
        .unwrap();
    opts.set(
        "page_hashes",
        tessera::options::OptionValue::Text("16".into()),
    )
    .unwrap();
    // 7 tensors of 32 bytes, two a shard: 4 shards, 2 parts.
    let m = model();
    let r = convert_set(
        &m,
        Format::Aero,
        &index,
        Split::MaxBytes(64),
        ConvertOptions::default(),
        &opts,
    )
    .unwrap();
    let names: Vec<String> = (r.files.iter())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "part-000.aero",
            "part-001.aero",
            "index.aero",
            "model.aeroset.json"
        ]
    );
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
    assert_eq!(j["format"]["name"], "AEROSET");
    assert_eq!(j["parts"][1]["shards"], serde_json::json!([2, 3]));
    assert_eq!(j["model"]["name"], "ours");
    let opened = open_path(&index, &ReadOptions::default()).unwrap();
    let c = opened.container();
    // AERO keeps metadata as meta.json does: keys sorted.
    for (k, v) in m.metadata.iter() {
        assert_eq!(c.metadata().get(k), Some(v), "{k}");
    }
    assert_eq!(c.metadata().len(), m.metadata.len());
    for t in m.tensor_infos() {
        assert_eq!(
            c.tensor(&t.name).unwrap().data().unwrap(),
            m.tensor(&t.name).unwrap().data().unwrap()
        );
    }
    let v = c.verify(&VerifyOptions::default());
    assert!(v.is_ok(), "{v:?}");
    // Each part is an AERO file by itself, its shards numbered from 0.
    let part = open_path(&d.path().join("part-001.aero"), &ReadOptions::default()).unwrap();
    assert_eq!(part.container().tensor_infos().len(), 3);
    assert_eq!(
        part.container()
            .chunks()
            .iter()
            .filter(|c| c.name == "weights.shard0")
            .count(),
        1
    );
    // The option is refused for one AERO file.
    let e = tessera::convert::convert_file(
        &m,
        Format::Aero,
        &d.path().join("one.aero"),
        ConvertOptions::default(),
        &opts,
    )
    .unwrap_err();
    assert!(e.to_string().contains("max_part_shards"), "{e}");
}

/// A source whose tensor `t5` cannot be read.
struct Failing(Model);

impl TensorSource for Failing {
    fn metadata(&self) -> &Metadata {
        self.0.metadata()
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        self.0.tensor_infos()
    }
    fn tensor(&self, name: &str) -> tessera::Result<TensorView<'_>> {
        if name == "t5" {
            return Err(tessera::Error::integrity("t5 is unreadable"));
        }
        self.0.tensor(name)
    }
}

#[test]
fn a_failed_write_leaves_no_part_and_no_index() {
    let d = tempfile::tempdir().unwrap();
    let index = d.path().join("model.aeroset.json");
    let opts = WriteOptions::default().no_fsync(true);
    let e = convert_set(
        &Failing(model()),
        Format::Aero,
        &index,
        Split::MaxBytes(64),
        ConvertOptions::default(),
        &opts,
    )
    .unwrap_err();
    assert!(e.to_string().contains("t5"), "{e}");
    let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}
