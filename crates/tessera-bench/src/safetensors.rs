//! `safetensors` suite: Tessera's safetensors reader/writer against the `safetensors`
//! Rust crate (0.8.0) and the memcpy / `write_all` bounds, in the same run.
//!
//! Measures, on the synthetic model (`--size-mib`, default 1 GiB of ~200 f32 tensors):
//! open + index (mmap + parse), read every tensor zero-copy (views + one pass over the
//! bytes), load every tensor into owned memory, and write the file.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use tessera::formats::safetensors::SafetensorsFile;
use tessera::{FileData, Format, ReadOptions, TensorSource};

use crate::common::{best_of, report, synthetic_model, Opts};

fn xor_words(b: &[u8]) -> u64 {
    b.chunks_exact(8).fold(0u64, |a, c| {
        a ^ u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))
    })
}

fn mmap(path: &Path) -> memmap2::Mmap {
    let f = File::open(path).expect("open");
    // SAFETY: benchmark-only map of a file this process wrote and does not modify.
    #[allow(unsafe_code)]
    unsafe {
        memmap2::Mmap::map(&f).expect("mmap")
    }
}

/// Runs the suite.
pub fn run(opts: &Opts) -> tessera::Result<()> {
    let model = synthetic_model(opts)?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("model.safetensors");
    let bytes = opts.bytes();

    // Write: Tessera vs one write_all of the same file bytes vs the safetensors crate.
    let t_ours = best_of(opts.reps, || {
        tessera::convert::write_file(Format::Safetensors, &model, &path, &Default::default())
            .expect("write")
    });
    let image = std::fs::read(&path)?;
    let plain = dir.path().join("plain.bin");
    let t_bound = best_of(opts.reps, || {
        let mut f = File::create(&plain).expect("create");
        f.write_all(&image).expect("write_all");
        f.sync_all().expect("sync");
    });
    report(
        "write (atomic, fsync)",
        bytes,
        t_ours,
        Some(("one write_all+fsync", t_bound)),
    );
    let peer_path = dir.path().join("peer.safetensors");
    let t_peer = best_of(opts.reps, || {
        let data = FileData::open(&path).expect("map");
        let st = safetensors::SafeTensors::deserialize(&data).expect("peer parse");
        safetensors::serialize_to_file(st.tensors(), None, &peer_path).expect("peer write");
        File::open(&peer_path)
            .and_then(|f| f.sync_all())
            .expect("sync");
    });
    report(
        "write (safetensors crate, from mmap)",
        bytes,
        t_peer,
        Some(("one write_all+fsync", t_bound)),
    );
    assert_eq!(std::fs::read(&peer_path)?, image, "peer and ours differ");

    // Open + index.
    let n = 200.max(opts.reps * 20);
    let t_open = best_of(opts.reps, || {
        for _ in 0..n {
            let data = FileData::open(&path).expect("map");
            let f = SafetensorsFile::parse(&data, &ReadOptions::default()).expect("parse");
            std::hint::black_box(f.tensor_infos().len());
        }
    }) / n as f64;
    let t_open_peer = best_of(opts.reps, || {
        for _ in 0..n {
            let m = mmap(&path);
            let st = safetensors::SafeTensors::deserialize(&m).expect("peer");
            std::hint::black_box(st.len());
        }
    }) / n as f64;
    let t_parse = best_of(opts.reps, || {
        let m = mmap(&path);
        for _ in 0..n {
            let f = SafetensorsFile::parse(&*m, &ReadOptions::default()).expect("parse");
            std::hint::black_box(f.tensor_infos().len());
        }
    }) / n as f64;
    let t_parse_peer = best_of(opts.reps, || {
        let m = mmap(&path);
        for _ in 0..n {
            let st = safetensors::SafeTensors::deserialize(&m).expect("peer");
            std::hint::black_box(st.len());
        }
    }) / n as f64;
    println!(
        "{:<44} {:>9.1} us   {:.2}x safetensors crate ({:.1} us)",
        "parse + index (one mapping)",
        t_parse * 1e6,
        t_parse_peer / t_parse,
        t_parse_peer * 1e6
    );
    println!(
        "{:<44} {:>9.1} us   {:.2}x safetensors crate ({:.1} us)",
        "open + index (mmap + parse)",
        t_open * 1e6,
        t_open_peer / t_open,
        t_open_peer * 1e6
    );

    // Zero-copy reads: every view plus one pass over its bytes.
    let data = FileData::open(&path)?;
    let file = SafetensorsFile::parse(&data, &ReadOptions::default())?;
    let st = safetensors::SafeTensors::deserialize(&data).expect("peer");
    let t_views = best_of(opts.reps, || {
        let mut x = 0;
        for i in file.tensor_infos() {
            let v = file.tensor(&i.name).expect("view");
            x ^= xor_words(v.data().expect("dense"));
        }
        x
    });
    let t_views_peer = best_of(opts.reps, || {
        let mut x = 0;
        for (_, v) in st.iter() {
            x ^= xor_words(v.data());
        }
        x
    });
    report(
        "read every tensor zero-copy (+1 pass)",
        bytes,
        t_views,
        Some(("safetensors crate", t_views_peer)),
    );

    // Owned loads vs memcpy of the same bytes.
    let t_owned = best_of(opts.reps, || {
        file.tensor_infos()
            .iter()
            .map(|i| {
                file.tensor(&i.name)
                    .expect("view")
                    .data()
                    .expect("d")
                    .to_vec()
            })
            .collect::<Vec<_>>()
    });
    let t_owned_peer = best_of(opts.reps, || {
        st.iter()
            .map(|(_, v)| v.data().to_vec())
            .collect::<Vec<_>>()
    });
    let t_memcpy = best_of(opts.reps, || image.to_vec());
    report(
        "load every tensor owned",
        bytes,
        t_owned,
        Some(("memcpy into a fresh Vec", t_memcpy)),
    );
    report(
        "load every tensor owned (safetensors crate)",
        bytes,
        t_owned_peer,
        Some(("memcpy into a fresh Vec", t_memcpy)),
    );
    Ok(())
}
