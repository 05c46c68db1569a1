//! `VerifyOptions::progress`: over a whole verify, the hook's calls add up to the dense
//! bytes of the file's tensors — counted here from the shapes and dtypes the test wrote
//! (or, for the sets the real tools made, from numpy's manifest), not by the library —
//! for every format, for a set, for the narrow AERO checks and from several threads;
//! a multi-tensor file reports more than once; and the hook changes nothing in the
//! report.

use crate::common::sets as common;

use std::borrow::Cow;
use std::io::Cursor;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tessera::convert::{prepare, write_to};
use tessera::options::OptionValue;
use tessera::{
    open_path, Container, ConvertOptions, DType, Format, Model, ReadOptions, TensorInfo,
    TensorView, VerifyOptions, VerifyReport, WriteOptions,
};

/// (name, dtype, shape, element size): sizes spelled out here, not asked of the library.
const TENSORS: &[(&str, DType, &[u64], u64)] = &[
    ("embed.weight", DType::F32, &[64, 32], 4),
    ("layer.0.bias", DType::F32, &[32], 4),
    ("layer.0.weight", DType::F16, &[32, 48], 2),
    ("layer.1.weight", DType::I32, &[16, 3, 5], 4),
    ("scale", DType::F32, &[], 4),
    ("empty", DType::F32, &[0, 7], 4),
];

fn expected_bytes() -> u64 {
    TENSORS
        .iter()
        .map(|(_, _, shape, size)| shape.iter().product::<u64>() * size)
        .sum()
}

fn model() -> Model {
    let mut m = Model::new();
    for (k, (name, dtype, shape, size)) in TENSORS.iter().enumerate() {
        let n = (shape.iter().product::<u64>() * size) as usize;
        // Small integers in every element: valid f16/f32/i32 bit patterns alike.
        let bytes: Vec<u8> = (0..n).map(|i| ((i * 7 + k) % 61) as u8).collect();
        let info = TensorInfo::dense(*name, *dtype, shape.to_vec());
        m.push(TensorView::dense(info, Cow::Owned(bytes)).unwrap())
            .unwrap();
    }
    m
}

fn write(format: Format, opts: &WriteOptions) -> Vec<u8> {
    let src = model();
    let prepared = prepare(&src, format, ConvertOptions::default()).unwrap();
    let mut out = Cursor::new(Vec::new());
    write_to(format, &prepared, &mut out, opts).unwrap();
    out.into_inner()
}

/// A verify's report and the hook's calls.
struct Counted {
    report: VerifyReport,
    calls: Vec<u64>,
}

fn verify_counted(c: &dyn Container, base: &VerifyOptions) -> Counted {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let c2 = calls.clone();
    let opts = base
        .clone()
        .with_progress(move |n| c2.lock().unwrap().push(n));
    let report = c.verify(&opts);
    drop(opts);
    let calls = Arc::try_unwrap(calls).unwrap().into_inner().unwrap();
    Counted { report, calls }
}

fn check(format: Format, opts: &WriteOptions) {
    let bytes = write(format, opts);
    let file = tessera::open(&bytes, &ReadOptions::default()).unwrap();
    assert_eq!(file.format(), format);
    let plain = file.verify(&VerifyOptions::default());
    let counted = verify_counted(file.as_ref(), &VerifyOptions::default());
    assert!(counted.report.is_ok(), "{format}: {:?}", counted.report);
    assert_eq!(
        counted.report, plain,
        "{format}: the hook changed the report"
    );
    let sum: u64 = counted.calls.iter().sum();
    assert_eq!(sum, expected_bytes(), "{format}: calls {:?}", counted.calls);
    assert!(
        counted.calls.len() > 1,
        "{format}: one call for {} tensors",
        TENSORS.len()
    );
    assert!(
        counted.calls.iter().all(|&n| n > 0),
        "{format}: a call of 0"
    );
    assert_eq!(
        tessera::verify::progress_total(file.tensor_infos()),
        expected_bytes(),
        "{format}: the CLI's total"
    );
}

