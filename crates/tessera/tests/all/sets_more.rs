//! Where users' models are, and sets written by other tools (issue 30):
//!
//! - a Hugging Face cache laid out as huggingface_hub lays it out
//!   (`models--org--name/{blobs/<sha256>, refs/main, snapshots/<rev>/<file> ->
//!   ../../blobs/<sha256>}`) opens by its snapshot directory, any link in it, or the
//!   repository folder (through `refs/main`); shards are known by their links' names;
//! - a PyTorch `.bin` set (`pytorch_model.bin.index.json`, shards torch.save wrote:
//!   `data/sets/gen_more.py`) opens as a set, and a directory holding one model as both
//!   safetensors and `.bin` opens the safetensors;
//! - one shard opens alone with `shard_only`;
//! - each shard's own metadata is kept, a key the shards disagree on named in a warning;
//! - a broken set opened for audit says why a plain open refuses it.

use crate::common::sets as common;

use std::path::{Path, PathBuf};

use common::{data, hex, manifest};
use sha2::{Digest, Sha256};
use tessera::{open_path, ErrorKind, Format, Opened, ReadOptions, VerifyOptions};

const REV: &str = "5d0f8c2a91b7e34f6a0c1d2e3f405162738495a6";

/// `files` (paths) laid out as huggingface_hub's cache holds repository `org/name` at
/// revision [`REV`] under `root`: each file's bytes in `blobs/<sha256>`, `refs/main`
/// holding the revision, `snapshots/<rev>/<file name>` a relative link to its blob.
/// Returns the repository folder.
fn hf_cache(root: &Path, files: &[PathBuf]) -> PathBuf {
    let repo = root.join("hub").join("models--org--name");
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    let snap = repo.join("snapshots").join(REV);
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::write(repo.join("refs/main"), REV).unwrap();
    for f in files {
        let bytes = std::fs::read(f).unwrap();
        let blob = hex(&Sha256::digest(&bytes));
        std::fs::write(repo.join("blobs").join(&blob), &bytes).unwrap();
        std::os::unix::fs::symlink(
            Path::new("../../blobs").join(&blob),
            snap.join(f.file_name().unwrap()),
        )
        .unwrap();
    }
    repo
}

/// Every file of a test set directory.
fn files_of(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

fn names(o: &Opened) -> Vec<String> {
    let mut v: Vec<String> = o
        .container()
        .tensor_infos()
        .iter()
        .map(|t| t.name.clone())
        .collect();
    v.sort();
    v
}

fn sha_of(o: &Opened, name: &str) -> String {
    hex(&Sha256::digest(
        o.container().tensor(name).unwrap().data().unwrap(),
    ))
}

#[test]
fn a_hugging_face_cache_snapshot_opens_as_the_set() {
    let m = manifest();
    let want = &m["hf"];
    let tmp = tempfile::tempdir().unwrap();
    let repo = hf_cache(tmp.path(), &files_of(&data("hf")));
    let snap = repo.join("snapshots").join(REV);
    let shards: Vec<&str> = want["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    // The snapshot, the index's link, a shard's link, the repository folder.
    for p in [
        snap.clone(),
        snap.join("model.safetensors.index.json"),
        snap.join(shards[1]),
        repo.clone(),
    ] {
        let o = open_path(&p, &ReadOptions::default()).unwrap_or_else(|e| panic!("{p:?}: {e}"));
        let set = o.as_set().expect("a set");
        // Shards are known by their links' names, never their blobs'.
        let got: Vec<&str> = set.shards().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(got, shards, "{p:?}");
        assert_eq!(set.dir(), snap.as_path(), "{p:?}");
        let tensors = want["tensors"].as_object().unwrap();
        assert_eq!(names(&o), tensors.keys().cloned().collect::<Vec<_>>());
        for (n, t) in tensors {
            assert_eq!(sha_of(&o, n), t["sha256"].as_str().unwrap(), "{n}");
            assert_eq!(set.shard_of(n), t["shard"].as_str(), "{n}");
        }
        assert!(o.container().verify(&VerifyOptions::default()).is_ok());
    }
    // A single-file model in the cache.
    let tmp2 = tempfile::tempdir().unwrap();
    let one =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/safetensors/mixed.safetensors");
    let repo2 = hf_cache(tmp2.path(), std::slice::from_ref(&one));
    for p in [repo2.join("snapshots").join(REV), repo2.clone()] {
        let o = open_path(&p, &ReadOptions::default()).unwrap_or_else(|e| panic!("{p:?}: {e}"));
        assert!(o.as_set().is_none());
        assert_eq!(o.container().format(), Format::Safetensors);
    }
}

#[test]
fn a_cache_repository_folder_without_refs_main_takes_its_only_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = hf_cache(tmp.path(), &files_of(&data("hf")));
    std::fs::remove_file(repo.join("refs/main")).unwrap();
    assert!(open_path(&repo, &ReadOptions::default())
        .unwrap()
        .as_set()
        .is_some());
    // Two snapshots and no refs/main: which one is the user's to say.
    std::fs::create_dir(repo.join("snapshots/0000000000000000000000000000000000000000")).unwrap();
    let e = open_path(&repo, &ReadOptions::default()).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains(REV), "{e}");
    // refs/main naming a revision that is not there.
    std::fs::write(
        repo.join("refs/main"),
        "1111111111111111111111111111111111111111",
    )
    .unwrap();
    let e = open_path(&repo, &ReadOptions::default()).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    // refs/main is never a path out of snapshots/.
    std::fs::write(repo.join("refs/main"), "../../..").unwrap();
    assert!(open_path(&repo, &ReadOptions::default()).is_err());
}

