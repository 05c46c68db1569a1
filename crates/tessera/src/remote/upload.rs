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

/// Uploads the file at `local` to `dest` (an `s3://` location; HTTP servers take no
/// uploads). Returns the bytes sent.
pub fn upload_file(local: &Path, dest: &Location, opts: &RemoteOptions) -> Result<u64> {
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
