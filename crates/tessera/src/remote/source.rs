//! [`RemoteSource`]: a [`ByteSource`] over one remote object, read by range.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::{StreamExt, TryStreamExt};
use object_store::{GetOptions, GetRange, ObjectStoreExt};

use super::store::{runtime, target, Target};
use super::{Location, RemoteOptions};
use crate::error::{Error, ErrorKind, Result};
use crate::source::{truncated, ByteSource};

/// Ranges closer than this are fetched as one request.
const COALESCE_GAP: u64 = 1 << 20;
/// A single read larger than this is split into parts of this size fetched in parallel.
const PART: u64 = 8 << 20;
/// At most this many requests of one read are in flight at once.
const CONCURRENCY: usize = 8;
/// A body cut short is fetched again this many times.
const BODY_RETRIES: u32 = 3;

/// A failed fetch: worth another try (the body broke off) or not.
enum Retry {
    Body(Error),
    No(Error),
}

/// One remote object (S3 or HTTP). Opening it sends one `HEAD` for its size and ETag;
/// every read after that is a ranged `GET` with `If-Match: <etag>`, so an object
/// replaced between two requests fails with an `Integrity` error naming the URL instead
/// of mixing bytes of two versions. A body shorter than the range asked for is an error.
pub struct RemoteSource {
    target: Target,
    len: u64,
    etag: Option<String>,
    requests: AtomicU64,
    fetched: AtomicU64,
}

impl std::fmt::Debug for RemoteSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteSource")
            .field("url", &self.target.url)
            .field("len", &self.len)
            .finish()
    }
}

impl RemoteSource {
    /// Opens the object at `loc` (a `HEAD` request).
    pub fn open(loc: &Location, opts: &RemoteOptions) -> Result<RemoteSource> {
        let target = target(loc, opts)?;
        let meta = runtime()?
            .block_on(target.store.head(&target.path))
            .map_err(|e| store_error(&target.url, e))?;
        Ok(RemoteSource {
            len: meta.size,
            etag: meta.e_tag,
            target,
            requests: AtomicU64::new(1),
            fetched: AtomicU64::new(0),
        })
    }

    /// The location, as shown in messages.
    pub fn url(&self) -> &str {
        &self.target.url
    }

    /// Requests sent so far (the `HEAD` included).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Body bytes received so far.
    pub fn bytes_fetched(&self) -> u64 {
        self.fetched.load(Ordering::Relaxed)
    }

    /// One ranged GET, checked: its length, and the object's identity. A body cut short
    /// (a dropped connection: object_store retries failed requests, not failed bodies)
    /// is fetched again, up to [`BODY_RETRIES`] times with backoff.
    async fn fetch(&self, r: Range<u64>) -> Result<bytes::Bytes> {
        let mut attempt = 0;
        loop {
            match self.fetch_once(r.clone()).await {
                Err(Retry::Body(_)) if attempt < BODY_RETRIES => {
                    tokio::time::sleep(std::time::Duration::from_millis(100 << attempt)).await;
                    attempt += 1;
                }
                Err(Retry::Body(e) | Retry::No(e)) => return Err(e),
                Ok(b) => return Ok(b),
            }
        }
    }

    async fn fetch_once(&self, r: Range<u64>) -> std::result::Result<bytes::Bytes, Retry> {
        let want = r.end - r.start;
        self.requests.fetch_add(1, Ordering::Relaxed);
        let opts = GetOptions {
            if_match: self.etag.clone(),
            range: Some(GetRange::Bounded(r.clone())),
            ..GetOptions::default()
        };
        let url = &self.target.url;
        let got = self
            .target
            .store
            .get_opts(&self.target.path, opts)
            .await
            .map_err(|e| Retry::No(store_error(url, e)))?;
        // A server that ignores If-Match still says which object it sent.
        if let (Some(ours), Some(theirs)) = (&self.etag, &got.meta.e_tag) {
            if ours != theirs {
                return Err(Retry::No(changed(url, ours, theirs)));
            }
        }
        if got.meta.size != self.len {
            return Err(Retry::No(
                Error::integrity(format!(
                    "the object changed while it was read (it was {} bytes, it is now {})",
                    self.len, got.meta.size
                ))
                .in_file(url.clone()),
            ));
        }
        let body = got
            .bytes()
            .await
            .map_err(|e| Retry::Body(store_error(url, e)))?;
        self.fetched.fetch_add(body.len() as u64, Ordering::Relaxed);
        if body.len() as u64 != want {
            return Err(Retry::Body(
                Error::new(
                    ErrorKind::Io,
                    format!(
                        "bytes [{}, {}) were asked for and {} arrived",
                        r.start,
                        r.end,
                        body.len()
                    ),
                )
                .in_file(url.clone())
                .at_offset(r.start),
            ));
        }
        Ok(body)
    }

