//! The crate root's typed helpers: `open_path`, `convert_path`, `TensorView::from_slice`
//! and `to_vec`, on files written by the peer tools (safetensors' own writer).

use tessera::diff::{diff, DiffOptions};
use tessera::{ConvertOptions, ErrorKind, TensorView};

const MIXED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/safetensors/mixed.safetensors"
);

#[test]
fn convert_file_writes_the_format_the_extension_names_and_keeps_every_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let dst = dir.path().join("out.safetensors");
    tessera::convert_path(MIXED, &dst, &ConvertOptions::default()).unwrap();
    let (a, b) = (
        tessera::open_path(MIXED, &Default::default()).unwrap(),
        tessera::open_path(&dst, &Default::default()).unwrap(),
    );
    let r = diff(a.container(), b.container(), &DiffOptions::new()).unwrap();
    assert!(r.same(), "{r:?}");
    assert!(r.tensors_in_a > 0);
}

#[test]
fn convert_file_refuses_a_loss_the_options_do_not_allow() {
    // mixed.safetensors holds a c64 tensor "cplx", which zTensor v1 cannot store.
    let dir = tempfile::tempdir().unwrap();
    let dst = dir.path().join("out.zt");
    let e = tessera::convert_path(MIXED, &dst, &ConvertOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("cplx"), "{e}");
    assert!(!dst.exists());
}

#[test]
fn convert_file_refuses_an_extension_no_format_has() {
    let dir = tempfile::tempdir().unwrap();
    let dst = dir.path().join("out.nope");
    let e = tessera::convert_path(MIXED, &dst, &ConvertOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert!(!dst.exists());
}

#[test]
fn to_vec_reads_a_peer_written_tensor_as_its_type() {
    let f = tessera::open_path(MIXED, &Default::default()).unwrap();
    let c = f.container();
    let info = c
        .tensor_infos()
        .iter()
        .find(|t| t.dtype == tessera::DType::F32)
        .unwrap();
    let t = c.tensor(&info.name).unwrap();
    let vals = t.to_vec::<f32>().unwrap();
    let n: u64 = info.shape.iter().product();
    assert_eq!(vals.len() as u64, n);
    // Written back through from_slice, the bytes are the file's.
    let again = TensorView::from_slice(info.name.clone(), info.shape.clone(), &vals).unwrap();
    assert_eq!(again.data().unwrap(), t.data().unwrap());
    assert_eq!(
        t.to_vec::<i32>().unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
}

#[test]
fn to_vec_gives_the_values_gen_py_wrote() {
    // gen.py: "u16": [65535, 1], "i64": [-(2**62), 5], "u64": [2**63 + 11].
    let f = tessera::open_path(MIXED, &Default::default()).unwrap();
    let c = f.container();
    assert_eq!(
        c.tensor("u16").unwrap().to_vec::<u16>().unwrap(),
        [65535, 1]
    );
    assert_eq!(
        c.tensor("i64").unwrap().to_vec::<i64>().unwrap(),
        [-(1i64 << 62), 5]
    );
    assert_eq!(
        c.tensor("u64").unwrap().to_vec::<u64>().unwrap(),
        [(1u64 << 63) + 11]
    );
}
