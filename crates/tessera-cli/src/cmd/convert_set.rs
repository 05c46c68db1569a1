//! `tessera convert IN OUT --max-shard-size BYTES | --shards N`: write a model set
//! (Hugging Face shards + index for safetensors, llama.cpp splits for GGUF, a shard
//! table for zTensor v2, WTSH shards inside one file for AERO (or an AEROSET: parts,
//! `index.aero` and `NAME.aeroset.json`), shards + a Tessera index
//! for any other format) through `tessera::set::convert_set`, atomic as a whole.

use std::io::Write;

use tessera::set::Split;
use tessera::{Container, ConvertOptions, Format, WriteOptions};

use crate::cli::ConvertArgs;
use crate::output::{human_bytes, with_file, ProgressSource};

/// Runs the set-writing form of `convert` (`shown`: the output as the report names it).
#[allow(clippy::too_many_arguments)]
pub fn run(
    args: &ConvertArgs,
    format: Format,
    split: Split,
    conv: ConvertOptions,
    opts: &WriteOptions,
    dest: &tessera::Location,
    shown: &std::path::Path,
    out: &mut dyn Write,
) -> anyhow::Result<u8> {
    with_file(&args.input, &args.read, |file: &dyn Container| {
        let progress = ProgressSource::new(file, &format!("converting to {}", format.name()));
        let convert = |path: &std::path::Path| -> tessera::Result<_> {
            let result = tessera::set::convert_set(&progress, format, path, split, conv, opts);
            progress.finish();
            let report = result?;
            let size: u64 = report
                .files
                .iter()
                .filter_map(|p| std::fs::metadata(p).ok())
                .map(|m| m.len())
                .sum();
            Ok((report, size))
        };
        // To s3://: written in a local staging directory, then uploaded shards first and
        // the index last (refused over objects already there).
        let remote = crate::output::remote_options(&args.read);
        let ((report, size), written) = tessera::remote::write_at(dest, &remote, |local| {
            let (report, size) = convert(local)?;
            let files = report.files.clone();
            Ok(((report, size), files))
        })
        .map_err(anyhow::Error::new)?;
        if args.read.no_verify {
            writeln!(out, "note: stored digests not checked (--no-verify)")?;
        }
        for n in crate::output::group_notes(&report.notes) {
            writeln!(out, "note: {}", crate::term::escape(&n))?;
        }
        writeln!(
            out,
            "{} ({}) -> {} ({}): {} in {}, {}",
            crate::output::shown(&args.input),
            file.format().name(),
            shown.display(),
            format.name(),
            crate::output::count(file.tensor_infos().len(), "tensor"),
            crate::output::count(written.len(), "file"),
            human_bytes(size)
        )?;
        for f in &written {
            writeln!(out, "wrote {}", crate::term::escape(f))?;
        }
        Ok(0)
    })
}
