//! Publishing one snapshot generation — a few files and their digest — to where a team
//! keeps its weights, and reading it back: the transport of the snapshot pipeline's
//! resend queue (and of `tessera push`). No format is known here: a generation is
//! named files plus a digest, a step and a format name given by the caller.
//!
//! Targets ([`Target::parse`]):
//! - `s3://bucket/prefix/` (feature `remote`): each file uploaded with
//!   [`crate::remote::upload_file`] (multipart, each object complete or absent) to
//!   `prefix/gen-000000N/NAME`, then the generation's manifest
//!   `prefix/gen-000000N/tessera-snapshot.json` last: a reader that sees the manifest
//!   sees every file. [`Target::list`] lists the `gen-*` prefixes whose manifest exists.
//! - `http(s)://host/dir/` (feature `remote`): the same layout by HTTP `PUT`
//!   (WebDAV-style servers: nginx's `dav_methods PUT`), manifest last, then the index
//!   `dir/tessera-snapshots.json` (the generations present: an HTTP server lists no
//!   directory) is rewritten.
//! - `git+file:///srv/weights.git`, `git+ssh://…`, `git+https://…` (the `git` program,
//!   and `git-lfs` when used): the files and the manifest committed at the top of the
//!   repository's default branch (`main` in an empty one), one commit per generation
//!   tagged `gen-000000N`, pushed with `--atomic` (branch and tag move together or not
//!   at all). A `.gitattributes` keeps `*.wtxt text eol=lf diff=wtxt`
//!   (docs/wtxt-git.md); when it routes files through Git LFS (`filter=lfs`), or
//!   [`PushOptions::lfs`] asks, the files go through LFS (`git lfs install --local`,
//!   one `filter=lfs` line per file extension). The clone lives in
//!   [`PushOptions::work_dir`] and is fetched again on each push.
//! - `oci://HOST[:PORT]/repo/name[:tag]` (feature `remote`): an OCI artifact
//!   (distribution spec v1.1, see `oci.rs` for the media types and annotations), tagged
//!   `gen-000000N` and the URL's tag (`latest` when none) when it is the newest.
//!
//! Each push is idempotent: a generation already at the target with the same digest is
//! a no-op that succeeds ([`PushReceipt::already_present`]); with another digest it is
//! an error (a generation is never overwritten). Errors say what failed where: the HTTP
//! status and the server's answer (escaped, cut to 300 characters), git's last stderr
//! lines. [`Target::fetch`] checks every file against the size and SHA-256 the
//! manifest records (the OCI descriptors' digests there) before it is renamed into
//! place.

#[cfg(feature = "remote")]
mod http;
#[cfg(feature = "remote")]
mod objects;
#[cfg(feature = "remote")]
mod oci;

mod git;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::remote::RemoteOptions;

/// The name of a generation's manifest, beside its files.
pub const MANIFEST: &str = "tessera-snapshot.json";

/// One generation to publish: its files (name at the target, local path) and what
/// identifies it.
#[derive(Debug, Clone, Default)]
pub struct Artifact {
    /// The generation number (the `gen-000000N` it lands under).
    pub generation: u64,
    /// The training step, when known.
    pub step: Option<u64>,
    /// The format's name (`wtxt`, `safetensors`, …), recorded as is.
    pub format: String,
    /// Name at the target (a plain file name) → the local file.
    pub files: Vec<(String, PathBuf)>,
    /// The generation's identity digest: what a second push compares.
    pub digest: String,
    /// More annotations, recorded in the manifest (and OCI annotations).
    pub annotations: BTreeMap<String, String>,
}

