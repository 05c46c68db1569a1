//! zTensor v2 against files written by ztensor 2.1.2 (`tests/data/ztensor2/gen.py`):
//! values as gen.py recorded them (SHA-256 of each part, computed by numpy/hashlib),
//! the canonical file rewritten byte for byte, broken files refused with the right
//! kind, v1 ↔ v2 lossless.

use std::borrow::Cow;
use std::io::Cursor;

use serde_json::Value as Json;
use tessera::formats::ztensor2::{self, Ztensor2File};
use tessera::{
    Container, DType, ErrorKind, Layout, Model, ReadOptions, Status, TensorSource, Value,
    VerifyOptions, WriteOptions,
};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ztensor2");

fn read(name: &str) -> Vec<u8> {
    std::fs::read(format!("{DIR}/{name}")).unwrap()
}

fn expected() -> Json {
    serde_json::from_slice(&read("expected.json")).unwrap()
}

use crate::common::sha;

fn dtype_of(label: &str) -> Option<DType> {
    Some(match label {
        "u8:bool" => DType::Bool,
        "u8:f8_e4m3fn" => DType::F8E4M3FN,
        "u8:f4_e2m1" => DType::F4E2M1,
        "f32:complex64" => DType::C64,
        "bf16" => DType::BF16,
        "f16" => DType::F16,
        "f32" => DType::F32,
        "f64" => DType::F64,
        "i8" => DType::I8,
        "i16" => DType::I16,
        "i32" => DType::I32,
        "i64" => DType::I64,
        "u8" => DType::U8,
        "u16" => DType::U16,
        "u32" => DType::U32,
        "u64" => DType::U64,
        _ => return None,
    })
}

fn write_v2(src: &dyn TensorSource, opts: &WriteOptions) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    ztensor2::write(src, &mut out, opts).unwrap();
    out.into_inner()
}

