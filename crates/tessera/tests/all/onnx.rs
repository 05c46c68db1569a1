//! ONNX: the header as metadata, external data (confined to the model's directory, its
//! checksum checked), what opening reads, and conversions out of ONNX into every
//! writable format. The vectors (tests/data/onnx/, written by the onnx package with
//! gen.py) are also run by `vectors.rs` against expected.json.

use std::borrow::Cow;
use std::io::Cursor;
use std::path::PathBuf;

use tessera::convert::{capabilities, prepare, write_to};
use tessera::source::CountingSource;
use tessera::{
    open_path, ConvertOptions, ErrorKind, FileData, Format, Model, ReadOptions, TensorSource,
    VerifyOptions, WriteOptions,
};

fn data(name: &str) -> PathBuf {
    crate::common::vectors::data_root().join("onnx").join(name)
}

fn meta_str(src: &dyn TensorSource, key: &str) -> String {
    match src.metadata().get(key) {
        Some(tessera::metadata::Value::Str(s)) => s.clone(),
        other => panic!("{key}: {other:?}"),
    }
}

fn json(src: &dyn TensorSource, key: &str) -> serde_json::Value {
    serde_json::from_str(&meta_str(src, key)).unwrap()
}

/// What gen.py wrote into valid-raw.onnx's header, as tessera lists it.
#[test]
fn the_header_is_metadata() {
    let f = open_path(&data("valid-raw.onnx"), &ReadOptions::default()).unwrap();
    let c = f.container();
    assert_eq!(c.format(), Format::Onnx);
    assert_eq!(c.version(), "IR 8");
    let m = c.metadata();
    assert_eq!(m.get("onnx.ir_version").and_then(|v| v.as_int()), Some(8));
    assert_eq!(meta_str(c, "onnx.producer_name"), "tessera-gen");
    assert_eq!(meta_str(c, "onnx.producer_version"), "1.0");
    assert_eq!(meta_str(c, "onnx.doc_string"), "raw data of every type");
    assert_eq!(meta_str(c, "onnx.graph.name"), "raw graph");
    assert_eq!(json(c, "onnx.opset_import"), serde_json::json!({"": 17}));
    assert_eq!(
        json(c, "onnx.graph.inputs"),
        serde_json::json!([
            {"name": "x", "kind": "tensor", "type": "FLOAT", "shape": ["N", 4]},
            {"name": "ids", "kind": "tensor", "type": "INT64", "shape": [1, null]},
        ])
    );
    assert_eq!(
        json(c, "onnx.graph.outputs"),
        serde_json::json!([{"name": "y", "kind": "tensor", "type": "FLOAT", "shape": ["N", 4]}])
    );
    // metadata_props, kept as they are.
    assert_eq!(meta_str(c, "license"), "MIT");
    assert_eq!(meta_str(c, "author"), "gen.py");
    // Initializers in file order, the scalar and the empty one too.
    let names: Vec<&str> = c.tensor_infos().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names.first(), Some(&"w.f32"));
    assert_eq!(names.last(), Some(&"scalar"));
    assert_eq!(names.len(), 23);
    let s = c.tensor("scalar").unwrap();
    assert!(s.info.shape.is_empty());
    assert_eq!(s.data().unwrap(), 3.5f32.to_le_bytes());
}

#[test]
fn string_initializers_are_listed_in_metadata_with_a_warning() {
    let f = open_path(&data("valid-strings.onnx"), &ReadOptions::default()).unwrap();
    let c = f.container();
    let names: Vec<&str> = c.tensor_infos().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["w"]);
    assert_eq!(
        json(c, "onnx.string_initializers"),
        serde_json::json!({"vocab": {"dims": [2], "values": ["hello", "\u{e9}t\u{e9}"]}})
    );
    assert!(
        c.warnings().iter().any(|w| w.contains("vocab")),
        "{:?}",
        c.warnings()
    );
}

