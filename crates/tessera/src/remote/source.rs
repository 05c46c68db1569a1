//! [`RemoteSource`]: a [`ByteSource`] over one remote object, read by range.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::{StreamExt, TryStreamExt};
use object_store::{GetOptions, GetRange, ObjectStoreExt};

use super::cache::RangeCache;
use super::store::{runtime, target, Target};
use super::{Location, RemoteOptions};
use crate::error::{Error, ErrorKind, Result};
use crate::source::{truncated, ByteSource};

/// Sequential reads closer than this count as one run (read-ahead).
const COALESCE_GAP: u64 = 1 << 20;
/// Ranges of one `read_ranges` closer than this are fetched as one request (the bytes
/// between them fetched and dropped): a request costs about what this many bytes do
/// on a fast link, and a slice's overhead stays within it per range.
const RANGES_GAP: u64 = 64 << 10;
/// A single read larger than this is split into parts of this size fetched in parallel.
const PART: u64 = 8 << 20;
/// A body cut short is fetched again this many times.
const BODY_RETRIES: u32 = 3;
/// Bytes fetched from the start of the object when it is opened (the whole object when
/// it is at most twice this): most formats' index (safetensors' header, GGUF's keys
/// and tensor infos, npy's header, AERO's and FOLD's control chunks) fits, and opening
/// takes one request after the `HEAD` instead of one per header field.
const HEAD_CACHE: u64 = 64 << 10;
/// Bytes fetched from the end, once, by the first read that falls in them (zTensor's
/// footer and index, zip's central directory: npz and PyTorch checkpoints).
const TAIL_CACHE: u64 = 64 << 10;
/// Read-ahead on sequential reads: after [`AHEAD_AFTER`] reads in a row that each start
/// where the last ended (within [`COALESCE_GAP`]), a read fetches a window beyond what
/// it asked for, [`AHEAD_FIRST`] bytes, doubling on every further sequential read up
/// to [`AHEAD_MAX`] — so reading a whole object tensor by tensor (convert, verify,
/// stats) costs one request per window instead of one per tensor, while a read of one
/// tensor, or of a few, fetches what it asked for.
const AHEAD_AFTER: u32 = 2;
/// See [`AHEAD_AFTER`].
const AHEAD_FIRST: u64 = 8 << 20;
/// See [`AHEAD_AFTER`].
const AHEAD_MAX: u64 = 64 << 20;
/// Read-ahead starts only once the sequential run has read this many bytes: a few
/// small reads in a row (a zip's headers, an index read piece by piece) are header
/// probes, not a pass over the tensors, and fetch what they ask for.
const AHEAD_MIN_RUN: u64 = 1 << 20;
/// Windows kept: the newest two, so a thread still reading in the last window (reads of
/// one source from several threads) finds it there while another reads the next.
const AHEAD_KEEP: usize = 2;

/// An object of at most this many bytes on a server that ignores `Range` is fetched
/// whole, by one plain `GET`, when opened (an index file, a small model); a larger one
/// is refused, saying the server needs ranges.
const WHOLE_MAX: u64 = 16 << 20;
/// How the error for a server that ignores `Range` starts (see [`no_ranges`]).
const NO_RANGES: &str = "the server ignores HTTP Range requests";

/// Requests and body bytes of every [`RemoteSource`] in this process (the CLI's progress
/// bar and the benchmark read them: [`super::totals`]).
pub(super) static TOTAL_REQUESTS: AtomicU64 = AtomicU64::new(0);
/// See [`TOTAL_REQUESTS`].
pub(super) static TOTAL_FETCHED: AtomicU64 = AtomicU64::new(0);

/// Counts one request made outside a [`RemoteSource`] (a probe or a listing).
pub(super) fn count_request() {
    TOTAL_REQUESTS.fetch_add(1, Ordering::Relaxed);
}

/// A failed fetch: worth another try (the body broke off) or not.
enum Retry {
    Body(Error),
    No(Error),
}

