//! Keys and tokens: a `--public-key` given means a signature is required; key files are
//! typed, a secret key is never taken for a public one (nor the reverse) and never
//! printed; bearer tokens go only to the hosts they belong to; a URL's secrets are
//! redacted wherever it is printed.

use std::borrow::Cow;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use tessera::convert::{capabilities, prepare, write_file, MetadataSupport};
use tessera::{ConvertOptions, DType, Format, Model, TensorInfo, TensorView, WriteOptions};

fn tessera() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tessera"));
    for v in ["TESSERA_HTTP_TOKEN", "TESSERA_HTTP_TOKEN_HOSTS", "HF_TOKEN"] {
        c.env_remove(v);
    }
    c
}

fn run(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut c = tessera();
    for a in args {
        c.arg(a);
    }
    c.output().unwrap()
}

use crate::common::text;

fn model() -> Model {
    let mut m = Model::new();
    m.metadata.insert("note", "kept");
    for name in ["a", "b"] {
        let bytes: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let info = TensorInfo::dense(name, DType::F32, vec![2, 3]);
        m.push(TensorView::dense(info, Cow::Owned(bytes)).unwrap())
            .unwrap();
    }
    m
}

fn write(dir: &Path, name: &str, format: Format) -> PathBuf {
    let p = dir.join(name);
    let caps = capabilities(format).unwrap();
    let opts = ConvertOptions::default().drop_metadata(caps.metadata == MetadataSupport::None);
    let m = model();
    let prepared = prepare(&m, format, opts).unwrap();
    write_file(format, &prepared, &p, &WriteOptions::default()).unwrap();
    p
}

fn keygen(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let k = dir.join(name);
    let mut c = tessera();
    c.arg("keygen").arg("-o").arg(&k).args(extra);
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    k
}

fn pub_of(k: &Path) -> PathBuf {
    let mut s = k.as_os_str().to_owned();
    s.push(".pub");
    PathBuf::from(s)
}

