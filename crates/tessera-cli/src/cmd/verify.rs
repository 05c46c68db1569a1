//! `tessera verify FILE [--json] [-v | --quiet]`: every integrity layer, each reported
//! per tensor or chunk. With `--signature SIG --public-key KEY.pub`, the tensors are also
//! checked against a detached signed manifest (`tessera sign`), whatever format they are
//! in now.
//!
//! Text output: one line per layer (how many subjects it checked, failed, repaired, did
//! not check, and why not), then every failure and repair, then a summary line saying
//! what was checked. `-v` lists every check; `--quiet` prints only failures and repairs.
//! `--values` also decodes every tensor and fails (layer `values`) on NaN or Inf,
//! naming the tensors and the counts.
//!
//! Exit codes: 0 when every digest checked holds, and also when there was nothing to
//! check (the summary says "nothing to check", never "ok"); 1 when a check failed, and
//! when error correction repaired damage (the file reads correctly but is decaying: CI
//! should notice; `tessera repair` rewrites it). A `--public-key` given means a
//! signature is required: a file that carries none the key checks fails (exit 1, "no
//! signature found for this key"). A secret key file given as `--public-key` is refused
//! (exit 2); no key's bytes are ever printed, only the signer's keyid.
//!
//! JSON shape: `{"file", "format", "result", "ok", "checks": [{"subject", "layer",
//! "status", "detail"}], "layers": [{"layer", "kind", "ok", "failed", "repaired",
//! "not_checked", "unauthenticated", "why_not"}], "warnings": [..]}` with `result` one
//! of `ok`, `failed`, `repaired`, `nothing to check`, `ok` true when the exit code is 0,
//! and `status` one of `ok`, `failed`, `not checked`, `unauthenticated`, `repaired`.

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Arc;

use anyhow::Context;
use serde_json::json;
use tessera::{layer_kind, Check, Container, LayerKind, Status, VerifyOptions, VerifyReport};

use crate::cli::VerifyArgs;
use crate::output::{with_file_audit, Progress};
use crate::term::escape;

/// Runs the verb.
pub fn run(args: &VerifyArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let mut opts = VerifyOptions::default()
        .control_only(args.control)
        .tensors(args.tensor.clone())
        .path(Some(args.file.clone()));
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
        // The bar counts the tensors' dense bytes, as the library's hook does.
        let total = tessera::verify::progress_total(file.tensor_infos());
        let bar = Arc::new(Progress::new(
            total,
            &format!("verifying {}", crate::output::shown(&args.file)),
        ));
        let hook = bar.clone();
        // With --signature, the public key is the detached signature's: an unsigned
        // WTXT is not a failure then.
        let own = opts
            .clone()
            .public_key(opts.public_key.filter(|_| signed.is_none()))
            .with_progress(move |n| hook.inc(n));
        let mut report = file.verify(&own);
        bar.finish();
        if let (Some(signed), Some(key)) = (&signed, &key) {
            // The signature's checks first: they are what the user asked about.
            let mut checks = crate::cmd::sign::check_detached(signed, file, key, args)?.checks;
            checks.append(&mut report.checks);
            report.checks = checks;
        } else if signed.is_none() {
            embedded_signature(file, key.as_ref(), args, &mut report);
        }
        if key.is_some() {
            // A key given means a signature is required.
            tessera::signing::require_signature(&mut report);
            refuse_secret_key(&report, args)?;
        }
        if args.values {
            check_values(file, &args.tensor, &mut report);
        }
        if let Some(given) = &args.pages {
            let signed = match &signed {
                Some(crate::cmd::sign::Detached::Tessera(s)) => Some(s),
                _ => None,
            };
            check_pages(file, given, &args.file, signed, &mut report);
        }
        let outcome = Outcome::of(&report);
        if args.json {
            let doc = json!({
                "file": crate::output::shown(&args.file),
                "format": file.format().name(),
                "result": outcome.name(),
                "ok": outcome.exit_code() == 0,
                "checks": report.checks.iter().map(|c| json!({
                    "subject": c.subject,
                    "layer": c.layer,
                    "status": c.status.name(),
                    "detail": c.detail,
                })).collect::<Vec<_>>(),
                "layers": report.by_layer().iter().map(|l| json!({
                    "layer": l.layer,
                    "kind": kind_name(l.kind),
                    "ok": l.ok,
                    "failed": l.failed,
                    "repaired": l.repaired,
                    "not_checked": l.not_checked,
                    "unauthenticated": l.unauthenticated,
                    "why_not": l.why_not,
                })).collect::<Vec<_>>(),
                "warnings": report.warnings,
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        } else {
            let label = crate::output::shown(&args.file);
            print_text(out, &label, file, &report, &outcome, args)?;
        }
        Ok(outcome.exit_code())
    })
}

