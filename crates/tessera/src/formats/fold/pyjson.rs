//! JSON text exactly as CPython's `json.dumps(obj, separators=(",", ":"))` writes it.
//!
//! FOLD's `manifest_hash` is the SHA-256 of
//! `json.dumps(metadata, sort_keys=True, separators=(",", ":"))` (with `ensure_ascii`
//! left at its default, `True`), and pyfolds writes its index with
//! `json.dumps(index, ensure_ascii=False, separators=(",", ":"))`. To verify the hash of
//! a Python-written file, and to write files whose hash Python recomputes identically,
//! we need Python's exact text: no crate produces it (serde_json writes `1e20` where
//! Python writes `1e+20`, `1e-5` for `1e-05`, `1` for `1.0`, never escapes non-ASCII,
//! and cannot print `NaN`), so it is hand-written here, and tested against strings the
//! real `json` module produced (`tests/data/fold/pyjson_vectors.json`).
//!
//! The rules (CPython `Lib/json/encoder.py`, `Modules/_json.c`, `Python/pystrtod.c`):
//! - floats use `repr`: the shortest digits that round-trip, fixed notation when the
//!   decimal exponent `e` (value = 0.d1d2… × 10^e) satisfies `-4 < e <= 16`, always
//!   with a fractional part (`1.0`); otherwise `d.ddde±XX` with at least two exponent
//!   digits (`1e-05`, `1.5e+20`). Non-finite floats are `NaN`, `Infinity`, `-Infinity`.
//! - `ensure_ascii=True`: `"` `\\` `\n` `\r` `\t` `\b` `\f` by name, every other character
//!   outside `' '..='~'` as `\uXXXX` (lower-case hex), astral characters as a surrogate
//!   pair. `ensure_ascii=False`: only `"`, `\\` and the controls below 0x20 are escaped.
//! - `sort_keys`: keys in code-point order (= UTF-8 byte order, = Rust `str` order).
//! - ints of any size in decimal; `true`/`false`/`null`.
//!
//! [`Value::Bytes`] has no Python JSON form; it is written as `{"$bytes":"<hex>"}`, as
//! [`Value::to_json`] does.

use std::fmt::Write as _;

use crate::metadata::{Map, Value};

/// How to serialize.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DumpOptions {
    /// Sort map keys (Python `sort_keys=True`).
    pub sort_keys: bool,
    /// Escape every non-ASCII character (Python `ensure_ascii=True`).
    pub ensure_ascii: bool,
}

impl DumpOptions {
    /// `json.dumps(obj, sort_keys=True, separators=(",", ":"))`: the manifest hash input.
    pub const CANONICAL: DumpOptions = DumpOptions {
        sort_keys: true,
        ensure_ascii: true,
    };
    /// `json.dumps(obj, ensure_ascii=False, separators=(",", ":"))`: pyfolds' index.
    pub const INDEX: DumpOptions = DumpOptions {
        sort_keys: false,
        ensure_ascii: false,
    };
}

/// Serializes `v` as Python's `json.dumps` with compact separators would.
pub fn dumps(v: &Value, opts: DumpOptions) -> String {
    let mut out = String::new();
    write_value(&mut out, v, opts);
    out
}

/// Serializes a map (see [`dumps`]).
pub fn dumps_map(m: &Map, opts: DumpOptions) -> String {
    let mut out = String::new();
    write_map(&mut out, m, opts);
    out
}

fn write_value(out: &mut String, v: &Value, opts: DumpOptions) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => out.push_str(&float_repr(*f)),
        Value::Str(s) => write_str(out, s, opts.ensure_ascii),
        Value::Bytes(b) => {
            out.push_str("{\"$bytes\":");
            write_str(out, &crate::util::hex(b), opts.ensure_ascii);
            out.push('}');
        }
        Value::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item, opts);
            }
            out.push(']');
        }
        Value::Map(m) => write_map(out, m, opts),
    }
}

fn write_map(out: &mut String, m: &Map, opts: DumpOptions) {
    let mut entries: Vec<(&str, &Value)> = m.iter().collect();
    if opts.sort_keys {
        entries.sort_by(|a, b| a.0.cmp(b.0));
    }
    out.push('{');
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_str(out, k, opts.ensure_ascii);
        out.push(':');
        write_value(out, v, opts);
    }
    out.push('}');
}

fn write_str(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if ensure_ascii && !(' '..='~').contains(&c) => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's `repr(float)` (also what `json.dumps` writes for a float).
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    // Rust's `{:e}` gives the shortest round-trip digits: "1.2345e-7", "1e20", "0e0".
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (sci.as_str(), 0),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if f == 0.0 {
        return format!("{sign}0.0");
    }
    // Python's decpt: value = 0.d1d2... x 10^decpt.
    let decpt = exp + 1;
    if decpt <= -4 || decpt > 16 {
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{esign}{:02}", exp.unsigned_abs())
    } else if decpt <= 0 {
        let zeros = "0".repeat(decpt.unsigned_abs() as usize);
        format!("{sign}0.{zeros}{digits}")
    } else {
        let decpt = decpt as usize;
        if digits.len() <= decpt {
            let zeros = "0".repeat(decpt - digits.len());
            format!("{sign}{digits}{zeros}.0")
        } else {
            format!("{sign}{}.{}", &digits[..decpt], &digits[decpt..])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vectors produced by CPython's `json` module (`tests/data/fold/gen_pyjson.py`).
    const VECTORS: &str = include_str!("../../../tests/data/fold/pyjson_vectors.json");

    #[test]
    fn matches_cpython_json_dumps() {
        let doc: serde_json::Value = serde_json::from_str(VECTORS).unwrap();
        let cases = doc["cases"].as_array().unwrap();
        assert!(cases.len() > 20);
        for case in cases {
            // The input travels as a tagged tree so that floats, big ints and non-finite
            // values arrive exactly.
            let v = from_tagged(&case["value"]);
            let canonical = case["canonical"].as_str().unwrap();
            let index = case["index"].as_str().unwrap();
            assert_eq!(dumps(&v, DumpOptions::CANONICAL), canonical, "{case}");
            assert_eq!(dumps(&v, DumpOptions::INDEX), index, "{case}");
        }
    }

    #[test]
    fn float_repr_matches_cpython() {
        let doc: serde_json::Value = serde_json::from_str(VECTORS).unwrap();
        let floats = doc["floats"].as_array().unwrap();
        assert!(floats.len() > 20);
        for pair in floats {
            let bits = u64::from_str_radix(pair[0].as_str().unwrap(), 16).unwrap();
            let want = pair[1].as_str().unwrap();
            assert_eq!(float_repr(f64::from_bits(bits)), want, "bits {bits:016x}");
        }
    }

    fn from_tagged(t: &serde_json::Value) -> Value {
        let tag = t[0].as_str().unwrap();
        let body = &t[1];
        match tag {
            "null" => Value::Null,
            "bool" => Value::Bool(body.as_bool().unwrap()),
            "int" => Value::Int(body.as_str().unwrap().parse().unwrap()),
            "float" => Value::Float(f64::from_bits(
                u64::from_str_radix(body.as_str().unwrap(), 16).unwrap(),
            )),
            "str" => Value::Str(body.as_str().unwrap().to_string()),
            "list" => Value::List(body.as_array().unwrap().iter().map(from_tagged).collect()),
            "dict" => Value::Map(
                body.as_array()
                    .unwrap()
                    .iter()
                    .map(|kv| (kv[0].as_str().unwrap().to_string(), from_tagged(&kv[1])))
                    .collect(),
            ),
            other => panic!("unknown tag {other}"),
        }
    }
}
