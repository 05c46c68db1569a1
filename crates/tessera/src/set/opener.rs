//! The one place a path becomes a container: [`open_path`]. A plain file opens as
//! today; an index file, any shard of a set, or a directory opens the set.
//!
//! How a path is read (links are followed throughout: a Hugging Face cache's
//! `snapshots/<rev>/` holds links into `blobs/`, named by hashes; a file is known by
//! its link's name, never its blob's):
//!
//! - a directory: the one `*.safetensors.index.json`, `*.bin.index.json`,
//!   `*.tessera-set.json` or first GGUF split (`*-00001-of-NNNNN.gguf`) in it; failing
//!   those, its one tensor file (a known extension); more than one candidate is an
//!   `InvalidInput` error listing them, except that PyTorch `.bin` candidates are passed
//!   over when safetensors ones are there (a Hugging Face repository often holds both);
//! - a Hugging Face cache's repository folder (`models--org--name/`, with `snapshots/`):
//!   the snapshot its `refs/main` names (or its only snapshot), as a directory;
//! - a file named `*.tessera-set.json`, or a JSON file with a `tessera_set` key: a
//!   Tessera set index;
//! - a file named `*.index.json`, or any file whose bytes are JSON (`{`) rather than a
//!   known format: a Hugging Face index (safetensors or PyTorch `.bin` shards);
//! - `*-NNNNN-of-NNNNN.gguf` whose `split.count` key is present: the GGUF split set;
//! - `*-NNNNN-of-NNNNN.safetensors` (`.bin`) named by a `*.safetensors.index.json`
//!   (`*.bin.index.json`) beside it: that index's set;
//! - any other `*-NNNNN-of-NNNNN.<ext>` named by a `*.tessera-set.json` beside it: that
//!   index's set;
//! - a zTensor v2 root whose manifest has a shard table: the file with its shards
//!   (`<stem>-<name>.zt` beside it, `zt2_shards.rs`);
//! - anything else: the file alone.
//!
//! With [`ReadOptions::shard_only`], a file opens alone whatever it is (a shard of a
//! set, a zTensor v2 root without its shards); a directory or an index is then an
//! `InvalidInput` error.
//!
//! A location ([`open_location`], and any path that parses as a URL): `file://` is the
//! path; `s3://…` and `http(s)://…` open the object read by range
//! ([`crate::remote::RemoteSource`], feature `remote`), or the set an index URL, a
//! shard's or a GGUF split's URL names, its shards resolved relative to that URL; a
//! directory URL goes through the directory rule above ([`choose_in_directory`]) over
//! an S3 listing or the well-known names an HTTP server has (`remote.rs`).

use std::path::{Path, PathBuf};

use super::file::{Load, OpenedFile};
use super::names::Numbered;
use super::{gguf_split, hf, tessera_index, zt2_shards, ModelSet};
use crate::any::ReadOptions;
use crate::error::{Error, ErrorKind, Result};
use crate::format::Format;
use crate::model::Container;
use crate::remote::{Location, RemoteOptions};

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

/// Opens `path` (a file, an index, a shard of a set, or a directory) with memory maps.
/// Every error names the file it is about. `opts.path` is ignored: each file's own
/// path is used.
pub fn open_path(path: &Path, opts: &ReadOptions) -> Result<Opened> {
    open_path_with(path, opts, Load::Map)
}

/// [`open_path`], choosing how the files' bytes are brought in. A path that parses as
/// a URL ([`Location::parse`]) opens as [`open_location`] does.
pub fn open_path_with(path: &Path, opts: &ReadOptions, load: Load) -> Result<Opened> {
    open_path_remote(path, opts, load, &RemoteOptions::default())
}

/// Opens `loc` (a URL or a path, see [`Location::parse`]) as [`open_path`] does, with
/// `remote` saying how to reach an object store.
pub fn open_location(
    loc: &str,
    opts: &ReadOptions,
    load: Load,
    remote: &RemoteOptions,
) -> Result<Opened> {
    open_path_remote(Path::new(loc), opts, load, remote)
}

/// [`open_path_with`] with options for remote locations.
pub fn open_path_remote(
    path: &Path,
    opts: &ReadOptions,
    load: Load,
    remote: &RemoteOptions,
) -> Result<Opened> {
    match Location::from_path(path).map_err(|e| e.in_file(path.display().to_string()))? {
        Location::Local(p) if p.as_path() != path => open_local(&p, opts, load),
        Location::Local(_) => open_local(path, opts, load),
        loc => open_remote(&loc, opts, remote),
    }
}

#[cfg(feature = "remote")]
fn open_remote(loc: &Location, opts: &ReadOptions, remote: &RemoteOptions) -> Result<Opened> {
    super::remote::open(loc, opts, remote)
}

