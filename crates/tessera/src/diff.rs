//! Comparing two containers: tensors added, removed or changed (dtype, shape, layout,
//! and for numeric tensors how many elements differ, the largest absolute and relative
//! difference and the RMS difference), and metadata keys added, removed or changed.
//! Works across formats: sparse tensors are compared by their dense values, so the same
//! model in two formats has no differences; a sparse tensor against its dense form is
//! reported as a layout change (its content identity differs), with the values
//! compared. GGUF's quantized tensors are compared as stored (a type and layout
//! change against a float tensor) unless [`DiffOptions::dequantize`] decodes them
//! first ([`crate::values::dequantize`]): then the values are compared with the
//! tolerance. `tessera diff` renders a [`DiffReport`];
//! Python's `tessera.diff` returns one as a dict.
//!
//! Numeric equality is numpy's `isclose` with [`DiffOptions::atol`]/[`DiffOptions::rtol`]
//! (default 0: exact; NaN equals NaN, see [`crate::values`]); a tensor whose elements are
//! all close is reported in [`DiffReport::within_tolerance`], not as a difference.
//!
//! Metadata is compared the same way within and across formats: every key counts when
//! both formats carry metadata; when one carries only strings (safetensors), values are
//! compared as the text that format would hold; when one carries none (npy, WTXT), the
//! other's keys are listed in [`MetadataDiff::not_compared`] and do not count. GGUF's
//! value types (kept beside its metadata, and as the key `tessera.gguf_types` after a
//! conversion) are compared as that one fact. Safetensors' `format` key (the framework
//! that wrote the file, `{"format": "pt"}` as transformers and a set's shards carry it)
//! is no model metadata: present on one side only, it is listed as not compared.

use crate::convert::{capabilities, MetadataSupport};
use crate::error::{Error, Result};
use crate::format::Format;
use crate::metadata::{Metadata, Value};
use std::collections::HashSet;

use crate::model::{Container, TensorSource};
use crate::tensor::{Layout, TensorView};
use crate::values::{Tolerance, ValueDiff};

/// How to compare: the `isclose` tolerance (both 0 by default: exact).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct DiffOptions {
    /// Absolute tolerance (`|a - b| <= atol + rtol * |b|`).
    pub atol: f64,
    /// Relative tolerance.
    pub rtol: f64,
    /// Decode GGUF's quantized tensors to this float dtype (F32, F16 or BF16) before
    /// comparing ([`crate::values::dequantize`]), so a quantized model compares with
    /// its float original value by value; without it the type change is reported.
    pub dequantize: Option<crate::dtype::DType>,
}

impl DiffOptions {
    /// Exact comparison.
    pub fn new() -> DiffOptions {
        DiffOptions::default()
    }
    /// Sets the absolute tolerance.
    #[must_use]
    pub fn atol(mut self, atol: f64) -> DiffOptions {
        self.atol = atol;
        self
    }
    /// Sets the relative tolerance.
    #[must_use]
    pub fn rtol(mut self, rtol: f64) -> DiffOptions {
        self.rtol = rtol;
        self
    }
    /// Sets [`DiffOptions::dequantize`].
    #[must_use]
    pub fn dequantize(mut self, to: Option<crate::dtype::DType>) -> DiffOptions {
        self.dequantize = to;
        self
    }
    /// The tolerance, after checking both are finite and >= 0 (an `InvalidInput` error
    /// naming the bad one otherwise).
    pub fn tolerance(&self) -> Result<Tolerance> {
        for (name, x) in [("atol", self.atol), ("rtol", self.rtol)] {
            if !(x.is_finite() && x >= 0.0) {
                return Err(Error::invalid_input(format!(
                    "{name} must be a finite number >= 0, not {x}"
                )));
            }
        }
        Ok(Tolerance {
            atol: self.atol,
            rtol: self.rtol,
        })
    }
}

