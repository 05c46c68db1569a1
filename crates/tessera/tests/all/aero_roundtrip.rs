//! AERO v0.1: round trips with every option, per-tensor hashes, writer refusals, random
//! models, page reserves, failed writes, GGUF-style metadata.

use crate::common::aero as common;
use common::*;

use std::borrow::Cow;
use std::io::Cursor;

use tessera::convert::WriteOptions;
use tessera::formats::aero::AeroFile;
use tessera::{
    Container, DType, ErrorKind, Format, Layout, Limits, Map, Model, TensorInfo, TensorSource,
    TensorView, Value, VerifyOptions,
};

fn rich_model() -> Model {
    let mut m = Model::new();
    m.metadata.insert("zeta", "last key first");
    m.metadata.insert("model_name", "tiny");
    m.metadata.insert("blob", Value::Bytes(vec![0, 1, 255]));
    m.metadata.insert("inf", Value::Float(f64::INFINITY));
    m.metadata.insert(
        "nested",
        Value::List(vec![Value::Int(-3), Value::Float(0.25), Value::Null]),
    );
    let mut x = 7u32;
    for (i, dt) in [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::Bool,
    ]
    .into_iter()
    .enumerate()
    {
        let shape = vec![3, (i % 4 + 1) as u64];
        let n = 3 * (i % 4 + 1) * dt.size();
        let bytes: Vec<u8> = (0..n)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                if dt == DType::Bool {
                    ((x >> 16) & 1) as u8
                } else {
                    (x >> 16) as u8
                }
            })
            .collect();
        let mut info = TensorInfo::dense(format!("t{i}.{dt}"), dt, shape);
        if i == 1 {
            info.attrs.insert("requires_grad", Value::Bool(true));
        }
        if i == 2 {
            info.attrs.insert("quant_id", Value::Int(0));
            let mut q = Map::new();
            q.insert("scale", Value::Float(0.5));
            info.attrs.insert("quant_params", Value::Map(q));
        }
        m.push(TensorView::dense(info, Cow::Owned(bytes)).unwrap())
            .unwrap();
    }
    m.push(
        TensorView::dense(
            TensorInfo::dense("scalar", DType::F32, vec![]),
            Cow::Owned(1.5f32.to_le_bytes().to_vec()),
        )
        .unwrap(),
    )
    .unwrap();
    m.push(
        TensorView::dense(
            TensorInfo::dense("empty", DType::I32, vec![0, 4]),
            Cow::Owned(vec![]),
        )
        .unwrap(),
    )
    .unwrap();
    // A GGUF-style quantized tensor: 2 blocks of q4_0 (18 bytes each).
    let mut q = TensorInfo::dense("blk.q4", DType::U8, vec![64]);
    q.layout = Layout::Other("ggml_q4_0".into());
    q.attrs.insert("ggml_type", Value::Int(2));
    m.push(TensorView {
        info: q,
        parts: vec![tessera::Part {
            role: "data".into(),
            bytes: Cow::Owned((0..36).collect()),
        }],
    })
    .unwrap();
    m.push_chunk(
        tessera::ChunkInfo {
            name: "notes.txt".into(),
            kind: "NOTE".into(),
            len: None,
            storage: Default::default(),
            holds_tensors: false,
            copies: None,
        },
        b"hello".to_vec(),
    )
    .unwrap();
    m
}

fn assert_same(a: &dyn TensorSource, b: &dyn TensorSource) {
    assert_eq!(a.metadata(), b.metadata());
    assert_eq!(a.tensor_infos().len(), b.tensor_infos().len());
    for (x, y) in a.tensor_infos().iter().zip(b.tensor_infos()) {
        // A packed tensor gains the quant_id AERO gives it; everything else is equal.
        let mut ya = y.attrs.clone();
        if !x.attrs.contains_key("quant_id") && matches!(y.layout, Layout::Other(_)) {
            ya.remove("quant_id");
        }
        assert_eq!(
            (&x.name, x.dtype, &x.shape, &x.layout, &x.attrs),
            (&y.name, y.dtype, &y.shape, &y.layout, &ya)
        );
        assert_eq!(
            a.tensor(&x.name).unwrap().parts[0].bytes,
            b.tensor(&y.name).unwrap().parts[0].bytes
        );
    }
}

