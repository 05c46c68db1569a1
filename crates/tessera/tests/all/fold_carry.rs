//! FOLD→FOLD keeps every chunk byte for byte: header, stored payload and parity of the
//! JSON, TSAV, NPZ0 and STEN chunks of pyfolds' files (their zstd frames and 1.0.2's
//! parity layout included) and of ours, unless the write asks for something else — new
//! parity (`ecc`), compression of raw chunks, `recode` — or a tensor a chunk holds is
//! not written as the chunk has it, which the report names.

use std::borrow::Cow;
use std::io::Cursor;

use tessera::convert::{prepare, write_to, Compression, ConvertOptions, WriteOptions};
use tessera::formats::fold::{FoldFile, FoldOptions};
use tessera::{
    ChunkInfo, DType, Format, Metadata, Model, ReadOptions, Result, StoredChunk, TensorInfo,
    TensorSource, TensorView, VerifyOptions,
};

const SAMPLES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/interop-samples/fold/"
);

fn sample(name: &str) -> Vec<u8> {
    std::fs::read(format!("{SAMPLES}{name}")).unwrap()
}

fn convert(src: &dyn TensorSource, opts: &WriteOptions) -> (Vec<u8>, Vec<String>) {
    let p = prepare(src, Format::Fold, ConvertOptions::default()).unwrap();
    let mut out = Cursor::new(Vec::new());
    let r = write_to(Format::Fold, &p, &mut out, opts).unwrap();
    (out.into_inner(), r.notes)
}

fn stamped() -> WriteOptions {
    WriteOptions::default().timestamp(Some("2026-01-02T03:04:05Z".into()))
}

/// Each chunk as the file stores it: name → (header + payload + parity, index entry
/// values but the offset).
fn chunks(data: &[u8]) -> Vec<(String, Vec<u8>, String)> {
    let f = FoldFile::parse(data, &Default::default()).unwrap();
    f.entries()
        .iter()
        .map(|e| {
            let end = e.payload_off() + e.header.comp_len + u64::from(e.header.ecc_len);
            let bytes = data[e.offset as usize..end as usize].to_vec();
            let entry = format!("{:?} {:?} {}", e.header, e.sha256, e.ecc_algo);
            (e.name.clone(), bytes, entry)
        })
        .collect()
}

fn assert_same_chunks(a: &[u8], b: &[u8]) {
    let (ca, cb) = (chunks(a), chunks(b));
    assert_eq!(
        ca.iter().map(|c| &c.0).collect::<Vec<_>>(),
        cb.iter().map(|c| &c.0).collect::<Vec<_>>()
    );
    for (x, y) in ca.iter().zip(&cb) {
        assert!(x.1 == y.1, "chunk {:?}: stored bytes differ", x.0);
        assert_eq!(x.2, y.2, "chunk {:?}: index entry", x.0);
    }
}

/// pyfolds' files: every chunk (TSAV, JSON, NPZ0; zstd frames; 1.0.2's multi-block
/// parity, which is not our layout) comes out as stored, in the same order, and the
/// metadata with it. Before, NPZ0 became STEN chunks and every payload was re-encoded.
#[test]
fn pyfolds_files_are_rewritten_chunk_for_chunk() {
    for name in [
        "pyfolds102_save_fold_or_mind_MPJRDNeuron.fold",
        "pyfolds102_zstd.fold",
        "pyfolds102_none_rs16_multiblock_BROKEN_ECC.fold",
        "pyfolds102_none_rs16_single_block.fold",
        "pyfoldsHEAD_e45e9eb_none_rs16_multiblock.fold",
    ] {
        let data = sample(name);
        let src = tessera::open(&data[..], &ReadOptions::default()).unwrap();
        let (out, notes) = convert(src.as_ref(), &stamped());
        assert!(notes.is_empty(), "{name}: {notes:?}");
        assert_same_chunks(&data, &out);
        let back = tessera::open(&out[..], &ReadOptions::default()).unwrap();
        assert_eq!(back.metadata(), src.metadata(), "{name}");
        assert_eq!(back.tensor_infos(), src.tensor_infos(), "{name}");
    }
}

/// The NPZ0 chunk pyfolds' `read_nuclear_arrays` reads stays an NPZ0 chunk.
#[test]
fn nuclear_arrays_stay_one_npz0_chunk() {
    let data = sample("pyfolds102_save_fold_or_mind_MPJRDNeuron.fold");
    let src = tessera::open(&data[..], &ReadOptions::default()).unwrap();
    let (out, _) = convert(src.as_ref(), &stamped());
    let back = tessera::open(&out[..], &ReadOptions::default()).unwrap();
    let kinds: Vec<(&str, &str)> = (back.chunks().iter())
        .map(|c| (c.name.as_str(), c.kind.as_str()))
        .collect();
    assert!(kinds.contains(&("nuclear_arrays", "NPZ0")), "{kinds:?}");
    assert!(!kinds.iter().any(|k| k.1 == "STEN"), "{kinds:?}");
    assert_eq!(
        back.chunk("nuclear_arrays").unwrap(),
        src.chunk("nuclear_arrays").unwrap()
    );
}

