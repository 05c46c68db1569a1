//! Writer options on `convert`: `-O NAME=VALUE` and the older flags are one set of
//! options; an option the output format does not take is refused, naming the option and
//! the format, before anything is written.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::process::Output;

use tessera::{DType, Format, Model, TensorInfo, TensorView};

use crate::common::tessera;

fn model(dir: &Path) -> PathBuf {
    let p = dir.join("m.safetensors");
    let mut m = Model::new();
    let w: Vec<u8> = (0..4096u32)
        .flat_map(|i| ((i % 7) as f32).to_le_bytes())
        .collect();
    m.push(
        TensorView::dense(
            TensorInfo::dense("w", DType::F32, vec![4096]),
            Cow::Owned(w),
        )
        .unwrap(),
    )
    .unwrap();
    tessera::convert::write_file(Format::Safetensors, &m, &p, &Default::default()).unwrap();
    p
}

fn convert(src: &Path, out: &Path, extra: &[&str]) -> Output {
    tessera()
        .arg("convert")
        .arg(src)
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Refused with exit 2, the message naming the option and the format, no output left.
fn assert_refused(o: &Output, out: &Path, option: &str, format: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(option), "does not name {option}: {err}");
    assert!(err.contains(format), "does not name {format}: {err}");
    assert!(!out.exists(), "{} was written", out.display());
}

#[test]
fn compression_into_safetensors_and_aero_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let src = model(dir.path());
    let out = dir.path().join("o.safetensors");
    assert_refused(
        &convert(&src, &out, &["--compress", "zstd:15"]),
        &out,
        "compression",
        "safetensors",
    );
    let out = dir.path().join("o.aero");
    assert_refused(
        &convert(&src, &out, &["--compress", "zstd"]),
        &out,
        "compression",
        "AERO",
    );
    assert_refused(
        &convert(&src, &out, &["-O", "compression=zstd"]),
        &out,
        "compression",
        "AERO",
    );
}

#[test]
fn options_gguf_does_not_take_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let src = model(dir.path());
    let key = dir.path().join("k");
    let k = tessera()
        .arg("keygen")
        .arg("-o")
        .arg(&key)
        .output()
        .unwrap();
    assert!(k.status.success(), "{}", stderr(&k));
    let out = dir.path().join("o.gguf");
    let key = key.to_string_lossy().into_owned();
    for (flags, option) in [
        (vec!["--digest", "sha256"], "digests"),
        (vec!["--ecc", "8"], "ecc"),
        (vec!["--sign-key", key.as_str()], "sign_key"),
        (vec!["--tensor-hashes"], "tensor_hashes"),
        (vec!["--gen", "3"], "generation"),
    ] {
        assert_refused(&convert(&src, &out, &flags), &out, option, "GGUF");
    }
    // All at once: every one is named.
    let o = convert(&src, &out, &["--ecc", "8", "--gen", "3"]);
    assert_refused(&o, &out, "ecc, generation", "GGUF");
}

#[test]
fn zstd_levels_out_of_range_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let src = model(dir.path());
    let out = dir.path().join("o.zt");
    for flags in [["--compress", "zstd:99"], ["-O", "compression=zstd:0"]] {
        let o = convert(&src, &out, &flags);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("zstd levels are 1–22"),
            "{}",
            stderr(&o)
        );
        assert!(!out.exists());
    }
}

#[test]
fn flags_and_dash_o_are_the_same_options() {
    let dir = tempfile::tempdir().unwrap();
    let src = model(dir.path());
    let pairs: [(&str, Vec<&str>, Vec<&str>); 3] = [
        (
            "zt",
            vec!["--compress", "zstd:5", "--digest", "sha256"],
            vec!["-O", "compression=zstd:5", "-O", "digests=sha256"],
        ),
        (
            "aero",
            vec![
                "--shard-size",
                "4K",
                "--tensor-hashes",
                "--uuid",
                "00112233445566778899aabbccddeeff",
            ],
            vec![
                "-O",
                "shard_size=4K",
                "-O",
                "tensor_hashes",
                "--option",
                "uuid=00112233445566778899aabbccddeeff",
            ],
        ),
        (
            "fold",
            vec!["--ecc", "8", "--ts", "2024-01-02T03:04:05Z"],
            vec!["-O", "ecc=8", "-O", "timestamp=2024-01-02T03:04:05Z"],
        ),
    ];
    for (ext, flags, dash_o) in pairs {
        let a = dir.path().join(format!("flags.{ext}"));
        let b = dir.path().join(format!("dash_o.{ext}"));
        let plain = dir.path().join(format!("plain.{ext}"));
        for (out, args) in [(&a, &flags), (&b, &dash_o), (&plain, &vec![])] {
            let o = convert(&src, out, args);
            assert!(o.status.success(), "{ext} {args:?}: {}", stderr(&o));
        }
        let (a, b, plain) = (
            std::fs::read(a).unwrap(),
            std::fs::read(b).unwrap(),
            std::fs::read(plain).unwrap(),
        );
        assert_eq!(a, b, "{ext}: the flags and -O wrote different files");
        assert_ne!(a, plain, "{ext}: the options changed nothing");
    }
}

