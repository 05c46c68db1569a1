//! On-disk pieces of zTensor, named as the spec names them: the magic, the footer, the
//! CBOR manifest (`version`, `generator`, `attributes`, `tensors` → `dtype`, `shape`,
//! `format`, `components` → `offset`, `length`, `encoding`, `digest`), dtype names and
//! digest strings.
//!
//! The manifest is hostile input. It is decoded with `ciborium` straight into the structs
//! below (no intermediate value tree), with a recursion limit; unknown fields are skipped
//! without allocating; maps are collected as ordered lists so duplicate keys are caught
//! instead of silently overwritten; every string and list grows only as its bytes are
//! actually read, so memory stays proportional to the manifest, which is itself capped by
//! [`crate::Limits::max_index_bytes`].

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Serialize;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::metadata::{Map, Value};

/// The magic at offset 0 (and, in zTensor v1.1, the footer after the manifest size).
pub const MAGIC: &[u8; 8] = b"ZTEN1000";
/// Alignment of every component.
pub const ALIGNMENT: u64 = 64;
/// The `version` our writer states.
pub const VERSION: &str = "1.0";

/// A decoded manifest. `tensors` is `tensors` (v1.0) or `objects` (v1.1).
#[derive(Debug, Default)]
pub struct RawManifest {
    /// `version`.
    pub version: Option<String>,
    /// `generator`.
    pub generator: Option<String>,
    /// `attributes`, in file order.
    pub attributes: Vec<(String, Value)>,
    /// `tensors` / `objects`, in file order (duplicates kept, to be rejected).
    pub tensors: Option<Vec<(String, RawTensor)>>,
}

/// A tensor object.
#[derive(Debug, serde::Deserialize)]
pub struct RawTensor {
    /// `dtype` (v1.0; in v1.1 it moved to the components).
    #[serde(default)]
    pub dtype: Option<DTypeName>,
    /// `shape`.
    pub shape: Vec<u64>,
    /// `format`: `dense`, `sparse_csr`, `sparse_coo` or another layout.
    pub format: LayoutName,
    /// `components`: role → location.
    pub components: Named<RawComponent>,
    /// `attributes` (v1.1 per-object attributes).
    #[serde(default)]
    pub attributes: Option<Named<AttrValue>>,
}

/// A component object.
#[derive(Debug, serde::Deserialize)]
pub struct RawComponent {
    /// `dtype` (v1.1).
    #[serde(default)]
    pub dtype: Option<DTypeName>,
    /// `offset`: absolute file offset.
    pub offset: u64,
    /// `length`: stored (compressed) bytes.
    pub length: u64,
    /// `encoding`: `raw` (default) or `zstd`.
    #[serde(default)]
    pub encoding: Option<String>,
    /// `digest`: `algorithm:value`.
    #[serde(default)]
    pub digest: Option<String>,
}

/// A text string read through `deserialize_str`, so short strings come from the
/// decoder's scratch buffer and are allocated once, at their exact size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text(pub String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a text string")
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> std::result::Result<Text, E> {
                Ok(Text(v))
            }
        }
        d.deserialize_str(V)
    }
}

/// A `dtype` string: the dtype when known, else the name (for the error message).
/// Matched without allocating.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DTypeName(pub std::result::Result<DType, String>);

