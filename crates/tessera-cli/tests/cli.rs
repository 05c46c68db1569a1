//! The CLI as a user runs it: exit codes, messages, the README's format table.

use std::path::{Path, PathBuf};
use std::process::Command;

fn tessera() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
}

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
fn ztensor_v2_is_detected_and_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v2.zt");
    std::fs::write(&p, b"\x89ZT2\r\n\x1a\n\0\0\0\0\0\0\0\0").unwrap();
    let out = tessera().arg("verify").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("zTensor v2"), "{err}");
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
