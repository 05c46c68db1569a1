//! The one place a path or a URL becomes a container: [`open_path`]. A plain file
//! opens alone; an index file, any shard of a set, or a directory opens the set.
//!
//! The rule below is written once ([`open_at`]) over a [`Place`] (`place.rs`): a local
//! path, or a remote URL (`remote.rs`, feature `remote`). A place says only what it
//! can — is this a directory, what is in it, which indexes are beside a file, read an
//! index, open a file, open a set's shards — so the two cannot classify differently;
//! what each can do differs (an HTTP server lists nothing, a presigned URL reaches one
//! object), and `place.rs` tabulates it.
//!
//! How a path is read (links are followed throughout: a Hugging Face cache's
//! `snapshots/<rev>/` holds links into `blobs/`, named by hashes; a file is known by
//! its link's name, never its blob's):
//!
//! - a directory: the one `*.safetensors.index.json`, `*.bin.index.json`,
//!   `*.tessera-set.json`, `*.aeroset.json` or first GGUF split (`*-00001-of-NNNNN.gguf`) in it; failing
//!   those, its one tensor file (a known extension); more than one candidate is an
//!   `InvalidInput` error listing them, except that PyTorch `.bin` candidates are passed
//!   over when safetensors ones are there (a Hugging Face repository often holds both);
//! - a Hugging Face cache's repository folder (`models--org--name/`, with `snapshots/`):
//!   the snapshot its `refs/main` names (or its only snapshot), as a directory;
//! - a file named `*.tessera-set.json`, or a JSON file with a `tessera_set` key: a
//!   Tessera set index;
//! - a file named `*.aeroset.json`, or a JSON file whose `format.name` is `AEROSET`:
//!   an AEROSET (its format's own index kind, opened by the codec's hooks:
//!   `indexed.rs`);
//! - a file named `*.index.json`, or any file whose bytes are JSON (`{`) rather than a
//!   known format: a Hugging Face index (safetensors or PyTorch `.bin` shards);
//! - `*-NNNNN-of-NNNNN.gguf` whose `split.count` key is present: the GGUF split set;
//! - `*-NNNNN-of-NNNNN.safetensors` (`.bin`) named by the one `*.safetensors.index.json`
//!   (`*.bin.index.json`) beside it that names it: that index's set;
//! - any other `*-NNNNN-of-NNNNN.<ext>` named by the one `*.tessera-set.json` beside
//!   it that names it: that index's set (a remote place looks for the conventional
//!   `<prefix>.<suffix>` only);
//! - a zTensor v2 root whose manifest has a shard table: the file with its shards
//!   (`<stem>-<name>.zt` beside it, `zt2_shards.rs`);
//! - anything else: the file alone.
//!
//! With [`ReadOptions::shard_only`], a file opens alone whatever it is (a shard of a
//! set, a zTensor v2 root without its shards); a directory or an index is then an
//! `InvalidInput` error.
//!
//! A path that parses as a URL ([`Location::parse`]): `file://` is the path; `s3://…`
//! and `http(s)://…` are a remote place, each object read by range
//! ([`crate::remote::RemoteSource`]), reached as [`ReadOptions::remote`] says; its
//! shards are resolved relative to the URL; a directory URL's names are an S3 listing
//! or the well-known names an HTTP server has (`remote.rs`). Local files are mapped or
//! read whole as [`ReadOptions::load`] says.

use std::path::Path;

use super::file::OpenedFile;
use super::names::Numbered;
use super::place::{Local, Place};
use super::{gguf_split, hf, tessera_index, ModelSet};
use crate::any::ReadOptions;
use crate::error::{Error, ErrorKind, Result};
use crate::format::Format;
use crate::model::Container;
use crate::remote::Location;
use crate::write::SetStyle;

/// A path opened: one file or a set. Both are a [`Container`] that owns its bytes.
pub enum Opened {
    /// A single file.
    File(OpenedFile),
    /// A set of shards.
    Set(Box<ModelSet>),
}

impl Opened {
    /// The container.
    pub fn container(&self) -> &dyn Container {
        match self {
            Opened::File(f) => f,
            Opened::Set(s) => s.as_ref(),
        }
    }

