//! Tessera set indexes: the shards of a format that has no set convention of its own
//! (zTensor v1, FOLD, WTXT, GPTRS, npz, PyTorch …) bound together by
//! `<stem>.tessera-set.json` beside them.
//!
//! ```json
//! {
//!   "tessera_set": 1,
//!   "format": "fold",
//!   "total_size": 12345,
//!   "shards": [
//!     {"file": "model-00001-of-00002.fold", "size": 6170, "blake3": "<64 hex digits>"},
//!     {"file": "model-00002-of-00002.fold", "size": 6175, "blake3": "…"}
//!   ],
//!   "weight_map": {"embed.weight": "model-00001-of-00002.fold", …}
//! }
//! ```
//!
//! - `tessera_set`: the index's version (1); another is refused (`Unsupported`).
//! - `format`: the shards' format (a `tessera formats` name); every shard must be it.
//! - `shards`: each shard's file name (a plain name, beside the index), its exact size
//!   in bytes and the BLAKE3 of its whole file, in set order.
//! - `total_size`: the sum of the shards' sizes (bytes on disk, not tensor bytes).
//! - `weight_map`: tensor → shard, in the model's order (as a Hugging Face index).
//!
//! The model's metadata is the first shard's (the writer puts it there only).
//!
//! The index binds the set: opening checks each shard's size (`shard size`), format and
//! the tensor map (the layers of `set/mod.rs`); `verify` hashes every shard (`shard
//! digest`), and a checked read hashes a shard once before the first tensor it hands
//! out from it, so a shard swapped for another one of the same size and format is
//! caught before its bytes are used. The index itself is not signed: sign the set
//! (`tessera sign`) to bind it to a key.

use std::path::Path;

use serde::Deserialize;

use super::hf::Pairs;
use super::names::check_plain;
use super::{Checks, Plan, SetKind, Shard};
use crate::any::ReadOptions;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::metadata::Metadata;

/// The name ending a Tessera set index.
pub const INDEX_SUFFIX: &str = ".tessera-set.json";
/// The index version this code reads and writes.
pub const VERSION: u64 = 1;

/// One shard as the index records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardRecord {
    /// File name, beside the index.
    pub file: String,
    /// Exact size in bytes.
    pub size: u64,
    /// BLAKE3 of the whole file, 64 lowercase hex digits.
    pub blake3: String,
}

/// What a Tessera index says beyond the tensor map (kept by the opened set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TesseraSet {
    /// The index's file name.
    pub index: String,
    /// The shards' format.
    pub format: Format,
    /// The shards, in set order.
    pub shards: Vec<ShardRecord>,
}

