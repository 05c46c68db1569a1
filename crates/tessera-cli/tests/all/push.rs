//! `tessera push`: files to a Git repository (a bare one made here; the other targets
//! are the library's tests, `crates/tessera/tests/all/push.rs`), the generation chosen
//! from the target, a second push a no-op, and a bad URL a usage error.

use std::path::Path;
use std::process::Command;

use crate::common::{run, text};

fn data(p: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tessera/tests/data")
        .join(p)
}

#[test]
fn push_to_git_picks_the_next_generation_and_is_idempotent() {
    if !Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        eprintln!("notice: no git; push_to_git skipped");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("w.git");
    assert!(Command::new("git")
        .args(["init", "-q", "--bare", "-b", "main"])
        .arg(&repo)
        .status()
        .unwrap()
        .success());
    let file = tmp.path().join("model.safetensors");
    std::fs::copy(data("safetensors/mixed.safetensors"), &file).unwrap();
    let url = format!("git+file://{}", repo.display());
    let work = tmp.path().join("work");
    let push = |extra: &[&str]| {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"push", &file, &"--to", &url, &"--work-dir", &work];
        for e in extra {
            args.push(e);
        }
        run(&args)
    };
    let o = push(&["--step", "7"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).starts_with("pushed generation 1 to git+file://"),
        "{}",
        text(&o)
    );
    let o = push(&["--generation", "1", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["already_present"], true, "{v}");
    assert_eq!(v["generation"], 1);
    let o = push(&[]);
    assert!(text(&o).starts_with("pushed generation 2"), "{}", text(&o));
    let log = Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["log", "--format=%s", "main"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(
        log.contains("gen-0000001 step 7 digest files:blake3:"),
        "{log}"
    );
    let m = Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["show", "gen-0000001:tessera-snapshot.json"])
        .output()
        .unwrap();
    let m = String::from_utf8_lossy(&m.stdout);
    assert!(m.contains("\"format\": \"safetensors\""), "{m}");
}

#[test]
fn push_refuses_a_bad_target() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("x.bin");
    std::fs::write(&f, b"x").unwrap();
    let o = run(&[&"push", &f, &"--to", &"ftp://host/x"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("ftp:// scheme is not supported"),
        "{}",
        text(&o)
    );
}
