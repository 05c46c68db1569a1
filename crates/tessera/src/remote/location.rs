//! Where a file is: a local path or an object behind a URL ([`Location::parse`]).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A file's location, as a user names it on the command line or in Python.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Location {
    /// A local path (plain, or `file://` with the scheme removed).
    Local(PathBuf),
    /// `s3://bucket/key`: an object in S3 or an S3-compatible store.
    S3 {
        /// The bucket.
        bucket: String,
        /// The key inside it (no leading `/`).
        key: String,
    },
    /// `http://…` or `https://…`: a file served over HTTP with range requests.
    Http(String),
}

impl Location {
    /// Parses `s`: `s3://bucket/key`, `http(s)://host/path`, `file:///abs/path`, or a
    /// plain path. Another `scheme://` (`gs://`, `az://`, …) is an `Unsupported` error;
    /// an `s3://` without a bucket or a key, or a `file://` with a host, is `InvalidInput`.
    pub fn parse(s: &str) -> Result<Location> {
        let Some((scheme, rest)) = split_scheme(s) else {
            return Ok(Location::Local(PathBuf::from(s)));
        };
        match scheme.to_ascii_lowercase().as_str() {
            "file" => {
                // file:///abs/path (empty host) or file://localhost/abs/path.
                let path = rest.strip_prefix("localhost").unwrap_or(rest);
                if !path.starts_with('/') {
                    return Err(Error::invalid_input(format!(
                        "{s}: a file:// URL names an absolute path (file:///dir/file)"
                    )));
                }
                Ok(Location::Local(PathBuf::from(path)))
            }
            "s3" => {
                // `s3://bucket/dir/` (and `s3://bucket/`) name a directory: a key prefix.
                let Some((bucket, key)) = rest.split_once('/') else {
                    return Err(Error::invalid_input(format!(
                        "{s}: an S3 location is s3://bucket/key (a bucket and an object key) or s3://bucket/prefix/ (a directory)"
                    )));
                };
                if bucket.is_empty() || key.starts_with('/') || key.contains("//") {
                    return Err(Error::invalid_input(format!(
                        "{s}: an S3 location is s3://bucket/key (a bucket and an object key) or s3://bucket/prefix/ (a directory)"
                    )));
                }
                Ok(Location::S3 {
                    bucket: bucket.to_string(),
                    key: key.to_string(),
                })
            }
            "http" | "https" => {
                let host = rest.split(['/', '?', '#']).next().unwrap_or("");
                if host.is_empty() {
                    return Err(Error::invalid_input(format!("{s}: the URL has no host")));
                }
                Ok(Location::Http(s.to_string()))
            }
            other => Err(Error::unsupported(format!(
                "{s}: the {other}:// scheme is not supported (s3://, http://, https://, file:// or a path)"
            ))),
        }
    }

    /// [`Location::parse`] of a path given as a `Path` (a URL passed where a path is
    /// taken arrives as one); a path that is not UTF-8 is always local.
    pub fn from_path(path: &Path) -> Result<Location> {
        match path.to_str() {
            Some(s) => Location::parse(s),
            None => Ok(Location::Local(path.to_path_buf())),
        }
    }

    /// True for an object behind a URL (not a local file).
    pub fn is_remote(&self) -> bool {
        !matches!(self, Location::Local(_))
    }

    /// The location as the user wrote it (a path, or the URL), for messages. Never
    /// holds a secret: a URL's `user:password@` and the values of secret-looking query
    /// parameters (a presigned URL's signature, credential and token) are redacted.
    pub fn display(&self) -> String {
        match self {
            Location::Local(p) => p.display().to_string(),
            Location::S3 { bucket, key } => format!("s3://{bucket}/{key}"),
            Location::Http(u) => redact_query(&redact_userinfo(u)),
        }
    }

    /// True when the location names a directory rather than an object: an S3 key prefix
    /// ending with `/` (or a bucket's top, `s3://bucket/`), an HTTP URL whose path ends
    /// with `/`. A local path is never one here (the local opener asks the filesystem).
    pub fn is_dir(&self) -> bool {
        match self {
            Location::Local(_) => false,
            Location::S3 { key, .. } => key.is_empty() || key.ends_with('/'),
            Location::Http(u) => u.split(['?', '#']).next().unwrap_or("").ends_with('/'),
        }
    }

