//! `tessera diff A B [--json] [--atol X --rtol Y]`: tensors added, removed, or changed
//! (dtype, shape, layout, and for numeric tensors how many elements differ, the largest
//! absolute and relative difference and the RMS difference), and metadata keys added,
//! removed or changed, with their old and new values. Works across formats: sparse
//! tensors are compared by their dense values, so the same model in two formats has no
//! differences.
//!
//! Numeric equality is numpy's `isclose` with `--atol`/`--rtol` (default 0: exact; NaN
//! equals NaN, see `tessera::values`); a tensor whose elements are all close is reported
//! as equal within tolerance, not as a difference.
//!
//! Metadata is compared the same way within and across formats: every key counts when
//! both formats carry metadata; when one carries only strings (safetensors), values are
//! compared as the text that format would hold; when one carries none (npy, WTXT), the
//! other's keys are listed as not compared, and do not count.
//!
//! Exit 0 when the tensors and the compared metadata are the same, 1 when they differ.
//!
//! JSON shape: `{"a", "b", "same", "tensors_same", "metadata_same", "tolerance":
//! {"atol", "rtol"}, "added": [names], "removed": [names], "changed": [{"name", "dtype":
//! [a, b]|null, "shape": [a, b]|null, "layout": [a, b]|null, "bytes_equal",
//! "elements_compared", "elements_differing", "nonfinite_mismatches", "max_abs_diff",
//! "max_rel_diff", "rms_diff"}], "within_tolerance": [same fields], "metadata":
//! {"added": [keys], "removed": [keys], "changed": [keys], "values": {key: [a|null,
//! b|null]}, "not_compared": [{"key", "in", "reason"}]}}`. A difference that is infinite
//! (a relative difference against 0) is `null`.

use std::io::Write;

use serde_json::json;
use tessera::convert::MetadataSupport;
use tessera::values::{Tolerance, ValueDiff};
use tessera::{Container, Layout, Metadata, TensorView, Value};

use crate::cli::DiffArgs;
use crate::output::{with_file, Progress};
use crate::term::escape;

/// How two versions of one tensor differ.
#[derive(Debug, Default)]
pub struct TensorDiff {
    /// Name.
    pub name: String,
    /// (a, b) dtypes when they differ.
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

fn dense<'a>(v: TensorView<'a>) -> anyhow::Result<TensorView<'a>> {
    Ok(match v.info.layout {
        Layout::SparseCsr | Layout::SparseCoo => tessera::sparse::densify(v)?,
        _ => v,
    })
}

fn compare(
    a: &dyn Container,
    b: &dyn Container,
    name: &str,
    tol: &Tolerance,
) -> anyhow::Result<Option<TensorDiff>> {
    let va = dense(a.tensor(name)?)?;
    let vb = dense(b.tensor(name)?)?;
    let mut d = TensorDiff {
        name: name.to_string(),
        ..TensorDiff::default()
    };
    // Compared as users know them: a GGUF q8_0 tensor against a q4_0 one differs in
    // type although both are stored as u8 blocks.
    if va.info.dtype_label() != vb.info.dtype_label() {
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
        let mut v = ValueDiff::default();
        v.add(va.info.dtype, va.data()?, vb.info.dtype, vb.data()?, tol);
        d.values = Some(v);
    }
    Ok(Some(d))
}

impl TensorDiff {
    /// Equal within the tolerance: only the values differ, and each pair is close.
    fn within_tolerance(&self) -> bool {
        self.dtype.is_none()
            && self.shape.is_none()
            && self.layout.is_none()
            && self.values.as_ref().is_some_and(|v| v.differing == 0)
    }

    fn json(&self) -> serde_json::Value {
        let v = self.values.as_ref();
        json!({
            "name": self.name,
            "dtype": self.dtype.as_ref().map(|(x, y)| [x, y]),
            "shape": self.shape.as_ref().map(|(x, y)| json!([x, y])),
            "layout": self.layout.as_ref().map(|(x, y)| [x, y]),
            "bytes_equal": self.bytes_equal,
            "elements_compared": v.map(|v| v.compared),
            "elements_differing": v.map(|v| v.differing),
            "nonfinite_mismatches": v.map(|v| v.nonfinite_mismatches),
            "max_abs_diff": v.map(|v| v.max_abs),
            "max_rel_diff": v.map(|v| v.max_rel),
            "rms_diff": v.map(|v| v.rms()),
        })
    }

