//! Metadata as our own small value tree.
//!
//! Formats carry metadata as CBOR (zTensor), JSON (FOLD, safetensors, GPTRS config),
//! msgpack (AERO), key=value text (WTXT) or typed KV pairs (GGUF). All of them map into
//! [`Value`]; maps keep insertion order, because several formats hash or sign their
//! metadata in the order it was written.

use std::fmt;

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// JSON null / CBOR null / msgpack nil.
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer; `i128` holds every `i64` and `u64`.
    Int(i128),
    /// A float.
    Float(f64),
    /// A UTF-8 string.
    Str(String),
    /// Raw bytes.
    Bytes(Vec<u8>),
    /// A list.
    List(Vec<Value>),
    /// A map with string keys, in insertion order.
    Map(Map),
}

/// An insertion-ordered map with string keys. Lookups and inserts are O(1) (a hash
/// index beside the ordered entries), so a hostile file with millions of keys costs
/// linear time.
#[derive(Debug, Clone, Default)]
pub struct Map {
    entries: Vec<(String, Value)>,
    index: std::collections::HashMap<String, usize>,
}

impl PartialEq for Map {
    fn eq(&self, other: &Map) -> bool {
        self.entries == other.entries
    }
}

impl Map {
    /// An empty map.
    pub fn new() -> Map {
        Map::default()
    }
    /// Inserts or replaces `key`; a replaced key keeps its position.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<Value>) {
        let key = key.into();
        let value = value.into();
        match self.index.get(&key) {
            Some(&i) => self.entries[i].1 = value,
            None => {
                self.index.insert(key.clone(), self.entries.len());
                self.entries.push((key, value));
            }
        }
    }
    /// A map from entries whose keys the caller has already checked to be unique, in
    /// O(n) (`insert` is O(n) per call, so building a big map with it is quadratic: a
    /// reader facing millions of keys from a hostile file uses this instead). With a
    /// repeated key, `get` sees the first.
    pub fn from_unique(entries: Vec<(String, Value)>) -> Map {
        let mut m = Map::new();
        for (k, v) in entries {
            m.push_new(k, v);
        }
        m
    }
    /// Appends `key` without looking for it first (O(1), where [`Map::insert`] is O(n)).
    /// For readers that have already rejected duplicate keys; a duplicate pushed anyway
    /// is shadowed by the first one in [`Map::get`].
    pub fn push_new(&mut self, key: String, value: Value) {
        self.index.entry(key.clone()).or_insert(self.entries.len());
        self.entries.push((key, value));
    }
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }
    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let i = self.index.remove(key)?;
        let (_, v) = self.entries.remove(i);
        // Reindex what moved (and a shadowed duplicate of `key`, if any).
        self.index.clear();
        for (j, (k, _)) in self.entries.iter().enumerate() {
            self.index.entry(k.clone()).or_insert(j);
        }
        Some(v)
    }
    /// True when `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
    /// Entries in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Keys in insertion order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }
}

impl FromIterator<(String, Value)> for Map {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Map {
        let mut m = Map::new();
        for (k, v) in iter {
            m.insert(k, v);
        }
        m
    }
}

