//! The HTTP client of the HTTP-PUT and OCI targets: reqwest on the remote module's
//! runtime, no redirect followed by itself (the callers decide), every answer's body
//! read with a bound, every error naming the request and the server's answer escaped.

use std::future::Future;
use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};

use super::PushOptions;

/// What of a server's error answer is shown.
const SHOWN: usize = 300;

pub(crate) fn client(opts: &PushOptions) -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(opts.timeout)
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("tessera/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot build the HTTP client: {e}")))
}

/// Runs `f` on the remote runtime, from a thread outside it.
pub(crate) fn block<F: Future>(f: F) -> Result<F::Output> {
    Ok(crate::remote::runtime()?.block_on(f))
}

/// A request that got no answer (connection refused, timeout, …).
pub(crate) fn send_error(what: &str, e: reqwest::Error) -> Error {
    let mut cause = String::new();
    let mut src: Option<&dyn std::error::Error> = Some(&e);
    while let Some(s) = src {
        let t = s.to_string();
        if !cause.contains(&t) {
            if !cause.is_empty() {
                cause.push_str(": ");
            }
            cause.push_str(&t);
        }
        src = s.source();
    }
    let why = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else {
        "failed"
    };
    Error::new(
        ErrorKind::Io,
        format!("{what}: {why}: {}", cause.escape_debug()),
    )
}

/// The error for an answer with an unexpected status: the status and the start of the
/// server's body, escaped.
pub(crate) async fn status_error(what: &str, resp: reqwest::Response) -> Error {
    let status = resp.status();
    let body = body_limited(resp, 4096, what).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&body);
    let mut shown: String = text.trim().escape_debug().take(SHOWN).collect();
    if text.trim().escape_debug().nth(SHOWN).is_some() {
        shown.push('…');
    }
    let kind = match status.as_u16() {
        401 | 403 => ErrorKind::InvalidInput,
        404 => ErrorKind::NotFound,
        _ => ErrorKind::Io,
    };
    let msg = if shown.is_empty() {
        format!("{what}: HTTP {status}")
    } else {
        format!("{what}: HTTP {status}: {shown}")
    };
    Error::new(kind, msg)
}

/// The answer's body, at most `max` bytes (more is a `LimitExceeded` error; a declared
/// length over it is refused before reading).
pub(crate) async fn body_limited(
    mut resp: reqwest::Response,
    max: u64,
    what: &str,
) -> Result<Vec<u8>> {
    if let Some(n) = resp.content_length() {
        if n > max {
            return Err(Error::limit(format!(
                "{what}: the answer is {n} bytes, more than the {max} allowed"
            )));
        }
    }
    let mut out = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| send_error(&format!("{what}: reading the answer"), e))?
    {
        if out.len() as u64 + chunk.len() as u64 > max {
            return Err(Error::limit(format!(
                "{what}: the answer is more than the {max} bytes allowed"
            )));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Streams the answer's body into `sink`, chunk by chunk.
pub(crate) fn stream_into(
    resp: &mut reqwest::Response,
    what: &str,
    sink: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    loop {
        let chunk = block(resp.chunk())?
            .map_err(|e| send_error(&format!("{what}: reading the answer"), e))?;
        match chunk {
            Some(c) => sink(&c)?,
            None => return Ok(()),
        }
    }
}

/// A local file as a request body, read 1 MiB at a time (with its length set by the
/// caller).
pub(crate) fn file_body(path: &std::path::Path) -> Result<reqwest::Body> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .map_err(|e| Error::from(e).at_subject(path.display().to_string()))?;
    let stream = futures::stream::unfold(Some(file), |state| async move {
        let mut file = state?;
        let mut buf = vec![0u8; 1 << 20];
        match file.read(&mut buf) {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<_, std::io::Error>(bytes::Bytes::from(buf)), Some(file)))
            }
            Err(e) => Some((Err(e), None)),
        }
    });
    Ok(reqwest::Body::wrap_stream(stream))
}
