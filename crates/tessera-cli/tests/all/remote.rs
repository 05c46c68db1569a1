//! The CLI's verbs on s3:// and http:// locations, against moto and nginx started by
//! `scripts/remote-servers.sh` (`scripts/test.sh` runs it): inspect, extract, verify,
//! diff and convert give what they give on the local file, and `convert … s3://…`
//! uploads. Without the servers each test prints a notice and passes, unless
//! `TESSERA_REQUIRE_REMOTE=1`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Servers {
    endpoint: String,
    bucket: String,
    http_url: String,
    http_root: PathBuf,
}

fn servers(test: &str) -> Option<Servers> {
    let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    let got = (|| {
        Some(Servers {
            endpoint: var("TESSERA_TEST_S3_ENDPOINT")?,
            bucket: var("TESSERA_TEST_S3_BUCKET")?,
            http_url: var("TESSERA_TEST_HTTP_URL")?,
            http_root: var("TESSERA_TEST_HTTP_ROOT")?.into(),
        })
    })();
    if got.is_none() {
        if std::env::var("TESSERA_REQUIRE_REMOTE").as_deref() == Ok("1") {
            panic!("{test}: TESSERA_REQUIRE_REMOTE=1 but the test servers' variables are not set");
        }
        eprintln!("notice: {test} skipped: no test servers (scripts/test.sh starts them)");
    }
    got
}

/// `tessera ARGS`. WTXT and FOLD stamp the time they are written; a fixed
/// SOURCE_DATE_EPOCH makes a local and a remote conversion comparable byte for byte
/// even when they run in different seconds. Each run has a disk cache of its own
/// (empty), so that no run reads what another fetched.
fn tessera(args: &[&OsStr]) -> Output {
    let cache = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .env("SOURCE_DATE_EPOCH", "1764000000")
        .env("TESSERA_CACHE_DIR", cache.path())
        .output()
        .unwrap()
}

