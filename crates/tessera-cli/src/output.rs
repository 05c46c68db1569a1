//! Shared CLI plumbing: opening inputs, progress bars, small formatting helpers.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use tessera::{Container, ReadOptions, TensorSource};

use crate::cli::{AuditReadArgs, ReadArgs};

/// Reading options from the shared flags.
pub fn read_options(path: &Path, read: &ReadArgs) -> anyhow::Result<ReadOptions> {
    let args = &read.input;
    let mut opts = ReadOptions::default()
        .path(Some(path.to_path_buf()))
        .salvage(args.salvage)
        .verify(!read.no_verify)
        .shard_only(args.shard_only);
    for id in &args.identity {
        let text = std::fs::read_to_string(id)
            .with_context(|| format!("reading identity file {}", id.display()))?;
        opts.age_identities.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(String::from),
        );
    }
    if let Some(p) = &args.input_hmac_key_file {
        opts.hmac_key =
            Some(std::fs::read(p).with_context(|| format!("reading HMAC key {}", p.display()))?);
    }
    if let Some(p) = &args.passphrase_file {
        let text = std::fs::read_to_string(p)
            .with_context(|| format!("reading passphrase file {}", p.display()))?;
        opts.age_passphrase = Some(text.trim_end_matches(['\n', '\r']).to_string());
    }
    Ok(opts)
}

/// Maps `path` (a file, or a model set by its index, any shard or its directory), opens
/// it as whatever format it is, and runs `f` on it. Tensor and chunk
/// reads check every digest the file stores for their bytes unless `--no-verify`, which
/// is announced on stderr.
pub fn with_file<T>(
    path: &Path,
    args: &ReadArgs,
    f: impl FnOnce(&dyn Container) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    if args.no_verify {
        crate::term::warn(&format!(
            "note: --no-verify: the digests {} stores are not checked; its bytes are used as stored",
            shown(path)
        ));
    }
    open_with(path, args, read_options(path, args)?, f)
}

/// [`with_file`] for the verbs that audit a file rather than hand its bytes out
/// (`inspect`, `verify`): a part too damaged to list is reported, not fatal.
/// `--no-verify` means nothing to them: they do not offer it ([`AuditReadArgs`]).
pub fn with_file_audit<T>(
    path: &Path,
    args: &AuditReadArgs,
    f: impl FnOnce(&dyn Container) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    with_opened_audit(path, args, |opened| f(opened.container()))
}

/// [`with_file_audit`] handing over what was opened (a file or a set), for `inspect`,
/// which asks a set it printed whether a plain open refuses it
/// ([`tessera::set::ModelSet::refusal`]).
pub fn with_opened_audit<T>(
    path: &Path,
    args: &AuditReadArgs,
    f: impl FnOnce(&tessera::set::Opened) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let args = &args.to_read();
    let mut opts = read_options(path, args)?;
    opts.audit = true;
    open_opened(path, args, opts, f)
}

/// A path or URL as every printer shows it (text and `--json`): a URL with its
/// `user:password@` and secret-looking query values (a presigned URL's signature,
/// credential, token) redacted ([`tessera::Location::display`]), a path as it is.
pub fn shown(path: &Path) -> String {
    match tessera::Location::from_path(path) {
        Ok(l) => l.display(),
        Err(_) => path.display().to_string(),
    }
}

/// The global `--no-cache`, set once by [`crate::run`].
static NO_CACHE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Sets what [`remote_options`] says of the disk cache (`--no-cache`).
pub fn set_no_cache(no_cache: bool) {
    NO_CACHE.store(no_cache, std::sync::atomic::Ordering::Relaxed);
}

/// How remote locations are reached (`--endpoint`, `--token`), and whether the ranges
/// fetched go through the disk cache (not with the global `--no-cache`).
pub fn remote_options(args: &ReadArgs) -> tessera::remote::RemoteOptions {
    tessera::remote::RemoteOptions::default()
        .endpoint(args.input.endpoint.clone())
        .token(args.input.token)
        .cache(!NO_CACHE.load(std::sync::atomic::Ordering::Relaxed))
}

fn open_with<T>(
    path: &Path,
    args: &ReadArgs,
    opts: ReadOptions,
    f: impl FnOnce(&dyn Container) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    open_opened(path, args, opts, |opened| f(opened.container()))
}

