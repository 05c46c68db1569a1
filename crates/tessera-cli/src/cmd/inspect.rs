//! `tessera inspect FILE [--json]`.
//!
//! `dtype` is the element type as users know it: a GGUF packed tensor shows its ggml
//! type (`q8_0`, `q4_k`, …) with its logical shape; `storage_dtype` is the type of the
//! stored bytes (`u8` there, the dtype otherwise).
//!
//! JSON shape:
//! `{"file", "format", "title", "version", "tensors": [{"name", "dtype", "storage_dtype",
//! "shape", "layout", "stored_bytes", "encoding", "offset", "digests", "attrs"}],
//! "metadata": {…},
//! "chunks": [{"name", "kind", "len", "stored_bytes", "encoding", "offset"}],
//! "warnings": [..]}`, plus `"metadata_types"` (key → GGUF value type) for a GGUF file
//! whose types our writer would not infer.

use std::io::Write;

use serde_json::json;
use tessera::{ChunkInfo, Container, TensorInfo, Value};

use crate::cli::InspectArgs;
use crate::output::{human_bytes, with_file_audit};
use crate::term::escape;

/// JSON for one tensor description.
pub fn tensor_json(t: &TensorInfo) -> serde_json::Value {
    json!({
        "name": t.name,
        "dtype": t.dtype_label(),
        "storage_dtype": t.dtype.name(),
        "shape": t.shape,
        "layout": t.layout.name(),
        "stored_bytes": t.storage.stored_bytes,
        "encoding": t.storage.encoding,
        "offset": t.storage.offset,
        "digests": t.storage.digests,
        "attrs": Value::Map(t.attrs.clone()).to_json(),
    })
}

/// JSON for one chunk description.
pub fn chunk_json(c: &ChunkInfo) -> serde_json::Value {
    json!({
        "name": c.name,
        "kind": c.kind,
        "len": c.len,
        "stored_bytes": c.storage.stored_bytes,
        "encoding": c.storage.encoding,
        "offset": c.storage.offset,
        "holds_tensors": c.holds_tensors,
    })
}

/// The whole inspect document.
pub fn inspect_json(file: &dyn Container, path: &str) -> serde_json::Value {
    let mut doc = json!({
        "file": path,
        "format": file.format().name(),
        "title": file.format().title(),
        "version": file.version(),
        "tensors": file.tensor_infos().iter().map(tensor_json).collect::<Vec<_>>(),
        "metadata": Value::Map(file.metadata().clone()).to_json(),
        "chunks": file.chunks().iter().map(chunk_json).collect::<Vec<_>>(),
        "warnings": file.warnings(),
    });
    // GGUF's value types (key -> `u32`, `[str]`, …), beside the metadata.
    if let (Some(t), Some(obj)) = (file.metadata_types(), doc.as_object_mut()) {
        obj.insert("metadata_types".into(), Value::Map(t.clone()).to_json());
    }
    doc
}

/// Runs the verb.
pub fn run(args: &InspectArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    with_file_audit(&args.file, &args.read, |file| {
        if args.json {
            let doc = inspect_json(file, &args.file.display().to_string());
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
            return Ok(0);
        }
        let infos = file.tensor_infos();
        writeln!(
            out,
            "{}: {} (version {}), {} tensors, {} chunks",
            args.file.display(),
            file.format().title(),
            file.version(),
            infos.len(),
            file.chunks().len()
        )?;
        let width = infos
            .iter()
            .map(|t| t.name.len())
            .max()
            .unwrap_or(4)
            .clamp(4, 48);
        for t in infos {
            let shape = format!("{:?}", t.shape);
            let mut line = format!(
                "  {:<width$}  {:<9} {:<16} {:<10} {:>10}",
                escape(&t.name),
                t.dtype_label(),
                shape,
                t.layout.name(),
                human_bytes(t.storage.stored_bytes),
            );
            if !t.storage.encoding.is_empty() {
                line.push_str(&format!("  {}", escape(&t.storage.encoding)));
            }
            if !t.storage.digests.is_empty() {
                line.push_str(&format!("  [{}]", escape(&t.storage.digests.join(", "))));
            }
            if !t.attrs.is_empty() {
                line.push_str(&format!(
                    "  {}",
                    escape(&Value::Map(t.attrs.clone()).to_string())
                ));
            }
            writeln!(out, "{line}")?;
        }
        if !file.metadata().is_empty() {
            writeln!(out, "metadata:")?;
            for (k, v) in file.metadata().iter() {
                let mut s = v.display_short();
                if s.len() > 120 {
                    let cut = (0..=117)
                        .rev()
                        .find(|&i| s.is_char_boundary(i))
                        .unwrap_or(0);
                    s.truncate(cut);
                    s.push_str("...");
                }
                writeln!(out, "  {}: {}", escape(k), escape(&s))?;
            }
        }
        if !file.chunks().is_empty() {
            writeln!(out, "chunks:")?;
            // Tensors stored inside each chunk's byte range (an AERO shard, …), when the
            // format gives tensor offsets.
            let inside: Vec<usize> = file
                .chunks()
                .iter()
                .map(|c| {
                    c.storage.offset.map_or(0, |o| {
                        let end = o.saturating_add(c.storage.stored_bytes);
                        infos
                            .iter()
                            .filter(|t| t.storage.offset.is_some_and(|t| t >= o && t < end))
                            .count()
                    })
                })
                .collect();
            let located = inside.iter().any(|&n| n > 0);
            for (c, &inside) in file.chunks().iter().zip(&inside) {
                let label = match inside {
                    0 if c.holds_tensors && !located => "  (tensors)".to_string(),
                    0 => String::new(),
                    1 => "  (1 tensor)".to_string(),
                    n => format!("  ({n} tensors)"),
                };
                writeln!(
                    out,
                    "  {:<24} {:<6} {:>10}  {}{label}",
                    escape(&c.name),
                    escape(&c.kind),
                    human_bytes(c.len.unwrap_or(c.storage.stored_bytes)),
                    escape(&c.storage.encoding),
                )?;
            }
        }
        for w in file.warnings() {
            writeln!(out, "warning: {}", escape(&w))?;
        }
        Ok(0)
    })
}
