//! Remote reads against real servers on 127.0.0.1: moto's S3 server and nginx, started
//! by `scripts/remote-servers.sh` (which `scripts/test.sh` runs), and the fault-injecting
//! server `tests/remote/fault_server.py`, started here.
//!
//! Without the servers' variables (`TESSERA_TEST_S3_ENDPOINT`, `TESSERA_TEST_HTTP_URL`,
//! …) each test prints a notice and passes — unless `TESSERA_REQUIRE_REMOTE=1`, which
//! makes a missing server a failure.
#![cfg(feature = "remote")]

use std::borrow::Cow;
use std::io::{BufRead, BufReader, Cursor};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use tessera::convert::{capabilities, prepare, write_to};
use tessera::remote::{upload_file, Location, RemoteOptions, RemoteSource};
use tessera::{
    ConvertOptions, DType, ErrorKind, Format, Model, ReadOptions, TensorInfo, TensorSource,
    TensorView, WriteOptions,
};

pub(crate) struct Servers {
    pub(crate) s3_endpoint: String,
    pub(crate) bucket: String,
    pub(crate) http_url: String,
    pub(crate) http_root: PathBuf,
    pub(crate) http_log: PathBuf,
}

/// Opens a URL with `remote` as the options' remote settings.
pub(crate) fn open_location(
    url: &str,
    opts: &ReadOptions,
    remote: &RemoteOptions,
) -> tessera::Result<tessera::Opened> {
    tessera::open_path(url, &opts.clone().remote(remote.clone()))
}

pub(crate) fn servers(test: &str) -> Option<Servers> {
    let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    let got = (|| {
        Some(Servers {
            s3_endpoint: var("TESSERA_TEST_S3_ENDPOINT")?,
            bucket: var("TESSERA_TEST_S3_BUCKET")?,
            http_url: var("TESSERA_TEST_HTTP_URL")?,
            http_root: var("TESSERA_TEST_HTTP_ROOT")?.into(),
            http_log: var("TESSERA_TEST_HTTP_LOG")?.into(),
        })
    })();
    if got.is_none() {
        if std::env::var("TESSERA_REQUIRE_REMOTE").as_deref() == Ok("1") {
            panic!("{test}: TESSERA_REQUIRE_REMOTE=1 but the test servers' variables are not set (run scripts/test.sh)");
        }
        eprintln!("notice: {test} skipped: no test servers (TESSERA_TEST_S3_ENDPOINT, TESSERA_TEST_HTTP_URL; scripts/test.sh starts them)");
    }
    got
}

impl Servers {
    /// The options that reach the S3 server, without the disk cache: the tests here
    /// count what is fetched, and the cache's own tests (`remote_cache.rs`) use one
    /// of their own.
    pub(crate) fn remote(&self) -> RemoteOptions {
        RemoteOptions::default()
            .endpoint(Some(self.s3_endpoint.clone()))
            .cache(false)
    }
    /// Puts `bytes` on both servers as `name`; returns the S3 and HTTP URLs.
    pub(crate) fn stage(&self, name: &str, bytes: &[u8]) -> (String, String) {
        let path = self.http_root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        let s3 = format!("s3://{}/{name}", self.bucket);
        upload_file(&path, &Location::parse(&s3).unwrap(), &self.remote()).unwrap();
        (s3, format!("{}/{name}", self.http_url))
    }
    /// Body bytes nginx sent for `name` so far (its access log).
    pub(crate) fn http_bytes(&self, name: &str) -> u64 {
        let log = std::fs::read_to_string(&self.http_log).unwrap_or_default();
        log.lines()
            .filter(|l| l.split(' ').nth(1) == Some(&format!("/{name}")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }
}

/// Sixteen 256 KiB tensors (one 4 MiB tensor in a `.npy`) in `format`, written by
/// Tessera's writer: the tests compare a remote read with a local read of the same
/// bytes, so the writer is not what is checked here.
pub(crate) fn written(format: Format) -> Vec<u8> {
    written_with(format, &WriteOptions::default())
}

/// AERO with 64 KiB page hashes (PHSH): a checked read hashes the pages a tensor
/// touches, not its whole shard.
pub(crate) fn aero_paged() -> WriteOptions {
    WriteOptions::default().with(
        tessera::formats::aero::AeroOptions::default()
            .page_hashes(Some(64 * 1024))
            .control_integrity(true),
    )
}

pub(crate) fn written_with(format: Format, opts: &WriteOptions) -> Vec<u8> {
    let caps = capabilities(format).unwrap();
    let dtype = [DType::F32, DType::U8, DType::I32]
        .into_iter()
        .find(|d| caps.dtypes.contains(d))
        .unwrap();
    let mut m = Model::new();
    if caps.metadata != tessera::convert::MetadataSupport::None {
        m.metadata.insert("description", "remote");
    }
    let count = if format == Format::Npy { 1 } else { 16 };
    for t in 0..count {
        let n = 4 * 1024 * 1024 / count as usize / dtype.size();
        let bytes: Vec<u8> = (0..n * dtype.size())
            .map(|i| (i as u32).wrapping_mul(2654435761).wrapping_add(t) as u8 & 0x3f)
            .collect();
        let info = TensorInfo::dense(format!("layer{t}.weight"), dtype, vec![n as u64]);
        m.push(TensorView::dense(info, Cow::Owned(bytes)).unwrap())
            .unwrap();
    }
    let p = prepare(&m, format, ConvertOptions::default()).unwrap();
    let mut out = Cursor::new(Vec::new());
    write_to(format, &p, &mut out, opts).unwrap();
    out.into_inner()
}

use crate::common::{ext, readable_formats};

/// Files written by the original tools (committed test data).
fn peer_files() -> Vec<PathBuf> {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    [
        "safetensors/mixed.safetensors",
        "gguf/peer_small.gguf",
        "npy/bf16.npy",
        "ztensor2/dense.zt",
        "wtxt/basic.wtxt",
        "pytorch/checkpoint.pt",
    ]
    .iter()
    .map(|p| d.join(p))
    .filter(|p| p.exists())
    .collect()
}

/// Everything a reader gives: format, metadata, tensor list, each tensor's bytes, and
/// the verify report's outcome.
fn same(local: &dyn tessera::Container, remote: &dyn tessera::Container, what: &str) {
    assert_eq!(local.format(), remote.format(), "{what}");
    assert_eq!(local.metadata(), remote.metadata(), "{what}");
    assert_eq!(local.tensor_infos(), remote.tensor_infos(), "{what}");
    for info in local.tensor_infos() {
        let a = local.tensor(&info.name).unwrap();
        let b = remote
            .tensor(&info.name)
            .unwrap_or_else(|e| panic!("{what}: {}: {e}", info.name));
        // Every part (data, or a quantized or sparse tensor's components).
        assert_eq!(a.parts, b.parts, "{what}: {}", info.name);
    }
    let (va, vb) = (
        local.verify(&Default::default()),
        remote.verify(&Default::default()),
    );
    assert_eq!(va.is_ok(), vb.is_ok(), "{what}: verify");
    assert!(vb.is_ok(), "{what}: verify of the remote file failed");
}

#[test]
fn every_format_reads_the_same_from_s3_http_and_disk() {
    let Some(srv) = servers("every_format_reads_the_same_from_s3_http_and_disk") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut files: Vec<(String, Vec<u8>)> = readable_formats()
        .into_iter()
        .map(|f| (format!("same-{}.{}", f.name(), ext(f)), written(f)))
        .collect();
    for p in peer_files() {
        let name = format!("peer-{}", p.file_name().unwrap().to_string_lossy());
        files.push((name, std::fs::read(&p).unwrap()));
    }
    let opts = ReadOptions::default();
    for (name, bytes) in &files {
        let local = dir.path().join(name);
        std::fs::write(&local, bytes).unwrap();
        let want = tessera::open_path(&local, &opts).unwrap();
        let (s3, http) = srv.stage(name, bytes);
        for url in [&s3, &http, &format!("file://{}", local.display())] {
            let got =
                open_location(url, &opts, &srv.remote()).unwrap_or_else(|e| panic!("{url}: {e}"));
            same(want.container(), got.container(), url);
        }
    }
}

#[test]
fn inspect_fetches_the_index_and_one_tensor_fetches_about_that_tensor() {
    let Some(srv) = servers("inspect_fetches_the_index_and_one_tensor_fetches_about_that_tensor")
    else {
        return;
    };
    let mut report = Vec::new();
    for format in [
        Format::Safetensors,
        Format::Gguf,
        Format::Aero,
        Format::Ztensor,
        Format::GptrsArchive,
    ] {
        let bytes = match format {
            Format::Aero => written_with(format, &aero_paged()),
            _ => written(format),
        };
        let total = bytes.len() as u64;
        let name = format!("count-{}.{}", format.name(), ext(format));
        let (_, http) = srv.stage(&name, &bytes);
        // Client side: what the source received.
        let before_log = srv.http_bytes(&name);
        let src = RemoteSource::open(&Location::parse(&http).unwrap(), &srv.remote()).unwrap();
        let file = tessera::open(&src, &ReadOptions::default()).unwrap();
        let at_open = src.bytes_fetched();
        let requests_at_open = src.requests();
        // Server side: what nginx sent (its access log).
        // nginx logs a request after answering it: the last line may come a moment late.
        let mut sent_open = srv.http_bytes(&name) - before_log;
        for _ in 0..50 {
            if sent_open == at_open {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            sent_open = srv.http_bytes(&name) - before_log;
        }
        // The first 64 KiB come with the open, and the last 64 KiB with the first read
        // in them (where zTensor keeps its index).
        assert!(
            at_open <= 128 * 1024 && at_open * 20 < total,
            "{format}: opening fetched {at_open} of {total} bytes"
        );
        // HEAD, the first bytes, and (index at the end) the last bytes: no request per
        // header field.
        let most = match format {
            Format::Ztensor => 3,
            _ => 2,
        };
        assert!(
            requests_at_open <= most,
            "{format}: opening took {requests_at_open} requests"
        );
        assert_eq!(
            sent_open, at_open,
            "{format}: nginx's count and ours differ"
        );
        let info = file.tensor_infos()[3].clone();
        let t = file.tensor(&info.name).unwrap();
        let one = src.bytes_fetched() - at_open;
        let size = t.nbytes();
        // A checked AERO read also fetches the tensor's pages to hash them (64 KiB
        // pages: at most two more than the tensor's own bytes, read once more).
        let bound = match format {
            Format::Aero => 2 * size + 2 * 64 * 1024 + 64 * 1024,
            _ => size + 64 * 1024,
        };
        assert!(
            one >= size && one <= bound,
            "{format}: reading {} ({size} bytes) fetched {one}",
            info.name
        );
        report.push(format!(
            "{format}: open {at_open} B of {total} B ({requests_at_open} requests); one {size} B tensor: {one} B ({} requests in all)",
            src.requests()
        ));
    }
    eprintln!("{}", report.join("\n"));
}

/// Puts every file of the committed set `data/sets/<set>` (written by huggingface_hub
/// and gguf-py: see its gen.py) on both servers under `<prefix>/`.
fn stage_set(srv: &Servers, set: &str, prefix: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/sets")
        .join(set);
    std::fs::create_dir_all(srv.http_root.join(prefix)).unwrap();
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        let bytes = std::fs::read(dir.join(&name)).unwrap();
        srv.stage(&format!("{prefix}/{name}"), &bytes);
    }
    dir
}

#[test]
fn a_set_opens_by_its_index_url_or_any_split_url() {
    let Some(srv) = servers("a_set_opens_by_its_index_url_or_any_split_url") else {
        return;
    };
    let opts = ReadOptions::default();
    // A Hugging Face index: the shards it names, beside it.
    let dir = stage_set(&srv, "hf", "set-hf");
    let want = tessera::open_path(&dir.join("model.safetensors.index.json"), &opts).unwrap();
    for url in [
        format!("s3://{}/set-hf/model.safetensors.index.json", srv.bucket),
        format!("{}/set-hf/model.safetensors.index.json", srv.http_url),
        format!(
            "{}/set-hf/model.safetensors.index.json?download=true",
            srv.http_url
        ),
    ] {
        let (_, before) = tessera::remote::totals();
        let got =
            open_location(&url, &opts, &srv.remote()).unwrap_or_else(|e| panic!("{url}: {e}"));
        let set = got.as_set().unwrap_or_else(|| panic!("{url}: not a set"));
        assert_eq!(set.shards().len(), 4, "{url}");
        // Opening read the index and each shard's header: the shards are under 1 KiB
        // each here, so this bounds nothing but a runaway; the tensors are compared next.
        let (_, after) = tessera::remote::totals();
        assert!(after > before, "{url}: nothing fetched");
        same(want.container(), got.container(), &url);
    }
    // GGUF splits, by the URL of the second split.
    let dir = stage_set(&srv, "gguf", "set-gguf");
    let want = tessera::open_path(&dir.join("tiny-00001-of-00003.gguf"), &opts).unwrap();
    for url in [
        format!("s3://{}/set-gguf/tiny-00002-of-00003.gguf", srv.bucket),
        format!("{}/set-gguf/tiny-00002-of-00003.gguf", srv.http_url),
    ] {
        let got =
            open_location(&url, &opts, &srv.remote()).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(got.as_set().map(|s| s.shards().len()), Some(3), "{url}");
        same(want.container(), got.container(), &url);
    }
}

/// Puts only the shards of the committed set `data/sets/<set>` (no index) on both
/// servers under `<prefix>/`, and into a local directory; returns that directory.
fn stage_shards_only(srv: &Servers, set: &str, prefix: &str) -> tempfile::TempDir {
    let from = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/sets")
        .join(set);
    let local = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(srv.http_root.join(prefix)).unwrap();
    for e in std::fs::read_dir(&from).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".json") {
            continue;
        }
        let bytes = std::fs::read(from.join(&name)).unwrap();
        std::fs::write(local.path().join(&name), &bytes).unwrap();
        srv.stage(&format!("{prefix}/{name}"), &bytes);
    }
    local
}

