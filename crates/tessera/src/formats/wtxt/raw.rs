//! The array-block lines as the spec names them: `arr`, `idx`, `ch`.

use super::armor;
use super::header::{bad, digits, fields, fixed_digits, hex_n, is_token};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::util::hex;

/// The spec's ten dtypes.
pub const BASE_DTYPES: &[DType] = &[
    DType::F64,
    DType::F32,
    DType::I64,
    DType::U64,
    DType::I32,
    DType::U32,
    DType::I16,
    DType::U16,
    DType::I8,
    DType::U8,
];
/// The `ext_dtypes` additions (RESOLUTIONS 12).
pub const EXT_DTYPES: &[DType] = &[
    DType::F16,
    DType::BF16,
    DType::Bool,
    DType::F8E4M3FN,
    DType::F8E5M2,
];

/// Largest array (`off=` has 12 digits).
pub const MAX_ARRAY_BYTES: u64 = 999_999_999_999;
/// Most chunks per array (`ix=` has 6 digits).
pub const MAX_CHUNKS: u64 = 1_000_000;

/// `[A-Za-z0-9_]+`, the spec's name rule.
pub fn is_spec_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Names under the `ext_names` extension: a TOKEN (printable ASCII, no space, `=`, `"`).
pub fn is_ext_name(s: &str) -> bool {
    is_token(s)
}

/// `arr name=… dtype=… shape=… order=C bytes=… sha256=… hmac=… salt=…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrLine {
    /// `name`.
    pub name: String,
    /// `dtype`.
    pub dtype: DType,
    /// `shape` (empty for a scalar).
    pub shape: Vec<u64>,
    /// `bytes`.
    pub bytes: u64,
    /// `sha256` of the raw bytes.
    pub sha256: [u8; 32],
    /// `hmac` (zeros when unauthenticated).
    pub hmac: [u8; 32],
    /// `salt`.
    pub salt: [u8; 8],
}

impl ArrLine {
    /// The line without LF.
    pub fn line(&self) -> String {
        let shape: Vec<String> = self.shape.iter().map(u64::to_string).collect();
        format!(
            "arr name={} dtype={} shape={} order=C bytes={} sha256={} hmac={} salt={}",
            self.name,
            self.dtype.name(),
            shape.join(","),
            self.bytes,
            hex(&self.sha256),
            hex(&self.hmac),
            hex(&self.salt)
        )
    }

    /// Parses an `arr` line; `caps` are the file's extensions.
    pub fn parse(line: &str, n: usize, caps: &[String], max_rank: usize) -> Result<ArrLine> {
        let keys = [
            "name", "dtype", "shape", "order", "bytes", "sha256", "hmac", "salt",
        ];
        let f = fields(line, "arr", &keys, n)?;
        let has = |c: &str| caps.iter().any(|x| x == c);
        let name = f[0];
        if !(is_spec_name(name) || has("ext_names") && is_ext_name(name)) {
            return Err(bad(n, format!("arr: bad name {name:?} ([A-Za-z0-9_]+)")));
        }
        let dtype = DType::from_name(f[1])
            .filter(|d| d.name() == f[1])
            .filter(|d| BASE_DTYPES.contains(d) || has("ext_dtypes") && EXT_DTYPES.contains(d))
            .ok_or_else(|| bad(n, format!("arr {name:?}: unsupported dtype {:?}", f[1])))?;
        let shape: Vec<u64> = if f[2].is_empty() {
            Vec::new()
        } else {
            let parts: Vec<&str> = f[2].split(',').collect();
            if parts.len() > max_rank {
                return Err(bad(
                    n,
                    format!("arr {name:?}: rank {} over the limit", parts.len()),
                ));
            }
            parts
                .iter()
                .map(|p| digits(p, "arr shape dimension", n))
                .collect::<Result<_>>()?
        };
        if f[3] != "C" {
            return Err(bad(
                n,
                format!("arr {name:?}: order={:?}, only C exists", f[3]),
            ));
        }
        let bytes = digits(f[4], "arr bytes", n)?;
        let want = crate::tensor::dense_nbytes(dtype, &shape)
            .map_err(|e| e.at_subject(format!("line {n}")))?;
        if bytes != want {
            return Err(bad(
                n,
                format!(
                    "arr {name:?}: bytes={bytes} but {} {:?} needs {want}",
                    dtype, shape
                ),
            ));
        }
        if bytes > MAX_ARRAY_BYTES {
            return Err(bad(
                n,
                format!("arr {name:?}: over {MAX_ARRAY_BYTES} bytes"),
            ));
        }
        Ok(ArrLine {
            name: name.to_string(),
            dtype,
            shape,
            bytes,
            sha256: hex_n(f[5], "arr sha256", n)?,
            hmac: hex_n(f[6], "arr hmac", n)?,
            salt: hex_n(f[7], "arr salt", n)?,
        })
    }