/// One remote object (S3 or HTTP). Opening it sends one `HEAD` for its size and ETag;
/// every read after that is a ranged `GET` with `If-Match: <etag>`, so an object
/// replaced between two requests fails with an `Integrity` error naming the URL instead
/// of mixing bytes of two versions. A body shorter than the range asked for is an error.
/// Each range is looked up in the disk cache of this version first (`cache.rs`), and
/// what is fetched is kept there.
pub struct RemoteSource {
    target: Target,
    len: u64,
    etag: Option<String>,
    requests: AtomicU64,
    fetched: AtomicU64,
    /// The disk cache of this object's version (`None`: off, or no validator).
    cache: Option<RangeCache>,
    /// Bytes answered from the disk cache.
    from_cache: AtomicU64,
    /// Bytes `[0, head.len())`, fetched at open.
    head: Vec<u8>,
    /// Bytes `[len - tail.len(), len)`, fetched by the first read inside them.
    tail: std::sync::OnceLock<Vec<u8>>,
    /// The read-ahead state ([`AHEAD_AFTER`]).
    ahead: std::sync::Mutex<Ahead>,
    /// Signalled when a window being fetched arrives (or fails): a read inside it
    /// waits for it rather than fetching the same bytes again (reads of one source
    /// from several threads: a set's tensors read in parallel).
    arrived: std::sync::Condvar,
    /// The pool: a permit per request in flight ([`RemoteOptions::concurrency`]),
    /// shared by every read of this object from every thread.
    pool: tokio::sync::Semaphore,
    /// Its size.
    pool_size: usize,
    /// Requests in flight now.
    in_flight: std::sync::atomic::AtomicUsize,
    /// The most there were at once ([`RemoteSource::peak_in_flight`]).
    peak: std::sync::atomic::AtomicUsize,
}

