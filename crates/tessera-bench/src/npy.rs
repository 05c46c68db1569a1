//! `npy` suite: `.npz` (stored and deflated) and `.npy` write/read throughput against the
//! `write_all` and memcpy bounds, in the same run. No Rust NumPy peer is measured (the
//! reference implementation is NumPy itself; the peer tests check compatibility).

use std::borrow::Cow;
use std::fs::File;
use std::io::Write;

use tessera::convert::{Compression, WriteOptions};
use tessera::{FileData, Format, Model, ReadOptions, TensorSource, TensorView};

use crate::common::{best_of, report, synthetic_model, Opts};

/// Runs the suite.
pub fn run(opts: &Opts) -> tessera::Result<()> {
    let model = synthetic_model(opts)?;
    let bytes = opts.bytes();
    let dir = tempfile::tempdir()?;
    let image: Vec<u8> = model
        .tensor_infos()
        .iter()
        .flat_map(|i| {
            model
                .tensor(&i.name)
                .expect("t")
                .data()
                .expect("d")
                .to_vec()
        })
        .collect();
    let plain = dir.path().join("plain.bin");
    let t_bound = best_of(opts.reps, || {
        let mut f = File::create(&plain).expect("create");
        f.write_all(&image).expect("write_all");
        f.sync_all().expect("sync");
    });
    let t_memcpy = best_of(opts.reps, || image.to_vec());

    for (label, compression) in [
        ("npz stored", Compression::None),
        ("npz deflate", Compression::Zstd(3)),
    ] {
        let path = dir.path().join("m.npz");
        let wopts = WriteOptions::default().compression(compression);
        let t_write = best_of(opts.reps, || {
            tessera::convert::write_file(Format::Npz, &model, &path, &wopts).expect("write")
        });
        report(
            &format!("{label}: write (atomic, fsync)"),
            bytes,
            t_write,
            Some(("one write_all+fsync", t_bound)),
        );
        let data = FileData::open(&path)?;
        let t_read = best_of(opts.reps, || {
            let f = tessera::open(&data, &ReadOptions::default()).expect("open");
            f.tensor_infos()
                .iter()
                .map(|i| f.tensor(&i.name).expect("t").data().expect("d").to_vec())
                .collect::<Vec<_>>()
        });
        report(
            &format!("{label}: open + load every tensor owned"),
            bytes,
            t_read,
            Some(("memcpy into a fresh Vec", t_memcpy)),
        );
    }

    // One big .npy: zero-copy view vs owned copy.
    let mut one = Model::new();
    one.push(TensorView::dense(
        tessera::TensorInfo::dense("x", tessera::DType::F32, vec![(image.len() / 4) as u64]),
        Cow::Borrowed(&image[..image.len() / 4 * 4]),
    )?)?;
    let path = dir.path().join("x.npy");
    let t_write = best_of(opts.reps, || {
        tessera::convert::write_file(Format::Npy, &one, &path, &Default::default()).expect("w")
    });
    report(
        "npy: write (atomic, fsync)",
        bytes,
        t_write,
        Some(("one write_all+fsync", t_bound)),
    );
    let data = FileData::open(&path)?;
    let t_open = best_of(opts.reps, || {
        let f = tessera::open(&data, &ReadOptions::default()).expect("open");
        let v = f.tensor("array").expect("t");
        v.data().expect("d").to_vec()
    });
    report(
        "npy: open + load owned",
        bytes,
        t_open,
        Some(("memcpy into a fresh Vec", t_memcpy)),
    );
    Ok(())
}
