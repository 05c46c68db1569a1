//! Bad zTensor input: the vectors in tests/data/ztensor (written by gen.py, not by our
//! writer) named by the error they must raise; every prefix of every vector; flipped
//! bytes. Never a panic, always a clear error of the right kind.

use std::path::PathBuf;

use tessera::formats::ztensor::ZtensorFile;
use tessera::{Container, ErrorKind, Limits, ReadOptions, Status, TensorSource};

fn dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ztensor"))
}

fn vectors(prefix: &str) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "zt"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .filter(|(n, _)| n.starts_with(prefix))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no vectors named {prefix}*");
    v
}

fn open(data: &[u8]) -> tessera::Result<ZtensorFile<'_>> {
    ZtensorFile::parse(data, &ReadOptions::default())
}

/// Opens, reads every tensor and verifies; returns the first error. Must never panic.
fn exercise(data: &[u8]) -> tessera::Result<()> {
    let f = open(data)?;
    let _ = f.verify(&Default::default());
    for info in f.tensor_infos() {
        f.tensor(&info.name)?;
    }
    Ok(())
}

fn expect_open_error(prefix: &str, kind: ErrorKind) {
    for (name, data) in vectors(prefix) {
        let e = open(&data).expect_err(&name);
        assert_eq!(e.kind(), kind, "{name}: {e}");
        assert_eq!(e.format(), Some(tessera::Format::Ztensor), "{name}: {e}");
        assert!(e.to_string().starts_with("ztensor: "), "{name}: {e}");
        // Through detection too.
        let e2 = tessera::open(&data, &ReadOptions::default()).err().unwrap();
        if name == "malformed-magic.zt" {
            assert_eq!(e2.kind(), ErrorKind::UnknownFormat, "{name}: {e2}");
        } else {
            assert_eq!(e2.kind(), kind, "{name}: {e2}");
        }
    }
}

#[test]
fn malformed_vectors_fail_to_open_as_malformed() {
    expect_open_error("malformed-", ErrorKind::Malformed);
}

#[test]
fn version_2_and_0_are_unsupported_versions() {
    expect_open_error("unsupported_version-", ErrorKind::UnsupportedVersion);
    let (_, data) = &vectors("unsupported_version-2.0")[0];
    let e = open(data).unwrap_err();
    assert!(e.to_string().contains("zTensor v2 is not supported"), "{e}");
}

#[test]
fn limit_vectors_exceed_limits() {
    expect_open_error("limit-", ErrorKind::LimitExceeded);
}

#[test]
fn specific_messages_say_what_and_where() {
    let get = |n: &str| vectors(n).remove(0).1;
    let e = open(&get("malformed-offset-past-file")).unwrap_err();
    assert!(e.to_string().contains("tensor \"t\""), "{e}");
    assert_eq!(e.offset(), Some(1 << 40), "{e}");
    let e = open(&get("malformed-duplicate-tensor")).unwrap_err();
    assert!(e.to_string().contains("duplicate tensor name \"t\""), "{e}");
    let e = open(&get("malformed-cbor-trailing")).unwrap_err();
    assert!(e.to_string().contains("trailing"), "{e}");
    let e = open(&get("malformed-dense-length")).unwrap_err();
    assert!(e.to_string().contains("needs 8"), "{e}");
    let e = open(&get("malformed-manifest-size-huge")).unwrap_err();
    assert!(e.to_string().contains("manifest size"), "{e}");
}

#[test]
fn read_malformed_vectors_open_but_fail_to_read_and_verify() {
    for (name, data) in vectors("read_malformed-") {
        let f = open(&data).unwrap_or_else(|e| panic!("{name}: {e}"));
        let e = f.tensor("t").expect_err(&name);
        assert_eq!(e.kind(), ErrorKind::Malformed, "{name}: {e}");
        assert!(e.to_string().contains("tensor \"t\""), "{name}: {e}");
        let r = f.verify(&Default::default());
        let failed: Vec<_> = r
            .failures()
            .map(|c| (c.subject.as_str(), c.layer.as_str()))
            .collect();
        assert_eq!(failed, [("tensor \"t\"", "structure")], "{name}");
    }
}

