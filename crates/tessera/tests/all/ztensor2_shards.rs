//! zTensor v2 models across files (spec §7), on a model whose shards ztensor 2.1.2
//! wrote and read back as one model (tests/data/ztensor2/shards/gen.py): opened by
//! path, every part (local, in either shard, a tied blob, a CSR tensor split between
//! the root and a shard) reads with numpy's bytes; `verify` checks each shard's
//! whole-file digest, and a checked read does before its first part from a shard; the
//! root alone lists the tensors and refuses the shard parts with a reason; a shard
//! missing, resized or altered is an error naming it.

use std::path::Path;

use tessera::{open_path, ErrorKind, ReadOptions, Status, TensorSource};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ztensor2/shards/");

fn expected() -> serde_json::Value {
    let s = std::fs::read_to_string(format!("{DIR}expected.json")).unwrap();
    serde_json::from_str(&s).unwrap()
}

use crate::common::sha;

fn check_all(src: &dyn TensorSource, want: &serde_json::Value) {
    let tensors = want["tensors"].as_object().unwrap();
    assert_eq!(src.tensor_infos().len(), tensors.len());
    for (name, t) in tensors {
        let v = src.tensor(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let shape: Vec<u64> = serde_json::from_value(t["shape"].clone()).unwrap();
        assert_eq!(v.info.shape, shape, "{name}");
        let parts = t["parts"].as_object().unwrap();
        assert_eq!(v.parts.len(), parts.len(), "{name}");
        for p in &v.parts {
            assert_eq!(
                sha(&p.bytes),
                parts[&p.role].as_str().unwrap(),
                "{name} {}",
                p.role
            );
        }
    }
}

#[test]
fn a_sharded_model_opens_by_path_as_one_model() {
    let want = expected();
    let opened = open_path(
        Path::new(&format!("{DIR}model.zt")),
        &ReadOptions::default(),
    )
    .unwrap();
    let f = opened.container();
    assert_eq!(f.format(), tessera::Format::ZtensorV2);
    check_all(f, &want);
    for (k, v) in want["attributes"].as_object().unwrap() {
        assert_eq!(&f.metadata().get(k).unwrap().to_json(), v, "{k}");
    }
    assert!(f.warnings().is_empty(), "{:?}", f.warnings());
    let r = f.verify(&Default::default());
    assert!(r.is_ok(), "{:?}", r.checks);
    let shard_checks: Vec<_> = r
        .checks
        .iter()
        .filter(|c| c.layer == "shard digest")
        .map(|c| (c.subject.as_str(), c.status))
        .collect();
    assert_eq!(
        shard_checks,
        [
            ("shard \"00001\"", Status::Ok),
            ("shard \"00002\"", Status::Ok)
        ]
    );
    // The same with the files read into memory instead of mapped.
    let read = tessera::open_path(
        Path::new(&format!("{DIR}model.zt")),
        &ReadOptions::default().load(tessera::Load::Read),
    )
    .unwrap();
    check_all(read.container(), &want);
}

#[test]
fn the_root_alone_lists_everything_and_refuses_shard_parts() {
    let bytes = std::fs::read(format!("{DIR}model.zt")).unwrap();
    let f = tessera::open(&bytes[..], &ReadOptions::default()).unwrap();
    assert_eq!(f.tensor_infos().len(), 6);
    assert!(f.tensor("local").is_ok());
    let e = f.tensor("enc.weight").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("00001"), "{e}");
    assert!(f.warnings().iter().any(|w| w.contains("shard table")));
    let r = f.verify(&Default::default());
    assert!(r
        .checks
        .iter()
        .any(|c| c.layer == "shard digest" && c.status == Status::NotChecked));
}

/// The three files copied into a temporary directory, `edit` applied to shard 1.
fn copy_with(edit: impl FnOnce(&mut Vec<u8>)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in ["model.zt", "model-00001.zt", "model-00002.zt"] {
        std::fs::copy(format!("{DIR}{f}"), dir.path().join(f)).unwrap();
    }
    let p = dir.path().join("model-00001.zt");
    let mut b = std::fs::read(&p).unwrap();
    edit(&mut b);
    std::fs::write(&p, b).unwrap();
    dir
}

