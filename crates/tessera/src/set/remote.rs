//! Opening a remote location (feature `remote`): one object, or the model set its URL
//! names, read lazily by range.
//!
//! - `…/NAME.index.json` (HTTP or S3): a Hugging Face index. It is fetched whole
//!   (refused over `Limits::max_index_bytes`), parsed by `hf.rs` as a local index is,
//!   and each shard its `weight_map` names is opened at the URL beside the index
//!   ([`Location::sibling`]: same directory or key prefix, an HTTP query string kept).
//!   Opening a shard fetches its header only; a tensor fetches that tensor.
//! - `…/PREFIX-0000i-of-0000n.safetensors` (`.bin`): the set of the index beside it, when
//!   `PREFIX.safetensors.index.json` (`PREFIX.bin.index.json`) exists there (a `HEAD`)
//!   and names the shard — the
//!   conventional name only, since HTTP lists no directory (S3 too, to behave alike);
//!   else, as any other numbered shard `…/PREFIX-0000i-of-0000n.EXT` (not `.gguf`), the
//!   set of `PREFIX.tessera-set.json` beside it when that names the shard; otherwise
//!   the one file, as a local shard no index names opens (no warning there either).
//! - `…/PREFIX-0000i-of-0000n.gguf` whose `split.count` key is present: the GGUF split
//!   set, every split opened beside it (the URL of any split opens the set).
//! - `…/NAME.tessera-set.json`: a Tessera index, fetched and parsed as a local one is
//!   (`tessera_index.rs`), its shards beside it; their whole-file BLAKE3 is checked as
//!   locally (by `verify`, and before a checked read's first tensor from a shard), the
//!   shard fetched block by block for it.
//! - a directory — `s3://bucket/ckpt/`, `https://host/ckpt/` (a path ending with `/`),
//!   or `s3://bucket/ckpt` when no object has that key and the prefix `ckpt/` holds
//!   some: the local directory rule (`opener.rs`, `choose_in_directory`) over the
//!   names in it, then what it picks opens as above. S3 lists the prefix (one
//!   `ListObjectsV2` with delimiter `/`, sub-prefixes ignored, as a local directory's
//!   subdirectories are); an HTTP server cannot list, so the directory is probed for
//!   the names in [`WELL_KNOWN`] (a `HEAD` each, in parallel) and the rule applied to
//!   those found: an HTTP directory of GGUF splits or of a differently named set is
//!   not found (the error names the URL and every name tried; name the file instead).
//! - a zTensor v2 root whose manifest has a shard table: the root with its shards, each
//!   opened beside it at the positional name `<stem>-<name>.zt` (`zt2_shards.rs`) and
//!   read by range like the root. The spec's fallback, resolution by identity (every
//!   file of the directory hashed), stays local-only: fetching every object of a prefix
//!   whole to find a renamed shard is not what a range reader should do, and HTTP cannot
//!   list; a shard not at its name fails the open, naming the shard and its URL.
//! - anything else: the one object.
//!
//! A presigned URL (`X-Amz-Signature`, `Signature`, `X-Goog-Signature`, `sig`:
//! [`Location::is_presigned`]) signs its one object, so nothing beside it can be fetched
//! with it: a presigned shard opens alone (no index is looked for), a presigned zTensor
//! v2 root alone (as a root without its shards: listed, its shard parts refused with a
//! reason, a warning), and a presigned index or GGUF split, which would open a set
//! without its other files, is refused (`Unsupported`, saying why). An index's or
//! split's query string is otherwise kept on its siblings (`?download=true`).
//!
//! The set-level checks are the local ones (`mod.rs`); a shard that is not there fails
//! the open naming its URL (or, when auditing, is reported). The shards' `HEAD`
//! requests and first reads go out in parallel (up to [`PARALLEL`] at once); the
//! containers are then parsed one by one from those bytes. Not here: the search by
//! identity for a renamed zTensor v2 shard (above), and GGUF splits or sets of other
//! names in an HTTP directory (HTTP lists nothing; S3 directories find them).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::file::OpenedFile;
#[cfg(feature = "ztensor")]
use super::file::{Backing, Files};
use super::names::Numbered;
use super::opener::{choose_in_directory, Opened, LOOKED_FOR};
#[cfg(feature = "ztensor")]
use super::zt2_shards;
use super::{gguf_split, hf, tessera_index, ModelSet};
use crate::any::ReadOptions;
use crate::error::{Error, ErrorKind, Result};
use crate::format::Format;
#[cfg(feature = "ztensor")]
use crate::formats::ztensor2::Ztensor2File;
use crate::model::Container;
use crate::remote::{Location, RemoteOptions, RemoteSource};

/// Shards opened (`HEAD` and first read) at once.
const PARALLEL: usize = 8;

