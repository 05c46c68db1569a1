//! Page manifests (`tessera::pages`): the pages of a file the safetensors package wrote
//! equal the blake3 package's digests of its tensors' bytes (tests/data/pages, gen.py);
//! a manifest survives a conversion; a damaged page is found and named, and only it; a
//! hostile or altered manifest is refused; a signature covers a manifest.

use std::path::{Path, PathBuf};

use tessera::identity::model_id;
use tessera::pages::PageManifest;
use tessera::signing::key::SecretKey;
use tessera::signing::SignedManifest;
use tessera::{ConvertOptions, Format, ReadOptions, WriteOptions};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pages")
}

fn manifest_of(path: &Path, page: u64) -> PageManifest {
    let opened = tessera::open_path(path, &ReadOptions::default()).unwrap();
    PageManifest::compute(opened.container(), page, &mut |_| {}).unwrap()
}

fn expected() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(data().join("expected.json")).unwrap()).unwrap()
}

#[test]
fn the_pages_of_a_safetensors_file_are_the_blake3_packages_digests() {
    let path = data().join("model.safetensors");
    let m = manifest_of(&path, 4096);
    let want = expected();
    let tensors = want["tensors"].as_object().unwrap();
    assert_eq!(m.tensors.len(), tensors.len());
    for (name, e) in tensors {
        let t = m.get(name).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(t.bytes, e["bytes"].as_u64().unwrap(), "{name}");
        let pages: Vec<String> = t.pages.iter().map(|d| hex(&d.0)).collect();
        let want: Vec<&str> = e["pages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        assert_eq!(pages, want, "{name}");
    }
    // The manifest carries the content identity and each tensor's digest.
    let opened = tessera::open_path(&path, &ReadOptions::default()).unwrap();
    let id = model_id(opened.container(), false).unwrap();
    assert_eq!(m.id, id.root);
    for t in &id.tensors {
        assert_eq!(m.get(&t.name).unwrap().id, *t);
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn a_manifest_reads_back_and_serves_every_conversion_of_the_model() {
    let path = data().join("model.safetensors");
    let m = manifest_of(&path, 4096);
    let text = m.to_json().unwrap();
    let back = PageManifest::parse(text.as_bytes(), "model.pages").unwrap();
    assert_eq!(back, m);
    assert_eq!(back.digest(), m.digest());
    let opened = tessera::open_path(&path, &ReadOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (format, name) in [
        (Format::Ztensor, "m.zt"),
        (Format::Aero, "m.aero"),
        (Format::Npy, "m.npz"),
    ] {
        let out = dir.path().join(name);
        let format = Format::from_path(&out).unwrap_or(format);
        tessera::convert::convert_file(
            opened.container(),
            format,
            &out,
            ConvertOptions::default().drop_metadata(true),
            &WriteOptions::default(),
        )
        .unwrap();
        assert_eq!(manifest_of(&out, 4096), m, "{name}");
        let converted = tessera::open_path(&out, &ReadOptions::default()).unwrap();
        back.matches(converted.container()).unwrap();
        let mut report = tessera::VerifyReport::default();
        back.verify(converted.container(), &mut report);
        assert!(report.is_ok(), "{name}: {report:?}");
    }
}

#[test]
fn a_damaged_page_fails_its_check_naming_tensor_and_page_and_no_other_page_does() {
    let path = data().join("model.safetensors");
    let m = manifest_of(&path, 4096);
    let dir = tempfile::tempdir().unwrap();
    // Byte 9000 of the tensor: page 2.
    let bad = damaged(dir.path(), "layers.0.w", 9000);
    let opened = tessera::open_path(&bad, &ReadOptions::default()).unwrap();
    let view = tessera::TensorSource::tensor(opened.container(), "layers.0.w").unwrap();
    let all = &view.parts[0].bytes;
    for page in 0..5u64 {
        let range = m.widen("layers.0.w", page * 4096 + 10..page * 4096 + 11);
        assert_eq!(range.start, page * 4096);
        assert_eq!(range.end, ((page + 1) * 4096).min(20000));
        let r = m.check(
            "layers.0.w",
            range.clone(),
            &all[range.start as usize..range.end as usize],
        );
        if page == 2 {
            let e = r.unwrap_err();
            assert_eq!(e.kind(), tessera::ErrorKind::Integrity);
            let msg = e.to_string();
            assert!(
                msg.contains("layers.0.w") && msg.contains("page 2"),
                "{msg}"
            );
        } else {
            r.unwrap();
        }
    }
    // A range across pages 1..3 fails too; bytes not on page boundaries are refused.
    let wide = m.widen("layers.0.w", 5000..13000);
    assert_eq!(wide, 4096..16384);
    assert!(m
        .check(
            "layers.0.w",
            wide.clone(),
            &all[wide.start as usize..wide.end as usize]
        )
        .is_err());
    assert!(m.check("layers.0.w", 10..4096, &all[10..4096]).is_err());
    // Verifying the whole model names the one tensor.
    let mut report = tessera::VerifyReport::default();
    m.verify(opened.container(), &mut report);
    let failed: Vec<&str> = report.failures().map(|c| c.subject.as_str()).collect();
    assert_eq!(failed, ["tensor \"layers.0.w\""], "{report:?}");
}

#[test]
fn a_manifest_for_another_model_is_refused_before_any_page_is_read() {
    let m = manifest_of(&data().join("model.safetensors"), 4096);
    let other =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/safetensors/mixed.safetensors");
    let opened = tessera::open_path(&other, &ReadOptions::default()).unwrap();
    let e = m.matches(opened.container()).unwrap_err().to_string();
    assert!(e.contains("another model"), "{e}");
    // A tensor the manifest does not list cannot be checked.
    assert!(m.check("nope", 0..0, &[]).is_err());
}

#[test]
fn hostile_or_altered_manifests_are_refused_saying_what() {
    let m = manifest_of(&data().join("model.safetensors"), 4096);
    let good: serde_json::Value = serde_json::from_str(&m.to_json().unwrap()).unwrap();
    type Change = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: Vec<(&str, Change)> = vec![
        ("type", Box::new(|v| v["type"] = "tessera-pages/9".into())),
        ("power of two", Box::new(|v| v["page_size"] = 12288.into())),
        ("power of two", Box::new(|v| v["page_size"] = 1024.into())),
        (
            "pages listed",
            Box::new(|v| {
                v["tensors"][2]["pages"].as_array_mut().unwrap().pop();
            }),
        ),
        (
            "pages listed",
            Box::new(|v| v["tensors"][2]["bytes"] = 1.into()),
        ),
        (
            "64 hex",
            Box::new(|v| v["tensors"][2]["pages"][0] = "zz".into()),
        ),
        (
            "64 hex",
            Box::new(|v| {
                let p = v["tensors"][2]["pages"][0].as_str().unwrap().to_string();
                v["tensors"][2]["pages"][0] = format!("blake3:{p}").into();
            }),
        ),
        (
            "name order",
            Box::new(|v| {
                v["tensors"].as_array_mut().unwrap().swap(0, 1);
            }),
        ),
        (
            "name order",
            Box::new(|v| {
                let first = v["tensors"][0].clone();
                v["tensors"].as_array_mut().unwrap().insert(0, first);
            }),
        ),
        (
            "altered",
            Box::new(|v| {
                let d = v["tensors"][1]["digest"].as_str().unwrap();
                let last = if d.ends_with('0') { "1" } else { "0" };
                v["tensors"][1]["digest"] = format!("{}{last}", &d[..d.len() - 1]).into();
            }),
        ),
        ("unknown field", Box::new(|v| v["extra"] = 1.into())),
    ];
    for (want, change) in cases {
        let mut v = good.clone();
        change(&mut v);
        let e = PageManifest::parse(v.to_string().as_bytes(), "m.pages")
            .unwrap_err()
            .to_string();
        assert!(e.contains(want) && e.contains("m.pages"), "{want}: {e}");
    }
    for junk in [&b""[..], b"[]", b"{", b"\xff\xfe", b"null"] {
        assert!(PageManifest::parse(junk, "m.pages").is_err());
    }
}

#[test]
fn a_signature_covers_the_page_manifest_signed_with_it_and_no_other() {
    let path = data().join("model.safetensors");
    let opened = tessera::open_path(&path, &ReadOptions::default()).unwrap();
    let id = model_id(opened.container(), false).unwrap();
    let m = manifest_of(&path, 4096);
    let key = SecretKey::Ed25519([9; 32]);
    let signed = SignedManifest::sign_id_with_pages(&id, Some(&m), &key).unwrap();
    let text = signed.to_json().unwrap();
    let back = SignedManifest::parse(text.as_bytes()).unwrap();
    back.check_signature(&key.public()).unwrap();
    back.covers_pages(&m).unwrap();
    // Another page size is another manifest.
    let other = manifest_of(&path, 8192);
    assert!(back.covers_pages(&other).is_err());
    // The pages digest is signed: changing it breaks the signature.
    let tampered = text.replace(&m.digest().to_prefixed(), &other.digest().to_prefixed());
    assert_ne!(tampered, text);
    let t = SignedManifest::parse(tampered.as_bytes()).unwrap();
    assert!(t.check_signature(&key.public()).is_err());
    // Signed without pages: no "pages" key, and it covers none.
    let plain = SignedManifest::sign_id(&id, &key).unwrap();
    assert!(!plain.to_json().unwrap().contains("\"pages\""));
    assert!(plain.covers_pages(&m).is_err());
    // A manifest of another model is refused at signing.
    let mixed =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/safetensors/mixed.safetensors");
    let foreign = manifest_of(&mixed, 4096);
    assert!(SignedManifest::sign_id_with_pages(&id, Some(&foreign), &key).is_err());
}

#[test]
fn page_sizes_outside_4k_to_1g_or_not_powers_of_two_are_refused() {
    for bad in [0, 1, 2048, 4095, 4097, 3 << 12, 2 << 30] {
        assert!(tessera::pages::check_page_size(bad).is_err(), "{bad}");
    }
    for good in [4096, 1 << 20, 1 << 30] {
        tessera::pages::check_page_size(good).unwrap();
    }
    assert_eq!(
        tessera::pages::beside("/a/b/model.safetensors").as_deref(),
        Some("/a/b/model.pages")
    );
    assert_eq!(
        tessera::pages::beside("s3://b/k/m.aero").as_deref(),
        Some("s3://b/k/m.pages")
    );
    assert_eq!(tessera::pages::beside("dir/").as_deref(), None);
}

/// The page vector with one byte of `tensor` flipped at `at` (found from the header,
/// independently of Tessera), written under `dir`.
fn damaged(dir: &Path, tensor: &str, at: usize) -> PathBuf {
    let mut bytes = std::fs::read(data().join("model.safetensors")).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let start = header[tensor]["data_offsets"][0].as_u64().unwrap() as usize + 8 + n;
    bytes[start + at] ^= 0x10;
    let p = dir.join("model.safetensors");
    std::fs::write(&p, &bytes).unwrap();
    p
}

#[test]
fn a_slice_read_checks_the_pages_it_touches_and_only_those() {
    use tessera::slice::{read_slice, Index, RangeCheck};
    let m = manifest_of(&data().join("model.safetensors"), 4096);
    let dir = tempfile::tempdir().unwrap();
    // layers.0.w is [50, 100] f32: 400 bytes a row; byte 9000 is on page 2 (row 22).
    let bad = damaged(dir.path(), "layers.0.w", 9000);
    let opened = tessera::open_path(&bad, &ReadOptions::default()).unwrap();
    let src = opened.container();
    let check: &dyn RangeCheck = &m;
    let rows = |a, b| [Index::range(a, b), Index::ALL];
    // Rows 0..10: bytes 0..4000, page 0 only, read as one whole page and checked.
    let s = read_slice(src, "layers.0.w", &rows(0, 10), Some(check)).unwrap();
    assert_eq!(s.unverified, None);
    assert_eq!(s.bytes_read, 4096);
    assert_eq!(s.data.len(), 4000);
    // Rows 40..50 (pages 3 and 4) pass too; rows 22..23 and 0..50 touch page 2.
    read_slice(src, "layers.0.w", &rows(40, 50), Some(check)).unwrap();
    for (a, b) in [(22, 23), (0, 50), (19, 21)] {
        let e = read_slice(src, "layers.0.w", &rows(a, b), Some(check)).unwrap_err();
        assert_eq!(e.kind(), tessera::ErrorKind::Integrity, "{a}..{b}: {e}");
        let msg = e.to_string();
        assert!(
            msg.contains("\"layers.0.w\"") && msg.contains("page 2"),
            "{msg}"
        );
    }
    // Without the manifest the same read hands the damaged bytes out: safetensors
    // stores no digest, so nothing else could have caught it.
    let plain = read_slice(src, "layers.0.w", &rows(22, 23), None).unwrap();
    let good =
        tessera::open_path(&data().join("model.safetensors"), &ReadOptions::default()).unwrap();
    let want = read_slice(good.container(), "layers.0.w", &rows(22, 23), Some(check)).unwrap();
    assert_ne!(plain.data, want.data);
    // Another tensor is not touched by the damage.
    read_slice(src, "layers.0.b", &[Index::range(1000, 1024)], Some(check)).unwrap();
}

#[test]
fn for_model_finds_the_manifest_beside_and_refuses_one_for_another_model() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model.safetensors");
    std::fs::copy(data().join("model.safetensors"), &model).unwrap();
    let opened = tessera::open_path(&model, &ReadOptions::default()).unwrap();
    let src = opened.container();
    let shown = model.to_string_lossy().into_owned();
    assert!(tessera::pages::for_model(src, Some(&shown), None)
        .unwrap()
        .is_none());
    let m = manifest_of(&model, 4096);
    std::fs::write(dir.path().join("model.pages"), m.to_json().unwrap()).unwrap();
    let found = tessera::pages::for_model(src, Some(&shown), None).unwrap();
    assert_eq!(found, Some(m));
    // A manifest of another model beside it is an error, not ignored.
    let mixed =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/safetensors/mixed.safetensors");
    let foreign = manifest_of(&mixed, 4096);
    std::fs::write(dir.path().join("model.pages"), foreign.to_json().unwrap()).unwrap();
    let e = tessera::pages::for_model(src, Some(&shown), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("model.pages") && e.contains("another model"),
        "{e}"
    );
    // A given manifest that does not exist is an error naming it.
    let missing = dir.path().join("none.pages");
    let e = tessera::pages::for_model(src, Some(&shown), Some(&missing.to_string_lossy()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("none.pages"), "{e}");
}