#[test]
fn a_safetensors_shard_url_opens_its_set_when_the_index_is_beside_it() {
    let Some(srv) = servers("a_safetensors_shard_url_opens_its_set_when_the_index_is_beside_it")
    else {
        return;
    };
    let opts = ReadOptions::default();
    let shard = "model-00002-of-00004.safetensors";
    // The index model.safetensors.index.json beside the shard: the whole set, as the
    // local opener gives for the same shard's path.
    let dir = stage_set(&srv, "hf", "shard-hf");
    let want = tessera::open_path(&dir.join(shard), &opts).unwrap();
    assert_eq!(want.as_set().map(|s| s.shards().len()), Some(4));
    for url in [
        format!("s3://{}/shard-hf/{shard}", srv.bucket),
        format!("{}/shard-hf/{shard}", srv.http_url),
        format!("{}/shard-hf/{shard}?download=true", srv.http_url),
    ] {
        let got =
            open_location(&url, &opts, &srv.remote()).unwrap_or_else(|e| panic!("{url}: {e}"));
        let set = got.as_set().unwrap_or_else(|| panic!("{url}: not a set"));
        assert_eq!(set.shards().len(), 4, "{url}");
        assert_eq!(
            set.kind().index_name(),
            "model.safetensors.index.json",
            "{url}"
        );
        same(want.container(), got.container(), &url);
    }
    // No index beside it: the one file, as the local opener opens a shard no index
    // names (no warning there either).
    let local = stage_shards_only(&srv, "hf", "shard-noindex");
    let want = tessera::open_path(&local.path().join(shard), &opts).unwrap();
    assert!(want.as_set().is_none(), "locally a set without an index");
    for url in [
        format!("s3://{}/shard-noindex/{shard}", srv.bucket),
        format!("{}/shard-noindex/{shard}", srv.http_url),
    ] {
        let got =
            open_location(&url, &opts, &srv.remote()).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert!(got.as_set().is_none(), "{url}: opened as a set");
        assert_eq!(got.container().warnings(), want.container().warnings());
        same(want.container(), got.container(), &url);
    }
    // A presigned shard URL: its signature fits that one object, so no index is looked
    // for (nginx ignores the query and would serve it): the one file.
    let signed = format!(
        "{}/shard-hf/{shard}?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=abc",
        srv.http_url
    );
    let before = srv.http_bytes("shard-hf/model.safetensors.index.json");
    let got = open_location(&signed, &opts, &srv.remote()).unwrap();
    assert!(got.as_set().is_none(), "a presigned shard URL opened a set");
    assert_eq!(got.container().tensor_infos().len(), 2, "{signed}");
    assert_eq!(
        srv.http_bytes("shard-hf/model.safetensors.index.json"),
        before,
        "the index was fetched with a shard's signature"
    );
    // A presigned index URL cannot reach the shards: refused, naming it (redacted).
    let signed = format!(
        "{}/shard-hf/model.safetensors.index.json?X-Amz-Signature=s3cr3t",
        srv.http_url
    );
    let e = open_location(&signed, &opts, &srv.remote())
        .err()
        .expect("a presigned index URL opened");
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("presigned") && msg.contains("model.safetensors.index.json"),
        "{msg}"
    );
    assert!(!msg.contains("s3cr3t"), "{msg}");
    // So is a presigned GGUF split: its set cannot be fetched with its signature, and
    // the split alone would lose the other splits' tensors.
    stage_set(&srv, "gguf", "shard-gguf");
    let signed = format!(
        "{}/shard-gguf/tiny-00002-of-00003.gguf?X-Amz-Signature=s3cr3t",
        srv.http_url
    );
    let e = open_location(&signed, &opts, &srv.remote())
        .err()
        .expect("a presigned GGUF split opened");
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("presigned"), "{e}");
    assert!(!e.to_string().contains("s3cr3t"), "{e}");
}

#[test]
fn a_remote_set_missing_a_shard_names_its_url() {
    let Some(srv) = servers("a_remote_set_missing_a_shard_names_its_url") else {
        return;
    };
    stage_set(&srv, "hf_missing_shard", "set-hf-missing");
    for base in [
        format!("s3://{}/set-hf-missing", srv.bucket),
        format!("{}/set-hf-missing", srv.http_url),
    ] {
        let url = format!("{base}/model.safetensors.index.json");
        let e = open_location(&url, &ReadOptions::default(), &srv.remote())
            .err()
            .unwrap_or_else(|| panic!("{url}: a set missing a shard opened"));
        let shard = format!("{base}/model-00002-of-00004.safetensors");
        assert!(e.to_string().contains(&shard), "{url}: {e}");
        // Audited (inspect, verify): opened, the shard reported missing by name.
        let audit = ReadOptions::default().audit(true);
        let got = open_location(&url, &audit, &srv.remote()).unwrap();
        let report = got.container().verify(&Default::default());
        let failed: Vec<_> = report
            .checks
            .iter()
            .filter(|c| c.layer == "shard present" && c.status == tessera::Status::Failed)
            .collect();
        assert_eq!(failed.len(), 1, "{url}: {failed:?}");
        assert_eq!(failed[0].subject, "model-00002-of-00004.safetensors");
    }
}

