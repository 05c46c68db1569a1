//! PyTorch Distributed Checkpoints (tests/data/dcp/, written by torch's
//! `torch.distributed.checkpoint.save` with 1, 2 and 4 ranks: gen_dcp.py): tensors
//! assembled from their chunks equal the full tensors torch saved (expected.json, by
//! SHA-256), non-tensor items are metadata, a directory and its `.metadata` open alike,
//! hostile metadata fails naming the tensor or file, and a checkpoint converts to a
//! safetensors set without torch.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tessera::set::{convert_set, Split};
use tessera::{
    open_path, ConvertOptions, ErrorKind, Format, ReadOptions, TensorSource, Value, VerifyOptions,
    WriteOptions,
};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/dcp")
}

fn expected() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(data().join("expected.json")).unwrap()).unwrap()
}

fn sha(b: &[u8]) -> String {
    crate::common::sets::hex(&Sha256::digest(b))
}

/// Every tensor of `v` read equal (SHA-256 of its bytes) to the full tensor torch saved.
fn check_against_expected(v: &str, c: &dyn TensorSource) {
    let e = expected();
    let want = e[format!("{v}/")]["tensors"].as_object().unwrap().clone();
    assert_eq!(c.tensor_infos().len(), want.len(), "{v}");
    for (name, t) in want {
        let got = c.tensor(&name).unwrap();
        assert_eq!(
            got.info.dtype.name(),
            t["dtype"].as_str().unwrap(),
            "{v} {name}"
        );
        let shape: Vec<u64> = t["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        assert_eq!(got.info.shape, shape, "{v} {name}");
        assert_eq!(
            sha(got.data().unwrap()),
            t["sha256"].as_str().unwrap(),
            "{v} {name}"
        );
    }
}

#[test]
fn one_two_and_four_ranks_read_equal_to_the_tensors_torch_saved() {
    for v in ["valid-r1", "valid-r2", "valid-r4"] {
        let o = open_path(&data().join(v), &ReadOptions::default()).unwrap();
        let c = o.container();
        assert_eq!(c.format(), Format::Dcp, "{v}");
        check_against_expected(v, c);
        let r = c.verify(&VerifyOptions::default());
        assert!(r.is_ok(), "{v}: {r:?}");
    }
}

#[test]
fn non_tensor_items_are_metadata_values() {
    let o = open_path(&data().join("valid-r2"), &ReadOptions::default()).unwrap();
    let m = o.container().metadata();
    // What gen_dcp.py saved: step 7, run_name "tiny-run", blob b"\x00\x01\x02\xff",
    // param_groups [{"lr": 0.001, "betas": (0.9, 0.95), "params": [...]}] (DCP flattens
    // the list and the dict; the tuple is one item).
    assert_eq!(m.get("step"), Some(&Value::Int(7)));
    assert_eq!(m.get("run_name"), Some(&Value::Str("tiny-run".into())));
    assert_eq!(m.get("blob"), Some(&Value::Bytes(vec![0, 1, 2, 0xff])));
    assert_eq!(m.get("optim.param_groups.0.lr"), Some(&Value::Float(0.001)));
    assert_eq!(
        m.get("optim.param_groups.0.betas"),
        Some(&Value::List(vec![Value::Float(0.9), Value::Float(0.95)]))
    );
    assert!(
        o.container().warnings().is_empty(),
        "{:?}",
        o.container().warnings()
    );
}

#[test]
fn the_directory_and_its_metadata_file_open_alike() {
    let dir = open_path(&data().join("valid-r4"), &ReadOptions::default()).unwrap();
    let file = open_path(&data().join("valid-r4/.metadata"), &ReadOptions::default()).unwrap();
    let names = |o: &tessera::Opened| -> Vec<String> {
        o.container()
            .tensor_infos()
            .iter()
            .map(|t| t.name.clone())
            .collect()
    };
    assert_eq!(names(&dir), names(&file));
    assert!(names(&dir).contains(&"optim.state.model.embed.weight.exp_avg".to_string()));
}

fn open_err(v: &str) -> tessera::Error {
    match open_path(&data().join(v), &ReadOptions::default()) {
        Ok(o) => {
            let c = o.container();
            let names: Vec<String> = c.tensor_infos().iter().map(|t| t.name.clone()).collect();
            names
                .iter()
                .find_map(|n| c.tensor(n).err())
                .unwrap_or_else(|| panic!("{v} opened and read"))
        }
        Err(e) => e,
    }
}

#[test]
fn bad_chunks_are_refused_naming_the_tensor() {
    for (v, says) in [
        ("malformed-chunks-gap", "leave a gap"),
        ("malformed-chunks-overlap", "overlap"),
        ("malformed-chunk-past-shape", "pass the shape"),
    ] {
        let e = open_err(v);
        assert_eq!(e.kind(), ErrorKind::Malformed, "{v}: {e}");
        let s = e.to_string();
        assert!(
            s.contains("model.layers.0.attn.q.weight") && s.contains(says),
            "{v}: {s}"
        );
    }
}

#[test]
fn a_missing_distcp_a_range_past_its_end_and_a_bad_crc_are_named() {
    let e = open_err("io-distcp-missing");
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert!(e.to_string().contains("__1_0.distcp"), "{e}");
    let e = open_err("malformed-item-past-file");
    assert!(
        e.to_string().contains("past the file's end") && e.to_string().contains(".distcp"),
        "{e}"
    );
    let e = open_err("integrity-item-crc");
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    // Without checks the damaged bytes are read; verify still finds them.
    let mut o = ReadOptions::default();
    o.verify = false;
    let c = open_path(&data().join("integrity-item-crc"), &o).unwrap();
    c.container()
        .tensor("model.layers.0.attn.q.weight")
        .unwrap();
    let r = c.container().verify(&VerifyOptions::default());
    assert!(!r.is_ok());
}

#[test]
fn a_global_off_the_allow_list_is_refused_not_run() {
    let e = open_err("unsupported-evil-global");
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("refused global posix.system"), "{e}");
    let e = open_err("unsupported-transform");
    assert!(e.to_string().contains("zstd"), "{e}");
}

