//! AERO bad input: vectors from an independent generator (`tests/data/aero/gen.py`),
//! hostile header/TOC fields patched into the original's samples, every truncation and
//! every flipped byte. Clear errors, never a panic, never an unbounded allocation.

use tessera::formats::aero::AeroFile;
use tessera::{Container, ErrorKind, Layout, Limits, TensorSource, Value, VerifyOptions};

const SAMPLES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/interop-samples/aero/"
);
const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/aero/");
const PLAIN: &str = "aerotensor_HEAD630e8a4_write_model_plain.aero";
const IHSH: &str = "aerotensor_f1d395d_write_model_ihsh.aero";
const PHSH: &str = "aerotensor_f1d395d_write_model_ihsh_phsh_page16.aero";

fn sample(name: &str) -> Vec<u8> {
    std::fs::read(format!("{SAMPLES}{name}")).unwrap()
}

fn vectors() -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(DATA)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "aero"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    assert!(v.len() >= 25, "run gen.py");
    v
}

fn open(data: &[u8]) -> tessera::Result<Box<dyn Container + '_>> {
    tessera::open(data, &Default::default())
}

#[test]
fn generated_vectors_give_the_outcome_their_name_states() {
    for (name, data) in vectors() {
        let kind = |k: ErrorKind| {
            let e = open(&data).err().unwrap_or_else(|| panic!("{name} opened"));
            assert_eq!(e.kind(), k, "{name}: {e}");
            assert!(e.to_string().starts_with("aero: "), "{name}: {e}");
        };
        match name.split('-').next().unwrap() {
            "valid" => {
                let f = open(&data).unwrap();
                let r = f.verify(&VerifyOptions::default());
                assert!(r.is_ok(), "{name}: {r:?}");
            }
            "verify" => {
                let f = open(&data).unwrap_or_else(|e| panic!("{name}: {e}"));
                let r = f.verify(&VerifyOptions::default());
                assert!(!r.is_ok(), "{name}: {r:?}");
            }
            "malformed" => kind(ErrorKind::Malformed),
            "limit" => kind(ErrorKind::LimitExceeded),
            "unsupported" => kind(ErrorKind::Unsupported),
            "integrity" => kind(ErrorKind::Integrity),
            other => panic!("unknown outcome {other}"),
        }
    }
}

#[test]
fn specific_failures_say_what_and_where() {
    let v: std::collections::HashMap<_, _> = vectors().into_iter().collect();
    let msg = |n: &str| open(&v[n]).err().unwrap().to_string();
    assert!(
        msg("malformed-tidx-data-off-overflow.aero").contains("exceeds shard 0"),
        "{}",
        msg("malformed-tidx-data-off-overflow.aero")
    );
    assert!(msg("malformed-tidx-map32-bomb.aero").contains("longer than"));
    assert!(
        msg("limit-metadata-ulen-3gib.aero").contains("MAX_METADATA_ULEN")
            || msg("limit-metadata-ulen-3gib.aero").contains("limit")
    );
    assert!(msg("malformed-zstd-output-over-ulen.aero").contains("more than the declared 10"));
    assert!(msg("integrity-tidx-hash.aero").contains("chunk \"tensors\" (TIDX)"));
    assert!(msg("malformed-tidx-duplicate-name.aero").contains("duplicate tensor name \"a\""));
    // verify failures name the layer and subject.
    let f = open(&v["verify-fail-phsh-bad-page1.aero"]).unwrap();
    let r = f.verify(&VerifyOptions::default());
    let failed: Vec<_> = r
        .failures()
        .map(|c| (c.subject.as_str(), c.layer.as_str()))
        .collect();
    assert_eq!(failed, [("page 1 of \"weights.shard0\"", "phsh")]);
    let only_a = f.verify(&VerifyOptions::default().tensors(vec!["a".into()]));
    assert!(only_a.is_ok(), "a lives on page 0: {only_a:?}");
    let f = open(&v["verify-fail-ihsh-covers-past-eof.aero"]).unwrap();
    let r = f.verify(&VerifyOptions::default().control_only(true));
    assert!(r
        .failures()
        .next()
        .unwrap()
        .detail
        .as_ref()
        .unwrap()
        .contains("within the file"));
    let f = open(&v["verify-fail-ihsh-covers-header-only.aero"]).unwrap();
    let r = f.verify(&VerifyOptions::default().control_only(true));
    let d = r.failures().next().unwrap().detail.clone().unwrap();
    assert!(d.contains("not the whole control region"), "{d}");
    let f = open(&v["verify-fail-hash-b3.aero"]).unwrap();
    let r = f.verify(&VerifyOptions::default().tensors(vec!["a".into()]));
    assert_eq!(
        r.failures().map(|c| c.layer.as_str()).collect::<Vec<_>>(),
        ["hash_b3"]
    );
}

