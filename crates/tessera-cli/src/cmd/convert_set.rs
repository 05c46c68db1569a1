//! `tessera convert IN OUT --max-shard-size BYTES | --shards N`: write a model set
//! (Hugging Face shards + index for safetensors, llama.cpp splits for GGUF, a shard
//! table for zTensor v2, WTSH shards inside one file for AERO, shards + a Tessera index
//! for any other format) through `tessera::set::convert_set`, atomic as a whole.

use std::io::Write;

use tessera::set::Split;
use tessera::{Container, ConvertOptions, Format, WriteOptions};

use crate::cli::ConvertArgs;
use crate::output::{human_bytes, with_file, ProgressSource};

/// Runs the set-writing form of `convert`.
pub fn run(
    args: &ConvertArgs,
    format: Format,
    split: Split,
    conv: ConvertOptions,
    opts: &WriteOptions,
    dest: &tessera::Location,
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
        for n in &report.notes {
            writeln!(out, "note: {}", crate::term::escape(n))?;
        }
        writeln!(
            out,
            "{} ({}) -> {} ({}): {} tensors in {} files, {}",
            crate::output::shown(&args.input),
            file.format().name(),
            args.output_path().display(),
            format.name(),
            file.tensor_infos().len(),
            written.len(),
            human_bytes(size)
        )?;
        for f in &written {
            writeln!(out, "wrote {}", crate::term::escape(f))?;
        }
        Ok(0)
    })
}