/// How targets are reached. Its `Debug` output never shows the OCI password.
#[derive(Clone)]
#[non_exhaustive]
pub struct PushOptions {
    /// S3 endpoint and HTTP bearer token (as for remote reads).
    pub remote: RemoteOptions,
    /// Push a Git repository's files through Git LFS even when its `.gitattributes`
    /// does not say so.
    pub lfs: bool,
    /// Where Git clones are kept between pushes (`DIR/git-<hash of the URL>`); when
    /// unset, the system's temporary directory.
    pub work_dir: Option<PathBuf>,
    /// The time one HTTP request (OCI, HTTP PUT) may take (default 120 s).
    pub timeout: Duration,
    /// OCI registry user name; when unset `TESSERA_OCI_USERNAME`, else docker's
    /// `config.json` (`$DOCKER_CONFIG` or `~/.docker`).
    pub oci_username: Option<String>,
    /// OCI registry password or token (never shown); when unset `TESSERA_OCI_PASSWORD`.
    pub oci_password: Option<String>,
    /// OCI blobs up to this size go in one `PUT`; larger ones in `PATCH` chunks of this
    /// size (default 16 MiB: what one request holds in memory).
    pub oci_chunk: u64,
}

impl std::fmt::Debug for PushOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushOptions")
            .field("remote", &self.remote)
            .field("lfs", &self.lfs)
            .field("work_dir", &self.work_dir)
            .field("timeout", &self.timeout)
            .field("oci_username", &self.oci_username)
            .field(
                "oci_password",
                &self.oci_password.as_ref().map(|_| "<redacted>"),
            )
            .field("oci_chunk", &self.oci_chunk)
            .finish()
    }
}

impl Default for PushOptions {
    fn default() -> Self {
        PushOptions {
            remote: RemoteOptions::default().cache(false),
            lfs: false,
            work_dir: None,
            timeout: Duration::from_secs(120),
            oci_username: None,
            oci_password: None,
            oci_chunk: 16 << 20,
        }
    }
}

crate::setters::setters!(PushOptions {
    /// Sets `remote`.
    remote: RemoteOptions,
    /// Sets `lfs`.
    lfs: bool,
    /// Sets `work_dir`.
    work_dir: Option<PathBuf>,
    /// Sets `timeout`.
    timeout: Duration,
    /// Sets `oci_username`.
    oci_username: Option<String>,
    /// Sets `oci_password`.
    oci_password: Option<String>,
    /// Sets `oci_chunk`.
    oci_chunk: u64,
});

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushReceipt {
    /// The target, as [`Target::display`] shows it.
    pub target: String,
    /// The generation pushed.
    pub generation: u64,
    /// The generation was there already with the same digest: nothing was sent.
    pub already_present: bool,
    /// Where it is: the manifest's URL, the commit, the OCI manifest's digest.
    pub location: String,
    /// File bytes sent (0 for files the target had).
    pub bytes_sent: u64,
}

/// Where generations are pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Target {
    /// `s3://bucket/prefix/`.
    S3 {
        /// The bucket.
        bucket: String,
        /// The key prefix, empty or ending with `/`.
        prefix: String,
    },
    /// `http(s)://host/dir/`, ending with `/`.
    Http(String),
    /// A Git repository: the URL `git` is given (`file:///…`, `ssh://…`, `https://…`).
    Git(String),
    /// An OCI registry repository.
    Oci {
        /// `host[:port]`.
        host: String,
        /// The repository (`team/model`).
        repository: String,
        /// The moving tag set to the newest generation (`latest` when the URL names
        /// none).
        tag: String,
    },
}

/// `gen-000000N`.
pub fn generation_name(generation: u64) -> String {
    format!("gen-{generation:07}")
}

/// `N` of `gen-000000N` (digits only, at least one).
pub(crate) fn parse_generation_name(s: &str) -> Option<u64> {
    let d = s.strip_prefix("gen-")?;
    if d.is_empty() || d.len() > 19 || !d.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    d.parse().ok()
}

