//! FOLD: the pyfolds samples, round trips through our writer, ECC repair, determinism.

use std::borrow::Cow;
use std::io::Cursor;

use tessera::convert::{Compression, WriteOptions};
use tessera::formats::fold::{self, ecc, FoldFile};
use tessera::{
    ChunkInfo, DType, ErrorKind, Format, Layout, Map, Model, Part, ReadOptions, Status, TensorInfo,
    TensorSource, TensorView, Value, VerifyOptions,
};

const SAMPLES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/interop-samples/fold/"
);

fn sample(name: &str) -> Vec<u8> {
    std::fs::read(format!("{SAMPLES}{name}")).unwrap()
}

fn statuses(data: &[u8]) -> Vec<(String, String, Status)> {
    let f = tessera::open(data, &ReadOptions::default()).unwrap();
    f.verify(&VerifyOptions::default())
        .checks
        .into_iter()
        .map(|c| (c.subject, c.layer, c.status))
        .collect()
}

fn has(checks: &[(String, String, Status)], subject: &str, layer: &str, status: Status) -> bool {
    checks
        .iter()
        .any(|(s, l, st)| s == subject && l == layer && *st == status)
}

#[test]
fn pyfolds_zstd_sample() {
    let data = sample("pyfolds102_zstd.fold");
    let f = tessera::open(&data, &ReadOptions::default()).unwrap();
    assert_eq!(f.format(), Format::Fold);
    assert_eq!(f.version(), "1.2.0");
    assert!(f.warnings().is_empty(), "{:?}", f.warnings());
    assert_eq!(f.chunk("metrics").unwrap().as_ref(), br#"{"a":1}"#);
    let blob: Vec<u8> = (0..4).flat_map(|_| 0..=255u8).collect();
    assert_eq!(f.chunk("blob").unwrap().as_ref(), blob.as_slice());
    let kinds: Vec<_> = f
        .chunks()
        .iter()
        .map(|c| (c.name.as_str(), c.kind.as_str()))
        .collect();
    assert_eq!(kinds, [("metrics", "JSON"), ("blob", "RAW0")]);
    assert_eq!(f.metadata().get("model_type"), Some(&Value::from("X")));
    assert!(f.metadata().get("manifest_hash").is_none());
    let r = f.verify(&VerifyOptions::default());
    assert!(r.is_ok(), "{r:?}");
    assert!(r
        .checks
        .iter()
        .any(|c| c.layer == "manifest_hash" && c.status == Status::Ok));
    assert_eq!(
        r.checks
            .iter()
            .filter(|c| c.layer == "zstd" && c.status == Status::Ok)
            .count(),
        2
    );
}

#[test]
fn pyfolds_single_block_ecc_sample_with_unicode_metadata() {
    let data = sample("pyfolds102_none_rs16_single_block.fold");
    let f = tessera::open(&data, &ReadOptions::default()).unwrap();
    assert_eq!(f.chunk("small").unwrap().as_ref(), br#"{"hello":"world"}"#);
    assert_eq!(f.metadata().get("note"), Some(&Value::from("ã unicode")));
    let c = statuses(&data);
    assert!(has(&c, "metadata", "manifest_hash", Status::Ok));
    assert!(has(&c, "chunk \"small\"", "reed-solomon", Status::Ok));
    assert!(c.iter().all(|x| x.2 == Status::Ok), "{c:?}");
}

#[test]
fn pyfolds_102_multiblock_ecc_reads_since_crc_and_sha_pass() {
    let data = sample("pyfolds102_none_rs16_multiblock_BROKEN_ECC.fold");
    let f = tessera::open(&data, &ReadOptions::default()).unwrap();
    let big: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 256) as u8).collect();
    assert_eq!(f.chunk("big").unwrap().as_ref(), big.as_slice());
    let r = f.verify(&VerifyOptions::default());
    assert!(r.is_ok(), "{r:?}");
    let rs = r.checks.iter().find(|c| c.layer == "reed-solomon").unwrap();
    assert_eq!(rs.status, Status::NotChecked);
    assert!(rs.detail.as_deref().unwrap().contains("1.0.2"), "{rs:?}");
    // The stored parity is exactly the 1.0.2 layout of the payload.
    let ff = FoldFile::parse(&data, &Default::default()).unwrap();
    let (comp, parity) = ff.stored(0).unwrap();
    assert_eq!(
        &parity[..],
        ecc::pyfolds102_layout(&comp, 16).unwrap().as_slice()
    );
    // `repair` rewrites it into the block-wise layout, which then verifies.
    let mut out = Vec::new();
    let done = fold::repair(&data, &ReadOptions::default(), &mut out).unwrap();
    assert_eq!(done[0].status, "parity rewritten");
    let c = statuses(&out);
    assert!(
        has(&c, "chunk \"big\"", "reed-solomon", Status::Ok),
        "{c:?}"
    );
}