#[test]
fn query_strings_reach_the_server_and_signatures_are_never_shown() {
    if servers("query_strings_reach_the_server_and_signatures_are_never_shown").is_none() {
        return;
    }
    let srv = faulty();
    let bytes = written(Format::Safetensors);
    std::fs::write(srv.root.path().join("q.safetensors"), &bytes).unwrap();
    let base = format!("{}/signed/q.safetensors", srv.url);
    // A presigned-style URL: the server answers only with the signature in the query,
    // on every request (HEAD and each range).
    let good = format!("{base}?X-Amz-Credential=AKIDSECRET&X-Amz-Signature=good&download=true");
    let got = read_all_tensors(&good).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.len(), 16);
    for bad in [
        base.clone(),
        format!("{base}?X-Amz-Credential=AKIDSECRET&X-Amz-Signature=s3cr3tvalue"),
    ] {
        let e = read_all_tensors(&bad).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("403"), "{msg}");
        assert!(msg.contains(&base), "{msg}");
        assert!(
            !msg.contains("s3cr3tvalue") && !msg.contains("AKIDSECRET"),
            "a secret in the message: {msg}"
        );
    }
}

#[test]
fn a_missing_object_names_the_url_and_is_not_found() {
    let Some(srv) = servers("a_missing_object_names_the_url_and_is_not_found") else {
        return;
    };
    for url in [
        format!("s3://{}/no-such.safetensors", srv.bucket),
        format!("{}/no-such.safetensors", srv.http_url),
    ] {
        let e = open_location(&url, &ReadOptions::default(), &srv.remote())
            .err()
            .unwrap();
        assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
        assert!(e.to_string().contains(&url), "{e}");
    }
}

/// The fault server, stopped when dropped.
struct Faulty {
    child: Child,
    url: String,
    root: tempfile::TempDir,
}

impl Drop for Faulty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn faulty() -> Faulty {
    let root = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/remote/fault_server.py");
    let python = std::env::var("TESSERA_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut child = Command::new(python)
        .arg(&script)
        .arg(root.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line.trim().parse().unwrap();
    Faulty {
        child,
        url: format!("http://127.0.0.1:{port}"),
        root,
    }
}

fn read_all_tensors(url: &str) -> tessera::Result<Vec<(String, Vec<u8>)>> {
    let opened = open_location(
        url,
        &ReadOptions::default(),
        &RemoteOptions::default().cache(false),
    )?;
    let f = opened.container();
    f.tensor_infos()
        .iter()
        .map(|i| Ok((i.name.clone(), f.tensor(&i.name)?.data()?.to_vec())))
        .collect()
}

#[test]
fn faults_give_a_retry_or_a_clear_error_never_wrong_data() {
    if servers("faults_give_a_retry_or_a_clear_error_never_wrong_data").is_none() {
        return;
    }
    let srv = faulty();
    let bytes = written(Format::Safetensors);
    std::fs::write(srv.root.path().join("m.safetensors"), &bytes).unwrap();
    let want: Vec<(String, Vec<u8>)> = {
        let f = tessera::open(&bytes, &ReadOptions::default()).unwrap();
        f.tensor_infos()
            .iter()
            .map(|i| {
                (
                    i.name.clone(),
                    f.tensor(&i.name).unwrap().data().unwrap().to_vec(),
                )
            })
            .collect()
    };
    let url = |mode: &str| format!("{}/{mode}/m.safetensors", srv.url);

    assert_eq!(read_all_tensors(&url("ok")).unwrap(), want, "ok");
    // 500s, then success: retried.
    assert_eq!(read_all_tensors(&url("flaky")).unwrap(), want, "flaky");
    // A connection dropped mid-body once: fetched again.
    assert_eq!(
        read_all_tensors(&url("droponce")).unwrap(),
        want,
        "droponce"
    );
    // Dropped every time: an error naming the URL once the retries are spent; never
    // other bytes.
    match read_all_tensors(&url("drop")) {
        Ok(got) => assert_eq!(got, want, "drop"),
        Err(e) => assert!(e.to_string().contains(&url("drop")), "drop: {e}"),
    }
    // A body shorter than its Content-Length.
    match read_all_tensors(&url("short")) {
        Ok(got) => assert_eq!(got, want, "short"),
        Err(e) => assert!(e.to_string().contains(&url("short")), "short: {e}"),
    }
    // 500 forever: the URL and the status, once the retries are spent.
    let t = std::time::Instant::now();
    let e = read_all_tensors(&url("fail")).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(&url("fail")) && msg.contains("500"),
        "fail: {msg}"
    );
    assert!(t.elapsed().as_secs() < 60, "fail took {:?}", t.elapsed());
    // The object changed between requests: If-Match → 412, or an ETag that differs.
    for mode in ["changing", "lying"] {
        let e = read_all_tensors(&url(mode)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Integrity, "{mode}: {e}");
        assert!(e.to_string().contains(&url(mode)), "{mode}: {e}");
        assert!(e.to_string().contains("changed"), "{mode}: {e}");
    }
}

#[test]
fn a_flipped_byte_in_a_digested_tensor_is_named_by_the_reader() {
    if servers("a_flipped_byte_in_a_digested_tensor_is_named_by_the_reader").is_none() {
        return;
    }
    let srv = faulty();
    for format in [Format::Aero, Format::Ztensor] {
        let bytes = match format {
            Format::Aero => written_with(format, &aero_paged()),
            _ => written_with(
                format,
                &WriteOptions::default().digests(vec![tessera::convert::Digest::Sha256]),
            ),
        };
        let name = format!("flip.{}", ext(format));
        let path = srv.root.path().join(&name);
        std::fs::write(&path, &bytes).unwrap();
        // A byte inside tensor layer5.weight (where the index says it is stored).
        let local = tessera::open(&bytes, &ReadOptions::default()).unwrap();
        let info = local
            .tensor_infos()
            .iter()
            .find(|i| i.name == "layer5.weight")
            .unwrap()
            .clone();
        let at = info.storage.offset.unwrap() + 1000;
        std::fs::write(format!("{}.flip", path.display()), at.to_string()).unwrap();
        let url = format!("{}/flip/{name}", srv.url);
        let opened = open_location(
            &url,
            &ReadOptions::default(),
            &RemoteOptions::default().cache(false),
        )
        .unwrap_or_else(|e| panic!("{format}: {e}"));
        let f = opened.container();
        assert!(
            f.tensor("layer4.weight").is_ok(),
            "{format}: an intact tensor"
        );
        let e = f
            .tensor("layer5.weight")
            .err()
            .unwrap_or_else(|| panic!("{format}: a flipped byte read without error"));
        assert_eq!(e.kind(), ErrorKind::Integrity, "{format}: {e}");
        let msg = e.to_string();
        assert!(
            msg.contains("layer5.weight") || msg.contains("page"),
            "{format}: {msg}"
        );
        assert!(msg.contains(&url), "{format}: {msg}");
    }
}

#[test]
fn an_upload_replaces_the_key_only_when_complete() {
    let Some(srv) = servers("an_upload_replaces_the_key_only_when_complete") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Larger than one 16 MiB part: a real multipart upload.
    let big: Vec<u8> = (0..40u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let p = dir.path().join("big.bin");
    std::fs::write(&p, &big).unwrap();
    let key = format!("s3://{}/big.bin", srv.bucket);
    let loc = Location::parse(&key).unwrap();
    assert_eq!(
        upload_file(&p, &loc, &srv.remote()).unwrap(),
        big.len() as u64
    );
    let src = RemoteSource::open(&loc, &srv.remote()).unwrap();
    use tessera::source::ByteSource;
    assert_eq!(src.len(), big.len() as u64);
    assert_eq!(&*src.read_at(0, big.len() as u64).unwrap(), &big[..]);
    // A source that fails mid-way (a directory cannot be read): nothing replaces the key.
    let e = upload_file(dir.path(), &loc, &srv.remote()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    let again = RemoteSource::open(&loc, &srv.remote()).unwrap();
    assert_eq!(
        again.len(),
        big.len() as u64,
        "the failed upload replaced the object"
    );
}

#[test]
fn sequential_reads_fetch_ahead_and_random_reads_do_not() {
    let Some(srv) = servers("sequential_reads_fetch_ahead_and_random_reads_do_not") else {
        return;
    };
    // 40 tensors of 300,000 bytes (12 MB) in a safetensors file, on nginx: windows of
    // 8 and then 16 MiB, and a tensor across the first window's end.
    let mut m = Model::new();
    for t in 0..40u32 {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i ^ t) as u8).collect();
        let info = TensorInfo::dense(format!("t{t:02}"), DType::U8, vec![300_000]);
        m.push(TensorView::dense(info, Cow::Owned(data)).unwrap())
            .unwrap();
    }
    let p = prepare(&m, Format::Safetensors, ConvertOptions::default()).unwrap();
    let mut out = Cursor::new(Vec::new());
    write_to(Format::Safetensors, &p, &mut out, &WriteOptions::default()).unwrap();
    let bytes = out.into_inner();
    let total = bytes.len() as u64;
    let (_, http) = srv.stage("ahead.safetensors", &bytes);
    let local = tessera::open(&bytes[..], &ReadOptions::default()).unwrap();
    let names: Vec<String> = local
        .tensor_infos()
        .iter()
        .map(|i| i.name.clone())
        .collect();
    let mut in_file = names.clone();
    in_file.sort_by_key(|n| {
        let infos = local.tensor_infos();
        infos.iter().find(|i| &i.name == n).unwrap().storage.offset
    });
    for (order, sequential) in [
        (in_file.clone(), true),
        (in_file.iter().rev().cloned().collect::<Vec<_>>(), false),
    ] {
        let src = RemoteSource::open(&Location::parse(&http).unwrap(), &srv.remote()).unwrap();
        let file = tessera::open(&src, &ReadOptions::default()).unwrap();
        let (r0, b0) = (src.requests(), src.bytes_fetched());
        let mut sizes = 0;
        for n in &order {
            let t = file.tensor(n).unwrap();
            assert_eq!(
                t.data().unwrap(),
                local.tensor(n).unwrap().data().unwrap(),
                "{n}"
            );
            sizes += t.nbytes();
        }
        let (requests, fetched) = (src.requests() - r0, src.bytes_fetched() - b0);
        if sequential {
            // Reads one by one until 1 MiB was read in a row (four 256 KiB tensors:
            // a few small reads are header probes), then one window to the end.
            assert!(
                requests <= 5,
                "in file order: {requests} requests for 16 tensors"
            );
            assert!(
                fetched <= total,
                "in file order: {fetched} of {total} bytes fetched"
            );
        } else {
            // Backwards: one request per tensor (the last one, first read, may come with
            // the tail cache), and no byte beyond the tensors' own (and the 64 KiB tail).
            assert!(
                requests >= 15,
                "backwards: {requests} requests for 16 tensors"
            );
            assert!(
                fetched <= sizes + 64 * 1024,
                "backwards: {fetched} bytes for {sizes}"
            );
        }
    }
}

/// Puts `files` (name, bytes) on both servers under `<prefix>/` and into a local
/// directory, which is returned.
fn stage_files(srv: &Servers, prefix: &str, files: &[(String, Vec<u8>)]) -> tempfile::TempDir {
    let local = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(srv.http_root.join(prefix)).unwrap();
    for (name, bytes) in files {
        std::fs::write(local.path().join(name), bytes).unwrap();
        srv.stage(&format!("{prefix}/{name}"), bytes);
    }
    local
}

fn set_files(set: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/sets")
        .join(set);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            let bytes = std::fs::read(dir.join(&name)).unwrap();
            (name, bytes)
        })
        .collect();
    out.sort();
    out
}

