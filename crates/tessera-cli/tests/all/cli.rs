//! The CLI as a user runs it: exit codes, messages, the README's format table.

use std::path::{Path, PathBuf};

use crate::common::tessera;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn unknown_format_exits_3_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.bin");
    std::fs::write(&p, b"definitely not a tensor file").unwrap();
    let out = tessera().arg("inspect").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown format"), "{err}");
}

#[test]
fn ztensor_v2_truncated_is_malformed() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v2.zt");
    std::fs::write(&p, b"\x89ZT2\r\n\x1a\n\0\0\0\0\0\0\0\0").unwrap();
    let out = tessera().arg("verify").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ztensor-v2") && err.contains("truncated"),
        "{err}"
    );
}

#[test]
fn missing_file_is_a_usage_error() {
    let out = tessera()
        .args(["inspect", "/nonexistent/definitely/missing.zt"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn convert_without_a_known_extension_asks_for_to() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.bin");
    std::fs::write(&p, b"whatever").unwrap();
    let out = tessera()
        .arg("convert")
        .arg(&p)
        .arg(dir.path().join("out.unknownext"))
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--to"));
}

#[test]
fn readme_format_table_matches_tessera_formats() {
    let out = tessera().args(["formats", "--markdown"]).output().unwrap();
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme
        .find("<!-- formats-table")
        .and_then(|i| readme[i..].find("-->").map(|j| i + j + 4))
        .expect("README has the formats-table marker");
    let end = readme.find("<!-- /formats-table -->").expect("end marker");
    assert_eq!(
        readme[start..end].trim(),
        table.trim(),
        "README's format table is stale: regenerate it with `tessera formats --markdown`"
    );
}

/// The README's list of output extensions (the `convert` paragraph) names every
/// extension of every writable format in the registry.
#[test]
fn readme_lists_every_writable_extension() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let line = readme
        .lines()
        .skip_while(|l| !l.contains("The output format of `convert` comes from"))
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(!line.is_empty(), "README lost its convert paragraph");
    for f in tessera::Format::ALL.into_iter().filter(|f| f.can_write()) {
        for e in f.extensions() {
            assert!(
                line.split(|c: char| c == '`' || c.is_whitespace() || c == '(' || c == ')')
                    .any(|w| w == format!(".{e}")),
                "README's convert paragraph does not list .{e} ({f})"
            );
        }
    }
}

/// Writes a small f32/i32 model as safetensors with the library (the source for
/// cross-format CLI tests).
fn small_model(path: &Path) {
    use std::borrow::Cow;
    use tessera::{DType, Format, Model, TensorInfo, TensorView};
    let mut m = Model::new();
    let w: Vec<u8> = (0..12)
        .flat_map(|i| (i as f32 / 3.0).to_le_bytes())
        .collect();
    m.push(
        TensorView::dense(
            TensorInfo::dense("layer.weight", DType::F32, vec![3, 4]),
            Cow::Owned(w),
        )
        .unwrap(),
    )
    .unwrap();
    let b: Vec<u8> = (0..4i32).flat_map(|i| (i - 2).to_le_bytes()).collect();
    m.push(
        TensorView::dense(
            TensorInfo::dense("layer.bias", DType::I32, vec![4]),
            Cow::Owned(b),
        )
        .unwrap(),
    )
    .unwrap();
    tessera::convert::write_file(Format::Safetensors, &m, path, &Default::default()).unwrap();
}

#[test]
fn diff_of_the_same_model_in_every_format_finds_no_difference() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("m.safetensors");
    small_model(&src);
    for ext in [
        "zt", "fold", "mind", "aero", "gptrs", "gptrsten", "npz", "gguf", "wtxt",
    ] {
        let out = dir.path().join(format!("m.{ext}"));
        let c = tessera()
            .arg("convert")
            .arg(&src)
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            c.status.success(),
            "{ext}: {}",
            String::from_utf8_lossy(&c.stderr)
        );
        let d = tessera().arg("diff").arg(&src).arg(&out).output().unwrap();
        let text = String::from_utf8_lossy(&d.stdout);
        assert_eq!(d.status.code(), Some(0), "{ext}: {text}");
        assert!(text.contains("no differences"), "{ext}: {text}");
    }
    // And a real difference is found, with its size.
    let other = dir.path().join("other.zt");
    // Without a digest (zTensor stores crc32c by default, which would refuse the
    // edited bytes before diff sees them).
    let c = tessera()
        .arg("convert")
        .arg(&src)
        .arg(&other)
        .args(["-O", "digests=none"])
        .output()
        .unwrap();
    assert!(c.status.success());
    let mut bytes = std::fs::read(&other).unwrap();
    let pos = bytes
        .windows(4)
        .position(|w| w == (1.0f32 / 3.0).to_le_bytes())
        .unwrap();
    bytes[pos..pos + 4].copy_from_slice(&2.5f32.to_le_bytes());
    std::fs::write(&other, &bytes).unwrap();
    let d = tessera()
        .arg("diff")
        .arg(&src)
        .arg(&other)
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(d.status.code(), Some(1));
    let j: serde_json::Value = serde_json::from_slice(&d.stdout).unwrap();
    assert_eq!(j["changed"][0]["name"], "layer.weight");
    assert_eq!(j["changed"][0]["elements_differing"], 1);
    let max = j["changed"][0]["max_abs_diff"].as_f64().unwrap();
    assert!((max - (2.5 - 1.0 / 3.0)).abs() < 1e-6, "{max}");
}

