//! FOLD bad input: truncations, flipped bytes everywhere, hostile lengths and payloads.
//! Every case is a clear error (or a failed check), never a panic or a huge allocation.

use std::borrow::Cow;
use std::io::{Cursor, Write};

use tessera::convert::{Compression, WriteOptions};
use tessera::formats::fold::{FoldFile, FoldWriter};
use tessera::{
    ChunkInfo, DType, ErrorKind, Format, Map, Model, ReadOptions, TensorInfo, TensorSource,
    TensorView, VerifyOptions,
};

fn small_model() -> Model {
    let mut m = Model::new();
    let w: Vec<u8> = (0..24u8).collect();
    m.push(
        TensorView::dense(
            TensorInfo::dense("w", DType::F32, vec![2, 3]),
            Cow::Owned(w),
        )
        .unwrap(),
    )
    .unwrap();
    m.push(
        TensorView::dense(
            TensorInfo::dense("b", DType::I64, vec![2]),
            Cow::Owned(vec![7; 16]),
        )
        .unwrap(),
    )
    .unwrap();
    m.push_chunk(
        ChunkInfo {
            name: "notes".into(),
            kind: "JSON".into(),
            len: None,
            storage: Default::default(),
            holds_tensors: false,
            copies: None,
        },
        br#"{"k":"v"}"#.to_vec(),
    )
    .unwrap();
    m.metadata.insert("model_type", "tiny");
    m.metadata.insert("lr", 1e-5);
    m
}

fn write(m: &Model, compression: Compression, ecc: Option<u8>) -> Vec<u8> {
    let opts = WriteOptions::default()
        .compression(compression)
        .with(tessera::formats::fold::FoldOptions::default().ecc(ecc))
        .timestamp(Some("2026-01-02T03:04:05Z".into()));
    let mut cur = Cursor::new(Vec::new());
    tessera::convert::write_to(Format::Fold, m, &mut cur, &opts).unwrap();
    cur.into_inner()
}

/// Opens, verifies and reads everything; returns whether verify passed and, if so,
/// whether every read gave the original content.
fn exercise(data: &[u8], original: &Model) -> Option<bool> {
    let f = tessera::open(data, &ReadOptions::default()).ok()?;
    let r = f.verify(&VerifyOptions::default());
    let mut same = f.metadata() == original.metadata();
    for t in original.tensor_infos() {
        match f.tensor(&t.name) {
            Ok(v) => same &= v.parts == original.tensor(&t.name).unwrap().parts,
            Err(_) => same = false,
        }
    }
    same &= f.tensor_infos().len() == original.tensor_infos().len();
    for c in original.chunks() {
        same &= f.chunk(&c.name).ok().as_deref() == Some(original.chunk(&c.name).unwrap().as_ref());
    }
    Some(!r.is_ok() || same)
}

#[test]
fn every_prefix_is_an_error() {
    let m = small_model();
    for (comp, ecc) in [(Compression::None, None), (Compression::Zstd(3), Some(16))] {
        let data = write(&m, comp, ecc);
        for n in 0..data.len() {
            let e = tessera::open(&data[..n], &ReadOptions::default());
            assert!(e.is_err(), "prefix of {n} bytes opened");
            let k = e.err().unwrap().kind();
            assert!(
                matches!(
                    k,
                    ErrorKind::Malformed | ErrorKind::UnknownFormat | ErrorKind::LimitExceeded
                ),
                "prefix {n}: {k:?}"
            );
        }
        assert!(tessera::open(&data, &ReadOptions::default()).is_ok());
    }
}

#[test]
fn every_flipped_byte_is_caught_repaired_or_harmless() {
    let m = small_model();
    for (comp, ecc) in [(Compression::None, None), (Compression::Zstd(3), Some(16))] {
        let data = write(&m, comp, ecc);
        let mut opened = 0;
        for i in 0..data.len() {
            for x in [0x01u8, 0xff] {
                let mut bad = data.clone();
                bad[i] ^= x;
                // When verify passes, every read must give the original content.
                if let Some(ok) = exercise(&bad, &m) {
                    opened += 1;
                    assert!(ok, "byte {i} ^ {x:#x}: verify passed but content differs");
                }
            }
        }
        assert!(opened > 0);
    }
}