impl Target {
    /// Parses a target URL: `s3://bucket/prefix/`, `http(s)://host/dir/`,
    /// `git+file:///…`, `git+ssh://…`, `git+https://…`, `oci://host[:port]/repo[:tag]`.
    pub fn parse(url: &str) -> Result<Target> {
        let shown = redact(url);
        let bad = |why: &str| Error::invalid_input(format!("push target {shown}: {why}"));
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(bad(
                "not a URL (s3://bucket/prefix/, http(s)://host/dir/, git+file:///repo.git, oci://host/repo)",
            ));
        };
        if url.chars().any(|c| c.is_control() || c == ' ') {
            return Err(bad("the URL holds spaces or control characters"));
        }
        match scheme.to_ascii_lowercase().as_str() {
            "s3" => {
                let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() || prefix.starts_with('/') || prefix.contains("//") {
                    return Err(bad("an S3 target is s3://bucket/ or s3://bucket/prefix/"));
                }
                let mut prefix = prefix.to_string();
                if !prefix.is_empty() && !prefix.ends_with('/') {
                    prefix.push('/');
                }
                Ok(Target::S3 {
                    bucket: bucket.to_string(),
                    prefix,
                })
            }
            "http" | "https" => {
                if rest.contains(['?', '#']) {
                    return Err(bad("an HTTP target takes no query or fragment"));
                }
                let host = rest.split('/').next().unwrap_or("");
                if host.is_empty() {
                    return Err(bad("the URL has no host"));
                }
                let mut u = url.to_string();
                if !u.ends_with('/') {
                    u.push('/');
                }
                Ok(Target::Http(u))
            }
            "git+file" | "git+ssh" | "git+https" | "git+http" => {
                let inner = &url[4..];
                if rest.is_empty() || rest == "/" {
                    return Err(bad("the URL names no repository"));
                }
                if scheme.eq_ignore_ascii_case("git+file") && !rest.starts_with('/') {
                    return Err(bad("a git+file URL names an absolute path (git+file:///srv/weights.git)"));
                }
                if inner.starts_with('-') {
                    return Err(bad("the URL starts with '-'"));
                }
                Ok(Target::Git(inner.to_string()))
            }
            "oci" => {
                let (host, path) = rest
                    .split_once('/')
                    .ok_or_else(|| bad("an OCI target is oci://host[:port]/repository[:tag]"))?;
                if host.is_empty() || host.contains('@') || path.is_empty() {
                    return Err(bad("an OCI target is oci://host[:port]/repository[:tag]"));
                }
                let (repository, tag) = match path.rsplit_once(':') {
                    Some((r, t)) if !t.contains('/') => (r, t),
                    _ => (path, "latest"),
                };
                let repo_ok = repository.split('/').all(|c| {
                    !c.is_empty()
                        && c.bytes().all(|b| {
                            b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b)
                        })
                        && c.as_bytes()[0].is_ascii_alphanumeric()
                });
                if !repo_ok {
                    return Err(bad("the repository name is lower-case letters, digits and . _ - separated by /"));
                }
                let tag_ok = !tag.is_empty()
                    && tag.len() <= 128
                    && tag.as_bytes()[0] != b'.'
                    && tag.as_bytes()[0] != b'-'
                    && tag
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
                if !tag_ok {
                    return Err(bad("the tag is letters, digits and . _ - (up to 128)"));
                }
                Ok(Target::Oci {
                    host: host.to_string(),
                    repository: repository.to_string(),
                    tag: tag.to_string(),
                })
            }
            other => Err(Error::unsupported(format!(
                "push target {shown}: the {other}:// scheme is not supported (s3://, http(s)://, git+file://, git+ssh://, git+https://, oci://)"
            ))),
        }
    }

    /// The target as it may be shown: never a `user:password@` or a secret-looking
    /// query value.
    pub fn display(&self) -> String {
        match self {
            Target::S3 { bucket, prefix } => format!("s3://{bucket}/{prefix}"),
            Target::Http(u) => redact(u),
            Target::Git(u) => format!("git+{}", redact(u)),
            Target::Oci {
                host,
                repository,
                tag,
            } => format!("oci://{host}/{repository}:{tag}"),
        }
    }

    /// Publishes one generation (idempotent: the same generation with the same digest
    /// again is a no-op that succeeds).
    pub fn push(&self, artifact: &Artifact, opts: &PushOptions) -> Result<PushReceipt> {
        check_artifact(artifact)?;
        match self {
            Target::Git(url) => git::push(self, url, artifact, opts),
            #[cfg(feature = "remote")]
            Target::S3 { .. } | Target::Http(_) => objects::push(self, artifact, opts),
            #[cfg(feature = "remote")]
            Target::Oci { .. } => oci::push(self, artifact, opts),
            #[cfg(not(feature = "remote"))]
            _ => Err(self.not_enabled()),
        }
    }

    /// Reads generation `generation` back into `dir` (created when missing); returns
    /// the files written, each checked against the size and digest recorded at the
    /// target.
    pub fn fetch(&self, generation: u64, dir: &Path, opts: &PushOptions) -> Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::from(e).at_subject(dir.display().to_string()))?;
        match self {
            Target::Git(url) => git::fetch(self, url, generation, dir, opts),
            #[cfg(feature = "remote")]
            Target::S3 { .. } | Target::Http(_) => objects::fetch(self, generation, dir, opts),
            #[cfg(feature = "remote")]
            Target::Oci { .. } => oci::fetch(self, generation, dir, opts),
            #[cfg(not(feature = "remote"))]
            _ => {
                let _ = generation;
                Err(self.not_enabled())
            }
        }
    }

    /// The generations present at the target (complete ones: their manifest is there),
    /// ascending.
    pub fn list(&self, opts: &PushOptions) -> Result<Vec<u64>> {
        let mut gens = match self {
            Target::Git(url) => git::list(self, url, opts)?,
            #[cfg(feature = "remote")]
            Target::S3 { .. } | Target::Http(_) => objects::list(self, opts)?,
            #[cfg(feature = "remote")]
            Target::Oci { .. } => oci::list(self, opts)?,
            #[cfg(not(feature = "remote"))]
            _ => return Err(self.not_enabled()),
        };
        gens.sort_unstable();
        gens.dedup();
        Ok(gens)
    }

    #[cfg(not(feature = "remote"))]
    fn not_enabled(&self) -> Error {
        Error::unsupported(format!(
            "{}: this build of tessera pushes to git targets only (built without the `remote` feature)",
            self.display()
        ))
    }
}