#[test]
fn round_trip_with_every_option_multi_shard_packed_and_opaque() {
    let m = rich_model();
    let opts = WriteOptions::default().with(
        tessera::formats::aero::AeroOptions::default()
            .shard_size(Some(40))
            .tensor_hashes(true)
            .control_integrity(true)
            .page_hashes(Some(32)),
    );
    let data = write(&m, &opts);
    let f = AeroFile::open(&data, &Limits::default()).unwrap();
    assert_same(&m, &f);
    let shards = f
        .toc()
        .iter()
        .filter(|c| &c.entry.fourcc == b"WTSH")
        .count();
    assert!(shards > 3, "{shards} shards");
    for c in f.toc() {
        assert_eq!(c.entry.chunk_offset % 16, 0);
        if c.entry.fourcc == *b"WTSH" {
            assert!(
                c.entry.chunk_length <= 40
                    || f.locations()
                        .iter()
                        .filter(|l| f.toc()[l.chunk].name == c.name)
                        .count()
                        == 1
            );
        }
    }
    for t in f.tensor_infos() {
        assert_eq!(
            t.storage.offset.unwrap() % t.dtype.size() as u64,
            0,
            "{} aligned",
            t.name
        );
    }
    assert!(
        f.tensor_infos()
            .iter()
            .all(|t| t.storage.digests.len() == 1),
        "hash_b3 on every tensor"
    );
    let r = f.verify(&VerifyOptions::default());
    assert!(r.is_ok() && r.warnings.is_empty(), "{r:?}");
    assert!(layer_status(&r, "hash_b3").len() == m.tensor_infos().len());
    assert!(layer_status(&r, "phsh").len() >= shards - 1); // the empty tensor's shard may be empty
    assert_eq!(f.chunk("notes.txt").unwrap().as_ref(), b"hello");
    assert_eq!(
        f.chunks()
            .iter()
            .find(|c| c.name == "notes.txt")
            .unwrap()
            .kind,
        "NOTE"
    );
    // The exact metadata rides in MMSG; meta.json holds its sorted JSON form.
    let mjsn = f.chunk("meta.json").unwrap();
    assert!(std::str::from_utf8(&mjsn)
        .unwrap()
        .starts_with("{\"blob\":{\"$bytes\":\"0001ff\"}"));
    // Packed tensor: same layout name and attrs back.
    let q = f.tensor("blk.q4").unwrap();
    assert_eq!(q.info.layout, Layout::Other("ggml_q4_0".into()));
    assert_eq!(q.info.attrs.get("ggml_type"), Some(&Value::Int(2)));
    assert_eq!(q.info.attrs.get("quant_id"), Some(&Value::Int(0)));
    // meta.json carries the descriptor as the original's GGUF converter writes it; the
    // metadata itself comes back without it.
    let mj: serde_json::Value = serde_json::from_slice(&f.chunk("meta.json").unwrap()).unwrap();
    assert_eq!(
        mj["quant_descriptors"],
        serde_json::json!([{"id": 0, "quant_name": "Q4_0", "codec": "ggml", "params": {"ggml_type": 2}}])
    );
    assert!(!f.metadata().contains_key("quant_descriptors"));

    // Same-format rewrite is byte-exact, and writing twice gives the same bytes.
    let again = write(&f, &opts);
    let f2 = AeroFile::open(&again, &Limits::default()).unwrap();
    assert_same(&f, &f2);
    let fixed_opts = fixed(opts.clone());
    assert_eq!(write(&m, &fixed_opts), write(&m, &fixed_opts));
    assert_eq!(write(&f, &fixed_opts), write(&m, &fixed_opts));
    assert_ne!(
        write(&m, &opts)[52..68],
        write(&m, &opts)[52..68],
        "random UUIDs"
    );
}

