//! The disk range cache: byte ranges fetched from remote objects, kept on disk so that
//! opening the same URL again fetches no object bytes.
//!
//! Where: [`RemoteOptions::cache_dir`], else `TESSERA_CACHE_DIR`, else
//! `$XDG_CACHE_HOME/tessera` (an absolute `XDG_CACHE_HOME`), else `~/.cache/tessera`;
//! entries live under its `ranges/` folder. Off with [`RemoteOptions::cache`] `false`
//! (the CLI's `--no-cache`, Python's `cache=False`) or `TESSERA_CACHE_MAX_MB=0`.
//!
//! Layout: `ranges/<url>/<version>/<start>-<end>`, where
//! - `<url>` is 32 hex digits of the BLAKE3 digest of the location normalised: an S3
//!   object's endpoint, bucket and key; an HTTP URL without its `user:password@`, its
//!   fragment and its secret-looking or `X-Amz-*` query parameters (a presigned URL's
//!   signature, credential, date and expiry: the same object signed again shares its
//!   entries). Nothing of the URL, and no secret, is written in the cache, in a name
//!   or in a file;
//! - `<version>` is 32 hex digits of the digest of the object's validator: its strong
//!   ETag, else its `Last-Modified` and size (a weak ETag added); an object with neither
//!   is not cached. Opening a URL whose validator changed removes the entries of its
//!   other versions: an entry is never used for a version other than its own;
//! - each entry holds the bytes `[start, end)` of that version after a 56-byte header:
//!   `TSRCACH1`, the start and the length (u64 little-endian) and the BLAKE3 digest of
//!   the bytes. A read checks all of it (the size of the file too) before it hands out a
//!   byte; a damaged or short entry is removed and the range fetched again.
//!
//! What is cached: every range [`super::RemoteSource`] fetches from the store (the first
//! bytes at open, the tail, read-ahead windows, a large read's 8 MiB parts), below its
//! read-ahead: a read answered from the cache goes on through the same checks and the
//! format's digests as fetched bytes. A request is answered from the cache when entries
//! cover it whole (one entry holding it, or several end to end); otherwise it is fetched
//! whole and stored. The `HEAD` of an open is always sent: it gives the current
//! validator (a presigned URL's first ranged `GET` likewise).
//!
//! Writes: the folders it makes are the user's only (mode 0700, entries 0600: they hold
//! the bytes of private objects); an entry is a temporary file (`.tmp-<pid>-<n>`) in its
//! folder, renamed over the name when complete, removed on any failure. Several
//! processes may share the cache:
//! an entry appears whole or not at all, and one vanishing between a listing and its
//! open is a miss. A cache that cannot be written (no home, read-only disk) is said
//! once on stderr and the reads go on without it; a cache never fails a read.
//!
//! Bound: `TESSERA_CACHE_MAX_MB` (default 2048) or [`RemoteOptions::cache_max_bytes`].
//! A write that would pass it first removes the entries used least recently (a use sets
//! the entry's modification time) until the cache is at most 90% of the bound with the
//! new entry; an entry larger than the bound is not written. Temporary files older than
//! an hour (a process killed while writing) are removed by the same pass.

use std::collections::HashMap;
use std::fs;
use std::io::{Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::RemoteOptions;

const MAGIC: &[u8; 8] = b"TSRCACH1";
/// Magic, start, length, BLAKE3 digest.
const HEADER: usize = 8 + 8 + 8 + 32;
/// The bound when `TESSERA_CACHE_MAX_MB` is unset.
const DEFAULT_MAX_MB: u64 = 2048;
/// Temporary files older than this are a killed writer's and are removed.
const ORPHAN_AGE: Duration = Duration::from_secs(3600);

/// Requests answered from the cache, and the bytes they gave, in this process.
pub(super) static HITS: AtomicU64 = AtomicU64::new(0);
/// See [`HITS`].
pub(super) static HIT_BYTES: AtomicU64 = AtomicU64::new(0);
/// Set once the unwritable cache was reported (once per process).
static WARNED: AtomicBool = AtomicBool::new(false);
/// Names temporary files uniquely within the process.
static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);
/// Bytes each cache root (its `ranges/`) holds, as this process last counted them plus
/// what it has written since: a write walks the folder only when this says the bound
/// would be passed.
static USAGE: Mutex<Option<HashMap<PathBuf, u64>>> = Mutex::new(None);
/// Roots found unwritable: not tried again by this process.
static UNWRITABLE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The cache folder and bound `opts` and the environment give, or `None` when caching
/// is off (or there is nowhere to put it: no home).
pub(crate) fn settings(opts: &RemoteOptions) -> Option<(PathBuf, u64)> {
    if !opts.cache {
        return None;
    }
    let env = |n: &str| std::env::var_os(n).filter(|v| !v.is_empty());
    let max = match opts.cache_max_bytes {
        Some(b) => b,
        None => env("TESSERA_CACHE_MAX_MB")
            .and_then(|v| v.to_str()?.trim().parse::<u64>().ok())
            .unwrap_or(DEFAULT_MAX_MB)
            .saturating_mul(1 << 20),
    };
    if max == 0 {
        return None;
    }
    let dir = match &opts.cache_dir {
        Some(d) => d.clone(),
        None => env("TESSERA_CACHE_DIR")
            .map(PathBuf::from)
            .or_else(|| {
                env("XDG_CACHE_HOME")
                    .map(PathBuf::from)
                    .filter(|p| p.is_absolute())
                    .map(|p| p.join("tessera"))
            })
            .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".cache").join("tessera")))?,
    };
    Some((dir, max))
}

