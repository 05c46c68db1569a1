//! JSON text exactly as CPython's `json.dumps(obj, separators=(",", ":"))` writes it,
//! and read as `json.loads` reads it. Shared by FOLD (index, `manifest_hash`, STEN
//! attributes) and AERO (`meta.json`, which the original writes with
//! `json.dumps(meta, separators=(",", ":"), sort_keys=True)`).
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
//!
//! [`loads`] reads what Python's `json.loads` reads, into a [`Value`]: key order kept
//! (a repeated key keeps its first position and its last value, as a `dict` does),
//! integers of any size up to 128 bits (Python's are unbounded; serde_json turns those
//! beyond 64 bits into floats), floats rounded correctly, and the `NaN`, `Infinity` and
//! `-Infinity` tokens Python writes for non-finite floats (which serde_json rejects).
//! Both are needed to recompute the `manifest_hash` of any file pyfolds writes.

use std::fmt::Write as _;

use crate::error::{Error, Result};
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
    /// `json.dumps(obj, sort_keys=True, separators=(",", ":"))`: FOLD's manifest hash
    /// input and AERO's `meta.json`.
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

/// Parses Python-dialect JSON (see the module docs). Errors are `Malformed` and say at
/// which byte; nesting deeper than `max_depth` is refused.
pub fn loads(text: &[u8], max_depth: usize) -> Result<Value> {
    let text = std::str::from_utf8(text)
        .map_err(|e| Error::malformed(format!("JSON is not UTF-8 (byte {})", e.valid_up_to())))?;
    let mut p = Parser {
        s: text,
        b: text.as_bytes(),
        pos: 0,
        depth: 0,
        max_depth,
    };
    p.ws();
    let v = p.value()?;
    p.ws();
    if p.pos != p.b.len() {
        return Err(p.err("extra data after the JSON value"));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    pos: usize,
    depth: usize,
    max_depth: usize,
}

impl Parser<'_> {
    fn err(&self, what: &str) -> Error {
        Error::malformed(format!("JSON: {what} at byte {}", self.pos))
    }
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.pos) {
            self.pos += 1;
        }
    }
    fn eat(&mut self, lit: &str) -> bool {
        if self.s[self.pos..].starts_with(lit) {
            self.pos += lit.len();
            true
        } else {
            false
        }
    }
    fn value(&mut self) -> Result<Value> {
        match self.b.get(self.pos) {
            None => Err(self.err("unexpected end")),
            Some(b'{') => self.nested(|p| p.object()),
            Some(b'[') => self.nested(|p| p.array()),
            Some(b'"') => Ok(Value::Str(self.string()?)),
            Some(b't') if self.eat("true") => Ok(Value::Bool(true)),
            Some(b'f') if self.eat("false") => Ok(Value::Bool(false)),
            Some(b'n') if self.eat("null") => Ok(Value::Null),
            Some(b'N') if self.eat("NaN") => Ok(Value::Float(f64::NAN)),
            Some(b'I') if self.eat("Infinity") => Ok(Value::Float(f64::INFINITY)),
            Some(b'-') if self.eat("-Infinity") => Ok(Value::Float(f64::NEG_INFINITY)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err("unexpected character")),
        }
    }
    fn nested(&mut self, f: impl FnOnce(&mut Self) -> Result<Value>) -> Result<Value> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return Err(self.err(&format!("nesting deeper than {}", self.max_depth)));
        }
        let v = f(self);
        self.depth -= 1;
        v
    }
    fn object(&mut self) -> Result<Value> {
        self.pos += 1;
        let mut m = Map::new();
        self.ws();
        if self.eat("}") {
            return Ok(Value::Map(m));
        }
        loop {
            self.ws();
            if self.b.get(self.pos) != Some(&b'"') {
                return Err(self.err("expected a string key"));
            }
            let k = self.string()?;
            self.ws();
            if !self.eat(":") {
                return Err(self.err("expected ':'"));
            }
            self.ws();
            let v = self.value()?;
            m.insert(k, v);
            self.ws();
            if self.eat("}") {
                return Ok(Value::Map(m));
            }
            if !self.eat(",") {
                return Err(self.err("expected ',' or '}'"));
            }
        }
    }
    fn array(&mut self) -> Result<Value> {
        self.pos += 1;
        let mut l = Vec::new();
        self.ws();
        if self.eat("]") {
            return Ok(Value::List(l));
        }
        loop {
            self.ws();
            l.push(self.value()?);
            self.ws();
            if self.eat("]") {
                return Ok(Value::List(l));
            }
            if !self.eat(",") {
                return Err(self.err("expected ',' or ']'"));
            }
        }
    }
    fn hex4(&mut self) -> Result<u32> {
        let h = self
            .s
            .get(self.pos..self.pos + 4)
            .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()))
            .ok_or_else(|| self.err("bad \\u escape"))?;
        self.pos += 4;
        u32::from_str_radix(h, 16).map_err(|_| self.err("bad \\u escape"))
    }
    fn string(&mut self) -> Result<String> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let start = self.pos;
            while let Some(&c) = self.b.get(self.pos) {
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.s[start..self.pos]);
            match self.b.get(self.pos) {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let c = self.b.get(self.pos).copied();
                    self.pos += 1;
                    match c {
                        Some(b'"') => out.push('"'),
                        Some(b'\\') => out.push('\\'),
                        Some(b'/') => out.push('/'),
                        Some(b'b') => out.push('\u{08}'),
                        Some(b'f') => out.push('\u{0c}'),
                        Some(b'n') => out.push('\n'),
                        Some(b'r') => out.push('\r'),
                        Some(b't') => out.push('\t'),
                        Some(b'u') => {
                            let mut u = self.hex4()?;
                            if (0xd800..0xdc00).contains(&u)
                                && self.s[self.pos..].starts_with("\\u")
                            {
                                let save = self.pos;
                                self.pos += 2;
                                let lo = self.hex4()?;
                                if (0xdc00..0xe000).contains(&lo) {
                                    u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
                                } else {
                                    self.pos = save;
                                }
                            }
                            // A lone surrogate (Python keeps it) cannot live in a Rust
                            // string: it becomes U+FFFD.
                            out.push(char::from_u32(u).unwrap_or('\u{fffd}'));
                        }
                        _ => {
                            self.pos -= 1;
                            return Err(self.err("bad escape"));
                        }
                    }
                }
                Some(_) => return Err(self.err("control character in string")),
            }
        }
    }
    fn number(&mut self) -> Result<Value> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            let s = p.pos;
            while p.b.get(p.pos).is_some_and(u8::is_ascii_digit) {
                p.pos += 1;
            }
            p.pos - s
        };
        self.eat("-");
        match self.b.get(self.pos) {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return Err(self.err("bad number")),
        }
        let mut float = false;
        if self.b.get(self.pos) == Some(&b'.')
            && self.b.get(self.pos + 1).is_some_and(u8::is_ascii_digit)
        {
            self.pos += 1;
            digits(self);
            float = true;
        }
        if let Some(b'e' | b'E') = self.b.get(self.pos) {
            let save = self.pos;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.b.get(self.pos) {
                self.pos += 1;
            }
            if digits(self) == 0 {
                self.pos = save;
            } else {
                float = true;
            }
        }
        let text = &self.s[start..self.pos];
        if float {
            text.parse::<f64>()
                .map(Value::Float)
                .map_err(|_| self.err("bad number"))
        } else {
            text.parse::<i128>()
                .map(Value::Int)
                .map_err(|_| self.err("integer beyond 128 bits"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vectors produced by CPython's `json` module (`tests/data/fold/gen_pyjson.py`).
    const VECTORS: &str = include_str!("../../tests/data/fold/pyjson_vectors.json");

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

    #[test]
    fn loads_reads_back_what_cpython_wrote() {
        let doc: serde_json::Value = serde_json::from_str(VECTORS).unwrap();
        for case in doc["cases"].as_array().unwrap() {
            let v = from_tagged(&case["value"]);
            for key in ["canonical", "index"] {
                let text = case[key].as_str().unwrap();
                let got = loads(text.as_bytes(), 64).unwrap();
                // NaN != NaN: compare through the canonical text instead.
                assert_eq!(
                    dumps(&got, DumpOptions::CANONICAL),
                    dumps(&v, DumpOptions::CANONICAL),
                    "{text}"
                );
            }
        }
        for pair in doc["floats"].as_array().unwrap() {
            let bits = u64::from_str_radix(pair[0].as_str().unwrap(), 16).unwrap();
            match loads(pair[1].as_str().unwrap().as_bytes(), 4).unwrap() {
                Value::Float(f) if f.is_nan() => assert!(f64::from_bits(bits).is_nan()),
                Value::Float(f) => assert_eq!(f.to_bits(), bits, "{pair}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn loads_keeps_order_and_python_dict_semantics_and_refuses_bad_input() {
        let v = loads(br#" {"b":1,"a":{"x":[1,2.5,-0.0,1e400]},"b":3} "#, 8).unwrap();
        let m = v.as_map().unwrap();
        assert_eq!(m.keys().collect::<Vec<_>>(), ["b", "a"]);
        assert_eq!(m.get("b"), Some(&Value::Int(3)));
        assert_eq!(
            loads(b"170141183460469231731687303715884105727", 1).unwrap(),
            Value::Int(i128::MAX)
        );
        assert_eq!(
            loads(br#""\ud83d\ude00 \u00e3 \/""#, 1).unwrap(),
            Value::Str("\u{1F600} ã /".into())
        );
        for bad in [
            &b"{"[..],
            b"[1,]",
            b"{\"a\" 1}",
            b"01",
            b"1.",
            b"\"\x01\"",
            b"\"\\x\"",
            b"nul",
            b"[1] 2",
            b"\xff",
            b"1701411834604692317316873037158841057270",
            b"[[[[[[[[[[1]]]]]]]]]]",
        ] {
            let e = loads(bad, 8).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Malformed, "{bad:?}");
        }
    }

    /// Hand-picked cases that were AERO's own `meta.json` writer tests before it used this
    /// module (the expected strings are what CPython prints).
    #[test]
    fn former_aero_cases() {
        for (f, s) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (-2.5e-7, "-2.5e-07"),
            (123.456, "123.456"),
            (1.2345678901234568e17, "1.2345678901234568e+17"),
        ] {
            assert_eq!(float_repr(f), s);
        }
        let v = loads(r#"{"b":1,"a":"é\n","c":[1.0,2]}"#.as_bytes(), 4).unwrap();
        assert_eq!(
            dumps(&v, DumpOptions::CANONICAL),
            r#"{"a":"\u00e9\n","b":1,"c":[1.0,2]}"#
        );
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
