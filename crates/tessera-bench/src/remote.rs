//! `remote` suite: reading a file where it lives against downloading it whole, over the
//! same local servers the remote tests use — nginx (HTTP with ranges) and moto's S3
//! server — on 127.0.0.1. When `TESSERA_TEST_S3_ENDPOINT`, `TESSERA_TEST_S3_BUCKET`,
//! `TESSERA_TEST_HTTP_URL` and `TESSERA_TEST_HTTP_ROOT` are set (servers already
//! running) they are reused; otherwise the suite runs `scripts/remote-servers.sh start`
//! (needing `.venv` or `$TESSERA_VENV` with moto, and nginx) and stops what it started.
//!
//! The file: the synthetic model (`--size-mib`, 1 GiB by default) as safetensors. Three
//! operations, each against a plain whole-file `GET` (`curl`, the peer) on the same URL:
//! - inspect: open (HEAD + the index by range) and list the tensors, vs downloading it;
//! - extract one tensor (the middle one), vs downloading then reading it locally;
//! - convert to zTensor on local disk straight from the URL, vs download then convert.
//!
//! Bytes fetched are Tessera's own counters (`tessera::remote::totals`) and, for HTTP,
//! what nginx logged as sent (its access log, `TESSERA_TEST_HTTP_LOG`). Each row's MB/s
//! is the file's size over the time (effective rate); the ratio is curl's time over
//! Tessera's. Timings are medians of interleaved repetitions, printed, never asserted.

use std::path::{Path, PathBuf};
use std::process::Command;

use tessera::remote::{upload_file, RemoteOptions};
use tessera::{Format, ReadOptions};

use crate::common::{interleaved, median, report, synthetic_model, Opts};