#[test]
fn independent_multishard_file_reads_with_packed_tensor_and_unknown_chunks() {
    let data = std::fs::read(format!("{DATA}valid-multishard-packed-unknown-chunks.aero")).unwrap();
    let f = AeroFile::open(&data, &Limits::default()).unwrap();
    let m = f.metadata();
    assert_eq!(m.get("source_format"), Some(&Value::Str("gguf".into())));
    assert!(m.get("quant_descriptors").unwrap().as_list().is_some());
    let a = f.tensor("a").unwrap();
    assert!(a.is_borrowed());
    assert_eq!(
        a.data().unwrap(),
        [1.5f32.to_le_bytes(), (-2f32).to_le_bytes()].concat()
    );
    assert_eq!(
        f.tensor("b").unwrap().data().unwrap(),
        (-7i64).to_le_bytes()
    );
    assert_eq!(f.locations()[2].shard_id, 1);
    let q = f.tensor("q").unwrap();
    assert_eq!(
        q.info.layout,
        Layout::Other("ggml_q4_0".into()),
        "named by its descriptor"
    );
    assert_eq!(q.info.attrs.get("quant_id"), Some(&Value::Int(0)));
    assert_eq!(q.info.attrs.get("ggml_type"), Some(&Value::Int(2)));
    assert_eq!(q.parts[0].bytes.as_ref(), (0u8..18).collect::<Vec<_>>());
    let p = f.tensor("p").unwrap();
    assert_eq!(p.info.layout, Layout::Other("packed".into()));
    assert!(p.info.attrs.is_empty());
    assert_eq!(p.parts[0].bytes.as_ref(), b"xyz");
    assert_eq!(f.tensor_infos()[0].storage.digests.len(), 1, "hash_b3 kept");
    let kinds: Vec<_> = f
        .chunks()
        .iter()
        .map(|c| (c.kind.as_str(), c.holds_tensors))
        .collect();
    assert!(kinds.contains(&("XTRA", false)) && kinds.contains(&("ZZZZ", false)));
    assert!(Container::warnings(&f)
        .iter()
        .any(|w| w.contains("ZZZZ") && w.contains("not marked optional")));
    assert_eq!(f.chunk("extra.bin").unwrap().as_ref(), b"opaque payload");
    assert!(f.tensor_checked("a").is_ok());

    // Rewritten by us: packed tensor, quant attrs and opaque chunks survive.
    let mut out = std::io::Cursor::new(Vec::new());
    tessera::convert::write_to(tessera::Format::Aero, &f, &mut out, &Default::default()).unwrap();
    let out = out.into_inner();
    let g = AeroFile::open(&out, &Limits::default()).unwrap();
    assert_eq!(g.metadata(), f.metadata());
    assert_eq!(
        g.tensor("q").unwrap(),
        f.tensor("q").unwrap().into_owned().clone_info_only(&g)
    );
    assert_eq!(
        g.tensor("p").unwrap(),
        f.tensor("p").unwrap().into_owned().clone_info_only(&g)
    );
    assert_eq!(g.chunk("required.bin").unwrap().as_ref(), b"not optional");
    // Same descriptors: meta.json comes out byte for byte as the independent writer's.
    assert_eq!(g.chunk("meta.json").unwrap(), f.chunk("meta.json").unwrap());
    assert!(g.verify(&VerifyOptions::default()).is_ok());
}

#[test]
fn unaligned_tensors_read_and_are_reported() {
    let data = std::fs::read(format!("{DATA}valid-unaligned-original-packing.aero")).unwrap();
    let f = AeroFile::open(&data, &Limits::default()).unwrap();
    assert_eq!(
        f.tensor("a").unwrap().data().unwrap(),
        [1.5f32.to_le_bytes(), (-2f32).to_le_bytes()].concat()
    );
    let w = Container::warnings(&f);
    assert!(
        w.iter()
            .any(|w| w.contains("1 tensors are not aligned") && w.contains("\"a\"")),
        "{w:?}"
    );
    // Rewritten by us, the f32 moves to offset 4 and the warning goes away.
    let mut out = std::io::Cursor::new(Vec::new());
    tessera::convert::write_to(tessera::Format::Aero, &f, &mut out, &Default::default()).unwrap();
    let out = out.into_inner();
    let g = AeroFile::open(&out, &Limits::default()).unwrap();
    assert_eq!(g.locations()[1].data_off, 4);
    assert!(Container::warnings(&g).is_empty());
    assert_eq!(
        g.tensor("a").unwrap().data().unwrap(),
        f.tensor("a").unwrap().data().unwrap()
    );
    assert!(g.verify(&VerifyOptions::default()).is_ok());
}

