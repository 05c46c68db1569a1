//! Sets of formats without a set convention of their own, bound by a Tessera index
//! (`<stem>.tessera-set.json`): written from the Hugging Face test set (made by
//! huggingface_hub + safetensors, `data/sets/gen.py`), read back by index, shard and
//! directory with every tensor's bytes checked against the SHA-256 numpy recorded; then
//! every set-level fault, each named.

use crate::common::sets as common;

use std::path::{Path, PathBuf};

use common::{data, hex, manifest};
use sha2::{Digest, Sha256};
use tessera::set::{convert_set, Split};
use tessera::{
    open_path, ConvertOptions, ErrorKind, Format, Model, ReadOptions, TensorSource, VerifyOptions,
    WriteOptions,
};

fn write_opts() -> WriteOptions {
    WriteOptions::default().no_fsync(true)
}

/// Writes the HF test set as `dir/m.<ext>` in `shards` shards; returns the files.
fn write_set(src: &dyn TensorSource, dir: &Path, ext: &str, shards: u32) -> Vec<PathBuf> {
    let out = dir.join(format!("m.{ext}"));
    let format = Format::from_path(&out).unwrap();
    let conv = ConvertOptions::default()
        // WTXT and npz carry no file metadata.
        .drop_metadata(matches!(format, Format::Wtxt | Format::Npz));
    convert_set(
        src,
        format,
        &out,
        Split::Shards(shards),
        conv,
        &write_opts(),
    )
    .unwrap_or_else(|e| panic!("{ext}: {e}"))
    .files
}

fn hf_source() -> tessera::Opened {
    open_path(&data("hf"), &ReadOptions::default()).unwrap()
}

#[test]
fn sets_of_every_other_format_read_back_as_numpy_wrote_them() {
    let m = manifest();
    let want = m["hf"]["tensors"].as_object().unwrap();
    let src = hf_source();
    for ext in ["zt", "fold", "wtxt", "npz", "pt"] {
        let dir = tempfile::tempdir().unwrap();
        let files = write_set(src.container(), dir.path(), ext, 3);
        let index = dir.path().join("m.tessera-set.json");
        assert_eq!(files.last(), Some(&index), "{ext}: the index last");
        let shard2 = dir.path().join(format!("m-00002-of-00003.{ext}"));
        assert!(shard2.exists(), "{ext}");
        for way in [dir.path().to_path_buf(), index.clone(), shard2.clone()] {
            let o = open_path(&way, &ReadOptions::default())
                .unwrap_or_else(|e| panic!("{ext} {}: {e}", way.display()));
            let c = o.container();
            let s = o.as_set().expect("a set");
            assert_eq!(s.shards().len(), 3, "{ext}");
            assert!(c.version().contains("Tessera index"), "{}", c.version());
            let names: Vec<&str> = c.tensor_infos().iter().map(|t| t.name.as_str()).collect();
            let src_names: Vec<&str> = src
                .container()
                .tensor_infos()
                .iter()
                .map(|t| t.name.as_str())
                .collect();
            assert_eq!(names, src_names, "{ext}: the model's order");
            for info in c.tensor_infos() {
                let t = c.tensor(&info.name).unwrap();
                let w = &want[&info.name];
                assert_eq!(
                    hex(&Sha256::digest(t.data().unwrap())),
                    w["sha256"].as_str().unwrap(),
                    "{ext} {}",
                    info.name
                );
            }
            if !["wtxt", "npz"].contains(&ext) {
                assert_eq!(
                    c.metadata().get("producer").map(|v| v.to_json()),
                    Some(serde_json::json!("tessera gen.py")),
                    "{ext}: the model's metadata, from the first shard"
                );
            }
            let r = c.verify(&VerifyOptions::default());
            assert!(r.is_ok(), "{ext}: {:?}", r.failures().collect::<Vec<_>>());
            let digests = r
                .checks
                .iter()
                .filter(|k| k.layer == "shard digest")
                .count();
            assert_eq!(digests, 3, "{ext}: every shard hashed");
            assert!(r.checks.iter().any(|k| k.layer == "shard size"));
        }
        // The index records what is on disk (read here with the blake3 crate directly).
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
        assert_eq!(doc["tessera_set"], 1);
        assert_eq!(doc["format"], Format::from_path(&shard2).unwrap().name());
        let mut total = 0;
        for s in doc["shards"].as_array().unwrap() {
            let bytes = std::fs::read(dir.path().join(s["file"].as_str().unwrap())).unwrap();
            assert_eq!(s["size"], bytes.len() as u64);
            assert_eq!(s["blake3"], blake3::hash(&bytes).to_hex().to_string());
            total += bytes.len() as u64;
        }
        assert_eq!(doc["total_size"], total);
        assert_eq!(doc["weight_map"].as_object().unwrap().len(), want.len());
    }
}