    /// The directory this location would be if it named one: an S3 key with a `/`
    /// added (`s3://b/ckpt` → `s3://b/ckpt/`, a prefix with no object of that name);
    /// any other location as it is.
    pub fn as_dir(&self) -> Location {
        match self {
            Location::S3 { bucket, key } if !self.is_dir() => Location::S3 {
                bucket: bucket.clone(),
                key: format!("{key}/"),
            },
            other => other.clone(),
        }
    }

    /// True for an HTTP URL signed for one object (a presigned S3 URL's
    /// `X-Amz-Signature`, S3's older `Signature`, GCS's `X-Goog-Signature`, an Azure SAS
    /// `sig`): its signature covers that object's path only, so no other file of a set
    /// can be fetched with it ([`Location::sibling`] would be refused by the server).
    pub fn is_presigned(&self) -> bool {
        let Location::Http(u) = self else {
            return false;
        };
        let Some((_, rest)) = u.split_once('?') else {
            return false;
        };
        let query = rest.split('#').next().unwrap_or("");
        query.split('&').any(|p| {
            let name = p.split('=').next().unwrap_or("").to_ascii_lowercase();
            name.ends_with("signature") || name == "sig"
        })
    }

    /// The location of the file `name` (a plain file name, checked by the caller) in the
    /// same directory or key prefix as this one (in it, when this one is a directory).
    /// An HTTP URL's query string is kept (`?download=true` applies to every file of a
    /// set). A presigned URL's signature fits its one object only: the set opener asks
    /// [`Location::is_presigned`] and never fetches a sibling of one.
    pub fn sibling(&self, name: &str) -> Location {
        match self {
            Location::Local(p) => Location::Local(p.with_file_name(name)),
            Location::S3 { bucket, key } => {
                let dir = key.rfind('/').map(|i| &key[..=i]).unwrap_or("");
                Location::S3 {
                    bucket: bucket.clone(),
                    key: format!("{dir}{name}"),
                }
            }
            Location::Http(u) => {
                let end = u.find(['?', '#']).unwrap_or(u.len());
                let (base, query) = u.split_at(end);
                let dir = base.rfind('/').map(|i| &base[..=i]).unwrap_or(base);
                Location::Http(format!("{dir}{}{query}", encode_segment(name)))
            }
        }
    }

    /// The last component of the path or key (the file's name).
    pub fn file_name(&self) -> String {
        match self {
            Location::Local(p) => p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            Location::S3 { key, .. } => key.rsplit('/').next().unwrap_or("").to_string(),
            Location::Http(u) => {
                let path = u.split(['?', '#']).next().unwrap_or("");
                path.rsplit('/').next().unwrap_or("").to_string()
            }
        }
    }
}

/// `scheme` and what follows `scheme://`, when `s` starts with one (a scheme of at least
/// two letters, so `C:\dir` stays a path).
fn split_scheme(s: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = s.split_once("://")?;
    let ok = scheme.len() >= 2
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    ok.then_some((scheme, rest))
}

/// `name` as one URL path segment: bytes outside RFC 3986's unreserved set (and `+`,
/// `=`, `@`, `,`, which servers take as they are) percent-encoded.
fn encode_segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~+=@,".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Query parameters whose values are secrets (a presigned URL's signature and
/// credential, tokens, keys), matched case-insensitively as substrings of the name.
const SECRET_PARAMS: &[&str] = &[
    "signature",
    "credential",
    "token",
    "key",
    "sig",
    "security",
    "auth",
    "password",
    "secret",
];

/// `u` with the values of secret-looking query parameters replaced by `<redacted>`.
pub(crate) fn redact_query(u: &str) -> String {
    let Some((base, rest)) = u.split_once('?') else {
        return u.to_string();
    };
    let (query, fragment) = match rest.split_once('#') {
        Some((q, f)) => (q, Some(f)),
        None => (rest, None),
    };
    let params: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((k, _)) if is_secret(k) => format!("{k}=<redacted>"),
            _ => p.to_string(),
        })
        .collect();
    let mut out = format!("{base}?{}", params.join("&"));
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(f);
    }
    out
}

pub(crate) fn is_secret(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    SECRET_PARAMS.iter().any(|s| n.contains(s))
}

