//! Hugging Face `*.safetensors.index.json`: `{"metadata": {"total_size": N, …},
//! "weight_map": {tensor: shard file}}` (what `huggingface_hub`'s
//! `split_*_state_dict_into_shards` and `transformers`' `save_pretrained` write), and
//! the same JSON as `pytorch_model.bin.index.json` over PyTorch `.bin` shards (what
//! `save_pretrained(safe_serialization=False)` writes).
//!
//! Metadata: the index's `metadata` (minus `total_size`), then every shard's own (a
//! safetensors shard's `__metadata__`, `{"format": "pt"}` from transformers, which
//! `transformers` wants back when the set becomes one file): a key is kept once when
//! the shards that have it agree; when they do not, or a shard's value differs from the
//! index's, the index's value, else the first shard's (in set order) is kept and a
//! warning names the key, the values and the shards (each shard's own metadata is seen
//! by opening it alone: `--shard-only`, `shard=True`).

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

/// The name ending an HF PyTorch index (`pytorch_model.bin.index.json`).
pub const BIN_INDEX_SUFFIX: &str = ".bin.index.json";

/// The extensions of the shards an HF index names (each has its index suffix:
/// `{ext}.index.json`).
pub const SHARD_EXTENSIONS: [&str; 2] = [".safetensors", ".bin"];

/// True for the name of an HF index (safetensors or PyTorch).
pub fn is_index_name(name: &str) -> bool {
    name.ends_with(INDEX_SUFFIX) || name.ends_with(BIN_INDEX_SUFFIX)
}

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
        |n| SHARD_EXTENSIONS.into_iter().find(|e| n.ends_with(e)),
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

/// The set's metadata: the index's (`index`) with every shard's own merged in, as the
/// module docs say; a warning per key whose values differ.
pub(super) fn merge_metadata(
    index: Metadata,
    shards: &[super::Shard],
    warnings: &mut Vec<String>,
) -> Metadata {
    let from_index: std::collections::HashSet<String> =
        index.iter().map(|(k, _)| k.to_string()).collect();
    let mut out = index;
    // Per key: where its kept value came from, and every other value seen.
    let mut origin: Vec<(String, String)> = Vec::new();
    let mut differ: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for s in shards {
        let Some(f) = &s.file else { continue };
        for (k, v) in crate::TensorSource::metadata(f).iter() {
            match out.get(k) {
                None => {
                    out.insert(k.to_string(), v.clone());
                    origin.push((k.to_string(), s.name.clone()));
                }
                Some(kept) if kept == v => {}
                Some(_) => differ.entry(k.to_string()).or_default().push(format!(
                    "{} in {}",
                    v.display_short(),
                    s.name
                )),
            }
        }
    }
    for (k, others) in differ {
        let Some(kept) = out.get(&k) else { continue };
        let from = if from_index.contains(&k) {
            "the index".to_string()
        } else {
            origin
                .iter()
                .find(|(key, _)| *key == k)
                .map_or(String::new(), |(_, s)| s.clone())
        };
        warnings.push(format!(
            "metadata key {k:?} differs between the set's files: {} in {from} (kept), {} (open a shard alone to see its own)",
            kept.display_short(),
            others.join(", ")
        ));
    }
    out
}
