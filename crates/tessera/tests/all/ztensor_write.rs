//! The zTensor writer: round trips through our reader (every layout, every option),
//! determinism, the byte layout rules, refusals. Byte-compatibility with the original is
//! checked against the real `ztensor` package in tests/peers/test_ztensor.py.

use std::borrow::Cow;
use std::io::Cursor;

use tessera::convert::{Compression, Digest};
use tessera::formats::ztensor::{self, ZtensorFile};
use tessera::{
    Container, DType, ErrorKind, Format, Layout, Model, Part, ReadOptions, TensorInfo,
    TensorSource, TensorView, Value, WriteOptions,
};

fn bytes<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

fn view(
    name: &str,
    dtype: DType,
    shape: Vec<u64>,
    layout: Layout,
    parts: &[(&str, Vec<u8>)],
) -> TensorView<'static> {
    let mut info = TensorInfo::dense(name, dtype, shape);
    info.layout = layout;
    TensorView {
        info,
        parts: parts
            .iter()
            .map(|(r, b)| Part {
                role: r.to_string(),
                bytes: Cow::Owned(b.clone()),
            })
            .collect(),
    }
}

fn model() -> Model {
    model_with(false)
}

fn model_with(sorted_parts: bool) -> Model {
    let mut m = Model::new();
    m.metadata.insert("license", "Apache-2.0");
    m.metadata.insert(
        "config",
        Value::Map([("a".to_string(), Value::Int(1))].into_iter().collect()),
    );
    m.metadata.insert("epochs", Value::Int(3));
    m.push(view(
        "w",
        DType::F32,
        vec![2, 3],
        Layout::Dense,
        &[("data", bytes(&[0f32, 1., 2., 3., 4., 5.], f32::to_le_bytes))],
    ))
    .unwrap();
    m.push(view(
        "scalar",
        DType::F64,
        vec![],
        Layout::Dense,
        &[("data", 2.5f64.to_le_bytes().to_vec())],
    ))
    .unwrap();
    m.push(view(
        "e",
        DType::BF16,
        vec![0],
        Layout::Dense,
        &[("data", vec![])],
    ))
    .unwrap();
    m.push(view(
        "mask",
        DType::Bool,
        vec![3],
        Layout::Dense,
        &[("data", vec![1, 0, 1])],
    ))
    .unwrap();
    m.push(view(
        "csr",
        DType::I16,
        vec![2, 3],
        Layout::SparseCsr,
        &[
            ("values", bytes(&[1i16, 2, 3], i16::to_le_bytes)),
            ("indices", bytes(&[0u64, 2, 2], u64::to_le_bytes)),
            ("indptr", bytes(&[0u64, 2, 3], u64::to_le_bytes)),
        ],
    ))
    .unwrap();
    m.push(view(
        "coo",
        DType::U32,
        vec![2, 3],
        Layout::SparseCoo,
        &[
            ("values", bytes(&[5u32, 6], u32::to_le_bytes)),
            ("coords", bytes(&[0u64, 1, 2, 0], u64::to_le_bytes)),
        ],
    ))
    .unwrap();
    // GGUF quantized tensors travel as Other("ggml_q4_0"), dtype u8, one `data` part.
    let q4: Vec<u8> = (0..=255u8).cycle().take(18 * 4).collect();
    m.push(view(
        "blk.0.attn_q.weight",
        DType::U8,
        vec![4, 32],
        Layout::Other("ggml_q4_0".into()),
        &[("data", q4)],
    ))
    .unwrap();
    let q = view(
        "q",
        DType::U8,
        vec![4, 4],
        Layout::Other("quantized_4bit".into()),
        &[
            ("zero_point", vec![8, 8]),
            ("data", (0..8).collect()),
            ("scale", bytes(&[0.5f32, 0.25], f32::to_le_bytes)),
        ],
    );
    let mut q = q;
    if sorted_parts {
        q.parts.sort_by(|a, b| a.role.cmp(&b.role));
    }
    m.push(q).unwrap();
    m
}

