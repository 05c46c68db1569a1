//! `gguf-quants`: ggml block dequantization and quantization throughput (Q8_0, Q4_0,
//! Q4_K, and the grid IQ types IQ2_XXS … IQ1_M) against gguf-py's numpy reference (`gguf.quants`) in the same run.
//!
//! MB/s counts the float32 side (the floats produced by dequantizing, the floats
//! consumed by quantizing), so the figures of different block types compare. The peer
//! runs with `$TESSERA_PEER_PYTHON` (default `/tmp/pyenv/bin/python`; skipped when
//! missing) on the same bytes, and its outputs are compared with ours byte for byte (the
//! line says `identical` or `DIFFERENT`). gguf-py cannot quantize Q4_K or the IQ types, so
//! they are decoded from random blocks with sane scales. Use `--size-mib 64` or so: numpy needs
//! several times the data in memory.

use std::path::Path;
use std::process::Command;

use tessera::quant::GgmlType;
use tessera::quant::{dequantize, quantize, QuantKind};

use crate::common::{best_of, report, Opts};

const ROW: usize = 4096;

const PEER: &str = r#"
import sys, time, numpy as np, warnings
from gguf import GGMLQuantizationType as Q
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import quantize, dequantize
op, t, src, dst, reps, row = sys.argv[1:7]
reps, row, qt = int(reps), int(row), Q[t]
bs, ts = GGML_QUANT_SIZES[qt]
if op == "quantize":
    x = np.fromfile(src, dtype="<f4").reshape(-1, row)
    f = lambda: quantize(x, qt)
