//! FOLD `TSAV` chunks (pyfolds' `torch_state`, a `torch.save` file) read through the
//! PyTorch reader: on the real pyfolds 1.0.2 checkpoint (real torch wrote the chunk),
//! its tensors are listed as `torch_state/<name>` and agree with the metadata pyfolds
//! wrote; a FOLD→FOLD rewrite carries the chunk byte for byte and does not store its
//! tensors a second time; a chunk whose pickle calls `os.system` (pickled as
//! `posix.system`) stays opaque with a
//! warning naming it, and nothing is run.

use std::io::Cursor;

use tessera::convert::{prepare, write_to, Compression, ConvertOptions, WriteOptions};
use tessera::formats::fold::FoldWriter;
use tessera::metadata::Map;
use tessera::{Format, ReadOptions, Value};

const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/interop-samples/fold/pyfolds102_save_fold_or_mind_MPJRDNeuron.fold"
);

fn f32_of(v: &[u8]) -> f32 {
    f32::from_le_bytes(v.try_into().unwrap())
}

#[test]
fn the_torch_state_of_a_real_checkpoint_is_read_as_tensors() {
    let data = std::fs::read(SAMPLE).unwrap();
    let f = tessera::open(&data[..], &ReadOptions::default()).unwrap();
    assert!(f.warnings().is_empty(), "{:?}", f.warnings());
    let torch: Vec<_> = f
        .tensor_infos()
        .iter()
        .filter(|t| t.name.starts_with("torch_state/"))
        .collect();
    // MPJRDNeuron: 4 dendrites × 32 synapses × 7 tensors, plus the neuron's own.
    assert!(torch.len() > 4 * 32 * 7, "{}", torch.len());
    let chunk = f.chunks().iter().find(|c| c.name == "torch_state").unwrap();
    assert!(!chunk.holds_tensors, "the chunk itself stays a chunk");
    // The homeostasis state agrees with the expression pyfolds put in the metadata and
    // with the NPZ0 arrays it saved beside it.
    let expr = f.metadata().get("expression").unwrap().as_map().unwrap();
    for (t, key) in [
        ("homeostasis.theta", "theta"),
        ("homeostasis.r_hat", "r_hat"),
    ] {
        let v = f.tensor(&format!("torch_state/state_dict.{t}")).unwrap();
        let x = f32_of(v.data().unwrap());
        assert_eq!(Value::Float(x as f64), *expr.get(key).unwrap(), "{t}");
        let npz = f.tensor(&format!("nuclear_arrays/{key}")).unwrap();
        assert_eq!(x, f32_of(npz.data().unwrap()), "{t}");
    }
    // Synapse 5 of dendrite 2: its N is row 2, column 5 of the NPZ0 array N (4 × 32).
    let n = f.tensor("nuclear_arrays/N").unwrap();
    let row = &n.data().unwrap()[(2 * 32 + 5) * 4..][..4];
    let s = f
        .tensor("torch_state/state_dict.dendrites.2.synapses.5.N")
        .unwrap();
    assert_eq!(s.data().unwrap(), row);
}

#[test]
fn a_fold_rewrite_carries_the_chunk_and_stores_its_tensors_once() {
    let data = std::fs::read(SAMPLE).unwrap();
    let src = tessera::open(&data[..], &ReadOptions::default()).unwrap();
    let p = prepare(src.as_ref(), Format::Fold, ConvertOptions::default()).unwrap();
    let mut out = Cursor::new(Vec::new());
    let w = WriteOptions::default().timestamp(Some("2026-01-01T00:00:00Z".into()));
    write_to(Format::Fold, &p, &mut out, &w).unwrap();
    let bytes = out.into_inner();
    let back = tessera::open(&bytes[..], &ReadOptions::default()).unwrap();
    assert_eq!(
        back.chunk("torch_state").unwrap(),
        src.chunk("torch_state").unwrap()
    );
    // Chunks: the TSAV, the three JSON and the NPZ0 carried; no STEN chunk for the
    // torch_state tensors, which the TSAV chunk holds, nor for the NPZ0 arrays.
    let kinds: Vec<&str> = back.chunks().iter().map(|c| c.kind.as_str()).collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "STEN").count(),
        0,
        "{kinds:?}"
    );
    assert_eq!(kinds.iter().filter(|k| **k == "NPZ0").count(), 1);
    assert_eq!(kinds.iter().filter(|k| **k == "TSAV").count(), 1);
    // And every tensor is there once, with the same bytes.
    assert_eq!(back.tensor_infos().len(), src.tensor_infos().len());
    for info in src.tensor_infos() {
        assert_eq!(
            back.tensor(&info.name).unwrap().data().unwrap(),
            src.tensor(&info.name).unwrap().data().unwrap(),
            "{}",
            info.name
        );
    }
}

