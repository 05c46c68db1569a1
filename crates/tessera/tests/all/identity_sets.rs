//! A model set and its single-file conversion share one content identity, both ways:
//! the Hugging Face set and the GGUF splits of tests/data/sets (written by
//! huggingface_hub/safetensors and gguf-py) merged into one file of several formats, and
//! a single file resharded into a set. A signature made on the set verifies the file.

use std::path::{Path, PathBuf};

use tessera::identity::model_id;
use tessera::set::Split;
use tessera::signing::key::SecretKey;
use tessera::signing::SignedManifest;
use tessera::{ConvertOptions, Format, ReadOptions, WriteOptions};

fn sets() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sets")
}

fn id_of(path: &Path) -> tessera::identity::Digest {
    let opened = tessera::open_path(path, &ReadOptions::default()).unwrap();
    model_id(opened.container(), false).unwrap().root
}

#[test]
fn a_set_and_its_single_file_conversion_share_an_id() {
    let dir = tempfile::tempdir().unwrap();
    let key = SecretKey::Ed25519([5; 32]);
    for (set, outputs) in [
        (
            "hf",
            [
                (Format::Safetensors, "one.safetensors"),
                (Format::Fold, "one.fold"),
            ],
        ),
        (
            "gguf",
            [(Format::Gguf, "one.gguf"), (Format::Aero, "one.aero")],
        ),
    ] {
        let set_path = sets().join(set);
        let opened = tessera::open_path(&set_path, &ReadOptions::default()).unwrap();
        assert!(opened.as_set().is_some(), "{set} opens as a set");
        let src = opened.container();
        assert!(src.tensor_infos().len() > 1);
        let set_id = model_id(src, false).unwrap().root;
        let signed = SignedManifest::sign(src, false, &key).unwrap();
        for (format, name) in outputs {
            let out = dir.path().join(format!("{set}-{name}"));
            tessera::convert::convert_file(
                src,
                format,
                &out,
                ConvertOptions::default(),
                &WriteOptions::default(),
            )
            .unwrap();
            let single = tessera::open_path(&out, &ReadOptions::default()).unwrap();
            assert!(single.as_set().is_none());
            assert_eq!(id_of(&out), set_id, "{set} -> {name}");
            let r = signed.verify(single.container(), &key.public(), &[]);
            assert!(r.is_ok(), "{set} -> {name}: {r:?}");
        }
        // And back: the single file resharded into a set of another split.
        let one = dir.path().join(format!("{set}-{}", outputs[0].1));
        let single = tessera::open_path(&one, &ReadOptions::default()).unwrap();
        let resharded = dir.path().join(format!("{set}-re")).join(outputs[0].1);
        std::fs::create_dir(resharded.parent().unwrap()).unwrap();
        let report = tessera::set::convert_set(
            single.container(),
            outputs[0].0,
            &resharded,
            Split::Shards(2),
            ConvertOptions::default(),
            &WriteOptions::default(),
        )
        .unwrap();
        assert!(report.files.len() >= 2, "{report:?}");
        assert_eq!(
            id_of(resharded.parent().unwrap()),
            set_id,
            "{set} resharded"
        );
    }
    // The set with one byte of one shard's tensor data changed does not share it.
    let copy = dir.path().join("hf-changed");
    std::fs::create_dir(&copy).unwrap();
    for e in std::fs::read_dir(sets().join("hf")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
    }
    let shard = copy.join("model-00004-of-00004.safetensors");
    let mut bytes = std::fs::read(&shard).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&shard, bytes).unwrap();
    assert_ne!(id_of(&copy), id_of(&sets().join("hf")));
}

/// A shard swapped for the same-named shard of another model (same tensor names, shapes
/// and sizes, so the set's own index checks pass) fails the set's signature, naming the
/// tensors that shard holds and no others.
#[test]
fn a_swapped_shard_fails_the_signature_and_names_its_tensors() {
    use tessera::model::{Model, TensorSource};
    let dir = tempfile::tempdir().unwrap();
    let key = SecretKey::Ed25519([9; 32]);
    let opened = tessera::open_path(&sets().join("hf"), &ReadOptions::default()).unwrap();
    let original = Model::from_source(opened.container()).unwrap();
    let signed = SignedManifest::sign(&original, false, &key).unwrap();
    // The other model: every tensor's bytes complemented (sizes unchanged).
    let mut other = Model::new();
    other.metadata = original.metadata.clone();
    for info in original.tensor_infos() {
        let mut view = original.tensor(&info.name).unwrap().into_owned();
        for p in &mut view.parts {
            let flipped: Vec<u8> = p.bytes.iter().map(|b| !b).collect();
            p.bytes = flipped.into();
        }
        other.push(view).unwrap();
    }
    let write = |m: &Model, name: &str| -> PathBuf {
        let d = dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        tessera::set::convert_set(
            m,
            Format::Safetensors,
            &d.join("model.safetensors"),
            Split::Shards(3),
            ConvertOptions::default(),
            &WriteOptions::default(),
        )
        .unwrap();
        d
    };
    let ours = write(&original, "ours");
    let theirs = write(&other, "theirs");
    let shard = "model-00002-of-00003.safetensors";
    std::fs::copy(theirs.join(shard), ours.join(shard)).unwrap();
    // The index still agrees with the shards: the set opens.
    let swapped = tessera::open_path(&ours, &ReadOptions::default()).unwrap();
    // The shard read alone (opened under its own name, a shard opens its whole set).
    let alone = dir.path().join("alone.safetensors");
    std::fs::copy(theirs.join(shard), &alone).unwrap();
    let in_shard: Vec<String> = tessera::open_path(&alone, &ReadOptions::default())
        .unwrap()
        .container()
        .tensor_infos()
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(!in_shard.is_empty());
    let r = signed.verify(swapped.container(), &key.public(), &[]);
    assert!(!r.is_ok(), "a swapped shard verified: {r:?}");
    let text = format!("{r:?}");
    for name in &in_shard {
        assert!(text.contains(name.as_str()), "{name} not named in {text}");
    }
    let elsewhere = original
        .tensor_infos()
        .iter()
        .map(|t| t.name.clone())
        .find(|n| !in_shard.contains(n))
        .unwrap();
    // The untouched shards still verify on their own.
    let r = signed.verify(
        swapped.container(),
        &key.public(),
        std::slice::from_ref(&elsewhere),
    );
    assert!(r.is_ok(), "{elsewhere}: {r:?}");
}
