//! `tessera id FILE [--json] [--metadata] [-v]`: the model's content identity, the same
//! for every format and conversion of it (see `tessera::identity`).
//!
//! JSON shape: `{"file", "format", "id", "metadata": null | "blake3:…", "tensors":
//! [{"name", "dtype", "shape", "layout", "digest"}]}`.
//!
//! `--pages [SIZE] [-o OUT]` also writes a page manifest (`tessera::pages`), computed in
//! the same pass (each tensor read once), and says where (JSON: `"pages": {"file",
//! "page_size", "count"}`).

use std::io::Write;

use std::path::{Path, PathBuf};

use serde_json::json;
use tessera::pages::PageManifest;

use crate::cli::IdArgs;
use crate::output::{with_file, ProgressSource};
use crate::term::escape;

/// Runs the verb.
pub fn run(args: &IdArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    with_file(&args.file, &args.read, |file| {
        let progress = ProgressSource::new(file, "hashing");
        let (result, pages) = match &args.pages {
            None => (tessera::identity::model_id(&progress, args.metadata), None),
            Some(size) => {
                let size = crate::output::parse_size(size)?;
                match PageManifest::compute(&progress, size, &mut |_| {}) {
                    Err(e) => (Err(e), None),
                    Ok(m) => (id_of(&m, file, args.metadata), Some(m)),
                }
            }
        };
        progress.finish();
        let id = result?;
        let written = match &pages {
            None => None,
            Some(m) => Some(write_pages(m, &args.file, args.output.as_deref())?),
        };
        let pages_json = pages.as_ref().zip(written.as_ref()).map(|(m, path)| {
            json!({
                "file": crate::output::shown(path),
                "page_size": m.page_size,
                "count": m.tensors.iter().map(|t| t.pages.len()).sum::<usize>(),
            })
        });
        if args.json {
            let doc = json!({
                "file": crate::output::shown(&args.file),
                "format": file.format().name(),
                "id": id.root.to_prefixed(),
                "metadata": id.metadata.map(|d| d.to_prefixed()),
                "pages": pages_json,
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
        if let (Some(m), Some(path)) = (&pages, &written) {
            let n: usize = m.tensors.iter().map(|t| t.pages.len()).sum();
            writeln!(
                out,
                "wrote {}: {n} {} of {} bytes",
                crate::output::shown(path),
                if n == 1 { "page" } else { "pages" },
                m.page_size
            )?;
        }
        Ok(0)
    })
}

/// The identity from a page manifest's entries (they are the tensor digests), with
/// the metadata digest when asked.
fn id_of(
    m: &PageManifest,
    file: &dyn tessera::Container,
    with_metadata: bool,
) -> tessera::Result<tessera::identity::ModelId> {
    let tensors: Vec<_> = m.tensors.iter().map(|t| t.id.clone()).collect();
    let metadata = with_metadata.then(|| tessera::identity::metadata_digest(file.metadata()));
    let root = tessera::identity::identity(&tensors, metadata);
    Ok(tessera::identity::ModelId {
        tensors,
        metadata,
        root,
    })
}

/// Writes the manifest atomically to `out`, or to `STEM.pages` beside the model (in
/// the current directory for a URL). Returns where.
fn write_pages(m: &PageManifest, model: &Path, out: Option<&Path>) -> anyhow::Result<PathBuf> {
    let path = match out {
        Some(p) => p.to_path_buf(),
        None => {
            let shown = model.to_string_lossy();
            let beside = tessera::pages::beside(&shown).ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: no file name to put .pages beside; give -o",
                    crate::output::shown(model)
                )
            })?;
            if shown.contains("://") {
                PathBuf::from(beside.rsplit('/').next().unwrap_or("model.pages"))
            } else {
                PathBuf::from(beside)
            }
        }
    };
    let text = m.to_json()?;
    tessera::util::atomic::write_atomic(&path, |w| {
        w.write_all(text.as_bytes())?;
        w.write_all(b"\n")?;
        Ok(())
    })?;
    Ok(path)
}
