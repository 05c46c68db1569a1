//! `tessera inspect FILE [--json] [--filter GLOB]`.
//!
//! The first lines say what the file is and how much it holds: tensors, parameters
//! (logical elements) and stored bytes, then the same by dtype.
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
//! "totals": {"tensors", "parameters", "stored_bytes", "by_dtype": {dtype: {"tensors",
//! "parameters", "stored_bytes"}}}, "warnings": [..]}`, plus `"metadata_types"` (key → GGUF value type) for a GGUF file
//! whose types our writer would not infer.

use std::io::Write;

use serde_json::json;
use tessera::{ChunkInfo, Container, TensorInfo, Value};

use crate::cli::InspectArgs;
use crate::output::{human_bytes, with_opened_audit};
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

/// Tensors, parameters and stored bytes, in all and by dtype (in order of first use).
pub struct Totals {
    /// In all: tensors, parameters, stored bytes.
    pub all: (u64, u64, u64),
    /// Per dtype label, the same three.
    pub by_dtype: Vec<(String, (u64, u64, u64))>,
}

impl Totals {
    /// Sums over `infos`.
    pub fn of<'a>(infos: impl Iterator<Item = &'a TensorInfo>) -> Totals {
        let mut t = Totals {
            all: (0, 0, 0),
            by_dtype: Vec::new(),
        };
        // Tensors that share one stored range (a FOLD npz chunk) count its bytes once.
        let mut seen = std::collections::HashSet::new();
        for i in infos {
            let params = i.numel().unwrap_or(0);
            let shared = i
                .storage
                .offset
                .is_some_and(|o| !seen.insert((o, i.storage.stored_bytes)));
            let bytes = if shared { 0 } else { i.storage.stored_bytes };
            let add = |s: &mut (u64, u64, u64)| {
                s.0 += 1;
                s.1 = s.1.saturating_add(params);
                s.2 = s.2.saturating_add(bytes);
            };
            add(&mut t.all);
            let label = i.dtype_label();
            match t.by_dtype.iter_mut().find(|(d, _)| d == label) {
                Some((_, s)) => add(s),
                None => {
                    let mut s = (0, 0, 0);
                    add(&mut s);
                    t.by_dtype.push((label.to_string(), s));
                }
            }
        }
        t
    }
    fn json(&self) -> serde_json::Value {
        let entry =
            |s: &(u64, u64, u64)| json!({"tensors": s.0, "parameters": s.1, "stored_bytes": s.2});
        let mut by = serde_json::Map::new();
        for (d, s) in &self.by_dtype {
            by.insert(d.clone(), entry(s));
        }
        json!({"tensors": self.all.0, "parameters": self.all.1, "stored_bytes": self.all.2, "by_dtype": by})
    }
}

/// `n thing` / `n things`.
pub fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `1.2M`-style counts (parameters).
fn human_count(n: u64) -> String {
    match n {
        0..=9_999 => n.to_string(),
        10_000..=999_999 => format!("{:.1}K", n as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.1}M", n as f64 / 1e6),
        _ => format!("{:.2}B", n as f64 / 1e9),
    }
}

/// True when `name` matches the glob `pat` (`*`: any run, `?`: one character).
pub fn glob_match(pat: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pat.chars().collect(), name.chars().collect());
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// The whole inspect document, the tensors filtered by `filter` when given.
pub fn inspect_json(file: &dyn Container, path: &str) -> serde_json::Value {
    inspect_json_filtered(file, path, None)
}

