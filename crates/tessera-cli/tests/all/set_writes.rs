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

fn tessera(args: &[&dyn AsRef<std::ffi::OsStr>]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .output()
        .unwrap();
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (o.status.success(), s(&o.stdout), s(&o.stderr))
}

/// `convert SRC out/model.aeroset.json --max-shard-size --max-part-shards` writes an
/// AEROSET (parts, index.aero, the JSON), which every verb opens as one model; `--to
/// aeroset` into a directory names `model.aeroset.json` there; converted back it is the
/// source, and a written-over set of more parts leaves the new files only.
#[test]
fn convert_writes_an_aeroset_that_every_verb_opens() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let index = out.join("model.aeroset.json");
    // Six tensors of 1 KiB, two a shard: three shards; two shards a part: two parts.
    let (ok, said, err) = tessera(&[
        &"convert",
        &src,
        &index,
        &"--max-shard-size",
        &"2K",
        &"--max-part-shards",
        &"2",
        &"--tensor-hashes",
    ]);
    assert!(ok, "{err}");
    assert!(said.contains("4 files"), "{said}");
    assert_eq!(
        listing(&out),
        [
            "index.aero",
            "model.aeroset.json",
            "part-000.aero",
            "part-001.aero"
        ]
    );
    for verb in ["inspect", "verify", "stats", "id"] {
        let (ok, said, err) = tessera(&[&verb, &index]);
        assert!(ok, "{verb}: {err}");
        assert!(!said.is_empty(), "{verb}");
    }
    // The directory opens the set; extract reads one tensor from it.
    let (ok, said, err) = tessera(&[&"diff", &src, &out]);
    assert!(ok, "diff: {err}{said}");
    let t = dir.path().join("t3.npy");
    let (ok, _, err) = tessera(&[&"extract", &out, &"t3", &"-o", &t]);
    assert!(ok, "extract: {err}");
    // --to aeroset into a directory; one shard a part this time: more parts.
    let (ok, _, err) = tessera(&[
        &"convert",
        &src,
        &format!("{}/", out.display()),
        &"--to",
        &"aeroset",
        &"--max-shard-size",
        &"1K",
        &"--max-part-shards",
        &"1",
    ]);
    assert!(ok, "{err}");
    assert_eq!(listing(&out).len(), 2 + 6, "{:?}", listing(&out));
    // Back down to two parts: the old parts go.
    let (ok, said, err) = tessera(&[
        &"convert",
        &index,
        &index,
        &"--max-part-shards",
        &"4",
        &"--max-shard-size",
        &"2K",
    ]);
    assert!(ok, "{err}");
    assert!(said.contains("removed"), "{said}");
    assert_eq!(listing(&out).len(), 2 + 1, "{:?}", listing(&out));
    let back = dir.path().join("back.safetensors");
    let (ok, _, err) = tessera(&[&"convert", &index, &back]);
    assert!(ok, "{err}");
    let (ok, said, err) = tessera(&[&"diff", &src, &back]);
    assert!(ok, "{err}{said}");
    // --to aeroset into something that is neither an index name nor a directory.
    let (ok, _, err) = tessera(&[
        &"convert",
        &src,
        &dir.path().join("x.bin"),
        &"--to",
        &"aeroset",
    ]);
    assert!(!ok);
    assert!(err.contains(".aeroset.json"), "{err}");
}
