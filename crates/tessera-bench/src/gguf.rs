//! `gguf`: write and read a synthetic model as GGUF, against bounds and the peer.
//!
//! - write: `convert::write_file` (atomic, fsynced) vs writing and fsyncing the same
//!   bytes (the bound), and into memory vs a memcpy of the file;
//! - open: parse the header (zero-copy: no tensor byte is touched);
//! - read all: open + sum every tensor's bytes through its zero-copy view, vs the same
//!   mapping the file and summing all of it (the bound), and vs gguf-py's `GGUFReader` doing the same
//!   (the peer; run with `$TESSERA_PEER_PYTHON`, default `/tmp/pyenv/bin/python`, skipped
//!   when that is missing).

use std::path::Path;
use std::process::Command;

use tessera::convert::{self, WriteOptions};
use tessera::formats::gguf::GgufFile;
use tessera::{FileData, Format, Limits, TensorSource};

use crate::common::{best_of, report, synthetic_model, Opts};

fn sum_bytes(b: &[u8]) -> u64 {
    // Touch every byte, 8 at a time, so the bound and the reader do the same work.
    let mut s = 0u64;
    let chunks = b.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        s = s.wrapping_add(u64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
    }
    s.wrapping_add(rest.iter().map(|&x| x as u64).sum::<u64>())
}

fn read_all(path: &Path) -> tessera::Result<u64> {
    let data = FileData::open(path)?;
    let f = GgufFile::parse(&data, &Limits::default())?;
    let mut s = 0u64;
    for info in f.tensor_infos() {
        let v = f.tensor(&info.name)?;
        s = s.wrapping_add(sum_bytes(&v.parts[0].bytes));
    }
    Ok(s)
}

const PEER: &str = r#"
import sys, time, numpy as np, gguf
best = float("inf")
for _ in range(int(sys.argv[2])):
    t = time.perf_counter()
    r = gguf.GGUFReader(sys.argv[1])
    s = 0
    for t_ in r.tensors:
        s += int(t_.data.view(np.uint8).view(np.uint64).sum(dtype=np.uint64)) if t_.data.nbytes % 8 == 0 else int(t_.data.view(np.uint8).sum())
    best = min(best, time.perf_counter() - t)
print(best)
"#;

fn peer_read(path: &Path, reps: usize) -> Option<f64> {
    let py =
        std::env::var("TESSERA_PEER_PYTHON").unwrap_or_else(|_| "/tmp/pyenv/bin/python".into());
    let out = Command::new(py)
        .args(["-c", PEER])
        .arg(path)
        .arg(reps.to_string())
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "gguf-py peer failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// Runs the suite.
pub fn run(opts: &Opts) -> tessera::Result<()> {
    let model = synthetic_model(opts)?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("model.gguf");
    let bound_path = dir.path().join("bound.bin");
    let wopts = WriteOptions::default();

    let secs = best_of(opts.reps, || {
        convert::write_file(Format::Gguf, &model, &path, &wopts).map(|_| ())
    });
    let bytes = std::fs::metadata(&path)?.len() as usize;
    let file = std::fs::read(&path)?;
    let bound = best_of(opts.reps, || -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::File::create(&bound_path)?;
        f.write_all(&file)?;
        f.sync_all()
    });
    report(
        "gguf write (atomic, fsync)",
        bytes,
        secs,
        Some(("write + fsync", bound)),
    );
    let secs = best_of(opts.reps, || {
        let mut out = std::io::Cursor::new(Vec::with_capacity(bytes));
        convert::write_to(Format::Gguf, &model, &mut out, &wopts).map(|_| out.into_inner().len())
    });
    let bound = best_of(opts.reps, || file.to_vec());
    report(
        "gguf write into memory",
        bytes,
        secs,
        Some(("memcpy", bound)),
    );

    let data = FileData::open(&path)?;
    let secs = best_of(opts.reps, || {
        GgufFile::parse(&data, &Limits::default()).map(|f| f.tensor_infos().len())
    });
    report("gguf open (header only, zero-copy)", bytes, secs, None);

    let want = read_all(&path)?;
    let secs = best_of(opts.reps, || read_all(&path));
    let bound = best_of(opts.reps, || {
        sum_bytes(
            &FileData::open(&path)
                .map(|d| d.to_vec())
                .unwrap_or_default(),
        )
    });
    report(
        "gguf open + read every tensor (mmap)",
        bytes,
        secs,
        Some(("copy the file + sum", bound)),
    );
    // The same work without the format: map the file afresh, sum every byte.
    let bound = best_of(opts.reps, || FileData::open(&path).map(|d| sum_bytes(&d)));
    report(
        "gguf open + read every tensor (mmap)",
        bytes,
        secs,
        Some(("map + sum the whole file", bound)),
    );
    if let Some(peer) = peer_read(&path, opts.reps) {
        report(
            "gguf open + read every tensor (mmap)",
            bytes,
            secs,
            Some(("gguf-py GGUFReader", peer)),
        );
    }
    std::hint::black_box(want);
    Ok(())
}
