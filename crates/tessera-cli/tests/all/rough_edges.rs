//! Issue 30 §5, the rough edges: `convert -o -`, help that matches behaviour, sizes and
//! shard counts, GGUF split notes and trailing bytes, a sparse tensor against its dense
//! form, signature messages, exit codes, numbers and plurals, grouped notes, truncation
//! named as such, zTensor's default digest and GPTRS's base_id in the summary.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tessera::{DType, Format, Layout, Model, Part, TensorInfo, TensorView};

fn cmd(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tessera"));
    for a in args {
        c.arg(a);
    }
    c
}

fn run(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    cmd(args).output().unwrap()
}

use crate::common::text;

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn dense(name: &str, dtype: DType, shape: Vec<u64>, bytes: Vec<u8>) -> TensorView<'static> {
    TensorView::dense(TensorInfo::dense(name, dtype, shape), Cow::Owned(bytes)).unwrap()
}

/// A small model written as `name` (its format from the extension).
fn model(dir: &Path, name: &str, tensors: Vec<TensorView<'static>>) -> PathBuf {
    let mut m = Model::new();
    for t in tensors {
        m.push(t).unwrap();
    }
    let p = dir.join(name);
    let f = Format::from_path(&p).unwrap();
    tessera::convert::write_file(f, &m, &p, &Default::default()).unwrap();
    p
}

fn two(dir: &Path, name: &str) -> PathBuf {
    model(
        dir,
        name,
        vec![
            dense("a", DType::F32, vec![4], f32s(&[1.0, 2.0, 3.0, 4.0])),
            dense("b", DType::F32, vec![2], f32s(&[5.0, 6.0])),
        ],
    )
}

#[test]
fn convert_to_dash_writes_stdout_or_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let src = two(dir.path(), "m.zt");
    let file = dir.path().join("out.safetensors");
    assert!(run(&[&"convert", &src, &file]).status.success());
    let o = cmd(&[&"convert", &src, &"-o", &"-", &"--to", &"safetensors"])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(o.stdout, std::fs::read(&file).unwrap(), "the file's bytes");
    assert!(String::from_utf8_lossy(&o.stderr).contains("standard output"));
    assert!(!dir.path().join("-").exists(), "no file named -");
    // Without --to there is no format to write; a set is several files: exit 2.
    for extra in [&[][..], &["--to", "safetensors", "--shards", "2"][..]] {
        let mut c = cmd(&[&"convert", &src, &"-o", &"-"]);
        let o = c.args(extra).current_dir(dir.path()).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", text(&o));
        assert!(o.stdout.is_empty());
        assert!(!dir.path().join("-").exists(), "no file named -");
    }
}

#[test]
fn help_offers_only_what_each_verb_takes() {
    for verb in [&["inspect"][..], &["verify"][..]] {
        let o = cmd(&[]).args(verb).arg("--help").output().unwrap();
        let h = String::from_utf8_lossy(&o.stdout);
        assert!(h.contains("--salvage"), "{verb:?}: {h}");
        assert!(!h.contains("--no-verify"), "{verb:?} refuses it: {h}");
    }
    for verb in ["convert", "extract", "diff", "stats", "id", "sign"] {
        let o = run(&[&verb, &"--help"]);
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("--no-verify"),
            "{verb}"
        );
    }
    let o = run(&[&"wtxt", &"decrypt", &"--help"]);
    let h = String::from_utf8_lossy(&o.stdout);
    assert!(
        h.contains("--identity") && h.contains("--passphrase-file"),
        "{h}"
    );
    for absent in ["--salvage", "--no-verify", "--endpoint"] {
        assert!(!h.contains(absent), "decrypt ignores {absent}: {h}");
    }
}