/// How two versions of one tensor differ.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct TensorDiff {
    /// Name.
    pub name: String,
    /// (a, b) dtypes as users know them (GGUF's quant types) when they differ.
    pub dtype: Option<(String, String)>,
    /// (a, b) shapes when they differ.
    pub shape: Option<(Vec<u64>, Vec<u64>)>,
    /// (a, b) layouts when they differ.
    pub layout: Option<(String, String)>,
    /// True when the (dense) bytes are identical.
    pub bytes_equal: bool,
    /// How the values differ, when shapes agree and both are dense.
    pub values: Option<ValueDiff>,
}

impl TensorDiff {
    /// Equal within the tolerance: only the values differ, and each pair is close.
    pub fn within_tolerance(&self) -> bool {
        self.dtype.is_none()
            && self.shape.is_none()
            && self.layout.is_none()
            && self.values.as_ref().is_some_and(|v| v.differing == 0)
    }
}

/// How the metadata differs.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct MetadataDiff {
    /// Keys only in b.
    pub added: Vec<String>,
    /// Keys only in a.
    pub removed: Vec<String>,
    /// Keys in both whose values differ.
    pub changed: Vec<String>,
    /// Every key above with its (a, b) values, in the order found.
    pub values: Vec<(String, Option<Value>, Option<Value>)>,
    /// Keys not compared: (key, "a" or "b", why), when one format carries no metadata.
    pub not_compared: Vec<(String, &'static str, String)>,
}