#[test]
fn a_public_key_given_requires_a_signature() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ed = keygen(d, "ed", &[]);
    let ec = keygen(d, "ec", &["--algorithm", "ecdsa-p256"]);
    // An unsigned file, with either kind of key: exit 1, saying so (was exit 0 / 2).
    let plain = write(d, "plain.safetensors", Format::Safetensors);
    for key in [&ed, &ec] {
        let o = run(&[&"verify", &plain, &"--public-key", &pub_of(key)]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{t}");
        assert!(t.contains("no signature found for this key"), "{t}");
        let o = run(&[&"verify", &plain, &"--public-key", &pub_of(key), &"--json"]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(doc["ok"], false);
        assert_eq!(
            doc["checks"][0]["detail"],
            "no signature found for this key"
        );
    }
    // A signature embedded, then dropped by a conversion to a format without metadata.
    let signed = d.join("signed.safetensors");
    let o = run(&[&"sign", &plain, &"--key", &ed, &"--embed", &"-o", &signed]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&[&"verify", &signed, &"--public-key", &pub_of(&ed)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let npz = d.join("dropped.npz");
    let o = run(&[&"convert", &signed, &npz, &"--drop-metadata"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&[&"verify", &npz, &"--public-key", &pub_of(&ed)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("no signature found for this key"));
    // An unsigned WTXT; a signed one checked with a key of the other algorithm.
    let wtxt = write(d, "plain.wtxt", Format::Wtxt);
    let o = run(&[&"verify", &wtxt, &"--public-key", &pub_of(&ed)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("no signature found for this key"));
    let o = run(&[&"wtxt", &"sign", &wtxt, &"--key", &ed]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&[&"verify", &wtxt, &"--public-key", &pub_of(&ed)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&[&"verify", &wtxt, &"--public-key", &pub_of(&ec)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("no signature found for this key"));
    // Without a key, an unsigned file is not a failure.
    assert_eq!(run(&[&"verify", &plain]).status.code(), Some(0));
}

/// Every byte of the key file's content, and its hex lines, are absent from `t`.
fn leaks(t: &str, key_file: &Path) -> bool {
    let content = std::fs::read_to_string(key_file).unwrap();
    content
        .lines()
        .filter(|l| !l.starts_with("-----") && l.len() > 8)
        .any(|l| t.contains(l.trim()))
}

#[test]
fn a_secret_key_is_refused_as_public_and_never_printed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ed = keygen(d, "signer", &[]);
    let src = write(d, "m.safetensors", Format::Safetensors);
    let sig = d.join("m.sig");
    let o = run(&[&"sign", &src, &"--key", &ed, &"-o", &sig]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // The typed secret key as --public-key: exit 2, naming the file, not its content.
    for extra in [&["--signature", sig.to_str().unwrap()][..], &[]] {
        let mut c = tessera();
        c.arg("verify")
            .arg(&src)
            .arg("--public-key")
            .arg(&ed)
            .args(extra);
        let o = c.output().unwrap();
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{t}");
        assert!(t.contains("is a secret key file"), "{t}");
        assert!(!leaks(&t, &ed), "{t}");
    }
    // The old untyped form: the same seed as 64 hex digits.
    // RFC 8032's third key: its seed is also a curve point, so only the derived key
    // tells it apart.
    let seed = "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7";
    let public = "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025";
    let old = d.join("old");
    std::fs::write(&old, format!("{seed}\n")).unwrap();
    std::fs::write(pub_of(&old), format!("{public}\n")).unwrap();
    let old_sig = d.join("old.sig");
    let o = run(&[&"sign", &src, &"--key", &old, &"-o", &old_sig]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&[
        &"verify",
        &src,
        &"--signature",
        &old_sig,
        &"--public-key",
        &pub_of(&old),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "the old form still reads: {}",
        text(&o)
    );
    // The old secret file beside its .pub: told apart by the public key it derives.
    let o = run(&[
        &"verify",
        &src,
        &"--signature",
        &old_sig,
        &"--public-key",
        &old,
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.contains("is a secret key file") && !t.contains(seed),
        "{t}"
    );
    // Alone, with mode 0600 (as keygen wrote secret keys): refused too.
    let lone = d.join("lone");
    std::fs::write(&lone, format!("{seed}\n")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&lone, std::fs::Permissions::from_mode(0o600)).unwrap();
        let o = run(&[
            &"verify",
            &src,
            &"--signature",
            &old_sig,
            &"--public-key",
            &lone,
        ]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{t}");
        assert!(
            t.contains("looks like a secret key") && !t.contains(seed),
            "{t}"
        );
        std::fs::set_permissions(&lone, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    // Alone and world-readable: recognised at verification, the signer's key being the
    // one it derives.
    let o = run(&[
        &"verify",
        &src,
        &"--signature",
        &old_sig,
        &"--public-key",
        &lone,
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("secret key") && !t.contains(seed), "{t}");
    // The wrong (public) key: the failure names the signer's keyid, not the key given.
    let other = keygen(d, "other", &[]);
    let o = run(&[
        &"verify",
        &src,
        &"--signature",
        &sig,
        &"--public-key",
        &pub_of(&other),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("not by the trusted key") && t.contains("keyid"),
        "{t}"
    );
    assert!(!leaks(&t, &pub_of(&other)) && !leaks(&t, &other), "{t}");
}

#[test]
fn keygen_writes_typed_files_and_signing_refuses_a_public_key() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let k = d.join("k");
    let o = run(&[&"keygen", &"-o", &k]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let secret = std::fs::read_to_string(&k).unwrap();
    let public = std::fs::read_to_string(pub_of(&k)).unwrap();
    assert!(
        secret.starts_with("-----BEGIN PRIVATE KEY-----\n"),
        "{secret}"
    );
    assert!(
        public.starts_with("-----BEGIN PUBLIC KEY-----\n"),
        "{public}"
    );
    // keygen prints the keyid, never the key.
    assert!(text(&o).contains("keyid"), "{}", text(&o));
    assert!(!leaks(&text(&o), &pub_of(&k)) && !leaks(&text(&o), &k));
    let src = write(d, "m.safetensors", Format::Safetensors);
    let sig = d.join("m.sig");
    // The public key given to sign: exit 2, whichever verb.
    let o = run(&[&"sign", &src, &"--key", &pub_of(&k), &"-o", &sig]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("is a public key file"), "{t}");
    assert!(!sig.exists());
    let wtxt = write(d, "m.wtxt", Format::Wtxt);
    let o = run(&[&"wtxt", &"sign", &wtxt, &"--key", &pub_of(&k)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = run(&[
        &"convert",
        &src,
        &d.join("s.wtxt"),
        &"--sign-key",
        &pub_of(&k),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // An old untyped public key (named .pub) given to sign: refused too.
    let old_pub = d.join("old.pub");
    std::fs::write(
        &old_pub,
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025\n",
    )
    .unwrap();
    let o = run(&[&"sign", &src, &"--key", &old_pub, &"-o", &sig]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("named .pub"), "{t}");
    // OpenSSL's Ed25519 PEM (RFC 8410 test key) is read as keygen's is.
    let pem = d.join("openssl.pem");
    std::fs::write(
        &pem,
        "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEINTuctv5E1hK1bbY8fdp+K06/nwoy/HU++CXqI9EdVhC\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let o = run(&[&"sign", &src, &"--key", &pem, &"-o", &sig]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let spki = d.join("openssl.pub.pem");
    std::fs::write(
        &spki,
        "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----\n",
    )
    .unwrap();
    let o = run(&[
        &"verify",
        &src,
        &"--signature",
        &sig,
        &"--public-key",
        &spki,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// A tiny HTTP server for one file at `/m.safetensors` (HEAD, ranged GET; everything
/// else 404), recording every request's head.
fn serve(body: Vec<u8>) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match s.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            log.lock().unwrap().push(head.clone());
            let first = head.lines().next().unwrap_or("").to_string();
            let mut parts = first.split(' ');
            let method = parts.next().unwrap_or("");
            let path = parts.next().unwrap_or("");
            let path = path.split('?').next().unwrap_or("");
            let common = "ETag: \"e1\"\r\nLast-Modified: Wed, 21 Oct 2015 07:28:00 GMT\r\nAccept-Ranges: bytes\r\nConnection: close\r\n";
            let reply: Vec<u8> = if path != "/m.safetensors" {
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
            } else if method == "HEAD" {
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{common}\r\n",
                    body.len()
                )
                .into_bytes()
            } else {
                let range = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("range")
                            .then(|| v.trim().to_string())
                    })
                    .and_then(|r| {
                        let (a, b) = r.strip_prefix("bytes=")?.split_once('-')?;
                        let a: usize = a.parse().ok()?;
                        let b: usize = b.parse::<usize>().ok().unwrap_or(body.len() - 1);
                        Some((a, b.min(body.len() - 1)))
                    });
                match range {
                    Some((a, b)) if a <= b => {
                        let mut r = format!(
                            "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {a}-{b}/{}\r\n{common}\r\n",
                            b + 1 - a,
                            body.len()
                        )
                        .into_bytes();
                        r.extend_from_slice(&body[a..=b]);
                        r
                    }
                    _ => {
                        let mut r = format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{common}\r\n",
                            body.len()
                        )
                        .into_bytes();
                        r.extend_from_slice(&body);
                        r
                    }
                }
            };
            let _ = s.write_all(&reply);
        }
    });
    (port, seen)
}

fn authorization(seen: &Mutex<Vec<String>>) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .flat_map(|h| {
            h.lines()
                .filter(|l| l.to_ascii_lowercase().starts_with("authorization:"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn bearer_tokens_go_only_to_the_hosts_they_belong_to() {
    let dir = tempfile::tempdir().unwrap();
    let src = write(dir.path(), "m.safetensors", Format::Safetensors);
    let (port, seen) = serve(std::fs::read(&src).unwrap());
    let url = format!("http://127.0.0.1:{port}/m.safetensors");
    let inspect = |vars: &[(&str, &str)], extra: &[&str]| {
        seen.lock().unwrap().clear();
        let mut c = tessera();
        c.arg("inspect").arg(&url).args(extra);
        for (k, v) in vars {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(!text(&o).contains("tok-"), "{}", text(&o));
        authorization(&seen)
    };
    // HF_TOKEN over plain http to a host that is not Hugging Face's: never sent.
    assert!(inspect(&[("HF_TOKEN", "tok-hf")], &[]).is_empty());
    // TESSERA_HTTP_TOKEN to a host nobody named: not sent.
    assert!(inspect(&[("TESSERA_HTTP_TOKEN", "tok-t")], &[]).is_empty());
    assert!(inspect(
        &[
            ("TESSERA_HTTP_TOKEN", "tok-t"),
            ("TESSERA_HTTP_TOKEN_HOSTS", "models.example.com")
        ],
        &[]
    )
    .is_empty());
    // Named, or given with --token: sent, on every request.
    let auth = inspect(
        &[
            ("TESSERA_HTTP_TOKEN", "tok-t"),
            ("TESSERA_HTTP_TOKEN_HOSTS", "models.example.com,127.0.0.1"),
        ],
        &[],
    );
    assert!(
        !auth.is_empty() && auth.iter().all(|a| a.ends_with("Bearer tok-t")),
        "{auth:?}"
    );
    let auth = inspect(
        &[("TESSERA_HTTP_TOKEN", "tok-t"), ("HF_TOKEN", "tok-hf")],
        &["--token"],
    );
    assert!(
        !auth.is_empty() && auth.iter().all(|a| a.ends_with("Bearer tok-t")),
        "{auth:?}"
    );
    // --token never sends HF_TOKEN to another host.
    assert!(inspect(&[("HF_TOKEN", "tok-hf")], &["--token"]).is_empty());
}

#[test]
fn a_presigned_urls_secrets_are_redacted_in_every_verb_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let src = write(dir.path(), "m.safetensors", Format::Safetensors);
    let (port, _seen) = serve(std::fs::read(&src).unwrap());
    let url = format!(
        "http://127.0.0.1:{port}/m.safetensors?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIASECRETCRED&X-Amz-Signature=deadbeefsecretsig&X-Amz-Security-Token=sessionsecret"
    );
    let out = dir.path().join("out.safetensors");
    let runs: Vec<Vec<&dyn AsRef<std::ffi::OsStr>>> = vec![
        vec![&"inspect", &url],
        vec![&"inspect", &url, &"--json"],
        vec![&"verify", &url],
        vec![&"verify", &url, &"--json"],
        vec![&"id", &url],
        vec![&"id", &url, &"--json"],
        vec![&"stats", &url],
        vec![&"stats", &url, &"--json"],
        vec![&"convert", &url, &out],
        vec![&"diff", &url, &src],
        vec![&"diff", &url, &src, &"--json"],
    ];
    for args in runs {
        let o = run(&args);
        let t = text(&o);
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        assert!(o.status.code() == Some(0), "{shown:?}: {t}");
        for secret in ["AKIASECRETCRED", "deadbeefsecretsig", "sessionsecret"] {
            assert!(!t.contains(secret), "{shown:?} printed {secret}: {t}");
        }
        let names_url = ["inspect", "verify", "id", "convert"].contains(&shown[0].as_str())
            || shown.contains(&"--json".to_string());
        if names_url {
            assert!(t.contains("<redacted>"), "{shown:?}: {t}");
        }
    }
    // An error names the URL redacted too.
    let bad = url.replace("m.safetensors", "missing.safetensors");
    let o = run(&[&"inspect", &bad]);
    assert_ne!(o.status.code(), Some(0));
    assert!(!text(&o).contains("deadbeefsecretsig"), "{}", text(&o));
}

/// `wtxt finalize` writes the WSUM of a streamed snapshot whose WSUM is gone, signed
/// with the key given: `verify --public-key` then passes; a second run refuses to
/// replace the WSUM it wrote.
#[test]
fn wtxt_finalize_writes_a_signed_wsum_verify_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let src = write(dir.path(), "m.safetensors", Format::Safetensors);
    let k = keygen(dir.path(), "signer", &[]);
    let s = dir.path().join("s.wtxt");
    let o = run(&[&"convert", &src, &s, &"--streaming", &"--drop-metadata"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let wsum = dir.path().join("s.wtxt.wsum");
    std::fs::remove_file(&wsum).unwrap();
    let o = run(&[&"verify", &s]);
    assert_ne!(o.status.code(), Some(0), "unfinalized: {}", text(&o));

    let o = run(&[&"wtxt", &"finalize", &s, &"--sign-key", &k]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("finalized") && wsum.exists(),
        "{}",
        text(&o)
    );
    let o = run(&[&"verify", &s, &"--public-key", &pub_of(&k)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("signature"), "{}", text(&o));

    let before = std::fs::read(&wsum).unwrap();
    let o = run(&[&"wtxt", &"finalize", &s]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("exists"), "{}", text(&o));
    assert_eq!(std::fs::read(&wsum).unwrap(), before);
}

/// Streaming WTXT to a pipe: the snapshot on standard output, its WSUM to the file
/// `--wsum` names (written atomically once the snapshot is out); the pair verifies.
/// Without `--wsum` it is refused before anything is written.
#[test]
fn streaming_wtxt_goes_to_a_pipe_with_its_wsum_named() {
    let dir = tempfile::tempdir().unwrap();
    let src = write(dir.path(), "m.safetensors", Format::Safetensors);
    let s = dir.path().join("s.wtxt");
    let wsum = dir.path().join("s.wtxt.wsum");
    let base = ["-o", "-", "--to", "wtxt", "--streaming", "--drop-metadata"];
    let o = tessera()
        .arg("convert")
        .arg(&src)
        .args(base)
        .stdout(std::fs::File::create(&s).unwrap())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--wsum"), "{}", text(&o));
    assert_eq!(std::fs::metadata(&s).unwrap().len(), 0);

    let o = tessera()
        .arg("convert")
        .arg(&src)
        .args(base)
        .arg("--wsum")
        .arg(&wsum)
        .stdout(std::fs::File::create(&s).unwrap())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let snap = std::fs::read_to_string(&s).unwrap();
    assert!(
        snap.lines().nth(3).unwrap().starts_with("root_pending"),
        "{snap}"
    );
    assert!(std::fs::read_to_string(&wsum)
        .unwrap()
        .starts_with("WSUM 1 "));
    let o = run(&[&"verify", &s]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Without streaming there is no WSUM to put anywhere: refused.
    let o = run(&[
        &"convert",
        &src,
        &dir.path().join("p.wtxt"),
        &"--wsum",
        &wsum,
        &"--drop-metadata",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("only with streaming"), "{}", text(&o));
}

/// `convert … --age-recipient R` writes the snapshot encrypted (nothing in the clear on
/// disk); `inspect --identity` reads it; `--age-passphrase-file` reads the passphrase
/// from a file and never prints it.
#[test]
fn convert_encrypts_wtxt_as_it_writes() {
    let dir = tempfile::tempdir().unwrap();
    let src = write(dir.path(), "m.safetensors", Format::Safetensors);
    let (identity, recipient) = tessera::formats::wtxt::crypt::generate_identity();
    let idf = dir.path().join("id.txt");
    std::fs::write(&idf, format!("{identity}\n")).unwrap();
    let out = dir.path().join("m.wtxt.age");
    let o = run(&[
        &"convert",
        &src,
        &out,
        &"--to",
        &"wtxt",
        &"--drop-metadata",
        &"--age-recipient",
        &recipient,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let data = std::fs::read(&out).unwrap();
    assert!(data.starts_with(b"-----BEGIN AGE ENCRYPTED FILE-----"));
    let o = run(&[&"inspect", &out, &"--identity", &idf]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("2 tensors"), "{}", text(&o));
    let o = run(&[&"inspect", &out]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));

    let pf = dir.path().join("pass.txt");
    std::fs::write(&pf, "very secret words\n").unwrap();
    let out2 = dir.path().join("p.wtxt.age");
    let o = run(&[
        &"convert",
        &src,
        &out2,
        &"--to",
        &"wtxt",
        &"--drop-metadata",
        &"--age-passphrase-file",
        &pf,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!text(&o).contains("very secret"), "{}", text(&o));
    let o = run(&[&"verify", &out2, &"--passphrase-file", &pf]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}
