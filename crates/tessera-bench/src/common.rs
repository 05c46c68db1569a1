//! Shared benchmark plumbing: options, a synthetic model, timing and reporting.

use std::borrow::Cow;
use std::time::Instant;

use tessera::{DType, Model, TensorInfo, TensorView};

/// Command-line options shared by the suites.
pub struct Opts {
    /// Model size in MiB (default 1024).
    pub size_mib: usize,
    /// Tensor count (default 200).
    pub tensors: usize,
    /// Repetitions; the best is reported (default 3).
    pub reps: usize,
}

impl Opts {
    /// Parses `--size-mib N --tensors N --reps N`.
    pub fn parse(args: &[String]) -> Opts {
        let mut o = Opts {
            size_mib: 1024,
            tensors: 200,
            reps: 3,
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let v = it.next().and_then(|v| v.parse().ok());
            match (a.as_str(), v) {
                ("--size-mib", Some(v)) => o.size_mib = v,
                ("--tensors", Some(v)) => o.tensors = v,
                ("--reps", Some(v)) => o.reps = v,
                _ => {
                    eprintln!("unknown or incomplete option {a}");
                    std::process::exit(2);
                }
            }
        }
        o
    }
    /// Total bytes of the model.
    pub fn bytes(&self) -> usize {
        self.size_mib << 20
    }
}

/// A model of `opts.tensors` f32 tensors totalling about `opts.size_mib` MiB, with
/// non-trivial (incompressible-ish) values.
pub fn synthetic_model(opts: &Opts) -> tessera::Result<Model> {
    let per = (opts.bytes() / opts.tensors / 4).max(1);
    let cols = 256usize;
    let rows = per.div_ceil(cols);
    let mut m = Model::new();
    let mut x: u32 = 0x9e37_79b9;
    for i in 0..opts.tensors {
        let mut data = Vec::with_capacity(rows * cols * 4);
        for _ in 0..rows * cols {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let v = (x >> 8) as f32 / (1u32 << 24) as f32 - 0.5;
            data.extend_from_slice(&v.to_le_bytes());
        }
        m.push(TensorView::dense(
            TensorInfo::dense(
                format!("layers.{i}.weight"),
                DType::F32,
                vec![rows as u64, cols as u64],
            ),
            Cow::Owned(data),
        )?)?;
    }
    Ok(m)
}

/// Runs `f` `reps` times and returns the best wall time in seconds.
pub fn best_of<T>(reps: usize, mut f: impl FnMut() -> T) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        std::hint::black_box(f());
        best = best.min(t.elapsed().as_secs_f64());
    }
    best
}

/// Prints one line: `name  MB/s  (ratio vs reference)`.
pub fn report(name: &str, bytes: usize, secs: f64, reference: Option<(&str, f64)>) {
    let mbs = bytes as f64 / secs / 1e6;
    match reference {
        Some((rname, rsecs)) => {
            let rmbs = bytes as f64 / rsecs / 1e6;
            println!(
                "{name:<44} {mbs:>9.0} MB/s   {:.2}x {rname} ({rmbs:.0} MB/s)",
                mbs / rmbs
            );
        }
        None => println!("{name:<44} {mbs:>9.0} MB/s"),
    }
}

/// memcpy of `bytes` into a fresh buffer: the bound for owned loads.
pub fn baseline(opts: &Opts) -> tessera::Result<()> {
    let src = vec![1u8; opts.bytes()];
    let secs = best_of(opts.reps, || src.to_vec());
    report("memcpy into a fresh Vec", opts.bytes(), secs, None);
    Ok(())
}