#[test]
fn a_pytorch_bin_set_opens_as_a_set() {
    let more: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data("manifest_more.json")).unwrap()).unwrap();
    let want = &more["pt"];
    let tensors = want["tensors"].as_object().unwrap();
    for p in [
        data("pt"),
        data("pt/pytorch_model.bin.index.json"),
        data("pt/pytorch_model-00002-of-00002.bin"),
    ] {
        let o = open_path(&p, &ReadOptions::default()).unwrap_or_else(|e| panic!("{p:?}: {e}"));
        let set = o.as_set().unwrap_or_else(|| panic!("{p:?}: not a set"));
        assert_eq!(set.shards().len(), 2);
        assert_eq!(o.container().format(), Format::Pytorch);
        assert_eq!(names(&o), tensors.keys().cloned().collect::<Vec<_>>());
        for (n, t) in tensors {
            assert_eq!(sha_of(&o, n), t["sha256"].as_str().unwrap(), "{n}");
            assert_eq!(set.shard_of(n), t["shard"].as_str(), "{n}");
        }
        let r = o.container().verify(&VerifyOptions::default());
        assert!(r.is_ok(), "{:?}", r.failures().collect::<Vec<_>>());
    }
    // A shard the index forgets is a fault, as for safetensors.
    let tmp = tempfile::tempdir().unwrap();
    for f in files_of(&data("pt")) {
        std::fs::copy(&f, tmp.path().join(f.file_name().unwrap())).unwrap();
    }
    let idx = tmp.path().join("pytorch_model.bin.index.json");
    let text = std::fs::read_to_string(&idx).unwrap();
    let mut j: serde_json::Value = serde_json::from_str(&text).unwrap();
    let map = j["weight_map"].as_object_mut().unwrap();
    map.retain(|_, v| v != "pytorch_model-00002-of-00002.bin");
    std::fs::write(&idx, j.to_string()).unwrap();
    let e = open_path(tmp.path(), &ReadOptions::default())
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    assert!(
        e.to_string().contains("pytorch_model-00002-of-00002.bin"),
        "{e}"
    );
}

#[test]
fn one_model_as_safetensors_and_bin_opens_the_safetensors() {
    // As a Hugging Face repository often holds it: both sets, or a single
    // model.safetensors beside a .bin set.
    let tmp = tempfile::tempdir().unwrap();
    for f in files_of(&data("hf"))
        .into_iter()
        .chain(files_of(&data("pt")))
    {
        std::fs::copy(&f, tmp.path().join(f.file_name().unwrap())).unwrap();
    }
    let o = open_path(tmp.path(), &ReadOptions::default()).unwrap();
    assert_eq!(o.container().format(), Format::Safetensors);
    assert_eq!(o.as_set().unwrap().shards().len(), 4);
    let tmp = tempfile::tempdir().unwrap();
    for f in files_of(&data("pt")) {
        std::fs::copy(&f, tmp.path().join(f.file_name().unwrap())).unwrap();
    }
    let one =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/safetensors/mixed.safetensors");
    std::fs::copy(one, tmp.path().join("model.safetensors")).unwrap();
    let o = open_path(tmp.path(), &ReadOptions::default()).unwrap();
    assert!(o.as_set().is_none());
    assert_eq!(o.container().format(), Format::Safetensors);
    // Two sets of one kind stay ambiguous.
    std::fs::copy(
        data("pt/pytorch_model.bin.index.json"),
        tmp.path().join("other.bin.index.json"),
    )
    .unwrap();
    std::fs::remove_file(tmp.path().join("model.safetensors")).unwrap();
    let e = open_path(tmp.path(), &ReadOptions::default())
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
}

