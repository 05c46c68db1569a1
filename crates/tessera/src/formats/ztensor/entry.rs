//! One tensor object of the manifest, validated against the file: layout, dtype,
//! shape, components, their bounds and sizes.

use super::manifest::{self as mf, RawTensor};
use super::raw::{ALIGNMENT, MAGIC};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::metadata::Map;
use crate::tensor::{self, Layout, Storage, TensorInfo};

/// How a component is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Encoding {
    /// As is.
    Raw,
    /// A zstd stream (frames with or without a content size).
    Zstd,
    /// Something else: the tensor is listed but reading it is `Unsupported`.
    Other(String),
}

impl Encoding {
    /// `raw`, `zstd` or the other name.
    pub fn name(&self) -> &str {
        match self {
            Encoding::Raw => "raw",
            Encoding::Zstd => "zstd",
            Encoding::Other(s) => s,
        }
    }
}

/// One component of a tensor, validated against the file.
#[derive(Debug, Clone)]
pub struct Component {
    /// Its role (`data`, `values`, `indices`, …; the usual ones are not allocated).
    pub role: std::borrow::Cow<'static, str>,
    /// Element type of the component (v1.1 states it per component).
    pub dtype: Option<DType>,
    /// Absolute offset.
    pub offset: u64,
    /// Stored bytes.
    pub length: u64,
    /// Encoding.
    pub encoding: Encoding,
    /// `digest` as written.
    pub digest: Option<String>,
}

pub(super) fn is_index_role(layout: &Layout, role: &str) -> bool {
    matches!(
        (layout, role),
        (Layout::SparseCsr, "indices" | "indptr") | (Layout::SparseCoo, "coords")
    )
}

pub(super) fn check_depth(v: &crate::metadata::Value, max: usize, key: &str) -> Result<()> {
    fn depth(v: &crate::metadata::Value) -> usize {
        match v {
            crate::metadata::Value::List(l) => 1 + l.iter().map(depth).max().unwrap_or(0),
            crate::metadata::Value::Map(m) => {
                1 + m.iter().map(|(_, v)| depth(v)).max().unwrap_or(0)
            }
            _ => 0,
        }
    }
    let d = depth(v);
    Limits::check(
        &format!("nesting of attribute {key:?}"),
        d as u64,
        max as u64,
    )
}

/// Most warnings kept from one open (a hostile file could raise one per component).
const MAX_WARNINGS: usize = 32;

pub(super) fn warn(warnings: &mut Vec<String>, w: String) {
    match warnings.len() {
        n if n < MAX_WARNINGS => warnings.push(w),
        MAX_WARNINGS => warnings.push("further warnings omitted".into()),
        _ => {}
    }
}

fn parse_dtype(d: &mf::DTypeName) -> Result<DType> {
    d.clone()
        .map_err(|s| Error::malformed(format!("unknown dtype {s:?}")))
}

/// Validates one tensor object against the file: layout, dtype, shape, components and
/// their bounds and sizes. Errors name the tensor.
pub(super) fn tensor_entry(
    name: String,
    t: RawTensor,
    manifest_start: u64,
    limits: &Limits,
    warnings: &mut Vec<String>,
) -> Result<(TensorInfo, Vec<Component>)> {
    match entry(&name, t, manifest_start, limits, warnings) {
        Ok((mut info, comps)) => {
            info.name = name;
            Ok((info, comps))
        }
        Err(e) => Err(e.at_subject(format!("tensor {name:?}"))),
    }
}

