//! Opening a remote location (feature `remote`): one object, or the model set its URL
//! names, read lazily by range.
//!
//! - `…/NAME.index.json` (HTTP or S3): a Hugging Face index. It is fetched whole
//!   (refused over `Limits::max_index_bytes`), parsed by `hf.rs` as a local index is,
//!   and each shard its `weight_map` names is opened at the URL beside the index
//!   ([`Location::sibling`]: same directory or key prefix, an HTTP query string kept).
//!   Opening a shard fetches its header only; a tensor fetches that tensor.
//! - `…/PREFIX-0000i-of-0000n.safetensors`: the set of the index beside it, when
//!   `PREFIX.safetensors.index.json` exists there (a `HEAD`) and names the shard — the
//!   conventional name only, since HTTP lists no directory (S3 too, to behave alike);
//!   otherwise the one file, as a local shard no index names opens (no warning there
//!   either).
//! - `…/PREFIX-0000i-of-0000n.gguf` whose `split.count` key is present: the GGUF split
//!   set, every split opened beside it (the URL of any split opens the set).
//! - anything else: the one object.
//!
//! A presigned URL (`X-Amz-Signature`, `Signature`, `X-Goog-Signature`, `sig`:
//! [`Location::is_presigned`]) signs its one object, so nothing beside it can be fetched
//! with it: a presigned shard opens alone (no index is looked for), and a presigned index
//! or GGUF split, which would open a set without its other files, is refused
//! (`Unsupported`, saying why). An index's or split's query string is otherwise kept on
//! its siblings (`?download=true`).
//!
//! The set-level checks are the local ones (`mod.rs`); a shard that is not there fails
//! the open naming its URL (or, when auditing, is reported). The shards' `HEAD`
//! requests and first reads go out in parallel (up to [`PARALLEL`] at once); the
//! containers are then parsed one by one from those bytes. Not here: a set by its
//! directory URL, and zTensor v2 shard tables.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::file::OpenedFile;
use super::names::Numbered;
use super::opener::Opened;
use super::{gguf_split, hf, ModelSet};
use crate::any::ReadOptions;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::model::Container;
use crate::remote::{Location, RemoteOptions, RemoteSource};

/// Shards opened (`HEAD` and first read) at once.
const PARALLEL: usize = 8;

/// Opens `loc` (remote): the set it names, or the one object.
pub(super) fn open(loc: &Location, opts: &ReadOptions, remote: &RemoteOptions) -> Result<Opened> {
    let name = loc.file_name();
    if name.ends_with(".index.json") {
        refuse_presigned(loc, "the shards its index names")?;
        let bytes = fetch_index(loc, opts, remote)?;
        return open_hf(loc, &bytes, opts, remote);
    }
    if let Some(n) = Numbered::parse(&name, ".safetensors") {
        if let Some((index, bytes)) = index_naming(loc, &n, &name, opts, remote)? {
            return open_hf(&index, &bytes, opts, remote);
        }
    }
    let first = open_file(loc, opts, remote)?;
    if let Some(n) = Numbered::parse(&name, ".gguf") {
        if first.format() == Format::Gguf
            && gguf_split::is_split(crate::TensorSource::metadata(&first))
        {
            refuse_presigned(loc, "the other splits of its GGUF set")?;
            let plan = gguf_split::plan(&as_path(loc), &n, opts)?;
            let mut pre = HashMap::new();
            pre.insert(name, Ok(first));
            return build(plan, loc, opts, remote, pre);
        }
    }
    Ok(Opened::File(first))
}

/// The URL as a path for the set's plan (its file name is the index's or split's name,
/// its parent the set's directory): shown, without the query string.
fn as_path(loc: &Location) -> PathBuf {
    let url = loc.display();
    PathBuf::from(url.split(['?', '#']).next().unwrap_or(""))
}

/// One remote object, its errors naming the URL.
fn open_file(loc: &Location, opts: &ReadOptions, remote: &RemoteOptions) -> Result<OpenedFile> {
    let url = loc.display();
    let src = RemoteSource::open(loc, remote).map_err(|e| e.in_file(url.clone()))?;
    let mut opts = opts.clone();
    opts.path = Some(url.into());
    OpenedFile::from_source(Box::new(src), &opts)
}

/// A presigned URL signs its one object: `what` (the rest of a set) cannot be fetched
/// with it, so the set is refused rather than opened in part.
fn refuse_presigned(loc: &Location, what: &str) -> Result<()> {
    if !loc.is_presigned() {
        return Ok(());
    }
    Err(Error::unsupported(format!(
        "a presigned URL signs this one object, so {what} cannot be fetched with it; open the set by an unsigned URL (s3:// with credentials, or HTTP with a bearer token) or its files one by one"
    ))
    .in_file(loc.display()))
}

