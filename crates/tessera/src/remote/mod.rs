//! Files where they live: S3-compatible object storage and HTTP servers, read by range.
//!
//! Every binary reader asks its [`crate::source::SourceRef`] for byte ranges (the header,
//! the index, one tensor when asked); [`RemoteSource`] answers those with ranged `GET`s
//! through the `object_store` crate (Apache Arrow's S3 and HTTP clients), so opening a
//! remote file fetches its index and not its tensors. Formats read whole (WTXT's text)
//! are fetched whole, as they are from `pread`.
//!
//! Layout:
//! - [`location`]: [`Location::parse`] — `s3://bucket/key`, `http(s)://…`, `file://…`, or
//!   a plain path (always compiled, so a build without the `remote` feature can say so);
//! - `store` (feature `remote`): the client for a location — credentials from the
//!   environment (AWS variables, `AWS_ENDPOINT_URL` or [`RemoteOptions::endpoint`]),
//!   then the AWS profile files (`profile`: `AWS_PROFILE`, `~/.aws/credentials` and
//!   `config`), anonymous when none; for HTTP a bearer token only where it belongs:
//!   `TESSERA_HTTP_TOKEN` to the hosts `TESSERA_HTTP_TOKEN_HOSTS` names (or the URL's
//!   host with [`RemoteOptions::token`]), `HF_TOKEN` to Hugging Face over HTTPS),
//!   timeouts, retries with exponential backoff (object_store's `RetryConfig`: 5xx,
//!   429 and dropped connections are retried, up to 5 times within 20 s), and the one
//!   tokio runtime the requests run on;
//! - `source` (feature `remote`): [`RemoteSource`], the [`crate::source::ByteSource`];
//! - `upload` (feature `remote`): [`upload_file`], a local file to S3 as a multipart
//!   upload;
//! - `probe` (feature `remote`): [`exists`] (a `HEAD`) and [`list_dir`] (the objects
//!   under an S3 key prefix), with which the set opener finds an index beside a shard
//!   and the model in a directory URL.
//! - `cache` (feature `remote`): the disk range cache under [`RemoteSource`]'s
//!   read-ahead — every range fetched is kept (keyed by the URL's digest, the object's
//!   ETag and the range; each entry with its own BLAKE3 digest, written by temp file and
//!   rename, bounded by `TESSERA_CACHE_MAX_MB`), so a second open of a URL sends its
//!   `HEAD` and fetches no object bytes ([`RemoteOptions::cache`]).
//!
//! What is checked when:
//! - on open, one `HEAD` (the object's size and ETag; for a presigned URL, see below),
//!   then one ranged `GET` of its first 64 KiB (the whole object up to 128 KiB), which
//!   holds most formats' index;
//!   the last 64 KiB are fetched once by the first read inside them (indexes at the
//!   end: zTensor, zip). Reads those bytes hold are answered without a request; a
//!   reader with many small pieces to read at open (FOLD's chunk headers, an npz's
//!   member headers) asks for them in one `read_ranges` batch
//!   (`crate::source::Prefetched`);
//! - a server that ignores `Range` (a `200` with the whole object where a `206` was
//!   asked for): an object up to 16 MiB is fetched whole by one plain `GET` at open and
//!   read from memory; a larger one is refused, saying the server needs ranges;
//! - on every read: the range against the size (never an allocation sized by an
//!   unchecked number), `If-Match: <etag>` on the request, the ETag and size the
//!   response reports, and the body's length — an object replaced between requests is
//!   an `Integrity` error naming the URL, a short body an `Io` error; never mixed or
//!   short data;
//! - a range answered from the disk cache: the entry's own digest and size, for the
//!   version the open's `HEAD` reported (never another ETag's entries);
//! - after the bytes arrive (or come from the cache), the format's own digests, exactly as for a local file
//!   (`ReadOptions::verify`): an AERO page, a zTensor or FOLD chunk, a safetensors file
//!   has none — a flipped byte there is caught only where the format stores a digest.
//!
//! A permanent error (404, 403, a 500 that outlasts the retries) names the URL and the
//! HTTP status. Nothing here prints or logs a credential.
//!
//! Reads: [`RemoteSource`]'s `read_ranges` merges ranges less than 1 MiB apart
//! (`object_store::coalesce_ranges`) and fetches up to 10 at once; one large read is
//! split into 8 MiB parts fetched 8 at a time. Sequential reads fetch ahead (see
//! `source.rs`), never over bytes another thread's window or read holds.
//!
//! An HTTP URL's query string is sent with every request (presigned URLs,
//! `?download=true`); messages show it with secret-looking values (signature,
//! credential, token, key) redacted, and never a `user:password@`. A presigned URL
//! ([`Location::is_presigned`]) is signed for `GET` only — S3 answers a `HEAD` with it
//! 403 — so it is opened by a ranged `GET` of its first 64 KiB, whose reply gives the
//! size (`Content-Range`) and ETag the `HEAD` would have.
//!
//! Model sets by URL (an HF index, any GGUF split) open in `crate::set` (`remote.rs`),
//! each shard a [`RemoteSource`] beside the index. [`totals`] counts every request and
//! byte of the process (the CLI's progress line, the `remote` benchmark).
//!
//! Hand-written here: the URL split ([`Location`]) — object_store's own `parse_url`
//! needs a store per scheme and would accept schemes we do not build — and the AWS
//! profile files (`profile`, which says why).