/// The message of an error without the file it names (a local path or a URL).
fn detail(e: &tessera::Error) -> String {
    let msg = e.to_string();
    msg.split_once(": ")
        .map(|(_, m)| m.to_string())
        .unwrap_or(msg)
}

#[test]
fn a_directory_url_opens_what_the_local_directory_rule_picks() {
    let Some(srv) = servers("a_directory_url_opens_what_the_local_directory_rule_picks") else {
        return;
    };
    let opts = ReadOptions::default();
    let open = |url: &str| open_location(url, &opts, &srv.remote());
    // An HF set: S3 lists the prefix (with or without the trailing slash), HTTP finds
    // model.safetensors.index.json among the names it probes.
    let local = stage_files(&srv, "dir-hf", &set_files("hf"));
    let want = tessera::open_path(local.path(), &opts).unwrap();
    for url in [
        format!("s3://{}/dir-hf/", srv.bucket),
        format!("s3://{}/dir-hf", srv.bucket),
        format!("{}/dir-hf/", srv.http_url),
    ] {
        let got = open(&url).unwrap_or_else(|e| panic!("{url}: {e}"));
        let set = got.as_set().unwrap_or_else(|| panic!("{url}: not a set"));
        assert_eq!(set.shards().len(), 4, "{url}");
        same(want.container(), got.container(), &url);
    }
    // GGUF splits: S3's listing finds the first split as a local directory does; HTTP
    // cannot list and has no well-known name for them: an error naming the URL and
    // every name tried.
    let local = stage_files(&srv, "dir-gguf", &set_files("gguf"));
    let want = tessera::open_path(local.path(), &opts).unwrap();
    let url = format!("s3://{}/dir-gguf/", srv.bucket);
    let got = open(&url).unwrap_or_else(|e| panic!("{url}: {e}"));
    assert_eq!(got.as_set().map(|s| s.shards().len()), Some(3), "{url}");
    same(want.container(), got.container(), &url);
    let url = format!("{}/dir-gguf/", srv.http_url);
    let e = open(&url)
        .err()
        .expect("an HTTP directory of GGUF splits opened");
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    let msg = e.to_string();
    for name in [
        &url,
        "model.safetensors.index.json",
        "model.tessera-set.json",
        "model.safetensors",
    ] {
        assert!(msg.contains(name), "{name} not in: {msg}");
    }
    // One tensor file: opened alone, on both.
    let peer =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/safetensors/mixed.safetensors");
    let one = vec![(
        "model.safetensors".to_string(),
        std::fs::read(&peer).unwrap(),
    )];
    let local = stage_files(&srv, "dir-one", &one);
    let want = tessera::open_path(local.path(), &opts).unwrap();
    for url in [
        format!("s3://{}/dir-one/", srv.bucket),
        format!("{}/dir-one/", srv.http_url),
    ] {
        let got = open(&url).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert!(got.as_set().is_none(), "{url}");
        same(want.container(), got.container(), &url);
    }
}

#[test]
fn a_directory_url_with_nothing_or_two_candidates_is_the_local_error() {
    let Some(srv) = servers("a_directory_url_with_nothing_or_two_candidates_is_the_local_error")
    else {
        return;
    };
    let opts = ReadOptions::default();
    let open = |url: &str| open_location(url, &opts, &srv.remote());
    // Nothing recognisable.
    let junk = vec![("README.txt".to_string(), b"not a model".to_vec())];
    stage_files(&srv, "dir-junk", &junk);
    for url in [
        format!("s3://{}/dir-junk/", srv.bucket),
        format!("{}/dir-junk/", srv.http_url),
    ] {
        let e = open(&url).err().unwrap_or_else(|| panic!("{url} opened"));
        assert_eq!(e.kind(), ErrorKind::NotFound, "{url}: {e}");
        assert!(e.to_string().contains(&url), "{e}");
    }
    // An S3 prefix with nothing under it and no object of its name: not found.
    let url = format!("s3://{}/no-such-dir", srv.bucket);
    let e = open(&url).err().expect("a missing prefix opened");
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    // Two model sets in one directory: the local opener's error, from S3's listing.
    let mut two = set_files("hf");
    two.extend(set_files("gguf"));
    let local = stage_files(&srv, "dir-two", &two);
    let want = tessera::open_path(local.path(), &opts)
        .err()
        .expect("two sets opened locally");
    let url = format!("s3://{}/dir-two/", srv.bucket);
    let e = open(&url).err().expect("two sets opened from S3");
    assert_eq!(e.kind(), want.kind(), "{e}");
    assert_eq!(detail(&e), detail(&want));
    assert!(e.to_string().contains(&url), "{e}");
    // Two tensor files under well-known names: the same over HTTP.
    let peer = |p: &str| {
        std::fs::read(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data")
                .join(p),
        )
        .unwrap()
    };
    let two = vec![
        (
            "model.safetensors".to_string(),
            peer("safetensors/mixed.safetensors"),
        ),
        ("model.gguf".to_string(), peer("gguf/peer_small.gguf")),
    ];
    let local = stage_files(&srv, "dir-two-files", &two);
    let want = tessera::open_path(local.path(), &opts)
        .err()
        .expect("two files opened locally");
    assert!(want.to_string().contains("2 tensor files"), "{want}");
    for url in [
        format!("s3://{}/dir-two-files/", srv.bucket),
        format!("{}/dir-two-files/", srv.http_url),
    ] {
        let e = open(&url).err().unwrap_or_else(|| panic!("{url} opened"));
        assert_eq!(e.kind(), want.kind(), "{url}: {e}");
        assert_eq!(detail(&e), detail(&want), "{url}");
    }
}

/// What an open gave, to compare a local open with a remote one: a set (its kind's
/// index name and shard names) or one file (its format).
fn shape_of(o: &tessera::Opened) -> String {
    match o.as_set() {
        Some(s) => {
            let shards: Vec<&str> = s.shards().iter().map(|s| s.name.as_str()).collect();
            format!("set {} [{}]", s.kind().index_name(), shards.join(", "))
        }
        None => format!("file {}", o.container().format().name()),
    }
}

