//! WTXT/Chunks v1.1: writer, strict reader, every verify layer, salvage, WSUM, golden vectors.

use crate::common::wtxt as common;
use common::*;

use std::borrow::Cow;

use tessera::formats::wtxt;
use tessera::{
    Container, DType, ErrorKind, Format, Model, ReadOptions, Status, TensorInfo, TensorSource,
    TensorView, VerifyOptions,
};

#[test]
fn round_trip_and_determinism() {
    let m = model();
    let a = write(&m, &opts());
    let b = write(&m, &opts());
    assert_eq!(a, b, "same model and options, same bytes");
    let f = open(&a);
    let names: Vec<&str> = f.tensor_infos().iter().map(|i| i.name.as_str()).collect();
    assert_eq!(
        names,
        ["H", "R", "W_base", "empty", "s"],
        "ASCII name order"
    );
    for info in m.tensor_infos() {
        assert_eq!(
            f.tensor(&info.name).unwrap().data().unwrap(),
            m.tensor(&info.name).unwrap().data().unwrap()
        );
    }
    let r = f.verify(&VerifyOptions::default());
    assert!(r.is_ok(), "{:?}", failures(&r));
    assert!(r
        .checks
        .iter()
        .any(|c| c.layer == "hmac" && c.status == Status::Unauthenticated));
    let text = std::str::from_utf8(&a).unwrap();
    assert!(text.starts_with("WTXT 1\nmeta schema=weights/v1 gen=000123 ts=2025-10-09T03:12:45Z build=abc123 endian=LE host=cpu cuda=off\ncap ext=crc32c,line_parity,delta_v2,row_blocking,ext_dtypes\nroot sha256_all="));
    assert!(text.contains("arr name=R dtype=f64 shape=4096,64 order=C bytes=2097152 "));
    assert!(text.contains("\nidx rows_per_chunk=64 row_size=512 row_blocking=on\nch ix=000000 off=000000000000 len=32768 "));
    assert!(text.contains("arr name=s dtype=f32 shape= order=C bytes=4 "));
    assert!(text.contains("arr name=empty dtype=i16 shape=0,3 order=C bytes=0 sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 hmac="));
    assert!(text.ends_with("endarr\nendwtxt\n"));
    for l in text.lines() {
        assert!(
            l.len() <= 78 || !l.contains(' ') || l.starts_with(|c: char| c.is_ascii_lowercase())
        );
    }
}

#[test]
fn hmac_and_signature_with_right_and_wrong_keys() {
    let m = model();
    let seed = [7u8; 32];
    let o = opts().with(
        tessera::formats::wtxt::WtxtOptions::default()
            .hmac_key(Some(b"secret".to_vec()))
            .fixed_salt(Some([1, 2, 3, 4, 5, 6, 7, 8]))
            .sign_key(Some(seed)),
    );
    let a = write(&m, &o);
    assert_eq!(a, write(&m, &o));
    let text = std::str::from_utf8(&a).unwrap();
    assert!(text.lines().nth(4).unwrap().starts_with("sign ed25519="));
    assert!(text.contains("salt=0102030405060708"));
    let f = open(&a);
    let public = tessera::signing::ed25519::public_key(&seed);
    let good = VerifyOptions::default()
        .hmac_key(Some(b"secret".to_vec()))
        .public_key(Some(public));
    let r = f.verify(&good);
    assert!(r.is_ok(), "{:?}", failures(&r));
    assert!(r
        .checks
        .iter()
        .any(|c| c.layer == "signature" && c.status == Status::Ok));
    assert!(r
        .checks
        .iter()
        .filter(|c| c.layer == "hmac")
        .all(|c| c.status == Status::Ok));
    let bad = VerifyOptions::default()
        .hmac_key(Some(b"wrong".to_vec()))
        .public_key(Some(tessera::signing::ed25519::public_key(&[8u8; 32])));
    let r = f.verify(&bad);
    let fl = failures(&r);
    assert_eq!(fl.iter().filter(|(_, l)| l == "hmac").count(), 5, "{fl:?}"); // the empty array has an HMAC too
    assert!(fl
        .iter()
        .any(|(s, l)| l == "signature" && s.contains("line 5")));
    let nokey = f.verify(&VerifyOptions::default());
    assert!(nokey.is_ok());
    assert!(nokey
        .checks
        .iter()
        .filter(|c| c.layer == "hmac")
        .all(|c| c.status == Status::Unauthenticated));
    // A change to a signed header line breaks the signature.
    let changed = String::from_utf8(a.clone())
        .unwrap()
        .replacen("build=abc123", "build=abc124", 1);
    let r = open(changed.as_bytes()).verify(&good);
    let fl = failures(&r);
    assert!(fl.iter().any(|(_, l)| l == "signature"), "{fl:?}");
    assert!(fl.iter().any(|(_, l)| l == "merkle_this"), "{fl:?}");
}

