//! Finding objects without reading them: whether one exists (a `HEAD`), and the objects
//! directly under an S3 key prefix (a `ListObjectsV2` with delimiter `/`). What the set
//! opener uses to find an index beside a shard and the model in a directory URL.

use object_store::path::Path as ObjectPath;
use object_store::ObjectStore as _;
use object_store::ObjectStoreExt as _;

use super::source::store_error;
use super::store::{runtime, target};
use super::{Location, RemoteOptions};
use crate::error::{Error, Result};

/// True when the object at `loc` exists (one `HEAD`). Not found — and, since a server
/// that hides what a caller may not read answers that way (S3 without `ListBucket`
/// permission), forbidden — is `false`; any other failure (the server down, a 500 that
/// outlasts the retries) is an error naming the URL.
pub fn exists(loc: &Location, opts: &RemoteOptions) -> Result<bool> {
    let t = target(loc, opts)?;
    let got = runtime()?.block_on(t.store.head(&t.path));
    super::source::count_request();
    match got {
        Ok(_) => Ok(true),
        Err(
            object_store::Error::NotFound { .. }
            | object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. },
        ) => Ok(false),
        Err(e) => Err(store_error(&t.url, e)),
    }
}

/// The names of the objects directly under the S3 directory `loc` (a key prefix; `/`
/// is added when missing), in the order the store lists them; sub-prefixes are left
/// out. At most `max` names: a longer listing is a `LimitExceeded` error. Only `s3://`
/// lists: an HTTP server has no listing (an `Unsupported` error).
pub fn list_dir(loc: &Location, opts: &RemoteOptions, max: u64) -> Result<Vec<String>> {
    let (listed, url) = list(loc, opts)?;
    let names: Vec<&ObjectPath> = listed.objects.iter().map(|o| &o.location).collect();
    bounded(&names, "objects", max, url)
}

/// The names of the sub-prefixes ("directories") directly under the S3 directory `loc`,
/// without their trailing `/`; at most `max` (a longer listing is a `LimitExceeded`
/// error). Only `s3://` lists.
pub fn list_subdirs(loc: &Location, opts: &RemoteOptions, max: u64) -> Result<Vec<String>> {
    let (listed, url) = list(loc, opts)?;
    let names: Vec<&ObjectPath> = listed.common_prefixes.iter().collect();
    bounded(&names, "prefixes", max, url)
}

/// One delimited listing of the S3 directory `loc` (one request), and its URL.
fn list(loc: &Location, opts: &RemoteOptions) -> Result<(object_store::ListResult, String)> {
    let dir = loc.as_dir();
    let Location::S3 { key, .. } = &dir else {
        return Err(Error::unsupported(format!(
            "{}: an HTTP server lists no directories",
            loc.display()
        )));
    };
    let t = target(&dir, opts)?;
    let prefix = match key.trim_end_matches('/') {
        "" => None,
        p => Some(ObjectPath::parse(p).map_err(|e| {
            Error::invalid_input(format!("not a key prefix: {e}")).in_file(t.url.clone())
        })?),
    };
    let listed = runtime()?.block_on(t.store.list_with_delimiter(prefix.as_ref()));
    super::source::count_request();
    let listed = listed.map_err(|e| store_error(&t.url, e))?;
    Ok((listed, t.url))
}

/// The last path segments of `paths`, refused past `max` (`what`: objects, prefixes).
fn bounded(paths: &[&ObjectPath], what: &str, max: u64, url: String) -> Result<Vec<String>> {
    if paths.len() as u64 > max {
        return Err(Error::limit(format!(
            "the directory lists {} {what}, more than the limit of {max}",
            paths.len()
        ))
        .in_file(url));
    }
    Ok(paths
        .iter()
        .filter_map(|p| p.filename().map(str::to_string))
        .collect())
}
