//! Where the files of a path are: the few things the opener's rule (`opener.rs`) asks
//! of a place, for a local path ([`Local`], here) and for a remote URL (`remote.rs`).
//! The rule is written once over [`Place`]; what differs between the two is only
//! what each can do:
//!
//! | asked | a local path | a remote URL |
//! | --- | --- | --- |
//! | is it a directory | `fs::metadata` (links followed) | the URL ends with `/` |
//! | the files in a directory | `read_dir`, regular files and links to them | S3: one `ListObjectsV2`; HTTP: a `HEAD` for each of a few well-known names |
//! | the indexes beside a shard | every `*<suffix>` in its directory | the conventional `<prefix><suffix>` (a `HEAD`) |
//! | a Hugging Face cache folder (`models--org--name/`) | its snapshot | not looked for |
//! | a name with no file | not found | S3: the prefix `name/`, when it holds objects |
//! | a zTensor v2 root's shards | positional, else by identity | positional only |
//! | one object only (a presigned URL) | never | a presigned URL: no set, no index looked for |

use std::path::{Path, PathBuf};

use super::file::OpenedFile;
use super::{ModelSet, Plan};
use crate::any::ReadOptions;
use crate::error::{Error, Result};

/// What the opener's rule asks of where a path's files are.
pub(super) trait Place: Sized {
    /// The place as messages show it (a path, or a URL with its secrets redacted).
    fn shown(&self) -> String;
    /// Its file name (the last component, without a query string).
    fn name(&self) -> String;
    /// True for a directory (links followed); an error when there is nothing at all
    /// and that can be known without opening it (a local path).
    fn is_dir(&self) -> Result<bool>;
    /// True for a regular file, which can be read twice (not a FIFO).
    fn is_regular(&self) -> bool;
    /// The file `name` in the same directory.
    fn sibling(&self, name: &str) -> Self;
    /// The file `name` in this directory.
    fn child(&self, name: &str) -> Self;
    /// The names of the files directly in this directory (no subdirectories).
    fn list(&self, opts: &ReadOptions) -> Result<Vec<String>>;
    /// The error when [`super::opener::choose_in_directory`] finds nothing to open.
    fn nothing_in_dir(&self) -> Error;
    /// A Hugging Face cache's repository folder: the snapshot to open.
    fn hf_snapshot(&self) -> Result<Option<Self>>;
    /// The files beside this one whose names end with `suffix` (`conventional` is the
    /// usual one, all a place that cannot list looks for).
    fn beside(&self, suffix: &str, conventional: &str) -> Result<Vec<Self>>;
    /// Whether the file `name` beside this one exists.
    fn exists_beside(&self, name: &str) -> bool;
    /// The path a set's plan is made with (its parent the set's directory).
    fn plan_path(&self) -> PathBuf;
    /// The file's bytes, whole, refused over `Limits::max_index_bytes`; errors name it.
    fn read_index(&self, opts: &ReadOptions) -> Result<Vec<u8>>;
    /// True when the first non-blank byte is `{` (a JSON file).
    fn starts_with_brace(&self, opts: &ReadOptions) -> bool;
    /// The file opened as whatever format its bytes say; errors name it.
    fn open_file(&self, opts: &ReadOptions) -> Result<OpenedFile>;
    /// A name with no file that is a directory all the same (an S3 prefix), with the
    /// names in it.
    fn missing_as_dir(&self, opts: &ReadOptions) -> Option<(Self, Vec<String>)>;
    /// The set `plan` describes, its shards opened beside this place (`first`, already
    /// open, under its name).
    fn build(
        &self,
        plan: Plan,
        opts: &ReadOptions,
        first: Option<(String, OpenedFile)>,
    ) -> Result<ModelSet>;
    /// `file` with the shards a zTensor v2 root's table names; else `file` unchanged.
    fn with_zt2_shards(&self, file: OpenedFile, opts: &ReadOptions) -> Result<OpenedFile>;
    /// True when only this one object can be read with what the place carries (a
    /// presigned URL): no index is looked for beside it, no set opened from it.
    fn single(&self) -> bool;
    /// What opens the files an index here names (an AEROSET's parts), beside it or at
    /// the URLs it gives (`indexed.rs`).
    fn set_files(&self, opts: &ReadOptions) -> std::sync::Arc<dyn crate::formats::SetFiles>;
}

/// What [`super::opener::choose_in_directory`] looks for, for messages.
pub(super) const LOOKED_FOR: &str =
    "a *.safetensors.index.json, a *.bin.index.json, a *.tessera-set.json, a *.aeroset.json, a *-00001-of-NNNNN.gguf split, or a single tensor file";