/// The key material of an HTTP URL: without `user:password@`, fragment, and secret or
/// `X-Amz-*` query parameters (kept in their order otherwise).
pub(crate) fn http_key(u: &str) -> String {
    let u = u.split('#').next().unwrap_or("");
    let (scheme, rest) = u.split_once("://").unwrap_or(("", u));
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, q),
        None => (rest, ""),
    };
    let end = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..end];
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let kept: Vec<&str> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .filter(|p| {
            let name = p.split('=').next().unwrap_or("").to_ascii_lowercase();
            !(name.starts_with("x-amz-") || name == "expires" || super::location::is_secret(&name))
        })
        .collect();
    let mut key = format!(
        "http\n{}://{}{}",
        scheme.to_ascii_lowercase(),
        host.to_ascii_lowercase(),
        &rest[end..]
    );
    if !kept.is_empty() {
        key.push('?');
        key.push_str(&kept.join("&"));
    }
    key
}

/// The key material of an S3 object: the endpoint (or AWS), bucket and key.
pub(crate) fn s3_key(endpoint: Option<&str>, bucket: &str, key: &str) -> String {
    format!(
        "s3\n{}\n{bucket}\n{key}",
        endpoint.map(http_key).unwrap_or_else(|| "aws".into())
    )
}

/// What identifies one version of an object: its strong ETag, else its
/// `Last-Modified` and size; `None` when the server gives neither.
fn validator(meta: &object_store::ObjectMeta) -> Option<String> {
    match &meta.e_tag {
        Some(e) if !e.starts_with("W/") && !e.is_empty() => Some(format!("etag\n{e}")),
        weak => {
            let at = meta.last_modified.timestamp_nanos_opt().unwrap_or(0);
            (at != 0).then(|| {
                format!(
                    "modified\n{at}\n{}\n{}",
                    meta.size,
                    weak.as_deref().unwrap_or("")
                )
            })
        }
    }
}

fn hex(digest: &blake3::Hash) -> String {
    digest.to_hex()[..32].to_string()
}

/// The cached ranges of one version of one object.
pub(crate) struct RangeCache {
    /// `<cache>/ranges`.
    root: PathBuf,
    /// `root/<url>/<version>`.
    dir: PathBuf,
    max: u64,
}

impl RangeCache {
    /// The cache of the object `key` (from [`http_key`] or [`s3_key`]) at the version
    /// `meta` describes, or `None` when caching is off or the object has no validator.
    /// The entries of the object's other versions are removed.
    pub(crate) fn open(
        opts: &RemoteOptions,
        key: &str,
        meta: &object_store::ObjectMeta,
    ) -> Option<RangeCache> {
        let (dir, max) = settings(opts)?;
        let version = validator(meta)?;
        let root = dir.join("ranges");
        let object = root.join(hex(&blake3::hash(key.as_bytes())));
        let name = hex(&blake3::hash(
            format!("{version}\n{}", meta.size).as_bytes(),
        ));
        if let Ok(listing) = fs::read_dir(&object) {
            for e in listing.flatten() {
                if e.file_name().to_str() != Some(name.as_str()) {
                    let _ = fs::remove_dir_all(e.path());
                }
            }
        }
        Some(RangeCache {
            dir: object.join(name),
            root,
            max,
        })
    }

