//! `tessera-bench ztensor`: zTensor on a synthetic model (~1 GiB of ~200 f32 tensors by
//! default), against the `safetensors` crate and plain-memory bounds in the same run.
//!
//! - open + index: `FileData::open` + `ZtensorFile::parse` vs the same mmap +
//!   `safetensors::SafeTensors::deserialize` of the same tensors as a .safetensors file
//!   (and the parse alone, on an already mapped file); ratios above 1 mean faster;
//! - read every tensor zero-copy: a borrowed view of each (and one byte per page read,
//!   so the mapping is touched), vs the safetensors crate's views, same touching;
//! - load owned: every tensor copied into a fresh `Vec`, vs one memcpy of the same bytes
//!   into a fresh `Vec` (page faults on fresh memory dominate both);
//! - write: `convert::write_file` (temp file, fsync, rename) vs one `write_all` of the
//!   same bytes plus fsync;
//! - the same write to .safetensors (our writer, same path): a .zt save costs what a
//!   .safetensors save does;
//! - zstd (level 3) write and owned load, beside zstd on every core (one frame per
//!   tensor, compressed / decompressed on the rayon pool);
//! - convert the zstd .zt to .safetensors (`convert_file`: decode, write, fsync) beside
//!   its bound: decompressing every frame on the pool, then one `write_all` + fsync.

use std::io::Write;
use std::time::Instant;

use rayon::prelude::*;

use tessera::convert::{Compression, WriteOptions};
use tessera::formats::ztensor::ZtensorFile;
use tessera::{FileData, Format, ReadOptions, TensorSource};

use crate::common::{best_of, report, synthetic_model, Opts};

fn touch(bytes: &[u8]) -> u64 {
    bytes.iter().step_by(4096).map(|&b| b as u64).sum::<u64>() + bytes.len() as u64
}

