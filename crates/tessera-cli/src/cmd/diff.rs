//! `tessera diff A B [--json] [--atol X --rtol Y]`: renders `tessera::diff::diff`'s
//! report (the comparison itself lives in the library, crates/tessera/src/diff.rs):
//! tensors added, removed, or changed
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
use tessera::diff::{DiffOptions, TensorDiff};
use tessera::values::ValueDiff;
use tessera::Value;

use crate::cli::DiffArgs;
use crate::output::{with_file, Progress};
use crate::term::escape;

fn tensor_json(d: &TensorDiff) -> serde_json::Value {
    let v = d.values.as_ref();
    json!({
        "name": d.name,
        "dtype": d.dtype.as_ref().map(|(x, y)| [x, y]),
        "shape": d.shape.as_ref().map(|(x, y)| json!([x, y])),
        "layout": d.layout.as_ref().map(|(x, y)| [x, y]),
        "bytes_equal": d.bytes_equal,
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

fn tensor_text(d: &TensorDiff) -> String {
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
    match &d.values {
        Some(v) if v.differing > 0 => {
            parts.push(format!(
                "{} of {} elements differ, {}",
                v.differing,
                v.compared,
                errors(v)
            ));
            if v.nonfinite_mismatches > 0 {
                parts.push(format!("{} NaN/Inf mismatches", v.nonfinite_mismatches));
            }
        }
        Some(_) => {}
        None if !d.bytes_equal => parts.push("bytes differ".into()),
        None => {}
    }
    parts.join(", ")
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
    let opts = DiffOptions::new().atol(args.atol).rtol(args.rtol);
    with_file(&args.a, &args.read, |a| {
        with_file(&args.b, &args.read, |b| {
            let total = a
                .tensor_infos()
                .iter()
                .map(|t| t.dense_nbytes().unwrap_or(0))
                .sum();
            let progress = Progress::new(total, "comparing");
            let report = tessera::diff::diff_with_progress(a, b, &opts, &mut |n| progress.inc(n))?;
            progress.finish();
            let (tol, meta) = (&report.tolerance, &report.metadata);
            let same = report.same();
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
                    "a": crate::output::shown(&args.a),
                    "b": crate::output::shown(&args.b),
                    "same": same,
                    "tensors_same": report.tensors_same(),
                    "metadata_same": report.metadata_same(),
                    "tolerance": {"atol": tol.atol, "rtol": tol.rtol},
                    "added": report.added,
                    "removed": report.removed,
                    "changed": report.changed.iter().map(tensor_json).collect::<Vec<_>>(),
                    "within_tolerance": report.within_tolerance.iter().map(tensor_json).collect::<Vec<_>>(),
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
                for n in &report.removed {
                    writeln!(out, "- {}", escape(n))?;
                }
                for n in &report.added {
                    writeln!(out, "+ {}", escape(n))?;
                }
                for d in &report.changed {
                    writeln!(out, "~ {}: {}", escape(&d.name), tensor_text(d))?;
                }
                for d in &report.within_tolerance {
                    if let Some(v) = &d.values {
                        writeln!(
                            out,
                            "= {}: equal within --atol {} --rtol {} ({})",
                            escape(&d.name),
                            tol.atol,
                            tol.rtol,
                            errors(v)
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
                    writeln!(out, "no differences in {} tensors", report.tensors_in_a)?;
                }
            }
            Ok(if same { 0 } else { 1 })
        })
    })
}
