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

fn tessera(args: &[&OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

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
        &tessera::remote::RemoteOptions {
            endpoint: Some(srv.endpoint.clone()),
        },
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
        &tessera::remote::RemoteOptions {
            endpoint: Some(srv.endpoint.clone()),
        },
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
