//! The object targets: S3 (through `remote`'s multipart upload) and HTTP `PUT`.
//!
//! Layout under the target's prefix: `gen-000000N/NAME` for each file, then
//! `gen-000000N/tessera-snapshot.json` (the manifest: names, sizes, SHA-256, digest,
//! step, format) written last, so a generation is there exactly when its manifest is.
//! An HTTP target also keeps `tessera-snapshots.json` (`{"generations": [..]}`), the
//! list an HTTP server cannot give, rewritten after each manifest.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::remote::{Location, RemoteSource};
use crate::source::ByteSource;

use super::http::{block, body_limited, client, file_body, send_error, status_error, stream_into};
use super::{
    generation_name, parse_generation_name, same_digest, Artifact, Manifest, PushOptions,
    PushReceipt, Target, MANIFEST, MAX_JSON,
};

/// The HTTP target's list of generations.
const INDEX: &str = "tessera-snapshots.json";
/// Bound on the generations an S3 listing may hold.
const MAX_GENERATIONS: u64 = 1_000_000;

fn s3_loc(t: &Target, rel: &str) -> Location {
    match t {
        Target::S3 { bucket, prefix } => Location::S3 {
            bucket: bucket.clone(),
            key: format!("{prefix}{rel}"),
        },
        _ => unreachable!("an S3 target"),
    }
}

fn http_url(t: &Target, rel: &str) -> String {
    match t {
        Target::Http(base) => format!("{base}{rel}"),
        _ => unreachable!("an HTTP target"),
    }
}

fn shown(t: &Target, rel: &str) -> String {
    format!("{}{rel}", t.display())
}

/// The object at `rel`, at most `max` bytes; `None` when absent.
fn get_small(t: &Target, rel: &str, max: u64, opts: &PushOptions) -> Result<Option<Vec<u8>>> {
    let place = shown(t, rel);
    match t {
        Target::S3 { .. } => {
            let loc = s3_loc(t, rel);
            if !crate::remote::exists(&loc, &opts.remote)? {
                return Ok(None);
            }
            let src = RemoteSource::open(&loc, &opts.remote)?;
            if src.len() > max {
                return Err(Error::limit(format!(
                    "{place}: {} bytes, more than the {max} allowed",
                    src.len()
                )));
            }
            Ok(Some(src.read_at(0, src.len())?.into_owned()))
        }
        _ => {
            let c = client(opts)?;
            let what = format!("GET {place}");
            block(async {
                let resp = with_token(c.get(http_url(t, rel)), opts)
                    .send()
                    .await
                    .map_err(|e| send_error(&what, e))?;
                match resp.status().as_u16() {
                    200 => Ok(Some(body_limited(resp, max, &what).await?)),
                    404 | 410 => Ok(None),
                    _ => Err(status_error(&what, resp).await),
                }
            })?
        }
    }
}

fn with_token(r: reqwest::RequestBuilder, opts: &PushOptions) -> reqwest::RequestBuilder {
    match &opts.remote.bearer_token {
        Some(tok) => r.bearer_auth(tok),
        None => r,
    }
}

/// Puts the local file `path` at `rel`; returns the bytes sent.
fn put_file(t: &Target, rel: &str, path: &Path, opts: &PushOptions) -> Result<u64> {
    match t {
        Target::S3 { .. } => crate::remote::upload_file(path, &s3_loc(t, rel), &opts.remote),
        _ => {
            let len = std::fs::metadata(path)
                .map_err(|e| Error::from(e).at_subject(path.display().to_string()))?
                .len();
            let body = file_body(path)?;
            put_body(t, rel, body, len, opts)?;
            Ok(len)
        }
    }
}

fn put_bytes(t: &Target, rel: &str, bytes: Vec<u8>, opts: &PushOptions) -> Result<()> {
    match t {
        Target::S3 { .. } => {
            let mut tmp = tempfile::NamedTempFile::new()?;
            std::io::Write::write_all(&mut tmp, &bytes)?;
            crate::remote::upload_file(tmp.path(), &s3_loc(t, rel), &opts.remote)?;
            Ok(())
        }
        _ => {
            let len = bytes.len() as u64;
            put_body(t, rel, reqwest::Body::from(bytes), len, opts)
        }
    }
}

fn put_body(
    t: &Target,
    rel: &str,
    body: reqwest::Body,
    len: u64,
    opts: &PushOptions,
) -> Result<()> {
    let c = client(opts)?;
    let what = format!("PUT {}", shown(t, rel));
    block(async {
        let resp = with_token(c.put(http_url(t, rel)), opts)
            .header(reqwest::header::CONTENT_LENGTH, len)
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .body(body)
            .send()
            .await
            .map_err(|e| send_error(&what, e))?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(status_error(&what, resp).await)
        }
    })?
}