/// `--values`: every tensor's elements decoded, a NaN or an infinity a failure naming
/// the tensor and the counts (with `--tensor`, only those named).
/// Checks every page against the manifest `given` (empty: the one beside `model`); a
/// manifest that cannot be read or is for another model is one failed check. With a
/// Tessera signature, whether the signature covers this manifest is checked first.
fn check_pages(
    file: &dyn Container,
    given: &str,
    model: &std::path::Path,
    signed: Option<&tessera::signing::SignedManifest>,
    report: &mut VerifyReport,
) {
    let path = if given.is_empty() {
        tessera::pages::beside(&model.to_string_lossy())
    } else {
        Some(given.to_string())
    };
    let Some(path) = path else {
        report.failed(
            "page manifest",
            tessera::pages::LAYER,
            "no file name to find STEM.pages beside; give --pages FILE",
        );
        return;
    };
    match tessera::pages::PageManifest::load(&path) {
        Ok(m) => {
            if let Some(signed) = signed {
                match signed.covers_pages(&m) {
                    Ok(()) => report.ok("page manifest", tessera::signing::LAYER),
                    Err(e) => report.failed(
                        "page manifest",
                        tessera::signing::LAYER,
                        e.message().to_string(),
                    ),
                }
            }
            m.verify(file, report)
        }
        Err(e) => report.failed("page manifest", tessera::pages::LAYER, e.to_string()),
    }
}

fn check_values(file: &dyn Container, only: &[String], report: &mut VerifyReport) {
    let wanted = |info: &&tessera::TensorInfo| only.is_empty() || only.contains(&info.name);
    let total = (file.tensor_infos().iter().filter(wanted))
        .map(tessera::verify::progress_bytes)
        .sum();
    let bar = Progress::new(total, "checking values");
    for info in file.tensor_infos().iter().filter(wanted) {
        let subject = format!("tensor {:?}", info.name);
        match crate::cmd::stats::tensor_stats(file, info) {
            Ok(Ok(s)) if s.non_finite() == 0 => report.ok(subject, "values"),
            Ok(Ok(s)) => {
                let mut what = Vec::new();
                for (n, word) in [(s.nan, "NaN"), (s.pos_inf, "+Inf"), (s.neg_inf, "-Inf")] {
                    if n > 0 {
                        what.push(format!("{n} {word}"));
                    }
                }
                report.failed(
                    subject,
                    "values",
                    format!(
                        "{} of {}",
                        what.join(", "),
                        crate::output::count(s.count as usize, "element")
                    ),
                );
            }
            Ok(Err(why)) => report.push(subject, "values", Status::NotChecked, Some(why)),
            Err(e) => report.failed(
                subject,
                "values",
                format!("cannot be read: {}", crate::render_error(&e)),
            ),
        }
        bar.inc(tessera::verify::progress_bytes(info));
    }
    bar.finish();
}

/// True when the file carries a signed manifest that was not checked because no key
/// was given (not a part left out by the signer or by --tensor, with a key given).
fn unkeyed_signature(report: &VerifyReport) -> bool {
    report.checks.iter().any(|c| {
        c.layer == tessera::signing::LAYER
            && matches!(c.status, Status::NotChecked | Status::Unauthenticated)
            && c.detail.as_deref().is_some_and(|d| {
                d.contains("no --public-key given") || d.contains("no public key given")
            })
    })
}

/// What a report adds up to.
enum Outcome {
    Ok,
    Failed,
    Repaired,
    NothingToCheck,
}

