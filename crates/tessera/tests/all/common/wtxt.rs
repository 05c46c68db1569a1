//! Helpers shared by the WTXT integration tests (`wtxt.rs`, `wtxt_delta.rs`).
#![allow(dead_code, unused_imports)]

use std::borrow::Cow;
use std::io::Cursor;

use tessera::convert::{write_to, WriteOptions};
use tessera::formats::wtxt;
use tessera::{
    Container, DType, ErrorKind, Format, Model, ReadOptions, Status, TensorInfo, TensorSource,
    TensorView, VerifyOptions,
};

pub fn model() -> Model {
    let mut m = Model::new();
    let f64s: Vec<u8> = (0..4096 * 64)
        .flat_map(|i| ((i as f64) * 0.25 - 7.0).to_le_bytes())
        .collect();
    m.push(
        TensorView::dense(
            TensorInfo::dense("R", DType::F64, vec![4096, 64]),
            Cow::Owned(f64s),
        )
        .unwrap(),
    )
    .unwrap();
    let b: Vec<u8> = (0..1000u32)
        .flat_map(|i| (i.wrapping_mul(2654435761)).to_le_bytes())
        .collect();
    m.push(
        TensorView::dense(
            TensorInfo::dense("W_base", DType::U32, vec![1000]),
            Cow::Owned(b),
        )
        .unwrap(),
    )
    .unwrap();
    m.push(
        TensorView::dense(
            TensorInfo::dense("s", DType::F32, vec![]),
            Cow::Owned(1.5f32.to_le_bytes().to_vec()),
        )
        .unwrap(),
    )
    .unwrap();
    m.push(
        TensorView::dense(
            TensorInfo::dense("empty", DType::I16, vec![0, 3]),
            Cow::Owned(vec![]),
        )
        .unwrap(),
    )
    .unwrap();
    m.push(
        TensorView::dense(
            TensorInfo::dense("H", DType::BF16, vec![3, 5]),
            Cow::Owned((0..30).collect()),
        )
        .unwrap(),
    )
    .unwrap();
    m
}

pub fn opts() -> WriteOptions {
    WriteOptions::default()
        .timestamp(Some("2025-10-09T03:12:45Z".into()))
        .with(
            tessera::formats::wtxt::WtxtOptions::default()
                .generation(Some(123))
                .build(Some("abc123".into())),
        )
}

pub fn write(m: &Model, o: &WriteOptions) -> Vec<u8> {
    let mut c = Cursor::new(Vec::new());
    write_to(Format::Wtxt, m, &mut c, o).unwrap();
    c.into_inner()
}

pub fn open(b: &[u8]) -> wtxt::WtxtContainer<'_> {
    wtxt::open_container(Cow::Borrowed(b), &ReadOptions::default()).unwrap()
}

pub fn failures(r: &tessera::VerifyReport) -> Vec<(String, String)> {
    r.failures()
        .map(|c| (c.subject.clone(), c.layer.clone()))
        .collect()
}

pub fn line_of(text: &str, p: &str) -> usize {
    text.lines().position(|l| l.starts_with(p)).unwrap()
}

pub fn edit_line(b: &[u8], n: usize, f: impl Fn(&str) -> String) -> Vec<u8> {
    let text = std::str::from_utf8(b).unwrap();
    let mut out = String::new();
    for (i, l) in text.lines().enumerate() {
        out.push_str(&if i == n { f(l) } else { l.to_string() });
        out.push('\n');
    }
    out.into_bytes()
}

/// `b` with one base64 character of the chunk whose `ch` line is line `ch` changed
/// (the second line after it), the line's parity left as it was.
pub fn flip_chunk_char(b: &[u8], ch: usize) -> Vec<u8> {
    edit_line(b, ch + 2, |l| {
        let mut v = l.as_bytes().to_vec();
        v[10] = if v[10] == b'A' { b'B' } else { b'A' };
        String::from_utf8(v).unwrap()
    })
}
