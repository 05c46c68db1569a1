//! `tessera tour`: the built-in main job. Builds a small model (f32, bf16, i64, a scalar,
//! a zero-size tensor and a sparse CSR matrix, plus metadata), writes it in every format
//! Tessera can write, reads each file back, verifies it, compares every tensor with the
//! original, converts the files into each other and prints what it did.

use std::borrow::Cow;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use tessera::{
    ConvertOptions, DType, FileData, Format, Layout, Model, Part, ReadOptions, TensorInfo,
    TensorSource, TensorView, VerifyOptions, WriteOptions,
};

use crate::cli::TourArgs;

fn le<T: Copy>(v: &[T], f: impl Fn(T) -> Vec<u8>) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

/// The tour's model.
pub fn demo_model() -> tessera::Result<Model> {
    let mut m = Model::new();
    m.metadata.insert("model_name", "tessera-tour");
    m.metadata.insert("description", "a tiny two-layer model");
    let w: Vec<f32> = (0..64 * 32).map(|i| ((i as f32) * 0.37).sin()).collect();
    m.push(TensorView::dense(
        TensorInfo::dense("encoder.weight", DType::F32, vec![64, 32]),
        Cow::Owned(le(&w, |x: f32| x.to_le_bytes().to_vec())),
    )?)?;
    let b: Vec<u16> = (0..32)
        .map(|i| half::bf16::from_f32(i as f32 / 8.0).to_bits())
        .collect();
    m.push(TensorView::dense(
        TensorInfo::dense("encoder.bias", DType::BF16, vec![32]),
        Cow::Owned(le(&b, |x: u16| x.to_le_bytes().to_vec())),
    )?)?;
    let ids: Vec<i64> = (0..10).map(|i| i * 1000 - 3).collect();
    m.push(TensorView::dense(
        TensorInfo::dense("vocab.ids", DType::I64, vec![10]),
        Cow::Owned(le(&ids, |x: i64| x.to_le_bytes().to_vec())),
    )?)?;
    m.push(TensorView::dense(
        TensorInfo::dense("step", DType::I32, vec![]),
        Cow::Owned(1234i32.to_le_bytes().to_vec()),
    )?)?;
    m.push(TensorView::dense(
        TensorInfo::dense("empty", DType::F16, vec![0, 4]),
        Cow::Owned(Vec::new()),
    )?)?;
    let mut info = TensorInfo::dense("adjacency", DType::F32, vec![4, 5]);
    info.layout = Layout::SparseCsr;
    let u64s = |v: &[u64]| le(v, |x: u64| x.to_le_bytes().to_vec());
    m.push(TensorView {
        info,
        parts: vec![
            Part {
                role: "values".into(),
                bytes: Cow::Owned(le(&[1.0f32, 2.5, -3.0], |x: f32| x.to_le_bytes().to_vec())),
            },
            Part {
                role: "indices".into(),
                bytes: Cow::Owned(u64s(&[0, 4, 2])),
            },
            Part {
                role: "indptr".into(),
                bytes: Cow::Owned(u64s(&[0, 2, 2, 3, 3])),
            },
        ],
    })?;
    Ok(m)
}

/// Tensors of `b` equal to those of `a` (dense values compared; dtypes may differ only
/// where the conversion cast them).
fn same_tensors(a: &dyn TensorSource, b: &dyn TensorSource) -> tessera::Result<(usize, usize)> {
    let mut equal = 0;
    let mut total = 0;
    for info in a.tensor_infos() {
        total += 1;
        let Ok(vb) = b.tensor(&info.name) else {
            continue;
        };
        let va = tessera::sparse::densify(a.tensor(&info.name)?)?;
        let vb = tessera::sparse::densify(vb)?;
        let same = if va.info.dtype == vb.info.dtype {
            va.data()? == vb.data()?
        } else {
            let n = va.info.numel()? as usize;
            (0..n).all(|i| {
                va.info.dtype.element_as_f64(va.data().unwrap_or(&[]), i)
                    == vb.info.dtype.element_as_f64(vb.data().unwrap_or(&[]), i)
            })
        };
        if same && va.info.shape == vb.info.shape {
            equal += 1;
        }
    }
    Ok((equal, total))
}

fn write_one(model: &Model, format: Format, path: &Path) -> tessera::Result<Vec<String>> {
    let conv = ConvertOptions::default()
        .cast(true)
        .densify(true)
        .drop_metadata(true);
    // Every integrity layer and compression the format takes (others would be refused).
    let mut opts = WriteOptions::default();
    for (name, value) in [
        ("compression", "zstd"),
        ("digests", "crc32c"),
        ("ecc", "16"),
        ("tensor_hashes", "true"),
        ("control_integrity", "true"),
        ("page_hashes", "4096"),
    ] {
        if format.codec().options.iter().any(|o| o.name == name) {
            opts.set(name, tessera::options::OptionValue::Text(value.into()))?;
        }
    }
    Ok(tessera::convert::convert_file(model, format, path, conv, &opts)?.notes)
}