fn model() -> Model {
    let mut m = Model::new();
    for (i, d) in [DType::F32, DType::BF16, DType::I64, DType::U8]
        .into_iter()
        .enumerate()
    {
        let n = 300 * (i + 1);
        let data: Vec<u8> = (0..n * d.size()).map(|x| (x * 7 + i) as u8).collect();
        let info = TensorInfo::dense(format!("t.{}", d.name()), d, vec![n as u64]);
        m.push(TensorView::dense(info, Cow::Owned(data)).unwrap())
            .unwrap();
    }
    m
}

fn ours(compression: Compression, ecc: Option<u8>) -> Vec<u8> {
    let opts = stamped()
        .compression(compression)
        .with(FoldOptions::default().ecc(ecc));
    convert(&model(), &opts).0
}

/// A file of ours rewritten with the same timestamp is the same file, whatever its
/// compression and parity (its STEN chunks are copied, not re-encoded).
#[test]
fn our_files_are_rewritten_identically() {
    for (c, e) in [
        (Compression::None, None),
        (Compression::Zstd(19), Some(8)),
        (Compression::Zstd(1), None),
    ] {
        let data = ours(c, e);
        let src = tessera::open(&data[..], &ReadOptions::default()).unwrap();
        let (out, notes) = convert(src.as_ref(), &stamped());
        assert!(notes.is_empty(), "{notes:?}");
        assert!(out == data, "{c:?} {e:?}");
    }
}

/// Asked for: `ecc` recomputes the parity over the same payload; `compression`
/// compresses the chunks stored raw (and leaves compressed ones); `recode` encodes
/// every chunk anew. Each is said in the notes; the tensors stay the same.
#[test]
fn new_parity_compression_and_recode_are_said() {
    let data = ours(Compression::None, Some(4));
    let src = tessera::open(&data[..], &ReadOptions::default()).unwrap();
    let before = chunks(&data);
    // New parity: payloads kept, parity of 16 bytes per block.
    let (out, notes) = convert(
        src.as_ref(),
        &stamped().with(FoldOptions::default().ecc(Some(16))),
    );
    assert_eq!(
        notes,
        ["4 chunks copied with their parity computed anew (ecc)"]
    );
    let f = FoldFile::parse(&out[..], &Default::default()).unwrap();
    for (e, (name, bytes, _)) in f.entries().iter().zip(&before) {
        assert_eq!(&e.name, name);
        assert_eq!(e.ecc_algo, "rs(16)");
        let (payload, parity) = f
            .stored(f.entries().iter().position(|x| x.name == e.name).unwrap())
            .unwrap();
        assert_eq!(&payload[..], &bytes[32..32 + payload.len()]);
        assert_eq!(
            parity.len() as u64,
            tessera::formats::fold::ecc::ecc_len(payload.len() as u64, 16)
        );
    }
    let back = tessera::open(&out[..], &ReadOptions::default()).unwrap();
    assert!(back.verify(&VerifyOptions::default()).is_ok());
    // Compression: raw chunks are compressed now, parity of the kind they had.
    let (out, notes) = convert(src.as_ref(), &stamped().compression(Compression::Zstd(3)));
    assert_eq!(notes, ["4 chunks stored raw in the source compressed"]);
    let f = FoldFile::parse(&out[..], &Default::default()).unwrap();
    assert!(f
        .entries()
        .iter()
        .all(|e| e.header.flags == 1 && e.ecc_algo == "rs(4)"));
    let back = tessera::open(&out[..], &ReadOptions::default()).unwrap();
    assert!(back.verify(&VerifyOptions::default()).is_ok());
    for t in src.tensor_infos() {
        assert_eq!(
            back.tensor(&t.name).unwrap().parts,
            src.tensor(&t.name).unwrap().parts
        );
    }
    // Recode: decoded and written as a fresh write would write them (no parity now).
    let zstd = ours(Compression::Zstd(3), Some(4));
    let zsrc = tessera::open(&zstd[..], &ReadOptions::default()).unwrap();
    let (out, _) = convert(
        zsrc.as_ref(),
        &stamped().with(FoldOptions::default().recode(true)),
    );
    assert!(out == ours(Compression::None, None));
}

