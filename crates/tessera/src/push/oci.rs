//! The OCI target: a generation as an OCI artifact (image manifest, distribution spec
//! v1.1), pushed to any registry (GHCR, Docker Hub, `distribution`, zot, Harbor).
//!
//! Media types (ours):
//! - manifest `artifactType`: `application/vnd.tessera.snapshot.v1+json`;
//! - config: the empty descriptor `application/vnd.oci.empty.v1+json` (`{}`), as the
//!   spec asks of artifacts;
//! - one layer per file, in the artifact's order: `application/vnd.tessera.snapshot.file.v1`
//!   followed by `.EXT` for a file with an extension (lower-case letters and digits:
//!   `….v1.wtxt`, `….v1.safetensors`), each with the annotation
//!   `org.opencontainers.image.title` = the file name;
//! - manifest annotations: `org.tessera.snapshot.generation`, `.step` (when known),
//!   `.digest` (the identity digest), `.format`, and the artifact's own annotations
//!   under `org.tessera.snapshot.annotation.NAME`.
//!
//! Protocol: a blob the registry has (`HEAD /v2/NAME/blobs/DIGEST`) is not sent again;
//! others go by `POST /v2/NAME/blobs/uploads/` then one `PUT …?digest=` (up to
//! `PushOptions::oci_chunk`, 16 MiB) or `PATCH`es of that size and a closing `PUT`; then the manifest, by
//! `PUT /v2/NAME/manifests/gen-000000N`, last, and the moving tag (`latest` or the
//! URL's) when the generation is the newest there. A target down, a 500, a refused
//! credential leave no tag behind. HTTP for `localhost`, `127.*` and `[::1]`, HTTPS
//! otherwise.
//!
//! Auth: on a `401` the `WWW-Authenticate` challenge is answered — `Bearer` by a token
//! from its `realm` (`service`, `scope=repository:NAME:pull,push`; basic credentials
//! sent to it when there are any, anonymous otherwise; the realm must be HTTPS unless on
//! a loopback host), `Basic` by the credentials — once per client. Credentials:
//! [`PushOptions`]'s, else `TESSERA_OCI_USERNAME`/`TESSERA_OCI_PASSWORD`, else the
//! registry's `auths` entry in docker's `config.json` (`$DOCKER_CONFIG`, else
//! `~/.docker`; credential helpers are not run). Never shown.
//!
//! What a hostile registry cannot do: redirects are never followed off the registry's
//! origin (scheme, host and port), and an upload `Location` elsewhere is refused; every
//! JSON answer is read up to 4 MiB; a fetched blob is checked against its descriptor's
//! size and SHA-256 before it is renamed into place; a layer's title must be a plain
//! file name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use base64::Engine as _;
use serde_json::{json, Value};

use crate::error::{Error, ErrorKind, Result};

use super::http::{block, body_limited, client, file_body, send_error, status_error, stream_into};
use super::{
    generation_name, parse_generation_name, same_digest, sha256_file, Artifact, PushOptions,
    PushReceipt, Target, MAX_JSON,
};

/// The manifest's `artifactType`.
pub const ARTIFACT_TYPE: &str = "application/vnd.tessera.snapshot.v1+json";
/// A layer's media type, before its `.EXT`.
pub const LAYER_TYPE: &str = "application/vnd.tessera.snapshot.file.v1";
const MANIFEST_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
const EMPTY_TYPE: &str = "application/vnd.oci.empty.v1+json";
const EMPTY_DIGEST: &str =
    "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a";
const TITLE: &str = "org.opencontainers.image.title";
const ANN: &str = "org.tessera.snapshot";

struct Registry<'a> {
    t: &'a Target,
    origin: String,
    repository: String,
    client: reqwest::Client,
    auth: Mutex<Option<String>>,
    creds: Option<(String, String)>,
    chunk: u64,
}

fn is_loopback(host: &str) -> bool {
    let h = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.split(':').next().unwrap_or(""),
    };
    h == "localhost" || h.starts_with("127.") || h == "::1"
}

/// `scheme://host[:port]` of an absolute URL.
fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let host = rest.split(['/', '?', '#']).next()?;
    if host.is_empty() || host.contains('@') {
        return None;
    }
    let host = host.to_ascii_lowercase();
    let host = match scheme.to_ascii_lowercase().as_str() {
        "http" => host.strip_suffix(":80").unwrap_or(&host).to_string(),
        "https" => host.strip_suffix(":443").unwrap_or(&host).to_string(),
        _ => return None,
    };
    Some(format!("{}://{host}", scheme.to_ascii_lowercase()))
}

