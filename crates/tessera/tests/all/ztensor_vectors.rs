//! The valid vectors of tests/data/ztensor (written by gen.py with struct/cbor2, not by
//! our writer) read with the values gen.py put in them.

use std::borrow::Cow;

use tessera::formats::ztensor::ZtensorFile;
use tessera::{Container, DType, Layout, ReadOptions, Status, TensorSource, Value};

fn read(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/data/ztensor/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn u64s(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn dense_vector() {
    let data = read("valid-dense.zt");
    let f = ZtensorFile::parse(&data, &ReadOptions::default()).unwrap();
    assert_eq!(f.generator(), Some("gen.py"));
    // Attributes, sorted as cbor2 wrote them in insertion order; JSON text stays text.
    let m = f.metadata();
    assert_eq!(m.get("license"), Some(&Value::Str("MIT".into())));
    assert_eq!(m.get("config"), Some(&Value::Str("{\"a\": 1}".into())));
    assert_eq!(m.len(), 3);
    let names: Vec<&str> = f.tensor_infos().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["w", "b", "flag", "big", "empty"]);
    let w = f.tensor("w").unwrap();
    assert_eq!(w.data().unwrap(), f32s(&[0., 1., 2., 3., 4., 5.]));
    assert!(w.is_borrowed());
    // 64-byte aligned in the file, so aligned in memory relative to the file start.
    assert_eq!(w.info.storage.offset, Some(64));
    let b = f.tensor("b").unwrap();
    assert_eq!(
        (b.info.dtype, b.data().unwrap()),
        (DType::I8, &[0xffu8, 0, 1, 127][..])
    );
    let flag = f.tensor("flag").unwrap();
    assert_eq!((flag.info.dtype, flag.info.shape.len()), (DType::Bool, 0));
    assert_eq!(flag.data().unwrap(), [1]);
    let big = f.tensor("big").unwrap();
    assert_eq!(big.data().unwrap(), u64s(&[0, u64::MAX]));
    let empty = f.tensor("empty").unwrap();
    assert_eq!(
        (empty.info.dtype, empty.info.shape.clone()),
        (DType::F16, vec![0, 3])
    );
    assert!(empty.data().unwrap().is_empty());

    let r = f.verify(&Default::default());
    let got: Vec<(&str, &str, Status)> = r
        .checks
        .iter()
        .map(|c| (c.subject.as_str(), c.layer.as_str(), c.status))
        .collect();
    assert_eq!(
        got,
        [
            ("tensor \"w\"", "crc32c", Status::Ok),
            ("tensor \"b\"", "sha256", Status::Ok),
            // lower-case hex is accepted
            ("tensor \"flag\"", "crc32c", Status::Ok),
            // an algorithm we do not check is said so, never passed
            ("tensor \"big\"", "md5", Status::NotChecked),
            ("tensor \"empty\"", "digest", Status::NotChecked),
        ]
    );
    assert!(r.is_ok());
}

#[test]
fn zstd_vector() {
    let data = read("valid-zstd.zt");
    let f = ZtensorFile::parse(&data, &ReadOptions::default()).unwrap();
    let z = f.tensor("z").unwrap();
    assert!(matches!(z.parts[0].bytes, Cow::Owned(_)));
    let want: Vec<u8> = (0..100i64).flat_map(|x| x.to_le_bytes()).collect();
    assert_eq!(z.data().unwrap(), want);
    let h = f.tensor("h").unwrap();
    let want: Vec<u8> = [0.5f32, -2.0, 65504.0]
        .iter()
        .flat_map(|x| half::f16::from_f32(*x).to_le_bytes())
        .collect();
    assert_eq!(h.data().unwrap(), want);
    let bf = f.tensor("bf").unwrap();
    assert_eq!(bf.info.dtype, DType::BF16);
    assert_eq!(DType::BF16.element_as_f64(bf.data().unwrap(), 0), Some(1.0));
    assert_eq!(
        DType::BF16.element_as_f64(bf.data().unwrap(), 1),
        Some(-2.0)
    );
    let r = f.verify(&Default::default());
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(
        r.checks.iter().filter(|c| c.layer == "structure").count(),
        3
    );
}

#[test]
fn sparse_vector() {
    let data = read("valid-sparse.zt");
    let f = ZtensorFile::parse(&data, &ReadOptions::default()).unwrap();
    let csr = tessera::sparse::densify(f.tensor("csr").unwrap()).unwrap();
    assert_eq!(csr.data().unwrap(), f32s(&[1., 0., 2., 0., 0., 3.]));
    let coo = f.tensor("coo").unwrap();
    assert_eq!(coo.part("coords").unwrap(), u64s(&[0, 1, 2, 0]));
    let coo = tessera::sparse::densify(coo).unwrap();
    let want: Vec<u8> = [0i32, 0, 5, 6, 0, 0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    assert_eq!(coo.data().unwrap(), want);
    let r = f.verify(&Default::default());
    assert!(r.is_ok(), "{r:?}");
    assert!(r
        .checks
        .iter()
        .any(|c| c.subject == "tensor \"coo\" component \"coords\""
            && c.layer == "crc32c"
            && c.status == Status::Ok));
}

#[test]
fn other_layout_keeps_components_in_sorted_order() {
    let data = read("valid-other-layout.zt");
    let f = ZtensorFile::parse(&data, &ReadOptions::default()).unwrap();
    let q = f.tensor("q").unwrap();
    assert_eq!(q.info.layout, Layout::Other("quantized_4bit".into()));
    assert_eq!(q.info.dtype, DType::U8);
    let roles: Vec<&str> = q.parts.iter().map(|p| p.role.as_str()).collect();
    assert_eq!(roles, ["data", "scale", "zero_point"]);
    assert_eq!(q.part("data").unwrap(), (0u8..8).collect::<Vec<_>>());
    assert_eq!(q.part("scale").unwrap(), f32s(&[0.5, 0.25]));
    assert_eq!(q.part("zero_point").unwrap(), [8, 8]);
    assert_eq!(q.info.storage.encoding, "raw+zstd");
}

#[test]
fn v11_footer_vector_reads_with_a_warning() {
    let data = read("valid-v11-footer.zt");
    let f = ZtensorFile::parse(&data, &ReadOptions::default()).unwrap();
    assert!(f.has_footer_magic());
    assert_eq!(f.version(), "1.1.0");
    assert_eq!(f.warnings().len(), 1, "{:?}", f.warnings());
    assert!(f.warnings()[0].contains("newer than 1.0"));
    let w = f.tensor("w").unwrap();
    assert_eq!(w.data().unwrap(), f32s(&[1., 2., 3., 4.]));
    let csr = f.tensor("csr").unwrap();
    assert_eq!(csr.info.attrs.get("bits"), Some(&Value::Int(4)));
    // u32 indices and u16 indptr widened to u64.
    assert_eq!(csr.part("indices").unwrap(), u64s(&[1]));
    assert_eq!(csr.part("indptr").unwrap(), u64s(&[0, 0, 1]));
    let d = tessera::sparse::densify(csr).unwrap();
    assert_eq!(d.data().unwrap(), f32s(&[0., 0., 0., 7.]));
}

#[test]
fn empty_and_unaligned_vectors() {
    let data = read("valid-empty.zt");
    let f = ZtensorFile::parse(&data, &ReadOptions::default()).unwrap();
    assert!(f.tensor_infos().is_empty());
    assert!(f.verify(&Default::default()).checks.is_empty());

    let data = read("valid-unaligned.zt");
    let f = ZtensorFile::parse(&data, &ReadOptions::default()).unwrap();
    assert_eq!(f.warnings().len(), 1);
    assert!(
        f.warnings()[0].contains("not 64-byte aligned"),
        "{:?}",
        f.warnings()
    );
    let u = f.tensor("u").unwrap();
    assert!(u.is_borrowed());
    assert_eq!(u.data().unwrap(), [1, 0, 0xff, 0xff]);
    assert_eq!(f.verify(&Default::default()).warnings, f.warnings());
}

#[test]
fn pypi_ztensor_1_0_2_v11_file_reads() {
    // Written by the real ztensor 1.0.2 (peer_v11.py): v1.1 layout.
    let data = read("valid-pypi-ztensor-1.0.2-v11.zt");
    let f = ZtensorFile::parse(&data, &ReadOptions::default()).unwrap();
    assert!(f.has_footer_magic());
    assert_eq!(f.version(), "1.1.0");
    assert_eq!(f.generator(), None);
    let names: Vec<&str> = f.tensor_infos().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["w", "z", "h", "csr", "coo"]);
    assert_eq!(
        f.tensor("w").unwrap().data().unwrap(),
        f32s(&[0., 1., 2., 3., 4., 5.])
    );
    let want: Vec<u8> = (0..100i64).flat_map(|x| x.to_le_bytes()).collect();
    assert_eq!(f.tensor("z").unwrap().data().unwrap(), want);
    let h = f.tensor("h").unwrap();
    assert_eq!(h.info.dtype, DType::F16);
    assert_eq!(DType::F16.element_as_f64(h.data().unwrap(), 3), Some(3.0));
    let csr = tessera::sparse::densify(f.tensor("csr").unwrap()).unwrap();
    assert_eq!(csr.data().unwrap(), f32s(&[1., 0., 2., 0., 0., 3.]));
    let coo = tessera::sparse::densify(f.tensor("coo").unwrap()).unwrap();
    let want: Vec<u8> = [0i32, 0, 5, 6, 0, 0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    assert_eq!(coo.data().unwrap(), want);
    assert!(f.verify(&Default::default()).is_ok());
}

/// §6.1: a newer minor is "warn, proceed". The real ztensor 1.0.2 file (v1.1) with its
/// footer magic cut ends with the manifest size, as a v1.0 file does: it reads, with a
/// warning naming the missing magic, and every tensor equals the uncut file's.
#[test]
fn a_v11_manifest_without_the_footer_magic_reads_with_a_warning() {
    let whole = read("valid-pypi-ztensor-1.0.2-v11.zt");
    let cut = &whole[..whole.len() - 8];
    let f = ZtensorFile::parse(cut, &ReadOptions::default()).unwrap();
    assert!(!f.has_footer_magic());
    assert_eq!(f.version(), "1.1.0");
    assert!(
        f.warnings().iter().any(|w| w.contains("no footer magic")),
        "{:?}",
        f.warnings()
    );
    let g = ZtensorFile::parse(&whole[..], &ReadOptions::default()).unwrap();
    for info in g.tensor_infos() {
        assert_eq!(
            f.tensor(&info.name).unwrap().parts,
            g.tensor(&info.name).unwrap().parts,
            "{}",
            info.name
        );
    }
    assert!(f.verify(&Default::default()).is_ok());
}
