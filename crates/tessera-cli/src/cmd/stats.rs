//! `tessera stats FILE|SET [--json] [--filter GLOB]`: per tensor its dtype, shape, min,
//! max, mean, std, and counts of NaN, +Inf, -Inf and zeros: what an engineer opens a
//! checkpoint to see when training went wrong.
//!
//! Values are decoded (f32/f16/bf16/fp8, integers, bool as 0/1; a complex number's real
//! part), never read as bytes; min, max, mean and std are over the finite elements, std
//! is numpy's (`ddof=0`). Sparse tensors are densified first. GGUF's quantized blocks
//! are not decoded here (`convert --dequantize` does): such a tensor is listed as not
//! computed, with the reason. One tensor is read at a time (zero-copy when stored raw)
//! and its blocks are summed in parallel, so memory stays near the largest tensor.
//! Reads check the file's digests as every reading verb does.
//!
//! Exit 0 (NaN and Inf are reported, not failures: `verify --values` fails on them).
//!
//! JSON shape: `{"file", "format", "tensors": [{"name", "dtype", "shape", "count",
//! "min", "max", "mean", "std", "nan", "pos_inf", "neg_inf", "zeros", "skipped"}]}`;
//! `min` … `std` are `null` when no element is finite, `skipped` (else `null`) says why a
//! tensor was not computed.

use std::io::Write;

use serde_json::json;
use tessera::values::Stats;
use tessera::{Container, Layout, TensorInfo};

use crate::cli::StatsArgs;
use crate::cmd::inspect::glob_match;
use crate::output::{with_file, Progress};
use crate::term::escape;

/// The statistics of one tensor, or why they were not computed.
pub fn tensor_stats(
    file: &dyn Container,
    info: &TensorInfo,
) -> anyhow::Result<Result<Stats, String>> {
    match &info.layout {
        Layout::Dense | Layout::SparseCsr | Layout::SparseCoo => {}
        Layout::Other(l) => {
            return Ok(Err(match l.strip_prefix("ggml_") {
                Some(q) => format!("{q} blocks are not decoded (convert --dequantize)"),
                None => format!("layout {l} is not decoded"),
            }))
        }
    }
    let view = file.tensor(&info.name)?;
    let view = match view.info.layout {
        Layout::SparseCsr | Layout::SparseCoo => tessera::sparse::densify(view)?,
        _ => view,
    };
    Ok(Ok(Stats::of(view.info.dtype, view.data()?)))
}

/// Six significant figures, in exponent form when large or small.
fn num(x: Option<f64>) -> String {
    match x {
        Some(v) if v != 0.0 && !(1e-4..1e6).contains(&v.abs()) => format!("{v:.5e}"),
        Some(v) => format!("{v:.6}"),
        None => "-".into(),
    }
}

/// Runs the verb.
pub fn run(args: &StatsArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    with_file(&args.file, &args.read, |file| {
        let filter = args.filter.as_deref();
        let infos: Vec<&TensorInfo> = file
            .tensor_infos()
            .iter()
            .filter(|t| filter.is_none_or(|g| glob_match(g, &t.name)))
            .collect();
        let mut rows = Vec::with_capacity(infos.len());
        let total = infos.iter().map(|t| t.dense_nbytes().unwrap_or(0)).sum();
        let progress = Progress::new(total, "computing");
        for info in &infos {
            rows.push((*info, tensor_stats(file, info)?));
            progress.inc(info.dense_nbytes().unwrap_or(0));
        }
        progress.finish();
        if args.json {
            let tensors: Vec<_> = rows
                .iter()
                .map(|(info, s)| {
                    let mut doc = json!({
                        "name": info.name,
                        "dtype": info.dtype_label(),
                        "shape": info.shape,
                        "skipped": s.as_ref().err(),
                    });
                    if let (Ok(s), Some(obj)) = (s, doc.as_object_mut()) {
                        for (k, v) in [
                            ("count", json!(s.count)),
                            ("min", json!(s.min)),
                            ("max", json!(s.max)),
                            ("mean", json!(s.mean())),
                            ("std", json!(s.std())),
                            ("nan", json!(s.nan)),
                            ("pos_inf", json!(s.pos_inf)),
                            ("neg_inf", json!(s.neg_inf)),
                            ("zeros", json!(s.zeros)),
                        ] {
                            obj.insert(k.into(), v);
                        }
                    }
                    doc
                })
                .collect();
            let doc = json!({
                "file": args.file.display().to_string(),
                "format": file.format().name(),
                "tensors": tensors,
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
            return Ok(0);
        }
        let width = rows
            .iter()
            .map(|(i, _)| escape(&i.name).chars().count())
            .max()
            .unwrap_or(4)
            .clamp(4, 48);
        writeln!(
            out,
            "{:<width$} {:<8} {:<16} {:>12} {:>12} {:>12} {:>12} {:>6} {:>6} {:>6} {:>8}",
            "name", "dtype", "shape", "min", "max", "mean", "std", "nan", "+inf", "-inf", "zeros"
        )?;
        let mut bad = Vec::new();
        for (info, s) in &rows {
            let name = escape(&info.name);
            let shape = format!("{:?}", info.shape);
            match s {
                Ok(s) => {
                    if s.non_finite() > 0 {
                        bad.push(name.clone().into_owned());
                    }
                    writeln!(
                        out,
                        "{name:<width$} {:<8} {shape:<16} {:>12} {:>12} {:>12} {:>12} {:>6} {:>6} {:>6} {:>8}",
                        info.dtype_label(),
                        num(s.min),
                        num(s.max),
                        num(s.mean()),
                        num(s.std()),
                        s.nan,
                        s.pos_inf,
                        s.neg_inf,
                        s.zeros
                    )?;
                }
                Err(why) => writeln!(
                    out,
                    "{name:<width$} {:<8} {shape:<16} not computed: {}",
                    info.dtype_label(),
                    escape(why)
                )?,
            }
        }
        let n = rows.len();
        let mut summary = format!("{n} tensor{}", if n == 1 { "" } else { "s" });
        if let Some(g) = filter {
            summary.push_str(&format!(" matching {:?}", escape(g)));
        }
        if bad.is_empty() {
            summary.push_str(", no NaN or Inf");
        } else {
            summary.push_str(&format!(
                ", NaN or Inf in {}: {}",
                bad.len(),
                bad.join(", ")
            ));
        }
        writeln!(out, "{summary}")?;
        Ok(0)
    })
}
