//! `tessera sign FILE --key KEY -o model.sig [--metadata]`: a detached Ed25519 signature
//! over the model's tensor manifest (see `tessera::signing`). It verifies against any
//! conversion of the model: `tessera verify OTHER --signature model.sig --public-key
//! KEY.pub`.

use std::io::Write;

use crate::cli::SignArgs;
use crate::output::{with_file, ProgressSource};

/// Runs the verb.
pub fn run(args: &SignArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let seed = crate::cmd::keys::load_secret_key(&args.key)?;
    with_file(&args.file, &args.read, |file| {
        let progress = ProgressSource::new(file, "hashing");
        let id = tessera::identity::model_id(&progress, args.metadata);
        progress.finish();
        let signed = tessera::signing::SignedManifest::sign_id(&id?, &seed)?;
        tessera::util::atomic::write_bytes_atomic(&args.output, signed.to_json()?.as_bytes())?;
        writeln!(
            out,
            "signed {} ({} tensors{}, id {}) -> {}",
            args.file.display(),
            signed.tensors.len(),
            if args.metadata { " and metadata" } else { "" },
            signed.id,
            args.output.display()
        )?;
        Ok(0)
    })
}
