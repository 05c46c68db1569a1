//! GPTRS bad input: the vectors of `tests/data/gptrs/gen.py` (named by the error they
//! must raise), every prefix of the interop samples, and every flipped bit of them.

use std::path::PathBuf;

use tessera::formats::gptrs::GptrsFile;
use tessera::{ErrorKind, Limits, ReadOptions, Status, TensorSource};

const SAMPLES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/interop-samples/gptrs"
);
const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/gptrs");

fn samples() -> Vec<(String, Vec<u8>)> {
    ["py_exporter_v2.gptrs", "py_exporter_v2.gptrsten"]
        .iter()
        .map(|n| {
            let p = PathBuf::from(SAMPLES).join(n);
            (n.to_string(), std::fs::read(&p).unwrap())
        })
        .collect()
}

fn vectors(prefix: &str) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(VECTORS)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            n.starts_with(prefix) && !n.ends_with(".py")
        })
        .map(|p| {
            (
                p.file_name().unwrap().to_str().unwrap().to_string(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no vectors named {prefix}*");
    v
}

#[test]
fn vectors_raise_the_error_their_name_says() {
    for (prefix, kind) in [
        ("malformed-", ErrorKind::Malformed),
        ("limit-", ErrorKind::LimitExceeded),
        ("version-", ErrorKind::UnsupportedVersion),
    ] {
        for (name, data) in vectors(prefix) {
            let e = GptrsFile::parse(&data, &Limits::default())
                .err()
                .unwrap_or_else(|| panic!("{name} opened"));
            assert_eq!(e.kind(), kind, "{name}: {e}");
            // Through the dispatcher too, with the format named first.
            let e = tessera::open(&data, &ReadOptions::default()).err().unwrap();
            assert!(
                e.to_string().starts_with("gptrs"),
                "{name}: message lacks the format: {e}"
            );
        }
    }
}

#[test]
fn error_messages_say_what_and_where() {
    let cases = [
        (
            "malformed-duplicate-name.gptrs",
            "duplicate tensor name \"a\"",
        ),
        ("malformed-overlap.gptrs", "overlaps tensor \"a\""),
        (
            "malformed-byte-len-vs-shape.gptrs",
            "byte_len 4 does not match f32 [2]",
        ),
        (
            "malformed-offset-into-header.gptrs",
            "offset_abs 20 points into the header or index",
        ),
        (
            "malformed-trailing-index-bytes.gptrs",
            "3 trailing bytes after the last index entry",
        ),
        (
            "malformed-offset-past-eof.gptrs",
            "runs past the end of the file",
        ),
        (
            "malformed-offset-overflow.gptrs",
            "runs past the end of the file",
        ),
        ("malformed-dtype-tag.gptrs", "unknown dtype_tag 9"),
        ("malformed-non-ascii-checkpoint-name.gptrs", "not ASCII"),
        ("malformed-name-not-utf8.gptrsten", "not UTF-8"),
        (
            "malformed-count-too-large-for-index.gptrs",
            "tensor_count 100000 needs at least",
        ),
        (
            "malformed-config-len-past-eof.gptrs",
            "config_len is 5000 but only",
        ),
        (
            "malformed-index-len-past-eof.gptrs",
            "index_len is 1048576 but only",
        ),
        (
            "malformed-config-not-json.gptrs",
            "config_json is not valid JSON",
        ),
        (
            "malformed-config-not-modelconfig.gptrs",
            "invalid ModelConfig",
        ),
        ("malformed-shape-overflow.gptrs", "overflows"),
        ("malformed-rank-past-index.gptrs", "truncated: dims"),
        ("limit-tensor-count.gptrs", "entry count is 4294967295"),
        (
            "limit-config-len.gptrs",
            "config_len is 4294967295, over the limit",
        ),
        (
            "limit-index-len.gptrsten",
            "index_len is 4294967280, over the limit",
        ),
        ("limit-rank.gptrs", "rank is 100"),
        ("limit-config-depth.gptrs", "nests 101 deep"),
        ("version-1.gptrs", "version 1 (v1"),
        ("version-3.gptrsten", "version 3 is not supported"),
        ("version-bincode-index.gptrs", "bincode variant of v2"),
    ];
    for (name, want) in cases {
        let data = std::fs::read(PathBuf::from(VECTORS).join(name)).unwrap();
        let e = GptrsFile::parse(&data, &Limits::default()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(want), "{name}: {msg:?} lacks {want:?}");
        assert!(e.offset().is_some(), "{name}: no offset in {msg:?}");
    }
    // Entry errors name the tensor or the entry.
    let data = std::fs::read(PathBuf::from(VECTORS).join("malformed-dtype-tag.gptrs")).unwrap();
    let e = GptrsFile::parse(&data, &Limits::default()).unwrap_err();
    assert_eq!(e.subject(), Some("tensor \"a\""));
}

#[test]
fn every_prefix_of_the_samples_is_an_error() {
    for (name, data) in samples() {
        for n in 0..data.len() {
            let e = GptrsFile::parse(&data[..n], &Limits::default())
                .err()
                .unwrap_or_else(|| panic!("{name}: prefix of {n} bytes opened"));
            assert_eq!(e.kind(), ErrorKind::Malformed, "{name}[..{n}]: {e}");
        }
        assert!(GptrsFile::parse(&data, &Limits::default()).is_ok());
    }
}

#[test]
fn every_prefix_of_the_vectors_is_an_error_never_a_panic() {
    for (name, data) in vectors("ok-") {
        for n in 0..data.len() {
            // Trailing bytes after the data are not part of any tensor: cutting them is
            // fine. Everything else must fail.
            if let Ok(f) = GptrsFile::parse(&data[..n], &Limits::default()) {
                assert!(name.contains("tail"), "{name}: prefix of {n} bytes opened");
                let end = f
                    .entries()
                    .iter()
                    .map(|e| e.offset_abs + e.byte_len)
                    .max()
                    .unwrap();
                assert!(n as u64 >= end);
            }
        }
    }
}

#[test]
fn flipped_bits_never_panic_and_are_caught_where_checkable() {
    for (name, data) in samples() {
        let f = GptrsFile::parse(&data, &Limits::default()).unwrap();
        let data_start = f.data_start() as usize;
        let mut caught = 0;
        for i in 0..data.len() {
            for bit in 0..8 {
                let mut d = data.clone();
                d[i] ^= 1 << bit;
                match GptrsFile::parse(&d, &Limits::default()) {
                    Err(_) => caught += 1,
                    Ok(f) => {
                        use tessera::Container;
                        // Every tensor still reads within bounds.
                        for info in f.tensor_infos() {
                            let t = f.tensor(&info.name).unwrap();
                            assert!(t.is_borrowed());
                            t.validate().unwrap();
                        }
                        let rep = f.verify(&Default::default());
                        if i >= data_start {
                            // Data carries no checksum: the report says so.
                            assert!(rep
                                .checks
                                .iter()
                                .any(|c| c.layer == "data" && c.status == Status::NotChecked));
                        }
                    }
                }
            }
        }
        assert!(caught > 0, "{name}: no flipped bit was caught");
    }
}

#[test]
fn a_stored_base_id_flip_is_an_integrity_failure_for_that_tensor() {
    use tessera::Container;
    // The checkpoint sample stores base_id 0; write the real one into "b" and flip it.
    let (_, mut data) = samples().remove(0);
    // "b" entry: index at 8+4+4+55+4 = 75, count 4 bytes, name_len 4, name 1 → base_id at 84.
    let id = tessera::formats::gptrs::base_id("b");
    data[84..100].copy_from_slice(&id);
    let f = GptrsFile::parse(&data, &Limits::default()).unwrap();
    let rep = f.verify(&Default::default());
    assert!(rep.is_ok());
    let b = rep
        .checks
        .iter()
        .find(|c| c.subject == "tensor \"b\"")
        .unwrap();
    assert_eq!(b.status, Status::Ok);
    data[90] ^= 0x10;
    let f = GptrsFile::parse(&data, &Limits::default()).unwrap();
    let rep = f.verify(&Default::default());
    let failed: Vec<_> = rep.failures().collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].subject, "tensor \"b\"");
    assert_eq!(failed[0].layer, "base_id");
    assert!(f.warnings().iter().any(|w| w.contains("base_id")));
    let e = f.check_base_ids().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity);
}

