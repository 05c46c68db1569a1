//! The on-disk pieces of a safetensors file: the dtype names, their sort rank, and the
//! JSON header as parsed (strictly: duplicate keys are errors, not "last one wins").

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::dtype::DType;
use crate::error::{Error, Result};

/// The original's cap on the JSON header (`MAX_HEADER_SIZE`, 100,000,000 bytes).
pub const MAX_HEADER_SIZE: u64 = 100_000_000;

/// The key of the file-level string map.
pub const METADATA_KEY: &str = "__metadata__";

/// Every dtype name the original (0.8.0) knows, in the order of its `Dtype` enum.
/// The writer sorts tensors by this rank, descending, then by name (bytewise), exactly
/// as the original's `prepare()` does (`right.dtype().cmp(&left.dtype()).then(name)`).
/// All are held: the sub-byte floats packed, least significant bits first.
pub const DTYPES: [(&str, Option<DType>); 22] = [
    ("BOOL", Some(DType::Bool)),
    ("F4", Some(DType::F4E2M1)),
    ("F6_E2M3", Some(DType::F6E2M3)),
    ("F6_E3M2", Some(DType::F6E3M2)),
    ("U8", Some(DType::U8)),
    ("I8", Some(DType::I8)),
    ("F8_E5M2", Some(DType::F8E5M2)),
    ("F8_E4M3", Some(DType::F8E4M3FN)),
    ("F8_E8M0", Some(DType::F8E8M0)),
    ("F8_E4M3FNUZ", Some(DType::F8E4M3FNUZ)),
    ("F8_E5M2FNUZ", Some(DType::F8E5M2FNUZ)),
    ("I16", Some(DType::I16)),
    ("U16", Some(DType::U16)),
    ("F16", Some(DType::F16)),
    ("BF16", Some(DType::BF16)),
    ("I32", Some(DType::I32)),
    ("U32", Some(DType::U32)),
    ("F32", Some(DType::F32)),
    ("C64", Some(DType::C64)),
    ("F64", Some(DType::F64)),
    ("I64", Some(DType::I64)),
    ("U64", Some(DType::U64)),
];

/// The dtype a safetensors name stands for; unknown names are `Malformed`.
pub fn dtype_from_name(name: &str) -> Result<DType> {
    match DTYPES.iter().find(|(n, _)| *n == name) {
        Some((_, Some(d))) => Ok(*d),
        Some((n, None)) => Err(Error::unsupported(format!("dtype {n} is not held"))),
        None => Err(Error::malformed(format!(
            "unknown dtype {name:?} (safetensors names BOOL, F4, F6_E2M3, F6_E3M2, U8, I8, \
             F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, I16, U16, F16, BF16, I32, U32, \
             F32, C64, F64, I64, U64)"
        ))),
    }
}

/// The original's rule for the packed sub-byte types: a tensor's elements fill whole
/// bytes (`numel × bits` a multiple of 8), or it has no byte range.
pub fn check_whole_bytes(dtype: DType, shape: &[u64]) -> Result<()> {
    if dtype.is_packed() {
        let n = crate::tensor::numel(shape)?;
        if n.checked_mul(dtype.bits() as u64)
            .is_none_or(|b| b % 8 != 0)
        {
            return Err(Error::malformed(format!(
                "{n} elements of {dtype} ({} bits each) do not fill whole bytes, as safetensors \
                 requires",
                dtype.bits()
            )));
        }
    }
    Ok(())
}

/// The safetensors name and sort rank of a dtype, or `None` when it has none (c128).
pub fn dtype_name(d: DType) -> Option<(&'static str, usize)> {
    DTYPES
        .iter()
        .enumerate()
        .find(|(_, (_, t))| *t == Some(d))
        .map(|(rank, (n, _))| (*n, rank))
}

/// One tensor entry of the header, as written (`data_offsets` relative to the byte
/// buffer after the header). Unknown fields are ignored, as the original does.
#[derive(Debug, Clone, Deserialize)]
pub struct TensorEntry {
    /// The dtype name (`F32`, `BF16`, …).
    pub dtype: String,
    /// The shape; `[]` for a scalar.
    pub shape: Vec<u64>,
    /// `[begin, end)` within the byte buffer.
    pub data_offsets: (u64, u64),
}

/// The parsed header: the `__metadata__` map (if present) and the tensor entries in
/// header order.
#[derive(Debug, Clone, Default)]
pub struct Header {
    /// `__metadata__`: string → string, in header order. `None` when absent or null.
    pub metadata: Option<Vec<(String, String)>>,
    /// Tensor entries in header order.
    pub tensors: Vec<(String, TensorEntry)>,
}

impl<'de> Deserialize<'de> for Header {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Header, D::Error> {
        d.deserialize_map(HeaderVisitor)
    }
}

struct HeaderVisitor;

impl<'de> Visitor<'de> for HeaderVisitor {
    type Value = Header;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object mapping tensor names to {dtype, shape, data_offsets}")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Header, A::Error> {
        let mut h = Header::default();
        let mut seen_meta = false;
        let mut names = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == METADATA_KEY {
                if seen_meta {
                    return Err(de::Error::custom("duplicate key \"__metadata__\""));
                }
                seen_meta = true;
                h.metadata = map.next_value::<Option<StringMap>>()?.map(|m| m.0);
            } else {
                if !names.insert(key.clone()) {
                    return Err(de::Error::custom(format!("duplicate tensor name {key:?}")));
                }
                let entry: TensorEntry = map.next_value()?;
                h.tensors.push((key, entry));
            }
        }
        Ok(h)
    }
}

/// A JSON object of string values, duplicate keys refused.
struct StringMap(Vec<(String, String)>);

impl<'de> Deserialize<'de> for StringMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<StringMap, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StringMap;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("__metadata__ as an object of string values")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<StringMap, A::Error> {
                let mut out: Vec<(String, String)> = Vec::new();
                let mut keys = std::collections::HashSet::new();
                while let Some(k) = map.next_key::<String>()? {
                    if !keys.insert(k.clone()) {
                        return Err(de::Error::custom(format!(
                            "duplicate __metadata__ key {k:?}"
                        )));
                    }
                    let v: String = map.next_value()?;
                    out.push((k, v));
                }
                Ok(StringMap(out))
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_holdable_dtype_round_trips_its_name() {
        for (name, d) in DTYPES {
            match d {
                Some(d) => {
                    assert_eq!(dtype_from_name(name).unwrap(), d);
                    assert_eq!(dtype_name(d).unwrap().0, name);
                }
                None => {
                    let e = dtype_from_name(name).unwrap_err();
                    assert_eq!(e.kind(), crate::ErrorKind::Unsupported);
                    assert!(e.to_string().contains(name));
                }
            }
        }
        assert_eq!(dtype_name(DType::C128), None);
        assert_eq!(
            dtype_from_name("f32").unwrap_err().kind(),
            crate::ErrorKind::Malformed
        );
    }

    #[test]
    fn header_refuses_duplicates() {
        let dup = r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}"#;
        assert!(serde_json::from_str::<Header>(dup).is_err());
        let dup_meta = r#"{"__metadata__":{"k":"1","k":"2"}}"#;
        assert!(serde_json::from_str::<Header>(dup_meta).is_err());
        let ok =
            r#"{"__metadata__":null,"a":{"dtype":"U8","shape":[],"data_offsets":[0,1],"x":1}}"#;
        let h: Header = serde_json::from_str(ok).unwrap();
        assert!(h.metadata.is_none());
        assert_eq!(h.tensors[0].1.data_offsets, (0, 1));
    }
}