/// The everyday job: an FSDP checkpoint to a Hugging Face safetensors set, cut by size.
#[test]
fn a_four_rank_checkpoint_converts_to_a_safetensors_set() {
    let o = open_path(&data().join("valid-r4"), &ReadOptions::default()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let path = out.path().join("model.safetensors");
    let r = convert_set(
        o.container(),
        Format::Safetensors,
        &path,
        Split::MaxBytes(200),
        ConvertOptions::default(),
        &WriteOptions::default(),
    )
    .unwrap();
    assert!(r.files.len() > 2, "{:?}", r.files);
    let back = open_path(out.path(), &ReadOptions::default()).unwrap();
    check_against_expected("valid-r4", back.container());
}

/// A model of a few tensors: rows that do not divide by 3 ranks, fewer rows than
/// ranks, a 0-d tensor, an i64 matrix; and metadata of several value types.
fn model() -> tessera::Model {
    use std::borrow::Cow;
    use tessera::{DType, TensorInfo, TensorView};
    let mut m = tessera::Model::new();
    m.metadata.insert("note", "ours");
    m.metadata.insert("step", Value::Int(12));
    m.metadata.insert("blob", Value::Bytes(vec![0, 0xff, 7]));
    let specs: [(&str, DType, Vec<u64>); 4] = [
        ("model.embed.weight", DType::F32, vec![7, 3]),
        ("model.norm.weight", DType::BF16, vec![2]),
        ("optim.state.step", DType::F32, vec![]),
        ("model.ids", DType::I64, vec![4, 2]),
    ];
    for (i, (name, dtype, shape)) in specs.into_iter().enumerate() {
        let n = tessera::tensor::dense_nbytes(dtype, &shape).unwrap() as usize;
        let bytes: Vec<u8> = (0..n).map(|b| (b * 7 + i * 13) as u8).collect();
        m.push(
            TensorView::dense(TensorInfo::dense(name, dtype, shape), Cow::Owned(bytes)).unwrap(),
        )
        .unwrap();
    }
    m
}

fn write_dcp(m: &tessera::Model, dir: &Path, split: Split) -> tessera::Result<Vec<PathBuf>> {
    convert_set(
        m,
        Format::Dcp,
        &dir.join(".metadata"),
        split,
        ConvertOptions::default(),
        &WriteOptions::default(),
    )
    .map(|r| r.files)
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Our checkpoint of 1 and 3 ranks reads back equal, every rank's rows in its own file.
#[test]
fn written_with_one_and_three_ranks_it_reads_back_equal() {
    let m = model();
    for ranks in [1u32, 3] {
        let d = tempfile::tempdir().unwrap();
        let ckpt = d.path().join("ckpt");
        write_dcp(&m, &ckpt, Split::Shards(ranks)).unwrap();
        let mut want = vec![".metadata".to_string()];
        want.extend((0..ranks).map(|r| format!("__{r}_0.distcp")));
        assert_eq!(listing(&ckpt), want);
        let o = open_path(&ckpt, &ReadOptions::default()).unwrap();
        let c = o.container();
        assert_eq!(c.format(), Format::Dcp);
        for t in m.tensor_infos() {
            let got = c.tensor(&t.name).unwrap();
            assert_eq!(got.info.dtype, t.dtype, "{}", t.name);
            assert_eq!(got.info.shape, t.shape, "{}", t.name);
            let want = m.tensor(&t.name).unwrap();
            assert_eq!(
                got.data().unwrap(),
                want.data().unwrap(),
                "{ranks} ranks: {}",
                t.name
            );
        }
        assert_eq!(c.metadata().get("note"), Some(&Value::Str("ours".into())));
        assert_eq!(c.metadata().get("step"), Some(&Value::Int(12)));
        assert_eq!(
            c.metadata().get("blob"),
            Some(&Value::Bytes(vec![0, 0xff, 7]))
        );
        assert!(c.verify(&VerifyOptions::default()).is_ok());
    }
}

#[test]
fn a_smaller_checkpoint_over_a_larger_one_leaves_no_old_rank_behind() {
    let m = model();
    let d = tempfile::tempdir().unwrap();
    write_dcp(&m, d.path(), Split::Shards(3)).unwrap();
    write_dcp(&m, d.path(), Split::Shards(1)).unwrap();
    assert_eq!(listing(d.path()), [".metadata", "__0_0.distcp"]);
}

#[test]
fn a_failed_write_leaves_nothing_and_a_size_is_refused() {
    let mut m = model();
    // A metadata key that is also a tensor's name: refused once the files are begun.
    m.metadata.insert("model.ids", "clash");
    let d = tempfile::tempdir().unwrap();
    let ckpt = d.path().join("ckpt");
    let e = write_dcp(&m, &ckpt, Split::Shards(2)).unwrap_err();
    assert!(e.to_string().contains("model.ids"), "{e}");
    assert!(!ckpt.exists(), "{:?}", listing(&ckpt));
    assert_eq!(listing(d.path()), Vec::<String>::new());
    let e = write_dcp(&model(), &ckpt, Split::MaxBytes(1 << 20)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains("--shards"), "{e}");
}
