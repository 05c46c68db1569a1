//! `tessera verify`'s report as users read it: one line per layer by default, every
//! check with `-v`, only failures with `--quiet`; "nothing to check" (exit 0, never "ok")
//! for a file that stores no digests; a summary line saying what was checked.
//! (ECC repairs reported as damage: `fold_cli.rs`.)

use std::process::{Command, Output};

fn data(rel: &str) -> String {
    format!("{}/../tessera/tests/data/{rel}", env!("CARGO_MANIFEST_DIR"))
}

fn verify(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .arg("verify")
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_file_without_digests_has_nothing_to_check() {
    let f = data("safetensors/mixed.safetensors");
    let o = verify(&[&f]);
    assert_eq!(o.status.code(), Some(0));
    let last = text(&o).lines().last().unwrap().to_string();
    assert!(
        last.contains("nothing to check: this .safetensors stores no digests"),
        "{last}"
    );
    assert!(!last.contains(": ok"), "{last}");
    let o = verify(&[&f, "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["result"], "nothing to check");
    assert_eq!(doc["ok"], true);
    // A set of such files: the set's own checks ran, the shards store no digests.
    let o = verify(&[&data("sets/hf")]);
    assert_eq!(o.status.code(), Some(0));
    let t = text(&o);
    assert!(
        t.contains("nothing to check") && t.contains("the set's"),
        "{t}"
    );
}

#[test]
fn the_default_report_is_one_line_per_layer_and_says_what_was_checked() {
    // valid-dense.zt: w and flag by crc32c, b by sha256, big by md5 (not checked), empty
    // without a digest (gen.py in that folder).
    let f = data("ztensor/valid-dense.zt");
    let o = verify(&[&f]);
    assert_eq!(o.status.code(), Some(0));
    let t = text(&o);
    let lines: Vec<&str> = t.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("crc32c") && l.ends_with("2 ok")),
        "{t}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("md5") && l.contains("1 not checked")),
        "{t}"
    );
    assert!(
        !t.contains("tensor \"w\""),
        "per-tensor lines without -v:\n{t}"
    );
    let last = lines.last().unwrap();
    assert!(
        last.contains(": ok: checked 3 tensors by crc32c, sha256"),
        "{last}"
    );
    // -v: every check, by subject.
    let t = text(&verify(&[&f, "-v"]));
    for name in ["w", "b", "flag", "big", "empty"] {
        assert!(t.contains(&format!("tensor \"{name}\"")), "{name}: {t}");
    }
    // --quiet: nothing when all is well.
    let o = verify(&[&f, "--quiet"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(text(&o), "");
}

#[test]
fn failures_are_listed_in_every_mode() {
    let f = data("ztensor/integrity-bad.zt");
    for extra in [None, Some("-v"), Some("--quiet")] {
        let mut args = vec![f.as_str()];
        args.extend(extra);
        let o = verify(&args);
        assert_eq!(o.status.code(), Some(1), "{extra:?}");
        let t = text(&o);
        assert!(
            t.lines().any(|l| l.starts_with("FAILED")
                && l.contains("tensor \"bad\"")
                && l.contains("sha256")),
            "{extra:?}: {t}"
        );
        assert!(t.contains("FAILED: 1 of 3 checks failed"), "{extra:?}: {t}");
        if extra == Some("--quiet") {
            assert!(!t.contains("tensor \"ok1\""), "{t}");
            assert!(!t.lines().any(|l| l.starts_with("crc32c")), "{t}");
        }
    }
}

#[test]
fn an_unauthenticated_layer_is_one_line_not_one_per_array() {
    // basic.wtxt: four arrays, hmac=0 on each.
    let o = verify(&[&data("wtxt/basic.wtxt")]);
    assert_eq!(o.status.code(), Some(0));
    let t = text(&o);
    let hmac: Vec<&str> = t.lines().filter(|l| l.contains("hmac")).collect();
    assert_eq!(hmac.len(), 1, "{t}");
    assert!(hmac[0].contains("4 unauthenticated"), "{t}");
    assert!(t.lines().last().unwrap().contains("4 arrays"), "{t}");
}
