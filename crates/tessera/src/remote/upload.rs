//! A local file to object storage as one multipart upload: the object appears under its
//! key only when every part is in and the upload completes; on any failure the upload is
//! aborted (its parts discarded), so a reader never sees a partial object.
//!
//! Interruption: while [`upload_files`] runs, the CLI's SIGINT / SIGTERM handler passes
//! the signal on (`util::interrupt`) instead of exiting. The upload in flight stops
//! (within 20 ms of waiting for the network), its multipart upload is aborted, the
//! objects this run completed are deleted, [`write_staged`] removes the staging
//! directory, and the error says what was removed. A second signal exits at once.

use std::io::Read;
use std::path::Path;

use object_store::{ObjectStoreExt, WriteMultipart};

use super::source::store_error;
use super::store::{runtime, target};
use super::{Location, RemoteOptions};
use crate::error::{Error, Result};

/// Part size (S3's minimum is 5 MiB for every part but the last).
const PART: usize = 16 << 20;
/// Parts in flight at once.
const CONCURRENCY: usize = 4;

/// Refuses a location no upload can write: anything but `s3://` (HTTP servers take no
/// uploads), and a key prefix ending with `/`.
fn writable(dest: &Location) -> Result<()> {
    if !matches!(dest, Location::S3 { .. }) {
        return Err(Error::unsupported(format!(
            "{}: writing is supported to s3:// locations only",
            dest.display()
        )));
    }
    if dest.is_dir() {
        return Err(Error::invalid_input(format!(
            "{}: a directory (a key prefix ending with /); name the object to write",
            dest.display()
        )));
    }
    Ok(())
}

/// Uploads the file at `local` to `dest` (an `s3://` location; HTTP servers take no
/// uploads). Returns the bytes sent.
pub fn upload_file(local: &Path, dest: &Location, opts: &RemoteOptions) -> Result<u64> {
    writable(dest)?;
    match upload_one(local, dest, opts)? {
        Ok(sent) => Ok(sent),
        Err(Stopped) => Err(crate::util::interrupt::error(&format!(
            "the upload to {} was stopped and its multipart upload aborted",
            dest.display()
        ))),
    }
}

/// An upload stopped by an interrupt passed on (`util::interrupt`): its multipart
/// upload is aborted, nothing is under its key.
struct Stopped;