/// Runs the verb.
pub fn run(args: &TourArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let tmp;
    let dir: PathBuf = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            d.clone()
        }
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let model = demo_model()?;
    writeln!(
        out,
        "tessera tour: a model of {} tensors",
        model.tensor_infos().len()
    )?;
    for t in model.tensor_infos() {
        writeln!(
            out,
            "  {:<16} {:<5} {:?} {}",
            t.name, t.dtype, t.shape, t.layout
        )?;
    }
    writeln!(
        out,
        "\nwrite, read back, verify, compare — in {}",
        dir.display()
    )?;
    let mut written: Vec<(Format, PathBuf)> = Vec::new();
    let mut failures = 0;
    for format in crate::cmd::formats::listed() {
        if !format.can_write() {
            // Detected-only formats (zTensor v2) have nothing to show.
            if format.can_read() {
                writeln!(out, "  {:<12} read only", format.name())?;
            }
            continue;
        }
        if format.identity().single_tensor {
            // A .npy file holds one unnamed array, not a model.
            writeln!(
                out,
                "  {:<12} one array per file: tessera extract FILE NAME -o OUT.npy",
                format.name()
            )?;
            continue;
        }
        let path = match format {
            // `.zt` is zTensor v1's too.
            Format::ZtensorV2 => dir.join("tour-v2.zt"),
            _ => dir.join(format!("tour.{}", format.extensions()[0])),
        };
        let notes = match write_one(&model, format, &path) {
            Ok(n) => n,
            Err(e) => {
                failures += 1;
                writeln!(
                    out,
                    "  {:<12} write FAILED: {}",
                    format.name(),
                    e.render(&crate::cli_hint)
                )?;
                continue;
            }
        };
        let size = std::fs::metadata(&path)?.len();
        let data = FileData::open(&path)?;
        let file = tessera::open(&data, &ReadOptions::default().path(Some(path.clone())))?;
        let report = file.verify(&VerifyOptions::default().path(Some(path.clone())));
        let (equal, total) = same_tensors(&model, file.as_ref())?;
        let ok = report.is_ok() && file.tensor_infos().len() == total;
        if !ok {
            failures += 1;
        }
        writeln!(
            out,
            "  {:<12} {:>7} bytes  verify {} ({} checks)  {equal}/{total} tensors equal{}",
            format.name(),
            size,
            if report.is_ok() { "ok" } else { "FAILED" },
            report.checks.len(),
            if notes.is_empty() {
                String::new()
            } else {
                format!("  [{}]", notes.join("; "))
            }
        )?;
        written.push((format, path));
    }
    if written.len() >= 2 {
        writeln!(
            out,
            "\nconvert each file into the next format and compare with the original"
        )?;
        for pair in written.windows(2) {
            let ((fa, pa), (fb, _)) = (&pair[0], &pair[1]);
            // zTensor v2 shares `.zt` with v1 and lists no extension of its own.
            let ext = fb.extensions().first().copied().unwrap_or("zt");
            let target = dir.join(format!("tour.{}-to.{ext}", fa.name()));
            let data = FileData::open(pa)?;
            let file = tessera::open(&data, &ReadOptions::default())?;
            let conv = ConvertOptions::default()
                .cast(true)
                .densify(true)
                .drop_metadata(true);
            match tessera::convert::convert_file(
                file.as_ref(),
                *fb,
                &target,
                conv,
                &WriteOptions::default(),
            ) {
                Ok(_) => {
                    let d2 = FileData::open(&target)?;
                    let f2 = tessera::open(&d2, &ReadOptions::default())?;
                    let (equal, total) = same_tensors(file.as_ref(), f2.as_ref())?;
                    writeln!(
                        out,
                        "  {} -> {}: {equal}/{total} tensors equal",
                        fa.name(),
                        fb.name()
                    )?;
                }
                Err(e) => {
                    failures += 1;
                    writeln!(
                        out,
                        "  {} -> {}: FAILED: {}",
                        fa.name(),
                        fb.name(),
                        e.render(&crate::cli_hint)
                    )?;
                }
            }
        }
    }
    writeln!(
        out,
        "\n{} formats written and verified{}",
        written.len(),
        if failures == 0 {
            String::new()
        } else {
            format!(", {failures} FAILED")
        }
    )?;
    Ok(if failures == 0 { 0 } else { 1 })
}
