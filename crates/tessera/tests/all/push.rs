//! The push targets (`tessera::push`) against real servers on 127.0.0.1, started by
//! `scripts/remote-servers.sh`: moto's S3 server, nginx's `/dav/` location (HTTP PUT),
//! Debian's docker-registry (distribution 2.8, once without auth and once with
//! htpasswd), and bare Git repositories made here with the `git` program (`git-lfs` for
//! the LFS test). Faults come from a small proxy written here (`Proxy`), on 127.0.0.1,
//! that forwards to a real server or answers in its place.
//!
//! Without the servers' variables each test prints a notice and passes, unless
//! `TESSERA_REQUIRE_REMOTE=1`.
#![cfg(feature = "remote")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use tessera::push::{Artifact, PushOptions, Target};
use tessera::remote::RemoteOptions;

fn var(n: &str) -> Option<String> {
    std::env::var(n).ok().filter(|v| !v.is_empty())
}

/// The variable's value, or `None` with a notice (a failure under
/// `TESSERA_REQUIRE_REMOTE=1`).
fn need(test: &str, names: &[&str]) -> Option<Vec<String>> {
    let got: Option<Vec<String>> = names.iter().map(|n| var(n)).collect();
    if got.is_none() {
        if var("TESSERA_REQUIRE_REMOTE").as_deref() == Some("1") {
            panic!("{test}: TESSERA_REQUIRE_REMOTE=1 but {names:?} are not all set (run scripts/test.sh)");
        }
        eprintln!("notice: {test} skipped: {names:?} not set (scripts/remote-servers.sh starts the servers)");
    }
    got
}

fn have_program(test: &str, prog: &str, args: &[&str]) -> bool {
    let ok = Command::new(prog)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if var("TESSERA_REQUIRE_REMOTE").as_deref() == Some("1") {
            panic!("{test}: TESSERA_REQUIRE_REMOTE=1 but `{prog}` is not installed");
        }
        eprintln!("notice: {test} skipped: no `{prog}`");
    }
    ok
}

/// A unique name for this test run.
fn unique(tag: &str) -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let n = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{tag}-{}-{n}", std::process::id())
}

/// Two small files (one `.wtxt`-named text, one binary) for generation `g`.
fn artifact(dir: &Path, g: u64) -> Artifact {
    let a = dir.join(format!("src-{g}"));
    std::fs::create_dir_all(&a).unwrap();
    let text: String = (0..200)
        .map(|i| format!("line {i} of generation {g}\n"))
        .collect();
    let bin: Vec<u8> = (0..70_000u32).map(|i| (i * 31 + g as u32) as u8).collect();
    std::fs::write(a.join("model.wtxt"), text).unwrap();
    std::fs::write(a.join("extra.bin"), &bin).unwrap();
    Artifact {
        generation: g,
        step: Some(g * 100),
        format: "wtxt".into(),
        files: vec![
            ("model.wtxt".into(), a.join("model.wtxt")),
            ("extra.bin".into(), a.join("extra.bin")),
        ],
        digest: format!("blake3:{:064x}", g * 7 + 1),
        annotations: [("loss".to_string(), "0.25".to_string())].into(),
    }
}

/// Fetches `g` back and compares each file's bytes with the artifact's.
fn fetch_equal(t: &Target, a: &Artifact, opts: &PushOptions, tmp: &Path) {
    let out = tmp.join(format!("back-{}-{}", a.generation, unique("f")));
    let files = t.fetch(a.generation, &out, opts).unwrap();
    assert_eq!(files.len(), a.files.len(), "{files:?}");
    for (name, src) in &a.files {
        assert_eq!(
            std::fs::read(out.join(name)).unwrap(),
            std::fs::read(src).unwrap(),
            "{name} fetched back from {}",
            t.display()
        );
    }
    // No temporary file left beside them.
    let n = std::fs::read_dir(&out).unwrap().count();
    assert_eq!(n, a.files.len(), "files in {}", out.display());
}