fn write(src: &dyn TensorSource, opts: &WriteOptions) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    ztensor::write(src, &mut out, opts).unwrap();
    out.into_inner()
}

fn all_options() -> Vec<WriteOptions> {
    let mut v = Vec::new();
    for compression in [
        Compression::None,
        Compression::Zstd(3),
        Compression::Zstd(-1),
    ] {
        for digests in [vec![], vec![Digest::Crc32c], vec![Digest::Sha256]] {
            v.push(
                WriteOptions::default()
                    .compression(compression)
                    // No digest only when told: crc32c is the default.
                    .no_digest(digests.is_empty())
                    .digests(digests),
            );
        }
    }
    v
}

#[test]
fn round_trips_every_layout_with_every_option() {
    let m = model();
    for opts in all_options() {
        let data = write(&m, &opts);
        let f = ZtensorFile::parse(&data, &ReadOptions::default()).unwrap();
        assert!(f.warnings().is_empty());
        assert_eq!(f.generator(), Some(ztensor::GENERATOR));
        let names: Vec<&str> = f.tensor_infos().iter().map(|t| t.name.as_str()).collect();
        let want: Vec<&str> = m.tensor_infos().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, want, "tensors keep the source order in the file");
        for info in m.tensor_infos() {
            let a = m.tensor(&info.name).unwrap();
            let b = f.tensor(&info.name).unwrap();
            assert_eq!(
                (&b.info.dtype, &b.info.shape, &b.info.layout),
                (&a.info.dtype, &a.info.shape, &a.info.layout)
            );
            for p in &a.parts {
                assert_eq!(
                    b.part(&p.role),
                    Some(p.bytes.as_ref()),
                    "{} {}",
                    info.name,
                    p.role
                );
            }
            assert_eq!(b.parts.len(), a.parts.len());
            if opts.compression == Compression::None && info.layout == Layout::Dense {
                assert!(b.is_borrowed(), "raw dense reads are zero-copy");
            }
        }
        // Metadata: strings as they are, others as JSON text.
        let md = f.metadata();
        assert_eq!(
            md.keys().collect::<Vec<_>>(),
            ["config", "epochs", "license"]
        );
        assert_eq!(md.get("config"), Some(&Value::Str("{\"a\":1}".into())));
        assert_eq!(md.get("epochs"), Some(&Value::Str("3".into())));
        let r = f.verify(&Default::default());
        assert!(r.is_ok(), "{r:?}");
        let layer = match opts.digests.first() {
            Some(Digest::Crc32c) => "crc32c",
            Some(Digest::Sha256) => "sha256",
            Some(other) => panic!("no case for {other:?}"),
            None => "digest",
        };
        // One digest check per component (dense 1, csr 3, coo 2, q 3), or one "not checked" per tensor.
        let n = r.checks.iter().filter(|c| c.layer == layer).count();
        assert_eq!(
            n,
            if opts.digests.is_empty() {
                8
            } else {
                4 + 3 + 2 + 1 + 3
            }
        );
    }
}

#[test]
fn writing_twice_gives_identical_bytes() {
    let m = model();
    for opts in all_options() {
        assert_eq!(write(&m, &opts), write(&m, &opts));
    }
    // Rewriting our own output (a same-format convert) is a fixed point: the reader
    // gives tensors in file order and other layouts' parts sorted by name.
    let m = model_with(true);
    for opts in all_options() {
        let a = write(&m, &opts);
        let f = ZtensorFile::parse(&a, &ReadOptions::default()).unwrap();
        assert_eq!(write(&f, &opts), a);
    }
}

