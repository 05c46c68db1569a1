//! WTXT: DELTA v2, signing, age encryption, large arrays, armor damage, mutation robustness, audit.

use crate::common::wtxt as common;
use common::*;

use std::borrow::Cow;
use std::io::Cursor;

use tessera::convert::write_to;
use tessera::formats::wtxt;
use tessera::{
    Container, DType, ErrorKind, Format, Model, ReadOptions, TensorInfo, TensorSource, TensorView,
    VerifyOptions,
};

fn with_row_changed(m: &Model, row: usize) -> Model {
    let mut out = Model::new();
    for info in m.tensor_infos() {
        let v = m.tensor(&info.name).unwrap();
        if info.name == "R" {
            let mut d = v.data().unwrap().to_vec();
            d[row * 512..row * 512 + 8].copy_from_slice(&(-1.0f64 - row as f64).to_le_bytes());
            out.push(TensorView::dense(info.clone(), Cow::Owned(d)).unwrap())
                .unwrap();
        } else {
            out.push(v).unwrap();
        }
    }
    out
}

fn parse(b: &[u8]) -> wtxt::WtxtFile<'_> {
    wtxt::WtxtFile::parse(Cow::Borrowed(b), &ReadOptions::default()).unwrap()
}

#[test]
fn delta_round_trip_is_byte_identical_and_small() {
    use wtxt::delta;
    let m = model();
    let base = write(&m, &opts());
    let m2 = with_row_changed(&m, 1000);
    let o2 = opts().with(tessera::formats::wtxt::WtxtOptions::default().generation(Some(124)));
    let target = write(&m2, &o2);
    // Any target (this one does not chain from the base) is rebuilt byte for byte by
    // the extended form, which carries the target's cap and root lines.
    let d = delta::make_with_target_root(&parse(&base), &parse(&target)).unwrap();
    let text = std::str::from_utf8(&d).unwrap();
    assert!(text.starts_with("WTXT-DELTA 2 base_sha256_all="));
    assert_eq!(
        text.matches("\nch ").count(),
        1,
        "one changed row, one chunk"
    );
    assert!(text.contains("ch ix=000015 "));
    assert!(
        d.len() < 47_000 && d.len() > 45_000,
        "about one 32 KiB chunk of text: {}",
        d.len()
    );
    assert_eq!(delta::apply(&parse(&base), &d).unwrap(), target);
    // Not for another base.
    let other = write(&with_row_changed(&m, 5), &opts());
    let e = delta::apply(&parse(&other), &d).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(e.to_string().contains("another base"), "{e}");
    // A tampered delta chunk is refused.
    let bad = String::from_utf8(d.clone()).unwrap();
    let i = bad.find("\nch ").unwrap();
    let j = bad[i + 1..].find('\n').unwrap() + i + 2 + 5;
    let mut bad = bad.into_bytes();
    bad[j] = if bad[j] == b'A' { b'B' } else { b'A' };
    assert!(delta::apply(&parse(&base), &bad).is_err());
    // Identical snapshots: an empty delta.
    let same = delta::make_with_target_root(&parse(&base), &parse(&base)).unwrap();
    assert_eq!(same.iter().filter(|&&b| b == b'\n').count(), 5);
    assert_eq!(delta::apply(&parse(&base), &same).unwrap(), base);
    // Reshaped arrays need a full snapshot.
    let mut m3 = Model::new();
    for info in m.tensor_infos() {
        let mut v = m.tensor(&info.name).unwrap().into_owned();
        if info.name == "R" {
            v.info.shape = vec![2048, 128];
        }
        m3.push(v).unwrap();
    }
    let e = delta::make(&parse(&base), &parse(&write(&m3, &opts()))).unwrap_err();
    assert!(e.to_string().contains("full snapshot"), "{e}");
}

