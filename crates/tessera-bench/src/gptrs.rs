//! `gptrs` suite: GPTRS v2 checkpoint write and read throughput beside the `safetensors`
//! crate on the same tensors, in the same run.
//!
//! - serialize: Tessera's streaming checkpoint writer into a pre-sized `Vec` vs
//!   `safetensors::serialize` (which also builds a `Vec`);
//! - write to disk: `convert::write_file` (temp sibling, fsync, rename) vs
//!   `safetensors::serialize_to_file` (temp sibling, rename) followed by an fsync, so
//!   both are equally durable;
//! - open: parse + validate the index and take zero-copy views of every tensor vs
//!   `SafeTensors::deserialize` + every `tensor()` view (neither touches the data);
//! - load: open, then copy every tensor into an owned `Vec` (what a framework does when it
//!   does not map) vs the same with safetensors;
//! - read mapped: open a memory-mapped file (page cache warm) and read every byte of
//!   every tensor vs the same with safetensors.

use std::time::Instant;

use safetensors::tensor::{Dtype, SafeTensors, View};
use tessera::convert::{self, WriteOptions};
use tessera::formats::gptrs::GptrsFile;
use tessera::{Format, Limits, Model, TensorSource};

use crate::common::{report, synthetic_model, Opts};

/// Best wall time of `reps` runs of `f`; the first error stops the suite (a failed run
/// must not pass for a fast one).
fn best_of<T, E: std::fmt::Display>(
    reps: usize,
    mut f: impl FnMut() -> Result<T, E>,
) -> tessera::Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        let r = f().map_err(|e| tessera::Error::invalid_input(e.to_string()))?;
        best = best.min(t.elapsed().as_secs_f64());
        std::hint::black_box(r);
    }
    Ok(best)
}

/// A borrowed tensor for `safetensors::serialize`.
struct StView<'a> {
    shape: Vec<usize>,
    data: &'a [u8],
}

