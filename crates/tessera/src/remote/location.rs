//! Where a file is: a local path or an object behind a URL ([`Location::parse`]).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A file's location, as a user names it on the command line or in Python.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// holds a secret: credentials are taken from the environment, not from URLs.
    pub fn display(&self) -> String {
        match self {
            Location::Local(p) => p.display().to_string(),
            Location::S3 { bucket, key } => format!("s3://{bucket}/{key}"),
            Location::Http(u) => redact_userinfo(u),
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
    fn never_shows_userinfo() {
        let l = Location::parse("https://user:secret@h.example/x.npy").unwrap();
        assert!(!l.display().contains("secret"), "{}", l.display());
    }
}
