//! `tessera wtxt delta|apply|sign|finalize|encrypt|decrypt`.
//!
//! - `delta BASE TARGET -o D.wtxtdelta [--with-target-root]`: the chunks that changed
//!   (DELTA v2 as RESOLUTIONS item 15 defines it; `--with-target-root` adds Tessera's
//!   extension, the target's `cap`/`root` lines and HMACs, which rebuilds any target
//!   byte for byte but which a conforming reader rejects).
//! - `apply BASE D -o OUT [--sign-key K]`: the target (unsigned unless re-signed), from
//!   either form; a delta for another base is refused.
//! - `sign FILE --key K [-o OUT]`: add or replace the `sign` line (or sign a `.wsum`).
//! - `finalize FILE [-o OUT.wsum] [--prev P] [--sign-key K] [--hmac-key-file H]`: the
//!   WSUM of a WTXT-S written without one, after checking every array (refused when one
//!   is damaged, or when the file has a root line already, or the WSUM exists).
//! - `encrypt FILE -o OUT (-r age1… | --passphrase-file F)`, `decrypt FILE -o OUT
//!   (--identity F | --passphrase-file F)`: age ASCII armor.
//!
//! Every output is written atomically.

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;

use anyhow::Context;
use tessera::formats::wtxt::{delta, WtxtFile};
use tessera::{FileData, ReadOptions};

use crate::cli::{WtxtArgs, WtxtCommand};

fn parse<'a>(path: &Path, data: &'a FileData) -> anyhow::Result<WtxtFile<'a>> {
    let opts = ReadOptions::default().path(Some(path.to_path_buf()));
    WtxtFile::parse(Cow::Borrowed(data), &opts).map_err(|e| {
        anyhow::Error::new(e.in_format(tessera::Format::Wtxt)).context(path.display().to_string())
    })
}

fn open(path: &Path) -> anyhow::Result<FileData> {
    FileData::open(path).map_err(anyhow::Error::new)
}

fn save(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    tessera::util::atomic::write_bytes_atomic(path, bytes).map_err(anyhow::Error::new)
}

/// Runs the verb.
pub fn run(args: &WtxtArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    match &args.command {
        WtxtCommand::Delta {
            base,
            target,
            output,
            with_target_root,
        } => {
            let (bd, td) = (open(base)?, open(target)?);
            let (b, t) = (parse(base, &bd)?, parse(target, &td)?);
            let d = if *with_target_root {
                delta::make_with_target_root(&b, &t)
            } else {
                delta::make(&b, &t)
            }
            .map_err(anyhow::Error::new)?;
            save(output, &d)?;
            writeln!(
                out,
                "{} -> {}: delta of {} bytes ({:.1}% of the target)",
                base.display(),
                target.display(),
                d.len(),
                100.0 * d.len() as f64 / td.len().max(1) as f64
            )?;
        }
        WtxtCommand::Apply {
            base,
            delta: dp,
            output,
            sign_key,
        } => {
            let bd = open(base)?;
            let dd = std::fs::read(dp).with_context(|| format!("reading {}", dp.display()))?;
            let mut t = delta::apply(&parse(base, &bd)?, &dd).map_err(anyhow::Error::new)?;
            if let Some(k) = sign_key {
                t = delta::sign(&t, &crate::cmd::keys::load_secret_key(k)?)
                    .map_err(anyhow::Error::new)?;
            }
            save(output, &t)?;
            writeln!(
                out,
                "{} + {} -> {}",
                base.display(),
                dp.display(),
                output.display()
            )?;
        }
        WtxtCommand::Sign { file, key, output } => {
            let seed = crate::cmd::keys::load_secret_key(key)?;
            let data =
                std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
            let signed = delta::sign(&data, &seed).map_err(anyhow::Error::new)?;
            let dest = output.as_ref().unwrap_or(file);
            save(dest, &signed)?;
            let public = tessera::signing::ed25519::public_key(&seed);
            writeln!(
                out,
                "signed {} (keyid {})",
                dest.display(),
                tessera::util::hex(&tessera::formats::wtxt::header::keyid(&public))
            )?;
        }
        WtxtCommand::Finalize {
            file,
            output,
            prev,
            sign_key,
            hmac_key_file,
        } => {
            let seed = sign_key
                .as_ref()
                .map(|k| crate::cmd::keys::load_secret_key(k))
                .transpose()?;
            let hmac = hmac_key_file
                .as_ref()
                .map(|k| std::fs::read(k).with_context(|| format!("reading {}", k.display())))
                .transpose()?;
            let dest = tessera::formats::wtxt::wsum::finalize_file(
                file,
                output.as_deref(),
                prev.as_deref(),
                hmac.as_deref(),
                seed.as_ref(),
            )
            .map_err(anyhow::Error::new)?;
            writeln!(
                out,
                "finalized {} -> {}{}",
                file.display(),
                dest.display(),
                if seed.is_some() { " (signed)" } else { "" }
            )?;
        }
        WtxtCommand::Encrypt {
            file,
            output,
            recipient,
            passphrase_file,
        } => {
            let data =
                std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
            let pass = match passphrase_file {
                Some(p) => Some(
                    std::fs::read_to_string(p)
                        .with_context(|| format!("reading {}", p.display()))?
                        .trim_end_matches(['\n', '\r'])
                        .to_string(),
                ),
                None => None,
            };
            let enc = tessera::formats::wtxt::crypt::encrypt(&data, recipient, pass.as_deref())
                .map_err(anyhow::Error::new)?;
            save(output, &enc)?;
            writeln!(out, "encrypted {} -> {}", file.display(), output.display())?;
        }
        WtxtCommand::Decrypt { file, output, read } => {
            let opts = crate::output::read_options(file, &read.to_read())?;
            let data =
                std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
            let plain =
                tessera::formats::wtxt::crypt::decrypt(&data, &opts).map_err(anyhow::Error::new)?;
            save(output, &plain)?;
            writeln!(out, "decrypted {} -> {}", file.display(), output.display())?;
        }
    }
    Ok(0)
}
