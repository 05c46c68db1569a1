//! NumPy .npy/.npz: vectors written by numpy/ml_dtypes (tests/data/npy/gen.py) read with
//! the values numpy computed; our .npy writer reproduces np.save byte for byte; .npz
//! round-trips and is deterministic; prefixes, hostile headers and hostile zips are clear
//! errors; verify checks the zip CRC-32.

use std::borrow::Cow;
use std::io::Cursor;

use tessera::convert::{Compression, WriteOptions};
use tessera::formats::npy::{NpyFile, NpzFile, NPY_TENSOR_NAME};
use tessera::{DType, ErrorKind, Format, Model, ReadOptions, TensorInfo, TensorSource, TensorView};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/npy/");

fn load(name: &str) -> Vec<u8> {
    std::fs::read(format!("{DIR}{name}")).unwrap()
}

fn expected() -> serde_json::Map<String, serde_json::Value> {
    let s = std::fs::read_to_string(format!("{DIR}expected.json")).unwrap();
    serde_json::from_str::<serde_json::Value>(&s)
        .unwrap()
        .as_object()
        .unwrap()
        .clone()
}

fn open(data: &[u8]) -> tessera::Result<Box<dyn tessera::Container + '_>> {
    tessera::open(data, &ReadOptions::default())
}

fn write(format: Format, src: &dyn TensorSource, opts: &WriteOptions) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    tessera::convert::write_to(format, src, &mut out, opts).unwrap();
    out.into_inner()
}

