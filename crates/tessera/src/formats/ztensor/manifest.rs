//! Decoding the CBOR manifest into our own structs.
//!
//! The manifest is hostile input. It is walked straight into [`RawManifest`] by a
//! cursor over the manifest's bytes that reads CBOR item heads itself (as ciborium-ll's
//! `Header`s) and borrows text items in place: no intermediate value tree, no serde
//! layer, no copy of a key before it is matched. Hand-written because the crates'
//! decoders read through an `io::Read` byte by byte and copy every text out, which
//! made opening a 200-tensor file slower than the safetensors crate's JSON header
//! parse; the CBOR item head is 30 lines (RFC 8949 §3). Rules:
//!
//! - every length is compared with the bytes left before anything is allocated from it,
//!   and list capacities taken from the file are capped, so memory stays proportional to
//!   the manifest (itself capped by [`crate::Limits::max_index_bytes`]);
//! - nesting is limited (`Limits::max_depth`);
//! - duplicate keys are errors, unknown keys are skipped;
//! - indefinite-length items are refused (no writer of zTensor v1 produces them);
//! - tags are skipped, as ciborium's serde layer does;
//! - the map must use every byte of the manifest.

use std::borrow::Cow;

use ciborium_ll::Header;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::metadata::{Map, Value};
use crate::tensor::Layout;

use super::entry::{Component, Encoding};
use super::raw::dtype_from_name;

/// A decoded manifest. `tensors` is `tensors` (v1.0) or `objects` (v1.1).
#[derive(Debug, Default)]
pub struct RawManifest {
    /// `version`.
    pub version: Option<String>,
    /// `generator`.
    pub generator: Option<String>,
    /// `attributes`, in file order.
    pub attributes: Vec<(String, Value)>,
    /// `tensors` / `objects`, in file order (duplicate names kept, to be rejected).
    pub tensors: Option<Vec<(String, RawTensor)>>,
}

/// A `dtype` string: the dtype when known, else the name (for the error message).
pub type DTypeName = std::result::Result<DType, String>;

/// A tensor object.
#[derive(Debug)]
pub struct RawTensor {
    /// `dtype` (v1.0; in v1.1 it moved to the components).
    pub dtype: Option<DTypeName>,
    /// `shape`.
    pub shape: Vec<u64>,
    /// `format`: `dense`, `sparse_csr`, `sparse_coo` or another layout.
    pub format: Layout,
    /// `components`: role → location, in file order (not yet checked against the file).
    pub components: Vec<Component>,
    /// `attributes` (v1.1 per-object attributes).
    pub attributes: Vec<(String, Value)>,
}

