//! `tessera sign FILE --key KEY -o model.sig [--metadata] [--format tessera|model-signing]`:
//! a detached signature (Ed25519 or ECDSA P-256, after the key) over the model's tensor manifest (see `tessera::signing`). It
//! verifies against any conversion of the model: `tessera verify OTHER --signature
//! model.sig --public-key KEY.pub`. `--format model-signing` writes an OpenSSF
//! model-signing bundle over the model's files instead, carrying the tensor manifest
//! (`tessera::signing::bundle`); `model_signing verify key` accepts it.
//!
//! Also the signature branch of `tessera verify`: [`read_detached`] recognises either
//! kind of signature file by its content, [`check_detached`] checks it.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use tessera::signing::bundle::{self, Bundle};
use tessera::signing::files::{self, HashType, Method, Serialization};
use tessera::signing::key::PublicKey;
use tessera::signing::{Manifest, SignedManifest};
use tessera::{Container, Status, VerifyReport};

use crate::cli::{SignArgs, VerifyArgs};
use crate::output::{with_file, ProgressSource};

/// Runs the verb.
pub fn run(args: &SignArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let key = crate::cmd::keys::load_any_secret_key(&args.key)?;
    let bundle_format = args.format == "model-signing";
    if bundle_format && !matches!(key, tessera::signing::key::SecretKey::EcdsaP256(_)) {
        return Err(anyhow::Error::new(tessera::Error::invalid_input(format!(
            "{}: a model-signing bundle needs an ECDSA P-256 PEM key (tessera keygen \
             --algorithm ecdsa-p256), not an {} key",
            args.key.display(),
            key.algorithm()
        ))));
    }
    if args.pages.is_some() && bundle_format {
        return Err(anyhow::Error::new(tessera::Error::invalid_input(
            "--pages goes into Tessera's signed manifest: use --format tessera (or --embed)",
        )));
    }
    let pages = match &args.pages {
        Some(p) => Some(tessera::pages::PageManifest::load(p)?),
        None => None,
    };
    if args.embed {
        return run_embed(args, &key, pages.as_ref(), out);
    }
    with_file(&args.file, &args.read, |file| {
        let progress = ProgressSource::new(file, "hashing");
        let id = tessera::identity::model_id(&progress, args.metadata);
        progress.finish();
        let id = id?;
        let (text, what) = if bundle_format {
            let (text, count) = sign_bundle(&args.file, &args.output, &id, &key)?;
            (
                text,
                format!("{count} file{}", if count == 1 { "" } else { "s" }),
            )
        } else {
            (
                SignedManifest::sign_id_with_pages(&id, pages.as_ref(), &key)?.to_json()?,
                String::new(),
            )
        };
        tessera::util::atomic::write_bytes_atomic(&args.output, text.as_bytes())?;
        writeln!(
            out,
            "signed {} ({}{}{}{}{}, id {}) -> {}",
            crate::output::shown(&args.file),
            crate::output::count(id.tensors.len(), "tensor"),
            if args.metadata { " and metadata" } else { "" },
            if pages.is_some() {
                " and its page manifest"
            } else {
                ""
            },
            if what.is_empty() { "" } else { ", " },
            what,
            id.root,
            args.output.display()
        )?;
        Ok(0)
    })
}

/// `--embed`: the signed manifest into the file's own metadata, written to `-o`.
fn run_embed(
    args: &SignArgs,
    key: &tessera::signing::key::SecretKey,
    pages: Option<&tessera::pages::PageManifest>,
    out: &mut dyn Write,
) -> anyhow::Result<u8> {
    use tessera::signing::embed::{self, Reframed};
    // The same remote settings (`--endpoint`, `--token`) as every reading verb.
    let opts = crate::output::read_options(&args.file, &args.read)?
        .remote(crate::output::remote_options(&args.read));
    let opened = tessera::open_path(&args.file, &opts).map_err(anyhow::Error::new)?;
    if opened.as_set().is_some() {
        return Err(anyhow::Error::new(tessera::Error::unsupported(format!(
            "{} is a model set: --embed signs one file (sign the set with a detached \
             signature)",
            crate::output::shown(&args.file)
        ))));
    }
    let file = opened.container();
    let format = file.format();
    embed::check_format(format)?;
    if let Some(named) = tessera::Format::from_path(&args.output) {
        let zt = |f| matches!(f, tessera::Format::Ztensor | tessera::Format::ZtensorV2);
        if named != format && !(zt(named) && zt(format)) {
            return Err(anyhow::Error::new(tessera::Error::invalid_input(format!(
                "{} names a {} file, but --embed writes {} as it is ({}); convert it first",
                args.output.display(),
                named.title(),
                crate::output::shown(&args.file),
                format.title()
            ))));
        }
    }
    let unsigned = Reframed::without_signature(file);
    let progress = ProgressSource::new(&unsigned, "hashing");
    let id = tessera::identity::model_id(&progress, args.metadata);
    progress.finish();
    let id = id?;
    let text = SignedManifest::sign_id_with_pages(&id, pages, key)?.to_compact_json()?;
    let signed = Reframed::with_signature(file, &text);
    tessera::convert::convert_file(
        &signed,
        format,
        &args.output,
        tessera::ConvertOptions::default(),
        &tessera::WriteOptions::default(),
    )?;
    writeln!(
        out,
        "signed {} ({}{}, id {}) -> {} (embedded as {:?})",
        crate::output::shown(&args.file),
        crate::output::count(id.tensors.len(), "tensor"),
        if args.metadata { " and metadata" } else { "" },
        id.root,
        args.output.display(),
        embed::KEY
    )?;
    Ok(0)
}