/// Push g1 and g2, fetch both back, push g1 again (a no-op), list, and refuse g1 with
/// another digest.
fn round_trip(t: &Target, opts: &PushOptions) {
    let tmp = tempfile::tempdir().unwrap();
    let a1 = artifact(tmp.path(), 1);
    let a2 = artifact(tmp.path(), 2);
    let r1 = t.push(&a1, opts).unwrap();
    assert!(!r1.already_present && r1.bytes_sent > 0, "{r1:?}");
    let r2 = t.push(&a2, opts).unwrap();
    assert!(!r2.already_present, "{r2:?}");
    fetch_equal(t, &a1, opts, tmp.path());
    fetch_equal(t, &a2, opts, tmp.path());
    let again = t.push(&a1, opts).unwrap();
    assert!(again.already_present && again.bytes_sent == 0, "{again:?}");
    assert_eq!(t.list(opts).unwrap(), vec![1, 2]);
    let mut other = a1.clone();
    other.digest = "blake3:other".into();
    let e = t.push(&other, opts).unwrap_err();
    assert_eq!(e.kind(), tessera::ErrorKind::Integrity, "{e}");
    assert!(e.to_string().contains("never overwritten"), "{e}");
    let missing = t.fetch(9, &tmp.path().join("none"), opts).unwrap_err();
    assert_eq!(missing.kind(), tessera::ErrorKind::NotFound, "{missing}");
}

fn s3_opts() -> Option<PushOptions> {
    let endpoint = var("TESSERA_TEST_S3_ENDPOINT")?;
    Some(
        PushOptions::default().remote(
            RemoteOptions::default()
                .endpoint(Some(endpoint))
                .cache(false),
        ),
    )
}

#[test]
fn s3_push_fetch_list_idempotent() {
    let Some(v) = need(
        "s3_push",
        &["TESSERA_TEST_S3_ENDPOINT", "TESSERA_TEST_S3_BUCKET"],
    ) else {
        return;
    };
    let t = Target::parse(&format!("s3://{}/{}/", v[1], unique("push"))).unwrap();
    round_trip(&t, &s3_opts().unwrap());
}

#[test]
fn http_put_push_fetch_list_idempotent() {
    let Some(v) = need("http_push", &["TESSERA_TEST_DAV_URL"]) else {
        return;
    };
    let t = Target::parse(&format!("{}{}/", v[0], unique("push"))).unwrap();
    round_trip(&t, &PushOptions::default());
}

