//! `tessera extract FILE NAME -o OUT`: a tensor in the format OUT's extension names
//! (`.npy`, or none, for NumPy; `.safetensors`, `.zt`, … — one tensor in that format, or
//! a refusal saying why), or a chunk as its raw bytes. `-o -` writes the same bytes to
//! standard output, unless it is a terminal. An unknown name suggests the closest ones.
//! A GGUF quantized tensor is written as stored to a format that holds its packed
//! blocks (`.gguf`); `--dequantize f32|f16|bf16` decodes it first (as `convert` does),
//! which any format then takes.

use std::io::{IsTerminal, Write};
use std::path::Path;

use anyhow::bail;
use tessera::{Format, Model};

use crate::cli::ExtractArgs;
use crate::output::with_file;
use crate::term::escape;

/// The format a tensor is extracted as, from the output path.
fn tensor_format(output: &Path) -> anyhow::Result<Format> {
    if output == Path::new("-") || output.extension().is_none() {
        return Ok(Format::Npy);
    }
    match Format::from_path(output) {
        Some(f) if f.can_write() => Ok(f),
        _ => bail!(
            "cannot tell a tensor format from {:?}: use .npy (or no extension) or the \
             extension of a writable format (`tessera formats`)",
            output.display()
        ),
    }
}

/// The dtype of `--dequantize` (f32, f16 or bf16; clap allows only those).
pub fn dequantize_dtype(name: Option<&str>) -> anyhow::Result<Option<tessera::DType>> {
    name.map(|d| {
        tessera::DType::from_name(d)
            .ok_or_else(|| anyhow::anyhow!("unknown dtype {d:?} for --dequantize"))
    })
    .transpose()
}

/// Writes `bytes` to OUT, or to stdout for `-` (refused when stdout is a terminal: raw
/// tensor bytes would reach it unescaped).
fn emit(output: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if output == Path::new("-") {
        let stdout = std::io::stdout();
        if stdout.is_terminal() {
            bail!("refusing to write binary data to a terminal: redirect or pipe `-o -`");
        }
        let mut lock = stdout.lock();
        lock.write_all(bytes)?;
        lock.flush()?;
        return Ok(());
    }
    tessera::util::atomic::write_bytes_atomic(output, bytes)?;
    Ok(())
}

/// Runs the verb.
pub fn run(args: &ExtractArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let to_stdout = args.output == Path::new("-");
    with_file(&args.file, &args.read, |file| {
        let to = dequantize_dtype(args.dequantize.as_deref())?;
        // With --dequantize, an MXFP4 pair's name (`X` for `X_blocks` + `X_scales`).
        let pair = match to {
            Some(to) => tessera::values::dequantized_pair(file, &args.name, to)?,
            None => None,
        };
        if pair.is_some() || file.tensor_infos().iter().any(|t| t.name == args.name) {
            let format = tensor_format(&args.output)?;
            let index = match &args.slice {
                Some(s) => Some(tessera::slice::parse(s)?),
                None => None,
            };
            let mut view = match (pair, &index) {
                (Some(v), _) => v,
                // A slice read: only its bytes where the format stores them raw.
                (None, Some(index)) if to.is_none() => {
                    let s = tessera::slice::read_slice(file, &args.name, index, None)?;
                    if let Some(why) = &s.unverified {
                        crate::term::warn(&format!("warning: {why}"));
                    }
                    tessera::TensorView::dense(s.info, s.data.into())?
                }
                (None, _) => file.tensor(&args.name)?,
            };
            if let Some(to) = to {
                view = tessera::values::dequantize(view, to)?;
            }
            if let (Some(index), Some(_)) = (&index, to) {
                // Decoded whole (GGUF blocks, an MXFP4 pair), then cut.
                let mut m = Model::new();
                m.push(view)?;
                let s = tessera::slice::read_slice(&m, &args.name, index, None)?;
                view = tessera::TensorView::dense(s.info, s.data.into())?;
            }
            if tessera::values::is_quantized(&view.info) {
                // Packed ggml blocks stay as they are, to a format that holds them.
                let holds = tessera::convert::capabilities(format).is_some_and(|c| c.other_layouts);
                if !holds {
                    return Err(tessera::Error::unsupported(format!(
                        "tensor {:?} is {} (GGUF's packed blocks), which {} cannot store; \
                         extract it to .gguf as it is",
                        args.name,
                        view.info.dtype_label(),
                        format.title()
                    ))
                    .with_hint(tessera::Hint::Dequantize)
                    .into());
                }
            } else {
                view = tessera::sparse::densify(view)?;
            }
            let packed = view.info.dtype.is_packed();
            let mut m = Model::new();
            m.push(view)?;
            // `.npy` takes the tensor as it is (a dtype NumPy has no name for is written
            // as raw void bytes, `<V1`, as before), but for a packed sub-byte float, whose
            // elements are not bytes; another format must be able to hold it.
            let prepared;
            let src: &dyn tessera::TensorSource = if format == Format::Npy && !packed {
                &m
            } else {
                let opts = tessera::ConvertOptions::default().cast(args.cast);
                prepared = tessera::convert::prepare(&m, format, opts)?;
                &prepared
            };
            if to_stdout {
                // Writers want `Seek`; standard output has none, so the file is built in
                // memory first.
                let mut buf = std::io::Cursor::new(Vec::new());
                tessera::convert::write_to(format, src, &mut buf, &Default::default())?;
                emit(&args.output, buf.get_ref())?;
            } else {
                tessera::convert::write_file(format, src, &args.output, &Default::default())?;
            }
            if !to_stdout {
                writeln!(
                    out,
                    "tensor {} ({}) -> {}",
                    escape(&format!("{:?}", args.name)),
                    format.name(),
                    args.output.display()
                )?;
            }
        } else if file.chunks().iter().any(|c| c.name == args.name) {
            let bytes = file.chunk(&args.name)?;
            emit(&args.output, &bytes)?;
            if !to_stdout {
                writeln!(
                    out,
                    "chunk {} ({}) -> {}",
                    escape(&format!("{:?}", args.name)),
                    crate::output::count(bytes.len(), "byte"),
                    args.output.display()
                )?;
            }
        } else {
            let names = file
                .tensor_infos()
                .iter()
                .map(|t| t.name.as_str())
                .chain(file.chunks().iter().map(|c| c.name.as_str()));
            let close = closest(&args.name, names);
            let hint = if close.is_empty() {
                String::new()
            } else {
                format!("; did you mean {}?", close.join(", "))
            };
            return Err(tessera::Error::not_found(format!(
                "{}: no tensor or chunk named {:?}{hint}",
                crate::output::shown(&args.file),
                args.name
            ))
            .into());
        }
        Ok(0)
    })
}

/// Up to three names within a small edit distance of `want`, closest first, quoted.
pub fn closest<'a>(want: &str, names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let limit = (want.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, &str)> = names
        .map(|n| (edit_distance(want, n), n))
        .filter(|(d, _)| *d <= limit)
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(3)
        .map(|(_, n)| format!("{n:?}"))
        .collect()
}

/// Levenshtein distance over characters (names are short; two rows of memory).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}