fn open_opened<T>(
    path: &Path,
    args: &ReadArgs,
    opts: ReadOptions,
    f: impl FnOnce(&tessera::set::Opened) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    // A file, an index, a shard of a set, a directory, or a URL (s3://, http(s)://,
    // file://); the library's errors name the file they are about.
    // A remote location's fetched bytes on stderr while the verb works (over a second).
    let _fetching = tessera::Location::from_path(path)
        .ok()
        .filter(tessera::Location::is_remote)
        .map(|l| FetchProgress::start(l.display()));
    let opts = opts.remote(remote_options(args));
    let opened = tessera::open_path(path, &opts).map_err(anyhow::Error::new)?;
    // Test hook (feature `test-hooks`, never in a user's build): a pause after the open
    // lets a test change the input underneath.
    #[cfg(feature = "test-hooks")]
    if let Some(ms) = std::env::var("TESSERA_TEST_PAUSE_AFTER_OPEN_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(Duration::from_millis(ms));
    }
    f(&opened)
}

/// The bar: what, a bar as wide as the terminal leaves room for, bytes done of all, the
/// current rate, the time left and the time spent.
pub const PROGRESS_TEMPLATE: &str =
    "{msg} [{wide_bar}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta} ({elapsed})";

/// A progress bar on stderr that shows itself only once the work has taken over a
/// second, and never when stderr is not a terminal.
pub struct Progress {
    bar: indicatif::ProgressBar,
    start: Instant,
    shown: std::sync::atomic::AtomicBool,
    enabled: bool,
}

impl Progress {
    /// A bar for `total` bytes of `what`.
    pub fn new(total: u64, what: &str) -> Progress {
        let bar = indicatif::ProgressBar::hidden();
        bar.set_length(total);
        if let Ok(style) = indicatif::ProgressStyle::with_template(PROGRESS_TEMPLATE) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what.to_string());
        Progress {
            bar,
            start: Instant::now(),
            shown: std::sync::atomic::AtomicBool::new(false),
            enabled: std::io::stderr().is_terminal(),
        }
    }
    /// Advances by `n`.
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
        use std::sync::atomic::Ordering::Relaxed;
        if self.enabled
            && !self.shown.load(Relaxed)
            && self.start.elapsed() > Duration::from_secs(1)
        {
            self.bar
                .set_draw_target(indicatif::ProgressDrawTarget::stderr());
            self.shown.store(true, Relaxed);
            BAR_SHOWN.store(true, Ordering::Relaxed);
        }
    }
    /// Replaces the bar's label.
    pub fn set_message(&self, msg: String) {
        self.bar.set_message(msg);
    }
    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// A source that advances a progress bar as a writer pulls each tensor from it.
pub struct ProgressSource<'a> {
    inner: &'a dyn TensorSource,
    progress: Progress,
    /// The label, to which the bytes fetched from a remote location are added.
    what: String,
}

impl<'a> ProgressSource<'a> {
    /// Wraps `inner`; the bar counts the dense bytes of its tensors.
    pub fn new(inner: &'a dyn TensorSource, what: &str) -> ProgressSource<'a> {
        let total = inner
            .tensor_infos()
            .iter()
            .map(|t| t.dense_nbytes().unwrap_or(0))
            .sum();
        ProgressSource {
            inner,
            progress: Progress::new(total, what),
            what: what.to_string(),
        }
    }
    /// Removes the bar.
    pub fn finish(self) {
        self.progress.finish();
    }
}

impl TensorSource for ProgressSource<'_> {
    fn metadata(&self) -> &tessera::Metadata {
        self.inner.metadata()
    }
    fn tensor_infos(&self) -> &[tessera::TensorInfo] {
        self.inner.tensor_infos()
    }
    fn tensor(&self, name: &str) -> tessera::Result<tessera::TensorView<'_>> {
        let v = self.inner.tensor(name)?;
        self.progress.inc(v.info.dense_nbytes().unwrap_or(0));
        let (_, fetched) = tessera::remote::totals();
        if fetched > 0 {
            self.progress
                .set_message(format!("{} ({} fetched)", self.what, human_bytes(fetched)));
        }
        Ok(v)
    }
    fn tensors(&self, names: &[&str]) -> Vec<tessera::Result<tessera::TensorView<'_>>> {
        let got = self.inner.tensors(names);
        for v in got.iter().flatten() {
            self.progress.inc(v.info.dense_nbytes().unwrap_or(0));
        }
        got
    }
    fn interrupted(&self) -> tessera::Result<()> {
        self.inner.interrupted()
    }
    fn chunks(&self) -> &[tessera::ChunkInfo] {
        self.inner.chunks()
    }
    fn chunk(&self, name: &str) -> tessera::Result<std::borrow::Cow<'_, [u8]>> {
        self.inner.chunk(name)
    }
    fn source_format(&self) -> Option<tessera::Format> {
        self.inner.source_format()
    }
    fn metadata_types(&self) -> Option<&tessera::Map> {
        self.inner.metadata_types()
    }
    fn chunk_stored(&self, name: &str) -> tessera::Result<Option<tessera::StoredChunk<'_>>> {
        self.inner.chunk_stored(name)
    }
}