/// An index's bytes, whole (refused over `Limits::max_index_bytes` before they are
/// fetched).
fn fetch_index(loc: &Location, opts: &ReadOptions, remote: &RemoteOptions) -> Result<Vec<u8>> {
    let url = loc.display();
    let named = |e: Error| e.in_file(url.clone());
    let src = RemoteSource::open(loc, remote).map_err(named)?;
    use crate::source::ByteSource;
    // Checked before anything is fetched or allocated.
    opts.limits.check_index(src.len()).map_err(named)?;
    let bytes = src.read_at(0, src.len()).map_err(named)?;
    Ok(bytes.into_owned())
}

/// The Hugging Face index beside the safetensors shard `name` at `loc` that names it,
/// with its bytes: `{prefix}.safetensors.index.json` (HTTP lists no directory, so the
/// conventional name is the one looked for, on S3 too). `None` — the shard then opens
/// alone, as a local shard with no index naming it does — when there is no such index,
/// it does not name the shard, or `loc` is presigned (its signature fits the shard
/// only).
fn index_naming(
    loc: &Location,
    n: &Numbered,
    name: &str,
    opts: &ReadOptions,
    remote: &RemoteOptions,
) -> Result<Option<(Location, Vec<u8>)>> {
    if loc.is_presigned() {
        return Ok(None);
    }
    let index = loc.sibling(&format!("{}{}", n.prefix, hf::INDEX_SUFFIX));
    if !crate::remote::exists(&index, remote)? {
        return Ok(None);
    }
    let bytes = fetch_index(&index, opts, remote)?;
    let names_it = hf::shard_names(&bytes).is_some_and(|s| s.iter().any(|s| s == name));
    Ok(names_it.then_some((index, bytes)))
}

fn open_hf(
    loc: &Location,
    bytes: &[u8],
    opts: &ReadOptions,
    remote: &RemoteOptions,
) -> Result<Opened> {
    let exists = |p: &Path| {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
        name.is_some_and(|n| crate::remote::exists(&loc.sibling(&n), remote).unwrap_or(false))
    };
    let plan = hf::plan_bytes(&as_path(loc), bytes, opts, &exists)?;
    build(plan, loc, opts, remote, HashMap::new())
}

/// Opens the plan's shards beside `loc` (those in `pre` already open) and builds the set.
fn build(
    plan: super::Plan,
    loc: &Location,
    opts: &ReadOptions,
    remote: &RemoteOptions,
    mut pre: HashMap<String, Result<OpenedFile>>,
) -> Result<Opened> {
    let todo: Vec<&String> = plan
        .shards
        .iter()
        .filter(|s| !pre.contains_key(*s))
        .collect();
    let sources = fetch_parallel(&todo, loc, remote);
    for (name, src) in todo.into_iter().zip(sources) {
        let shard = loc.sibling(name);
        let url = shard.display();
        let opened = src.map_err(|e| e.in_file(url.clone())).and_then(|s| {
            let mut o = opts.clone();
            o.path = Some(PathBuf::from(url));
            OpenedFile::from_source(Box::new(s), &o)
        });
        pre.insert(name.clone(), opened);
    }
    let pre = Mutex::new(pre);
    let open = |name: &str| {
        pre.lock()
            .ok()
            .and_then(|mut m| m.remove(name))
            .unwrap_or_else(|| open_file(&loc.sibling(name), opts, remote))
    };
    ModelSet::build_with(plan, opts, &open).map(|s| Opened::Set(Box::new(s)))
}

/// `HEAD` and the first bytes of each shard, [`PARALLEL`] at a time, in order.
fn fetch_parallel(
    names: &[&String],
    loc: &Location,
    remote: &RemoteOptions,
) -> Vec<Result<RemoteSource>> {
    let mut out = Vec::with_capacity(names.len());
    for group in names.chunks(PARALLEL) {
        let got: Vec<Result<RemoteSource>> = std::thread::scope(|s| {
            let handles: Vec<_> = group
                .iter()
                .map(|&n| s.spawn(move || RemoteSource::open(&loc.sibling(n), remote)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::new(
                            crate::ErrorKind::Io,
                            "a thread opening a shard panicked",
                        ))
                    })
                })
                .collect()
        });
        out.extend(got);
    }
    out
}
