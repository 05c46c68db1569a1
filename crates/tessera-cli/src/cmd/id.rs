//! `tessera id FILE [--json] [--metadata] [-v]`: the model's content identity, the same
//! for every format and conversion of it (see `tessera::identity`).
//!
//! JSON shape: `{"file", "format", "id", "metadata": null | "blake3:…", "tensors":
//! [{"name", "dtype", "shape", "layout", "digest"}]}`.

use std::io::Write;

use serde_json::json;

use crate::cli::IdArgs;
use crate::output::{with_file, ProgressSource};
use crate::term::escape;

/// Runs the verb.
pub fn run(args: &IdArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    with_file(&args.file, &args.read, |file| {
        let progress = ProgressSource::new(file, "hashing");
        let result = tessera::identity::model_id(&progress, args.metadata);
        progress.finish();
        let id = result?;
        if args.json {
            let doc = json!({
                "file": crate::output::shown(&args.file),
                "format": file.format().name(),
                "id": id.root.to_prefixed(),
                "metadata": id.metadata.map(|d| d.to_prefixed()),
                "tensors": id.tensors.iter().map(|t| json!({
                    "name": t.name,
                    "dtype": t.dtype,
                    "shape": t.shape,
                    "layout": t.layout,
                    "digest": t.digest.to_prefixed(),
                })).collect::<Vec<_>>(),
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
            return Ok(0);
        }
        if args.verbose {
            for t in &id.tensors {
                writeln!(out, "{}  {}", t.digest, escape(&t.name))?;
            }
        }
        let count = id.tensors.len();
        let what = if args.metadata {
            "tensors and metadata"
        } else {
            "tensors only"
        };
        writeln!(
            out,
            "{}  {} ({count} {}, {what})",
            id.root,
            crate::output::shown(&args.file),
            if count == 1 { "tensor" } else { "tensors" }
        )?;
        Ok(0)
    })
}
