//! ggml block (de)quantization against vectors written by gguf-py 0.19.0's
//! `gguf.quants` (tests/data/gguf/quants/gen.py): every float bit for bit, every
//! quantized byte, edge blocks included (zero, NaN and infinite scales, ties, overflow).

use tessera::quant::GGML_TYPES;
use tessera::quant::{dequantize, quantize, QuantKind};

fn data(name: &str) -> Vec<u8> {
    let p = format!(
        "{}/tests/data/gguf/quants/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

const DEQUANT: &[&str] = &[
    "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "TQ1_0",
    "TQ2_0", "MXFP4", "NVFP4", "IQ4_NL", "IQ4_XS", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS",
    "IQ3_S", "IQ1_S", "IQ1_M",
];

/// The grid IQ types: NaN compared as NaN (payload and sign aside; numpy's `NaN * -1`
/// keeps the sign the compiler may flip).
const GRID_IQ: &[&str] = &[
    "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M",
];

#[test]
fn dequantize_matches_gguf_py_bit_for_bit() {
    for name in DEQUANT {
        let ty = GGML_TYPES.iter().find(|t| t.name == *name).unwrap();
        let lower = name.to_ascii_lowercase();
        let blocks = data(&format!("{lower}.blocks"));
        let want = floats(&data(&format!("{lower}.f32")));
        let numel = want.len() as u64;
        let got = dequantize("t", *ty, &blocks, numel).unwrap();
        assert_eq!(got.len(), want.len(), "{name}");
        let bs = ty.block_size as usize;
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            if GRID_IQ.contains(name) && g.is_nan() && w.is_nan() {
                continue;
            }
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{name}: element {i} (block {}): got {g} ({:#010x}), gguf-py {w} ({:#010x})",
                i / bs,
                g.to_bits(),
                w.to_bits()
            );
        }
        // The vectors exercise NaN and infinite scales where the type has f16 scales.
        if !["MXFP4", "NVFP4"].contains(name) {
            assert!(
                want.iter().any(|v| v.is_nan()),
                "{name}: no NaN in the vectors"
            );
        }
    }
}

#[test]
fn quantize_matches_gguf_py_byte_for_byte() {
    let x = floats(&data("quant_input.f32"));
    for kind in QuantKind::ALL {
        let want = data(&format!("{}.quant", kind.name()));
        let got = quantize("t", kind, &x).unwrap();
        assert_eq!(got.len(), want.len(), "{kind}");
        let ts = kind.ggml_type().type_size as usize;
        for (b, (g, w)) in got.chunks(ts).zip(want.chunks(ts)).enumerate() {
            assert_eq!(
                g,
                w,
                "{kind}: block {b} (inputs {:?})",
                &x[b * 32..b * 32 + 32]
            );
        }
    }
}

#[test]
fn quantized_then_dequantized_is_close() {
    let x = floats(&data("quant_input.f32"));
    let x = &x[..32 * 8]; // the unit-scale normal blocks
    for kind in QuantKind::ALL {
        let q = quantize("t", kind, x).unwrap();
        let back = dequantize("t", kind.ggml_type(), &q, x.len() as u64).unwrap();
        let bits = if kind == QuantKind::Q8_0 { 7 } else { 3 };
        for (blk, (a, b)) in x.chunks(32).zip(back.chunks(32)).enumerate() {
            let amax = a.iter().fold(0f32, |m, v| m.max(v.abs()));
            for (u, v) in a.iter().zip(b) {
                assert!(
                    (u - v).abs() <= amax / (1 << bits) as f32 * 1.01,
                    "{kind} block {blk}: {u} -> {v}"
                );
            }
        }
    }
}

#[test]
fn truncated_blocks_are_an_error_naming_the_tensor() {
    for name in DEQUANT {
        let ty = GGML_TYPES.iter().find(|t| t.name == *name).unwrap();
        let blocks = data(&format!("{}.blocks", name.to_ascii_lowercase()));
        let n = blocks.len() as u64 / ty.type_size * ty.block_size;
        let e = dequantize("blk.0.w", *ty, &blocks[..blocks.len() - 1], n).unwrap_err();
        assert!(e.to_string().contains("blk.0.w"), "{name}: {e}");
        // A shape that disagrees with the block count.
        assert!(dequantize("w", *ty, &blocks, n + ty.block_size).is_err());
    }
}

mod convert_steps {
    use std::borrow::Cow;

    use tessera::convert::{prepare, ConvertOptions};
    use tessera::formats::gguf::GgufFile;
    use tessera::quant::QuantKind;
    use tessera::{DType, Format, Layout, Limits, Model, TensorInfo, TensorSource, TensorView};

    fn peer_all() -> Vec<u8> {
        super::data("../peer_all.gguf")
    }

    #[test]
    fn quantized_tensors_are_refused_with_the_option_named() {
        let bytes = peer_all();
        let f = GgufFile::parse(&bytes, &Limits::default()).unwrap();
        let e = prepare(&f, Format::Safetensors, ConvertOptions::default())
            .err()
            .unwrap();
        assert!(e.hints().contains(&tessera::Hint::Dequantize), "{e}");
        // Types Tessera cannot decode yet are named, never passed through silently.
        let opts = ConvertOptions::default().dequantize(Some(DType::F32));
        let e = prepare(&f, Format::Safetensors, opts).err().unwrap();
        assert!(e.to_string().contains("q.q8_1"), "{e}");
    }

    #[test]
    fn dequantize_plan_serves_gguf_py_floats() {
        let bytes = peer_all();
        let f = GgufFile::parse(&bytes, &Limits::default()).unwrap();
        // One tensor gguf-py quantized (the file also holds types we cannot decode).
        let mut m = Model::new();
        m.push(f.tensor("q.q4_k").unwrap()).unwrap();
        let opts = ConvertOptions::default().dequantize(Some(DType::F32));
        let p = prepare(&m, Format::Safetensors, opts).unwrap();
        assert_eq!(p.notes(), ["dequantized \"q.q4_k\" q4_k -> f32"]);
        let info = &p.tensor_infos()[0];
        assert_eq!(
            (info.layout.clone(), info.dtype),
            (Layout::Dense, DType::F32)
        );
        assert!(info.attrs.is_empty());
        let d = p.tensor("q.q4_k").unwrap();
        let raw = f.tensor("q.q4_k").unwrap();
        let ty = tessera::quant::GgmlType::from_id(12).unwrap();
        let want = tessera::quant::dequantize("q", ty, &raw.parts[0].bytes, info.numel().unwrap())
            .unwrap();
        let want: Vec<u8> = want.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(d.data().unwrap(), &want[..]);
    }

    #[test]
    fn quantize_plan_keeps_1d_and_ragged_rows() {
        let mut m = Model::new();
        let add = |m: &mut Model, name: &str, shape: Vec<u64>| {
            let n: u64 = shape.iter().product();
            let data: Vec<u8> = (0..n)
                .flat_map(|i| (i as f32 * 0.1).to_le_bytes())
                .collect();
            let v = TensorView::dense(TensorInfo::dense(name, DType::F32, shape), Cow::Owned(data))
                .unwrap();
            m.push(v).unwrap();
        };
        add(&mut m, "w", vec![2, 64]);
        add(&mut m, "norm", vec![64]);
        add(&mut m, "odd", vec![2, 48]);
        let opts = ConvertOptions::default().quantize(Some(QuantKind::Q4_1));
        let p = prepare(&m, Format::Gguf, opts).unwrap();
        let kinds: Vec<String> = p
            .tensor_infos()
            .iter()
            .map(|i| i.dtype_label().to_string())
            .collect();
        assert_eq!(kinds, ["q4_1", "f32", "f32"]);
        assert!(p
            .notes()
            .iter()
            .any(|n| n.contains("\"norm\"") && n.contains("1-D")));
        assert!(p
            .notes()
            .iter()
            .any(|n| n.contains("\"odd\"") && n.contains("48")));
        assert_eq!(p.tensor("w").unwrap().parts[0].bytes.len(), 2 * 2 * 20);
        assert!(prepare(&m, Format::Safetensors, opts).is_err());
    }
}