/// Waits for `f`, or for an interrupt passed on (looked for every 20 ms): `None` then.
async fn unless_interrupted<F: std::future::Future>(f: F) -> Option<F::Output> {
    use crate::util::interrupt::requested;
    if requested().is_some() {
        return None;
    }
    let watch = async {
        while requested().is_none() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    let (f, watch) = (std::pin::pin!(f), std::pin::pin!(watch));
    match futures::future::select(f, watch).await {
        futures::future::Either::Left((v, _)) => Some(v),
        futures::future::Either::Right(_) => None,
    }
}

/// Uploads completed by this process (for the test hook below).
static COMPLETED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Test hook: `TESSERA_TEST_PAUSE_MID_UPLOAD_MS=N` pauses N ms (or until an interrupt)
/// once the first part of the second file this process uploads is in, so that a test
/// can signal while one object of a set is complete and a multipart upload is open.
/// Only with feature `test-hooks` (never in a user's build).
#[cfg(feature = "test-hooks")]
fn pause_mid_upload() -> Option<std::time::Duration> {
    static DONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let ms: u64 = std::env::var("TESSERA_TEST_PAUSE_MID_UPLOAD_MS")
        .ok()?
        .parse()
        .ok()?;
    (COMPLETED.load(std::sync::atomic::Ordering::Relaxed) == 1
        && !DONE.swap(true, std::sync::atomic::Ordering::Relaxed))
    .then(|| std::time::Duration::from_millis(ms))
}

#[cfg(not(feature = "test-hooks"))]
fn pause_mid_upload() -> Option<std::time::Duration> {
    None
}

/// [`upload_file`]'s work: `Ok(Err(Stopped))` when an interrupt stopped it.
fn upload_one(
    local: &Path,
    dest: &Location,
    opts: &RemoteOptions,
) -> Result<std::result::Result<u64, Stopped>> {
    let t = target(dest, opts)?;
    let mut file = std::fs::File::open(local)
        .map_err(|e| Error::from(e).at_subject(local.display().to_string()))?;
    runtime()?.block_on(async {
        if crate::util::interrupt::requested().is_some() {
            return Ok(Err(Stopped));
        }
        // Not raced with the interrupt: cut short after the server made the upload, its
        // id would be lost and the upload left open.
        let upload = t
            .store
            .put_multipart(&t.path)
            .await
            .map_err(|e| store_error(&t.url, e))?;
        let mut w = WriteMultipart::new_with_chunk_size(upload, PART);
        let mut buf = vec![0u8; 1 << 20];
        let mut sent = 0u64;
        let mut paused = false;
        let outcome: Result<Option<()>> = async {
            loop {
                let n = file
                    .read(&mut buf)
                    .map_err(|e| Error::from(e).at_subject(local.display().to_string()))?;
                if n == 0 {
                    return Ok(Some(()));
                }
                match unless_interrupted(w.wait_for_capacity(CONCURRENCY)).await {
                    None => return Ok(None),
                    Some(r) => r.map_err(|e| store_error(&t.url, e))?,
                }
                w.write(&buf[..n]);
                sent += n as u64;
                if !paused && sent > PART as u64 {
                    paused = true;
                    if let Some(d) = pause_mid_upload() {
                        match unless_interrupted(w.wait_for_capacity(0)).await {
                            None => return Ok(None),
                            Some(r) => r.map_err(|e| store_error(&t.url, e))?,
                        }
                        if unless_interrupted(tokio::time::sleep(d)).await.is_none() {
                            return Ok(None);
                        }
                    }
                }
            }
        }
        .await;
        match outcome {
            Ok(Some(())) => {
                // Not raced either: the completion is one request, and an object that
                // completes is deleted by the caller when the interrupt is seen after.
                w.finish().await.map_err(|e| store_error(&t.url, e))?;
                COMPLETED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(Ok(sent))
            }
            Ok(None) => {
                // The parts in flight are cancelled and the upload's parts discarded.
                let _ = w.abort().await;
                Ok(Err(Stopped))
            }
            Err(e) => {
                // The upload's parts are discarded; the key keeps what it held.
                let _ = w.abort().await;
                Err(e)
            }
        }
    })
}

/// Uploads several local files beside `dest` (each to `dest`'s sibling of its file
/// name), in the order given, the last one only after every other is complete: the
/// shards of a set before its index, a WTXT file's `.wsum` before the file. Returns the
/// locations written, in order.
///
/// One file is one multipart upload, which replaces an object atomically. Several files
/// cannot be swapped together on object storage, so a multi-file output is refused when
/// any of its keys already holds an object (an old set's shard replaced by a new one
/// under an old index would load as a mixed model); and when an upload fails, the
/// objects this call completed are deleted, so no part of a new set is left behind.
pub fn upload_files(
    files: &[&Path],
    dest: &Location,
    opts: &RemoteOptions,
) -> Result<Vec<Location>> {
    let targets: Vec<Location> = files
        .iter()
        .map(|f| {
            let name = f.file_name().map(|n| n.to_string_lossy().into_owned());
            match name {
                Some(n) if !n.is_empty() => Ok(dest.sibling(&n)),
                _ => Err(Error::invalid_input(format!(
                    "{}: not a file name to upload",
                    f.display()
                ))),
            }
        })
        .collect::<Result<_>>()?;
    if files.len() > 1 {
        for t in &targets {
            if super::exists(t, opts)? {
                return Err(Error::invalid_input(format!(
                    "{} exists: an output of {} files is not written over objects already there \
                     (object storage cannot replace several objects at once, and a set mixing old \
                     and new shards would load without an error); write to a new prefix, or \
                     delete the old files first",
                    t.display(),
                    files.len()
                )));
            }
        }
    }
    // A SIGINT / SIGTERM from here on is answered here (module docs).
    let _handling = crate::util::interrupt::handling();
    let mut done: Vec<&Location> = Vec::new();
    let mut stopped: Option<&Location> = None;
    for (f, t) in files.iter().zip(&targets) {
        match upload_one(f, t, opts) {
            Ok(Ok(_)) => done.push(t),
            Ok(Err(Stopped)) => {
                stopped = Some(t);
                break;
            }
            Err(e) => {
                for d in done {
                    // Best effort: the error that stopped the upload is the one to report.
                    let _ = delete(d, opts);
                }
                return Err(e);
            }
        }
    }
    if stopped.is_none() && crate::util::interrupt::requested().is_none() {
        return Ok(targets);
    }
    // Interrupted (while uploading, or as the last upload completed): what this run
    // wrote goes, as a failed upload's does.
    let mut said = Vec::new();
    if let Some(t) = stopped {
        said.push(format!(
            "the upload to {} was stopped and its multipart upload aborted",
            t.display()
        ));
    }
    let mut deleted = Vec::new();
    for d in done {
        match delete(d, opts) {
            Ok(()) => deleted.push(d.display()),
            Err(e) => said.push(format!("could not delete {}: {e}", d.display())),
        }
    }
    if !deleted.is_empty() {
        said.push(format!(
            "deleted the {} object{} this run had uploaded ({})",
            deleted.len(),
            if deleted.len() == 1 { "" } else { "s" },
            deleted.join(", ")
        ));
    }
    if said.is_empty() {
        said.push("nothing had been uploaded".into());
    }
    Err(crate::util::interrupt::error(&said.join("; ")))
}

/// Deletes the object at `loc` (an `s3://` location).
pub fn delete(loc: &Location, opts: &RemoteOptions) -> Result<()> {
    let t = target(loc, opts)?;
    let r = runtime()?.block_on(t.store.delete(&t.path));
    super::source::count_request();
    r.map_err(|e| store_error(&t.url, e))
}

/// Writes an output for the remote `dest` through a local staging directory: `write`
/// gets the staging path named as `dest` and returns what it made and the files it
/// wrote, main file or index last; those are then uploaded by [`upload_files`]. The
/// staging directory is removed whatever happens. Returns `write`'s value and the
/// locations uploaded.
pub fn write_staged<T>(
    dest: &Location,
    opts: &RemoteOptions,
    write: impl FnOnce(&Path) -> Result<(T, Vec<std::path::PathBuf>)>,
) -> Result<(T, Vec<Location>)> {
    // Checked before anything is written to the staging directory.
    writable(dest)?;
    let staging = crate::util::atomic::staging_dir(&std::env::temp_dir())?;
    let local = staging.path().join(dest.file_name());
    let (value, files) = write(&local)?;
    let refs: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
    let uploaded = match upload_files(&refs, dest, opts) {
        Ok(u) => u,
        Err(e) if crate::util::interrupt::requested().is_some() => {
            let place = staging.path().display().to_string();
            drop(staging);
            let done = e.message().split_once(": ").map_or(e.message(), |(_, d)| d);
            return Err(crate::util::interrupt::error(&format!(
                "{done}; removed the staging directory {place}"
            )));
        }
        Err(e) => return Err(e),
    };
    Ok((value, uploaded))
}
