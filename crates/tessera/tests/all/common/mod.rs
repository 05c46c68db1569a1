//! Helpers shared by the integration tests: one module per family of tests (`aero`,
//! `matrix`, `sets`, `vectors`, `wtxt`) and, here, the small functions several files
//! had each copied.
#![allow(dead_code)]

pub mod aero;
pub mod matrix;
pub mod sets;
pub mod vectors;
pub mod wtxt;

use tessera::Format;

/// Clears the bits of a packed sub-byte tensor's last byte past its last element (the
/// bytes must be what Tessera holds: padding zero); other dtypes are left alone.
pub fn clear_padding(dtype: tessera::DType, shape: &[u64], bytes: &mut [u8]) {
    let used = shape.iter().product::<u64>() * dtype.bits() as u64 % 8;
    if dtype.is_packed() && used != 0 {
        if let Some(last) = bytes.last_mut() {
            *last &= (1u8 << used) - 1;
        }
    }
}

/// The SHA-256 of `b` in lowercase hex.
pub fn sha(b: &[u8]) -> String {
    tessera::util::hex(&tessera::util::sha256(b))
}

/// A file extension for `format` (its name when it has none of its own: zTensor v2
/// shares `.zt` with v1).
pub fn ext(format: Format) -> &'static str {
    format
        .extensions()
        .first()
        .copied()
        .unwrap_or(format.name())
}

/// The formats Tessera both reads and writes.
pub fn readable_formats() -> Vec<Format> {
    Format::ALL
        .into_iter()
        .filter(|f| f.can_read() && f.can_write())
        .collect()
}