fn credentials(host: &str, opts: &PushOptions) -> Option<(String, String)> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if let (Some(u), Some(p)) = (
        opts.oci_username
            .clone()
            .or_else(|| env("TESSERA_OCI_USERNAME")),
        opts.oci_password
            .clone()
            .or_else(|| env("TESSERA_OCI_PASSWORD")),
    ) {
        return Some((u, p));
    }
    let dir = env("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".docker")))?;
    let text = std::fs::read(dir.join("config.json")).ok()?;
    if text.len() as u64 > MAX_JSON {
        return None;
    }
    let v: Value = serde_json::from_slice(&text).ok()?;
    let auths = v.get("auths")?.as_object()?;
    let entry = auths.get(host).or_else(|| {
        auths
            .iter()
            .find(|(k, _)| {
                k.trim_start_matches("https://")
                    .trim_start_matches("http://")
                    .trim_end_matches('/')
                    == host
            })
            .map(|(_, v)| v)
    })?;
    let auth = entry.get("auth")?.as_str()?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth)
        .ok()?;
    let s = String::from_utf8(decoded).ok()?;
    let (u, p) = s.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

/// `key="value"` pairs of a `WWW-Authenticate` header after its scheme.
fn challenge_params(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = s;
    while !rest.is_empty() {
        rest = rest.trim_start_matches([' ', ',']);
        let Some(eq) = rest.find('=') else { break };
        let key = rest[..eq].trim().to_ascii_lowercase();
        rest = &rest[eq + 1..];
        let value;
        if let Some(r) = rest.strip_prefix('"') {
            let end = r.find('"').unwrap_or(r.len());
            value = r[..end].to_string();
            rest = r.get(end + 1..).unwrap_or("");
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            value = rest[..end].trim().to_string();
            rest = &rest[end..];
        }
        out.insert(key, value);
    }
    out
}

