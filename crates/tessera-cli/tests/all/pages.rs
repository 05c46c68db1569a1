//! `tessera id --pages`, `verify --pages` and `sign --pages`: a page manifest of a file the
//! safetensors package wrote holds the blake3 package's page digests; verify finds a
//! damaged page and names it; a signature covers the manifest signed with it and fails
//! an altered one.

use std::path::{Path, PathBuf};

use crate::common::{run, text};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tessera/tests/data/pages")
}

/// Where `tensor`'s bytes start in a safetensors file, from its header (independently
/// of Tessera).
fn data_start(bytes: &[u8], tensor: &str) -> usize {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    header[tensor]["data_offsets"][0].as_u64().unwrap() as usize + 8 + n
}

fn copy_model(dir: &Path) -> PathBuf {
    let p = dir.join("model.safetensors");
    std::fs::copy(data().join("model.safetensors"), &p).unwrap();
    p
}

#[test]
fn id_pages_writes_the_blake3_packages_page_digests_beside_the_model() {
    let d = tempfile::tempdir().unwrap();
    let model = copy_model(d.path());
    let o = run(&[&"id", &"--pages", &"4K", &model, &"--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let out: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let written = d.path().join("model.pages");
    assert_eq!(
        out["pages"]["file"].as_str().unwrap(),
        written.to_str().unwrap()
    );
    assert_eq!(out["pages"]["count"], 8);
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&written).unwrap()).unwrap();
    assert_eq!(m["type"], "tessera-pages/1");
    assert_eq!(m["id"], out["id"]);
    let want: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data().join("expected.json")).unwrap()).unwrap();
    for t in m["tensors"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        assert_eq!(t["pages"], want["tensors"][name]["pages"], "{name}");
    }
    // -o elsewhere; a bad size is refused saying why; no temporary is left.
    let other = d.path().join("sub.pages");
    let o = run(&[&"id", &model, &"--pages", &"1M", &"-o", &other]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("wrote"), "{}", text(&o));
    let o = run(&[&"id", &model, &"--pages", &"3000"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("power of two"), "{}", text(&o));
    let names: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
}

#[test]
fn verify_pages_names_the_damaged_page_and_passes_the_intact_file() {
    let d = tempfile::tempdir().unwrap();
    let model = copy_model(d.path());
    assert!(run(&[&"id", &"--pages", &"4K", &model]).status.success());
    let o = run(&[&"verify", &model, &"--pages", &"-v"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("pages"), "{}", text(&o));
    // Flip one byte of layers.0.w's page 3.
    let mut bytes = std::fs::read(&model).unwrap();
    let start = data_start(&bytes, "layers.0.w");
    bytes[start + 3 * 4096 + 7] ^= 1;
    std::fs::write(&model, &bytes).unwrap();
    let o = run(&[&"verify", &model, &"--pages"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("layers.0.w") && t.contains("page 3"), "{t}");
    assert!(!t.contains("\"layers.0.b\""), "{t}");
    // A manifest that is not there is a failure, not a pass.
    let o = run(&[&"verify", &model, &"--pages", &d.path().join("none.pages")]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn a_signature_made_with_pages_covers_them_and_fails_an_altered_manifest() {
    let d = tempfile::tempdir().unwrap();
    let model = copy_model(d.path());
    let key = d.path().join("k");
    assert!(run(&[&"keygen", &"-o", &key]).status.success());
    let pub_key = d.path().join("k.pub");
    let pages = d.path().join("model.pages");
    assert!(run(&[&"id", &"--pages", &"4K", &model]).status.success());
    let sig = d.path().join("model.sig");
    let o = run(&[
        &"sign", &model, &"--key", &key, &"-o", &sig, &"--pages", &pages,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("page manifest"), "{}", text(&o));
    let check = || {
        run(&[
            &"verify",
            &model,
            &"--signature",
            &sig,
            &"--public-key",
            &pub_key,
            &"--pages",
        ])
    };
    let o = check();
    assert!(o.status.success(), "{}", text(&o));
    // Another page size: a valid manifest of the same model, but not the one signed.
    assert!(run(&[&"id", &"--pages", &"8K", &model, &"-o", &pages])
        .status
        .success());
    let o = check();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("not the one signed"), "{}", text(&o));
    // A manifest of another model cannot be signed with this one.
    let other = d.path().join("other.pages");
    let mixed = data().join("../safetensors/mixed.safetensors");
    assert!(run(&[&"id", &"--pages", &"4K", &mixed, &"-o", &other])
        .status
        .success());
    let o = run(&[
        &"sign",
        &model,
        &"--key",
        &key,
        &"-o",
        &d.path().join("x.sig"),
        &"--pages",
        &other,
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("another model"), "{}", text(&o));
}

#[test]
fn extract_slice_checks_its_pages_beside_the_model_or_given() {
    let d = tempfile::tempdir().unwrap();
    let model = copy_model(d.path());
    assert!(run(&[&"id", &"--pages", &"4K", &model]).status.success());
    // Flip a byte on layers.0.w's page 1 (bytes 4096..8192: rows 10..20 of 400 bytes).
    let mut bytes = std::fs::read(&model).unwrap();
    let start = data_start(&bytes, "layers.0.w");
    bytes[start + 6000] ^= 4;
    std::fs::write(&model, &bytes).unwrap();
    let out = d.path().join("w.npy");
    // Rows 0..5 are on page 0: extracted.
    let o = run(&[
        &"extract",
        &model,
        &"layers.0.w",
        &"--slice",
        &"0:5,:",
        &"-o",
        &out,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("unverified"), "{}", text(&o));
    // Rows 14..16 touch page 1: refused, naming it, and nothing written.
    let bad = d.path().join("bad.npy");
    let o = run(&[
        &"extract",
        &model,
        &"layers.0.w",
        &"--slice",
        &"14:16,:",
        &"-o",
        &bad,
    ]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("page 1"), "{}", text(&o));
    assert!(!bad.exists());
    // The manifest given elsewhere works the same.
    let moved = d.path().join("elsewhere.pages");
    std::fs::rename(d.path().join("model.pages"), &moved).unwrap();
    let o = run(&[
        &"extract",
        &model,
        &"layers.0.w",
        &"--slice",
        &"14:16,:",
        &"-o",
        &bad,
    ]);
    assert!(
        o.status.success(),
        "without a manifest nothing can catch it: {}",
        text(&o)
    );
    let o = run(&[
        &"extract",
        &model,
        &"layers.0.w",
        &"--slice",
        &"14:16,:",
        &"-o",
        &bad,
        &"--pages",
        &moved,
    ]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("page 1"), "{}", text(&o));
}