/// The one rule (`set/opener.rs` over `set/place.rs`) classifies every way into a
/// layout alike from a local directory, an S3 prefix and an HTTP directory: each file
/// of the set by its name (index, any shard), a JSON index under another name, the
/// directory, and `shard_only`. A JSON index not named `*.index.json` opened only
/// locally before the rule was shared (the remote copy had no JSON sniffing).
#[test]
fn every_way_into_a_layout_opens_alike_locally_on_s3_and_over_http() {
    let Some(srv) = servers("every_way_into_a_layout_opens_alike_locally_on_s3_and_over_http")
    else {
        return;
    };
    let opts = ReadOptions::default();
    let shard_only = ReadOptions::default().shard_only(true);
    for (set, prefix) in [
        ("hf", "alike-hf"),
        ("pt", "alike-pt"),
        ("gguf", "alike-gguf"),
    ] {
        let mut files = set_files(set);
        // The index again under a name no rule knows: found by its bytes (`{`).
        if let Some((_, index)) = files.iter().find(|(n, _)| n.ends_with(".index.json")) {
            files.push(("weights.json".to_string(), index.clone()));
        }
        let local = stage_files(&srv, prefix, &files);
        let mut ways: Vec<(String, &ReadOptions)> =
            files.iter().map(|(n, _)| (n.clone(), &opts)).collect();
        ways.extend(files.iter().map(|(n, _)| (n.clone(), &shard_only)));
        ways.push((String::new(), &opts));
        for (name, o) in ways {
            let want = tessera::open_path(&local.path().join(&name), o);
            for url in [
                format!("s3://{}/{prefix}/{name}", srv.bucket),
                format!("{}/{prefix}/{name}", srv.http_url),
            ] {
                // An HTTP directory of GGUF splits has no well-known name to find.
                if name.is_empty() && set == "gguf" && url.starts_with("http") {
                    continue;
                }
                let what = format!("{url} (shard_only {})", o.shard_only);
                let got = open_location(&url, o, &srv.remote());
                match (&want, &got) {
                    (Ok(w), Ok(g)) => {
                        assert_eq!(shape_of(w), shape_of(g), "{what}");
                        same(w.container(), g.container(), &what);
                    }
                    (Err(w), Err(g)) => assert_eq!(w.kind(), g.kind(), "{what}: {w} / {g}"),
                    (w, g) => panic!(
                        "{what}: locally {:?}, remotely {:?}",
                        w.as_ref().map(shape_of).map_err(|e| e.to_string()),
                        g.as_ref().map(shape_of).map_err(|e| e.to_string())
                    ),
                }
            }
        }
    }
}

#[test]
fn a_missing_bucket_is_named_as_missing() {
    let Some(srv) = servers("a_missing_bucket_is_named_as_missing") else {
        return;
    };
    let url = "s3://tessera-no-such-bucket/model.safetensors";
    let e = open_location(url, &ReadOptions::default(), &srv.remote())
        .err()
        .expect("an object in a missing bucket opened");
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("the bucket \"tessera-no-such-bucket\" does not exist"),
        "{msg}"
    );
    // A missing object in a bucket that exists says so, not that the bucket is gone.
    let url = format!("s3://{}/no-such-object.safetensors", srv.bucket);
    let e = open_location(&url, &ReadOptions::default(), &srv.remote())
        .err()
        .expect("a missing object opened");
    assert!(!e.to_string().contains("bucket"), "{e}");
    assert!(e.to_string().contains("no such object"), "{e}");
}

/// Six tensors written as three FOLD shards with a Tessera index (our writer: the
/// test compares the remote read with a local read of the same files).
fn tessera_set_files() -> Vec<(String, Vec<u8>)> {
    let mut m = Model::new();
    for t in 0..6u32 {
        let data: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(31) ^ t) as u8)
            .collect();
        let info = TensorInfo::dense(format!("t{t}"), DType::U8, vec![4096]);
        m.push(TensorView::dense(info, Cow::Owned(data)).unwrap())
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    tessera::set::convert_set(
        &m,
        Format::Fold,
        &dir.path().join("model.fold"),
        tessera::set::Split::Shards(3),
        ConvertOptions::default(),
        &WriteOptions::default(),
    )
    .unwrap();
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_tessera_index_opens_by_its_url_or_its_directory_and_binds_the_shards() {
    let Some(srv) =
        servers("a_tessera_index_opens_by_its_url_or_its_directory_and_binds_the_shards")
    else {
        return;
    };
    let opts = ReadOptions::default();
    let files = tessera_set_files();
    assert!(
        files.iter().any(|(n, _)| n == "model.tessera-set.json"),
        "{:?}",
        files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    let local = stage_files(&srv, "dir-tessera", &files);
    let want = tessera::open_path(local.path(), &opts).unwrap();
    for url in [
        format!("s3://{}/dir-tessera/model.tessera-set.json", srv.bucket),
        format!("s3://{}/dir-tessera/", srv.bucket),
        format!("{}/dir-tessera/", srv.http_url),
        format!("{}/dir-tessera/model.tessera-set.json", srv.http_url),
        // Any shard's URL, the index beside it naming it.
        format!("s3://{}/dir-tessera/model-00002-of-00003.fold", srv.bucket),
        format!("{}/dir-tessera/model-00003-of-00003.fold", srv.http_url),
    ] {
        let got =
            open_location(&url, &opts, &srv.remote()).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(got.as_set().map(|s| s.shards().len()), Some(3), "{url}");
        same(want.container(), got.container(), &url);
        let r = got.container().verify(&Default::default());
        let digests = r
            .checks
            .iter()
            .filter(|c| c.layer == "shard digest" && c.status == tessera::Status::Ok)
            .count();
        assert_eq!(digests, 3, "{url}: {:?}", r.checks);
    }
    // A byte of a shard changed (same size, same format): verify names the shard's
    // digest, and a checked read of a tensor in it fails before its bytes are used.
    let mut bad = files.clone();
    let victim = "model-00002-of-00003.fold";
    let shard = &mut bad.iter_mut().find(|(n, _)| n == victim).unwrap().1;
    let mid = shard.len() / 2;
    shard[mid] ^= 0x40;
    stage_files(&srv, "dir-tessera-bad", &bad);
    let url = format!("s3://{}/dir-tessera-bad/", srv.bucket);
    let audit = ReadOptions::default().audit(true);
    let got = open_location(&url, &audit, &srv.remote()).unwrap_or_else(|e| panic!("{url}: {e}"));
    let r = got.container().verify(&Default::default());
    let failed: Vec<_> = r
        .checks
        .iter()
        .filter(|c| c.layer == "shard digest" && c.status == tessera::Status::Failed)
        .map(|c| c.subject.clone())
        .collect();
    assert_eq!(failed, [victim], "{:?}", r.checks);
    let set = got.as_set().unwrap();
    let name = set
        .tensor_infos()
        .iter()
        .map(|i| i.name.clone())
        .find(|n| set.shard_of(n) == Some(victim))
        .unwrap();
    let e = set.tensor(&name).expect_err("a changed shard read");
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    assert!(
        e.to_string().contains("shard digest") && e.to_string().contains(&format!("{url}{victim}")),
        "{e}"
    );
}

/// The committed zTensor v2 model whose shards ztensor 2.1.2 wrote
/// (`data/ztensor2/shards/gen.py`).
fn zt2_files() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/ztensor2/shards");
    ["model.zt", "model-00001.zt", "model-00002.zt"]
        .iter()
        .map(|n| (n.to_string(), std::fs::read(dir.join(n)).unwrap()))
        .collect()
}

#[test]
fn a_ztensor2_root_reads_its_shards_beside_its_url() {
    let Some(srv) = servers("a_ztensor2_root_reads_its_shards_beside_its_url") else {
        return;
    };
    let opts = ReadOptions::default();
    let files = zt2_files();
    let local = stage_files(&srv, "zt2", &files);
    let want = tessera::open_path(&local.path().join("model.zt"), &opts).unwrap();
    assert!(want.container().warnings().is_empty());
    for url in [
        format!("s3://{}/zt2/model.zt", srv.bucket),
        format!("{}/zt2/model.zt", srv.http_url),
        format!("{}/zt2/model.zt?download=true", srv.http_url),
    ] {
        let got =
            open_location(&url, &opts, &srv.remote()).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert!(
            got.container().warnings().is_empty(),
            "{url}: {:?}",
            got.container().warnings()
        );
        // Every part, local or in either shard, and verify's shard digests.
        same(want.container(), got.container(), &url);
        let r = got.container().verify(&Default::default());
        let digests = r
            .checks
            .iter()
            .filter(|c| c.layer == "shard digest" && c.status == tessera::Status::Ok)
            .count();
        assert_eq!(digests, 2, "{url}: {:?}", r.checks);
    }
    // A shard missing beside the root: the open fails naming the shard and its URL (no
    // search by identity over HTTP or S3).
    let missing: Vec<_> = files
        .iter()
        .filter(|(n, _)| n != "model-00002.zt")
        .cloned()
        .collect();
    stage_files(&srv, "zt2-missing", &missing);
    for base in [
        format!("s3://{}/zt2-missing", srv.bucket),
        format!("{}/zt2-missing", srv.http_url),
    ] {
        let url = format!("{base}/model.zt");
        let e = open_location(&url, &opts, &srv.remote())
            .err()
            .unwrap_or_else(|| panic!("{url}: opened without a shard"));
        assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("\"00002\"") && msg.contains(&format!("{base}/model-00002.zt")),
            "{msg}"
        );
    }
    // A shard of another size: refused, naming it.
    let mut resized = files.clone();
    resized[2].1.extend_from_slice(b"extra");
    stage_files(&srv, "zt2-resized", &resized);
    let url = format!("s3://{}/zt2-resized/model.zt", srv.bucket);
    let e = open_location(&url, &opts, &srv.remote())
        .err()
        .expect("a resized shard opened");
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    assert!(e.to_string().contains("00002"), "{e}");
    // A shard of the right size and other bytes (a padding byte, which no part's digest
    // covers): a checked read fetches the shard whole once, before its first part, and
    // refuses every tensor with a part there, naming the shard; the other shard reads.
    let mut altered = files.clone();
    altered[1].1[100] ^= 1;
    stage_files(&srv, "zt2-altered", &altered);
    for url in [
        format!("s3://{}/zt2-altered/model.zt", srv.bucket),
        format!("{}/zt2-altered/model.zt", srv.http_url),
    ] {
        let got =
            open_location(&url, &opts, &srv.remote()).unwrap_or_else(|e| panic!("{url}: {e}"));
        let e = got.container().tensor("enc.weight").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Integrity, "{url}: {e}");
        let msg = e.to_string();
        assert!(
            msg.contains("shard digest") && msg.contains("\"00001\""),
            "{msg}"
        );
        assert!(got.container().tensor("dec.weight").is_ok(), "{url}");
    }
    // A presigned root: its signature fits the root only, so it opens alone, as a root
    // without its shards does (listing the tensors, warning of the shard table).
    let url = format!("{}/zt2/model.zt?X-Amz-Signature=abc", srv.http_url);
    let got = open_location(&url, &opts, &srv.remote()).unwrap();
    assert!(
        got.container()
            .warnings()
            .iter()
            .any(|w| w.contains("shard table")),
        "{:?}",
        got.container().warnings()
    );
}