/// The model-signing bundle over the files at `path` (the signature file skipped when
/// it lies inside), with the tensor manifest; returns its text and the file count.
fn sign_bundle(
    path: &Path,
    output: &Path,
    id: &tessera::identity::ModelId,
    key: &tessera::signing::key::SecretKey,
) -> anyhow::Result<(String, usize)> {
    let mut ignore: Vec<String> = files::GIT_PATHS.iter().map(|s| s.to_string()).collect();
    if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        ignore.extend(files::relative_inside(path, output));
    }
    let ser = Serialization {
        method: Method::Files,
        hash: HashType::Sha256,
        allow_symlinks: false,
        ignore_paths: ignore,
    };
    let resources = files::hash_model(path, &ser, &[])
        .with_context(|| format!("hashing the files of {}", path.display()))?;
    let name = std::fs::canonicalize(path)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| path.display().to_string());
    let text = bundle::sign(&name, &ser, &resources, Some(&Manifest::of(id)), key)?;
    Ok((text, resources.len()))
}

/// A detached signature file of either kind.
pub enum Detached {
    /// `tessera sign`'s manifest.
    Tessera(SignedManifest),
    /// An OpenSSF model-signing bundle.
    Bundle(Bundle),
}

/// Reads a signature file, recognising its kind by its content.
pub fn read_detached(path: &Path) -> anyhow::Result<Detached> {
    let bytes =
        std::fs::read(path).with_context(|| format!("reading the signature {}", path.display()))?;
    let parsed = if bundle::is_bundle(&bytes) {
        Bundle::parse(&bytes).map(Detached::Bundle)
    } else {
        SignedManifest::parse(&bytes).map(Detached::Tessera)
    };
    parsed.with_context(|| format!("signature {}", path.display()))
}

/// The checks of a signature embedded in `file` (`tessera sign --embed`), when it
/// carries one: against `key`, or one "not checked" line without a key.
pub fn check_embedded(
    file: &dyn Container,
    key: Option<&PublicKey>,
    only: &[String],
) -> Option<VerifyReport> {
    match key {
        Some(k) => tessera::signing::embed::verify_embedded(file, k, only),
        None => {
            let _present = tessera::signing::embed::embedded(file)?;
            let mut r = VerifyReport::default();
            r.push(
                "embedded signature",
                tessera::signing::LAYER,
                Status::NotChecked,
                Some("no --public-key given".into()),
            );
            Some(r)
        }
    }
}

/// Checks `file` (opened from `args.file`) against a detached signature with the trusted
/// `key`: the signature's checks, in a report of their own.
pub fn check_detached(
    detached: &Detached,
    file: &dyn Container,
    key: &PublicKey,
    args: &VerifyArgs,
) -> anyhow::Result<VerifyReport> {
    match detached {
        Detached::Tessera(signed) => Ok(signed.verify(file, key, &args.tensor)),
        Detached::Bundle(b) => {
            let mut report = VerifyReport::default();
            let statement = match b.verify(key) {
                Ok(s) => s,
                // A signature or digest that does not match fails (exit 1); a bundle this
                // cannot check (an unsupported hash, a malformed statement, a key of the
                // wrong kind) is an error of its own kind, never a failed check.
                Err(e) if e.kind() == tessera::ErrorKind::Integrity => {
                    report.failed("signature", bundle::LAYER, e.message().to_string());
                    return Ok(report);
                }
                Err(e) => {
                    return Err(anyhow::Error::new(e)).with_context(|| {
                        format!(
                            "signature {}",
                            args.signature.as_deref().unwrap_or(Path::new("")).display()
                        )
                    })
                }
            };
            report.ok("signature", bundle::LAYER);
            if args.tensors_only || !args.tensor.is_empty() {
                report.push(
                    "files",
                    bundle::LAYER,
                    Status::NotChecked,
                    Some(if args.tensors_only {
                        "--tensors-only: the signed tensor manifest alone".into()
                    } else {
                        "--tensor: only the tensors named".into()
                    }),
                );
            } else {
                let sig = args.signature.as_deref().unwrap_or(Path::new(""));
                let extra: Vec<String> = files::relative_inside(&args.file, sig)
                    .into_iter()
                    .collect();
                statement
                    .check_files(&args.file, &extra, &mut report)
                    .with_context(|| {
                        format!("hashing the files of {}", crate::output::shown(&args.file))
                    })?;
            }
            match &statement.tensors {
                Some(m) => m.check(file, &args.tensor, &mut report),
                None if args.tensors_only || !args.tensor.is_empty() => report.failed(
                    "tensors",
                    bundle::LAYER,
                    "the bundle carries no Tessera tensor manifest (model-signing signs files)",
                ),
                None => {}
            }
            Ok(report)
        }
    }
}