/// A local path (links are followed throughout: a Hugging Face cache's
/// `snapshots/<rev>/` holds links into `blobs/`; a file is known by its link's name).
pub(super) struct Local(pub PathBuf);

impl Local {
    fn dir(&self) -> &Path {
        let dir = self.0.parent().filter(|d| !d.as_os_str().is_empty());
        dir.unwrap_or(Path::new("."))
    }
}

/// True for a regular file, or a link to one (`DirEntry::file_type` does not follow
/// links; `fs::metadata` does).
fn is_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

impl Place for Local {
    fn shown(&self) -> String {
        self.0.display().to_string()
    }

    fn name(&self) -> String {
        (self.0.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    fn is_dir(&self) -> Result<bool> {
        // `fs::metadata` follows links: a link to a directory is the directory.
        Ok(std::fs::metadata(&self.0).map_err(Error::from)?.is_dir())
    }

    fn is_regular(&self) -> bool {
        is_file(&self.0)
    }

    fn sibling(&self, name: &str) -> Local {
        Local(self.0.with_file_name(name))
    }

    fn child(&self, name: &str) -> Local {
        Local(self.0.join(name))
    }

    fn list(&self, _opts: &ReadOptions) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.0).map_err(Error::from)? {
            let entry = entry.map_err(Error::from)?;
            if is_file(&entry.path()) {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        Ok(names)
    }

    fn nothing_in_dir(&self) -> Error {
        // EISDIR, as opening a directory as a file says (callers map it to their "is a
        // directory" error), with what was looked for.
        Error::from(std::io::Error::from_raw_os_error(libc::EISDIR))
            .at_subject(format!("no model in it (looked for {LOOKED_FOR})"))
    }

    fn hf_snapshot(&self) -> Result<Option<Local>> {
        hf_cache_snapshot(&self.0).map(|s| s.map(Local))
    }

    fn beside(&self, suffix: &str, _conventional: &str) -> Result<Vec<Local>> {
        let Ok(entries) = std::fs::read_dir(self.dir()) else {
            return Ok(Vec::new());
        };
        let mut found = Vec::new();
        for entry in entries.flatten() {
            let n = entry.file_name().to_string_lossy().into_owned();
            if n.ends_with(suffix) && is_file(&entry.path()) {
                found.push(self.sibling(&n));
            }
        }
        Ok(found)
    }

    fn exists_beside(&self, name: &str) -> bool {
        self.0.with_file_name(name).exists()
    }

    fn plan_path(&self) -> PathBuf {
        self.0.clone()
    }

    fn read_index(&self, opts: &ReadOptions) -> Result<Vec<u8>> {
        super::hf::read_index(&self.0, opts).map_err(|e| e.in_file(self.shown()))
    }

    fn starts_with_brace(&self, _opts: &ReadOptions) -> bool {
        use std::io::Read;
        let mut head = [0u8; 64];
        let Ok(mut f) = std::fs::File::open(&self.0) else {
            return false;
        };
        let n = f.read(&mut head).unwrap_or(0);
        first_is_brace(&head[..n])
    }

    fn open_file(&self, opts: &ReadOptions) -> Result<OpenedFile> {
        OpenedFile::open(&self.0, opts)
    }

    fn missing_as_dir(&self, _opts: &ReadOptions) -> Option<(Local, Vec<String>)> {
        None
    }

    fn build(
        &self,
        plan: Plan,
        opts: &ReadOptions,
        first: Option<(String, OpenedFile)>,
    ) -> Result<ModelSet> {
        let dir = plan.dir.clone();
        let first = std::cell::RefCell::new(first);
        let open = |name: &str| {
            let mut held = first.borrow_mut();
            match held.take() {
                Some((n, f)) if n == name => Ok(f),
                other => {
                    *held = other;
                    OpenedFile::open(&dir.join(name), opts)
                }
            }
        };
        ModelSet::build_with(plan, opts, &open)
    }

    fn with_zt2_shards(&self, file: OpenedFile, opts: &ReadOptions) -> Result<OpenedFile> {
        super::zt2_shards::with_shards(&self.0, file, opts)
    }

    fn single(&self) -> bool {
        false
    }

    fn set_files(&self, opts: &ReadOptions) -> std::sync::Arc<dyn crate::formats::SetFiles> {
        std::sync::Arc::new(super::indexed::LocalFiles {
            dir: self.dir().to_path_buf(),
            load: opts.load,
            remote: opts.remote.clone(),
        })
    }
}

/// True when the first byte that is not white space is `{`.
pub(super) fn first_is_brace(head: &[u8]) -> bool {
    (head.iter())
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'{')
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