#[test]
fn digest_mismatch_is_reported_at_the_right_tensor() {
    for (name, data) in vectors("integrity-") {
        let bad = name
            .trim_end_matches(".zt")
            .rsplit('-')
            .next()
            .unwrap()
            .to_string();
        let f = open(&data).unwrap();
        // A checked read refuses the damaged tensor, naming the layer; the others read.
        for info in f.tensor_infos() {
            let r = f.tensor(&info.name);
            if info.name == bad {
                let e = r.err().unwrap();
                assert_eq!(e.kind(), ErrorKind::Integrity, "{name}: {e}");
                assert!(
                    e.to_string().contains(&format!("tensor {bad:?}"))
                        && (e.to_string().contains("crc32c") || e.to_string().contains("sha256")),
                    "{name}: {e}"
                );
            } else {
                r.unwrap();
            }
        }
        // Unchecked (`verify: false`), every tensor's bytes are handed out as stored.
        let unchecked = ReadOptions::default().verify(false);
        let u = ZtensorFile::parse(&data, &unchecked).unwrap();
        for info in u.tensor_infos() {
            u.tensor(&info.name).unwrap();
        }
        let r = f.verify(&Default::default());
        assert!(!r.is_ok(), "{name}");
        let failed: Vec<&str> = r.failures().map(|c| c.subject.as_str()).collect();
        assert_eq!(failed, [format!("tensor {bad:?}")], "{name}: {r:?}");
        // The other tensors' digests pass.
        let ok = r
            .checks
            .iter()
            .filter(|c| c.status == Status::Ok && !c.subject.contains(&format!("{bad:?}")))
            .count();
        assert!(ok >= usize::from(name.contains("bad")) * 2, "{name}: {r:?}");
    }
}

#[test]
fn every_prefix_of_every_vector_is_an_error_never_a_panic() {
    for (name, data) in vectors("") {
        // A v1.1 file cut just before its footer magic ends with the manifest size, as a
        // v1.0 file does: spec §6.1 reads it ("warn, proceed"), whole, with a warning
        // (ztensor_vectors::a_v11_manifest_without_the_footer_magic_reads_with_a_warning).
        let magic_cut = data.ends_with(b"ZTEN1000") && data.len() > 16;
        for n in 0..data.len() {
            let r = exercise(&data[..n]);
            if magic_cut && n == data.len() - 8 {
                let f = open(&data[..n]).unwrap();
                assert!(
                    f.warnings().iter().any(|w| w.contains("no footer magic")),
                    "{name}: {:?}",
                    f.warnings()
                );
                continue;
            }
            assert!(r.is_err(), "{name}: prefix of {n} bytes was accepted");
        }
    }
}

#[test]
fn flipped_bytes_never_panic() {
    for (name, data) in vectors("valid-") {
        for i in 0..data.len() {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut d = data.clone();
                d[i] ^= mask;
                // Any outcome but a panic or a hang; errors must carry the format.
                if let Err(e) = exercise(&d) {
                    assert!(!e.to_string().is_empty(), "{name}");
                }
            }
        }
    }
}

#[test]
fn flipped_data_bytes_under_a_digest_fail_verify_at_that_tensor() {
    let (_, data) = vectors("valid-dense").remove(0);
    let f = open(&data).unwrap();
    let comps = f.components("w").unwrap().to_vec();
    for k in 0..comps[0].length {
        let mut d = data.clone();
        d[(comps[0].offset + k) as usize] ^= 0x10;
        let f = open(&d).unwrap();
        let r = f.verify(&Default::default());
        let failed: Vec<(&str, &str)> = r
            .failures()
            .map(|c| (c.subject.as_str(), c.layer.as_str()))
            .collect();
        assert_eq!(failed, [("tensor \"w\"", "crc32c")]);
    }
}

#[test]
fn tight_limits_are_enforced() {
    let (_, data) = vectors("valid-dense").remove(0);
    let mut opts = ReadOptions::default().limits(Limits {
        max_index_bytes: 16,
        ..Limits::default()
    });
    let e = ZtensorFile::parse(&data, &opts).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    opts.limits = Limits {
        max_entries: 2,
        ..Limits::default()
    };
    assert_eq!(
        ZtensorFile::parse(&data, &opts).unwrap_err().kind(),
        ErrorKind::LimitExceeded
    );
    opts.limits = Limits {
        max_name_len: 2,
        ..Limits::default()
    };
    assert_eq!(
        ZtensorFile::parse(&data, &opts).unwrap_err().kind(),
        ErrorKind::LimitExceeded
    );
    // A zstd component of an unknown layout is bounded by max_decoded_bytes.
    let (_, data) = vectors("valid-other-layout").remove(0);
    opts.limits = Limits {
        max_decoded_bytes: 1,
        ..Limits::default()
    };
    let f = ZtensorFile::parse(&data, &opts).unwrap();
    let e = f.tensor("q").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
    assert!(e.to_string().contains("more than"), "{e}");
}

