//! The interop samples live inside the repository (`tests/interop-samples/`), written by
//! the original implementations; their MANIFEST lists a SHA-256 for each. Every listed
//! file must be present with that digest, and every sample file must be listed, so a
//! test that reads a sample reads exactly the bytes the peer wrote.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

fn samples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop-samples")
}

fn listed() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(samples().join("MANIFEST.md")).unwrap();
    let body = text
        .split("\nsha256:\n")
        .nth(1)
        .expect("MANIFEST has a sha256: list");
    body.lines()
        .filter_map(|l| {
            let (hex, name) = l.split_once("  ")?;
            (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| (name.trim().to_string(), hex.to_string()))
        })
        .collect()
}

fn files(dir: &Path, base: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, base, out);
        } else if p.extension().is_none_or(|x| x != "md") {
            out.push(
                p.strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/"),
            );
        }
    }
}

#[test]
fn every_sample_is_listed_with_its_sha256() {
    let listed = listed();
    assert!(
        listed.len() >= 11,
        "MANIFEST lists {} samples",
        listed.len()
    );
    let mut found = Vec::new();
    files(&samples(), &samples(), &mut found);
    found.sort();
    let names: Vec<String> = listed.keys().cloned().collect();
    assert_eq!(found, names, "sample files vs MANIFEST entries");
    for (name, hex) in &listed {
        let bytes = std::fs::read(samples().join(name)).unwrap();
        let got: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(&got, hex, "{name}: sha256 differs from the MANIFEST");
    }
}
