//! GGUF metadata values ↔ our [`Value`] tree, with the type annotations that make the
//! mapping round-trip byte-exact.
//!
//! Reading gives each key a natural [`Value`] (integers → `Int`, floats → `Float`, bool,
//! string, arrays → `List`, arrays of `u8` → `Bytes`) and a type annotation: a string
//! such as `u32`, `f32`, `str`, `[i32]`, `[[u8]]`, `[array]` (an empty array of arrays)
//! or, for an array of arrays whose items differ in type, a list with one annotation per
//! item. The annotations of a file live in one reserved metadata key,
//! [`TYPES_KEY`], a map `key → annotation` covering every key — added only when some
//! key's type differs from what the writer would infer from its value (always the case
//! for real GGUF files, with their u32 and f32 keys; never for files we wrote from
//! another format's metadata, so A → GGUF → A adds no key).
//!
//! Writing uses a key's annotation when the value fits it (an integer in range, a float,
//! a string that parses as the annotated type — which is how values come back from
//! formats that store metadata as strings), and otherwise infers a type: string → `str`,
//! bool → `bool`, integer → the first of `i32`/`i64`/`u64` that holds it, float → `f64`,
//! bytes → `[u8]`, homogeneous lists → arrays. Values GGUF cannot hold (maps, null,
//! mixed lists, integers beyond u64) are written as their JSON text, and their keys
//! listed in one extra KV, [`JSON_KEYS_KEY`], from which our reader restores them
//! (annotation `json`); other GGUF readers see the JSON text.

use crate::error::{Error, Result};
use crate::metadata::{Map, Value};
use crate::util::bytes::ByteReader;

use super::raw::{Endian, GgufType};

/// The reserved metadata key that carries the GGUF value type of every other key.
pub const TYPES_KEY: &str = crate::metadata::GGUF_TYPES_KEY;
/// The GGUF key (an array of strings) our writer adds when it had to store values GGUF
/// has no type for (maps, null, mixed lists) as JSON text: it lists those keys, so our
/// reader restores the values (annotated `json`). Only written when needed.
pub const JSON_KEYS_KEY: &str = "tessera.json_keys";
/// The annotation of a value stored as JSON text.
pub const JSON_ANNOTATION: &str = "json";

/// State shared while reading all values of one file.
pub(crate) struct ValueReader {
    /// Array items still allowed (over the whole file), so a small file cannot make us
    /// build hundreds of millions of values.
    pub item_budget: u64,
    /// Deepest array nesting allowed.
    pub max_depth: usize,
    /// Set when a string was not UTF-8 (kept as bytes).
    pub saw_non_utf8: bool,
    /// The file's byte order.
    pub endian: Endian,
}

impl ValueReader {
    /// Reads one value of type `ty`, returning it with its annotation.
    pub fn read(
        &mut self,
        r: &mut ByteReader<'_>,
        ty: GgufType,
        depth: usize,
    ) -> Result<(Value, Value)> {
        let e = self.endian;
        let v = match ty {
            GgufType::Uint8 => Value::Int(r.u8("u8 value")? as i128),
            GgufType::Int8 => Value::Int(r.u8("i8 value")? as i8 as i128),
            GgufType::Uint16 => Value::Int(e.u16(r, "u16 value")? as i128),
            GgufType::Int16 => Value::Int(e.u16(r, "i16 value")? as i16 as i128),
            GgufType::Uint32 => Value::Int(e.u32(r, "u32 value")? as i128),
            GgufType::Int32 => Value::Int(e.i32(r, "i32 value")? as i128),
            GgufType::Uint64 => Value::Int(e.u64(r, "u64 value")? as i128),
            GgufType::Int64 => Value::Int(e.i64(r, "i64 value")? as i128),
            GgufType::Float32 => Value::Float(f32::from_bits(e.u32(r, "f32 value")?) as f64),
            GgufType::Float64 => Value::Float(f64::from_bits(e.u64(r, "f64 value")?)),
            GgufType::Bool => {
                let at = r.pos() as u64;
                match r.u8("bool value")? {
                    0 => Value::Bool(false),
                    1 => Value::Bool(true),
                    b => {
                        return Err(Error::malformed(format!("bool value is {b}, not 0 or 1"))
                            .at_offset(at))
                    }
                }
            }
            GgufType::String => self.string(r)?,
            GgufType::Array => return self.array(r, depth),
        };
        Ok((v, Value::Str(ty.short_name().into())))
    }