fn bare_repo(dir: &Path) -> PathBuf {
    let repo = dir.join("weights.git");
    let o = Command::new("git")
        .args(["init", "-q", "--bare", "-b", "main"])
        .arg(&repo)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    repo
}

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn git_push_commits_each_generation_with_wtxt_attributes() {
    if !have_program("git_push", "git", &["--version"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let repo = bare_repo(tmp.path());
    let t = Target::parse(&format!("git+file://{}", repo.display())).unwrap();
    let opts = PushOptions::default().work_dir(Some(tmp.path().join("work")));
    round_trip(&t, &opts);
    // One commit per generation on main, tagged, with the message naming it.
    let log = git(&repo, &["log", "--format=%s|%an", "main"]);
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert!(
        lines[0].starts_with("tessera snapshot gen-0000002 step 200 digest blake3:"),
        "{log}"
    );
    assert!(lines[0].ends_with("|tessera"), "{log}");
    let attrs = git(&repo, &["show", "main:.gitattributes"]);
    assert!(attrs.contains("*.wtxt text eol=lf diff=wtxt"), "{attrs}");
    let tags = git(&repo, &["tag", "-l"]);
    assert_eq!(tags, "gen-0000001\ngen-0000002\n");
    let m = git(&repo, &["show", "gen-0000002:tessera-snapshot.json"]);
    assert!(
        m.contains("\"generation\": 2") && m.contains("\"loss\": \"0.25\""),
        "{m}"
    );
}

#[test]
fn git_lfs_push_stores_pointer_files() {
    if !have_program("git_lfs_push", "git", &["lfs", "version"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let repo = bare_repo(tmp.path());
    let t = Target::parse(&format!("git+file://{}", repo.display())).unwrap();
    let opts = PushOptions::default()
        .work_dir(Some(tmp.path().join("work")))
        .lfs(true);
    let a = artifact(tmp.path(), 1);
    t.push(&a, &opts).unwrap();
    // The blobs in the repository are LFS pointers; the objects are in its lfs/ store.
    let blob = git(&repo, &["cat-file", "blob", "gen-0000001:extra.bin"]);
    assert!(
        blob.starts_with("version https://git-lfs.github.com/spec/v1"),
        "{blob}"
    );
    let clone = tmp.path().join("clone");
    let o = Command::new("git")
        .args(["clone", "-q"])
        .arg(&repo)
        .arg(&clone)
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let listed = git(&clone, &["lfs", "ls-files", "-n"]);
    let mut names: Vec<&str> = listed.lines().collect();
    names.sort();
    assert_eq!(names, ["extra.bin", "model.wtxt"], "{listed}");
    assert!(repo.join("lfs/objects").is_dir());
    // A second generation reuses the clone; both come back as the real bytes.
    let a2 = artifact(tmp.path(), 2);
    t.push(&a2, &opts).unwrap();
    // Fetch from a fresh work dir: the objects come from the repository's LFS store.
    let fresh = PushOptions::default().work_dir(Some(tmp.path().join("work2")));
    fetch_equal(&t, &a, &fresh, tmp.path());
    fetch_equal(&t, &a2, &fresh, tmp.path());
    // A repository whose .gitattributes routes *.bin through LFS is pushed through LFS
    // without being asked.
    let attrs = git(&repo, &["show", "main:.gitattributes"]);
    assert!(attrs.contains("*.bin filter=lfs"), "{attrs}");
}

#[test]
fn git_refused_push_leaves_the_refs_and_says_why() {
    if !have_program("git_refused", "git", &["--version"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let repo = bare_repo(tmp.path());
    let t = Target::parse(&format!("git+file://{}", repo.display())).unwrap();
    let opts = PushOptions::default().work_dir(Some(tmp.path().join("work")));
    t.push(&artifact(tmp.path(), 1), &opts).unwrap();
    let before = git(&repo, &["show-ref"]);
    let hook = repo.join("hooks/pre-receive");
    std::fs::write(
        &hook,
        "#!/bin/sh\necho 'quota exceeded for weights' >&2\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let e = t.push(&artifact(tmp.path(), 2), &opts).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("pushing failed") && msg.contains("quota exceeded for weights"),
        "{msg}"
    );
    assert_eq!(
        git(&repo, &["show-ref"]),
        before,
        "refs moved after a refused push"
    );
    assert_eq!(t.list(&opts).unwrap(), vec![1]);
    // When the repository takes pushes again, the generation arrives.
    std::fs::remove_file(&hook).unwrap();
    let a2 = artifact(tmp.path(), 2);
    assert!(!t.push(&a2, &opts).unwrap().already_present);
    assert_eq!(t.list(&opts).unwrap(), vec![1, 2]);
    fetch_equal(&t, &a2, &opts, tmp.path());
}

fn oci(url: &str, repo: &str) -> Target {
    Target::parse(&format!("{url}/{repo}")).unwrap()
}

/// `GET` over plain HTTP/1.0; returns status, headers and body.
fn http_get(addr: &str, path: &str, accept: &str) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: {accept}\r\n\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let end = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&all[..end]).into_owned();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head, all[end + 4..].to_vec())
}

#[test]
fn oci_push_fetch_list_idempotent_with_annotations() {
    let Some(v) = need("oci_push", &["TESSERA_TEST_OCI_URL"]) else {
        return;
    };
    let name = format!("team/{}", unique("model"));
    let t = oci(&v[0], &name);
    round_trip(&t, &PushOptions::default());
    let addr = v[0].trim_start_matches("oci://");
    let (status, _, body) = http_get(
        addr,
        &format!("/v2/{name}/manifests/gen-0000002"),
        "application/vnd.oci.image.manifest.v1+json",
    );
    assert_eq!(status, 200);
    let m: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        m["artifactType"],
        "application/vnd.tessera.snapshot.v1+json"
    );
    assert_eq!(
        m["config"]["mediaType"],
        "application/vnd.oci.empty.v1+json"
    );
    let ann = &m["annotations"];
    assert_eq!(ann["org.tessera.snapshot.generation"], "2");
    assert_eq!(ann["org.tessera.snapshot.step"], "200");
    assert_eq!(ann["org.tessera.snapshot.format"], "wtxt");
    assert_eq!(ann["org.tessera.snapshot.annotation.loss"], "0.25");
    let layers = m["layers"].as_array().unwrap();
    assert_eq!(
        layers[0]["mediaType"],
        "application/vnd.tessera.snapshot.file.v1.wtxt"
    );
    assert_eq!(
        layers[0]["annotations"]["org.opencontainers.image.title"],
        "model.wtxt"
    );
    assert_eq!(
        layers[1]["annotations"]["org.opencontainers.image.title"],
        "extra.bin"
    );
    // `latest` is the newest generation.
    let (status, _, latest) = http_get(
        addr,
        &format!("/v2/{name}/manifests/latest"),
        "application/vnd.oci.image.manifest.v1+json",
    );
    assert_eq!(status, 200);
    assert_eq!(latest, body);
}

#[test]
fn oci_refused_credentials_say_so_and_good_ones_push() {
    let Some(v) = need("oci_auth", &["TESSERA_TEST_OCI_AUTH_URL"]) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let t = oci(&v[0], &format!("team/{}", unique("auth")));
    let a = artifact(tmp.path(), 1);
    let none = t.push(&a, &PushOptions::default()).unwrap_err().to_string();
    assert!(
        none.contains("401") && none.contains("no credentials"),
        "{none}"
    );
    let bad = PushOptions::default()
        .oci_username(Some("tessera".into()))
        .oci_password(Some("wrong-password".into()));
    let e = t.push(&a, &bad).unwrap_err().to_string();
    assert!(e.contains("401"), "{e}");
    assert!(!e.contains("wrong-password"), "{e}");
    let good = PushOptions::default()
        .oci_username(Some("tessera".into()))
        .oci_password(Some("tessera-test".into()));
    assert!(!t.push(&a, &good).unwrap().already_present);
    fetch_equal(&t, &a, &good, tmp.path());
    assert_eq!(t.list(&good).unwrap(), vec![1]);
}

/// A port nothing listens on (a server stopped).
fn dead_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn a_target_down_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let a = artifact(tmp.path(), 1);
    let port = dead_port();
    let opts = PushOptions::default()
        .remote(RemoteOptions::default().endpoint(Some(format!("http://127.0.0.1:{port}"))));
    for url in [
        format!("http://127.0.0.1:{port}/dav/x/"),
        format!("oci://127.0.0.1:{port}/team/x"),
        "s3://bucket/x/".to_string(),
    ] {
        let t = Target::parse(&url).unwrap();
        let e = t.push(&a, &opts).unwrap_err().to_string();
        assert!(
            e.contains(&format!("127.0.0.1:{port}")) || e.contains("s3://bucket/x/"),
            "{url}: {e}"
        );
        assert!(
            e.to_lowercase().contains("connect") || e.contains("error sending"),
            "{url}: {e}"
        );
    }
    let missing = tmp.path().join("no-such.git");
    let t = Target::parse(&format!("git+file://{}", missing.display())).unwrap();
    let e = t
        .push(
            &a,
            &PushOptions::default().work_dir(Some(tmp.path().join("w"))),
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cloning failed") && e.contains("no-such.git"),
        "{e}"
    );
}

/// What the proxy does with one request.
#[derive(Clone)]
enum Act {
    Forward,
    /// Answer with these raw bytes (a whole HTTP response).
    Answer(Vec<u8>),
}

/// (method, path, the request's header lines lower-cased) → what to do.
type Rule = Arc<dyn Fn(&str, &str, &str) -> Act + Send + Sync>;

/// A proxy on 127.0.0.1: each request (one per connection) is forwarded to `upstream`
/// or answered by `rule`. Records "METHOD PATH" of each request.
struct Proxy {
    addr: String,
    seen: Arc<Mutex<Vec<String>>>,
}

fn response(status: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

impl Proxy {
    fn start(upstream: Option<String>, rule: Rule) -> Proxy {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(conn) = conn else { continue };
                let (up, rule, seen) = (upstream.clone(), rule.clone(), seen2.clone());
                std::thread::spawn(move || {
                    let _ = Proxy::serve(conn, up, rule, seen);
                });
            }
        });
        Proxy { addr, seen }
    }

    fn serve(
        conn: TcpStream,
        upstream: Option<String>,
        rule: Rule,
        seen: Arc<Mutex<Vec<String>>>,
    ) -> std::io::Result<()> {
        let mut r = BufReader::new(conn.try_clone()?);
        let mut head = Vec::new();
        let mut len = 0usize;
        loop {
            let mut line = String::new();
            if r.read_line(&mut line)? == 0 {
                return Ok(());
            }
            if line == "\r\n" {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
            if lower.starts_with("connection:") {
                continue;
            }
            head.push(line);
        }
        let mut body = vec![0u8; len];
        r.read_exact(&mut body)?;
        let first: Vec<&str> = head[0].split(' ').collect();
        let (method, path) = (first[0].to_string(), first[1].to_string());
        seen.lock().unwrap().push(format!("{method} {path}"));
        let mut out = conn;
        let headers = head.join("").to_ascii_lowercase();
        match (rule(&method, &path, &headers), upstream) {
            (Act::Answer(bytes), _) => out.write_all(&bytes)?,
            (Act::Forward, Some(up)) => {
                let mut u = TcpStream::connect(up)?;
                for h in &head {
                    u.write_all(h.as_bytes())?;
                }
                u.write_all(b"Connection: close\r\n\r\n")?;
                u.write_all(&body)?;
                let mut resp = Vec::new();
                u.read_to_end(&mut resp)?;
                out.write_all(&resp)?;
            }
            (Act::Forward, None) => out.write_all(&response("404 Not Found", "", b""))?,
        }
        out.flush()
    }
}

