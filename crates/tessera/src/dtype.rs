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
    /// 4-bit float, 2 exponent bits, 1 mantissa bit, finite (OCP MXFP4 `E2M1`; ml_dtypes
    /// `float4_e2m1fn`). Stored packed, two per byte, low nibble first.
    F4E2M1,
    /// 6-bit float, 2 exponent bits, 3 mantissa bits, finite (OCP MXFP6 `E2M3`). Stored
    /// packed, four per three bytes, least significant bits first.
    F6E2M3,
    /// 6-bit float, 3 exponent bits, 2 mantissa bits, finite (OCP MXFP6 `E3M2`). Stored
    /// packed like [`DType::F6E2M3`].
    F6E3M2,
    /// Complex of two f32.
    C64,
    /// Complex of two f64.
    C128,
}

impl DType {
    /// Every dtype, in a stable order.
    pub const ALL: [DType; 23] = [
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
        DType::F4E2M1,
        DType::F6E2M3,
        DType::F6E3M2,
        DType::C64,
        DType::C128,
    ];

    /// Every dtype of whole bytes (all but the packed sub-byte floats).
    pub const BYTE_ALIGNED: [DType; 20] = {
        let mut out = [DType::Bool; 20];
        let (mut i, mut o) = (0, 0);
        while i < DType::ALL.len() {
            if !DType::ALL[i].is_packed() {
                out[o] = DType::ALL[i];
                o += 1;
            }
            i += 1;
        }
        out
    };