    /// The file's bytes, when this is one file.
    pub fn file_bytes(&self) -> Option<&[u8]> {
        match self {
            Opened::File(f) => f.bytes(),
            Opened::Set(_) => None,
        }
    }

    /// The bytes of every file opened (one, or each shard that opened), to tell a
    /// borrow of them from decoded bytes.
    pub fn file_regions(&self) -> Vec<&[u8]> {
        match self {
            Opened::File(f) => f.bytes().into_iter().collect(),
            Opened::Set(s) => s
                .shards()
                .iter()
                .filter_map(|s| s.file.as_ref().and_then(OpenedFile::bytes))
                .collect(),
        }
    }

    /// True when the bytes are memory maps.
    pub fn is_mapped(&self) -> bool {
        match self {
            Opened::File(f) => f.is_mapped(),
            Opened::Set(s) => s
                .shards()
                .iter()
                .filter_map(|s| s.file.as_ref())
                .all(OpenedFile::is_mapped),
        }
    }

    /// The set, when this is one.
    pub fn as_set(&self) -> Option<&ModelSet> {
        match self {
            Opened::Set(s) => Some(s.as_ref()),
            Opened::File(_) => None,
        }
    }
}

/// Opens `path_or_url` — a local path, or a URL (`s3://…`, `http(s)://…`, `file://…`,
/// see [`Location::parse`]) — as a file, an index, a shard of a set, or a directory, as
/// the module docs say. Every error names the file it is about. `opts.path` is
/// ignored: each file's own path is used; `opts.load` says how local files are read,
/// `opts.remote` how remote ones are reached.
pub fn open_path<P: AsRef<Path> + ?Sized>(path_or_url: &P, opts: &ReadOptions) -> Result<Opened> {
    let path = path_or_url.as_ref();
    match Location::from_path(path).map_err(|e| e.in_file(path.display().to_string()))? {
        Location::Local(p) => open_at(&Local(p), opts),
        loc => open_remote(loc, opts),
    }
}

#[cfg(feature = "remote")]
fn open_remote(loc: Location, opts: &ReadOptions) -> Result<Opened> {
    open_at(&super::remote::Remote::new(loc, &opts.remote), opts)
}

#[cfg(not(feature = "remote"))]
fn open_remote(loc: Location, _opts: &ReadOptions) -> Result<Opened> {
    Err(crate::remote::not_enabled(&loc))
}