#[test]
fn server_errors_leave_no_generation_visible() {
    let Some(v) = need(
        "push_500",
        &[
            "TESSERA_TEST_OCI_URL",
            "TESSERA_TEST_DAV_URL",
            "TESSERA_TEST_S3_ENDPOINT",
            "TESSERA_TEST_S3_BUCKET",
        ],
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let a = artifact(tmp.path(), 3);
    // The manifest (OCI, HTTP) or the last object (S3) fails; the files before it
    // went through. The error names the status and shows the body escaped.
    let fail_manifest: Rule = Arc::new(|m: &str, p: &str, _h: &str| {
        if m == "PUT" && (p.contains("/manifests/") || p.contains("tessera-snapshot.json")) {
            Act::Answer(response(
                "500 Internal Server Error",
                "Content-Type: text/plain\r\n",
                b"disk on fire\x1b[31m",
            ))
        } else {
            Act::Forward
        }
    });
    let registry = v[0].trim_start_matches("oci://").to_string();
    let p = Proxy::start(Some(registry), fail_manifest.clone());
    let name = format!("team/{}", unique("fault"));
    let through = oci(&format!("oci://{}", p.addr), &name);
    let e = through
        .push(&a, &PushOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("500") && e.contains("disk on fire\\u{1b}[31m"),
        "{e}"
    );
    assert!(
        p.seen
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.starts_with("PUT /v2/")),
        "blobs went through"
    );
    let direct = oci(&v[0], &name);
    assert_eq!(
        direct.list(&PushOptions::default()).unwrap(),
        Vec::<u64>::new()
    );
    // The registry back: everything arrives.
    assert!(
        !direct
            .push(&a, &PushOptions::default())
            .unwrap()
            .already_present
    );
    fetch_equal(&direct, &a, &PushOptions::default(), tmp.path());

    // HTTP PUT through the proxy to nginx.
    let dav = v[1].clone();
    let dav_host = dav
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let p = Proxy::start(Some(dav_host.clone()), fail_manifest);
    let dir = unique("fault");
    let through = Target::parse(&format!("http://{}/dav/{dir}/", p.addr)).unwrap();
    let e = through
        .push(&a, &PushOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("500") && e.contains("tessera-snapshot.json"),
        "{e}"
    );
    let direct = Target::parse(&format!("{dav}{dir}/")).unwrap();
    assert_eq!(
        direct.list(&PushOptions::default()).unwrap(),
        Vec::<u64>::new()
    );
    let (status, _, _) = http_get(
        &dav_host,
        &format!("/dav/{dir}/gen-0000003/tessera-snapshot.json"),
        "*/*",
    );
    assert_eq!(status, 404);
    direct.push(&a, &PushOptions::default()).unwrap();
    fetch_equal(&direct, &a, &PushOptions::default(), tmp.path());

    // S3: the manifest's upload refused (a 403 is not retried).
    let s3_host = v[2].trim_start_matches("http://").to_string();
    let deny: Rule = Arc::new(|_m: &str, p: &str, _h: &str| {
        if p.contains("tessera-snapshot.json") {
            Act::Answer(response(
                "403 Forbidden",
                "Content-Type: application/xml\r\n",
                b"<Error><Code>AccessDenied</Code><Message>no</Message></Error>",
            ))
        } else {
            Act::Forward
        }
    });
    let p = Proxy::start(Some(s3_host), deny);
    let prefix = unique("fault");
    let t = Target::parse(&format!("s3://{}/{prefix}/", v[3])).unwrap();
    let via = PushOptions::default().remote(
        RemoteOptions::default()
            .endpoint(Some(format!("http://{}", p.addr)))
            .cache(false),
    );
    let e = t.push(&a, &via).unwrap_err().to_string();
    assert!(e.contains("tessera-snapshot.json"), "{e}");
    let direct = s3_opts().unwrap();
    assert_eq!(t.list(&direct).unwrap(), Vec::<u64>::new());
    t.push(&a, &direct).unwrap();
    assert_eq!(t.list(&direct).unwrap(), vec![3]);
}

