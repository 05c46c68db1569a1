//! FOLD's checkpoint layout (`checkpoint`): `torch_state` (a `torch.save` archive of
//! `{"state_dict": …, **metadata}` by our `.pt` writer), `llm_manifest`, the JSON
//! chunks given with `chunk`, `nuclear_arrays` (NPZ0), then STEN for what neither
//! archive holds. pyfolds reading these files is tests/peers/test_fold.py.

use std::borrow::Cow;
use std::io::Cursor;

use tessera::convert::{prepare, write_to, ConvertOptions, WriteOptions};
use tessera::options::OptionValue;
use tessera::{
    DType, ErrorKind, Format, Model, ReadOptions, TensorInfo, TensorSource, TensorView, Value,
};

fn model() -> Model {
    let mut m = Model::new();
    for (name, d, n) in [
        ("fc.weight", DType::F32, 6),
        ("fc.bias", DType::BF16, 3),
        ("optimizer.state.0.step", DType::I64, 1),
        ("counts", DType::U32, 4),
        ("scale8", DType::F8E4M3FN, 5),
    ] {
        let data: Vec<u8> = (0..n * d.size()).map(|x| (x * 3 + 1) as u8).collect();
        let info = TensorInfo::dense(name, d, vec![n as u64]);
        m.push(TensorView::dense(info, Cow::Owned(data)).unwrap())
            .unwrap();
    }
    m.metadata.insert("config", {
        let mut c = tessera::Map::new();
        c.insert("n_dendrites", 4i64);
        c
    });
    m.metadata.insert("step_id", 7i64);
    m
}

fn write(src: &Model, opts: &WriteOptions) -> tessera::Result<(Vec<u8>, Vec<String>)> {
    let p = prepare(src, Format::Fold, ConvertOptions::default())?;
    let mut out = Cursor::new(Vec::new());
    let r = write_to(Format::Fold, &p, &mut out, opts)?;
    Ok((out.into_inner(), r.notes))
}

fn opts(pairs: &[(&str, OptionValue)]) -> WriteOptions {
    let mut w = WriteOptions::default().timestamp(Some("2026-01-02T03:04:05Z".into()));
    w.set("checkpoint", OptionValue::Bool(true)).unwrap();
    for (k, v) in pairs {
        w.set(k, v.clone()).unwrap();
    }
    w
}