#[test]
fn nonzero_padding_is_a_verify_warning() {
    let (_, mut data) = vectors("valid-sparse").remove(0);
    let clean = open(&data).unwrap().verify(&Default::default());
    assert!(clean.warnings.is_empty(), "{:?}", clean.warnings);
    // The byte before the second component (at 128) is padding.
    data[127] = 0xAA;
    let r = open(&data).unwrap().verify(&Default::default());
    assert!(r.is_ok());
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(
        r.warnings[0].contains("non-zero padding"),
        "{:?}",
        r.warnings
    );
}

/// Minimal CBOR pieces, hand-written here (not our writer) for big hostile manifests.
fn cbor_head(major: u8, n: u64) -> Vec<u8> {
    let m = major << 5;
    match n {
        0..=23 => vec![m | n as u8],
        24..=0xff => vec![m | 24, n as u8],
        0x100..=0xffff => [vec![m | 25], (n as u16).to_be_bytes().to_vec()].concat(),
        0x1_0000..=0xffff_ffff => [vec![m | 26], (n as u32).to_be_bytes().to_vec()].concat(),
        _ => [vec![m | 27], n.to_be_bytes().to_vec()].concat(),
    }
}
fn cbor_text(s: &str) -> Vec<u8> {
    [cbor_head(3, s.len() as u64), s.as_bytes().to_vec()].concat()
}
fn file_with_manifest(m: &[u8]) -> Vec<u8> {
    [
        b"ZTEN1000".to_vec(),
        m.to_vec(),
        (m.len() as u64).to_le_bytes().to_vec(),
    ]
    .concat()
}

#[test]
fn huge_maps_are_linear_not_quadratic() {
    const N: u64 = 200_000;
    let mut m = cbor_head(5, 3);
    m.extend(cbor_text("version"));
    m.extend(cbor_text("1.0"));
    m.extend(cbor_text("attributes"));
    m.extend(cbor_head(5, N));
    for i in 0..N {
        m.extend(cbor_text(&format!("k{i:07}")));
        m.extend(cbor_text("v"));
    }
    m.extend(cbor_text("tensors"));
    m.extend(cbor_head(5, 1));
    m.extend(cbor_text("q"));
    m.extend(cbor_head(5, 4));
    for (k, v) in [("dtype", "uint8"), ("format", "packed")] {
        m.extend(cbor_text(k));
        m.extend(cbor_text(v));
    }
    m.extend(cbor_text("shape"));
    m.extend(cbor_head(4, 0));
    m.extend(cbor_text("components"));
    m.extend(cbor_head(5, N));
    for i in 0..N {
        m.extend(cbor_text(&format!("c{i:07}")));
        m.extend(cbor_head(5, 4));
        m.extend(cbor_text("offset"));
        m.extend(cbor_head(0, 8));
        m.extend(cbor_text("length"));
        m.extend(cbor_head(0, 0));
        // A distinct encoding and digest algorithm each.
        m.extend(cbor_text("encoding"));
        m.extend(cbor_text(&format!("e{i}")));
        m.extend(cbor_text("digest"));
        m.extend(cbor_text(&format!("a{i}:00")));
    }
    let data = file_with_manifest(&m);
    let t = std::time::Instant::now();
    let f = open(&data).unwrap();
    assert_eq!(f.metadata().len(), N as usize);
    assert_eq!(f.components("q").unwrap().len(), N as usize);
    // One warning per unaligned component would be 200,000 lines: they are capped.
    assert!(f.warnings().len() <= 33, "{}", f.warnings().len());
    assert_eq!(f.tensor_infos()[0].storage.encoding, "mixed");
    assert_eq!(f.tensor("q").unwrap_err().kind(), ErrorKind::Unsupported);
    let r = f.verify(&Default::default());
    assert_eq!(
        r.checks
            .iter()
            .filter(|c| c.status == Status::NotChecked)
            .count(),
        // one per unknown digest algorithm, plus the structure of the unreadable tensor
        N as usize + 1
    );
    // Generous: quadratic behaviour would take minutes.
    assert!(t.elapsed().as_secs() < 30, "{:?}", t.elapsed());

    // The same with one duplicate attribute key at the end: malformed, named.
    let dup = cbor_text(&format!("k{:07}", N - 1));
    let last = cbor_text(&format!("k{:07}", 0));
    let pos = m
        .windows(dup.len())
        .position(|w| w == dup.as_slice())
        .unwrap();
    let mut m2 = m.clone();
    m2[pos..pos + dup.len()].copy_from_slice(&last);
    let e = open(&file_with_manifest(&m2)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Malformed);
    assert!(e.to_string().contains("duplicate key \"k0000000\""), "{e}");
}