impl<'a> Registry<'a> {
    fn new(t: &'a Target, opts: &PushOptions) -> Result<Registry<'a>> {
        let Target::Oci {
            host, repository, ..
        } = t
        else {
            unreachable!("an OCI target")
        };
        let scheme = if is_loopback(host) { "http" } else { "https" };
        Ok(Registry {
            t,
            origin: format!("{scheme}://{}", host.to_ascii_lowercase()),
            repository: repository.clone(),
            client: client(opts)?,
            auth: Mutex::new(None),
            creds: credentials(host, opts),
            chunk: opts.oci_chunk.clamp(1, 1 << 30),
        })
    }

    fn url(&self, rest: &str) -> String {
        format!("{}/v2/{}/{rest}", self.origin, self.repository)
    }

    /// A URL the registry gave (a `Location`): made absolute, and refused off the
    /// registry's origin.
    fn resolve(&self, loc: &str, what: &str) -> Result<String> {
        let abs = if loc.starts_with('/') {
            format!("{}{loc}", self.origin)
        } else {
            loc.to_string()
        };
        match origin_of(&abs) {
            Some(o) if o == self.origin => Ok(abs),
            _ => Err(Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "{what}: the registry sent us to {:?}, off its origin {}: refused",
                    super::redact(&abs),
                    self.origin
                ),
            )),
        }
    }

    /// Sends the request `build` makes, answering one auth challenge; a redirect is
    /// followed (up to 5) only within the registry's origin.
    async fn send(
        &self,
        what: &str,
        build: &dyn Fn(&reqwest::Client, &str) -> reqwest::RequestBuilder,
        url: &str,
    ) -> Result<reqwest::Response> {
        let mut url = url.to_string();
        let mut challenged = false;
        let mut redirects = 0;
        loop {
            let mut req = build(&self.client, &url);
            if let Some(a) = self
                .auth
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
            {
                req = req.header(reqwest::header::AUTHORIZATION, a);
            }
            let resp = req.send().await.map_err(|e| send_error(what, e))?;
            let status = resp.status().as_u16();
            if status == 401 && !challenged {
                challenged = true;
                let header = resp
                    .headers()
                    .get(reqwest::header::WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                if self.answer(&header, what).await? {
                    continue;
                }
                return Err(self.denied(what, resp).await);
            }
            if resp.status().is_redirection() && !matches!(status, 304) {
                redirects += 1;
                let loc = resp
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                if redirects > 5 {
                    return Err(Error::new(
                        ErrorKind::Io,
                        format!("{what}: more than 5 redirects"),
                    ));
                }
                url = self.resolve(&loc, what)?;
                continue;
            }
            if status == 401 || status == 403 {
                return Err(self.denied(what, resp).await);
            }
            return Ok(resp);
        }
    }

    /// A refusal (401, 403), saying when no credentials were found.
    async fn denied(&self, what: &str, resp: reqwest::Response) -> Error {
        let e = status_error(what, resp).await;
        if self.creds.is_some() {
            return e;
        }
        Error::new(
            e.kind(),
            format!(
                "{} (no credentials: set TESSERA_OCI_USERNAME and TESSERA_OCI_PASSWORD, or docker login)",
                e.message()
            ),
        )
    }

    /// Answers a `WWW-Authenticate` challenge; `false` when it cannot be answered.
    async fn answer(&self, header: &str, what: &str) -> Result<bool> {
        let (scheme, params) = header.split_once(' ').unwrap_or((header, ""));
        let basic = |(u, p): &(String, String)| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            )
        };
        if scheme.eq_ignore_ascii_case("basic") {
            return Ok(match &self.creds {
                Some(c) => {
                    *self
                        .auth
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(basic(c));
                    true
                }
                None => false,
            });
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Ok(false);
        }
        let p = challenge_params(params);
        let Some(realm) = p.get("realm") else {
            return Ok(false);
        };
        let realm_ok = match origin_of(realm) {
            Some(o) => o.starts_with("https://") || is_loopback(o.trim_start_matches("http://")),
            None => false,
        };
        if !realm_ok {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "{what}: the registry's token realm {:?} is not an HTTPS URL: refused",
                    super::redact(realm)
                ),
            ));
        }
        let scope = p
            .get("scope")
            .cloned()
            .unwrap_or_else(|| format!("repository:{}:pull,push", self.repository));
        let mut q: Vec<(&str, String)> = vec![("scope", scope)];
        if let Some(s) = p.get("service") {
            q.push(("service", s.clone()));
        }
        let query: Vec<String> = q
            .iter()
            .map(|(k, v)| format!("{k}={}", url_encode(v)))
            .collect();
        let sep = if realm.contains('?') { '&' } else { '?' };
        let mut req = self.client.get(format!("{realm}{sep}{}", query.join("&")));
        if let Some(c) = &self.creds {
            req = req.header(reqwest::header::AUTHORIZATION, basic(c));
        }
        let twhat = format!("{what}: getting a token from {}", super::redact(realm));
        let resp = req.send().await.map_err(|e| send_error(&twhat, e))?;
        if !resp.status().is_success() {
            return Err(status_error(&twhat, resp).await);
        }
        let body = body_limited(resp, MAX_JSON, &twhat).await?;
        let v: Value = serde_json::from_slice(&body)
            .map_err(|e| Error::malformed(format!("{twhat}: not JSON: {e}")))?;
        let token = v
            .get("token")
            .or_else(|| v.get("access_token"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic()))
            .ok_or_else(|| Error::malformed(format!("{twhat}: the answer holds no token")))?;
        *self
            .auth
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(format!("Bearer {token}"));
        Ok(true)
    }

    async fn json(&self, what: &str, resp: reqwest::Response) -> Result<Value> {
        let body = body_limited(resp, MAX_JSON, what).await?;
        serde_json::from_slice(&body).map_err(|e| {
            Error::malformed(format!("{what}: the registry's answer is not JSON: {e}"))
        })
    }

    /// The manifest tagged `reference`, if any.
    async fn manifest(&self, reference: &str) -> Result<Option<Value>> {
        let what = format!("GET {} manifest {reference}", self.t.display());
        let resp = self
            .send(
                &what,
                &|c, u| c.get(u).header(reqwest::header::ACCEPT, MANIFEST_TYPE),
                &self.url(&format!("manifests/{reference}")),
            )
            .await?;
        match resp.status().as_u16() {
            200 => Ok(Some(self.json(&what, resp).await?)),
            404 => Ok(None),
            _ => Err(status_error(&what, resp).await),
        }
    }

    async fn has_blob(&self, digest: &str) -> Result<bool> {
        let what = format!("HEAD {} blob {digest}", self.t.display());
        let resp = self
            .send(
                &what,
                &|c, u| c.head(u),
                &self.url(&format!("blobs/{digest}")),
            )
            .await?;
        match resp.status().as_u16() {
            200 => Ok(true),
            404 => Ok(false),
            _ => Err(status_error(&what, resp).await),
        }
    }

    /// Uploads a blob: `bytes`, or the file at `path` (of `size` bytes).
    async fn upload(&self, digest: &str, size: u64, data: Blob<'_>) -> Result<()> {
        let what = format!("uploading blob {digest} to {}", self.t.display());
        let resp = self
            .send(&what, &|c, u| c.post(u), &self.url("blobs/uploads/"))
            .await?;
        if resp.status().as_u16() != 202 {
            return Err(status_error(&what, resp).await);
        }
        let mut loc = self.location(&resp, &what)?;
        if size > self.chunk {
            let Blob::File(path) = data else {
                unreachable!("large blobs are files")
            };
            let mut at = 0u64;
            while at < size {
                let n = (size - at).min(self.chunk);
                let chunk = read_range(path, at, n)?;
                let range = format!("{at}-{}", at + n - 1);
                let resp = self
                    .send(
                        &what,
                        &|c, u| {
                            c.patch(u)
                                .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
                                .header(reqwest::header::CONTENT_RANGE, range.clone())
                                .header(reqwest::header::CONTENT_LENGTH, n)
                                .body(chunk.clone())
                        },
                        &loc,
                    )
                    .await?;
                if resp.status().as_u16() != 202 {
                    return Err(status_error(&what, resp).await);
                }
                loc = self.location(&resp, &what)?;
                at += n;
            }
            let done = with_digest(&loc, digest);
            let resp = self
                .send(
                    &what,
                    &|c, u| c.put(u).header(reqwest::header::CONTENT_LENGTH, 0),
                    &done,
                )
                .await?;
            if resp.status().as_u16() != 201 {
                return Err(status_error(&what, resp).await);
            }
            return Ok(());
        }
        let done = with_digest(&loc, digest);
        let resp = self
            .send(
                &what,
                &|c, u| {
                    let body = match &data {
                        Blob::Bytes(b) => reqwest::Body::from(b.to_vec()),
                        Blob::File(p) => match file_body(p) {
                            Ok(b) => b,
                            Err(_) => reqwest::Body::from(Vec::new()),
                        },
                    };
                    c.put(u)
                        .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
                        .header(reqwest::header::CONTENT_LENGTH, size)
                        .body(body)
                },
                &done,
            )
            .await?;
        if resp.status().as_u16() != 201 {
            return Err(status_error(&what, resp).await);
        }
        Ok(())
    }

    fn location(&self, resp: &reqwest::Response, what: &str) -> Result<String> {
        let loc = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                Error::malformed(format!("{what}: the registry's answer has no Location"))
            })?;
        self.resolve(loc, what)
    }

    async fn put_manifest(&self, reference: &str, body: &[u8]) -> Result<String> {
        let what = format!("PUT {} manifest {reference}", self.t.display());
        let resp = self
            .send(
                &what,
                &|c, u| {
                    c.put(u)
                        .header(reqwest::header::CONTENT_TYPE, MANIFEST_TYPE)
                        .body(body.to_vec())
                },
                &self.url(&format!("manifests/{reference}")),
            )
            .await?;
        if resp.status().as_u16() != 201 {
            return Err(status_error(&what, resp).await);
        }
        Ok(resp
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string())
    }

    async fn tags(&self) -> Result<Vec<String>> {
        let what = format!("GET {} tags", self.t.display());
        let mut url = self.url("tags/list?n=1000");
        let mut out = Vec::new();
        for _ in 0..1000 {
            let resp = self.send(&what, &|c, u| c.get(u), &url).await?;
            match resp.status().as_u16() {
                200 => {}
                404 => return Ok(out),
                _ => return Err(status_error(&what, resp).await),
            }
            let next = resp
                .headers()
                .get(reqwest::header::LINK)
                .and_then(|v| v.to_str().ok())
                .and_then(|l| {
                    let l = l.trim();
                    (l.starts_with('<') && l.contains("rel=\"next\""))
                        .then(|| l[1..l.find('>').unwrap_or(1)].to_string())
                });
            let v = self.json(&what, resp).await?;
            match v.get("tags") {
                Some(Value::Array(a)) => {
                    out.extend(a.iter().filter_map(|t| t.as_str().map(String::from)))
                }
                Some(Value::Null) | None => {}
                Some(_) => return Err(Error::malformed(format!("{what}: `tags` is not a list"))),
            }
            match next {
                Some(n) if !n.is_empty() => url = self.resolve(&n, &what)?,
                _ => return Ok(out),
            }
        }
        Err(Error::limit(format!(
            "{what}: more than 1000 pages of tags"
        )))
    }
}

