//! Writing `.pt`: every checkpoint real torch 1.13 wrote (tests/data/pytorch/gen.py)
//! rewritten by our writer keeps torch's values (the manifest's SHA-256s, computed by
//! torch) and its metadata; storages 64-byte aligned as torch aligns them; metadata
//! trees round-trip; dtypes and layouts torch 1.13 cannot store are refused naming the
//! tensor; the `archive` option names the zip folder. (torch loading our files with
//! `weights_only=True` is tests/peers/test_pytorch.py.)

use std::borrow::Cow;
use std::io::Cursor;

use tessera::convert::{prepare, write_to, ConvertOptions, WriteOptions};
use tessera::metadata::Map;
use tessera::options::OptionValue;
use tessera::{
    DType, ErrorKind, Format, Model, ReadOptions, TensorInfo, TensorSource, TensorView, Value,
};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/pytorch/");

fn write(src: &dyn TensorSource, opts: &WriteOptions) -> tessera::Result<Vec<u8>> {
    let p = prepare(src, Format::Pytorch, ConvertOptions::default())?;
    let mut out = Cursor::new(Vec::new());
    write_to(Format::Pytorch, &p, &mut out, opts)?;
    Ok(out.into_inner())
}

use crate::common::sha;

#[test]
fn torchs_checkpoints_rewritten_by_us_keep_torchs_values() {
    let s = std::fs::read_to_string(format!("{DIR}manifest.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&s).unwrap();
    let mut rewritten = 0;
    for (name, want) in manifest.as_object().unwrap() {
        let data = std::fs::read(format!("{DIR}{name}")).unwrap();
        let src = tessera::open(&data[..], &ReadOptions::default()).unwrap();
        let ours =
            write(src.as_ref(), &WriteOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let back = tessera::open(&ours[..], &ReadOptions::default()).unwrap();
        assert_eq!(back.format(), Format::Pytorch, "{name}");
        assert!(back.verify(&Default::default()).is_ok(), "{name}");
        let tensors = want["tensors"].as_object().unwrap();
        assert_eq!(back.tensor_infos().len(), tensors.len(), "{name}");
        for info in back.tensor_infos() {
            let t = &tensors[&info.name];
            let v = back.tensor(&info.name).unwrap();
            assert_eq!(info.dtype.name(), t["dtype"].as_str().unwrap(), "{name}");
            assert_eq!(
                sha(v.data().unwrap()),
                t["sha256"].as_str().unwrap(),
                "{name} {}",
                info.name
            );
            // Every storage record's data starts on a 64-byte boundary, as torch's do.
            let off = info.storage.offset.unwrap();
            assert_eq!(off % 64, 0, "{name} {} at {off}", info.name);
            assert!(
                v.is_borrowed() || info.numel().unwrap() == 0,
                "{name} {}",
                info.name
            );
        }
        // Nothing shares storage any more: ties are written as copies.
        assert!(
            !back.warnings().iter().any(|w| w.contains("share")),
            "{name}"
        );
        let meta = want["metadata"].as_object().unwrap();
        assert_eq!(back.metadata().len(), meta.len(), "{name}");
        for (k, v) in meta {
            assert_eq!(&back.metadata().get(k).unwrap().to_json(), v, "{name} {k}");
        }
        rewritten += 1;
    }
    assert!(rewritten >= 10);
}

fn model(metadata: Map, tensors: &[(&str, DType, Vec<u64>)]) -> Model {
    let mut m = Model::new();
    m.metadata = metadata;
    for (name, dtype, shape) in tensors {
        let n = tessera::tensor::dense_nbytes(*dtype, shape).unwrap() as usize;
        let bytes = (0..n).map(|i| (i % 2) as u8).collect();
        let info = TensorInfo::dense(*name, *dtype, shape.clone());
        m.push(TensorView::dense(info, Cow::Owned(bytes)).unwrap())
            .unwrap();
    }
    m
}

#[test]
fn metadata_trees_round_trip_beside_the_state_dict() {
    let mut inner = Map::new();
    inner.insert("lr", Value::Float(1e-3));
    inner.insert("blob", Value::Bytes(vec![0, 255, 7]));
    let mut meta = Map::new();
    meta.insert("format", Value::Str("pt".into()));
    meta.insert("epoch", Value::Int(12));
    meta.insert("big", Value::Int(-(1i128 << 70)));
    meta.insert("u64", Value::Int(u64::MAX as i128));
    meta.insert("none", Value::Null);
    meta.insert("flag", Value::Bool(true));
    meta.insert(
        "list",
        Value::List((0..2500).map(|i| Value::Int(i * 1000)).collect()),
    );
    meta.insert("opt", Value::Map(inner));
    let m = model(
        meta.clone(),
        &[
            ("w", DType::BF16, vec![2, 3]),
            ("s", DType::C128, vec![]),
            ("e", DType::Bool, vec![0, 4]),
        ],
    );
    let bytes = write(&m, &WriteOptions::default()).unwrap();
    let back = tessera::open(&bytes[..], &ReadOptions::default()).unwrap();
    assert_eq!(back.metadata().len(), meta.len());
    for (k, v) in meta.iter() {
        assert_eq!(back.metadata().get(k), Some(v), "{k}");
    }
    for info in m.tensor_infos() {
        let b = back.tensor(&info.name).unwrap();
        assert_eq!(b.info.shape, info.shape);
        assert_eq!(b.info.dtype, info.dtype);
        assert_eq!(
            b.data().unwrap(),
            m.tensor(&info.name).unwrap().data().unwrap()
        );
    }
    assert!(back.warnings().is_empty(), "{:?}", back.warnings());
}

/// Metadata keys live apart from tensor names (issue 29): a key equal to a tensor's name
/// is written, and read back, beside the tensor.
#[test]
fn metadata_named_like_a_tensor_round_trips() {
    let mut meta = Map::new();
    meta.insert("w", Value::Str("about w".into()));
    meta.insert("layer.0", Value::Int(7));
    let m = model(
        meta.clone(),
        &[("w", DType::F32, vec![2]), ("layer.0", DType::I8, vec![3])],
    );
    let bytes = write(&m, &WriteOptions::default()).unwrap();
    let back = tessera::open(&bytes[..], &ReadOptions::default())
        .unwrap_or_else(|e| panic!("our .pt does not read back: {e}"));
    assert_eq!(back.metadata(), &meta);
    for info in m.tensor_infos() {
        let b = back.tensor(&info.name).unwrap();
        assert_eq!(
            b.data().unwrap(),
            m.tensor(&info.name).unwrap().data().unwrap()
        );
    }
}

#[test]
fn what_torch_cannot_store_is_refused_naming_the_tensor() {
    // torch has no f6; its f4 is float4_e2m1fn_x2, pairs along an even last dimension.
    for (dtype, shape) in [
        (DType::F6E2M3, vec![4]),
        (DType::F6E3M2, vec![4]),
        (DType::F4E2M1, vec![3]),
        (DType::F4E2M1, vec![]),
    ] {
        let m = model(Map::new(), &[("odd.one", dtype, shape.clone())]);
        let e = write(&m, &WriteOptions::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{dtype} {shape:?}: {e}");
        assert!(e.to_string().contains("\"odd.one\""), "{e}");
    }
}

/// The dtypes without a legacy storage class (u16/u32/u64, the float8s, f4 as
/// `float4_e2m1fn_x2`) are written as torch 2.x writes them, `_rebuild_tensor_v3` over
/// an `UntypedStorage` counted in bytes with the dtype as an argument; the others keep
/// `_rebuild_tensor_v2` and their storage class (older torch loads those). Each reads
/// back equal. Before, each of these dtypes was refused ("torch 1.13 has no storage").
/// (torch 2.15 loading them: tests/peers/test_pytorch.py.)
#[test]
fn torch_2_dtypes_are_written_with_rebuild_tensor_v3() {
    use std::io::Read;
    let tensors: Vec<(&str, DType, Vec<u64>)> = vec![
        ("u16", DType::U16, vec![2, 3]),
        ("u32", DType::U32, vec![3]),
        ("u64", DType::U64, vec![]),
        ("e4m3", DType::F8E4M3FN, vec![4]),
        ("e5m2", DType::F8E5M2, vec![0, 2]),
        ("e4m3fnuz", DType::F8E4M3FNUZ, vec![2]),
        ("e5m2fnuz", DType::F8E5M2FNUZ, vec![2]),
        ("e8m0", DType::F8E8M0, vec![3]),
        ("f4", DType::F4E2M1, vec![2, 4]),
        ("f32", DType::F32, vec![2]),
    ];
    let m = model(Map::new(), &tensors);
    let bytes = write(&m, &WriteOptions::default()).unwrap();
    let back = tessera::open(&bytes[..], &ReadOptions::default()).unwrap();
    for (name, dtype, shape) in &tensors {
        let v = back.tensor(name).unwrap();
        assert_eq!((v.info.dtype, &v.info.shape), (*dtype, shape), "{name}");
        assert_eq!(
            v.data().unwrap(),
            m.tensor(name).unwrap().data().unwrap(),
            "{name}"
        );
    }
    let mut z = zip::ZipArchive::new(Cursor::new(&bytes[..])).unwrap();
    let mut pkl = Vec::new();
    z.by_name("archive/data.pkl")
        .unwrap()
        .read_to_end(&mut pkl)
        .unwrap();
    let has = |s: &str| pkl.windows(s.len()).any(|w| w == s.as_bytes());
    for (global, want) in [
        ("torch._utils\n_rebuild_tensor_v3\n", true),
        ("torch._utils\n_rebuild_tensor_v2\n", true),
        ("torch.storage\nUntypedStorage\n", true),
        ("torch\nFloatStorage\n", true),
        ("torch\nuint16\n", true),
        ("torch\nfloat8_e8m0fnu\n", true),
        ("torch\nfloat4_e2m1fn_x2\n", true),
        ("torch\nfloat32\n", false),
    ] {
        assert_eq!(has(global), want, "{global:?}");
    }
    // An UntypedStorage counts bytes: f4 [2, 4] is torch's [2, 2], 4 bytes.
    let f4 = back
        .tensor_infos()
        .iter()
        .position(|i| i.name == "f4")
        .unwrap();
    assert_eq!(z.by_name(&format!("archive/data/{f4}")).unwrap().size(), 4);
}

#[test]
fn the_archive_option_names_the_folder() {
    let m = model(Map::new(), &[("w", DType::F32, vec![3])]);
    let mut opts = WriteOptions::default();
    opts.set("archive", OptionValue::Text("my_ckpt".into()))
        .unwrap();
    let bytes = write(&m, &opts).unwrap();
    assert_eq!(&bytes[30..30 + 16], b"my_ckpt/data.pkl");
    let back = tessera::open(&bytes[..], &ReadOptions::default()).unwrap();
    assert_eq!(back.tensor("w").unwrap().data().unwrap().len(), 12);
    for bad in ["", "a/b", "..", "x\ny"] {
        let mut opts = WriteOptions::default();
        opts.set("archive", OptionValue::Text(bad.into())).unwrap();
        let e = write(&m, &opts).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{bad:?}: {e}");
    }
    // The default is torch's name for an archive written to a buffer.
    let bytes = write(&m, &WriteOptions::default()).unwrap();
    assert_eq!(&bytes[30..30 + 16], b"archive/data.pkl");
}

/// The records torch 2.x's `torch.save` writes (less `.data/serialization_id`), in its
/// order, with torch's `.format_version` and `.storage_alignment` values.
#[test]
fn records_in_torch_2_order() {
    use std::io::Read;
    let m = model(
        Map::new(),
        &[("a", DType::F32, vec![3]), ("b", DType::F32, vec![2])],
    );
    let bytes = write(&m, &WriteOptions::default()).unwrap();
    let mut z = zip::ZipArchive::new(Cursor::new(&bytes[..])).unwrap();
    let names: Vec<String> = z.file_names().map(String::from).collect();
    let mut in_order: Vec<(usize, String)> = (0..z.len())
        .map(|i| {
            let f = z.by_index(i).unwrap();
            (f.header_start() as usize, f.name().to_string())
        })
        .collect();
    in_order.sort();
    let in_order: Vec<&str> = in_order.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(
        in_order,
        [
            "archive/data.pkl",
            "archive/.format_version",
            "archive/.storage_alignment",
            "archive/byteorder",
            "archive/data/0",
            "archive/data/1",
            "archive/version",
        ],
        "{names:?}"
    );
    for (name, want) in [
        ("archive/.format_version", "1"),
        ("archive/.storage_alignment", "64"),
        ("archive/byteorder", "little"),
    ] {
        let mut s = String::new();
        z.by_name(name).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, want, "{name}");
    }
}

/// `PytorchWriter`, fed one tensor at a time, writes the bytes `write_to` does, and
/// checks the order, each tensor's size and that every tensor came.
#[test]
fn the_streaming_writer_writes_what_write_to_does() {
    use tessera::formats::pytorch::PytorchWriter;
    let mut meta = Map::new();
    meta.insert("epoch", Value::Int(3));
    let m = model(
        meta,
        &[
            ("z.last", DType::F16, vec![4, 2]),
            ("a.first", DType::I64, vec![3]),
        ],
    );
    let want = write(&m, &WriteOptions::default()).unwrap();
    let mut w =
        PytorchWriter::new(Cursor::new(Vec::new()), m.tensor_infos(), &m.metadata, None).unwrap();
    assert_eq!(w.order().collect::<Vec<_>>(), ["z.last", "a.first"]);
    let e = w.write_tensor("a.first", &[0; 24]).unwrap_err();
    assert!(
        e.to_string().contains("where \"z.last\" was expected"),
        "{e}"
    );
    assert!(
        w.write_tensor("z.last", &[0; 15]).is_err(),
        "15 bytes for 4x2 f16"
    );
    for name in ["z.last", "a.first"] {
        w.write_tensor(name, m.tensor(name).unwrap().data().unwrap())
            .unwrap();
    }
    assert_eq!(w.finish().unwrap().into_inner(), want);

    let mut w = PytorchWriter::new(
        Cursor::new(Vec::new()),
        m.tensor_infos(),
        &m.metadata,
        Some("ckpt"),
    )
    .unwrap();
    w.write_tensor("z.last", &[0; 16]).unwrap();
    let e = w.finish().unwrap_err();
    assert!(e.to_string().contains("before tensor \"a.first\""), "{e}");
    let e = PytorchWriter::new(
        Cursor::new(Vec::new()),
        m.tensor_infos(),
        &m.metadata,
        Some("a/b"),
    )
    .err()
    .unwrap();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
}
