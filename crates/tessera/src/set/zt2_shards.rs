//! zTensor v2 models stored across files (spec §7): a root file whose manifest's shard
//! table names data shards (or other `.zt` files) by a label, with each shard's exact
//! size and whole-file digest. Opened as one file whose parts in shards read as its
//! own.
//!
//! Resolution is the spec's positional convention (Appendix B): shard `n` of the root
//! `<stem>.zt` is the sibling `<stem>-<n>.zt` (shard names admit no separators or `..`,
//! spec §7.1, checked when the manifest is read). When that file is missing or not of
//! the table's size, the spec's fallback, resolution by identity (Appendix B: "a
//! resolver MAY ignore names entirely and scan a directory, matching each file by size
//! and whole-file digest"), is tried: the regular files in the root's directory of
//! exactly the table's size are hashed whole (in name order, the root skipped) with
//! the table's algorithm (`xxh3` or `sha256`; another algorithm cannot match), and the
//! first whose digest equals the table's is the shard; the open then warns which file
//! served which shard. A shard found by neither fails the open, naming the shard and the
//! positional path looked for. A positional shard's whole-file digest is checked by
//! `verify` (layer `shard digest`), as the spec's verification ladder puts it after the
//! size, and by a checked read ([`ReadOptions::verify`], on unless `--no-verify`) once
//! per shard, lazily: the first tensor read with a part in the shard hashes the whole
//! shard first, and no byte of a shard whose digest is wrong is handed out (an
//! `Integrity` error naming the shard, for every read from it). Opening hashes nothing
//! (a shard no tensor is read from is never hashed); a shard found by identity was
//! hashed to be found and is not hashed again. Only the root's directory is scanned,
//! never its subdirectories.
//!
//! A remote root (`s3://`, `http(s)://`: `set/remote.rs`) opens its shards at the
//! positional URLs beside it, read by range as the root is ([`assemble`] is shared);
//! the search by identity is local-only (it would fetch every object of the prefix
//! whole), so there a shard not at its positional name fails the open. A remote
//! shard's digest is checked by the same rule, on first use: the first checked read
//! from it fetches the whole shard to hash it (what the guarantee costs over a range
//! reader; `--no-verify` reads by range alone).
//!
//! The format's own pieces (reading the table, the positional name, the whole-file
//! digests, opening the root with its shards, writing a set) are its codec's
//! [`ShardTable`] hooks (`formats/ztensor2/shards.rs`): this module names no format.

use std::path::{Path, PathBuf};

use super::file::{Backing, Files, OpenedFile};
use crate::any::{Load, ReadOptions};
use crate::error::{Error, Result};
use crate::formats::ShardTable;
use crate::source::{FileData, SourceRef};

/// `file` (opened from `path`) with the shards its table names, when it is a root with a
/// shard table (its format's codec has [`crate::formats::Codec::shard_table`]: zTensor
/// v2); else `file` unchanged.
pub fn with_shards(path: &Path, file: OpenedFile, opts: &ReadOptions) -> Result<OpenedFile> {
    let Some(st) = crate::model::Container::format(&file).codec().shard_table else {
        return Ok(file);
    };
    // A root read by range (remote) is opened alone: its shards are not fetched.
    let Some(bytes) = file.bytes() else {
        return Ok(file);
    };
    let table = (st.table)(bytes.into(), opts)?;
    let shard_path = st.shard_path;
    if table.is_empty() {
        return Ok(file);
    }
    let named = |e: Error| e.in_file(path.display().to_string());
    let mut shards = Vec::with_capacity(table.len());
    let mut found = Vec::new();
    let mut matched = Vec::new();
    for (name, size, digest) in &table {
        let p = match by_identity(&st, path, name, *size, digest).map_err(&named)? {
            Some(q) => {
                matched.push(name.clone());
                found.push(format!(
                    "shard {name:?} was found by its size and digest as {} (not as {})",
                    q.display(),
                    shard_path(path, name).display()
                ));
                q
            }
            None => shard_path(path, name),
        };
        let data = match opts.load {
            Load::Map => FileData::open(&p),
            Load::Read => FileData::read(&p),
        };
        let data = data.map_err(|e| {
            named(Error::new(
                e.kind(),
                format!("shard {name:?} ({}): {}", p.display(), e.message()),
            ))
        })?;
        shards.push(Backing::Data(data));
    }
    let files = Files {
        main: file.into_owner().main,
        shards,
    };
    let label = path.display().to_string();
    assemble(&st, files, label, found, &matched, opts).map_err(named)
}

/// The root and its shard files (in table order) opened as one file named `label`,
/// with `warnings` (how shards were found) added: local files, or remote objects
/// (`set/remote.rs`). `matched`: shards whose whole-file digest was found to match
/// while resolving them (not hashed again before a checked read).
pub(super) fn assemble(
    st: &ShardTable,
    files: Files,
    label: String,
    warnings: Vec<String>,
    matched: &[String],
    opts: &ReadOptions,
) -> Result<OpenedFile> {
    OpenedFile::from_files(files, |f| {
        let srcs: Vec<SourceRef<'_>> = f.shards.iter().map(Backing::source).collect();
        (st.open)(f.main.source(), srcs, &label, &warnings, matched, opts)
    })
}

/// The file standing for shard `name` (`size` bytes, whole-file `digest`) when the
/// positional sibling is missing or of another size: the first regular file in the
/// root's directory, by name, with that size and digest (see the module docs). `None`
/// when the positional file fits, or nothing does (the caller then reports the
/// positional path).
fn by_identity(
    st: &ShardTable,
    root: &Path,
    name: &str,
    size: u64,
    digest: &str,
) -> Result<Option<PathBuf>> {
    let positional = (st.shard_path)(root, name);
    if std::fs::metadata(&positional).is_ok_and(|m| m.is_file() && m.len() == size) {
        return Ok(None);
    }
    let algo = match digest.split_once(':') {
        Some((a, _)) if st.digest_algorithms.contains(&a) => a,
        _ => return Ok(None),
    };
    let dir = match root.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let root_name = root.file_name();
    let mut candidates = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        // `DirEntry::metadata` does not follow symlinks; `fs::metadata` does.
        let fits = std::fs::metadata(entry.path()).is_ok_and(|m| m.is_file() && m.len() == size);
        if fits && Some(entry.file_name().as_os_str()) != root_name {
            candidates.push(entry.path());
        }
    }
    candidates.sort();
    for c in candidates {
        if (st.file_digest)(&c, algo)? == digest {
            return Ok(Some(c));
        }
    }
    Ok(None)
}