pub(crate) fn push(t: &Target, a: &Artifact, opts: &PushOptions) -> Result<PushReceipt> {
    let dir = generation_name(a.generation);
    let manifest_rel = format!("{dir}/{MANIFEST}");
    let place = shown(t, &manifest_rel);
    let receipt = |already: bool, sent: u64| PushReceipt {
        target: t.display(),
        generation: a.generation,
        already_present: already,
        location: place.clone(),
        bytes_sent: sent,
    };
    if let Some(bytes) = get_small(t, &manifest_rel, MAX_JSON, opts)? {
        let m = Manifest::parse(&bytes, &place, a.generation)?;
        same_digest(&m.digest, a, &place)?;
        if matches!(t, Target::Http(_)) {
            add_to_index(t, a.generation, opts)?;
        }
        return Ok(receipt(true, 0));
    }
    let manifest = Manifest::of(a)?;
    let mut sent = 0;
    for (name, path) in &a.files {
        sent += put_file(t, &format!("{dir}/{name}"), path, opts)?;
    }
    put_bytes(t, &manifest_rel, manifest.to_json()?, opts)?;
    if matches!(t, Target::Http(_)) {
        add_to_index(t, a.generation, opts)?;
    }
    Ok(receipt(false, sent))
}

#[derive(serde::Serialize, serde::Deserialize, Default)]
struct Index {
    generations: Vec<u64>,
}

fn read_index(t: &Target, opts: &PushOptions) -> Result<Index> {
    match get_small(t, INDEX, MAX_JSON, opts)? {
        None => Ok(Index::default()),
        Some(b) => serde_json::from_slice(&b).map_err(|e| {
            Error::malformed(format!("{}: not a generation list: {e}", shown(t, INDEX)))
        }),
    }
}

fn add_to_index(t: &Target, generation: u64, opts: &PushOptions) -> Result<()> {
    let mut idx = read_index(t, opts)?;
    if idx.generations.contains(&generation) {
        return Ok(());
    }
    idx.generations.push(generation);
    idx.generations.sort_unstable();
    let mut json = serde_json::to_vec(&idx)
        .map_err(|e| Error::invalid_input(format!("the generation list: {e}")))?;
    json.push(b'\n');
    put_bytes(t, INDEX, json, opts)
}

pub(crate) fn list(t: &Target, opts: &PushOptions) -> Result<Vec<u64>> {
    match t {
        Target::S3 { .. } => {
            let root = s3_loc(t, "");
            let dirs = crate::remote::list_subdirs(&root, &opts.remote, MAX_GENERATIONS)?;
            let mut out = Vec::new();
            for d in dirs {
                if let Some(g) = parse_generation_name(&d) {
                    // Only complete generations: the manifest is written last.
                    if crate::remote::exists(&s3_loc(t, &format!("{d}/{MANIFEST}")), &opts.remote)?
                    {
                        out.push(g);
                    }
                }
            }
            Ok(out)
        }
        _ => Ok(read_index(t, opts)?.generations),
    }
}

pub(crate) fn fetch(
    t: &Target,
    generation: u64,
    dir: &Path,
    opts: &PushOptions,
) -> Result<Vec<PathBuf>> {
    let gdir = generation_name(generation);
    let manifest_rel = format!("{gdir}/{MANIFEST}");
    let place = shown(t, &manifest_rel);
    let bytes = get_small(t, &manifest_rel, MAX_JSON, opts)?.ok_or_else(|| {
        Error::not_found(format!(
            "{place}: generation {generation} is not at the target"
        ))
    })?;
    let m = Manifest::parse(&bytes, &place, generation)?;
    let mut out = Vec::new();
    for f in &m.files {
        let rel = format!("{gdir}/{}", f.name);
        let fplace = shown(t, &rel);
        let path =
            super::write_checked(dir, &f.name, f.size, &f.sha256, &fplace, |sink| match t {
                Target::S3 { .. } => {
                    let src = RemoteSource::open(&s3_loc(t, &rel), &opts.remote)?;
                    if src.len() != f.size {
                        return Err(Error::integrity(format!(
                            "{fplace}: {} bytes, the manifest records {}",
                            src.len(),
                            f.size
                        )));
                    }
                    let mut at = 0;
                    while at < src.len() {
                        let n = (src.len() - at).min(8 << 20);
                        sink(&src.read_at(at, n)?)?;
                        at += n;
                    }
                    Ok(())
                }
                _ => {
                    let c = client(opts)?;
                    let what = format!("GET {fplace}");
                    let mut resp = block(async {
                        let resp = with_token(c.get(http_url(t, &rel)), opts)
                            .send()
                            .await
                            .map_err(|e| send_error(&what, e))?;
                        if resp.status().as_u16() == 200 {
                            Ok(resp)
                        } else {
                            Err(status_error(&what, resp).await)
                        }
                    })??;
                    stream_into(&mut resp, &what, sink)
                }
            })?;
        out.push(path);
    }
    Ok(out)
}