/// Most list slots reserved up front from a count the file states.
const MAX_PREALLOC: usize = 1024;

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
    max_depth: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], max_depth: usize) -> Reader<'a> {
        Reader {
            bytes,
            pos: 0,
            depth: 0,
            max_depth,
        }
    }

    fn offset(&mut self) -> usize {
        self.pos
    }

    fn remaining(&mut self) -> usize {
        self.bytes.len() - self.pos
    }

    /// The next `n` bytes, borrowed (`n` was checked against what is left).
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let b = self
            .bytes
            .get(self.pos..self.pos.saturating_add(n))
            .ok_or_else(truncated)?;
        self.pos += n;
        Ok(b)
    }

    /// One CBOR item head (RFC 8949 §3): major type, then the argument in the low five
    /// bits or the 1, 2, 4 or 8 bytes after them; 31 is indefinite (lengths) or break.
    fn head(&mut self) -> Result<Header> {
        let at = self.pos;
        let syntax =
            || Error::malformed(format!("manifest: CBOR syntax error at manifest byte {at}"));
        let [first] = *self.take(1)? else {
            return Err(truncated());
        };
        let (major, minor) = (first >> 5, first & 31);
        let arg: Option<u64> = match minor {
            0..=23 => Some(u64::from(minor)),
            24..=27 => {
                let n = 1usize << (minor - 24);
                let mut b = [0u8; 8];
                b[8 - n..].copy_from_slice(self.take(n)?);
                Some(u64::from_be_bytes(b))
            }
            31 => None,
            _ => return Err(syntax()),
        };
        let len = |a: Option<u64>| -> Result<Option<usize>> {
            a.map(|v| usize::try_from(v).map_err(|_| syntax()))
                .transpose()
        };
        Ok(match (major, arg) {
            (0, Some(v)) => Header::Positive(v),
            (1, Some(v)) => Header::Negative(v),
            (2, a) => Header::Bytes(len(a)?),
            (3, a) => Header::Text(len(a)?),
            (4, a) => Header::Array(len(a)?),
            (5, a) => Header::Map(len(a)?),
            (6, Some(v)) => Header::Tag(v),
            (7, None) => Header::Break,
            (7, Some(v)) => match minor {
                25 => Header::Float(half::f16::from_bits(v as u16).into()),
                26 => Header::Float(f32::from_bits(v as u32).into()),
                27 => Header::Float(f64::from_bits(v)),
                _ => Header::Simple(v as u8),
            },
            _ => return Err(syntax()),
        })
    }

    fn err(&mut self, msg: impl std::fmt::Display) -> Error {
        let at = self.offset();
        Error::malformed(format!("manifest: {msg} (at manifest byte {at})"))
    }

    /// The next header, tags skipped.
    fn pull(&mut self) -> Result<Header> {
        loop {
            match self.head()? {
                Header::Tag(_) => continue,
                h => return Ok(h),
            }
        }
    }

    fn check_len(&mut self, len: Option<usize>, what: &str) -> Result<usize> {
        match len {
            None => Err(self.err(format!(
                "{what}: indefinite-length CBOR items are not supported"
            ))),
            Some(n) if n > self.remaining() => Err(Error::malformed(format!(
                "manifest: CBOR truncated: {what} declares {n} bytes, {} left",
                self.remaining()
            ))),
            Some(n) => Ok(n),
        }
    }

    /// Reads the body of a text item of `len` bytes (borrowed in place) and matches it:
    /// `known` sees the raw bytes and recognises the usual names without allocating or
    /// validating (an ASCII literal is valid UTF-8); anything else is checked as UTF-8
    /// and handed to `other`.
    fn name_body<T>(
        &mut self,
        len: Option<usize>,
        what: &str,
        known: impl FnOnce(&[u8]) -> Option<T>,
        other: impl FnOnce(&str) -> T,
    ) -> Result<T> {
        let len = self.check_len(len, what)?;
        let b = self.take(len)?;
        if let Some(t) = known(b) {
            return Ok(t);
        }
        match std::str::from_utf8(b) {
            Ok(s) => Ok(other(s)),
            Err(_) => Err(self.err(format!("{what} is not UTF-8"))),
        }
    }

    /// A text item as an owned string (one allocation of its exact size).
    fn owned_text(&mut self, len: Option<usize>, what: &str) -> Result<String> {
        let len = self.check_len(len, what)?;
        let b = self.take(len)?;
        match std::str::from_utf8(b) {
            Ok(t) => Ok(t.to_owned()),
            Err(_) => Err(self.err(format!("{what} is not UTF-8"))),
        }
    }

    fn text(&mut self, what: &str) -> Result<String> {
        match self.pull()? {
            Header::Text(len) => self.owned_text(len, what),
            _ => Err(self.err(format!("{what} must be a text string"))),
        }
    }

    fn uint(&mut self, what: &str) -> Result<u64> {
        match self.pull()? {
            Header::Positive(n) => Ok(n),
            _ => Err(self.err(format!("{what} must be an unsigned integer"))),
        }
    }

    fn map_len(&mut self, what: &str) -> Result<usize> {
        match self.pull()? {
            Header::Map(len) => self.count(len, what),
            _ => Err(self.err(format!("{what} must be a map"))),
        }
    }

    fn array_len(&mut self, what: &str) -> Result<usize> {
        match self.pull()? {
            Header::Array(len) => self.count(len, what),
            _ => Err(self.err(format!("{what} must be an array"))),
        }
    }

    /// A container's entry count: definite, and at most one entry per byte left.
    fn count(&mut self, len: Option<usize>, what: &str) -> Result<usize> {
        self.check_len(len, what)
    }

    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return Err(Error::limit(format!(
                "manifest: CBOR nested deeper than {}",
                self.max_depth
            )));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// Any value, as our own [`Value`] (attributes).
    fn value(&mut self, what: &str) -> Result<Value> {
        Ok(match self.pull()? {
            Header::Positive(n) => Value::Int(n as i128),
            Header::Negative(n) => Value::Int(-1 - n as i128),
            Header::Float(f) => Value::Float(f),
            Header::Simple(20) => Value::Bool(false),
            Header::Simple(21) => Value::Bool(true),
            Header::Simple(22 | 23) => Value::Null,
            Header::Simple(s) => {
                return Err(self.err(format!("{what}: unknown CBOR simple value {s}")))
            }
            Header::Text(len) => Value::Str(self.owned_text(len, what)?),
            Header::Bytes(len) => {
                let len = self.check_len(len, what)?;
                Value::Bytes(self.take(len)?.to_vec())
            }
            Header::Array(len) => {
                let n = self.count(len, what)?;
                self.enter()?;
                let mut out = Vec::with_capacity(n.min(MAX_PREALLOC));
                for _ in 0..n {
                    out.push(self.value(what)?);
                }
                self.leave();
                Value::List(out)
            }
            Header::Map(len) => {
                let n = self.count(len, what)?;
                self.enter()?;
                let mut entries = Vec::with_capacity(n.min(MAX_PREALLOC));
                for _ in 0..n {
                    let k = self.text(&format!("a key in {what}"))?;
                    let v = self.value(what)?;
                    entries.push((k, v));
                }
                self.leave();
                self.no_duplicates(&entries, what)?;
                let mut out = Map::new();
                for (k, v) in entries {
                    out.push_new(k, v);
                }
                Value::Map(out)
            }
            Header::Break => return Err(self.err(format!("{what}: unexpected CBOR break"))),
            Header::Tag(_) => unreachable!("pull skips tags"),
        })
    }

    /// Skips one value of any kind (unknown keys).
    fn skip(&mut self, what: &str) -> Result<()> {
        self.value(what).map(drop)
    }

    /// Duplicate keys are errors (found by sorting: O(n log n) on hostile maps).
    fn no_duplicates<T>(&mut self, entries: &[(String, T)], what: &str) -> Result<()> {
        let mut keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
        keys.sort_unstable();
        if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
            let k = w[0].to_string();
            return Err(self.err(format!("{what}: duplicate key {k:?}")));
        }
        Ok(())
    }

    fn attributes(&mut self, what: &str) -> Result<Vec<(String, Value)>> {
        let n = self.map_len(what)?;
        self.enter()?;
        let mut out: Vec<(String, Value)> = Vec::with_capacity(n.min(MAX_PREALLOC));
        for _ in 0..n {
            let k = self.text(&format!("a key of {what}"))?;
            let v = self.value(what)?;
            out.push((k, v));
        }
        self.leave();
        self.no_duplicates(&out, what)?;
        Ok(out)
    }

    fn dtype(&mut self, what: &str) -> Result<DTypeName> {
        match self.pull()? {
            Header::Text(len) => self.name_body(
                len,
                what,
                |_| None,
                |s| dtype_from_name(s).ok_or_else(|| s.to_string()),
            ),
            _ => Err(self.err(format!("{what} must be a text string"))),
        }
    }

    fn component(&mut self, role: Cow<'static, str>) -> Result<Component> {
        match self.component_fields() {
            Ok((dtype, offset, length, encoding, digest)) => Ok(Component {
                role,
                dtype,
                offset,
                length,
                encoding,
                digest,
            }),
            Err(e) => Err(e.at_subject(format!("component {role:?}"))),
        }
    }

    #[allow(clippy::type_complexity)]
    fn component_fields(&mut self) -> Result<(Option<DType>, u64, u64, Encoding, Option<String>)> {
        let n = self.map_len("a component")?;
        self.enter()?;
        let (mut dtype, mut offset, mut length, mut encoding, mut digest) =
            (None, None, None, None, None);
        for _ in 0..n {
            let Header::Text(len) = self.pull()? else {
                return Err(self.err("a component key must be a text string"));
            };
            let key = self.name_body(
                len,
                "a component key",
                |b| match b {
                    b"dtype" => Some(0),
                    b"offset" => Some(1),
                    b"length" => Some(2),
                    b"encoding" => Some(3),
                    b"digest" => Some(4),
                    _ => None,
                },
                |_| 5,
            )?;
            let dup = match key {
                0 => {
                    let d = self
                        .dtype("\"dtype\"")?
                        .map_err(|s| Error::malformed(format!("unknown dtype {s:?}")))?;
                    dtype.replace(d).is_some()
                }
                1 => offset.replace(self.uint("\"offset\"")?).is_some(),
                2 => length.replace(self.uint("\"length\"")?).is_some(),
                3 => {
                    let e = match self.pull()? {
                        Header::Text(len) => self.name_body(
                            len,
                            "\"encoding\"",
                            |b| match b {
                                b"raw" => Some(Encoding::Raw),
                                b"zstd" => Some(Encoding::Zstd),
                                _ => None,
                            },
                            |s| Encoding::Other(s.to_string()),
                        )?,
                        _ => return Err(self.err("\"encoding\" must be a text string")),
                    };
                    encoding.replace(e).is_some()
                }
                4 => digest.replace(self.text("\"digest\"")?).is_some(),
                _ => {
                    self.skip("an unknown component field")?;
                    false
                }
            };
            if dup {
                return Err(self.err("a component has a duplicate field"));
            }
        }
        self.leave();
        let offset = offset.ok_or_else(|| self.err("a component has no \"offset\""))?;
        let length = length.ok_or_else(|| self.err("a component has no \"length\""))?;
        Ok((
            dtype,
            offset,
            length,
            encoding.unwrap_or(Encoding::Raw),
            digest,
        ))
    }

    fn tensor(&mut self) -> Result<RawTensor> {
        let n = self.map_len("a tensor object")?;
        self.enter()?;
        let (mut dtype, mut shape, mut format, mut components, mut attributes) =
            (None, None, None, None, None);
        for _ in 0..n {
            let Header::Text(len) = self.pull()? else {
                return Err(self.err("a tensor key must be a text string"));
            };
            let key = self.name_body(
                len,
                "a tensor key",
                |b| match b {
                    b"dtype" => Some(0),
                    b"shape" => Some(1),
                    b"format" => Some(2),
                    b"components" => Some(3),
                    b"attributes" => Some(4),
                    _ => None,
                },
                |_| 5,
            )?;
            let dup = match key {
                0 => dtype.replace(self.dtype("\"dtype\"")?).is_some(),
                1 => {
                    let r = self.array_len("\"shape\"")?;
                    let mut s = Vec::with_capacity(r.min(MAX_PREALLOC));
                    for _ in 0..r {
                        s.push(self.uint("a dimension of \"shape\"")?);
                    }
                    shape.replace(s).is_some()
                }
                2 => {
                    let l = match self.pull()? {
                        Header::Text(len) => self.name_body(
                            len,
                            "\"format\"",
                            |b| match b {
                                b"dense" => Some(Layout::Dense),
                                b"sparse_csr" => Some(Layout::SparseCsr),
                                b"sparse_coo" => Some(Layout::SparseCoo),
                                _ => None,
                            },
                            Layout::from_name,
                        )?,
                        _ => return Err(self.err("\"format\" must be a text string")),
                    };
                    format.replace(l).is_some()
                }
                3 => {
                    let c = self.map_len("\"components\"")?;
                    self.enter()?;
                    let mut out = Vec::with_capacity(c.min(MAX_PREALLOC));
                    for _ in 0..c {
                        let role = match self.pull()? {
                            Header::Text(len) => self.name_body(
                                len,
                                "a component name",
                                |b| match b {
                                    b"data" => Some(Cow::Borrowed("data")),
                                    b"values" => Some(Cow::Borrowed("values")),
                                    b"indices" => Some(Cow::Borrowed("indices")),
                                    b"indptr" => Some(Cow::Borrowed("indptr")),
                                    b"coords" => Some(Cow::Borrowed("coords")),
                                    _ => None,
                                },
                                |s| Cow::Owned(s.to_string()),
                            )?,
                            _ => return Err(self.err("a component name must be a text string")),
                        };
                        let comp = self.component(role)?;
                        out.push(comp);
                    }
                    self.leave();
                    components.replace(out).is_some()
                }
                4 => attributes
                    .replace(self.attributes("\"attributes\"")?)
                    .is_some(),
                _ => {
                    self.skip("an unknown tensor field")?;
                    false
                }
            };
            if dup {
                return Err(self.err("a tensor object has a duplicate field"));
            }
        }
        self.leave();
        Ok(RawTensor {
            dtype,
            shape: shape.ok_or_else(|| self.err("the tensor object has no \"shape\""))?,
            format: format.ok_or_else(|| self.err("the tensor object has no \"format\""))?,
            components: components
                .ok_or_else(|| self.err("the tensor object has no \"components\""))?,
            attributes: attributes.unwrap_or_default(),
        })
    }

    fn tensors(&mut self) -> Result<Vec<(String, RawTensor)>> {
        let n = self.map_len("\"tensors\"")?;
        self.enter()?;
        let mut out = Vec::with_capacity(n.min(MAX_PREALLOC));
        for _ in 0..n {
            let name = self.text("a tensor name")?;
            let t = self
                .tensor()
                .map_err(|e| e.at_subject(format!("tensor {name:?}")))?;
            out.push((name, t));
        }
        self.leave();
        Ok(out)
    }

    fn finish(&mut self) -> Result<()> {
        let left = self.remaining();
        if left > 0 {
            return Err(self.err(format!("{left} trailing bytes after the CBOR map")));
        }
        Ok(())
    }
}