/// Finds the line index of the first line starting with `p`.

#[test]
fn every_layer_detects_corruption_at_the_right_place() {
    let m = model();
    let a = write(&m, &opts());
    let text = std::str::from_utf8(&a).unwrap();
    let ch3 = line_of(text, "ch ix=000003");
    // Flip one base64 character (keeping the parity) -> parity fails on that line.
    let flipped = flip_chunk_char(&a, ch3);
    let r = open(&flipped).verify(&VerifyOptions::default());
    let fl = failures(&r);
    assert!(
        fl.iter().any(|(s, l)| l == "parity"
            && s.contains("chunk 000003")
            && s.contains(&format!("line {}", ch3 + 3))),
        "{fl:?}"
    );
    assert!(fl.iter().any(|(_, l)| l == "sha256_all"));
    // The damage stays in chunk 3: the other chunks of R and the other arrays are fine.
    assert_eq!(
        fl.iter().filter(|(s, _)| s.contains("chunk")).count(),
        1,
        "{fl:?}"
    );
    let e = open(&flipped).tensor("R").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity);
    assert!(open(&flipped).tensor("W_base").is_ok());
    // Swap two characters: parity holds (XOR is order-free), crc32c catches it.
    let swapped = edit_line(&a, ch3 + 2, |l| {
        let mut v = l.as_bytes().to_vec();
        let j = (0..75).find(|&j| v[j] != v[j + 1]).unwrap();
        v.swap(j, j + 1);
        String::from_utf8(v).unwrap()
    });
    let fl = failures(&open(&swapped).verify(&VerifyOptions::default()));
    assert!(
        fl.iter()
            .any(|(s, l)| l == "crc32c" && s.contains("chunk 000003")),
        "{fl:?}"
    );
    // A wrong crc32c in the ch line.
    let crc = edit_line(&a, ch3, |l| {
        let i = l.find("crc32c=").unwrap() + 7;
        let mut v = l.to_string();
        let c = if &l[i..i + 1] == "0" { "1" } else { "0" };
        v.replace_range(i..i + 1, c);
        v
    });
    let fl = failures(&open(&crc).verify(&VerifyOptions::default()));
    assert!(
        fl.iter()
            .any(|(s, l)| l == "crc32c" && s.contains(&format!("line {}", ch3 + 1))),
        "{fl:?}"
    );
    // A wrong chunk sha256.
    let sha = edit_line(&a, ch3, |l| {
        let i = l.find("sha256=").unwrap() + 7;
        let mut v = l.to_string();
        let c = if &l[i..i + 1] == "0" { "1" } else { "0" };
        v.replace_range(i..i + 1, c);
        v
    });
    let fl = failures(&open(&sha).verify(&VerifyOptions::default()));
    assert_eq!(
        fl.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>(),
        ["sha256"],
        "{fl:?}"
    );
    // A wrong array sha256 (also changes sha256_all since the arr line is hashed).
    let arr = line_of(text, "arr name=W_base");
    let asha = edit_line(&a, arr, |l| {
        let i = l.find("sha256=").unwrap() + 7;
        let mut v = l.to_string();
        let c = if &l[i..i + 1] == "0" { "1" } else { "0" };
        v.replace_range(i..i + 1, c);
        v
    });
    let fl = failures(&open(&asha).verify(&VerifyOptions::default()));
    assert!(
        fl.contains(&(
            format!("array \"W_base\" (line {})", arr + 1),
            "sha256".into()
        )),
        "{fl:?}"
    );
    assert!(fl.iter().any(|(_, l)| l == "sha256_all"), "{fl:?}");
    // Root fields.
    for (field, layer) in [
        ("sha256_all=", "sha256_all"),
        ("merkle_this=", "merkle_this"),
        ("fastxor=", "fastxor"),
    ] {
        let r = edit_line(&a, 3, |l| {
            let i = l.find(field).unwrap() + field.len();
            let mut v = l.to_string();
            let c = if &l[i..i + 1] == "0" { "1" } else { "0" };
            v.replace_range(i..i + 1, c);
            v
        });
        let fl = failures(&open(&r).verify(&VerifyOptions::default()));
        assert!(fl.iter().any(|(_, l)| l == layer), "{field}: {fl:?}");
    }
}

