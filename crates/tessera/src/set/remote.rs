//! A remote location as a [`Place`] (feature `remote`): what the opener's one rule
//! (`opener.rs`) asks, answered over S3 and HTTP, every object read lazily by range.
//! What the rule makes of a URL:
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
//! - `…/NAME.aeroset.json` (or a JSON object whose `format.name` is `AEROSET`): an
//!   AEROSET, opened by the AERO codec's hooks (`indexed.rs`) with the objects beside
//!   the URL: the JSON and `index.aero` are fetched at open, a part only when a tensor
//!   in it is read; v0.2's `base_url` and parts given as URLs are fetched from there.
//! - `…/NAME.tessera-set.json`: a Tessera index, fetched and parsed as a local one is
//!   (`tessera_index.rs`), its shards beside it; their whole-file BLAKE3 is checked as
//!   locally (by `verify`, and before a checked read's first tensor from a shard), the
//!   shard fetched block by block for it.
//! - a directory — `s3://bucket/ckpt/`, `https://host/ckpt/` (a path ending with `/`),
//!   or `s3://bucket/ckpt` when no object has that key and the prefix `ckpt/` holds
//!   some: the directory rule (`opener.rs`, `choose_in_directory`) over the
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
use std::path::PathBuf;
use std::sync::Mutex;

use super::file::{Backing, Files, OpenedFile};
use super::place::{first_is_brace, Place, LOOKED_FOR};
use super::zt2_shards;
use super::{ModelSet, Plan};
use crate::any::ReadOptions;
use crate::error::{Error, ErrorKind, Result};
use crate::formats::ShardTable;
use crate::model::Container;
use crate::remote::{Location, RemoteOptions, RemoteSource};
use crate::source::ByteSource;

/// Shards opened (`HEAD` and first read) at once.
const PARALLEL: usize = 8;

/// A remote location and how to reach it.
pub(super) struct Remote {
    loc: Location,
    remote: RemoteOptions,
}

impl Remote {
    pub(super) fn new(loc: Location, remote: &RemoteOptions) -> Remote {
        Remote {
            loc,
            remote: remote.clone(),
        }
    }

    fn at(&self, loc: Location) -> Remote {
        Remote::new(loc, &self.remote)
    }
}

impl Place for Remote {
    fn shown(&self) -> String {
        self.loc.display()
    }

    fn name(&self) -> String {
        self.loc.file_name()
    }

    fn is_dir(&self) -> Result<bool> {
        Ok(self.loc.is_dir())
    }

    fn is_regular(&self) -> bool {
        true
    }

    fn sibling(&self, name: &str) -> Remote {
        self.at(self.loc.sibling(name))
    }

    fn child(&self, name: &str) -> Remote {
        self.at(self.loc.as_dir().sibling(name))
    }

    /// An S3 prefix is listed; an HTTP directory, which no server lists, is probed for
    /// the [`WELL_KNOWN`] names (a `HEAD` each, in parallel) and those found are its
    /// names.
    fn list(&self, opts: &ReadOptions) -> Result<Vec<String>> {
        let loc = &self.loc;
        if let Location::S3 { .. } = loc {
            return crate::remote::list_dir(loc, &self.remote, opts.limits.max_entries);
        }
        if loc.is_presigned() {
            return Err(Error::unsupported(
                "a presigned URL signs one object; a directory cannot be opened with it",
            ));
        }
        let remote = &self.remote;
        let found: Vec<Result<bool>> = std::thread::scope(|s| {
            let probes: Vec<_> = WELL_KNOWN
                .iter()
                .map(|n| s.spawn(move || crate::remote::exists(&loc.sibling(n), remote)))
                .collect();
            probes
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::new(ErrorKind::Io, "a probe thread panicked"))
                    })
                })
                .collect()
        });
        let mut names = Vec::new();
        for (name, there) in WELL_KNOWN.iter().zip(found) {
            if there? {
                names.push(name.to_string());
            }
        }
        Ok(names)
    }

    fn nothing_in_dir(&self) -> Error {
        match self.loc {
            Location::S3 { .. } => {
                Error::not_found(format!("no model in it (looked for {LOOKED_FOR})"))
            }
            _ => Error::not_found(format!(
                "no model found: an HTTP server lists no directory, so these names were tried: {}; name the file to open",
                WELL_KNOWN.join(", ")
            )),
        }
    }

    fn hf_snapshot(&self) -> Result<Option<Remote>> {
        Ok(None)
    }

    /// The conventional name only (a `HEAD`): HTTP lists no directory (S3 too, to
    /// behave alike, and to spare a listing per shard opened).
    fn beside(&self, _suffix: &str, conventional: &str) -> Result<Vec<Remote>> {
        let index = self.sibling(conventional);
        match crate::remote::exists(&index.loc, &self.remote)? {
            true => Ok(vec![index]),
            false => Ok(Vec::new()),
        }
    }

    fn exists_beside(&self, name: &str) -> bool {
        crate::remote::exists(&self.loc.sibling(name), &self.remote).unwrap_or(false)
    }

    /// The URL as a path (its file name is the index's or split's name, its parent the
    /// set's directory): shown, without the query string.
    fn plan_path(&self) -> PathBuf {
        let url = self.loc.display();
        PathBuf::from(url.split(['?', '#']).next().unwrap_or(""))
    }

    /// Refused over `Limits::max_index_bytes` before anything is fetched.
    fn read_index(&self, opts: &ReadOptions) -> Result<Vec<u8>> {
        let named = |e: Error| e.in_file(self.shown());
        let src = RemoteSource::open(&self.loc, &self.remote).map_err(named)?;
        // Checked before anything is fetched or allocated.
        opts.limits.check_index(src.len()).map_err(named)?;
        let bytes = src.read_at(0, src.len()).map_err(named)?;
        Ok(bytes.into_owned())
    }

    fn starts_with_brace(&self, _opts: &ReadOptions) -> bool {
        let Ok(src) = RemoteSource::open(&self.loc, &self.remote) else {
            return false;
        };
        let n = src.len().min(64);
        src.read_at(0, n).is_ok_and(|h| first_is_brace(&h))
    }

    fn open_file(&self, opts: &ReadOptions) -> Result<OpenedFile> {
        open_file(&self.loc, opts, &self.remote)
    }

    /// `s3://bucket/ckpt` with no object of that name: the directory `ckpt/`, when
    /// something is in it.
    fn missing_as_dir(&self, opts: &ReadOptions) -> Option<(Remote, Vec<String>)> {
        if !matches!(self.loc, Location::S3 { .. }) {
            return None;
        }
        let names = crate::remote::list_dir(&self.loc, &self.remote, opts.limits.max_entries);
        match names {
            Ok(names) if !names.is_empty() => Some((self.at(self.loc.as_dir()), names)),
            _ => None,
        }
    }

    fn build(
        &self,
        plan: Plan,
        opts: &ReadOptions,
        first: Option<(String, OpenedFile)>,
    ) -> Result<ModelSet> {
        let pre = first.into_iter().map(|(n, f)| (n, Ok(f))).collect();
        build(plan, &self.loc, opts, &self.remote, pre)
    }

    /// Not for a presigned root (its signature fits the root only: it opens alone).
    fn with_zt2_shards(&self, file: OpenedFile, opts: &ReadOptions) -> Result<OpenedFile> {
        match file.format().codec().shard_table {
            Some(st) if !self.loc.is_presigned() => {
                with_zt2_shards(&st, &self.loc, file, opts, &self.remote)
            }
            _ => Ok(file),
        }
    }

    fn single(&self) -> bool {
        self.loc.is_presigned()
    }

    fn set_files(&self, _opts: &ReadOptions) -> std::sync::Arc<dyn crate::formats::SetFiles> {
        std::sync::Arc::new(super::indexed::RemoteFiles {
            loc: self.loc.clone(),
            remote: self.remote.clone(),
        })
    }
}

