//! Packed (dtype 0x8000) tensors and `quant_descriptors`, as the original's GGUF
//! converter writes them: each packed tensor has `quant_id` (an index into
//! `meta.json["quant_descriptors"]`) and `quant_params` (`{"ggml_type": N}`); each
//! descriptor is `{"id", "quant_name": "Q4_0", "codec": "ggml", "params": {"ggml_type": N}}`.
//!
//! Our layouts map onto that: `Layout::Other("ggml_q4_0")` with attribute `ggml_type`
//! ↔ a `ggml` descriptor named `Q4_0`; any other layout name `L` ↔ a descriptor with
//! codec and name `L` and the tensor's attributes as params. A layout name the descriptor
//! does not reproduce is stored as `quant_params["layout"]`.

use super::plan::TensorPlan;
use crate::metadata::{Map, Metadata, Value};

/// Metadata key of the descriptor list (in `meta.json`).
pub const QUANT_DESCRIPTORS: &str = "quant_descriptors";

/// The layout name a descriptor implies.
pub fn layout_from_descriptor(d: &Map) -> Option<String> {
    let codec = d.get("codec").and_then(Value::as_str)?;
    if codec == "ggml" {
        let q = d
            .get("quant_name")
            .and_then(Value::as_str)?
            .to_ascii_lowercase();
        return Some(if q.starts_with("ggml_") {
            q
        } else {
            format!("ggml_{q}")
        });
    }
    Some(codec.to_string())
}

/// The descriptor (without `id`) for a packed tensor of `layout` with `params`.
pub fn descriptor_for(layout: &str, params: &Map) -> Map {
    let mut d = Map::new();
    let ggml = params.get("ggml_type").and_then(Value::as_int);
    match (layout.strip_prefix("ggml_"), ggml) {
        (Some(rest), Some(t)) => {
            d.insert("quant_name", rest.to_ascii_uppercase());
            d.insert("codec", "ggml");
            let mut p = Map::new();
            p.insert("ggml_type", Value::Int(t));
            d.insert("params", Value::Map(p));
        }
        _ => {
            d.insert("quant_name", layout);
            d.insert("codec", layout);
            d.insert("params", Value::Map(params.clone()));
        }
    }
    d
}

fn without_id(d: &Map) -> Map {
    d.iter()
        .filter(|(k, _)| *k != "id")
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// Gives every packed plan its `quant_id` and `quant_params`, reusing the descriptors the
/// metadata already has and adding what is missing. Returns the metadata `meta.json`
/// should carry (the caller's, plus any descriptor added).
pub(super) fn resolve(plans: &mut [TensorPlan], meta: &Metadata) -> Metadata {
    let mut list: Vec<Value> = match meta.get(QUANT_DESCRIPTORS) {
        Some(Value::List(l)) => l.clone(),
        _ => Vec::new(),
    };
    let had = meta.contains_key(QUANT_DESCRIPTORS);
    let mut changed = false;
    let id_of = |v: &Value| v.as_map().and_then(|m| m.get("id")).and_then(Value::as_int);
    for p in plans.iter_mut() {
        let Some(packed) = p.packed.take() else {
            continue;
        };
        let mut params = packed.params;
        if packed.layout == "packed" && packed.quant_id.is_none() {
            // A bare packed tensor: nothing to describe.
            p.quant_params = (!params.is_empty()).then_some(Value::Map(params));
            continue;
        }
        let want = descriptor_for(&packed.layout, &params);
        let by_id = packed
            .quant_id
            .and_then(|k| list.iter().find(|v| id_of(v) == Some(k)).map(|_| k));
        let id = by_id
            .or_else(|| {
                list.iter()
                    .find(|v| v.as_map().map(without_id).as_ref() == Some(&want))
                    .and_then(id_of)
            })
            .unwrap_or_else(|| {
                let next = list.iter().filter_map(id_of).max().map_or(0, |m| m + 1);
                let mut d = Map::new();
                d.insert("id", Value::Int(next));
                for (k, v) in want.iter() {
                    d.insert(k, v.clone());
                }
                list.push(Value::Map(d));
                changed = true;
                next
            });
        let implied = list
            .iter()
            .find(|v| id_of(v) == Some(id))
            .and_then(Value::as_map)
            .and_then(layout_from_descriptor);
        if implied.as_deref() != Some(packed.layout.as_str()) {
            params.insert("layout", packed.layout.as_str());
        }
        p.quant_id = Some(Value::Int(id));
        p.quant_params = (!params.is_empty()).then_some(Value::Map(params));
    }
    let mut out = meta.clone();
    if changed || (had && !list.is_empty()) {
        out.insert(QUANT_DESCRIPTORS, Value::List(list));
    }
    out
}

/// What `plan_tensors` records for a packed tensor.
#[derive(Clone)]
pub(super) struct Packed {
    /// Layout name.
    pub(super) layout: String,
    /// Codec parameters (the tensor's attributes but `quant_id`).
    pub(super) params: Map,
    /// The `quant_id` attribute, when the tensor came with one.
    pub(super) quant_id: Option<i128>,
}