#[test]
fn single_flips_in_payloads_with_ecc_are_repaired() {
    let m = small_model();
    let data = write(&m, Compression::None, Some(8));
    let f = FoldFile::parse(&data, &Default::default()).unwrap();
    for (i, e) in f.entries().iter().enumerate() {
        let off = e.payload_off() as usize;
        let (comp, parity) = f.stored(i).unwrap();
        let len = comp.len() + parity.len();
        for j in 0..len {
            let mut bad = data.clone();
            bad[off + j] ^= 0xa5;
            let g = tessera::open(&bad, &ReadOptions::default()).unwrap();
            let r = g.verify(&VerifyOptions::default());
            // A flipped parity byte is reported (the payload is intact); a flipped payload
            // byte is repaired.
            if j < comp.len() {
                assert!(r.is_ok(), "{} byte {j}: {r:?}", e.name);
            } else {
                assert!(r.failures().all(|c| c.layer == "reed-solomon"), "{r:?}");
            }
            assert_eq!(exercise(&bad, &m), Some(true));
        }
    }
}

#[test]
fn damaged_chunk_headers_are_reported_and_rewritten_from_the_index() {
    let m = small_model();
    let data = write(&m, Compression::Zstd(3), None);
    let f = FoldFile::parse(&data, &Default::default()).unwrap();
    for (i, e) in f.entries().iter().enumerate() {
        for at in [0usize, 5, 12, 20, 26, 31] {
            let mut bad = data.clone();
            bad[e.offset as usize + at] ^= 0x40;
            let g = tessera::open(&bad, &ReadOptions::default()).unwrap();
            let r = g.verify(&VerifyOptions::default());
            let failed: Vec<_> = r.failures().map(|c| c.layer.clone()).collect();
            assert_eq!(failed, ["chunk header"], "chunk {i} byte {at}");
            assert_eq!(exercise(&bad, &m), Some(true));
            let mut out = Vec::new();
            let rep =
                tessera::formats::fold::repair(&bad, &ReadOptions::default(), &mut out).unwrap();
            assert_eq!(rep[i].status, "header rewritten");
            assert_eq!(out, data, "chunk {i} byte {at}");
        }
    }
}

fn patch_header(data: &mut [u8], index_off: u64, index_len: u64) {
    data[12..20].copy_from_slice(&index_off.to_be_bytes());
    data[20..28].copy_from_slice(&index_len.to_be_bytes());
}

#[test]
fn hostile_header_values() {
    let data = write(&small_model(), Compression::None, None);
    let open = |d: &[u8]| {
        tessera::open(d, &ReadOptions::default())
            .err()
            .map(|e| (e.kind(), e.to_string()))
    };
    let mut d = data.clone();
    patch_header(&mut d, 28, u64::MAX);
    let (k, msg) = open(&d).unwrap();
    assert_eq!(k, ErrorKind::LimitExceeded);
    assert!(msg.contains("MAX_INDEX_SIZE"), "{msg}");
    patch_header(&mut d, u64::MAX - 3, 100);
    assert_eq!(open(&d).unwrap().0, ErrorKind::Malformed);
    patch_header(&mut d, 0, 0); // an unfinished file
    let (k, msg) = open(&d).unwrap();
    assert_eq!(k, ErrorKind::Malformed);
    assert!(msg.contains("index_off 0"), "{msg}");
    let mut d = data.clone();
    d[11] = 27;
    assert!(open(&d).unwrap().1.contains("header_len"));
    assert_eq!(open(b"FOLDv1\0\0").unwrap().0, ErrorKind::Malformed);
}

/// Rewrites the index of a file (same chunks) with `edit` applied to its JSON.
fn with_index(data: &[u8], edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let off = u64::from_be_bytes(data[12..20].try_into().unwrap()) as usize;
    let mut j: serde_json::Value = serde_json::from_slice(&data[off..]).unwrap();
    edit(&mut j);
    let text = serde_json::to_vec(&j).unwrap();
    let mut out = data[..off].to_vec();
    out.extend_from_slice(&text);
    patch_header(&mut out, off as u64, text.len() as u64);
    out
}