    /// Bytes per element; for the packed sub-byte floats ([`DType::is_packed`]), 1: the
    /// unpacked form, one element in the low bits of a byte, as ml_dtypes holds them.
    /// The bytes a tensor stores are [`DType::nbytes`], never `numel × size()`.
    pub const fn size(self) -> usize {
        match self {
            DType::F4E2M1 | DType::F6E2M3 | DType::F6E3M2 => 1,
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

    /// Bits per element as stored.
    pub const fn bits(self) -> u32 {
        match self {
            DType::F4E2M1 => 4,
            DType::F6E2M3 | DType::F6E3M2 => 6,
            d => 8 * d.size() as u32,
        }
    }

    /// True for the sub-byte floats stored packed, several elements per byte
    /// ([`DType::F4E2M1`], [`DType::F6E2M3`], [`DType::F6E3M2`]).
    pub const fn is_packed(self) -> bool {
        matches!(self, DType::F4E2M1 | DType::F6E2M3 | DType::F6E3M2)
    }

    /// Bytes that `numel` elements occupy as stored: `numel × size` for whole-byte types,
    /// `⌈numel × bits / 8⌉` for the packed ones (the unused high bits of the last byte
    /// zero). `None` on overflow.
    pub const fn nbytes(self, numel: u64) -> Option<u64> {
        if self.is_packed() {
            match numel.checked_mul(self.bits() as u64) {
                Some(b) => Some(b.div_ceil(8)),
                None => None,
            }
        } else {
            numel.checked_mul(self.size() as u64)
        }
    }

    /// Whole elements in `nbytes` stored bytes (for a packed dtype, an odd `f4_e2m1`
    /// tensor's padding nibble counts as one: pass its exact element count where known).
    pub const fn elements_in(self, nbytes: usize) -> usize {
        if self.is_packed() {
            nbytes.saturating_mul(8) / self.bits() as usize
        } else {
            nbytes / self.size()
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
            DType::F4E2M1 => "f4_e2m1",
            DType::F6E2M3 => "f6_e2m3",
            DType::F6E3M2 => "f6_e3m2",
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
            "f4_e2m1" | "float4_e2m1fn" | "f4_e2m1fn" | "fp4" => DType::F4E2M1,
            "f6_e2m3" | "float6_e2m3fn" | "f6_e2m3fn" => DType::F6E2M3,
            "f6_e3m2" | "float6_e3m2fn" | "f6_e3m2fn" => DType::F6E3M2,
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
                | DType::F4E2M1
                | DType::F6E2M3
                | DType::F6E3M2
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
        if self.is_packed() {
            return self.decode_small(self.packed_code(bytes, i)?);
        }
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
            DType::F4E2M1 | DType::F6E2M3 | DType::F6E3M2 => self.decode_small(b[0])?,
        })
    }

    /// The code of element `i` of a packed buffer ([`DType::is_packed`]): its `bits()`
    /// bits, starting at bit `i × bits` counted from the least significant bit of byte 0.
    /// `None` when `i` is out of range or the dtype is not packed.
    pub fn packed_code(self, bytes: &[u8], i: usize) -> Option<u8> {
        if !self.is_packed() {
            return None;
        }
        let bits = self.bits() as usize;
        let start = i.checked_mul(bits)?;
        let (byte, shift) = (start / 8, start % 8);
        let lo = *bytes.get(byte)? as u16;
        let hi = if shift + bits > 8 {
            *bytes.get(byte + 1)? as u16
        } else {
            0
        };
        Some((((hi << 8 | lo) >> shift) & ((1 << bits) - 1)) as u8)
    }

    /// The value of one code of a small float (fp8 or a sub-byte float), in its low
    /// bits; `None` for other dtypes.
    pub fn decode_small(self, code: u8) -> Option<f64> {
        Some(match self {
            DType::F8E4M3FN => fp8_to_f64(code, 4, 3, Fp8Kind::Fn),
            DType::F8E5M2 => fp8_to_f64(code, 5, 2, Fp8Kind::Ieee),
            DType::F8E4M3FNUZ => fp8_to_f64(code, 4, 3, Fp8Kind::Fnuz),
            DType::F8E5M2FNUZ => fp8_to_f64(code, 5, 2, Fp8Kind::Fnuz),
            DType::F4E2M1 => small_to_f64(code, 2, 1),
            DType::F6E2M3 => small_to_f64(code, 2, 3),
            DType::F6E3M2 => small_to_f64(code, 3, 2),
            _ => return None,
        })
    }
}

/// Unpacks a packed sub-byte buffer to one code per byte (the ml_dtypes layout), `numel`
/// of them; `None` when the buffer is too short or the dtype is not packed.
pub fn unpack(dtype: DType, bytes: &[u8], numel: usize) -> Option<Vec<u8>> {
    if !dtype.is_packed() || (dtype.nbytes(numel as u64)? as usize) > bytes.len() {
        return None;
    }
    if dtype == DType::F4E2M1 {
        let mut out = Vec::with_capacity(numel);
        for b in &bytes[..numel / 2] {
            out.push(b & 0x0f);
            out.push(b >> 4);
        }
        if numel % 2 == 1 {
            out.push(bytes[numel / 2] & 0x0f);
        }
        return Some(out);
    }
    (0..numel).map(|i| dtype.packed_code(bytes, i)).collect()
}

/// Packs one code per byte (the ml_dtypes layout: the low `bits` bits) into the stored
/// form of a packed dtype, the unused high bits of the last byte zero. Codes with bits
/// above `bits` set are an error (an unpacked array holding a value of another type).
pub fn pack(dtype: DType, codes: &[u8]) -> Result<Vec<u8>> {
    if !dtype.is_packed() {
        return Err(Error::invalid_input(format!(
            "{dtype} is not a packed dtype"
        )));
    }
    let bits = dtype.bits() as usize;
    let mask = ((1u16 << bits) - 1) as u8;
    if let Some(i) = codes.iter().position(|c| c & !mask != 0) {
        return Err(Error::invalid_input(format!(
            "element {i} of a {dtype} array is 0x{:02x}, which has bits above the low {bits} set",
            codes[i]
        )));
    }
    let n = dtype
        .nbytes(codes.len() as u64)
        .ok_or_else(|| Error::invalid_input("packed size overflows"))? as usize;
    let mut out = vec![0u8; n];
    for (i, &c) in codes.iter().enumerate() {
        let start = i * bits;
        let (byte, shift) = (start / 8, start % 8);
        let v = (c as u16) << shift;
        out[byte] |= v as u8;
        if shift + bits > 8 {
            out[byte + 1] |= (v >> 8) as u8;
        }
    }
    Ok(out)
}

/// A finite OCP MX small float (no infinities, no NaN; bias `2^(ebits-1) - 1`): sign in
/// bit `ebits + mbits`.
fn small_to_f64(v: u8, ebits: u32, mbits: u32) -> f64 {
    let sign = if v >> (ebits + mbits) & 1 != 0 {
        -1.0
    } else {
        1.0
    };
    let e = ((v as u32) >> mbits) & ((1 << ebits) - 1);
    let m = (v as u32) & ((1 << mbits) - 1);
    let bias = (1i32 << (ebits - 1)) - 1;
    let frac = m as f64 / (1u32 << mbits) as f64;
    if e == 0 {
        sign * frac * 2f64.powi(1 - bias)
    } else {
        sign * (1.0 + frac) * 2f64.powi(e as i32 - bias)
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
    fn sub_byte_values_match_ml_dtypes() {
        // Codes and values from ml_dtypes 0.6.0 (`np.arange(n, dtype=np.uint8).view(t)`).
        let f4 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
        for (c, want) in f4.iter().enumerate() {
            assert_eq!(DType::F4E2M1.decode_small(c as u8), Some(*want));
            assert_eq!(DType::F4E2M1.decode_small(c as u8 | 8), Some(-*want));
        }
        assert_eq!(DType::F6E2M3.decode_small(1), Some(0.125));
        assert_eq!(DType::F6E2M3.decode_small(17), Some(2.25));
        assert_eq!(DType::F6E2M3.decode_small(31), Some(7.5));
        assert_eq!(DType::F6E2M3.decode_small(63), Some(-7.5));
        assert_eq!(DType::F6E3M2.decode_small(1), Some(0.0625));
        assert_eq!(DType::F6E3M2.decode_small(9), Some(0.625));
        assert_eq!(DType::F6E3M2.decode_small(31), Some(28.0));
        // Two per byte, low nibble first (zTensor v2 Appendix A, gpt-oss MXFP4 blocks).
        assert_eq!(DType::F4E2M1.element_as_f64(&[0x72], 0), Some(1.0));
        assert_eq!(DType::F4E2M1.element_as_f64(&[0x72], 1), Some(6.0));
        assert_eq!(DType::F4E2M1.element_as_f64(&[0x72], 2), None);
        assert_eq!(DType::F4E2M1.nbytes(5), Some(3));
        assert_eq!(DType::F6E2M3.nbytes(4), Some(3));
        assert_eq!(DType::F6E2M3.nbytes(5), Some(4));
        assert_eq!(DType::F4E2M1.nbytes(u64::MAX), None);
    }

    #[test]
    fn pack_and_unpack_are_inverse() {
        for d in [DType::F4E2M1, DType::F6E2M3, DType::F6E3M2] {
            let mask = (1u8 << d.bits()) - 1;
            for n in 0..13usize {
                let codes: Vec<u8> = (0..n)
                    .map(|i| (i as u8).wrapping_mul(37).wrapping_add(5) & mask)
                    .collect();
                let packed = pack(d, &codes).unwrap();
                assert_eq!(packed.len() as u64, d.nbytes(n as u64).unwrap());
                assert_eq!(unpack(d, &packed, n).unwrap(), codes, "{d} n={n}");
                for (i, c) in codes.iter().enumerate() {
                    assert_eq!(d.packed_code(&packed, i), Some(*c));
                }
            }
            assert!(pack(d, &[mask + 1]).is_err());
        }
        // Element i of a 6-bit stream sits at bits 6i.. of the little-endian stream.
        assert_eq!(pack(DType::F6E2M3, &[0x3f, 0, 0, 0]).unwrap(), [0x3f, 0, 0]);
        assert_eq!(
            pack(DType::F6E2M3, &[0, 0x3f, 0, 0]).unwrap(),
            [0xc0, 0x0f, 0]
        );
        assert_eq!(pack(DType::F4E2M1, &[1, 2, 3]).unwrap(), [0x21, 0x03]);
    }

    #[test]
    fn byte_aligned_leaves_out_the_packed() {
        assert!(DType::BYTE_ALIGNED.iter().all(|d| !d.is_packed()));
        assert_eq!(
            DType::BYTE_ALIGNED.len() + 3,
            DType::ALL.len(),
            "three packed dtypes"
        );
    }

    #[test]
    fn element_out_of_range_is_none() {
        assert_eq!(DType::F32.element_as_f64(&[0, 0, 0], 0), None);
        assert_eq!(DType::F32.element_as_f64(&[0; 8], usize::MAX), None);
    }
}