#[test]
fn hash_b3_mismatch_is_reported_per_tensor() {
    let m = manifest_model();
    let mut data = write(
        &m,
        &WriteOptions::default()
            .with(tessera::formats::aero::AeroOptions::default().tensor_hashes(true)),
    );
    let f = AeroFile::open(&data, &Limits::default()).unwrap();
    let off = f.tensor_infos()[1].storage.offset.unwrap() as usize;
    drop(f);
    data[off] ^= 0x80;
    let f = AeroFile::open(&data, &Limits::default()).unwrap();
    let r = f.verify(&VerifyOptions::default());
    let failed: Vec<_> = r
        .failures()
        .map(|c| (c.subject.as_str(), c.layer.as_str()))
        .collect();
    assert_eq!(
        failed,
        [
            ("chunk \"weights.shard0\" (WTSH)", "blake3"),
            ("tensor \"linear.bias\"", "hash_b3")
        ]
    );
    let one = f.verify(&VerifyOptions::default().tensors(vec!["linear.weight".into()]));
    assert!(one.is_ok(), "{one:?}");
}

#[test]
fn an_empty_model_writes_and_reads() {
    let m = Model::new();
    let data = write(
        &m,
        &WriteOptions::default().with(
            tessera::formats::aero::AeroOptions::default()
                .control_integrity(true)
                .page_hashes(Some(16)),
        ),
    );
    let f = AeroFile::open(&data, &Limits::default()).unwrap();
    assert!(f.tensor_infos().is_empty() && f.metadata().is_empty());
    let kinds: Vec<_> = f.chunks().iter().map(|c| c.kind.as_str()).collect();
    assert_eq!(kinds, ["IHSH", "MJSN", "MMSG", "TIDX"]);
    assert!(f.verify(&VerifyOptions::default()).is_ok());
}