/// A source that leaves one tensor out (as a selection would) and hands everything
/// else over from the FOLD file it wraps.
struct Without<'a> {
    inner: &'a dyn TensorSource,
    infos: Vec<TensorInfo>,
}

impl TensorSource for Without<'_> {
    fn metadata(&self) -> &Metadata {
        self.inner.metadata()
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        self.inner.tensor(name)
    }
    fn chunks(&self) -> &[ChunkInfo] {
        self.inner.chunks()
    }
    fn chunk(&self, name: &str) -> Result<Cow<'_, [u8]>> {
        self.inner.chunk(name)
    }
    fn source_format(&self) -> Option<Format> {
        self.inner.source_format()
    }
    fn chunk_stored(&self, name: &str) -> Result<Option<StoredChunk<'_>>> {
        self.inner.chunk_stored(name)
    }
}

/// A tensor chunk whose tensors are not all written as it holds them is not copied:
/// the tensors that are written go out as STEN chunks, and the note says which chunk
/// was rewritten and why; the other chunks are still copied.
#[test]
fn a_chunk_whose_tensor_is_left_out_is_rewritten_and_said() {
    let data = sample("pyfolds102_save_fold_or_mind_MPJRDNeuron.fold");
    let src = tessera::open(&data[..], &ReadOptions::default()).unwrap();
    let infos: Vec<TensorInfo> = (src.tensor_infos().iter())
        .filter(|t| t.name != "nuclear_arrays/theta")
        .cloned()
        .collect();
    let w = Without {
        inner: src.as_ref(),
        infos,
    };
    let (out, notes) = convert(&w, &stamped());
    assert_eq!(
        notes,
        ["chunk \"nuclear_arrays\" (NPZ0) rewritten, one STEN chunk per tensor: tensor \"nuclear_arrays/theta\" is not written"]
    );
    let back = tessera::open(&out[..], &ReadOptions::default()).unwrap();
    let names: Vec<&str> = back.chunks().iter().map(|c| c.name.as_str()).collect();
    assert!(!names.contains(&"nuclear_arrays"), "{names:?}");
    for a in ["N", "I", "W", "protection", "r_hat"] {
        let n = format!("nuclear_arrays/{a}");
        assert!(names.contains(&n.as_str()), "{names:?}");
        assert_eq!(
            back.tensor(&n).unwrap().parts,
            src.tensor(&n).unwrap().parts
        );
    }
    assert!(back.tensor("nuclear_arrays/theta").is_err());
    // The others are copied as stored.
    let (a, b) = (chunks(&data), chunks(&out));
    for name in ["torch_state", "llm_manifest", "metrics", "telemetry"] {
        let x = a.iter().find(|c| c.0 == name).unwrap();
        let y = b.iter().find(|c| c.0 == name).unwrap();
        assert!(x.1 == y.1, "{name}");
    }
}

/// The copy is checked: a stored payload whose bytes disagree with its CRC-32C is
/// refused, naming the chunk, rather than copied.
#[test]
fn a_stored_chunk_is_checked_before_it_is_copied() {
    let data = ours(Compression::None, None);
    let src = tessera::open(&data[..], &ReadOptions::default()).unwrap();
    struct Tampered<'a>(&'a dyn TensorSource);
    impl TensorSource for Tampered<'_> {
        fn metadata(&self) -> &Metadata {
            self.0.metadata()
        }
        fn tensor_infos(&self) -> &[TensorInfo] {
            self.0.tensor_infos()
        }
        fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
            self.0.tensor(name)
        }
        fn chunks(&self) -> &[ChunkInfo] {
            self.0.chunks()
        }
        fn chunk(&self, name: &str) -> Result<Cow<'_, [u8]>> {
            self.0.chunk(name)
        }
        fn source_format(&self) -> Option<Format> {
            self.0.source_format()
        }
        fn chunk_stored(&self, name: &str) -> Result<Option<StoredChunk<'_>>> {
            let mut s = self.0.chunk_stored(name)?.unwrap();
            let mut p = s.pieces[1].to_vec();
            let last = p.len() - 1;
            p[last] ^= 1;
            s.pieces[1] = Cow::Owned(p);
            Ok(Some(s))
        }
    }
    let t = Tampered(src.as_ref());
    let p = prepare(&t, Format::Fold, ConvertOptions::default()).unwrap();
    let mut out = Cursor::new(Vec::new());
    let e = write_to(Format::Fold, &p, &mut out, &stamped()).unwrap_err();
    assert_eq!(e.kind(), tessera::ErrorKind::Integrity, "{e}");
    assert!(e.to_string().contains("CRC-32C"), "{e}");
    assert!(e.to_string().contains("t.f32"), "{e}");
}