#[test]
fn strict_armor_errors_name_the_line() {
    let a = write(&model(), &opts());
    let cases: Vec<(Vec<u8>, usize)> = vec![
        (edit_line(&a, 1, |l| l.replace("gen=", "gen= ")), 2),
        (edit_line(&a, 1, |l| format!("{l} ")), 2),
        (edit_line(&a, 1, |l| l.replace("endian=LE host", "host")), 2),
        (edit_line(&a, 2, |l| l.replace("cap ext", "cap\text")), 3),
        (edit_line(&a, 0, |_| "WTXT 1\r".into()), 1),
        (edit_line(&a, 4, |l| l.replace("order=C", "order=F")), 5),
        (
            edit_line(&a, 5, |l| l.replace("row_blocking=on", "row_blocking=yes")),
            6,
        ),
        (edit_line(&a, 6, |l| l.replace("width=76", "width=64")), 7),
        (edit_line(&a, 6, |l| l.replace("lines=", "lines=1")), 7),
        (edit_line(&a, 6, |l| l.replace("ix=000000", "ix=0")), 7),
        (
            edit_line(&a, 6, |l| {
                l.replace("off=000000000000", "off=0000000000000")
            }),
            7,
        ),
    ];
    for (b, n) in cases {
        let e = wtxt::open_container(Cow::Borrowed(&b), &ReadOptions::default())
            .err()
            .unwrap_or_else(|| panic!("line {n} must fail"));
        assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
        assert_eq!(e.subject(), Some(format!("line {n}").as_str()), "{e}");
    }
    let mut trunc = a.clone();
    trunc.truncate(a.len() - 3);
    assert!(wtxt::open_container(Cow::Borrowed(&trunc), &ReadOptions::default()).is_err());
    for cut in (0..a.len()).step_by(997) {
        let _ = wtxt::open_container(Cow::Borrowed(&a[..cut]), &ReadOptions::default())
            .map(|f| f.verify(&VerifyOptions::default()));
    }
}

#[test]
fn salvage_recovers_intact_arrays_and_names_the_lost() {
    let a = write(&model(), &opts());
    let text = std::str::from_utf8(&a).unwrap();
    let ch = line_of(text, "ch ix=000005");
    // Break the layout of one line of R (a line cut short) and one of W_base.
    let b = edit_line(&a, ch + 4, |l| l[..40].to_string());
    let w = line_of(std::str::from_utf8(&b).unwrap(), "arr name=W_base");
    let b = edit_line(&b, w + 4, |l| l.replace('A', "B"));
    let f = wtxt::open_container(Cow::Borrowed(&b), &ReadOptions::default()).unwrap();
    let fl = failures(&f.verify(&VerifyOptions::default()));
    assert!(
        fl.iter().any(|(s, l)| l == "armor"
            && s.contains("\"R\" chunk 000005")
            && s.contains(&format!("line {}", ch + 5))),
        "{fl:?}"
    );
    assert!(
        fl.iter()
            .any(|(s, _)| s.contains("\"W_base\" chunk 000000")),
        "{fl:?}"
    );
    // Damage inside a chunk is an integrity failure, as verify reports it (exit 1).
    assert_eq!(f.tensor("R").unwrap_err().kind(), ErrorKind::Integrity);
    let s = wtxt::open_container(Cow::Borrowed(&b), &ReadOptions::default().salvage(true)).unwrap();
    let names: Vec<&str> = s.tensor_infos().iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["H", "empty", "s"]);
    let w = s.warnings().join("\n");
    assert!(w.contains("\"R\"") && w.contains("\"W_base\""), "{w}");
    // A broken arr line: without salvage Malformed, with salvage the array is lost.
    let arr = line_of(text, "arr name=W_base");
    let c = edit_line(&a, arr, |l| l.replace("dtype=u32", "dtype=u33"));
    assert!(wtxt::open_container(Cow::Borrowed(&c), &ReadOptions::default()).is_err());
    let s = wtxt::open_container(Cow::Borrowed(&c), &ReadOptions::default().salvage(true)).unwrap();
    assert_eq!(s.tensor_infos().len(), 4);
    assert!(s
        .warnings()
        .iter()
        .any(|w| w.contains(&format!("line {}", arr + 1))));
}

