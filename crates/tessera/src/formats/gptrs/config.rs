//! The checkpoint's `config_json` (gpt.rs `ModelConfig`): parsed into file metadata,
//! serialized back.
//!
//! Reading: a JSON object with a string `kind` is a tagged `ModelConfig`; its top-level
//! keys (`kind`, `config`, optional `runtime`, and any other key gpt.rs ignores) become
//! the metadata, in file order. An object without a string `kind` that has the fields of
//! a legacy `GptConfig` (`vocab_size`, `context_length`, `embed_dim`, `num_layers`,
//! `num_heads`, `mlp_ratio` as unsigned integers, `dropout` a number) is accepted as
//! `{kind: "gpt", config: <object>}`, as gpt.rs at the spec commit does. Anything else is
//! `Malformed` (gpt.rs: "invalid ModelConfig").
//!
//! Writing: the metadata map as compact JSON in its own key order, spelled as gpt.rs's
//! Rust saver spells it (`serde_json::to_vec`: shortest round-trip floats such as
//! `0.00001`, non-ASCII as UTF-8). The Python exporter's `json.dumps(separators=(",",
//! ":"))` gives the same bytes for strings, integers and most floats; it differs only in
//! exponent forms (`1e-05`) and in escaping non-ASCII (`\u00e9`). So the Python samples
//! are reproduced byte for byte from their values, and a rewrite of a GPTRS checkpoint
//! whose metadata is unchanged copies the original JSON bytes verbatim (see
//! [`RAW_CONFIG_CHUNK`]), whichever writer made them.

use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::metadata::{Map, Metadata, Value};

/// Name under which an opened checkpoint hands its raw `config_json` bytes to a writer
/// through `TensorSource::chunk` (not listed in `chunks()`: the config is the metadata;
/// this only lets a GPTRS→GPTRS rewrite keep the exact bytes). The writer uses the bytes
/// only when they parse to exactly the metadata it is given.
pub const RAW_CONFIG_CHUNK: &str = "gptrs:config_json";

/// The `kind` a checkpoint gets when its source has no GPTRS model config.
pub const FALLBACK_KIND: &str = "tensors";

/// Fields a legacy (untagged) `GptConfig` must have, all unsigned integers.
const LEGACY_UINT_FIELDS: [&str; 6] = [
    "vocab_size",
    "context_length",
    "embed_dim",
    "num_layers",
    "num_heads",
    "mlp_ratio",
];

/// A parsed `config_json`.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedConfig {
    /// The metadata: `kind`, `config`, `runtime`… as stored.
    pub metadata: Metadata,
    /// True when the JSON was a legacy untagged GPT config.
    pub legacy: bool,
}

fn depth(v: &Value) -> usize {
    match v {
        Value::List(l) => 1 + l.iter().map(depth).max().unwrap_or(0),
        Value::Map(m) => 1 + m.iter().map(|(_, v)| depth(v)).max().unwrap_or(0),
        _ => 0,
    }
}

