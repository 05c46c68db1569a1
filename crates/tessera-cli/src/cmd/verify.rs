//! `tessera verify FILE [--json]`: every integrity layer, each reported per tensor or
//! chunk. Exit 0 when nothing failed, 1 when a check failed.
//!
//! JSON shape: `{"file", "format", "ok", "checks": [{"subject", "layer", "status",
//! "detail"}], "warnings": [..]}` with `status` one of `ok`, `failed`, `not checked`,
//! `unauthenticated`, `repaired`.

use std::io::Write;

use anyhow::Context;
use serde_json::json;
use tessera::{Status, VerifyOptions};

use crate::cli::VerifyArgs;
use crate::output::{with_file_audit, Spinner};
use crate::term::escape;

/// Runs the verb.
pub fn run(args: &VerifyArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let mut opts = VerifyOptions {
        control_only: args.control,
        tensors: args.tensor.clone(),
        path: Some(args.file.clone()),
        ..VerifyOptions::default()
    };
    if let Some(p) = &args.hmac_key_file {
        opts.hmac_key =
            Some(std::fs::read(p).with_context(|| format!("reading HMAC key {}", p.display()))?);
    }
    if let Some(p) = &args.public_key {
        opts.public_key = Some(crate::cmd::keys::load_public_key(p)?);
    }
    with_file_audit(&args.file, &args.read, |file| {
        let spinner = Spinner::new(&format!("verifying {}", args.file.display()));
        let report = file.verify(&opts);
        spinner.finish();
        let ok = report.is_ok();
        if args.json {
            let doc = json!({
                "file": args.file.display().to_string(),
                "format": file.format().name(),
                "ok": ok,
                "checks": report.checks.iter().map(|c| json!({
                    "subject": c.subject,
                    "layer": c.layer,
                    "status": c.status.name(),
                    "detail": c.detail,
                })).collect::<Vec<_>>(),
                "warnings": report.warnings,
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        } else {
            for c in &report.checks {
                let mark = match c.status {
                    Status::Ok => "ok",
                    Status::Failed => "FAILED",
                    Status::NotChecked => "not checked",
                    Status::Unauthenticated => "unauthenticated",
                    Status::Repaired => "REPAIRED",
                };
                match &c.detail {
                    Some(d) => writeln!(
                        out,
                        "{:<16} {:<28} {}: {}",
                        mark,
                        escape(&c.subject),
                        escape(&c.layer),
                        escape(d)
                    )?,
                    None => writeln!(
                        out,
                        "{:<16} {:<28} {}",
                        mark,
                        escape(&c.subject),
                        escape(&c.layer)
                    )?,
                }
            }
            for w in &report.warnings {
                writeln!(out, "warning: {}", escape(w))?;
            }
            let failed = report.failures().count();
            if ok {
                writeln!(
                    out,
                    "{}: ok ({} checks, {})",
                    args.file.display(),
                    report.checks.len(),
                    file.format().title()
                )?;
            } else {
                writeln!(
                    out,
                    "{}: {failed} of {} checks FAILED",
                    args.file.display(),
                    report.checks.len()
                )?;
            }
        }
        Ok(if ok { 0 } else { 1 })
    })
}