#[cfg(feature = "remote")]
mod cache;
pub mod location;
#[cfg(feature = "remote")]
mod probe;
#[cfg(feature = "remote")]
mod profile;
#[cfg(feature = "remote")]
mod source;
#[cfg(feature = "remote")]
mod store;
#[cfg(feature = "remote")]
mod upload;

pub use location::Location;
#[cfg(feature = "remote")]
pub use probe::{exists, list_dir, list_subdirs};
#[cfg(feature = "remote")]
pub use source::RemoteSource;
#[cfg(feature = "remote")]
pub(crate) use store::runtime;
#[cfg(feature = "remote")]
pub use upload::{delete, upload_file, upload_files, write_staged};

/// How remote objects are reached (S3 credentials are never here: they come from the
/// environment), and whether the ranges fetched are kept in the disk cache
/// (`cache.rs`). Its `Debug` output never shows the bearer token.
#[derive(Clone)]
#[non_exhaustive]
pub struct RemoteOptions {
    /// An S3 endpoint (`http://127.0.0.1:9000`, MinIO, R2, …) instead of AWS's; when
    /// unset, `AWS_ENDPOINT_URL`.
    pub endpoint: Option<String>,
    /// Send `TESSERA_HTTP_TOKEN` as the bearer token to the location's own host (the
    /// CLI's `--token`); without it the token goes only to the hosts
    /// `TESSERA_HTTP_TOKEN_HOSTS` names. `HF_TOKEN` goes to Hugging Face over HTTPS only.
    pub token: bool,
    /// A bearer token, given as it is (Python's `token="…"`), sent to the location's own
    /// host over HTTP(S) in place of any from the environment; never sent elsewhere,
    /// never shown.
    pub bearer_token: Option<String>,
    /// Keep the ranges fetched in the disk cache, and answer reads from it (default
    /// `true`; the CLI's `--no-cache`, Python's `cache=False` set it `false`).
    pub cache: bool,
    /// The cache folder; when unset `TESSERA_CACHE_DIR`, else `$XDG_CACHE_HOME/tessera`,
    /// else `~/.cache/tessera`.
    pub cache_dir: Option<std::path::PathBuf>,
    /// The cache's bound in bytes; when unset `TESSERA_CACHE_MAX_MB` MiB (default 2048).
    pub cache_max_bytes: Option<u64>,
    /// At most this many range requests to one object in flight at once (every read
    /// of it, from every thread, shares the pool); when unset
    /// `TESSERA_REMOTE_CONCURRENCY`, else [`DEFAULT_CONCURRENCY`].
    pub concurrency: Option<usize>,
}

/// Range requests in flight per remote object by default: enough to fill a link of a
/// few Gbit/s at the tens of milliseconds of latency of an object store, few enough
/// not to be throttled by one (S3 serves thousands per second per prefix).
pub const DEFAULT_CONCURRENCY: usize = 16;

impl RemoteOptions {
    /// The pool size reads of one object use: [`RemoteOptions::concurrency`], else
    /// `TESSERA_REMOTE_CONCURRENCY`, else [`DEFAULT_CONCURRENCY`]; at least 1.
    pub fn pool_size(&self) -> usize {
        self.concurrency
            .or_else(|| {
                std::env::var("TESSERA_REMOTE_CONCURRENCY")
                    .ok()?
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap_or(DEFAULT_CONCURRENCY)
            .max(1)
    }
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            endpoint: None,
            token: false,
            bearer_token: None,
            cache: true,
            cache_dir: None,
            cache_max_bytes: None,
            concurrency: None,
        }
    }
}