enum Blob<'a> {
    Bytes(&'a [u8]),
    File(&'a Path),
}

/// Percent-encodes all but unreserved characters.
fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn with_digest(loc: &str, digest: &str) -> String {
    let sep = if loc.contains('?') { '&' } else { '?' };
    format!("{loc}{sep}digest={}", digest.replace(':', "%3A"))
}

fn read_range(path: &Path, at: u64, n: u64) -> Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path)
        .map_err(|e| Error::from(e).at_subject(path.display().to_string()))?;
    f.seek(SeekFrom::Start(at))?;
    let mut buf = vec![0u8; n as usize];
    f.read_exact(&mut buf)
        .map_err(|e| Error::from(e).at_subject(path.display().to_string()))?;
    Ok(buf)
}

fn layer_type(name: &str) -> String {
    match name.rsplit_once('.') {
        Some((stem, ext))
            if !stem.is_empty()
                && !ext.is_empty()
                && ext.len() <= 32
                && ext.bytes().all(|b| b.is_ascii_alphanumeric()) =>
        {
            format!("{LAYER_TYPE}.{}", ext.to_ascii_lowercase())
        }
        _ => LAYER_TYPE.to_string(),
    }
}

fn annotation<'v>(manifest: &'v Value, key: &str) -> Option<&'v str> {
    manifest
        .get("annotations")?
        .get(format!("{ANN}.{key}"))?
        .as_str()
}

