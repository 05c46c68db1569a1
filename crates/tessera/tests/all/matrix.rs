//! The conversion matrix: for every ordered pair of formats (A, B), a model using what
//! both support converts A → B → A without loss (bytes of every tensor equal, metadata
//! kept where both carry it); where B cannot hold something, the conversion refuses and
//! names the tensor. Property-based over dtypes, shapes (scalars and zero-size included)
//! and names.

use std::borrow::Cow;
use std::io::Cursor;

use proptest::prelude::*;

use crate::common::matrix as common;
use common::{carries_metadata, formats, model_of, Spec};
use tessera::convert::{capabilities, prepare, write_to};
use tessera::{
    ConvertOptions, DType, ErrorKind, Format, Model, ReadOptions, TensorInfo, TensorSource,
    TensorView, WriteOptions,
};

#[test]
fn the_matrix_covers_the_registry() {
    let covered = formats();
    // The nine formats the matrix was written for, at least; new ones join by registry.
    for f in [
        Format::Wtxt,
        Format::Ztensor,
        Format::Fold,
        Format::Aero,
        Format::GptrsCheckpoint,
        Format::GptrsArchive,
        Format::Safetensors,
        Format::Npz,
        Format::Gguf,
    ] {
        assert!(covered.contains(&f), "{f} left out of the matrix");
    }
}

fn write_bytes(format: Format, src: &dyn TensorSource) -> tessera::Result<Vec<u8>> {
    let mut cur = Cursor::new(Vec::new());
    write_to(format, src, &mut cur, &WriteOptions::default())?;
    Ok(cur.into_inner())
}

/// Converts `src` into `format` in memory and reads it back as an owned model.
fn through(format: Format, src: &dyn TensorSource) -> tessera::Result<Model> {
    // Metadata is compared only between formats that both carry it; a format that
    // carries none may drop what another format added (e.g. a GPTRS config).
    let opts = ConvertOptions::default().drop_metadata(!carries_metadata(format));
    let prepared = prepare(src, format, opts)?;
    let bytes = write_bytes(format, &prepared)?;
    let file = tessera::open(&bytes, &ReadOptions::default())?;
    assert_eq!(
        file.format(),
        format,
        "wrote {format}, detected {}",
        file.format()
    );
    Model::from_source(file.as_ref())
}

fn common_dtypes(a: Format, b: Format) -> Vec<DType> {
    let (ca, cb) = (capabilities(a).unwrap(), capabilities(b).unwrap());
    ca.dtypes
        .iter()
        .copied()
        .filter(|d| cb.dtypes.contains(d))
        .collect()
}

fn assert_same_tensors(want: &Model, got: &Model, path: &str) {
    assert_eq!(
        want.tensor_infos().len(),
        got.tensor_infos().len(),
        "{path}: tensor count"
    );
    for info in want.tensor_infos() {
        let a = want.tensor(&info.name).unwrap();
        let b = got
            .tensor(&info.name)
            .unwrap_or_else(|e| panic!("{path}: tensor {:?} missing: {e}", info.name));
        assert_eq!(b.info.dtype, info.dtype, "{path}: dtype of {:?}", info.name);
        assert_eq!(b.info.shape, info.shape, "{path}: shape of {:?}", info.name);
        assert_eq!(
            b.data().unwrap(),
            a.data().unwrap(),
            "{path}: bytes of {:?}",
            info.name
        );
    }
}

fn check_pair(a: Format, b: Format, specs: &[Spec]) -> Result<(), TestCaseError> {
    let meta = carries_metadata(a) && carries_metadata(b);
    let model = model_of(specs, meta);
    let path = format!("{a} -> {b} -> {a}");
    let in_a = match through(a, &model) {
        Ok(m) => m,
        Err(e) => {
            // A refusal must be Unsupported and name a tensor.
            prop_assert_eq!(e.kind(), ErrorKind::Unsupported, "{}: {}", path, e);
            prop_assert!(
                specs
                    .iter()
                    .any(|s| e.to_string().contains(&format!("{:?}", s.name))),
                "{}: {}",
                path,
                e
            );
            return Ok(());
        }
    };
    let result = through(b, &in_a).and_then(|in_b| through(a, &in_b));
    match result {
        Ok(back) => {
            assert_same_tensors(&in_a, &back, &path);
            if meta {
                for (k, v) in model.metadata.iter() {
                    prop_assert_eq!(back.metadata.get(k), Some(v), "{}: metadata {}", path, k);
                }
            }
        }
        Err(e) => {
            prop_assert_eq!(e.kind(), ErrorKind::Unsupported, "{}: {}", path, e);
            prop_assert!(
                specs
                    .iter()
                    .any(|s| e.to_string().contains(&format!("{:?}", s.name))),
                "{}: {}",
                path,
                e
            );
        }
    }
    Ok(())
}

