//! `tessera snapshots RING`, `tessera snapshots push RING`, `tessera snapshots restore
//! RING -o OUT`: a snapshot ring (`tessera.Snapshotter`'s directory) read through its
//! log.
//!
//! - list: per generation in the ring, its number, step, time, format, size, whether it
//!   is signed, whether it verifies (every layer, the identity root, the chain; skipped
//!   with `--quick`), the targets that hold it and those it is pending for; then write
//!   failures and log lines skipped. Exit 0 (1 when a generation fails to verify).
//! - push: drains the resend queue: every generation a recorded target (or each `--to
//!   URL`) lacks, oldest first, each tried `--attempts` times with backoff; a target
//!   stops at its first generation that still fails. Exit 0 when nothing is left, 5
//!   otherwise (what is left is listed, and stays queued).
//! - restore: the newest generation that verifies (or `--generation N`), written as the
//!   format `-o`'s extension (or `--to`) names, atomically; the generations skipped are
//!   named. Exit 1 when none verifies.
//!
//! `--json` on each prints one JSON document instead.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::json;
use tessera::snapshot::{self, ring, wal, Backoff, RestoreOptions, SnapshotOptions, Snapshotter};

use crate::cli::ReadArgs;
use crate::term::escape;

/// `tessera snapshots`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SnapshotsArgs {
    /// The verb (list when none).
    #[command(subcommand)]
    pub command: Option<SnapshotsCommand>,
    /// The ring (list it).
    #[arg(required = true)]
    pub ring: Option<PathBuf>,
    /// Check only that each generation's files are there with their sizes, not every
    /// layer and identity.
    #[arg(long)]
    pub quick: bool,
    /// The key the generations' signatures must be by.
    #[arg(long, value_name = "FILE")]
    pub public_key: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Reading options.
    #[command(flatten)]
    pub read: ReadArgs,
}