#[test]
fn a_hostile_registry_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let a = artifact(tmp.path(), 1);
    let opts = PushOptions::default();
    let push_to = |rule: Rule| {
        let p = Proxy::start(None, rule);
        oci(&format!("oci://{}", p.addr), "team/x")
            .push(&a, &opts)
            .unwrap_err()
            .to_string()
    };
    // An upload sent to another host.
    let e = push_to(Arc::new(|m: &str, p: &str, _h: &str| match (m, p) {
        ("POST", _) => Act::Answer(response(
            "202 Accepted",
            "Location: http://198.51.100.7:5000/v2/team/x/blobs/uploads/abc\r\n",
            b"",
        )),
        _ => Act::Answer(response("404 Not Found", "", b"")),
    }));
    assert!(
        e.contains("off its origin") && e.contains("198.51.100.7"),
        "{e}"
    );
    // A redirect to another host.
    let e = push_to(Arc::new(|_m: &str, _p: &str, _h: &str| {
        Act::Answer(response(
            "307 Temporary Redirect",
            "Location: http://evil.invalid/x\r\n",
            b"",
        ))
    }));
    assert!(
        e.contains("off its origin") && e.contains("evil.invalid"),
        "{e}"
    );
    // A huge answer (declared), and one that is not JSON.
    let e = push_to(Arc::new(|_m: &str, _p: &str, _h: &str| {
        Act::Answer(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5000000000\r\nConnection: close\r\n\r\n{".to_vec(),
        )
    }));
    assert!(
        e.contains("5000000000 bytes") && e.contains("allowed"),
        "{e}"
    );
    let e = push_to(Arc::new(|_m: &str, _p: &str, _h: &str| {
        Act::Answer(response(
            "200 OK",
            "",
            b"{\"schemaVersion\": 2, \"layers\": [tru",
        ))
    }));
    assert!(e.contains("not JSON"), "{e}");
    // A fetch whose layer title would escape the directory.
    let evil = br#"{"schemaVersion":2,"artifactType":"application/vnd.tessera.snapshot.v1+json","annotations":{"org.tessera.snapshot.generation":"1"},"layers":[{"mediaType":"x","digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000","size":1,"annotations":{"org.opencontainers.image.title":"../../etc/x"}}]}"#.to_vec();
    let p = Proxy::start(
        None,
        Arc::new(move |_m: &str, _p: &str, _h: &str| Act::Answer(response("200 OK", "", &evil))),
    );
    let out = tmp.path().join("out");
    let e = oci(&format!("oci://{}", p.addr), "team/x")
        .fetch(1, &out, &opts)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a snapshot file name"), "{e}");
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
}

