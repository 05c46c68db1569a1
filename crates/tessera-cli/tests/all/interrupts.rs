//! An interrupted or failed write leaves nothing behind: SIGINT / SIGTERM during a
//! `convert` remove the temporary file (a sharded convert: the hidden directory of
//! finished shards), leave the old target intact and exit 130 / 143; during an upload
//! to S3 they abort the multipart upload, delete the objects the run uploaded and the
//! staging directory. What a SIGKILL leaves, the next write to the same target removes
//! (never a live writer's temporary). An input truncated by another process while it is
//! read is a clear error (exit 2), not a bare "Bus error", and leaves no temporary
//! either.
#![cfg(unix)]

use std::borrow::Cow;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tessera::{DType, Format, Model, TensorInfo, TensorView};

/// A safetensors file of `mib` MiB in 8 tensors.
fn big_source(dir: &Path, mib: usize) -> std::path::PathBuf {
    source_of(dir, "big.safetensors", &[mib * (1 << 20) / 8; 8])
}

/// A safetensors file `name` with one f32 tensor of each of `sizes` bytes.
fn source_of(dir: &Path, name: &str, sizes: &[usize]) -> std::path::PathBuf {
    let mut m = Model::new();
    for (t, &bytes) in sizes.iter().enumerate() {
        let per = bytes / 4;
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
    let p = dir.join(name);
    tessera::convert::write_file(Format::Safetensors, &m, &p, &Default::default()).unwrap();
    p
}

/// The names in `dir` that start with `prefix`.
fn entries(dir: &Path, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    v.sort();
    v
}

/// Waits (up to a minute) until `ready` holds, the child still running.
fn wait_for(child: &mut std::process::Child, what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what}: did not happen"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "{what}: the child ended first"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn signal(child: &std::process::Child, sig: i32) {
    #[allow(unsafe_code)]
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

use crate::common::tessera;

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
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs the test-hooks feature (scripts/test.sh enables it)"
)]
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

/// SIGINT / SIGTERM during a sharded convert remove the hidden directory of finished
/// shards (before: it stayed, 496 MB in the report, while the message said the output
/// was removed), and no shard or index reaches the folder.
#[test]
fn sigint_and_sigterm_during_a_sharded_convert_remove_the_set_directory() {
    let dir = tempfile::tempdir().unwrap();
    let src = big_source(dir.path(), 32);
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let out = dir.path().join("out.zt");
        let mut child = tessera()
            .args(["convert", "--compress", "zstd:19", "--shards", "8"])
            .arg(&src)
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Signal once a shard is finished in the set's hidden directory.
        wait_for(&mut child, "a finished shard", || {
            entries(dir.path(), ".out.set.").iter().any(|d| {
                std::fs::read_dir(dir.path().join(d))
                    .map(|r| {
                        r.flatten()
                            .any(|e| !e.file_name().to_string_lossy().starts_with('.'))
                    })
                    .unwrap_or(false)
            })
        });
        signal(&child, sig);
        let res = child.wait_with_output().unwrap();
        assert_eq!(res.status.code(), Some(code), "signal {sig}");
        let err = String::from_utf8_lossy(&res.stderr);
        assert!(err.contains("removed"), "{err}");
        assert_eq!(
            entries(dir.path(), ".out"),
            Vec::<String>::new(),
            "signal {sig}"
        );
        assert_eq!(
            entries(dir.path(), "out"),
            Vec::<String>::new(),
            "signal {sig}"
        );
    }
}