    /// `r` when entries of this version cover it whole, each checked; `None` otherwise
    /// (a damaged entry is removed).
    pub(crate) fn get(&self, r: Range<u64>) -> Option<Vec<u8>> {
        if r.start >= r.end {
            return None;
        }
        let mut entries: Vec<(u64, u64)> = fs::read_dir(&self.dir)
            .ok()?
            .flatten()
            .filter_map(|e| parse_name(e.file_name().to_str()?))
            .collect();
        entries.sort_unstable();
        // The fewest entries end to end from r.start: at each point the one reaching
        // furthest.
        let mut picks = Vec::new();
        let mut at = r.start;
        while at < r.end {
            let best = entries
                .iter()
                .filter(|&&(s, e)| s <= at && at < e)
                .max_by_key(|&&(_, e)| e)?;
            picks.push(*best);
            at = best.1;
        }
        let len = usize::try_from(r.end - r.start).ok()?;
        if let [(s, e)] = picks[..] {
            if (s, e) == (r.start, r.end) {
                // The entry itself: no copy.
                let body = self.load(s, e)?;
                HITS.fetch_add(1, Ordering::Relaxed);
                HIT_BYTES.fetch_add(len as u64, Ordering::Relaxed);
                return Some(body);
            }
        }
        let mut out = Vec::new();
        out.try_reserve_exact(len).ok()?;
        for (s, e) in picks {
            let body = self.load(s, e)?;
            let from = r.start.max(s);
            let to = r.end.min(e);
            out.extend_from_slice(&body[(from - s) as usize..(to - s) as usize]);
        }
        HITS.fetch_add(1, Ordering::Relaxed);
        HIT_BYTES.fetch_add(len as u64, Ordering::Relaxed);
        Some(out)
    }

    /// The entry `[s, e)`, checked (its size, header and digest), its time of use set;
    /// `None` when it vanished or is damaged (then removed).
    fn load(&self, s: u64, e: u64) -> Option<Vec<u8>> {
        let path = self.dir.join(entry_name(s, e));
        let len = e - s;
        if len > self.max {
            let _ = fs::remove_file(&path);
            return None;
        }
        let mut f = fs::File::open(&path).ok()?;
        let good = (|| {
            let size = f.metadata().ok()?.len();
            if size != HEADER as u64 + len {
                return None;
            }
            let mut head = [0u8; HEADER];
            f.read_exact(&mut head).ok()?;
            let mut body = Vec::new();
            body.try_reserve_exact(len as usize).ok()?;
            (&mut f).take(len).read_to_end(&mut body).ok()?;
            let ok = &head[..8] == MAGIC
                && head[8..16] == s.to_le_bytes()
                && head[16..24] == len.to_le_bytes()
                && body.len() as u64 == len
                && blake3::hash(&body) == blake3::Hash::from_bytes(head[24..].try_into().ok()?);
            ok.then_some(body)
        })();
        match good {
            Some(body) => {
                let _ = f.set_modified(SystemTime::now());
                Some(body)
            }
            None => {
                let _ = fs::remove_file(&path);
                None
            }
        }
    }

    /// Stores `data`, the bytes from `start`: atomically, within the bound, never an
    /// error (a cache that cannot be written is reported once).
    pub(crate) fn put(&self, start: u64, data: &[u8]) {
        let len = data.len() as u64;
        let total = HEADER as u64 + len;
        if len == 0 || total > self.max || unwritable(&self.root) {
            return;
        }
        if let Err(e) = private_dirs(&self.dir) {
            return give_up(&self.root, &e);
        }
        self.make_room(total);
        let tmp = self.dir.join(format!(
            ".tmp-{}-{}",
            std::process::id(),
            TEMP_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut o = fs::OpenOptions::new();
            o.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
            let mut f = o.open(&tmp)?;
            let mut head = Vec::with_capacity(HEADER);
            head.extend_from_slice(MAGIC);
            head.extend_from_slice(&start.to_le_bytes());
            head.extend_from_slice(&len.to_le_bytes());
            head.extend_from_slice(blake3::hash(data).as_bytes());
            f.write_all(&head)?;
            f.write_all(data)?;
            drop(f);
            fs::rename(&tmp, self.dir.join(entry_name(start, start + len)))
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            // A folder another process's eviction removed meanwhile is no failure.
            if e.kind() != std::io::ErrorKind::NotFound {
                give_up(&self.root, &e);
            }
        }
    }

    /// Makes room for `need` bytes: when this process's count says the bound would be
    /// passed, counts again and removes the entries used least recently.
    fn make_room(&self, need: u64) {
        let mut usage = USAGE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let usage = usage.get_or_insert_with(HashMap::new);
        let used = usage
            .entry(self.root.clone())
            .or_insert_with(|| walk(&self.root).iter().map(|e| e.1).sum());
        if *used + need <= self.max {
            *used += need;
            return;
        }
        let mut entries = walk(&self.root);
        entries.sort_by_key(|e| e.2);
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        // Down to 90% of the bound with the new entry (so that the next writes do not
        // walk again at once), or to the bound for an entry larger than 90% of it.
        let limit = match self.max / 10 * 9 {
            l if need <= l => l,
            _ => self.max,
        };
        for (path, size, _) in &entries {
            if total + need <= limit {
                break;
            }
            let _ = fs::remove_file(path);
            total -= size;
            if let Some(dir) = path.parent() {
                // Only when empty; the version folder, then the URL's.
                if fs::remove_dir(dir).is_ok() {
                    if let Some(up) = dir.parent() {
                        let _ = fs::remove_dir(up);
                    }
                }
            }
        }
        *used = total + need;
    }
}

/// `dir` and the folders above it that are missing, readable by the user only (the
/// bytes of private objects are cached there).
fn private_dirs(dir: &Path) -> std::io::Result<()> {
    let mut b = fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir)
}