    /// True when `hmac=` is all zeros (unauthenticated).
    pub fn unauthenticated(&self) -> bool {
        self.hmac == [0; 32]
    }
}

/// `idx rows_per_chunk=… row_size=… row_blocking=on|off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdxLine {
    /// `rows_per_chunk`.
    pub rows_per_chunk: u64,
    /// `row_size` in bytes.
    pub row_size: u64,
    /// `row_blocking`.
    pub row_blocking: bool,
}

impl IdxLine {
    /// The line without LF.
    pub fn line(&self) -> String {
        format!(
            "idx rows_per_chunk={} row_size={} row_blocking={}",
            self.rows_per_chunk,
            self.row_size,
            if self.row_blocking { "on" } else { "off" }
        )
    }
    /// Parses an `idx` line.
    pub fn parse(line: &str, n: usize) -> Result<IdxLine> {
        let f = fields(
            line,
            "idx",
            &["rows_per_chunk", "row_size", "row_blocking"],
            n,
        )?;
        let row_blocking = match f[2] {
            "on" => true,
            "off" => false,
            v => return Err(bad(n, format!("idx: row_blocking={v:?} (on or off)"))),
        };
        Ok(IdxLine {
            rows_per_chunk: digits(f[0], "idx rows_per_chunk", n)?,
            row_size: digits(f[1], "idx row_size", n)?,
            row_blocking,
        })
    }
}

/// `ch ix=… off=… len=… sha256=… crc32c=… b64=on width=76 lines=…`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChLine {
    /// `ix`.
    pub ix: u64,
    /// `off`.
    pub off: u64,
    /// `len`.
    pub len: u64,
    /// `sha256` of the chunk's raw bytes.
    pub sha256: [u8; 32],
    /// `crc32c` of the chunk's raw bytes.
    pub crc32c: u32,
}

impl ChLine {
    /// The line without LF.
    pub fn line(&self) -> String {
        format!(
            "ch ix={:06} off={:012} len={} sha256={} crc32c={:08x} b64=on width=76 lines={}",
            self.ix,
            self.off,
            self.len,
            hex(&self.sha256),
            self.crc32c,
            armor::lines_for(self.len)
        )
    }
    /// Parses a `ch` line, checking `lines=` against `len=`.
    pub fn parse(line: &str, n: usize) -> Result<ChLine> {
        let keys = [
            "ix", "off", "len", "sha256", "crc32c", "b64", "width", "lines",
        ];
        let f = fields(line, "ch", &keys, n)?;
        let ix = fixed_digits(f[0], 6, "ch ix", n)?;
        let off = fixed_digits(f[1], 12, "ch off", n)?;
        let len = digits(f[2], "ch len", n)?;
        if len == 0 {
            return Err(bad(n, "ch: len=0 (an empty array has no ch blocks)"));
        }
        if f[5] != "on" {
            return Err(bad(n, format!("ch: b64={:?}, only on exists", f[5])));
        }
        if f[6] != "76" {
            return Err(bad(n, format!("ch: width={:?}, only 76 exists", f[6])));
        }
        let lines = digits(f[7], "ch lines", n)?;
        if lines != armor::lines_for(len) {
            return Err(bad(
                n,
                format!(
                    "ch: lines={lines} but len={len} needs {}",
                    armor::lines_for(len)
                ),
            ));
        }
        let crc: [u8; 4] = hex_n(f[4], "ch crc32c", n)?;
        Ok(ChLine {
            ix,
            off,
            len,
            sha256: hex_n(f[3], "ch sha256", n)?,
            crc32c: u32::from_be_bytes(crc),
        })
    }
}

/// The row size of RESOLUTIONS 5: `product(shape[1:]) * dtype_size` (rank 1: dtype size).
pub fn row_size(dtype: DType, shape: &[u64]) -> Result<u64> {
    let rest = if shape.is_empty() {
        &[][..]
    } else {
        &shape[1..]
    };
    crate::tensor::dense_nbytes(dtype, rest)
        .map_err(|e| Error::invalid_input(e.message().to_string()))
}
