//! Shared benchmark plumbing: options, a synthetic model, timing and reporting.
//!
//! Every line [`report`] prints is also recorded ([`take_rows`]), so that `all` can put
//! each suite's figures into docs/benchmarks.md without the suites knowing about it.

use std::borrow::Cow;
use std::sync::Mutex;
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
    /// `all --quick`: small sizes for a smoke run.
    pub quick: bool,
    /// `all --out DIR`: where benchmarks.md and benchmarks.svg go (default docs/).
    pub out: Option<std::path::PathBuf>,
    /// `all --no-python`: skip the Python rows.
    pub no_python: bool,
    /// `SUITE --update-docs`: put this suite's lines into docs/benchmarks.md (the
    /// "Every suite" table), replacing its earlier ones.
    pub update_docs: bool,
}

impl Opts {
    /// Parses `--size-mib N --tensors N --reps N`.
    pub fn parse(args: &[String]) -> Opts {
        let mut o = Opts {
            size_mib: 1024,
            tensors: 200,
            reps: 3,
            quick: false,
            out: None,
            no_python: false,
            update_docs: false,
        };
        let quick = args.iter().any(|a| a == "--quick");
        if quick {
            (o.size_mib, o.tensors, o.quick) = (32, 40, true);
        }
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--quick" => continue,
                "--no-python" => {
                    o.no_python = true;
                    continue;
                }
                "--update-docs" => {
                    o.update_docs = true;
                    continue;
                }
                "--out" => {
                    o.out = it.next().map(std::path::PathBuf::from);
                    if o.out.is_some() {
                        continue;
                    }
                }
                _ => {}
            }
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

/// One line a suite reported.
#[derive(Debug, Clone)]
pub struct Row {
    /// The suite that reported it.
    pub suite: String,
    /// What was measured.
    pub name: String,
    /// Bytes processed.
    pub bytes: usize,
    /// Tessera's time, seconds.
    pub secs: f64,
    /// The bound or peer and its time.
    pub reference: Option<(String, f64)>,
}

static ROWS: Mutex<Vec<Row>> = Mutex::new(Vec::new());
static SUITE: Mutex<String> = Mutex::new(String::new());

/// Names the suite whose lines [`report`] records next.
pub fn set_suite(name: &str) {
    if let Ok(mut s) = SUITE.lock() {
        *s = name.to_string();
    }
}

/// Every line reported so far (and forgets them).
pub fn take_rows() -> Vec<Row> {
    ROWS.lock()
        .map(|mut r| std::mem::take(&mut *r))
        .unwrap_or_default()
}

/// Times `a` and `b` alternately (ABBA), `reps` times each, running `settle` before
/// every timed call; returns their times in seconds. What a noisy machine does to one
/// side it does to the other; report medians ([`median`]) with their spread.
pub fn interleaved<A, B>(
    reps: usize,
    mut settle: impl FnMut(),
    mut a: impl FnMut() -> A,
    mut b: impl FnMut() -> B,
) -> (Vec<f64>, Vec<f64>) {
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for r in 0..reps.max(1) {
        for first in [r % 2 == 0, r % 2 != 0] {
            settle();
            let t = Instant::now();
            if first {
                std::hint::black_box(a());
                ta.push(t.elapsed().as_secs_f64());
            } else {
                std::hint::black_box(b());
                tb.push(t.elapsed().as_secs_f64());
            }
        }
    }
    (ta, tb)
}

/// The median of `v` (0 when empty).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// `sync(2)`: the previous operation's write-back is not paid by the next one.
pub fn sync() {
    #[allow(unsafe_code)]
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe {
        libc::sync()
    };
}

/// Prints one line: `name  MB/s  (ratio vs reference)`.
pub fn report(name: &str, bytes: usize, secs: f64, reference: Option<(&str, f64)>) {
    if let (Ok(mut rows), Ok(suite)) = (ROWS.lock(), SUITE.lock()) {
        rows.push(Row {
            suite: suite.clone(),
            name: name.to_string(),
            bytes,
            secs,
            reference: reference.map(|(n, s)| (n.to_string(), s)),
        });
    }
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