    fn string(&mut self, r: &mut ByteReader<'_>) -> Result<Value> {
        let len = self.endian.u64(r, "string length")?;
        let b = r.take_u64(len, "string bytes")?;
        Ok(match std::str::from_utf8(b) {
            Ok(s) => Value::Str(s.to_string()),
            Err(_) => {
                self.saw_non_utf8 = true;
                Value::Bytes(b.to_vec())
            }
        })
    }

    fn array(&mut self, r: &mut ByteReader<'_>, depth: usize) -> Result<(Value, Value)> {
        let at = r.pos() as u64;
        if depth >= self.max_depth {
            return Err(
                Error::limit(format!("arrays nested deeper than {}", self.max_depth)).at_offset(at),
            );
        }
        let tag = self.endian.u32(r, "array item type")?;
        let item = GgufType::from_u32(tag).ok_or_else(|| {
            Error::malformed(format!("unknown array item type {tag}")).at_offset(at)
        })?;
        let n = self.endian.u64(r, "array length")?;
        let need = n.checked_mul(item.min_size());
        if need.is_none_or(|need| need > r.remaining() as u64) {
            return Err(Error::malformed(format!(
                "array of {n} {} items cannot fit in the {} bytes left",
                item.short_name(),
                r.remaining()
            ))
            .at_offset(at));
        }
        if n > self.item_budget {
            return Err(Error::limit(format!(
                "an array of {n} items exceeds what is left ({}) of the limit on metadata \
                 array items per file (Limits::max_entries)",
                self.item_budget
            ))
            .at_offset(at));
        }
        self.item_budget -= n;
        // `n` is now bounded by the bytes left in the file.
        let count = crate::limits::to_usize(n, "array length")?;
        if item == GgufType::Uint8 {
            let b = r.take(count, "u8 array")?;
            return Ok((Value::Bytes(b.to_vec()), Value::Str("[u8]".into())));
        }
        let mut items = Vec::with_capacity(count);
        let mut anns = Vec::with_capacity(if item == GgufType::Array { count } else { 0 });
        for _ in 0..count {
            let (v, a) = self.read(r, item, depth + 1)?;
            items.push(v);
            if item == GgufType::Array {
                anns.push(a);
            }
        }
        let ann = if item != GgufType::Array {
            Value::Str(format!("[{}]", item.short_name()))
        } else if anns.is_empty() {
            Value::Str("[array]".into())
        } else if anns.iter().all(|a| a == &anns[0]) && anns[0].as_str().is_some() {
            Value::Str(format!("[{}]", anns[0].as_str().unwrap_or_default()))
        } else {
            Value::List(anns)
        };
        Ok((Value::List(items), ann))
    }
}

/// A value type to write: a scalar or string, or an array.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ty {
    /// A scalar or a string.
    Scalar(GgufType),
    /// An array whose items all have this type.
    Array(Box<Ty>),
    /// An array of arrays, one type per item.
    Each(Vec<Ty>),
}

impl Ty {
    fn tag(&self) -> GgufType {
        match self {
            Ty::Scalar(t) => *t,
            _ => GgufType::Array,
        }
    }