impl Outcome {
    fn of(report: &VerifyReport) -> Outcome {
        if report.failures().next().is_some() {
            Outcome::Failed
        } else if report.repairs().next().is_some() {
            Outcome::Repaired
        } else if report.digest_checks().next().is_none() {
            Outcome::NothingToCheck
        } else {
            Outcome::Ok
        }
    }
    fn name(&self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed => "failed",
            Outcome::Repaired => "repaired",
            Outcome::NothingToCheck => "nothing to check",
        }
    }
    fn exit_code(&self) -> u8 {
        match self {
            Outcome::Ok | Outcome::NothingToCheck => 0,
            Outcome::Failed | Outcome::Repaired => 1,
        }
    }
}

fn kind_name(k: LayerKind) -> &'static str {
    k.name()
}

fn mark(s: Status) -> &'static str {
    match s {
        Status::Ok => "ok",
        Status::Failed => "FAILED",
        Status::NotChecked => "not checked",
        Status::Unauthenticated => "unauthenticated",
        Status::Repaired => "REPAIRED",
        // A status this build does not know is not a pass.
        _ => "UNKNOWN",
    }
}

fn check_line(out: &mut dyn Write, c: &Check) -> std::io::Result<()> {
    let (subject, layer) = (escape(&c.subject), escape(&c.layer));
    match &c.detail {
        Some(d) => writeln!(
            out,
            "{:<16} {subject:<28} {layer}: {}{}",
            mark(c.status),
            escape(d),
            key_flag(d)
        ),
        None => writeln!(out, "{:<16} {subject:<28} {layer}", mark(c.status)),
    }
}

/// `3 tensors, 1 chunk and the whole file by crc32c, sha256`: what the digest checks
/// covered, by the subjects' kinds, and with which layers.
fn covered(report: &VerifyReport) -> String {
    let mut kinds: Vec<(&str, BTreeSet<&str>)> = Vec::new();
    let mut whole = false;
    let mut layers: Vec<&str> = Vec::new();
    for c in report.digest_checks() {
        if !layers.contains(&c.layer.as_str()) {
            layers.push(&c.layer);
        }
        // A set's shard prefix (`model-00001-of-00002.safetensors: tensor "w"`) aside.
        let subject = c.subject.rsplit_once(": ").map_or(&*c.subject, |(_, s)| s);
        let kind = match subject.split([' ', '"']).next().unwrap_or("") {
            "tensor" => "tensor",
            "chunk" => "chunk",
            "array" => "array",
            "record" => "zip record",
            "page" | "pages" => "page range",
            _ => {
                whole = true;
                continue;
            }
        };
        match kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, set)) => {
                set.insert(&c.subject);
            }
            None => kinds.push((kind, BTreeSet::from([c.subject.as_str()]))),
        }
    }
    let mut parts: Vec<String> = kinds
        .iter()
        .map(|(k, set)| {
            let n = set.len();
            format!("{n} {k}{}", if n == 1 { "" } else { "s" })
        })
        .collect();
    if whole {
        parts.push("the whole file".to_string());
    }
    let what = match parts.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => parts.join(""),
    };
    format!("{what} by {}", escape(&layers.join(", ")))
}

/// The flag that gives what a layer's "not checked" reason says is missing (the library
/// says "no HMAC key given"; the CLI names its flag).
fn key_flag(why: &str) -> &'static str {
    if why.contains("no HMAC key given") {
        " (--hmac-key-file)"
    } else if why.contains("no public key given") {
        " (--public-key)"
    } else {
        ""
    }
}