/// Parses `config_json`.
pub fn parse(raw: &[u8], limits: &Limits) -> Result<ParsedConfig> {
    // serde_json refuses nesting deeper than 128 on its own (no stack overflow).
    let json: serde_json::Value = serde_json::from_slice(raw)
        .map_err(|e| Error::malformed(format!("config_json is not valid JSON: {e}")))?;
    let value = Value::from_json(&json);
    let d = depth(&value);
    if d > limits.max_depth {
        return Err(Error::limit(format!(
            "config_json nests {d} deep, over the limit of {}",
            limits.max_depth
        )));
    }
    let Value::Map(map) = value else {
        return Err(Error::malformed(
            "config_json is not a JSON object (invalid ModelConfig)",
        ));
    };
    if matches!(map.get("kind"), Some(Value::Str(_))) {
        // A checkpoint Tessera wrote from a source without a model config: expose the
        // source's metadata again, so that X -> GPTRS -> X keeps it where it was.
        if let Some(inner) = unwrap_fallback(&map) {
            return Ok(ParsedConfig {
                metadata: inner,
                legacy: false,
            });
        }
        return Ok(ParsedConfig {
            metadata: map,
            legacy: false,
        });
    }
    // Legacy untagged GptConfig.
    for f in LEGACY_UINT_FIELDS {
        if !matches!(map.get(f), Some(Value::Int(i)) if *i >= 0) {
            return Err(Error::malformed(format!(
                "config_json has no string \"kind\" and is not a legacy GPT config \
                 (field {f:?} missing or not an unsigned integer): invalid ModelConfig"
            )));
        }
    }
    if !matches!(map.get("dropout"), Some(Value::Int(_) | Value::Float(_))) {
        return Err(Error::malformed(
            "config_json has no string \"kind\" and is not a legacy GPT config \
             (field \"dropout\" missing or not a number): invalid ModelConfig",
        ));
    }
    let mut metadata = Map::new();
    metadata.insert("kind", "gpt");
    metadata.insert("config", Value::Map(map));
    Ok(ParsedConfig {
        metadata,
        legacy: true,
    })
}

/// `{"kind": "tensors", "config": {…}}` with nothing else, whose `config` has no string
/// `kind` (so [`serialize`] wraps it back into the same document): the inner map.
fn unwrap_fallback(map: &Map) -> Option<Map> {
    if map.len() != 2 || map.get("kind").and_then(Value::as_str) != Some(FALLBACK_KIND) {
        return None;
    }
    let inner = map.get("config")?.as_map()?;
    if matches!(inner.get("kind"), Some(Value::Str(_))) {
        return None;
    }
    Some(inner.clone())
}

fn has_non_json(v: &Value) -> bool {
    match v {
        Value::Bytes(_) => true,
        Value::Float(f) => !f.is_finite(),
        Value::Int(i) => i64::try_from(*i).is_err() && u64::try_from(*i).is_err(),
        Value::List(l) => l.iter().any(has_non_json),
        Value::Map(m) => m.iter().any(|(_, v)| has_non_json(v)),
        Value::Null | Value::Bool(_) | Value::Str(_) => false,
    }
}

/// A `config` or `runtime` that arrived as JSON text (a format whose metadata holds
/// only strings, such as safetensors, stores trees as text): the tree it spells, when
/// it spells an object or a list.
fn text_tree(v: &Value) -> Option<Value> {
    let Value::Str(s) = v else { return None };
    let t = s.trim_start();
    if !(t.starts_with('{') || t.starts_with('[')) {
        return None;
    }
    let j: serde_json::Value = serde_json::from_str(s).ok()?;
    Some(Value::from_json(&j))
}

