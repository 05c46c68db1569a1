//! `tessera stats FILE|SET [--json] [--filter GLOB]`: per tensor its dtype, shape, min,
//! max, mean, std, and counts of NaN, +Inf, -Inf and zeros: what an engineer opens a
//! checkpoint to see when training went wrong.
//!
//! Values are decoded (f32/f16/bf16/fp8, integers, bool as 0/1; a complex number's real
//! part), never read as bytes; min, max, mean and std are over the finite elements, std
//! is numpy's (`ddof=0`). Sparse tensors are densified first. GGUF's quantized blocks
//! are decoded with `--dequantize f32|f16|bf16` (as `convert --dequantize`, through
//! `tessera::values::dequantize`); without it such a tensor is listed as not computed,
//! with the reason, and the summary counts them and names the flag. One tensor is read at a time (zero-copy when stored raw)
//! and its blocks are summed in parallel, so memory stays near the largest tensor.
//! Reads check the file's digests as every reading verb does.
//!
//! Exit 0 (NaN and Inf are reported, not failures: `verify --values` fails on them).
//!
//! `--plot OUT.svg` also counts each tensor's finite values into 40 bins over its
//! [min, max] (numpy's `histogram` rule; one more pass over the tensor) and draws them
//! (`stats_plot.rs`); with `--json` each tensor then carries `"histogram": {"edges",
//! "counts"}`. Another extension than `.svg` is refused before anything is read.
//!
//! The table ends with a sparkline of each tensor's finite values: the same 40 bins,
//! two to a character, each drawn as one of eight block heights relative to the
//! fullest (a blank for an empty pair, the lowest block for any non-empty one).
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

/// A tensor's statistics and, when asked, its histogram (edges, counts).
type Computed = (Stats, Option<(Vec<f64>, Vec<u64>)>);

/// The statistics of one tensor, or why they were not computed.
pub fn tensor_stats(
    file: &dyn Container,
    info: &TensorInfo,
) -> anyhow::Result<Result<Stats, String>> {
    Ok(tensor_stats_hist(file, info, false, None)?.map(|(s, _)| s))
}

/// Why a quantized tensor's statistics were not computed (the text summary counts them).
const NEEDS_DEQUANTIZE: &str = "blocks are not decoded without --dequantize f32|f16|bf16";

/// [`tensor_stats`], with the histogram when `hist`; GGUF's quantized tensors are
/// decoded to `dequantize` when given (`tessera::values::dequantize`).
fn tensor_stats_hist(
    file: &dyn Container,
    info: &TensorInfo,
    hist: bool,
    dequantize: Option<tessera::DType>,
) -> anyhow::Result<Result<Computed, String>> {
    let quantized = tessera::values::is_quantized(info);
    match &info.layout {
        Layout::Dense | Layout::SparseCsr | Layout::SparseCoo => {}
        Layout::Other(_) if quantized && dequantize.is_some() => {}
        Layout::Other(l) => {
            return Ok(Err(match l.strip_prefix("ggml_") {
                Some(q) => format!("{q} {NEEDS_DEQUANTIZE}"),
                None => format!("layout {l} is not decoded"),
            }))
        }
        other => return Ok(Err(format!("layout {} is not decoded", other.name()))),
    }
    let view = file.tensor(&info.name)?;
    let view = match (&view.info.layout, dequantize) {
        (Layout::SparseCsr | Layout::SparseCoo, _) => tessera::sparse::densify(view)?,
        (Layout::Other(_), Some(to)) => tessera::values::dequantize(view, to)?,
        _ => view,
    };
    // Packed sub-byte floats as f32 (exact): their element count, not their bytes'.
    let view = match view.info.dtype.is_packed() && view.info.layout == Layout::Dense {
        true => tessera::cast::cast_view(view, tessera::DType::F32)?,
        false => view,
    };
    let (dtype, data) = (view.info.dtype, view.data()?);
    let stats = Stats::of(dtype, data);
    let h = match (hist, stats.min, stats.max) {
        (true, Some(lo), Some(hi)) => {
            let edges = tessera::values::histogram_edges(lo, hi, crate::cmd::stats_plot::BINS);
            let counts = tessera::values::histogram(dtype, data, &edges);
            Some((edges, counts))
        }
        _ => None,
    };
    Ok(Ok((stats, h)))
}