#[test]
fn layout_rules_magic_padding_order_manifest() {
    let m = model();
    let data = write(&m, &WriteOptions::default());
    assert_eq!(&data[..8], b"ZTEN1000");
    let f = ZtensorFile::parse(&data, &ReadOptions::default()).unwrap();
    let mut spans = Vec::new();
    for info in f.tensor_infos() {
        for c in f.components(&info.name).unwrap() {
            assert_eq!(c.offset % 64, 0);
            spans.push((
                c.offset,
                c.offset + c.length,
                info.name.clone(),
                c.role.clone(),
            ));
        }
    }
    // Components in write order: layout order (csr values, indices, indptr), then the
    // Other layout's parts in the order given.
    spans.sort();
    let order: Vec<String> = spans.iter().map(|s| format!("{}/{}", s.2, s.3)).collect();
    let csr = order.iter().position(|s| s == "csr/values").unwrap();
    assert_eq!(
        &order[csr..csr + 3],
        ["csr/values", "csr/indices", "csr/indptr"]
    );
    let q = order.iter().position(|s| s == "q/zero_point").unwrap();
    assert_eq!(&order[q..q + 3], ["q/zero_point", "q/data", "q/scale"]);
    // Everything between components is zero padding of less than 64 bytes.
    let mut at = 8u64;
    for (start, end, ..) in &spans {
        assert!(*start >= at && start - at < 64);
        assert!(data[at as usize..*start as usize].iter().all(|&b| b == 0));
        at = at.max(*end);
    }
    // The manifest starts right after the last component, then its u64 LE size.
    let n = u64::from_le_bytes(data[data.len() - 8..].try_into().unwrap());
    assert_eq!(at + n + 8, data.len() as u64);
    // Definite-length map of 4 text keys, version first.
    assert_eq!(&data[at as usize..at as usize + 10], b"\xa4\x67version\x63");
}

#[test]
fn digest_strings_have_the_original_form() {
    let m = model();
    let data = write(&m, &WriteOptions::default().digests(vec![Digest::Crc32c]));
    let f = ZtensorFile::parse(&data, &ReadOptions::default()).unwrap();
    for info in f.tensor_infos() {
        for c in f.components(&info.name).unwrap() {
            let d = c.digest.as_deref().unwrap();
            let hex = d.strip_prefix("crc32c:0x").unwrap();
            assert_eq!(hex.len(), 8);
            assert!(
                hex.chars()
                    .all(|ch| ch.is_ascii_digit() || ch.is_ascii_uppercase()),
                "{d}"
            );
            let stored = &data[c.offset as usize..(c.offset + c.length) as usize];
            assert_eq!(
                u32::from_str_radix(hex, 16).unwrap(),
                tessera::util::crc32c(stored)
            );
        }
    }
    let data = write(
        &m,
        &WriteOptions::default()
            .digests(vec![Digest::Sha256])
            .compression(Compression::Zstd(3)),
    );
    let f = ZtensorFile::parse(&data, &ReadOptions::default()).unwrap();
    let c = &f.components("w").unwrap()[0];
    let stored = &data[c.offset as usize..(c.offset + c.length) as usize];
    assert_eq!(
        c.digest.as_deref().unwrap(),
        format!(
            "sha256:{}",
            tessera::util::hex(&tessera::util::sha256(stored))
        )
    );
    // The zstd frame carries no content size (frame header descriptor bit 7-6 = 0 and
    // no single-segment flag), as the original's streaming encoder writes.
    assert_eq!(&stored[..4], &[0x28, 0xb5, 0x2f, 0xfd]);
    assert_eq!(
        stored[4] & 0xe0,
        0,
        "frame header descriptor {:#x}",
        stored[4]
    );
}

