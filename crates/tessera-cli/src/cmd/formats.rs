//! `tessera formats [--json|--markdown]`: the capability table.

use std::io::Write;

use serde_json::json;
use tessera::convert::{capabilities, MetadataSupport};
use tessera::Format;

use crate::cli::FormatsArgs;

/// The formats the table lists: those of the registry that hold tensors (not side files,
/// envelopes or deltas), in registry order.
pub fn listed() -> Vec<Format> {
    Format::ALL
        .into_iter()
        .filter(|f| f.identity().listed)
        .collect()
}

fn meta_name(m: MetadataSupport) -> &'static str {
    m.name()
}

/// One row per format, as JSON.
pub fn table() -> Vec<serde_json::Value> {
    listed()
        .into_iter()
        .map(|f| {
            let caps = capabilities(f);
            json!({
                "format": f.name(),
                "title": f.title(),
                "extensions": f.extensions(),
                // A format read and written as a directory through its own index (DCP's
                // `.metadata`) has no one-file reader or writer, but is read and written.
                "read": f.can_read() || f.codec().indexed_set.is_some(),
                "write": f.can_write() || f.codec().indexed_set.is_some(),
                "dtypes": caps.as_ref().map(|c| c.dtypes.iter().map(|d| d.name()).collect::<Vec<_>>()).unwrap_or_default(),
                "layouts": caps.as_ref().map(|c| {
                    let mut l = vec!["dense"];
                    if c.sparse { l.extend(["sparse_csr", "sparse_coo"]); }
                    if c.other_layouts { l.push("components"); }
                    l
                }).unwrap_or_default(),
                "compression": caps.as_ref().map(|c| c.compression.to_vec()).unwrap_or_default(),
                "integrity": caps.as_ref().map(|c| c.integrity.to_vec()).unwrap_or_default(),
                "zero_copy": caps.as_ref().is_some_and(|c| c.zero_copy),
                "metadata": caps.as_ref().map(|c| meta_name(c.metadata)).unwrap_or("none"),
                "chunks": caps.as_ref().is_some_and(|c| c.chunks),
                "options": f.codec().options.iter().map(|o| o.name).collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// The Markdown table (the README carries its output).
pub fn markdown() -> String {
    let mut s = String::from(
        "| format | extensions | read | write | dtypes | layouts | compression | integrity | zero-copy | metadata | chunks |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let yes = |b: bool| if b { "yes" } else { "—" };
    for row in table() {
        let list = |k: &str| {
            row[k]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default()
        };
        let dtypes = row["dtypes"].as_array().map(|a| a.len()).unwrap_or(0);
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            row["title"].as_str().unwrap_or(""),
            list("extensions"),
            yes(row["read"].as_bool().unwrap_or(false)),
            yes(row["write"].as_bool().unwrap_or(false)),
            if dtypes == 0 {
                "—".to_string()
            } else if dtypes >= tessera::DType::ALL.len() {
                "all".to_string()
            } else {
                list("dtypes")
            },
            {
                let l = list("layouts");
                if l.is_empty() {
                    "—".into()
                } else {
                    l
                }
            },
            {
                let c = list("compression");
                if c.is_empty() {
                    "—".into()
                } else {
                    c
                }
            },
            {
                let c = list("integrity");
                if c.is_empty() {
                    "—".into()
                } else {
                    c
                }
            },
            yes(row["zero_copy"].as_bool().unwrap_or(false)),
            row["metadata"].as_str().unwrap_or(""),
            yes(row["chunks"].as_bool().unwrap_or(false)),
        ));
    }
    s
}

/// Runs the verb.
pub fn run(args: &FormatsArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    if args.options {
        for f in listed().into_iter().filter(|f| f.can_write()) {
            let opts = f.codec().options;
            if opts.is_empty() {
                writeln!(out, "{}: no options", f.name())?;
                continue;
            }
            writeln!(out, "{}:", f.name())?;
            for o in opts {
                let aliases = if o.aliases.is_empty() {
                    String::new()
                } else {
                    format!(" (also --{})", o.aliases.join(", --").replace('_', "-"))
                };
                writeln!(
                    out,
                    "  {:<18} {:<28} {}{aliases}",
                    o.name,
                    o.kind.describe(),
                    o.help
                )?;
            }
        }
    } else if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&table())?)?;
    } else if args.markdown {
        write!(out, "{}", markdown())?;
    } else {
        for row in table() {
            writeln!(
                out,
                "{:<12} {:<28} read {:<3} write {:<3} {}",
                row["format"].as_str().unwrap_or(""),
                row["title"].as_str().unwrap_or(""),
                if row["read"].as_bool().unwrap_or(false) {
                    "yes"
                } else {
                    "no"
                },
                if row["write"].as_bool().unwrap_or(false) {
                    "yes"
                } else {
                    "no"
                },
                row["integrity"]
                    .as_array()
                    .map(|a| a
                        .iter()
                        .filter_map(|v| v.as_str())
                        .collect::<Vec<_>>()
                        .join(", "))
                    .unwrap_or_default(),
            )?;
        }
    }
    Ok(0)
}