    /// `[offset, offset+len)`, split into parts fetched concurrently when large.
    async fn fetch_split(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        if len <= PART {
            return self.fetch(offset..offset + len).await.map(|b| b.to_vec());
        }
        let parts: Vec<Range<u64>> = (0..len.div_ceil(PART))
            .map(|i| {
                let s = offset + i * PART;
                s..(s + PART).min(offset + len)
            })
            .collect();
        let mut out = Vec::new();
        out.try_reserve_exact(len as usize)
            .map_err(|_| Error::limit(format!("cannot allocate {len} bytes")))?;
        let mut stream =
            futures::stream::iter(parts.into_iter().map(|r| self.fetch(r))).buffered(CONCURRENCY);
        while let Some(part) = stream.try_next().await? {
            out.extend_from_slice(&part);
        }
        Ok(out)
    }

    fn check(&self, offset: u64, len: u64) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(truncated(offset, len, self.len)),
        }
    }
}

impl ByteSource for RemoteSource {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        // Checked against the object's size: never an allocation sized by an unchecked
        // number.
        self.check(offset, len)?;
        if len == 0 {
            return Ok(Cow::Owned(Vec::new()));
        }
        let v = runtime()?.block_on(self.fetch_split(offset, len))?;
        Ok(Cow::Owned(v))
    }
    fn read_ranges(&self, ranges: &[(u64, u64)]) -> Result<Vec<Cow<'_, [u8]>>> {
        for &(o, n) in ranges {
            self.check(o, n)?;
        }
        // Empty ranges are answered here (a zero-length range request is invalid).
        let rs: Vec<Range<u64>> = ranges
            .iter()
            .filter(|r| r.1 > 0)
            .map(|&(o, n)| o..o + n)
            .collect();
        let got = runtime()?.block_on(object_store::coalesce_ranges(
            &rs,
            |r| self.fetch(r),
            COALESCE_GAP,
        ))?;
        let mut got = got.into_iter();
        ranges
            .iter()
            .map(|r| match r.1 {
                0 => Ok(Cow::Owned(Vec::new())),
                _ => got
                    .next()
                    .map(|b| Cow::Owned(b.to_vec()))
                    .ok_or_else(|| Error::new(ErrorKind::Io, "a range went unanswered")),
            })
            .collect()
    }
    fn kind(&self) -> &'static str {
        "remote"
    }
}

fn changed(url: &str, ours: &str, theirs: &str) -> Error {
    Error::integrity(format!(
        "the object changed while it was read (ETag {ours} when opened, {theirs} now); no bytes of the new version were used"
    ))
    .in_file(url)
}

/// An object_store error as ours, in the file `url` (shown first), with what the store
/// said (which names the HTTP status). Never holds a credential: object_store's messages carry the
/// path and the server's reply, not the request headers.
pub(crate) fn store_error(url: &str, e: object_store::Error) -> Error {
    use object_store::Error as E;
    let kind = match &e {
        E::NotFound { .. } => ErrorKind::NotFound,
        E::Precondition { .. } => {
            return Error::integrity(
                "the object changed while it was read (its ETag no longer matches: HTTP 412 Precondition Failed); no bytes of the new version were used",
            )
            .in_file(url)
        }
        E::NotSupported { .. } => ErrorKind::Unsupported,
        _ => ErrorKind::Io,
    };
    Error::new(kind, chain(&e)).in_file(url)
}

/// An error and its causes, joined (reqwest hides the useful part in the sources).
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}
