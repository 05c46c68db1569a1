//! Issue 2's benchmark: zTensor and safetensors, against the `safetensors` crate in the
//! same run, on a ~1 GiB model of ~200 f32 tensors:
//! open + index, read every tensor zero-copy, load into owned memory, write.
//! Bounds printed beside them: one `write_all` of the same bytes (writes), memcpy into a
//! fresh buffer (owned loads).

use std::io::Write;
use std::path::Path;

use tessera::source::OwnedBytes;
use tessera::{FileData, Format, ReadOptions, TensorSource, WriteOptions};

use crate::common::{best_of, report, synthetic_model, Opts};

fn touch(bytes: &[u8]) -> u64 {
    // Reads one u64 per 512 bytes: enough to fault in every page, cheap to compute.
    bytes.iter().step_by(512).map(|&b| b as u64).sum()
}

fn st_views(model: &tessera::Model) -> Vec<(String, safetensors::tensor::TensorView<'_>)> {
    model
        .tensor_infos()
        .iter()
        .map(|i| {
            let data = model.tensor(&i.name).expect("tensor").parts[0]
                .bytes
                .clone();
            let bytes: &[u8] = match data {
                std::borrow::Cow::Borrowed(b) => b,
                std::borrow::Cow::Owned(_) => unreachable!("Model tensors are borrowed"),
            };
            let shape: Vec<usize> = i.shape.iter().map(|&d| d as usize).collect();
            (
                i.name.clone(),
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape, bytes)
                    .expect("view"),
            )
        })
        .collect()
}

/// Runs the suite.
pub fn run(opts: &Opts) -> tessera::Result<()> {
    let dir = tempfile::tempdir()?;
    eprintln!(
        "building a {} MiB model of {} f32 tensors…",
        opts.size_mib, opts.tensors
    );
    let model = synthetic_model(opts)?;
    let total: usize = model
        .tensor_infos()
        .iter()
        .map(|i| i.dense_nbytes().unwrap_or(0) as usize)
        .sum();
    let raw: Vec<u8> = {
        let mut v = Vec::with_capacity(total);
        for i in model.tensor_infos() {
            v.extend_from_slice(model.tensor(&i.name)?.parts[0].bytes.as_ref());
        }
        v
    };

    println!("\n-- write ({} MiB)", total >> 20);
    let bound_path = dir.path().join("raw.bin");
    // Like for like: what a user gets (temp file, fsync, rename) against one write_all
    // of the same bytes plus fsync.
    let t_bound = best_of(opts.reps, || {
        let mut f = std::fs::File::create(&bound_path).expect("create");
        f.write_all(&raw).expect("write");
        f.sync_all().expect("fsync");
    });
    report(
        "one write_all + fsync of the same bytes",
        total,
        t_bound,
        None,
    );
    let views = st_views(&model);
    let st_crate_path = dir.path().join("crate.safetensors");
    let t_st_crate = best_of(opts.reps, || {
        safetensors::serialize_to_file(
            views.iter().map(|(n, v)| (n.as_str(), v)),
            None,
            &st_crate_path,
        )
        .expect("safetensors crate write");
        std::fs::File::open(&st_crate_path)
            .and_then(|f| f.sync_all())
            .expect("fsync")
    });
    report(
        "safetensors crate serialize_to_file + fsync",
        total,
        t_st_crate,
        Some(("write_all", t_bound)),
    );
    for (format, ext) in [
        (Format::Safetensors, "safetensors"),
        (Format::Ztensor, "zt"),
    ] {
        let p = dir.path().join(format!("model.{ext}"));
        let t = best_of(opts.reps, || {
            tessera::convert::write_file(format, &model, &p, &WriteOptions::default())
                .expect("write")
        });
        report(
            &format!("tessera {ext} write_file (atomic, fsync)"),
            total,
            t,
            Some(("write_all", t_bound)),
        );
    }

    for (label, ext) in [("safetensors", "safetensors"), ("zTensor", "zt")] {
        let p = dir.path().join(format!("model.{ext}"));
        bench_read(label, &p, total, opts)?;
    }
    bench_st_crate(&st_crate_path, total, opts)?;

    println!("\n-- bound for owned loads");
    let t_memcpy = best_of(opts.reps, || {
        OwnedBytes::copy_from(&raw).expect("copy").len()
    });
    report(
        "memcpy into a fresh huge-page buffer",
        total,
        t_memcpy,
        None,
    );
    let t_vec = best_of(opts.reps, || raw.to_vec());
    report(
        "memcpy into a fresh Vec",
        total,
        t_vec,
        Some(("huge-page memcpy", t_memcpy)),
    );
    Ok(())
}

fn bench_read(label: &str, path: &Path, total: usize, opts: &Opts) -> tessera::Result<()> {
    println!("\n-- read {label} ({})", path.display());
    let reps = opts.reps * 10;
    let t_open = best_of(reps, || {
        let data = FileData::open(path).expect("map");
        let f = tessera::open(&data, &ReadOptions::default()).expect("open");
        f.tensor_infos().len()
    });
    println!(
        "{:<44} {:>9.3} ms",
        format!("tessera open + index"),
        t_open * 1e3
    );
    let data = FileData::open(path)?;
    let file = tessera::open(&data, &ReadOptions::default())?;
    let t_views = best_of(opts.reps, || {
        let mut s = 0u64;
        for i in file.tensor_infos() {
            let v = file.tensor(&i.name).expect("tensor");
            assert!(v.is_borrowed());
            s += touch(v.parts[0].bytes.as_ref());
        }
        s
    });
    report("tessera read every tensor zero-copy", total, t_views, None);
    let t_owned = best_of(opts.reps, || {
        let mut out = Vec::new();
        for i in file.tensor_infos() {
            let v = file.tensor(&i.name).expect("tensor");
            out.push(OwnedBytes::copy_from(v.parts[0].bytes.as_ref()).expect("copy"));
        }
        out
    });
    report(
        "tessera load every tensor into owned memory",
        total,
        t_owned,
        None,
    );
    Ok(())
}

fn bench_st_crate(path: &Path, total: usize, opts: &Opts) -> tessera::Result<()> {
    println!("\n-- read with the safetensors crate ({})", path.display());
    let reps = opts.reps * 10;
    let t_open = best_of(reps, || {
        let data = FileData::open(path).expect("map");
        let st = safetensors::SafeTensors::deserialize(&data).expect("parse");
        st.len()
    });
    println!(
        "{:<44} {:>9.3} ms",
        "safetensors crate mmap + deserialize",
        t_open * 1e3
    );
    let data = FileData::open(path)?;
    let st = safetensors::SafeTensors::deserialize(&data)
        .map_err(|e| tessera::Error::malformed(e.to_string()))?;
    let t_views = best_of(opts.reps, || {
        st.tensors()
            .iter()
            .map(|(_, v)| touch(v.data()))
            .sum::<u64>()
    });
    report("safetensors crate read every tensor", total, t_views, None);
    let t_owned = best_of(opts.reps, || {
        st.tensors()
            .iter()
            .map(|(_, v)| v.data().to_vec())
            .collect::<Vec<_>>()
            .len()
    });
    report("safetensors crate load into Vecs", total, t_owned, None);
    Ok(())
}