/// RESOLUTIONS item 15 exactly: the default delta has no `cap`/`root` lines and bare
/// `arr name=` lines, and applying it to its base rebuilds a target written with
/// `--prev BASE` byte for byte.
#[test]
fn conforming_delta_has_only_the_resolutions_lines_and_rebuilds_a_chained_target() {
    use wtxt::delta;
    let m = model();
    let dir = tempfile::tempdir().unwrap();
    let base = write(&m, &opts());
    let base_path = dir.path().join("base.wtxt");
    std::fs::write(&base_path, &base).unwrap();
    let target = write(
        &with_row_changed(&m, 1000),
        &opts().with(
            tessera::formats::wtxt::WtxtOptions::default()
                .prev(Some(base_path))
                .generation(None),
        ),
    );
    let d = delta::make(&parse(&base), &parse(&target)).unwrap();
    let text = std::str::from_utf8(&d).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("WTXT-DELTA 2 base_sha256_all="));
    assert!(lines[1].starts_with("meta "));
    assert_eq!(lines[2], "arr name=R");
    assert_eq!(*lines.last().unwrap(), "enddelta");
    assert!(!lines
        .iter()
        .any(|l| l.starts_with("cap ") || l.starts_with("root ")));
    assert_eq!(delta::apply(&parse(&base), &d).unwrap(), target);
    // A delta cut after a whole line says it ended early.
    let cut = text.rfind("endarr\n").unwrap();
    let e = delta::apply(&parse(&base), &d[..cut]).unwrap_err();
    assert!(e.to_string().contains("ends before its enddelta"), "{e}");
    // A damaged base64 line inside a delta chunk names its line and the fault.
    let body_line = 5; // header, meta, arr, ch, then the first base64 line
    let mut bad: Vec<String> = text.lines().map(String::from).collect();
    let l = &mut bad[body_line - 1];
    let c = if l.starts_with('A') { "B" } else { "A" };
    l.replace_range(0..1, c);
    let bad = bad.join("\n") + "\n";
    let e = delta::apply(&parse(&base), bad.as_bytes()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("line {body_line}")) && msg.contains("parity nibble"),
        "{msg}"
    );
}

#[test]
fn delta_of_keyed_signed_snapshots_and_resigning() {
    use wtxt::delta;
    let m = model();
    let key = Some(b"k".to_vec());
    let seed = [9u8; 32];
    let base = write(
        &m,
        &opts().with(
            tessera::formats::wtxt::WtxtOptions::default()
                .hmac_key(key.clone())
                .sign_key(Some(seed)),
        ),
    );
    let o2 = opts().with(
        tessera::formats::wtxt::WtxtOptions::default()
            .hmac_key(key.clone())
            .fixed_salt(Some([5; 8])),
    );
    let target = write(&with_row_changed(&m, 7), &o2);
    // Keyed HMACs ride only in the extended form.
    let d = delta::make_with_target_root(&parse(&base), &parse(&target)).unwrap();
    let applied = delta::apply(&parse(&base), &d).unwrap();
    assert_eq!(applied, target);
    // The conforming form cannot carry them: the changed array comes out
    // unauthenticated, the unchanged ones keep theirs, and the file still verifies
    // (with the key, the unchanged arrays' HMACs check; the changed one says so).
    let c = delta::make(&parse(&base), &parse(&target)).unwrap();
    assert!(!std::str::from_utf8(&c).unwrap().contains(" hmac="));
    let conforming = delta::apply(&parse(&base), &c).unwrap();
    let text = std::str::from_utf8(&conforming).unwrap();
    let r_line = text.lines().find(|l| l.starts_with("arr name=R ")).unwrap();
    assert!(r_line.ends_with(&format!("hmac={} salt={}", "0".repeat(64), "0".repeat(16))));
    let f = open(&conforming);
    let r = f.verify(&VerifyOptions::default().hmac_key(key.clone()));
    assert!(r.failures().next().is_none(), "{:?}", failures(&r));
    let signed = delta::sign(&applied, &seed).unwrap();
    assert_eq!(
        signed,
        write(
            &with_row_changed(&m, 7),
            &o2.with(tessera::formats::wtxt::WtxtOptions::default().sign_key(Some(seed)))
        )
    );
    let f = open(&signed);
    let r = f.verify(
        &VerifyOptions::default()
            .hmac_key(key)
            .public_key(Some(tessera::signing::ed25519::public_key(&seed))),
    );
    assert!(r.is_ok(), "{:?}", failures(&r));
    // Re-signing replaces the line rather than adding one.
    let again = delta::sign(&signed, &[1u8; 32]).unwrap();
    assert_eq!(again.len(), signed.len());
    assert_eq!(
        std::str::from_utf8(&again)
            .unwrap()
            .matches("\nsign ")
            .count(),
        1
    );
}

