//! An interrupted or failed write leaves nothing behind: SIGINT / SIGTERM during a
//! `convert` remove the temporary file, leave the old target intact and exit 130 / 143;
//! an input truncated by another process while it is read is a clear error (exit 2),
//! not a bare "Bus error", and leaves no temporary either.
#![cfg(unix)]

use std::borrow::Cow;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tessera::{DType, Format, Model, TensorInfo, TensorView};

/// A safetensors file of `mib` MiB in 8 tensors.
fn big_source(dir: &Path, mib: usize) -> std::path::PathBuf {
    let mut m = Model::new();
    let per = mib * (1 << 20) / 8 / 4;
    for t in 0..8 {
        let data: Vec<u8> = (0..per)
            .flat_map(|i| ((i * 7 + t) as f32).to_le_bytes())
            .collect();
        m.push(
            TensorView::dense(
                TensorInfo::dense(format!("t{t}"), DType::F32, vec![per as u64]),
                Cow::Owned(data),
            )
            .unwrap(),
        )
        .unwrap();
    }
    let p = dir.join("big.safetensors");
    tessera::convert::write_file(Format::Safetensors, &m, &p, &Default::default()).unwrap();
    p
}

fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

#[test]
fn sigint_and_sigterm_remove_the_temporary_and_keep_the_old_target() {
    let dir = tempfile::tempdir().unwrap();
    let src = big_source(dir.path(), 96);
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let out = dir.path().join("out.zt");
        std::fs::write(&out, b"the old file").unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["convert", "--compress", "zstd:19", "--digest", "sha256"])
            .arg(&src)
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Wait until the write is under way (its temporary exists), then signal.
        let start = Instant::now();
        while temporaries(dir.path()).is_empty() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "no temporary appeared"
            );
            assert!(
                child.try_wait().unwrap().is_none(),
                "convert ended before the signal"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        #[allow(unsafe_code)]
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(child.id() as i32, sig);
        }
        let res = child.wait_with_output().unwrap();
        assert_eq!(res.status.code(), Some(code), "signal {sig}");
        let err = String::from_utf8_lossy(&res.stderr);
        assert!(err.contains("removed"), "{err}");
        assert_eq!(
            temporaries(dir.path()),
            Vec::<String>::new(),
            "signal {sig}"
        );
        assert_eq!(
            std::fs::read(&out).unwrap(),
            b"the old file",
            "signal {sig}"
        );
    }
}

#[test]
fn an_input_truncated_while_read_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let src = big_source(dir.path(), 32);
    let out = dir.path().join("out.zt");
    let child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["convert", "--digest", "sha256"])
        .arg(&src)
        .arg(&out)
        .env("TESSERA_TEST_PAUSE_AFTER_OPEN_MS", "1500")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // While it pauses after mapping the input, cut the input to its first page.
    std::thread::sleep(Duration::from_millis(500));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&src)
        .unwrap()
        .set_len(4096)
        .unwrap();
    let res = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&res.stderr);
    assert_eq!(res.status.code(), Some(2), "{err}");
    assert!(err.contains("shrank"), "{err}");
    assert_eq!(temporaries(dir.path()), Vec::<String>::new());
    assert!(!out.exists());
}