/// `url` without `user:password@` and with secret-looking query values redacted.
fn redact(url: &str) -> String {
    let mut u = url.to_string();
    if let Some(i) = u.find("://") {
        let auth_end = u[i + 3..]
            .find(['/', '?', '#'])
            .map_or(u.len(), |e| i + 3 + e);
        if let Some(at) = u[i + 3..auth_end].rfind('@') {
            u.replace_range(i + 3..i + 3 + at + 1, "");
        }
    }
    crate::remote::location::redact_query(&u)
        .escape_debug()
        .to_string()
}

/// A file name that may be written at a target and into a fetch directory: one
/// plain component, printable, not the manifest's name.
pub(crate) fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && name != MANIFEST
        && !name.starts_with('.')
        && !name.chars().any(|c| c.is_control() || "/\\:".contains(c));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid_input(format!(
            "{:?}: not a snapshot file name (one plain file name, not starting with '.', not {MANIFEST})",
            name.escape_debug().to_string()
        )))
    }
}

fn check_artifact(a: &Artifact) -> Result<()> {
    if a.files.is_empty() {
        return Err(Error::invalid_input(format!(
            "generation {}: no files to push",
            a.generation
        )));
    }
    if a.digest.is_empty() || a.digest.chars().any(|c| c.is_control()) {
        return Err(Error::invalid_input(format!(
            "generation {}: the artifact has no digest",
            a.generation
        )));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (name, _) in &a.files {
        check_name(name)?;
        if !seen.insert(name.as_str()) {
            return Err(Error::invalid_input(format!(
                "generation {}: the file name {name:?} is given twice",
                a.generation
            )));
        }
    }
    Ok(())
}

/// One file of a generation's manifest.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub(crate) struct FileEntry {
    pub name: String,
    pub size: u64,
    pub sha256: String,
}

/// A generation's manifest (`tessera-snapshot.json`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Manifest {
    pub tessera_snapshot: u32,
    pub generation: u64,
    pub step: Option<u64>,
    pub format: String,
    pub digest: String,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    pub files: Vec<FileEntry>,
}

/// Bound on a manifest's JSON (and any JSON a server answers).
pub(crate) const MAX_JSON: u64 = 4 << 20;

