//! GPTRS v2: the interop samples read with the values MANIFEST.md states; our writer
//! reproduces them byte for byte; round trips, determinism, conversions and casts.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use tessera::convert::{self, WriteOptions};
use tessera::formats::gptrs::{self, GptrsFile, Kind};
use tessera::{
    Container, ConvertOptions, DType, ErrorKind, Format, Limits, Map, Model, ReadOptions, Status,
    TensorInfo, TensorSource, TensorView, Value,
};

const SAMPLES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/interop-samples/gptrs"
);
const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/gptrs");

fn sample(name: &str) -> Vec<u8> {
    std::fs::read(PathBuf::from(SAMPLES).join(name)).unwrap()
}
fn vector(name: &str) -> Vec<u8> {
    std::fs::read(PathBuf::from(VECTORS).join(name)).unwrap()
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}
fn i32s(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn rg(info: &TensorInfo) -> Option<&Value> {
    info.attrs.get("requires_grad")
}

/// The three tensors of the samples, as MANIFEST.md states them (numpy 0-d `scalar`
/// became shape [1] in the exporter).
fn manifest_model(with_config: bool) -> Model {
    let mut m = Model::new();
    let mut b = TensorInfo::dense("b", DType::I32, vec![2]);
    b.attrs.insert("requires_grad", true);
    let bytes = |v: &[u32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    m.push(TensorView::dense(b, Cow::Owned(bytes(&[1, (-2i32) as u32]))).unwrap())
        .unwrap();
    m.push(
        TensorView::dense(
            TensorInfo::dense("scalar", DType::F32, vec![1]),
            Cow::Owned(bytes(&[3.5f32.to_bits()])),
        )
        .unwrap(),
    )
    .unwrap();
    let w: Vec<u32> = (0..6).map(|i| (i as f32).to_bits()).collect();
    m.push(
        TensorView::dense(
            TensorInfo::dense("wte.weight", DType::F32, vec![2, 3]),
            Cow::Owned(bytes(&w)),
        )
        .unwrap(),
    )
    .unwrap();
    if with_config {
        let mut cfg = Map::new();
        cfg.insert("vocab_size", 16i64);
        cfg.insert("embed_dim", 8i64);
        m.metadata.insert("kind", "gpt");
        m.metadata.insert("config", cfg);
    }
    m
}

fn write(format: Format, src: &dyn TensorSource, opts: &WriteOptions) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    convert::write_to(format, src, &mut out, opts).unwrap();
    out.into_inner()
}

fn zero_ids() -> WriteOptions {
    WriteOptions::default()
        .with(tessera::formats::gptrs::GptrsOptions::default().zero_base_id(true))
}

#[test]
fn checkpoint_sample_reads_with_manifest_values() {
    let data = sample("py_exporter_v2.gptrs");
    let f = tessera::open(&data, &ReadOptions::default()).unwrap();
    assert_eq!(f.format(), Format::GptrsCheckpoint);
    assert_eq!(f.version(), "2");
    let names: Vec<_> = f.tensor_infos().iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["b", "scalar", "wte.weight"]);

    let b = f.tensor("b").unwrap();
    assert_eq!((b.info.dtype, &b.info.shape[..]), (DType::I32, &[2u64][..]));
    assert_eq!(i32s(b.data().unwrap()), [1, -2]);
    assert_eq!(rg(&b.info), Some(&Value::Bool(true)));
    assert!(b.is_borrowed(), "reads are zero-copy");

    let s = f.tensor("scalar").unwrap();
    assert_eq!((s.info.dtype, &s.info.shape[..]), (DType::F32, &[1u64][..]));
    assert_eq!(f32s(s.data().unwrap()), [3.5]);
    assert_eq!(rg(&s.info), None, "a 0 byte is not an invented false");

    let w = f.tensor("wte.weight").unwrap();
    assert_eq!(&w.info.shape[..], &[2, 3]);
    assert_eq!(f32s(w.data().unwrap()), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(rg(&w.info), None);

    let m = f.metadata();
    assert_eq!(m.keys().collect::<Vec<_>>(), ["kind", "config"]);
    assert_eq!(m.get("kind"), Some(&Value::from("gpt")));
    let cfg = m.get("config").unwrap().as_map().unwrap();
    assert_eq!(cfg.keys().collect::<Vec<_>>(), ["vocab_size", "embed_dim"]);
    assert_eq!(cfg.get("vocab_size"), Some(&Value::Int(16)));
    assert_eq!(cfg.get("embed_dim"), Some(&Value::Int(8)));

    let g = GptrsFile::parse(&data, &Limits::default()).unwrap();
    assert_eq!(g.data_start(), 263);
    // Lookup by BaseParamId (ORIGINALS.md §4.3: u128 0x455e0fce…d310 is "wte.weight").
    assert_eq!(
        g.name_for_base_id(0x455e0fceaa263f358b3b1a3b1c77d310),
        Some("wte.weight")
    );
    assert_eq!(g.name_for_base_id(1), None);
    assert!(g.entries().iter().all(|e| e.stored_base_id == [0; 16]));
    assert!(g.warnings().is_empty(), "{:?}", g.warnings());

    // base_id 0 everywhere: nothing to check, said per tensor; nothing failed.
    let rep = f.verify(&Default::default());
    assert!(rep.is_ok());
    let ids: Vec<_> = rep.checks.iter().filter(|c| c.layer == "base_id").collect();
    assert_eq!(ids.len(), 3);
    assert!(ids.iter().all(|c| c.status == Status::NotChecked));
    assert!(ids[2]
        .detail
        .as_ref()
        .unwrap()
        .contains("10d3771c3b1a3b8b353f26aace0f5e45"));
}

#[test]
fn archive_sample_reads_with_manifest_values() {
    let data = sample("py_exporter_v2.gptrsten");
    let f = tessera::open(&data, &ReadOptions::default()).unwrap();
    assert_eq!(f.format(), Format::GptrsArchive);
    assert!(f.metadata().is_empty());
    let names: Vec<_> = f.tensor_infos().iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["b", "scalar", "wte.weight"]);
    assert_eq!(i32s(f.tensor("b").unwrap().data().unwrap()), [1, -2]);
    assert_eq!(
        rg(&f.tensor_infos()[0]),
        Some(&Value::Bool(true)),
        "requires_grad b = 1"
    );
    assert_eq!(rg(&f.tensor_infos()[1]), None);
    assert_eq!(f32s(f.tensor("scalar").unwrap().data().unwrap()), [3.5]);
    assert_eq!(f.tensor_infos()[1].shape, [1]);
    assert_eq!(
        f32s(f.tensor("wte.weight").unwrap().data().unwrap()),
        [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    );
    assert!(f.verify(&Default::default()).is_ok());
}

#[test]
fn writer_reproduces_both_samples_byte_for_byte() {
    let chk = write(Format::GptrsCheckpoint, &manifest_model(true), &zero_ids());
    assert_eq!(chk, sample("py_exporter_v2.gptrs"));
    let ten = write(Format::GptrsArchive, &manifest_model(false), &zero_ids());
    assert_eq!(ten, sample("py_exporter_v2.gptrsten"));
}

#[test]
fn rewrite_of_the_samples_is_byte_exact_and_real_ids_verify() {
    for name in ["py_exporter_v2.gptrs", "py_exporter_v2.gptrsten"] {
        let data = sample(name);
        let f = tessera::open(&data, &ReadOptions::default()).unwrap();
        let format = f.format();
        assert_eq!(write(format, &*f, &zero_ids()), data, "{name}");

        // Default options store the real base ids; they verify, per tensor.
        let real = write(format, &*f, &WriteOptions::default());
        let g = GptrsFile::parse(&real, &Limits::default()).unwrap();
        if g.kind() == Kind::Checkpoint {
            for e in g.entries() {
                assert_eq!(e.stored_base_id, gptrs::base_id(&e.name));
            }
            assert_eq!(
                tessera::util::hex(&g.entries()[2].stored_base_id),
                "10d3771c3b1a3b8b353f26aace0f5e45"
            );
            let rep = g.verify(&Default::default());
            let ok = rep
                .checks
                .iter()
                .filter(|c| c.layer == "base_id" && c.status == Status::Ok)
                .count();
            assert_eq!(ok, 3);
            g.check_base_ids().unwrap();
        } else {
            assert_eq!(real, data, "archives have no base_id");
        }
    }
}

#[test]
fn all_dtypes_rank0_and_empty_read_and_round_trip() {
    for name in ["ok-all-dtypes.gptrs", "ok-all-dtypes.gptrsten"] {
        let data = vector(name);
        let f = GptrsFile::parse(&data, &Limits::default()).unwrap();
        assert!(f.warnings().is_empty(), "{name}: {:?}", f.warnings());
        let dt: Vec<_> = f.tensor_infos().iter().map(|i| i.dtype).collect();
        assert_eq!(
            dt,
            [DType::BF16, DType::F32, DType::F16, DType::I32, DType::F32]
        );
        let bf = f.tensor("bf").unwrap();
        let v: Vec<f32> = bf
            .data()
            .unwrap()
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect();
        assert_eq!(v, [1.0, -2.0, 3.140625]);
        let h = f.tensor("h").unwrap();
        assert_eq!(h.data().unwrap(), [0x00, 0x3c, 0x00, 0xc0]);
        assert_eq!(rg(&h.info), Some(&Value::Bool(true)));
        assert_eq!(i32s(f.tensor("i").unwrap().data().unwrap()), [-1, i32::MAX]);
        let s = f.tensor("s").unwrap();
        assert!(s.info.shape.is_empty(), "rank 0 stays rank 0");
        assert_eq!(f32s(s.data().unwrap()), [0.25]);
        let e = f.tensor("empty").unwrap();
        assert_eq!((e.info.shape.clone(), e.nbytes()), (vec![0, 4], 0));
        // Our writer gives the same file back (contiguous, sorted, real ids).
        assert_eq!(
            write(f.kind().format(), &f, &WriteOptions::default()),
            data,
            "{name}"
        );
    }
    // Metadata tree of the checkpoint, including runtime and a non-ASCII string.
    let data = vector("ok-all-dtypes.gptrs");
    let f = GptrsFile::parse(&data, &Limits::default()).unwrap();
    let m = f.metadata();
    assert_eq!(m.keys().collect::<Vec<_>>(), ["kind", "config", "runtime"]);
    let cfg = m.get("config").unwrap().as_map().unwrap();
    assert_eq!(cfg.get("eps"), Some(&Value::Float(1e-5)));
    assert_eq!(cfg.get("name"), Some(&Value::from("é")));
    assert!(m.get("runtime").unwrap().as_map().is_some());
}

#[test]
fn config_is_byte_exact_through_a_model_only_when_canonical() {
    // From the file itself: the exact bytes (Rust-style `1e-5`, raw UTF-8) survive.
    let data = vector("ok-all-dtypes.gptrs");
    let f = GptrsFile::parse(&data, &Limits::default()).unwrap();
    assert_eq!(
        write(Format::GptrsCheckpoint, &f, &Default::default()),
        data
    );
    // Edited metadata is re-serialized from the tree (the raw bytes no longer match).
    let mut m = Model::from_source(&f).unwrap();
    m.metadata.insert("kind", "gpt2");
    let out = write(Format::GptrsCheckpoint, &m, &Default::default());
    let g = GptrsFile::parse(&out, &Limits::default()).unwrap();
    assert_eq!(g.metadata().get("kind"), Some(&Value::from("gpt2")));
    assert_eq!(g.metadata().get("config"), f.metadata().get("config"));
    assert_eq!(g.metadata().get("runtime"), f.metadata().get("runtime"));
    assert_eq!(
        g.metadata().keys().collect::<Vec<_>>(),
        ["kind", "config", "runtime"]
    );
    // Compact JSON (no whitespace), keys in their order.
    let json = std::str::from_utf8(g.config_json().unwrap()).unwrap();
    assert!(
        json.starts_with(r#"{"kind":"gpt2","config":{"vocab_size":16,"eps":"#),
        "{json}"
    );
    assert!(!json.contains(' '));
}

#[test]
fn legacy_config_reads_as_gpt_and_is_kept_on_rewrite() {
    let data = vector("ok-legacy-config.gptrs");
    let f = GptrsFile::parse(&data, &Limits::default()).unwrap();
    assert!(f.is_legacy_config());
    assert_eq!(f.metadata().get("kind"), Some(&Value::from("gpt")));
    let cfg = f.metadata().get("config").unwrap().as_map().unwrap();
    assert_eq!(cfg.get("dropout"), Some(&Value::Float(0.1)));
    assert!(f.warnings().iter().any(|w| w.contains("legacy")));
    assert_eq!(
        write(Format::GptrsCheckpoint, &f, &Default::default()),
        data
    );
}

#[test]
fn lint_only_oddities_open_with_warnings() {
    let data = vector("ok-unsorted-gap-tail.gptrsten");
    let f = GptrsFile::parse(&data, &Limits::default()).unwrap();
    let w = f.warnings().join("\n");
    assert!(w.contains("not sorted"), "{w}");
    assert!(w.contains("contiguous"), "{w}");
    assert!(w.contains("4 bytes after the last tensor"), "{w}");
    assert!(w.contains("requires_grad byte is 7"), "{w}");
    assert_eq!(f32s(f.tensor("a").unwrap().data().unwrap()), [3.0]);
    assert_eq!(rg(&f.tensor_infos()[0]), Some(&Value::Bool(true)));
    // Rewriting normalizes: sorted, contiguous, no tail.
    let out = write(Format::GptrsArchive, &f, &Default::default());
    let g = GptrsFile::parse(&out, &Limits::default()).unwrap();
    assert!(g.warnings().is_empty(), "{:?}", g.warnings());
    assert_eq!(g.entries()[0].name, "a");
}

#[test]
fn writing_is_deterministic_and_streams_in_name_order() {
    let mut m = Model::new();
    for name in ["z.w", "a.w", "m.b"] {
        m.push(
            TensorView::dense(
                TensorInfo::dense(name, DType::F16, vec![3]),
                Cow::Owned(vec![1, 2, 3, 4, 5, 6]),
            )
            .unwrap(),
        )
        .unwrap();
    }
    let a = write(Format::GptrsCheckpoint, &m, &Default::default());
    let b = write(Format::GptrsCheckpoint, &m, &Default::default());
    assert_eq!(a, b);
    let g = GptrsFile::parse(&a, &Limits::default()).unwrap();
    assert!(g.warnings().is_empty());
    let names: Vec<_> = g.entries().iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["a.w", "m.b", "z.w"]);

    // The low-level writer refuses out-of-order data and an early finish.
    let plan = |n: &str| gptrs::PlannedTensor {
        name: n.into(),
        dtype: DType::I32,
        shape: vec![1],
        requires_grad: false,
    };
    let mut w = gptrs::GptrsWriter::new(
        Vec::new(),
        Kind::Archive,
        None,
        vec![plan("b"), plan("a")],
        false,
    )
    .unwrap();
    assert_eq!(w.next_name(), Some("a"));
    assert!(w.write_tensor("b", &[0; 4]).is_err());
    assert!(w.write_tensor("a", &[0; 3]).is_err());
    w.write_tensor("a", &[0; 4]).unwrap();
    assert_eq!(
        w.finish().unwrap_err().kind(),
        ErrorKind::InvalidInput,
        "finish with b unwritten"
    );
}

fn foreign_model() -> Model {
    let mut m = Model::new();
    m.metadata.insert("format", "pt");
    let mk = |name: &str, dtype: DType, shape: Vec<u64>, bytes: Vec<u8>| {
        TensorView::dense(TensorInfo::dense(name, dtype, shape), Cow::Owned(bytes)).unwrap()
    };
    m.push(mk(
        "d",
        DType::F64,
        vec![2],
        [1.5f64, -0.25]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
    ))
    .unwrap();
    m.push(mk("flag", DType::Bool, vec![3], vec![1, 0, 1]))
        .unwrap();
    m.push(mk("q", DType::I8, vec![2], vec![0x80, 0x7f]))
        .unwrap();
    m.push(mk("n", DType::I64, vec![], (-7i64).to_le_bytes().to_vec()))
        .unwrap();
    m
}

#[test]
fn convert_refuses_dtypes_gptrs_cannot_hold_naming_the_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.gptrs");
    let e = convert::convert_file(
        &foreign_model(),
        Format::GptrsCheckpoint,
        &out,
        ConvertOptions::default(),
        &Default::default(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(e.to_string().contains("\"d\" is f64"), "{e}");
    assert!(e.hints().contains(&tessera::Hint::Cast), "{e}");
    assert!(!out.exists(), "no file on refusal");
}

#[test]
fn convert_with_cast_reports_and_converts_values() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.gptrs");
    let rep = convert::convert_file(
        &foreign_model(),
        Format::GptrsCheckpoint,
        &out,
        ConvertOptions::default().cast(true),
        &Default::default(),
    )
    .unwrap();
    let notes = rep.notes.join("\n");
    for want in [
        "cast \"d\" f64 -> f32",
        "cast \"flag\" bool -> i32",
        "cast \"q\" i8 -> i32",
        "cast \"n\" i64 -> i32",
        "kind \"tensors\"",
    ] {
        assert!(notes.contains(want), "{notes:?} lacks {want:?}");
    }
    let data = std::fs::read(&out).unwrap();
    let f = GptrsFile::parse(&data, &Limits::default()).unwrap();
    assert_eq!(f32s(f.tensor("d").unwrap().data().unwrap()), [1.5, -0.25]);
    assert_eq!(i32s(f.tensor("flag").unwrap().data().unwrap()), [1, 0, 1]);
    assert_eq!(i32s(f.tensor("q").unwrap().data().unwrap()), [-128, 127]);
    let n = f.tensor("n").unwrap();
    assert!(n.info.shape.is_empty());
    assert_eq!(i32s(n.data().unwrap()), [-7]);
    // The source's metadata is kept under "config", kind "tensors".
    assert_eq!(
        std::str::from_utf8(f.config_json().unwrap()).unwrap(),
        r#"{"kind":"tensors","config":{"format":"pt"}}"#
    );
}

#[test]
fn archive_refuses_metadata_unless_dropped() {
    let data = sample("py_exporter_v2.gptrs");
    let f = GptrsFile::parse(&data, &Limits::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.gptrsten");
    let e = convert::convert_file(
        &f,
        Format::GptrsArchive,
        &out,
        Default::default(),
        &zero_ids(),
    )
    .unwrap_err();
    assert!(e.hints().contains(&tessera::Hint::DropMetadata), "{e}");
    let rep = convert::convert_file(
        &f,
        Format::GptrsArchive,
        &out,
        ConvertOptions::default().drop_metadata(true),
        &zero_ids(),
    )
    .unwrap();
    assert!(rep
        .notes
        .iter()
        .any(|n| n.contains("dropped 2 metadata keys")));
    // Same tensors and flags as the archive the Python exporter wrote.
    assert_eq!(
        std::fs::read(&out).unwrap(),
        sample("py_exporter_v2.gptrsten")
    );
    // And back: an archive to a checkpoint gets kind "tensors" and an empty config.
    let back = dir.path().join("y.gptrs");
    let a = std::fs::read(&out).unwrap();
    let g = GptrsFile::parse(&a, &Limits::default()).unwrap();
    let rep = convert::convert_file(
        &g,
        Format::GptrsCheckpoint,
        &back,
        Default::default(),
        &zero_ids(),
    )
    .unwrap();
    assert!(rep
        .notes
        .iter()
        .any(|n| n.contains("no GPTRS model config")));
    let c = std::fs::read(&back).unwrap();
    let h = GptrsFile::parse(&c, &Limits::default()).unwrap();
    assert_eq!(
        h.config_json().unwrap(),
        br#"{"kind":"tensors","config":{}}"#
    );
    assert_eq!(rg(&h.tensor_infos()[0]), Some(&Value::Bool(true)));
}

#[test]
fn checkpoint_names_must_be_ascii_archive_names_may_be_utf8() {
    let mut m = Model::new();
    m.push(
        TensorView::dense(
            TensorInfo::dense("poids.é", DType::F32, vec![1]),
            Cow::Owned(vec![0; 4]),
        )
        .unwrap(),
    )
    .unwrap();
    let mut out = std::io::Cursor::new(Vec::new());
    let e =
        convert::write_to(Format::GptrsCheckpoint, &m, &mut out, &Default::default()).unwrap_err();
    assert!(e.to_string().contains("ASCII"), "{e}");
    let ten = write(Format::GptrsArchive, &m, &Default::default());
    let f = GptrsFile::parse(&ten, &Limits::default()).unwrap();
    assert_eq!(f.tensor_infos()[0].name, "poids.é");
}

#[test]
fn files_written_through_write_file_open_from_disk_zero_copy() {
    let dir = tempfile::tempdir().unwrap();
    let p: &Path = &dir.path().join("m.gptrs");
    convert::write_file(
        Format::GptrsCheckpoint,
        &manifest_model(true),
        p,
        &Default::default(),
    )
    .unwrap();
    let data = tessera::FileData::open(p).unwrap();
    let f = tessera::open(&data, &ReadOptions::default()).unwrap();
    for info in f.tensor_infos() {
        assert!(f.tensor(&info.name).unwrap().is_borrowed());
    }
    assert!(f.verify(&Default::default()).is_ok());
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn tensor() -> impl Strategy<Value = (String, u32, Vec<u64>, bool, u64)> {
        (
            "[a-z][a-z0-9._]{0,12}",
            0u32..4,
            proptest::collection::vec(0u64..4, 0..4),
            any::<bool>(),
            any::<u64>(),
        )
    }

    fn model(ts: &[(String, u32, Vec<u64>, bool, u64)], with_meta: bool) -> Model {
        let mut m = Model::new();
        for (name, tag, shape, rg, seed) in ts {
            if m.tensor_infos().iter().any(|i| &i.name == name) {
                continue;
            }
            let dtype = [DType::F32, DType::F16, DType::BF16, DType::I32][*tag as usize];
            let mut info = TensorInfo::dense(name.clone(), dtype, shape.clone());
            info.attrs.insert("requires_grad", *rg);
            let n = info.dense_nbytes().unwrap() as usize;
            let bytes: Vec<u8> = (0..n)
                .map(|i| (seed.wrapping_mul(i as u64 + 1) >> 7) as u8)
                .collect();
            m.push(TensorView::dense(info, Cow::Owned(bytes)).unwrap())
                .unwrap();
        }
        if with_meta {
            m.metadata.insert("kind", "gpt");
            m.metadata.insert("config", Map::new());
        }
        m
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn write_then_read_gives_the_same_tensors(
            ts in proptest::collection::vec(tensor(), 0..8),
            checkpoint in any::<bool>(),
            zero in any::<bool>(),
        ) {
            let m = model(&ts, checkpoint);
            let format = if checkpoint { Format::GptrsCheckpoint } else { Format::GptrsArchive };
            let opts = WriteOptions::default().with(tessera::formats::gptrs::GptrsOptions::default().zero_base_id(zero));
            let bytes = write(format, &m, &opts);
            prop_assert_eq!(&bytes, &write(format, &m, &opts));
            let f = GptrsFile::parse(&bytes, &Limits::default()).unwrap();
            prop_assert!(f.warnings().is_empty());
            prop_assert_eq!(f.tensor_infos().len(), m.tensor_infos().len());
            prop_assert_eq!(f.metadata(), m.metadata());
            for info in m.tensor_infos() {
                let a = m.tensor(&info.name).unwrap();
                let b = f.tensor(&info.name).unwrap();
                prop_assert!(b.is_borrowed());
                prop_assert_eq!(&b.info.dtype, &info.dtype);
                prop_assert_eq!(&b.info.shape, &info.shape);
                // false and "not said" both read back as not said.
                let set = |v: Option<&Value>| v == Some(&Value::Bool(true));
                prop_assert_eq!(set(rg(&b.info)), set(rg(info)));
                prop_assert_eq!(a.data().unwrap(), b.data().unwrap());
            }
            prop_assert!(f.verify(&Default::default()).is_ok());
        }

        #[test]
        fn arbitrary_bytes_after_a_magic_never_panic(
            chk in any::<bool>(),
            body in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut d = if chk { b"GPTRSCHK".to_vec() } else { b"GPTRSTEN".to_vec() };
            d.extend_from_slice(&2u32.to_le_bytes());
            d.extend_from_slice(&body);
            if let Ok(f) = GptrsFile::parse(&d, &Limits::default()) {
                for info in f.tensor_infos() {
                    f.tensor(&info.name).unwrap().validate().unwrap();
                }
            }
        }

        #[test]
        fn random_overwrites_of_valid_files_never_panic(
            which in any::<bool>(),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..5),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut d = vector(if which { "ok-all-dtypes.gptrs" } else { "ok-all-dtypes.gptrsten" });
            for (i, v) in edits {
                let i = i.index(d.len());
                d[i] = v;
            }
            let n = cut.index(d.len() + 1);
            for data in [&d[..], &d[..n]] {
                if let Ok(f) = GptrsFile::parse(data, &Limits::default()) {
                    for info in f.tensor_infos() {
                        f.tensor(&info.name).unwrap().validate().unwrap();
                    }
                    let _ = f.verify(&Default::default());
                }
            }
        }
    }
}