/// `u` with any `user:password@` removed.
fn redact_userinfo(u: &str) -> String {
    let Some((scheme, rest)) = u.split_once("://") else {
        return u.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}://<redacted>@{}", &rest[at + 1..]),
        None => u.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_form() {
        assert_eq!(
            Location::parse("s3://b/dir/k.aero").unwrap(),
            Location::S3 {
                bucket: "b".into(),
                key: "dir/k.aero".into()
            }
        );
        assert_eq!(
            Location::parse("file:///tmp/x.zt").unwrap(),
            Location::Local("/tmp/x.zt".into())
        );
        assert_eq!(
            Location::parse("rel/x.zt").unwrap(),
            Location::Local("rel/x.zt".into())
        );
        assert_eq!(
            Location::parse("C:\\x.zt").unwrap(),
            Location::Local("C:\\x.zt".into())
        );
        let h = Location::parse("https://h.example/a/b.gguf?x=1").unwrap();
        assert!(h.is_remote());
        assert_eq!(h.file_name(), "b.gguf");
    }

    #[test]
    fn refuses_bad_forms() {
        for bad in [
            "s3://bucket",
            "s3:///key",
            "s3://b//k",
            "http:///x",
            "file://host/x",
        ] {
            let e = Location::parse(bad).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidInput, "{bad}: {e}");
        }
        let e = Location::parse("gs://b/k").unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Unsupported);
    }

    #[test]
    fn siblings_keep_the_directory_and_query() {
        let h =
            Location::parse("https://h.example/org/m/model.safetensors.index.json?download=true")
                .unwrap();
        assert_eq!(
            h.sibling("model-00001-of-00002.safetensors"),
            Location::Http(
                "https://h.example/org/m/model-00001-of-00002.safetensors?download=true".into()
            )
        );
        assert_eq!(
            h.sibling("a b%.safetensors"),
            Location::Http("https://h.example/org/m/a%20b%25.safetensors?download=true".into())
        );
        let s = Location::parse("s3://b/dir/x-00001-of-00002.gguf").unwrap();
        assert_eq!(
            s.sibling("x-00002-of-00002.gguf"),
            Location::S3 {
                bucket: "b".into(),
                key: "dir/x-00002-of-00002.gguf".into()
            }
        );
        let top = Location::parse("s3://b/m.json").unwrap();
        assert_eq!(
            top.sibling("s.safetensors").display(),
            "s3://b/s.safetensors"
        );
    }

    #[test]
    fn directories_and_their_files() {
        for (url, dir) in [
            ("s3://b/ckpt/", true),
            ("s3://b/", true),
            ("s3://b/ckpt", false),
            ("http://h/ckpt/?download=true", true),
            ("http://h/ckpt/m.zt", false),
            ("http://h/ckpt", false),
        ] {
            assert_eq!(Location::parse(url).unwrap().is_dir(), dir, "{url}");
        }
        let d = Location::parse("s3://b/ckpt").unwrap().as_dir();
        assert_eq!(d.display(), "s3://b/ckpt/");
        assert_eq!(d.sibling("m.zt").display(), "s3://b/ckpt/m.zt");
        let top = Location::parse("s3://b/").unwrap();
        assert_eq!(top.sibling("m.zt").display(), "s3://b/m.zt");
        let h = Location::parse("http://h/ckpt/?download=true").unwrap();
        assert_eq!(
            h.sibling("m.zt"),
            Location::Http("http://h/ckpt/m.zt?download=true".into())
        );
    }

    #[test]
    fn tells_a_presigned_url() {
        for (url, signed) in [
            (
                "https://h/b/k.zt?X-Amz-Algorithm=A&X-Amz-Signature=abc",
                true,
            ),
            (
                "https://h/b/k.zt?AWSAccessKeyId=A&Expires=1&Signature=abc",
                true,
            ),
            ("https://h/b/k.zt?X-Goog-Signature=abc", true),
            ("https://h/c/k.zt?sv=2020&sig=abc", true),
            ("https://h/k.zt?download=true", false),
            ("https://h/k.zt", false),
            ("s3://b/k.zt", false),
        ] {
            assert_eq!(
                Location::parse(url).unwrap().is_presigned(),
                signed,
                "{url}"
            );
        }
    }

    #[test]
    fn never_shows_a_presigned_signature() {
        let l = Location::parse(
            "https://h.example/x.npy?X-Amz-Algorithm=AWS4&X-Amz-Credential=AKIA1&X-Amz-Signature=abc123&X-Amz-Security-Token=tok&download=true",
        )
        .unwrap();
        let d = l.display();
        for secret in ["AKIA1", "abc123", "tok&"] {
            assert!(!d.contains(secret), "{d}");
        }
        assert!(
            d.contains("download=true") && d.contains("X-Amz-Algorithm=AWS4"),
            "{d}"
        );
    }

    #[test]
    fn never_shows_userinfo() {
        let l = Location::parse("https://user:secret@h.example/x.npy").unwrap();
        assert!(!l.display().contains("secret"), "{}", l.display());
    }
}