pub(crate) fn push(t: &Target, a: &Artifact, opts: &PushOptions) -> Result<PushReceipt> {
    let Target::Oci { tag, .. } = t else {
        unreachable!("an OCI target")
    };
    let reg = Registry::new(t, opts)?;
    let gen = generation_name(a.generation);
    block(async {
        let newest = |gens: &[u64]| gens.iter().all(|g| *g <= a.generation);
        if let Some(m) = reg.manifest(&gen).await? {
            let found = annotation(&m, "digest").unwrap_or("");
            same_digest(found, a, &format!("{} tag {gen}", t.display()))?;
            return Ok(PushReceipt {
                target: t.display(),
                generation: a.generation,
                already_present: true,
                location: format!("{}@{gen}", t.display()),
                bytes_sent: 0,
            });
        }
        let mut layers = Vec::new();
        let mut sent = 0;
        for (name, path) in &a.files {
            let (size, hex) = sha256_file(path)?;
            let digest = format!("sha256:{hex}");
            if !reg.has_blob(&digest).await? {
                reg.upload(&digest, size, Blob::File(path)).await?;
                sent += size;
            }
            layers.push(json!({
                "mediaType": layer_type(name),
                "digest": digest,
                "size": size,
                "annotations": { TITLE: name },
            }));
        }
        if !reg.has_blob(EMPTY_DIGEST).await? {
            reg.upload(EMPTY_DIGEST, 2, Blob::Bytes(b"{}")).await?;
        }
        let mut ann = serde_json::Map::new();
        ann.insert(format!("{ANN}.generation"), json!(a.generation.to_string()));
        if let Some(s) = a.step {
            ann.insert(format!("{ANN}.step"), json!(s.to_string()));
        }
        ann.insert(format!("{ANN}.digest"), json!(a.digest));
        ann.insert(format!("{ANN}.format"), json!(a.format));
        for (k, v) in &a.annotations {
            ann.insert(format!("{ANN}.annotation.{k}"), json!(v));
        }
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "artifactType": ARTIFACT_TYPE,
            "config": { "mediaType": EMPTY_TYPE, "digest": EMPTY_DIGEST, "size": 2, "data": "e30=" },
            "layers": layers,
            "annotations": ann,
        });
        let body = serde_json::to_vec(&manifest)
            .map_err(|e| Error::invalid_input(format!("the OCI manifest: {e}")))?;
        let digest = reg.put_manifest(&gen, &body).await?;
        let gens: Vec<u64> = reg
            .tags()
            .await?
            .iter()
            .filter_map(|t| parse_generation_name(t))
            .collect();
        if newest(&gens) {
            reg.put_manifest(tag, &body).await?;
        }
        Ok(PushReceipt {
            target: t.display(),
            generation: a.generation,
            already_present: false,
            location: if digest.is_empty() {
                format!("{}@{gen}", t.display())
            } else {
                format!("{}@{digest}", t.display())
            },
            bytes_sent: sent,
        })
    })?
}