#[test]
fn streaming_writes_a_wsum_and_verify_needs_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.wtxt");
    let m = model();
    let seed = [3u8; 32];
    let o = opts().with(
        tessera::formats::wtxt::WtxtOptions::default()
            .streaming(true)
            .sign_key(Some(seed)),
    );
    let rep = tessera::convert::write_file(Format::Wtxt, &m, &p, &o).unwrap();
    let wp = dir.path().join("m.wtxt.wsum");
    assert_eq!(rep.extra_files, vec![wp.clone()]);
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(text
        .lines()
        .nth(3)
        .unwrap()
        .starts_with("root_pending sha256_all=0000"));
    let w = std::fs::read_to_string(&wp).unwrap();
    assert!(w.starts_with("WSUM 1 sha256_all=") && w.contains(" sign="));
    // Same hashes as the non-streamed file.
    let plain = write(&m, &opts());
    let root = std::str::from_utf8(&plain)
        .unwrap()
        .lines()
        .nth(3)
        .unwrap()
        .to_string();
    assert!(w.contains(&root["root ".len()..]), "{w}\n{root}");
    let data = std::fs::read(&p).unwrap();
    let ro = ReadOptions::default().path(Some(p.clone()));
    let f = wtxt::open_container(Cow::Borrowed(&data), &ro).unwrap();
    let vo =
        VerifyOptions::default().public_key(Some(tessera::signing::ed25519::public_key(&seed)));
    let r = f.verify(&vo);
    assert!(r.is_ok(), "{:?}", failures(&r));
    assert!(r
        .checks
        .iter()
        .any(|c| c.layer == "signature" && c.status == Status::Ok));
    // Opening the .wsum opens the pair.
    let wd = std::fs::read(&wp).unwrap();
    let f2 = tessera::open(&wd, &ReadOptions::default().path(Some(wp.clone()))).unwrap();
    assert!(f2.verify(&vo).is_ok());
    // Without its WSUM the WTXT-S is unfinalized.
    std::fs::remove_file(&wp).unwrap();
    let f = wtxt::open_container(Cow::Borrowed(&data), &ro).unwrap();
    let r = f.verify(&VerifyOptions::default());
    assert!(!r.is_ok());
    assert!(r
        .failures()
        .any(|c| c.detail.as_deref().unwrap_or("").contains("unfinalized")));
}

#[test]
fn merkle_chains_from_prev() {
    let dir = tempfile::tempdir().unwrap();
    let p1 = dir.path().join("a.wtxt");
    let m = model();
    tessera::convert::write_file(Format::Wtxt, &m, &p1, &opts()).unwrap();
    let mut o2 = opts().with(tessera::formats::wtxt::WtxtOptions::default().prev(Some(p1.clone())));
    // The generation follows prev's.
    o2.extra.remove("generation");
    let b = write(&m, &o2);
    let t1 = std::fs::read_to_string(&p1).unwrap();
    let this1 = t1
        .lines()
        .nth(3)
        .unwrap()
        .split(' ')
        .nth(3)
        .unwrap()
        .trim_start_matches("merkle_this=")
        .to_string();
    let t2 = String::from_utf8(b).unwrap();
    assert!(t2
        .lines()
        .nth(3)
        .unwrap()
        .contains(&format!("merkle_prev={this1}")));
    assert!(t2.lines().nth(1).unwrap().contains("gen=000124"));
    assert!(open(t2.as_bytes())
        .verify(&VerifyOptions::default())
        .is_ok());
}

#[test]
fn git_diff_of_one_changed_row_touches_one_chunk() {
    let mut m = model();
    let a = write(&m, &opts());
    let mut data = m.tensor("R").unwrap().data().unwrap().to_vec();
    data[1000 * 512 + 8..1000 * 512 + 16].copy_from_slice(&99.0f64.to_le_bytes());
    let mut m2 = Model::new();
    for info in m.tensor_infos() {
        if info.name == "R" {
            m2.push(TensorView::dense(info.clone(), Cow::Owned(data.clone())).unwrap())
                .unwrap();
        } else {
            m2.push(m.tensor(&info.name).unwrap()).unwrap();
        }
    }
    m = m2;
    let b = write(&m, &opts());
    let (ta, tb) = (
        std::str::from_utf8(&a).unwrap(),
        std::str::from_utf8(&b).unwrap(),
    );
    let la: Vec<&str> = ta.lines().collect();
    let lb: Vec<&str> = tb.lines().collect();
    assert_eq!(la.len(), lb.len());
    let changed: Vec<usize> = (0..la.len()).filter(|&i| la[i] != lb[i]).collect();
    // Row 1000 with 64 rows per chunk is in chunk 15: lines of that chunk plus the
    // root line and R's arr line.
    let ch = line_of(tb, "ch ix=000015");
    let arr = line_of(tb, "arr name=R");
    let lines = wtxt::lines_for(32768) as usize;
    for &i in &changed {
        assert!(
            i == 3 || i == arr || (ch..=ch + lines).contains(&i),
            "line {} changed",
            i + 1
        );
    }
    assert!(changed.len() >= 3 && changed.len() < 12, "{changed:?}");
}

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/wtxt/");

