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
    if listed.objects.len() as u64 > max {
        return Err(Error::limit(format!(
            "the directory lists {} objects, more than the limit of {max}",
            listed.objects.len()
        ))
        .in_file(t.url));
    }
    Ok(listed
        .objects
        .iter()
        .filter_map(|o| o.location.filename().map(str::to_string))
        .collect())
}

/// The names of the sub-prefixes ("directories") directly under the S3 directory `loc`,
/// without their trailing `/`; at most `max` (a longer listing is a `LimitExceeded`
/// error). Only `s3://` lists.
pub fn list_subdirs(loc: &Location, opts: &RemoteOptions, max: u64) -> Result<Vec<String>> {
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
    if listed.common_prefixes.len() as u64 > max {
        return Err(Error::limit(format!(
            "the directory lists {} prefixes, more than the limit of {max}",
            listed.common_prefixes.len()
        ))
        .in_file(t.url));
    }
    Ok(listed
        .common_prefixes
        .iter()
        .filter_map(|p| p.filename().map(str::to_string))
        .collect())
}