/// Builds the `config_json` bytes for `meta`. `foreign`: the metadata does not come
/// from a GPTRS checkpoint (so a `config`/`runtime` given as JSON text is parsed back
/// into a tree). Returns the bytes and notes on what was adapted.
pub fn serialize(meta: &Metadata, foreign: bool) -> Result<(Vec<u8>, Vec<String>)> {
    let mut notes = Vec::new();
    let doc = if matches!(meta.get("kind"), Some(Value::Str(_))) {
        let mut doc = meta.clone();
        if foreign {
            for key in ["config", "runtime"] {
                if let Some(tree) = meta.get(key).and_then(text_tree) {
                    notes.push(format!(
                        "metadata {key:?} given as JSON text; stored as JSON"
                    ));
                    doc.insert(key, tree);
                }
            }
        }
        doc
    } else {
        let mut doc = Map::new();
        doc.insert("kind", FALLBACK_KIND);
        doc.insert("config", Value::Map(meta.clone()));
        let kept = if meta.is_empty() {
            "an empty \"config\"".to_string()
        } else {
            format!("the source's {} metadata keys as \"config\"", meta.len())
        };
        notes.push(format!(
            "the source has no GPTRS model config (no string \"kind\"); wrote kind \
             {FALLBACK_KIND:?} with {kept} (gpt.rs reads the tensors but builds no model \
             from it)"
        ));
        doc
    };
    if has_non_json(&Value::Map(doc.clone())) {
        notes.push(
            "metadata values JSON cannot hold (bytes, non-finite floats, integers beyond \
             64 bits) were written in Tessera's JSON forms"
                .to_string(),
        );
    }
    let bytes = serde_json::to_vec(&Value::Map(doc).to_json())
        .map_err(|e| Error::invalid_input(format!("cannot serialize the config: {e}")))?;
    Ok((bytes, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_keeps_keys_in_order() {
        let raw = br#"{"config":{"b":1,"a":2.5},"kind":"resnet34","runtime":null}"#;
        let p = parse(raw, &Limits::default()).unwrap();
        assert!(!p.legacy);
        assert_eq!(
            p.metadata.keys().collect::<Vec<_>>(),
            ["config", "kind", "runtime"]
        );
        let (back, notes) = serialize(&p.metadata, false).unwrap();
        assert_eq!(back, raw);
        assert!(notes.is_empty());
    }

    #[test]
    fn fallback_config_unwraps_to_the_source_metadata_and_back() {
        let raw = br#"{"kind":"tensors","config":{"description":"m","n":2}}"#;
        let p = parse(raw, &Limits::default()).unwrap();
        assert_eq!(p.metadata.keys().collect::<Vec<_>>(), ["description", "n"]);
        let (back, _) = serialize(&p.metadata, true).unwrap();
        assert_eq!(back, raw);
        // A "tensors" document with other keys stays as it is.
        let raw = br#"{"kind":"tensors","config":{},"runtime":{}}"#;
        let p = parse(raw, &Limits::default()).unwrap();
        assert_eq!(p.metadata.len(), 3);
    }

    #[test]
    fn legacy_gpt_config_is_wrapped() {
        let raw = br#"{"vocab_size":16,"context_length":8,"embed_dim":4,"num_layers":1,"num_heads":1,"mlp_ratio":4,"dropout":0.0}"#;
        let p = parse(raw, &Limits::default()).unwrap();
        assert!(p.legacy);
        assert_eq!(p.metadata.get("kind"), Some(&Value::from("gpt")));
        let cfg = p.metadata.get("config").unwrap().as_map().unwrap();
        assert_eq!(cfg.get("vocab_size"), Some(&Value::Int(16)));
        // Not a GPT config and not tagged: refused as gpt.rs does.
        let e = parse(br#"{"vocab_size":16}"#, &Limits::default()).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Malformed);
        let e = parse(br#"{"kind":3}"#, &Limits::default()).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Malformed);
        let e = parse(b"[1]", &Limits::default()).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Malformed);
    }

    #[test]
    fn deep_nesting_is_a_limit() {
        let mut s = String::from(r#"{"kind":"x","config":"#);
        s.push_str(&"[".repeat(100));
        s.push_str(&"]".repeat(100));
        s.push('}');
        let e = parse(s.as_bytes(), &Limits::default()).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::LimitExceeded);
        let e = parse(&vec![b'['; 10_000], &Limits::default()).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Malformed);
    }

    #[test]
    fn foreign_metadata_is_wrapped_or_untexted() {
        let mut m = Map::new();
        m.insert("format", "pt");
        let (b, notes) = serialize(&m, true).unwrap();
        assert_eq!(b, br#"{"kind":"tensors","config":{"format":"pt"}}"#);
        assert_eq!(notes.len(), 1);

        let mut m = Map::new();
        m.insert("kind", "gpt");
        m.insert("config", r#"{"vocab_size":16}"#);
        let (b, notes) = serialize(&m, true).unwrap();
        assert_eq!(b, br#"{"kind":"gpt","config":{"vocab_size":16}}"#);
        assert_eq!(notes.len(), 1);
        // From a GPTRS source a string config stays a string.
        let (b, _) = serialize(&m, false).unwrap();
        assert_eq!(b, br#"{"kind":"gpt","config":"{\"vocab_size\":16}"}"#);
    }
}
