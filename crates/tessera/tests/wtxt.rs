//! WTXT/Chunks v1.1: writer, strict reader, every verify layer, salvage, WSUM.

use std::borrow::Cow;
use std::io::Cursor;

use tessera::convert::{write_to, WriteOptions};
use tessera::formats::wtxt;
use tessera::{
    Container, DType, ErrorKind, Format, Model, ReadOptions, Status, TensorInfo, TensorSource,
    TensorView, VerifyOptions,
};

fn model() -> Model {
    let mut m = Model::new();
    let f64s: Vec<u8> = (0..4096 * 64)
        .flat_map(|i| ((i as f64) * 0.25 - 7.0).to_le_bytes())
        .collect();
    m.push(
        TensorView::dense(
            TensorInfo::dense("R", DType::F64, vec![4096, 64]),
            Cow::Owned(f64s),
        )
        .unwrap(),
    )
    .unwrap();
    let b: Vec<u8> = (0..1000u32)
        .flat_map(|i| (i.wrapping_mul(2654435761)).to_le_bytes())
        .collect();
    m.push(
        TensorView::dense(
            TensorInfo::dense("W_base", DType::U32, vec![1000]),
            Cow::Owned(b),
        )
        .unwrap(),
    )
    .unwrap();
    m.push(
        TensorView::dense(
            TensorInfo::dense("s", DType::F32, vec![]),
            Cow::Owned(1.5f32.to_le_bytes().to_vec()),
        )
        .unwrap(),
    )
    .unwrap();
    m.push(
        TensorView::dense(
            TensorInfo::dense("empty", DType::I16, vec![0, 3]),
            Cow::Owned(vec![]),
        )
        .unwrap(),
    )
    .unwrap();
    m.push(
        TensorView::dense(
            TensorInfo::dense("H", DType::BF16, vec![3, 5]),
            Cow::Owned((0..30).collect()),
        )
        .unwrap(),
    )
    .unwrap();
    m
}

fn opts() -> WriteOptions {
    WriteOptions {
        timestamp: Some("2025-10-09T03:12:45Z".into()),
        generation: Some(123),
        build: Some("abc123".into()),
        ..WriteOptions::default()
    }
}

fn write(m: &Model, o: &WriteOptions) -> Vec<u8> {
    let mut c = Cursor::new(Vec::new());
    write_to(Format::Wtxt, m, &mut c, o).unwrap();
    c.into_inner()
}

fn open(b: &[u8]) -> wtxt::WtxtContainer<'_> {
    wtxt::open_container(Cow::Borrowed(b), &ReadOptions::default()).unwrap()
}

fn failures(r: &tessera::VerifyReport) -> Vec<(String, String)> {
    r.failures()
        .map(|c| (c.subject.clone(), c.layer.clone()))
        .collect()
}

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
    let o = WriteOptions {
        hmac_key: Some(b"secret".to_vec()),
        fixed_salt: Some([1, 2, 3, 4, 5, 6, 7, 8]),
        sign_key: Some(seed),
        ..opts()
    };
    let a = write(&m, &o);
    assert_eq!(a, write(&m, &o));
    let text = std::str::from_utf8(&a).unwrap();
    assert!(text.lines().nth(4).unwrap().starts_with("sign ed25519="));
    assert!(text.contains("salt=0102030405060708"));
    let f = open(&a);
    let public = tessera::util::keys::public_key(&seed);
    let good = VerifyOptions {
        hmac_key: Some(b"secret".to_vec()),
        public_key: Some(public),
        ..Default::default()
    };
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
    let bad = VerifyOptions {
        hmac_key: Some(b"wrong".to_vec()),
        public_key: Some(tessera::util::keys::public_key(&[8u8; 32])),
        ..Default::default()
    };
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
fn line_of(text: &str, p: &str) -> usize {
    text.lines().position(|l| l.starts_with(p)).unwrap()
}

fn edit_line(b: &[u8], n: usize, f: impl Fn(&str) -> String) -> Vec<u8> {
    let text = std::str::from_utf8(b).unwrap();
    let mut out = String::new();
    for (i, l) in text.lines().enumerate() {
        out.push_str(&if i == n { f(l) } else { l.to_string() });
        out.push('\n');
    }
    out.into_bytes()
}