#[test]
fn a_fetched_file_that_does_not_match_its_digest_is_not_handed_out() {
    let Some(v) = need("push_corrupt", &["TESSERA_TEST_DAV_URL"]) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let a = artifact(tmp.path(), 1);
    let dir = unique("corrupt");
    let t = Target::parse(&format!("{}{dir}/", v[0])).unwrap();
    t.push(&a, &PushOptions::default()).unwrap();
    // The server now serves other bytes for one file (a PUT behind our back).
    let host = v[0]
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let path = format!("/dav/{dir}/gen-0000001/extra.bin");
    let mut s = TcpStream::connect(&host).unwrap();
    write!(
        s,
        "PUT {path} HTTP/1.0\r\nHost: {host}\r\nContent-Length: 70000\r\n\r\n"
    )
    .unwrap();
    s.write_all(&[7u8; 70_000]).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 204") || answer.starts_with("HTTP/1.1 201"),
        "{answer}"
    );
    let out = tmp.path().join("out");
    let e = t.fetch(1, &out, &PushOptions::default()).unwrap_err();
    assert_eq!(e.kind(), tessera::ErrorKind::Integrity, "{e}");
    assert!(!out.join("extra.bin").exists());
    assert!(std::fs::read_dir(&out).unwrap().all(|e| !e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with(".tessera-fetch")));
}

