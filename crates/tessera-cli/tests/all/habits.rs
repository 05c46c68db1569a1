//! The CLI's manners as users meet them: a closed pipe is not an error, a key is never
//! overwritten by accident, an empty file says so, and each exit code means one thing.

use std::io::Read;
use std::process::{Command, Stdio};

use crate::common::tessera;

/// A safetensors file with `n` one-element tensors (written with the format's own
/// layout: u64 header length, JSON header, data).
fn many_tensors(path: &std::path::Path, n: usize) {
    let mut header = String::from("{");
    for i in 0..n {
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            "\"t{i}\":{{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[{},{}]}}",
            4 * i,
            4 * i + 4
        ));
    }
    header.push('}');
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.resize(bytes.len() + 4 * n, 0);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_reader_that_closes_the_pipe_early_is_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("many.safetensors");
    many_tensors(&p, 20_000);
    let mut child = tessera()
        .arg("inspect")
        .arg(&p)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one line, then close our end, as `| head -1` does.
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 64];
    let n = stdout.read(&mut first).unwrap();
    assert!(n > 0);
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {err}");
    assert!(!err.contains("Broken pipe"), "{err}");
}

#[test]
fn keygen_never_overwrites_a_key_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let k = dir.path().join("signer");
    let first = tessera().arg("keygen").arg("-o").arg(&k).output().unwrap();
    assert_eq!(first.status.code(), Some(0));
    let secret = std::fs::read(&k).unwrap();
    let public = std::fs::read(dir.path().join("signer.pub")).unwrap();

    let again = tessera().arg("keygen").arg("-o").arg(&k).output().unwrap();
    assert_eq!(again.status.code(), Some(2));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("exists") && err.contains("--force"), "{err}");
    assert_eq!(std::fs::read(&k).unwrap(), secret, "the secret key changed");

    // A lone public key left over is protected too.
    std::fs::remove_file(&k).unwrap();
    let lone = tessera().arg("keygen").arg("-o").arg(&k).output().unwrap();
    assert_eq!(lone.status.code(), Some(2));
    assert_eq!(
        std::fs::read(dir.path().join("signer.pub")).unwrap(),
        public
    );

    let forced = tessera()
        .args(["keygen", "--force", "-o"])
        .arg(&k)
        .output()
        .unwrap();
    assert_eq!(forced.status.code(), Some(0));
    assert_ne!(
        std::fs::read(dir.path().join("signer.pub")).unwrap(),
        public
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&k), 0o600);
        assert_eq!(mode(&dir.path().join("signer.pub")), 0o644);
    }
}

#[test]
fn an_empty_file_is_called_empty() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("model.safetensors");
    std::fs::write(&p, b"").unwrap();
    let out = tessera().arg("inspect").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("empty file"), "{err}");
}

#[test]
fn a_directory_is_a_usage_error_that_says_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = tessera().arg("inspect").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr).to_lowercase();
    assert!(err.contains("directory"), "{err}");
}

#[test]
fn io_failures_have_their_own_exit_code() {
    // Running as root defeats permission tests on files; the mapping is checked on the
    // errors the OS gives for those cases.
    for (code, want) in [
        (libc::ENOSPC, tessera_cli::EXIT_IO),
        (libc::EACCES, tessera_cli::EXIT_IO),
        (libc::EIO, tessera_cli::EXIT_IO),
        (libc::ENOENT, 2),
        (libc::EISDIR, 2),
    ] {
        let io = std::io::Error::from_raw_os_error(code);
        let via_tessera = anyhow::Error::new(tessera::Error::from(io));
        assert_eq!(
            tessera_cli::exit_code_for(&via_tessera),
            want,
            "errno {code}"
        );
        let bare = anyhow::Error::new(std::io::Error::from_raw_os_error(code)).context("writing");
        assert_eq!(tessera_cli::exit_code_for(&bare), want, "bare errno {code}");
    }
    // A full disk, for real, where this machine lets us mount a tiny tmpfs.
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("tiny");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&mnt)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipping the real full-disk case: cannot mount a tmpfs here");
        return;
    }
    let src = dir.path().join("big.safetensors");
    many_tensors(&src, 100_000);
    let out = tessera()
        .arg("convert")
        .arg(&src)
        .arg(mnt.join("out.safetensors"))
        .output()
        .unwrap();
    let left: Vec<_> = std::fs::read_dir(&mnt).unwrap().collect();
    let _ = Command::new("umount").arg(&mnt).status();
    assert_eq!(
        out.status.code(),
        Some(tessera_cli::EXIT_IO as i32),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(left.is_empty(), "a failed write left {left:?}");
}

#[test]
fn inspect_counts_in_words_people_use_and_totals_by_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one.safetensors");
    many_tensors(&one, 1);
    let out = tessera().arg("inspect").arg(&one).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap();
    assert!(first.ends_with(", 1 tensor"), "{first}");
    assert!(
        !text.contains("(version -)") && !text.contains("0 chunks"),
        "{text}"
    );
    assert!(
        text.contains("  1 parameter, 4 B stored: f32 1 tensor (4 B)"),
        "{text}"
    );

    let many = dir.path().join("many.safetensors");
    many_tensors(&many, 12);
    let out = tessera()
        .args(["inspect", "--filter", "t1*"])
        .arg(&many)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // t1, t10, t11 match; the others are not listed.
    assert!(
        text.lines().next().unwrap().contains("3 of 12 match"),
        "{text}"
    );
    assert!(text.contains("  t10 ") && !text.contains("  t2 "), "{text}");
    let out = tessera()
        .args(["inspect", "--json", "--filter", "t?"])
        .arg(&many)
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["tensors"].as_array().unwrap().len(), 10);
    assert_eq!(doc["totals"]["tensors"], 10);
    assert_eq!(doc["totals"]["parameters"], 10);
    assert_eq!(doc["totals"]["stored_bytes"], 40);
    assert_eq!(doc["totals"]["by_dtype"]["f32"]["tensors"], 10);
}

