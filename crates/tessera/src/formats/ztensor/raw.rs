//! On-disk pieces of zTensor, named as the spec names them: the magic, dtype names,
//! digest strings, and the manifest as our writer serializes it (`version`,
//! `generator`, `attributes`, `tensors` → `dtype`, `shape`, `format`, `components` →
//! `offset`, `length`, `encoding`, `digest`). Decoding is in `manifest.rs`.

use serde::Serialize;

use crate::dtype::DType;

/// The magic at offset 0 (and, in zTensor v1.1, the footer after the manifest size).
pub const MAGIC: &[u8; 8] = b"ZTEN1000";
/// Alignment of every component.
pub const ALIGNMENT: u64 = 64;
/// The `version` our writer states.
pub const VERSION: &str = "1.0";

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
