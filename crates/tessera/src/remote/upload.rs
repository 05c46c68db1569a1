//! A local file to object storage as one multipart upload: the object appears under its
//! key only when every part is in and the upload completes; on any failure the upload is
//! aborted (its parts discarded), so a reader never sees a partial object.

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
    let t = target(dest, opts)?;
    let mut file = std::fs::File::open(local)
        .map_err(|e| Error::from(e).at_subject(local.display().to_string()))?;
    runtime()?.block_on(async {
        let upload = t
            .store
            .put_multipart(&t.path)
            .await
            .map_err(|e| store_error(&t.url, e))?;
        let mut w = WriteMultipart::new_with_chunk_size(upload, PART);
        let mut buf = vec![0u8; 1 << 20];
        let mut sent = 0u64;
        let outcome: Result<()> = async {
            loop {
                let n = file
                    .read(&mut buf)
                    .map_err(|e| Error::from(e).at_subject(local.display().to_string()))?;
                if n == 0 {
                    return Ok(());
                }
                w.wait_for_capacity(CONCURRENCY)
                    .await
                    .map_err(|e| store_error(&t.url, e))?;
                w.write(&buf[..n]);
                sent += n as u64;
            }
        }
        .await;
        match outcome {
            Ok(()) => {
                w.finish().await.map_err(|e| store_error(&t.url, e))?;
                Ok(sent)
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
    let mut done: Vec<&Location> = Vec::new();
    for (f, t) in files.iter().zip(&targets) {
        match upload_file(f, t, opts) {
            Ok(_) => done.push(t),
            Err(e) => {
                for d in done {
                    // Best effort: the error that stopped the upload is the one to report.
                    let _ = delete(d, opts);
                }
                return Err(e);
            }
        }
    }
    Ok(targets)
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
    let uploaded = upload_files(&refs, dest, opts)?;
    Ok((value, uploaded))
}