#[test]
fn pyfolds_head_multiblock_ecc_is_our_layout_and_sha256_prefix_is_accepted() {
    let data = sample("pyfoldsHEAD_e45e9eb_none_rs16_multiblock.fold");
    let ff = FoldFile::parse(&data, &Default::default()).unwrap();
    let (comp, parity) = ff.stored(0).unwrap();
    let big: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 256) as u8).collect();
    assert_eq!(&comp[..], big.as_slice());
    // Same payload → same parity bytes as our encoder (and as our writer, below).
    assert_eq!(&parity[..], ecc::encode(&big, 16).unwrap().as_slice());
    let mut m = Model::new();
    m.push_chunk(chunk("big", "RAW0"), big.clone()).unwrap();
    let ours = write(&m, Compression::None, Some(16));
    let of = FoldFile::parse(&ours, &Default::default()).unwrap();
    assert_eq!(of.stored(0).unwrap().1, parity);
    let c = statuses(&data);
    assert!(c.iter().all(|x| x.2 == Status::Ok), "{c:?}");
    assert!(has(&c, "chunk \"big\"", "sha256", Status::Ok));
    assert!(has(&c, "metadata", "manifest_hash", Status::Ok));
    // And ECC repairs it.
    let mut bad = data.clone();
    let off = ff.entries()[0].payload_off() as usize;
    for i in [0usize, 100, 300, 500, 700, 900, 999] {
        bad[off + i] ^= 0x33;
    }
    let f = tessera::open(&bad, &ReadOptions::default()).unwrap();
    assert_eq!(f.chunk("big").unwrap().as_ref(), big.as_slice());
}

#[test]
fn real_neuron_checkpoint() {
    let data = sample("pyfolds102_save_fold_or_mind_MPJRDNeuron.fold");
    let f = tessera::open(&data, &ReadOptions::default()).unwrap();
    assert!(f.warnings().is_empty(), "{:?}", f.warnings());
    let r = f.verify(&VerifyOptions::default());
    assert!(r.is_ok(), "{r:?}");
    assert!(r
        .checks
        .iter()
        .any(|c| c.layer == "manifest_hash" && c.status == Status::Ok));
    let kinds: Vec<_> = f
        .chunks()
        .iter()
        .map(|c| (c.name.as_str(), c.kind.as_str(), c.holds_tensors))
        .collect();
    assert_eq!(
        kinds,
        [
            ("torch_state", "TSAV", false),
            ("llm_manifest", "JSON", false),
            ("metrics", "JSON", false),
            ("telemetry", "JSON", false),
            ("nuclear_arrays", "NPZ0", true)
        ]
    );
    // TSAV is a torch pickle (zip), kept as a chunk; its tensors are listed too
    // (tests/fold_tsav.rs).
    assert!(f.chunk("torch_state").unwrap().starts_with(b"PK"));
    // NPZ0 arrays are tensors; theta and r_hat match the metadata pyfolds wrote.
    let names: Vec<_> = f
        .tensor_infos()
        .iter()
        .map(|t| t.name.as_str())
        .filter(|n| !n.starts_with("torch_state/"))
        .collect();
    assert_eq!(
        names,
        [
            "nuclear_arrays/N",
            "nuclear_arrays/I",
            "nuclear_arrays/W",
            "nuclear_arrays/protection",
            "nuclear_arrays/theta",
            "nuclear_arrays/r_hat"
        ]
    );
    let expr = f.metadata().get("expression").unwrap().as_map().unwrap();
    let theta = f.tensor("nuclear_arrays/theta").unwrap();
    assert_eq!(theta.info.dtype, DType::F32);
    let t = f32::from_le_bytes(theta.data().unwrap().try_into().unwrap());
    assert_eq!(Value::Float(t as f64), *expr.get("theta").unwrap());
    let r_hat = f.tensor("nuclear_arrays/r_hat").unwrap();
    let rh = f32::from_le_bytes(r_hat.data().unwrap().try_into().unwrap());
    assert_eq!(Value::Float(rh as f64), *expr.get("r_hat").unwrap());
    let n = f.tensor("nuclear_arrays/N").unwrap();
    assert_eq!(
        (n.info.dtype, n.info.shape.clone()),
        (DType::I32, vec![4, 32])
    );
    let mean_n: f64 = n
        .data()
        .unwrap()
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as f64)
        .sum::<f64>()
        / 128.0;
    assert_eq!(Value::Float(mean_n), *expr.get("mean_N").unwrap());
    let p = f.tensor("nuclear_arrays/protection").unwrap();
    assert_eq!(p.info.dtype, DType::Bool);
}