#[test]
fn every_layer_detects_corruption_at_the_right_place() {
    let m = model();
    let a = write(&m, &opts());
    let text = std::str::from_utf8(&a).unwrap();
    let ch3 = line_of(text, "ch ix=000003");
    // Flip one base64 character (keeping the parity) -> parity fails on that line.
    let flipped = edit_line(&a, ch3 + 2, |l| {
        let mut v = l.as_bytes().to_vec();
        v[10] = if v[10] == b'A' { b'B' } else { b'A' };
        String::from_utf8(v).unwrap()
    });
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
    assert_eq!(f.tensor("R").unwrap_err().kind(), ErrorKind::Malformed);
    let s = wtxt::open_container(
        Cow::Borrowed(&b),
        &ReadOptions {
            salvage: true,
            ..Default::default()
        },
    )
    .unwrap();
    let names: Vec<&str> = s.tensor_infos().iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["H", "empty", "s"]);
    let w = s.warnings().join("\n");
    assert!(w.contains("\"R\"") && w.contains("\"W_base\""), "{w}");
    // A broken arr line: without salvage Malformed, with salvage the array is lost.
    let arr = line_of(text, "arr name=W_base");
    let c = edit_line(&a, arr, |l| l.replace("dtype=u32", "dtype=u33"));
    assert!(wtxt::open_container(Cow::Borrowed(&c), &ReadOptions::default()).is_err());
    let s = wtxt::open_container(
        Cow::Borrowed(&c),
        &ReadOptions {
            salvage: true,
            ..Default::default()
        },
    )
    .unwrap();
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
    let o = WriteOptions {
        streaming: true,
        sign_key: Some(seed),
        ..opts()
    };
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
    let ro = ReadOptions {
        path: Some(p.clone()),
        ..Default::default()
    };
    let f = wtxt::open_container(Cow::Borrowed(&data), &ro).unwrap();
    let vo = VerifyOptions {
        public_key: Some(tessera::util::keys::public_key(&seed)),
        ..Default::default()
    };
    let r = f.verify(&vo);
    assert!(r.is_ok(), "{:?}", failures(&r));
    assert!(r
        .checks
        .iter()
        .any(|c| c.layer == "signature" && c.status == Status::Ok));
    // Opening the .wsum opens the pair.
    let wd = std::fs::read(&wp).unwrap();
    let f2 = tessera::open(
        &wd,
        &ReadOptions {
            path: Some(wp.clone()),
            ..Default::default()
        },
    )
    .unwrap();
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
    let o2 = WriteOptions {
        prev: Some(p1.clone()),
        generation: None,
        ..opts()
    };
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
    let public = tessera::util::keys::public_key(&seed);
    for (stem, key, o) in [
        ("basic", None, opts()),
        (
            "hmac",
            Some(b"tessera-test-key".to_vec()),
            WriteOptions {
                hmac_key: Some(b"tessera-test-key".to_vec()),
                fixed_salt: Some([1, 2, 3, 4, 5, 6, 7, 8]),
                generation: Some(7),
                build: Some("x.y-1".into()),
                ..opts()
            },
        ),
        (
            "ext",
            None,
            WriteOptions {
                rows_per_chunk: Some(2),
                ..opts()
            },
        ),
        (
            "signed",
            None,
            WriteOptions {
                sign_key: Some(seed),
                ..opts()
            },
        ),
    ] {
        let b = std::fs::read(format!("{DATA}{stem}.wtxt")).unwrap();
        let vals: serde_json::Value =
            serde_json::from_slice(&std::fs::read(format!("{DATA}{stem}.values.json")).unwrap())
                .unwrap();
        let f = open(&b);
        let r = f.verify(&VerifyOptions {
            hmac_key: key.clone(),
            public_key: Some(public),
            ..Default::default()
        });
        if stem == "signed" {
            assert!(r.is_ok(), "{stem}: {:?}", failures(&r));
            assert!(r
                .checks
                .iter()
                .any(|c| c.layer == "signature" && c.status == Status::Ok));
            let other = tessera::util::keys::public_key(&[0; 32]);
            let r2 = f.verify(&VerifyOptions {
                public_key: Some(other),
                ..Default::default()
            });
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
    let o2 = WriteOptions {
        generation: Some(124),
        ..opts()
    };
    let target = write(&m2, &o2);
    let d = delta::make(&parse(&base), &parse(&target)).unwrap();
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
    let same = delta::make(&parse(&base), &parse(&base)).unwrap();
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

#[test]
fn delta_of_keyed_signed_snapshots_and_resigning() {
    use wtxt::delta;
    let m = model();
    let key = Some(b"k".to_vec());
    let seed = [9u8; 32];
    let base = write(
        &m,
        &WriteOptions {
            hmac_key: key.clone(),
            sign_key: Some(seed),
            ..opts()
        },
    );
    let o2 = WriteOptions {
        hmac_key: key.clone(),
        fixed_salt: Some([5; 8]),
        ..opts()
    };
    let target = write(&with_row_changed(&m, 7), &o2);
    let d = delta::make(&parse(&base), &parse(&target)).unwrap();
    let applied = delta::apply(&parse(&base), &d).unwrap();
    assert_eq!(applied, target);
    let signed = delta::sign(&applied, &seed).unwrap();
    assert_eq!(
        signed,
        write(
            &with_row_changed(&m, 7),
            &WriteOptions {
                sign_key: Some(seed),
                ..o2
            }
        )
    );
    let f = open(&signed);
    let r = f.verify(&VerifyOptions {
        hmac_key: key,
        public_key: Some(tessera::util::keys::public_key(&seed)),
        ..Default::default()
    });
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
    let ro = ReadOptions {
        age_identities: vec![id],
        ..Default::default()
    };
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
    let wo = WriteOptions {
        rows_per_chunk: Some(7),
        sign_key: Some([1; 32]),
        hmac_key: Some(b"k".to_vec()),
        fixed_salt: Some([2; 8]),
        ..opts()
    };
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
            if let Ok(f) = wtxt::open_container(
                Cow::Borrowed(&b),
                &ReadOptions {
                    salvage,
                    ..Default::default()
                },
            ) {
                let _ = f.verify(&VerifyOptions {
                    hmac_key: Some(b"k".to_vec()),
                    public_key: Some(tessera::util::keys::public_key(&[1; 32])),
                    ..Default::default()
                });
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
    let ro = ReadOptions {
        salvage: true,
        ..Default::default()
    };
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
    o.audit =
        Some(r#"kahan_max_resid=1.1e-15 denom_min=0.004 notes="Sera gamma=0.96 r=4096""#.into());
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
        o.audit = Some(bad.into());
        let mut c = Cursor::new(Vec::new());
        let e = write_to(Format::Wtxt, &m, &mut c, &o).unwrap_err();
        assert_eq!(e.kind(), tessera::ErrorKind::InvalidInput, "{bad:?}: {e}");
    }
}
