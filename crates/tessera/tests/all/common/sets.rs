//! Helpers shared by the set integration tests (`sets.rs`, `tessera_sets.rs`): the
//! committed sets made by the real tools (`data/sets/gen.py`) and the manifest numpy
//! wrote for them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// A path under `tests/data/sets`.
pub fn data(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/sets")
        .join(p)
}

/// `manifest.json`: each set's tensors with numpy's dtype, shape and SHA-256.
pub fn manifest() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(data("manifest.json")).unwrap()).unwrap()
}

/// Lower-case hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