/// Vectors from gen.py, an independent encoder written from the spec in Python.
#[test]
fn golden_vectors_from_the_independent_encoder() {
    let seed: [u8; 32] = std::array::from_fn(|i| i as u8);
    let public = tessera::signing::ed25519::public_key(&seed);
    for (stem, key, o) in [
        ("basic", None, opts()),
        (
            "hmac",
            Some(b"tessera-test-key".to_vec()),
            opts().with(
                tessera::formats::wtxt::WtxtOptions::default()
                    .hmac_key(Some(b"tessera-test-key".to_vec()))
                    .fixed_salt(Some([1, 2, 3, 4, 5, 6, 7, 8]))
                    .generation(Some(7))
                    .build(Some("x.y-1".into())),
            ),
        ),
        (
            "ext",
            None,
            opts().with(tessera::formats::wtxt::WtxtOptions::default().rows_per_chunk(Some(2))),
        ),
        (
            "signed",
            None,
            opts().with(tessera::formats::wtxt::WtxtOptions::default().sign_key(Some(seed))),
        ),
    ] {
        let b = std::fs::read(format!("{DATA}{stem}.wtxt")).unwrap();
        let vals: serde_json::Value =
            serde_json::from_slice(&std::fs::read(format!("{DATA}{stem}.values.json")).unwrap())
                .unwrap();
        let f = open(&b);
        let r = f.verify(
            &VerifyOptions::default()
                .hmac_key(key.clone())
                .public_key(Some(public)),
        );
        if stem == "signed" {
            assert!(r.is_ok(), "{stem}: {:?}", failures(&r));
            assert!(r
                .checks
                .iter()
                .any(|c| c.layer == "signature" && c.status == Status::Ok));
            let other = tessera::signing::ed25519::public_key(&[0; 32]);
            let r2 = f.verify(&VerifyOptions::default().public_key(Some(other)));
            assert!(r2.failures().any(|c| c.layer == "signature"));
        } else {
            // Unsigned while a public key was given: a failed signature check.
            assert_eq!(
                failures(&r),
                [("file".to_string(), "signature".to_string())],
                "{stem}"
            );
        }
        if key.is_some() {
            assert!(r
                .checks
                .iter()
                .filter(|c| c.layer == "hmac")
                .all(|c| c.status == Status::Ok));
        }
        let obj = vals.as_object().unwrap();
        assert_eq!(obj.len(), f.tensor_infos().len());
        for (name, v) in obj {
            let t = f.tensor(name).unwrap();
            assert_eq!(t.info.dtype.name(), v["dtype"].as_str().unwrap());
            let shape: Vec<u64> = v["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect();
            assert_eq!(t.info.shape, shape);
            assert_eq!(
                tessera::util::hex(&tessera::util::sha256(t.data().unwrap())),
                v["sha256"].as_str().unwrap()
            );
        }
        if stem != "ext" {
            // Our writer, given the same arrays and options, writes the same bytes.
            let m = Model::from_source(&f).unwrap();
            assert!(
                write(&m, &o) == b,
                "{stem}: our writer differs from the reference encoder"
            );
        }
    }
}

/// A 20 MB array between small ones (a verify pipeline that cuts arrays into runs must
/// carry their hashes across runs): a clean file passes every layer (array SHA-256, HMAC
/// and `sha256_all`), and one altered character deep inside the large array fails
/// exactly that chunk, that array's SHA-256 and the file's hashes.
#[test]
fn verify_of_a_large_array_between_small_ones() {
    let mut m = Model::new();
    let big: Vec<u8> = (0..5_000_000u32)
        .flat_map(|i| (i.wrapping_mul(2_654_435_761) as f32).to_le_bytes())
        .collect();
    for (name, bytes) in [
        ("a.small", vec![1u8; 1000]),
        ("b.big", big),
        ("c.small", vec![2u8; 70_000]),
    ] {
        let n = bytes.len() as u64;
        m.push(
            TensorView::dense(
                TensorInfo::dense(name, DType::U8, vec![n]),
                Cow::Owned(bytes),
            )
            .unwrap(),
        )
        .unwrap();
    }
    let o =
        opts().with(tessera::formats::wtxt::WtxtOptions::default().hmac_key(Some(b"k".to_vec())));
    let mut a = write(&m, &o);
    let vo = VerifyOptions::default().hmac_key(Some(b"k".to_vec()));
    let r = open(&a).verify(&vo);
    assert!(r.is_ok(), "{:?}", failures(&r));
    assert_eq!(
        r.checks
            .iter()
            .filter(|c| c.layer == "hmac" && c.status == Status::Ok)
            .count(),
        3
    );
    // Chunk 400 of b.big (12.5 MiB in): its first base64 line.
    let text = std::str::from_utf8(&a).unwrap();
    let at = text.find("ch ix=000400").unwrap();
    let line = at + text[at..].find('\n').unwrap() + 1;
    a[line + 5] = if a[line + 5] == b'A' { b'B' } else { b'A' };
    let r = open(&a).verify(&vo);
    let fl = failures(&r);
    assert!(
        fl.iter()
            .any(|(s, _)| s.starts_with("array \"b.big\" chunk 000400")),
        "{fl:?}"
    );
    assert!(fl
        .iter()
        .any(|(s, l)| s.starts_with("array \"b.big\"") && l == "sha256"));
    assert!(fl.iter().any(|(_, l)| l == "sha256_all"));
    assert!(!fl.iter().any(|(s, _)| s.contains("small")), "{fl:?}");
    assert!(!fl.iter().any(|(s, _)| s.contains("chunk 000399")));
}

/// A streamed WTXT-S written over an existing pair leaves the new pair, which verifies,
/// fsynced or not (`no_fsync`); no temporary is left beside them.
#[test]
fn streaming_over_an_existing_pair_replaces_both() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.wtxt");
    let wp = dir.path().join("m.wtxt.wsum");
    let m = model();
    for (gen, no_fsync) in [(1, false), (2, true), (3, false)] {
        let o = opts()
            .with(
                tessera::formats::wtxt::WtxtOptions::default()
                    .streaming(true)
                    .generation(Some(gen)),
            )
            .no_fsync(no_fsync);
        let rep = tessera::convert::write_file(Format::Wtxt, &m, &p, &o).unwrap();
        assert_eq!(rep.extra_files, vec![wp.clone()]);
        assert!(rep.side_files.is_empty());
        let data = std::fs::read(&p).unwrap();
        assert!(std::str::from_utf8(&data)
            .unwrap()
            .contains(&format!("gen={gen:06}")));
        let ro = ReadOptions::default().path(Some(p.clone()));
        let f = wtxt::open_container(Cow::Borrowed(&data), &ro).unwrap();
        let r = f.verify(&VerifyOptions::default());
        assert!(r.is_ok(), "gen {gen}: {:?}", failures(&r));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}

/// `WtxtWriter`, fed one array at a time, writes the bytes `write_to` does (signed, and
/// streamed with its WSUM text), and checks the order and completeness.
#[test]
fn the_streaming_writer_writes_what_write_to_does() {
    use std::io::Cursor;
    use tessera::formats::wtxt::WtxtWriter;
    let m = model();
    let feed = |o: &tessera::WriteOptions| {
        let mut w = WtxtWriter::new(Cursor::new(Vec::new()), m.tensor_infos(), o).unwrap();
        let order: Vec<String> = w.order().map(str::to_string).collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted, "ASCII name order");
        for name in &order {
            w.write_tensor(name, m.tensor(name).unwrap().data().unwrap())
                .unwrap();
        }
        w.finish().unwrap()
    };
    let signed =
        opts().with(tessera::formats::wtxt::WtxtOptions::default().sign_key(Some([9u8; 32])));
    let done = feed(&signed);
    assert!(done.wsum.is_none());
    assert_eq!(done.out.into_inner(), write(&m, &signed));

    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.wtxt");
    let streamed = opts()
        .with(tessera::formats::wtxt::WtxtOptions::default().streaming(true))
        .path(Some(p.clone()));
    tessera::convert::write_file(Format::Wtxt, &m, &p, &streamed).unwrap();
    let done = feed(&streamed);
    assert_eq!(done.out.into_inner(), std::fs::read(&p).unwrap());
    let wsum = std::fs::read_to_string(dir.path().join("s.wtxt.wsum")).unwrap();
    assert_eq!(done.wsum.as_deref(), Some(wsum.as_str()));

    let mut w = WtxtWriter::new(Cursor::new(Vec::new()), m.tensor_infos(), &opts()).unwrap();
    let order: Vec<String> = w.order().map(str::to_string).collect();
    let e = w.write_tensor(&order[1], &[]).unwrap_err();
    assert!(e.to_string().contains("was expected"), "{e}");
    let first = m.tensor(&order[0]).unwrap();
    let data = first.data().unwrap();
    assert!(
        w.write_tensor(&order[0], &data[1..]).is_err(),
        "a byte short"
    );
    w.write_tensor(&order[0], data).unwrap();
    let e = w.finish().unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("before tensor {:?}", order[1])),
        "{e}"
    );
}