    /// Parses an annotation; `None` when it is not one.
    pub fn parse(ann: &Value, depth: usize) -> Option<Ty> {
        if depth > 64 {
            return None;
        }
        match ann {
            Value::Str(s) if s == "[array]" => Some(Ty::Each(Vec::new())),
            Value::Str(s) => match s.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                Some(inner) => Some(Ty::Array(Box::new(Ty::parse(
                    &Value::Str(inner.to_string()),
                    depth + 1,
                )?))),
                None => match GgufType::from_short_name(s)? {
                    GgufType::Array => None,
                    t => Some(Ty::Scalar(t)),
                },
            },
            Value::List(items) => items
                .iter()
                .map(|a| Ty::parse(a, depth + 1))
                .collect::<Option<Vec<_>>>()
                .map(Ty::Each),
            _ => None,
        }
    }

    /// The type we give a value that has no (usable) annotation.
    pub fn infer(v: &Value) -> Option<Ty> {
        Some(match v {
            Value::Str(_) => Ty::Scalar(GgufType::String),
            Value::Bool(_) => Ty::Scalar(GgufType::Bool),
            Value::Int(i) => Ty::Scalar(int_type(*i)?),
            Value::Float(_) => Ty::Scalar(GgufType::Float64),
            Value::Bytes(_) => Ty::Array(Box::new(Ty::Scalar(GgufType::Uint8))),
            Value::List(items) => infer_list(items)?,
            Value::Null | Value::Map(_) => return None,
        })
    }
}

fn int_type(i: i128) -> Option<GgufType> {
    [GgufType::Int32, GgufType::Int64, GgufType::Uint64]
        .into_iter()
        .find(|t| t.int_range().is_some_and(|(lo, hi)| lo <= i && i <= hi))
}

fn infer_list(items: &[Value]) -> Option<Ty> {
    let scalar = |t| Some(Ty::Array(Box::new(Ty::Scalar(t))));
    if items.is_empty() {
        return scalar(GgufType::Int32);
    }
    if items.iter().all(|v| matches!(v, Value::Int(_))) {
        let mut widest = GgufType::Int32;
        for v in items {
            let t = int_type(v.as_int().unwrap_or_default())?;
            if t != GgufType::Int32 && widest != GgufType::Uint64 {
                widest = t;
            }
        }
        // A list mixing negative and > i64::MAX values has no common type.
        let (lo, hi) = widest.int_range()?;
        let fits = items
            .iter()
            .all(|v| v.as_int().is_some_and(|i| lo <= i && i <= hi));
        return if fits { scalar(widest) } else { None };
    }
    // Ints mixed with floats are not made floats: that would change the values' type
    // (they go as JSON text, which our reader restores exactly).
    if items.iter().all(|v| matches!(v, Value::Float(_))) {
        return scalar(GgufType::Float64);
    }
    if items.iter().all(|v| matches!(v, Value::Str(_))) {
        return scalar(GgufType::String);
    }
    if items.iter().all(|v| matches!(v, Value::Bool(_))) {
        return scalar(GgufType::Bool);
    }
    if items
        .iter()
        .all(|v| matches!(v, Value::List(_) | Value::Bytes(_)))
    {
        return items
            .iter()
            .map(Ty::infer)
            .collect::<Option<Vec<_>>>()
            .map(Ty::Each);
    }
    None
}

/// Appends `value` as type `ty` (type tag first when `with_tag`). `None` (and `out`
/// unchanged) when the value does not fit the type.
pub(crate) fn encode(out: &mut Vec<u8>, ty: &Ty, value: &Value, with_tag: bool) -> Option<()> {
    let mark = out.len();
    let r = encode_inner(out, ty, value, with_tag);
    if r.is_none() {
        out.truncate(mark);
    }
    r
}