/// Before, every tensor was a STEN chunk and there was no torch_state.
#[test]
fn a_checkpoint_has_the_standard_chunks_and_the_source_values() {
    let m = model();
    let metrics = br#"{"loss":0.25,"acc":[0.5,0.75]}"#.to_vec();
    let mut given = b"metrics=".to_vec();
    given.extend_from_slice(&metrics);
    let (bytes, notes) = write(
        &m,
        &opts(&[
            ("chunks", OptionValue::List(vec![OptionValue::Bytes(given)])),
            ("nuclear", OptionValue::Text("fc.weight".into())),
        ]),
    )
    .unwrap();
    assert_eq!(
        notes,
        ["1 tensors neither torch_state nor nuclear_arrays can hold written as STEN chunks (first: \"scale8\")"]
    );
    let f = tessera::open(&bytes[..], &ReadOptions::default()).unwrap();
    let chunks: Vec<(&str, &str)> = (f.chunks().iter())
        .map(|c| (c.name.as_str(), c.kind.as_str()))
        .collect();
    assert_eq!(
        chunks,
        [
            ("torch_state", "TSAV"),
            ("llm_manifest", "JSON"),
            ("metrics", "JSON"),
            ("nuclear_arrays", "NPZ0"),
            ("scale8", "STEN"),
        ]
    );
    assert_eq!(f.chunk("metrics").unwrap().as_ref(), metrics.as_slice());
    let src = |n: &str| m.tensor(n).unwrap().data().unwrap().to_vec();
    let got = |n: &str| f.tensor(n).unwrap().data().unwrap().to_vec();
    for n in ["fc.weight", "fc.bias", "optimizer.state.0.step"] {
        assert_eq!(got(&format!("torch_state/state_dict.{n}")), src(n), "{n}");
    }
    assert_eq!(got("nuclear_arrays/counts"), src("counts"));
    assert_eq!(got("nuclear_arrays/fc.weight"), src("fc.weight"));
    assert_eq!(got("scale8"), src("scale8"));
    assert_eq!(f.tensor_infos().len(), 6);
    // torch_state is a .pt of {"state_dict": …, "config": …, "step_id": …}.
    let torch = f.chunk("torch_state").unwrap().into_owned();
    let pt = tessera::open(&torch[..], &ReadOptions::default()).unwrap();
    assert_eq!(pt.format(), Format::Pytorch);
    assert_eq!(pt.metadata().get("step_id"), Some(&Value::Int(7)));
    assert_eq!(pt.metadata().get("config"), m.metadata.get("config"));
    // The index metadata is the source's.
    assert_eq!(f.metadata(), &m.metadata);
    // The manifest we made routes resumption to torch_state.
    let man = f.chunk("llm_manifest").unwrap().into_owned();
    let man: serde_json::Value = serde_json::from_slice(&man).unwrap();
    assert_eq!(man["routing"]["resume_training"], "torch_state");
    assert_eq!(
        man["chunks_expected"],
        serde_json::json!(["torch_state", "llm_manifest", "metrics", "nuclear_arrays"])
    );
    assert!(f.verify(&Default::default()).is_ok());
    // And a FOLD→FOLD rewrite copies all of it.
    let (again, notes) = write_plain(f.as_ref());
    assert!(notes.is_empty(), "{notes:?}");
    let g = tessera::open(&again[..], &ReadOptions::default()).unwrap();
    for c in f.chunks() {
        assert_eq!(g.chunk(&c.name).unwrap(), f.chunk(&c.name).unwrap());
    }
}

fn write_plain(src: &dyn tessera::TensorSource) -> (Vec<u8>, Vec<String>) {
    let p = prepare(src, Format::Fold, ConvertOptions::default()).unwrap();
    let mut out = Cursor::new(Vec::new());
    let w = WriteOptions::default().timestamp(Some("2026-01-02T03:04:05Z".into()));
    let r = write_to(Format::Fold, &p, &mut out, &w).unwrap();
    (out.into_inner(), r.notes)
}

