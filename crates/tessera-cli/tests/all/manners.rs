//! Issue 14's manners: a conversion refused is refused whole (every tensor, the metadata
//! and the chunks the target cannot hold, grouped by reason with the flag that would
//! allow each); `--help` groups format-only flags; GPTRS shows no invented
//! `requires_grad`; a GGUF llama.cpp cannot load is written with a warning.

use crate::common::tessera;

/// A safetensors file (its own layout: u64 header length, JSON header, data) with
/// tensors of the given dtypes (two elements each) and one metadata key.
fn safetensors(path: &std::path::Path, tensors: &[(&str, &str, usize)]) {
    let mut header = String::from("{\"__metadata__\":{\"author\":\"me\"}");
    let mut off = 0;
    for (name, dtype, size) in tensors {
        header.push_str(&format!(
            ",\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":[2],\"data_offsets\":[{off},{}]}}",
            off + 2 * size
        ));
        off += 2 * size;
    }
    header.push('}');
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.resize(bytes.len() + off, 0);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn all_refusals_of_a_conversion_come_in_one_message_with_their_flags() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("m.safetensors");
    let mut tensors: Vec<(String, &str, usize)> =
        (0..8).map(|i| (format!("w{i}"), "F64", 8)).collect();
    tensors.push(("ids".into(), "I64", 8));
    tensors.push(("fine".into(), "F32", 4));
    let t: Vec<(&str, &str, usize)> = tensors
        .iter()
        .map(|(n, d, s)| (n.as_str(), *d, *s))
        .collect();
    safetensors(&src, &t);
    let out = dir.path().join("m.gptrsten");
    let r = tessera()
        .arg("convert")
        .arg(&src)
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(3), "{err}");
    assert!(!out.exists());
    assert!(err.contains("10 refusals"), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "{err}");
    assert!(
        lines[1].contains("8 tensors are f64")
            && lines[1].contains("\"w0\", \"w1\", \"w2\", \"w3\", \"w4\" and 3 more")
            && lines[1].ends_with("(use --cast)"),
        "{err}"
    );
    assert!(lines[2].contains("tensor \"ids\" is i64") && lines[2].ends_with("(use --cast)"));
    assert!(lines[3].contains("metadata") && lines[3].ends_with("(use --drop-metadata)"));
    assert!(!err.contains("\"fine\""), "{err}");
    // Both allowed: written, each change printed.
    let r = tessera()
        .args(["convert", "--cast", "--drop-metadata"])
        .arg(&src)
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let report = String::from_utf8_lossy(&r.stdout);
    // The casts of the same kind as one grouped note, as the refusals are.
    assert_eq!(report.matches("note: cast ").count(), 2, "{report}");
    assert!(
        report.contains(
            "note: cast 8 tensors f64 -> f32: \"w0\", \"w1\", \"w2\", \"w3\", \"w4\" and 3 more"
        ),
        "{report}"
    );
    assert!(
        report.contains("note: dropped 1 metadata key\n"),
        "{report}"
    );
}

#[test]
fn a_writer_refusal_shows_its_hint_as_the_flag() {
    // GGUF cannot store u64; the refusal's hint is rendered as the CLI's flag.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("u.safetensors");
    safetensors(&src, &[("u", "U64", 8)]);
    let r = tessera()
        .arg("convert")
        .arg(&src)
        .arg(dir.path().join("u.gguf"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(3), "{err}");
    assert!(
        err.contains("tensor \"u\" is u64") && err.contains("(use --cast)"),
        "{err}"
    );
    assert!(!err.contains("option: cast"), "{err}");
}

#[test]
fn help_groups_format_only_flags_under_headings() {
    let r = tessera().args(["convert", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success());
    // Each heading comes before the flags it groups, and after the general options.
    let at = |s: &str| {
        help.find(s)
            .unwrap_or_else(|| panic!("{s} missing:\n{help}"))
    };
    let general = at("--no-fsync");
    let loss = at("Allowing a loss");
    let fmt = at("Format options");
    let input = at("Damaged, encrypted, authenticated or remote inputs");
    assert!(general < loss && general < fmt && general < input, "{help}");
    for flag in ["--cast", "--densify", "--drop-metadata", "--dequantize"] {
        let p = at(flag);
        assert!(p > loss, "{flag} not under its heading:\n{help}");
    }
    for flag in [
        "--ecc",
        "--zero-base-id",
        "--rows-per-chunk",
        "--tensor-hashes",
    ] {
        assert!(at(flag) > fmt, "{flag}:\n{help}");
    }
    for flag in [
        "--salvage",
        "--identity",
        "--passphrase-file",
        "--accept-loss",
    ] {
        assert!(at(flag) > input, "{flag}:\n{help}");
    }
    // A verb without format options shows none of them.
    let r = tessera().args(["id", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&r.stdout);
    assert!(
        !help.contains("--ecc") && !help.contains("--cast"),
        "{help}"
    );
    let input = help.find("Damaged, encrypted").expect("heading");
    assert!(help.find("--passphrase-file").unwrap() > input, "{help}");
}

#[test]
fn gptrs_written_from_a_source_without_requires_grad_does_not_show_one() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("w.safetensors");
    safetensors(&src, &[("w", "F32", 4)]);
    let out = dir.path().join("w.gptrs");
    let r = tessera()
        .args(["convert", "--drop-metadata"])
        .arg(&src)
        .arg(&out)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    for args in [&["inspect"][..], &["inspect", "--json"][..]] {
        let r = tessera().args(args).arg(&out).output().unwrap();
        let text = String::from_utf8_lossy(&r.stdout);
        assert!(r.status.success());
        assert!(text.contains("\"w\"") || text.contains(" w "), "{text}");
        assert!(!text.contains("requires_grad"), "{args:?}: {text}");
    }
}

#[test]
fn gguf_without_general_architecture_warns_about_llama_cpp() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("w.safetensors");
    safetensors(&src, &[("w", "F32", 4)]);
    let r = tessera()
        .arg("convert")
        .arg(&src)
        .arg(dir.path().join("w.gguf"))
        .output()
        .unwrap();
    let all = [r.stdout, r.stderr].concat();
    let text = String::from_utf8_lossy(&all);
    assert!(r.status.success(), "{text}");
    assert!(
        text.contains("general.architecture") && text.contains("llama.cpp will not load"),
        "{text}"
    );
}

#[test]
fn an_unauthenticated_wtxt_verified_without_a_key_says_so_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("m.safetensors");
    let t: Vec<(String, &str, usize)> = (0..6).map(|i| (format!("a{i}"), "F32", 4)).collect();
    let t: Vec<(&str, &str, usize)> = t.iter().map(|(n, d, s)| (n.as_str(), *d, *s)).collect();
    safetensors(&src, &t);
    let hmac = dir.path().join("k");
    std::fs::write(&hmac, b"0123456789abcdef0123456789abcdef").unwrap();
    let out = dir.path().join("m.wtxt");
    let r = tessera()
        .args(["convert", "--drop-metadata", "--hmac-key-file"])
        .arg(&hmac)
        .arg(&src)
        .arg(&out)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let r = tessera().arg("verify").arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&r.stdout);
    assert_eq!(r.status.code(), Some(0), "{text}");
    let hmac_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("HMAC") || l.starts_with("hmac"))
        .collect();
    assert_eq!(hmac_lines.len(), 1, "{text}");
    assert!(
        hmac_lines[0].contains("6 unauthenticated") && hmac_lines[0].contains("--hmac-key-file"),
        "{text}"
    );
}

