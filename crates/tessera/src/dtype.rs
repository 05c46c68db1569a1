//! Element types.
//!
//! [`DType`] is the union of every element type a supported format can name. Each format
//! maps its own tags to and from it in its own module; the canonical names here
//! (`f32`, `bf16`, `f8_e4m3fn`, …) are the ones the CLI, the JSON output and the Python
//! package use.

use std::fmt;

use crate::error::{Error, Result};

/// An element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum DType {
    /// One byte per element, 0 or 1.
    Bool,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// IEEE 754 half precision.
    F16,
    /// bfloat16 (the top half of an f32).
    BF16,
    /// IEEE 754 single precision.
    F32,
    /// IEEE 754 double precision.
    F64,
    /// 8-bit float, 4 exponent bits, 3 mantissa bits, finite only (OCP FP8 E4M3).
    F8E4M3FN,
    /// 8-bit float, 5 exponent bits, 2 mantissa bits (OCP FP8 E5M2).
    F8E5M2,
    /// 8-bit float, 4/3 bits, finite, unsigned zero (ml_dtypes `float8_e4m3fnuz`).
    F8E4M3FNUZ,
    /// 8-bit float, 5/2 bits, finite, unsigned zero (ml_dtypes `float8_e5m2fnuz`).
    F8E5M2FNUZ,
    /// 8-bit exponent-only scale (OCP MX `E8M0`).
    F8E8M0,
    /// Complex of two f32.
    C64,
    /// Complex of two f64.
    C128,
}