#[test]
fn dash_o_parsing_errors_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let src = model(dir.path());
    let cases: [(&str, &str, &str); 5] = [
        ("o.zt", "=zstd", "has no name"),
        (
            "o.zt",
            "no_such_option=1",
            "unknown option \"no_such_option\"",
        ),
        ("o.fold", "ecc=lots", "option ecc"),
        ("o.aero", "shard_size=1Q", "option shard_size"),
        ("o.aero", "tensor_hashes=maybe", "not a bool"),
    ];
    for (name, opt, want) in cases {
        let out = dir.path().join(name);
        let o = convert(&src, &out, &["-O", opt]);
        assert_eq!(o.status.code(), Some(2), "{opt}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{opt}: {}", stderr(&o));
        assert!(!out.exists());
    }
}

#[test]
fn formats_lists_each_formats_options() {
    let o = tessera().args(["formats", "--options"]).output().unwrap();
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    for f in Format::ALL
        .into_iter()
        .filter(|f| f.can_write() && f.identity().listed)
    {
        assert!(text.contains(&format!("{}:", f.name())), "{f}: {text}");
        for opt in f.codec().options {
            assert!(text.contains(opt.name), "{f} {}: {text}", opt.name);
        }
    }
}

/// Each option a format declares is a `convert` flag under its name and each older
/// spelling, listed with the formats that take it: the CLI derives them from the
/// declarations, so a new option needs no CLI change.
#[test]
fn every_declared_option_is_a_convert_flag() {
    let o = tessera().args(["convert", "--help"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let help = String::from_utf8_lossy(&o.stdout);
    for opt in tessera::formats::all_options() {
        for name in std::iter::once(&opt.name).chain(opt.aliases) {
            let flag = format!("--{}", name.replace('_', "-"));
            assert!(
                help.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                    .any(|w| w == flag),
                "{flag} missing from convert --help:\n{help}"
            );
        }
        assert!(help.contains(opt.help), "{}: {help}", opt.name);
    }
    // The names, not only the older spellings: the same file as -O.
    let dir = tempfile::tempdir().unwrap();
    let src = model(dir.path());
    let pairs: [(&str, Vec<&str>, Vec<&str>); 2] = [
        (
            "pt",
            vec!["--archive", "inner"],
            vec!["-O", "archive=inner"],
        ),
        (
            "wtxt",
            vec![
                "--generation",
                "9",
                "--timestamp",
                "2024-01-02T03:04:05Z",
                "--fixed-salt",
                "0011223344556677",
            ],
            vec![
                "-O",
                "gen=9",
                "-O",
                "ts=2024-01-02T03:04:05Z",
                "-O",
                "salt=0011223344556677",
            ],
        ),
    ];
    for (ext, flags, dash_o) in pairs {
        let a = dir.path().join(format!("flags.{ext}"));
        let b = dir.path().join(format!("dash_o.{ext}"));
        for (out, args) in [(&a, &flags), (&b, &dash_o)] {
            let o = convert(&src, out, args);
            assert!(o.status.success(), "{ext} {args:?}: {}", stderr(&o));
        }
        assert_eq!(
            std::fs::read(&a).unwrap(),
            std::fs::read(&b).unwrap(),
            "{ext}: the flags and -O wrote different files"
        );
    }
    let pt = std::fs::read(dir.path().join("flags.pt")).unwrap();
    assert!(
        pt.windows(10).any(|w| w == b"inner/data"),
        "the archive name is used"
    );
    let w = std::fs::read_to_string(dir.path().join("flags.wtxt")).unwrap();
    assert!(w.contains("gen=000009"), "{w}");
}