#[test]
fn hostile_index_entries() {
    let data = write(&small_model(), Compression::None, None);
    let kind = |d: &[u8]| {
        tessera::open(d, &ReadOptions::default())
            .err()
            .map(|e| (e.kind(), e.to_string()))
    };
    // Lengths beyond MAX_CHUNK_SIZE, in the index and the chunk header alike.
    let d = with_index(&data, |j| j["chunks"][0]["comp_len"] = (1u64 << 40).into());
    let mut d2 = d.clone();
    d2[28 + 16..28 + 24].copy_from_slice(&(1u64 << 40).to_be_bytes());
    assert_eq!(kind(&d2).unwrap().0, ErrorKind::LimitExceeded);
    // Index and chunk header disagreeing.
    let (k, msg) = kind(&d).unwrap();
    assert_eq!(k, ErrorKind::LimitExceeded, "{msg}");
    let d = with_index(&data, |j| j["chunks"][0]["uncomp_len"] = 5.into());
    let f = tessera::open(&d, &ReadOptions::default()).unwrap();
    assert!(
        f.warnings()
            .iter()
            .any(|w| w.contains("uncomp_len 9 (index 5)")),
        "{:?}",
        f.warnings()
    );
    let r = f.verify(&VerifyOptions::default());
    let failed: Vec<_> = r
        .failures()
        .map(|c| (c.subject.as_str(), c.layer.as_str()))
        .collect();
    assert_eq!(
        failed,
        [
            ("chunk \"notes\"", "chunk header"),
            ("chunk \"notes\"", "uncomp_len")
        ]
    );
    // The payload does not prove the index right: repair refuses.
    let e =
        tessera::formats::fold::repair(&d, &ReadOptions::default(), &mut Vec::new()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity);
    // Offsets into the index, overlapping chunks, u64 overflow.
    let d = with_index(&data, |j| {
        j["chunks"][1]["offset"] = j["chunks"][0]["offset"].clone()
    });
    assert_eq!(kind(&d).unwrap().0, ErrorKind::Malformed);
    let d = with_index(&data, |j| j["chunks"][0]["offset"] = u64::MAX.into());
    assert!(kind(&d).unwrap().1.contains("not inside the chunk region"));
    let d = with_index(&data, |j| j["chunks"][0]["offset"] = 5.into());
    assert_eq!(kind(&d).unwrap().0, ErrorKind::Malformed);
    // Missing fields, wrong types, duplicates, wrong format.
    let d = with_index(&data, |j| {
        j["chunks"][0].as_object_mut().unwrap().remove("sha256");
    });
    assert!(kind(&d).unwrap().1.contains("sha256"));
    let d = with_index(&data, |j| j["chunks"][0]["offset"] = "28".into());
    assert_eq!(kind(&d).unwrap().0, ErrorKind::Malformed);
    let d = with_index(&data, |j| {
        j["chunks"][1]["name"] = j["chunks"][0]["name"].clone()
    });
    assert!(kind(&d).unwrap().1.contains("duplicate"));
    let d = with_index(&data, |j| j["format"] = "mind".into());
    assert!(kind(&d).unwrap().1.contains("format"));
    let d = with_index(&data, |j| j["chunks"] = 3.into());
    assert_eq!(kind(&d).unwrap().0, ErrorKind::Malformed);
    // Unknown version: a warning. Unknown ECC: not usable, reported, data still read.
    let d = with_index(&data, |j| j["version"] = "9.9.9".into());
    let f = tessera::open(&d, &ReadOptions::default()).unwrap();
    assert!(f.warnings().iter().any(|w| w.contains("9.9.9")));
    // pyfolds HEAD keyed hashes: accepted, reported "not checked" (no key).
    let d = with_index(&data, |j| {
        let keyed = format!("hmac-sha256:{}", "ab".repeat(32));
        j["chunks"][0]["sha256"] = keyed.clone().into();
        j["metadata"]["chunk_hashes"]["notes"] = keyed.into();
    });
    let f = tessera::open(&d, &ReadOptions::default()).unwrap();
    assert_eq!(f.chunk("notes").unwrap().as_ref(), br#"{"k":"v"}"#);
    let r = f.verify(&VerifyOptions::default());
    assert!(r.checks.iter().any(|c| c.subject == "chunk \"notes\""
        && c.layer == "sha256"
        && c.status == tessera::Status::NotChecked));
    // The edited chunk_hashes no longer match the manifest.
    let failed: Vec<_> = r.failures().map(|c| c.layer.clone()).collect();
    assert_eq!(failed, ["manifest_hash"]);
    // Metadata stripped of its hashes: verify fails.
    let d = with_index(&data, |j| j["metadata"] = serde_json::json!({}));
    let r = tessera::open(&d, &ReadOptions::default())
        .unwrap()
        .verify(&VerifyOptions::default());
    let failed: Vec<_> = r.failures().map(|c| c.layer.clone()).collect();
    assert_eq!(failed, ["manifest_hash", "chunk_hashes"]);
}

/// A file with one chunk of `ctype` holding `payload` verbatim (valid CRC/SHA).
fn one_chunk(ctype: &[u8; 4], flags_zstd: bool, payload: &[u8]) -> Vec<u8> {
    let comp = if flags_zstd {
        Compression::Zstd(3)
    } else {
        Compression::None
    };
    let mut w = FoldWriter::new(Cursor::new(Vec::new()), comp, None).unwrap();
    w.add_chunk("t", *ctype, &[payload]).unwrap();
    w.finish(&Map::new(), 0.0).unwrap().into_inner()
}

fn sten(header: &str, data: &[u8]) -> Vec<u8> {
    let mut p = (header.len() as u64).to_le_bytes().to_vec();
    p.extend_from_slice(header.as_bytes());
    p.extend_from_slice(data);
    p
}

#[test]
fn hostile_sten_payloads() {
    let cases: Vec<Vec<u8>> = vec![
        u64::MAX.to_le_bytes().to_vec(),
        vec![1, 2, 3],
        sten("[1,2]", b""),
        sten(
            r#"{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,800]}}"#,
            &[0; 8],
        ),
        sten(
            r#"{"t":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}}"#,
            &[0; 8],
        ),
        sten(
            r#"{"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}"#,
            &[0; 8],
        ),
        sten(
            r#"{"t":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}"#,
            &[0; 2],
        ),
        sten(
            r#"{"__metadata__":{"tessera.layout":"sparse_csr","tessera.dtype":"f32","tessera.shape":"[2,3]"},"values":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"indices":{"dtype":"U64","shape":[1],"data_offsets":[4,12]},"indptr":{"dtype":"U64","shape":[3],"data_offsets":[12,36]}}"#,
            &[
                [0u8; 4].as_slice(),
                &9u64.to_le_bytes(),
                &0u64.to_le_bytes(),
                &1u64.to_le_bytes(),
                &1u64.to_le_bytes(),
            ]
            .concat(),
        ),
    ];
    for (n, payload) in cases.iter().enumerate() {
        for z in [false, true] {
            let d = one_chunk(b"STEN", z, payload);
            // Reading: the open (or the tensor read) fails; never a file with the tensor
            // silently missing.
            match tessera::open(&d, &ReadOptions::default()) {
                Err(e) => assert!(
                    matches!(e.kind(), ErrorKind::Malformed | ErrorKind::Unsupported),
                    "case {n}: {e}"
                ),
                Ok(f) => assert!(f.tensor("t").is_err(), "case {n}"),
            }
            let f = tessera::open(&d, &audit()).unwrap();
            let err = f.tensor("t").unwrap_err();
            assert!(
                matches!(err.kind(), ErrorKind::Malformed | ErrorKind::Unsupported),
                "case {n}: {err}"
            );
            let r = f.verify(&VerifyOptions::default());
            if f.tensor_infos().is_empty() {
                // Damage fails verify; a dtype we do not read is "not checked".
                let want = if err.kind() == ErrorKind::Unsupported {
                    tessera::Status::NotChecked
                } else {
                    tessera::Status::Failed
                };
                assert!(
                    r.checks
                        .iter()
                        .any(|c| c.layer == "payload" && c.status == want),
                    "case {n}: {r:?}"
                );
                assert!(!f.warnings().is_empty());
            }
        }
    }
}

#[test]
fn zstd_that_lies_about_its_size_is_bounded() {
    // A frame of 64 MiB of zeros declared (in header and index) as 10 bytes.
    let big = vec![0u8; 64 << 20];
    let mut w = FoldWriter::new(Cursor::new(Vec::new()), Compression::Zstd(3), None).unwrap();
    w.add_chunk("z", *b"RAW0", &[&big]).unwrap();
    let good = w.finish(&Map::new(), 0.0).unwrap().into_inner();
    let d = with_index(&good, |j| j["chunks"][0]["uncomp_len"] = 10.into());
    let mut d = d;
    d[28 + 8..28 + 16].copy_from_slice(&10u64.to_be_bytes());
    let f = tessera::open(&d, &ReadOptions::default()).unwrap();
    let e = f.chunk("z").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Malformed);
    assert!(e.to_string().contains("more than the declared 10"), "{e}");
    let r = f.verify(&VerifyOptions::default());
    let z = r.failures().find(|c| c.layer == "zstd").unwrap();
    assert!(
        z.detail
            .as_deref()
            .unwrap()
            .contains("more than uncomp_len (10 bytes)"),
        "{z:?}"
    );
    // And a frame declared larger than it is.
    let d = with_index(&good, |j| {
        j["chunks"][0]["uncomp_len"] = ((64u64 << 20) + 1).into()
    });
    let mut d = d;
    d[28 + 8..28 + 16].copy_from_slice(&((64u64 << 20) + 1).to_be_bytes());
    let f = tessera::open(&d, &ReadOptions::default()).unwrap();
    assert_eq!(f.chunk("z").unwrap_err().kind(), ErrorKind::Malformed);
}