pub(crate) fn list(t: &Target, opts: &PushOptions) -> Result<Vec<u64>> {
    let reg = Registry::new(t, opts)?;
    let tags = block(reg.tags())??;
    Ok(tags
        .iter()
        .filter_map(|t| parse_generation_name(t))
        .collect())
}

pub(crate) fn fetch(
    t: &Target,
    generation: u64,
    dir: &Path,
    opts: &PushOptions,
) -> Result<Vec<PathBuf>> {
    let reg = Registry::new(t, opts)?;
    let gen = generation_name(generation);
    let place = format!("{} manifest {gen}", t.display());
    let m = block(reg.manifest(&gen))??.ok_or_else(|| {
        Error::not_found(format!(
            "{}: generation {generation} is not there (no tag {gen})",
            t.display()
        ))
    })?;
    if m.get("artifactType").and_then(Value::as_str) != Some(ARTIFACT_TYPE) {
        return Err(Error::malformed(format!(
            "{place}: not a tessera snapshot (artifactType is not {ARTIFACT_TYPE})"
        )));
    }
    if annotation(&m, "generation") != Some(generation.to_string().as_str()) {
        return Err(Error::integrity(format!(
            "{place}: the manifest does not say generation {generation}"
        )));
    }
    let layers = m
        .get("layers")
        .and_then(Value::as_array)
        .ok_or_else(|| Error::malformed(format!("{place}: no layers")))?;
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (i, l) in layers.iter().enumerate() {
        let bad = |why: &str| Error::malformed(format!("{place}: layer {i}: {why}"));
        let name = l
            .get("annotations")
            .and_then(|a| a.get(TITLE))
            .and_then(Value::as_str)
            .ok_or_else(|| bad("no title"))?;
        super::check_name(name).map_err(|e| e.at_subject(place.clone()))?;
        if !seen.insert(name.to_string()) {
            return Err(bad("the title repeats another layer's"));
        }
        let size = l
            .get("size")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad("no size"))?;
        let digest = l
            .get("digest")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("no digest"))?;
        let hex = digest
            .strip_prefix("sha256:")
            .filter(|h| super::is_sha256_hex(h))
            .ok_or_else(|| bad("the digest is not sha256:HEX"))?;
        let what = format!("GET {} blob {digest} ({name})", t.display());
        let path = super::write_checked(dir, name, size, hex, &what, |sink| {
            let mut resp = block(async {
                let resp = reg
                    .send(
                        &what,
                        &|c, u| c.get(u),
                        &reg.url(&format!("blobs/{digest}")),
                    )
                    .await?;
                if resp.status().as_u16() == 200 {
                    Ok(resp)
                } else {
                    Err(status_error(&what, resp).await)
                }
            })??;
            stream_into(&mut resp, &what, sink)
        })?;
        out.push(path);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_params_parse() {
        let p = challenge_params(
            r#"realm="https://ghcr.io/token",service="ghcr.io",scope="repository:a/b:pull,push""#,
        );
        assert_eq!(p["realm"], "https://ghcr.io/token");
        assert_eq!(p["service"], "ghcr.io");
        assert_eq!(p["scope"], "repository:a/b:pull,push");
    }

    #[test]
    fn origins_compare_scheme_host_port() {
        assert_eq!(
            origin_of("http://127.0.0.1:5000/v2/x").unwrap(),
            "http://127.0.0.1:5000"
        );
        assert_eq!(
            origin_of("https://GHCR.io:443/v2").unwrap(),
            "https://ghcr.io"
        );
        assert_eq!(origin_of("ftp://x/"), None);
        assert_eq!(origin_of("http://u@evil/"), None);
        assert!(
            is_loopback("127.0.0.1:5000") && is_loopback("localhost") && is_loopback("[::1]:5000")
        );
        assert!(!is_loopback("ghcr.io"));
    }

    #[test]
    fn layer_types_name_the_extension() {
        assert_eq!(
            layer_type("model.wtxt"),
            "application/vnd.tessera.snapshot.file.v1.wtxt"
        );
        assert_eq!(layer_type("README"), LAYER_TYPE);
        assert_eq!(layer_type("x.a-b"), LAYER_TYPE);
    }
}
