//! Objects as tensors: the `dense` size equation, the sparse profiles' metadata rules,
//! logical types onto [`DType`], a dense object of a type without one as
//! [`Layout::undecoded`], and every other layout kept as [`Layout::Other`].

use std::borrow::Cow;

use super::raw::{logical_type, storage_of, ObjectRef, PartRef};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::metadata::{Map, Value};
use crate::tensor::{Layout, Part, Storage, TensorInfo};

/// Layout ids of the sparse profiles.
pub const CSR: &str = "zt.sparse_csr/1";
/// COO profile id.
pub const COO: &str = "zt.sparse_coo/1";
/// Attribute that keeps each part's `dtype[:type]` for layouts Tessera does not
/// interpret, and the stored type of a sparse tensor's u32 index parts (widened to u64
/// on read), so that a v2 → v2 rewrite states them again.
pub const PART_TYPES: &str = "zt.part_types";

/// How a tensor's parts are read.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Parts, in name order.
    pub parts: Vec<PartRef>,
    /// Elements of the dense `data` part (for the `f4_e2m1` odd-nibble rule).
    pub elements: Option<u64>,
}

/// Decoded size of `n` elements of a part's (dtype, type); `None` for an unknown type.
pub fn size_of(p: &PartRef, n: u64) -> Option<u64> {
    let w = p.dtype.size() as u64;
    match p.logical.as_deref() {
        None => n.checked_mul(w),
        Some("f4_e2m1") => Some(n.div_ceil(2)),
        Some(t) => logical_type(t).and_then(|_| n.checked_mul(w_of(t, w))),
    }
}

fn w_of(t: &str, w: u64) -> u64 {
    match t {
        "complex64" | "complex128" => 2 * w,
        _ => w,
    }
}

/// The tessera dtype of a part, when it has one.
fn dtype_of(p: &PartRef) -> Option<DType> {
    match p.logical.as_deref() {
        None => Some(p.dtype),
        Some(t) => logical_type(t).and_then(|(_, d)| d),
    }
}

/// The tessera dtype of a sparse `values` part or another layout's first part: a packed
/// sub-byte type has none there (its elements are not whole bytes, which the sparse code
/// and the storage-type rule of `Layout::Other` assume), so the part is kept raw.
fn element_dtype_of(p: &PartRef) -> Option<DType> {
    dtype_of(p).filter(|d| !d.is_packed())
}

fn part_label(p: &PartRef) -> String {
    match &p.logical {
        None => storage_of(p.dtype).0.to_string(),
        Some(t) => format!("{}:{t}", storage_of(p.dtype).0),
    }
}

fn size_rule(o: &ObjectRef, p: &PartRef, n: u64) -> Result<()> {
    if let Some(want) = size_of(p, n) {
        if want != p.decoded_size() {
            return Err(Error::malformed(format!(
                "tensor {:?} part {:?}: {} decoded bytes, {n} elements of {} need {want}",
                o.name,
                p.name,
                p.decoded_size(),
                part_label(p)
            )));
        }
    }
    Ok(())
}

fn part<'o>(o: &'o ObjectRef, name: &str) -> Result<&'o PartRef> {
    o.parts.iter().find(|p| p.name == name).ok_or_else(|| {
        Error::malformed(format!(
            "tensor {:?} ({}) lacks its {name:?} part",
            o.name, o.layout
        ))
    })
}

fn exact_parts(o: &ObjectRef, names: &[&str]) -> Result<()> {
    if o.parts.len() != names.len() {
        return Err(Error::malformed(format!(
            "tensor {:?}: layout {} has exactly the parts {names:?}, the object has {}",
            o.name,
            o.layout,
            o.parts.len()
        )));
    }
    for n in names {
        part(o, n)?;
    }
    Ok(())
}

fn index_part<'o>(o: &'o ObjectRef, name: &str) -> Result<(&'o PartRef, u64)> {
    let p = part(o, name)?;
    if !matches!(p.dtype, DType::U32 | DType::U64) || p.logical.is_some() {
        return Err(Error::malformed(format!(
            "tensor {:?} part {name:?}: indices are plain u32 or u64, not {}",
            o.name,
            part_label(p)
        )));
    }
    Ok((p, p.dtype.size() as u64))
}

