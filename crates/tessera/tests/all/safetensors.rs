//! safetensors: vectors written by the `safetensors` package (tests/data/safetensors/gen.py)
//! read with the values numpy computed, our writer reproduces them byte for byte, every
//! prefix and hostile header is a clear error, output is deterministic.

use std::borrow::Cow;
use std::io::Cursor;

use tessera::formats::safetensors::{SafetensorsFile, SafetensorsWriter};
use tessera::{
    DType, ErrorKind, Format, Map, Metadata, Model, ReadOptions, TensorInfo, TensorSource,
    TensorView, Value,
};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/safetensors/");
const VECTORS: [&str; 6] = [
    "mixed.safetensors",
    "mxfp4_pair.safetensors",
    "nometa.safetensors",
    "bf16_fp8.safetensors",
    "empty.safetensors",
    "meta_only.safetensors",
];

fn load(name: &str) -> Vec<u8> {
    std::fs::read(format!("{DIR}{name}")).unwrap()
}

fn expected() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(format!("{DIR}expected.json")).unwrap()).unwrap()
}

fn open(data: &[u8]) -> tessera::Result<SafetensorsFile<'_>> {
    SafetensorsFile::parse(data, &ReadOptions::default())
}

fn write(src: &dyn TensorSource) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    tessera::convert::write_to(Format::Safetensors, src, &mut out, &Default::default()).unwrap();
    out.into_inner()
}

#[test]
fn peer_vectors_read_with_the_values_numpy_computed() {
    let exp = expected();
    for v in VECTORS {
        let data = load(v);
        let f = open(&data).unwrap_or_else(|e| panic!("{v}: {e}"));
        let e = &exp[v];
        let tensors = e["tensors"].as_object().unwrap();
        assert_eq!(f.tensor_infos().len(), tensors.len(), "{v}");
        for (name, t) in tensors {
            let view = f.tensor(name).unwrap();
            assert!(view.is_borrowed(), "{v}: {name} not zero-copy");
            assert_eq!(
                view.info.dtype.name(),
                t["dtype"].as_str().unwrap(),
                "{name}"
            );
            let shape: Vec<u64> = t["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect();
            assert_eq!(view.info.shape, shape, "{name}");
            assert_eq!(
                tessera::util::hex(view.data().unwrap()),
                t["hex"].as_str().unwrap(),
                "{v}: {name}"
            );
        }
        let meta = e["metadata"].as_object().unwrap();
        assert_eq!(f.metadata().len(), meta.len());
        for (k, val) in meta {
            assert_eq!(
                f.metadata().get(k),
                Some(&Value::Str(val.as_str().unwrap().into()))
            );
        }
    }
}

#[test]
fn our_writer_is_byte_identical_to_the_package() {
    for v in VECTORS {
        let data = load(v);
        let f = open(&data).unwrap();
        // Through an owned model too, so the writer does not see the file's order.
        let mut m = Model::from_source(&f).unwrap();
        assert_eq!(write(&f), data, "{v} (from file)");
        m.metadata = f.metadata().clone();
        assert_eq!(write(&m), data, "{v} (from model)");
    }
}

#[test]
fn file_order_is_offset_order_and_bf16_fp8_map() {
    let data = load("bf16_fp8.safetensors");
    let f = open(&data).unwrap();
    let names: Vec<_> = f.tensor_infos().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["w", "q4", "q5"]); // BF16 > F8_E4M3 > F8_E5M2
    let dtypes: Vec<_> = f.tensor_infos().iter().map(|t| t.dtype).collect();
    assert_eq!(dtypes, [DType::BF16, DType::F8E4M3FN, DType::F8E5M2]);
    let off = f.tensor_infos()[0].storage.offset.unwrap();
    assert_eq!(off, 8 + f.header_len());
    assert_eq!(off % 8, 0);
}

#[test]
fn every_prefix_is_a_clear_error() {
    for v in VECTORS {
        let data = load(v);
        for n in 0..data.len() {
            let e = open(&data[..n]).expect_err(&format!("{v}: prefix {n} opened"));
            assert!(
                matches!(e.kind(), ErrorKind::Malformed | ErrorKind::LimitExceeded),
                "{v}[..{n}]: {e:?}"
            );
        }
    }
}

