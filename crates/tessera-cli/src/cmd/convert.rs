//! `tessera convert IN OUT [--to FORMAT] [options]`.
//!
//! The output format comes from `--to` or OUT's extension. The conversion is lossless or
//! refused with the tensor and the reason; `--cast`, `--densify` and `--drop-metadata`
//! make a loss explicit, `--dequantize` and `--quantize` decode or encode GGUF's
//! quantized blocks, and every change is printed. The output is written to a
//! temporary sibling and renamed, so `convert a a` and a crash mid-way never lose data.
//! `-o -` (with `--to`) writes the file to standard output instead, as `extract -o -`
//! does (refused for a terminal, a model set, or streaming WTXT without `--wsum FILE`, which
//! names where its WSUM goes).

use std::io::Write;

use anyhow::{bail, Context};
use tessera::formats::{check_options, find_option};
use tessera::options::{parse_assignment, OptionKind, OptionValue};
use tessera::{ConvertOptions, Format, WriteOptions};

use crate::cli::ConvertArgs;
use crate::output::{parse_size, with_file, ProgressSource};

/// The output format of a conversion.
pub fn target_format(to: Option<&str>, output: &std::path::Path) -> anyhow::Result<Format> {
    // A set of a format's own index kind (`--to aeroset`, `model.aeroset.json`).
    let own = match to {
        Some(name) => tessera::formats::indexed_set_named(name),
        None => output
            .file_name()
            .and_then(|n| tessera::formats::indexed_set_for_name(&n.to_string_lossy())),
    };
    if let Some((format, _)) = own {
        return Ok(format);
    }
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

/// The value of an option as the command line gives it: keys (`hmac_key`, `sign_key`)
/// name a file, read here; everything else is text the library parses.
fn cli_value(name: &str, text: OptionValue) -> anyhow::Result<OptionValue> {
    let (Some(o), OptionValue::Text(path)) = (find_option(name), &text) else {
        return Ok(text);
    };
    if o.kind != OptionKind::Secret {
        return Ok(text);
    }
    let path = std::path::Path::new(path);
    Ok(OptionValue::Bytes(if o.name == "sign_key" {
        crate::cmd::keys::load_secret_key(path)?.to_vec()
    } else {
        std::fs::read(path).with_context(|| format!("reading {} {}", o.name, path.display()))?
    }))
}

/// Builds writer options from the option flags (`--ecc 16`, derived from the formats'
/// declarations: [`crate::flags`]) and `-O NAME=VALUE`, in that order, through the
/// library's one option parser.
pub fn write_options(args: &ConvertArgs) -> anyhow::Result<WriteOptions> {
    let mut given = args.format_flags.given.clone();
    for o in &args.option {
        let (k, v) = parse_assignment(o).map_err(anyhow::Error::new)?;
        given.push((k, v));
    }
    let mut opts = WriteOptions::default().no_fsync(args.no_fsync);
    for (name, v) in given {
        let v = cli_value(&name, v)?;
        opts.set(&name, v).map_err(anyhow::Error::new)?;
    }
    Ok(opts)
}

/// A usage error (exit 2).
fn bail_usage<T>(msg: &str) -> anyhow::Result<T> {
    Err(tessera::Error::invalid_input(msg).into())
}

/// `convert IN -o - --to FORMAT`: the output on standard output (never a terminal),
/// as `extract -o -` writes it; the report goes to stderr. The file is built in an
/// unnamed temporary file first (writers seek), which disappears with the process.
fn to_stdout(
    args: &ConvertArgs,
    format: Format,
    conv: ConvertOptions,
    opts: &WriteOptions,
) -> anyhow::Result<u8> {
    use std::io::{IsTerminal, Seek};
    if std::io::stdout().is_terminal() {
        return bail_usage("refusing to write binary data to a terminal: redirect or pipe `-o -`");
    }
    with_file(&args.input, &args.read, |file| {
        let progress = ProgressSource::new(file, &format!("converting to {}", format.name()));
        let prepared = tessera::convert::prepare(&progress, format, conv);
        let mut tmp = tempfile::tempfile()?;
        let report = prepared.and_then(|p| {
            let r = tessera::convert::write_to(format, &p, &mut tmp, opts);
            r.map(|r| (p.notes().to_vec(), r))
        });
        progress.finish();
        let (notes, report) = report?;
        if args.read.input.salvage && !file.lost().is_empty() {
            return bail_usage(
                "--salvage lost tensors: name the output (not -), so the loss is reported with it",
            );
        }
        let size = tmp.stream_position()?;
        tmp.rewind()?;
        let stdout = std::io::stdout();
        let mut lock = stdout.lock();
        std::io::copy(&mut tmp, &mut lock)?;
        lock.flush()?;
        let all: Vec<String> = notes.into_iter().chain(report.notes).collect();
        for n in crate::output::group_notes(&all) {
            crate::term::warn(&format!("note: {n}"));
        }
        crate::term::warn(&format!(
            "{} ({}) -> standard output ({}): {}, {}",
            args.input.display(),
            file.format().name(),
            format.name(),
            crate::output::count(file.tensor_infos().len(), "tensor"),
            crate::output::human_bytes(size)
        ));
        Ok(0)
    })
}

/// Exit code of a `--salvage` conversion that lost tensors (the rest written), unless
/// `--accept-loss`.
pub const EXIT_SALVAGED: u8 = 6;

/// Runs the verb.
pub fn run(args: &ConvertArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let format = match (
        target_format(args.to.as_deref(), args.output_path())?,
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
    // Refused before the input is read: an option the target does not use.
    check_options(format, &opts).map_err(anyhow::Error::new)?;
    let conv = ConvertOptions::default()
        .cast(args.cast)
        .densify(args.densify)
        .drop_metadata(args.drop_metadata)
        .dequantize(match args.dequantize.as_deref() {
            Some(d) => {
                Some(tessera::DType::from_name(d).with_context(|| format!("unknown dtype {d:?}"))?)
            }
            None => None,
        })
        .quantize(match args.quantize.as_deref() {
            Some(q) => Some(
                tessera::quant::QuantKind::from_name(q)
                    .with_context(|| format!("unknown quantization {q:?}"))?,
            ),
            None => None,
        });
    let split = match (&args.max_shard_size, args.shards) {
        (Some(s), _) => match parse_size(s)? {
            0 => bail_usage("--max-shard-size must be at least 1 byte, not 0")?,
            n => Some(tessera::set::Split::MaxBytes(n)),
        },
        (None, Some(0)) => bail_usage("--shards must be at least 1, not 0")?,
        (None, Some(n)) => Some(tessera::set::Split::Shards(n)),
        (None, None) => None,
    };
    // A set of the format's own index kind (AEROSET): always a set, cut by the given
    // size or the kind's default.
    let own = tessera::set::write::indexed_output(format, args.to.as_deref(), args.output_path())
        .map_err(anyhow::Error::new)?;
    if let (Some(index), Some(hooks)) = (own, format.codec().indexed_set) {
        let split = split.unwrap_or(tessera::set::Split::MaxBytes(hooks.default_shard_size));
        let dest = tessera::Location::from_path(&index).map_err(anyhow::Error::new)?;
        return crate::cmd::convert_set::run(args, format, split, conv, &opts, &dest, &index, out);
    }
    if args.output_path() == std::path::Path::new("-") {
        if split.is_some() {
            bail_usage("a model set is several files: name its output, not -")?;
        }
        if opts.extra.get("streaming") == Some(&OptionValue::Bool(true))
            && !opts.extra.contains_key("wsum")
        {
            bail_usage(
                "streaming WTXT writes OUT.wsum beside the output: name the output, or \
                 give the WSUM's path with --wsum FILE",
            )?;
        }
        return to_stdout(args, format, conv, &opts);
    }
    // An s3:// output is written to a local staging directory, then uploaded: one file
    // as one multipart upload (visible under its key only once complete; aborted on
    // failure), several (a set, a WTXT file and its .wsum) index or main file last.
    let dest = tessera::Location::from_path(args.output_path()).map_err(anyhow::Error::new)?;
    if let Some(split) = split {
        let shown = args.output_path().to_path_buf();
        return crate::cmd::convert_set::run(args, format, split, conv, &opts, &dest, &shown, out);
    }
    with_file(&args.input, &args.read, |file| {
        let progress = ProgressSource::new(file, &format!("converting to {}", format.name()));
        let convert = |path: &std::path::Path| -> tessera::Result<_> {
            let result = tessera::convert::convert_file(&progress, format, path, conv, &opts);
            progress.finish();
            let report = result?;
            let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            Ok((report, size))
        };
        let remote = crate::output::remote_options(&args.read);
        let ((report, size), mut extra_files) =
            tessera::remote::write_at(&dest, &remote, |local| {
                let (report, size) = convert(local)?;
                let mut files = report.extra_files.clone();
                files.push(local.to_path_buf());
                Ok(((report, size), files))
            })
            .map_err(anyhow::Error::new)?;
        // The main file is named below; the others follow as "also wrote".
        extra_files.pop();
        // What salvage left out (damaged arrays, unreadable tensor chunks), as the
        // reader lists it.
        let lost = if args.read.input.salvage {
            for w in file.warnings() {
                crate::term::warn(&format!("warning: {w}"));
            }
            file.lost()
        } else {
            Vec::new()
        };
        for l in &lost {
            writeln!(
                out,
                "lost: {}: {}",
                crate::term::escape(&l.what),
                crate::term::escape(&l.why)
            )?;
        }
        if args.read.no_verify {
            writeln!(out, "note: stored digests not checked (--no-verify)")?;
        }
        for n in crate::output::group_notes(&report.notes) {
            writeln!(out, "note: {}", crate::term::escape(&n))?;
        }
        writeln!(
            out,
            "{} ({}) -> {} ({}): {}, {}",
            crate::output::shown(&args.input),
            file.format().name(),
            crate::output::shown(args.output_path()),
            format.name(),
            crate::output::count(file.tensor_infos().len(), "tensor"),
            crate::output::human_bytes(size)
        )?;
        for extra in &extra_files {
            writeln!(out, "also wrote {}", crate::term::escape(extra))?;
        }
        if !lost.is_empty() && !args.accept_loss {
            crate::term::warn(&format!(
                "salvaged: {} written without {} lost part{} (exit {EXIT_SALVAGED}; --accept-loss says the loss is expected)",
                crate::output::shown(args.output_path()),
                lost.len(),
                if lost.len() == 1 { "" } else { "s" }
            ));
            return Ok(EXIT_SALVAGED);
        }
        Ok(0)
    })
}