#[test]
fn a_missing_resized_or_altered_shard_is_an_error_naming_it() {
    let opts = ReadOptions::default();
    let dir = copy_with(|_| {});
    std::fs::remove_file(dir.path().join("model-00002.zt")).unwrap();
    let e = open_path(&dir.path().join("model.zt"), &opts)
        .err()
        .unwrap();
    assert!(e.to_string().contains("shard \"00002\""), "{e}");
    assert!(e.to_string().contains("model-00002.zt"), "{e}");

    let dir = copy_with(|b| b.push(0));
    let e = open_path(&dir.path().join("model.zt"), &opts)
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    assert!(e.to_string().contains("shard \"00001\""), "{e}");

    // A byte of enc.weight (the first blob, at 4096) flipped: its xxh3 and the shard's
    // sha256 both catch it; the other shard's tensors still read.
    let dir = copy_with(|b| b[4096] ^= 1);
    let opened = open_path(&dir.path().join("model.zt"), &opts).unwrap();
    let f = opened.container();
    let e = f.tensor("enc.weight").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    assert!(e.to_string().contains("model.zt"), "{e}");
    assert!(f.tensor("dec.weight").is_ok());
    let r = f.verify(&Default::default());
    let failed: Vec<_> = r.failures().map(|c| c.subject.clone()).collect();
    assert!(
        failed.contains(&"shard \"00001\"".to_string()),
        "{failed:?}"
    );
    assert!(
        failed.contains(&"tensor \"enc.weight\"".to_string()),
        "{failed:?}"
    );
    assert!(
        !failed.contains(&"shard \"00002\"".to_string()),
        "{failed:?}"
    );

    // Padding changed (no blob covers it): every part's own digest matches, only the
    // shard's whole-file digest catches it. A checked read hashes the shard before its
    // first part from it and refuses every tensor with a part there, naming the shard;
    // the other shard's tensors read. Unchecked reads (`--no-verify`) read every part.
    let dir = copy_with(|b| b[100] = 1);
    let opened = open_path(&dir.path().join("model.zt"), &opts).unwrap();
    let f = opened.container();
    for name in ["enc.weight", "enc.weight", "head.weight"] {
        let e = f.tensor(name).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Integrity, "{name}: {e}");
        assert!(e.to_string().contains("shard \"00001\""), "{name}: {e}");
        assert!(e.to_string().contains("shard digest"), "{name}: {e}");
    }
    assert!(f.tensor("dec.weight").is_ok());
    assert!(f.tensor("local").is_ok());
    let r = f.verify(&Default::default());
    let failed: Vec<_> = r.failures().map(|c| c.subject.clone()).collect();
    assert_eq!(failed, ["shard \"00001\""]);
    let unchecked = ReadOptions::default().verify(false);
    let opened = open_path(&dir.path().join("model.zt"), &unchecked).unwrap();
    check_all(opened.container(), &expected());
}

/// The shard digest is checked lazily, on first use: opening hashes nothing, so a
/// shard changed after the open (under the map) is caught by the first read from it.
#[test]
fn a_shard_is_hashed_on_first_use() {
    use std::io::{Seek, SeekFrom, Write};
    let dir = copy_with(|_| {});
    let root = dir.path().join("model.zt");
    let opened = open_path(&root, &ReadOptions::default()).unwrap();
    // A padding byte of shard 1 changed in place (same inode: the map sees it).
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("model-00001.zt"))
        .unwrap();
    f.seek(SeekFrom::Start(100)).unwrap();
    f.write_all(&[1]).unwrap();
    drop(f);
    let e = opened.container().tensor("enc.weight").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    assert!(opened.container().tensor("dec.weight").is_ok());
}

/// Spec Appendix B's resolution by identity: shards renamed (and swapped) are found in
/// the root's directory by size and whole-file digest, with a warning naming each; a
/// file of the right size but other bytes is passed over; a shard that no file matches
/// is still an error naming its positional path.
#[test]
fn renamed_shards_are_found_by_size_and_digest() {
    let opts = ReadOptions::default();
    let dir = copy_with(|_| {});
    let p = |f: &str| dir.path().join(f);
    std::fs::rename(p("model-00001.zt"), p("part-b.bin")).unwrap();
    std::fs::rename(p("model-00002.zt"), p("model-00001.zt")).unwrap();
    // A decoy of shard 1's size, sorting before it: hashed, not taken.
    let size = std::fs::metadata(p("part-b.bin")).unwrap().len();
    std::fs::write(p("part-a.bin"), vec![0u8; size as usize]).unwrap();
    let opened = open_path(&p("model.zt"), &opts).unwrap();
    let f = opened.container();
    check_all(f, &expected());
    let w = f.warnings();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[0].contains("shard \"00001\"") && w[0].contains("part-b.bin"),
        "{w:?}"
    );
    assert!(
        w[1].contains("shard \"00002\"") && w[1].contains("model-00001.zt"),
        "{w:?}"
    );
    let r = f.verify(&Default::default());
    assert!(r.is_ok(), "{:?}", r.checks);

    // Shard 1 altered after renaming (and nothing at its positional path): no file has
    // its digest.
    let mut b = std::fs::read(p("part-b.bin")).unwrap();
    b[100] ^= 1;
    std::fs::write(p("part-b.bin"), b).unwrap();
    std::fs::rename(p("model-00001.zt"), p("model-00002.zt")).unwrap();
    let e = open_path(&p("model.zt"), &opts).err().unwrap();
    assert!(e.to_string().contains("shard \"00001\""), "{e}");
    assert!(e.to_string().contains("model-00001.zt"), "{e}");
}

