//! GGUF: the reader against vectors written by the reference peer (gguf-py, see
//! `tests/data/gguf/gen.py` and its `manifest.json`), the writer against the same files
//! (byte-identical rewrites), round trips, determinism and every prefix.

use std::borrow::Cow;
use std::io::Cursor;

use serde_json::Value as J;
use tessera::convert::{self, ConvertOptions, WriteOptions};
use tessera::formats::gguf::meta::TYPES_KEY;
use tessera::formats::gguf::GgufFile;
use tessera::{
    Container, DType, ErrorKind, Format, Layout, Limits, Map, Model, TensorInfo, TensorSource,
    TensorView, Value,
};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/gguf/");
const VECTORS: [&str; 6] = [
    "peer_all.gguf",
    "peer_be.gguf",
    "peer_align64.gguf",
    "peer_small.gguf",
    "peer_notensors.gguf",
    "peer_v2.gguf",
];

fn load(name: &str) -> Vec<u8> {
    std::fs::read(format!("{DIR}{name}")).unwrap()
}

fn manifest() -> J {
    serde_json::from_str(&std::fs::read_to_string(format!("{DIR}manifest.json")).unwrap()).unwrap()
}

fn sha256_hex(b: &[u8]) -> String {
    tessera::util::hex(&tessera::util::sha256(b))
}

fn write_gguf(src: &dyn TensorSource) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    convert::write_to(Format::Gguf, src, &mut out, &WriteOptions::default()).unwrap();
    out.into_inner()
}