/// [`inspect_json`] with a tensor-name glob.
pub fn inspect_json_filtered(
    file: &dyn Container,
    path: &str,
    filter: Option<&str>,
) -> serde_json::Value {
    let shown: Vec<&TensorInfo> = file
        .tensor_infos()
        .iter()
        .filter(|t| filter.is_none_or(|g| glob_match(g, &t.name)))
        .collect();
    let mut doc = json!({
        "file": path,
        "format": file.format().name(),
        "title": file.format().title(),
        "version": file.version(),
        "tensors": shown.iter().map(|t| tensor_json(t)).collect::<Vec<_>>(),
        "totals": Totals::of(shown.iter().copied()).json(),
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
///
/// A model set that a plain open refuses (a shard missing, a tensor not in the shard
/// the index names, …) is printed as far as it opened, its faults as warnings; the verb
/// then fails with the error `convert` or `load_file` would give (exit 1).
pub fn run(args: &InspectArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    with_opened_audit(&args.file, &args.read, |opened| {
        let code = print(args, opened.container(), out)?;
        match opened.as_set().and_then(tessera::set::ModelSet::refusal) {
            Some(e) => {
                out.flush()?;
                Err(anyhow::Error::new(e))
            }
            None => Ok(code),
        }
    })
}

fn print(args: &InspectArgs, file: &dyn Container, out: &mut dyn Write) -> anyhow::Result<u8> {
    {
        let filter = args.filter.as_deref();
        if args.json {
            let doc = inspect_json_filtered(file, &crate::output::shown(&args.file), filter);
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
            return Ok(0);
        }
        let all = file.tensor_infos();
        let infos: Vec<&TensorInfo> = all
            .iter()
            .filter(|t| filter.is_none_or(|g| glob_match(g, &t.name)))
            .collect();
        let version = file.version();
        let version = match version.trim() {
            "" | "-" => String::new(),
            v => format!(" (version {})", escape(v)),
        };
        let totals = Totals::of(infos.iter().copied());
        let (n, params, bytes) = totals.all;
        let count = match filter {
            Some(g) => format!("{} of {} match {:?}", n, all.len(), escape(g)),
            None => plural(n, "tensor", "tensors"),
        };
        let chunks = match file.chunks().len() {
            0 => String::new(),
            c => format!(", {}", plural(c as u64, "chunk", "chunks")),
        };
        writeln!(
            out,
            "{}: {}{version}, {count}{chunks}",
            crate::output::shown(&args.file),
            file.format().title(),
        )?;
        if n > 0 {
            let by: Vec<String> = totals
                .by_dtype
                .iter()
                .map(|(d, s)| match s.2 {
                    // Its tensors share stored bytes counted under another dtype.
                    0 if s.1 > 0 => format!(
                        "{d} {} (stored with others)",
                        plural(s.0, "tensor", "tensors")
                    ),
                    _ => format!(
                        "{d} {} ({})",
                        plural(s.0, "tensor", "tensors"),
                        human_bytes(s.2)
                    ),
                })
                .collect();
            writeln!(
                out,
                "  {} {}, {} stored: {}",
                human_count(params),
                if params == 1 {
                    "parameter"
                } else {
                    "parameters"
                },
                human_bytes(bytes),
                by.join(", ")
            )?;
        }
        let width = infos
            .iter()
            .map(|t| t.name.len())
            .max()
            .unwrap_or(4)
            .clamp(4, 48);
        for t in &infos {
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
                        all.iter()
                            .filter(|t| t.storage.offset.is_some_and(|t| t >= o && t < end))
                            .count()
                    })
                })
                .collect();
            let located = inside.iter().any(|&n| n > 0);
            // A chunk that is a tensor's own container (FOLD's STEN chunk "w" for tensor
            // "w", its npz chunk "a" for tensors "a/x", "a/y") repeats the tensors
            // listed above: counted, not listed again.
            let own = |c: &tessera::ChunkInfo| {
                c.holds_tensors
                    && all.iter().any(|t| {
                        t.name == c.name
                            || t.name
                                .strip_prefix(c.name.as_str())
                                .is_some_and(|r| r.starts_with('/'))
                    })
            };
            let mut kinds: Vec<&str> = Vec::new();
            let mut owned = 0u64;
            for c in file.chunks().iter().filter(|c| own(c)) {
                owned += 1;
                if !kinds.contains(&c.kind.as_str()) {
                    kinds.push(&c.kind);
                }
            }
            if owned > 0 {
                writeln!(
                    out,
                    "  ({} the tensors above: {})",
                    plural(owned, "chunk holds", "chunks hold"),
                    escape(&kinds.join(", "))
                )?;
            }
            for (c, &inside) in file.chunks().iter().zip(&inside) {
                if own(c) {
                    continue;
                }
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
    }
}
