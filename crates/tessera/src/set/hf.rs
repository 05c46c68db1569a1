//! Hugging Face `*.safetensors.index.json`: `{"metadata": {"total_size": N, …},
//! "weight_map": {tensor: shard file}}` (what `huggingface_hub`'s
//! `split_*_state_dict_into_shards` and `transformers`' `save_pretrained` write).

use std::fmt;
use std::io::Read;
use std::path::Path;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::names::check_plain;
use super::{Checks, Plan, SetKind};
use crate::any::ReadOptions;
use crate::error::{Error, Result};
use crate::metadata::{Metadata, Value};

/// The name ending an HF safetensors index.
pub const INDEX_SUFFIX: &str = ".safetensors.index.json";

/// `weight_map`'s entries as written, duplicates kept (a JSON object that repeats a key
/// is ambiguous; serde_json's map would silently keep the last).
pub(super) struct Pairs(pub(super) Vec<(String, String)>);

impl<'de> Deserialize<'de> for Pairs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Pairs, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Pairs;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object mapping tensor names to shard file names")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<Pairs, A::Error> {
                let mut v = Vec::new();
                while let Some(pair) = m.next_entry::<String, String>()? {
                    v.push(pair);
                }
                Ok(Pairs(v))
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Deserialize)]
struct Index {
    #[serde(default)]
    metadata: Option<serde_json::Map<String, serde_json::Value>>,
    weight_map: Pairs,
}

/// Reads an index file, refusing one over `max_index_bytes`.
pub fn read_index(path: &Path, opts: &ReadOptions) -> Result<Vec<u8>> {
    let max = opts.limits.max_index_bytes;
    let file = std::fs::File::open(path)
        .map_err(|e| Error::from(e).at_subject(path.display().to_string()))?;
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| Error::from(e).at_subject(path.display().to_string()))?;
    opts.limits
        .check_index(bytes.len() as u64)
        .map_err(|e| e.at_subject(path.display().to_string()))?;
    Ok(bytes)
}

/// The shard names an index lists, when `bytes` parse as one (for finding the index
/// that names a given shard).
pub fn shard_names(bytes: &[u8]) -> Option<Vec<String>> {
    let index: Index = serde_json::from_slice(bytes).ok()?;
    Some(index.weight_map.0.into_iter().map(|(_, s)| s).collect())
}

/// Parses the index at `path` into a plan.
pub(super) fn plan(path: &Path, opts: &ReadOptions) -> Result<Plan> {
    let bytes = read_index(path, opts).map_err(|e| e.in_file(path.display().to_string()))?;
    plan_bytes(path, &bytes, opts, &|p| p.exists())
}

/// Parses index `bytes` read from `path` (a file, or a URL as a path: `set/remote.rs`)
/// into a plan; `exists` says whether a shard the index does not name is there.
pub(super) fn plan_bytes(
    path: &Path,
    bytes: &[u8],
    opts: &ReadOptions,
    exists: &dyn Fn(&Path) -> bool,
) -> Result<Plan> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = path.parent().unwrap_or(Path::new("")).to_path_buf();
    let in_index = |e: Error| e.in_file(path.display().to_string());
    let index: Index = serde_json::from_slice(bytes).map_err(|e| {
        in_index(Error::malformed(format!(
            "not a Hugging Face model index (JSON with a \"weight_map\" object of tensor → shard file): {e}"
        )))
    })?;
    let limits = &opts.limits;
    let entries = index.weight_map.0;
    limits
        .check_entries(entries.len() as u64)
        .map_err(in_index)?;
    let mut checks = Checks::new();
    let mut shards: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut seen_shards = std::collections::HashSet::new();
    let mut twice = Vec::new();
    for (tensor, shard) in &entries {
        limits.check_name(tensor.len() as u64).map_err(in_index)?;
        if !seen.insert(tensor.as_str()) {
            twice.push(format!("{tensor:?}"));
        }
        if seen_shards.insert(shard.as_str()) {
            check_plain(shard).map_err(in_index)?;
            limits
                .check_entries(shards.len() as u64 + 1)
                .map_err(in_index)?;
            shards.push(shard.clone());
        }
    }
    checks.list(
        &name,
        "index lists each tensor once",
        "tensors listed more than once",
        &twice,
        true,
    );
    shards.sort();
    // A numbered shard set (`model-00001-of-00004…`) must be named whole: a number the
    // index skips is a shard whose tensors it forgets.
    let unnamed = super::names::unnamed_siblings(
        &shards,
        |_| Some(".safetensors"),
        |sib| exists(&dir.join(sib)),
    );
    checks.list(
        &name,
        "shards indexed",
        "numbered shards the index never names",
        &unnamed,
        true,
    );
    let at: std::collections::HashMap<&str, usize> = shards
        .iter()
        .enumerate()
        .map(|(i, s)| (s.as_str(), i))
        .collect();
    let weight_map = entries
        .iter()
        .map(|(t, s)| (t.clone(), at[s.as_str()]))
        .collect();
    let mut metadata = Metadata::new();
    let mut total_size = None;
    for (k, v) in index.metadata.unwrap_or_default() {
        if k == "total_size" {
            match v.as_u64().or_else(|| {
                v.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 2f64.powi(63))
                    .map(|f| f as u64)
            }) {
                Some(n) => total_size = Some(n),
                None => checks.fail(
                    &name,
                    "total_size",
                    format!("metadata.total_size is {v}, not a byte count"),
                    false,
                ),
            }
        } else {
            metadata.insert(k, Value::from_json(&v));
        }
    }
    Ok(Plan {
        kind: SetKind::HfIndex(name),
        dir,
        shards,
        weight_map: Some(weight_map),
        metadata,
        total_size,
        checks,
    })
}