    fn errors(v: &ValueDiff) -> String {
        format!(
            "max abs diff {}, max rel diff {}, rms diff {}",
            v.max_abs,
            v.max_rel,
            v.rms()
        )
    }

    fn text(&self) -> String {
        let mut parts = Vec::new();
        if let Some((x, y)) = &self.dtype {
            parts.push(format!("dtype {x} -> {y}"));
        }
        if let Some((x, y)) = &self.shape {
            parts.push(format!("shape {x:?} -> {y:?}"));
        }
        if let Some((x, y)) = &self.layout {
            parts.push(format!("layout {x} -> {y}"));
        }
        match &self.values {
            Some(v) if v.differing > 0 => {
                parts.push(format!(
                    "{} of {} elements differ, {}",
                    v.differing,
                    v.compared,
                    Self::errors(v)
                ));
                if v.nonfinite_mismatches > 0 {
                    parts.push(format!("{} NaN/Inf mismatches", v.nonfinite_mismatches));
                }
            }
            Some(_) => {}
            None if !self.bytes_equal => parts.push("bytes differ".into()),
            None => {}
        }
        parts.join(", ")
    }
}

/// How much metadata a format carries (a format Tessera only reads: a full tree).
fn metadata_level(f: tessera::Format) -> MetadataSupport {
    tessera::convert::capabilities(f).map_or(MetadataSupport::Tree, |c| c.metadata)
}

/// The metadata comparison.
#[derive(Default)]
struct MetaDiff<'a> {
    added: Vec<&'a str>,
    removed: Vec<&'a str>,
    changed: Vec<&'a str>,
    values: Vec<(&'a str, Option<Value>, Option<Value>)>,
    not_compared: Vec<(&'a str, &'static str, String)>,
}

