//! Building an `object_store` client for a [`Location`], and the runtime it runs on.
//!
//! Credentials come from where each ecosystem keeps them, and are never printed:
//! - S3: `AmazonS3Builder::from_env` (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//!   `AWS_SESSION_TOKEN`, `AWS_REGION`, `AWS_ENDPOINT_URL`, web identity, ECS
//!   container credentials), then, for what those leave unset, the AWS profile
//!   (`AWS_PROFILE` or `default` in `~/.aws/credentials` and `~/.aws/config`:
//!   `profile.rs`). With no credentials anywhere, requests are anonymous (unsigned),
//!   so a public bucket reads without an account and nothing waits on the EC2
//!   metadata service. An endpoint (`RemoteOptions::endpoint`, the CLI's `--endpoint`,
//!   or `AWS_ENDPOINT_URL`) selects a MinIO-style server, path-style; `http://` allowed.
//! - HTTP: a bearer token (`Authorization: Bearer …`, a sensitive header: left out of
//!   debug output, dropped on a redirect to another host), sent only where it belongs
//!   ([`bearer_token`]): `TESSERA_HTTP_TOKEN` to the hosts `TESSERA_HTTP_TOKEN_HOSTS`
//!   names (or the location's own host with [`RemoteOptions::token`], the CLI's
//!   `--token`), `HF_TOKEN` to Hugging Face's hosts over HTTPS only. Any other host gets
//!   no token.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use object_store::aws::AmazonS3Builder;
use object_store::http::HttpBuilder;
use object_store::path::Path as ObjectPath;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};

use super::{Location, RemoteOptions};
use crate::error::{Error, Result};

/// A store and the object's path in it.
pub(crate) struct Target {
    pub store: Arc<dyn ObjectStore>,
    pub path: ObjectPath,
    /// The location as shown in messages (`s3://b/k`, the URL).
    pub url: String,
    /// What names the object in the disk cache (`cache::s3_key`, `cache::http_key`):
    /// the endpoint, bucket and key, or the URL without credentials and signatures.
    pub cache_key: String,
}

/// Per-request timeout: a stalled server is an error after this, never a hang.
fn timeout() -> Duration {
    env_secs("TESSERA_REMOTE_TIMEOUT").unwrap_or(Duration::from_secs(60))
}

fn env_secs(name: &str) -> Option<Duration> {
    let v = std::env::var(name).ok()?;
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| *s > 0.0)
        .map(Duration::from_secs_f64)
}

fn client_options() -> ClientOptions {
    ClientOptions::new()
        .with_timeout(timeout())
        .with_connect_timeout(Duration::from_secs(10))
        .with_allow_http(true)
}

/// Transient errors (5xx, 429, dropped connections, timeouts) are retried with
/// exponential backoff: up to 5 retries within 20 s.
fn retry_config() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            base: 2.0,
        },
        max_retries: 5,
        retry_timeout: Duration::from_secs(20),
    }
}

fn setup(url: &str, e: impl std::fmt::Display) -> Error {
    Error::invalid_input(format!("cannot set up the client: {e}")).in_file(url)
}