impl std::fmt::Debug for RemoteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let bearer = match self.bearer_token {
            Some(_) => "<redacted>",
            None => "none",
        };
        f.debug_struct("RemoteOptions")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token)
            .field("bearer_token", &bearer)
            .field("cache", &self.cache)
            .field("cache_dir", &self.cache_dir)
            .field("cache_max_bytes", &self.cache_max_bytes)
            .field("concurrency", &self.concurrency)
            .finish()
    }
}

crate::setters::setters!(RemoteOptions {
    /// Sets `endpoint`, an S3 endpoint instead of AWS's.
    endpoint: Option<String>,
    /// Sets `token`: `TESSERA_HTTP_TOKEN` to the location's own host.
    token: bool,
    /// Sets `bearer_token`, a token sent to the location's own host.
    bearer_token: Option<String>,
    /// Sets `cache`: keep fetched ranges in the disk cache and read from it.
    cache: bool,
    /// Sets `cache_dir`, the cache folder.
    cache_dir: Option<std::path::PathBuf>,
    /// Sets `cache_max_bytes`, the cache's bound.
    cache_max_bytes: Option<u64>,
    /// Sets `concurrency`, the range requests to one object in flight at once.
    concurrency: Option<usize>,
});

/// Requests sent and body bytes received by every remote source of this process so far
/// (`(0, 0)` in a build without the `remote` feature): what the CLI's progress bar shows
/// and the benchmark counts.
pub fn totals() -> (u64, u64) {
    #[cfg(feature = "remote")]
    {
        use std::sync::atomic::Ordering::Relaxed;
        (
            source::TOTAL_REQUESTS.load(Relaxed),
            source::TOTAL_FETCHED.load(Relaxed),
        )
    }
    #[cfg(not(feature = "remote"))]
    {
        (0, 0)
    }
}

/// Remote requests answered from the disk cache, and the bytes they gave, in this
/// process so far (`(0, 0)` without the `remote` feature). These are not in [`totals`],
/// which counts the network only.
pub fn cache_totals() -> (u64, u64) {
    #[cfg(feature = "remote")]
    {
        use std::sync::atomic::Ordering::Relaxed;
        (cache::HITS.load(Relaxed), cache::HIT_BYTES.load(Relaxed))
    }
    #[cfg(not(feature = "remote"))]
    {
        (0, 0)
    }
}

/// True when this build reads remote locations (the `remote` feature).
pub const ENABLED: bool = cfg!(feature = "remote");

/// Writes one output, or a set of files, at `dest`. `write(path)` writes it at a local
/// path and returns its value and the files it wrote, in the order they must become
/// visible (shards or side files first, the index or main file last). A local `dest`
/// is written in place (each file atomically, by the writer); a remote one is written
/// in a staging directory and uploaded ([`write_staged`]: refused before anything is
/// written if the target cannot take it, each object complete or absent). Returns the
/// value and the files written, as text (local paths, or URLs: a path would fold
/// `s3://` into `s3:/`), in that order.
pub fn write_at<T>(
    dest: &Location,
    opts: &RemoteOptions,
    write: impl FnOnce(&std::path::Path) -> crate::Result<(T, Vec<std::path::PathBuf>)>,
) -> crate::Result<(T, Vec<String>)> {
    match dest {
        Location::Local(path) => {
            let (value, files) = write(path)?;
            let _ = opts;
            Ok((
                value,
                files.iter().map(|p| p.display().to_string()).collect(),
            ))
        }
        #[cfg(feature = "remote")]
        _ => {
            let (value, uploaded) = write_staged(dest, opts, write)?;
            Ok((value, uploaded.iter().map(Location::display).collect()))
        }
        #[cfg(not(feature = "remote"))]
        _ => Err(not_enabled(dest)),
    }
}

/// The error for a remote location in a build without the `remote` feature.
pub fn not_enabled(loc: &Location) -> crate::Error {
    crate::Error::unsupported(format!(
        "{}: this build of tessera reads local files only (built without the `remote` feature)",
        loc.display()
    ))
}
