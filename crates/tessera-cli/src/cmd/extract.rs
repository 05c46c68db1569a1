//! `tessera extract FILE NAME -o OUT`: a tensor as .npy, or a chunk as its raw bytes.

use std::io::Write;

use tessera::{Format, Model};

use crate::cli::ExtractArgs;
use crate::output::with_file;

/// Runs the verb.
pub fn run(args: &ExtractArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    with_file(&args.file, &args.read, |file| {
        if file.tensor_infos().iter().any(|t| t.name == args.name) {
            let view = file.tensor(&args.name)?;
            let view = tessera::sparse::densify(view)?;
            let mut m = Model::new();
            m.push(view)?;
            tessera::convert::write_file(Format::Npy, &m, &args.output, &Default::default())?;
            writeln!(out, "tensor {:?} -> {}", args.name, args.output.display())?;
        } else if file.chunks().iter().any(|c| c.name == args.name) {
            let bytes = file.chunk(&args.name)?;
            tessera::util::atomic::write_bytes_atomic(&args.output, &bytes)?;
            writeln!(
                out,
                "chunk {:?} ({} bytes) -> {}",
                args.name,
                bytes.len(),
                args.output.display()
            )?;
        } else {
            return Err(tessera::Error::not_found(format!(
                "{}: no tensor or chunk named {:?}",
                args.file.display(),
                args.name
            ))
            .into());
        }
        Ok(0)
    })
}