/// A terminal sparkline of histogram `counts`: two bins to a character, eight block
/// heights relative to the fullest pair, a blank for an empty pair.
pub fn sparkline(counts: &[u64]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let pairs: Vec<u64> = counts.chunks(2).map(|c| c.iter().sum()).collect();
    let max = pairs.iter().copied().max().unwrap_or(0);
    pairs
        .iter()
        .map(|&c| match c {
            0 => ' ',
            _ => BARS[((c as f64 / max as f64) * 7.0).round().clamp(0.0, 7.0) as usize],
        })
        .collect()
}

/// Six significant figures, in exponent form when large or small (`%g`).
fn num(x: Option<f64>) -> String {
    match x {
        Some(v) => crate::output::readable(v, 6),
        None => "-".into(),
    }
}

/// Runs the verb.
pub fn run(args: &StatsArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    if let Some(p) = &args.plot {
        if p.extension().and_then(|e| e.to_str()) != Some("svg") {
            anyhow::bail!(
                "--plot writes SVG: name the output *.svg (not {})",
                p.display()
            );
        }
    }
    let dequantize = crate::cmd::extract::dequantize_dtype(args.dequantize.as_deref())?;
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
            // The histogram feeds --plot, and the text table's sparkline.
            let hist = args.plot.is_some() || !args.json;
            rows.push((*info, tensor_stats_hist(file, info, hist, dequantize)?));
            progress.inc(info.dense_nbytes().unwrap_or(0));
        }
        progress.finish();
        if let Some(path) = &args.plot {
            let panels: Vec<crate::cmd::stats_plot::Panel> = rows
                .iter()
                .filter_map(|(info, r)| {
                    let (edges, counts) = r.as_ref().ok()?.1.clone()?;
                    Some(crate::cmd::stats_plot::Panel {
                        name: info.name.clone(),
                        edges,
                        counts,
                    })
                })
                .collect();
            let doc = crate::cmd::stats_plot::svg(&crate::output::shown(&args.file), &panels);
            tessera::util::atomic::write_atomic(path, |w| {
                Ok(std::io::Write::write_all(w, doc.as_bytes())?)
            })
            .map_err(anyhow::Error::new)?;
        }
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
                    if let (Ok((s, h)), Some(obj)) = (s, doc.as_object_mut()) {
                        if let Some((edges, counts)) = h {
                            obj.insert(
                                "histogram".into(),
                                json!({"edges": edges, "counts": counts}),
                            );
                        }
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
                "file": crate::output::shown(&args.file),
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
            "{:<width$} {:<8} {:<16} {:>12} {:>12} {:>12} {:>12} {:>6} {:>6} {:>6} {:>8}  min..max",
            "name", "dtype", "shape", "min", "max", "mean", "std", "nan", "+inf", "-inf", "zeros",
        )?;
        let mut bad = Vec::new();
        for (info, s) in &rows {
            let name = escape(&info.name);
            let shape = format!("{:?}", info.shape);
            match s {
                Ok((s, h)) => {
                    let spark = h.as_ref().map(|(_, c)| sparkline(c)).unwrap_or_default();
                    if s.non_finite() > 0 {
                        bad.push(name.clone().into_owned());
                    }
                    writeln!(
                        out,
                        "{name:<width$} {:<8} {shape:<16} {:>12} {:>12} {:>12} {:>12} {:>6} {:>6} {:>6} {:>8}  {spark}",
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
        let mut summary = crate::output::count(n, "tensor");
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
        let packed = rows
            .iter()
            .filter(|(_, r)| r.as_ref().is_err_and(|why| why.ends_with(NEEDS_DEQUANTIZE)))
            .count();
        if packed > 0 {
            writeln!(
                out,
                "not computed: {} quantized (GGUF blocks); --dequantize f32 decodes them",
                crate::output::count(packed, "tensor")
            )?;
        }
        Ok(0)
    })
}
