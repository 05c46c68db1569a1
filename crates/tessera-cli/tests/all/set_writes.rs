//! `convert --max-shard-size / --shards` into a folder that does not exist (exit 2,
//! naming the folder), and over a set of more shards (the old set's files go, nothing
//! else in the folder).

use std::borrow::Cow;
use std::path::Path;
use std::process::Command;

use tessera::{DType, Format, Model, TensorInfo, TensorView};

fn source(dir: &Path) -> std::path::PathBuf {
    let mut m = Model::new();
    for t in 0..6u32 {
        let data: Vec<u8> = (0..256u32)
            .flat_map(|i| ((i + t) as f32).to_le_bytes())
            .collect();
        let info = TensorInfo::dense(format!("t{t}"), DType::F32, vec![256]);
        m.push(TensorView::dense(info, Cow::Owned(data)).unwrap())
            .unwrap();
    }
    let p = dir.join("src.safetensors");
    tessera::convert::write_file(Format::Safetensors, &m, &p, &Default::default()).unwrap();
    p
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_set_into_a_missing_folder_is_a_usage_error_naming_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    let out = dir.path().join("nowhere").join("m.safetensors");
    let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["convert", "--shards", "2"])
        .arg(&src)
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("does not exist") && err.contains("nowhere"),
        "{err}"
    );
}

/// Resharding in place: the set read from ckpt/ is written back as fewer shards; the
/// old shards go, a file beside them stays, and the new set opens.
#[test]
fn resharding_in_place_removes_the_old_shards_only() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    let ckpt = dir.path().join("ckpt");
    std::fs::create_dir(&ckpt).unwrap();
    std::fs::write(ckpt.join("README.md"), b"not part of the set").unwrap();
    let out = ckpt.join("model.safetensors");
    let convert = |input: &Path, n: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["convert", "--shards", n])
            .arg(input)
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    convert(&src, "4");
    assert_eq!(listing(&ckpt).len(), 6);
    let index = ckpt.join("model.safetensors.index.json");
    let said = convert(&index, "2");
    assert!(said.contains("removed"), "{said}");
    assert_eq!(
        listing(&ckpt),
        [
            "README.md",
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
            "model.safetensors.index.json"
        ]
    );
    let opened = tessera::set::open_path(&index, &Default::default()).unwrap();
    assert_eq!(opened.container().tensor_infos().len(), 6);
}