#[test]
fn files_written_by_ztensor_2_1_2_read_with_the_recorded_values() {
    let exp = expected();
    let valid = exp["valid"].as_object().unwrap();
    assert_eq!(valid.len(), 7);
    for (file, want) in valid {
        let data = read(file);
        let f = Ztensor2File::parse(&data, &ReadOptions::default())
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let tensors = want["tensors"].as_object().unwrap();
        let names: Vec<&str> = f.tensor_infos().iter().map(|t| t.name.as_str()).collect();
        let mut want_names: Vec<&str> = tensors.keys().map(String::as_str).collect();
        want_names.sort_unstable();
        assert_eq!(names, want_names, "{file}");
        for (name, t) in tensors {
            let view = f
                .tensor(name)
                .unwrap_or_else(|e| panic!("{file} {name}: {e}"));
            let shape: Vec<u64> = t["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect();
            assert_eq!(view.info.shape, shape, "{file} {name}");
            let layout = t["layout"].as_str().unwrap();
            let parts = t["parts"].as_object().unwrap();
            match layout {
                "dense" => {
                    let label = parts["data"]["type"].as_str().unwrap();
                    match (dtype_of(label), label.split_once(':')) {
                        (Some(d), _) => {
                            assert_eq!(view.info.layout, Layout::Dense, "{file} {name}");
                            assert_eq!(view.info.dtype, d, "{file} {name}");
                        }
                        // A logical type Tessera does not decode: the stored bytes, the
                        // logical shape, the type in the layout and the label.
                        (None, Some((storage, ty))) => {
                            let layout = Layout::Other(format!("dense:{ty}"));
                            assert_eq!(view.info.layout, layout, "{file} {name}");
                            assert_eq!(view.info.dtype.name(), storage, "{file} {name}");
                            assert_eq!(view.info.dtype_label(), ty, "{file} {name}");
                        }
                        (None, None) => panic!("{file} {name}: type {label}"),
                    }
                }
                "zt.sparse_csr/1" if parts["values"]["type"] == "u8:f4_e2m1" => {
                    assert_eq!(view.info.layout, Layout::Other("zt.sparse_csr/1".into()))
                }
                "zt.sparse_csr/1" => assert_eq!(view.info.layout, Layout::SparseCsr),
                "zt.sparse_coo/1" => assert_eq!(view.info.layout, Layout::SparseCoo),
                other => {
                    assert_eq!(view.info.layout, Layout::Other(other.into()));
                    // The part types are kept for a rewrite, beside the attributes.
                    let Some(Value::Map(types)) = view.info.attrs.get("zt.part_types") else {
                        panic!("{file} {name}: no zt.part_types");
                    };
                    for (p, pw) in parts {
                        assert_eq!(
                            types.get(p),
                            Some(&Value::Str(pw["type"].as_str().unwrap().into()))
                        );
                    }
                    for (k, v) in t["attributes"].as_object().unwrap() {
                        let want = match v {
                            Json::Number(n) => Value::Int(n.as_i64().unwrap().into()),
                            Json::String(s) => Value::Str(s.clone()),
                            other => panic!("{other}"),
                        };
                        assert_eq!(view.info.attrs.get(k), Some(&want), "{file} {name} {k}");
                    }
                }
            }
            assert_eq!(view.parts.len(), parts.len(), "{file} {name}");
            for (p, pw) in parts {
                let bytes = view.part(p).unwrap_or_else(|| panic!("{file} {name} {p}"));
                let want = pw
                    .get("sha256_as_u64")
                    .unwrap_or(&pw["sha256"])
                    .as_str()
                    .unwrap();
                assert_eq!(sha(bytes), want, "{file} {name} part {p}");
            }
        }
        let report = f.verify(&VerifyOptions::default());
        assert!(report.is_ok(), "{file}: {report:?}");
        assert!(report
            .checks
            .iter()
            .any(|c| c.layer == "xxh3" && c.status == Status::Ok));
    }
}

#[test]
fn file_attributes_read_as_a_value_tree() {
    let data = read("canonical.zt");
    let f = Ztensor2File::parse(&data, &ReadOptions::default()).unwrap();
    let m = f.metadata();
    assert_eq!(m.get("name"), Some(&Value::Str("canonical".into())));
    assert_eq!(m.get("epoch"), Some(&Value::Int(3)));
    assert_eq!(m.get("neg"), Some(&Value::Int(-7)));
    assert_eq!(m.get("lr"), Some(&Value::Float(0.5)));
    assert_eq!(
        m.get("tags"),
        Some(&Value::List(vec![
            Value::Str("a".into()),
            Value::Str("b".into())
        ]))
    );
    let Some(Value::Map(n)) = m.get("nested") else {
        panic!("nested")
    };
    assert_eq!(n.get("k"), Some(&Value::Bool(true)));
}

#[test]
fn raw_parts_are_borrowed_and_tied_tensors_share_a_blob() {
    let data = read("canonical.zt");
    let f = Ztensor2File::parse(&data, &ReadOptions::default()).unwrap();
    let v = f.tensor("f32").unwrap();
    assert!(matches!(v.parts[0].bytes, Cow::Borrowed(_)));
    let a = f.parts("tied.a").unwrap()[0].offset;
    let b = f.parts("tied.b").unwrap()[0].offset;
    assert_eq!(a, b, "ztensor 2.1.2 shares identical blobs");
    assert_eq!(a % 65536, 0);
}

#[test]
fn canonical_file_is_rewritten_byte_for_byte() {
    // The second holds logical types Tessera does not decode (f4_e2m1, a vendor type).
    for file in ["canonical.zt", "valid-logical-canonical.zt"] {
        let data = read(file);
        let f = Ztensor2File::parse(&data, &ReadOptions::default()).unwrap();
        let ours = write_v2(&f, &WriteOptions::default());
        assert_eq!(ours.len(), data.len(), "{file}");
        assert!(
            ours == data,
            "{file}: Tessera's canonical writer differs from ztensor 2.1.2's"
        );
    }
}

#[test]
fn every_file_survives_a_rewrite_and_compressed_rewrite() {
    for file in [
        "dense.zt",
        "zstd.zt",
        "profiles.zt",
        "append.zt",
        "valid-logical-types.zt",
    ] {
        let data = read(file);
        let f = Ztensor2File::parse(&data, &ReadOptions::default()).unwrap();
        for opts in [
            WriteOptions::default(),
            WriteOptions::default()
                .compression(tessera::convert::Compression::Zstd(3))
                .digests(vec![tessera::convert::Digest::Sha256]),
        ] {
            let out = write_v2(&f, &opts);
            let g = Ztensor2File::parse(&out, &ReadOptions::default()).unwrap();
            assert!(g.verify(&VerifyOptions::default()).is_ok(), "{file}");
            assert_eq!(g.tensor_infos().len(), f.tensor_infos().len());
            for info in f.tensor_infos() {
                let (a, b) = (f.tensor(&info.name).unwrap(), g.tensor(&info.name).unwrap());
                assert_eq!(a.info.layout, b.info.layout, "{file} {}", info.name);
                assert_eq!(a.info.attrs, b.info.attrs, "{file} {}", info.name);
                assert_eq!(a.parts, b.parts, "{file} {}", info.name);
            }
        }
    }
}

#[test]
fn broken_files_are_refused_with_the_recorded_kind() {
    let exp = expected();
    let broken = exp["broken"].as_object().unwrap();
    assert!(broken.len() >= 10);
    for (file, want) in broken {
        let data = read(&format!("broken/{file}"));
        let kind = want["kind"].as_str().unwrap();
        let opened = Ztensor2File::parse(&data, &ReadOptions::default());
        match kind {
            "integrity-on-read" => {
                let f = opened.unwrap_or_else(|e| panic!("{file}: {e}"));
                let bad: Vec<String> = f
                    .tensor_infos()
                    .iter()
                    .filter_map(|i| f.tensor(&i.name).err())
                    .map(|e| {
                        assert_eq!(e.kind(), ErrorKind::Integrity, "{file}: {e}");
                        e.to_string()
                    })
                    .collect();
                assert_eq!(bad.len(), 1, "{file}: {bad:?}");
                assert!(
                    bad[0].contains("part") && bad[0].contains("xxh3"),
                    "{}",
                    bad[0]
                );
                assert!(!f.verify(&VerifyOptions::default()).is_ok());
                // Unchecked reads hand the bytes out.
                let opts = ReadOptions::default().verify(false);
                let g = Ztensor2File::parse(&data, &opts).unwrap();
                for i in g.tensor_infos() {
                    g.tensor(&i.name).unwrap();
                }
            }
            _ => {
                let e = opened.err().unwrap_or_else(|| panic!("{file} opened"));
                let want_kind = match kind {
                    "integrity" => ErrorKind::Integrity,
                    "malformed" => ErrorKind::Malformed,
                    "unsupported_version" => ErrorKind::UnsupportedVersion,
                    k => panic!("{k}"),
                };
                assert_eq!(e.kind(), want_kind, "{file}: {e}");
            }
        }
    }
}

#[test]
fn every_prefix_and_flipped_tail_byte_is_an_error_not_a_panic() {
    let data = read("profiles.zt");
    for n in (0..data.len())
        .step_by(97)
        .chain(data.len() - 64..data.len())
    {
        assert!(Ztensor2File::parse(&data[..n], &ReadOptions::default()).is_err());
    }
    // The manifest and footer: every byte flipped either fails to open, or opens and
    // reads (a flip the hash cannot see does not exist: the hash covers the manifest).
    let start = data.len() - 2048;
    for i in start..data.len() {
        let mut d = data.clone();
        d[i] ^= 0x55;
        if let Ok(f) = Ztensor2File::parse(&d, &ReadOptions::default()) {
            for t in f.tensor_infos() {
                let _ = f.tensor(&t.name);
            }
            let _ = f.verify(&VerifyOptions::default());
        }
    }
}

#[test]
fn v1_and_v2_convert_into_each_other_losslessly() {
    let data = read("dense.zt");
    let f = Ztensor2File::parse(&data, &ReadOptions::default()).unwrap();
    let v1_caps = tessera::formats::ztensor::capabilities();
    let mut m = Model::new();
    for i in f.tensor_infos() {
        if v1_caps.dtypes.contains(&i.dtype) {
            m.push(f.tensor(&i.name).unwrap()).unwrap();
        }
    }
    assert!(m.tensor_infos().len() >= 12);
    let mut v1 = Cursor::new(Vec::new());
    tessera::formats::ztensor::write(&m, &mut v1, &WriteOptions::default()).unwrap();
    let v1 = v1.into_inner();
    let r1 = tessera::open(&v1, &ReadOptions::default()).unwrap();
    let v2 = write_v2(r1.as_ref(), &WriteOptions::default());
    let r2 = Ztensor2File::parse(&v2, &ReadOptions::default()).unwrap();
    let mut back = Cursor::new(Vec::new());
    tessera::formats::ztensor::write(&r2, &mut back, &WriteOptions::default()).unwrap();
    assert_eq!(back.into_inner(), v1, "v1 -> v2 -> v1 is not the same file");
    for i in m.tensor_infos() {
        let (a, b) = (m.tensor(&i.name).unwrap(), r2.tensor(&i.name).unwrap());
        assert_eq!((a.info.dtype, &a.info.shape), (b.info.dtype, &b.info.shape));
        assert_eq!(a.parts, b.parts, "{}", i.name);
    }
}

#[test]
fn the_writer_refuses_unsorted_names_and_a_write_after_failure_is_refused() {
    let mut m = Model::new();
    m.push(
        tessera::TensorView::dense(
            tessera::TensorInfo::dense("b", DType::U8, vec![1]),
            Cow::Owned(vec![1]),
        )
        .unwrap(),
    )
    .unwrap();
    m.push(
        tessera::TensorView::dense(
            tessera::TensorInfo::dense("a", DType::U8, vec![1]),
            Cow::Owned(vec![2]),
        )
        .unwrap(),
    )
    .unwrap();
    let mut w =
        ztensor2::Ztensor2Writer::new(Cursor::new(Vec::new()), &WriteOptions::default()).unwrap();
    w.add_tensor(&m.tensor("b").unwrap(), &m).unwrap();
    let e = w.add_tensor(&m.tensor("a").unwrap(), &m).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    // The entry point sorts.
    let out = write_v2(&m, &WriteOptions::default());
    let f = Ztensor2File::parse(&out, &ReadOptions::default()).unwrap();
    let names: Vec<&str> = f.tensor_infos().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
}

/// Everything a reader does with a file: open, read every tensor, verify.
fn accepted(data: &[u8]) -> Result<(), String> {
    let f = Ztensor2File::parse(data, &ReadOptions::default()).map_err(|e| e.to_string())?;
    for i in f.tensor_infos() {
        match f.tensor(&i.name) {
            Ok(_) => {}
            // Structural access only (shards, unknown encodings): not a rejection.
            Err(e) if e.kind() == ErrorKind::Unsupported => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    let r = f.verify(&VerifyOptions::default());
    match r.checks.iter().find(|c| c.status == Status::Failed) {
        Some(c) => Err(format!("{} {}: {:?}", c.subject, c.layer, c.detail)),
        None => Ok(()),
    }
}

#[test]
fn the_reference_conformance_corpus_is_accepted_and_rejected_as_it_says() {
    let dir = format!("{DIR}/conformance");
    let list = |sub: &str| {
        let mut v: Vec<_> = std::fs::read_dir(format!("{dir}/{sub}"))
            .unwrap()
            .map(|e| e.unwrap().path())
            // The vectors, not their goldens (`tests/vectors.rs`).
            .filter(|p| p.extension().is_some_and(|x| x == "zt"))
            .collect();
        v.sort();
        v
    };
    let (valid, reject) = (list("valid"), list("reject"));
    assert_eq!((valid.len(), reject.len()), (19, 57));
    for p in &valid {
        let data = std::fs::read(p).unwrap();
        // Valid means "opens": a valid file's data rules are checked when read, and
        // f4-packed-odd-count has a non-zero odd nibble that only a decode would see.
        if let Err(e) = Ztensor2File::parse(&data, &ReadOptions::default()) {
            panic!("{}: {e}", p.display());
        }
    }
    for p in &reject {
        let data = std::fs::read(p).unwrap();
        assert!(accepted(&data).is_err(), "{} was accepted", p.display());
    }
}

#[test]
fn the_fuzz_entry_point_survives_every_vector() {
    let mut files = Vec::new();
    for sub in ["", "broken", "conformance/valid", "conformance/reject"] {
        for e in std::fs::read_dir(format!("{DIR}/{sub}")).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "zt") {
                files.push(p);
            }
        }
    }
    assert!(files.len() > 80);
    for p in files {
        tessera::fuzzing::exercise(tessera::Format::ZtensorV2, &std::fs::read(p).unwrap());
    }
}

/// Logical types (issue 29, issue 34 §3): f4_e2m1 is a dtype, refused with the cast hint
/// by formats without it; a type Tessera does not decode is described as it is, refused
/// by formats of dense arrays naming the type; both are carried by formats that keep
/// layouts by name so that they come back to zTensor v2 as they were.
#[test]
fn logical_types_are_described_refused_or_carried_as_they_are() {
    use tessera::convert::{prepare, write_to};
    use tessera::{ConvertOptions, Format};
    let data = read("valid-logical-types.zt");
    let f = Ztensor2File::parse(&data, &ReadOptions::default()).unwrap();
    let info = |n: &str| {
        f.tensor_infos()
            .iter()
            .find(|t| t.name == n)
            .unwrap()
            .clone()
    };
    let (f4, future) = (info("f4"), info("future.u16"));
    // f4_e2m1 is a dtype: two per byte, the logical shape, the stored bytes.
    assert_eq!(
        (f4.dtype_label(), f4.shape.as_slice()),
        ("f4_e2m1", &[4, 8][..])
    );
    assert_eq!(
        (f4.layout.clone(), f4.dtype),
        (Layout::Dense, DType::F4E2M1)
    );
    assert_eq!(f.tensor("f4").unwrap().nbytes(), 16);
    assert_eq!(future.dtype_label(), "x.future/1");
    assert_eq!(future.dtype, DType::U16);
    // Formats of dense arrays refuse the type Tessera does not decode, naming the
    // tensor and the type; no option helps. f4 is cast when asked.
    for target in [
        Format::Safetensors,
        Format::Pytorch,
        Format::Wtxt,
        Format::Npz,
    ] {
        let all = ConvertOptions::default()
            .cast(true)
            .densify(true)
            .drop_metadata(true);
        let e = prepare(&f, target, all).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{target}: {e}");
        let text = e.to_string();
        let line = |name: &str| text.lines().find(|l| l.contains(name)).unwrap_or_default();
        assert!(
            line("\"future.u16\"").contains("x.future/1, a type Tessera carries"),
            "{target}: {text}"
        );
        assert!(!text.contains("\"f4\""), "{target}: {text}");
        assert!(!text.contains("u8 [32]"), "{target}: {text}");
    }
    // Without --cast, a format without the dtype names it and the flag.
    let e = prepare(
        &f,
        Format::Npz,
        ConvertOptions::default().densify(true).drop_metadata(true),
    )
    .err()
    .unwrap()
    .to_string();
    let line = e
        .lines()
        .find(|l| l.contains("\"f4.odd\""))
        .unwrap_or_default();
    assert!(line.contains("f4_e2m1"), "{e}");
    assert!(e.contains("(option: cast)"), "{e}");
    // Its values decode (what `extract --cast` and `stats` do): one f32 per element.
    let odd = tessera::cast::cast_view(f.tensor("f4.odd").unwrap(), DType::F32).unwrap();
    assert_eq!(
        odd.data().unwrap().len() as u64,
        4 * f.tensor("f4.odd").unwrap().info.numel().unwrap()
    );
    // FOLD, zTensor v1 and AERO keep layouts by name: carried, read back equal, and back
    // in zTensor v2 as the same objects (the dense ones; AERO packs one part of u8 only,
    // and refuses the u16 vendor type rather than read it back as u8).
    let model_of = |skip: &[&str]| {
        let mut m = Model::new();
        for t in f
            .tensor_infos()
            .iter()
            .filter(|t| !skip.contains(&t.name.as_str()))
        {
            m.push(f.tensor(&t.name).unwrap().into_owned()).unwrap();
        }
        m
    };
    let refused = model_of(&["sparse.f4"]);
    let p = prepare(&refused, Format::Aero, ConvertOptions::default()).unwrap();
    let e = write_to(
        Format::Aero,
        &p,
        &mut Cursor::new(Vec::new()),
        &Default::default(),
    );
    let e = e.err().unwrap().to_string();
    assert!(e.contains("\"future.u16\"") && e.contains("u16"), "{e}");
    for target in [Format::Fold, Format::Ztensor, Format::Aero] {
        let dense = match target {
            Format::Aero => model_of(&["sparse.f4", "future.u16"]),
            _ => model_of(&["sparse.f4"]),
        };
        let p = prepare(&dense, target, ConvertOptions::default()).unwrap();
        let mut out = Cursor::new(Vec::new());
        write_to(target, &p, &mut out, &WriteOptions::default())
            .unwrap_or_else(|e| panic!("{target}: {e}"));
        let bytes = out.into_inner();
        let g = tessera::open(&bytes, &ReadOptions::default()).unwrap();
        assert!(g.verify(&VerifyOptions::default()).is_ok(), "{target}");
        let v2 = write_v2(g.as_ref(), &WriteOptions::default());
        let h = Ztensor2File::parse(&v2, &ReadOptions::default()).unwrap();
        for t in dense.tensor_infos() {
            let (a, b) = (f.tensor(&t.name).unwrap(), h.tensor(&t.name).unwrap());
            assert_eq!(
                (&a.info.layout, a.info.dtype, &a.info.shape),
                (&b.info.layout, b.info.dtype, &b.info.shape),
                "{target}: {}",
                t.name
            );
            assert_eq!(a.parts, b.parts, "{target}: {}", t.name);
        }
    }
}

/// A sparse tensor's u32 index parts, widened to u64 on read, are stored as u32 again by
/// a v2 → v2 rewrite (ztensor 2.1.2 wrote `profiles.zt`'s CSR with u32 indices; before,
/// the rewrite stored them as u64), with the same values; the rest of the file too.
#[test]
fn sparse_u32_indices_stay_u32_through_a_rewrite() {
    let data = read("profiles.zt");
    let f = Ztensor2File::parse(&data, &ReadOptions::default()).unwrap();
    let types = |f: &Ztensor2File<'_>, t: &str| -> Vec<(String, DType)> {
        (f.parts(t).unwrap().iter())
            .map(|p| (p.name.clone(), p.dtype))
            .collect()
    };
    let before = types(&f, "csr");
    assert!(
        before.contains(&("indices".into(), DType::U32)),
        "{before:?}"
    );
    for opts in [
        WriteOptions::default(),
        WriteOptions::default().compression(tessera::convert::Compression::Zstd(3)),
    ] {
        let out = write_v2(&f, &opts);
        let g = Ztensor2File::parse(&out, &ReadOptions::default()).unwrap();
        assert_eq!(types(&g, "csr"), before);
        assert_eq!(types(&g, "coo"), types(&f, "coo"), "u64 coords stay u64");
        let (a, b) = (f.tensor("csr").unwrap(), g.tensor("csr").unwrap());
        assert_eq!(a.parts, b.parts);
        assert!(g.verify(&VerifyOptions::default()).is_ok());
    }
}