#[test]
fn peer_vectors_read_with_the_manifest_values() {
    let m = manifest();
    for name in VECTORS {
        let data = load(name);
        let f = GgufFile::parse(&data, &Limits::default()).unwrap();
        let want = &m[name];
        assert_eq!(f.alignment(), want["alignment"].as_u64().unwrap(), "{name}");
        let meta = f.metadata();
        // The value types ride beside the metadata, never in it.
        let types = f.metadata_types().unwrap();
        assert!(meta.get(TYPES_KEY).is_none(), "{name}");
        let wmeta = want["metadata"].as_array().unwrap();
        // File order kept.
        let keys: Vec<&str> = meta.keys().collect();
        let wkeys: Vec<&str> = wmeta.iter().map(|e| e[0].as_str().unwrap()).collect();
        assert_eq!(&keys[..], &wkeys[..], "{name}");
        for e in wmeta {
            let key = e[0].as_str().unwrap();
            assert_eq!(
                types.get(key).unwrap().to_json(),
                e[1],
                "{name}: type of {key}"
            );
            assert_eq!(
                meta.get(key).unwrap().to_json(),
                e[2],
                "{name}: value of {key}"
            );
        }
        let wt = want["tensors"].as_array().unwrap();
        assert_eq!(f.tensor_infos().len(), wt.len());
        for (info, w) in f.tensor_infos().iter().zip(wt) {
            assert_eq!(info.name, w["name"].as_str().unwrap());
            let shape: Vec<u64> = w["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect();
            assert_eq!(info.shape, shape, "{}", info.name);
            assert_eq!(info.storage.offset, w["offset"].as_u64());
            assert_eq!(info.storage.stored_bytes, w["nbytes"].as_u64().unwrap());
            let ty = w["ggml_type"].as_str().unwrap();
            match DType::from_name(ty) {
                Some(d) => {
                    assert_eq!(info.layout, Layout::Dense, "{ty}");
                    assert_eq!(info.dtype, d);
                }
                None => {
                    assert_eq!(
                        info.layout,
                        Layout::Other(format!("ggml_{}", ty.to_lowercase()))
                    );
                    assert_eq!(info.dtype, DType::U8);
                    assert_eq!(
                        info.attrs.get("ggml_type"),
                        Some(&Value::Int(w["ggml_type_id"].as_i64().unwrap() as i128))
                    );
                }
            }
            let v = f.tensor(&info.name).unwrap();
            // Zero-copy unless a big-endian file's elements had to be swapped.
            assert_eq!(
                v.is_borrowed(),
                info.storage.encoding == "raw",
                "{}",
                info.name
            );
            if name != "peer_be.gguf" {
                assert!(v.is_borrowed(), "{} is zero-copy", info.name);
            }
            assert_eq!(
                sha256_hex(v.parts[0].bytes.as_ref()),
                w["sha256"].as_str().unwrap()
            );
        }
        if name == "peer_be.gguf" {
            assert!(f.warnings()[0].contains("big-endian"));
            assert_eq!(f.tensor_infos()[0].storage.encoding, "raw-big-endian");
        } else {
            assert!(f.warnings().is_empty(), "{name}: {:?}", f.warnings());
        }
    }
}

#[test]
fn rewriting_a_peer_file_is_byte_identical() {
    for name in VECTORS {
        let data = load(name);
        let f = GgufFile::parse(&data, &Limits::default()).unwrap();
        let out = write_gguf(&f);
        if name == "peer_be.gguf" {
            // We write little-endian: the same file gguf-py writes from the same inputs.
            assert!(out == load("peer_be_as_le.gguf"));
        } else if name == "peer_v2.gguf" {
            // We write v3; the layouts are the same.
            assert_eq!(&out[4..8], &3u32.to_le_bytes());
            assert_eq!(out[8..], data[8..]);
        } else {
            assert!(out == data, "{name}: rewrite differs");
        }
        // And through an owned model, and deterministic.
        let model = Model::from_source(&f).unwrap();
        assert_eq!(write_gguf(&model), out);
    }
}

/// What a string-only metadata format (zTensor, safetensors) makes of our metadata:
/// strings stay, everything else becomes its JSON text.
fn stringify(meta: &Map) -> Map {
    meta.iter()
        .map(|(k, v)| {
            let s = match v {
                Value::Str(s) => s.clone(),
                other => other.to_json().to_string(),
            };
            (k.to_string(), Value::Str(s))
        })
        .collect()
}

#[test]
fn types_survive_a_string_only_format() {
    let data = load("peer_all.gguf");
    let f = GgufFile::parse(&data, &Limits::default()).unwrap();
    let mut model = Model::from_source(&f).unwrap();
    model.metadata = stringify(&model.metadata);
    assert!(write_gguf(&model) == data);
}

#[test]
fn packed_tensors_convert_through_prepare_byte_exact() {
    // A model as zTensor/AERO would hand it back: packed tensors with their ggml type.
    let data = load("peer_all.gguf");
    let f = GgufFile::parse(&data, &Limits::default()).unwrap();
    let model = Model::from_source(&f).unwrap();
    let prepared = convert::prepare(&model, Format::Gguf, ConvertOptions::default()).unwrap();
    assert!(prepared.notes().is_empty());
    assert!(write_gguf(&prepared) == data);
}

#[test]
fn foreign_metadata_becomes_string_kvs_and_plain_types() {
    let mut m = Model::new();
    m.metadata.insert("general.architecture", "llama");
    m.metadata.insert("source", "ztensor");
    m.metadata.insert("n", 5i64);
    m.metadata.insert("big", Value::Int(1 << 40));
    m.metadata.insert("x", 0.1f64);
    m.metadata.insert("ok", true);
    m.metadata
        .insert("list", Value::List(vec![Value::Int(1), Value::Float(2.5)]));
    m.metadata.insert("empty", Value::List(vec![]));
    m.metadata.insert("blob", Value::Bytes(vec![1, 2]));
    let mut inner = Map::new();
    inner.insert("a", 1i64);
    m.metadata.insert("map", Value::Map(inner));
    m.metadata.insert("none", Value::Null);
    m.push(
        TensorView::dense(
            TensorInfo::dense("w", DType::F32, vec![2]),
            Cow::Owned(vec![0; 8]),
        )
        .unwrap(),
    )
    .unwrap();
    let mut out = Cursor::new(Vec::new());
    let rep = convert::write_to(Format::Gguf, &m, &mut out, &WriteOptions::default()).unwrap();
    assert_eq!(rep.notes.len(), 3, "{:?}", rep.notes); // mixed list, map, null as JSON
    let out = out.into_inner();
    // The GGUF type tag stored after a key (read straight from the bytes).
    let tag = |key: &str| {
        let mut pat = (key.len() as u64).to_le_bytes().to_vec();
        pat.extend_from_slice(key.as_bytes());
        let at = out.windows(pat.len()).position(|w| w == pat).unwrap() + pat.len();
        let t = u32::from_le_bytes(out[at..at + 4].try_into().unwrap());
        let item = u32::from_le_bytes(out[at + 4..at + 8].try_into().unwrap());
        (t, item)
    };
    assert_eq!(tag("source").0, 8); // string
    assert_eq!(
        (tag("n").0, tag("big").0, tag("x").0, tag("ok").0),
        (5, 11, 12, 7)
    );
    assert_eq!(tag("empty"), (9, 5)); // array of i32
    assert_eq!(tag("blob"), (9, 0)); // array of u8
    assert_eq!((tag("list").0, tag("map").0, tag("none").0), (8, 8, 8)); // JSON text
    assert!(out.windows(7).any(|w| w == br#"{"a":1}"#));
    assert_eq!(tag("tessera.json_keys"), (9, 8));
    // Read back: exactly the source metadata, with no bookkeeping key added (every type
    // is the one the writer infers), so A -> GGUF -> A keeps metadata as it was.
    let f = GgufFile::parse(&out, &Limits::default()).unwrap();
    assert_eq!(f.metadata(), &m.metadata);
    // A rewrite is byte-identical and has nothing to report.
    let mut again = Cursor::new(Vec::new());
    let rep = convert::write_to(Format::Gguf, &f, &mut again, &WriteOptions::default()).unwrap();
    assert!(rep.notes.is_empty(), "{:?}", rep.notes);
    assert!(again.into_inner() == out);
}

#[test]
fn writer_refuses_what_gguf_cannot_hold() {
    let packed = |layout: &str, attr: Option<Value>, dtype: DType, shape: Vec<u64>, n: usize| {
        let mut info = TensorInfo::dense("q", dtype, shape);
        info.layout = Layout::Other(layout.into());
        if let Some(a) = attr {
            info.attrs.insert("ggml_type", a);
        }
        let mut m = Model::new();
        m.push(TensorView {
            info,
            parts: vec![tessera::Part {
                role: "data".into(),
                bytes: Cow::Owned(vec![0; n]),
            }],
        })
        .unwrap();
        let mut out = Cursor::new(Vec::new());
        convert::write_to(Format::Gguf, &m, &mut out, &WriteOptions::default())
            .map(|_| out.into_inner())
    };
    // A zTensor layout GGUF has no type for.
    let e = packed("quantized_4bit", None, DType::U8, vec![32], 18).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(e.to_string().contains("\"q\""), "{e}");
    // ggml_type disagreeing with the layout.
    let e = packed("ggml_q4_0", Some(Value::Int(8)), DType::U8, vec![32], 18).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    // Wrong byte count, and a row that is not whole blocks.
    assert!(packed("ggml_q4_0", None, DType::U8, vec![32], 17).is_err());
    assert!(packed("ggml_q4_0", None, DType::U8, vec![33], 18).is_err());
    // Right: one Q4_0 block, with or without the attribute.
    let a = packed("ggml_q4_0", Some(Value::Int(2)), DType::U8, vec![1, 32], 18).unwrap();
    let b = packed("ggml_q4_0", None, DType::U8, vec![1, 32], 18).unwrap();
    assert_eq!(a, b);
    // Dense dtypes GGUF lacks: prepare asks for --cast.
    let mut m = Model::new();
    m.push(
        TensorView::dense(
            TensorInfo::dense("u", DType::U8, vec![2]),
            Cow::Owned(vec![1, 2]),
        )
        .unwrap(),
    )
    .unwrap();
    let e = convert::prepare(&m, Format::Gguf, ConvertOptions::default())
        .err()
        .unwrap();
    assert!(e.hints().contains(&tessera::Hint::Cast), "{e}");
    let p = convert::prepare(&m, Format::Gguf, ConvertOptions::default().cast(true)).unwrap();
    let out = write_gguf(&p);
    let f = GgufFile::parse(&out, &Limits::default()).unwrap();
    assert!(f.tensor_infos()[0].dtype != DType::U8);
}

#[test]
fn alignment_is_honoured_when_writing() {
    let data = load("peer_align64.gguf");
    let f = GgufFile::parse(&data, &Limits::default()).unwrap();
    let mut model = Model::from_source(&f).unwrap();
    model.metadata.insert("general.alignment", Value::Int(128));
    let out = write_gguf(&model);
    let g = GgufFile::parse(&out, &Limits::default()).unwrap();
    assert_eq!(g.alignment(), 128);
    for t in g.tensor_infos() {
        assert_eq!(t.storage.offset.unwrap() % 128, 0);
        assert_eq!(
            g.tensor(&t.name).unwrap().parts,
            f.tensor(&t.name).unwrap().parts
        );
    }
    model.metadata.insert("general.alignment", Value::Int(48));
    let mut out = Cursor::new(Vec::new());
    let e =
        convert::write_to(Format::Gguf, &model, &mut out, &WriteOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
}

#[test]
fn every_prefix_is_an_error_or_only_drops_final_padding() {
    for name in VECTORS {
        let data = load(name);
        let full = GgufFile::parse(&data, &Limits::default()).unwrap();
        let data_end = full
            .tensor_infos()
            .iter()
            .map(|t| t.storage.offset.unwrap() + t.storage.stored_bytes)
            .max();
        for len in 0..data.len() {
            match GgufFile::parse(&data[..len], &Limits::default()) {
                Err(_) => {}
                Ok(f) => {
                    // Only the zero padding after the last tensor (or, without tensors,
                    // after the header) may be missing.
                    let end = data_end.unwrap_or(full.data_offset() + 1 - full.alignment());
                    assert!(len as u64 >= end, "{name}: prefix {len} opened");
                    assert!(data_end.is_none() || !f.warnings().is_empty());
                    for t in full.tensor_infos() {
                        assert_eq!(
                            f.tensor(&t.name).unwrap().parts,
                            full.tensor(&t.name).unwrap().parts
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn non_utf8_strings_are_kept_as_bytes_and_round_trip() {
    // peer_small with the "a" of its string array replaced by 0xff.
    let mut data = load("peer_small.gguf");
    let pos = data
        .windows(9)
        .position(|w| w == b"\x01\0\0\0\0\0\0\0a")
        .unwrap()
        + 8;
    data[pos] = 0xff;
    let f = GgufFile::parse(&data, &Limits::default()).unwrap();
    assert!(!f.warnings().is_empty());
    let arr = f.metadata().get("test.arr").unwrap().as_list().unwrap();
    assert_eq!(arr[0], Value::Bytes(vec![0xff]));
    assert!(write_gguf(&f) == data);
}

#[test]
fn a_gguf_without_general_architecture_is_written_with_a_warning() {
    let mut m = Model::new();
    m.push(
        TensorView::dense(
            TensorInfo::dense("w", DType::F32, vec![2]),
            Cow::Owned(vec![0; 8]),
        )
        .unwrap(),
    )
    .unwrap();
    let mut out = Cursor::new(Vec::new());
    let rep = convert::write_to(Format::Gguf, &m, &mut out, &WriteOptions::default()).unwrap();
    assert!(
        rep.notes
            .iter()
            .any(|n| n.contains("general.architecture") && n.contains("llama.cpp")),
        "{:?}",
        rep.notes
    );
    m.metadata.insert("general.architecture", "gpt2");
    let mut out = Cursor::new(Vec::new());
    let rep = convert::write_to(Format::Gguf, &m, &mut out, &WriteOptions::default()).unwrap();
    assert!(rep.notes.is_empty(), "{:?}", rep.notes);
}