/// The store for a remote `loc` (`Local` is not remote: an `InvalidInput` error).
pub(crate) fn target(loc: &Location, opts: &RemoteOptions) -> Result<Target> {
    let url = loc.display();
    match loc {
        Location::S3 { bucket, key } => {
            let mut b = AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .with_client_options(client_options())
                .with_retry(retry_config());
            // What the environment leaves unset comes from the AWS profile.
            let profile = super::profile::from_env().map_err(|e| e.in_file(url.clone()))?;
            let env_keys = has_aws_credentials();
            if !env_keys {
                if let (Some(id), Some(secret)) =
                    (&profile.access_key_id, &profile.secret_access_key)
                {
                    b = b.with_access_key_id(id).with_secret_access_key(secret);
                    if let Some(t) = &profile.session_token {
                        b = b.with_token(t);
                    }
                }
            }
            let env_region = ["AWS_REGION", "AWS_DEFAULT_REGION"]
                .iter()
                .any(|n| env_nonempty(n).is_some());
            if let (false, Some(r)) = (env_region, &profile.region) {
                b = b.with_region(r);
            }
            let endpoint = opts
                .endpoint
                .clone()
                .or_else(|| env_nonempty("AWS_ENDPOINT_URL"))
                .or_else(|| profile.endpoint_url.clone());
            let cache_key = super::cache::s3_key(endpoint.as_deref(), bucket, key);
            if let Some(ep) = endpoint {
                b = b
                    .with_endpoint(ep)
                    .with_virtual_hosted_style_request(false)
                    .with_allow_http(true);
            }
            if !env_keys && profile.access_key_id.is_none() {
                b = b.with_skip_signature(true);
            }
            let store = b.build().map_err(|e| setup(&url, e))?;
            let path = ObjectPath::parse(key).map_err(|e| setup(&url, e))?;
            Ok(Target {
                store: Arc::new(store),
                path,
                url,
                cache_key,
            })
        }
        Location::Http(u) => {
            let parsed = split_http(u).ok_or_else(|| setup(&url, "not an http(s) URL"))?;
            let mut options = client_options();
            // A token given with the options goes to this location's host (the one the
            // caller named), in place of any from the environment.
            let given = opts.bearer_token.clone().filter(|t| !t.trim().is_empty());
            let token = given.or_else(|| bearer_token(u, opts.token, &|n| env_nonempty(n)));
            if let Some(token) = token {
                let mut value = object_store::HeaderValue::from_str(&format!("Bearer {token}"))
                    .map_err(|_| {
                        setup(&url, "the bearer token holds characters a header cannot")
                    })?;
                value.set_sensitive(true);
                let mut headers = object_store::HeaderMap::new();
                headers.insert("authorization", value);
                options = options.with_default_headers(headers);
            }
            let store = HttpBuilder::new()
                .with_url(parsed.0)
                .with_client_options(options)
                .with_retry(retry_config())
                .build()
                .map_err(|e| setup(&url, e))?;
            let path = ObjectPath::from_url_path(parsed.1).map_err(|e| setup(&url, e))?;
            Ok(Target {
                store: Arc::new(store),
                path,
                url,
                cache_key: super::cache::http_key(u),
            })
        }
        Location::Local(p) => Err(Error::invalid_input(format!(
            "{}: a local path, not a remote object",
            p.display()
        ))),
    }
}

/// `(scheme://host[:port]/[?query], path)` of an http(s) URL: the query string stays on
/// the base URL, to which object_store appends the path, so it is sent with every
/// request (a presigned URL's signature, `?download=true`); the fragment is dropped.
fn split_http(u: &str) -> Option<(String, String)> {
    let (scheme, rest) = u.split_once("://")?;
    let rest = rest.split('#').next().unwrap_or("");
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, ""),
    };
    let base = match query {
        Some(q) if !q.is_empty() => format!("{scheme}://{host}/?{q}"),
        _ => format!("{scheme}://{host}"),
    };
    Some((base, path.to_string()))
}

/// The Hugging Face hosts `HF_TOKEN` goes to (and their subdomains: the LFS and Xet
/// CDNs a download redirects to are reached without it, by a signed URL).
const HF_HOSTS: [&str; 2] = ["huggingface.co", "hf.co"];

/// `(scheme, host)` of an http(s) URL, both lower case, without user info or port.
fn scheme_host(url: &str) -> Option<(String, String)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    Some((scheme.to_ascii_lowercase(), host.to_ascii_lowercase()))
}

/// Whether `host` is `name` or under it (`name` written `.example.com` or
/// `*.example.com` matches the subdomains only).
fn host_matches(host: &str, name: &str) -> bool {
    let name = name.trim().trim_end_matches('.').to_ascii_lowercase();
    let name = name.split(':').next().unwrap_or("");
    if let Some(suffix) = name.strip_prefix("*.").or_else(|| name.strip_prefix('.')) {
        return host.len() > suffix.len() + 1
            && host.ends_with(suffix)
            && host.as_bytes()[host.len() - suffix.len() - 1] == b'.';
    }
    !name.is_empty() && host == name
}