/// Opens `loc` (remote): the set it names, or the one object.
pub(super) fn open(loc: &Location, opts: &ReadOptions, remote: &RemoteOptions) -> Result<Opened> {
    if opts.shard_only {
        return open_alone(loc, opts, remote);
    }
    if loc.is_dir() {
        return open_dir(loc, opts, remote);
    }
    let name = loc.file_name();
    if name.ends_with(tessera_index::INDEX_SUFFIX) {
        refuse_presigned(loc, "the shards its index names")?;
        let bytes = fetch_index(loc, opts, remote)?;
        return open_tessera(loc, &bytes, opts, remote);
    }
    if name.ends_with(".index.json") {
        refuse_presigned(loc, "the shards its index names")?;
        let bytes = fetch_index(loc, opts, remote)?;
        return open_hf(loc, &bytes, opts, remote);
    }
    // A numbered shard (`-0000i-of-0000n`) of a set whose index is beside it: a Hugging
    // Face index for safetensors, else (GGUF splits aside) a Tessera index, as locally.
    let numbered = name
        .rfind('.')
        .and_then(|dot| Numbered::parse(&name, &name[dot..]));
    if let Some(n) = numbered.filter(|n| n.suffix != ".gguf") {
        let both = (opts, remote);
        if hf::SHARD_EXTENSIONS.contains(&n.suffix.as_str()) {
            let suffix = format!("{}.index.json", n.suffix);
            let hf_index = index_naming(loc, &n, &name, &suffix, hf::shard_names, both)?;
            if let Some((index, bytes)) = hf_index {
                return open_hf(&index, &bytes, opts, remote);
            }
        }
        let suffix = tessera_index::INDEX_SUFFIX;
        let ours = index_naming(loc, &n, &name, suffix, tessera_index::shard_names, both)?;
        if let Some((index, bytes)) = ours {
            return open_tessera(&index, &bytes, opts, remote);
        }
    }
    let first = match open_file(loc, opts, remote) {
        // s3://bucket/ckpt with no object of that name: the directory ckpt/, when
        // something is in it.
        Err(e) if e.kind() == ErrorKind::NotFound && matches!(loc, Location::S3 { .. }) => {
            let names = crate::remote::list_dir(loc, remote, opts.limits.max_entries);
            return match names {
                Ok(names) if !names.is_empty() => {
                    open_dir_names(&loc.as_dir(), names, opts, remote)
                }
                _ => Err(e),
            };
        }
        other => other?,
    };
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
    #[cfg(feature = "ztensor")]
    if first.format() == Format::ZtensorV2 && !loc.is_presigned() {
        return with_zt2_shards(loc, first, opts, remote).map(Opened::File);
    }
    Ok(Opened::File(first))
}

/// [`ReadOptions::shard_only`]: the one object, whatever it is (no index looked for,
/// a zTensor v2 root without its shards); a directory or an index is refused.
fn open_alone(loc: &Location, opts: &ReadOptions, remote: &RemoteOptions) -> Result<Opened> {
    let name = loc.file_name();
    if loc.is_dir() || name.ends_with(".index.json") || name.ends_with(tessera_index::INDEX_SUFFIX)
    {
        return Err(Error::invalid_input(
            "opening one file alone (shard-only) takes a shard, not a directory or a set's index",
        )
        .in_file(loc.display()));
    }
    open_file(loc, opts, remote).map(Opened::File)
}

