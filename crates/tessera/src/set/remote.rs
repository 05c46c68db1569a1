//! Opening a remote location (feature `remote`): one object, or the model set its URL
//! names, read lazily by range.
//!
//! - `…/NAME.index.json` (HTTP or S3): a Hugging Face index. It is fetched whole
//!   (refused over `Limits::max_index_bytes`), parsed by `hf.rs` as a local index is,
//!   and each shard its `weight_map` names is opened at the URL beside the index
//!   ([`Location::sibling`]: same directory or key prefix, an HTTP query string kept).
//!   Opening a shard fetches its header only; a tensor fetches that tensor.
//! - `…/PREFIX-0000i-of-0000n.gguf` whose `split.count` key is present: the GGUF split
//!   set, every split opened beside it (the URL of any split opens the set).
//! - anything else: the one object.
//!
//! The set-level checks are the local ones (`mod.rs`); a shard that is not there fails
//! the open naming its URL (or, when auditing, is reported). The shards' `HEAD`
//! requests and first reads go out in parallel (up to [`PARALLEL`] at once); the
//! containers are then parsed one by one from those bytes. Not here: a set by its
//! directory URL or by the URL of one safetensors shard (HTTP and S3 list no
//! directories here, so the index cannot be found), and zTensor v2 shard tables.

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
    let url = loc.display();
    let name = loc.file_name();
    if name.ends_with(".index.json") {
        return open_hf(loc, opts, remote);
    }
    let first = open_file(loc, opts, remote)?;
    if let Some(n) = Numbered::parse(&name, ".gguf") {
        if first.format() == Format::Gguf
            && gguf_split::is_split(crate::TensorSource::metadata(&first))
        {
            let plan = gguf_split::plan(Path::new(&url), &n, opts)?;
            let mut pre = HashMap::new();
            pre.insert(name, Ok(first));
            return build(plan, loc, opts, remote, pre);
        }
    }
    Ok(Opened::File(first))
}

/// One remote object, its errors naming the URL.
fn open_file(loc: &Location, opts: &ReadOptions, remote: &RemoteOptions) -> Result<OpenedFile> {
    let url = loc.display();
    let src = RemoteSource::open(loc, remote).map_err(|e| e.in_file(url.clone()))?;
    let mut opts = opts.clone();
    opts.path = Some(url.into());
    OpenedFile::from_source(Box::new(src), &opts)
}

fn open_hf(loc: &Location, opts: &ReadOptions, remote: &RemoteOptions) -> Result<Opened> {
    let url = loc.display();
    let named = |e: Error| e.in_file(url.clone());
    let src = RemoteSource::open(loc, remote).map_err(named)?;
    use crate::source::ByteSource;
    // Checked before anything is fetched or allocated.
    opts.limits.check_index(src.len()).map_err(named)?;
    let bytes = src.read_at(0, src.len()).map_err(named)?;
    let exists = |p: &Path| {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
        name.is_some_and(|n| RemoteSource::open(&loc.sibling(&n), remote).is_ok())
    };
    let plan = hf::plan_bytes(Path::new(&url), &bytes, opts, &exists)?;
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