fn entry(
    name: &str,
    t: RawTensor,
    manifest_start: u64,
    limits: &Limits,
    warnings: &mut Vec<String>,
) -> Result<(TensorInfo, Vec<Component>)> {
    limits.check_rank(t.shape.len() as u64)?;
    let layout = t.format;
    let mut comps = t.components;
    limits.check_entries(comps.len() as u64)?;
    for c in &comps {
        limits.check_name(c.role.len() as u64)?;
        check_component(c, manifest_start, warnings, name)?;
    }
    if !comps.windows(2).all(|w| w[0].role < w[1].role) {
        comps.sort_by(|a, b| a.role.cmp(&b.role));
    }
    if let Some(w) = comps.windows(2).find(|w| w[0].role == w[1].role) {
        return Err(Error::malformed(format!(
            "duplicate component {:?}",
            w[0].role
        )));
    }
    // dtype: the tensor's (v1.0), or the main component's (v1.1).
    let main = match layout {
        Layout::Dense => "data",
        Layout::SparseCsr | Layout::SparseCoo => "values",
        Layout::Other(_) => "data",
    };
    let main_dtype = comps
        .iter()
        .find(|c| c.role.as_ref() == main)
        .and_then(|c| c.dtype);
    let dtype = match (&t.dtype, main_dtype) {
        (Some(s), md) => {
            let d = parse_dtype(s)?;
            if let Some(md) = md.filter(|md| *md != d) {
                return Err(Error::malformed(format!(
                    "dtype {d} disagrees with component {main:?} dtype {md}"
                )));
            }
            d
        }
        (None, Some(md)) => md,
        (None, None) => match &layout {
            Layout::Other(_) => comps.iter().find_map(|c| c.dtype).unwrap_or(DType::U8),
            _ => return Err(Error::malformed("tensor has no dtype")),
        },
    };
    let dense = tensor::dense_nbytes(dtype, &t.shape)?;
    // Components in the layout's order, then any others by name (sorted above).
    let required = layout.required_parts();
    for role in required {
        if !comps.iter().any(|c| c.role.as_ref() == *role) {
            return Err(Error::malformed(format!(
                "{} tensor lacks its {role:?} component",
                layout
            )));
        }
    }
    let extras: Vec<&str> = comps
        .iter()
        .filter(|c| !required.is_empty() && !required.contains(&c.role.as_ref()))
        .map(|c| c.role.as_ref())
        .collect();
    if !extras.is_empty() {
        let more = if extras.len() > 8 { " …" } else { "" };
        warn(
            warnings,
            format!(
                "tensor {name:?}: {layout} tensor has extra components {:?}{more} (kept as parts)",
                &extras[..extras.len().min(8)]
            ),
        );
    }
    comps.sort_by_key(|c| {
        required
            .iter()
            .position(|r| *r == c.role.as_ref())
            .unwrap_or(usize::MAX)
    });
    for c in &comps {
        let Some(d) = c.dtype else { continue };
        if is_index_role(&layout, &c.role) && !d.is_int() {
            return Err(Error::malformed(format!(
                "component {:?}: index dtype {d} is not an integer",
                c.role
            )));
        }
    }
    // Sizes that can be checked without decoding.
    match &layout {
        Layout::Dense => {
            let c = &comps[0];
            match c.encoding {
                Encoding::Raw if c.length != dense => {
                    return Err(Error::malformed(format!(
                        "data has {} bytes, {dtype} {:?} needs {dense}",
                        c.length, t.shape
                    ))
                    .at_offset(c.offset))
                }
                Encoding::Zstd => limits.check_decoded(dense)?,
                _ => {}
            }
        }
        Layout::SparseCsr | Layout::SparseCoo => {
            if layout == Layout::SparseCsr && t.shape.len() != 2 {
                return Err(Error::malformed(format!(
                    "sparse_csr needs a 2-D shape, got {:?}",
                    t.shape
                )));
            }
            for c in comps.iter().filter(|c| required.contains(&c.role.as_ref())) {
                let unit = if c.role.as_ref() == "values" {
                    dtype.size() as u64
                } else {
                    c.dtype.map_or(8, |d| d.size() as u64)
                };
                if c.encoding == Encoding::Raw && c.length % unit != 0 {
                    return Err(Error::malformed(format!(
                        "component {:?} has {} bytes, not a multiple of {unit}",
                        c.role, c.length
                    ))
                    .at_offset(c.offset));
                }
            }
        }
        Layout::Other(_) => {}
    }
    let stored: u64 = comps
        .iter()
        .map(|c| c.length)
        .fold(0u64, u64::saturating_add);
    let (encoding, digests) = storage_names(&comps);
    let mut attrs = Map::new();
    for (k, v) in t.attributes {
        check_depth(&v, limits.max_depth, &k)?;
        attrs.push_new(k, v);
    }
    let info = TensorInfo {
        // Set by the caller, which owns the name.
        name: String::new(),
        dtype,
        shape: t.shape,
        layout,
        attrs,
        storage: Storage {
            offset: comps.iter().map(|c| c.offset).min(),
            stored_bytes: stored,
            encoding,
            digests,
        },
    };
    Ok((info, comps))
}

