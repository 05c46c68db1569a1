//! The CLI verbs on model sets (the test sets of crates/tessera/tests/data/sets, written
//! by huggingface_hub + safetensors and gguf-py): inspect, verify, extract, diff and
//! convert take a set by directory, index or shard; set faults exit as integrity
//! failures; convert --shards / --max-shard-size writes a set.

use std::path::PathBuf;
use std::process::{Command, Output};

fn tessera(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .output()
        .unwrap()
}

fn data(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tessera/tests/data/sets")
        .join(p)
}

use crate::common::text;

#[test]
fn inspect_and_verify_a_set() {
    let o = tessera(&["inspect".as_ref(), data("hf").as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("set of 4 shards"), "{}", text(&o));
    let o = tessera(&[
        "verify".as_ref(),
        data("gguf/tiny-00003-of-00003.gguf").as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("split.count"), "{}", text(&o));
    // A fault: verify names the check and exits as an integrity failure.
    let o = tessera(&["verify".as_ref(), data("hf_two_shards").as_os_str()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("tensors in one shard"), "{}", text(&o));
    // A plain read refuses the set.
    let o = tessera(&[
        "extract".as_ref(),
        data("hf_missing_tensor").as_os_str(),
        "scale".as_ref(),
        "-o".as_ref(),
        std::env::temp_dir()
            .join("tessera-sets-never.npy")
            .as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("ghost.weight"), "{}", text(&o));
}

#[test]
fn convert_a_set_into_a_set_and_diff_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.safetensors");
    let o = tessera(&[
        "convert".as_ref(),
        data("gguf").as_os_str(),
        out.as_os_str(),
        "--shards".as_ref(),
        "2".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(dir.path().join("m.safetensors.index.json").exists());
    assert!(dir.path().join("m-00002-of-00002.safetensors").exists());
    let o = tessera(&[
        "diff".as_ref(),
        data("gguf").as_os_str(),
        dir.path().as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let one = dir.path().join("one.safetensors");
    let o = tessera(&["convert".as_ref(), dir.path().as_os_str(), one.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = tessera(&["diff".as_ref(), data("gguf").as_os_str(), one.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = tessera(&["diff".as_ref(), data("hf").as_os_str(), one.as_os_str()]);
    assert_ne!(o.status.code(), Some(0), "different models differ");
}

#[test]
fn convert_to_shards_with_a_tessera_index_then_verify_names_a_changed_shard() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.fold");
    let o = tessera(&[
        "convert".as_ref(),
        data("hf").as_os_str(),
        out.as_os_str(),
        "--shards".as_ref(),
        "2".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("m.tessera-set.json"), "{}", text(&o));
    let o = tessera(&["inspect".as_ref(), dir.path().as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("Tessera index"), "{}", text(&o));
    let o = tessera(&[
        "diff".as_ref(),
        data("hf").as_os_str(),
        dir.path().as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A byte of shard 2 changed: verify names the shard and the layer.
    let shard = dir.path().join("m-00002-of-00002.fold");
    let mut bytes = std::fs::read(&shard).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    std::fs::write(&shard, bytes).unwrap();
    let o = tessera(&["verify".as_ref(), dir.path().as_os_str()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("shard digest"), "{}", text(&o));
    assert!(text(&o).contains("m-00002-of-00002.fold"), "{}", text(&o));
}

#[test]
fn convert_to_aero_writes_one_file_of_several_shards() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.aero");
    let o = tessera(&[
        "convert".as_ref(),
        data("hf").as_os_str(),
        out.as_os_str(),
        "--shards".as_ref(),
        "3".as_ref(),
        "--page-hashes".as_ref(),
        "64".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "one file"
    );
    let o = tessera(&["inspect".as_ref(), "--json".as_ref(), out.as_os_str()]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let kinds: Vec<&str> = doc["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "WTSH").count(),
        3,
        "{kinds:?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| **k == "PHSH").count(),
        3,
        "{kinds:?}"
    );
    let o = tessera(&["verify".as_ref(), "-v".as_ref(), out.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("weights.shard2"), "{}", text(&o));
    let o = tessera(&["diff".as_ref(), data("hf").as_os_str(), out.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// `dir`'s files laid out as huggingface_hub's cache holds repository `org/name`:
/// `hub/models--org--name/{blobs/<sha256>, refs/main, snapshots/<rev>/<file> ->
/// ../../blobs/<sha256>}`. Returns the snapshot directory.
fn hf_cache(root: &std::path::Path, dir: &std::path::Path) -> PathBuf {
    const REV: &str = "5d0f8c2a91b7e34f6a0c1d2e3f405162738495a6";
    let repo = root.join("hub/models--org--name");
    let snap = repo.join("snapshots").join(REV);
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::write(repo.join("refs/main"), REV).unwrap();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let bytes = std::fs::read(&p).unwrap();
        let blob = tessera::util::hex(&tessera::util::sha256(&bytes));
        std::fs::write(repo.join("blobs").join(&blob), &bytes).unwrap();
        std::os::unix::fs::symlink(
            PathBuf::from("../../blobs").join(&blob),
            snap.join(p.file_name().unwrap()),
        )
        .unwrap();
    }
    snap
}

#[test]
fn inspect_a_hugging_face_cache_snapshot_or_repository_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let snap = hf_cache(tmp.path(), &data("hf"));
    let repo = snap.parent().unwrap().parent().unwrap().to_path_buf();
    for p in [&snap, &repo] {
        let o = tessera(&["inspect".as_ref(), p.as_os_str()]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(text(&o).contains("set of 4 shards"), "{}", text(&o));
    }
    let out = tmp.path().join("one.safetensors");
    let o = tessera(&["convert".as_ref(), repo.as_os_str(), out.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = tessera(&["diff".as_ref(), data("hf").as_os_str(), out.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn inspect_of_a_broken_set_prints_what_it_can_and_fails() {
    for (dir, words) in [
        ("hf_missing_tensor", "ghost.weight"),
        ("hf_missing_shard", "model-00002-of-00004.safetensors"),
        ("hf_two_shards", "tensors in one shard"),
    ] {
        let o = tessera(&["inspect".as_ref(), data(dir).as_os_str()]);
        assert_eq!(o.status.code(), Some(1), "{dir}: {}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("embed.weight"), "{dir}: {out}");
        assert!(out.contains("warning: set check"), "{dir}: {out}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(words), "{dir}: {err}");
        let o = tessera(&["inspect".as_ref(), "--json".as_ref(), data(dir).as_os_str()]);
        assert_eq!(o.status.code(), Some(1), "{dir}: {}", text(&o));
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(!doc["warnings"].as_array().unwrap().is_empty(), "{dir}");
    }
    // An advisory fault (total_size) is printed, not fatal.
    let o = tessera(&["inspect".as_ref(), data("hf_total_size").as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn shard_only_reads_one_shard_on_every_reading_verb() {
    let shard = data("hf/model-00004-of-00004.safetensors");
    let s = shard.as_os_str();
    let so: &std::ffi::OsStr = "--shard-only".as_ref();
    let o = tessera(&["inspect".as_ref(), so, s]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!text(&o).contains("set of"), "{}", text(&o));
    assert!(text(&o).contains("2 tensors"), "{}", text(&o));
    assert!(text(&o).contains("scale"), "{}", text(&o));
    assert!(!text(&o).contains("embed.weight"), "{}", text(&o));
    let o = tessera(&["inspect".as_ref(), s]);
    assert!(text(&o).contains("set of 4 shards"), "{}", text(&o));
    for verb in ["verify", "stats", "id"] {
        let o = tessera(&[verb.as_ref(), so, s]);
        assert_eq!(o.status.code(), Some(0), "{verb}: {}", text(&o));
        assert!(!text(&o).contains("embed.weight"), "{verb}: {}", text(&o));
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("s.npy");
    let o = tessera(&[
        "extract".as_ref(),
        so,
        s,
        "scale".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A tensor of another shard is not in this one.
    let o = tessera(&[
        "extract".as_ref(),
        so,
        s,
        "embed.weight".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let one = tmp.path().join("one.safetensors");
    let o = tessera(&["convert".as_ref(), so, s, one.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = tessera(&["inspect".as_ref(), one.as_os_str()]);
    assert!(text(&o).contains("2 tensors"), "{}", text(&o));
    let o = tessera(&["diff".as_ref(), so, s, one.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A directory or an index is not a shard: a usage error.
    for p in [data("hf"), data("hf/model.safetensors.index.json")] {
        let o = tessera(&["inspect".as_ref(), so, p.as_os_str()]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    }
}

#[test]
fn a_ztensor2_shard_of_the_right_size_and_wrong_bytes_is_refused_by_reads() {
    let src =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tessera/tests/data/ztensor2/shards");
    let tmp = tempfile::tempdir().unwrap();
    for f in ["model.zt", "model-00001.zt", "model-00002.zt"] {
        std::fs::copy(src.join(f), tmp.path().join(f)).unwrap();
    }
    // A padding byte of shard 1 (no part covers it: only the shard digest can tell).
    let shard = tmp.path().join("model-00001.zt");
    let mut b = std::fs::read(&shard).unwrap();
    b[100] ^= 1;
    std::fs::write(&shard, b).unwrap();
    let root = tmp.path().join("model.zt");
    let out = tmp.path().join("out.safetensors");
    let npy = tmp.path().join("t.npy");
    let orig = src.join("model.zt");
    let runs: [Vec<&std::ffi::OsStr>; 3] = [
        vec![
            "convert".as_ref(),
            root.as_os_str(),
            out.as_os_str(),
            "--densify".as_ref(),
        ],
        vec![
            "extract".as_ref(),
            root.as_os_str(),
            "enc.weight".as_ref(),
            "-o".as_ref(),
            npy.as_os_str(),
        ],
        vec!["diff".as_ref(), root.as_os_str(), orig.as_os_str()],
    ];
    for args in &runs {
        let o = tessera(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(text(&o).contains("shard digest"), "{args:?}: {}", text(&o));
        assert!(text(&o).contains("00001"), "{args:?}: {}", text(&o));
    }
    assert!(!out.exists() && !npy.exists());
    // --no-verify reads the bytes as stored, and says so.
    let o = tessera(&[
        "convert".as_ref(),
        "--no-verify".as_ref(),
        "--densify".as_ref(),
        root.as_os_str(),
        out.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}
