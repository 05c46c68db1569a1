//! The Rust rows of the benchmark table (`all`), each against its peer or bound in the
//! same run, the two sides interleaved (ABBA) with `sync` before every timed call, and
//! reported as medians with their spread:
//!
//! - zTensor open + index (mmap + parse + every tensor's description) against the
//!   `safetensors` crate's mmap + `SafeTensors::deserialize` of the same tensors (a
//!   sample is 50 opens: one takes microseconds);
//! - convert zstd .zt → .safetensors (open, decode, write durably) against its bound:
//!   decoding the same zstd frames on every core and writing the result with one
//!   `write_all` plus fsync.
//!
//! The FOLD and WTXT rows come from their suites (`fold`, `wtxt`), which `all` runs.

use std::io::Write;

use rayon::prelude::*;
use tessera::convert::{Compression, WriteOptions};
use tessera::formats::ztensor::ZtensorFile;
use tessera::{FileData, Format, ReadOptions, TensorSource};

use crate::common::{interleaved, median, sync, synthetic_model, Opts};

/// One measured row of the table.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The operation.
    pub row: String,
    /// The peer or bound.
    pub peer: String,
    /// Bytes processed (0 for operations measured per call).
    pub bytes: usize,
    /// Tessera's times, seconds.
    pub ours: Vec<f64>,
    /// The peer's times, seconds.
    pub theirs: Vec<f64>,
    /// The goal for the ratio.
    pub goal: f64,
    /// Anything a reader must know (how cold was made cold, what was skipped).
    pub note: String,
}

impl Measured {
    /// Peer median / tessera median: above 1, tessera is faster.
    pub fn ratio(&self) -> f64 {
        median(&self.theirs) / median(&self.ours)
    }
}

fn err(e: impl std::fmt::Display) -> tessera::Error {
    tessera::Error::invalid_input(e.to_string())
}

/// Measures the rows; prints each as it is measured.
pub fn run(opts: &Opts) -> tessera::Result<Vec<Measured>> {
    let model = synthetic_model(opts)?;
    let total: usize = model
        .tensor_infos()
        .iter()
        .map(|t| t.dense_nbytes().unwrap_or(0) as usize)
        .sum();
    let dir = tempfile::tempdir()?;
    let reps = opts.reps.max(3);
    let mut out = Vec::new();

    // zTensor open + index against the safetensors crate.
    let zt = dir.path().join("model.zt");
    let st = dir.path().join("model.safetensors");
    tessera::convert::write_file(Format::Ztensor, &model, &zt, &WriteOptions::default())?;
    tessera::convert::write_file(Format::Safetensors, &model, &st, &WriteOptions::default())?;
    let ro = ReadOptions::default();
    let calls = 50;
    let mut failed = None;
    let (a, b) = interleaved(
        reps * 4,
        sync,
        || {
            for _ in 0..calls {
                let r = FileData::open(&zt).and_then(|d| {
                    let f = ZtensorFile::parse(&d, &ro)?;
                    Ok(f.tensor_infos().len())
                });
                if let Err(e) = r {
                    failed = Some(e);
                }
            }
        },
        || {
            for _ in 0..calls {
                if let Ok(d) = FileData::open(&st) {
                    let n = safetensors::SafeTensors::deserialize(&d).map(|f| f.len());
                    std::hint::black_box(n.ok());
                }
            }
        },
    );
    if let Some(e) = failed {
        return Err(e);
    }
    let per = |v: Vec<f64>| v.into_iter().map(|t| t / calls as f64).collect();
    out.push(show(Measured {
        row: "Rust zTensor open + index".into(),
        peer: "safetensors crate".into(),
        bytes: 0,
        ours: per(a),
        theirs: per(b),
        goal: 1.0,
        note: format!("{} tensors, hot; per open", opts.tensors),
    }));

    // convert zstd .zt → .safetensors against zstd decode (every core) + write + fsync.
    let zc = dir.path().join("model.zstd.zt");
    let wz = WriteOptions::default().compression(Compression::Zstd(3));
    tessera::convert::write_file(Format::Ztensor, &model, &zc, &wz)?;
    let frames: Vec<(Vec<u8>, usize)> = model
        .tensor_infos()
        .par_iter()
        .map(|i| {
            let d = model.tensor(&i.name)?.data()?.to_vec();
            Ok((zstd::bulk::compress(&d, 3).map_err(err)?, d.len()))
        })
        .collect::<tessera::Result<_>>()?;
    drop(model);
    let conv_out = dir.path().join("out.safetensors");
    let bound_out = dir.path().join("bound.bin");
    let mut failed = None;
    let (a, b) = interleaved(
        reps,
        sync,
        || {
            let r = FileData::open(&zc).and_then(|d| {
                let f = ZtensorFile::parse(&d, &ro)?;
                tessera::convert::convert_file(
                    &f,
                    Format::Safetensors,
                    &conv_out,
                    Default::default(),
                    &WriteOptions::default(),
                )
            });
            if let Err(e) = r {
                failed = Some(e);
            }
        },
        || -> std::io::Result<()> {
            let decoded: Vec<Vec<u8>> = frames
                .par_iter()
                .map(|(c, n)| zstd::bulk::decompress(c, *n).unwrap_or_default())
                .collect();
            let mut f = std::fs::File::create(&bound_out)?;
            for d in &decoded {
                f.write_all(d)?;
            }
            f.sync_all()
        },
    );
    if let Some(e) = failed {
        return Err(e);
    }
    out.push(show(Measured {
        row: "convert zstd .zt → .safetensors".into(),
        peer: "bound: zstd decode (all cores) + write + fsync".into(),
        bytes: total,
        ours: a,
        theirs: b,
        goal: 0.9,
        note: format!("{} MiB", total >> 20),
    }));
    Ok(out)
}

/// Prints a row and hands it back.
pub fn show(m: Measured) -> Measured {
    let (mo, mp) = (median(&m.ours), median(&m.theirs));
    let rate = |t: f64| {
        if m.bytes > 0 {
            format!("{:>7.0} MB/s", m.bytes as f64 / t / 1e6)
        } else {
            format!("{:>7.1} us", t * 1e6)
        }
    };
    println!(
        "{:<44} tessera {} | {:<30} {} | {:.2}x (goal {}x)",
        m.row,
        rate(mo),
        m.peer,
        rate(mp),
        m.ratio(),
        m.goal
    );
    m
}