/// A FOLD set of 3 shards in a fresh directory, and its index as JSON.
fn fold_set() -> (tempfile::TempDir, serde_json::Value) {
    set_of("fold")
}

fn set_of(ext: &str) -> (tempfile::TempDir, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    write_set(hf_source().container(), dir.path(), ext, 3);
    let doc = read_index(dir.path());
    (dir, doc)
}

fn read_index(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("m.tessera-set.json")).unwrap()).unwrap()
}

fn write_index(dir: &Path, doc: &serde_json::Value) {
    std::fs::write(
        dir.join("m.tessera-set.json"),
        serde_json::to_vec_pretty(doc).unwrap(),
    )
    .unwrap();
}

/// The set in `dir` fails a plain open with `kind` naming `words`, and an audit's
/// verify fails `layer`.
fn fault(dir: &Path, kind: ErrorKind, words: &str, layer: &str) {
    let e = match open_path(dir, &ReadOptions::default()) {
        Ok(_) => panic!("opened"),
        Err(e) => e,
    };
    assert_eq!(e.kind(), kind, "{e}");
    assert!(e.to_string().contains(words), "{e}");
    let audit = ReadOptions::default().audit(true);
    let o = open_path(dir, &audit).unwrap();
    let r = o.container().verify(&VerifyOptions::default());
    let failed: Vec<&str> = r.failures().map(|c| c.layer.as_str()).collect();
    assert!(failed.contains(&layer), "{failed:?}");
}

#[test]
fn missing_shard() {
    let (dir, _) = fold_set();
    std::fs::remove_file(dir.path().join("m-00002-of-00003.fold")).unwrap();
    fault(
        dir.path(),
        ErrorKind::Io,
        "m-00002-of-00003.fold",
        "shard present",
    );
}

#[test]
fn changed_shard_same_size() {
    // Shard 3 swapped for the same shard of another model: same names, shapes, size
    // and a valid file of its own (zTensor v1, stored raw), different values.
    let (dir, doc) = set_of("zt");
    let src = hf_source();
    let mut other = Model::from_source(src.container()).unwrap();
    other.metadata = src.container().metadata().clone();
    let mut changed = Model::new();
    changed.metadata = other.metadata.clone();
    for info in other.tensor_infos().to_vec() {
        let mut t = other.tensor(&info.name).unwrap().into_owned();
        if info.name == "lm_head.weight" {
            let mut bytes = t.data().unwrap().to_vec();
            bytes[0] ^= 0x40;
            t = tessera::TensorView::dense(t.info.clone(), bytes.into()).unwrap();
        }
        changed.push(t).unwrap();
    }
    let other_dir = tempfile::tempdir().unwrap();
    write_set(&changed, other_dir.path(), "zt", 3);
    let name = "m-00003-of-00003.zt";
    let theirs = std::fs::read(other_dir.path().join(name)).unwrap();
    assert_eq!(
        theirs.len() as u64,
        doc["shards"][2]["size"].as_u64().unwrap(),
        "same size"
    );
    std::fs::write(dir.path().join(name), &theirs).unwrap();
    // The open's checks pass (size, format, tensor map); the read is refused.
    let o = open_path(dir.path(), &ReadOptions::default()).unwrap();
    let e = o.container().tensor("lm_head.weight").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    assert!(e.to_string().contains("shard digest"), "{e}");
    assert!(e.to_string().contains(name), "{e}");
    assert!(
        o.container().tensor("embed.weight").is_ok(),
        "shard 1 intact"
    );
    let r = o.container().verify(&VerifyOptions::default());
    let failed: Vec<(&str, &str)> = r
        .failures()
        .map(|c| (c.subject.as_str(), c.layer.as_str()))
        .collect();
    assert_eq!(failed, vec![(name, "shard digest")]);
    // Unchecked reads (--no-verify) hand the swapped bytes out.
    let unchecked = ReadOptions::default().verify(false);
    let o = open_path(dir.path(), &unchecked).unwrap();
    assert!(o.container().tensor("lm_head.weight").is_ok());
}