/// raw_data is read in place: over a map, the view borrows the file.
#[test]
fn raw_data_is_zero_copy() {
    let map = FileData::open(&data("valid-raw.onnx")).unwrap();
    let file = tessera::open(&map, &ReadOptions::default()).unwrap();
    let v = file.tensor("w.f32").unwrap();
    assert!(v.is_borrowed());
    let typed = FileData::open(&data("valid-typed.onnx")).unwrap();
    let file = tessera::open(&typed, &ReadOptions::default()).unwrap();
    assert_eq!(
        file.tensor("f").unwrap().data().unwrap(),
        [1.0f32, -2.0, 0.5, 3.25]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<u8>>()
    );
    assert_eq!(
        file.tensor("fp4").unwrap().data().unwrap(),
        [0xc2, 0x01],
        "1.0, -2.0 in the first byte (low nibble first), 0.5 in the second"
    );
}

/// A protobuf varint.
fn varint(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// A length-delimited field.
fn field(number: u64, body: &[u8], out: &mut Vec<u8>) {
    varint(number << 3 | 2, out);
    varint(body.len() as u64, out);
    out.extend_from_slice(body);
}

/// A model of sixteen 256 KiB u8 initializers in raw_data (4 MiB), written field by
/// field as onnx serializes them (dims, data_type, name, raw_data).
fn big_model() -> Vec<u8> {
    let mut graph = Vec::new();
    for t in 0..16u64 {
        let mut tensor = Vec::new();
        tensor.extend([0x08]);
        varint(256 << 10, &mut tensor);
        tensor.extend([0x10, 2]);
        field(8, format!("layer{t}").as_bytes(), &mut tensor);
        field(9, &vec![t as u8; 256 << 10], &mut tensor);
        field(5, &tensor, &mut graph);
    }
    let mut model = vec![0x08, 0x08];
    field(7, &graph, &mut model);
    field(8, &[0x10, 17], &mut model);
    model
}

#[test]
fn opening_reads_the_fields_not_the_data() {
    let bytes = big_model();
    let src = CountingSource::new(bytes.clone());
    let file = tessera::open(&src, &ReadOptions::default()).unwrap();
    let at_open = src.bytes();
    assert_eq!(file.tensor_infos().len(), 16);
    eprintln!("opening read {at_open} of {} bytes", bytes.len());
    // A 4 KiB window where the model starts and where the graph goes on after each
    // initializer (a message starting inside its parent's window reads no other).
    assert!(
        at_open <= 18 * 4096,
        "opening read {at_open} of {} bytes",
        bytes.len()
    );
    src.reset();
    let v = file.tensor("layer3").unwrap();
    assert!(v.data().unwrap().iter().all(|&b| b == 3));
    assert!(src.bytes() <= (256 << 10) + 4096, "{}", src.bytes());
}

#[test]
fn external_data_is_read_beside_the_model() {
    let f = open_path(&data("valid-external.onnx"), &ReadOptions::default()).unwrap();
    let c = f.container();
    let a = c.tensor("ext.a").unwrap();
    assert_eq!(a.info.shape, [64, 32]);
    assert_eq!(a.info.storage.encoding, "external");
    assert!(a.is_borrowed(), "mapped, not copied");
    // The same tensors as in the file with the checksum, which verifies.
    let g = open_path(
        &data("valid-external-checksum.onnx"),
        &ReadOptions::default(),
    )
    .unwrap();
    assert_eq!(
        g.container().tensor("ext.a").unwrap().data().unwrap(),
        a.data().unwrap()
    );
    let report = g.container().verify(&VerifyOptions::default());
    assert!(report.is_ok(), "{report:?}");
    assert!(
        report.checks.iter().any(|k| k.layer == "sha1"),
        "{report:?}"
    );
}

/// Opened from bytes (no path to look beside), a model with external data is refused
/// at open naming the location.
#[test]
fn external_data_needs_the_models_path() {
    let bytes = std::fs::read(data("valid-external.onnx")).unwrap();
    let e = tessera::open(&bytes, &ReadOptions::default())
        .err()
        .expect("refused");
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("valid-external.onnx.data"), "{e}");
}