/// Spec §16: "Older readers ignore unknown `cap` items". gen.py's basic vector with two
/// items no version of the spec defines added to its `cap` line (which no digest covers
/// in an unsigned file) opens, verifies and reads the same tensors.
#[test]
fn unknown_cap_items_are_ignored() {
    let b = std::fs::read(format!("{DATA}basic.wtxt")).unwrap();
    let text = String::from_utf8(b.clone()).unwrap();
    let cap = text.lines().nth(2).unwrap();
    assert!(cap.starts_with("cap ext="), "{cap}");
    let future = text.replacen(cap, &format!("{cap},x_future_ext,zz9"), 1);
    assert_ne!(future, text);
    let (a, f) = (open(&b), open(future.as_bytes()));
    let r = f.verify(&VerifyOptions::default());
    assert!(r.is_ok(), "{:?}", r.failures().collect::<Vec<_>>());
    let listing = |c: &wtxt::WtxtContainer<'_>| -> Vec<(String, DType, Vec<u64>)> {
        c.tensor_infos()
            .iter()
            .map(|i| (i.name.clone(), i.dtype, i.shape.clone()))
            .collect()
    };
    assert_eq!(listing(&f), listing(&a));
    for info in a.tensor_infos() {
        assert_eq!(
            f.tensor(&info.name).unwrap().data().unwrap(),
            a.tensor(&info.name).unwrap().data().unwrap()
        );
    }
}

