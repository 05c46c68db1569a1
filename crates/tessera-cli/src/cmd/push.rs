//! `tessera push FILE… --to URL [--generation N] [--step S]`: publishes the files as one
//! snapshot generation to an S3 prefix, an HTTP PUT server, a Git repository or an OCI
//! registry (`tessera::push`). Without `--generation`, the next one after those at the
//! target. The digest a second push compares is a BLAKE3 over the files' names and
//! BLAKE3s; the format recorded is the first file's, when it opens.
//!
//! JSON shape (`--json`): `{"target", "generation", "already_present", "location",
//! "bytes_sent", "digest"}`.

use std::io::Write;

use serde_json::json;

use crate::cli::PushArgs;
use crate::term::escape;
use tessera::push::{Artifact, PushOptions, Target};

/// Runs the verb.
pub fn run(args: &PushArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let target = Target::parse(&args.to)?;
    let mut remote = tessera::remote::RemoteOptions::default().cache(false);
    if let Some(e) = &args.endpoint {
        remote = remote.endpoint(Some(e.clone()));
    }
    let opts = PushOptions::default()
        .remote(remote)
        .lfs(args.lfs)
        .work_dir(args.work_dir.clone());
    let mut files = Vec::new();
    for f in &args.files {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !f.is_file() {
            return Err(tessera::Error::invalid_input(format!(
                "{}: not a file",
                escape(&f.display().to_string())
            ))
            .into());
        }
        files.push((name, f.clone()));
    }
    let (format, digest) = identify(&files)?;
    let generation = match args.generation {
        Some(g) => g,
        None => target.list(&opts)?.last().map_or(1, |g| g + 1),
    };
    let artifact = Artifact {
        generation,
        step: args.step,
        format,
        files,
        digest: digest.clone(),
        annotations: Default::default(),
    };
    let r = target.push(&artifact, &opts)?;
    if args.json {
        let doc = json!({
            "target": r.target,
            "generation": r.generation,
            "already_present": r.already_present,
            "location": r.location,
            "bytes_sent": r.bytes_sent,
            "digest": digest,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    } else if r.already_present {
        writeln!(
            out,
            "generation {} is already at {} with the same digest: nothing sent",
            r.generation,
            escape(&r.target)
        )?;
    } else {
        writeln!(
            out,
            "pushed generation {} to {} ({} bytes): {}",
            r.generation,
            escape(&r.target),
            r.bytes_sent,
            escape(&r.location)
        )?;
    }
    Ok(0)
}

/// The format's name (the first file's, when it opens) and the digest of what is
/// pushed.
fn identify(files: &[(String, std::path::PathBuf)]) -> anyhow::Result<(String, String)> {
    let format = files
        .first()
        .and_then(|(_, p)| tessera::open_path(p, &tessera::ReadOptions::default()).ok())
        .map_or("files".to_string(), |o| {
            o.container().format().name().to_string()
        });
    let mut h = blake3::Hasher::new();
    for (name, path) in files {
        let mut f = std::fs::File::open(path)?;
        let mut fh = blake3::Hasher::new();
        std::io::copy(&mut f, &mut fh)?;
        h.update(name.as_bytes());
        h.update(b"\0");
        h.update(fh.finalize().as_bytes());
    }
    Ok((format, format!("files:blake3:{}", h.finalize().to_hex())))
}