/// `tessera convert x.safetensors x.pt` keeps the float8s, u16/u32/u64 and f4 (issue 34
/// §1; torch 2.x's `_rebuild_tensor_v3`) instead of refusing them, and the `.pt` reads
/// back with the same values. The inputs were written by the safetensors package.
/// Before, each conversion was refused ("PyTorch checkpoint cannot store", --cast).
#[test]
fn safetensors_with_float8_and_unsigned_ints_convert_to_pt() {
    let data = root().join("crates/tessera/tests/data/safetensors");
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "bf16_fp8.safetensors",
        "mixed.safetensors",
        "fp4_torch.safetensors",
    ] {
        let src = data.join(name);
        let out = dir.path().join(name.replace(".safetensors", ".pt"));
        let c = tessera()
            .arg("convert")
            .arg(&src)
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            c.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&c.stderr)
        );
        let d = tessera().arg("diff").arg(&src).arg(&out).output().unwrap();
        let text = String::from_utf8_lossy(&d.stdout);
        assert_eq!(d.status.code(), Some(0), "{name}: {text}");
        assert!(text.contains("no differences"), "{name}: {text}");
        let i = tessera().arg("inspect").arg(&out).output().unwrap();
        let text = String::from_utf8_lossy(&i.stdout);
        for dtype in match name {
            "bf16_fp8.safetensors" => &["f8_e4m3fn", "f8_e5m2"][..],
            "mixed.safetensors" => &["u16", "u32", "u64", "f8_e8m0", "f8_e5m2fnuz"][..],
            _ => &["f4_e2m1", "f8_e8m0"][..],
        } {
            assert!(text.contains(dtype), "{name} {dtype}: {text}");
        }
    }
}

#[test]
fn tour_writes_verifies_and_converts_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let out = tessera()
        .arg("tour")
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("FAILED"), "{text}");
    assert!(!text.contains("not supported yet"), "{text}");
    assert!(text.contains("11 formats written and verified"), "{text}");
    for ext in [
        "wtxt",
        "zt",
        "fold",
        "aero",
        "gptrs",
        "gptrsten",
        "safetensors",
        "npz",
        "gguf",
        "pt",
    ] {
        assert!(
            dir.path().join(format!("tour.{ext}")).exists(),
            "tour.{ext} missing"
        );
    }
}

#[test]
fn a_directory_is_called_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = tessera().arg("inspect").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.to_lowercase().contains("is a directory"), "{err}");
    assert!(!err.contains("No such device"), "{err}");
}