#[test]
fn fold_to_fold_keeps_opaque_chunks_and_metadata() {
    let data = sample("pyfolds102_save_fold_or_mind_MPJRDNeuron.fold");
    let src = tessera::open(&data, &ReadOptions::default()).unwrap();
    let out = write(src.as_ref(), Compression::Zstd(3), Some(32));
    let f = tessera::open(&out, &ReadOptions::default()).unwrap();
    assert!(f.verify(&VerifyOptions::default()).is_ok());
    assert_eq!(f.metadata(), src.metadata());
    for name in ["torch_state", "llm_manifest", "metrics", "telemetry"] {
        assert_eq!(f.chunk(name).unwrap(), src.chunk(name).unwrap(), "{name}");
        let k = |s: &dyn TensorSource| {
            s.chunks()
                .iter()
                .find(|c| c.name == name)
                .unwrap()
                .kind
                .clone()
        };
        assert_eq!(k(f.as_ref()), k(src.as_ref()));
    }
    for t in src.tensor_infos() {
        assert_eq!(
            f.tensor(&t.name).unwrap().parts,
            src.tensor(&t.name).unwrap().parts
        );
    }
}

fn chunk(name: &str, kind: &str) -> ChunkInfo {
    ChunkInfo {
        name: name.into(),
        kind: kind.into(),
        len: None,
        storage: Default::default(),
        holds_tensors: false,
        copies: None,
    }
}

fn write(src: &dyn TensorSource, compression: Compression, ecc: Option<u8>) -> Vec<u8> {
    let opts = WriteOptions::default()
        .compression(compression)
        .with(tessera::formats::fold::FoldOptions::default().ecc(ecc))
        .timestamp(Some("2026-01-02T03:04:05Z".into()));
    let mut cur = Cursor::new(Vec::new());
    tessera::convert::write_to(Format::Fold, src, &mut cur, &opts).unwrap();
    cur.into_inner()
}

fn bytes_for(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761).max(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}

