//! Property tests: any model GGUF can hold (plain dtypes, packed ggml types, scalars,
//! zero-size tensors, metadata values) writes, reads back equal, writes again
//! byte-identical, and writing is deterministic.

use std::borrow::Cow;
use std::io::Cursor;

use proptest::prelude::*;
use tessera::convert::{self, WriteOptions};
use tessera::formats::gguf::{GgufFile, GgufWriter};
use tessera::quant::GGML_TYPES;
use tessera::{
    DType, Format, Layout, Limits, Model, Part, TensorInfo, TensorSource, TensorView, Value,
};

const PLAIN: [DType; 8] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::F64,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
];

#[derive(Debug, Clone)]
enum T {
    Dense(DType, Vec<u64>),
    /// Index into the packed types, rows, blocks per row.
    Packed(usize, u64, u64),
}

fn tensor_strategy() -> impl Strategy<Value = T> {
    prop_oneof![
        (0..PLAIN.len(), prop::collection::vec(0u64..5, 0..5))
            .prop_map(|(d, s)| T::Dense(PLAIN[d], s)),
        (0usize..64, 0u64..3, 1u64..3).prop_map(|(i, r, b)| T::Packed(i, r, b)),
    ]
}

fn value_strategy() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| Value::Int(i as i128)),
        any::<u64>().prop_map(|i| Value::Int(i as i128)),
        any::<f64>()
            .prop_filter("no NaN", |f| !f.is_nan())
            .prop_map(Value::Float),
        "[a-z ]{0,8}".prop_map(Value::Str),
        prop::collection::vec(any::<u8>(), 0..6).prop_map(Value::Bytes),
    ];
    // Values GGUF has no type for (maps, null, mixed lists) go as JSON text and come back.
    let json_leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| Value::Int(i as i128)),
        (-1e300f64..1e300).prop_map(Value::Float),
        "[a-z]{0,4}".prop_map(Value::Str),
    ];
    let json_value = prop_oneof![
        Just(Value::Null),
        prop::collection::vec(("[a-z]{1,4}", json_leaf.clone()), 0..4)
            .prop_map(|kv| Value::Map(kv.into_iter().collect())),
        (any::<i32>(), "[a-z]{0,3}")
            .prop_map(|(i, s)| Value::List(vec![Value::Int(i as i128), Value::Str(s)])),
    ];
    prop_oneof![
        leaf,
        json_value,
        prop::collection::vec(any::<i32>().prop_map(|i| Value::Int(i as i128)), 0..4)
            .prop_map(Value::List),
        prop::collection::vec("[a-z]{0,3}".prop_map(Value::Str), 1..4).prop_map(Value::List),
        prop::collection::vec(
            prop::collection::vec(any::<bool>().prop_map(Value::Bool), 0..3).prop_map(Value::List),
            1..3
        )
        .prop_map(Value::List),
    ]
}

fn build(tensors: &[T], meta: &[Value], seed: u8) -> Model {
    let packed: Vec<_> = GGML_TYPES.iter().filter(|t| t.dtype.is_none()).collect();
    let mut m = Model::new();
    for (i, v) in meta.iter().enumerate() {
        m.metadata.insert(format!("k.{i}"), v.clone());
    }
    for (i, t) in tensors.iter().enumerate() {
        let name = format!("t{i}");
        let (info, n) = match t {
            T::Dense(d, shape) => {
                let info = TensorInfo::dense(name, *d, shape.clone());
                let n = info.dense_nbytes().unwrap() as usize;
                (info, n)
            }
            T::Packed(k, rows, blocks) => {
                let ty = packed[k % packed.len()];
                let mut info =
                    TensorInfo::dense(name, DType::U8, vec![*rows, blocks * ty.block_size]);
                info.layout = Layout::Other(ty.layout_name());
                info.attrs.insert("ggml_type", Value::Int(ty.id as i128));
                (info, (rows * blocks * ty.type_size) as usize)
            }
        };
        let bytes: Vec<u8> = (0..n).map(|j| (j as u8).wrapping_mul(31) ^ seed).collect();
        m.push(TensorView {
            info,
            parts: vec![Part {
                role: "data".into(),
                bytes: Cow::Owned(bytes),
            }],
        })
        .unwrap();
    }
    m
}