/// `tessera ARGS` with no AWS variable of the caller's environment, `vars` set instead
/// (a disk cache of its own unless they name one).
fn tessera_env(args: &[&str], vars: &[(&str, &OsStr)]) -> Output {
    let cache = tempfile::tempdir().unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_tessera"));
    c.args(args).env("TESSERA_CACHE_DIR", cache.path());
    for (k, _) in std::env::vars() {
        if k.starts_with("AWS_") {
            c.env_remove(k);
        }
    }
    for (k, v) in vars {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn tensor_names(inspect_json: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(inspect_json).unwrap();
    v["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

use crate::common::text;

fn ok(args: &[&OsStr]) -> String {
    let o = tessera(args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Files written by the original tools (committed test data): safetensors, GGUF,
/// zTensor v2 and WTXT.
fn samples() -> Vec<PathBuf> {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tessera/tests/data");
    [
        "safetensors/mixed.safetensors",
        "gguf/peer_small.gguf",
        "ztensor2/dense.zt",
        "wtxt/basic.wtxt",
    ]
    .iter()
    .map(|p| d.join(p))
    .collect()
}

fn first_tensor(path: &Path) -> String {
    let f = tessera::open_path(path, &tessera::ReadOptions::default()).unwrap();
    f.container().tensor_infos()[0].name.clone()
}

fn stage(srv: &Servers, local: &Path, name: &str) -> (String, String) {
    std::fs::copy(local, srv.http_root.join(name)).unwrap();
    let s3 = format!("s3://{}/cli/{name}", srv.bucket);
    tessera::remote::upload_file(
        local,
        &tessera::Location::parse(&s3).unwrap(),
        &tessera::remote::RemoteOptions::default().endpoint(Some(srv.endpoint.clone())),
    )
    .unwrap();
    (s3, format!("{}/{name}", srv.http_url))
}

#[test]
fn read_verbs_give_the_local_result_from_s3_and_http() {
    let Some(srv) = servers("read_verbs_give_the_local_result_from_s3_and_http") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ep = ["--endpoint".as_ref(), srv.endpoint.as_ref()] as [&OsStr; 2];
    for local in samples() {
        let file_name = local.file_name().unwrap().to_string_lossy().into_owned();
        let name = format!("cli-{file_name}");
        let (s3, http) = stage(&srv, &local, &name);
        let lp = local.display().to_string();
        let tensor = first_tensor(&local);
        let inspect_local = ok(&["inspect".as_ref(), "--json".as_ref(), local.as_os_str()]);
        let verify_local = ok(&["verify".as_ref(), local.as_os_str()]);
        let want_x = dir.path().join("local.npy");
        ok(&[
            "extract".as_ref(),
            local.as_os_str(),
            tensor.as_ref(),
            "-o".as_ref(),
            want_x.as_os_str(),
        ]);
        // Converted to its own format (every sample's tensors fit it).
        let ext = local.extension().unwrap().to_string_lossy().into_owned();
        let want_c = dir.path().join(format!("local.{ext}"));
        // The sample is zTensor v2; `.zt` alone means v1.
        let zt2: Vec<&OsStr> = match ext.as_str() {
            "zt" => vec!["--zt-version".as_ref(), "2".as_ref()],
            _ => vec![],
        };
        let mut args: Vec<&OsStr> = vec!["convert".as_ref(), local.as_os_str(), want_c.as_os_str()];
        args.extend(&zt2);
        ok(&args);
        for url in [&s3, &http] {
            let u: &OsStr = url.as_ref();
            let mut args: Vec<&OsStr> = vec!["inspect".as_ref(), "--json".as_ref(), u];
            args.extend(ep);
            let got = ok(&args);
            assert_eq!(
                got.replace(url.as_str(), &lp),
                inspect_local,
                "{url}: inspect"
            );
            let mut args: Vec<&OsStr> = vec!["verify".as_ref(), u];
            args.extend(ep);
            let got = ok(&args);
            assert_eq!(
                got.replace(url.as_str(), &lp),
                verify_local,
                "{url}: verify"
            );
            let x = dir.path().join("remote.npy");
            let mut args: Vec<&OsStr> = vec![
                "extract".as_ref(),
                u,
                tensor.as_ref(),
                "-o".as_ref(),
                x.as_os_str(),
            ];
            args.extend(ep);
            ok(&args);
            assert_eq!(
                std::fs::read(&x).unwrap(),
                std::fs::read(&want_x).unwrap(),
                "{url}: extract"
            );
            let c = dir.path().join(format!("remote.{ext}"));
            let mut args: Vec<&OsStr> = vec!["convert".as_ref(), u, c.as_os_str()];
            args.extend(ep);
            args.extend(&zt2);
            ok(&args);
            assert_eq!(
                std::fs::read(&c).unwrap(),
                std::fs::read(&want_c).unwrap(),
                "{url}: convert"
            );
            let mut args: Vec<&OsStr> = vec!["diff".as_ref(), local.as_os_str(), u];
            args.extend(ep);
            ok(&args);
        }
    }
}

#[test]
fn convert_uploads_to_s3_and_reads_back() {
    let Some(srv) = servers("convert_uploads_to_s3_and_reads_back") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tessera/tests/data/gguf/peer_small.gguf");
    let local = dir.path().join("local.gguf");
    ok(&["convert".as_ref(), src.as_os_str(), local.as_os_str()]);
    let url = format!("s3://{}/cli/up.gguf", srv.bucket);
    let out = ok(&[
        "convert".as_ref(),
        src.as_os_str(),
        url.as_ref(),
        "--endpoint".as_ref(),
        srv.endpoint.as_ref(),
    ]);
    assert!(out.contains(&url), "{out}");
    // What landed under the key is the bytes a local conversion writes.
    let back = dir.path().join("back.gguf");
    let src_remote = tessera::remote::RemoteSource::open(
        &tessera::Location::parse(&url).unwrap(),
        &tessera::remote::RemoteOptions::default()
            .endpoint(Some(srv.endpoint.clone()))
            .cache(false),
    )
    .unwrap();
    use tessera::source::ByteSource;
    let bytes = src_remote.read_at(0, src_remote.len()).unwrap();
    std::fs::write(&back, &bytes).unwrap();
    ok(&["diff".as_ref(), local.as_os_str(), back.as_os_str()]);
    ok(&[
        "verify".as_ref(),
        url.as_ref(),
        "--endpoint".as_ref(),
        srv.endpoint.as_ref(),
    ]);
}

#[test]
fn inspect_and_verify_open_a_set_by_its_index_url() {
    let Some(srv) = servers("inspect_and_verify_open_a_set_by_its_index_url") else {
        return;
    };
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tessera/tests/data/sets/hf");
    std::fs::create_dir_all(srv.http_root.join("cli-set")).unwrap();
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        stage(&srv, &dir.join(&name), &format!("cli-set/{name}"));
    }
    let index = dir.join("model.safetensors.index.json");
    let want = tensor_names(&ok(&[
        "inspect".as_ref(),
        "--json".as_ref(),
        index.as_os_str(),
    ]));
    assert!(want.len() > 4, "{want:?}");
    for url in [
        format!(
            "s3://{}/cli/cli-set/model.safetensors.index.json",
            srv.bucket
        ),
        format!("{}/cli-set/model.safetensors.index.json", srv.http_url),
    ] {
        let ep = ["--endpoint".as_ref(), srv.endpoint.as_ref()] as [&OsStr; 2];
        let mut args: Vec<&OsStr> = vec!["inspect".as_ref(), "--json".as_ref(), url.as_ref()];
        args.extend(ep);
        assert_eq!(tensor_names(&ok(&args)), want, "{url}");
        let mut args: Vec<&OsStr> = vec!["verify".as_ref(), url.as_ref()];
        args.extend(ep);
        let out = ok(&args);
        assert!(out.contains("shard present"), "{url}: {out}");
    }
}

#[test]
fn aws_profiles_give_the_endpoint_region_and_keys_and_never_print_them() {
    let Some(srv) = servers("aws_profiles_give_the_endpoint_region_and_keys_and_never_print_them")
    else {
        return;
    };
    let local = samples()[0].clone();
    let (s3, _) = stage(&srv, &local, "profile.safetensors");
    let home = tempfile::tempdir().unwrap();
    let aws = home.path().join(".aws");
    std::fs::create_dir_all(&aws).unwrap();
    // The default profile from ~/.aws: no --endpoint, no AWS_* variable.
    std::fs::write(
        aws.join("credentials"),
        "[default]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = SECRETPROFILEVALUE\n",
    )
    .unwrap();
    std::fs::write(
        aws.join("config"),
        format!(
            "[default]\nregion = us-east-1\ns3 =\n  endpoint_url = {}\n",
            srv.endpoint
        ),
    )
    .unwrap();
    let h = home.path().as_os_str();
    let o = tessera_env(&["inspect", &s3], &[("HOME", h)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Without the profile the endpoint is AWS's, which this machine cannot reach: the
    // profile is what made it work.
    let empty = tempfile::tempdir().unwrap();
    let o = tessera_env(
        &["inspect", &s3],
        &[
            ("HOME", empty.path().as_os_str()),
            ("TESSERA_REMOTE_TIMEOUT", "3".as_ref()),
        ],
    );
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    // A named profile, from files named by the environment.
    let other = tempfile::tempdir().unwrap();
    let (creds, config) = (other.path().join("c"), other.path().join("f"));
    std::fs::write(
        &creds,
        "[dev]\naws_access_key_id = AKIDDEV\naws_secret_access_key = SECRETDEVVALUE\n",
    )
    .unwrap();
    std::fs::write(
        &config,
        format!(
            "[profile dev]\nregion = us-east-1\nendpoint_url = {}\n",
            srv.endpoint
        ),
    )
    .unwrap();
    let vars = [
        ("HOME", empty.path().as_os_str()),
        ("AWS_PROFILE", "dev".as_ref()),
        ("AWS_SHARED_CREDENTIALS_FILE", creds.as_os_str()),
        ("AWS_CONFIG_FILE", config.as_os_str()),
    ];
    let o = tessera_env(&["inspect", &s3], &vars);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A profile neither file has: a usage error naming it; no secret printed anywhere.
    let mut vars = vars;
    vars[1].1 = "nope".as_ref();
    let o = tessera_env(&["inspect", &s3], &vars);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("\"nope\""), "{}", text(&o));
    for o in [
        tessera_env(&["inspect", "--json", &s3], &[("HOME", h)]),
        tessera_env(&["verify", "-v", &s3], &[("HOME", h)]),
        tessera_env(
            &["inspect", &format!("s3://{}/no-such-key", srv.bucket)],
            &[("HOME", h)],
        ),
    ] {
        let t = text(&o);
        assert!(
            !t.contains("SECRETPROFILEVALUE") && !t.contains("SECRETDEVVALUE"),
            "{t}"
        );
    }
}

#[test]
fn remote_reads_show_the_bytes_fetched_after_a_second() {
    if servers("remote_reads_show_the_bytes_fetched_after_a_second").is_none() {
        return;
    }
    // The fault server's `slow` mode answers each range after 1.5 s.
    let root = tempfile::tempdir().unwrap();
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tessera/tests/remote/fault_server.py");
    let python = std::env::var("TESSERA_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut child = Command::new(python)
        .arg(&script)
        .arg(root.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let port: u16 = line.trim().parse().unwrap();
    let local = samples()[0].clone();
    std::fs::copy(&local, root.path().join("p.safetensors")).unwrap();
    let tensor = first_tensor(&local);
    let x = root.path().join("x.npy");
    let run = |mode: &str, always: bool| {
        let url = format!("http://127.0.0.1:{port}/{mode}/p.safetensors");
        let mut vars: Vec<(&str, &OsStr)> = vec![];
        if always {
            vars.push(("TESSERA_PROGRESS", "always".as_ref()));
        }
        let args = ["extract", &url, &tensor, "-o", x.to_str().unwrap()];
        let o = tessera_env(&args, &vars);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        (url, String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (url, err) = run("slow", true);
    let line = err
        .lines()
        .find(|l| l.starts_with(&format!("fetching {url}: ")))
        .unwrap_or_else(|| panic!("no progress line: {err}"));
    assert!(line.contains(" requests"), "{line}");
    // Under a second, or without a terminal: nothing.
    assert!(!run("ok", true).1.contains("fetching"));
    assert!(!run("slow", false).1.contains("fetching"));
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn convert_writes_a_set_and_a_wtxt_pair_to_s3_and_never_over_old_objects() {
    let Some(srv) =
        servers("convert_writes_a_set_and_a_wtxt_pair_to_s3_and_never_over_old_objects")
    else {
        return;
    };
    let ep = ["--endpoint".as_ref(), srv.endpoint.as_ref()] as [&OsStr; 2];
    let index = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tessera/tests/data/sets/hf/model.safetensors.index.json");
    let want = tensor_names(&ok(&[
        "inspect".as_ref(),
        "--json".as_ref(),
        index.as_os_str(),
    ]));
    assert!(want.len() >= 3, "{want:?}");
    // A prefix of this run's own: the servers may hold an earlier run's objects.
    let run = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );

    // A set: three shards, then the index; each named on stdout as uploaded.
    let url = format!("s3://{}/cli/resharded-{run}/model.safetensors", srv.bucket);
    let mut args: Vec<&OsStr> = vec![
        "convert".as_ref(),
        index.as_os_str(),
        url.as_ref(),
        "--shards".as_ref(),
        "3".as_ref(),
    ];
    args.extend(ep);
    let out = ok(&args);
    let base = format!("s3://{}/cli/resharded-{run}", srv.bucket);
    let wrote: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("wrote "))
        .collect();
    assert_eq!(
        wrote,
        vec![
            format!("{base}/model-00001-of-00003.safetensors"),
            format!("{base}/model-00002-of-00003.safetensors"),
            format!("{base}/model-00003-of-00003.safetensors"),
            format!("{base}/model.safetensors.index.json"),
        ],
        "{out}"
    );
    let index_url = format!("{base}/model.safetensors.index.json");
    let mut args: Vec<&OsStr> = vec!["inspect".as_ref(), "--json".as_ref(), index_url.as_ref()];
    args.extend(ep);
    assert_eq!(tensor_names(&ok(&args)), want);
    let mut args: Vec<&OsStr> = vec!["diff".as_ref(), index.as_os_str(), index_url.as_ref()];
    args.extend(ep);
    ok(&args);

    // The same command again: refused (the old set's objects are there), nothing changed.
    let mut args: Vec<&OsStr> = vec![
        "convert".as_ref(),
        index.as_os_str(),
        url.as_ref(),
        "--shards".as_ref(),
        "2".as_ref(),
    ];
    args.extend(ep);
    let o = tessera(&args);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("exists"), "{}", text(&o));
    let mut args: Vec<&OsStr> = vec!["verify".as_ref(), index_url.as_ref()];
    args.extend(ep);
    let v = ok(&args);
    assert!(v.contains("shard present"), "{v}");

    // Streamed WTXT and its .wsum (the root line): the side file first, the file last;
    // both readable back.
    let wtxt = format!("s3://{}/cli/pair-{run}/m.wtxt", srv.bucket);
    let drop: &OsStr = "--drop-metadata".as_ref();
    let streaming: &OsStr = "--streaming".as_ref();
    let mut args: Vec<&OsStr> = vec![
        "convert".as_ref(),
        index.as_os_str(),
        wtxt.as_ref(),
        drop,
        streaming,
    ];
    args.extend(ep);
    let out = ok(&args);
    assert!(out.contains(&format!("also wrote {wtxt}.wsum")), "{out}");
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("m.wtxt");
    ok(&[
        "convert".as_ref(),
        index.as_os_str(),
        local.as_os_str(),
        drop,
    ]);
    let mut args: Vec<&OsStr> = vec!["diff".as_ref(), local.as_os_str(), wtxt.as_ref()];
    args.extend(ep);
    ok(&args);
}

/// The object store's raw errors said as a user reads them: a missing object is "no
/// such object", a missing bucket "the bucket … does not exist" (its HEAD is a bare 404
/// too: one listing on the not-found path tells them apart); no XML, no library wording.
#[test]
fn a_missing_object_or_bucket_is_said_plainly() {
    let Some(srv) = servers("a_missing_object_or_bucket_is_said_plainly") else {
        return;
    };
    for (url, want) in [
        (
            format!("s3://{}/cli/no-such.safetensors", srv.bucket),
            "no such object".to_string(),
        ),
        (
            "s3://tessera-no-such-bucket/m.safetensors".to_string(),
            "the bucket \"tessera-no-such-bucket\" does not exist".to_string(),
        ),
    ] {
        let o = tessera(&[
            "inspect".as_ref(),
            url.as_ref(),
            "--endpoint".as_ref(),
            srv.endpoint.as_ref(),
        ]);
        let t = text(&o);
        assert_ne!(o.status.code(), Some(0), "{t}");
        assert!(t.contains(&want), "{url}: {t}");
        assert!(
            !t.contains("<?xml") && !t.contains("Client error"),
            "{url}: {t}"
        );
    }
}

/// `sign` reads its input from S3 with `--endpoint`, detached and `--embed`: the same
/// signature, and the same signed file, as from the local copy (Ed25519 signing is
/// deterministic).
#[test]
fn sign_reads_its_input_from_s3_detached_and_embedded() {
    let Some(srv) = servers("sign_reads_its_input_from_s3_detached_and_embedded") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let local = samples().remove(0);
    let (s3, _) = stage(&srv, &local, "sign-me.safetensors");
    let key = dir.path().join("k");
    ok(&["keygen".as_ref(), "-o".as_ref(), key.as_os_str()]);
    let ep = ["--endpoint".as_ref(), srv.endpoint.as_ref()] as [&OsStr; 2];
    let d = |n: &str| dir.path().join(n);
    for (input, tag) in [(local.as_os_str(), "local"), (s3.as_ref(), "s3")] {
        let sig = d(&format!("{tag}.sig"));
        let mut args = vec!["sign".as_ref(), input, "--key".as_ref(), key.as_os_str()];
        args.extend(["-o".as_ref(), sig.as_os_str()]);
        args.extend(ep);
        ok(&args);
        let out = d(&format!("{tag}.safetensors"));
        let mut args = vec!["sign".as_ref(), input, "--key".as_ref(), key.as_os_str()];
        args.extend(["--embed".as_ref(), "-o".as_ref(), out.as_os_str()]);
        args.extend(ep);
        ok(&args);
    }
    let read = |n: &str| std::fs::read(d(n)).unwrap();
    assert_eq!(read("local.sig"), read("s3.sig"));
    assert_eq!(read("local.safetensors"), read("s3.safetensors"));
    let public = dir.path().join("k.pub");
    let v = ok(&[
        "verify".as_ref(),
        d("s3.safetensors").as_os_str(),
        "--public-key".as_ref(),
        public.as_os_str(),
    ]);
    assert!(v.contains("by signed manifest"), "{v}");
}

/// A safetensors file of eight U8 tensors of 64 KiB (bigger than what an open fetches).
fn eight_tensors() -> Vec<u8> {
    let each: usize = 64 * 1024;
    let header: Vec<String> = (0..8)
        .map(|t| {
            format!(
                "\"t{t}\":{{\"dtype\":\"U8\",\"shape\":[{each}],\"data_offsets\":[{},{}]}}",
                t * each,
                (t + 1) * each
            )
        })
        .collect();
    let mut header = format!("{{{}}}", header.join(","));
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend((0..8 * each).map(|i| (i.wrapping_mul(37) % 251) as u8));
    out
}

/// nginx's log lines (`METHOD URI RANGE STATUS BYTES`) for `/name` so far, once settled.
fn http_requests(name: &str) -> Vec<(String, u64)> {
    let log = std::env::var("TESSERA_TEST_HTTP_LOG").unwrap();
    let read = || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.lines()
            .filter(|l| l.split(' ').nth(1) == Some(&format!("/{name}")))
            .map(|l| {
                let method = l.split(' ').next().unwrap().to_string();
                (method, l.rsplit(' ').next().unwrap().parse().unwrap_or(0))
            })
            .collect::<Vec<_>>()
    };
    let mut last = read();
    for _ in 0..10 {
        std::thread::sleep(std::time::Duration::from_millis(30));
        let now = read();
        if now == last {
            break;
        }
        last = now;
    }
    last
}

#[test]
fn a_second_inspect_or_extract_of_a_url_fetches_no_object_bytes() {
    let Some(srv) = servers("a_second_inspect_or_extract_of_a_url_fetches_no_object_bytes") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local.safetensors");
    std::fs::write(&local, eight_tensors()).unwrap();
    let name = "cli-cached.safetensors";
    let (_, url) = stage(&srv, &local, name);
    let cache = dir.path().join("cache");
    let run = |args: &[&str], vars: &[(&str, &OsStr)]| {
        let mut all: Vec<(&str, &OsStr)> = vec![("TESSERA_CACHE_DIR", cache.as_os_str())];
        all.extend_from_slice(vars);
        let o = tessera_env(args, &all);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
        o
    };
    let x = dir.path().join("x.npy");
    let x = x.to_str().unwrap();
    // Each verb twice: the second sends one HEAD and fetches no object bytes.
    for args in [
        vec!["inspect", url.as_str()],
        vec!["extract", url.as_str(), "t5", "-o", x],
    ] {
        let before = http_requests(name).len();
        let first = run(&args, &[]);
        let mid = http_requests(name);
        let cold: u64 = mid[before..].iter().map(|r| r.1).sum();
        assert!(cold > 0, "{args:?}: nothing fetched");
        let second = run(&args, &[]);
        assert_eq!(first.stdout, second.stdout, "{args:?}");
        let after = http_requests(name);
        let warm = &after[mid.len()..];
        assert!(
            !warm.is_empty() && warm.iter().all(|(m, b)| m == "HEAD" && *b == 0),
            "{args:?}: the second run sent {warm:?}"
        );
    }
    let want = tessera_env(&["extract", local.to_str().unwrap(), "t5", "-o", x], &[]);
    assert_eq!(want.status.code(), Some(0));
    let from_local = std::fs::read(x).unwrap();
    run(&["extract", url.as_str(), "t5", "-o", x], &[]);
    assert_eq!(std::fs::read(x).unwrap(), from_local);
    let files = |d: &Path| -> Vec<PathBuf> {
        let mut out = vec![];
        let mut stack = vec![d.to_path_buf()];
        while let Some(p) = stack.pop() {
            for e in std::fs::read_dir(&p).into_iter().flatten().flatten() {
                match e.path().is_dir() {
                    true => stack.push(e.path()),
                    false => out.push(e.path()),
                }
            }
        }
        out
    };
    let entries = files(&cache);
    assert!(!entries.is_empty());
    assert!(
        entries
            .iter()
            .all(|p| !p.file_name().unwrap().to_string_lossy().starts_with(".tmp")),
        "{entries:?}"
    );

    // --no-cache (a global flag: before or after the verb) reads and writes no cache.
    let off = dir.path().join("off");
    let vars: [(&str, &OsStr); 1] = [("TESSERA_CACHE_DIR", off.as_os_str())];
    for args in [
        vec!["--no-cache", "inspect", url.as_str()],
        vec!["extract", url.as_str(), "t5", "-o", x, "--no-cache"],
    ] {
        let before = http_requests(name).len();
        let o = tessera_env(&args, &vars);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
        let fetched: u64 = http_requests(name)[before..].iter().map(|r| r.1).sum();
        assert!(fetched > 0, "{args:?}");
    }
    assert!(files(&off).is_empty() && !off.exists(), "{:?}", files(&off));
    // With the cache of the first runs there, --no-cache fetches all the same.
    let before = http_requests(name).len();
    run(&["--no-cache", "inspect", url.as_str()], &[]);
    assert!(http_requests(name)[before..].iter().any(|r| r.1 > 0));

    // A cache that cannot be written: said once, and the verb succeeds.
    let blocked = dir.path().join("file");
    std::fs::write(&blocked, b"x").unwrap();
    let under = blocked.join("cache");
    let o = tessera_env(
        &["extract", url.as_str(), "t5", "-o", x],
        &[("TESSERA_CACHE_DIR", under.as_os_str())],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.matches("cannot write the remote read cache").count(),
        1,
        "{err}"
    );
    assert_eq!(std::fs::read(x).unwrap(), from_local);
}