#[test]
fn a_multi_file_upload_leaves_nothing_when_it_fails_and_never_writes_over_objects() {
    let Some(srv) =
        servers("a_multi_file_upload_leaves_nothing_when_it_fails_and_never_writes_over_objects")
    else {
        return;
    };
    use tessera::remote::{exists, upload_files};
    use tessera::source::ByteSource;
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let shard = file("m-00001-of-00002.bin", b"first shard");
    let index = file("m.index.json", b"{\"index\": true}");
    // A prefix of this run's own: the server may hold an earlier run's objects.
    let run = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let dest = Location::parse(&format!("s3://{}/multi-{run}/m.index.json", srv.bucket)).unwrap();
    let at = |name: &str| dest.sibling(name);
    let read = |loc: &Location| {
        let s = RemoteSource::open(loc, &srv.remote()).unwrap();
        s.read_at(0, s.len()).unwrap().to_vec()
    };

    // The last file cannot be read (a directory): the shard already uploaded is deleted.
    let unreadable = dir.path().join("sub").join("m.index.json");
    std::fs::create_dir_all(&unreadable).unwrap();
    let e = upload_files(&[&shard, &unreadable], &dest, &srv.remote()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert!(
        !exists(&at("m-00001-of-00002.bin"), &srv.remote()).unwrap(),
        "a failed multi-file upload left its first object behind"
    );
    assert!(!exists(&dest, &srv.remote()).unwrap());

    // Complete: both objects, in the order given, each with its file's bytes.
    let got = upload_files(&[&shard, &index], &dest, &srv.remote()).unwrap();
    assert_eq!(
        got.iter().map(|l| l.display()).collect::<Vec<_>>(),
        vec![
            at("m-00001-of-00002.bin").display(),
            at("m.index.json").display()
        ]
    );
    assert_eq!(read(&at("m-00001-of-00002.bin")), b"first shard");
    assert_eq!(read(&dest), b"{\"index\": true}");

    // Again over those keys: refused before anything is sent, naming the key.
    let other = file("m-00001-of-00002.bin", b"another model's shard");
    let e = upload_files(&[&other, &index], &dest, &srv.remote()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains("m-00001-of-00002.bin exists"), "{e}");
    assert_eq!(read(&at("m-00001-of-00002.bin")), b"first shard");
}

/// Requests nginx logged for `name` so far, and their body bytes, once the count has
/// settled (nginx logs a request after answering it).
pub(crate) fn http_log(srv: &Servers, name: &str, since: (u64, u64)) -> (u64, u64) {
    let read = || {
        let lines = log_lines(srv, name);
        let bytes = lines
            .iter()
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum::<u64>();
        (lines.len() as u64 - since.0, bytes - since.1)
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

/// nginx's log lines (`METHOD URI RANGE STATUS BYTES`) of the requests for `name`.
pub(crate) fn log_lines(srv: &Servers, name: &str) -> Vec<String> {
    let log = std::fs::read_to_string(&srv.http_log).unwrap_or_default();
    let uri = format!("/{name}");
    log.lines()
        .filter(|l| l.split(' ').nth(1) == Some(uri.as_str()))
        .map(String::from)
        .collect()
}

/// The `Range` headers of the requests for `name` after the first `skip`, as
/// `[start, end]` pairs, that overlap another one (each pair once).
fn overlapping_ranges(srv: &Servers, name: &str, skip: usize) -> Vec<((u64, u64), (u64, u64))> {
    let ranges: Vec<(u64, u64)> = log_lines(srv, name)
        .into_iter()
        .skip(skip)
        .filter_map(|l| {
            let r = l.split(' ').nth(2)?.strip_prefix("bytes=")?;
            let (a, b) = r.split_once('-')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .collect();
    let mut out = Vec::new();
    for (i, a) in ranges.iter().enumerate() {
        for b in &ranges[i + 1..] {
            if a.0 <= b.1 && b.0 <= a.1 {
                out.push((*a, *b));
            }
        }
    }
    out
}

/// `count` tensors of `each` bytes (pseudo-random: compression keeps most of their
/// size), written as `format`.
fn model_bytes(format: Format, count: u32, each: usize, opts: &WriteOptions) -> Vec<u8> {
    let mut m = Model::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for t in 0..count {
        let bytes: Vec<u8> = (0..each)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect();
        let info = TensorInfo::dense(format!("t{t}"), DType::U8, vec![each as u64]);
        m.push(TensorView::dense(info, Cow::Owned(bytes)).unwrap())
            .unwrap();
    }
    let p = prepare(&m, format, ConvertOptions::default()).unwrap();
    let mut out = Cursor::new(Vec::new());
    write_to(format, &p, &mut out, opts).unwrap();
    out.into_inner()
}

/// Issue 30 §3: a FOLD file opens from its index and its chunk headers (and the first
/// bytes of each STEN chunk, its safetensors header), fetched in one batch — not its
/// tensor chunks, which it read whole before (the whole file, over HTTP). A chunk's
/// checks run when its bytes are first used.
#[test]
fn inspect_of_a_remote_fold_fetches_its_index_not_its_chunks() {
    let Some(srv) = servers("inspect_of_a_remote_fold_fetches_its_index_not_its_chunks") else {
        return;
    };
    let chunk = 2 << 20;
    for (label, opts) in [
        ("raw", WriteOptions::default()),
        (
            "zstd+ecc",
            WriteOptions::default()
                .compression(tessera::convert::Compression::Zstd(3))
                .with(tessera::formats::fold::FoldOptions::default().ecc(Some(16))),
        ),
    ] {
        let bytes = model_bytes(Format::Fold, 6, chunk, &opts);
        let total = bytes.len() as u64;
        let name = format!("lazy-{label}.fold");
        let (_, http) = srv.stage(&name, &bytes);
        let since = http_log(&srv, &name, (0, 0));
        let src = RemoteSource::open(&Location::parse(&http).unwrap(), &srv.remote()).unwrap();
        // As `tessera inspect` opens it.
        let file = tessera::open(&src, &ReadOptions::default().audit(true)).unwrap();
        assert_eq!(file.tensor_infos().len(), 6, "{label}");
        let (requests, fetched) = (src.requests(), src.bytes_fetched());
        // HEAD, the first 64 KiB, the last 64 KiB (the index) and the chunk headers'
        // batch (one request per chunk at most: they are 2 MiB apart); the bytes: those
        // 128 KiB and, per chunk, its header and first bytes (144 KiB for zstd).
        assert!(requests <= 3 + 6, "{label}: {requests} requests to open");
        assert!(
            fetched <= 128 * 1024 + 6 * (32 + 144 * 1024) && fetched * 4 < total,
            "{label}: opening fetched {fetched} of {total} bytes"
        );
        assert_eq!(
            http_log(&srv, &name, since),
            (requests, fetched),
            "{label}: nginx's count and ours differ"
        );
        // One tensor: about its chunk, checked.
        let local = tessera::open(&bytes, &ReadOptions::default()).unwrap();
        let t = file.tensor("t2").unwrap();
        assert_eq!(
            t.data().unwrap(),
            local.tensor("t2").unwrap().data().unwrap()
        );
        // FOLD decodes the next chunk ahead, and those two reads in a row may open
        // one 8 MiB read-ahead window: never the whole file.
        let one = src.bytes_fetched() - fetched;
        assert!(
            one <= chunk as u64 + (8 << 20) + 64 * 1024 && one < total,
            "{label}: one tensor fetched {one}"
        );
        // verify still reports every layer, and reads each chunk once more at most.
        let r = file.verify(&Default::default());
        assert!(r.is_ok(), "{label}: {:?}", r.failures().collect::<Vec<_>>());
        assert!(src.bytes_fetched() <= fetched + one + 2 * total, "{label}");
    }
}

/// A flipped byte in a remote FOLD chunk (no ECC) is found when the chunk is first
/// used — the read fails naming the chunk — and by verify, as it was when the open
/// read every chunk; with ECC the read is repaired.
#[test]
fn a_remote_fold_chunk_is_checked_when_first_used() {
    let Some(srv) = servers("a_remote_fold_chunk_is_checked_when_first_used") else {
        return;
    };
    for (label, ecc) in [("plain", None), ("ecc", Some(16))] {
        let opts =
            WriteOptions::default().with(tessera::formats::fold::FoldOptions::default().ecc(ecc));
        let mut bytes = model_bytes(Format::Fold, 4, 1 << 20, &opts);
        let local = tessera::open(&bytes, &ReadOptions::default()).unwrap();
        let info = local.tensor_infos()[1].clone();
        let want = local.tensor(&info.name).unwrap().data().unwrap().to_vec();
        drop(local);
        // A byte in the tensor's data, well past the chunk's safetensors header.
        let at = info.storage.offset.unwrap() + 4096;
        bytes[at as usize] ^= 0x20;
        let name = format!("flip-{label}.fold");
        let (_, http) = srv.stage(&name, &bytes);
        let opened = open_location(&http, &ReadOptions::default(), &srv.remote())
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        let f = opened.container();
        match ecc {
            None => {
                let e = f.tensor(&info.name).unwrap_err();
                assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
                assert!(e.to_string().contains("CRC-32C"), "{e}");
                assert!(e.to_string().contains(&info.name), "{e}");
                let r = f.verify(&Default::default());
                assert!(!r.is_ok());
                assert!(
                    r.warnings.iter().any(|w| w.contains("cannot be read")),
                    "{:?}",
                    r.warnings
                );
            }
            Some(_) => {
                let t = f.tensor(&info.name).unwrap();
                assert_eq!(t.data().unwrap(), &want[..], "{label}");
            }
        }
    }
}

/// Issue 30 §3: an npz of many members opens from its central directory, fetched in
/// one read, and its members' local headers in one batch — not a request per header
/// field (44,589 requests for 20,000 members before).
#[test]
fn a_remote_npz_of_many_members_opens_in_a_few_requests() {
    let Some(srv) = servers("a_remote_npz_of_many_members_opens_in_a_few_requests") else {
        return;
    };
    let bytes = model_bytes(Format::Npz, 2000, 64, &WriteOptions::default());
    let total = bytes.len() as u64;
    let (_, http) = srv.stage("many.npz", &bytes);
    let src = RemoteSource::open(&Location::parse(&http).unwrap(), &srv.remote()).unwrap();
    let file = tessera::open(&src, &ReadOptions::default()).unwrap();
    assert_eq!(file.tensor_infos().len(), 2000);
    let (requests, fetched) = (src.requests(), src.bytes_fetched());
    assert!(requests <= 8, "{requests} requests to open");
    // The file, and the first and last 64 KiB (fetched at open) once more at most.
    assert!(
        fetched <= total + 3 * 64 * 1024,
        "{fetched} of {total} bytes"
    );
    let local = tessera::open(&bytes, &ReadOptions::default()).unwrap();
    same(&*local, &*file, "many.npz");
}

/// Issue 30 §3: a few small reads in a row (a zip's headers) start no read-ahead, and
/// a set's shards read from two threads fetch each byte once.
#[test]
fn read_ahead_skips_header_probes_and_never_fetches_twice() {
    let Some(srv) = servers("read_ahead_skips_header_probes_and_never_fetches_twice") else {
        return;
    };
    let pt = model_bytes(Format::Pytorch, 16, 256 << 10, &WriteOptions::default());
    let (_, http) = srv.stage("probe.pt", &pt);
    let src = RemoteSource::open(&Location::parse(&http).unwrap(), &srv.remote()).unwrap();
    let file = tessera::open(&src, &ReadOptions::default()).unwrap();
    assert_eq!(file.tensor_infos().len(), 16);
    assert!(
        src.bytes_fetched() <= 256 * 1024,
        "opening a {} B checkpoint fetched {}",
        pt.len(),
        src.bytes_fetched()
    );
    // Two shards of 8 MiB, read by two threads taking every other tensor.
    let shard = |s: u32| {
        let mut m = Model::new();
        for t in 0..16u32 {
            let bytes: Vec<u8> = (0..512 << 10).map(|i: u32| (i ^ t ^ s) as u8).collect();
            let info = TensorInfo::dense(format!("s{s}.t{t}"), DType::U8, vec![512 << 10]);
            m.push(TensorView::dense(info, Cow::Owned(bytes)).unwrap())
                .unwrap();
        }
        let p = prepare(&m, Format::Safetensors, ConvertOptions::default()).unwrap();
        let mut out = Cursor::new(Vec::new());
        write_to(Format::Safetensors, &p, &mut out, &WriteOptions::default()).unwrap();
        out.into_inner()
    };
    let names = [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ];
    let mut weight_map = serde_json::Map::new();
    let mut sizes = Vec::new();
    for (s, n) in names.iter().enumerate() {
        let b = shard(s as u32);
        sizes.push(b.len() as u64);
        srv.stage(&format!("ra-set/{n}"), &b);
        for t in 0..16 {
            weight_map.insert(format!("s{s}.t{t}"), serde_json::json!(n));
        }
    }
    let index = serde_json::json!({"metadata": {}, "weight_map": weight_map});
    let (_, url) = srv.stage(
        "ra-set/model.safetensors.index.json",
        index.to_string().as_bytes(),
    );
    let since: Vec<(u64, u64)> = names
        .iter()
        .map(|n| http_log(&srv, &format!("ra-set/{n}"), (0, 0)))
        .collect();
    let opened = open_location(&url, &ReadOptions::default(), &srv.remote()).unwrap();
    let f = opened.container();
    let infos = f.tensor_infos().to_vec();
    assert_eq!(infos.len(), 32);
    std::thread::scope(|s| {
        for k in 0..2 {
            let infos = &infos;
            s.spawn(move || {
                for i in infos.iter().skip(k).step_by(2) {
                    f.tensor(&i.name).unwrap().data().unwrap();
                }
            });
        }
    });
    // Read-ahead windows (8 MiB and up) never overlap; a tensor a thread reads directly
    // while the other thread's window is being placed can still be fetched twice (a race
    // not yet found: one 512 KiB tensor in several runs alone, three once in ten runs of
    // the whole suite on a loaded 2-core machine), so four tensors of slack are allowed —
    // below one window, which is what the old read-ahead fetched twice. On a failure the
    // ranges fetched twice are listed, to find the race.
    for ((n, size), since) in names.iter().zip(&sizes).zip(since) {
        let (requests, bytes) = http_log(&srv, &format!("ra-set/{n}"), since);
        assert!(
            bytes <= size + 64 * 1024 + 4 * (512 << 10),
            "{n}: {bytes} bytes fetched of {size} ({requests} requests); overlapping: {:?}",
            overlapping_ranges(&srv, &format!("ra-set/{n}"), since.0 as usize)
        );
    }
}

/// Issue 30 §3: a WTXT-S opened by URL finds its `.wsum` beside the URL (it was looked
/// for on local disk), so a streamed snapshot uploaded with its `.wsum` verifies; one
/// without is unfinalized, naming the URL looked for.
#[test]
fn a_remote_wtxt_s_reads_its_wsum_beside_the_url() {
    let Some(srv) = servers("a_remote_wtxt_s_reads_its_wsum_beside_the_url") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("snap.wtxt");
    let mut m = Model::new();
    let info = TensorInfo::dense("w", DType::F32, vec![4]);
    m.push(TensorView::dense(info, Cow::Owned(vec![0u8; 16])).unwrap())
        .unwrap();
    let o = WriteOptions::default()
        .with(tessera::formats::wtxt::WtxtOptions::default().streaming(true));
    tessera::convert::write_file(Format::Wtxt, &m, &p, &o).unwrap();
    let data = std::fs::read(&p).unwrap();
    let wsum = std::fs::read(dir.path().join("snap.wtxt.wsum")).unwrap();
    let (s3, http) = srv.stage("wsum/snap.wtxt", &data);
    srv.stage("wsum/snap.wtxt.wsum", &wsum);
    for url in [&s3, &http] {
        let opened = open_location(url, &ReadOptions::default(), &srv.remote())
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        let r = opened.container().verify(&Default::default());
        assert!(r.is_ok(), "{url}: {:?}", r.failures().collect::<Vec<_>>());
    }
    let (_, alone) = srv.stage("wsum/alone.wtxt", &data);
    let opened = open_location(&alone, &ReadOptions::default(), &srv.remote()).unwrap();
    let r = opened.container().verify(&Default::default());
    assert!(!r.is_ok());
    let all = format!("{:?}", r.failures().collect::<Vec<_>>());
    assert!(
        all.contains("unfinalized") && all.contains("alone.wtxt.wsum"),
        "{all}"
    );
}

/// Issue 30 §3: a server that ignores `Range` (answers 200 with the whole object): a
/// small object is fetched whole by one plain GET; a large one is refused, saying the
/// server needs ranges — never read whole once per tensor.
#[test]
fn a_server_without_ranges_serves_small_objects_whole_and_refuses_large_ones() {
    if servers("a_server_without_ranges_serves_small_objects_whole_and_refuses_large_ones")
        .is_none()
    {
        return;
    }
    let f = faulty();
    let small = model_bytes(Format::Safetensors, 4, 64 << 10, &WriteOptions::default());
    std::fs::write(f.root.path().join("small.safetensors"), &small).unwrap();
    let url = format!("{}/norange/small.safetensors", f.url);
    let src = RemoteSource::open(
        &Location::parse(&url).unwrap(),
        &RemoteOptions::default().cache(false),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // HEAD, the ranged GET answered whole (refused unread), the plain GET.
    assert!(src.requests() <= 3, "{} requests", src.requests());
    let file = tessera::open(&src, &ReadOptions::default()).unwrap();
    let local = tessera::open(&small, &ReadOptions::default()).unwrap();
    same(&*local, &*file, &url);
    assert!(src.requests() <= 3, "{} requests", src.requests());
    assert!(src.bytes_fetched() <= small.len() as u64);
    // 20 MiB (sparse): refused at open, naming the URL and what is missing.
    let big = std::fs::File::create(f.root.path().join("big.safetensors")).unwrap();
    big.set_len(20 << 20).unwrap();
    let url = format!("{}/norange/big.safetensors", f.url);
    let e = RemoteSource::open(
        &Location::parse(&url).unwrap(),
        &RemoteOptions::default().cache(false),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("ignores HTTP Range") && msg.contains("big.safetensors"),
        "{msg}"
    );
}

/// An AEROSET written by Tessera (`set::convert_set`): eight 256 KiB tensors, two a
/// shard, two shards a part (two parts), `hash_b3` on every tensor. The files, by name.
fn aeroset_files() -> Vec<(String, Vec<u8>)> {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Model::new();
    m.metadata.insert("model_name", "remote-set");
    for t in 0..8u32 {
        let bytes: Vec<u8> = (0..256 * 1024u32)
            .map(|i| i.wrapping_mul(2654435761).wrapping_add(t) as u8)
            .collect();
        let info = TensorInfo::dense(format!("t{t}"), DType::U8, vec![256 * 1024]);
        m.push(TensorView::dense(info, Cow::Owned(bytes)).unwrap())
            .unwrap();
    }
    let opts = WriteOptions::default().no_fsync(true).with(
        tessera::formats::aero::AeroOptions::default()
            .tensor_hashes(true)
            .max_part_shards(Some(2)),
    );
    let index = dir.path().join("model.aeroset.json");
    let r = tessera::set::convert_set(
        &m,
        Format::Aero,
        &index,
        tessera::set::Split::MaxBytes(512 * 1024),
        ConvertOptions::default(),
        &opts,
    )
    .unwrap();
    r.files
        .iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(p).unwrap())
        })
        .collect()
}

/// An AEROSET opens by its JSON's URL (S3 and HTTP) or its directory's (S3), reads as
/// the local set does and verifies (every part's SHA-256 fetched); opening fetches the
/// JSON and `index.aero` only, never a part; one tensor then costs its bytes plus the
/// part's header, TOC and metadata (bounded); a v0.2 index with `base_url` or a part
/// given as a full URL reads from there.
#[test]
fn an_aeroset_opens_by_url_and_fetches_parts_only_for_their_tensors() {
    let Some(srv) = servers("an_aeroset_opens_by_url_and_fetches_parts_only_for_their_tensors")
    else {
        return;
    };
    let opts = ReadOptions::default();
    let files = aeroset_files();
    let names: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "part-000.aero",
            "part-001.aero",
            "index.aero",
            "model.aeroset.json"
        ]
    );
    let local = stage_files(&srv, "aeroset-r", &files);
    let want = tessera::open_path(local.path(), &opts).unwrap();
    for url in [
        format!("s3://{}/aeroset-r/model.aeroset.json", srv.bucket),
        format!("s3://{}/aeroset-r/", srv.bucket),
        format!("{}/aeroset-r/model.aeroset.json", srv.http_url),
        // An HTTP directory: model.aeroset.json is among the names probed.
        format!("{}/aeroset-r/", srv.http_url),
    ] {
        let got =
            open_location(&url, &opts, &srv.remote()).unwrap_or_else(|e| panic!("{url}: {e}"));
        same(want.container(), got.container(), &url);
        let r = got.container().verify(&Default::default());
        assert!(r.is_ok(), "{url}: {:?}", r.failures().collect::<Vec<_>>());
        let sha = (r.checks.iter())
            .filter(|c| c.layer == "sha256" && c.status == tessera::Status::Ok)
            .count();
        assert_eq!(sha, 3, "{url}");
    }
    // What an open (inspect) and one tensor cost over HTTP, from nginx's log.
    let part = |n: &str| format!("aeroset-r/{n}");
    let before: Vec<(u64, u64)> = (files.iter())
        .map(|(n, _)| http_log(&srv, &part(n), (0, 0)))
        .collect();
    let url = format!("{}/aeroset-r/model.aeroset.json", srv.http_url);
    let got = open_location(&url, &opts, &srv.remote()).unwrap();
    assert_eq!(got.container().tensor_infos().len(), 8);
    let cost = |i: usize| http_log(&srv, &part(&files[i].0), before[i]);
    let (index_size, json_size) = (files[2].1.len() as u64, files[3].1.len() as u64);
    for (i, (name, _)) in files.iter().enumerate().take(2) {
        assert_eq!(cost(i), (0, 0), "opening fetched from {name}");
    }
    let (ir, ib) = cost(2);
    let (jr, jb) = cost(3);
    eprintln!(
        "remote AEROSET open: index.aero {ir} requests {ib} bytes (file {index_size}), JSON {jr} requests {jb} bytes (file {json_size})"
    );
    assert!(ib <= index_size && jb <= 2 * json_size, "{ib} {jb}");
    assert!(ir <= 3 && jr <= 3, "{ir} {jr}");
    // One tensor of part-001.aero: its bytes, the part's opening, nothing of part-000.
    let v = got.container().tensor("t5").unwrap();
    assert_eq!(v.parts[0].bytes.len(), 256 * 1024);
    let (pr, pb) = cost(1);
    eprintln!("remote AEROSET tensor t5 (262144 bytes): part-001.aero {pr} requests {pb} bytes");
    assert_eq!(cost(0), (0, 0));
    // The part's opening (its first 64 KiB: header, TOC, metadata chunks), then the
    // tensor fetched to check its hash_b3 and once more to hand it out (a remote read is
    // fresh bytes each time, as a single AERO file's checked read).
    assert!(
        pb <= 2 * 256 * 1024 + 64 * 1024,
        "{pb} bytes for one 256 KiB tensor"
    );
    assert!(pr <= 5, "{pr} requests");
    // Unchecked: the opening and the tensor's bytes.
    let unchecked = opts.clone().verify(false);
    let got = open_location(&url, &unchecked, &srv.remote()).unwrap();
    let before1 = http_log(&srv, &part(&files[1].0), (0, 0));
    got.container().tensor("t6").unwrap();
    let (ur, ub) = http_log(&srv, &part(&files[1].0), before1);
    eprintln!("remote AEROSET tensor t6 unchecked: part-001.aero {ur} requests {ub} bytes");
    assert!(ub <= 256 * 1024 + 64 * 1024, "{ub} bytes unchecked");

    // v0.2: a local JSON whose base_url names the HTTP directory, and one part as a
    // full s3:// URL: read from there.
    let dir = tempfile::tempdir().unwrap();
    let mut j: serde_json::Value = serde_json::from_slice(&files[3].1).unwrap();
    j["format"]["version"] = serde_json::json!([0, 2]);
    j["base_url"] = format!("{}/aeroset-r", srv.http_url).into();
    j["parts"][0]["path"] = format!("s3://{}/aeroset-r/part-000.aero", srv.bucket).into();
    j["cache"] = serde_json::json!({"enabled": true});
    let index = dir.path().join("model.aeroset.json");
    std::fs::write(&index, serde_json::to_vec(&j).unwrap()).unwrap();
    let got = open_location(index.to_str().unwrap(), &opts, &srv.remote()).unwrap();
    same(want.container(), got.container(), "base_url");
    // A part that is not there is named by its URL.
    j["parts"][1]["path"] = "missing.aero".into();
    std::fs::write(&index, serde_json::to_vec(&j).unwrap()).unwrap();
    let got = open_location(index.to_str().unwrap(), &opts, &srv.remote()).unwrap();
    let e = got.container().tensor("t5").unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("{}/aeroset-r/missing.aero", srv.http_url)),
        "{e}"
    );
}

