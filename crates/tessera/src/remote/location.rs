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
                let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() || key.is_empty() || key.ends_with('/') {
                    return Err(Error::invalid_input(format!(
                        "{s}: an S3 location is s3://bucket/key (a bucket and an object key)"
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

    /// The location of the file `name` (a plain file name, checked by the caller) in the
    /// same directory or key prefix as this one. An HTTP URL's query string is kept
    /// (`?download=true` applies to every file of a set; a presigned URL's signature
    /// fits one object only, and its siblings are refused by the server, naming them).
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

fn is_secret(name: &str) -> bool {
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
            "s3://b/dir/",
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