#[test]
fn the_writer_refuses_what_aero_readers_reject() {
    let mut m = Model::new();
    m.push(
        TensorView::dense(
            TensorInfo::dense("x".repeat(5000), DType::U8, vec![1]),
            Cow::Owned(vec![1]),
        )
        .unwrap(),
    )
    .unwrap();
    let mut out = Cursor::new(Vec::new());
    let e =
        tessera::convert::write_to(Format::Aero, &m, &mut out, &Default::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    let mut m = Model::new();
    m.push(
        TensorView::dense(
            TensorInfo::dense("c", DType::C64, vec![1]),
            Cow::Owned(vec![0; 8]),
        )
        .unwrap(),
    )
    .unwrap();
    let e =
        tessera::convert::write_to(Format::Aero, &m, &mut out, &Default::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert_eq!(e.hints(), vec![tessera::Hint::Cast], "{e}");
    // Through prepare(), the cast is explicit and reported.
    let p = tessera::convert::prepare(
        &m,
        Format::Aero,
        tessera::ConvertOptions::default().cast(true),
    );
    assert!(p.is_err() || !p.unwrap().notes().is_empty());
}

mod random {
    use super::*;
    use proptest::prelude::*;

    const DTYPES: [DType; 13] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::Bool,
    ];

    fn tensor() -> impl Strategy<Value = (usize, Vec<u64>, u8)> {
        (
            0..DTYPES.len(),
            proptest::collection::vec(0u64..5, 0..4),
            any::<u8>(),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// write → read gives the same tensors for any dtypes, shapes and options.
        #[test]
        fn write_read_round_trip(
            ts in proptest::collection::vec(tensor(), 0..8),
            shard in 1u64..200,
            page in proptest::option::of(1u64..64),
            hashes in any::<bool>(),
            ihsh in any::<bool>(),
        ) {
            let mut m = Model::new();
            for (i, (d, shape, seed)) in ts.into_iter().enumerate() {
                let dt = DTYPES[d];
                let n = shape.iter().product::<u64>() as usize * dt.size();
                let bytes: Vec<u8> = (0..n)
                    .map(|j| if dt == DType::Bool { ((j as u8) ^ seed) & 1 } else { (j as u8).wrapping_mul(31) ^ seed })
                    .collect();
                m.push(TensorView::dense(TensorInfo::dense(format!("t{i}"), dt, shape), Cow::Owned(bytes)).unwrap()).unwrap();
            }
            let opts = WriteOptions::default()
                .with(tessera::formats::aero::AeroOptions::default().shard_size(Some(shard)).page_hashes(page).tensor_hashes(hashes).control_integrity(ihsh).uuid(Some([7; 16])));
            let data = write(&m, &opts);
            let f = AeroFile::open(&data, &Limits::default()).unwrap();
            assert_same(&m, &f);
            let r = f.verify(&VerifyOptions::default());
            prop_assert!(r.is_ok() && r.warnings.is_empty(), "{:?}", r);
            prop_assert_eq!(write(&f, &opts), data);
        }
    }
}

#[test]
fn many_pages_per_shard_stay_inside_their_reserve() {
    // 2 shards of 1 KiB with 16-byte pages: 64 digests each, more than the original's
    // reserve holds; the next shard must not be overwritten.
    let mut m = Model::new();
    for i in 0..2 {
        let bytes: Vec<u8> = (0..1024u32).map(|j| (j * 7 + i) as u8).collect();
        m.push(
            TensorView::dense(
                TensorInfo::dense(format!("w{i}"), DType::U8, vec![1024]),
                Cow::Owned(bytes),
            )
            .unwrap(),
        )
        .unwrap();
    }
    let data = write(
        &m,
        &WriteOptions::default().with(
            tessera::formats::aero::AeroOptions::default()
                .shard_size(Some(1024))
                .page_hashes(Some(16)),
        ),
    );
    let f = AeroFile::open(&data, &Limits::default()).unwrap();
    assert_eq!(
        f.toc()
            .iter()
            .filter(|c| &c.entry.fourcc == b"PHSH")
            .count(),
        2
    );
    let r = f.verify(&VerifyOptions::default());
    assert!(r.is_ok() && r.warnings.is_empty(), "{r:?}");
    assert_same(&m, &f);
}

/// A source whose second tensor cannot be read.
struct Failing(Model);

impl TensorSource for Failing {
    fn metadata(&self) -> &tessera::Metadata {
        self.0.metadata()
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        self.0.tensor_infos()
    }
    fn tensor(&self, name: &str) -> tessera::Result<TensorView<'_>> {
        if name == "linear.bias" {
            return Err(tessera::Error::new(ErrorKind::Io, "disk on fire"));
        }
        self.0.tensor(name)
    }
}

#[test]
fn a_failed_write_leaves_the_target_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.aero");
    let src = Failing(manifest_model());
    let e =
        tessera::convert::write_file(Format::Aero, &src, &path, &Default::default()).unwrap_err();
    assert!(e.to_string().contains("disk on fire"), "{e}");
    assert!(!path.exists());
    std::fs::write(&path, b"previous").unwrap();
    assert!(tessera::convert::write_file(Format::Aero, &src, &path, &Default::default()).is_err());
    assert_eq!(std::fs::read(&path).unwrap(), b"previous");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporary left behind"
    );
}

#[test]
fn gguf_style_metadata_fills_the_manifest_model() {
    let mut m = Model::new();
    m.metadata.insert("general.architecture", "llama");
    m.metadata.insert("general.name", "tiny-llama");
    m.metadata.insert("llama.block_count", Value::Int(2));
    let data = write(&m, &WriteOptions::default());
    let f = AeroFile::open(&data, &Limits::default()).unwrap();
    assert_eq!(
        f.metadata(),
        &m.metadata,
        "metadata unchanged (order aside it is exact)"
    );
    // MMSG model, decoded independently of our reader: zstd + msgpack by hand.
    let c = f.toc().iter().find(|c| c.name == "manifest").unwrap();
    let raw = zstd::bulk::decompress(
        &data[c.entry.chunk_offset as usize..][..c.entry.chunk_length as usize],
        1 << 20,
    )
    .unwrap();
    let has = |pairs: &[(&str, &str)]| {
        let mut want = Vec::new();
        for (k, v) in pairs {
            want.push(0xa0 | k.len() as u8);
            want.extend_from_slice(k.as_bytes());
            want.push(0xa0 | v.len() as u8);
            want.extend_from_slice(v.as_bytes());
        }
        raw.windows(want.len()).any(|w| w == want)
    };
    assert!(has(&[("name", "tiny-llama"), ("architecture", "llama")]));
}