#[test]
fn a_compressed_shard_reads_decoded_not_borrowed() {
    let data = std::fs::read(format!("{DATA}valid-wtsh-zstd.aero")).unwrap();
    let f = AeroFile::open(&data, &Limits::default()).unwrap();
    let a = f.tensor("a").unwrap();
    assert!(!a.is_borrowed(), "decoded bytes are owned");
    assert_eq!(
        a.data().unwrap(),
        [1.5f32.to_le_bytes(), (-2f32).to_le_bytes()].concat()
    );
    assert_eq!(
        f.tensor("b").unwrap().data().unwrap(),
        (-7i64).to_le_bytes()
    );
    assert_eq!(f.tensor_infos()[0].storage.encoding, "zstd");
    assert!(Container::warnings(&f)
        .iter()
        .any(|w| w.contains("compressed; the spec says never")));
    assert!(f.verify(&VerifyOptions::default()).is_ok());
}

trait CloneInfo {
    fn clone_info_only(self, g: &AeroFile<'_>) -> tessera::TensorView<'static>;
}
impl CloneInfo for tessera::TensorView<'static> {
    fn clone_info_only(mut self, g: &AeroFile<'_>) -> tessera::TensorView<'static> {
        // Storage (offsets) differs between files; everything else must match.
        self.info.storage = g
            .tensor_infos()
            .iter()
            .find(|t| t.name == self.info.name)
            .unwrap()
            .storage
            .clone();
        self
    }
}

fn patch(data: &[u8], at: usize, bytes: &[u8]) -> Vec<u8> {
    let mut d = data.to_vec();
    d[at..at + bytes.len()].copy_from_slice(bytes);
    d
}

#[test]
fn hostile_header_and_toc_fields() {
    let s = sample(PHSH);
    let e0 = 112; // first TOC entry
    let cases: Vec<(&str, Vec<u8>, ErrorKind)> = vec![
        (
            "version 0.2",
            patch(&s, 6, &2u16.to_le_bytes()),
            ErrorKind::UnsupportedVersion,
        ),
        (
            "header_size",
            patch(&s, 8, &95u32.to_le_bytes()),
            ErrorKind::Malformed,
        ),
        (
            "toc_offset past EOF",
            patch(&s, 12, &u64::MAX.to_le_bytes()),
            ErrorKind::Malformed,
        ),
        (
            "toc_offset in header",
            patch(&s, 12, &8u64.to_le_bytes()),
            ErrorKind::Malformed,
        ),
        (
            "toc_length huge",
            patch(&s, 20, &(u64::MAX - 50).to_le_bytes()),
            ErrorKind::Malformed,
        ),
        (
            "toc_length short",
            patch(&s, 20, &100u64.to_le_bytes()),
            ErrorKind::Malformed,
        ),
        (
            "toc_length < 16",
            patch(&s, 20, &8u64.to_le_bytes()),
            ErrorKind::Malformed,
        ),
        (
            "string table past EOF",
            patch(&s, 36, &5000u64.to_le_bytes()),
            ErrorKind::Malformed,
        ),
        (
            "string table > 512 MiB",
            patch(&s, 36, &(600u64 << 20).to_le_bytes()),
            ErrorKind::LimitExceeded,
        ),
        (
            "file_flags",
            patch(&s, 44, &1u64.to_le_bytes()),
            ErrorKind::Malformed,
        ),
        ("header reserved", patch(&s, 90, &[1]), ErrorKind::Malformed),
        (
            "entry_count u32::MAX",
            patch(&s, 96, &u32::MAX.to_le_bytes()),
            ErrorKind::LimitExceeded,
        ),
        (
            "entry_count 7",
            patch(&s, 96, &7u32.to_le_bytes()),
            ErrorKind::Malformed,
        ),
        ("TOC reserved0", patch(&s, 100, &[1]), ErrorKind::Malformed),
        ("TOC reserved1", patch(&s, 104, &[1]), ErrorKind::Malformed),
        (
            "chunk_offset u64::MAX",
            patch(&s, e0 + 8, &u64::MAX.to_le_bytes()),
            ErrorKind::Malformed,
        ),
        (
            "chunk_length u64::MAX",
            patch(&s, e0 + 16, &u64::MAX.to_le_bytes()),
            ErrorKind::Malformed,
        ),
        (
            "ulen != length",
            patch(&s, e0 + 24, &300u64.to_le_bytes()),
            ErrorKind::Malformed,
        ),
        (
            "name_off past table",
            patch(&s, e0 + 32, &u32::MAX.to_le_bytes()),
            ErrorKind::Malformed,
        ),
        (
            "name_len past table",
            patch(&s, e0 + 36, &200u32.to_le_bytes()),
            ErrorKind::Malformed,
        ),
        (
            "entry reserved0",
            patch(&s, e0 + 40, &[1]),
            ErrorKind::Malformed,
        ),
        ("bad magic", patch(&s, 0, b"AERX"), ErrorKind::UnknownFormat),
        (
            "TIDX ulen 3 GiB",
            patch(&s, e0 + 3 * 80 + 24, &(3u64 << 30).to_le_bytes()),
            ErrorKind::LimitExceeded,
        ),
        (
            "TIDX ulen 1",
            patch(&s, e0 + 3 * 80 + 24, &1u64.to_le_bytes()),
            ErrorKind::Malformed,
        ),
        (
            "name not UTF-8",
            patch(&s, 592, &[0xff]),
            ErrorKind::Malformed,
        ),
    ];
    for (what, data, kind) in cases {
        match open(&data) {
            Ok(_) => panic!("{what}: opened"),
            Err(e) => assert_eq!(e.kind(), kind, "{what}: {e}"),
        }
    }
}

#[test]
fn every_truncation_is_an_error() {
    let mut all: Vec<Vec<u8>> = [PLAIN, IHSH, PHSH].iter().map(|n| sample(n)).collect();
    all.extend(
        vectors()
            .into_iter()
            .filter(|(n, _)| n.starts_with("valid"))
            .map(|(_, d)| d),
    );
    for data in all {
        for len in 0..data.len() {
            let cut = &data[..len];
            if let Ok(f) = open(cut) {
                panic!(
                    "prefix of {len} bytes opened ({} tensors)",
                    f.tensor_infos().len()
                );
            }
        }
    }
}

/// Every chunk decodes to the same bytes in both files.
fn same_content(a: &[u8], b: &[u8]) -> bool {
    let (fa, fb) = (
        AeroFile::open(a, &Limits::default()).unwrap(),
        AeroFile::open(b, &Limits::default()).unwrap(),
    );
    (0..fa.toc().len()).all(|i| fa.chunk_payload(i).unwrap() == fb.chunk_payload(i).unwrap())
}

#[test]
fn every_flipped_byte_is_caught_when_ihsh_covers_the_control_region() {
    for name in [IHSH, PHSH] {
        let s = sample(name);
        for i in 0..s.len() {
            for bit in [0x01u8, 0x80] {
                let mut d = s.clone();
                d[i] ^= bit;
                let caught = match open(&d) {
                    Err(_) => true,
                    Ok(f) => {
                        let r = f.verify(&VerifyOptions::default());
                        // zstd ignores a few bits of its stream: such a flip changes no
                        // decoded byte, which is all the spec's BLAKE3 covers.
                        !r.is_ok() || !r.warnings.is_empty() || same_content(&s, &d)
                    }
                };
                assert!(caught, "{name}: byte {i} ^ {bit:#x} went unnoticed");
            }
        }
    }
    // Without IHSH nothing covers the uuid, but no flip panics and every payload flip is
    // caught.
    let s = sample(PLAIN);
    let payloads = AeroFile::open(&s, &Limits::default())
        .unwrap()
        .payloads_start() as usize;
    for i in 0..s.len() {
        let mut d = s.clone();
        d[i] ^= 0x10;
        let caught = match open(&d) {
            Err(_) => true,
            Ok(f) => {
                let r = f.verify(&VerifyOptions::default());
                !r.is_ok() || !r.warnings.is_empty() || same_content(&s, &d)
            }
        };
        assert!(caught || i < payloads, "byte {i}");
    }
}

mod random {
    use super::*;
    use proptest::prelude::*;