#[test]
fn refusals_are_clear() {
    let mut m = Model::new();
    m.push(view(
        "c",
        DType::C64,
        vec![1],
        Layout::Dense,
        &[("data", vec![0; 8])],
    ))
    .unwrap();
    let mut out = Cursor::new(Vec::new());
    let e = ztensor::write(&m, &mut out, &WriteOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(e.to_string().contains("tensor \"c\""), "{e}");

    let e = ztensor::write(
        &model(),
        &mut out,
        &WriteOptions::default().digests(vec![Digest::Crc32c, Digest::Sha256]),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    let e = ztensor::write(
        &model(),
        &mut out,
        &WriteOptions::default().compression(Compression::Zstd(1000)),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);

    // A failed write through write_file leaves no file behind.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.zt");
    assert!(
        tessera::convert::write_file(Format::Ztensor, &m, &p, &WriteOptions::default()).is_err()
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn per_tensor_attributes_are_dropped_with_a_note() {
    let mut m = Model::new();
    let mut v = view(
        "w",
        DType::F32,
        vec![1],
        Layout::Dense,
        &[("data", vec![0; 4])],
    );
    v.info.attrs.insert("requires_grad", true);
    m.push(v).unwrap();
    let mut out = Cursor::new(Vec::new());
    let report = ztensor::write(&m, &mut out, &WriteOptions::default()).unwrap();
    assert_eq!(report.notes.len(), 1);
    assert!(
        report.notes[0].contains("requires_grad"),
        "{:?}",
        report.notes
    );
}

#[test]
fn convert_file_is_atomic_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.zt");
    let m = model();
    let opts = WriteOptions::default()
        .compression(Compression::Zstd(3))
        .digests(vec![Digest::Sha256]);
    tessera::convert::convert_file(&m, Format::Ztensor, &p, Default::default(), &opts).unwrap();
    let data = tessera::FileData::open(&p).unwrap();
    let f = tessera::open(&data, &ReadOptions::default()).unwrap();
    assert_eq!(f.format(), Format::Ztensor);
    assert_eq!(f.tensor_infos().len(), 8);
    assert!(f.verify(&Default::default()).is_ok());
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    fn dtype() -> impl Strategy<Value = DType> {
        proptest::sample::select(ztensor::capabilities().dtypes.to_vec())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Any dense tensors, any options: write, read back, same bytes; write again, same file.
        #[test]
        fn dense_round_trip(
            tensors in proptest::collection::vec(
                (dtype(), proptest::collection::vec(0u64..4, 0..4), any::<u64>()),
                0..6,
            ),
            zstd in any::<bool>(),
            digest in 0u8..3,
        ) {
            let mut m = Model::new();
            for (i, (d, shape, seed)) in tensors.iter().enumerate() {
                let n = tessera::tensor::dense_nbytes(*d, shape).unwrap() as usize;
                let mut x = *seed | 1;
                let data: Vec<u8> = (0..n)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        if *d == DType::Bool { (x & 1) as u8 } else { x as u8 }
                    })
                    .collect();
                m.push(TensorView::dense(TensorInfo::dense(format!("t{i}"), *d, shape.clone()), Cow::Owned(data)).unwrap()).unwrap();
            }
            let opts = WriteOptions::default()
                .compression(if zstd { Compression::Zstd(3) } else { Compression::None })
                .no_digest(digest == 0)
                .digests(match digest { 0 => vec![], 1 => vec![Digest::Crc32c], _ => vec![Digest::Sha256] });
            let a = write(&m, &opts);
            let f = ZtensorFile::parse(&a, &ReadOptions::default()).unwrap();
            prop_assert_eq!(f.tensor_infos().len(), tensors.len());
            for info in m.tensor_infos() {
                let want = m.tensor(&info.name).unwrap();
                let got = f.tensor(&info.name).unwrap();
                prop_assert_eq!(&got.info.shape, &want.info.shape);
                prop_assert_eq!(got.info.dtype, want.info.dtype);
                prop_assert_eq!(got.data().unwrap(), want.data().unwrap());
            }
            prop_assert!(f.verify(&Default::default()).is_ok());
            prop_assert_eq!(write(&f, &opts), a);
        }
    }
}