/// A root with the shards its shard table names (zTensor v2: the format's
/// [`ShardTable`]), each opened beside it at its positional name (`<stem>-<name>.zt`,
/// `zt2_shards.rs`); a root without a table is returned as it is. The identity search a
/// local root falls back on (every file of the directory hashed) is not done: a shard
/// not at its name fails the open, naming it.
fn with_zt2_shards(
    st: &ShardTable,
    loc: &Location,
    file: OpenedFile,
    opts: &ReadOptions,
    remote: &RemoteOptions,
) -> Result<OpenedFile> {
    let url = loc.display();
    let named = |e: Error| e.in_file(url.clone());
    let table = (st.table)(file.source(), opts).map_err(named)?;
    if table.is_empty() {
        return Ok(file);
    }
    let root = PathBuf::from(loc.file_name());
    let names: Vec<String> = table
        .iter()
        .map(|(n, _, _)| {
            let p = (st.shard_path)(&root, n);
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
    zt2_shards::assemble(st, files, url.clone(), Vec::new(), &[], opts).map_err(named)
}

/// Names an HTTP directory URL is probed for, since HTTP lists no directory: the
/// usual name of each kind the directory rule (`opener.rs`) takes, sets first.
const WELL_KNOWN: &[&str] = &[
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
    "model.tessera-set.json",
    "model.aeroset.json",
    ".metadata",
    "model.safetensors",
    "model.gguf",
    "model.zt",
    "pytorch_model.bin",
];

/// One remote object, its errors naming the URL.
fn open_file(loc: &Location, opts: &ReadOptions, remote: &RemoteOptions) -> Result<OpenedFile> {
    let url = loc.display();
    let src = RemoteSource::open(loc, remote).map_err(|e| e.in_file(url.clone()))?;
    let mut opts = opts.clone();
    opts.path = Some(url.into());
    opts.sibling = Some(sibling_of(loc, remote));
    OpenedFile::from_source(Box::new(src), &opts)
}

/// Reads `<loc><suffix>` (WTXT's `.wsum`) beside the object at `loc`, refusing one of
/// more than `max` bytes before fetching it.
fn sibling_of(loc: &Location, remote: &RemoteOptions) -> crate::any::Sibling {
    let (loc, remote) = (loc.clone(), remote.clone());
    std::sync::Arc::new(move |suffix: &str, max: u64| {
        let side = loc.sibling(&format!("{}{suffix}", loc.file_name()));
        let url = side.display();
        match RemoteSource::open(&side, &remote) {
            Err(e) if e.kind() == ErrorKind::NotFound => {
                Err(format!("unfinalized: {url} not found"))
            }
            Err(e) => Err(format!("{url}: {}", e.message())),
            Ok(src) if src.len() > max => Err(format!("{url}: too long for a WSUM")),
            Ok(src) => src
                .read_at(0, src.len())
                .map(|b| b.into_owned())
                .map_err(|e| format!("{url}: {}", e.message())),
        }
    })
}

/// Opens the plan's shards beside `loc` (those in `pre` already open) and builds the set.
fn build(
    plan: Plan,
    loc: &Location,
    opts: &ReadOptions,
    remote: &RemoteOptions,
    mut pre: HashMap<String, Result<OpenedFile>>,
) -> Result<ModelSet> {
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
            o.sibling = Some(sibling_of(&shard, remote));
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
    ModelSet::build_with(plan, opts, &open)
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