impl<'de> Deserialize<'de> for DTypeName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = DTypeName;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a dtype name")
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<DTypeName, E> {
                Ok(DTypeName(dtype_from_name(v).ok_or_else(|| v.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

/// A `format` string as a [`Layout`], matched without allocating for the known ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutName(pub crate::tensor::Layout);

impl<'de> Deserialize<'de> for LayoutName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LayoutName;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a layout name")
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<LayoutName, E> {
                Ok(LayoutName(crate::tensor::Layout::from_name(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// A CBOR map with text keys, kept as an ordered list (duplicates kept).
#[derive(Debug)]
pub struct Named<T>(pub Vec<(String, T)>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Named<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Named<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map with text keys")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<Named<T>, A::Error> {
                // No capacity from the file's size hint: grow as entries are read.
                let mut out = Vec::new();
                while let Some((Text(k), v)) = m.next_entry::<Text, T>()? {
                    out.push((k, v));
                }
                Ok(Named(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// An attribute value, decoded into our own [`Value`].
#[derive(Debug)]
pub struct AttrValue(pub Value);

impl<'de> Deserialize<'de> for AttrValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = AttrValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an attribute value")
            }
            fn visit_bool<E>(self, v: bool) -> std::result::Result<AttrValue, E> {
                Ok(AttrValue(Value::Bool(v)))
            }
            fn visit_i64<E>(self, v: i64) -> std::result::Result<AttrValue, E> {
                Ok(AttrValue(Value::Int(v as i128)))
            }
            fn visit_u64<E>(self, v: u64) -> std::result::Result<AttrValue, E> {
                Ok(AttrValue(Value::Int(v as i128)))
            }
            fn visit_i128<E>(self, v: i128) -> std::result::Result<AttrValue, E> {
                Ok(AttrValue(Value::Int(v)))
            }
            fn visit_u128<E: de::Error>(self, v: u128) -> std::result::Result<AttrValue, E> {
                i128::try_from(v)
                    .map(|v| AttrValue(Value::Int(v)))
                    .map_err(|_| E::custom("integer attribute too large"))
            }
            fn visit_f64<E>(self, v: f64) -> std::result::Result<AttrValue, E> {
                Ok(AttrValue(Value::Float(v)))
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<AttrValue, E> {
                Ok(AttrValue(Value::Str(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> std::result::Result<AttrValue, E> {
                Ok(AttrValue(Value::Str(v)))
            }
            fn visit_bytes<E>(self, v: &[u8]) -> std::result::Result<AttrValue, E> {
                Ok(AttrValue(Value::Bytes(v.to_vec())))
            }
            fn visit_byte_buf<E>(self, v: Vec<u8>) -> std::result::Result<AttrValue, E> {
                Ok(AttrValue(Value::Bytes(v)))
            }
            fn visit_none<E>(self) -> std::result::Result<AttrValue, E> {
                Ok(AttrValue(Value::Null))
            }
            fn visit_unit<E>(self) -> std::result::Result<AttrValue, E> {
                Ok(AttrValue(Value::Null))
            }
            fn visit_some<D: Deserializer<'de>>(
                self,
                d: D,
            ) -> std::result::Result<AttrValue, D::Error> {
                AttrValue::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> std::result::Result<AttrValue, A::Error> {
                let mut out = Vec::new();
                while let Some(AttrValue(v)) = s.next_element()? {
                    out.push(v);
                }
                Ok(AttrValue(Value::List(out)))
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<AttrValue, A::Error> {
                let mut out = Map::new();
                while let Some((k, AttrValue(v))) = m.next_entry::<String, AttrValue>()? {
                    if out.contains_key(&k) {
                        return Err(de::Error::custom(format!("duplicate attribute key {k:?}")));
                    }
                    out.insert(k, v);
                }
                Ok(AttrValue(Value::Map(out)))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for RawManifest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawManifest;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("the manifest map")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<RawManifest, A::Error> {
                let mut out = RawManifest::default();
                let mut seen: Vec<String> = Vec::new();
                while let Some(key) = m.next_key::<String>()? {
                    if seen.contains(&key) {
                        return Err(de::Error::custom(format!("duplicate manifest key {key:?}")));
                    }
                    match key.as_str() {
                        "version" => out.version = Some(m.next_value()?),
                        "generator" => out.generator = Some(m.next_value()?),
                        "attributes" => {
                            let a: Named<AttrValue> = m.next_value()?;
                            out.attributes = a.0.into_iter().map(|(k, v)| (k, v.0)).collect();
                        }
                        "tensors" | "objects" => {
                            if out.tensors.is_some() {
                                return Err(de::Error::custom(
                                    "both \"tensors\" and \"objects\" present",
                                ));
                            }
                            let t: Named<RawTensor> = m.next_value()?;
                            out.tensors = Some(t.0);
                        }
                        _ => {
                            m.next_value::<IgnoredAny>()?;
                        }
                    }
                    seen.push(key);
                }
                Ok(out)
            }
        }
        d.deserialize_map(V)
    }
}

/// Only the `version` of a manifest, everything else skipped: read first, so a v2
/// manifest is reported as an unsupported version, not as a schema error.
#[derive(Debug, Default)]
pub struct VersionOnly(pub Option<String>);

impl<'de> Deserialize<'de> for VersionOnly {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = VersionOnly;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("the manifest map")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<VersionOnly, A::Error> {
                let mut out = None;
                while let Some(key) = m.next_key::<String>()? {
                    if key == "version" && out.is_none() {
                        // Any type: a non-string version is reported by the caller.
                        let AttrValue(v) = m.next_value()?;
                        out = Some(match v {
                            Value::Str(s) => s,
                            other => format!("{other}"),
                        });
                    } else {
                        m.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(VersionOnly(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Decodes CBOR `bytes` as `T`, requiring every byte to be used.
pub fn decode_cbor<T: serde::de::DeserializeOwned>(bytes: &[u8], depth: usize) -> Result<T> {
    let mut rest = bytes;
    let value = ciborium::de::from_reader_with_recursion_limit(&mut rest, depth).map_err(|e| {
        use ciborium::de::Error as E;
        match e {
            E::Io(_) => Error::malformed("manifest: CBOR truncated"),
            E::Syntax(off) => Error::malformed(format!(
                "manifest: CBOR syntax error at manifest byte {off}"
            )),
            E::Semantic(Some(off), msg) => {
                Error::malformed(format!("manifest: {msg} (at manifest byte {off})"))
            }
            E::Semantic(None, msg) => Error::malformed(format!("manifest: {msg}")),
            E::RecursionLimitExceeded => {
                Error::limit(format!("manifest: CBOR nested deeper than {depth}"))
            }
        }
    })?;
    if !rest.is_empty() {
        return Err(Error::malformed(format!(
            "manifest: {} trailing bytes after the CBOR map",
            rest.len()
        )));
    }
    Ok(value)
}

/// The dtype a zTensor name denotes: the v1.0 long names (`float32`, `bfloat16`, …) and
/// the v1.1 short ones (`f32`, `bf16`, `f8_e4m3`, `complex64`, …).
pub fn dtype_from_name(s: &str) -> Option<DType> {
    Some(match s {
        "float32" | "f32" => DType::F32,
        "float16" | "f16" => DType::F16,
        "float64" | "f64" => DType::F64,
        "bfloat16" | "bf16" => DType::BF16,
        "int8" | "i8" => DType::I8,
        "int16" | "i16" => DType::I16,
        "int32" | "i32" => DType::I32,
        "int64" | "i64" => DType::I64,
        "uint8" | "u8" => DType::U8,
        "uint16" | "u16" => DType::U16,
        "uint32" | "u32" => DType::U32,
        "uint64" | "u64" => DType::U64,
        "bool" => DType::Bool,
        "f8_e4m3" | "f8_e4m3fn" => DType::F8E4M3FN,
        "f8_e5m2" => DType::F8E5M2,
        "complex64" => DType::C64,
        "complex128" => DType::C128,
        _ => return None,
    })
}

/// The v1.0 name our writer uses, for the 13 dtypes zTensor v1.0 has.
pub fn dtype_name(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::F32 => "float32",
        DType::F16 => "float16",
        DType::F64 => "float64",
        DType::BF16 => "bfloat16",
        DType::I8 => "int8",
        DType::I16 => "int16",
        DType::I32 => "int32",
        DType::I64 => "int64",
        DType::U8 => "uint8",
        DType::U16 => "uint16",
        DType::U32 => "uint32",
        DType::U64 => "uint64",
        DType::Bool => "bool",
        _ => return None,
    })
}

/// A `digest` string, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParsedDigest {
    /// `crc32c:0x…` (hex, either case, `0x` optional).
    Crc32c(u32),
    /// `sha256:…` (64 hex digits, either case).
    Sha256([u8; 32]),
    /// A known algorithm with a value that does not parse.
    Bad {
        /// The algorithm.
        algorithm: String,
        /// Why.
        reason: String,
    },
    /// An algorithm we do not know (reported "not checked").
    Unknown(String),
}

/// Parses `algorithm:value`. The algorithm name is matched case-insensitively.
pub fn parse_digest(s: &str) -> ParsedDigest {
    let Some((algo, value)) = s.split_once(':') else {
        return ParsedDigest::Unknown(s.to_string());
    };
    match algo.to_ascii_lowercase().as_str() {
        "crc32c" => {
            let hex = value
                .strip_prefix("0x")
                .or_else(|| value.strip_prefix("0X"))
                .unwrap_or(value);
            match (hex.len(), u32::from_str_radix(hex, 16)) {
                (1..=8, Ok(v)) if hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                    ParsedDigest::Crc32c(v)
                }
                _ => ParsedDigest::Bad {
                    algorithm: "crc32c".into(),
                    reason: format!("{value:?} is not a 32-bit hex value"),
                },
            }
        }
        "sha256" => match crate::util::unhex(value) {
            Some(b) if b.len() == 32 => {
                let mut a = [0u8; 32];
                a.copy_from_slice(&b);
                ParsedDigest::Sha256(a)
            }
            _ => ParsedDigest::Bad {
                algorithm: "sha256".into(),
                reason: format!("{value:?} is not 64 hex digits"),
            },
        },
        other => ParsedDigest::Unknown(other.to_string()),
    }
}

/// The manifest as our writer serializes it: struct order `version, generator,
/// attributes, tensors` (as the original's serde struct), maps sorted by key.
#[derive(Serialize)]
pub struct OutManifest<'a> {
    /// `"1.0"`.
    pub version: &'a str,
    /// Who wrote the file.
    pub generator: &'a str,
    /// String attributes, sorted.
    pub attributes: &'a std::collections::BTreeMap<String, String>,
    /// Tensors, sorted.
    pub tensors: &'a std::collections::BTreeMap<String, OutTensor>,
}

/// A tensor as written.
#[derive(Serialize)]
pub struct OutTensor {
    /// v1.0 dtype name.
    pub dtype: &'static str,
    /// Shape.
    pub shape: Vec<u64>,
    /// Layout name.
    pub format: String,
    /// Components, sorted.
    pub components: std::collections::BTreeMap<String, OutComponent>,
}

/// A component as written; `encoding` and `digest` omitted when absent.
#[derive(Serialize)]
pub struct OutComponent {
    /// Absolute offset.
    pub offset: u64,
    /// Stored bytes.
    pub length: u64,
    /// `zstd`, or omitted for raw.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encoding: Option<&'static str>,
    /// `crc32c:0x%08X` or `sha256:<hex>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_parse_both_cases_and_report_unknown() {
        assert_eq!(
            parse_digest("crc32c:0xE3069283"),
            ParsedDigest::Crc32c(0xE306_9283)
        );
        assert_eq!(
            parse_digest("CRC32C:0xe3069283"),
            ParsedDigest::Crc32c(0xE306_9283)
        );
        assert!(matches!(
            parse_digest("crc32c:0x1G"),
            ParsedDigest::Bad { .. }
        ));
        assert!(matches!(
            parse_digest("crc32c:0x123456789"),
            ParsedDigest::Bad { .. }
        ));
        assert!(matches!(
            parse_digest("sha256:00"),
            ParsedDigest::Bad { .. }
        ));
        assert_eq!(parse_digest("md5:abc"), ParsedDigest::Unknown("md5".into()));
        assert_eq!(
            parse_digest("nonsense"),
            ParsedDigest::Unknown("nonsense".into())
        );
    }

    #[test]
    fn dtype_names_round_trip() {
        for d in crate::formats::ztensor::capabilities().dtypes {
            assert_eq!(dtype_from_name(dtype_name(*d).unwrap()), Some(*d));
        }
        assert_eq!(dtype_from_name("i64"), Some(DType::I64));
        assert_eq!(dtype_from_name("float8"), None);
    }
}