/// The servers: reused from the environment or started (and stopped on drop).
struct Servers {
    endpoint: String,
    bucket: String,
    http_url: String,
    http_root: PathBuf,
    http_log: Option<PathBuf>,
    started: Option<tempfile::TempDir>,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn err(msg: impl Into<String>) -> tessera::Error {
    tessera::Error::invalid_input(msg.into())
}

impl Servers {
    fn get() -> tessera::Result<Servers> {
        let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
        if let (Some(endpoint), Some(bucket), Some(http_url), Some(root)) = (
            var("TESSERA_TEST_S3_ENDPOINT"),
            var("TESSERA_TEST_S3_BUCKET"),
            var("TESSERA_TEST_HTTP_URL"),
            var("TESSERA_TEST_HTTP_ROOT"),
        ) {
            println!("reusing the running servers: S3 {endpoint}, HTTP {http_url}");
            return Ok(Servers {
                endpoint,
                bucket,
                http_url,
                http_root: root.into(),
                http_log: var("TESSERA_TEST_HTTP_LOG").map(PathBuf::from),
                started: None,
            });
        }
        let dir = tempfile::tempdir()?;
        let venv = std::env::var_os("TESSERA_VENV")
            .map(PathBuf::from)
            .unwrap_or_else(|| root().join(".venv"));
        let out = Command::new("bash")
            .arg(root().join("scripts/remote-servers.sh"))
            .arg("start")
            .arg(dir.path())
            .env("TESSERA_VENV", &venv)
            .current_dir(root())
            .output()?;
        let mut srv = Servers {
            endpoint: String::new(),
            bucket: String::new(),
            http_url: String::new(),
            http_root: PathBuf::new(),
            http_log: None,
            started: Some(dir),
        };
        if !out.status.success() {
            return Err(err(format!(
                "scripts/remote-servers.sh start failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        // `export A=1 B=2` lines.
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            for kv in line.trim_start_matches("export ").split_whitespace() {
                let Some((k, v)) = kv.split_once('=') else {
                    continue;
                };
                match k {
                    "TESSERA_TEST_S3_ENDPOINT" => srv.endpoint = v.into(),
                    "TESSERA_TEST_S3_BUCKET" => srv.bucket = v.into(),
                    "TESSERA_TEST_HTTP_URL" => srv.http_url = v.into(),
                    "TESSERA_TEST_HTTP_ROOT" => srv.http_root = v.into(),
                    "TESSERA_TEST_HTTP_LOG" => srv.http_log = Some(v.into()),
                    // The dummy credentials moto takes.
                    k if k.starts_with("AWS_") => std::env::set_var(k, v),
                    _ => {}
                }
            }
        }
        if srv.http_url.is_empty() || srv.endpoint.is_empty() {
            return Err(err(
                "scripts/remote-servers.sh started no HTTP or S3 server",
            ));
        }
        println!(
            "started servers: S3 {}, HTTP {}",
            srv.endpoint, srv.http_url
        );
        Ok(srv)
    }

    fn remote(&self) -> RemoteOptions {
        // Without the disk cache: every run measures the network, as curl does.
        RemoteOptions::default()
            .endpoint(Some(self.endpoint.clone()))
            .cache(false)
    }

    /// Body bytes nginx logged as sent for `uri`.
    fn nginx_sent(&self, uri: &str) -> Option<u64> {
        let log = std::fs::read_to_string(self.http_log.as_ref()?).ok()?;
        Some(
            log.lines()
                .filter(|l| l.split(' ').nth(1) == Some(uri))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
                .sum(),
        )
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        if let Some(dir) = &self.started {
            let _ = Command::new("bash")
                .arg(root().join("scripts/remote-servers.sh"))
                .arg("stop")
                .arg(dir.path())
                .status();
        }
    }
}

/// `curl` fetching `url` whole into `out` with one plain GET (signed with SigV4 and the
/// environment's AWS keys when `s3`: moto refuses anonymous reads of private objects).
fn curl(url: &str, out: &Path, s3: bool) -> tessera::Result<()> {
    let mut c = Command::new("curl");
    c.args(["-sS", "--fail", "-o"]).arg(out).arg(url);
    if s3 {
        let var = |n: &str| std::env::var(n).unwrap_or_default();
        let region = std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into());
        c.arg("--aws-sigv4")
            .arg(format!("aws:amz:{region}:s3"))
            .arg("--user")
            .arg(format!(
                "{}:{}",
                var("AWS_ACCESS_KEY_ID"),
                var("AWS_SECRET_ACCESS_KEY")
            ));
    }
    let st = c
        .status()
        .map_err(|e| err(format!("curl: {e} (the peer of this suite)")))?;
    if !st.success() {
        return Err(err(format!("curl {url} exited with {st}")));
    }
    Ok(())
}

fn size(n: u64) -> String {
    match n {
        n if n >= 10 << 20 => format!("{} MiB", n >> 20),
        n if n >= 10 << 10 => format!("{} KiB", n >> 10),
        n => format!("{n} B"),
    }
}

/// Runs `f`, adding the requests and bytes it fetched (the process-wide remote
/// counters before and after) to `fetched`.
fn counted<T>(fetched: &mut Vec<(u64, u64)>, f: impl FnOnce() -> T) -> T {
    let before = tessera::remote::totals();
    let out = f();
    let after = tessera::remote::totals();
    fetched.push((after.0 - before.0, after.1 - before.1));
    out
}

/// What nginx logged as sent for Tessera's side of one run: every request of the
/// measurement is in its log, so Tessera's share is the total minus curl's whole-file
/// GETs (one per repetition), divided by the repetitions. HTTP only (moto logs no
/// sizes).
fn nginx_note(
    srv: &Servers,
    label: &str,
    uri: &str,
    before: Option<u64>,
    reps: usize,
    total: u64,
) -> String {
    let reps = reps.max(1) as u64;
    match (label, before, srv.nginx_sent(uri)) {
        ("HTTP", Some(a), Some(b)) => {
            let ours = b.saturating_sub(a).saturating_sub(reps * total);
            format!(" (nginx: {} sent)", size(ours / reps))
        }
        _ => String::new(),
    }
}

/// Runs the suite.
pub fn run(opts: &Opts) -> tessera::Result<()> {
    let srv = Servers::get()?;
    let name = format!("bench-remote-{}.safetensors", opts.size_mib);
    let local = srv.http_root.join(&name);
    {
        let model = synthetic_model(opts)?;
        tessera::convert::write_file(Format::Safetensors, &model, &local, &Default::default())?;
    }
    let total = std::fs::metadata(&local)?.len();
    let s3 = format!("s3://{}/{name}", srv.bucket);
    upload_file(&local, &tessera::Location::parse(&s3)?, &srv.remote())?;
    // curl's GET of the S3 object, path-style.
    let s3_http = format!("{}/{}/{name}", srv.endpoint, srv.bucket);
    let http = format!("{}/{name}", srv.http_url);
    let mid = {
        let f = tessera::open_path(&local, &ReadOptions::default())?;
        let infos = f.container().tensor_infos();
        infos[infos.len() / 2].name.clone()
    };
    let work = tempfile::tempdir()?;
    let dl = work.path().join("download.safetensors");
    let out_zt = work.path().join("out.zt");
    let ropts = ReadOptions::default();
    let remote = srv.remote();
    println!(
        "file: {} safetensors, {} tensors; one tensor: {mid}",
        size(total),
        opts.tensors
    );

    for (label, url, plain) in [("HTTP", &http, &http), ("S3", &s3, &s3_http)] {
        let signed = label == "S3";
        let uri = format!("/{name}");
        let settle = crate::common::sync;
        // One checked run of each side first: an error must not pass for a fast run.
        curl(plain, &dl, signed)?;
        tessera::open_path(url, &ropts.clone().remote(remote.clone()))?;

        // inspect
        let mut fetched = Vec::new();
        let sent_before = srv.nginx_sent(&uri);
        let (ours, theirs) = interleaved(
            opts.reps,
            settle,
            || {
                counted(&mut fetched, || {
                    let f = tessera::open_path(url, &ropts.clone().remote(remote.clone()))
                        .expect("open");
                    f.container().tensor_infos().len()
                })
            },
            || curl(plain, &dl, signed).expect("curl"),
        );
        let (req, bytes) = fetched[0];
        let server = nginx_note(&srv, label, &uri, sent_before, opts.reps, total);
        report(
            &format!(
                "{label} inspect: {} fetched in {req} requests{server} (curl: {})",
                size(bytes),
                size(total)
            ),
            total as usize,
            median(&ours),
            Some(("curl GET whole file", median(&theirs))),
        );

        // extract one tensor
        let mut fetched = Vec::new();
        let sent_before = srv.nginx_sent(&uri);
        let (ours, theirs) = interleaved(
            opts.reps,
            settle,
            || {
                counted(&mut fetched, || {
                    let f = tessera::open_path(url, &ropts.clone().remote(remote.clone()))
                        .expect("open");
                    f.container().tensor(&mid).expect("tensor").nbytes()
                })
            },
            || {
                curl(plain, &dl, signed).expect("curl");
                let f = tessera::open_path(&dl, &ropts).expect("open");
                let n = f.container().tensor(&mid).expect("tensor").nbytes();
                n as u64
            },
        );
        let (req, bytes) = fetched[0];
        let server = nginx_note(&srv, label, &uri, sent_before, opts.reps, total);
        report(
            &format!(
                "{label} extract 1 of {} tensors: {} fetched in {req} requests{server}",
                opts.tensors,
                size(bytes)
            ),
            total as usize,
            median(&ours),
            Some(("curl GET + local read", median(&theirs))),
        );

        // convert to a local zTensor file
        let mut fetched = Vec::new();
        let sent_before = srv.nginx_sent(&uri);
        let (ours, theirs) = interleaved(
            opts.reps,
            settle,
            || {
                counted(&mut fetched, || {
                    let f = tessera::open_path(url, &ropts.clone().remote(remote.clone()))
                        .expect("open");
                    tessera::convert::write_file(
                        Format::Ztensor,
                        f.container(),
                        &out_zt,
                        &Default::default(),
                    )
                    .expect("convert");
                })
            },
            || {
                curl(plain, &dl, signed).expect("curl");
                let f = tessera::open_path(&dl, &ropts).expect("open");
                tessera::convert::write_file(
                    Format::Ztensor,
                    f.container(),
                    &out_zt,
                    &Default::default(),
                )
                .expect("convert");
            },
        );
        let (req, bytes) = fetched[0];
        let server = nginx_note(&srv, label, &uri, sent_before, opts.reps, total);
        report(
            &format!(
                "{label} convert → local .zt: {} fetched in {req} requests{server}",
                size(bytes)
            ),
            total as usize,
            median(&ours),
            Some(("curl GET, then convert", median(&theirs))),
        );
    }
    let _ = std::fs::remove_file(&local);
    Ok(())
}
