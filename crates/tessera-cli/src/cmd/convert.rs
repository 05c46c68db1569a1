//! `tessera convert IN OUT [--to FORMAT] [options]`.
//!
//! The output format comes from `--to` or OUT's extension. The conversion is lossless or
//! refused with the tensor and the reason; `--cast`, `--densify` and `--drop-metadata`
//! make a loss explicit, `--dequantize` and `--quantize` decode or encode GGUF's
//! quantized blocks, and every change is printed. The output is written to a
//! temporary sibling and renamed, so `convert a a` and a crash mid-way never lose data.

use std::io::Write;

use anyhow::{bail, Context};
use tessera::convert::{Compression, Digest};
use tessera::{ConvertOptions, Format, WriteOptions};

use crate::cli::ConvertArgs;
use crate::output::{parse_size, with_file, ProgressSource};

/// The output format of a conversion.
pub fn target_format(to: Option<&str>, output: &std::path::Path) -> anyhow::Result<Format> {
    match to {
        Some(name) => Format::from_name(name).with_context(|| format!("unknown format {name:?}")),
        None => Format::from_path(output).with_context(|| {
            format!(
                "cannot tell the output format from {:?}: give --to FORMAT",
                output.display()
            )
        }),
    }
}

/// Builds writer options from the flags.
pub fn write_options(args: &ConvertArgs) -> anyhow::Result<WriteOptions> {
    let mut o = WriteOptions::default();
    if let Some(c) = &args.compress {
        o.compression = match c.as_str() {
            "none" | "raw" => Compression::None,
            "zstd" => Compression::Zstd(3),
            s if s.starts_with("zstd:") => {
                let level: i32 = s[5..]
                    .parse()
                    .with_context(|| format!("bad zstd level in {s:?}"))?;
                Compression::Zstd(level)
            }
            s => bail!("unknown compression {s:?} (none, zstd, zstd:LEVEL)"),
        };
    }
    for d in &args.digest {
        o.digests.push(match d.as_str() {
            "crc32c" => Digest::Crc32c,
            "sha256" => Digest::Sha256,
            s => bail!("unknown digest {s:?} (crc32c, sha256)"),
        });
    }
    o.ecc = args.ecc;
    if let Some(p) = &args.hmac_key_file {
        o.hmac_key =
            Some(std::fs::read(p).with_context(|| format!("reading HMAC key {}", p.display()))?);
    }
    if let Some(p) = &args.sign_key {
        o.sign_key = Some(crate::cmd::keys::load_secret_key(p)?);
    }
    o.prev = args.prev.clone();
    o.generation = args.gen;
    o.timestamp = args.ts.clone();
    o.build = args.build.clone();
    o.host = args.host.clone();
    o.cuda = args.cuda.clone();
    o.rows_per_chunk = args.rows_per_chunk;
    o.audit = args.audit.clone();
    o.streaming = args.streaming;
    if let Some(s) = &args.salt {
        let b = tessera::util::unhex(s)
            .filter(|b| b.len() == 8)
            .context("--salt needs 16 hex digits")?;
        let mut salt = [0u8; 8];
        salt.copy_from_slice(&b);
        o.fixed_salt = Some(salt);
    }
    if let Some(s) = &args.shard_size {
        o.shard_size = Some(parse_size(s)?);
    }
    o.tensor_hashes = args.tensor_hashes;
    o.control_integrity = args.control_integrity;
    if let Some(p) = &args.page_hashes {
        o.page_hashes = Some(parse_size(p)?);
    }
    if let Some(u) = &args.uuid {
        let b = tessera::util::unhex(u)
            .filter(|b| b.len() == 16)
            .context("--uuid needs 32 hex digits")?;
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&b);
        o.uuid = Some(uuid);
    }
    o.zero_base_id = args.zero_base_id;
    Ok(o)
}

/// Runs the verb.
pub fn run(args: &ConvertArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let format = match (
        target_format(args.to.as_deref(), &args.output)?,
        args.zt_version,
    ) {
        (Format::Ztensor | Format::ZtensorV2, Some(1)) => Format::Ztensor,
        (Format::Ztensor | Format::ZtensorV2, Some(2)) => Format::ZtensorV2,
        (f, Some(_)) => bail!(
            "--zt-version applies to a zTensor output, not {}",
            f.title()
        ),
        (f, None) => f,
    };
    let opts = write_options(args)?;
    let conv = ConvertOptions {
        cast: args.cast,
        densify: args.densify,
        drop_metadata: args.drop_metadata,
        dequantize: match args.dequantize.as_deref() {
            Some(d) => {
                Some(tessera::DType::from_name(d).with_context(|| format!("unknown dtype {d:?}"))?)
            }
            None => None,
        },
        quantize: match args.quantize.as_deref() {
            Some(q) => Some(
                tessera::formats::gguf::quants::QuantKind::from_name(q)
                    .with_context(|| format!("unknown quantization {q:?}"))?,
            ),
            None => None,
        },
    };
    let split = match (&args.max_shard_size, args.shards) {
        (Some(s), _) => Some(tessera::set::Split::MaxBytes(parse_size(s)?)),
        (None, Some(n)) => Some(tessera::set::Split::Shards(n)),
        (None, None) => None,
    };
    if let Some(split) = split {
        return crate::cmd::convert_set::run(args, format, split, conv, &opts, out);
    }
    with_file(&args.input, &args.read, |file| {
        let progress = ProgressSource::new(file, &format!("converting to {}", format.name()));
        let result = tessera::convert::convert_file(&progress, format, &args.output, conv, &opts);
        progress.finish();
        let report = result.map_err(anyhow::Error::new)?;
        if args.read.salvage {
            // What salvage skipped (damaged arrays, unreadable tensor chunks).
            for w in file.warnings() {
                crate::term::warn(&format!("warning: {w}"));
            }
        }
        if args.read.no_verify {
            writeln!(out, "note: stored digests not checked (--no-verify)")?;
        }
        for n in &report.notes {
            writeln!(out, "note: {}", crate::term::escape(n))?;
        }
        let size = std::fs::metadata(&args.output)
            .map(|m| m.len())
            .unwrap_or(0);
        writeln!(
            out,
            "{} ({}) -> {} ({}): {} tensors, {}",
            args.input.display(),
            file.format().name(),
            args.output.display(),
            format.name(),
            file.tensor_infos().len(),
            crate::output::human_bytes(size)
        )?;
        for extra in &report.extra_files {
            writeln!(out, "also wrote {}", extra.display())?;
        }
        Ok(0)
    })
}
