//! llama.cpp GGUF splits: `{prefix}-00001-of-00003.gguf` …, each a GGUF file with
//! `split.no` (u16, 0-based), `split.count` (u16) and `split.tensors.count` (i32, the
//! tensors in all splits) — what `gguf-split` and gguf-py's `GGUFWriter` write. The
//! first split carries the model's keys; later ones only the `split.*` keys.

use std::path::Path;

use super::names::Numbered;
use super::{Checks, Plan, SetKind, Shard};
use crate::any::ReadOptions;
use crate::error::Result;
use crate::metadata::Metadata;
use crate::model::TensorSource;

/// The split keys.
pub const SPLIT_NO: &str = "split.no";
/// See [`SPLIT_NO`].
pub const SPLIT_COUNT: &str = "split.count";
/// See [`SPLIT_NO`].
pub const SPLIT_TENSORS: &str = "split.tensors.count";

/// The plan for the set the split at `path` (named `numbered`) belongs to.
pub(super) fn plan(path: &Path, numbered: &Numbered, opts: &ReadOptions) -> Result<Plan> {
    let dir = path.parent().unwrap_or(Path::new("")).to_path_buf();
    opts.limits
        .check_entries(u64::from(numbered.count))
        .map_err(|e| e.in_file(path.display().to_string()))?;
    let shards: Vec<String> = (1..=numbered.count).map(|i| numbered.sibling(i)).collect();
    Ok(Plan {
        kind: SetKind::GgufSplit(shards[0].clone()),
        dir,
        shards,
        weight_map: None,
        metadata: Metadata::new(),
        total_size: None,
        checks: Checks::new(),
    })
}

/// Checks every split's `split.*` keys against its place, the number of splits and the
/// tensor count (`None` when a split is missing); returns the set's metadata and types (the first split's minus
/// `split.*`).
pub(super) fn check(
    shards: &[Shard],
    tensors: Option<usize>,
    checks: &mut Checks,
) -> (Metadata, Option<Metadata>) {
    let n = shards.len() as i128;
    for (i, s) in shards.iter().enumerate() {
        let Some(f) = &s.file else { continue };
        let m = f.metadata();
        let mut key = |key: &str, want: i128| match m.get(key).map(|v| v.as_int()) {
            Some(Some(v)) if v == want => checks.ok(&s.name, key),
            Some(Some(v)) => {
                checks.fail(&s.name, key, format!("{key} is {v}, expected {want}"), true)
            }
            Some(None) => checks.fail(&s.name, key, format!("{key} is not an integer"), true),
            None => checks.fail(&s.name, key, format!("the split has no {key} key"), true),
        };
        key(SPLIT_NO, i as i128);
        key(SPLIT_COUNT, n);
        // Unknown while a split is missing (reported as such already).
        if let Some(t) = tensors {
            key(SPLIT_TENSORS, t as i128);
        }
    }
    let Some(first) = shards.first().and_then(|s| s.file.as_ref()) else {
        return (Metadata::new(), None);
    };
    let strip = |m: &Metadata| {
        let mut out = Metadata::new();
        for (k, v) in m.iter().filter(|(k, _)| !k.starts_with("split.")) {
            out.insert(k, v.clone());
        }
        out
    };
    (strip(first.metadata()), first.metadata_types().map(strip))
}

/// True when the GGUF file's metadata has a `split.count` key (a split of a set).
pub fn is_split(m: &Metadata) -> bool {
    m.contains_key(SPLIT_COUNT)
}