impl MetaDiff<'_> {
    fn same(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

fn compare_metadata<'a>(a: &'a dyn Container, b: &'a dyn Container) -> MetaDiff<'a> {
    let (ma, mb) = (a.metadata(), b.metadata());
    let (la, lb) = (metadata_level(a.format()), metadata_level(b.format()));
    let mut d = MetaDiff::default();
    if la == MetadataSupport::None || lb == MetadataSupport::None {
        let none = if la == MetadataSupport::None { a } else { b };
        let reason = format!("{} carries no metadata", none.format().title());
        for k in ma.keys() {
            d.not_compared.push((k, "a", reason.clone()));
        }
        for k in mb.keys() {
            d.not_compared.push((k, "b", reason.clone()));
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
    let types = tessera::formats::gguf::meta::TYPES_KEY;
    let types_in = |m: &Metadata, other: &Option<Value>, mine: &Option<Value>| {
        other.is_some() && mine.is_none() && m.contains_key(types)
    };
    if types_in(mb, &ta, &tb) || types_in(ma, &tb, &ta) {
        let x = ta.as_ref().or(ma.get(types));
        let y = tb.as_ref().or(mb.get(types));
        if let (Some(x), Some(y)) = (x, y) {
            if !equal(x, y) {
                d.changed.push(types);
                d.values.push((types, Some(x.clone()), Some(y.clone())));
            }
        }
    }
    let skip = |k: &str| k == types && (ta.is_some() || tb.is_some());
    for (k, x) in ma.iter().filter(|(k, _)| !skip(k)) {
        match mb.get(k) {
            None => {
                d.removed.push(k);
                d.values.push((k, Some(x.clone()), None));
            }
            Some(y) if !equal(x, y) => {
                d.changed.push(k);
                d.values.push((k, Some(x.clone()), Some(y.clone())));
            }
            Some(_) => {}
        }
    }
    for (k, y) in mb.iter().filter(|(k, _)| !skip(k)) {
        if !ma.contains_key(k) {
            d.added.push(k);
            d.values.push((k, None, Some(y.clone())));
        }
    }
    d
}

/// A metadata value on one line, cut at 80 characters.
fn short(v: &Value) -> String {
    let s = v.display_short();
    match s.char_indices().nth(80) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s,
    }
}

/// Runs the verb.
pub fn run(args: &DiffArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    for (flag, x) in [("--atol", args.atol), ("--rtol", args.rtol)] {
        if !(x.is_finite() && x >= 0.0) {
            return Err(anyhow::Error::new(tessera::Error::invalid_input(format!(
                "{flag} must be a finite number >= 0, not {x}"
            ))));
        }
    }
    let tol = Tolerance {
        atol: args.atol,
        rtol: args.rtol,
    };
    with_file(&args.a, &args.read, |a| {
        with_file(&args.b, &args.read, |b| {
            let names_a: Vec<&str> = a.tensor_infos().iter().map(|t| t.name.as_str()).collect();
            let names_b: Vec<&str> = b.tensor_infos().iter().map(|t| t.name.as_str()).collect();
            let removed: Vec<&str> = names_a
                .iter()
                .copied()
                .filter(|n| !names_b.contains(n))
                .collect();
            let added: Vec<&str> = names_b
                .iter()
                .copied()
                .filter(|n| !names_a.contains(n))
                .collect();
            let mut changed = Vec::new();
            let mut close = Vec::new();
            let total = a
                .tensor_infos()
                .iter()
                .map(|t| t.dense_nbytes().unwrap_or(0))
                .sum();
            let progress = Progress::new(total, "comparing");
            for (n, info) in names_a.iter().zip(a.tensor_infos()) {
                progress.inc(info.dense_nbytes().unwrap_or(0));
                if !names_b.contains(n) {
                    continue;
                }
                if let Some(d) = compare(a, b, n, &tol)? {
                    if d.within_tolerance() {
                        close.push(d);
                    } else {
                        changed.push(d);
                    }
                }
            }
            progress.finish();
            let meta = compare_metadata(a, b);
            let tensors_same = removed.is_empty() && added.is_empty() && changed.is_empty();
            let metadata_same = meta.same();
            let same = tensors_same && metadata_same;
            if args.json {
                let values: serde_json::Map<String, serde_json::Value> = meta
                    .values
                    .iter()
                    .map(|(k, x, y)| {
                        (
                            k.to_string(),
                            json!([
                                x.as_ref().map(Value::to_json),
                                y.as_ref().map(Value::to_json)
                            ]),
                        )
                    })
                    .collect();
                let doc = json!({
                    "a": args.a.display().to_string(),
                    "b": args.b.display().to_string(),
                    "same": same,
                    "tensors_same": tensors_same,
                    "metadata_same": metadata_same,
                    "tolerance": {"atol": tol.atol, "rtol": tol.rtol},
                    "added": added,
                    "removed": removed,
                    "changed": changed.iter().map(TensorDiff::json).collect::<Vec<_>>(),
                    "within_tolerance": close.iter().map(TensorDiff::json).collect::<Vec<_>>(),
                    "metadata": {
                        "added": meta.added,
                        "removed": meta.removed,
                        "changed": meta.changed,
                        "values": values,
                        "not_compared": meta.not_compared.iter().map(|(k, side, why)| json!({
                            "key": k, "in": side, "reason": why,
                        })).collect::<Vec<_>>(),
                    },
                });
                writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
            } else {
                for n in &removed {
                    writeln!(out, "- {}", escape(n))?;
                }
                for n in &added {
                    writeln!(out, "+ {}", escape(n))?;
                }
                for d in &changed {
                    writeln!(out, "~ {}: {}", escape(&d.name), d.text())?;
                }
                for d in &close {
                    if let Some(v) = &d.values {
                        writeln!(
                            out,
                            "= {}: equal within --atol {} --rtol {} ({})",
                            escape(&d.name),
                            tol.atol,
                            tol.rtol,
                            TensorDiff::errors(v)
                        )?;
                    }
                }
                for (k, x, y) in &meta.values {
                    match (x, y) {
                        (Some(x), None) => {
                            writeln!(out, "- metadata {} = {}", escape(k), escape(&short(x)))?
                        }
                        (None, Some(y)) => {
                            writeln!(out, "+ metadata {} = {}", escape(k), escape(&short(y)))?
                        }
                        (Some(x), Some(y)) => writeln!(
                            out,
                            "~ metadata {}: {} -> {}",
                            escape(k),
                            escape(&short(x)),
                            escape(&short(y))
                        )?,
                        (None, None) => {}
                    }
                }
                if !meta.not_compared.is_empty() {
                    let (side, why) = (meta.not_compared[0].1, &meta.not_compared[0].2);
                    writeln!(
                        out,
                        "not compared: {} metadata key{} of {side} ({why})",
                        meta.not_compared.len(),
                        if meta.not_compared.len() == 1 {
                            ""
                        } else {
                            "s"
                        },
                    )?;
                }
                if same {
                    writeln!(out, "no differences in {} tensors", names_a.len())?;
                }
            }
            Ok(if same { 0 } else { 1 })
        })
    })
}