#[test]
fn npz_payloads_are_never_unpickled() {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let npy = |descr: &str, shape: &str, data: &[u8]| {
        let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        while (10 + h.len() + 1) % 64 != 0 {
            h.push(' ');
        }
        h.push('\n');
        let mut v = b"\x93NUMPY\x01\x00".to_vec();
        v.extend_from_slice(&(h.len() as u16).to_le_bytes());
        v.extend_from_slice(h.as_bytes());
        v.extend_from_slice(data);
        v
    };
    zip.start_file("ok.npy", opts).unwrap();
    zip.write_all(&npy(">i4", "(2,)", &[0, 0, 0, 1, 0, 0, 0, 2]))
        .unwrap();
    zip.start_file("obj.npy", opts).unwrap();
    zip.write_all(&npy("|O", "(1,)", b"\x80\x04cos\nsystem\n"))
        .unwrap();
    let bytes = zip.finish().unwrap().into_inner();
    let d = one_chunk(b"NPZ0", true, &bytes);
    // The object array makes the chunk unreadable as tensors: a reading open refuses
    // the file (its tensors would be missing), an auditing one reports it.
    let e = tessera::open(&d, &ReadOptions::default()).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    let f = tessera::open(&d, &audit()).unwrap();
    assert!(
        f.warnings().iter().any(|w| w.contains("object arrays")),
        "{:?}",
        f.warnings()
    );
    assert_eq!(f.tensor("t/obj").unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(f.tensor("t").unwrap_err().kind(), ErrorKind::Unsupported);
    let r = f.verify(&VerifyOptions::default());
    assert!(r.is_ok(), "an unsupported array type is not damage: {r:?}");
    assert!(r
        .checks
        .iter()
        .any(|c| c.layer == "payload" && c.status == tessera::Status::NotChecked));
    // Without it, big-endian arrays come out little-endian.
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    zip.start_file("ok.npy", opts).unwrap();
    zip.write_all(&npy(">i4", "(2,)", &[0, 0, 0, 1, 0, 0, 0, 2]))
        .unwrap();
    let d = one_chunk(b"NPZ0", false, &zip.finish().unwrap().into_inner());
    let f = tessera::open(&d, &ReadOptions::default()).unwrap();
    assert_eq!(
        f.tensor("t/ok").unwrap().data().unwrap(),
        &[1, 0, 0, 0, 2, 0, 0, 0]
    );
}

/// FOLD reads NPZ0 chunks with the npy module, which reorders Fortran-order arrays
/// (FOLD's own parser used to report them as unsupported).
#[test]
fn npz_fortran_order_arrays_are_read_in_c_order() {
    let mut h = "{'descr': '<u2', 'fortran_order': True, 'shape': (2, 3), }".to_string();
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    npy.extend_from_slice(&(h.len() as u16).to_le_bytes());
    npy.extend_from_slice(h.as_bytes());
    // [[1, 2, 3], [4, 5, 6]] stored column by column.
    for v in [1u16, 4, 2, 5, 3, 6] {
        npy.extend_from_slice(&v.to_le_bytes());
    }
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    zip.start_file("f.npy", opts).unwrap();
    zip.write_all(&npy).unwrap();
    let d = one_chunk(b"NPZ0", true, &zip.finish().unwrap().into_inner());
    let f = tessera::open(&d, &ReadOptions::default()).unwrap();
    let t = f.tensor("t/f").unwrap();
    assert_eq!(t.info.shape, [2, 3]);
    let want: Vec<u8> = (1u16..=6).flat_map(u16::to_le_bytes).collect();
    assert_eq!(t.data().unwrap(), &want[..]);
    assert!(f.verify(&VerifyOptions::default()).is_ok());
}

/// Open to inspect or verify: damaged tensor chunks are reported, not fatal.
fn audit() -> ReadOptions {
    ReadOptions::default().audit(true)
}
