//! `wtxt`: WTXT encode and decode+verify throughput (MB/s of raw tensor bytes) beside
//! the same run's bound: base64 in 76-column lines plus the SHA-256 passes the format
//! needs (per chunk, per array, `sha256_all`), spread over every core with rayon.

use std::borrow::Cow;
use std::io::Cursor;
use std::time::Instant;

use rayon::prelude::*;
use tessera::convert::{write_to, WriteOptions};
use tessera::formats::wtxt;
use tessera::{Container, Format, ReadOptions, TensorSource, VerifyOptions};

use crate::common::{report, synthetic_model, Opts};

const CHUNK: usize = 32 * 1024;

fn bound_encode(data: &[u8], scratch: &mut Vec<u8>, text: &mut Vec<u8>) -> usize {
    text.clear();
    for c in data.chunks(CHUNK) {
        let n = base64_simd::STANDARD.encoded_length(c.len());
        scratch.resize(n, 0);
        let enc = base64_simd::STANDARD.encode(c, base64_simd::Out::from_slice(scratch));
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

thread_local! {
    /// Per-thread buffers of the decode bound, kept across runs (rayon's `map_init`
    /// would make fresh ones per split and pay their page faults).
    static DECODE_BUFS: std::cell::RefCell<(Vec<u8>, Vec<u8>)> = Default::default();
}

fn bound_decode(chunks: &[Vec<u8>], raw_len: usize) -> usize {
    DECODE_BUFS.with(|b| {
        let (scratch, out) = &mut *b.borrow_mut();
        out.resize(raw_len.max(out.len()), 0);
        let mut pos = 0;
        for text in chunks {
            scratch.clear();
            for l in text.chunks(77) {
                scratch.extend_from_slice(&l[..l.len() - 1]);
            }
            let n = base64_simd::STANDARD.decoded_length(scratch).unwrap_or(0);
            let dst = &mut out[pos..pos + n];
            let _ = base64_simd::STANDARD.decode(scratch, base64_simd::Out::from_slice(dst));
            std::hint::black_box(tessera::util::sha256(dst));
            pos += n;
        }
        std::hint::black_box(tessera::util::sha256(&out[..pos]));
        std::hint::black_box(tessera::util::sha256(&out[..pos]));
        pos
    })
}

/// Process CPU time (user + system) in seconds, from /proc/self/stat (Linux; 0 elsewhere).
pub(crate) fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let t = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 of stat; `rest` starts at field 3. Clock ticks are 100 Hz.
    (t(11) + t(12)) / 100.0
}

fn cpu_line(ours: f64, bound: f64) {
    if bound > 0.0 {
        println!(
            "    CPU time over all runs: ours {ours:.2} s, bound {bound:.2} s ({:.2}x the bound's work)",
            ours / bound
        );
    }
}

/// Best wall times of `a` and `b`, run alternately so both see the same machine load
/// (the benchmark machine is shared), and their total CPU times (work, whatever the
/// load).
fn best_pair<A, B>(
    reps: usize,
    mut a: impl FnMut() -> A,
    mut b: impl FnMut() -> B,
) -> (f64, f64, f64, f64) {
    let (mut ta, mut tb) = (f64::INFINITY, f64::INFINITY);
    let (mut ca, mut cb) = (0.0, 0.0);
    for _ in 0..reps.max(1) {
        let (t, c) = (Instant::now(), cpu_secs());
        std::hint::black_box(a());
        ta = ta.min(t.elapsed().as_secs_f64());
        ca += cpu_secs() - c;
        let (t, c) = (Instant::now(), cpu_secs());
        std::hint::black_box(b());
        tb = tb.min(t.elapsed().as_secs_f64());
        cb += cpu_secs() - c;
    }
    (ta, tb, ca, cb)
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
        "wtxt: {} tensors, {:.0} MiB raw, {} threads (each line: best of {}, ours and the bound alternating)",
        tensors.len(),
        bytes as f64 / 1048576.0,
        rayon::current_num_threads(),
        opts.reps
    );
    if std::env::var_os("WTXT_MICRO").is_some() {
        let all: Vec<u8> = tensors.concat();
        let t = Instant::now();
        std::hint::black_box(tessera::util::sha256(&all));
        println!(
            "micro sha256 1 pass: {:.0} MB/s",
            bytes as f64 / t.elapsed().as_secs_f64() / 1e6
        );
        let t = Instant::now();
        let mut x = 0u32;
        for c in all.chunks(CHUNK) {
            x ^= tessera::util::crc32c(c);
        }
        std::hint::black_box(x);
        println!(
            "micro crc32c: {:.0} MB/s",
            bytes as f64 / t.elapsed().as_secs_f64() / 1e6
        );
        let t = Instant::now();
        let mut x = 0u64;
        for c in all.chunks(CHUNK) {
            x ^= tessera::formats::wtxt::write::xor_at(c, 3);
        }
        std::hint::black_box(x);
        println!(
            "micro fastxor: {:.0} MB/s",
            bytes as f64 / t.elapsed().as_secs_f64() / 1e6
        );
        let t = Instant::now();
        let (mut s1, mut s2) = (Vec::new(), Vec::new());
        std::hint::black_box(bound_encode(&all, &mut s1, &mut s2));
        println!(
            "micro bound_encode 1 thread: {:.0} MB/s",
            bytes as f64 / t.elapsed().as_secs_f64() / 1e6
        );
    }
    let wo = WriteOptions::default().timestamp(Some("2025-01-01T00:00:00Z".into()));
    // The output buffer is reused across runs (as the bound reuses its buffers), so
    // neither side pays page faults for fresh memory after the first run.
    let mut outbuf: Vec<u8> = Vec::with_capacity(bytes * 142 / 100);
    let mut encode = || {
        let mut v = std::mem::take(&mut outbuf);
        v.clear();
        let mut c = Cursor::new(v);
        let r = write_to(Format::Wtxt, &model, &mut c, &wo);
        outbuf = c.into_inner();
        r.map(|_| outbuf.len())
    };
    // Bound, encode: every tensor's chunks base64'd into 76-column lines and SHA-256'd,
    // plus two whole-tensor SHA-256 passes (array sha256, sha256_all), tensors spread
    // over the cores.
    // Each tensor's text goes to its own buffer, kept across runs: like the real
    // output, the whole text is in memory at the end.
    let mut bound_texts: Vec<Vec<u8>> = vec![Vec::new(); tensors.len()];
    if std::env::var_os("WTXT_ENCODE_ONLY").is_some() {
        for _ in 0..opts.reps {
            let t = Instant::now();
            encode()?;
            println!(
                "encode {:.0} MB/s",
                bytes as f64 / t.elapsed().as_secs_f64() / 1e6
            );
        }
        return Ok(());
    }
    let (enc, b_enc, ca, cb) = best_pair(opts.reps, &mut encode, || {
        tensors
            .par_iter()
            .zip(bound_texts.par_iter_mut())
            .map_init(Vec::new, |scratch, (t, text)| {
                bound_encode(t, scratch, text)
            })
            .sum::<usize>()
    });
    drop(bound_texts);
    report(
        "wtxt encode (write to memory)",
        bytes,
        enc,
        Some(("bound", b_enc)),
    );
    cpu_line(ca, cb);
    encode()?;
    let file = outbuf;

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
    let bound_dec = || {
        texts
            .par_iter()
            .zip(&tensors)
            .map(|(x, t)| bound_decode(x, t.len()))
            .sum::<usize>()
    };
    let (ver, b_dec, ca, cb) = best_pair(
        opts.reps,
        || {
            let f = wtxt::open_container(Cow::Borrowed(&file), &ReadOptions::default())?;
            Ok::<bool, tessera::Error>(f.verify(&VerifyOptions::default()).is_ok())
        },
        bound_dec,
    );
    report(
        "wtxt decode+verify (every layer)",
        bytes,
        ver,
        Some(("bound", b_dec)),
    );
    cpu_line(ca, cb);
    let (load, ..) = best_pair(
        opts.reps,
        || {
            let f = wtxt::open_container(Cow::Borrowed(&file), &ReadOptions::default())?;
            let mut n = 0;
            for i in f.tensor_infos() {
                n += f.tensor(&i.name)?.nbytes();
            }
            Ok::<u64, tessera::Error>(n)
        },
        bound_dec,
    );
    // Loading checks parity, crc32c and one SHA-256 pass (the array's): no bound line.
    report(
        "wtxt load all tensors (parity, crc32c, 1 sha256 pass)",
        bytes,
        load,
        None,
    );
    println!(
        "text: {:.0} MiB ({:.3} bytes per raw byte)",
        file.len() as f64 / 1048576.0,
        file.len() as f64 / bytes as f64
    );
    Ok(())
}