#[test]
fn oci_bearer_token_flow() {
    let Some(v) = need("oci_bearer", &["TESSERA_TEST_OCI_URL"]) else {
        return;
    };
    // A registry in front of the real one that asks for a bearer token from its own
    // /token endpoint, which wants the basic credentials.
    let me: Arc<Mutex<String>> = Arc::default();
    let tokens = Arc::new(Mutex::new(Vec::<String>::new()));
    let (me2, tokens2) = (me.clone(), tokens.clone());
    let rule: Rule = Arc::new(move |_m: &str, p: &str, h: &str| {
        if p.starts_with("/token") {
            tokens2.lock().unwrap().push(format!("{p} {h}"));
            // "user:pw" in base64.
            return if h.contains("authorization: basic dxnlcjpwdw==") {
                Act::Answer(response(
                    "200 OK",
                    "Content-Type: application/json\r\n",
                    b"{\"token\":\"t0k3n\"}",
                ))
            } else {
                Act::Answer(response("401 Unauthorized", "", b"{\"errors\":[]}"))
            };
        }
        if h.contains("authorization: bearer t0k3n") {
            return Act::Forward;
        }
        let realm = format!("http://{}/token", me2.lock().unwrap());
        Act::Answer(response(
            "401 Unauthorized",
            &format!("WWW-Authenticate: Bearer realm=\"{realm}\",service=\"test-registry\",scope=\"repository:team/b:pull,push\"\r\n"),
            b"{\"errors\":[{\"code\":\"UNAUTHORIZED\"}]}",
        ))
    });
    let registry = v[0].trim_start_matches("oci://").to_string();
    let p = Proxy::start(Some(registry), rule);
    *me.lock().unwrap() = p.addr.clone();
    let tmp = tempfile::tempdir().unwrap();
    let a = artifact(tmp.path(), 1);
    let name = format!("team/{}", unique("bearer"));
    let t = oci(&format!("oci://{}", p.addr), &name);
    let e = t.push(&a, &PushOptions::default()).unwrap_err().to_string();
    assert!(e.contains("token") && e.contains("401"), "{e}");
    let creds = PushOptions::default()
        .oci_username(Some("user".into()))
        .oci_password(Some("pw".into()));
    assert!(!t.push(&a, &creds).unwrap().already_present);
    fetch_equal(&t, &a, &creds, tmp.path());
    let asked = tokens.lock().unwrap().clone();
    assert!(
        asked.iter().any(|r| r.contains("service=test-registry")
            && r.contains("scope=repository%3Ateam%2Fb%3Apull%2Cpush")),
        "{asked:?}"
    );
}

#[test]
fn oci_large_blobs_go_in_chunks() {
    let Some(v) = need("oci_chunks", &["TESSERA_TEST_OCI_URL"]) else {
        return;
    };
    let registry = v[0].trim_start_matches("oci://").to_string();
    let p = Proxy::start(
        Some(registry),
        Arc::new(|_m: &str, _p: &str, _h: &str| Act::Forward),
    );
    let tmp = tempfile::tempdir().unwrap();
    let a = artifact(tmp.path(), 1);
    let t = oci(
        &format!("oci://{}", p.addr),
        &format!("team/{}", unique("chunks")),
    );
    // extra.bin (70 000 bytes) in 16 KiB chunks: 5 PATCHes; model.wtxt in one PUT.
    let opts = PushOptions::default().oci_chunk(16 << 10);
    t.push(&a, &opts).unwrap();
    let patches = p
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.starts_with("PATCH "))
        .count();
    assert_eq!(patches, 5);
    fetch_equal(&t, &a, &opts, tmp.path());
}
