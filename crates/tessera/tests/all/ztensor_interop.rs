//! The zTensor sample written by PyPI `ztensor` 1.0.1 reads with the values its
//! MANIFEST.md states.

use std::borrow::Cow;

use tessera::formats::ztensor::ZtensorFile;
use tessera::{Container, DType, Layout, ReadOptions, Status, TensorSource};

const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/interop-samples/ztensor/pypi_ztensor_1.0.1_mixed.zt"
);

fn le<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

#[test]
fn pypi_sample_reads_with_manifest_values() {
    let data = std::fs::read(SAMPLE).unwrap();
    let f = ZtensorFile::parse(&data, &ReadOptions::default()).unwrap();
    assert_eq!(f.version(), "1.0");
    assert_eq!(f.generator(), Some("zTensor-Rust v0.1.0"));
    assert!(f.warnings().is_empty(), "{:?}", f.warnings());
    assert!(f.metadata().is_empty());
    // File order is write order: w, z, s, csr, coo.
    let names: Vec<&str> = f.tensor_infos().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["w", "z", "s", "csr", "coo"]);

    let w = f.tensor("w").unwrap();
    assert_eq!(
        (w.info.dtype, w.info.shape.clone()),
        (DType::F32, vec![2, 3])
    );
    assert_eq!(w.info.layout, Layout::Dense);
    assert_eq!(
        w.data().unwrap(),
        le(&[0f32, 1., 2., 3., 4., 5.], f32::to_le_bytes)
    );
    assert!(
        matches!(w.parts[0].bytes, Cow::Borrowed(_)),
        "raw dense must be zero-copy"
    );

    let z = f.tensor("z").unwrap();
    assert_eq!(
        (z.info.dtype, z.info.shape.clone()),
        (DType::I64, vec![100])
    );
    assert_eq!(z.info.storage.encoding, "zstd");
    let want: Vec<i64> = (0..100).collect();
    assert_eq!(z.data().unwrap(), le(&want, i64::to_le_bytes));

    let s = f.tensor("s").unwrap();
    assert_eq!((s.info.dtype, s.info.shape.clone()), (DType::I16, vec![1]));
    assert_eq!(s.data().unwrap(), 7i16.to_le_bytes());

    let csr = f.tensor("csr").unwrap();
    assert_eq!(csr.info.layout, Layout::SparseCsr);
    assert_eq!(
        (csr.info.dtype, csr.info.shape.clone()),
        (DType::F32, vec![2, 3])
    );
    let roles: Vec<&str> = csr.parts.iter().map(|p| p.role.as_str()).collect();
    assert_eq!(roles, ["values", "indices", "indptr"]);
    assert_eq!(
        csr.part("values").unwrap(),
        le(&[1f32, 2.], f32::to_le_bytes)
    );
    assert_eq!(
        csr.part("indices").unwrap(),
        le(&[0u64, 2], u64::to_le_bytes)
    );
    assert_eq!(
        csr.part("indptr").unwrap(),
        le(&[0u64, 1, 2], u64::to_le_bytes)
    );

    let coo = f.tensor("coo").unwrap();
    assert_eq!(coo.info.layout, Layout::SparseCoo);
    assert_eq!(
        (coo.info.dtype, coo.info.shape.clone()),
        (DType::I32, vec![2, 3])
    );
    assert_eq!(
        coo.part("values").unwrap(),
        le(&[5i32, 6], i32::to_le_bytes)
    );
    assert_eq!(
        coo.part("coords").unwrap(),
        le(&[0u64, 1, 2, 0], u64::to_le_bytes)
    );

    // Densified values match too (csr [[1,0,0],[0,0,2]], coo [[0,0,5],[6,0,0]]).
    let d = tessera::sparse::densify(csr).unwrap();
    assert_eq!(
        d.data().unwrap(),
        le(&[1f32, 0., 0., 0., 0., 2.], f32::to_le_bytes)
    );
    let d = tessera::sparse::densify(coo).unwrap();
    assert_eq!(
        d.data().unwrap(),
        le(&[0i32, 0, 5, 6, 0, 0], i32::to_le_bytes)
    );
}

#[test]
fn pypi_sample_opens_through_detection_and_verifies() {
    let data = tessera::FileData::open(SAMPLE.as_ref()).unwrap();
    let f = tessera::open(&data, &ReadOptions::default()).unwrap();
    assert_eq!(f.format(), tessera::Format::Ztensor);
    let r = f.verify(&Default::default());
    assert!(r.is_ok(), "{r:?}");
    // The sample has no digests: every tensor says so, nothing passes silently.
    let not_checked = r
        .checks
        .iter()
        .filter(|c| c.layer == "digest" && c.status == Status::NotChecked)
        .count();
    assert_eq!(not_checked, 5);
    // z (zstd), csr and coo are decoded and validated.
    let structure: Vec<&str> = r
        .checks
        .iter()
        .filter(|c| c.layer == "structure" && c.status == Status::Ok)
        .map(|c| c.subject.as_str())
        .collect();
    assert_eq!(
        structure,
        ["tensor \"z\"", "tensor \"csr\"", "tensor \"coo\""]
    );
}