/// Into any other format the TSAV chunk's tensors go out as tensors and the chunk is
/// dropped with a note, so nothing is stored twice (AERO could carry the chunk too);
/// the other opaque chunks are carried as before.
#[test]
fn a_conversion_to_aero_stores_the_torch_state_tensors_once() {
    let data = std::fs::read(SAMPLE).unwrap();
    let src = tessera::open(&data[..], &ReadOptions::default()).unwrap();
    let p = prepare(src.as_ref(), Format::Aero, ConvertOptions::default()).unwrap();
    let n_torch = (src.tensor_infos().iter())
        .filter(|t| t.name.starts_with("torch_state/"))
        .count();
    assert_eq!(
        p.notes(),
        [format!(
            "dropped chunk \"torch_state\" (TSAV): its {n_torch} tensors are written as tensors"
        )]
    );
    let mut out = Cursor::new(Vec::new());
    write_to(Format::Aero, &p, &mut out, &WriteOptions::default()).unwrap();
    let bytes = out.into_inner();
    let back = tessera::open(&bytes[..], &ReadOptions::default()).unwrap();
    assert_eq!(back.format(), Format::Aero);
    let opaque: Vec<(&str, &str)> = (back.chunks().iter())
        .filter(|c| !c.holds_tensors)
        .map(|c| (c.name.as_str(), c.kind.as_str()))
        .collect();
    assert!(
        !opaque.iter().any(|(n, _)| *n == "torch_state"),
        "{opaque:?}"
    );
    let src_opaque = (src.chunks().iter())
        .filter(|c| !c.holds_tensors && c.kind != "TSAV")
        .count();
    assert_eq!(opaque.len(), src_opaque, "{opaque:?}");
    assert_eq!(back.tensor_infos().len(), src.tensor_infos().len());
    for info in src.tensor_infos() {
        assert_eq!(
            back.tensor(&info.name).unwrap().data().unwrap(),
            src.tensor(&info.name).unwrap().data().unwrap(),
            "{}",
            info.name
        );
    }
    // The FOLD target still keeps the chunk (and no note).
    let p = prepare(src.as_ref(), Format::Fold, ConvertOptions::default()).unwrap();
    assert!(p.notes().is_empty(), "{:?}", p.notes());
}

#[test]
fn a_refused_pickle_keeps_the_chunk_opaque_and_says_why() {
    let evil = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/pytorch/evil_os_system.pt"
    ))
    .unwrap();
    let good = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/pytorch/state_dict.pt"
    ))
    .unwrap();
    let mut w = FoldWriter::new(Cursor::new(Vec::new()), Compression::None, None).unwrap();
    w.add_chunk("evil_state", *b"TSAV", &[&evil]).unwrap();
    w.add_chunk("torch_state", *b"TSAV", &[&good]).unwrap();
    let bytes = w.finish(&Map::new(), 0.0).unwrap().into_inner();
    let f = tessera::open(&bytes[..], &ReadOptions::default()).unwrap();
    let w = f.warnings();
    assert!(
        w.iter()
            .any(|w| w.contains("evil_state") && w.contains("refused global posix.system")),
        "{w:?}"
    );
    assert!(f
        .tensor_infos()
        .iter()
        .all(|t| t.name.starts_with("torch_state/")));
    assert_eq!(f.tensor_infos().len(), 11);
    assert_eq!(f.chunk("evil_state").unwrap(), evil);
    // Tensors of torch's file, through the FOLD chunk, read as torch computed them.
    let direct = tessera::open(&good[..], &ReadOptions::default()).unwrap();
    for info in direct.tensor_infos() {
        assert_eq!(
            f.tensor(&format!("torch_state/{}", info.name))
                .unwrap()
                .data()
                .unwrap(),
            direct.tensor(&info.name).unwrap().data().unwrap()
        );
    }
}