/// True once a [`Progress`] bar has been drawn (a [`FetchProgress`] line then steps
/// aside: two bars would draw over each other).
static BAR_SHOWN: AtomicBool = AtomicBool::new(false);

/// The bytes fetched from a remote location while a verb works on it: after a second,
/// a line on stderr — on a terminal a spinner (`fetching URL: 1.2 GiB, 85 MiB/s, 40
/// requests`, cleared at the end, and out of the way of a [`Progress`] bar, whose label
/// then counts the fetched bytes); elsewhere nothing, unless `TESSERA_PROGRESS=always`,
/// which prints the same as a plain line each second (logs, tests). The counts are
/// the library's (`tessera::remote::totals`).
pub struct FetchProgress {
    done: std::sync::Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FetchProgress {
    /// Starts watching; `what` is the location as shown.
    pub fn start(what: String) -> FetchProgress {
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let tty = std::io::stderr().is_terminal();
        let always = std::env::var("TESSERA_PROGRESS").is_ok_and(|v| v == "always");
        if !tty && !always {
            return FetchProgress { done, thread: None };
        }
        let done2 = done.clone();
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let (req0, bytes0) = tessera::remote::totals();
            let bar = indicatif::ProgressBar::hidden();
            if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg}") {
                bar.set_style(style);
            }
            let mut shown = false;
            let mut printed = 0u64;
            while !done2.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let secs = start.elapsed().as_secs_f64();
                if secs < 1.0 {
                    continue;
                }
                let (req, bytes) = tessera::remote::totals();
                let (req, bytes) = (req - req0, bytes - bytes0);
                let line = format!(
                    "fetching {what}: {}, {}/s, {req} requests",
                    human_bytes(bytes),
                    human_bytes((bytes as f64 / secs) as u64)
                );
                if !tty {
                    if secs as u64 > printed {
                        printed = secs as u64;
                        eprintln!("{line}");
                    }
                    continue;
                }
                if BAR_SHOWN.load(Ordering::Relaxed) {
                    bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
                    continue;
                }
                bar.set_message(line);
                if !shown {
                    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                    shown = true;
                }
                bar.tick();
            }
            bar.finish_and_clear();
        });
        FetchProgress {
            done,
            thread: Some(thread),
        }
    }
}

impl Drop for FetchProgress {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `1.5 MiB`-style sizes.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A count with its noun, singular or plural: `1 tensor`, `2 tensors` (`noun` is the
/// singular; the plural adds `s`).
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Per-tensor notes (`dequantized "w" q8_0 -> f32`) grouped as refusals are: notes
/// that differ only in the tensor's name become one line, `dequantized 12 tensors q8_0
/// -> f32: "a", "b", … and 7 more`, in first-seen order. Other notes pass unchanged.
pub fn group_notes(notes: &[String]) -> Vec<String> {
    // (text before the name, text after it, the quoted names, the first note).
    let mut groups: Vec<(String, String, Vec<String>, String)> = Vec::new();
    let mut out_of_group: Vec<(usize, String)> = Vec::new();
    for n in notes {
        match split_quoted_name(n) {
            Some((pre, name, post)) => {
                match groups.iter_mut().find(|g| g.0 == pre && g.1 == post) {
                    Some(g) => g.2.push(name.to_string()),
                    None => groups.push((
                        pre.to_string(),
                        post.to_string(),
                        vec![name.to_string()],
                        n.clone(),
                    )),
                }
            }
            None => out_of_group.push((groups.len(), n.clone())),
        }
    }
    let mut out = Vec::new();
    let mut other = out_of_group.into_iter().peekable();
    for (i, (pre, post, names, first)) in groups.into_iter().enumerate() {
        while let Some((_, n)) = other.next_if(|(at, _)| *at <= i) {
            out.push(n);
        }
        if names.len() == 1 {
            out.push(first);
            continue;
        }
        let shown = tessera::refusal::NAMED;
        let mut list = names[..names.len().min(shown)].join(", ");
        if names.len() > shown {
            list.push_str(&format!(" and {} more", names.len() - shown));
        }
        out.push(format!(
            "{pre}{}{post}: {list}",
            count(names.len(), "tensor")
        ));
    }
    out.extend(other.map(|(_, n)| n));
    out
}

/// `verb "name" rest` as (`verb `, `"name"`, ` rest`): the first double-quoted name
/// (Rust's `{:?}` quoting: `\"` inside does not end it).
fn split_quoted_name(s: &str) -> Option<(&str, &str, &str)> {
    let start = s.find('"')?;
    let mut escaped = false;
    for (i, c) in s[start + 1..].char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => {
                let end = start + 1 + i + 1;
                return Some((&s[..start], &s[start..end], &s[end..]));
            }
            _ => escaped = false,
        }
    }
    None
}

