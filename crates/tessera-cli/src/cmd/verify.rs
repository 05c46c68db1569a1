//! `tessera verify FILE [--json]`: every integrity layer, each reported per tensor or
//! chunk. Exit 0 when nothing failed, 1 when a check failed. With `--signature SIG
//! --public-key KEY.pub`, the tensors are also checked against a detached signed
//! manifest (`tessera sign`), whatever format they are in now.
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
    let key = match &args.public_key {
        Some(p) => Some(crate::cmd::keys::load_any_public_key(p)?),
        None => None,
    };
    if let Some(tessera::signing::key::PublicKey::Ed25519(k)) = &key {
        opts.public_key = Some(*k);
    }
    let signed = match &args.signature {
        Some(p) => Some(crate::cmd::sign::read_detached(p)?),
        None => None,
    };
    with_file_audit(&args.file, &args.read, |file| {
        let spinner = Spinner::new(&format!("verifying {}", args.file.display()));
        // With --signature, the public key is the detached signature's: an unsigned
        // WTXT is not a failure then.
        let own = VerifyOptions {
            public_key: opts.public_key.filter(|_| signed.is_none()),
            ..opts.clone()
        };
        let mut report = file.verify(&own);
        if let (Some(signed), Some(key)) = (&signed, &key) {
            // The signature's checks first: they are what the user asked about.
            let mut checks = crate::cmd::sign::check_detached(signed, file, key, args)?.checks;
            checks.append(&mut report.checks);
            report.checks = checks;
        } else if signed.is_none() {
            embedded_signature(file, key.as_ref(), args, &mut report)?;
        }
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

/// Without --signature: a signature embedded in the file (`tessera sign --embed`) is
/// checked with --public-key, its checks first; an ECDSA key with nothing to check is
/// refused (a WTXT's own signature is Ed25519).
fn embedded_signature(
    file: &dyn tessera::Container,
    key: Option<&tessera::signing::key::PublicKey>,
    args: &VerifyArgs,
    report: &mut tessera::VerifyReport,
) -> anyhow::Result<()> {
    match crate::cmd::sign::check_embedded(file, key, &args.tensor) {
        Some(mut r) => {
            r.checks.append(&mut report.checks);
            report.checks = r.checks;
        }
        None => {
            if let Some(k @ tessera::signing::key::PublicKey::EcdsaP256(_)) = key {
                return Err(anyhow::Error::new(tessera::Error::invalid_input(format!(
                    "{} carries no embedded signature, and --public-key without \
                     --signature checks only a WTXT's own Ed25519 signature; this is an {} key",
                    args.file.display(),
                    k.algorithm()
                ))));
            }
        }
    }
    Ok(())
}