/// `chunk` names and JSON are checked before anything is written, each refusal naming
/// what is wrong.
#[test]
fn chunk_names_and_json_are_checked() {
    let m = model();
    let mut w = WriteOptions::default();
    let e = w
        .set("chunk", OptionValue::Text("weights=x.json".into()))
        .unwrap_err();
    assert!(e.to_string().contains("unknown chunk \"weights\""), "{e}");
    assert!(
        e.to_string()
            .contains("llm_manifest, metrics, history, telemetry"),
        "{e}"
    );
    let e = w
        .set(
            "chunk",
            OptionValue::List(vec![
                OptionValue::Text("metrics=a.json".into()),
                OptionValue::Text("metrics=b.json".into()),
            ]),
        )
        .unwrap_err();
    assert!(e.to_string().contains("\"metrics\" given twice"), "{e}");
    let e = w
        .set("chunk", OptionValue::Text("metrics".into()))
        .unwrap_err();
    assert!(e.to_string().contains("not NAME=FILE"), "{e}");
    // Not JSON.
    let e = write(
        &m,
        &opts(&[("chunk", OptionValue::Bytes(b"history={oops".to_vec()))]),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(
        e.to_string().contains("chunk \"history\" is not JSON"),
        "{e}"
    );
    // A missing file is named.
    let e = write(
        &m,
        &opts(&[(
            "chunk",
            OptionValue::Text("telemetry=/nonexistent/t.json".into()),
        )]),
    )
    .unwrap_err();
    assert!(e.to_string().contains("/nonexistent/t.json"), "{e}");
    // nuclear names a tensor, and needs checkpoint.
    let e = write(&m, &opts(&[("nuclear", OptionValue::Text("nope".into()))])).unwrap_err();
    assert!(e.to_string().contains("no tensor named \"nope\""), "{e}");
    let mut w = WriteOptions::default();
    w.set("nuclear", OptionValue::Text("counts".into()))
        .unwrap();
    let e = write(&m, &w).unwrap_err();
    assert!(e.to_string().contains("nuclear needs checkpoint"), "{e}");
}

/// A FOLD checkpoint is not packed into a second torch_state: rewritten with
/// `checkpoint` it is refused (without, its chunks are copied).
#[test]
fn a_checkpoint_source_is_refused_with_the_way_out() {
    let (bytes, _) = write(&model(), &opts(&[])).unwrap();
    let f = tessera::open(&bytes[..], &ReadOptions::default()).unwrap();
    let p = prepare(f.as_ref(), Format::Fold, ConvertOptions::default()).unwrap();
    let e = write_to(Format::Fold, &p, &mut Cursor::new(Vec::new()), &opts(&[])).unwrap_err();
    assert!(
        e.to_string()
            .contains("already has a chunk \"torch_state\""),
        "{e}"
    );
}

/// Without `checkpoint`, given JSON chunks come first, and replace a source chunk of
/// the same name (said).
#[test]
fn given_chunks_without_checkpoint_replace_the_sources() {
    let (bytes, _) = write(&model(), &opts(&[])).unwrap();
    let f = tessera::open(&bytes[..], &ReadOptions::default()).unwrap();
    let mut w = WriteOptions::default();
    w.set(
        "chunk",
        OptionValue::Bytes(b"llm_manifest={\"x\":1}".to_vec()),
    )
    .unwrap();
    let p = prepare(f.as_ref(), Format::Fold, ConvertOptions::default()).unwrap();
    let mut out = Cursor::new(Vec::new());
    let r = write_to(Format::Fold, &p, &mut out, &w).unwrap();
    assert_eq!(
        r.notes,
        ["chunk \"llm_manifest\" of the source replaced by the one given"]
    );
    let out = out.into_inner();
    let g = tessera::open(&out[..], &ReadOptions::default()).unwrap();
    assert_eq!(g.chunk("llm_manifest").unwrap().as_ref(), b"{\"x\":1}");
    assert_eq!(g.chunks()[0].name, "llm_manifest");
    assert_eq!(
        g.chunk("torch_state").unwrap(),
        f.chunk("torch_state").unwrap()
    );
}

/// A FOLD file of ours (one STEN chunk per tensor) written as a checkpoint: its tensors
/// go into the archives once, its STEN chunks are not copied beside them. Before, they
/// were (every tensor stored twice).
#[test]
fn a_fold_source_as_a_checkpoint_stores_each_tensor_once() {
    let m = model();
    let p = prepare(&m, Format::Fold, ConvertOptions::default()).unwrap();
    let mut plain = Cursor::new(Vec::new());
    write_to(Format::Fold, &p, &mut plain, &WriteOptions::default()).unwrap();
    let plain = plain.into_inner();
    let f = tessera::open(&plain[..], &ReadOptions::default()).unwrap();
    let p = prepare(f.as_ref(), Format::Fold, ConvertOptions::default()).unwrap();
    let mut out = Cursor::new(Vec::new());
    write_to(Format::Fold, &p, &mut out, &opts(&[])).unwrap();
    let out = out.into_inner();
    let g = tessera::open(&out[..], &ReadOptions::default()).unwrap();
    let chunks: Vec<(&str, &str)> = (g.chunks().iter())
        .map(|c| (c.name.as_str(), c.kind.as_str()))
        .collect();
    assert_eq!(
        chunks,
        [
            ("torch_state", "TSAV"),
            ("llm_manifest", "JSON"),
            ("nuclear_arrays", "NPZ0"),
            ("scale8", "STEN"),
        ]
    );
    assert_eq!(g.tensor_infos().len(), 5);
}