/// The rule, written once for a local path and a URL (`place.rs`).
pub(super) fn open_at<P: Place>(place: &P, opts: &ReadOptions) -> Result<Opened> {
    let named = |e: Error| e.in_file(place.shown());
    if place.is_dir().map_err(named)? {
        if opts.shard_only {
            return Err(named(Error::invalid_input(
                "a directory is not a shard: opening one file alone (shard-only) takes a file",
            )));
        }
        if let Some(snapshot) = place.hf_snapshot().map_err(named)? {
            return open_at(&snapshot, opts);
        }
        let names = place.list(opts).map_err(named)?;
        return open_in_dir(place, names, opts);
    }
    let name = place.name();
    let tessera = name.ends_with(tessera_index::INDEX_SUFFIX);
    let index = name.ends_with(".index.json");
    let own_index = crate::formats::indexed_set_for_name(&name);
    if opts.shard_only {
        if tessera || index || own_index.is_some() {
            return Err(named(Error::invalid_input(
                "this is a model set's index, not a shard: open it without shard-only to read the set",
            )));
        }
        return place.open_file(opts).map(Opened::File);
    }
    if let Some((_, hooks)) = own_index {
        refuse_single(place, "the files its index names")?;
        let bytes = place.read_index(opts)?;
        return open_own_index(place, &hooks, bytes, opts);
    }
    if tessera || index {
        refuse_single(place, "the shards its index names")?;
        let bytes = place.read_index(opts)?;
        return open_index(place, &bytes, tessera, opts);
    }
    // A numbered shard (`-0000i-of-0000n`) of a set whose index is beside it: a Hugging
    // Face index for safetensors and PyTorch shards, else (GGUF splits aside) a Tessera
    // index. None (the shard then opens alone) from a place that is one object only.
    let numbered = name
        .rfind('.')
        .and_then(|dot| Numbered::parse(&name, &name[dot..]));
    if let Some(n) = numbered.filter(|n| n.suffix != ".gguf" && !place.single()) {
        if hf::SHARD_EXTENSIONS.contains(&n.suffix.as_str()) {
            let suffix = format!("{}.index.json", n.suffix);
            if let Some((at, bytes)) =
                index_naming(place, &n, &name, &suffix, hf::shard_names, opts)?
            {
                return open_index(&at, &bytes, false, opts);
            }
        }
        let suffix = tessera_index::INDEX_SUFFIX;
        if let Some((at, bytes)) =
            index_naming(place, &n, &name, suffix, tessera_index::shard_names, opts)?
        {
            return open_index(&at, &bytes, true, opts);
        }
    }
    let first = match place.open_file(opts) {
        Ok(f) => f,
        // s3://bucket/ckpt with no object of that name: the directory ckpt/, when
        // something is in it.
        Err(e) if e.kind() == ErrorKind::NotFound => match place.missing_as_dir(opts) {
            Some((dir, names)) => return open_in_dir(&dir, names, opts),
            None => return Err(e),
        },
        // A JSON file of another name: an index (a Tessera one when it says so). Only
        // a regular file is read a second time (a FIFO would block for good).
        Err(e)
            if e.kind() == ErrorKind::UnknownFormat
                && place.is_regular()
                && place.starts_with_brace(opts) =>
        {
            refuse_single(place, "the shards its index names")?;
            let bytes = place.read_index(opts)?;
            if let Some((_, hooks)) = crate::formats::indexed_set_for_bytes(&bytes) {
                return open_own_index(place, &hooks, bytes, opts);
            }
            let tessera = tessera_index::looks_like(&bytes);
            return open_index(place, &bytes, tessera, opts);
        }
        Err(e) => return Err(e),
    };
    if let Some(n) = Numbered::parse(&name, ".gguf") {
        if first.format().codec().sets == SetStyle::GgufSplit
            && gguf_split::is_split(crate::TensorSource::metadata(&first))
        {
            refuse_single(place, "the other splits of its GGUF set")?;
            let plan = gguf_split::plan(&place.plan_path(), &n, opts)?;
            let set = place.build(plan, opts, Some((name, first)))?;
            return Ok(Opened::Set(Box::new(set)));
        }
    }
    place.with_zt2_shards(first, opts).map(Opened::File)
}

/// The directory `dir` holding the files `names`: what [`choose_in_directory`] picks.
fn open_in_dir<P: Place>(dir: &P, names: Vec<String>, opts: &ReadOptions) -> Result<Opened> {
    let named = |e: Error| e.in_file(dir.shown());
    match choose_in_directory(names).map_err(named)? {
        Some(name) => open_at(&dir.child(&name), opts),
        None => Err(named(dir.nothing_in_dir())),
    }
}

/// The set of the index at `place` (its `bytes`): a Tessera index, or a Hugging Face
/// one; its shards beside it.
fn open_index<P: Place>(
    place: &P,
    bytes: &[u8],
    tessera: bool,
    opts: &ReadOptions,
) -> Result<Opened> {
    let exists = |p: &Path| {
        p.file_name()
            .is_some_and(|n| place.exists_beside(&n.to_string_lossy()))
    };
    let path = place.plan_path();
    let plan = match tessera {
        true => tessera_index::plan_bytes(&path, bytes, opts, &exists)?,
        false => hf::plan_bytes(&path, bytes, opts, &exists)?,
    };
    let set = place.build(plan, opts, None)?;
    Ok(Opened::Set(Box::new(set)))
}

/// The set of an index of its format's own kind (AEROSET) at `place`, its files
/// opened by the format's hooks as it reads them (`indexed.rs`).
fn open_own_index<P: Place>(
    place: &P,
    hooks: &crate::formats::IndexedSet,
    bytes: Vec<u8>,
    opts: &ReadOptions,
) -> Result<Opened> {
    let files = place.set_files(opts);
    super::indexed::open(hooks, bytes, &place.shown(), files, opts).map(Opened::File)
}