#[derive(Deserialize)]
struct RawShard {
    file: String,
    size: u64,
    blake3: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIndex {
    /// Checked before (see `plan`).
    #[serde(rename = "tessera_set")]
    _version: u64,
    format: String,
    total_size: u64,
    shards: Vec<RawShard>,
    weight_map: Pairs,
}

/// True when `bytes` look like a Tessera index (for a JSON file of another name).
pub fn looks_like(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(bytes).is_ok_and(|v| v.get("tessera_set").is_some())
}

/// The shard names an index lists, when `bytes` parse as one.
pub fn shard_names(bytes: &[u8]) -> Option<Vec<String>> {
    let index: RawIndex = serde_json::from_slice(bytes).ok()?;
    Some(index.shards.into_iter().map(|s| s.file).collect())
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
    // The version first, so that a later version's fields are not called malformed.
    #[derive(Deserialize)]
    struct Version {
        tessera_set: Option<serde_json::Value>,
    }
    let v: Version = serde_json::from_slice(bytes).map_err(|e| {
        in_index(Error::malformed(format!(
            "not a Tessera set index (a JSON object): {e}"
        )))
    })?;
    match v.tessera_set.as_ref().and_then(serde_json::Value::as_u64) {
        Some(VERSION) => {}
        Some(n) => {
            return Err(in_index(Error::unsupported_version(format!(
                "Tessera set index version {n}; this Tessera reads version {VERSION}"
            ))))
        }
        None => {
            return Err(in_index(Error::malformed(
                "not a Tessera set index: no \"tessera_set\" version number",
            )))
        }
    }
    let raw: RawIndex = serde_json::from_slice(bytes).map_err(|e| {
        in_index(Error::malformed(format!(
            "Tessera set index: {e} (expected tessera_set, format, total_size, shards [{{file, size, blake3}}], weight_map)"
        )))
    })?;
    let format = Format::from_name(&raw.format)
        .filter(|f| f.can_read())
        .ok_or_else(|| {
            in_index(Error::unsupported(format!(
                "Tessera set index: shards of format {:?}, which this Tessera does not read",
                raw.format
            )))
        })?;
    let limits = &opts.limits;
    limits
        .check_entries(raw.shards.len() as u64)
        .map_err(in_index)?;
    limits
        .check_entries(raw.weight_map.0.len() as u64)
        .map_err(in_index)?;
    if raw.shards.is_empty() {
        return Err(in_index(Error::malformed(
            "Tessera set index: no shards listed",
        )));
    }
    let mut at = std::collections::HashMap::new();
    let mut records = Vec::with_capacity(raw.shards.len());
    for (i, s) in raw.shards.into_iter().enumerate() {
        check_plain(&s.file).map_err(in_index)?;
        let digest_ok = s.blake3.len() == 64
            && s.blake3
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !digest_ok {
            return Err(in_index(Error::malformed(format!(
                "Tessera set index: shard {:?} has blake3 {:?}, not 64 lowercase hex digits",
                s.file, s.blake3
            ))));
        }
        if at.insert(s.file.clone(), i).is_some() {
            return Err(in_index(Error::malformed(format!(
                "Tessera set index: shard {:?} listed twice",
                s.file
            ))));
        }
        records.push(ShardRecord {
            file: s.file,
            size: s.size,
            blake3: s.blake3,
        });
    }
    let mut checks = Checks::new();
    let mut seen = std::collections::HashSet::new();
    let mut twice = Vec::new();
    let mut weight_map = Vec::with_capacity(raw.weight_map.0.len());
    for (tensor, shard) in raw.weight_map.0 {
        limits.check_name(tensor.len() as u64).map_err(in_index)?;
        let Some(&i) = at.get(&shard) else {
            return Err(in_index(Error::malformed(format!(
                "Tessera set index: tensor {tensor:?} is mapped to {shard:?}, which the shards list does not hold"
            ))));
        };
        if !seen.insert(tensor.clone()) {
            twice.push(format!("{tensor:?}"));
        }
        weight_map.push((tensor, i));
    }
    checks.list(
        &name,
        "index lists each tensor once",
        "tensors listed more than once",
        &twice,
        true,
    );
    let sum = records
        .iter()
        .try_fold(0u64, |acc, r| acc.checked_add(r.size));
    if sum == Some(raw.total_size) {
        checks.ok(&name, "total_size");
    } else {
        let sum = sum.map_or("more than 2^64".to_string(), |s| s.to_string());
        checks.fail(
            &name,
            "total_size",
            format!(
                "the index says {} bytes, its shards' sizes add up to {sum}",
                raw.total_size
            ),
            true,
        );
    }
    let names: Vec<String> = records.iter().map(|r| r.file.clone()).collect();
    let unnamed = unindexed(&dir, &names, exists);
    checks.list(
        &name,
        "shards indexed",
        "numbered shards beside the index that it never names",
        &unnamed,
        true,
    );
    Ok(Plan {
        kind: SetKind::Tessera(TesseraSet {
            index: name,
            format,
            shards: records,
        }),
        dir,
        shards: names,
        weight_map: Some(weight_map),
        metadata: Metadata::new(),
        total_size: None,
        checks,
    })
}

/// The numbered siblings (`{prefix}-0000i-of-0000n{.ext}`, same prefix, count and
/// extension as a shard the index names) that it does not name, present or not.
fn unindexed(dir: &Path, names: &[String], exists: &dyn Fn(&Path) -> bool) -> Vec<String> {
    super::names::unnamed_siblings(
        names,
        |n| n.rfind('.').map(|dot| &n[dot..]),
        |sib| exists(&dir.join(sib)),
    )
}

/// The checks that need the shards opened: each shard's size, and its format against
/// the index's. Returns the set's metadata and types (the first shard's).
pub(super) fn check(
    set: &TesseraSet,
    shards: &[Shard],
    checks: &mut Checks,
) -> (Metadata, Option<Metadata>) {
    for (rec, s) in set.shards.iter().zip(shards) {
        let Some(f) = &s.file else { continue };
        match f.len() {
            l if l == rec.size => checks.ok(&s.name, "shard size"),
            l => checks.fail(
                &s.name,
                "shard size",
                format!("{l} bytes, the index says {}", rec.size),
                true,
            ),
        }
        let fmt = crate::model::Container::format(f);
        if fmt != set.format {
            checks.fail(
                &s.name,
                "shard format",
                format!("{} where the index says {}", fmt.name(), set.format.name()),
                true,
            );
        }
    }
    let Some(first) = shards.first().and_then(|s| s.file.as_ref()) else {
        return (Metadata::new(), None);
    };
    (
        crate::TensorSource::metadata(first).clone(),
        crate::TensorSource::metadata_types(first).cloned(),
    )
}

/// Checks `bytes` (a whole shard) against its record: `Err(detail)` on a mismatch.
pub fn check_digest(rec: &ShardRecord, bytes: &[u8]) -> std::result::Result<(), String> {
    let got = blake3_hex(bytes);
    if got == rec.blake3 {
        Ok(())
    } else {
        Err(format!("BLAKE3 {got}, the index says {}", rec.blake3))
    }
}

/// [`check_digest`] of a whole shard read from `src` in 8 MiB blocks (a remote shard
/// is fetched block by block, never held whole); `Err` when it cannot be read.
pub fn check_digest_of(
    rec: &ShardRecord,
    src: &crate::source::SourceRef<'_>,
) -> Result<std::result::Result<(), String>> {
    if let Some(bytes) = src.as_slice() {
        return Ok(check_digest(rec, bytes));
    }
    let mut h = blake3::Hasher::new();
    src.for_each_block(0, src.len(), 8 << 20, "shard", |b| {
        h.update_rayon(b);
        Ok(())
    })?;
    let got = h.finalize().to_hex().to_string();
    Ok(if got == rec.blake3 {
        Ok(())
    } else {
        Err(format!("BLAKE3 {got}, the index says {}", rec.blake3))
    })
}

/// BLAKE3 of `bytes` (hashed on every core for large inputs), lowercase hex.
pub fn blake3_hex(bytes: &[u8]) -> String {
    let mut h = blake3::Hasher::new();
    if bytes.len() >= 1 << 20 {
        h.update_rayon(bytes);
    } else {
        h.update(bytes);
    }
    h.finalize().to_hex().to_string()
}

/// Writes the index for `shards` (name, size, BLAKE3) and `weight_map` as pretty JSON.
pub fn index_json(
    format: Format,
    shards: &[ShardRecord],
    weight_map: &[(String, String)],
) -> Result<String> {
    let total: u64 = shards.iter().map(|s| s.size).sum();
    let list: Vec<serde_json::Value> = shards
        .iter()
        .map(|s| serde_json::json!({"file": s.file, "size": s.size, "blake3": s.blake3}))
        .collect();
    let mut wm = serde_json::Map::new();
    for (t, s) in weight_map {
        wm.insert(t.clone(), s.clone().into());
    }
    let doc = serde_json::json!({
        "tessera_set": VERSION,
        "format": format.name(),
        "total_size": total,
        "shards": list,
        "weight_map": wm,
    });
    serde_json::to_string_pretty(&doc)
        .map_err(|e| Error::invalid_input(format!("the set index: {e}")))
}