/// Where sequential reads are, and the windows fetched ahead of them.
#[derive(Default)]
struct Ahead {
    /// Where the last read ended.
    next: u64,
    /// Sequential reads in a row so far.
    run: u32,
    /// Bytes those reads asked for.
    run_bytes: u64,
    /// The last window's size (0: none yet).
    size: u64,
    /// Windows `(start, bytes)`, oldest first, at most [`AHEAD_KEEP`].
    windows: Vec<(u64, bytes::Bytes)>,
    /// Fetches in flight, `(start, end, window)`: no window is fetched over one, and a
    /// read starting in a window being fetched waits for it.
    pending: Vec<(u64, u64, bool)>,
    /// Where the last few reads outside any window started (another thread's reads
    /// may run ahead of this one's): a window stops there rather than fetch them again.
    recent: Vec<u64>,
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
    /// Opens the object at `loc`: a `HEAD` request, then its first bytes — or, for a
    /// presigned URL, whose signature covers `GET` only (S3 refuses a `HEAD` with it),
    /// a ranged `GET` of the first bytes whose reply gives the size and ETag too.
    pub fn open(loc: &Location, opts: &RemoteOptions) -> Result<RemoteSource> {
        let target = target(loc, opts)?;
        let (meta, first) = match loc.is_presigned() {
            false => {
                let meta = match runtime()?.block_on(target.store.head(&target.path)) {
                    Ok(meta) => meta,
                    Err(e @ object_store::Error::NotFound { .. }) => {
                        return Err(not_found(&target, loc, e))
                    }
                    Err(e) => return Err(store_error(&target.url, e)),
                };
                (meta, bytes::Bytes::new())
            }
            true => runtime()?
                .block_on(first_bytes(&target))
                .map_err(|e| store_error(&target.url, e))?,
        };
        TOTAL_REQUESTS.fetch_add(1, Ordering::Relaxed);
        TOTAL_FETCHED.fetch_add(first.len() as u64, Ordering::Relaxed);
        let cache = RangeCache::open(opts, &target.cache_key, &meta);
        let mut src = RemoteSource {
            len: meta.size,
            etag: meta.e_tag,
            target,
            requests: AtomicU64::new(1),
            fetched: AtomicU64::new(first.len() as u64),
            cache,
            from_cache: AtomicU64::new(0),
            head: Vec::new(),
            tail: std::sync::OnceLock::new(),
            ahead: std::sync::Mutex::new(Ahead::default()),
            arrived: std::sync::Condvar::new(),
            pool: tokio::sync::Semaphore::new(opts.pool_size()),
            pool_size: opts.pool_size(),
            in_flight: std::sync::atomic::AtomicUsize::new(0),
            peak: std::sync::atomic::AtomicUsize::new(0),
        };
        let head = match src.len {
            n if n <= 2 * HEAD_CACHE => n,
            _ => HEAD_CACHE,
        };
        let have = first.len() as u64;
        if loc.is_presigned() && have != head.min(HEAD_CACHE) {
            return Err(Error::new(
                ErrorKind::Io,
                format!(
                    "bytes [0, {}) were asked for and {have} arrived",
                    head.min(HEAD_CACHE)
                ),
            )
            .in_file(src.target.url.clone()));
        }
        if let Some(c) = &src.cache {
            c.put(0, &first);
        }
        src.head = first.to_vec();
        if head > have {
            match runtime()?.block_on(src.fetch(have..head)) {
                Ok(rest) => src.head.extend_from_slice(&rest),
                // A server without ranges: a small object is fetched whole, once.
                Err(e) if e.message().starts_with(NO_RANGES) => {
                    if src.len > WHOLE_MAX {
                        return Err(Error::unsupported(format!(
                            "{NO_RANGES} (it answered a ranged GET with 200 and the whole object, not 206 Partial Content), and this object is {} bytes, more than the {} read whole without them: serve it from a server that supports ranges (nginx, S3 and most CDNs do), or download it first",
                            src.len, WHOLE_MAX
                        ))
                        .in_file(src.target.url.clone()));
                    }
                    src.head = runtime()?.block_on(src.fetch_whole())?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(src)
    }

    /// The whole object by one `GET` without a range (a server that ignores ranges),
    /// checked as a ranged read is: its ETag, its size and the body's length.
    async fn fetch_whole(&self) -> Result<Vec<u8>> {
        if let Some(b) = self.cached_range(0..self.len) {
            return Ok(b);
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        TOTAL_REQUESTS.fetch_add(1, Ordering::Relaxed);
        let url = &self.target.url;
        let opts = GetOptions {
            if_match: self.etag.clone(),
            ..GetOptions::default()
        };
        let got = (self.target.store)
            .get_opts(&self.target.path, opts)
            .await
            .map_err(|e| store_error(url, e))?;
        if let (Some(ours), Some(theirs)) = (&self.etag, &got.meta.e_tag) {
            if ours != theirs {
                return Err(changed(url, ours, theirs));
            }
        }
        let body = got.bytes().await.map_err(|e| store_error(url, e))?;
        self.fetched.fetch_add(body.len() as u64, Ordering::Relaxed);
        TOTAL_FETCHED.fetch_add(body.len() as u64, Ordering::Relaxed);
        if body.len() as u64 != self.len {
            return Err(Error::new(
                ErrorKind::Io,
                format!(
                    "the whole object ({} bytes) was asked for and {} arrived",
                    self.len,
                    body.len()
                ),
            )
            .in_file(url.clone()));
        }
        if let Some(c) = &self.cache {
            c.put(0, &body);
        }
        Ok(body.to_vec())
    }

    /// `r` from the disk cache, when its entries cover it (checked there).
    fn cached_range(&self, r: Range<u64>) -> Option<Vec<u8>> {
        let got = self.cache.as_ref()?.get(r)?;
        self.from_cache
            .fetch_add(got.len() as u64, Ordering::Relaxed);
        Some(got)
    }

    /// `[offset, offset + len)` when the cached first or last bytes hold it (the tail
    /// fetched on the first read inside it), else `None`; checked against the size.
    fn cached(&self, offset: u64, len: u64) -> Result<Option<&[u8]>> {
        let end = offset + len;
        if end <= self.head.len() as u64 {
            return Ok(Some(&self.head[offset as usize..end as usize]));
        }
        let tail_start = self.len.saturating_sub(TAIL_CACHE);
        if offset < tail_start || self.len <= 2 * HEAD_CACHE {
            return Ok(None);
        }
        let tail = match self.tail.get() {
            Some(t) => t,
            None => {
                let t = runtime()?
                    .block_on(self.fetch(tail_start..self.len))?
                    .to_vec();
                self.tail.get_or_init(|| t)
            }
        };
        let at = (offset - tail_start) as usize;
        Ok(Some(&tail[at..at + len as usize]))
    }

    /// The most range requests this object had in flight at once (never more than
    /// the pool's size, [`RemoteOptions::concurrency`]).
    pub fn peak_in_flight(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// The location, as shown in messages.
    pub fn url(&self) -> &str {
        &self.target.url
    }

    /// Requests sent so far (the `HEAD` included).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Body bytes received so far (from the network: not those the disk cache gave).
    pub fn bytes_fetched(&self) -> u64 {
        self.fetched.load(Ordering::Relaxed)
    }

    /// Bytes the disk cache answered so far, instead of the network.
    pub fn bytes_from_cache(&self) -> u64 {
        self.from_cache.load(Ordering::Relaxed)
    }

    /// One range: from the disk cache when it holds it, else one ranged GET, checked
    /// (its length, and the object's identity) and kept in the cache. A body cut short
    /// (a dropped connection: object_store retries failed requests, not failed bodies)
    /// is fetched again, up to [`BODY_RETRIES`] times with backoff.
    async fn fetch(&self, r: Range<u64>) -> Result<bytes::Bytes> {
        if let Some(b) = self.cached_range(r.clone()) {
            return Ok(b.into());
        }
        let mut attempt = 0;
        loop {
            match self.fetch_once(r.clone()).await {
                Err(Retry::Body(_)) if attempt < BODY_RETRIES => {
                    tokio::time::sleep(std::time::Duration::from_millis(100 << attempt)).await;
                    attempt += 1;
                }
                Err(Retry::Body(e) | Retry::No(e)) => return Err(e),
                Ok(b) => {
                    if let Some(c) = &self.cache {
                        c.put(r.start, &b);
                    }
                    return Ok(b);
                }
            }
        }
    }

    async fn fetch_once(&self, r: Range<u64>) -> std::result::Result<bytes::Bytes, Retry> {
        // A permit of the pool for the request and its body.
        let _permit = self
            .pool
            .acquire()
            .await
            .map_err(|_| Retry::No(Error::new(ErrorKind::Io, "the request pool closed")))?;
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(now, Ordering::Relaxed);
        let got = self.fetch_unpooled(r).await;
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        got
    }

    async fn fetch_unpooled(&self, r: Range<u64>) -> std::result::Result<bytes::Bytes, Retry> {
        let want = r.end - r.start;
        self.requests.fetch_add(1, Ordering::Relaxed);
        TOTAL_REQUESTS.fetch_add(1, Ordering::Relaxed);
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
            .map_err(|e| Retry::No(no_ranges(url, e)))?;
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
        TOTAL_FETCHED.fetch_add(body.len() as u64, Ordering::Relaxed);
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
        let mut stream = futures::stream::iter(parts.into_iter().map(|r| self.fetch(r)))
            .buffered(self.pool_size);
        while let Some(part) = stream.try_next().await? {
            out.extend_from_slice(&part);
        }
        Ok(out)
    }

    /// Each of `rs` (in any order): ranges closer than [`RANGES_GAP`] merged into one
    /// request, the requests sent on the pool (at most its size in flight: large ones
    /// split into parts of [`PART`], every part a request), each range cut from its
    /// request's bytes.
    async fn fetch_ranges(&self, rs: &[Range<u64>]) -> Result<Vec<bytes::Bytes>> {
        let mut order: Vec<usize> = (0..rs.len()).collect();
        order.sort_by_key(|&i| rs[i].start);
        let mut merged: Vec<Range<u64>> = Vec::new();
        let mut home = vec![0usize; rs.len()];
        for &i in &order {
            let r = &rs[i];
            match merged.last_mut() {
                Some(m) if r.start <= m.end.saturating_add(RANGES_GAP) => m.end = m.end.max(r.end),
                _ => merged.push(r.clone()),
            }
            home[i] = merged.len() - 1;
        }
        let fetched: Vec<bytes::Bytes> = futures::stream::iter(merged.iter().map(|m| async {
            self.fetch_split(m.start, m.end - m.start)
                .await
                .map(bytes::Bytes::from)
        }))
        .buffered(self.pool_size)
        .try_collect()
        .await?;
        Ok(rs
            .iter()
            .zip(&home)
            .map(|(r, &h)| {
                let at = (r.start - merged[h].start) as usize;
                fetched[h].slice(at..at + (r.end - r.start) as usize)
            })
            .collect())
    }

    /// `[offset, offset + len)` (past the cached first bytes) from the read-ahead
    /// window, or fetched — with a window beyond it when reads have been sequential.
    fn read_ahead(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        let end = offset + len;
        let lock = || {
            self.ahead
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        let (mut out, from, fetch_len) = {
            let mut a = lock();
            let sequential = offset >= a.next && offset - a.next <= COALESCE_GAP;
            a.run = if sequential { a.run + 1 } else { 0 };
            a.run_bytes = if sequential {
                a.run_bytes.saturating_add(len)
            } else {
                len
            };
            a.next = end;
            // Answered from the windows as far as they go: a window another thread is
            // fetching that holds the next byte needed is waited for; the newest window
            // holding it gives what it has, and the one after it (windows are placed end
            // to end) the next part — so a read across two windows fetches nothing.
            let mut out: Vec<u8> = Vec::new();
            let mut from = offset;
            loop {
                while a
                    .pending
                    .iter()
                    .any(|&(s, e, w)| w && from >= s && from < e)
                {
                    a = self
                        .arrived
                        .wait(a)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                let Some((s, d)) = a
                    .windows
                    .iter()
                    .rev()
                    .find(|(s, d)| from >= *s && from < s + d.len() as u64)
                else {
                    break;
                };
                let at = (from - s) as usize;
                let take = (end.min(s + d.len() as u64) - from) as usize;
                if out.is_empty() && from + take as u64 == end {
                    return Ok(d[at..at + take].to_vec());
                }
                out.extend_from_slice(&d[at..at + take]);
                from += take as u64;
                if from == end {
                    return Ok(out);
                }
            }
            let need = end - from;
            let mut fetch_len =
                if a.run >= AHEAD_AFTER && a.run_bytes >= AHEAD_MIN_RUN && need < AHEAD_MAX {
                    a.size = match a.size {
                        0 => AHEAD_FIRST,
                        s => (2 * s).min(AHEAD_MAX),
                    };
                    a.size.max(need).min(self.len - from)
                } else {
                    need
                };
            if fetch_len > need {
                // Never over bytes another window holds or another read is fetching
                // (one starting at `from` too: a direct read in flight).
                let next = (a.windows.iter().map(|(s, _)| *s))
                    .chain(a.pending.iter().map(|p| p.0))
                    .chain(a.recent.iter().copied())
                    .filter(|&s| s >= from)
                    .min();
                if let Some(n) = next {
                    fetch_len = fetch_len.min(n - from).max(need);
                }
            }
            a.pending.push((from, from + fetch_len, fetch_len > need));
            (out, from, fetch_len)
        };
        let need = (end - from) as usize;
        let windowed = fetch_len as usize > need;
        // The lock is not held while fetching: other threads' reads go on.
        let got = runtime().and_then(|rt| rt.block_on(self.fetch_split(from, fetch_len)));
        let settle = |window: Option<bytes::Bytes>| {
            let mut a = lock();
            a.pending
                .retain(|&(s, e, _)| (s, e) != (from, from + fetch_len));
            if window.is_none() {
                a.recent.push(from);
                if a.recent.len() > 8 {
                    a.recent.remove(0);
                }
            }
            if let Some(w) = window {
                a.windows.push((from, w));
                if a.windows.len() > AHEAD_KEEP {
                    a.windows.remove(0);
                }
            }
            drop(a);
            self.arrived.notify_all();
        };
        let got = match got {
            Err(e) => {
                settle(None);
                return Err(e);
            }
            Ok(g) => g,
        };
        if !windowed {
            settle(None);
            if out.is_empty() {
                return Ok(got);
            }
        }
        let got = bytes::Bytes::from(got);
        if windowed {
            settle(Some(got.clone()));
        }
        out.try_reserve_exact(need)
            .map_err(|_| Error::limit(format!("cannot allocate {len} bytes")))?;
        out.extend_from_slice(&got[..need]);
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
        if let Some(b) = self.cached(offset, len)? {
            return Ok(Cow::Borrowed(b));
        }
        // A read that starts in the first bytes fetches only the rest.
        let have = self.head.len() as u64;
        if offset < have {
            let mut v = Vec::new();
            v.try_reserve_exact(len as usize)
                .map_err(|_| Error::limit(format!("cannot allocate {len} bytes")))?;
            v.extend_from_slice(&self.head[offset as usize..]);
            v.extend(self.read_ahead(have, offset + len - have)?);
            return Ok(Cow::Owned(v));
        }
        self.read_ahead(offset, len).map(Cow::Owned)
    }
    fn read_ranges(&self, ranges: &[(u64, u64)]) -> Result<Vec<Cow<'_, [u8]>>> {
        for &(o, n) in ranges {
            self.check(o, n)?;
        }
        // Empty ranges, and those the cached first and last bytes hold, are answered
        // here (a zero-length range request is invalid).
        let mut local: Vec<Option<&[u8]>> = Vec::with_capacity(ranges.len());
        for &(o, n) in ranges {
            local.push(match n {
                0 => Some(&[][..]),
                _ => self.cached(o, n)?,
            });
        }
        let rs: Vec<Range<u64>> = ranges
            .iter()
            .zip(&local)
            .filter(|(_, l)| l.is_none())
            .map(|(&(o, n), _)| o..o + n)
            .collect();
        let got = runtime()?.block_on(self.fetch_ranges(&rs))?;
        let mut got = got.into_iter();
        local
            .into_iter()
            .map(|l| match l {
                Some(b) => Ok(Cow::Borrowed(b)),
                None => got
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

/// The object's metadata and its first [`HEAD_CACHE`] bytes (fewer when it is smaller)
/// from one ranged `GET`: the size from `Content-Range`, the ETag from the reply.
async fn first_bytes(
    t: &Target,
) -> std::result::Result<(object_store::ObjectMeta, bytes::Bytes), object_store::Error> {
    let opts = GetOptions {
        range: Some(GetRange::Bounded(0..HEAD_CACHE)),
        ..GetOptions::default()
    };
    let got = t.store.get_opts(&t.path, opts).await?;
    let meta = got.meta.clone();
    Ok((meta, got.bytes().await?))
}

/// A store error as ours; a `200` answering a ranged `GET` (a server that ignores
/// `Range`) says so plainly.
fn no_ranges(url: &str, e: object_store::Error) -> Error {
    let msg = chain(&e);
    if msg.contains("non-partial response when range requested")
        || msg.contains("Range request not supported")
    {
        return Error::unsupported(format!(
            "{NO_RANGES} (it answered a ranged GET with 200 and the whole object, not 206 Partial Content): serve the file from a server that supports ranges (nginx, S3 and most CDNs do), or download it first"
        ))
        .in_file(url);
    }
    store_error(url, e)
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
    let raw = scrub(&chain(&e));
    // The library's own words ("Object at location … not found: Client error with
    // status 404 Not Found: <?xml …") said as a user reads them; the server's reply
    // stays for anything else.
    let said = match &e {
        E::NotFound { .. } if raw.contains("NoSuchBucket") => match bucket_of(url) {
            Some(b) => format!("the bucket {b:?} does not exist (HTTP 404 NoSuchBucket)"),
            None => "the bucket does not exist (HTTP 404 NoSuchBucket)".into(),
        },
        E::NotFound { .. } => "no such object (HTTP 404 Not Found)".into(),
        E::PermissionDenied { .. } => {
            "access denied (HTTP 403 Forbidden): the credentials may not read this object".into()
        }
        E::Unauthenticated { .. } => {
            "not authenticated (HTTP 401): the server wants credentials".into()
        }
        _ => raw,
    };
    Error::new(kind, said).in_file(url)
}

/// An object not found (a `HEAD`'s bare 404, which says nothing of why): for an S3
/// location, one listing of the key's prefix — a request only on this path — tells a
/// missing bucket (`NoSuchBucket`) from a missing object.
fn not_found(target: &Target, loc: &Location, e: object_store::Error) -> Error {
    if let Location::S3 { bucket, .. } = loc {
        if let Ok(rt) = runtime() {
            let listed = rt.block_on(target.store.list_with_delimiter(Some(&target.path)));
            count_request();
            if let Err(le) = listed {
                if chain(&le).contains("NoSuchBucket") {
                    return Error::not_found(format!(
                        "the bucket {bucket:?} does not exist (HTTP 404 NoSuchBucket)"
                    ))
                    .in_file(target.url.clone());
                }
            }
        }
    }
    store_error(&target.url, e)
}

/// The bucket of an `s3://bucket/key` location, as shown.
fn bucket_of(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("s3://")?;
    rest.split('/').next().filter(|b| !b.is_empty())
}

/// `msg` with the secret-looking query values of any URL in it redacted (object_store's
/// messages quote the request URL, which may be presigned).
fn scrub(msg: &str) -> String {
    msg.split(' ')
        .map(|w| match w.contains("://") && w.contains('?') {
            true => super::location::redact_query(w),
            false => w.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
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