#[cfg(not(feature = "remote"))]
fn open_remote(loc: &Location, _opts: &ReadOptions, _remote: &RemoteOptions) -> Result<Opened> {
    Err(crate::remote::not_enabled(loc))
}

fn open_local(path: &Path, opts: &ReadOptions, load: Load) -> Result<Opened> {
    let named = |e: Error| e.in_file(path.display().to_string());
    // `fs::metadata` follows symbolic links: a Hugging Face cache's files are links
    // into its `blobs/`, and a link to a directory is the directory.
    let meta = std::fs::metadata(path).map_err(|e| named(Error::from(e)))?;
    if meta.is_dir() {
        if opts.shard_only {
            return Err(named(Error::invalid_input(
                "a directory is not a shard: opening one file alone (shard-only) takes a file",
            )));
        }
        let target = in_directory(path, opts).map_err(named)?;
        return open_local(&target, opts, load);
    }
    let name = file_name(path);
    if opts.shard_only {
        if name.ends_with(tessera_index::INDEX_SUFFIX) || name.ends_with(".index.json") {
            return Err(named(Error::invalid_input(
                "this is a model set's index, not a shard: open it without shard-only to read the set",
            )));
        }
        return OpenedFile::open(path, opts, load).map(Opened::File);
    }
    if name.ends_with(tessera_index::INDEX_SUFFIX) {
        return open_tessera(path, opts, load);
    }
    if name.ends_with(".index.json") {
        return open_index(path, opts, load);
    }
    if let Some(n) = Numbered::parse(&name, ".gguf") {
        let first = OpenedFile::open(path, opts, load)?;
        if first.format() == Format::Gguf
            && gguf_split::is_split(crate::TensorSource::metadata(&first))
        {
            drop(first);
            let plan = gguf_split::plan(path, &n, opts)?;
            return ModelSet::build(plan, opts, load).map(|s| Opened::Set(Box::new(s)));
        }
        return Ok(Opened::File(first));
    }
    for ext in hf::SHARD_EXTENSIONS {
        if Numbered::parse(&name, ext).is_some() {
            if let Some(index) = index_naming(path, &name, &format!("{ext}.index.json"), opts) {
                return open_index(&index, opts, load);
            }
        }
    }
    let numbered = name
        .rfind('.')
        .is_some_and(|dot| Numbered::parse(&name, &name[dot..]).is_some());
    if numbered {
        if let Some(index) = tessera_index_naming(path, &name, opts) {
            return open_tessera(&index, opts, load);
        }
    }
    match OpenedFile::open(path, opts, load) {
        Ok(f) => zt2_shards::with_shards(path, f, opts, load).map(Opened::File),
        // Only a regular file is read a second time (a FIFO would block for good).
        Err(e)
            if e.kind() == ErrorKind::UnknownFormat
                && meta.is_file()
                && starts_with_brace(path) =>
        {
            let tessera = hf::read_index(path, opts).is_ok_and(|b| tessera_index::looks_like(&b));
            if tessera {
                open_tessera(path, opts, load)
            } else {
                open_index(path, opts, load)
            }
        }
        Err(e) => Err(e),
    }
}

fn open_index(path: &Path, opts: &ReadOptions, load: Load) -> Result<Opened> {
    let plan = hf::plan(path, opts)?;
    ModelSet::build(plan, opts, load).map(|s| Opened::Set(Box::new(s)))
}

fn open_tessera(path: &Path, opts: &ReadOptions, load: Load) -> Result<Opened> {
    let plan = tessera_index::plan(path, opts)?;
    ModelSet::build(plan, opts, load).map(|s| Opened::Set(Box::new(s)))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn starts_with_brace(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 64];
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    let n = f.read(&mut head).unwrap_or(0);
    head[..n]
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'{')
}

/// The one Hugging Face index (a name ending with `suffix`: `.safetensors.index.json`
/// for a safetensors shard, `.bin.index.json` for a PyTorch one) beside `path` that
/// names `name` as a shard. Links are followed (a Hugging Face cache's files are links).
fn index_naming(path: &Path, name: &str, suffix: &str, opts: &ReadOptions) -> Option<PathBuf> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    let mut hits = Vec::new();
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let n = entry.file_name().to_string_lossy().into_owned();
        if !n.ends_with(suffix) || !is_file(&entry.path()) {
            continue;
        }
        let Ok(bytes) = hf::read_index(&entry.path(), opts) else {
            continue;
        };
        if hf::shard_names(&bytes).is_some_and(|s| s.iter().any(|s| s == name)) {
            hits.push(path.with_file_name(n));
        }
    }
    (hits.len() == 1).then(|| hits.remove(0))
}