/// A stored checksum that does not match: the tensor is refused (Integrity), verify
/// reports it, and `--no-verify` reads it.
#[test]
fn a_wrong_checksum_refuses_the_read() {
    let path = data("integrity-external-checksum.onnx");
    let f = open_path(&path, &ReadOptions::default()).unwrap();
    let e = f.container().tensor("ext.a").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    assert!(e.to_string().contains("SHA-1"), "{e}");
    // Tensors inline or in the file without a checksum still read.
    f.container().tensor("inline.small").unwrap();
    let report = f.container().verify(&VerifyOptions::default());
    assert!(!report.is_ok());
    let g = open_path(&path, &ReadOptions::default().verify(false)).unwrap();
    g.container().tensor("ext.a").unwrap();
}

/// A link named as the data file but leading out of the model's directory is refused,
/// as are absolute paths and `..` (the vectors malformed-external-*).
#[test]
fn external_data_never_leaves_the_models_directory() {
    let outside = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        data("valid-external.onnx.data"),
        outside.path().join("secret.data"),
    )
    .unwrap();
    std::fs::copy(
        data("valid-external.onnx"),
        dir.path().join("valid-external.onnx"),
    )
    .unwrap();
    // Inside the directory, it reads.
    std::fs::copy(
        data("valid-external.onnx.data"),
        dir.path().join("valid-external.onnx.data"),
    )
    .unwrap();
    let f = open_path(
        &dir.path().join("valid-external.onnx"),
        &ReadOptions::default(),
    )
    .unwrap();
    f.container().tensor("ext.a").unwrap();
    drop(f);
    std::fs::remove_file(dir.path().join("valid-external.onnx.data")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.data"),
        dir.path().join("valid-external.onnx.data"),
    )
    .unwrap();
    let e = open_path(
        &dir.path().join("valid-external.onnx"),
        &ReadOptions::default(),
    )
    .err()
    .expect("refused");
    assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
    assert!(
        e.to_string().contains("inside the model's directory"),
        "{e}"
    );
    for v in [
        "malformed-external-dotdot.onnx",
        "malformed-external-absolute.onnx",
    ] {
        let e = open_path(&data(v), &ReadOptions::default())
            .err()
            .expect("refused");
        assert!(
            e.to_string().contains("inside the model's directory"),
            "{v}: {e}"
        );
    }
}

#[test]
fn detected_by_content_and_never_written() {
    let head = std::fs::read(data("valid-typed.onnx")).unwrap();
    assert_eq!(Format::detect(&head), Some(Format::Onnx));
    assert_eq!(Format::detect(&big_model()), Some(Format::Onnx));
    assert_eq!(Format::detect(b"\x08\x08\x3a"), Some(Format::Onnx));
    assert_eq!(Format::detect(b"\x08\x00\x3a"), None, "ir_version 0");
    assert_eq!(Format::detect(b"\x08\x08\x78\x01"), None, "field 15");
    assert_eq!(Format::from_name("onnx"), Some(Format::Onnx));
    let f = open_path(&data("valid-typed.onnx"), &ReadOptions::default()).unwrap();
    let e = prepare(f.container(), Format::Onnx, ConvertOptions::default())
        .err()
        .expect("refused");
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(e.to_string().contains("read-only"), "{e}");
}

