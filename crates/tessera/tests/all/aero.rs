//! AERO v0.1: the original's samples read with the values MANIFEST.md states, our writer
//! rebuilds them byte for byte, IHSH/PHSH verification.

use crate::common::aero as common;
use common::*;

use tessera::convert::WriteOptions;
use tessera::formats::aero::AeroFile;
use tessera::{DType, ErrorKind, Format, Limits, Status, VerifyOptions};

#[test]
fn samples_read_with_the_manifest_values() {
    for (name, kinds) in [
        (PLAIN, vec!["MJSN", "MMSG", "TIDX", "WTSH"]),
        (IHSH, vec!["IHSH", "MJSN", "MMSG", "TIDX", "WTSH"]),
        (PHSH, vec!["IHSH", "MJSN", "MMSG", "TIDX", "WTSH", "PHSH"]),
    ] {
        let data = sample(name);
        let f = tessera::open(&data, &Default::default()).unwrap();
        assert_eq!(f.format(), Format::Aero);
        assert_eq!(f.version(), "0.1");
        assert_eq!(
            f.chunks()
                .iter()
                .map(|c| c.kind.as_str())
                .collect::<Vec<_>>(),
            kinds,
            "{name}"
        );
        let meta: Vec<(&str, String)> = f
            .metadata()
            .iter()
            .map(|(k, v)| (k, v.display_short()))
            .collect();
        assert_eq!(
            meta,
            [
                ("architecture", "linear".to_string()),
                ("model_name", "m".to_string())
            ]
        );
        let infos = f.tensor_infos();
        assert_eq!(infos.len(), 2);
        assert_eq!(
            (
                infos[0].name.as_str(),
                infos[0].dtype,
                infos[0].shape.clone()
            ),
            ("linear.weight", DType::F32, vec![2, 3])
        );
        assert_eq!(
            (
                infos[1].name.as_str(),
                infos[1].dtype,
                infos[1].shape.clone()
            ),
            ("linear.bias", DType::F32, vec![2])
        );
        let w = f.tensor("linear.weight").unwrap();
        assert!(w.is_borrowed(), "zero-copy view");
        assert_eq!(f32s(w.data().unwrap()), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        let b = f.tensor("linear.bias").unwrap();
        assert!(b.is_borrowed());
        assert_eq!(f32s(b.data().unwrap()), [0.5, -0.5]);
        // The view points straight into the file bytes.
        let off = infos[0].storage.offset.unwrap() as usize;
        assert_eq!(w.data().unwrap().as_ptr(), data[off..].as_ptr());

        let r = f.verify(&VerifyOptions::default());
        assert!(r.is_ok(), "{name}: {r:?}");
        assert_eq!(layer_status(&r, "blake3").len(), kinds.len());
        assert!(r.warnings.is_empty(), "{name}: {:?}", r.warnings);
        let control = f.verify(&VerifyOptions::default().control_only(true));
        let want = if name == PLAIN {
            Status::NotChecked
        } else {
            Status::Ok
        };
        assert_eq!(layer_status(&control, "ihsh"), [want], "{name}");
        assert_eq!(control.checks.len(), 1);
        if name == PHSH {
            assert_eq!(layer_status(&r, "phsh"), [Status::Ok]);
        }
    }
}

#[test]
fn our_writer_rebuilds_every_sample_byte_for_byte() {
    let m = manifest_model();
    let plain = write(&m, &fixed(WriteOptions::default()));
    assert_eq!(plain, sample(PLAIN));
    let ihsh = write(
        &m,
        &fixed(
            WriteOptions::default()
                .with(tessera::formats::aero::AeroOptions::default().control_integrity(true)),
        ),
    );
    assert_eq!(ihsh, sample(IHSH));
    let phsh = write(
        &m,
        &fixed(
            WriteOptions::default().with(
                tessera::formats::aero::AeroOptions::default()
                    .control_integrity(true)
                    .page_hashes(Some(16)),
            ),
        ),
    );
    assert_eq!(phsh, sample(PHSH));
}

#[test]
fn aero_to_aero_is_byte_exact_for_every_sample() {
    for (name, opts) in [
        (PLAIN, WriteOptions::default()),
        (
            IHSH,
            WriteOptions::default()
                .with(tessera::formats::aero::AeroOptions::default().control_integrity(true)),
        ),
        (
            PHSH,
            WriteOptions::default().with(
                tessera::formats::aero::AeroOptions::default()
                    .control_integrity(true)
                    .page_hashes(Some(16)),
            ),
        ),
    ] {
        let data = sample(name);
        let f = AeroFile::open(&data, &Limits::default()).unwrap();
        let p = tessera::convert::prepare(&f, Format::Aero, Default::default()).unwrap();
        assert_eq!(write(&p, &fixed(opts)), data, "{name}");
    }
}

#[test]
fn a_flipped_byte_in_one_page_is_caught_only_by_tensors_on_that_page() {
    // Sample pages are 16 bytes: linear.weight = shard bytes 0..24 (pages 0, 1),
    // linear.bias = 24..32 (page 1 only). Flip a byte of page 0.
    let mut data = sample(PHSH);
    let f = AeroFile::open(&data, &Limits::default()).unwrap();
    let shard = f
        .toc()
        .iter()
        .find(|c| c.name == "weights.shard0")
        .unwrap()
        .entry
        .chunk_offset as usize;
    drop(f);
    data[shard + 3] ^= 0x40;
    let f = tessera::open(&data, &Default::default()).unwrap();
    let only = |n: &str| VerifyOptions::default().tensors(vec![n.into()]);
    let w = f.verify(&only("linear.weight"));
    assert!(!w.is_ok());
    let failed: Vec<_> = w
        .failures()
        .map(|c| (c.subject.clone(), c.layer.clone()))
        .collect();
    assert_eq!(
        failed,
        [(
            "page 0 of \"weights.shard0\"".to_string(),
            "phsh".to_string()
        )]
    );
    let b = f.verify(&only("linear.bias"));
    assert!(b.is_ok(), "{b:?}");
    assert_eq!(layer_status(&b, "phsh"), [Status::Ok]);
    assert!(b
        .checks
        .iter()
        .any(|c| c.detail.as_deref() == Some("pages 1..2 of 2 (16-byte pages)")));
    // The full verification catches it twice: the shard's BLAKE3 and page 0.
    let full = f.verify(&VerifyOptions::default());
    assert_eq!(full.failures().count(), 2);
    // And the control region is intact.
    assert!(f
        .verify(&VerifyOptions::default().control_only(true))
        .is_ok());
}

#[test]
fn tensor_checked_reads_through_the_pages_it_touches() {
    let m = manifest_model();
    let mut data = write(
        &m,
        &WriteOptions::default()
            .with(tessera::formats::aero::AeroOptions::default().page_hashes(Some(16))),
    );
    let f = AeroFile::open(&data, &Limits::default()).unwrap();
    let shard = f
        .toc()
        .iter()
        .find(|c| c.name == "weights.shard0")
        .unwrap()
        .entry
        .chunk_offset as usize;
    assert!(f.tensor_checked("linear.bias").is_ok());
    drop(f);
    data[shard + 30] ^= 1; // page 1: both tensors touch it
    let f = AeroFile::open(&data, &Limits::default()).unwrap();
    let e = f.tensor_checked("linear.bias").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity);
    assert!(e.to_string().contains("page 1"), "{e}");
    assert!(f.tensor_checked("linear.weight").is_err());
    assert!(
        f.tensor("linear.weight").is_ok(),
        "plain reads hash nothing"
    );
}

#[test]
fn control_verification_catches_a_toc_change_that_keeps_the_file_valid() {
    let mut data = sample(IHSH);
    // TOC entry 1 (MJSN) chunk_flags: set CHUNK_IS_MMAP_CRITICAL. Still a valid file.
    data[112 + 80 + 4] |= 0x2;
    let f = tessera::open(&data, &Default::default()).unwrap();
    let r = f.verify(&VerifyOptions::default().control_only(true));
    assert_eq!(layer_status(&r, "ihsh"), [Status::Failed]);
    // Changing only a hash field does not touch the control digest (it is zeroed)...
    let mut data = sample(IHSH);
    data[112 + 80 + 48] ^= 1; // MJSN's hash
    assert_eq!(
        tessera::open(&data, &Default::default())
            .err()
            .map(|e| e.kind()),
        Some(ErrorKind::Integrity),
        "...but the metadata hash is checked at open"
    );
}