    fn exercise(data: &[u8]) {
        if let Ok(f) = AeroFile::open(data, &Limits::default()) {
            for t in f.tensor_infos() {
                let _ = f.tensor(&t.name);
                let _ = f.tensor_checked(&t.name);
            }
            for i in 0..f.toc().len() {
                let _ = f.chunk_payload(i);
            }
            let _ = f.verify(&VerifyOptions::default());
            let _ = f.verify(&VerifyOptions::default().control_only(true));
            let names = f.tensor_infos().iter().map(|t| t.name.clone()).collect();
            let _ = f.verify(&VerifyOptions::default().tensors(names));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

        /// Random byte mutations of every sample and generated vector never panic.
        #[test]
        fn mutations_never_panic(
            which in 0usize..64,
            muts in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
            cut in any::<prop::sample::Index>(),
            truncate in any::<bool>(),
        ) {
            let mut all: Vec<Vec<u8>> = [PLAIN, IHSH, PHSH].iter().map(|n| sample(n)).collect();
            all.extend(vectors().into_iter().map(|(_, d)| d));
            let mut d = all[which % all.len()].clone();
            for (at, b) in muts {
                let i = at.index(d.len());
                d[i] = b;
            }
            if truncate {
                d.truncate(cut.index(d.len()));
            }
            exercise(&d);
        }
    }
}