/// The rows of the conversion matrix for ONNX, which is read only: every valid vector
/// converts into every writable format that holds a model, losslessly (every tensor's
/// dtype, shape and bytes read back equal; the header kept where the target carries
/// metadata) or refused with the options that would allow it, and then converts with
/// them.
#[test]
fn every_vector_converts_to_every_writable_format() {
    let mut done = Vec::new();
    for v in [
        "valid-raw.onnx",
        "valid-typed.onnx",
        "valid-external.onnx",
        "valid-strings.onnx",
    ] {
        let f = open_path(&data(v), &ReadOptions::default()).unwrap();
        let src = f.container();
        let want = Model::from_source(src).unwrap();
        for target in Format::ALL {
            if !target.can_write() || target.identity().single_tensor {
                continue;
            }
            let hinted = ConvertOptions::default().cast(true).drop_metadata(true);
            let mut written = None;
            for (opts, lossless) in [(ConvertOptions::default(), true), (hinted, false)] {
                let attempt = prepare(src, target, opts).and_then(|p| {
                    let mut out = Cursor::new(Vec::new());
                    write_to(target, &p, &mut out, &WriteOptions::default())?;
                    Ok(out.into_inner())
                });
                match attempt {
                    Ok(b) => {
                        written = Some((b, lossless));
                        break;
                    }
                    // Refused (when planned, or by the writer) with the options that
                    // would allow it: tried again with them.
                    Err(e) if lossless => assert!(
                        !e.hints().is_empty(),
                        "{v} -> {target}: refused without a hint: {e}"
                    ),
                    // With them, only what no option allows, each tensor named: a
                    // complex tensor into a format with no dtype to cast it to, a value
                    // out of the range of the dtype a cast chose (u64 2^63 into i64).
                    // Known, left to the PyTorch writer (reported): an odd-length f4 is
                    // refused when written, naming `cast`, and `cast` keeps f4 (the
                    // target's capabilities hold it), so the hint cannot lift it.
                    Err(e)
                        if target == Format::Pytorch
                            && e.to_string().contains("which must be even") =>
                    {
                        done.push(format!("{v} -> {target}: KNOWN: {e}"));
                    }
                    Err(e) => {
                        let named = e
                            .refusals()
                            .iter()
                            .all(|r| r.tensor.is_some() && r.hint.is_none());
                        assert!(
                            named
                                && (!e.refusals().is_empty()
                                    || e.to_string().contains("cast refused")),
                            "{v} -> {target} with the hints: {e}"
                        );
                        done.push(format!("{v} -> {target}: refused: {e}"));
                    }
                }
            }
            let Some((bytes, lossless)) = written else {
                continue;
            };
            let back = tessera::open(&bytes, &ReadOptions::default()).unwrap();
            let got = Model::from_source(back.as_ref()).unwrap();
            let caps = capabilities(target).unwrap();
            for t in want.tensor_infos() {
                let kept = caps.dtypes.contains(&t.dtype);
                assert!(kept || !lossless, "{v} -> {target}: {} {}", t.name, t.dtype);
                let g = got
                    .tensor(&t.name)
                    .unwrap_or_else(|e| panic!("{v} -> {target}: {e}"));
                assert_eq!(g.info.shape, t.shape, "{v} -> {target}: {}", t.name);
                if kept {
                    assert_eq!(g.info.dtype, t.dtype, "{v} -> {target}: {}", t.name);
                    let w = want.tensor(&t.name).unwrap();
                    assert_eq!(
                        Cow::from(g.data().unwrap()),
                        Cow::from(w.data().unwrap()),
                        "{v} -> {target}: {}",
                        t.name
                    );
                }
            }
            if lossless && caps.metadata != tessera::convert::MetadataSupport::None {
                assert!(
                    got.metadata().contains_key("onnx.opset_import"),
                    "{v} -> {target}: {:?}",
                    got.metadata()
                );
            }
            done.push(format!(
                "{v} -> {target}{}",
                if lossless { "" } else { " (with hints)" }
            ));
        }
    }
    eprintln!("{}", done.join("\n"));
    assert!(done.len() >= 4 * 8, "{done:?}");
}

/// Every byte of the small valid vectors replaced (by 0x00, 0x80 and its complement)
/// and every prefix: opened, read and verified as the fuzz target does (in memory and
/// over ranges), never a panic or an allocation the file did not earn.
#[test]
fn every_byte_changed_and_every_prefix_fails_cleanly() {
    let mut n = 0;
    for v in ["valid-raw.onnx", "valid-typed.onnx", "valid-strings.onnx"] {
        let good = std::fs::read(data(v)).unwrap();
        for i in 0..good.len() {
            for b in [0x00, 0x80, !good[i]] {
                let mut bad = good.clone();
                bad[i] = b;
                tessera::fuzzing::exercise(Format::Onnx, &bad);
                n += 1;
            }
            tessera::fuzzing::exercise(Format::Onnx, &good[..i]);
        }
    }
    assert!(n > 3000, "{n}");
}