#[test]
fn a_model_written_as_a_shard_set_reads_back_whole() {
    use tessera::set::{convert_set, Split};
    // The 2.1.2-verified model (CSR, a tied blob, metadata) opened, then rewritten by us
    // as three data shards and a root.
    let src = open_path(
        Path::new(&format!("{DIR}model.zt")),
        &ReadOptions::default(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("out.zt");
    let report = convert_set(
        src.container(),
        tessera::Format::ZtensorV2,
        &root,
        Split::Shards(3),
        Default::default(),
        &Default::default(),
    )
    .unwrap();
    let names: Vec<String> = report
        .files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "out-00001-of-00003.zt",
            "out-00002-of-00003.zt",
            "out-00003-of-00003.zt",
            "out.zt"
        ]
    );
    let back = open_path(&root, &ReadOptions::default()).unwrap();
    check_all(back.container(), &expected());
    assert_eq!(back.container().metadata(), src.container().metadata());
    let r = back.container().verify(&Default::default());
    assert!(r.is_ok(), "{:?}", r.checks);
    assert_eq!(
        r.checks
            .iter()
            .filter(|c| c.layer == "shard digest")
            .count(),
        3
    );
    // A data shard alone holds no manifest: it opens with no tensors and says why.
    let shard = std::fs::read(dir.path().join("out-00001-of-00003.zt")).unwrap();
    let f = tessera::open(&shard[..], &ReadOptions::default()).unwrap();
    assert!(f.tensor_infos().is_empty());
    assert!(f.warnings().iter().any(|w| w.contains("data shard")));
}

#[test]
fn the_content_digest_is_the_references_in_every_layout() {
    use std::io::Cursor;
    use tessera::convert::{write_to, Compression, WriteOptions};
    use tessera::formats::ztensor2::Ztensor2File;
    use tessera::set::{convert_set, Split};
    let want = expected();
    let root = std::fs::read(format!("{DIR}model.zt")).unwrap();
    let opts = ReadOptions::default();
    let digest = |bytes: &[u8], sha: bool| {
        Ztensor2File::parse(bytes, &opts)
            .unwrap()
            .content_digest(sha)
            .unwrap()
    };
    // From the root's manifest alone, as Python computed it from the definition.
    assert_eq!(digest(&root, false), want["content"]["xxh3"]);
    assert_eq!(digest(&root, true), want["content"]["sha256"]);
    // The same model rewritten by us: one canonical file, zstd parts, a shard set.
    let model = open_path(Path::new(&format!("{DIR}model.zt")), &opts).unwrap();
    for compression in [Compression::None, Compression::Zstd(3)] {
        let w = WriteOptions::default().compression(compression);
        let mut out = Cursor::new(Vec::new());
        write_to(tessera::Format::ZtensorV2, model.container(), &mut out, &w).unwrap();
        assert_eq!(digest(out.get_ref(), false), want["content"]["xxh3"]);
    }
    let dir = tempfile::tempdir().unwrap();
    let set_root = dir.path().join("m.zt");
    convert_set(
        model.container(),
        tessera::Format::ZtensorV2,
        &set_root,
        Split::Shards(2),
        Default::default(),
        &Default::default(),
    )
    .unwrap();
    let bytes = std::fs::read(&set_root).unwrap();
    assert_eq!(digest(&bytes, true), want["content"]["sha256"]);
    // A tensor changed changes it.
    let mut m = tessera::Model::new();
    for info in model.container().tensor_infos() {
        let mut v = model.container().tensor(&info.name).unwrap().into_owned();
        if info.name == "local" {
            v.parts[0].bytes.to_mut()[0] ^= 1;
        }
        m.push(v).unwrap();
    }
    let mut out = Cursor::new(Vec::new());
    write_to(
        tessera::Format::ZtensorV2,
        &m,
        &mut out,
        &WriteOptions::default(),
    )
    .unwrap();
    assert_ne!(digest(out.get_ref(), false), want["content"]["xxh3"]);
}