/// The tensor an object is, after the layout's metadata rules.
pub fn interpret(mut o: ObjectRef, warnings: &mut Vec<String>) -> Result<(TensorInfo, Entry)> {
    o.parts.sort_by(|a, b| a.name.cmp(&b.name));
    let numel = o
        .shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| Error::malformed("shape product overflows u64"))?;
    let mut elements = None;
    let (layout, dtype) = match o.layout.as_str() {
        "dense" => {
            exact_parts(&o, &["data"])?;
            let p = &o.parts[0];
            size_rule(&o, p, numel)?;
            elements = Some(numel);
            match dtype_of(p) {
                Some(d) => (Layout::Dense, d),
                // Only a logical type has no DType: one Tessera does not know.
                None => (
                    Layout::undecoded(p.logical.as_deref().unwrap_or_default()),
                    p.dtype,
                ),
            }
        }
        CSR => {
            exact_parts(&o, &["values", "indices", "indptr"])?;
            if o.shape.len() != 2 {
                return Err(Error::malformed(format!(
                    "tensor {:?}: {CSR} is rank 2, shape {:?}",
                    o.name, o.shape
                )));
            }
            let (ind, w) = index_part(&o, "indices")?;
            let (ptr, _) = index_part(&o, "indptr")?;
            if ptr.dtype != ind.dtype {
                return Err(Error::malformed(format!(
                    "tensor {:?}: indptr and indices differ in dtype",
                    o.name
                )));
            }
            if ind.decoded_size() % w != 0 {
                return Err(Error::malformed(format!(
                    "tensor {:?}: indices are not a whole number of elements",
                    o.name
                )));
            }
            let nnz = ind.decoded_size() / w;
            let rows = o.shape[0].checked_add(1).and_then(|r| r.checked_mul(w));
            if rows != Some(ptr.decoded_size()) {
                return Err(Error::malformed(format!(
                    "tensor {:?}: indptr holds {} bytes, rows + 1 = {} entries need more or fewer",
                    o.name,
                    ptr.decoded_size(),
                    o.shape[0].saturating_add(1)
                )));
            }
            let v = part(&o, "values")?;
            size_rule(&o, v, nnz)?;
            match element_dtype_of(v) {
                Some(d) => (Layout::SparseCsr, d),
                None => (Layout::Other(CSR.into()), v.dtype),
            }
        }
        COO => {
            exact_parts(&o, &["values", "coords"])?;
            if o.shape.is_empty() {
                return Err(Error::malformed(format!(
                    "tensor {:?}: {COO} needs rank >= 1",
                    o.name
                )));
            }
            let (c, w) = index_part(&o, "coords")?;
            let per = w * o.shape.len() as u64;
            if c.decoded_size() % per != 0 {
                return Err(Error::malformed(format!(
                    "tensor {:?}: coords are not a whole number of {}-d coordinates",
                    o.name,
                    o.shape.len()
                )));
            }
            let nnz = c.decoded_size() / per;
            let v = part(&o, "values")?;
            size_rule(&o, v, nnz)?;
            match element_dtype_of(v) {
                Some(d) => (Layout::SparseCoo, d),
                None => (Layout::Other(COO.into()), v.dtype),
            }
        }
        other => {
            let first = &o.parts[0];
            (
                Layout::Other(other.to_string()),
                element_dtype_of(first).unwrap_or(first.dtype),
            )
        }
    };
    let mut attrs = Map::new();
    for (k, v) in o.attributes.iter().flatten() {
        attrs.push_new(k.clone(), super::read::to_value(v));
    }
    // An undecoded dense tensor states its part's type in its layout and dtype.
    if matches!(layout, Layout::Other(_)) && layout.undecoded_type().is_none() {
        let mut types = Map::new();
        for p in &o.parts {
            types.push_new(p.name.clone(), Value::Str(part_label(p)));
        }
        if attrs.get(PART_TYPES).is_some() {
            warnings.push(format!(
                "tensor {:?}: attribute {PART_TYPES:?} is shadowed by the part types",
                o.name
            ));
            attrs.remove(PART_TYPES);
        }
        attrs.push_new(PART_TYPES.into(), Value::Map(types));
    }
    // A sparse tensor's u32 index parts are widened on read; their stored type is kept
    // (the index parts only) so that a v2 → v2 rewrite stores them as u32 again.
    if matches!(layout, Layout::SparseCsr | Layout::SparseCoo) {
        let narrow: Vec<&PartRef> = (o.parts.iter())
            .filter(|p| p.name != "values" && p.dtype == DType::U32)
            .collect();
        if !narrow.is_empty() {
            if attrs.get(PART_TYPES).is_some() {
                warnings.push(format!(
                    "tensor {:?}: attribute {PART_TYPES:?} is shadowed by the index types",
                    o.name
                ));
                attrs.remove(PART_TYPES);
            }
            let mut types = Map::new();
            for p in narrow {
                types.push_new(p.name.clone(), Value::Str(part_label(p)));
            }
            attrs.push_new(PART_TYPES.into(), Value::Map(types));
        }
    }
    let mut encodings: Vec<&str> = o
        .parts
        .iter()
        .map(|p| p.encoding.as_deref().unwrap_or("raw"))
        .collect();
    encodings.dedup();
    let mut digests: Vec<String> = Vec::new();
    for p in &o.parts {
        if let Some(d) = &p.digest {
            let a = d.algorithm().to_string();
            if !digests.contains(&a) {
                digests.push(a);
            }
        }
    }
    let info = TensorInfo {
        name: o.name.clone(),
        dtype,
        shape: o.shape.clone(),
        layout,
        attrs,
        storage: Storage {
            offset: o.parts.iter().map(|p| p.offset).min(),
            stored_bytes: o
                .parts
                .iter()
                .map(|p| p.length)
                .fold(0, u64::saturating_add),
            encoding: encodings.join(","),
            digests,
        },
    };
    Ok((
        info,
        Entry {
            parts: o.parts,
            elements,
        },
    ))
}