impl IntoIterator for Map {
    type Item = (String, Value);
    type IntoIter = std::vec::IntoIter<(String, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

/// File-level metadata: an ordered map.
pub type Metadata = Map;

/// The reserved metadata key that carries the GGUF value type of every other key, when
/// metadata from a GGUF file is kept in another format (conversion and diff use it
/// whatever the features; `formats::gguf::meta::TYPES_KEY` is the same key).
pub const GGUF_TYPES_KEY: &str = "tessera.gguf_types";

/// The value types kept under [`GGUF_TYPES_KEY`] in `meta` (a map, or its JSON text when
/// the metadata went through a string-only format); empty when there are none.
pub fn kept_types(meta: &Map) -> Map {
    match meta.get(GGUF_TYPES_KEY) {
        Some(Value::Map(m)) => m.clone(),
        Some(Value::Str(s)) => match serde_json::from_str::<serde_json::Value>(s) {
            Ok(j) => match Value::from_json(&j) {
                Value::Map(m) => m,
                _ => Map::new(),
            },
            Err(_) => Map::new(),
        },
        _ => Map::new(),
    }
}

impl Value {
    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i128> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }
    /// The map, if this is one.
    pub fn as_map(&self) -> Option<&Map> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }
    /// The list, if this is one.
    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }

    /// Converts to JSON. Bytes become `{"$bytes": "<hex>"}`; non-finite floats become
    /// strings (`"NaN"`, `"Infinity"`, `"-Infinity"`).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => {
                if let Ok(v) = i64::try_from(*i) {
                    J::from(v)
                } else if let Ok(v) = u64::try_from(*i) {
                    J::from(v)
                } else {
                    J::String(i.to_string())
                }
            }
            Value::Float(f) => match serde_json::Number::from_f64(*f) {
                Some(n) => J::Number(n),
                None if f.is_nan() => J::String("NaN".into()),
                None if *f > 0.0 => J::String("Infinity".into()),
                None => J::String("-Infinity".into()),
            },
            Value::Str(s) => J::String(s.clone()),
            Value::Bytes(b) => {
                let mut m = serde_json::Map::new();
                // Hex by hand: `metadata` sits below `util` (whose Python JSON reads metadata).
                let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
                m.insert("$bytes".into(), J::String(hex));
                J::Object(m)
            }
            Value::List(l) => J::Array(l.iter().map(Value::to_json).collect()),
            Value::Map(m) => J::Object(
                m.iter()
                    .map(|(k, v)| (k.to_string(), v.to_json()))
                    .collect(),
            ),
        }
    }

    /// Converts from JSON, keeping key order.
    pub fn from_json(j: &serde_json::Value) -> Value {
        use serde_json::Value as J;
        match j {
            J::Null => Value::Null,
            J::Bool(b) => Value::Bool(*b),
            J::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::Int(i as i128)
                } else if let Some(u) = n.as_u64() {
                    Value::Int(u as i128)
                } else {
                    Value::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            J::String(s) => Value::Str(s.clone()),
            J::Array(a) => Value::List(a.iter().map(Value::from_json).collect()),
            J::Object(o) => Value::Map(
                o.iter()
                    .map(|(k, v)| (k.clone(), Value::from_json(v)))
                    .collect(),
            ),
        }
    }

    /// A short one-line rendering for humans (strings unquoted at top level).
    pub fn display_short(&self) -> String {
        match self {
            Value::Str(s) => s.clone(),
            other => other.to_json().to_string(),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_json())
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(s.to_string())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(s)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::Int(i as i128)
    }
}
impl From<u64> for Value {
    fn from(i: u64) -> Value {
        Value::Int(i as i128)
    }
}
impl From<f64> for Value {
    fn from(f: f64) -> Value {
        Value::Float(f)
    }
}
impl From<Vec<u8>> for Value {
    fn from(b: Vec<u8>) -> Value {
        Value::Bytes(b)
    }
}
impl From<Map> for Value {
    fn from(m: Map) -> Value {
        Value::Map(m)
    }
}
impl From<Vec<Value>> for Value {
    fn from(l: Vec<Value>) -> Value {
        Value::List(l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_keeps_insertion_order_and_replaces_in_place() {
        let mut m = Map::new();
        m.insert("b", 1i64);
        m.insert("a", 2i64);
        m.insert("b", 3i64);
        assert_eq!(m.keys().collect::<Vec<_>>(), ["b", "a"]);
        assert_eq!(m.get("b"), Some(&Value::Int(3)));
    }

    #[test]
    fn remove_reindexes_and_duplicates_shadow_by_first() {
        let mut m = Map::from_unique(vec![
            ("a".into(), Value::Int(1)),
            ("b".into(), Value::Int(2)),
            ("a".into(), Value::Int(3)),
            ("c".into(), Value::Int(4)),
        ]);
        assert_eq!(m.get("a"), Some(&Value::Int(1)));
        assert_eq!(m.remove("b"), Some(Value::Int(2)));
        assert_eq!(m.get("c"), Some(&Value::Int(4)));
        assert_eq!(m.remove("a"), Some(Value::Int(1)));
        assert_eq!(m.get("a"), Some(&Value::Int(3)));
        assert_eq!(m.keys().collect::<Vec<_>>(), ["a", "c"]);
    }

    #[test]
    fn json_round_trip_keeps_order_and_big_ints() {
        let j: serde_json::Value =
            serde_json::from_str(r#"{"z":1,"a":[true,null,1.5,"x"],"big":18446744073709551615}"#)
                .unwrap();
        let v = Value::from_json(&j);
        let m = v.as_map().unwrap();
        assert_eq!(m.keys().collect::<Vec<_>>(), ["z", "a", "big"]);
        assert_eq!(m.get("big"), Some(&Value::Int(u64::MAX as i128)));
        assert_eq!(v.to_json(), j);
    }
}