/// Every entry under `root`: path, size and time of last use; temporary files a killed
/// writer left are removed.
fn walk(root: &Path) -> Vec<(PathBuf, u64, SystemTime)> {
    let mut out = Vec::new();
    let now = SystemTime::now();
    let list = |p: &Path| fs::read_dir(p).into_iter().flatten().flatten();
    for object in list(root) {
        for version in list(&object.path()) {
            for entry in list(&version.path()) {
                let Ok(meta) = entry.metadata() else { continue };
                let when = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                let name = entry.file_name();
                let name = name.to_str().unwrap_or("");
                if name.starts_with(".tmp-") {
                    if now.duration_since(when).unwrap_or_default() > ORPHAN_AGE {
                        let _ = fs::remove_file(entry.path());
                    }
                    continue;
                }
                if parse_name(name).is_some() {
                    out.push((entry.path(), meta.len(), when));
                }
            }
        }
    }
    out
}

fn entry_name(s: u64, e: u64) -> String {
    format!("{s}-{e}")
}

/// `(start, end)` of an entry's name (`start-end`, start before end).
fn parse_name(name: &str) -> Option<(u64, u64)> {
    let (s, e) = name.split_once('-')?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(s) || !digits(e) {
        return None;
    }
    let (s, e) = (s.parse().ok()?, e.parse().ok()?);
    (s < e).then_some((s, e))
}

fn unwritable(root: &Path) -> bool {
    let list = UNWRITABLE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    list.iter().any(|r| r == root)
}

/// The cache at `root` cannot be written: not tried again; said once per process.
fn give_up(root: &Path, e: &std::io::Error) {
    UNWRITABLE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(root.to_path_buf());
    if !WARNED.swap(true, Ordering::Relaxed) {
        let dir = root.parent().unwrap_or(root);
        eprintln!(
            "tessera: warning: cannot write the remote read cache at {} ({e}); reading without it (TESSERA_CACHE_DIR moves it, --no-cache or cache=False turns it off)",
            dir.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_leave_out_credentials_and_signatures() {
        let a = http_key(
            "https://user:pw@Example.com/a/m.gguf?X-Amz-Signature=s1&X-Amz-Date=1&download=true#f",
        );
        let b =
            http_key("https://example.com/a/m.gguf?X-Amz-Signature=s2&X-Amz-Date=2&download=true");
        assert_eq!(a, b);
        assert_eq!(a, "http\nhttps://example.com/a/m.gguf?download=true");
        for secret in ["user", "pw", "s1", "Signature", "token"] {
            assert!(!a.contains(secret), "{secret} in {a}");
        }
        assert!(!http_key("https://h/m?token=abc&v=2").contains("abc"));
        assert_ne!(http_key("https://h/m?v=1"), http_key("https://h/m?v=2"));
        assert_ne!(
            s3_key(Some("http://127.0.0.1:9000"), "b", "k"),
            s3_key(None, "b", "k")
        );
    }

    #[test]
    fn entry_names_parse_strictly() {
        assert_eq!(parse_name("0-65536"), Some((0, 65536)));
        for bad in ["5-5", "6-5", "-5", "5-", "+1-2", "1-2-3", ".tmp-1-2", "a-b"] {
            assert_eq!(parse_name(bad), None, "{bad}");
        }
    }
}