else:
    b = np.fromfile(src, dtype=np.uint8).reshape(-1, row // bs * ts)
    f = lambda: dequantize(b, qt)
best = float("inf")
for _ in range(reps):
    t0 = time.perf_counter()
    out = f()
    best = min(best, time.perf_counter() - t0)
out.tofile(dst)
print(best)
"#;

/// Times the peer on `src`; returns (seconds, its output bytes).
fn peer(op: &str, ty: &str, src: &Path, reps: usize) -> Option<(f64, Vec<u8>)> {
    let py =
        std::env::var("TESSERA_PEER_PYTHON").unwrap_or_else(|_| "/tmp/pyenv/bin/python".into());
    let dst = src.with_extension("peer-out");
    let out = Command::new(py)
        .args(["-c", PEER, op, ty])
        .arg(src)
        .arg(&dst)
        .args([reps.to_string(), ROW.to_string()])
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "gguf-py peer failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    let secs = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    Some((secs, std::fs::read(&dst).ok()?))
}

fn xorshift(n: usize, seed: u32) -> impl Iterator<Item = u32> {
    let mut x = seed;
    (0..n).map(move |_| {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    })
}

fn line(what: &str, bytes: usize, secs: f64, peer: Option<(f64, Vec<u8>)>, ours: &[u8]) {
    match peer {
        Some((psecs, out)) => {
            let same = if out == ours {
                "identical"
            } else {
                "DIFFERENT"
            };
            report(
                &format!("{what} [{same}]"),
                bytes,
                secs,
                Some(("gguf-py", psecs)),
            );
        }
        None => report(what, bytes, secs, None),
    }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Runs the suite.
pub fn run(opts: &Opts) -> tessera::Result<()> {
    let n = (opts.bytes() / 4 / ROW).max(1) * ROW;
    let fbytes = n * 4;
    let dir = tempfile::tempdir()?;
    let x: Vec<f32> = xorshift(n, 0x9e37_79b9)
        .map(|r| (r >> 8) as f32 / (1u32 << 24) as f32 - 0.5)
        .collect();
    let x_path = dir.path().join("x.f32");
    std::fs::write(&x_path, f32_bytes(&x))?;
    println!(
        "{} MiB of f32 ({} rows of {ROW}), {} threads",
        fbytes >> 20,
        n / ROW,
        rayon::current_num_threads()
    );

    for kind in [QuantKind::Q8_0, QuantKind::Q4_0] {
        let name = kind.ggml_type().name;
        let q = quantize("x", kind, &x)?;
        let secs = best_of(opts.reps, || quantize("x", kind, &x).map(|v| v.len()));
        let p = peer("quantize", name, &x_path, opts.reps);
        line(&format!("quantize {name}"), fbytes, secs, p, &q);

        let q_path = dir.path().join(format!("{name}.blocks"));
        std::fs::write(&q_path, &q)?;
        let ty = kind.ggml_type();
        let d = dequantize("x", ty, &q, n as u64)?;
        let secs = best_of(opts.reps, || {
            dequantize("x", ty, &q, n as u64).map(|v| v.len())
        });
        let p = peer("dequantize", name, &q_path, opts.reps);
        line(
            &format!("dequantize {name}"),
            fbytes,
            secs,
            p,
            &f32_bytes(&d),
        );
    }

    // Q4_K: random payloads, f16 scales of about 1/64.
    let ty = GgmlType::from_id(12).ok_or_else(|| tessera::Error::unsupported("no Q4_K"))?;
    let (bs, ts) = (ty.block_size as usize, ty.type_size as usize);
    let mut blocks: Vec<u8> = xorshift(n / bs * ts, 7).map(|r| (r >> 24) as u8).collect();
    for (i, b) in blocks.chunks_exact_mut(ts).enumerate() {
        let d = 1.0 / 64.0 + (i % 7) as f32 / 1024.0;
        let h = d_f16(d);
        b[0..2].copy_from_slice(&h);
        b[2..4].copy_from_slice(&d_f16(d / 4.0));
    }
    let k_path = dir.path().join("Q4_K.blocks");
    std::fs::write(&k_path, &blocks)?;
    let d = dequantize("x", ty, &blocks, n as u64)?;
    let secs = best_of(opts.reps, || {
        dequantize("x", ty, &blocks, n as u64).map(|v| v.len())
    });
    let p = peer("dequantize", "Q4_K", &k_path, opts.reps);
    line("dequantize Q4_K", fbytes, secs, p, &f32_bytes(&d));

    // The grid IQ types: random payloads (every bit pattern is valid), f16 d of about
    // 1/64 (IQ1_M keeps it in the top nibbles of its four u16 scales).
    for (id, name) in [
        (16, "IQ2_XXS"),
        (17, "IQ2_XS"),
        (22, "IQ2_S"),
        (18, "IQ3_XXS"),
        (21, "IQ3_S"),
        (19, "IQ1_S"),
        (29, "IQ1_M"),
    ] {
        let ty = GgmlType::from_id(id).ok_or_else(|| tessera::Error::unsupported(name))?;
        let (bs, ts) = (ty.block_size as usize, ty.type_size as usize);
        let mut blocks: Vec<u8> = xorshift(n / bs * ts, id).map(|r| (r >> 24) as u8).collect();
        for (i, b) in blocks.chunks_exact_mut(ts).enumerate() {
            let h = d_f16(1.0 / 64.0 + (i % 7) as f32 / 1024.0);
            if name == "IQ1_M" {
                let bits = u16::from_le_bytes(h);
                for k in 0..4 {
                    let hi = 49 + 2 * k;
                    b[hi] = (b[hi] & 0x0F) | ((((bits >> (4 * k)) & 0x0F) as u8) << 4);
                }
            } else {
                b[0..2].copy_from_slice(&h);
            }
        }
        let path = dir.path().join(format!("{name}.blocks"));
        std::fs::write(&path, &blocks)?;
        let d = dequantize("x", ty, &blocks, n as u64)?;
        let secs = best_of(opts.reps, || {
            dequantize("x", ty, &blocks, n as u64).map(|v| v.len())
        });
        let p = peer("dequantize", name, &path, opts.reps);
        line(
            &format!("dequantize {name}"),
            fbytes,
            secs,
            p,
            &f32_bytes(&d),
        );
    }
    Ok(())
}

/// A positive normal f32 with few mantissa bits as f16 bytes (exact for the values used).
fn d_f16(v: f32) -> [u8; 2] {
    let bits = v.to_bits();
    let exp = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    let man = (bits >> 13) & 0x3ff;
    (((exp as u32) << 10 | man) as u16).to_le_bytes()
}