fn write(src: &dyn TensorSource) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    convert::write_to(Format::Gguf, src, &mut out, &WriteOptions::default()).unwrap();
    out.into_inner()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn write_read_write(
        tensors in prop::collection::vec(tensor_strategy(), 0..6),
        meta in prop::collection::vec(value_strategy(), 0..6),
        seed in any::<u8>(),
    ) {
        let m = build(&tensors, &meta, seed);
        let a = write(&m);
        prop_assert_eq!(&write(&m), &a, "deterministic");
        let f = GgufFile::parse(&a, &Limits::default()).unwrap();
        prop_assert_eq!(f.tensor_infos().len(), m.tensor_infos().len());
        for info in m.tensor_infos() {
            let got = f.tensor(&info.name).unwrap();
            prop_assert_eq!(&got.info.shape, &info.shape);
            prop_assert_eq!(got.info.dtype, info.dtype);
            prop_assert_eq!(&got.info.layout, &info.layout);
            prop_assert_eq!(&got.info.attrs, &info.attrs);
            prop_assert!(got.is_borrowed());
            let want = m.tensor(&info.name).unwrap();
            prop_assert_eq!(&got.parts, &want.parts);
            prop_assert_eq!(got.info.storage.offset.unwrap() % 32, 0);
        }
        // Exactly the source metadata: no bookkeeping key, since every stored type is
        // the one the writer infers.
        prop_assert_eq!(f.metadata(), &m.metadata);
        // GGUF -> GGUF is byte-exact.
        prop_assert_eq!(&write(&f), &a);
        // The streaming writer, fed the tensors in its order, writes the same bytes; and
        // from the GGUF file with its value types given, the same bytes again.
        let stream = |src: &dyn TensorSource, types: Option<&tessera::Map>| -> Vec<u8> {
            let mut w = GgufWriter::new(Vec::new(), src.tensor_infos(), src.metadata(), types)
                .unwrap();
            let order: Vec<String> = w.order().map(str::to_string).collect();
            for name in &order {
                let v = src.tensor(name).unwrap();
                w.write_tensor(name, &v.parts[0].bytes).unwrap();
            }
            w.finish().unwrap()
        };
        prop_assert_eq!(&stream(&m, None), &a);
        prop_assert_eq!(&stream(&f, f.metadata_types()), &a);
    }
}

#[test]
fn the_streaming_writer_checks_order_sizes_and_completeness() {
    let infos = vec![
        TensorInfo::dense("b", DType::F32, vec![2]),
        TensorInfo::dense("a", DType::I8, vec![3]),
    ];
    let mut meta = tessera::Metadata::new();
    meta.insert("general.architecture", Value::Str("llama".into()));
    let mut w = GgufWriter::new(Vec::new(), &infos, &meta, None).unwrap();
    assert!(w.notes().is_empty(), "{:?}", w.notes());
    // The order given, not sorted.
    assert_eq!(w.order().collect::<Vec<_>>(), ["b", "a"]);
    let e = w.write_tensor("a", &[1, 2, 3]).unwrap_err();
    assert!(e.to_string().contains("where \"b\" was expected"), "{e}");
    assert!(w.write_tensor("b", &[0; 7]).is_err(), "7 bytes for 2 f32");
    w.write_tensor("b", &1.5f32.to_le_bytes().repeat(2))
        .unwrap();
    let e = w.finish().unwrap_err();
    assert!(e.to_string().contains("before tensor \"a\""), "{e}");

    // A complete file reads back, its second tensor at the 32-byte alignment.
    let mut w = GgufWriter::new(Vec::new(), &infos, &meta, None).unwrap();
    w.write_tensor("b", &1.5f32.to_le_bytes().repeat(2))
        .unwrap();
    w.write_tensor("a", &[1, 2, 3]).unwrap();
    assert!(w.write_tensor("c", &[]).is_err(), "after the last");
    let bytes = w.finish().unwrap();
    let f = GgufFile::parse(&bytes, &Limits::default()).unwrap();
    assert_eq!(f.tensor("a").unwrap().data().unwrap(), &[1, 2, 3]);
    assert_eq!(f.tensor("a").unwrap().info.storage.offset.unwrap() % 32, 0);
    assert_eq!(f.tensor("b").unwrap().to_vec::<f32>().unwrap(), [1.5, 1.5]);

    // No architecture key: a note, as `tessera convert` reports it.
    let w = GgufWriter::new(Vec::new(), &infos, &tessera::Metadata::new(), None).unwrap();
    assert!(
        w.notes()[0].contains("general.architecture"),
        "{:?}",
        w.notes()
    );
}