#[test]
fn integrity_vectors_open_but_fail_verify() {
    use tessera::Container;
    for (name, data) in vectors("integrity-") {
        let f = GptrsFile::parse(&data, &Limits::default()).unwrap();
        let rep = f.verify(&Default::default());
        assert!(!rep.is_ok(), "{name}");
        assert_eq!(rep.failures().next().unwrap().subject, "tensor \"b\"");
        assert_eq!(f.check_base_ids().unwrap_err().kind(), ErrorKind::Integrity);
    }
}

#[test]
fn tight_limits_refuse_before_allocating() {
    let (_, data) = samples().remove(0);
    let limits = Limits {
        max_entries: 2,
        ..Limits::default()
    };
    let e = GptrsFile::parse(&data, &limits).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded);
    let limits = Limits {
        max_name_len: 5,
        ..Limits::default()
    };
    let e = GptrsFile::parse(&data, &limits).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded);
    assert!(e.to_string().contains("name length is 6"), "{e}");
    let limits = Limits {
        max_index_bytes: 100,
        ..Limits::default()
    };
    let e = GptrsFile::parse(&data, &limits).unwrap_err();
    assert!(e.to_string().contains("index_len is 188"), "{e}");
}

/// A checked read (the default of `tessera::open`) refuses the tensor whose stored
/// base_id is wrong, as gpt.rs refuses the file; the other tensors still read, and
/// `verify: false` reads the damaged one too.
#[test]
fn a_wrong_base_id_fails_the_checked_read_of_that_tensor() {
    for (name, data) in vectors("integrity-") {
        let f = tessera::open(&data[..], &ReadOptions::default()).unwrap();
        let e = f.tensor("b").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Integrity, "{name}: {e}");
        assert!(e.to_string().contains("base_id"), "{name}: {e}");
        for info in f.tensor_infos().iter().filter(|i| i.name != "b") {
            f.tensor(&info.name).unwrap();
        }
        let f = tessera::open(&data[..], &ReadOptions::default().verify(false)).unwrap();
        f.tensor("b").unwrap();
    }
}