#[cfg(feature = "age")]
#[test]
fn age_armored_snapshot_opens_transparently() {
    let plain = write(&model(), &opts());
    let (id, rcpt) = wtxt::crypt::generate_identity();
    let enc = wtxt::crypt::encrypt(&plain, &[rcpt], None).unwrap();
    assert_eq!(Format::detect(&enc), Some(Format::AgeArmor));
    let ro = ReadOptions::default().age_identities(vec![id]);
    let f = tessera::open(&enc, &ro).unwrap();
    assert_eq!(f.tensor_infos().len(), 5);
    assert!(f.verify(&VerifyOptions::default()).is_ok());
    assert!(tessera::open(&enc, &ReadOptions::default()).is_err());
}

/// An array bigger than one encoding segment (16 MiB) goes through the segmented path.
#[test]
fn arrays_over_one_segment() {
    let n = (17 << 20) + 5;
    let data: Vec<u8> = (0..n).map(|i| (i * 31 % 251) as u8).collect();
    let mut m = Model::new();
    m.push(
        TensorView::dense(
            TensorInfo::dense("big", DType::U8, vec![n as u64]),
            Cow::Owned(data.clone()),
        )
        .unwrap(),
    )
    .unwrap();
    m.push(
        TensorView::dense(
            TensorInfo::dense("z", DType::U8, vec![3]),
            Cow::Owned(vec![1, 2, 3]),
        )
        .unwrap(),
    )
    .unwrap();
    let a = write(&m, &opts());
    assert_eq!(a, write(&m, &opts()));
    let text = std::str::from_utf8(&a).unwrap();
    assert!(text.contains("\nch ix=000512 off=000016777216 len=32768 "));
    assert!(text.contains("\nch ix=000544 off=000017825792 len=5 "));
    let f = open(&a);
    assert_eq!(f.tensor("big").unwrap().data().unwrap(), &data[..]);
    let r = f.verify(&VerifyOptions::default());
    assert!(r.is_ok(), "{:?}", failures(&r));
}

#[test]
fn armor_damage_in_chunk_lines_is_named_and_contained() {
    let a = write(&model(), &opts());
    let text = std::str::from_utf8(&a).unwrap();
    let ch = line_of(text, "ch ix=000009");
    for (edit, what) in [
        (
            Box::new(|l: &str| format!("{l}\r")) as Box<dyn Fn(&str) -> String>,
            "CR",
        ),
        (Box::new(|l: &str| l.replacen('A', "\t", 1)), "tab"),
        (Box::new(|l: &str| format!("{l} ")), "trailing space"),
        (Box::new(|l: &str| l.replacen('A', "\u{e9}", 1)), "0xc3"),
    ] {
        let b = edit_line(&a, ch + 10, |l| {
            if l.contains('A') {
                edit(l)
            } else {
                edit(&l.replacen(&l[..1], "A", 1))
            }
        });
        let f = wtxt::open_container(Cow::Borrowed(&b), &ReadOptions::default()).unwrap();
        let r = f.verify(&VerifyOptions::default());
        let bad: Vec<_> = r
            .failures()
            .filter(|c| c.subject.contains("chunk"))
            .collect();
        assert_eq!(bad.len(), 1, "{what}: {bad:?}");
        assert!(
            bad[0].subject.contains("chunk 000009")
                && bad[0].subject.contains(&format!("line {}", ch + 11)),
            "{what}: {bad:?}"
        );
        assert!(
            bad[0].detail.as_deref().unwrap().contains(what),
            "{what}: {bad:?}"
        );
        assert!(f.tensor("W_base").is_ok());
    }
}