fn check_against(file: &dyn TensorSource, want: &serde_json::Value, what: &str) {
    let want = want.as_object().unwrap();
    assert_eq!(file.tensor_infos().len(), want.len(), "{what}");
    for (name, t) in want {
        let v = file
            .tensor(name)
            .unwrap_or_else(|e| panic!("{what}: {name}: {e}"));
        assert_eq!(
            v.info.dtype.name(),
            t["dtype"].as_str().unwrap(),
            "{what}: {name}"
        );
        let shape: Vec<u64> = t["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        assert_eq!(v.info.shape, shape, "{what}: {name}");
        assert_eq!(
            tessera::util::hex(v.data().unwrap()),
            t["hex"].as_str().unwrap(),
            "{what}: {name}"
        );
    }
}

#[test]
fn numpy_vectors_read_with_the_values_numpy_computed() {
    for (file, want) in expected() {
        let data = load(&file);
        let f = open(&data).unwrap_or_else(|e| panic!("{file}: {e}"));
        check_against(f.as_ref(), &want, &file);
        let fmt = if file.ends_with(".npz") {
            Format::Npz
        } else {
            Format::Npy
        };
        assert_eq!(f.format(), fmt);
    }
}

#[test]
fn zero_copy_exactly_when_stored_canonically() {
    for (file, borrowed) in [
        ("f32_2x3.npy", true),
        ("bf16.npy", true),
        ("v3.npy", true),
        ("be_i32.npy", false),
        ("fortran_u16.npy", false),
        ("fortran_be_f4_3d.npy", false),
        ("be_f64_scalar.npy", false),
    ] {
        let data = load(file);
        let f = NpyFile::parse(&data, &ReadOptions::default()).unwrap();
        let v = f.tensor(NPY_TENSOR_NAME).unwrap();
        assert_eq!(v.is_borrowed(), borrowed, "{file}");
    }
    let data = load("savez.npz");
    let f = NpzFile::parse(&data, &ReadOptions::default()).unwrap();
    assert!(f.tensor("w").unwrap().is_borrowed());
    assert!(!f.tensor("be").unwrap().is_borrowed());
    let data = load("savez_compressed.npz");
    let f = NpzFile::parse(&data, &ReadOptions::default()).unwrap();
    assert!(!f.tensor("w").unwrap().is_borrowed());
}

#[test]
fn our_npy_writer_is_byte_identical_to_np_save() {
    // Every vector np.save wrote in C order, little-endian, with a dtype we write the
    // same way (not e5m2: ml_dtypes' '<f1' is refused by np.load, we write '<V1').
    let same = [
        "f32_2x3.npy",
        "f64_scalar.npy",
        "i16_empty.npy",
        "bool.npy",
        "u8.npy",
        "i8.npy",
        "u16.npy",
        "u32.npy",
        "u64.npy",
        "i64.npy",
        "f16.npy",
        "c8.npy",
        "c16.npy",
        "bf16.npy",
        "e4m3.npy",
        "big_shape.npy",
    ];
    for file in same {
        let data = load(file);
        let f = open(&data).unwrap();
        assert_eq!(
            write(Format::Npy, f.as_ref(), &Default::default()),
            data,
            "{file}"
        );
    }
    // Big-endian / Fortran arrays come out as what np.save writes for the C-order
    // little-endian copy; check it reads back to the same values.
    for file in ["be_i32.npy", "fortran_be_f4_3d.npy", "e5m2.npy", "v2.npy"] {
        let data = load(file);
        let f = open(&data).unwrap();
        let out = write(Format::Npy, f.as_ref(), &Default::default());
        let g = open(&out).unwrap();
        let (a, b) = (f.tensor("array").unwrap(), g.tensor("array").unwrap());
        assert_eq!(a.data().unwrap(), b.data().unwrap(), "{file}");
        assert!(b.is_borrowed());
    }
}

#[test]
fn npz_round_trips_stored_and_deflated_deterministically() {
    let exp = expected();
    let data = load("savez.npz");
    let f = open(&data).unwrap();
    for compression in [Compression::None, Compression::Zstd(3)] {
        let opts = WriteOptions::default().compression(compression);
        let a = write(Format::Npz, f.as_ref(), &opts);
        assert_eq!(
            a,
            write(Format::Npz, f.as_ref(), &opts),
            "not deterministic"
        );
        let g = open(&a).unwrap();
        check_against(g.as_ref(), &exp["savez.npz"], "rewritten");
        let enc = &g.tensor_infos()[0].storage.encoding;
        let want = if compression == Compression::None {
            "npz-stored"
        } else {
            "npz-deflate"
        };
        assert_eq!(enc, want);
        assert!(g.verify(&Default::default()).is_ok());
    }
}

#[test]
fn npy_writer_needs_one_dense_tensor() {
    let mut m = Model::new();
    let mut out = Cursor::new(Vec::new());
    let e = tessera::convert::write_to(Format::Npy, &m, &mut out, &Default::default()).unwrap_err();
    assert!(e.to_string().contains("exactly one"), "{e}");
    for n in ["a", "b"] {
        m.push(
            TensorView::dense(
                TensorInfo::dense(n, DType::U8, vec![1]),
                Cow::Owned(vec![1]),
            )
            .unwrap(),
        )
        .unwrap();
    }
    let e = tessera::convert::write_to(Format::Npy, &m, &mut out, &Default::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
}

#[test]
fn npz_writer_refuses_escaping_names() {
    for bad in ["../x", "/abs", "a//b", ""] {
        let mut m = Model::new();
        m.push(
            TensorView::dense(
                TensorInfo::dense(bad, DType::U8, vec![1]),
                Cow::Owned(vec![1]),
            )
            .unwrap(),
        )
        .unwrap();
        let mut out = Cursor::new(Vec::new());
        let e =
            tessera::convert::write_to(Format::Npz, &m, &mut out, &Default::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{bad:?}");
    }
}

#[test]
fn every_prefix_is_a_clear_error() {
    for file in expected().keys() {
        let data = load(file);
        for n in 0..data.len() {
            let r = if file.ends_with(".npz") {
                NpzFile::parse(&data[..n], &ReadOptions::default()).map(|_| ())
            } else {
                NpyFile::parse(&data[..n], &ReadOptions::default()).map(|_| ())
            };
            let e = r.expect_err(&format!("{file}: prefix {n} opened"));
            assert!(
                matches!(e.kind(), ErrorKind::Malformed | ErrorKind::LimitExceeded),
                "{file}[..{n}]: {e:?}"
            );
        }
    }
}

#[test]
fn flipped_bytes_never_panic() {
    for file in [
        "f32_2x3.npy",
        "fortran_be_f4_3d.npy",
        "savez_compressed.npz",
        "savez.npz",
    ] {
        let data = load(file);
        for i in 0..data.len() {
            let mut d = data.clone();
            d[i] ^= 0x41;
            if let Ok(f) = open(&d) {
                for t in f.tensor_infos() {
                    if let Ok(v) = f.tensor(&t.name) {
                        assert_eq!(v.nbytes(), t.dense_nbytes().unwrap());
                    }
                }
                let _ = f.verify(&Default::default());
            };
        }
    }
}

fn npy(header: &str, data: &[u8]) -> Vec<u8> {
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend_from_slice(&(header.len() as u16).to_le_bytes());
    v.extend_from_slice(header.as_bytes());
    v.extend_from_slice(data);
    v
}

#[test]
fn hostile_npy_headers() {
    use ErrorKind::*;
    let h = |d: &str, f: &str, s: &str| {
        format!("{{'descr': '{d}', 'fortran_order': {f}, 'shape': {s}, }}\n")
    };
    let cases: Vec<(Vec<u8>, ErrorKind, &str)> = vec![
        (
            b"\x93NUMPY\x04\x00\x10\x00".to_vec(),
            UnsupportedVersion,
            "version 4.0",
        ),
        (
            b"\x93NUMPY\x01\x00\xff\xff{".to_vec(),
            Malformed,
            "runs past the end",
        ),
        (
            b"\x93NUMPY\x02\x00\xff\xff\xff\xff{".to_vec(),
            LimitExceeded,
            "index size",
        ),
        (
            npy(&h("<f4", "False", "(2,)"), &[0; 4]),
            Malformed,
            "needs 8 data bytes",
        ),
        (
            npy(
                &h("<f4", "False", "(4294967296, 4294967296, 4294967296)"),
                &[],
            ),
            Malformed,
            "overflows",
        ),
        (
            npy(&h("<f4", "False", "(4294967296, 1024)"), &[]),
            LimitExceeded,
            "decoded size",
        ),
        (npy(&h("<U3", "False", "()"), &[0; 12]), Unsupported, "<U3"),
        (npy(&h("|O", "False", "()"), &[0; 8]), Unsupported, "|O"),
        (
            npy(&h("<f4", "false", "()"), &[0; 4]),
            Malformed,
            "True or False",
        ),
        (
            npy(&h("<f4", "False", "(-1,)"), &[]),
            Malformed,
            "non-negative",
        ),
        (
            npy(&h("<f4", "False", "(2)"), &[0; 8]),
            Malformed,
            "trailing comma",
        ),
        (
            npy("{'descr': '<f4', 'shape': ()}", &[0; 4]),
            Malformed,
            "needs the keys",
        ),
        (
            npy(
                "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}",
                &[0; 4],
            ),
            Malformed,
            "unexpected key",
        ),
        (
            npy(
                "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'shape': ()}",
                &[0; 4],
            ),
            Malformed,
            "duplicate key",
        ),
        (
            npy(
                "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}",
                &[0; 4],
            ),
            Unsupported,
            "structured",
        ),
        (
            npy(
                "{'descr': '<f4', 'fortran_order': False, 'shape': ()}; import os",
                &[0; 4],
            ),
            Malformed,
            "trailing characters",
        ),
        (
            npy(
                "{'descr': '<f\\x34', 'fortran_order': False, 'shape': ()}",
                &[0; 4],
            ),
            Malformed,
            "escapes",
        ),
    ];
    for (i, (data, kind, needle)) in cases.iter().enumerate() {
        let e = NpyFile::parse(data, &ReadOptions::default()).expect_err("opened");
        assert_eq!(e.kind(), *kind, "case {i}: {e}");
        assert!(e.to_string().contains(needle), "case {i}: {e}");
    }
    let shape = format!("({})", vec!["1"; 65].join(", "));
    let e = NpyFile::parse(
        &npy(&h("<f4", "False", &shape), &[0; 4]),
        &Default::default(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), LimitExceeded);
    // Fortran order, zero elements, huge other dimensions: an empty array.
    let d = npy(&h("<f4", "True", "(0, 1099511627776, 1099511627776)"), &[]);
    let f = NpyFile::parse(&d, &Default::default()).unwrap();
    assert_eq!(f.tensor("array").unwrap().nbytes(), 0);
    // A shape whose running product overflows before reaching the zero is refused.
    let d = npy(&h("<f4", "True", "(1099511627776, 1099511627776, 0)"), &[]);
    assert_eq!(
        NpyFile::parse(&d, &Default::default()).unwrap_err().kind(),
        Malformed
    );
    // Trailing bytes are ignored (as np.load does) with a warning.
    let d = npy(&h("|u1", "False", "(1,)"), &[7, 8]);
    let f = NpyFile::parse(&d, &Default::default()).unwrap();
    assert_eq!(f.tensor("array").unwrap().data().unwrap(), [7]);
    assert!(tessera::Container::warnings(&f)[0].contains("1 bytes after"));
}

#[test]
fn hostile_zips_give_clear_errors() {
    for (file, kind, needle) in [
        (
            "hostile_duplicate.npz",
            ErrorKind::Malformed,
            "repeats an entry",
        ),
        ("hostile_dotdot.npz", ErrorKind::Malformed, "escaping path"),
        (
            "hostile_absolute.npz",
            ErrorKind::Malformed,
            "escaping path",
        ),
        (
            "hostile_not_npy.npz",
            ErrorKind::Unsupported,
            "not a .npy member",
        ),
        ("hostile_bomb.npz", ErrorKind::Malformed, "truncated"),
        (
            "hostile_huge_size.npz",
            ErrorKind::Malformed,
            "declares 2147483648",
        ),
    ] {
        let data = load(file);
        let e = NpzFile::parse(&data, &ReadOptions::default()).expect_err(file);
        assert_eq!(e.kind(), kind, "{file}: {e}");
        assert!(e.to_string().contains(needle), "{file}: {e}");
    }
    // A declared size over the limit is refused before anything is inflated.
    let mut opts = ReadOptions::default();
    opts.limits.max_decoded_bytes = 100;
    let data = load("savez_compressed.npz");
    let e = NpzFile::parse(&data, &opts).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded);
}

#[test]
fn verify_checks_the_zip_crc() {
    let data = load("corrupt_crc.npz");
    let f = open(&data).unwrap();
    let r = f.verify(&Default::default());
    assert!(!r.is_ok());
    assert_eq!(r.failures().next().unwrap().subject, "tensor \"a\"");
    // Reading a deflated member checks the CRC too.
    let data = load("corrupt_crc_deflate.npz");
    let f = open(&data).unwrap();
    assert!(!f.verify(&Default::default()).is_ok());
    assert_eq!(f.tensor("a").unwrap_err().kind(), ErrorKind::Integrity);
    // .npy has no checksum: says so.
    let data = load("u8.npy");
    let r = open(&data).unwrap().verify(&Default::default());
    assert!(r.is_ok());
    assert!(r
        .checks
        .iter()
        .any(|c| c.status == tessera::Status::NotChecked));
}

#[test]
fn ambiguous_void_descrs_warn() {
    let data = load("e4m3.npy");
    let f = open(&data).unwrap();
    assert_eq!(f.tensor_infos()[0].dtype, DType::F8E4M3FN);
    assert!(f.warnings()[0].contains("<V1"));
    let data = load("e5m2.npy");
    let f = open(&data).unwrap();
    assert_eq!(f.tensor_infos()[0].dtype, DType::F8E5M2);
    assert!(f.warnings().is_empty());
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn dtype() -> impl Strategy<Value = DType> {
        prop::sample::select(vec![
            DType::Bool,
            DType::U8,
            DType::I16,
            DType::U32,
            DType::I64,
            DType::F16,
            DType::BF16,
            DType::F32,
            DType::F64,
            DType::C64,
            DType::C128,
            DType::F8E4M3FN,
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
        fn npz_and_npy_round_trip(
            tensors in prop::collection::btree_map("[a-z][a-z0-9_./]{0,8}[a-z]", tensor(), 0..5),
            deflate in any::<bool>(),
        ) {
            let mut m = Model::new();
            for (name, (d, shape, data)) in &tensors {
                if name.contains("//") || name.contains("..") {
                    continue;
                }
                m.push(TensorView::dense(
                    TensorInfo::dense(name.clone(), *d, shape.clone()),
                    Cow::Owned(data.clone()),
                ).unwrap()).unwrap();
            }
            let opts = WriteOptions::default()
                .compression(if deflate { Compression::Zstd(3) } else { Compression::None });
            let bytes = write(Format::Npz, &m, &opts);
            let f = NpzFile::parse(&bytes, &ReadOptions::default()).unwrap();
            prop_assert_eq!(f.tensor_infos().len(), m.tensor_infos().len());
            for info in m.tensor_infos() {
                let a = m.tensor(&info.name).unwrap();
                let b = f.tensor(&info.name).unwrap();
                prop_assert_eq!(&b.info.shape, &info.shape);
                prop_assert_eq!(b.info.dtype, info.dtype);
                prop_assert_eq!(a.data().unwrap(), b.data().unwrap());
                // And alone as .npy.
                let mut one = Model::new();
                one.push(a.clone()).unwrap();
                let npy = write(Format::Npy, &one, &Default::default());
                let g = NpyFile::parse(&npy, &ReadOptions::default()).unwrap();
                let c = g.tensor(NPY_TENSOR_NAME).unwrap();
                prop_assert!(c.is_borrowed());
                prop_assert_eq!(c.data().unwrap(), a.data().unwrap());
            }
        }
    }
}