/// Asked for u32 indices (the attribute a v2 read records) but holding one that does not
/// fit, the writer stores u64 (both index parts: the profile wants one type) rather than
/// truncating it.
#[test]
fn sparse_indices_too_large_for_u32_are_stored_as_u64() {
    let le = |v: &[u64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let big = u32::MAX as u64 + 7;
    let mut info = tessera::TensorInfo::dense("csr", DType::F32, vec![1, big + 1]);
    info.layout = Layout::SparseCsr;
    let mut types = tessera::Map::new();
    types.insert("indices", Value::Str("u32".into()));
    types.insert("indptr", Value::Str("u32".into()));
    info.attrs.insert("zt.part_types", Value::Map(types));
    let view = tessera::TensorView {
        info,
        parts: vec![
            tessera::Part {
                role: "values".into(),
                bytes: Cow::Owned([1f32, 2.0].iter().flat_map(|x| x.to_le_bytes()).collect()),
            },
            tessera::Part {
                role: "indices".into(),
                bytes: Cow::Owned(le(&[3, big])),
            },
            tessera::Part {
                role: "indptr".into(),
                bytes: Cow::Owned(le(&[0, 2])),
            },
        ],
    };
    let mut m = Model::new();
    m.push(view.clone()).unwrap();
    let out = write_v2(&m, &WriteOptions::default());
    let g = Ztensor2File::parse(&out, &ReadOptions::default()).unwrap();
    let stored: Vec<(String, DType)> = (g.parts("csr").unwrap().iter())
        .map(|p| (p.name.clone(), p.dtype))
        .collect();
    assert!(
        stored.contains(&("indices".into(), DType::U64)),
        "{stored:?}"
    );
    assert!(
        stored.contains(&("indptr".into(), DType::U64)),
        "{stored:?}"
    );
    let back = g.tensor("csr").unwrap();
    for p in &view.parts {
        assert_eq!(back.part(&p.role), Some(&p.bytes[..]), "{}", p.role);
    }
}