fn truncated() -> Error {
    Error::malformed("manifest: CBOR truncated")
}

/// Decodes a manifest, requiring every byte to be used.
pub fn decode(bytes: &[u8], max_depth: usize) -> Result<RawManifest> {
    let mut r = Reader::new(bytes, max_depth);
    let n = r.map_len("the manifest")?;
    r.enter()?;
    let mut m = RawManifest::default();
    for _ in 0..n {
        let key = r.text("a manifest key")?;
        let dup = match key.as_str() {
            "version" => m.version.replace(r.text("\"version\"")?).is_some(),
            "generator" => m.generator.replace(r.text("\"generator\"")?).is_some(),
            "attributes" => {
                let a = r.attributes("\"attributes\"")?;
                let dup = !m.attributes.is_empty();
                m.attributes = a;
                dup
            }
            "tensors" | "objects" => m.tensors.replace(r.tensors()?).is_some(),
            _ => {
                r.skip("an unknown manifest field")?;
                false
            }
        };
        if dup {
            return Err(r.err(format!(
                "duplicate manifest key {key:?} (or both \"tensors\" and \"objects\")"
            )));
        }
    }
    r.leave();
    r.finish()?;
    Ok(m)
}

/// Only the `version` of a manifest (any scalar, as text), everything else skipped: used
/// when [`decode`] fails, so a v2 manifest is reported as a version error.
pub fn version_only(bytes: &[u8], max_depth: usize) -> Option<String> {
    let mut r = Reader::new(bytes, max_depth);
    let n = r.map_len("the manifest").ok()?;
    for _ in 0..n {
        let key = r.text("a key").ok()?;
        let v = r.value("a value").ok()?;
        if key == "version" {
            return Some(match v {
                Value::Str(s) => s,
                other => other.to_string(),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_cbor2_manifest_and_refuses_lies() {
        // cbor2.dumps({"version": "1.0", "tensors": {"t": {"dtype": "int8", "shape": [2],
        //   "format": "dense", "components": {"data": {"offset": 64, "length": 2}}}}})
        let hex = "a26776657273696f6e63312e306774656e736f7273a16174a46564747970656469\
                   6e7438657368617065810266666f726d61746564656e73656a636f6d706f6e65\
                   6e7473a16464617461a2666f66667365741840666c656e67746802";
        let b = crate::util::unhex(&hex.replace(' ', "")).unwrap();
        let m = decode(&b, 16).unwrap();
        assert_eq!(m.version.as_deref(), Some("1.0"));
        let t = &m.tensors.as_ref().unwrap()[0];
        assert_eq!(t.0, "t");
        assert_eq!(t.1.dtype, Some(Ok(DType::I8)));
        assert_eq!(t.1.shape, vec![2]);
        assert_eq!(
            (t.1.components[0].offset, t.1.components[0].length),
            (64, 2)
        );
        // Every prefix fails, never panics.
        for n in 0..b.len() {
            assert!(decode(&b[..n], 16).is_err());
        }
        // A text claiming 2^40 bytes is refused before allocating.
        let e = decode(b"\xa1\x7b\x00\x00\x01\x00\x00\x00\x00\x00", 16).unwrap_err();
        assert!(e.to_string().contains("declares"), "{e}");
        // A map claiming 2^60 entries ends at the data.
        assert!(decode(b"\xbb\x10\x00\x00\x00\x00\x00\x00\x00", 16).is_err());
        // Deep nesting is a limit.
        let mut deep = b"\xa1\x6aattributes\xa1\x61k".to_vec();
        deep.extend(std::iter::repeat_n(0x81u8, 100));
        deep.push(0);
        assert_eq!(
            decode(&deep, 16).unwrap_err().kind(),
            crate::ErrorKind::LimitExceeded
        );
        // Indefinite lengths are refused.
        assert!(decode(b"\xbf\xff", 16).is_err());
        assert_eq!(
            version_only(b"\xa1\x67version\x02", 16).as_deref(),
            Some("2")
        );
    }

    #[test]
    fn item_heads_as_rfc_8949_reads_them() {
        // cbor2.dumps({"attributes": {"h": 1.5 as f16, "s": 1.5 as f32, "d": 1.5,
        //   "n": -300, "b": b"\x01", "t": tag 1 → 7, "f": False, "z": None}})
        let mut m = b"\xa1\x6aattributes\xa8".to_vec();
        m.extend_from_slice(b"\x61h\xf9\x3e\x00");
        m.extend_from_slice(b"\x61s\xfa\x3f\xc0\x00\x00");
        m.extend_from_slice(b"\x61d\xfb\x3f\xf8\x00\x00\x00\x00\x00\x00");
        m.extend_from_slice(b"\x61n\x39\x01\x2b");
        m.extend_from_slice(b"\x61b\x41\x01");
        m.extend_from_slice(b"\x61t\xc1\x07");
        m.extend_from_slice(b"\x61f\xf4");
        m.extend_from_slice(b"\x61z\xf6");
        let a = decode(&m, 16).unwrap().attributes;
        let get = |k: &str| a.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        for k in ["h", "s", "d"] {
            assert_eq!(get(k), Some(Value::Float(1.5)), "{k}");
        }
        assert_eq!(get("n"), Some(Value::Int(-300)));
        assert_eq!(get("b"), Some(Value::Bytes(vec![1])));
        assert_eq!(get("t"), Some(Value::Int(7)));
        assert_eq!(get("f"), Some(Value::Bool(false)));
        assert_eq!(get("z"), Some(Value::Null));
        // Reserved additional information (28..=30), an indefinite integer, a lone
        // break and a length past the end are errors, never panics.
        for bad in [
            &b"\xa1\x61k\x1c"[..],
            b"\xa1\x61k\x1f",
            b"\xff",
            b"\xa1\x61k\x1b\x00",
        ] {
            assert!(decode(bad, 16).is_err(), "{bad:?}");
        }
        let e = decode(b"\xa1\x61k\x1c", 16).unwrap_err().to_string();
        assert!(e.contains("syntax error at manifest byte 3"), "{e}");
    }
}