/// Runs the suite.
pub fn run(opts: &Opts) -> tessera::Result<()> {
    let model = synthetic_model(opts)?;
    let total: usize = model
        .tensor_infos()
        .iter()
        .map(|t| t.dense_nbytes().unwrap_or(0) as usize)
        .sum();
    let dir = tempfile::tempdir()?;
    let zt = dir.path().join("model.zt");
    let st = dir.path().join("model.safetensors");
    println!(
        "zTensor: {} tensors, {:.0} MiB (best of {})",
        opts.tensors,
        total as f64 / (1 << 20) as f64,
        opts.reps
    );

    // Write.
    let wopts = WriteOptions::default();
    let ours = best_of(opts.reps, || {
        tessera::convert::write_file(Format::Ztensor, &model, &zt, &wopts).map(|_| ())
    });
    let flat: Vec<u8> = {
        let mut v = Vec::with_capacity(total);
        for info in model.tensor_infos() {
            v.extend_from_slice(model.tensor(&info.name)?.data()?);
        }
        v
    };
    let raw_path = dir.path().join("raw.bin");
    let base = best_of(opts.reps, || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&raw_path)?;
        f.write_all(&flat)?;
        f.sync_all()
    });
    drop(flat);
    std::fs::remove_file(&raw_path)?;
    report(
        "write (temp + fsync + rename)",
        total,
        ours,
        Some(("one write_all + fsync", base)),
    );
    let st_ours = dir.path().join("ours.safetensors");
    let st_w = best_of(opts.reps, || {
        tessera::convert::write_file(Format::Safetensors, &model, &st_ours, &wopts).map(|_| ())
    });
    std::fs::remove_file(&st_ours)?;
    report(
        "write .zt vs our .safetensors write",
        total,
        ours,
        Some(("our .safetensors write", st_w)),
    );

    // The same tensors as safetensors, written by the safetensors crate.
    {
        let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = model
            .tensor_infos()
            .iter()
            .map(|info| {
                let t = model.tensor(&info.name).expect("in-memory tensor");
                let part = t.parts.into_iter().next().expect("dense part");
                let data: &[u8] = match part.bytes {
                    std::borrow::Cow::Borrowed(b) => b,
                    std::borrow::Cow::Owned(_) => unreachable!("Model hands out borrowed parts"),
                };
                let shape = info.shape.iter().map(|&d| d as usize).collect();
                (
                    info.name.clone(),
                    safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape, data)
                        .expect("consistent view"),
                )
            })
            .collect();
        safetensors::serialize_to_file(views, None, &st)
            .map_err(|e| tessera::Error::invalid_input(e.to_string()))?;
    }

    // Open + index. The two sides alternate call by call, and the median is kept, so
    // load from other processes hits both alike.
    let ro = ReadOptions::default();
    let n = opts.reps.max(1) * 40;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (mut a, mut b, mut c, mut d) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let zmap = FileData::open(&zt)?;
    let smap = FileData::open(&st)?;
    for _ in 0..n {
        let t = Instant::now();
        let data = FileData::open(&zt)?;
        std::hint::black_box(ZtensorFile::parse(&data, &ro)?.tensor_infos().len());
        a.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let data = FileData::open(&st)?;
        let f = safetensors::SafeTensors::deserialize(&data)
            .map_err(|e| tessera::Error::malformed(e.to_string()))?;
        std::hint::black_box(f.len());
        b.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        std::hint::black_box(ZtensorFile::parse(&zmap, &ro)?.tensor_infos().len());
        c.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let f = safetensors::SafeTensors::deserialize(&smap)
            .map_err(|e| tessera::Error::malformed(e.to_string()))?;
        std::hint::black_box(f.len());
        d.push(t.elapsed().as_secs_f64());
    }
    let (ours, theirs, p, q) = (median(a), median(b), median(c), median(d));
    println!(
        "{:<44} {:>9.1} us      {:.2}x safetensors crate ({:.1} us)",
        "index only (parse an already mapped file)",
        p * 1e6,
        q / p,
        q * 1e6
    );
    println!(
        "{:<44} {:>9.1} us      {:.2}x safetensors crate ({:.1} us)",
        "open + index (mmap + parse)",
        ours * 1e6,
        theirs / ours,
        theirs * 1e6
    );

    // Zero-copy reads (touching one byte per page).
    let zdata = FileData::open(&zt)?;
    let zf = ZtensorFile::parse(&zdata, &ro)?;
    let sdata = FileData::open(&st)?;
    let sf = safetensors::SafeTensors::deserialize(&sdata)
        .map_err(|e| tessera::Error::malformed(e.to_string()))?;
    let ours = best_of(opts.reps, || {
        let mut s = 0u64;
        for info in zf.tensor_infos() {
            let v = zf.tensor(&info.name).expect("tensor");
            assert!(v.is_borrowed());
            s += touch(v.data().expect("dense"));
        }
        s
    });
    let theirs = best_of(opts.reps, || {
        let mut s = 0u64;
        for name in sf.names() {
            s += touch(sf.tensor(name).expect("tensor").data());
        }
        s
    });
    report(
        "read every tensor zero-copy",
        total,
        ours,
        Some(("safetensors crate", theirs)),
    );

    // Owned loads.
    let ours = best_of(opts.reps, || {
        let mut out = Vec::with_capacity(zf.tensor_infos().len());
        for info in zf.tensor_infos() {
            out.push(
                zf.tensor(&info.name)
                    .expect("tensor")
                    .data()
                    .expect("dense")
                    .to_vec(),
            );
        }
        out
    });
    let src = vec![1u8; total];
    let memcpy = best_of(opts.reps, || src.to_vec());
    drop(src);
    report(
        "load every tensor owned (to_vec)",
        total,
        ours,
        Some(("memcpy into a fresh Vec", memcpy)),
    );
    drop(zf);
    drop(zdata);

    // zstd, for information.
    let zst = dir.path().join("model.zstd.zt");
    let zopts = WriteOptions::default().compression(Compression::Zstd(3));
    let w = best_of(opts.reps, || {
        tessera::convert::write_file(Format::Ztensor, &model, &zst, &zopts).map(|_| ())
    });
    let zsize = std::fs::metadata(&zst)?.len();
    let views = model
        .tensor_infos()
        .iter()
        .map(|t| model.tensor(&t.name))
        .collect::<tessera::Result<Vec<_>>>()?;
    let tensors = views
        .iter()
        .map(|v| v.data())
        .collect::<tessera::Result<Vec<&[u8]>>>()?;
    let threads = rayon::current_num_threads();
    let zbound = best_of(opts.reps, || {
        tensors
            .par_iter()
            .map(|t| zstd::bulk::compress(t, 3).map(|c| c.len()).unwrap_or(0))
            .sum::<usize>()
    });
    report(
        &format!("write zstd-3 (ratio {:.2})", zsize as f64 / total as f64),
        total,
        w,
        Some((&format!("zstd-3 on {threads} threads"), zbound)),
    );
    let frames: Vec<Vec<u8>> = tensors
        .par_iter()
        .map(|t| zstd::bulk::compress(t, 3).unwrap_or_default())
        .collect();
    let unz = best_of(opts.reps, || {
        frames
            .par_iter()
            .zip(&tensors)
            .map(|(f, t)| {
                zstd::bulk::decompress(f, t.len())
                    .map(|d| d.len())
                    .unwrap_or(0)
            })
            .sum::<usize>()
    });
    let unz1 = best_of(opts.reps, || {
        frames
            .iter()
            .zip(&tensors)
            .map(|(f, t)| {
                zstd::bulk::decompress(f, t.len())
                    .map(|d| d.len())
                    .unwrap_or(0)
            })
            .sum::<usize>()
    });
    // The convert bound: decode every frame (on the pool), then write it all + fsync.
    let out = dir.path().join("bound.bin");
    let conv_bound = best_of(opts.reps, || -> std::io::Result<()> {
        let decoded: Vec<Vec<u8>> = frames
            .par_iter()
            .zip(&tensors)
            .map(|(f, t)| zstd::bulk::decompress(f, t.len()).unwrap_or_default())
            .collect();
        let mut f = std::fs::File::create(&out)?;
        for d in &decoded {
            f.write_all(d)?;
        }
        f.sync_all()
    });
    let conv_bound1 = best_of(opts.reps, || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&out)?;
        for (fr, t) in frames.iter().zip(&tensors) {
            f.write_all(&zstd::bulk::decompress(fr, t.len()).unwrap_or_default())?;
        }
        f.sync_all()
    });
    drop(frames);
    let _ = std::fs::remove_file(&out);
    let conv_out = dir.path().join("converted.safetensors");
    let conv = best_of(opts.reps, || -> tessera::Result<()> {
        let data = FileData::open(&zst)?;
        let src = tessera::open(&data, &ro)?;
        tessera::convert::convert_file(
            src.as_ref(),
            Format::Safetensors,
            &conv_out,
            Default::default(),
            &WriteOptions::default(),
        )
        .map(|_| ())
    });
    report(
        "convert zstd .zt -> .safetensors",
        total,
        conv,
        Some((&format!("decode on {threads} threads + write"), conv_bound)),
    );
    report(
        "convert zstd .zt -> .safetensors",
        total,
        conv,
        Some(("decode on 1 thread + write", conv_bound1)),
    );
    let data = FileData::open(&zst)?;
    let f = ZtensorFile::parse(&data, &ro)?;
    let secs = best_of(opts.reps, || {
        let mut n = 0usize;
        for info in f.tensor_infos() {
            n += f.tensor(&info.name).expect("tensor").nbytes() as usize;
        }
        n
    });
    report(
        "load every tensor owned (zstd-3 decode)",
        total,
        secs,
        Some((&format!("zstd decompress, {threads} threads"), unz)),
    );
    report(
        "load every tensor owned (zstd-3 decode)",
        total,
        secs,
        Some(("zstd decompress, 1 thread", unz1)),
    );
    Ok(())
}