/// Issue 14's list of messages, each in the user's terms.
#[test]
fn error_messages_say_what_and_where_in_the_users_terms() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("m.safetensors");
    safetensors(&src, &[("w", "F32", 4), ("v", "F32", 4)]);
    let run = |args: &[&std::ffi::OsStr]| {
        let r = tessera().args(args).output().unwrap();
        (
            r.status.code(),
            String::from_utf8_lossy(&r.stderr).into_owned(),
        )
    };
    // A missing output folder is named, not the hidden temporary beside it.
    let missing = dir.path().join("no-such-dir");
    let (code, err) = run(&[
        "convert".as_ref(),
        src.as_os_str(),
        missing.join("o.zt").as_os_str(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("output folder") && err.contains("no-such-dir"),
        "{err}"
    );
    assert!(!err.contains(".o.zt."), "not the hidden temporary: {err}");
    // A truncated file says so, with the size it should have and the size it has.
    let bytes = std::fs::read(&src).unwrap();
    let cut = dir.path().join("cut.safetensors");
    std::fs::write(&cut, &bytes[..bytes.len() - 3]).unwrap();
    let (code, err) = run(&["inspect".as_ref(), cut.as_os_str()]);
    assert_eq!(code, Some(4), "{err}");
    assert!(
        err.contains("truncated") || err.contains("ends at"),
        "{err}"
    );
    // A wrong age passphrase: one "age:", no debug output.
    let wtxt = dir.path().join("m.wtxt");
    let (code, err) = run(&[
        "convert".as_ref(),
        "--drop-metadata".as_ref(),
        src.as_os_str(),
        wtxt.as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let pass = dir.path().join("pass");
    std::fs::write(&pass, "right horse battery").unwrap();
    let enc = dir.path().join("m.enc");
    let (code, err) = run(&[
        "wtxt".as_ref(),
        "encrypt".as_ref(),
        wtxt.as_os_str(),
        "-o".as_ref(),
        enc.as_os_str(),
        "--passphrase-file".as_ref(),
        pass.as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "wrong horse").unwrap();
    let (code, err) = run(&[
        "inspect".as_ref(),
        enc.as_os_str(),
        "--passphrase-file".as_ref(),
        wrong.as_os_str(),
    ]);
    assert_ne!(code, Some(0));
    assert!(!err.contains("age: age:"), "{err}");
    assert_eq!(err.matches(" age: ").count(), 1, "{err}");
    assert!(!err.contains("Error {") && !err.contains("kind:"), "{err}");
    // No passphrase at all: the hint is the flag.
    let (code, err) = run(&["inspect".as_ref(), enc.as_os_str()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--passphrase-file"), "{err}");
    // pytorch_model.bin is a PyTorch checkpoint, read as one.
    let bin = dir.path().join("pytorch_model.bin");
    let (code, err) = run(&[
        "convert".as_ref(),
        "--drop-metadata".as_ref(),
        src.as_os_str(),
        bin.as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let r = tessera().arg("inspect").arg(&bin).output().unwrap();
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success() && text.contains("PyTorch"), "{text}");
    assert!(!text.contains("npz member"), "{text}");
}