#[test]
fn zero_shards_are_refused_and_sizes_take_decimals() {
    let dir = tempfile::tempdir().unwrap();
    let src = two(dir.path(), "m.zt");
    for (flag, v) in [("--shards", "0"), ("--max-shard-size", "0")] {
        let out = dir.path().join(format!("z{flag}.safetensors"));
        let o = run(&[&"convert", &src, &out, &flag, &v]);
        assert_eq!(o.status.code(), Some(2), "{flag} 0: {}", text(&o));
        assert!(text(&o).contains("at least 1"), "{}", text(&o));
    }
    // 0.01K = 10 bytes: "a" (16 bytes) alone, then "b" (8).
    let out = dir.path().join("d/m.safetensors");
    std::fs::create_dir(dir.path().join("d")).unwrap();
    let o = run(&[&"convert", &src, &out, &"--max-shard-size", &"0.01K"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("m-00002-of-00002.safetensors"),
        "{}",
        text(&o)
    );
    let help = String::from_utf8_lossy(&run(&[&"convert", &"--help"]).stdout).into_owned();
    assert!(help.contains("5GB") && help.contains("5GiB"), "{help}");
}

#[test]
fn gguf_splits_warn_once_and_trailing_bytes_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let src = two(dir.path(), "m.zt");
    std::fs::create_dir(dir.path().join("g")).unwrap();
    let out = dir.path().join("g/m.gguf");
    let o = run(&[&"convert", &src, &out, &"--shards", &"2"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    // Only the first split carries the model's keys: one note, for it.
    assert_eq!(t.matches("llama.cpp will not load").count(), 1, "{t}");
    // A gguf-py file has nothing after its last tensor; bytes appended there are
    // reported on opening and fail verify.
    let peer = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tessera/tests/data/gguf/peer_small.gguf"
    );
    let o = run(&[&"verify", &peer]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let mut bytes = std::fs::read(peer).unwrap();
    bytes.extend_from_slice(b"garbage!");
    let bad = dir.path().join("trailing.gguf");
    std::fs::write(&bad, &bytes).unwrap();
    let o = run(&[&"inspect", &bad]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("8 trailing bytes"), "{}", text(&o));
    let o = run(&[&"verify", &bad]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("trailing bytes"), "{}", text(&o));
}

#[test]
fn a_sparse_tensor_against_its_dense_form_is_a_layout_change() {
    let dir = tempfile::tempdir().unwrap();
    let mut info = TensorInfo::dense("s", DType::F32, vec![2, 3]);
    info.layout = Layout::SparseCsr;
    let part = |r: &str, b: Vec<u8>| Part {
        role: r.into(),
        bytes: Cow::Owned(b),
    };
    let le64 = |v: &[u64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let csr = TensorView {
        info,
        parts: vec![
            part("values", f32s(&[1.0, 2.0])),
            part("indices", le64(&[0, 2])),
            part("indptr", le64(&[0, 1, 2])),
        ],
    };
    let sparse = model(dir.path(), "s.zt", vec![csr]);
    let densed = dir.path().join("d.safetensors");
    let o = run(&[&"convert", &sparse, &densed, &"--densify"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&[&"diff", &sparse, &densed]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("~ s: layout sparse_csr -> dense"), "{t}");
    assert!(!t.contains("no differences"), "{t}");
}

#[test]
fn exit_codes_agree_with_the_readme() {
    let dir = tempfile::tempdir().unwrap();
    // A cast that a value does not survive: a refused conversion, exit 3.
    let src = model(
        dir.path(),
        "big.safetensors",
        vec![dense(
            "x",
            DType::F64,
            vec![1],
            1e300f64.to_le_bytes().to_vec(),
        )],
    );
    let o = run(&[&"convert", &src, &dir.path().join("o.gptrs"), &"--cast"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("overflows"), "{}", text(&o));
    // WTXT armor damage: an integrity failure (exit 1) in verify and in convert alike.
    let w = dir.path().join("m.wtxt");
    let src = two(dir.path(), "m.zt");
    assert!(run(&[&"convert", &src, &w]).status.success());
    let body = std::fs::read_to_string(&w).unwrap();
    let lines: Vec<&str> = body.split_inclusive('\n').collect();
    let at = lines.iter().position(|l| l.starts_with("ch ")).unwrap() + 1;
    let mut damaged = String::new();
    for (i, l) in lines.iter().enumerate() {
        if i == at {
            damaged.push_str(&l[..l.len() / 2]);
            damaged.push('\n');
        } else {
            damaged.push_str(l);
        }
    }
    let bad = dir.path().join("bad.wtxt");
    std::fs::write(&bad, damaged).unwrap();
    let v = run(&[&"verify", &bad]);
    let c = run(&[&"convert", &bad, &dir.path().join("o.safetensors")]);
    assert_eq!(v.status.code(), Some(1), "verify: {}", text(&v));
    assert_eq!(c.status.code(), Some(1), "convert: {}", text(&c));
}

#[test]
fn numbers_plurals_and_notes_read_as_people_read_them() {
    let dir = tempfile::tempdir().unwrap();
    let x = 1.0f32;
    let y = f32::from_bits(x.to_bits() + 1); // 1 + 2^-23
    let a = model(
        dir.path(),
        "a.safetensors",
        vec![dense("w", DType::F32, vec![1], f32s(&[x]))],
    );
    let b = model(
        dir.path(),
        "b.safetensors",
        vec![dense("w", DType::F32, vec![1], f32s(&[y]))],
    );
    let o = run(&[&"diff", &a, &b]);
    let t = text(&o);
    assert!(t.contains("max abs diff 1.19e-07"), "{t}");
    assert!(t.contains("1 of 1 element differ"), "{t}");
    let o = run(&[&"diff", &a, &a]);
    assert!(
        text(&o).contains("no differences in 1 tensor\n"),
        "{}",
        text(&o)
    );
    // --json keeps every digit.
    let o = run(&[&"diff", &a, &b, &"--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        doc["changed"][0]["max_abs_diff"].as_f64().unwrap(),
        (y - x) as f64
    );
    // Seven casts: one note, like a refusal group.
    let many: Vec<_> = (0..7)
        .map(|i| {
            dense(
                &format!("d{i}"),
                DType::F64,
                vec![1],
                0.5f64.to_le_bytes().to_vec(),
            )
        })
        .collect();
    let src = model(dir.path(), "many.safetensors", many);
    let o = run(&[&"convert", &src, &dir.path().join("m.gptrs"), &"--cast"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    let notes: Vec<&str> = t.lines().filter(|l| l.starts_with("note: cast")).collect();
    assert_eq!(
        notes,
        [r#"note: cast 7 tensors f64 -> f32: "d0", "d1", "d2", "d3", "d4" and 2 more"#],
        "{t}"
    );
    assert!(t.contains(": 7 tensors, "), "{t}");
    let o = run(&[&"convert", &a, &dir.path().join("one.zt")]);
    assert!(text(&o).contains(": 1 tensor, "), "{}", text(&o));
}

#[test]
fn a_truncated_file_says_where_it_ends_and_what_its_index_says() {
    let dir = tempfile::tempdir().unwrap();
    let src = two(dir.path(), "m.safetensors");
    let bytes = std::fs::read(&src).unwrap();
    let cut = dir.path().join("cut.safetensors");
    std::fs::write(&cut, &bytes[..bytes.len() - 3]).unwrap();
    let o = run(&[&"inspect", &cut]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(4), "{t}");
    assert!(
        t.contains(&format!("the file ends at byte {}", bytes.len() - 3)),
        "{t}"
    );
}

#[test]
fn ztensor_stores_crc32c_by_default_and_verify_checks_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = two(dir.path(), "m.safetensors");
    let zt = dir.path().join("m.zt");
    assert!(run(&[&"convert", &src, &zt]).status.success());
    let o = run(&[&"verify", &zt]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("ok: checked 2 tensors by crc32c"), "{t}");
    // `digests=none` stores none: nothing to check.
    let none = dir.path().join("none.zt");
    let o = run(&[&"convert", &src, &none, &"-O", &"digests=none"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&[&"verify", &none]);
    assert!(text(&o).contains("nothing to check"), "{}", text(&o));
}

#[test]
fn gptrs_base_id_is_not_called_a_data_check() {
    let dir = tempfile::tempdir().unwrap();
    let src = two(dir.path(), "m.safetensors");
    let g = dir.path().join("m.gptrs");
    assert!(run(&[&"convert", &src, &g]).status.success());
    let o = run(&[&"verify", &g]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(!t.contains("by base_id"), "{t}");
}

#[test]
fn a_detached_signature_checked_with_its_key_does_not_ask_for_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let src = two(dir.path(), "m.safetensors");
    let key = dir.path().join("k");
    assert!(run(&[&"keygen", &"-o", &key]).status.success());
    let sig = dir.path().join("m.sig");
    let o = run(&[&"sign", &src, &"--key", &key, &"-o", &sig]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let pubkey = dir.path().join("k.pub");
    for extra in [&[][..], &["--tensor", "a"][..]] {
        let mut c = cmd(&[
            &"verify",
            &src,
            &"--signature",
            &sig,
            &"--public-key",
            &pubkey,
        ]);
        let o = c.args(extra).output().unwrap();
        let t = text(&o);
        assert_eq!(o.status.code(), Some(0), "{extra:?}: {t}");
        assert!(!t.contains("give --public-key"), "{extra:?}: {t}");
    }
}