/// A place that is one object only (a presigned URL signs its one object): `what` (the
/// rest of a set) cannot be fetched with it, so the set is refused rather than opened
/// in part.
fn refuse_single<P: Place>(place: &P, what: &str) -> Result<()> {
    if !place.single() {
        return Ok(());
    }
    Err(Error::unsupported(format!(
        "a presigned URL signs this one object, so {what} cannot be fetched with it; open the set by an unsigned URL (s3:// with credentials, or HTTP with a bearer token) or its files one by one"
    ))
    .in_file(place.shown()))
}

/// The one index beside the shard `name` (at `place`) whose name ends with `suffix`
/// (`.safetensors.index.json`, `.bin.index.json`, `.tessera-set.json`) and that lists
/// it among its shards (`shard_names`), with its bytes. An index that cannot be read
/// is passed over; `None` when no index, or more than one, names the shard.
fn index_naming<P: Place>(
    place: &P,
    n: &Numbered,
    name: &str,
    suffix: &str,
    shard_names: fn(&[u8]) -> Option<Vec<String>>,
    opts: &ReadOptions,
) -> Result<Option<(P, Vec<u8>)>> {
    let conventional = format!("{}{suffix}", n.prefix);
    let mut hits = Vec::new();
    for index in place.beside(suffix, &conventional)? {
        let Ok(bytes) = index.read_index(opts) else {
            continue;
        };
        if shard_names(&bytes).is_some_and(|s| s.iter().any(|s| s == name)) {
            hits.push((index, bytes));
        }
    }
    Ok(match hits.len() {
        1 => hits.pop(),
        _ => None,
    })
}

/// The rule for a directory, over the names of the regular files in it (a local
/// directory's, an S3 prefix's objects, or the well-known names an HTTP directory was
/// found to hold): the one model set (`*.safetensors.index.json`, `*.bin.index.json`,
/// `*.tessera-set.json`, a first GGUF split `*-00001-of-NNNNN.gguf`); failing those, the
/// one tensor file (a known extension, not `.json`). A Hugging Face repository often
/// holds one model twice, as safetensors and as PyTorch `.bin` (transformers loads the
/// safetensors): when any safetensors candidate (an index or a `.safetensors` file) is
/// there, the `.bin` files and `*.bin.index.json` sets are passed over. More than one
/// candidate left is an `InvalidInput` error listing them; `None` when there is none.
pub(super) fn choose_in_directory(names: Vec<String>) -> Result<Option<String>> {
    let mut sets = Vec::new();
    let mut files = Vec::new();
    for name in names {
        if hf::is_index_name(&name)
            || name.ends_with(tessera_index::INDEX_SUFFIX)
            || crate::formats::indexed_set_for_name(&name).is_some()
        {
            sets.push(name);
        } else if let Some(n) = Numbered::parse(&name, ".gguf") {
            if n.no == 1 {
                sets.push(name);
            }
        } else if Format::from_path(Path::new(&name)).is_some_and(Format::can_read)
            && !name.ends_with(".json")
        {
            files.push(name);
        }
    }
    let safetensors = (sets.iter().chain(&files))
        .any(|n| n.ends_with(hf::INDEX_SUFFIX) || n.ends_with(".safetensors"));
    if safetensors {
        sets.retain(|n| !n.ends_with(hf::BIN_INDEX_SUFFIX));
        files.retain(|n| !n.ends_with(".bin"));
    }
    sets.sort();
    files.sort();
    let pick = |mut list: Vec<String>, what: &str| -> Result<Option<String>> {
        match list.len() {
            1 => Ok(list.pop()),
            _ => Err(Error::invalid_input(format!(
                "the directory holds {} {what}: {}; name the one to open",
                list.len(),
                list.join(", ")
            ))),
        }
    };
    if !sets.is_empty() {
        return pick(sets, "model sets");
    }
    if files.is_empty() {
        return Ok(None);
    }
    pick(files, "tensor files")
}