/// A number as people read it: `sig` significant digits, trailing zeros dropped, in
/// exponent form (`1.19e-07`, as C's and Python's `%g`) when it is below 1e-4 or of
/// `sig` digits or more before the point. For text output; `--json` keeps every digit.
pub fn readable(x: f64, sig: usize) -> String {
    let sig = sig.max(1);
    if x == 0.0 {
        return "0".into();
    }
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    // The exponent after rounding to `sig` digits (9.9996 at 4 digits is 1.000e1).
    let rounded = format!("{x:.prec$e}", prec = sig - 1);
    let (mant, exp) = rounded.split_once('e').unwrap_or((&rounded, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exp < -4 || exp >= sig as i32 {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mant), exp.unsigned_abs())
    } else {
        let decimals = (sig as i32 - 1 - exp).max(0) as usize;
        trim(&format!("{x:.decimals$}"))
    }
}

/// Parses `1024`, `4K`, `512MiB`, `1G` into bytes.
pub fn parse_size(s: &str) -> anyhow::Result<u64> {
    tessera::options::parse_size(s).map_err(anyhow::Error::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_shows_rate_and_eta_and_fits_the_terminal() {
        for part in ["{wide_bar}", "{binary_bytes_per_sec}", "{eta}"] {
            assert!(PROGRESS_TEMPLATE.contains(part), "{part}");
        }
        let style = indicatif::ProgressStyle::with_template(PROGRESS_TEMPLATE);
        assert!(style.is_ok());
        // A bar half-way through reports the time left.
        let bar = indicatif::ProgressBar::hidden();
        bar.set_length(1000);
        bar.inc(500);
        std::thread::sleep(Duration::from_millis(50));
        bar.inc(1);
        assert!(bar.per_sec() > 0.0);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("2MiB").unwrap(), 2 << 20);
        assert!(parse_size("3X").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
        assert_eq!(human_bytes(1536), "1.5 KiB");
    }

    #[test]
    fn numbers_read_as_people_read_them() {
        assert_eq!(readable(1.1920928955078125e-7, 3), "1.19e-07");
        assert_eq!(readable(0.5, 6), "0.5");
        assert_eq!(readable(-1234.5678, 6), "-1234.57");
        assert_eq!(readable(123456789.0, 6), "1.23457e+08");
        assert_eq!(readable(9.9996, 4), "10");
        assert_eq!(readable(0.0001, 3), "0.0001");
        assert_eq!(readable(0.0, 3), "0");
        assert_eq!(readable(f64::INFINITY, 3), "inf");
        assert_eq!(count(1, "tensor"), "1 tensor");
        assert_eq!(count(0, "tensor"), "0 tensors");
        assert_eq!(count(2, "tensor"), "2 tensors");
    }

    #[test]
    fn per_tensor_notes_are_grouped() {
        let notes: Vec<String> = (0..8)
            .map(|i| format!("dequantized \"t{i}\" q8_0 -> f32"))
            .chain([
                "cast \"x\" f64 -> f32".to_string(),
                "kept metadata".to_string(),
            ])
            .chain(["dequantized \"q\\\"x\" q4_0 -> f32".to_string()])
            .collect();
        assert_eq!(
            group_notes(&notes),
            vec![
                "dequantized 8 tensors q8_0 -> f32: \"t0\", \"t1\", \"t2\", \"t3\", \"t4\" and 3 more",
                "cast \"x\" f64 -> f32",
                "kept metadata",
                "dequantized \"q\\\"x\" q4_0 -> f32",
            ]
        );
    }
}