fn opts(pairs: &[(&str, OptionValue)]) -> WriteOptions {
    let mut o = WriteOptions::default();
    for (k, v) in pairs {
        o.set(k, v.clone()).unwrap();
    }
    o
}

#[test]
fn every_format_reports_its_tensor_bytes() {
    let text = |s: &str| OptionValue::Text(s.into());
    let cases: Vec<(Format, WriteOptions)> = vec![
        (Format::Safetensors, opts(&[])),
        (Format::Npz, opts(&[])),
        (Format::Npz, opts(&[("compression", text("zstd"))])),
        (Format::Gguf, opts(&[])),
        (Format::Ztensor, opts(&[])),
        (
            Format::Ztensor,
            opts(&[("compression", text("zstd")), ("digests", text("sha256"))]),
        ),
        (Format::ZtensorV2, opts(&[])),
        (Format::GptrsCheckpoint, opts(&[])),
        (Format::GptrsArchive, opts(&[])),
        (Format::Fold, opts(&[])),
        (
            Format::Fold,
            opts(&[("compression", text("zstd")), ("ecc", OptionValue::Int(8))]),
        ),
        (Format::Aero, opts(&[])),
        // Every pass AERO has: chunk BLAKE3, PHSH pages (in several shards), hash_b3.
        (
            Format::Aero,
            opts(&[
                ("tensor_hashes", OptionValue::Flag),
                ("control_integrity", OptionValue::Flag),
                ("page_hashes", OptionValue::Int(1024)),
                ("shard_size", OptionValue::Int(4096)),
            ]),
        ),
        (Format::Wtxt, opts(&[])),
        (Format::Pytorch, opts(&[])),
    ];
    for (format, o) in &cases {
        check(*format, o);
    }
}

#[test]
fn a_single_npy_array_reports_its_bytes() {
    let mut m = Model::new();
    let info = TensorInfo::dense("x", DType::F64, vec![3, 5]);
    m.push(TensorView::dense(info, Cow::Owned(vec![0u8; 120])).unwrap())
        .unwrap();
    let mut out = Cursor::new(Vec::new());
    write_to(Format::Npy, &m, &mut out, &WriteOptions::default()).unwrap();
    let bytes = out.into_inner();
    let file = tessera::open(&bytes, &ReadOptions::default()).unwrap();
    let c = verify_counted(file.as_ref(), &VerifyOptions::default());
    assert_eq!(c.calls, [3 * 5 * 8]);
}

#[test]
fn aero_control_and_tensor_checks_count_what_they_skip() {
    let bytes = write(
        Format::Aero,
        &opts(&[
            ("tensor_hashes", OptionValue::Flag),
            ("page_hashes", OptionValue::Int(1024)),
        ]),
    );
    let file = tessera::open(&bytes, &ReadOptions::default()).unwrap();
    let control = VerifyOptions::default().control_only(true);
    // A tensor named twice is counted once.
    let some = VerifyOptions::default().tensors(vec![
        "layer.0.weight".into(),
        "scale".into(),
        "scale".into(),
    ]);
    for base in [control, some] {
        let c = verify_counted(file.as_ref(), &base);
        assert!(c.report.is_ok(), "{:?}", c.report);
        assert_eq!(c.report, file.verify(&base));
        assert_eq!(c.calls.iter().sum::<u64>(), expected_bytes(), "{base:?}");
    }
}