/// `wtxt finalize`: the WSUM of a WTXT-S written without one is the one the streaming
/// writer writes (same root, same chain, same signature), computed by reading the file
/// back; a damaged array, a wrong HMAC key or a file that is final already refuse it.
#[test]
fn finalize_writes_the_wsum_the_writer_would_and_refuses_damage() {
    use tessera::formats::wtxt::wsum;
    let dir = tempfile::tempdir().unwrap();
    let (p1, p2) = (dir.path().join("g1.wtxt"), dir.path().join("g2.wtxt"));
    let m = model();
    let (seed, key) = ([5u8; 32], b"finalize-key".to_vec());
    let keyed = |o: tessera::WriteOptions| {
        o.with(tessera::formats::wtxt::WtxtOptions::default().hmac_key(Some(key.clone())))
    };
    tessera::convert::write_file(Format::Wtxt, &m, &p1, &keyed(opts())).unwrap();
    let streamed = keyed(opts()).with(
        tessera::formats::wtxt::WtxtOptions::default()
            .streaming(true)
            .sign_key(Some(seed))
            .prev(Some(p1.clone())),
    );
    tessera::convert::write_file(Format::Wtxt, &m, &p2, &streamed).unwrap();
    let wp = wsum::wsum_path(&p2);
    let expected = std::fs::read_to_string(&wp).unwrap();
    std::fs::remove_file(&wp).unwrap();

    let data = std::fs::read(&p2).unwrap();
    let f = wtxt::WtxtFile::parse(Cow::Borrowed(&data), &ReadOptions::default()).unwrap();
    let prev = wsum::chain_from(&p1).unwrap().0;
    let w = wsum::finalize(&f, prev, Some(&key), Some(&seed)).unwrap();
    assert_eq!(w.text(), expected);
    // Unsigned and unchained: a different line, which verify accepts all the same.
    let plain = wsum::finalize(&f, [0; 32], None, None).unwrap();
    assert_ne!(plain.text(), expected);
    std::fs::write(&wp, plain.text()).unwrap();
    let ro = ReadOptions::default().path(Some(p2.clone()));
    let c = wtxt::open_container(Cow::Borrowed(&data), &ro).unwrap();
    let r = c.verify(&VerifyOptions::default());
    assert!(r.is_ok(), "{:?}", failures(&r));

    // A wrong HMAC key: the arrays do not authenticate, nothing is finalized.
    let e = wsum::finalize(&f, prev, Some(b"wrong"), None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    assert!(e.to_string().contains("hmac"), "{e}");
    // One flipped base64 character in a chunk: refused, naming the array's chunk.
    let text = std::str::from_utf8(&data).unwrap();
    let flipped = flip_chunk_char(&data, line_of(text, "ch ix=000003"));
    let g = wtxt::WtxtFile::parse(Cow::Borrowed(&flipped), &ReadOptions::default()).unwrap();
    let e = wsum::finalize(&g, prev, None, None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    assert!(e.to_string().contains("chunk 000003"), "{e}");
    // A snapshot with a root line is final already.
    let d1 = std::fs::read(&p1).unwrap();
    let f1 = wtxt::WtxtFile::parse(Cow::Borrowed(&d1), &ReadOptions::default()).unwrap();
    let e = wsum::finalize(&f1, [0; 32], None, None).unwrap_err();
    assert!(e.to_string().contains("final already"), "{e}");
}

/// Encryption as part of the write: only age armor reaches the file (no WTXT text on
/// disk), the snapshot reads back with the recipients' identities or the passphrase,
/// and `-O age_recipients=` repeated adds recipients.
#[test]
fn a_write_encrypted_with_age_leaves_no_plaintext_and_reads_back() {
    use tessera::formats::wtxt::{crypt, WtxtOptions};
    let dir = tempfile::tempdir().unwrap();
    let m = model();
    let (id1, r1) = crypt::generate_identity();
    let (id2, r2) = crypt::generate_identity();
    let mut o = opts();
    o.set("age_recipient", tessera::options::OptionValue::Text(r1))
        .unwrap();
    o.set("age_recipients", tessera::options::OptionValue::Text(r2))
        .unwrap();
    assert_eq!(
        WtxtOptions::from_options(&o).unwrap().age_recipients.len(),
        2
    );
    let p = dir.path().join("m.wtxt.age");
    tessera::convert::write_file(Format::Wtxt, &m, &p, &o).unwrap();
    let data = std::fs::read(&p).unwrap();
    assert!(data.starts_with(b"-----BEGIN AGE ENCRYPTED FILE-----"));
    assert!(!data.windows(6).any(|w| w == b"WTXT 1"));
    let plain = write(&m, &opts());
    for id in [id1, id2] {
        let ro = ReadOptions::default().age_identities(vec![id]);
        let f = tessera::open(&data, &ro).unwrap();
        for i in m.tensor_infos() {
            assert_eq!(
                f.tensor(&i.name).unwrap().data().unwrap(),
                m.tensor(&i.name).unwrap().data().unwrap()
            );
        }
        assert_eq!(
            crypt::decrypt(&data, &ro).unwrap(),
            plain,
            "the same text, encrypted"
        );
    }
    // A passphrase instead; without the key nothing opens.
    let o = opts().with(WtxtOptions::default().age_passphrase(Some(b"open sesame\n".to_vec())));
    let q = dir.path().join("p.wtxt.age");
    tessera::convert::write_file(Format::Wtxt, &m, &q, &o).unwrap();
    let data = std::fs::read(&q).unwrap();
    assert!(tessera::open(&data, &ReadOptions::default()).is_err());
    let ro = ReadOptions::default().age_passphrase(Some("open sesame".into()));
    assert_eq!(crypt::decrypt(&data, &ro).unwrap(), plain);
    assert!(!format!("{o:?}").contains("sesame"));
}

/// `salt_seed`: reproducible output whose salts still rotate (spec §10, issue 32 §3):
/// the same model, seed and generation give the same bytes; another generation, or
/// another array of identical content, another salt and HMAC; the HMACs verify. Salts
/// are computed here from the documented rule (SHA-256 of "WTXT salt\0", the seed's
/// length and bytes, the generation and the name).
#[test]
fn salt_seed_is_reproducible_and_rotates_per_generation_and_array() {
    use sha2::{Digest, Sha256};
    let mut m = Model::new();
    for name in ["a", "b"] {
        m.push(
            TensorView::dense(
                TensorInfo::dense(name, DType::F32, vec![2]),
                std::borrow::Cow::Owned([1.5f32, 2.5].iter().flat_map(|x| x.to_le_bytes()).collect()),
            )
            .unwrap(),
        )
        .unwrap();
    }
    let at = |gen: u64| {
        opts().with(
            tessera::formats::wtxt::WtxtOptions::default()
                .generation(Some(gen))
                .hmac_key(Some(b"secret".to_vec()))
                .salt_seed(Some("run-7".into())),
        )
    };
    let salts = |b: &[u8]| -> Vec<(String, String)> {
        std::str::from_utf8(b)
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("arr "))
            .map(|l| {
                let f = |k: &str| {
                    l.split(' ')
                        .find_map(|w| w.strip_prefix(k))
                        .unwrap()
                        .to_string()
                };
                (f("salt="), f("hmac="))
            })
            .collect()
    };
    let want = |gen: u64, name: &str| {
        let mut h = Sha256::new();
        h.update(b"WTXT salt\0");
        h.update(5u64.to_le_bytes());
        h.update(b"run-7");
        h.update(gen.to_le_bytes());
        h.update(name.as_bytes());
        tessera::util::hex(&h.finalize()[..8])
    };
    let g1 = write(&m, &at(1));
    assert_eq!(g1, write(&m, &at(1)), "reproducible");
    let g2 = write(&m, &at(2));
    let (s1, s2) = (salts(&g1), salts(&g2));
    assert_eq!(s1[0].0, want(1, "a"));
    assert_eq!(s1[1].0, want(1, "b"));
    assert_eq!(s2[0].0, want(2, "a"));
    assert_ne!(s1[0].1, s1[1].1, "identical arrays, different HMACs");
    assert_ne!(s1[0].1, s2[0].1, "identical content across generations, different HMACs");
    let good = VerifyOptions::default().hmac_key(Some(b"secret".to_vec()));
    for b in [&g1, &g2] {
        let r = open(b).verify(&good);
        assert!(r.is_ok(), "{:?}", failures(&r));
    }
    // One rule at a time.
    let both = at(1).with(
        tessera::formats::wtxt::WtxtOptions::default().fixed_salt(Some([1; 8])),
    );
    let mut c = std::io::Cursor::new(Vec::new());
    let e = tessera::convert::write_to(Format::Wtxt, &m, &mut c, &both).unwrap_err();
    assert!(e.to_string().contains("not both"), "{e}");
}