/// A PyTorch Distributed Checkpoint (torch's 4-rank vector) opens by its directory's URL
/// or its `.metadata`'s, over S3 and HTTP (an HTTP directory is probed for
/// `.metadata`), the `.distcp` files it names fetched beside it, equal to the local open.
#[test]
fn a_dcp_checkpoint_opens_by_url() {
    let Some(srv) = servers("a_dcp_checkpoint_opens_by_url") else {
        return;
    };
    let opts = ReadOptions::default();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/dcp/valid-r4");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            let bytes = std::fs::read(dir.join(&name)).unwrap();
            (name, bytes)
        })
        .collect();
    files.sort();
    let local = stage_files(&srv, "dcp-r", &files);
    let want = tessera::open_path(local.path(), &opts).unwrap();
    assert_eq!(want.container().format(), tessera::Format::Dcp);
    for url in [
        format!("s3://{}/dcp-r/", srv.bucket),
        format!("s3://{}/dcp-r/.metadata", srv.bucket),
        format!("{}/dcp-r/.metadata", srv.http_url),
        format!("{}/dcp-r/", srv.http_url),
    ] {
        let got =
            open_location(&url, &opts, &srv.remote()).unwrap_or_else(|e| panic!("{url}: {e}"));
        same(want.container(), got.container(), &url);
        let r = got.container().verify(&Default::default());
        assert!(r.is_ok(), "{url}: {:?}", r.failures().collect::<Vec<_>>());
    }
}
