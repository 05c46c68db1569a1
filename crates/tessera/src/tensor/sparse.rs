//! Sparse layouts: validation and densification.
//!
//! CSR: `values` (nnz × dtype), `indices` (nnz × u64 column indices), `indptr`
//! ((rows + 1) × u64, non-decreasing, from 0 to nnz). COO: `values` and `coords`
//! (ndim × nnz u64, row-major: all dimension-0 indices first).

use std::borrow::Cow;

use super::{Layout, Part, TensorInfo, TensorView};
use crate::error::{Error, Result};

fn u64s(bytes: &[u8], what: &str, name: &str) -> Result<Vec<u64>> {
    if bytes.len() % 8 != 0 {
        return Err(Error::malformed(format!(
            "tensor {name:?}: {what} has {} bytes, not a multiple of 8",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect())
}

fn nnz_of(v: &TensorView<'_>) -> Result<u64> {
    let name = &v.info.name;
    let values = v.part("values").unwrap_or(&[]);
    let sz = v.info.dtype.size();
    if values.len() % sz != 0 {
        return Err(Error::malformed(format!(
            "tensor {name:?}: values has {} bytes, not a multiple of {sz}",
            values.len()
        )));
    }
    Ok((values.len() / sz) as u64)
}

/// Validates a CSR view (2-D shape, indptr monotone from 0 to nnz, indices < cols).
pub fn check_csr(v: &TensorView<'_>) -> Result<()> {
    let name = &v.info.name;
    if v.info.shape.len() != 2 {
        return Err(Error::malformed(format!(
            "tensor {name:?}: sparse_csr needs a 2-D shape, got {:?}",
            v.info.shape
        )));
    }
    let (rows, cols) = (v.info.shape[0], v.info.shape[1]);
    let nnz = nnz_of(v)?;
    let indices = u64s(v.part("indices").unwrap_or(&[]), "indices", name)?;
    let indptr = u64s(v.part("indptr").unwrap_or(&[]), "indptr", name)?;
    if indices.len() as u64 != nnz {
        return Err(Error::malformed(format!(
            "tensor {name:?}: {} indices for {nnz} values",
            indices.len()
        )));
    }
    if Some(indptr.len() as u64) != rows.checked_add(1) {
        return Err(Error::malformed(format!(
            "tensor {name:?}: indptr has {} entries, {rows} rows need {}",
            indptr.len(),
            rows.saturating_add(1)
        )));
    }
    if indptr.first() != Some(&0) || indptr.last() != Some(&nnz) {
        return Err(Error::malformed(format!(
            "tensor {name:?}: indptr must run from 0 to nnz ({nnz})"
        )));
    }
    if indptr.windows(2).any(|w| w[0] > w[1]) {
        return Err(Error::malformed(format!(
            "tensor {name:?}: indptr decreases"
        )));
    }
    if let Some(bad) = indices.iter().find(|&&c| c >= cols) {
        return Err(Error::malformed(format!(
            "tensor {name:?}: column index {bad} out of range for {cols} columns"
        )));
    }
    Ok(())
}

/// Validates a COO view (coords ndim × nnz, each index within its dimension).
pub fn check_coo(v: &TensorView<'_>) -> Result<()> {
    let name = &v.info.name;
    let nnz = nnz_of(v)?;
    let coords = u64s(v.part("coords").unwrap_or(&[]), "coords", name)?;
    let ndim = v.info.shape.len() as u64;
    if Some(coords.len() as u64) != ndim.checked_mul(nnz) {
        return Err(Error::malformed(format!(
            "tensor {name:?}: {} coords for {ndim} dims × {nnz} values",
            coords.len()
        )));
    }
    for (d, &dim) in v.info.shape.iter().enumerate() {
        let row = &coords[d * nnz as usize..(d + 1) * nnz as usize];
        if let Some(bad) = row.iter().find(|&&c| c >= dim) {
            return Err(Error::malformed(format!(
                "tensor {name:?}: coordinate {bad} out of range for dimension {d} of size {dim}"
            )));
        }
    }
    Ok(())
}

/// Builds the dense form of a CSR or COO view (duplicates: the last one wins).
/// Dense views are returned as they are; other layouts are `Unsupported`.
pub fn densify<'d>(v: TensorView<'d>) -> Result<TensorView<'d>> {
    match v.info.layout {
        Layout::Dense => return Ok(v),
        Layout::Other(_) if v.info.layout.undecoded_type().is_some() => {
            return Err(Error::unsupported(format!(
                "tensor {:?} is {} (stored as {} bytes), a type Tessera does not decode",
                v.info.name,
                v.info.dtype_label(),
                v.info.dtype
            )))
        }
        Layout::Other(ref l) => {
            return Err(Error::unsupported(format!(
                "tensor {:?}: layout {l:?} cannot be densified",
                v.info.name
            )))
        }
        _ => {}
    }
    v.validate()?;
    let sz = v.info.dtype.size();
    let nbytes = crate::limits::to_usize(v.info.dense_nbytes()?, "dense size")?;
    let mut out = vec![0u8; nbytes];
    let values = v.part("values").unwrap_or(&[]);
    let name = v.info.name.clone();
    let shape = v.info.shape.clone();
    let mut put = |k: usize, flat: u64| {
        let dst = flat as usize * sz;
        out[dst..dst + sz].copy_from_slice(&values[k * sz..(k + 1) * sz]);
    };
    if v.info.layout == Layout::SparseCsr {
        let indices = u64s(v.part("indices").unwrap_or(&[]), "indices", &name)?;
        let indptr = u64s(v.part("indptr").unwrap_or(&[]), "indptr", &name)?;
        for r in 0..shape[0] as usize {
            let (lo, hi) = (indptr[r] as usize, indptr[r + 1] as usize);
            for (k, &col) in indices.iter().enumerate().take(hi).skip(lo) {
                put(k, r as u64 * shape[1] + col);
            }
        }
    } else {
        let coords = u64s(v.part("coords").unwrap_or(&[]), "coords", &name)?;
        let nnz = values.len() / sz;
        for k in 0..nnz {
            let mut flat = 0u64;
            for (d, &dim) in shape.iter().enumerate() {
                flat = flat * dim + coords[d * nnz + k];
            }
            put(k, flat);
        }
    }
    let mut info: TensorInfo = v.info;
    info.layout = Layout::Dense;
    Ok(TensorView {
        info,
        parts: vec![Part {
            role: "data".into(),
            bytes: Cow::Owned(out),
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    fn le(v: &[u64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    fn view(layout: Layout, parts: Vec<(&str, Vec<u8>)>) -> TensorView<'static> {
        let mut info = TensorInfo::dense("s", DType::F32, vec![2, 3]);
        info.layout = layout;
        TensorView {
            info,
            parts: parts
                .into_iter()
                .map(|(r, b)| Part {
                    role: r.into(),
                    bytes: Cow::Owned(b),
                })
                .collect(),
        }
    }

    #[test]
    fn csr_and_coo_densify_to_the_same_matrix() {
        let csr = view(
            Layout::SparseCsr,
            vec![
                ("values", f32s(&[1.0, 2.0])),
                ("indices", le(&[0, 2])),
                ("indptr", le(&[0, 1, 2])),
            ],
        );
        let coo = view(
            Layout::SparseCoo,
            vec![("values", f32s(&[1.0, 2.0])), ("coords", le(&[0, 1, 0, 2]))],
        );
        let want = f32s(&[1.0, 0.0, 0.0, 0.0, 0.0, 2.0]);
        assert_eq!(densify(csr).unwrap().data().unwrap(), &want[..]);
        assert_eq!(densify(coo).unwrap().data().unwrap(), &want[..]);
    }

    #[test]
    fn out_of_range_indices_are_malformed() {
        let csr = view(
            Layout::SparseCsr,
            vec![
                ("values", f32s(&[1.0])),
                ("indices", le(&[3])),
                ("indptr", le(&[0, 1, 1])),
            ],
        );
        assert!(csr.validate().is_err());
        let coo = view(
            Layout::SparseCoo,
            vec![("values", f32s(&[1.0])), ("coords", le(&[2, 0]))],
        );
        assert!(coo.validate().is_err());
    }
}
