//! `tessera repair IN -o OUT [--json]`: restore the chunks of a FOLD file that their
//! Reed-Solomon parity can restore, rewrite parity that no longer matches its (intact)
//! payload, and write the result atomically to OUT. Nothing is written when a chunk is
//! beyond repair (exit 1).
//!
//! JSON shape: `{"file", "output", "ok", "written", "chunks": [{"name", "status",
//! "bytes_fixed", "blocks_fixed", "detail"}]}` with `status` one of `intact`,
//! `repaired`, `parity rewritten`, `unrecoverable`.

use std::io::Write;

use serde_json::json;
use tessera::formats::fold::FoldFile;
use tessera::{FileData, Format};

use crate::cli::RepairArgs;

/// Runs the verb.
pub fn run(args: &RepairArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let data = FileData::open(&args.input).map_err(anyhow::Error::new)?;
    let format = Format::detect_or_err(&data).map_err(anyhow::Error::new)?;
    if format != Format::Fold {
        return Err(tessera::Error::unsupported(format!(
            "repair: {} is {}; only FOLD files carry Reed-Solomon parity",
            crate::output::shown(&args.input),
            format.title()
        ))
        .into());
    }
    let opts = crate::output::read_options(&args.input, &Default::default())?;
    let file = FoldFile::parse(&data, &opts.limits).map_err(|e| {
        anyhow::Error::new(e.in_format(tessera::Format::Fold))
            .context(crate::output::shown(&args.input))
    })?;
    let plan = file.plan_repair().map_err(anyhow::Error::new)?;
    let complete = plan.is_complete();
    if complete {
        tessera::util::atomic::write_atomic(&args.output, |w| plan.write_repaired(&data, w))
            .map_err(anyhow::Error::new)?;
    }
    if args.json {
        let doc = json!({
            "file": crate::output::shown(&args.input),
            "output": args.output.display().to_string(),
            "ok": complete,
            "written": complete,
            "chunks": plan.chunks.iter().map(|c| json!({
                "name": c.name,
                "status": c.status,
                "bytes_fixed": c.bytes_fixed,
                "blocks_fixed": c.blocks_fixed,
                "detail": c.detail,
            })).collect::<Vec<_>>(),
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        for c in &plan.chunks {
            match (c.status, &c.detail) {
                ("repaired", _) => writeln!(
                    out,
                    "repaired          chunk {:?}: {} bytes fixed in {} blocks",
                    c.name, c.bytes_fixed, c.blocks_fixed
                )?,
                ("parity rewritten", _) => writeln!(
                    out,
                    "parity rewritten  chunk {:?}: {} parity bytes differed",
                    c.name, c.bytes_fixed
                )?,
                (s, Some(d)) => writeln!(out, "{:<17} chunk {:?}: {d}", s.to_uppercase(), c.name)?,
                (s, None) => writeln!(out, "{s:<17} chunk {:?}", c.name)?,
            }
        }
        if complete {
            let what = if plan.is_clean() {
                "nothing to repair; copied"
            } else {
                "repaired"
            };
            writeln!(
                out,
                "{}: {what} -> {}",
                crate::output::shown(&args.input),
                args.output.display()
            )?;
        } else {
            writeln!(
                out,
                "{}: damaged beyond repair; nothing written",
                crate::output::shown(&args.input)
            )?;
        }
    }
    Ok(if complete { 0 } else { 1 })
}