#[test]
fn changed_shard_size() {
    let (dir, _) = fold_set();
    let p = dir.path().join("m-00001-of-00003.fold");
    let mut bytes = std::fs::read(&p).unwrap();
    bytes.extend_from_slice(&[0; 16]);
    std::fs::write(&p, bytes).unwrap();
    // FOLD itself may or may not mind trailing bytes; the index does.
    let audit = ReadOptions::default().audit(true);
    let o = open_path(dir.path(), &audit).unwrap();
    let r = o.container().verify(&VerifyOptions::default());
    let failed: Vec<&str> = r.failures().map(|c| c.layer.as_str()).collect();
    assert!(failed.contains(&"shard size"), "{failed:?}");
    assert!(failed.contains(&"shard digest"), "{failed:?}");
    assert!(open_path(dir.path(), &ReadOptions::default()).is_err());
}

#[test]
fn extra_shard_the_index_never_names() {
    let (dir, mut doc) = fold_set();
    // The index forgets shard 3 and its tensors; the file stays.
    let gone = doc["shards"][2]["file"].as_str().unwrap().to_string();
    let size = doc["shards"][2]["size"].as_u64().unwrap();
    doc["shards"].as_array_mut().unwrap().pop();
    doc["weight_map"]
        .as_object_mut()
        .unwrap()
        .retain(|_, v| v != gone.as_str());
    doc["total_size"] = (doc["total_size"].as_u64().unwrap() - size).into();
    write_index(dir.path(), &doc);
    fault(
        dir.path(),
        ErrorKind::Integrity,
        "m-00003-of-00003.fold (present)",
        "shards indexed",
    );
}

#[test]
fn tensor_in_two_shards() {
    // Shard 2 rewritten to also hold a tensor of shard 1; the index updated to match
    // the new file, so only the tensor map is wrong.
    let (dir, mut doc) = fold_set();
    let src = hf_source();
    let c = src.container();
    let wm = doc["weight_map"].as_object().unwrap().clone();
    let mut m = Model::new();
    let in1 = wm
        .iter()
        .find(|(_, v)| *v == "m-00001-of-00003.fold")
        .unwrap()
        .0;
    for (t, s) in &wm {
        if s == "m-00002-of-00003.fold" || t == in1 {
            m.push(c.tensor(t).unwrap()).unwrap();
        }
    }
    let p = dir.path().join("m-00002-of-00003.fold");
    tessera::convert::convert_file(
        &m,
        Format::Fold,
        &p,
        ConvertOptions::default(),
        &write_opts(),
    )
    .unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let old = doc["shards"][1]["size"].as_u64().unwrap();
    doc["shards"][1]["size"] = (bytes.len() as u64).into();
    doc["shards"][1]["blake3"] = blake3::hash(&bytes).to_hex().to_string().into();
    doc["total_size"] = (doc["total_size"].as_u64().unwrap() - old + bytes.len() as u64).into();
    write_index(dir.path(), &doc);
    fault(
        dir.path(),
        ErrorKind::Integrity,
        "in more than one shard",
        "tensors in one shard",
    );
}

#[test]
fn index_naming_a_missing_tensor() {
    let (dir, mut doc) = fold_set();
    doc["weight_map"]["ghost.weight"] = "m-00001-of-00003.fold".into();
    write_index(dir.path(), &doc);
    fault(
        dir.path(),
        ErrorKind::Integrity,
        "\"ghost.weight\"",
        "tensors present",
    );
}