#[test]
fn parallel_verifies_call_from_several_threads_and_still_add_up() {
    // FOLD checks its chunks in parallel: many tensors in many chunks, on a pool of
    // four threads. Each call waits (up to 10 s) until a second thread has called too,
    // so the test does not depend on how the scheduler spreads the chunks.
    let mut m = Model::new();
    for i in 0..64u64 {
        let info = TensorInfo::dense(format!("t{i:02}"), DType::F32, vec![256, i + 1]);
        let n = 256 * (i + 1) as usize * 4;
        m.push(TensorView::dense(info, Cow::Owned(vec![(i % 200) as u8; n])).unwrap())
            .unwrap();
    }
    let want: u64 = (0..64u64).map(|i| 256 * (i + 1) * 4).sum();
    let mut out = Cursor::new(Vec::new());
    write_to(Format::Fold, &m, &mut out, &WriteOptions::default()).unwrap();
    let bytes = out.into_inner();
    let file = tessera::open(&bytes, &ReadOptions::default()).unwrap();
    assert!(file.chunks().len() > 8, "{} chunks", file.chunks().len());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    let total = Arc::new(AtomicU64::new(0));
    let seen = Arc::new((
        Mutex::new(std::collections::HashSet::new()),
        std::sync::Condvar::new(),
    ));
    let (t2, s2) = (total.clone(), seen.clone());
    let opts = VerifyOptions::default().with_progress(move |n| {
        t2.fetch_add(n, Ordering::Relaxed);
        let (set, cv) = &*s2;
        let mut set = set.lock().unwrap();
        set.insert(std::thread::current().id());
        cv.notify_all();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while set.len() < 2 && std::time::Instant::now() < deadline {
            set = cv
                .wait_timeout(set, std::time::Duration::from_millis(50))
                .unwrap()
                .0;
        }
    });
    let report = pool.install(|| file.verify(&opts));
    assert!(report.is_ok());
    assert!(
        seen.0.lock().unwrap().len() > 1,
        "every call from one thread"
    );
    assert_eq!(total.load(Ordering::Relaxed), want);
}

/// numpy's element size for the manifest's dtype names.
fn numpy_size(dtype: &str) -> u64 {
    match dtype {
        "float64" | "int64" => 8,
        "float32" | "int32" => 4,
        "float16" | "int16" | "bfloat16" => 2,
        "int8" | "uint8" | "bool" => 1,
        other => panic!("dtype {other} not in the table"),
    }
}

#[test]
fn a_set_forwards_the_hook_to_every_shard() {
    let manifest = common::manifest();
    for set in ["hf", "gguf"] {
        let want: u64 = (manifest[set]["tensors"].as_object().unwrap().values())
            .map(|t| {
                let n: u64 = (t["shape"].as_array().unwrap().iter())
                    .map(|d| d.as_u64().unwrap())
                    .product();
                n * numpy_size(t["dtype"].as_str().unwrap())
            })
            .sum();
        let opened = open_path(&common::data(set), &ReadOptions::default()).unwrap();
        let c = verify_counted(opened.container(), &VerifyOptions::default());
        assert!(c.report.is_ok(), "{set}: {:?}", c.report);
        assert_eq!(c.calls.iter().sum::<u64>(), want, "{set}: {:?}", c.calls);
        assert!(c.calls.len() > 1, "{set}");
    }
}

#[test]
fn ztensor2_shards_share_the_progress_with_the_tensors() {
    // Written by ztensor 2.1.2 (tests/data/ztensor2/shards/gen.py): the shard files'
    // digests are a pass of their own before the tensors'.
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ztensor2/shards/");
    let want: serde_json::Value =
        serde_json::from_slice(&std::fs::read(format!("{dir}expected.json")).unwrap()).unwrap();
    let size = |d: &str| match d {
        "f64" | "i64" => 8,
        "f32" => 4,
        "f16" => 2,
        other => panic!("dtype {other} not in the table"),
    };
    let want: u64 = (want["tensors"].as_object().unwrap().values())
        .map(|t| {
            let n: u64 = (t["shape"].as_array().unwrap().iter())
                .map(|d| d.as_u64().unwrap())
                .product();
            n * size(t["dtype"].as_str().unwrap())
        })
        .sum();
    let path = std::path::PathBuf::from(format!("{dir}model.zt"));
    let opened = open_path(&path, &ReadOptions::default()).unwrap();
    let c = verify_counted(opened.container(), &VerifyOptions::default());
    assert!(c.report.is_ok(), "{:?}", c.report);
    assert!(c.report.checks.iter().any(|k| k.layer == "shard digest"));
    assert_eq!(c.calls.iter().sum::<u64>(), want, "{:?}", c.calls);
}