/// The bearer token a request to `url` carries, if any may go there:
///
/// - `TESSERA_HTTP_TOKEN` when the URL's host is one `TESSERA_HTTP_TOKEN_HOSTS` names
///   (hosts separated by commas or spaces; `*.example.com` or `.example.com` for the
///   subdomains) or when `to_this_host` (the user gave the token for this URL: the CLI's
///   `--token`), over http:// too (the user named the host);
/// - else `HF_TOKEN` when the URL is `https://` and its host `huggingface.co` or
///   `hf.co` or a subdomain of either;
/// - else none: a token is never sent to a host nobody named, nor Hugging Face's over
///   plain HTTP.
pub(crate) fn bearer_token(
    url: &str,
    to_this_host: bool,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    let (scheme, host) = scheme_host(url)?;
    if host.is_empty() {
        return None;
    }
    if let Some(t) = env("TESSERA_HTTP_TOKEN") {
        let named = env("TESSERA_HTTP_TOKEN_HOSTS").is_some_and(|hosts| {
            hosts
                .split([',', ' ', '\t'])
                .filter(|h| !h.is_empty())
                .any(|h| host_matches(&host, h))
        });
        if named || to_this_host {
            return Some(t);
        }
    }
    let hf = HF_HOSTS
        .iter()
        .any(|h| host_matches(&host, h) || host_matches(&host, &format!("*.{h}")));
    if scheme == "https" && hf {
        return env("HF_TOKEN");
    }
    None
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// True when the environment names AWS credentials of some kind.
fn has_aws_credentials() -> bool {
    [
        "AWS_ACCESS_KEY_ID",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ]
    .iter()
    .any(|n| env_nonempty(n).is_some())
}

/// The runtime every remote request runs on: built once, two worker threads (the
/// requests are I/O; callers block on them from any thread).
pub(crate) fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("tessera-remote")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| {
        Error::new(
            crate::ErrorKind::Io,
            format!("cannot start the I/O runtime: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |n| {
            vars.iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn hf_token_goes_to_hugging_face_over_https_only() {
        let e = env(&[("HF_TOKEN", "hf_x")]);
        let t = |u: &str| bearer_token(u, false, &e);
        assert_eq!(
            t("https://huggingface.co/a/b/resolve/main/m.gguf").as_deref(),
            Some("hf_x")
        );
        assert_eq!(t("https://HF.co/a/resolve/main/x").as_deref(), Some("hf_x"));
        assert_eq!(
            t("https://cdn-lfs.huggingface.co/x").as_deref(),
            Some("hf_x")
        );
        assert_eq!(t("http://huggingface.co/a/b/resolve/main/m.gguf"), None);
        assert_eq!(t("https://example.com/m.gguf"), None);
        assert_eq!(t("https://huggingface.co.evil.com/m.gguf"), None);
        assert_eq!(t("https://evilhuggingface.co/m.gguf"), None);
        assert_eq!(t("https://huggingface.co@evil.com/m.gguf"), None);
        assert_eq!(t("http://127.0.0.1:8080/m.gguf"), None);
        // --token sends TESSERA_HTTP_TOKEN, never HF_TOKEN, to another host.
        assert_eq!(bearer_token("https://example.com/m", true, &e), None);
    }

    #[test]
    fn tessera_http_token_goes_to_the_named_hosts_only() {
        let e = env(&[
            ("TESSERA_HTTP_TOKEN", "t"),
            (
                "TESSERA_HTTP_TOKEN_HOSTS",
                "models.example.com, *.corp.test 127.0.0.1",
            ),
        ]);
        let t = |u: &str, flag: bool| bearer_token(u, flag, &e);
        assert_eq!(
            t("https://models.example.com/m", false).as_deref(),
            Some("t")
        );
        assert_eq!(t("http://127.0.0.1:8080/m", false).as_deref(), Some("t"));
        assert_eq!(t("https://a.corp.test/m", false).as_deref(), Some("t"));
        assert_eq!(t("https://corp.test/m", false), None);
        assert_eq!(t("https://example.com/m", false), None);
        assert_eq!(t("https://other.example.com/m", false), None);
        assert_eq!(t("https://huggingface.co/m", false), None);
        // The URL's own host when the user gave --token.
        assert_eq!(t("https://other.example.com/m", true).as_deref(), Some("t"));
        // Without a host list, only --token sends it.
        let e = env(&[("TESSERA_HTTP_TOKEN", "t"), ("HF_TOKEN", "hf")]);
        assert_eq!(bearer_token("https://example.com/m", false, &e), None);
        assert_eq!(
            bearer_token("https://example.com/m", true, &e).as_deref(),
            Some("t")
        );
        assert_eq!(
            bearer_token("https://huggingface.co/m", false, &e).as_deref(),
            Some("hf")
        );
    }
}