#[test]
fn glob_matching() {
    use tessera_cli::cmd::inspect::glob_match;
    assert!(glob_match("blk.*.attn_*", "blk.12.attn_q.weight"));
    assert!(!glob_match("blk.*.attn_*", "blk.12.ffn_up.weight"));
    assert!(glob_match("*", ""));
    assert!(glob_match("a?c", "abc") && !glob_match("a?c", "ac"));
    assert!(glob_match("*.bias", "x.bias") && !glob_match("*.bias", "x.bias2"));
    assert!(glob_match("é*", "éa"));
}

/// A GGUF-free, two-tensor safetensors file and its path.
fn two_tensors(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("two.safetensors");
    many_tensors(&p, 2);
    p
}

#[test]
fn extract_writes_the_format_its_output_names_or_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let src = two_tensors(dir.path());
    // .safetensors gets safetensors, not an .npy under that name.
    let out = dir.path().join("t1.safetensors");
    let o = tessera()
        .arg("extract")
        .arg(&src)
        .args(["t1", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(
        tessera::Format::detect(&bytes),
        Some(tessera::Format::Safetensors)
    );
    // .npy and no extension: NumPy.
    for name in ["t1.npy", "t1"] {
        let out = dir.path().join(name);
        let o = tessera()
            .arg("extract")
            .arg(&src)
            .args(["t1", "-o"])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0));
        assert!(
            std::fs::read(&out).unwrap().starts_with(b"\x93NUMPY"),
            "{name}"
        );
    }
    // An extension that names no writable format: refused, nothing written. (`.bin`
    // names PyTorch checkpoints, which are written now.)
    let out = dir.path().join("t1.wsum");
    let o = tessera()
        .arg("extract")
        .arg(&src)
        .args(["t1", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains(".npy"));
    assert!(!out.exists());
}

#[test]
fn extract_to_stdout_and_suggestions_for_unknown_names() {
    let dir = tempfile::tempdir().unwrap();
    let src = two_tensors(dir.path());
    let o = tessera()
        .arg("extract")
        .arg(&src)
        .args(["t0", "-o", "-"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    // Exactly the .npy file, nothing else on stdout.
    assert!(o.stdout.starts_with(b"\x93NUMPY"));
    let file = dir.path().join("t0.npy");
    tessera()
        .arg("extract")
        .arg(&src)
        .args(["t0", "-o"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(o.stdout, std::fs::read(&file).unwrap());

    let o = tessera()
        .arg("extract")
        .arg(&src)
        .args(["t2", "-o"])
        .arg(dir.path().join("x.npy"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("did you mean") && err.contains("\"t0\"") && err.contains("\"t1\""),
        "{err}"
    );
    let o = tessera()
        .arg("extract")
        .arg(&src)
        .args(["zzzzzzzz", "-o"])
        .arg(dir.path().join("x.npy"))
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&o.stderr).contains("did you mean"));
}

#[test]
fn convert_takes_the_output_as_dash_o_too() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("m.safetensors");
    many_tensors(&src, 3);
    let out = dir.path().join("m.zt");
    let o = tessera()
        .arg("convert")
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(&std::fs::read(&out).unwrap()[..8], b"ZTEN1000");
    // Both forms at once, or neither, is a usage error.
    let both = tessera()
        .arg("convert")
        .arg(&src)
        .arg(dir.path().join("a.zt"))
        .arg("-o")
        .arg(dir.path().join("b.zt"))
        .output()
        .unwrap();
    assert_eq!(both.status.code(), Some(2));
    let neither = tessera().arg("convert").arg(&src).output().unwrap();
    assert_eq!(neither.status.code(), Some(2));
    assert!(!dir.path().join("a.zt").exists() && !dir.path().join("b.zt").exists());
}

#[test]
fn source_date_epoch_makes_stamped_formats_reproducible() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("m.safetensors");
    many_tensors(&src, 3);
    for ext in ["wtxt", "fold"] {
        let convert = |out: &str, epoch: Option<&str>| {
            let out = dir.path().join(out);
            let mut c = tessera();
            c.arg("convert").arg(&src).arg(&out);
            match epoch {
                Some(e) => c.env("SOURCE_DATE_EPOCH", e),
                None => c.env_remove("SOURCE_DATE_EPOCH"),
            };
            let o = c.output().unwrap();
            (o, std::fs::read(&out).ok())
        };
        let (o, a) = convert(&format!("a.{ext}"), Some("1764000000"));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // A second later the clock has moved; the stamp has not.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let (_, b) = convert(&format!("b.{ext}"), Some("1764000000"));
        assert_eq!(a, b, "{ext}: same SOURCE_DATE_EPOCH, same bytes");
        let (_, c) = convert(&format!("c.{ext}"), Some("1764000001"));
        assert_ne!(a, c, "{ext}: the epoch is what is stamped");
        if ext == "wtxt" {
            // 1764000000 is 2025-11-24T16:00:00Z.
            let text = String::from_utf8(a.unwrap()).unwrap();
            assert!(text.contains(" ts=2025-11-24T16:00:00Z "), "{text:.200}");
        }
        let (o, d) = convert(&format!("d.{ext}"), Some("next tuesday"));
        assert_eq!(
            o.status.code(),
            Some(2),
            "{ext}: a bad epoch is a usage error"
        );
        assert!(d.is_none(), "{ext}: nothing written");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("SOURCE_DATE_EPOCH"), "{err}");
    }
}