/// `tessera snapshots` verbs.
#[derive(Debug, Subcommand)]
pub enum SnapshotsCommand {
    /// Push what the ring's targets lack (the resend queue), oldest first.
    Push {
        /// The ring.
        ring: PathBuf,
        /// Push to this target only (repeatable; default: every target the log records).
        #[arg(long, value_name = "URL")]
        to: Vec<String>,
        /// Tries per generation.
        #[arg(long, default_value_t = 3)]
        attempts: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write the newest generation that verifies, in any format.
    Restore {
        /// The ring.
        ring: PathBuf,
        /// Output file; its extension picks the format unless --to is given.
        #[arg(short, long, value_name = "OUT")]
        output: PathBuf,
        /// Output format (a name from `tessera formats`).
        #[arg(long, value_name = "FORMAT")]
        to: Option<String>,
        /// This generation (still verified), not the newest good one.
        #[arg(long, value_name = "N")]
        generation: Option<u64>,
        /// The key the signatures must be by.
        #[arg(long, value_name = "FILE")]
        public_key: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Reading options.
        #[command(flatten)]
        read: ReadArgs,
    },
}

/// Runs the verb.
pub fn run(args: &SnapshotsArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    match &args.command {
        None => {
            let ring = args.ring.as_ref().context("name the ring")?;
            list(args, ring, out)
        }
        Some(SnapshotsCommand::Push {
            ring,
            to,
            attempts,
            json,
        }) => push(ring, to, *attempts, *json, out),
        Some(SnapshotsCommand::Restore {
            ring,
            output,
            to,
            generation,
            public_key,
            json,
            read,
        }) => {
            let mut o = restore_options(ring, read, public_key.as_ref())?;
            o.generation = *generation;
            restore(ring, output, to.as_deref(), &o, *json, out)
        }
    }
}

fn restore_options(
    ring: &std::path::Path,
    read: &ReadArgs,
    public_key: Option<&PathBuf>,
) -> anyhow::Result<RestoreOptions> {
    let mut o = RestoreOptions::default();
    o.read = crate::output::read_options(ring, read)?;
    if let Some(k) = public_key {
        o.public_key = Some(crate::cmd::keys::load_any_public_key(k)?);
    }
    Ok(o)
}

fn read_ring(ring: &std::path::Path) -> anyhow::Result<(wal::Log, ring::State)> {
    if !ring.join(wal::LOG).exists() {
        anyhow::bail!(tessera::Error::not_found(format!(
            "{}: no snapshot ring here (no {})",
            ring.display(),
            wal::LOG
        )));
    }
    let log = wal::read(ring)?;
    let state = ring::State::from_log(&log);
    Ok((log, state))
}

fn list(args: &SnapshotsArgs, ring: &std::path::Path, out: &mut dyn Write) -> anyhow::Result<u8> {
    let (log, state) = read_ring(ring)?;
    let opts = restore_options(ring, &args.read, args.public_key.as_ref())?;
    let mut rows = Vec::new();
    let mut bad = 0;
    for g in state.live() {
        let (file, bytes, _) = g.written.clone().unwrap_or_default();
        let side = ring::read_sidecar(ring, g.gen).ok();
        let signed = side
            .as_ref()
            .is_some_and(|s| s.files.iter().any(|(n, _)| n.ends_with(".sig")));
        let verified: Result<(), String> =
            if args.quick {
                match &side {
                    Some(s) => s.files.iter().try_for_each(|(n, b)| {
                        match std::fs::metadata(ring.join(n)) {
                            Ok(m) if m.len() == *b => Ok(()),
                            Ok(m) => Err(format!("{n}: {} bytes, {b} written", m.len())),
                            Err(e) => Err(format!("{n}: {e}")),
                        }
                    }),
                    None => Err("no sidecar".into()),
                }
            } else {
                snapshot::check_generation(ring, &state, g.gen, &opts)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            };
        if verified.is_err() {
            bad += 1;
        }
        let pending: Vec<&String> = state
            .targets
            .iter()
            .filter(|t| !g.pushed.contains(*t))
            .collect();
        rows.push((g, file, bytes, side, signed, verified, pending));
    }
    let failed: Vec<&ring::Gen> = state
        .gens
        .values()
        .filter(|g| g.written.is_none() && g.failed.is_some())
        .collect();
    if args.json {
        let doc = json!({
            "ring": crate::output::shown(ring),
            "targets": state.targets,
            "generations": rows.iter().map(|(g, file, bytes, side, signed, verified, pending)| json!({
                "generation": g.gen,
                "step": g.step,
                "time": g.time,
                "format": side.as_ref().map(|s| s.format.clone()),
                "file": file,
                "bytes": bytes,
                "root": side.as_ref().map(|s| s.root.clone()),
                "signed": signed,
                "verified": verified.is_ok(),
                "problem": verified.as_ref().err(),
                "pushed": g.pushed,
                "pending": pending,
                "push_failures": g.push_failures,
            })).collect::<Vec<_>>(),
            "failed": failed.iter().map(|g| json!({
                "generation": g.gen, "step": g.step, "reason": g.failed,
            })).collect::<Vec<_>>(),
            "log_problems": log.problems,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(u8::from(bad > 0));
    }
    writeln!(
        out,
        "{}: {} in the ring, {} target{}",
        crate::output::shown(ring),
        crate::output::count(rows.len(), "generation"),
        state.targets.len(),
        if state.targets.len() == 1 { "" } else { "s" }
    )?;
    for (i, t) in state.targets.iter().enumerate() {
        writeln!(out, "  target {}: {}", i + 1, escape(t))?;
    }
    writeln!(
        out,
        "{:>6} {:>8} {:<20} {:<12} {:>10} {:<6} {:<8} {:<10} pending",
        "gen", "step", "time", "format", "size", "signed", "verified", "pushed"
    )?;
    for (g, _, bytes, side, signed, verified, pending) in &rows {
        let pushed = format!(
            "{}/{}",
            g.pushed
                .iter()
                .filter(|t| state.targets.contains(t))
                .count(),
            state.targets.len()
        );
        let pend: Vec<String> = pending
            .iter()
            .map(|t| {
                let n = state
                    .targets
                    .iter()
                    .position(|x| x == *t)
                    .map_or(0, |i| i + 1);
                match g.push_failures.get(*t) {
                    Some(why) => format!("target {n} ({})", escape(why)),
                    None => format!("target {n}"),
                }
            })
            .collect();
        writeln!(
            out,
            "{:>6} {:>8} {:<20} {:<12} {:>10} {:<6} {:<8} {:<10} {}",
            g.gen,
            g.step.map_or("-".into(), |s| s.to_string()),
            escape(&g.time),
            escape(side.as_ref().map_or("?", |s| s.format.as_str())),
            crate::output::human_bytes(*bytes),
            if *signed { "yes" } else { "no" },
            match verified {
                Ok(()) if args.quick => "sizes ok",
                Ok(()) => "ok",
                Err(_) => "FAILED",
            },
            pushed,
            if pend.is_empty() {
                "-".to_string()
            } else {
                pend.join(", ")
            }
        )?;
        if let Err(e) = verified {
            writeln!(out, "         generation {}: {}", g.gen, escape(e))?;
        }
    }
    for g in &failed {
        writeln!(
            out,
            "failed: generation {} (step {}): {}",
            g.gen,
            g.step.map_or("-".into(), |s| s.to_string()),
            escape(g.failed.as_deref().unwrap_or(""))
        )?;
    }
    for p in &log.problems {
        writeln!(out, "log: {}", escape(p))?;
    }
    Ok(u8::from(bad > 0))
}

/// Exit code of `snapshots push` when generations are left pending.
pub const EXIT_PENDING: u8 = 5;

fn push(
    ring: &std::path::Path,
    to: &[String],
    attempts: u32,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<u8> {
    let (_, state) = read_ring(ring)?;
    let urls: Vec<String> = if to.is_empty() {
        state.targets.clone()
    } else {
        to.to_vec()
    };
    let mut targets = Vec::new();
    for u in &urls {
        targets.push(snapshot::target_for(u, &Default::default())?);
    }
    let format = state
        .last_written()
        .and_then(|g| ring::read_sidecar(ring, g.gen).ok())
        .and_then(|s| tessera::Format::from_name(&s.format))
        .unwrap_or(tessera::Format::Safetensors);
    let mut o = SnapshotOptions::new(format);
    o.keep = usize::MAX; // pushing drops nothing: the ring's own keep is its writer's
    let s = Snapshotter::open(ring, o)?;
    let backoff = Backoff {
        first: Duration::from_millis(500),
        max: Duration::from_secs(10),
    };
    let report = s.push_pending(&targets, attempts, backoff)?;
    s.close(Duration::ZERO)?;
    if json {
        let doc = json!({
            "ring": crate::output::shown(ring),
            "pushed": report.pushed.iter().map(|(g, t)| json!({"generation": g, "target": t})).collect::<Vec<_>>(),
            "left": report.left.iter().map(|(g, t, why)| json!({"generation": g, "target": t, "reason": why})).collect::<Vec<_>>(),
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        for (g, t) in &report.pushed {
            writeln!(out, "pushed generation {g} to {}", escape(t))?;
        }
        for (g, t, why) in &report.left {
            writeln!(
                out,
                "pending: generation {g} for {}: {}",
                escape(t),
                escape(why)
            )?;
        }
        if report.pushed.is_empty() && report.left.is_empty() {
            writeln!(out, "nothing to push")?;
        }
    }
    Ok(if report.left.is_empty() {
        0
    } else {
        EXIT_PENDING
    })
}

fn restore(
    ring: &std::path::Path,
    output: &std::path::Path,
    to: Option<&str>,
    opts: &RestoreOptions,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<u8> {
    let format = crate::cmd::convert::target_format(to, output)?;
    let r = snapshot::restore(ring, opts)?;
    let report = tessera::convert::convert_file(
        r.opened.container(),
        format,
        output,
        tessera::ConvertOptions::default(),
        &tessera::WriteOptions::default(),
    )
    .with_context(|| format!("writing {}", output.display()))?;
    if json {
        let doc = json!({
            "ring": crate::output::shown(ring),
            "generation": r.generation,
            "step": r.sidecar.step,
            "time": r.sidecar.time,
            "root": r.sidecar.root,
            "output": crate::output::shown(output),
            "format": format.name(),
            "skipped": r.skipped.iter().map(|(g, why)| json!({"generation": g, "reason": why})).collect::<Vec<_>>(),
            "notes": report.notes,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(0);
    }
    for (g, why) in &r.skipped {
        writeln!(out, "skipped generation {g}: {}", escape(why))?;
    }
    writeln!(
        out,
        "restored generation {} (step {}, {}) to {} as {}",
        r.generation,
        r.sidecar.step.map_or("-".into(), |s| s.to_string()),
        escape(&r.sidecar.time),
        crate::output::shown(output),
        format.title()
    )?;
    for n in &report.notes {
        writeln!(out, "note: {}", escape(n))?;
    }
    Ok(0)
}