/// True for a regular file, or a link to one (`DirEntry::file_type` does not follow
/// links; `fs::metadata` does).
fn is_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// The one `*.tessera-set.json` beside `path` that names `name` as a shard.
fn tessera_index_naming(path: &Path, name: &str, opts: &ReadOptions) -> Option<PathBuf> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    let mut hits = Vec::new();
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let n = entry.file_name().to_string_lossy().into_owned();
        if !n.ends_with(tessera_index::INDEX_SUFFIX) || !is_file(&entry.path()) {
            continue;
        }
        let Ok(bytes) = hf::read_index(&entry.path(), opts) else {
            continue;
        };
        if tessera_index::shard_names(&bytes).is_some_and(|s| s.iter().any(|s| s == name)) {
            hits.push(path.with_file_name(n));
        }
    }
    (hits.len() == 1).then(|| hits.remove(0))
}

/// What to open in directory `dir`: a Hugging Face cache's repository folder
/// (`models--org--name`) is its current snapshot ([`hf_cache_snapshot`]); else
/// [`choose_in_directory`] over the regular files in it, links to files included.
fn in_directory(dir: &Path, _opts: &ReadOptions) -> Result<PathBuf> {
    if let Some(snapshot) = hf_cache_snapshot(dir)? {
        return Ok(snapshot);
    }
    let mut names = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(Error::from)?;
    for entry in entries {
        let entry = entry.map_err(Error::from)?;
        if is_file(&entry.path()) {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    match choose_in_directory(names)? {
        Some(name) => Ok(dir.join(name)),
        // EISDIR, as opening a directory as a file says (callers map it to their
        // "is a directory" error), with what was looked for.
        None => Err(Error::from(std::io::Error::from_raw_os_error(libc::EISDIR))
            .at_subject(format!("no model in it (looked for {LOOKED_FOR})"))),
    }
}

/// A Hugging Face cache's repository folder, `…/hub/models--org--name/` (as
/// `huggingface_hub` lays it out: `refs/main` holds the commit hash of the main branch,
/// `snapshots/<commit>/` its files as links into `blobs/`): the snapshot `refs/main`
/// names, or the only snapshot when there is no `refs/main`. `None` for any other
/// directory. A `refs/main` naming no snapshot, or several snapshots and no
/// `refs/main`, is an error saying which to name.
fn hf_cache_snapshot(dir: &Path) -> Result<Option<PathBuf>> {
    let is_repo = dir
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("models--"));
    let snapshots = dir.join("snapshots");
    if !is_repo || !snapshots.is_dir() {
        return Ok(None);
    }
    let refs_main = dir.join("refs").join("main");
    if let Ok(f) = std::fs::File::open(&refs_main) {
        use std::io::Read;
        // A commit hash: 40 hex digits (a little more is read to tell a longer file).
        let mut text = String::new();
        f.take(256)
            .read_to_string(&mut text)
            .map_err(|e| Error::from(e).at_subject(refs_main.display().to_string()))?;
        let rev = text.trim();
        // A commit hash; never a path out of snapshots/.
        if rev.is_empty() || !rev.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(
                Error::malformed(format!("refs/main holds {rev:?}, not a commit hash"))
                    .at_subject(refs_main.display().to_string()),
            );
        }
        let at = snapshots.join(rev);
        if !at.is_dir() {
            return Err(Error::not_found(format!(
                "a Hugging Face cache folder whose refs/main names revision {rev:?}, which has no snapshots/{rev}/ (download it, or name a snapshot directory)"
            )));
        }
        return Ok(Some(at));
    }
    let mut revs: Vec<String> = std::fs::read_dir(&snapshots)
        .map_err(|e| Error::from(e).at_subject(snapshots.display().to_string()))?
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    revs.sort();
    match revs.len() {
        1 => Ok(Some(snapshots.join(revs.remove(0)))),
        0 => Err(Error::not_found(
            "a Hugging Face cache folder with no snapshot in snapshots/",
        )),
        n => Err(Error::invalid_input(format!(
            "a Hugging Face cache folder with {n} snapshots and no refs/main: {}; name the snapshot directory (snapshots/<revision>) to open",
            revs.join(", ")
        ))),
    }
}

/// What [`choose_in_directory`] looks for, for messages.
pub(super) const LOOKED_FOR: &str =
    "a *.safetensors.index.json, a *.bin.index.json, a *.tessera-set.json, a *-00001-of-NNNNN.gguf split, or a single tensor file";

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
        if hf::is_index_name(&name) || name.ends_with(tessera_index::INDEX_SUFFIX) {
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