fn print_text(
    out: &mut dyn Write,
    label: &str,
    file: &dyn Container,
    report: &VerifyReport,
    outcome: &Outcome,
    args: &VerifyArgs,
) -> anyhow::Result<()> {
    if args.verbose {
        for c in &report.checks {
            check_line(out, c)?;
        }
    } else {
        if !args.quiet {
            for l in report.by_layer() {
                let mut counts = Vec::new();
                for (n, word) in [
                    (l.ok, "ok"),
                    (l.failed, "FAILED"),
                    (l.repaired, "REPAIRED"),
                    (l.not_checked, "not checked"),
                    (l.unauthenticated, "unauthenticated"),
                ] {
                    if n > 0 {
                        counts.push(format!("{n} {word}"));
                    }
                }
                let why = l
                    .why_not
                    .as_deref()
                    .map(|w| format!(": {}{}", escape(w), key_flag(w)));
                writeln!(
                    out,
                    "{:<28} {}{}",
                    escape(&l.layer),
                    counts.join(", "),
                    why.unwrap_or_default()
                )?;
            }
        }
        for c in report
            .checks
            .iter()
            .filter(|c| matches!(c.status, Status::Failed | Status::Repaired))
        {
            check_line(out, c)?;
        }
    }
    if !args.quiet {
        for w in &report.warnings {
            writeln!(out, "warning: {}", escape(w))?;
        }
    }
    let title = file.format().title();
    match outcome {
        Outcome::Failed => {
            let failed = report.failures().count();
            writeln!(
                out,
                "{label}: FAILED: {failed} of {} failed ({title})",
                crate::output::count(report.checks.len(), "check")
            )?;
        }
        Outcome::Repaired => {
            let mut where_: Vec<String> = Vec::new();
            for c in report.repairs() {
                let s = escape(&c.subject).into_owned();
                if !where_.contains(&s) {
                    where_.push(s);
                }
            }
            writeln!(
                out,
                "{label}: DAMAGED: error correction repaired {} ({}); the bytes read correctly \
                 now, but the file is decaying: run `tessera repair {label} -o FIXED`",
                where_.join(", "),
                report
                    .repairs()
                    .filter_map(|c| c.detail.as_deref())
                    .map(escape)
                    .collect::<Vec<_>>()
                    .join("; ")
            )?;
        }
        Outcome::NothingToCheck if !args.quiet => {
            // A URL's extension is its path's, never its query's (which may hold secrets).
            let shown = crate::output::shown(&args.file);
            let named = match tessera::Location::from_path(&args.file) {
                Ok(l) if l.is_remote() => {
                    std::path::PathBuf::from(shown.split(['?', '#']).next().unwrap_or(""))
                }
                _ => args.file.clone(),
            };
            let what = match named.extension().and_then(|e| e.to_str()) {
                Some(ext) if !args.file.is_dir() && !ext.eq_ignore_ascii_case("json") => {
                    format!("this .{ext} stores")
                }
                _ => format!("these {} files store", file.format().name()),
            };
            let set = report
                .checks
                .iter()
                .filter(|c| c.status == Status::Ok && layer_kind(&c.layer) == LayerKind::Set)
                .count();
            let structure = if set > 0 {
                format!("the set's {set} checks passed and its structure was checked")
            } else {
                "its structure was checked".to_string()
            };
            if unkeyed_signature(report) {
                writeln!(
                    out,
                    "{label}: nothing checked: it carries a signed manifest, and no --public-key was given to check it ({structure}; {title})"
                )?;
            } else {
                writeln!(
                    out,
                    "{label}: nothing to check: {what} no digests ({structure}; {title})"
                )?;
            }
        }
        Outcome::Ok if !args.quiet => {
            writeln!(out, "{label}: ok: checked {} ({title})", covered(report))?;
            if unkeyed_signature(report) {
                writeln!(
                    out,
                    "{label}: it also carries a signed manifest, not checked: give --public-key to check it"
                )?;
            }
        }
        Outcome::Ok | Outcome::NothingToCheck => {}
    }
    Ok(())
}

/// Without --signature: a signature embedded in the file (`tessera sign --embed`) is
/// checked with --public-key, its checks first (one "not checked" line without a key).
fn embedded_signature(
    file: &dyn tessera::Container,
    key: Option<&tessera::signing::key::PublicKey>,
    args: &VerifyArgs,
    report: &mut tessera::VerifyReport,
) {
    if let Some(mut r) = crate::cmd::sign::check_embedded(file, key, &args.tensor) {
        r.checks.append(&mut report.checks);
        report.checks = r.checks;
    }
}

/// An untyped key file that turned out to be the signer's secret key: a usage error
/// (exit 2), not a failed check.
fn refuse_secret_key(report: &VerifyReport, args: &VerifyArgs) -> anyhow::Result<()> {
    let secret = tessera::signing::key::SECRET_KEY_GIVEN;
    if report
        .failures()
        .any(|c| c.detail.as_deref().is_some_and(|d| d.contains(secret)))
    {
        let path = args
            .public_key
            .as_deref()
            .unwrap_or(std::path::Path::new(""));
        return Err(anyhow::Error::new(tessera::Error::invalid_input(format!(
            "{}: {secret}; give the public key (tessera keygen -o KEY writes it as KEY.pub)",
            path.display()
        ))));
    }
    Ok(())
}