fn le64(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Every dtype dense, a scalar, an empty tensor, CSR, COO, another layout, attributes,
/// a metadata tree and opaque chunks.
fn rich_model() -> Model {
    let mut m = Model::new();
    for (i, d) in DType::ALL.into_iter().enumerate() {
        let shape = vec![3, 5];
        let mut data = bytes_for(d.nbytes(15).unwrap() as usize, i as u32 + 1);
        if d == DType::Bool {
            data.iter_mut().for_each(|b| *b &= 1);
        }
        crate::common::clear_padding(d, &shape, &mut data);
        let mut info = TensorInfo::dense(format!("dense.{}", d.name()), d, shape);
        if i % 3 == 0 {
            info.attrs.insert("requires_grad", true);
            info.attrs.insert("note", "é");
        }
        m.push(TensorView::dense(info, Cow::Owned(data)).unwrap())
            .unwrap();
    }
    m.push(
        TensorView::dense(
            TensorInfo::dense("scalar", DType::F64, vec![]),
            Cow::Owned(2.5f64.to_le_bytes().to_vec()),
        )
        .unwrap(),
    )
    .unwrap();
    m.push(
        TensorView::dense(
            TensorInfo::dense("empty", DType::F32, vec![0, 4]),
            Cow::Owned(vec![]),
        )
        .unwrap(),
    )
    .unwrap();
    let part = |r: &str, b: Vec<u8>| Part {
        role: r.into(),
        bytes: Cow::Owned(b),
    };
    let mut csr = TensorInfo::dense("csr", DType::F32, vec![2, 3]);
    csr.layout = Layout::SparseCsr;
    m.push(TensorView {
        info: csr,
        parts: vec![
            part(
                "values",
                [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect(),
            ),
            part("indices", le64(&[0, 2])),
            part("indptr", le64(&[0, 1, 2])),
        ],
    })
    .unwrap();
    let mut coo = TensorInfo::dense("coo", DType::C128, vec![2, 3]);
    coo.layout = Layout::SparseCoo;
    m.push(TensorView {
        info: coo,
        parts: vec![
            part("values", bytes_for(32, 9)),
            part("coords", le64(&[0, 1, 2, 0])),
        ],
    })
    .unwrap();
    let mut q = TensorInfo::dense("q4", DType::U8, vec![8, 8]);
    q.layout = Layout::Other("quantized_4bit".into());
    m.push(TensorView {
        info: q,
        parts: vec![
            part("packed", bytes_for(32, 3)),
            part("scales", bytes_for(4, 4)),
        ],
    })
    .unwrap();
    let mut inner = Map::new();
    inner.insert("lr", 1e-5);
    inner.insert("big", Value::Int(1 << 62));
    inner.insert("name", "ü \u{1F600} \"q\"");
    m.metadata.insert("train", inner);
    m.metadata.insert(
        "list",
        Value::List(vec![Value::Null, Value::Bool(false), Value::Float(1e16)]),
    );
    m.push_chunk(chunk("notes", "JSON"), br#"{"k":"v"}"#.to_vec())
        .unwrap();
    m.push_chunk(chunk("blob", "XYZ9"), bytes_for(3000, 77))
        .unwrap();
    m
}

fn assert_same(a: &dyn TensorSource, b: &dyn TensorSource) {
    assert_eq!(a.metadata(), b.metadata());
    let an: Vec<_> = a.tensor_infos().iter().map(|t| &t.name).collect();
    let bn: Vec<_> = b.tensor_infos().iter().map(|t| &t.name).collect();
    assert_eq!(an, bn);
    for t in a.tensor_infos() {
        let (x, y) = (a.tensor(&t.name).unwrap(), b.tensor(&t.name).unwrap());
        assert_eq!(
            (&x.info.dtype, &x.info.shape, &x.info.layout, &x.info.attrs),
            (&y.info.dtype, &y.info.shape, &y.info.layout, &y.info.attrs),
            "{}",
            t.name
        );
        assert_eq!(x.parts, y.parts, "{}", t.name);
    }
    for c in a.chunks().iter().filter(|c| !c.holds_tensors) {
        assert_eq!(a.chunk(&c.name).unwrap(), b.chunk(&c.name).unwrap());
        assert!(b
            .chunks()
            .iter()
            .any(|d| d.name == c.name && d.kind == c.kind));
    }
}

#[test]
fn round_trip_every_dtype_layout_and_option() {
    let m = rich_model();
    for (comp, ecc) in [
        (Compression::None, None),
        (Compression::Zstd(3), None),
        (Compression::None, Some(16)),
        (Compression::Zstd(1), Some(64)),
    ] {
        let out = write(&m, comp, ecc);
        let f = tessera::open(&out, &ReadOptions::default()).unwrap();
        assert!(f.warnings().is_empty(), "{:?}", f.warnings());
        let r = f.verify(&VerifyOptions::default());
        assert!(
            r.is_ok() && r.checks.iter().all(|c| c.status == Status::Ok),
            "{r:?}"
        );
        assert_same(&m, f.as_ref());
        // Uncompressed tensors are zero-copy.
        if comp == Compression::None {
            assert!(f.tensor("dense.f32").unwrap().is_borrowed());
        }
    }
}

#[test]
fn output_is_deterministic_and_mind_is_fold() {
    let m = rich_model();
    assert_eq!(
        write(&m, Compression::Zstd(3), Some(16)),
        write(&m, Compression::Zstd(3), Some(16))
    );
    assert_eq!(Format::from_path("x.mind".as_ref()), Some(Format::Fold));
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.mind");
    tessera::convert::write_file(
        Format::Fold,
        &m,
        &p,
        &WriteOptions::default().timestamp(Some("2026-01-02T03:04:05Z".into())),
    )
    .unwrap();
    let data = std::fs::read(&p).unwrap();
    assert!(data.starts_with(b"FOLDv1\0\0"));
    assert_eq!(data, write(&m, Compression::None, None));
}

#[test]
fn non_finite_floats_and_big_ints_round_trip() {
    let mut m = Model::new();
    m.metadata.insert("nan", f64::NAN);
    m.metadata.insert("huge", Value::Int(-(1i128 << 80)));
    let mut t = TensorInfo::dense("t", DType::U8, vec![1]);
    t.attrs.insert("inf", f64::NEG_INFINITY);
    m.push(TensorView::dense(t, Cow::Owned(vec![1])).unwrap())
        .unwrap();
    let data = write(&m, Compression::None, None);
    let f = tessera::open(&data, &ReadOptions::default()).unwrap();
    assert!(f.verify(&VerifyOptions::default()).is_ok());
    assert!(matches!(f.metadata().get("nan"), Some(Value::Float(x)) if x.is_nan()));
    assert_eq!(f.metadata().get("huge"), Some(&Value::Int(-(1i128 << 80))));
    assert_eq!(
        f.tensor_infos()[0].attrs.get("inf"),
        Some(&Value::Float(f64::NEG_INFINITY))
    );
}

#[test]
fn python_dialect_index_nan_and_big_ints_verify() {
    // FoldWriter writes the index as pyfolds does: bare NaN/Infinity, big ints.
    let mut meta = Map::new();
    meta.insert("nan", f64::NAN);
    meta.insert("inf", f64::INFINITY);
    meta.insert("big", Value::Int(1i128 << 100));
    let mut w = fold::FoldWriter::new(Cursor::new(Vec::new()), Compression::None, None).unwrap();
    w.add_chunk("c", *b"RAW0", &[b"x"]).unwrap();
    let data = w.finish(&meta, 1.5).unwrap().into_inner();
    let text = String::from_utf8_lossy(&data);
    assert!(text.contains(r#""nan":NaN,"inf":Infinity,"big":1267650600228229401496703205376"#));
    let f = tessera::open(&data, &ReadOptions::default()).unwrap();
    let r = f.verify(&VerifyOptions::default());
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(f.metadata().get("big"), Some(&Value::Int(1i128 << 100)));
    assert!(matches!(f.metadata().get("nan"), Some(Value::Float(x)) if x.is_nan()));
}

#[test]
fn zstd_frames_carry_the_content_size() {
    let out = write(&rich_model(), Compression::Zstd(3), None);
    let f = FoldFile::parse(&out, &Default::default()).unwrap();
    for (i, e) in f.entries().iter().enumerate() {
        let size = zstd::zstd_safe::get_frame_content_size(&f.stored(i).unwrap().0).unwrap();
        assert_eq!(size, Some(e.header.uncomp_len), "{}", e.name);
    }
}

/// Flips `per_block` bytes in every RS block of chunk `name` (payload and parity).
fn damage(data: &mut [u8], name: &str, per_block: usize) {
    let f = FoldFile::parse(&*data, &Default::default()).unwrap();
    let i = f.entries().iter().position(|e| e.name == name).unwrap();
    let e = f.entries()[i].clone();
    let (k, n) = (239usize, 16usize);
    let comp = e.header.comp_len as usize;
    let off = e.payload_off() as usize;
    drop(f);
    for (b, start) in (0..comp).step_by(k).enumerate() {
        let len = (comp - start).min(k);
        for j in 0..per_block - 1 {
            data[off + start + (j * 31) % len] ^= 0x5c + j as u8;
        }
        data[off + comp + b * n + 5] ^= 0xff; // and one parity byte
    }
}

#[test]
fn ecc_repairs_up_to_half_nsym_per_block() {
    let m = rich_model();
    let good = write(&m, Compression::Zstd(3), Some(16));
    let mut bad = good.clone();
    damage(&mut bad, "dense.f64", 8);
    damage(&mut bad, "blob", 8);
    let f = tessera::open(&bad, &ReadOptions::default()).unwrap();
    let r = f.verify(&VerifyOptions::default());
    assert!(r.is_ok(), "{r:?}");
    for name in ["dense.f64", "blob"] {
        let c = r
            .checks
            .iter()
            .find(|c| c.subject == format!("chunk {name:?}") && c.layer == "reed-solomon")
            .unwrap();
        assert_eq!(c.status, Status::Repaired);
        assert!(
            c.detail.as_deref().unwrap().contains("bytes fixed"),
            "{c:?}"
        );
    }
    let fixed_blob = r
        .checks
        .iter()
        .find(|c| c.subject == "chunk \"blob\"" && c.layer == "crc32c")
        .unwrap();
    assert_eq!(fixed_blob.status, Status::Repaired);
    assert_same(&m, f.as_ref());
    // `repair` writes back exactly the original file.
    let mut out = Vec::new();
    let report = fold::repair(&bad, &ReadOptions::default(), &mut out).unwrap();
    assert_eq!(out, good);
    let blob = report.iter().find(|c| c.name == "blob").unwrap();
    assert_eq!(blob.status, "repaired");
    let blocks = 3000u64.div_ceil(239); // blob is random: zstd stores it about as is
    assert!(
        blob.blocks_fixed >= blocks && blob.bytes_fixed >= blocks * 8,
        "{blob:?}"
    );
}

#[test]
fn more_than_half_nsym_is_unrecoverable() {
    let m = rich_model();
    let good = write(&m, Compression::None, Some(16));
    let mut bad = good.clone();
    damage(&mut bad, "dense.f64", 9);
    // A reading open refuses a file with a tensor chunk beyond repair, naming it...
    let e = tessera::open(&bad, &ReadOptions::default()).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Integrity);
    assert!(e.to_string().contains("\"dense.f64\""), "{e}");
    // ...an auditing open (inspect, verify) lists the rest and reports it.
    let audit = ReadOptions::default().audit(true);
    let f = tessera::open(&bad, &audit).unwrap();
    let r = f.verify(&VerifyOptions::default());
    assert!(!r.is_ok());
    let failed: Vec<_> = r
        .failures()
        .map(|c| (c.subject.as_str(), c.layer.as_str()))
        .collect();
    assert!(
        failed.contains(&("chunk \"dense.f64\"", "crc32c")),
        "{failed:?}"
    );
    let e = f.tensor("dense.f64").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity);
    assert!(
        e.to_string().contains("dense.f64") && e.to_string().contains("damaged bytes"),
        "{e}"
    );
    // Other tensors still read.
    assert!(f.tensor("dense.f32").is_ok());
    let mut out = Vec::new();
    let e = fold::repair(&bad, &ReadOptions::default(), &mut out).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity);
    assert!(out.is_empty());
}

#[test]
fn damage_without_ecc_is_an_integrity_error_at_the_chunk() {
    let m = rich_model();
    let mut bad = write(&m, Compression::None, None);
    let f = FoldFile::parse(&bad, &Default::default()).unwrap();
    let e = f.entries().iter().find(|e| e.name == "dense.i32").unwrap();
    let off = e.payload_off() as usize + e.header.comp_len as usize - 1;
    bad[off] ^= 1;
    // The chunk is checked when its bytes are first used (issue 30 §3: the open reads
    // the index, not every chunk): the open lists it, the read fails naming it.
    let f = tessera::open(&bad, &ReadOptions::default()).unwrap();
    let e = f.tensor("dense.i32").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity);
    assert_eq!(e.subject(), Some("chunk \"dense.i32\""));
    // With --salvage the open still checks every chunk, to know what is lost.
    let f = tessera::open(&bad, &ReadOptions::default().salvage(true)).unwrap();
    assert!(f.tensor_infos().iter().all(|t| t.name != "dense.i32"));
    assert!(
        f.warnings().iter().any(|w| w.contains("dense.i32")),
        "{:?}",
        f.warnings()
    );
    let audit = ReadOptions::default().audit(true);
    let f = tessera::open(&bad, &audit).unwrap();
    let err = f.tensor("dense.i32").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Integrity);
    assert_eq!(err.subject(), Some("chunk \"dense.i32\""));
    let r = f.verify(&VerifyOptions::default());
    let failed: Vec<_> = r
        .failures()
        .map(|c| (c.subject.clone(), c.layer.clone()))
        .collect();
    assert_eq!(
        failed,
        [
            ("chunk \"dense.i32\"".to_string(), "crc32c".to_string()),
            ("chunk \"dense.i32\"".to_string(), "sha256".to_string())
        ]
    );
}