/// Random byte edits, deletions and insertions never panic: open, verify, read.
#[test]
fn mutations_never_panic() {
    let mut m = Model::new();
    m.push(
        TensorView::dense(
            TensorInfo::dense("a", DType::F32, vec![40, 3]),
            Cow::Owned((0..480).map(|i| i as u8).collect()),
        )
        .unwrap(),
    )
    .unwrap();
    m.push(
        TensorView::dense(
            TensorInfo::dense("b", DType::U8, vec![200]),
            Cow::Owned((0..200).map(|i| i as u8).collect()),
        )
        .unwrap(),
    )
    .unwrap();
    let wo = opts().with(
        tessera::formats::wtxt::WtxtOptions::default()
            .rows_per_chunk(Some(7))
            .sign_key(Some([1; 32]))
            .hmac_key(Some(b"k".to_vec()))
            .fixed_salt(Some([2; 8])),
    );
    let a = write(&m, &wo);
    let mut m2 = Model::new();
    for info in m.tensor_infos() {
        let mut v = m.tensor(&info.name).unwrap().into_owned();
        if info.name == "b" {
            v.parts[0].bytes.to_mut()[100] = 7;
        }
        m2.push(v).unwrap();
    }
    let d = wtxt::delta::make(&parse(&a), &parse(&write(&m2, &wo))).unwrap();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rnd = |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    let alphabet = b"AZaz09+/= \n\t\r.:-x0123456789abcdef";
    for _ in 0..1500 {
        let mut b = a.clone();
        for _ in 0..1 + rnd(3) {
            let p = rnd(b.len());
            match rnd(3) {
                0 => b[p] = alphabet[rnd(alphabet.len())],
                1 => {
                    b.remove(p);
                }
                _ => b.insert(p, alphabet[rnd(alphabet.len())]),
            }
        }
        for salvage in [false, true] {
            if let Ok(f) =
                wtxt::open_container(Cow::Borrowed(&b), &ReadOptions::default().salvage(salvage))
            {
                let _ = f.verify(
                    &VerifyOptions::default()
                        .hmac_key(Some(b"k".to_vec()))
                        .public_key(Some(tessera::signing::ed25519::public_key(&[1; 32]))),
                );
                for i in f.tensor_infos() {
                    let _ = f.tensor(&i.name);
                }
            }
        }
        // The same edits on a delta.
        let mut dd = d.clone();
        for _ in 0..1 + rnd(3) {
            let p = rnd(dd.len());
            dd[p] = alphabet[rnd(alphabet.len())];
        }
        let _ = wtxt::delta::apply(&parse(&a), &dd);
    }
}

#[test]
fn salvage_survives_a_broken_header_and_a_truncated_end() {
    let a = write(&model(), &opts());
    let b = edit_line(&a, 1, |l| l.replace("endian=LE", "endian=BE"));
    assert!(wtxt::open_container(Cow::Borrowed(&b), &ReadOptions::default()).is_err());
    let ro = ReadOptions::default().salvage(true);
    let f = wtxt::open_container(Cow::Borrowed(&b), &ro).unwrap();
    assert_eq!(f.tensor_infos().len(), 5);
    assert!(f
        .warnings()
        .iter()
        .any(|w| w.contains("header") && w.contains("line 2")));
    let r = f.verify(&VerifyOptions::default());
    assert!(r.failures().any(|c| c.subject == "header"));
    assert_eq!(
        f.tensor("R").unwrap().data().unwrap(),
        model().tensor("R").unwrap().data().unwrap()
    );
    // Cut inside W_base: R and H survive.
    let text = std::str::from_utf8(&a).unwrap();
    let cut = text.find("arr name=W_base").unwrap() + 400;
    let cut = text[..cut].rfind('\n').unwrap() + 1;
    let f = wtxt::open_container(Cow::Borrowed(&a[..cut]), &ro).unwrap();
    let names: Vec<&str> = f.tensor_infos().iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["H", "R"]);
    assert!(wtxt::open_container(Cow::Borrowed(&a[..cut]), &ReadOptions::default()).is_err());
}

#[test]
fn audit_line_is_written_read_back_and_checked() {
    let m = model();
    let mut o = opts();
    o = o.with(tessera::formats::wtxt::WtxtOptions::default().audit(Some(
        r#"kahan_max_resid=1.1e-15 denom_min=0.004 notes="Sera gamma=0.96 r=4096""#.into(),
    )));
    let b = write(&m, &o);
    let text = String::from_utf8(b.clone()).unwrap();
    assert!(text.ends_with(
        "audit kahan_max_resid=1.1e-15 denom_min=0.004 notes=\"Sera gamma=0.96 r=4096\"\nendwtxt\n"
    ));
    let f = open(&b);
    assert_eq!(
        f.file().audit.as_deref(),
        Some(r#"audit kahan_max_resid=1.1e-15 denom_min=0.004 notes="Sera gamma=0.96 r=4096""#)
    );
    assert!(tessera::Container::verify(&f, &Default::default()).is_ok());
    for bad in [
        "",
        "no_equals",
        "a=b  c=d",
        "a=\"open",
        "a=b ",
        "a=x\ty",
        "a=é",
    ] {
        let o = o
            .clone()
            .with(tessera::formats::wtxt::WtxtOptions::default().audit(Some(bad.into())));
        let mut c = Cursor::new(Vec::new());
        let e = write_to(Format::Wtxt, &m, &mut c, &o).unwrap_err();
        assert_eq!(e.kind(), tessera::ErrorKind::InvalidInput, "{bad:?}: {e}");
    }
}