fn encode_inner(out: &mut Vec<u8>, ty: &Ty, value: &Value, with_tag: bool) -> Option<()> {
    if with_tag {
        out.extend_from_slice(&ty.tag().tag().to_le_bytes());
    }
    match ty {
        Ty::Scalar(t) => encode_scalar(out, *t, value),
        Ty::Array(item) => {
            let owned;
            let items: &[Value] = match value {
                Value::List(l) => l,
                Value::Bytes(b) if **item == Ty::Scalar(GgufType::Uint8) => {
                    out.extend_from_slice(&GgufType::Uint8.tag().to_le_bytes());
                    out.extend_from_slice(&(b.len() as u64).to_le_bytes());
                    out.extend_from_slice(b);
                    return Some(());
                }
                Value::Str(s) => {
                    owned = from_text(s)?;
                    return encode_inner(out, ty, &owned, false);
                }
                Value::Map(_) => {
                    owned = bytes_from_json_map(value)?;
                    return encode_inner(out, ty, &owned, false);
                }
                _ => return None,
            };
            out.extend_from_slice(&item.tag().tag().to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for v in items {
                encode_inner(out, item, v, false)?;
            }
            Some(())
        }
        Ty::Each(tys) => {
            let owned;
            let items: &[Value] = match value {
                Value::List(l) => l,
                Value::Str(s) => {
                    owned = from_text(s)?;
                    owned.as_list()?
                }
                _ => return None,
            };
            if items.len() != tys.len() {
                return None;
            }
            out.extend_from_slice(&GgufType::Array.tag().to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for (t, v) in tys.iter().zip(items) {
                encode_inner(out, t, v, false)?;
            }
            Some(())
        }
    }
}

/// A list or bytes back from the JSON text a string-only format stored.
fn from_text(s: &str) -> Option<Value> {
    let j: serde_json::Value = serde_json::from_str(s).ok()?;
    let v = Value::from_json(&j);
    match v {
        Value::List(_) => Some(v),
        Value::Map(_) => bytes_from_json_map(&v),
        _ => None,
    }
}

/// `{"$bytes": "<hex>"}` (how [`Value::to_json`] renders bytes) back to bytes.
fn bytes_from_json_map(v: &Value) -> Option<Value> {
    let m = v.as_map()?;
    if m.len() != 1 {
        return None;
    }
    crate::util::unhex(m.get("$bytes")?.as_str()?).map(Value::Bytes)
}

fn encode_scalar(out: &mut Vec<u8>, t: GgufType, value: &Value) -> Option<()> {
    match t {
        GgufType::String => {
            let b: &[u8] = match value {
                Value::Str(s) => s.as_bytes(),
                Value::Bytes(b) => b,
                _ => return None,
            };
            out.extend_from_slice(&(b.len() as u64).to_le_bytes());
            out.extend_from_slice(b);
        }
        GgufType::Bool => {
            let b = match value {
                Value::Bool(b) => *b,
                Value::Str(s) if s == "true" => true,
                Value::Str(s) if s == "false" => false,
                _ => return None,
            };
            out.push(b as u8);
        }
        GgufType::Float32 | GgufType::Float64 => {
            let f = match value {
                Value::Float(f) => *f,
                Value::Int(i) => *i as f64,
                Value::Str(s) => parse_float(s)?,
                _ => return None,
            };
            if t == GgufType::Float32 {
                out.extend_from_slice(&(f as f32).to_le_bytes());
            } else {
                out.extend_from_slice(&f.to_le_bytes());
            }
        }
        GgufType::Array => return None,
        _ => {
            let i = match value {
                Value::Int(i) => *i,
                Value::Str(s) => s.trim().parse::<i128>().ok()?,
                _ => return None,
            };
            let (lo, hi) = t.int_range()?;
            if i < lo || i > hi {
                return None;
            }
            let size = t.scalar_size()?;
            // Two's complement little-endian, truncated to the type's width.
            out.extend_from_slice(&i.to_le_bytes()[..size]);
        }
    }
    Some(())
}

fn parse_float(s: &str) -> Option<f64> {
    match s.trim() {
        "NaN" => Some(f64::NAN),
        "Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        t => t.parse().ok(),
    }
}

/// True when the writer, given `value` without an annotation, would store exactly what
/// `ann` says (so the annotation carries nothing).
pub(crate) fn is_default(ann: &Value, value: &Value) -> bool {
    let inferred = Ty::infer(value);
    if ann.as_str() == Some(JSON_ANNOTATION) {
        let mut scratch = Vec::new();
        return inferred.is_none_or(|t| encode(&mut scratch, &t, value, true).is_none());
    }
    let (Some(annotated), Some(inferred)) = (Ty::parse(ann, 0), inferred) else {
        return false;
    };
    if annotated == inferred {
        return true;
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    encode(&mut a, &annotated, value, true).is_some()
        && encode(&mut b, &inferred, value, true).is_some()
        && a == b
}

/// The annotations map of a source's metadata (a map, or its JSON text when the
/// metadata went through a string-only format).
pub(crate) fn annotations(meta: &Map) -> Map {
    crate::metadata::kept_types(meta)
}

/// Encodes one KV (key, type, value). Returns true when the value had to be stored as
/// JSON text (GGUF has no type for it, or its annotation says `json`).
pub(crate) fn encode_kv(
    out: &mut Vec<u8>,
    key: &str,
    value: &Value,
    ann: Option<&Value>,
) -> Result<bool> {
    if key.len() > u16::MAX as usize {
        return Err(Error::invalid_input(format!(
            "metadata key of {} bytes: GGUF keys are at most 65535 bytes",
            key.len()
        )));
    }
    out.extend_from_slice(&(key.len() as u64).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    let as_json = ann.and_then(Value::as_str) == Some(JSON_ANNOTATION);
    if !as_json {
        if let Some(ty) = ann.and_then(|a| Ty::parse(a, 0)) {
            if encode(out, &ty, value, true).is_some() {
                return Ok(false);
            }
        }
        if let Some(ty) = Ty::infer(value) {
            if encode(out, &ty, value, true).is_some() {
                return Ok(false);
            }
        }
    }
    let text = value.to_json().to_string();
    encode(out, &Ty::Scalar(GgufType::String), &Value::Str(text), true);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(ty_tag: GgufType, bytes: &[u8]) -> (Value, Value, Vec<u8>) {
        let mut vr = ValueReader {
            item_budget: 1000,
            max_depth: 8,
            saw_non_utf8: false,
            endian: Endian { big: false },
        };
        let mut r = ByteReader::new(bytes);
        let (v, a) = vr.read(&mut r, ty_tag, 0).unwrap();
        assert_eq!(r.remaining(), 0);
        let mut out = Vec::new();
        encode(&mut out, &Ty::parse(&a, 0).unwrap(), &v, false).unwrap();
        (v, a, out)
    }

    #[test]
    fn nested_heterogeneous_arrays_round_trip() {
        // array of 2 arrays: [u16: 1, 2] and [str: "ab"]
        let mut b = Vec::new();
        b.extend_from_slice(&9u32.to_le_bytes());
        b.extend_from_slice(&2u64.to_le_bytes());
        b.extend_from_slice(&2u32.to_le_bytes());
        b.extend_from_slice(&2u64.to_le_bytes());
        b.extend_from_slice(&[1, 0, 2, 0]);
        b.extend_from_slice(&8u32.to_le_bytes());
        b.extend_from_slice(&1u64.to_le_bytes());
        b.extend_from_slice(&2u64.to_le_bytes());
        b.extend_from_slice(b"ab");
        let (v, a, out) = round_trip(GgufType::Array, &b);
        assert_eq!(out, b);
        assert_eq!(
            a,
            Value::List(vec![Value::Str("[u16]".into()), Value::Str("[str]".into())])
        );
        assert_eq!(v.as_list().unwrap().len(), 2);
    }

    #[test]
    fn strings_from_string_formats_take_their_annotated_type() {
        let mut out = Vec::new();
        let ty = Ty::parse(&Value::Str("[f32]".into()), 0).unwrap();
        encode(&mut out, &ty, &Value::Str("[0.5, 2]".into()), false).unwrap();
        assert_eq!(&out[..4], &6u32.to_le_bytes());
        assert_eq!(&out[12..16], &0.5f32.to_le_bytes());
        let ty = Ty::Scalar(GgufType::Uint8);
        assert!(encode(&mut out, &ty, &Value::Int(256), false).is_none());
        assert!(encode(&mut out, &ty, &Value::Str("x".into()), false).is_none());
    }

    #[test]
    fn inference() {
        assert_eq!(
            Ty::infer(&Value::Int(1 << 40)),
            Some(Ty::Scalar(GgufType::Int64))
        );
        assert_eq!(
            Ty::infer(&Value::List(vec![
                Value::Int(-1),
                Value::Int(u64::MAX as i128)
            ])),
            None
        );
        assert_eq!(Ty::infer(&Value::Null), None);
    }
}