impl Manifest {
    pub(crate) fn of(a: &Artifact) -> Result<Manifest> {
        let files = a
            .files
            .iter()
            .map(|(name, path)| {
                let (size, sha256) = sha256_file(path)?;
                Ok(FileEntry {
                    name: name.clone(),
                    size,
                    sha256,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Manifest {
            tessera_snapshot: 1,
            generation: a.generation,
            step: a.step,
            format: a.format.clone(),
            digest: a.digest.clone(),
            annotations: a.annotations.clone(),
            files,
        })
    }

    pub(crate) fn to_json(&self) -> Result<Vec<u8>> {
        let mut v = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::invalid_input(format!("the snapshot manifest: {e}")))?;
        v.push(b'\n');
        Ok(v)
    }

    /// Parses and checks a manifest read from `place`, for generation `generation`.
    pub(crate) fn parse(bytes: &[u8], place: &str, generation: u64) -> Result<Manifest> {
        let m: Manifest = serde_json::from_slice(bytes).map_err(|e| {
            Error::malformed(format!("{place}: not a tessera snapshot manifest: {e}"))
        })?;
        if m.tessera_snapshot != 1 {
            return Err(Error::unsupported_version(format!(
                "{place}: snapshot manifest version {}",
                m.tessera_snapshot
            )));
        }
        if m.generation != generation {
            return Err(Error::integrity(format!(
                "{place}: the manifest is generation {}, expected {generation}",
                m.generation
            )));
        }
        let mut seen = std::collections::BTreeSet::new();
        for f in &m.files {
            check_name(&f.name).map_err(|e| e.at_subject(place.to_string()))?;
            if !seen.insert(f.name.as_str()) || !is_sha256_hex(&f.sha256) {
                return Err(Error::malformed(format!(
                    "{place}: file entry {:?} is repeated or has no SHA-256",
                    f.name
                )));
            }
        }
        Ok(m)
    }
}

/// The outcome of finding a generation already at a target: `Ok(true)` the same
/// digest (a no-op), an error another digest.
pub(crate) fn same_digest(found: &str, a: &Artifact, place: &str) -> Result<bool> {
    if found == a.digest {
        Ok(true)
    } else {
        Err(Error::integrity(format!(
            "{place}: generation {} is already there with digest {:?}, not {:?}; a generation is never overwritten",
            a.generation,
            found.escape_debug().to_string(),
            a.digest
        )))
    }
}

pub(crate) fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Size and lower-case hex SHA-256 of a local file.
pub(crate) fn sha256_file(path: &Path) -> Result<(u64, String)> {
    use sha2::Digest;
    let at = |e: std::io::Error| Error::from(e).at_subject(path.display().to_string());
    let mut f = std::fs::File::open(path).map_err(at)?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf).map_err(at)?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
    Ok((n, hex(&h.finalize())))
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Writes a fetched file: bytes from `fill` go to a temporary file in `dir`, are
/// checked against `size` and `sha256`, and only then renamed to `dir/name`.
pub(crate) fn write_checked(
    dir: &Path,
    name: &str,
    size: u64,
    sha256: &str,
    place: &str,
    fill: impl FnOnce(&mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()>,
) -> Result<PathBuf> {
    use sha2::Digest;
    use std::io::Write;
    check_name(name)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".tessera-fetch-")
        .tempfile_in(dir)
        .map_err(|e| Error::from(e).at_subject(dir.display().to_string()))?;
    let mut h = sha2::Sha256::new();
    let mut n = 0u64;
    {
        let file = tmp.as_file_mut();
        let mut sink = |b: &[u8]| -> Result<()> {
            n += b.len() as u64;
            if n > size {
                return Err(Error::integrity(format!(
                    "{place}: more than the {size} bytes recorded"
                )));
            }
            h.update(b);
            file.write_all(b).map_err(Error::from)
        };
        fill(&mut sink)?;
    }
    if n != size {
        return Err(Error::integrity(format!(
            "{place}: {n} bytes, the manifest records {size}"
        )));
    }
    let got = hex(&h.finalize());
    if got != sha256 {
        return Err(Error::integrity(format!(
            "{place}: SHA-256 {got}, the manifest records {sha256}"
        )));
    }
    tmp.as_file()
        .sync_all()
        .map_err(|e| Error::from(e).at_subject(place.to_string()))?;
    let dest = dir.join(name);
    tmp.persist(&dest)
        .map_err(|e| Error::from(e.error).at_subject(dest.display().to_string()))?;
    Ok(dest)
}

/// The last `n` non-empty lines of a program's stderr, escaped.
pub(crate) fn last_lines(text: &[u8], n: usize) -> String {
    let s = String::from_utf8_lossy(text);
    let lines: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    let from = lines.len().saturating_sub(n);
    lines[from..]
        .iter()
        .map(|l| l.escape_debug().to_string())
        .collect::<Vec<_>>()
        .join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_target_and_refuses_the_rest() {
        assert_eq!(
            Target::parse("s3://b/run7").unwrap(),
            Target::S3 {
                bucket: "b".into(),
                prefix: "run7/".into()
            }
        );
        assert_eq!(
            Target::parse("s3://b/").unwrap(),
            Target::S3 {
                bucket: "b".into(),
                prefix: "".into()
            }
        );
        assert_eq!(
            Target::parse("http://127.0.0.1:8080/dav").unwrap(),
            Target::Http("http://127.0.0.1:8080/dav/".into())
        );
        assert_eq!(
            Target::parse("git+file:///srv/w.git").unwrap(),
            Target::Git("file:///srv/w.git".into())
        );
        assert_eq!(
            Target::parse("git+ssh://git@host/w.git").unwrap(),
            Target::Git("ssh://git@host/w.git".into())
        );
        assert_eq!(
            Target::parse("oci://127.0.0.1:5000/team/model").unwrap(),
            Target::Oci {
                host: "127.0.0.1:5000".into(),
                repository: "team/model".into(),
                tag: "latest".into()
            }
        );
        assert_eq!(
            Target::parse("oci://ghcr.io/org/m:stable").unwrap(),
            Target::Oci {
                host: "ghcr.io".into(),
                repository: "org/m".into(),
                tag: "stable".into()
            }
        );
        for bad in [
            "ftp://x/y",
            "s3://",
            "git+file://relative",
            "oci://host",
            "oci://host/UPPER",
            "plain/path",
            "http:///x",
        ] {
            let e = Target::parse(bad).unwrap_err();
            assert!(
                e.to_string().contains(bad.split("://").next().unwrap()),
                "{e}"
            );
        }
    }

    #[test]
    fn display_never_shows_credentials() {
        let t = Target::parse("git+https://user:s3cret@host/w.git").unwrap();
        assert_eq!(t.display(), "git+https://host/w.git");
        let t = Target::parse("https://u:pw@h/dir/").unwrap();
        assert!(!t.display().contains("pw"), "{}", t.display());
        let e = Target::parse("oci://u:pw@h/x").unwrap_err();
        assert!(!e.to_string().contains("pw"), "{e}");
    }

    #[test]
    fn options_debug_hides_the_password() {
        let o = PushOptions::default().oci_password(Some("hunter2".into()));
        let shown = format!("{o:?}");
        assert!(
            shown.contains("<redacted>") && !shown.contains("hunter2"),
            "{shown}"
        );
    }

    #[test]
    fn generation_names_round_trip() {
        assert_eq!(generation_name(7), "gen-0000007");
        assert_eq!(parse_generation_name("gen-0000007"), Some(7));
        assert_eq!(parse_generation_name("gen-12345678"), Some(12345678));
        assert_eq!(parse_generation_name("gen-"), None);
        assert_eq!(parse_generation_name("gen-1x"), None);
        assert_eq!(parse_generation_name("latest"), None);
    }

    #[test]
    fn file_names_are_plain() {
        for bad in [
            "", ".", "..", "a/b", "..\\x", ".hidden", MANIFEST, "a\nb", "c:",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        check_name("model.wtxt").unwrap();
    }
}