#[test]
fn flipped_bytes_never_panic() {
    let data = load("mixed.safetensors");
    for i in 0..data.len() {
        for bit in [0x01u8, 0x80, 0x20] {
            let mut d = data.clone();
            d[i] ^= bit;
            if let Ok(f) = open(&d) {
                for t in f.tensor_infos() {
                    let v = f.tensor(&t.name).unwrap();
                    assert_eq!(v.nbytes(), t.dense_nbytes().unwrap());
                }
            }
        }
    }
}

fn file(header: &str, buffer: &[u8]) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    v.extend_from_slice(buffer);
    v
}

fn err(data: &[u8]) -> tessera::Error {
    open(data).expect_err("hostile file opened")
}

#[test]
fn hostile_headers_give_clear_errors() {
    use ErrorKind::*;
    let t = |o: &str| format!(r#"{{"a":{{"dtype":"U8","shape":[2],"data_offsets":{o}}}}}"#);
    let cases: Vec<(Vec<u8>, ErrorKind, &str)> = vec![
        (
            u64::MAX.to_le_bytes().to_vec(),
            LimitExceeded,
            "header length",
        ),
        (
            100_000_001u64.to_le_bytes().to_vec(),
            LimitExceeded,
            "header length",
        ),
        (1000u64.to_le_bytes().to_vec(), Malformed, "past the end"),
        (file("[]", b""), Malformed, "JSON"),
        (file("{", b""), Malformed, "JSON"),
        (file("", b""), Malformed, "JSON"),
        (file(&t("[0,2]"), b"xyz"), Malformed, "cover 2 bytes"),
        (file(&t("[1,3]"), b"xyz"), Malformed, "gap"),
        (file(&t("[0,3]"), b"xyz"), Malformed, "needs 2"),
        (file(&t("[0,2]"), b"x"), Malformed, "file ends at byte"),
        (file(&t("[2,0]"), b"xy"), Malformed, "gap"),
        (file(&t("[0,2,4]"), b"xy"), Malformed, "JSON"),
        (
            file(&t("[0,18446744073709551615]"), b"xy"),
            Malformed,
            "needs 2",
        ),
        (
            file(
                r#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}"#,
                b"xyz",
            ),
            Malformed,
            "overlaps",
        ),
        (
            file(
                r#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}"#,
                b"xyzw",
            ),
            Malformed,
            "duplicate tensor name",
        ),
        (
            file(
                r#"{"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,0]}}"#,
                b"",
            ),
            Malformed,
            "overflows",
        ),
        (
            file(
                r#"{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}"#,
                b"",
            ),
            Malformed,
            "JSON",
        ),
        (
            file(
                r#"{"a":{"dtype":"f32","shape":[],"data_offsets":[0,4]}}"#,
                b"xxxx",
            ),
            Malformed,
            "unknown dtype",
        ),
        (
            file(
                r#"{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}"#,
                b"xy",
            ),
            Malformed,
            "do not fill whole bytes",
        ),
        (
            file(
                r#"{"a":{"dtype":"F6_E3M2","shape":[3],"data_offsets":[0,3]}}"#,
                b"xyz",
            ),
            Malformed,
            "do not fill whole bytes",
        ),
        (
            file(
                r#"{"a":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,4]}}"#,
                b"wxyz",
            ),
            Malformed,
            "needs 3",
        ),
        (file(r#"{"__metadata__":{"a":1}}"#, b""), Malformed, "JSON"),
        (
            file(r#"{"__metadata__":{"a":{"b":"c"}}}"#, b""),
            Malformed,
            "JSON",
        ),
        (file(r#"{"__metadata__":[]}"#, b""), Malformed, "JSON"),
        (
            file(r#"{"__metadata__":{},"__metadata__":{}}"#, b""),
            Malformed,
            "duplicate",
        ),
        (file(r#"{"a":"x"}"#, b""), Malformed, "JSON"),
        (
            file(r#"{"a":{"dtype":"U8","shape":[0]}}"#, b""),
            Malformed,
            "missing field",
        ),
        (file("{}\0", b""), Malformed, "JSON"),
    ];
    for (i, (data, kind, needle)) in cases.iter().enumerate() {
        let e = err(data);
        assert_eq!(e.kind(), *kind, "case {i}: {e}");
        assert!(e.to_string().contains(needle), "case {i}: {e}");
    }
    // Invalid UTF-8 in the header, with the offset of the bad byte.
    let mut d = file(
        r#"{"X":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}"#,
        b"",
    );
    d[10] = 0xff;
    let e = err(&d);
    assert!(
        e.to_string().contains("UTF-8") && e.offset() == Some(10),
        "{e}"
    );
    // Rank over the limit.
    let shape = vec!["1"; 65].join(",");
    let h = format!(r#"{{"a":{{"dtype":"U8","shape":[{shape}],"data_offsets":[0,1]}}}}"#);
    assert_eq!(err(&file(&h, b"x")).kind(), LimitExceeded);
    // A smaller index limit is honoured.
    let mut opts = ReadOptions::default();
    opts.limits.max_index_bytes = 16;
    let data = load("mixed.safetensors");
    let e = SafetensorsFile::parse(&data, &opts).unwrap_err();
    assert_eq!(e.kind(), LimitExceeded);
}

#[test]
fn accepted_quirks_of_the_original() {
    // null metadata, unknown fields, zero-size tensors sharing an offset, header spaces.
    let h = r#"{"__metadata__":null,"z":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"a":{"dtype":"F32","shape":[],"data_offsets":[0,4],"extra":true},"y":{"dtype":"U8","shape":[0,9],"data_offsets":[0,0]}}   "#;
    let d = file(h, &1.5f32.to_le_bytes());
    let f = open(&d).unwrap();
    assert!(f.metadata().is_empty());
    let names: Vec<_> = f.tensor_infos().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["z", "y", "a"]);
    assert_eq!(f.tensor("a").unwrap().data().unwrap(), 1.5f32.to_le_bytes());
    assert!(f.tensor("nope").is_err());
}

fn dense(name: &str, dtype: DType, shape: Vec<u64>, data: Vec<u8>) -> TensorView<'static> {
    TensorView::dense(TensorInfo::dense(name, dtype, shape), Cow::Owned(data)).unwrap()
}

#[test]
fn writer_is_deterministic_sorts_and_keeps_metadata_order() {
    let mut m = Model::new();
    m.push(dense("zeta", DType::U8, vec![3], vec![1, 2, 3]))
        .unwrap();
    m.push(dense("alpha", DType::I16, vec![1], vec![9, 9]))
        .unwrap();
    m.push(dense("beta", DType::U16, vec![], vec![7, 7]))
        .unwrap();
    m.push(dense(
        "gamma",
        DType::F64,
        vec![1],
        2.0f64.to_le_bytes().to_vec(),
    ))
    .unwrap();
    let mut meta = Map::new();
    meta.insert("z", "last?");
    meta.insert("a", Value::Int(3));
    meta.insert("nested", Value::List(vec![Value::Bool(true), Value::Null]));
    m.metadata = meta;
    let a = write(&m);
    assert_eq!(a, write(&m));
    let n = u64::from_le_bytes(a[..8].try_into().unwrap()) as usize;
    assert_eq!(n % 8, 0);
    let header = std::str::from_utf8(&a[8..8 + n]).unwrap();
    assert!(
        header.starts_with(
            r#"{"__metadata__":{"z":"last?","a":"3","nested":"[true,null]"},"gamma":"#
        ),
        "{header}"
    );
    let order: Vec<usize> = ["\"gamma\"", "\"beta\"", "\"alpha\"", "\"zeta\""]
        .iter()
        .map(|k| header.find(k).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{header}");
    // And it reads back, metadata as strings in the same order.
    let f = open(&a).unwrap();
    let keys: Vec<_> = f.metadata().keys().collect();
    assert_eq!(keys, ["z", "a", "nested"]);
    assert_eq!(f.tensor("zeta").unwrap().data().unwrap(), [1, 2, 3]);
}

#[test]
fn writer_refuses_what_safetensors_cannot_hold() {
    let mut m = Model::new();
    m.push(dense("c", DType::C128, vec![1], vec![0; 16]))
        .unwrap();
    let mut out = Cursor::new(Vec::new());
    let e = tessera::convert::write_to(Format::Safetensors, &m, &mut out, &Default::default())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(e.to_string().contains("\"c\""));

    // The streaming API checks order and completeness.
    let infos = vec![
        TensorInfo::dense("a", DType::U8, vec![1]),
        TensorInfo::dense("b", DType::F32, vec![1]),
    ];
    let mut w = SafetensorsWriter::new(Vec::new(), &infos, &Metadata::new()).unwrap();
    assert_eq!(w.order().collect::<Vec<_>>(), ["b", "a"]);
    assert!(w.write_tensor("a", &[1]).is_err());
    assert!(w.write_tensor("b", &[1, 2]).is_err());
    w.write_tensor("b", &[0, 0, 0, 0]).unwrap();
    assert!(w.finish().is_err());
}

#[test]
fn attrs_are_dropped_with_a_note() {
    let mut v = dense("w", DType::F32, vec![1], vec![0; 4]);
    v.info.attrs.insert("requires_grad", true);
    let mut m = Model::new();
    m.push(v).unwrap();
    let mut out = Cursor::new(Vec::new());
    let r =
        tessera::convert::write_to(Format::Safetensors, &m, &mut out, &Default::default()).unwrap();
    assert!(
        r.notes.iter().any(|n| n.contains("attributes")),
        "{:?}",
        r.notes
    );
}

#[test]
fn open_dispatches_and_verify_reports_no_checksums() {
    let data = load("mixed.safetensors");
    let f = tessera::open(&data, &ReadOptions::default()).unwrap();
    assert_eq!(f.format(), Format::Safetensors);
    let r = f.verify(&Default::default());
    assert!(r.is_ok());
    assert!(r
        .checks
        .iter()
        .any(|c| c.status == tessera::Status::NotChecked));
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn dtype() -> impl Strategy<Value = DType> {
        prop::sample::select(vec![
            DType::Bool,
            DType::U8,
            DType::I8,
            DType::F8E5M2,
            DType::F8E4M3FN,
            DType::F8E8M0,
            DType::I16,
            DType::U16,
            DType::F16,
            DType::BF16,
            DType::I32,
            DType::U32,
            DType::F32,
            DType::C64,
            DType::F64,
            DType::I64,
            DType::U64,
        ])
    }

    fn tensor() -> impl Strategy<Value = (DType, Vec<u64>, Vec<u8>)> {
        (dtype(), prop::collection::vec(0u64..4, 0..4)).prop_flat_map(|(d, shape)| {
            let n = shape.iter().product::<u64>() as usize * d.size();
            (Just(d), Just(shape), prop::collection::vec(any::<u8>(), n))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn round_trip_and_rewrite_is_identical(
            tensors in prop::collection::btree_map("\\PC{1,8}", tensor(), 0..6),
            meta in prop::collection::btree_map("[a-z]{1,4}", "\\PC{0,6}", 0..3),
        ) {
            let mut m = Model::new();
            for (name, (d, shape, data)) in &tensors {
                if name == "__metadata__" {
                    continue;
                }
                m.push(dense(name, *d, shape.clone(), data.clone())).unwrap();
            }
            for (k, v) in &meta {
                m.metadata.insert(k.clone(), v.as_str());
            }
            let bytes = write(&m);
            let f = open(&bytes).unwrap();
            prop_assert_eq!(f.metadata(), &m.metadata);
            for info in m.tensor_infos() {
                let a = m.tensor(&info.name).unwrap();
                let b = f.tensor(&info.name).unwrap();
                prop_assert!(b.is_borrowed());
                prop_assert_eq!(&b.info.shape, &info.shape);
                prop_assert_eq!(a.data().unwrap(), b.data().unwrap());
            }
            prop_assert_eq!(write(&f), bytes);
        }
    }
}

/// F4 as torch 2.x and the safetensors package write it (`float4_e2m1fn_x2` saved by
/// `safetensors.torch.save_file`: dtype `F4`, the logical shape), read with the values
/// ml_dtypes computed (gen_fp4.py, in expected.json), cast exactly, and rewritten byte for byte.
#[test]
fn fp4_written_by_torch_reads_with_ml_dtypes_values_and_rewrites_identically() {
    let data = load("fp4_torch.safetensors");
    let exp = expected();
    let f = open(&data).unwrap();
    for (name, t) in exp["fp4_torch.safetensors"]["tensors"].as_object().unwrap() {
        let view = f.tensor(name).unwrap();
        assert_eq!(
            view.info.dtype.name(),
            t["dtype"].as_str().unwrap(),
            "{name}"
        );
        let shape: Vec<u64> = serde_json::from_value(t["shape"].clone()).unwrap();
        assert_eq!(view.info.shape, shape, "{name}");
        let want: Vec<f64> = serde_json::from_value(t["values"].clone()).unwrap();
        let got: Vec<f64> = (0..want.len())
            .map(|i| {
                view.info
                    .dtype
                    .element_as_f64(view.data().unwrap(), i)
                    .unwrap()
            })
            .collect();
        assert_eq!(got, want, "{name}");
        // Cast to f32: the same values, one element each (not one per byte).
        let c = tessera::cast::cast_view(view.clone(), DType::F32).unwrap();
        let f32s: Vec<f64> = c
            .data()
            .unwrap()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()) as f64)
            .collect();
        assert_eq!(f32s, want, "{name} cast");
    }
    let blocks = f.tensor("blocks").unwrap();
    assert_eq!(blocks.nbytes(), 6, "two f4 per byte");
    assert_eq!(
        write(&f),
        data,
        "our writer differs from the package's bytes"
    );
}

/// The sub-byte types survive safetensors -> zTensor v2 -> safetensors (f4 as a dtype;
/// f6, which zTensor v2 does not register, carried as its bytes), are refused with the
/// cast hint by formats that cannot carry them, and an F6 tensor written by us reads
/// back with its elements at bits 6i.. of the stream.
#[test]
fn sub_byte_floats_convert_where_held_and_are_refused_with_a_cast_hint_elsewhere() {
    use tessera::convert::prepare;
    use tessera::ConvertOptions;
    let data = load("fp4_torch.safetensors");
    let f = open(&data).unwrap();
    let mut zt = Cursor::new(Vec::new());
    tessera::convert::write_to(Format::ZtensorV2, &f, &mut zt, &Default::default()).unwrap();
    let zt = zt.into_inner();
    let g = tessera::open(&zt, &ReadOptions::default()).unwrap();
    let b = g.tensor("blocks").unwrap();
    assert_eq!(
        (b.info.dtype, b.info.shape.clone()),
        (DType::F4E2M1, vec![3, 4])
    );
    assert_eq!(
        b.data().unwrap(),
        f.tensor("blocks").unwrap().data().unwrap()
    );
    assert_eq!(write(g.as_ref()), data);
    // Formats without the dtype refuse it, naming --cast; with it, the values.
    let e = prepare(&f, Format::Npz, ConvertOptions::default())
        .err()
        .unwrap();
    assert!(e.to_string().contains("f4_e2m1"), "{e}");
    assert!(e.to_string().contains("(option: cast)"), "{e}");
    let p = prepare(
        &f,
        Format::Npz,
        ConvertOptions::default().cast(true).drop_metadata(true),
    )
    .unwrap();
    assert!(
        p.notes().iter().any(|n| n.contains("f4_e2m1 -> f16")),
        "{:?}",
        p.notes()
    );
    // f6: element 1 of [0x3f, 0, 0, 0] packed is at bits 6..12.
    let six = dense(
        "six",
        DType::F6E3M2,
        vec![4],
        vec![0b1100_0000, 0b0000_0111, 0],
    );
    let mut m = Model::new();
    m.push(six).unwrap();
    let out = write(&m);
    let back = open(&out).unwrap();
    let v = back.tensor("six").unwrap();
    assert_eq!(v.info.dtype, DType::F6E3M2);
    // Code 0b011111 = 28.0 (the largest E3M2 value), the others 0.
    let vals: Vec<f64> = (0..4)
        .map(|i| DType::F6E3M2.element_as_f64(v.data().unwrap(), i).unwrap())
        .collect();
    assert_eq!(vals, [0.0, 28.0, 0.0, 0.0]);
    // zTensor v2 registers no 6-bit type: carried as its packed bytes under the type's
    // name (as zTensor v2 names types it does not register), and back as f6_e3m2.
    let p = prepare(&back, Format::ZtensorV2, ConvertOptions::default()).unwrap();
    assert!(
        p.notes()
            .iter()
            .any(|n| n.contains("carried \"six\" (f6_e3m2)")),
        "{:?}",
        p.notes()
    );
    let mut zt = Cursor::new(Vec::new());
    tessera::convert::write_to(Format::ZtensorV2, &back, &mut zt, &Default::default()).unwrap();
    let zt = zt.into_inner();
    let g = tessera::open(&zt, &ReadOptions::default()).unwrap();
    assert_eq!(g.tensor_infos()[0].dtype_label(), "f6_e3m2");
    let p = prepare(g.as_ref(), Format::Safetensors, ConvertOptions::default()).unwrap();
    assert_eq!(write(&p), out, "back to safetensors as it was");
    // With --cast it is cast to a dtype zTensor v2 has.
    let p = prepare(
        &back,
        Format::ZtensorV2,
        ConvertOptions::default().cast(true),
    )
    .unwrap();
    assert!(
        p.notes().iter().any(|n| n.contains("f6_e3m2 -> f16")),
        "{:?}",
        p.notes()
    );
    // An odd count cannot be a safetensors F4 tensor: refused, naming the rule.
    let odd = dense("odd", DType::F4E2M1, vec![3], vec![0x21, 0x03]);
    let mut m = Model::new();
    m.push(odd).unwrap();
    let mut out = Cursor::new(Vec::new());
    let e = tessera::convert::write_to(Format::Safetensors, &m, &mut out, &Default::default())
        .unwrap_err();
    assert!(e.to_string().contains("whole bytes"), "{e}");
    // Nonzero padding bits are refused when the view is made.
    let bad = TensorView::dense(
        TensorInfo::dense("bad", DType::F4E2M1, vec![3]),
        Cow::Owned(vec![0x21, 0x13]),
    );
    assert!(bad.unwrap_err().to_string().contains("unused high bits"));
}

/// MXFP4 as gpt-oss stores it (`X_blocks` u8 (…, G, 16) + `X_scales` u8 (…, G), written
/// by the safetensors package, gen_mxfp4.py): `--dequantize f32|bf16` makes the pair one
/// tensor `X` of shape (…, G·32) with the values ml_dtypes computed (an 0xFF scale NaN,
/// as E8M0 has it), where `X_blocks` was; a `_blocks` tensor without scales and the
/// other tensors pass unchanged; without `--dequantize` the pair stays two u8 tensors.
#[test]
fn mxfp4_pairs_dequantize_to_the_values_ml_dtypes_computed() {
    use tessera::convert::prepare;
    use tessera::ConvertOptions;
    let data = load("mxfp4_pair.safetensors");
    let exp = expected();
    let e = &exp["mxfp4_pair.safetensors"];
    let f = open(&data).unwrap();
    let stem = "model.layers.0.mlp.experts.gate_up_proj";
    let plain = prepare(&f, Format::Safetensors, ConvertOptions::default()).unwrap();
    assert_eq!(
        plain.tensor_infos().len(),
        4,
        "no --dequantize: the pair stays"
    );
    for (to, key) in [(DType::F32, "f32_hex"), (DType::BF16, "bf16_hex")] {
        let opts = ConvertOptions::default().dequantize(Some(to));
        let p = prepare(&f, Format::Safetensors, opts).unwrap();
        let names: Vec<&str> = p.tensor_infos().iter().map(|i| i.name.as_str()).collect();
        let (blocks, scales) = (format!("{stem}_blocks"), format!("{stem}_scales"));
        let want: Vec<&str> = (f.tensor_infos().iter())
            .map(|i| i.name.as_str())
            .filter(|n| *n != scales)
            .map(|n| if n == blocks { stem } else { n })
            .collect();
        assert_eq!(
            names, want,
            "the pair where its blocks were, the scales consumed"
        );
        assert!(
            p.notes().iter().any(|n| n.contains("MXFP4")),
            "{:?}",
            p.notes()
        );
        let back = write(&p);
        let g = open(&back).unwrap();
        let v = g.tensor(stem).unwrap();
        let want = &e["mxfp4"][stem];
        let shape: Vec<u64> = serde_json::from_value(want["shape"].clone()).unwrap();
        assert_eq!((v.info.dtype, &v.info.shape), (to, &shape));
        assert_eq!(
            tessera::util::hex(v.data().unwrap()),
            want[key].as_str().unwrap()
        );
        for other in ["lonely_blocks", &format!("{stem}_bias")] {
            assert_eq!(
                tessera::util::hex(g.tensor(other).unwrap().data().unwrap()),
                e["tensors"][other]["hex"].as_str().unwrap(),
                "{other}"
            );
        }
    }
}