#[test]
fn tensor_the_index_omits() {
    let (dir, mut doc) = fold_set();
    doc["weight_map"]
        .as_object_mut()
        .unwrap()
        .shift_remove("scale");
    write_index(dir.path(), &doc);
    fault(
        dir.path(),
        ErrorKind::Integrity,
        "\"scale\"",
        "tensors indexed",
    );
}

#[test]
fn total_size_and_hostile_indexes() {
    let (dir, doc) = fold_set();
    let mut d = doc.clone();
    d["total_size"] = 1.into();
    write_index(dir.path(), &d);
    fault(
        dir.path(),
        ErrorKind::Integrity,
        "shards' sizes add up to",
        "total_size",
    );
    let refused = |d: &serde_json::Value, kind: ErrorKind, words: &str| {
        write_index(dir.path(), d);
        let audit = ReadOptions::default().audit(true);
        let e = match open_path(&dir.path().join("m.tessera-set.json"), &audit) {
            Ok(_) => panic!("opened: {d}"),
            Err(e) => e,
        };
        assert_eq!(e.kind(), kind, "{e}");
        assert!(e.to_string().contains(words), "{e}");
    };
    let mut d = doc.clone();
    d["tessera_set"] = 2.into();
    refused(&d, ErrorKind::UnsupportedVersion, "version 2");
    let mut d = doc.clone();
    d["shards"][0]["file"] = "../m-00001-of-00003.fold".into();
    refused(&d, ErrorKind::Malformed, "path separator");
    let mut d = doc.clone();
    d["shards"][0]["blake3"] = "00".into();
    refused(&d, ErrorKind::Malformed, "64 lowercase hex");
    let mut d = doc.clone();
    d["weight_map"]["scale"] = "elsewhere.fold".into();
    refused(&d, ErrorKind::Malformed, "elsewhere.fold");
    let mut d = doc.clone();
    d["format"] = "nonesuch".into();
    refused(&d, ErrorKind::Unsupported, "nonesuch");
}

#[test]
fn writing_is_refused_for_npy_and_for_chunks_it_would_lose() {
    let dir = tempfile::tempdir().unwrap();
    let src = hf_source();
    let e = convert_set(
        src.container(),
        Format::Npy,
        &dir.path().join("m.npy"),
        Split::Shards(2),
        ConvertOptions::default(),
        &write_opts(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    let mut m = Model::from_source(src.container()).unwrap();
    let info = tessera::ChunkInfo {
        name: "notes".into(),
        kind: "JSON".into(),
        len: None,
        storage: Default::default(),
        holds_tensors: false,
        copies: None,
    };
    m.push_chunk(info, b"kept by FOLD".to_vec()).unwrap();
    let e = convert_set(
        &m,
        Format::Fold,
        &dir.path().join("m.fold"),
        Split::Shards(2),
        ConvertOptions::default(),
        &write_opts(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("notes"), "{e}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing left"
    );
}

/// Writing a set where the same set already is replaces each file in one step and
/// leaves nothing else behind: no staging directory, no old shard under a hidden name.
#[cfg(unix)]
#[test]
fn a_set_written_over_itself_leaves_exactly_its_files() {
    let src = hf_source();
    let dir = tempfile::tempdir().unwrap();
    let first = write_set(src.container(), dir.path(), "zt", 3);
    let before: Vec<u64> = first
        .iter()
        .map(|p| {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(p).unwrap().ino()
        })
        .collect();
    let again = write_set(src.container(), dir.path(), "zt", 3);
    assert_eq!(first, again);
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut want: Vec<String> = again
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    want.sort();
    assert_eq!(names, want);
    // New files (new inodes) under the old names, and they read back.
    for (p, ino) in again.iter().zip(before) {
        use std::os::unix::fs::MetadataExt;
        assert_ne!(std::fs::metadata(p).unwrap().ino(), ino, "{}", p.display());
    }
    let o = open_path(dir.path(), &ReadOptions::default()).unwrap();
    assert_eq!(
        o.container().tensor_infos().len(),
        src.container().tensor_infos().len()
    );
    for info in src.container().tensor_infos() {
        let a = src.container().tensor(&info.name).unwrap();
        let b = o.container().tensor(&info.name).unwrap();
        assert!(a.data().unwrap() == b.data().unwrap(), "{}", info.name);
    }
}