fn spec_strategy(dtypes: Vec<DType>) -> impl Strategy<Value = Vec<Spec>> {
    let one = (
        "[a-z][a-z0-9_]{0,10}(\\.[a-z0-9_]{1,6}){0,2}",
        proptest::sample::select(dtypes),
        prop_oneof![
            Just(vec![]),
            proptest::collection::vec(0u64..5, 1..4),
            proptest::collection::vec(1u64..40, 1..3),
        ],
        any::<u8>(),
    )
        .prop_map(|(name, dtype, shape, seed)| Spec {
            name,
            dtype,
            shape,
            seed,
        });
    proptest::collection::vec(one, 1..5).prop_map(|mut v| {
        v.sort_by(|x, y| x.name.cmp(&y.name));
        v.dedup_by(|x, y| x.name == y.name);
        v
    })
}

#[test]
fn every_pair_round_trips_or_refuses_naming_the_tensor() {
    for a in formats() {
        for b in formats() {
            let dtypes = common_dtypes(a, b);
            if dtypes.is_empty() {
                continue;
            }
            let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
                cases: 12,
                failure_persistence: None,
                ..ProptestConfig::default()
            });
            runner
                .run(&spec_strategy(dtypes), |specs| check_pair(a, b, &specs))
                .unwrap_or_else(|e| panic!("{a} -> {b}: {e}"));
        }
    }
}

#[test]
fn a_plain_model_is_lossless_between_every_pair() {
    // f32 matrices with ordinary names: every format holds these.
    let specs = vec![
        Spec {
            name: "layer.0.weight".into(),
            dtype: DType::F32,
            shape: vec![3, 4],
            seed: 1,
        },
        Spec {
            name: "layer.0.bias".into(),
            dtype: DType::F32,
            shape: vec![4],
            seed: 2,
        },
    ];
    for a in formats() {
        for b in formats() {
            let model = model_of(&specs, false);
            let in_a = through(a, &model).unwrap_or_else(|e| panic!("model -> {a}: {e}"));
            let in_b = through(b, &in_a).unwrap_or_else(|e| panic!("{a} -> {b}: {e}"));
            let back = through(a, &in_b).unwrap_or_else(|e| panic!("{b} -> {a}: {e}"));
            assert_same_tensors(&model, &back, &format!("{a} -> {b} -> {a}"));
        }
    }
}

#[test]
fn refusals_name_the_tensor_and_the_option() {
    let mut m = Model::new();
    m.push(
        TensorView::dense(
            TensorInfo::dense("big.f64", DType::F64, vec![2]),
            Cow::Owned(vec![0; 16]),
        )
        .unwrap(),
    )
    .unwrap();
    let e = prepare(&m, Format::GptrsCheckpoint, ConvertOptions::default())
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(e.to_string().contains("\"big.f64\""), "{e}");
    // The hint is data (the CLI spells it --cast, Python cast=True), never a flag.
    assert_eq!(e.hints(), vec![tessera::Hint::Cast], "{e}");
    assert!(!e.to_string().contains("--"), "{e}");
}

#[test]
fn every_refusal_of_a_conversion_is_reported_at_once() {
    // Seven f64 tensors, an i64 one, an f32 one that fits, and metadata: a GPTRS tensor
    // archive (f32, f16, bf16, i32; no metadata) refuses all of it in one error.
    let mut m = Model::new();
    let mut push = |name: &str, dtype: DType| {
        let info = TensorInfo::dense(name, dtype, vec![2]);
        let n = 2 * dtype.size();
        m.push(TensorView::dense(info, Cow::Owned(vec![0; n])).unwrap())
            .unwrap();
    };
    for i in 0..7 {
        push(&format!("d{i}"), DType::F64);
    }
    push("n", DType::I64);
    push("ok", DType::F32);
    m.metadata.insert("author", "me");
    let e = prepare(&m, Format::GptrsArchive, ConvertOptions::default())
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    let r = e.refusals();
    assert_eq!(r.len(), 9, "{e}");
    let tensors: Vec<_> = r.iter().filter_map(|r| r.tensor.as_deref()).collect();
    assert_eq!(tensors, ["d0", "d1", "d2", "d3", "d4", "d5", "d6", "n"]);
    assert!(r
        .iter()
        .any(|r| r.tensor.is_none() && r.hint == Some(tessera::Hint::DropMetadata)));
    assert_eq!(
        e.hints(),
        vec![tessera::Hint::Cast, tessera::Hint::DropMetadata]
    );
    // Grouped: one line per reason, five names then "and 2 more", each with its hint.
    let text = e.render(&|h| format!("<{}>", h.name()));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[0].contains("9 refusals"), "{text}");
    assert!(
        lines[1].contains("7 tensors are f64")
            && lines[1].contains("\"d4\" and 2 more")
            && !lines[1].contains("\"d5\"")
            && lines[1].ends_with("(<cast>)"),
        "{text}"
    );
    assert!(lines[2].contains("tensor \"n\" is i64") && lines[2].ends_with("(<cast>)"));
    assert!(lines[3].contains("1 key") && lines[3].ends_with("(<drop-metadata>)"));
    assert!(!e.to_string().contains("--"), "{e}");
    // Allowing one loss leaves the other, alone on one line.
    let cast = ConvertOptions::default().cast(true);
    let e = prepare(&m, Format::GptrsArchive, cast).err().unwrap();
    assert_eq!(e.refusals().len(), 1);
    assert_eq!(e.hints(), vec![tessera::Hint::DropMetadata]);
    assert_eq!(e.to_string().lines().count(), 1, "{e}");
}
