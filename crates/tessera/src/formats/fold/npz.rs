//! `NPZ0` chunk payloads: `numpy.savez_compressed` zips, read as tensors
//! `<chunk>/<array>`. Only plain little/big-endian numeric arrays are accepted: object
//! arrays (`|O`, which numpy would unpickle) are refused, never unpickled.

use std::io::{Cursor, Read};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::limits::Limits;

/// One array of an npz.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    /// Member name without `.npy`.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape (C order).
    pub shape: Vec<u64>,
    /// True when stored big-endian (bytes are swapped on read).
    pub big_endian: bool,
}

fn descr_dtype(descr: &str) -> Result<(DType, bool)> {
    let (order, code) = descr.split_at(descr.len().min(1));
    let big = match order {
        "<" | "|" | "=" => false,
        ">" => true,
        _ => return Err(Error::unsupported(format!("npy dtype {descr:?}"))),
    };
    let d = match code {
        "b1" => DType::Bool,
        "u1" => DType::U8,
        "i1" => DType::I8,
        "u2" => DType::U16,
        "i2" => DType::I16,
        "u4" => DType::U32,
        "i4" => DType::I32,
        "u8" => DType::U64,
        "i8" => DType::I64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        "c8" => DType::C64,
        "c16" => DType::C128,
        _ => {
            return Err(Error::unsupported(format!(
            "npy dtype {descr:?} is not a plain numeric type (object arrays are never unpickled)"
        )))
        }
    };
    Ok((d, big && d.size() > 1))
}

/// Parses an npy header from `r`, leaving it at the data.
fn read_npy_header(r: &mut impl Read, limits: &Limits) -> Result<(DType, Vec<u64>, bool)> {
    let mut pre = [0u8; 8];
    r.read_exact(&mut pre)
        .map_err(|e| Error::malformed("npy member truncated").with_source(e))?;
    if &pre[..6] != b"\x93NUMPY" {
        return Err(Error::malformed("npy member without the \\x93NUMPY magic"));
    }
    let hlen = match pre[6] {
        1 => {
            let mut b = [0u8; 2];
            r.read_exact(&mut b)
                .map_err(|e| Error::malformed("npy header").with_source(e))?;
            u64::from(u16::from_le_bytes(b))
        }
        2 | 3 => {
            let mut b = [0u8; 4];
            r.read_exact(&mut b)
                .map_err(|e| Error::malformed("npy header").with_source(e))?;
            u64::from(u32::from_le_bytes(b))
        }
        v => return Err(Error::unsupported(format!("npy version {v}"))),
    };
    if hlen > 1 << 20 {
        return Err(Error::limit(format!("npy header of {hlen} bytes")));
    }
    let mut text = Vec::new();
    r.take(hlen)
        .read_to_end(&mut text)
        .map_err(|e| Error::malformed("npy header").with_source(e))?;
    let text = String::from_utf8_lossy(&text);
    let field = |key: &str| -> Option<&str> {
        let at = text.find(&format!("'{key}':"))? + key.len() + 3;
        Some(text[at..].trim_start())
    };
    let descr = field("descr")
        .and_then(|s| s.strip_prefix('\''))
        .and_then(|s| s.split('\'').next())
        .ok_or_else(|| Error::malformed("npy header has no descr"))?;
    let (dtype, big) = descr_dtype(descr)?;
    if field("fortran_order").is_some_and(|s| s.starts_with("True")) {
        return Err(Error::unsupported("npy array in Fortran order"));
    }
    let shape_text = field("shape")
        .and_then(|s| s.strip_prefix('('))
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| Error::malformed("npy header has no shape"))?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<u64>())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|_| Error::malformed(format!("npy shape ({shape_text})")))?;
    limits.check_rank(shape.len() as u64)?;
    Ok((dtype, shape, big))
}

fn archive(payload: &[u8]) -> Result<zip::ZipArchive<Cursor<&[u8]>>> {
    zip::ZipArchive::new(Cursor::new(payload))
        .map_err(|e| Error::malformed("NPZ0 payload is not a zip").with_source(e))
}

/// Lists the arrays of an npz payload (reads only the npy headers).
pub fn list(payload: &[u8], limits: &Limits) -> Result<Vec<Array>> {
    let mut z = archive(payload)?;
    limits.check_entries(z.len() as u64)?;
    let mut out = Vec::new();
    for i in 0..z.len() {
        let mut f = z
            .by_index(i)
            .map_err(|e| Error::malformed(format!("NPZ0 member {i}")).with_source(e))?;
        let Some(name) = f.name().strip_suffix(".npy").map(str::to_string) else {
            continue;
        };
        let (dtype, shape, big_endian) =
            read_npy_header(&mut f, limits).map_err(|e| e.at_subject(format!("array {name:?}")))?;
        out.push(Array {
            name,
            dtype,
            shape,
            big_endian,
        });
    }
    Ok(out)
}

/// Reads one array's little-endian bytes, bounded by its declared shape.
pub fn read(payload: &[u8], name: &str, limits: &Limits) -> Result<Vec<u8>> {
    let mut z = archive(payload)?;
    let mut f = z
        .by_name(&format!("{name}.npy"))
        .map_err(|e| Error::not_found(format!("no array {name:?} in NPZ0")).with_source(e))?;
    let (dtype, shape, big) = read_npy_header(&mut f, limits)?;
    let n = crate::tensor::dense_nbytes(dtype, &shape)?;
    limits.check_decoded(n)?;
    let mut out = Vec::with_capacity(crate::limits::to_usize(n, "array size")?.min(1 << 26));
    f.take(n)
        .read_to_end(&mut out)
        .map_err(|e| Error::malformed(format!("array {name:?} unreadable")).with_source(e))?;
    if out.len() as u64 != n {
        return Err(Error::malformed(format!(
            "array {name:?}: {} data bytes, {dtype} {shape:?} needs {n}",
            out.len()
        )));
    }
    if big {
        let w = match dtype {
            DType::C64 => 4,
            DType::C128 => 8,
            d => d.size(),
        };
        for el in out.chunks_exact_mut(w) {
            el.reverse();
        }
    }
    Ok(out)
}