/// How a tensor is stored, for inspect: the distinct encodings (`raw`, `zstd`,
/// `raw+zstd`, …) and digest algorithms of its components.
fn storage_names(comps: &[Component]) -> (String, Vec<String>) {
    // The usual case, one component: no lists to build.
    if let [c] = comps {
        let digests = c
            .digest
            .as_deref()
            .map(|d| vec![d.split_once(':').map_or(d, |(a, _)| a).to_ascii_lowercase()])
            .unwrap_or_default();
        return (c.encoding.name().to_string(), digests);
    }
    // A few; a hostile file with thousands of distinct names gets "mixed".
    const FEW: usize = 4;
    let mut encodings: Vec<&str> = Vec::new();
    let mut algos: Vec<String> = Vec::new();
    let (mut many_encodings, mut many_algos) = (false, false);
    for c in comps {
        let e = c.encoding.name();
        if !encodings.contains(&e) {
            if encodings.len() < FEW {
                encodings.push(e);
            } else {
                many_encodings = true;
            }
        }
        if let Some(d) = &c.digest {
            let algo = d.split_once(':').map_or(d.as_str(), |(a, _)| a);
            if !algos.iter().any(|a| a.eq_ignore_ascii_case(algo)) {
                if algos.len() < FEW {
                    algos.push(algo.to_ascii_lowercase());
                } else {
                    many_algos = true;
                }
            }
        }
    }
    let encoding = match (encodings.as_slice(), many_encodings) {
        ([], _) => "raw".to_string(),
        ([one], false) => (*one).to_string(),
        (_, false) => encodings.join("+"),
        (_, true) => "mixed".to_string(),
    };
    let mut digests = algos;
    if many_algos {
        digests.push("…".into());
    }
    (encoding, digests)
}

/// Checks a component's range against the file: inside the data area, no overflow;
/// warns when unaligned.
fn check_component(
    c: &Component,
    manifest_start: u64,
    warnings: &mut Vec<String>,
    tensor: &str,
) -> Result<()> {
    let what = || format!("component {:?}", c.role);
    let end = c.offset.checked_add(c.length).ok_or_else(|| {
        Error::malformed(format!(
            "{}: offset {} + length {} overflows",
            what(),
            c.offset,
            c.length
        ))
    })?;
    if c.offset < MAGIC.len() as u64 {
        return Err(Error::malformed(format!(
            "{}: offset {} is inside the magic",
            what(),
            c.offset
        ))
        .at_offset(c.offset));
    }
    if end > manifest_start {
        return Err(Error::malformed(format!(
            "{}: range {}..{end} runs past the data area, which ends at {manifest_start} where the manifest starts",
            what(),
            c.offset
        ))
        .at_offset(c.offset));
    }
    if c.offset % ALIGNMENT != 0 {
        warn(
            warnings,
            format!(
                "tensor {tensor:?}: component {:?} at offset {} is not 64-byte aligned",
                c.role, c.offset
            ),
        );
    }
    Ok(())
}