/// Data rules of the logical types (spec Appendix A): `bool` bytes are 0 or 1; the
/// final odd nibble of `f4_e2m1` is zero.
pub fn check_data(p: &PartRef, bytes: &[u8], elements: Option<u64>) -> Result<()> {
    match p.logical.as_deref() {
        Some("bool") => {
            if let Some(i) = bytes.iter().position(|&b| b > 1) {
                return Err(Error::malformed(format!(
                    "part {:?}: bool byte {i} is 0x{:02x}, not 0 or 1",
                    p.name, bytes[i]
                )));
            }
        }
        Some("f4_e2m1") => {
            if let (Some(n), Some(last)) = (elements, bytes.last()) {
                if n % 2 == 1 && last >> 4 != 0 {
                    return Err(Error::malformed(format!(
                        "part {:?}: the unused high nibble of the last f4_e2m1 byte is not zero",
                        p.name
                    )));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// A decoded part as a tensor part: the sparse index parts widened to u64, as
/// [`Layout::SparseCsr`] and [`Layout::SparseCoo`] hold them.
pub fn to_part<'d>(layout: &Layout, p: &PartRef, bytes: Cow<'d, [u8]>) -> Result<Part<'d>> {
    let index = matches!(
        (layout, p.name.as_str()),
        (Layout::SparseCsr, "indices" | "indptr") | (Layout::SparseCoo, "coords")
    );
    let bytes = if index && p.dtype == DType::U32 {
        let mut out = Vec::with_capacity(bytes.len() * 2);
        for c in bytes.chunks_exact(4) {
            let v = u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as u64;
            out.extend_from_slice(&v.to_le_bytes());
        }
        Cow::Owned(out)
    } else {
        bytes
    };
    Ok(Part {
        role: p.name.clone(),
        bytes,
    })
}

fn u64s(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect()
}

/// The sparse profiles' data rules beyond range checks (run after
/// [`TensorView::validate`](crate::TensorView::validate), which checks indptr and the
/// index ranges): CSR indices strictly increasing within each row, COO coordinates
/// unique.
pub fn check_profile_data(v: &crate::TensorView<'_>) -> Result<()> {
    match v.info.layout {
        Layout::SparseCsr => {
            let ind = u64s(v.part("indices").unwrap_or_default());
            let ptr = u64s(v.part("indptr").unwrap_or_default());
            for (r, w) in ptr.windows(2).enumerate() {
                let (a, b) = (w[0] as usize, w[1] as usize);
                if let Some(row) = ind.get(a..b) {
                    if row.windows(2).any(|p| p[0] >= p[1]) {
                        return Err(Error::malformed(format!(
                            "{CSR}: the column indices of row {r} are not strictly increasing"
                        )));
                    }
                }
            }
        }
        Layout::SparseCoo => {
            let c = u64s(v.part("coords").unwrap_or_default());
            let ndim = v.info.shape.len();
            let nnz = c.len().checked_div(ndim).unwrap_or(0);
            let mut cells: Vec<Vec<u64>> = (0..nnz)
                .map(|i| (0..ndim).map(|d| c[d * nnz + i]).collect())
                .collect();
            cells.sort_unstable();
            if let Some(w) = cells.windows(2).find(|w| w[0] == w[1]) {
                return Err(Error::malformed(format!(
                    "{COO}: coordinate {:?} appears twice",
                    w[0]
                )));
            }
        }
        _ => {}
    }
    Ok(())
}
