//! `stats` suite: `tessera stats`'s library call ([`tessera::values::Stats::of`]: min,
//! max, mean, std, NaN/+Inf/-Inf/zero counts, in parallel) against numpy computing the
//! same statistics on the same tensor in the same run, for one f32 and one bf16 tensor
//! of `--size-mib` (256 MiB at least unless `--quick`; NaN and Inf placed). numpy runs
//! in a subprocess (`$TESSERA_PYTHON`, else `.venv/bin/python`, else `python3`) on the
//! array loaded into memory first; its time covers the statistics only. numpy has no
//! bfloat16: its bf16 row widens the 16-bit words to f32 (a shift) first, counted in its
//! time, as a numpy user must. Second row per dtype: the 40-bin histogram `tessera
//! stats` draws ([`tessera::values::histogram`]) against `np.histogram(x[isfinite(x)],
//! bins=40)`. Also printed: a read of the same bytes on every core (a
//! sum of u64 words), the bound a bandwidth-limited pass approaches.

use std::path::{Path, PathBuf};

use tessera::values::{histogram, histogram_edges, Stats};
use tessera::DType;

use crate::common::{best_of, report, Opts};

const NUMPY: &str = r#"
import sys, time, json
import numpy as np
path, dtype, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
raw = np.load(path)
def stats():
    x = (raw.astype(np.uint32) << 16).view(np.float32) if dtype == "bf16" else raw
    nan = int(np.isnan(x).sum()); pinf = int(np.isposinf(x).sum())
    ninf = int(np.isneginf(x).sum()); zeros = int((x == 0).sum())
    f = x[np.isfinite(x)] if nan + pinf + ninf else x
    return (f.min(), f.max(), f.mean(dtype=np.float64), f.std(dtype=np.float64), nan, pinf, ninf, zeros)
def hist():
    x = (raw.astype(np.uint32) << 16).view(np.float32) if dtype == "bf16" else raw
    return np.histogram(x[np.isfinite(x)], bins=40)
best = hbest = float("inf")
for _ in range(reps):
    t = time.perf_counter(); r = stats(); best = min(best, time.perf_counter() - t)
    t = time.perf_counter(); hist(); hbest = min(hbest, time.perf_counter() - t)
print(json.dumps({"secs": best, "hist_secs": hbest, "mean": float(r[2]), "nan": r[4]}))
"#;

fn python() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::env::var_os("TESSERA_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            let v = root.join(".venv/bin/python");
            v.exists().then_some(v)
        })
        .unwrap_or_else(|| PathBuf::from("python3"))
}

/// Values with NaN and Inf placed, as `dtype` bytes.
fn tensor(dtype: DType, n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * dtype.size());
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..n {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let x = match i % 100_003 {
            5 => f32::NAN,
            6 => f32::INFINITY,
            7 => 0.0,
            _ => (state >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0,
        };
        match dtype {
            // bf16: the top half of the f32 (truncated; NaN and Inf stay what they are).
            DType::BF16 => out.extend_from_slice(&((x.to_bits() >> 16) as u16).to_le_bytes()),
            _ => out.extend_from_slice(&x.to_le_bytes()),
        }
    }
    out
}

/// Writes `bytes` as an .npy numpy loads (`<f4`, or `<u2` for bf16's words).
fn write_npy(path: &Path, dtype: DType, bytes: &[u8]) -> tessera::Result<()> {
    let n = (bytes.len() / dtype.size()) as u64;
    let info = tessera::TensorInfo::dense(
        "array",
        if dtype == DType::BF16 {
            DType::U16
        } else {
            dtype
        },
        vec![n],
    );
    let mut m = tessera::Model::new();
    m.push(tessera::TensorView::dense(
        info,
        std::borrow::Cow::Borrowed(bytes),
    )?)?;
    tessera::convert::write_file(tessera::Format::Npy, &m, path, &Default::default())?;
    Ok(())
}

/// Runs the suite.
pub fn run(opts: &Opts) -> tessera::Result<()> {
    let bytes = if opts.quick {
        opts.bytes()
    } else {
        opts.bytes().max(256 << 20)
    };
    let dir = tempfile::tempdir()?;
    for dtype in [DType::F32, DType::BF16] {
        let data = tensor(dtype, bytes / dtype.size());
        let s = Stats::of(dtype, &data);
        let t = best_of(opts.reps, || Stats::of(dtype, &data));
        let edges = histogram_edges(s.min.unwrap_or(0.0), s.max.unwrap_or(0.0), 40);
        let th = best_of(opts.reps, || histogram(dtype, &data, &edges));
        let bound = best_of(opts.reps, || {
            use rayon::prelude::*;
            data.par_chunks(1 << 20)
                .map(|c| {
                    c.chunks_exact(8)
                        .map(|w| {
                            let mut a = [0u8; 8];
                            a.copy_from_slice(w);
                            u64::from_le_bytes(a)
                        })
                        .fold(0u64, u64::wrapping_add)
                })
                .reduce(|| 0, u64::wrapping_add)
        });
        report(
            &format!("stats {dtype}: min/max/mean/std/counts"),
            data.len(),
            t,
            Some(("a sum of every word, all cores", bound)),
        );
        let npy = dir.path().join("x.npy");
        write_npy(&npy, dtype, &data)?;
        drop(data);
        let out = std::process::Command::new(python())
            .args(["-c", NUMPY])
            .arg(&npy)
            .arg(dtype.to_string())
            .arg(opts.reps.max(1).to_string())
            .output();
        match out {
            Ok(o) if o.status.success() => {
                let v: serde_json::Value = serde_json::from_slice(&o.stdout)
                    .map_err(|e| tessera::Error::malformed(format!("numpy's output: {e}")))?;
                let secs = v["secs"].as_f64().unwrap_or(f64::NAN);
                let hist_secs = v["hist_secs"].as_f64().unwrap_or(f64::NAN);
                let agree = v["nan"].as_u64() == Some(s.nan)
                    && v["mean"]
                        .as_f64()
                        .zip(s.mean())
                        .is_some_and(|(a, b)| (a - b).abs() <= 1e-6 * b.abs().max(1.0));
                report(
                    &format!("stats {dtype}, against numpy"),
                    bytes / dtype.size() * dtype.size(),
                    t,
                    Some(("numpy (same statistics)", secs)),
                );
                report(
                    &format!("stats {dtype}: 40-bin histogram, against numpy"),
                    bytes / dtype.size() * dtype.size(),
                    th,
                    Some(("np.histogram", hist_secs)),
                );
                if !agree {
                    println!("  numpy's results differ from Tessera's: {v}");
                }
            }
            Ok(o) => println!(
                "  numpy row skipped: {}",
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            ),
            Err(e) => println!("  numpy row skipped: {e}"),
        }
    }
    Ok(())
}
