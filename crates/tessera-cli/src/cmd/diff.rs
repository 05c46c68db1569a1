//! `tessera diff A B [--json]`: tensors added, removed, or changed (dtype, shape,
//! layout, bytes, and for numeric tensors the largest absolute difference), and metadata
//! keys added, removed or changed. Works across formats: sparse tensors are compared by
//! their dense values, so the same model in two formats has no differences.
//!
//! Exit 0 when the tensors are the same (and, for two files of one format, the
//! metadata too), 1 when they differ.
//!
//! JSON shape: `{"a", "b", "same", "tensors_same", "metadata_same", "added": [names],
//! "removed": [names], "changed": [{"name", "dtype": [a, b]|null, "shape": [a, b]|null,
//! "layout": [a, b]|null, "bytes_equal", "elements_differing", "max_abs_diff"}],
//! "metadata": {"added": [keys], "removed": [keys], "changed": [keys]}}`

use std::io::Write;

use serde_json::json;
use tessera::{Container, Layout, TensorView};

use crate::cli::DiffArgs;
use crate::output::with_file;
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
    /// Elements that differ, when shapes agree.
    pub elements_differing: Option<u64>,
    /// max |a - b| over elements, when shapes agree and both are numeric.
    pub max_abs_diff: Option<f64>,
}

fn dense<'a>(v: TensorView<'a>) -> anyhow::Result<TensorView<'a>> {
    Ok(match v.info.layout {
        Layout::SparseCsr | Layout::SparseCoo => tessera::sparse::densify(v)?,
        _ => v,
    })
}

fn compare(a: &dyn Container, b: &dyn Container, name: &str) -> anyhow::Result<Option<TensorDiff>> {
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
        let (da, db) = (va.info.dtype, vb.info.dtype);
        let (ba, bb) = (va.data()?, vb.data()?);
        let n = ba.len() / da.size().max(1);
        let mut differing = 0u64;
        let mut max = 0f64;
        for i in 0..n {
            let (x, y) = (da.element_as_f64(ba, i), db.element_as_f64(bb, i));
            if let (Some(x), Some(y)) = (x, y) {
                let same = x == y || (x.is_nan() && y.is_nan());
                if !same {
                    differing += 1;
                    let diff = (x - y).abs();
                    if diff.is_nan() || diff > max {
                        max = if diff.is_nan() { f64::INFINITY } else { diff };
                    }
                }
            }
        }
        d.elements_differing = Some(differing);
        d.max_abs_diff = Some(max);
    }
    Ok(Some(d))
}

/// Runs the verb.
pub fn run(args: &DiffArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
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
            for n in names_a.iter().filter(|n| names_b.contains(n)) {
                if let Some(d) = compare(a, b, n)? {
                    changed.push(d);
                }
            }
            let (ma, mb) = (a.metadata(), b.metadata());
            let meta_removed: Vec<&str> = ma.keys().filter(|k| !mb.contains_key(k)).collect();
            let meta_added: Vec<&str> = mb.keys().filter(|k| !ma.contains_key(k)).collect();
            let meta_changed: Vec<&str> = ma
                .iter()
                .filter(|(k, v)| mb.get(k).is_some_and(|w| w != *v))
                .map(|(k, _)| k)
                .collect();
            let tensors_same = removed.is_empty() && added.is_empty() && changed.is_empty();
            let metadata_same =
                meta_removed.is_empty() && meta_added.is_empty() && meta_changed.is_empty();
            let same = tensors_same && (metadata_same || a.format() != b.format());
            if args.json {
                let doc = json!({
                    "a": args.a.display().to_string(),
                    "b": args.b.display().to_string(),
                    "same": same,
                    "tensors_same": tensors_same,
                    "metadata_same": metadata_same,
                    "added": added,
                    "removed": removed,
                    "changed": changed.iter().map(|d| json!({
                        "name": d.name,
                        "dtype": d.dtype.as_ref().map(|(x, y)| [x, y]),
                        "shape": d.shape.as_ref().map(|(x, y)| json!([x, y])),
                        "layout": d.layout.as_ref().map(|(x, y)| [x, y]),
                        "bytes_equal": d.bytes_equal,
                        "elements_differing": d.elements_differing,
                        "max_abs_diff": d.max_abs_diff,
                    })).collect::<Vec<_>>(),
                    "metadata": {"added": meta_added, "removed": meta_removed, "changed": meta_changed},
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
                    let mut parts = Vec::new();
                    if let Some((x, y)) = &d.dtype {
                        parts.push(format!("dtype {x} -> {y}"));
                    }
                    if let Some((x, y)) = &d.shape {
                        parts.push(format!("shape {x:?} -> {y:?}"));
                    }
                    if let Some((x, y)) = &d.layout {
                        parts.push(format!("layout {x} -> {y}"));
                    }
                    if let (Some(n), Some(m)) = (d.elements_differing, d.max_abs_diff) {
                        if n > 0 {
                            parts.push(format!("{n} elements differ, max abs diff {m}"));
                        }
                    } else if !d.bytes_equal {
                        parts.push("bytes differ".into());
                    }
                    writeln!(out, "~ {}: {}", escape(&d.name), parts.join(", "))?;
                }
                for k in &meta_removed {
                    writeln!(out, "- metadata {}", escape(k))?;
                }
                for k in &meta_added {
                    writeln!(out, "+ metadata {}", escape(k))?;
                }
                for k in &meta_changed {
                    writeln!(out, "~ metadata {}", escape(k))?;
                }
                if same {
                    writeln!(out, "no differences in {} tensors", names_a.len())?;
                }
            }
            Ok(if same { 0 } else { 1 })
        })
    })
}