#[test]
fn renamed_chunk_and_edited_metadata_fail_the_hierarchy() {
    let m = rich_model();
    let good = write(&m, Compression::None, None);
    // Same-length edits of the index, so no offset moves.
    let replace = |from: &str, to: &str| {
        let at = good
            .windows(from.len())
            .rposition(|w| w == from.as_bytes())
            .unwrap();
        let mut d = good.clone();
        d[at..at + to.len()].copy_from_slice(to.as_bytes());
        d
    };
    let renamed = replace("\"name\":\"blob\"", "\"name\":\"blub\"");
    let r = tessera::open(&renamed, &ReadOptions::default())
        .unwrap()
        .verify(&VerifyOptions::default());
    assert!(r.failures().any(|c| c.layer == "chunk_hashes"), "{r:?}");
    let edited = replace("\"lr\":1e-05", "\"lr\":2e-05");
    assert_ne!(edited, good);
    let f = tessera::open(&edited, &ReadOptions::default()).unwrap();
    assert!(f.warnings().iter().any(|w| w.contains("manifest_hash")));
    let r = f.verify(&VerifyOptions::default());
    assert_eq!(
        r.failures().map(|c| c.layer.as_str()).collect::<Vec<_>>(),
        ["manifest_hash"]
    );
}

/// Reading tensors in file order decodes the next chunk ahead on another core: every
/// tensor still comes back with its own bytes, in order, out of order and again, and
/// a chunk whose SHA-256 fails is an Integrity error when it is asked for (not when
/// it was read ahead), its neighbours unaffected.
#[test]
fn read_ahead_hands_out_each_chunk_checked_in_any_order() {
    let mut m = Model::new();
    let names = ["t0", "t1", "t2", "t3"];
    let datas: Vec<Vec<u8>> = (0..4).map(|i| bytes_for(300_000, i + 1)).collect();
    for (n, d) in names.iter().zip(&datas) {
        m.push(
            TensorView::dense(
                TensorInfo::dense(*n, DType::U8, vec![d.len() as u64]),
                Cow::Owned(d.clone()),
            )
            .unwrap(),
        )
        .unwrap();
    }
    let mut data = write(&m, Compression::Zstd(3), None);
    let check = |f: &dyn TensorSource, i: usize| {
        let t = f.tensor(names[i]).unwrap();
        assert!(t.data().unwrap() == &datas[i][..], "{}", names[i]);
    };
    {
        let f = tessera::open(&data, &ReadOptions::default()).unwrap();
        for order in [[0, 1, 2, 3], [3, 2, 1, 0], [1, 0, 2, 3], [0, 2, 1, 3]] {
            for i in order {
                check(&*f, i);
            }
        }
    }
    // t1's recorded SHA-256 (index entry and chunk_hashes) altered: its CRC-32C still
    // passes, so the file opens; reading t1 fails, the others read.
    let f = FoldFile::parse(&data, &Default::default()).unwrap();
    let sha = match &f.entries().iter().find(|e| e.name == "t1").unwrap().sha256 {
        fold::read::HashField::Sha256(h) => tessera::util::hex(h),
        other => panic!("{other:?}"),
    };
    drop(f);
    let mut wrong = sha.clone().into_bytes();
    wrong[0] = if wrong[0] == b'0' { b'1' } else { b'0' };
    let text = data.clone();
    let mut found = 0;
    for at in 0..text.len() - sha.len() {
        if &text[at..at + sha.len()] == sha.as_bytes() {
            data[at..at + sha.len()].copy_from_slice(&wrong);
            found += 1;
        }
    }
    assert_eq!(found, 2, "entry and chunk_hashes");
    let f = tessera::open(&data, &ReadOptions::default()).unwrap();
    check(&*f, 0); // t1 is read ahead here
    let e = f.tensor("t1").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    assert_eq!(e.subject(), Some("chunk \"t1\""));
    check(&*f, 2);
    check(&*f, 3);
    assert_eq!(f.tensor("t1").unwrap_err().kind(), ErrorKind::Integrity);
    check(&*f, 0);
}
