//! `wtxt`: WTXT encode and decode+verify throughput (MB/s of raw tensor bytes) beside
//! the same run's bound: base64 in 76-column lines plus the SHA-256 passes the format
//! needs (per chunk, per array, `sha256_all`), spread over every core with rayon.

use std::borrow::Cow;
use std::io::Cursor;

use rayon::prelude::*;
use tessera::convert::{write_to, WriteOptions};
use tessera::formats::wtxt;
use tessera::{Container, Format, ReadOptions, TensorSource, VerifyOptions};

use crate::common::{best_of, report, synthetic_model, Opts};

const CHUNK: usize = 32 * 1024;

fn bound_encode(data: &[u8]) -> usize {
    let mut scratch = Vec::new();
    let mut text = Vec::with_capacity(data.len() * 139 / 100);
    for c in data.chunks(CHUNK) {
        let n = base64_simd::STANDARD.encoded_length(c.len());
        scratch.resize(n, 0);
        let enc = base64_simd::STANDARD.encode(c, base64_simd::Out::from_slice(&mut scratch));
        for l in enc.chunks(76) {
            text.extend_from_slice(l);
            text.push(b'\n');
        }
        std::hint::black_box(tessera::util::sha256(c));
    }
    std::hint::black_box(tessera::util::sha256(data));
    std::hint::black_box(tessera::util::sha256(data));
    text.len()
}

fn bound_decode(chunks: &[Vec<u8>], raw_len: usize) -> usize {
    let mut out = vec![0u8; raw_len];
    let mut scratch = Vec::new();
    let mut pos = 0;
    for text in chunks {
        scratch.clear();
        for l in text.chunks(77) {
            scratch.extend_from_slice(&l[..l.len() - 1]);
        }
        let n = base64_simd::STANDARD.decoded_length(&scratch).unwrap_or(0);
        let dst = &mut out[pos..pos + n];
        let _ = base64_simd::STANDARD.decode(&scratch, base64_simd::Out::from_slice(dst));
        std::hint::black_box(tessera::util::sha256(dst));
        pos += n;
    }
    std::hint::black_box(tessera::util::sha256(&out));
    std::hint::black_box(tessera::util::sha256(&out));
    pos
}

/// Runs the suite.
pub fn run(opts: &Opts) -> tessera::Result<()> {
    let model = synthetic_model(opts)?;
    let bytes: usize = model
        .tensor_infos()
        .iter()
        .map(|i| i.dense_nbytes().unwrap_or(0) as usize)
        .sum();
    let tensors: Vec<Vec<u8>> = model
        .tensor_infos()
        .iter()
        .map(|i| model.tensor(&i.name).map(|t| t.data().map(<[u8]>::to_vec)))
        .collect::<tessera::Result<tessera::Result<_>>>()??;
    println!(
        "wtxt: {} tensors, {:.0} MiB raw, {} threads",
        tensors.len(),
        bytes as f64 / 1048576.0,
        rayon::current_num_threads()
    );

    // Bound, encode: every tensor's chunks base64'd into 76-column lines and SHA-256'd,
    // plus two whole-tensor SHA-256 passes, tensors spread over the cores.
    let b_enc = best_of(opts.reps, || {
        tensors.par_iter().map(|t| bound_encode(t)).sum::<usize>()
    });
    // Text for the decode bound: per chunk, its 76-column lines.
    let texts: Vec<Vec<Vec<u8>>> = tensors
        .par_iter()
        .map(|t| {
            t.chunks(CHUNK)
                .map(|c| {
                    let e = base64_simd::STANDARD.encode_to_string(c);
                    let mut v = Vec::new();
                    for l in e.as_bytes().chunks(76) {
                        v.extend_from_slice(l);
                        v.push(b'\n');
                    }
                    v
                })
                .collect()
        })
        .collect();
    let b_dec = best_of(opts.reps, || {
        texts
            .par_iter()
            .zip(&tensors)
            .map(|(x, t)| bound_decode(x, t.len()))
            .sum::<usize>()
    });
    drop(texts);

    let wo = WriteOptions {
        timestamp: Some("2025-01-01T00:00:00Z".into()),
        ..WriteOptions::default()
    };
    let enc = best_of(opts.reps, || {
        let mut c = Cursor::new(Vec::with_capacity(bytes * 142 / 100));
        write_to(Format::Wtxt, &model, &mut c, &wo).map(|_| c.into_inner())
    });
    let mut c = Cursor::new(Vec::with_capacity(bytes * 142 / 100));
    write_to(Format::Wtxt, &model, &mut c, &wo)?;
    let file = c.into_inner();
    report(
        "wtxt encode (write to memory)",
        bytes,
        enc,
        Some(("bound", b_enc)),
    );
    let ver = best_of(opts.reps, || {
        let f = wtxt::open_container(Cow::Borrowed(&file), &ReadOptions::default())?;
        let r = f.verify(&VerifyOptions::default());
        Ok::<bool, tessera::Error>(r.is_ok())
    });
    report(
        "wtxt decode+verify (every layer)",
        bytes,
        ver,
        Some(("bound", b_dec)),
    );
    let load = best_of(opts.reps, || {
        let f = wtxt::open_container(Cow::Borrowed(&file), &ReadOptions::default())?;
        let mut n = 0;
        for i in f.tensor_infos() {
            n += f.tensor(&i.name)?.nbytes();
        }
        Ok::<u64, tessera::Error>(n)
    });
    report(
        "wtxt load all tensors (parity, crc32c, sha256)",
        bytes,
        load,
        Some(("bound", b_dec)),
    );
    println!(
        "text: {:.0} MiB ({:.3} bytes per raw byte)",
        file.len() as f64 / 1048576.0,
        file.len() as f64 / bytes as f64
    );
    Ok(())
}
