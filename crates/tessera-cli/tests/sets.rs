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

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

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