impl MetadataDiff {
    /// No key added, removed or changed (keys not compared do not count).
    pub fn same(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// The result of [`diff`].
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct DiffReport {
    /// The tolerance used.
    pub tolerance: Tolerance,
    /// Number of tensors in a.
    pub tensors_in_a: usize,
    /// Tensors only in b, in b's order.
    pub added: Vec<String>,
    /// Tensors only in a, in a's order.
    pub removed: Vec<String>,
    /// Tensors in both that differ (beyond the tolerance), in a's order.
    pub changed: Vec<TensorDiff>,
    /// Tensors in both whose values differ but are all close.
    pub within_tolerance: Vec<TensorDiff>,
    /// The metadata comparison.
    pub metadata: MetadataDiff,
}

impl DiffReport {
    /// No tensor added, removed or changed.
    pub fn tensors_same(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
    /// No compared metadata key added, removed or changed.
    pub fn metadata_same(&self) -> bool {
        self.metadata.same()
    }
    /// Tensors and compared metadata the same.
    pub fn same(&self) -> bool {
        self.tensors_same() && self.metadata_same()
    }
}

/// Compares `a` with `b` (see the module docs). Fails on a read error of either (a
/// checked read that finds damaged bytes, say) or a bad tolerance.
///
/// ```
/// use tessera::{diff::DiffOptions, TensorView};
/// # let dir = tempfile::tempdir()?;
/// let file = |name: &str, w: &[f32]| -> tessera::Result<tessera::Opened> {
///     let mut m = tessera::Model::new();
///     m.push(TensorView::from_slice("w", vec![w.len() as u64], w)?)?;
///     let path = dir.path().join(name);
///     tessera::convert::write_file(tessera::Format::Safetensors, &m, &path, &Default::default())?;
///     tessera::open_path(&path, &tessera::ReadOptions::default())
/// };
/// let (a, b) = (file("a.safetensors", &[1.0, 2.0])?, file("b.safetensors", &[1.0, 2.001])?);
/// let exact = tessera::diff::diff(a.container(), b.container(), &DiffOptions::new())?;
/// assert_eq!(exact.changed[0].name, "w");
/// let close = tessera::diff::diff(a.container(), b.container(), &DiffOptions::new().atol(1e-2))?;
/// assert!(close.tensors_same() && close.within_tolerance.len() == 1);
/// # Ok::<(), tessera::Error>(())
/// ```
pub fn diff(a: &dyn Container, b: &dyn Container, opts: &DiffOptions) -> Result<DiffReport> {
    diff_with_progress(a, b, opts, &mut |_| {})
}

/// [`diff`], calling `progress` with the dense byte size of each tensor of a as it is
/// reached (what the CLI's progress bar counts).
pub fn diff_with_progress(
    a: &dyn Container,
    b: &dyn Container,
    opts: &DiffOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<DiffReport> {
    run((a, Some(a.format())), (b, Some(b.format())), opts, progress)
}

/// [`diff`] over any two tensor sources (an in-memory [`crate::Model`], an adapter):
/// each one's metadata is compared as its [`TensorSource::source_format`] carries it
/// (a full tree when it has none).
pub fn diff_sources(
    a: &dyn TensorSource,
    b: &dyn TensorSource,
    opts: &DiffOptions,
) -> Result<DiffReport> {
    run(
        (a, a.source_format()),
        (b, b.source_format()),
        opts,
        &mut |_| {},
    )
}

type Side<'a> = (&'a dyn TensorSource, Option<Format>);

fn run(
    (a, fa): Side<'_>,
    (b, fb): Side<'_>,
    opts: &DiffOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<DiffReport> {
    let tol = opts.tolerance()?;
    let in_b: HashSet<&str> = b.tensor_infos().iter().map(|t| t.name.as_str()).collect();
    let in_a: HashSet<&str> = a.tensor_infos().iter().map(|t| t.name.as_str()).collect();
    let mut report = DiffReport {
        tolerance: tol,
        tensors_in_a: a.tensor_infos().len(),
        ..DiffReport::default()
    };
    for info in a.tensor_infos() {
        if !in_b.contains(info.name.as_str()) {
            report.removed.push(info.name.clone());
        }
    }
    for info in b.tensor_infos() {
        if !in_a.contains(info.name.as_str()) {
            report.added.push(info.name.clone());
        }
    }
    for info in a.tensor_infos() {
        progress(info.dense_nbytes().unwrap_or(0));
        if !in_b.contains(info.name.as_str()) {
            continue;
        }
        if let Some(d) = compare(a, b, &info.name, &tol, opts.dequantize)? {
            if d.within_tolerance() {
                report.within_tolerance.push(d);
            } else {
                report.changed.push(d);
            }
        }
    }
    report.metadata = compare_metadata((a, fa), (b, fb));
    Ok(report)
}

fn dense(v: TensorView<'_>) -> Result<TensorView<'_>> {
    Ok(match v.info.layout {
        Layout::SparseCsr | Layout::SparseCoo => crate::tensor::sparse::densify(v)?,
        _ => v,
    })
}

fn compare(
    a: &dyn TensorSource,
    b: &dyn TensorSource,
    name: &str,
    tol: &Tolerance,
    dequantize: Option<crate::dtype::DType>,
) -> Result<Option<TensorDiff>> {
    let (va, vb) = (a.tensor(name)?, b.tensor(name)?);
    // The stored layouts: a sparse tensor against its dense form is a layout change
    // (the content identity differs), even when the values are the same.
    let layouts = (va.info.layout.clone(), vb.info.layout.clone());
    // Identical stored tensors (a quantized one against the same blocks) need no
    // decoding.
    let same_stored = va.info.dtype_label() == vb.info.dtype_label()
        && va.info.shape == vb.info.shape
        && layouts.0 == layouts.1
        && va.parts.len() == vb.parts.len()
        && va
            .parts
            .iter()
            .zip(&vb.parts)
            .all(|(x, y)| x.role == y.role && x.bytes == y.bytes);
    if same_stored {
        return Ok(None);
    }
    fn decode(v: TensorView<'_>, to: Option<crate::dtype::DType>) -> Result<TensorView<'_>> {
        match to {
            Some(to) => dense(crate::values::dequantize(v, to)?),
            None => dense(v),
        }
    }
    let (va, vb) = (decode(va, dequantize)?, decode(vb, dequantize)?);
    let mut d = TensorDiff {
        name: name.to_string(),
        ..TensorDiff::default()
    };
    let quantized = |l: &Layout| matches!(l, Layout::Other(n) if n.starts_with("ggml_"));
    // Decoded for the comparison: the dtype it was decoded to is not a difference.
    let decoded = dequantize.is_some() && (quantized(&layouts.0) || quantized(&layouts.1));
    // Compared as users know them: a GGUF q8_0 tensor against a q4_0 one differs in
    // type although both are stored as u8 blocks.
    if va.info.dtype_label() != vb.info.dtype_label() && !decoded {
        d.dtype = Some((
            va.info.dtype_label().to_string(),
            vb.info.dtype_label().to_string(),
        ));
    }
    if va.info.shape != vb.info.shape {
        d.shape = Some((va.info.shape.clone(), vb.info.shape.clone()));
    }
    if va.info.layout != vb.info.layout {
        d.layout = Some((va.info.layout.to_string(), vb.info.layout.to_string()));
    } else if layouts.0 != layouts.1 && !decoded {
        d.layout = Some((layouts.0.to_string(), layouts.1.to_string()));
    }
    d.bytes_equal = va.parts.len() == vb.parts.len()
        && va
            .parts
            .iter()
            .zip(&vb.parts)
            .all(|(x, y)| x.role == y.role && x.bytes == y.bytes);
    if d.bytes_equal && d.dtype.is_none() && d.shape.is_none() && d.layout.is_none() {
        return Ok(None);
    }
    if d.shape.is_none() && va.info.layout == Layout::Dense && vb.info.layout == Layout::Dense {
        // Packed sub-byte floats as f32 (exact), so an odd f4 tensor's padding nibble is
        // not compared as an element.
        fn widen(v: TensorView<'_>) -> Result<TensorView<'_>> {
            match v.info.dtype.is_packed() {
                true => crate::cast::cast_view(v, crate::dtype::DType::F32),
                false => Ok(v),
            }
        }
        let (va, vb) = (widen(va)?, widen(vb)?);
        let mut v = ValueDiff::default();
        v.add(va.info.dtype, va.data()?, vb.info.dtype, vb.data()?, tol);
        d.values = Some(v);
    }
    Ok(Some(d))
}

/// How much metadata a format carries (a format Tessera only reads, or no format: a
/// full tree).
fn metadata_level(f: Option<Format>) -> MetadataSupport {
    f.and_then(capabilities)
        .map_or(MetadataSupport::Tree, |c| c.metadata)
}

/// The marker key `m` carries by its format's convention ([`crate::formats::Codec::marker`]:
/// safetensors' `format` key, `pt`, `tf`, …) and its value, when `other` has no such key.
fn framework_marker<'m>(
    m: &'m Metadata,
    other: &Metadata,
    f: Option<Format>,
) -> Option<(crate::formats::MetadataMarker, &'m str)> {
    let marker = f?.codec().marker?;
    if other.contains_key(marker.key) {
        return None;
    }
    let v = m.get(marker.key)?.as_str()?;
    marker.values.contains(&v).then_some((marker, v))
}

fn compare_metadata((a, fa): Side<'_>, (b, fb): Side<'_>) -> MetadataDiff {
    let (ma, mb) = (a.metadata(), b.metadata());
    let (la, lb) = (metadata_level(fa), metadata_level(fb));
    let mut d = MetadataDiff::default();
    if la == MetadataSupport::None || lb == MetadataSupport::None {
        // Only a format can carry no metadata, so that side has one.
        let none = if la == MetadataSupport::None { fa } else { fb };
        let title = none.map_or("the source", |f| f.title());
        let reason = format!("{title} carries no metadata");
        for k in ma.keys() {
            d.not_compared.push((k.to_string(), "a", reason.clone()));
        }
        for k in mb.keys() {
            d.not_compared.push((k.to_string(), "b", reason.clone()));
        }
        return d;
    }
    // A format of strings holds any other value as its JSON text: compare that.
    let strings = la == MetadataSupport::Strings || lb == MetadataSupport::Strings;
    let equal = |x: &Value, y: &Value| {
        if strings {
            x.display_short() == y.display_short()
        } else {
            x == y
        }
    };
    // GGUF's value types travel beside its metadata; into another format a conversion
    // keeps them as the key `tessera.gguf_types`: the same fact, compared as such.
    let (ta, tb) = (
        a.metadata_types().map(|t| Value::Map(t.clone())),
        b.metadata_types().map(|t| Value::Map(t.clone())),
    );
    let types = crate::metadata::GGUF_TYPES_KEY;
    let types_in = |m: &Metadata, other: &Option<Value>, mine: &Option<Value>| {
        other.is_some() && mine.is_none() && m.contains_key(types)
    };
    if types_in(mb, &ta, &tb) || types_in(ma, &tb, &ta) {
        let x = ta.as_ref().or(ma.get(types));
        let y = tb.as_ref().or(mb.get(types));
        if let (Some(x), Some(y)) = (x, y) {
            if !equal(x, y) {
                d.changed.push(types.to_string());
                d.values
                    .push((types.to_string(), Some(x.clone()), Some(y.clone())));
            }
        }
    }
    let skip = |k: &str| k == types && (ta.is_some() || tb.is_some());
    for (m, other, f, side) in [(ma, mb, fa, "a"), (mb, ma, fb, "b")] {
        if let Some((marker, v)) = framework_marker(m, other, f) {
            let why = format!("{} ({v:?}), not model metadata", marker.what);
            d.not_compared.push((marker.key.to_string(), side, why));
        }
    }
    let marker = |k: &str| {
        [(ma, mb, fa), (mb, ma, fb)]
            .into_iter()
            .any(|(m, o, f)| framework_marker(m, o, f).is_some_and(|(mk, _)| mk.key == k))
    };
    let skip = |k: &str| skip(k) || marker(k);
    for (k, x) in ma.iter().filter(|(k, _)| !skip(k)) {
        match mb.get(k) {
            None => {
                d.removed.push(k.to_string());
                d.values.push((k.to_string(), Some(x.clone()), None));
            }
            Some(y) if !equal(x, y) => {
                d.changed.push(k.to_string());
                d.values
                    .push((k.to_string(), Some(x.clone()), Some(y.clone())));
            }
            Some(_) => {}
        }
    }
    for (k, y) in mb.iter().filter(|(k, _)| !skip(k)) {
        if !ma.contains_key(k) {
            d.added.push(k.to_string());
            d.values.push((k.to_string(), None, Some(y.clone())));
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::model::Model;
    use crate::tensor::TensorInfo;
    use std::borrow::Cow;

    fn model(tensors: &[(&str, &[f32])], meta: &[(&str, Value)]) -> Model {
        let mut m = Model::default();
        for (name, vals) in tensors {
            let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
            let info = TensorInfo::dense(*name, DType::F32, vec![vals.len() as u64]);
            m.push(TensorView::dense(info, Cow::Owned(bytes)).unwrap())
                .unwrap();
        }
        for (k, v) in meta {
            m.metadata.insert(k.to_string(), v.clone());
        }
        m
    }

    #[test]
    fn the_same_model_has_no_differences() {
        let a = model(
            &[("w", &[1.0, 2.0]), ("b", &[0.5])],
            &[("k", Value::Int(1))],
        );
        let r = diff_sources(&a, &a.clone(), &DiffOptions::new()).unwrap();
        assert!(r.same(), "{r:?}");
        assert_eq!(r.tensors_in_a, 2);
    }

    #[test]
    fn added_removed_and_changed_tensors_and_keys_are_named() {
        let a = model(
            &[("w", &[1.0, 2.0]), ("gone", &[0.0]), ("s", &[1.0, 2.0])],
            &[("k", Value::Int(1)), ("old", Value::Bool(true))],
        );
        let b = model(
            &[("w", &[1.0, 2.5]), ("new", &[0.0]), ("s", &[1.0])],
            &[("k", Value::Int(2)), ("fresh", Value::Null)],
        );
        let r = diff_sources(&a, &b, &DiffOptions::new()).unwrap();
        assert!(!r.same() && !r.tensors_same() && !r.metadata_same());
        assert_eq!(r.removed, ["gone"]);
        assert_eq!(r.added, ["new"]);
        let names: Vec<&str> = r.changed.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["w", "s"]);
        let w = &r.changed[0];
        let v = w.values.as_ref().unwrap();
        assert_eq!((v.compared, v.differing), (2, 1));
        assert_eq!(v.max_abs, 0.5);
        assert!(w.shape.is_none() && w.dtype.is_none() && !w.bytes_equal);
        assert_eq!(r.changed[1].shape, Some((vec![2], vec![1])));
        assert!(r.changed[1].values.is_none());
        assert_eq!(r.metadata.changed, ["k"]);
        assert_eq!(r.metadata.removed, ["old"]);
        assert_eq!(r.metadata.added, ["fresh"]);
        assert_eq!(
            r.metadata.values[0],
            ("k".into(), Some(Value::Int(1)), Some(Value::Int(2)))
        );
    }

    #[test]
    fn a_safetensors_framework_marker_on_one_side_is_not_compared() {
        let pt = model(&[("w", &[1.0])], &[("format", Value::Str("pt".into()))]);
        let none = model(&[("w", &[1.0])], &[]);
        let (st, gguf) = (Some(Format::Safetensors), Some(Format::Gguf));
        let diff = |a: &Model, fa, b: &Model, fb| {
            run((a, fa), (b, fb), &DiffOptions::new(), &mut |_| {}).unwrap()
        };
        let r = diff(&pt, st, &none, gguf);
        assert!(r.same(), "{:?}", r.metadata);
        assert_eq!(r.metadata.not_compared.len(), 1);
        assert!(diff(&none, gguf, &pt, st).same());
        // On both sides it is compared as any key.
        let np = model(&[("w", &[1.0])], &[("format", Value::Str("np".into()))]);
        assert_eq!(diff(&pt, st, &np, st).metadata.changed, ["format"]);
        // Not a framework's name, or not from safetensors: a key like any other.
        let mine = model(&[("w", &[1.0])], &[("format", Value::Str("mine".into()))]);
        assert_eq!(diff(&mine, st, &none, gguf).metadata.removed, ["format"]);
        assert_eq!(diff(&pt, gguf, &none, gguf).metadata.removed, ["format"]);
    }

    #[test]
    fn close_values_are_within_tolerance_not_changed() {
        let a = model(&[("w", &[1.0, 100.0])], &[]);
        let b = model(&[("w", &[1.001, 100.05])], &[]);
        let exact = diff_sources(&a, &b, &DiffOptions::new()).unwrap();
        assert_eq!(exact.changed.len(), 1);
        let loose = diff_sources(&a, &b, &DiffOptions::new().atol(0.002).rtol(0.001)).unwrap();
        assert!(loose.same(), "{loose:?}");
        assert_eq!(loose.within_tolerance.len(), 1);
        assert!(loose.within_tolerance[0].within_tolerance());
    }

    #[test]
    fn a_bad_tolerance_is_refused() {
        let a = model(&[], &[]);
        for opts in [
            DiffOptions::new().atol(-1.0),
            DiffOptions::new().rtol(f64::NAN),
        ] {
            let e = diff_sources(&a, &a, &opts).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidInput, "{e}");
        }
    }
}