#[test]
fn attributes_of_the_wrong_type_travel_as_plain_attributes() {
    let mut m = Model::new();
    let mut info = TensorInfo::dense("w", DType::F32, vec![1]);
    info.attrs.insert("quant_params", "not a map");
    info.attrs.insert("quant_id", Value::Float(1.5));
    info.attrs.insert("aero_flags", Value::Int(-1));
    info.attrs.insert("requires_grad", Value::Bool(true));
    m.push(TensorView::dense(info, Cow::Owned(vec![0; 4])).unwrap())
        .unwrap();
    let data = write(&m, &WriteOptions::default());
    let f = AeroFile::open(&data, &Limits::default()).unwrap();
    assert_same(&m, &f);
}

/// `-O aerotensor`: safetensors -> AERO as the original's converter writes it (issue 32
/// §3, `CONVERTERS.md`): tensors in name order packed back to back, `meta.json` with
/// `model_name` (the file's), `architecture: unknown`, `source_format: safetensors`, the
/// other keys (`format`, `license`) left out with a note; the same input and UUID give
/// aerotensor's bytes (`convert_safetensors` on a file the safetensors package wrote,
/// tests/data/aero/gen_convert.py). Without the option the metadata is kept and the
/// order is the source's.
#[test]
fn with_the_aerotensor_option_safetensors_converts_to_its_converters_bytes() {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/");
    let input = std::fs::read(format!("{data}aero/convert-input.safetensors")).unwrap();
    let theirs = std::fs::read(format!("{data}aero/valid-aerotensor-convert.aero")).unwrap();
    let src = tessera::open(&input, &tessera::ReadOptions::default()).unwrap();
    let p = tessera::convert::prepare(src.as_ref(), Format::Aero, Default::default()).unwrap();
    let write = |o: tessera::formats::aero::AeroOptions| {
        let mut out = Cursor::new(Vec::new());
        let o = WriteOptions::default().with(o.uuid(Some([0x11; 16])));
        let r = tessera::convert::write_to(Format::Aero, &p, &mut out, &o).unwrap();
        (out.into_inner(), r.notes)
    };
    let (plain, _) = write(tessera::formats::aero::AeroOptions::default());
    let f = AeroFile::open(&plain, &Limits::default()).unwrap();
    assert_eq!(
        f.metadata().get("license").and_then(|v| v.as_str()),
        Some("mit")
    );
    assert!(plain != theirs);
    let (ours, notes) = write(tessera::formats::aero::AeroOptions::default().aerotensor(true));
    let f = AeroFile::open(&ours, &Limits::default()).unwrap();
    let names: Vec<&str> = f.tensor_infos().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a.bias", "b.weight", "c.steps"], "name order");
    let meta = f.metadata();
    assert_eq!(
        meta.get("model_name").and_then(|v| v.as_str()),
        Some("tiny")
    );
    assert_eq!(
        meta.get("architecture").and_then(|v| v.as_str()),
        Some("unknown")
    );
    assert!(meta.get("license").is_none() && meta.get("format").is_none());
    assert!(notes.iter().any(|n| n.contains("license")), "{notes:?}");
    for t in src.tensor_infos() {
        let (a, b) = (src.tensor(&t.name).unwrap(), f.tensor(&t.name).unwrap());
        assert_eq!(a.data().unwrap(), b.data().unwrap(), "{}", t.name);
    }
    assert!(ours == theirs, "differs from aerotensor's converter output");
}