/// What a SIGKILL leaves (a temporary file, a set's hidden directory) is removed by the
/// next write to the same target (before: it stayed for good); a live writer's
/// temporary is never removed by another write.
#[test]
fn the_next_write_removes_what_a_sigkill_left_but_not_a_live_writers_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let src = big_source(dir.path(), 32);
    let small = source_of(dir.path(), "small.safetensors", &[1024]);
    let out = dir.path().join("out.zt");
    let slow = |extra: &[&str]| {
        tessera()
            .args(["convert", "--compress", "zstd:19"])
            .args(extra)
            .arg(&src)
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let quick = |extra: &[&str]| {
        let o = tessera()
            .arg("convert")
            .args(extra)
            .arg(&small)
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    // A single file: the temporary stays after SIGKILL, and goes with the next write.
    let mut child = slow(&[]);
    wait_for(&mut child, "the temporary", || {
        !temporaries(dir.path()).is_empty()
    });
    signal(&child, libc::SIGKILL);
    child.wait().unwrap();
    assert_eq!(
        temporaries(dir.path()).len(),
        1,
        "SIGKILL leaves the temporary"
    );
    quick(&[]);
    assert_eq!(temporaries(dir.path()), Vec::<String>::new());

    // A set: the hidden directory stays after SIGKILL, and goes with the next set write.
    let mut child = slow(&["--shards", "4"]);
    wait_for(&mut child, "the set directory", || {
        !entries(dir.path(), ".out.set.").is_empty()
    });
    signal(&child, libc::SIGKILL);
    child.wait().unwrap();
    assert_eq!(entries(dir.path(), ".out.set.").len(), 1);
    let small2 = source_of(dir.path(), "small2.safetensors", &[1024, 1024]);
    let o = tessera()
        .args(["convert", "--shards", "2"])
        .arg(&small2)
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(entries(dir.path(), ".out.set."), Vec::<String>::new());

    // A live writer's temporary survives another write to the same target.
    let mut child = slow(&[]);
    wait_for(&mut child, "the temporary", || {
        !temporaries(dir.path()).is_empty()
    });
    let live = temporaries(dir.path());
    quick(&[]);
    assert!(
        child.try_wait().unwrap().is_none(),
        "the slow writer ended too soon to tell"
    );
    assert_eq!(
        temporaries(dir.path()),
        live,
        "a live writer's temporary was removed"
    );
    signal(&child, libc::SIGTERM);
    child.wait().unwrap();
    assert_eq!(temporaries(dir.path()), Vec::<String>::new());
}

/// The S3 test server (`scripts/remote-servers.sh`): endpoint and bucket, or None (the
/// test then passes with a notice, unless `TESSERA_REQUIRE_REMOTE=1`).
fn s3_server(test: &str) -> Option<(String, String)> {
    let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    let got = var("TESSERA_TEST_S3_ENDPOINT").zip(var("TESSERA_TEST_S3_BUCKET"));
    if got.is_none() {
        if std::env::var("TESSERA_REQUIRE_REMOTE").as_deref() == Ok("1") {
            panic!("{test}: TESSERA_REQUIRE_REMOTE=1 but the test servers' variables are not set");
        }
        eprintln!("notice: {test} skipped: no test servers (scripts/test.sh starts them)");
    }
    got
}

/// A plain GET to the S3 test server (moto answers without a signature): the body.
fn s3_get(endpoint: &str, path_and_query: &str) -> String {
    use std::io::{Read, Write};
    let host = endpoint
        .strip_prefix("http://")
        .expect("an http:// endpoint")
        .trim_end_matches('/');
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(
        s,
        "GET {path_and_query} HTTP/1.0\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(
        text.starts_with("HTTP/1.") && text[9..].starts_with("200"),
        "{text}"
    );
    text
}

/// Objects under `prefix` (ListObjectsV2) and multipart uploads open under it
/// (ListMultipartUploads).
fn s3_state(endpoint: &str, bucket: &str, prefix: &str) -> (usize, usize) {
    let objects = s3_get(endpoint, &format!("/{bucket}?list-type=2&prefix={prefix}"));
    let uploads = s3_get(endpoint, &format!("/{bucket}?uploads&prefix={prefix}"));
    (
        objects.matches("<Key>").count(),
        uploads.matches("<UploadId>").count(),
    )
}

/// SIGINT during an upload of a set to S3, with one shard's object complete and the
/// next one's multipart upload open: the upload is aborted (ListMultipartUploads shows
/// none), the object this run wrote is deleted, the staging directory is removed, the
/// message says so, the exit is 130, and the same command then succeeds (before: the
/// object, the open upload and the staging stayed, and the rerun was refused because
/// the object existed).
#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs the test-hooks feature (scripts/test.sh enables it)"
)]
fn sigint_during_an_s3_upload_aborts_it_and_removes_what_the_run_wrote() {
    let test = "sigint_during_an_s3_upload_aborts_it_and_removes_what_the_run_wrote";
    let Some((endpoint, bucket)) = s3_server(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Two shards under 8 MiB: [4 MiB], [20 MiB] (the second above one 16 MiB part).
    let src = source_of(dir.path(), "m.safetensors", &[4 << 20, 20 << 20]);
    let staging = tempfile::tempdir().unwrap();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let prefix = format!("interrupts/{}-{nanos}/", std::process::id());
    let dest = format!("s3://{bucket}/{prefix}m.safetensors");
    let convert = |pause: bool| {
        let mut c = tessera();
        c.args([
            "convert",
            "--max-shard-size",
            "8MiB",
            "--endpoint",
            &endpoint,
        ])
        .arg(&src)
        .arg(&dest)
        .env("TMPDIR", staging.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        if pause {
            c.env("TESSERA_TEST_PAUSE_MID_UPLOAD_MS", "60000");
        }
        c
    };
    let mut child = convert(true).spawn().unwrap();
    wait_for(&mut child, "one object and an open upload", || {
        s3_state(&endpoint, &bucket, &prefix) == (1, 1)
    });
    assert_eq!(entries(staging.path(), ".tessera-staging.").len(), 1);
    signal(&child, libc::SIGINT);
    let res = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&res.stderr);
    assert_eq!(res.status.code(), Some(130), "{err}");
    for said in [
        "aborted",
        "deleted the 1 object",
        "m-00001-of-00002",
        "staging directory",
    ] {
        assert!(err.contains(said), "{said:?} not in: {err}");
    }
    assert_eq!(s3_state(&endpoint, &bucket, &prefix), (0, 0), "{err}");
    assert_eq!(entries(staging.path(), ""), Vec::<String>::new());
    // The same command now succeeds: two shards and the index.
    let res = convert(false).output().unwrap();
    assert!(
        res.status.success(),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    assert_eq!(s3_state(&endpoint, &bucket, &prefix), (3, 0));
}