impl DType {
    /// Every dtype, in a stable order.
    pub const ALL: [DType; 20] = [
        DType::Bool,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::F8E4M3FN,
        DType::F8E5M2,
        DType::F8E4M3FNUZ,
        DType::F8E5M2FNUZ,
        DType::F8E8M0,
        DType::C64,
        DType::C128,
    ];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::Bool
            | DType::U8
            | DType::I8
            | DType::F8E4M3FN
            | DType::F8E5M2
            | DType::F8E4M3FNUZ
            | DType::F8E5M2FNUZ
            | DType::F8E8M0 => 1,
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 | DType::C64 => 8,
            DType::C128 => 16,
        }
    }

    /// The canonical short name (`f32`, `bf16`, `f8_e4m3fn`, …).
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F8E4M3FN => "f8_e4m3fn",
            DType::F8E5M2 => "f8_e5m2",
            DType::F8E4M3FNUZ => "f8_e4m3fnuz",
            DType::F8E5M2FNUZ => "f8_e5m2fnuz",
            DType::F8E8M0 => "f8_e8m0",
            DType::C64 => "c64",
            DType::C128 => "c128",
        }
    }

    /// Parses a canonical name, or a common long alias (`float32`, `bfloat16`, `int64`,
    /// `uint8`, `float8_e4m3fn`, `complex64`, …). Case-insensitive.
    pub fn from_name(s: &str) -> Option<DType> {
        let lower = s.to_ascii_lowercase();
        let d = match lower.as_str() {
            "bool" => DType::Bool,
            "u8" | "uint8" => DType::U8,
            "u16" | "uint16" => DType::U16,
            "u32" | "uint32" => DType::U32,
            "u64" | "uint64" => DType::U64,
            "i8" | "int8" => DType::I8,
            "i16" | "int16" => DType::I16,
            "i32" | "int32" => DType::I32,
            "i64" | "int64" => DType::I64,
            "f16" | "float16" | "half" => DType::F16,
            "bf16" | "bfloat16" => DType::BF16,
            "f32" | "float32" | "float" => DType::F32,
            "f64" | "float64" | "double" => DType::F64,
            "f8_e4m3fn" | "float8_e4m3fn" | "f8_e4m3" => DType::F8E4M3FN,
            "f8_e5m2" | "float8_e5m2" => DType::F8E5M2,
            "f8_e4m3fnuz" | "float8_e4m3fnuz" => DType::F8E4M3FNUZ,
            "f8_e5m2fnuz" | "float8_e5m2fnuz" => DType::F8E5M2FNUZ,
            "f8_e8m0" | "float8_e8m0fnu" | "f8_e8m0fnu" => DType::F8E8M0,
            "c64" | "complex64" => DType::C64,
            "c128" | "complex128" => DType::C128,
            _ => return None,
        };
        Some(d)
    }

    /// Parses a name or returns an `InvalidInput` error naming it.
    pub fn parse(s: &str) -> Result<DType> {
        DType::from_name(s).ok_or_else(|| Error::invalid_input(format!("unknown dtype {s:?}")))
    }

    /// True for floating-point types (including fp8 and complex).
    pub const fn is_float(self) -> bool {
        matches!(
            self,
            DType::F16
                | DType::BF16
                | DType::F32
                | DType::F64
                | DType::F8E4M3FN
                | DType::F8E5M2
                | DType::F8E4M3FNUZ
                | DType::F8E5M2FNUZ
                | DType::F8E8M0
                | DType::C64
                | DType::C128
        )
    }

    /// True for signed or unsigned integer types (not bool).
    pub const fn is_int(self) -> bool {
        matches!(
            self,
            DType::U8
                | DType::U16
                | DType::U32
                | DType::U64
                | DType::I8
                | DType::I16
                | DType::I32
                | DType::I64
        )
    }

    /// Decodes element `i` of a little-endian buffer as f64, for diffs and summaries.
    /// Complex values yield their real part. Returns `None` when `i` is out of range.
    pub fn element_as_f64(self, bytes: &[u8], i: usize) -> Option<f64> {
        let sz = self.size();
        let start = i.checked_mul(sz)?;
        let b = bytes.get(start..start.checked_add(sz)?)?;
        Some(match self {
            DType::Bool | DType::U8 => b[0] as f64,
            DType::I8 => b[0] as i8 as f64,
            DType::U16 => u16::from_le_bytes([b[0], b[1]]) as f64,
            DType::I16 => i16::from_le_bytes([b[0], b[1]]) as f64,
            DType::U32 => u32::from_le_bytes(b.try_into().ok()?) as f64,
            DType::I32 => i32::from_le_bytes(b.try_into().ok()?) as f64,
            DType::U64 => u64::from_le_bytes(b.try_into().ok()?) as f64,
            DType::I64 => i64::from_le_bytes(b.try_into().ok()?) as f64,
            DType::F16 => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
            DType::BF16 => half::bf16::from_le_bytes([b[0], b[1]]).to_f64(),
            DType::F32 => f32::from_le_bytes(b.try_into().ok()?) as f64,
            DType::F64 | DType::C128 => f64::from_le_bytes(b[..8].try_into().ok()?),
            DType::C64 => f32::from_le_bytes(b[..4].try_into().ok()?) as f64,
            DType::F8E4M3FN => fp8_to_f64(b[0], 4, 3, Fp8Kind::Fn),
            DType::F8E5M2 => fp8_to_f64(b[0], 5, 2, Fp8Kind::Ieee),
            DType::F8E4M3FNUZ => fp8_to_f64(b[0], 4, 3, Fp8Kind::Fnuz),
            DType::F8E5M2FNUZ => fp8_to_f64(b[0], 5, 2, Fp8Kind::Fnuz),
            DType::F8E8M0 => {
                if b[0] == 0xff {
                    f64::NAN
                } else {
                    2f64.powi(b[0] as i32 - 127)
                }
            }
        })
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Fp8Kind {
    /// IEEE-like: all-ones exponent is inf/NaN.
    Ieee,
    /// Finite: only all-ones exponent and mantissa is NaN.
    Fn,
    /// Finite, unsigned zero: 0x80 is NaN, bias one larger.
    Fnuz,
}

fn fp8_to_f64(v: u8, ebits: u32, mbits: u32, kind: Fp8Kind) -> f64 {
    let sign = if v & 0x80 != 0 { -1.0 } else { 1.0 };
    let emask = (1u32 << ebits) - 1;
    let e = ((v as u32) >> mbits) & emask;
    let m = (v as u32) & ((1u32 << mbits) - 1);
    let mut bias = (1i32 << (ebits - 1)) - 1;
    match kind {
        Fp8Kind::Fnuz => {
            if v == 0x80 {
                return f64::NAN;
            }
            bias += 1;
        }
        Fp8Kind::Fn => {
            if e == emask && m == (1u32 << mbits) - 1 {
                return f64::NAN;
            }
        }
        Fp8Kind::Ieee => {
            if e == emask {
                return if m == 0 {
                    sign * f64::INFINITY
                } else {
                    f64::NAN
                };
            }
        }
    }
    let frac = m as f64 / (1u32 << mbits) as f64;
    if e == 0 {
        sign * frac * 2f64.powi(1 - bias)
    } else {
        sign * (1.0 + frac) * 2f64.powi(e as i32 - bias)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DType {
    type Err = Error;
    fn from_str(s: &str) -> Result<DType> {
        DType::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
        }
        assert_eq!(DType::from_name("bfloat16"), Some(DType::BF16));
        assert_eq!(DType::from_name("FLOAT32"), Some(DType::F32));
        assert_eq!(DType::from_name("q4_0"), None);
    }

    #[test]
    fn fp8_values_match_ml_dtypes() {
        // Values from the OCP FP8 spec tables.
        assert_eq!(DType::F8E4M3FN.element_as_f64(&[0x7e], 0), Some(448.0));
        assert!(DType::F8E4M3FN.element_as_f64(&[0x7f], 0).unwrap().is_nan());
        assert_eq!(DType::F8E4M3FN.element_as_f64(&[0x38], 0), Some(1.0));
        assert_eq!(DType::F8E5M2.element_as_f64(&[0x7b], 0), Some(57344.0));
        assert_eq!(
            DType::F8E5M2.element_as_f64(&[0x7c], 0),
            Some(f64::INFINITY)
        );
        assert_eq!(DType::F8E5M2.element_as_f64(&[0x3c], 0), Some(1.0));
        assert_eq!(
            DType::F8E4M3FN.element_as_f64(&[0x01], 0),
            Some(2f64.powi(-9))
        );
    }

    #[test]
    fn element_out_of_range_is_none() {
        assert_eq!(DType::F32.element_as_f64(&[0, 0, 0], 0), None);
        assert_eq!(DType::F32.element_as_f64(&[0; 8], usize::MAX), None);
    }
}