impl View for StView<'_> {
    fn dtype(&self) -> Dtype {
        Dtype::F32
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Borrowed(self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

fn st_views(m: &Model) -> tessera::Result<Vec<(String, StView<'_>)>> {
    let mut v = Vec::new();
    for info in m.tensor_infos() {
        let t = m.tensor(&info.name)?;
        let data = match t.parts.into_iter().next().map(|p| p.bytes) {
            Some(std::borrow::Cow::Borrowed(b)) => b,
            _ => return Err(tessera::Error::invalid_input("model tensors are borrowed")),
        };
        v.push((
            info.name.clone(),
            StView {
                shape: info.shape.iter().map(|&d| d as usize).collect(),
                data,
            },
        ));
    }
    Ok(v)
}

fn st_err(e: safetensors::SafeTensorError) -> tessera::Error {
    tessera::Error::invalid_input(format!("safetensors: {e:?}"))
}

/// Reads every byte (as u64 words where it can): what using the weights costs.
fn read_all(b: &[u8]) -> u64 {
    let mut it = b.chunks_exact(8);
    let mut s = 0u64;
    for w in &mut it {
        s = s.wrapping_add(u64::from_le_bytes([
            w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7],
        ]));
    }
    it.remainder()
        .iter()
        .fold(s, |s, &x| s.wrapping_add(x as u64))
}

/// Runs the suite.
pub fn run(opts: &Opts) -> tessera::Result<()> {
    let t = Instant::now();
    let model = synthetic_model(opts)?;
    let mut bytes = 0usize;
    for i in model.tensor_infos() {
        bytes += i.dense_nbytes()? as usize;
    }
    println!(
        "gptrs: {} tensors, {:.1} MiB of f32 (built in {:.1}s); best of {}",
        model.tensor_infos().len(),
        bytes as f64 / (1 << 20) as f64,
        t.elapsed().as_secs_f64(),
        opts.reps
    );
    let wopts = WriteOptions::default();

    // --- serialize into memory -------------------------------------------------------
    let mut gptrs_bytes = Vec::new();
    let g_ser = best_of(opts.reps, || {
        let mut out = std::io::Cursor::new(Vec::with_capacity(bytes + (1 << 20)));
        convert::write_to(Format::GptrsCheckpoint, &model, &mut out, &wopts).map(|_| ())?;
        gptrs_bytes = out.into_inner();
        Ok::<(), tessera::Error>(())
    })?;
    let views = st_views(&model)?;
    let mut st_bytes = Vec::new();
    let s_ser = best_of(opts.reps, || {
        let v = views.iter().map(|(n, v)| {
            (
                n.as_str(),
                StView {
                    shape: v.shape.clone(),
                    data: v.data,
                },
            )
        });
        st_bytes = safetensors::serialize(v, None).map_err(st_err)?;
        Ok::<(), tessera::Error>(())
    })?;
    report(
        "serialize checkpoint into memory",
        bytes,
        g_ser,
        Some(("safetensors", s_ser)),
    );

    // --- write to disk, durable -------------------------------------------------------
    let dir = tempfile::tempdir()?;
    let gpath = dir.path().join("bench.gptrs");
    let spath = dir.path().join("bench.safetensors");
    let g_w = best_of(opts.reps, || {
        convert::write_file(Format::GptrsCheckpoint, &model, &gpath, &wopts).map(|_| ())
    })?;
    let s_w = best_of(opts.reps, || -> tessera::Result<()> {
        let v = views.iter().map(|(n, v)| {
            (
                n.as_str(),
                StView {
                    shape: v.shape.clone(),
                    data: v.data,
                },
            )
        });
        safetensors::serialize_to_file(v, None, &spath).map_err(st_err)?;
        // serialize_to_file does not fsync; add it so both are equally durable.
        std::fs::File::open(&spath)?.sync_all()?;
        Ok(())
    })?;
    report(
        "write checkpoint file (fsync)",
        bytes,
        g_w,
        Some(("safetensors", s_w)),
    );
    drop(views);
    drop(model);

    // --- open: index + zero-copy views --------------------------------------------------
    let g_open = best_of(opts.reps.max(5), || -> tessera::Result<usize> {
        let f = GptrsFile::parse(&gptrs_bytes, &Limits::default())?;
        let mut n = 0;
        for info in f.tensor_infos() {
            n += f.tensor(&info.name)?.nbytes() as usize;
        }
        Ok(n)
    })?;
    let s_open = best_of(opts.reps.max(5), || -> tessera::Result<usize> {
        let st = SafeTensors::deserialize(&st_bytes).map_err(st_err)?;
        let mut n = 0;
        for name in st.names() {
            n += st.tensor(name).map_err(st_err)?.data().len();
        }
        Ok(n)
    })?;
    report(
        "open + zero-copy views (no data touched)",
        bytes,
        g_open,
        Some(("safetensors", s_open)),
    );
    println!(
        "{:<44} {:>9.1} us   safetensors {:.1} us",
        "  (open time itself)",
        g_open * 1e6,
        s_open * 1e6
    );

    // --- load: copy every tensor out ----------------------------------------------------
    let g_load = best_of(opts.reps, || -> tessera::Result<Vec<Vec<u8>>> {
        let f = GptrsFile::parse(&gptrs_bytes, &Limits::default())?;
        f.tensor_infos()
            .iter()
            .map(|i| Ok(f.tensor(&i.name)?.data()?.to_vec()))
            .collect()
    })?;
    let s_load = best_of(opts.reps, || -> tessera::Result<Vec<Vec<u8>>> {
        let st = SafeTensors::deserialize(&st_bytes).map_err(st_err)?;
        st.names()
            .into_iter()
            .map(|n| Ok(st.tensor(n).map_err(st_err)?.data().to_vec()))
            .collect()
    })?;
    report(
        "load: open + copy every tensor",
        bytes,
        g_load,
        Some(("safetensors", s_load)),
    );
    // --- mapped file, page cache warm ---------------------------------------------------
    // Both files written the same way (one write from memory): the page cache then holds
    // them alike, so this compares the readers. (A file streamed out in many unaligned
    // writes sits in smaller page-cache folios and maps measurably slower on first touch
    // right after writing; that is the kernel's doing, not the reader's.)
    let gplain = dir.path().join("plain.gptrs");
    std::fs::write(&gplain, &gptrs_bytes)?;
    std::fs::write(&spath, &st_bytes)?;
    drop(gptrs_bytes);
    drop(st_bytes);
    let g_map = best_of(opts.reps, || -> tessera::Result<u64> {
        let data = tessera::FileData::open(&gplain)?;
        let f = GptrsFile::parse(&data, &Limits::default())?;
        let mut s = 0u64;
        for i in f.tensor_infos() {
            s = s.wrapping_add(read_all(f.tensor(&i.name)?.data()?));
        }
        Ok(s)
    })?;
    let s_map = best_of(opts.reps, || -> tessera::Result<u64> {
        let data = tessera::FileData::open(&spath)?;
        let st = SafeTensors::deserialize(&data).map_err(st_err)?;
        let mut s = 0u64;
        for n in st.names() {
            s = s.wrapping_add(read_all(st.tensor(n).map_err(st_err)?.data()));
        }
        Ok(s)
    })?;
    report(
        "mmap file + read every byte",
        bytes,
        g_map,
        Some(("safetensors", s_map)),
    );
    Ok(())
}