/// A zTensor v2 root with the shards its shard table names, each opened beside it at
/// the positional name `<stem>-<name>.zt` (`zt2_shards.rs`); a root without a table is
/// returned as it is. The identity search a local root falls back on (every file of the
/// directory hashed) is not done: a shard not at its name fails the open, naming it.
#[cfg(feature = "ztensor")]
fn with_zt2_shards(
    loc: &Location,
    file: OpenedFile,
    opts: &ReadOptions,
    remote: &RemoteOptions,
) -> Result<OpenedFile> {
    let url = loc.display();
    let named = |e: Error| e.in_file(url.clone());
    let table: Vec<(String, u64, String)> = Ztensor2File::parse(file.source(), opts)
        .map_err(named)?
        .shards()
        .to_vec();
    if table.is_empty() {
        return Ok(file);
    }
    let root = PathBuf::from(loc.file_name());
    let names: Vec<String> = table
        .iter()
        .map(|(n, _, _)| {
            let p = zt2_shards::shard_path(&root, n);
            p.file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    let refs: Vec<&String> = names.iter().collect();
    let got = fetch_parallel(&refs, loc, remote);
    let mut shards = Vec::with_capacity(table.len());
    for ((label, _, _), (name, src)) in table.iter().zip(names.iter().zip(got)) {
        let src = src.map_err(|e| {
            named(Error::new(
                e.kind(),
                format!(
                    "shard {label:?} ({}): {}",
                    loc.sibling(name).display(),
                    e.message()
                ),
            ))
        })?;
        shards.push(Backing::Source(Box::new(src)));
    }
    let files = Files {
        main: file.into_owner().main,
        shards,
    };
    zt2_shards::assemble(files, url.clone(), Vec::new(), &[], opts).map_err(named)
}

/// The URL as a path for the set's plan (its file name is the index's or split's name,
/// its parent the set's directory): shown, without the query string.
fn as_path(loc: &Location) -> PathBuf {
    let url = loc.display();
    PathBuf::from(url.split(['?', '#']).next().unwrap_or(""))
}

/// Names an HTTP directory URL is probed for, since HTTP lists no directory: the
/// usual name of each kind the directory rule (`opener.rs`) takes, sets first.
const WELL_KNOWN: &[&str] = &[
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
    "model.tessera-set.json",
    "model.safetensors",
    "model.gguf",
    "model.zt",
    "pytorch_model.bin",
];

/// A directory URL: an S3 prefix is listed, an HTTP directory probed for the
/// [`WELL_KNOWN`] names; then the local directory rule picks what to open.
fn open_dir(loc: &Location, opts: &ReadOptions, remote: &RemoteOptions) -> Result<Opened> {
    let url = loc.display();
    if let Location::S3 { .. } = loc {
        let names = crate::remote::list_dir(loc, remote, opts.limits.max_entries)?;
        return open_dir_names(loc, names, opts, remote);
    }
    if loc.is_presigned() {
        return Err(Error::unsupported(
            "a presigned URL signs one object; a directory cannot be opened with it",
        )
        .in_file(url));
    }
    let found: Vec<Result<bool>> = std::thread::scope(|s| {
        let probes: Vec<_> = WELL_KNOWN
            .iter()
            .map(|n| s.spawn(move || crate::remote::exists(&loc.sibling(n), remote)))
            .collect();
        probes
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::new(ErrorKind::Io, "a probe thread panicked")))
            })
            .collect()
    });
    let mut names = Vec::new();
    for (name, there) in WELL_KNOWN.iter().zip(found) {
        if there? {
            names.push(name.to_string());
        }
    }
    match choose_in_directory(names).map_err(|e| e.in_file(url.clone()))? {
        Some(name) => open(&loc.sibling(&name), opts, remote),
        None => Err(Error::not_found(format!(
            "no model found: an HTTP server lists no directory, so these names were tried: {}; name the file to open",
            WELL_KNOWN.join(", ")
        ))
        .in_file(url)),
    }
}

/// The directory `dir` holding the objects `names`: the local directory rule's choice.
fn open_dir_names(
    dir: &Location,
    names: Vec<String>,
    opts: &ReadOptions,
    remote: &RemoteOptions,
) -> Result<Opened> {
    let url = dir.display();
    match choose_in_directory(names).map_err(|e| e.in_file(url.clone()))? {
        Some(name) => open(&dir.sibling(&name), opts, remote),
        None => {
            Err(Error::not_found(format!("no model in it (looked for {LOOKED_FOR})")).in_file(url))
        }
    }
}

fn open_tessera(
    loc: &Location,
    bytes: &[u8],
    opts: &ReadOptions,
    remote: &RemoteOptions,
) -> Result<Opened> {
    let url = loc.display();
    let exists = |p: &Path| {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
        name.is_some_and(|n| crate::remote::exists(&loc.sibling(&n), remote).unwrap_or(false))
    };
    let plan = tessera_index::plan_bytes(Path::new(&url), bytes, opts, &exists)?;
    build(plan, loc, opts, remote, HashMap::new())
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

/// The index beside the shard `name` at `loc` that names it, with its bytes:
/// `{prefix}{suffix}` (`.safetensors.index.json`, or `.tessera-set.json`; HTTP lists no
/// directory, so the conventional name is the one looked for, on S3 too), its shards
/// listed by `shard_names`. `None` — the shard then opens alone, as a local shard no
/// index names does — when there is no such index, it does not name the shard, or `loc`
/// is presigned (its signature fits the shard only).
fn index_naming(
    loc: &Location,
    n: &Numbered,
    name: &str,
    suffix: &str,
    shard_names: fn(&[u8]) -> Option<Vec<String>>,
    (opts, remote): (&ReadOptions, &RemoteOptions),
) -> Result<Option<(Location, Vec<u8>)>> {
    if loc.is_presigned() {
        return Ok(None);
    }
    let index = loc.sibling(&format!("{}{suffix}", n.prefix));
    if !crate::remote::exists(&index, remote)? {
        return Ok(None);
    }
    let bytes = fetch_index(&index, opts, remote)?;
    let names_it = shard_names(&bytes).is_some_and(|s| s.iter().any(|s| s == name));
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
