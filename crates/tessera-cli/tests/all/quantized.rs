//! GGUF's quantized tensors on every path of the CLI: `extract` (kept packed to a format
//! that holds the blocks, decoded with `--dequantize`), `stats` and `diff`. The blocks
//! and the values they decode to are gguf-py 0.19.0's (crates/tessera/tests/data/gguf/
//! quants: `q8_0.blocks` and `gguf.quants.dequantize` of them, `q8_0.f32`), with zero,
//! NaN, infinite and f16-extreme scales among them.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tessera::{DType, Format, Layout, Model, Part, TensorInfo, TensorView};

fn run(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tessera"));
    for a in args {
        c.arg(a);
    }
    c.output().unwrap()
}

use crate::common::text;

fn vector(name: &str) -> Vec<u8> {
    let p = format!(
        "{}/../tessera/tests/data/gguf/quants/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// 48 Q8_0 blocks as a [48, 32] tensor "w" (and a plain "b"), written as GGUF; and the
/// float original: "w" as the f32 values gguf-py decodes the blocks to.
fn files(dir: &Path) -> (PathBuf, PathBuf, Vec<u8>) {
    let blocks = vector("q8_0.blocks");
    let want = vector("q8_0.f32");
    assert_eq!(want.len(), 48 * 32 * 4);
    let b: Vec<u8> = [1.5f32, -2.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let plain =
        TensorView::dense(TensorInfo::dense("b", DType::F32, vec![2]), Cow::Owned(b)).unwrap();
    let mut q = Model::new();
    let mut info = TensorInfo::dense("w", DType::U8, vec![48, 32]);
    info.layout = Layout::Other("ggml_q8_0".into());
    info.attrs.insert("ggml_type", tessera::Value::Int(8));
    q.push(TensorView {
        info,
        parts: vec![Part {
            role: "data".into(),
            bytes: Cow::Owned(blocks),
        }],
    })
    .unwrap();
    q.push(plain.clone()).unwrap();
    let qpath = dir.join("q.gguf");
    tessera::convert::write_file(Format::Gguf, &q, &qpath, &Default::default()).unwrap();
    let mut f = Model::new();
    f.push(
        TensorView::dense(
            TensorInfo::dense("w", DType::F32, vec![48, 32]),
            Cow::Owned(want.clone()),
        )
        .unwrap(),
    )
    .unwrap();
    f.push(plain).unwrap();
    let fpath = dir.join("f.safetensors");
    tessera::convert::write_file(Format::Safetensors, &f, &fpath, &Default::default()).unwrap();
    (qpath, fpath, want)
}

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn extract_keeps_the_blocks_where_the_format_holds_them_and_decodes_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let (q, _, want) = files(dir.path());
    // To .gguf, as stored: the same blocks.
    let out = dir.path().join("w.gguf");
    let o = run(&[&"extract", &q, &"w", &"-o", &out]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let opened = tessera::open_path(&out, &Default::default()).unwrap();
    let f = opened.container();
    let v = f.tensor("w").unwrap();
    assert_eq!(v.info.layout, Layout::Other("ggml_q8_0".into()));
    assert_eq!(&*v.parts[0].bytes, &vector("q8_0.blocks")[..]);
    // To .npy without --dequantize: refused, naming the flag.
    let npy = dir.path().join("w.npy");
    let o = run(&[&"extract", &q, &"w", &"-o", &npy]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("--dequantize"), "{}", text(&o));
    assert!(!npy.exists());
    // With --dequantize f32: gguf-py's floats, bit for bit.
    let o = run(&[&"extract", &q, &"w", &"-o", &npy, &"--dequantize", &"f32"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let opened = tessera::open_path(&npy, &Default::default()).unwrap();
    let f = opened.container();
    let name = f.tensor_infos()[0].name.clone();
    let v = f.tensor(&name).unwrap();
    assert_eq!(
        (v.info.dtype, v.info.shape.clone()),
        (DType::F32, vec![48, 32])
    );
    let got = floats(v.data().unwrap());
    for (i, (g, w)) in got.iter().zip(floats(&want)).enumerate() {
        assert_eq!(g.to_bits(), w.to_bits(), "element {i}: {g} vs gguf-py {w}");
    }
    // To f16 the extreme scales overflow: refused, suggesting the dtypes that hold them
    // (not f16 again).
    let o = run(&[&"extract", &q, &"w", &"-o", &npy, &"--dequantize", &"f16"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(
        t.contains("overflows f16") && t.contains("f32 or bf16"),
        "{t}"
    );
    assert!(!t.contains("f32|f16|bf16"), "{t}");
}

#[test]
fn stats_says_a_quantized_tensor_needs_dequantize_and_computes_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let (q, _, want) = files(dir.path());
    let o = run(&[&"stats", &q]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    let line = t.lines().find(|l| l.starts_with("w ")).unwrap();
    assert!(line.contains("--dequantize"), "{t}");
    assert!(t.contains("not computed: 1 tensor quantized"), "{t}");
    let o = run(&[&"stats", &q, &"--json", &"--dequantize", &"f32"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let w = doc["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "w")
        .unwrap();
    let vals = floats(&want);
    let nan = vals.iter().filter(|v| v.is_nan()).count() as u64;
    let finite: Vec<f64> = vals
        .iter()
        .filter(|v| v.is_finite())
        .map(|&v| v as f64)
        .collect();
    let max = finite.iter().copied().fold(f64::MIN, f64::max);
    assert!(w["skipped"].is_null(), "{w}");
    assert_eq!(w["count"], 48 * 32);
    assert_eq!(w["nan"], nan);
    assert!(nan > 0);
    assert_eq!(w["max"].as_f64().unwrap(), max);
}

#[test]
fn diff_reports_the_type_change_or_compares_decoded_values() {
    let dir = tempfile::tempdir().unwrap();
    let (q, f, _) = files(dir.path());
    // Without --dequantize: the dtype and layout change, and how to compare values.
    let o = run(&[&"diff", &q, &f]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("~ w: dtype q8_0 -> f32") && t.contains("layout ggml_q8_0 -> dense"),
        "{t}"
    );
    assert!(t.contains("--dequantize"), "{t}");
    // Decoded to f32: the float original exactly (NaN equals NaN).
    let o = run(&[&"diff", &q, &f, &"--dequantize", &"f32"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("no differences in 2 tensors"),
        "{}",
        text(&o)
    );
    // Decoded to bf16: not exact, but within bf16's rounding (2^-8 relative).
    let o = run(&[&"diff", &q, &f, &"--dequantize", &"bf16"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("~ w: "), "{}", text(&o));
    let o = run(&[
        &"diff",
        &q,
        &f,
        &"--dequantize",
        &"bf16",
        &"--rtol",
        &"0.004",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("= w: equal within"), "{}", text(&o));
}

/// The library's one entry point for a dequantizing read (what Python's loaders call).
#[test]
fn the_library_decodes_a_view_and_passes_others_through() {
    let dir = tempfile::tempdir().unwrap();
    let (q, _, want) = files(dir.path());
    let opened = tessera::open_path(&q, &Default::default()).unwrap();
    let f = opened.container();
    let v = tessera::values::dequantize(f.tensor("w").unwrap(), DType::F32).unwrap();
    assert_eq!(v.info.layout, Layout::Dense);
    assert_eq!(v.data().unwrap(), &want[..]);
    let b = tessera::values::dequantize(f.tensor("b").unwrap(), DType::BF16).unwrap();
    assert_eq!(b.info.dtype, DType::F32, "a float tensor passes unchanged");
    let e = tessera::values::dequantize(f.tensor("w").unwrap(), DType::I8).unwrap_err();
    assert_eq!(e.kind(), tessera::ErrorKind::InvalidInput);
}

/// An MXFP4 pair as gpt-oss stores it (`…_blocks` + `…_scales`, written by the
/// safetensors package: crates/tessera/tests/data/safetensors/mxfp4_pair.safetensors,
/// gen_mxfp4.py) through the CLI: `convert --dequantize bf16` writes one tensor with the
/// values ml_dtypes computed, `extract X --dequantize f32` extracts the pair's tensor,
/// and without `--dequantize` the name is unknown (the pair is two u8 tensors).
#[test]
fn mxfp4_pairs_convert_and_extract_with_dequantize() {
    let data = format!(
        "{}/../tessera/tests/data/safetensors",
        env!("CARGO_MANIFEST_DIR")
    );
    let src = PathBuf::from(&data).join("mxfp4_pair.safetensors");
    let exp: serde_json::Value =
        serde_json::from_slice(&std::fs::read(PathBuf::from(&data).join("expected.json")).unwrap())
            .unwrap();
    let stem = "model.layers.0.mlp.experts.gate_up_proj";
    let want = &exp["mxfp4_pair.safetensors"]["mxfp4"][stem];
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.safetensors");
    let o = run(&[&"convert", &src, &out, &"--dequantize", &"bf16"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("MXFP4"), "{}", text(&o));
    let bytes = std::fs::read(&out).unwrap();
    let f = tessera::open(&bytes, &Default::default()).unwrap();
    let v = f.tensor(stem).unwrap();
    assert_eq!(v.info.dtype, DType::BF16);
    assert_eq!(
        tessera::util::hex(v.data().unwrap()),
        want["bf16_hex"].as_str().unwrap()
    );
    assert!(f.tensor(&format!("{stem}_scales")).is_err());
    let npy = dir.path().join("w.npy");
    let o = run(&[
        &"extract",
        &src,
        &stem,
        &"-o",
        &npy,
        &"--dequantize",
        &"f32",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let bytes = std::fs::read(&npy).unwrap();
    let f = tessera::open(&bytes, &Default::default()).unwrap();
    let v = f.tensor(&f.tensor_infos()[0].name).unwrap();
    assert_eq!(
        tessera::util::hex(v.data().unwrap()),
        want["f32_hex"].as_str().unwrap()
    );
    let o = run(&[&"extract", &src, &stem, &"-o", &npy]);
    assert!(!o.status.success());
}