#[test]
fn shard_only_opens_one_shard_alone() {
    let m = manifest();
    let want = &m["hf"];
    let alone = ReadOptions::default().shard_only(true);
    let shard = "model-00002-of-00004.safetensors";
    let o = open_path(&data(&format!("hf/{shard}")), &alone).unwrap();
    assert!(o.as_set().is_none(), "one file");
    let mut own: Vec<String> = want["tensors"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, t)| t["shard"] == shard)
        .map(|(n, _)| n.clone())
        .collect();
    own.sort();
    assert!(!own.is_empty());
    assert_eq!(names(&o), own);
    // Its own metadata (the index's is not there).
    assert!(o.container().metadata().get("producer").is_none());
    assert_eq!(
        o.container()
            .metadata()
            .get("format")
            .and_then(|v| v.as_str()),
        Some("np")
    );
    // A PyTorch shard too.
    let o = open_path(&data("pt/pytorch_model-00001-of-00002.bin"), &alone).unwrap();
    assert!(o.as_set().is_none());
    assert_eq!(o.container().tensor_infos().len(), 11);
    // A directory or an index is no shard.
    for p in [data("hf"), data("hf/model.safetensors.index.json")] {
        let e = open_path(&p, &alone).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{p:?}: {e}");
    }
    // A zTensor v2 root alone: its parts in shard files are refused, with a reason.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ztensor2/shards/model.zt");
    let o = open_path(&root, &alone).unwrap();
    let e = o.container().tensor("enc.weight").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(o.container().tensor("local").is_ok());
}

#[test]
fn each_shards_metadata_is_kept_and_disagreements_named() {
    // gen.py's hf/ shards each carry {"format": "np"}: the set has it, beside the
    // index's own metadata.
    let o = open_path(&data("hf"), &ReadOptions::default()).unwrap();
    let md = o.container().metadata();
    assert_eq!(md.get("format").and_then(|v| v.as_str()), Some("np"));
    assert_eq!(
        md.get("producer").and_then(|v| v.as_str()),
        Some("tessera gen.py")
    );
    assert!(
        o.container().warnings().is_empty(),
        "{:?}",
        o.container().warnings()
    );
    // hf_shard_metadata/: "format" agreed, "written_by" differs between the shards.
    let o = open_path(&data("hf_shard_metadata"), &ReadOptions::default()).unwrap();
    let md = o.container().metadata();
    assert_eq!(md.get("format").and_then(|v| v.as_str()), Some("pt"));
    assert_eq!(
        md.get("written_by").and_then(|v| v.as_str()),
        Some("shard 1")
    );
    let w = o.container().warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    for words in [
        "\"written_by\"",
        "shard 1",
        "shard 2",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ] {
        assert!(w[0].contains(words), "{words}: {w:?}");
    }
    let r = o.container().verify(&VerifyOptions::default());
    assert!(r.is_ok());
    assert!(r.warnings.iter().any(|x| x.contains("written_by")), "{r:?}");
    // Converted to one file, the metadata goes along (transformers wants "format").
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("one.safetensors");
    let set = o.as_set().unwrap();
    tessera::convert::convert_file(
        set,
        Format::Safetensors,
        &out,
        Default::default(),
        &Default::default(),
    )
    .unwrap();
    let one = open_path(&out, &ReadOptions::default()).unwrap();
    assert_eq!(
        one.container()
            .metadata()
            .get("format")
            .and_then(|v| v.as_str()),
        Some("pt")
    );
}

#[test]
fn a_broken_set_opened_for_audit_says_why_a_plain_open_refuses() {
    let audit = ReadOptions::default().audit(true);
    for (dir, words) in [
        ("hf_missing_tensor", "ghost.weight"),
        ("hf_missing_shard", "model-00002-of-00004.safetensors"),
        ("hf_two_shards", "tensors in one shard"),
        ("gguf_missing_split", "tiny-00002-of-00003.gguf"),
    ] {
        let o = open_path(&data(dir), &audit).unwrap_or_else(|e| panic!("{dir}: {e}"));
        let e = o
            .as_set()
            .unwrap()
            .refusal()
            .unwrap_or_else(|| panic!("{dir}: no refusal"));
        assert_eq!(e.kind(), ErrorKind::Integrity, "{dir}: {e}");
        assert!(e.to_string().contains(words), "{dir}: {e}");
    }
    // Sound sets, and a set whose only fault is advisory (total_size), are not refused.
    for dir in ["hf", "gguf", "hf_total_size", "pt"] {
        let o = open_path(&data(dir), &audit).unwrap();
        assert!(o.as_set().unwrap().refusal().is_none(), "{dir}");
    }
}
