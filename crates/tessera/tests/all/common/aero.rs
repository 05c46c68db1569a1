//! Helpers shared by the AERO integration tests (`aero.rs`, `aero_roundtrip.rs`).
#![allow(dead_code, unused_imports)]

use std::borrow::Cow;
use std::io::Cursor;

use tessera::convert::WriteOptions;
use tessera::formats::aero::AeroFile;
use tessera::{
    Container, DType, ErrorKind, Format, Layout, Limits, Map, Model, Status, TensorInfo,
    TensorSource, TensorView, Value, VerifyOptions,
};

pub const SAMPLES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/interop-samples/aero/"
);
pub const PLAIN: &str = "aerotensor_HEAD630e8a4_write_model_plain.aero";
pub const IHSH: &str = "aerotensor_f1d395d_write_model_ihsh.aero";
pub const PHSH: &str = "aerotensor_f1d395d_write_model_ihsh_phsh_page16.aero";

pub fn sample(name: &str) -> Vec<u8> {
    std::fs::read(format!("{SAMPLES}{name}")).unwrap()
}

pub fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

pub fn write(src: &dyn TensorSource, opts: &WriteOptions) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    tessera::convert::write_to(Format::Aero, src, &mut out, opts).unwrap();
    out.into_inner()
}

pub fn fixed(o: WriteOptions) -> WriteOptions {
    o.with(tessera::formats::aero::AeroOptions::default().uuid(Some([0x11; 16])))
}

/// The manifest's model: `linear.weight` f32 [2,3] = 0..5, `linear.bias` f32 [2] = [0.5, -0.5].
pub fn manifest_model() -> Model {
    let mut m = Model::new();
    m.metadata.insert("model_name", "m");
    m.metadata.insert("architecture", "linear");
    let w: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let b: Vec<u8> = [0.5f32, -0.5]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    m.push(
        TensorView::dense(
            TensorInfo::dense("linear.weight", DType::F32, vec![2, 3]),
            Cow::Owned(w),
        )
        .unwrap(),
    )
    .unwrap();
    m.push(
        TensorView::dense(
            TensorInfo::dense("linear.bias", DType::F32, vec![2]),
            Cow::Owned(b),
        )
        .unwrap(),
    )
    .unwrap();
    m
}

pub fn layer_status(r: &tessera::VerifyReport, layer: &str) -> Vec<Status> {
    r.checks
        .iter()
        .filter(|c| c.layer == layer)
        .map(|c| c.status)
        .collect()
}
