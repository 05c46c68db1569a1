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

use std::path::{Path, PathBuf};

use super::file::{Backing, Files, OpenedFile};
use crate::any::{Load, ReadOptions};
use crate::error::{Error, Result};
use crate::formats::ztensor2::Ztensor2File;
use crate::source::{FileData, SourceRef};
use crate::write::SetStyle;

/// The path shard `name` of the root at `root` resolves to.
pub fn shard_path(root: &Path, name: &str) -> PathBuf {
    let stem = root
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    root.with_file_name(format!("{stem}-{name}.zt"))
}

/// `file` (opened from `path`) with the shards its table names, when it is a zTensor v2
/// root with a shard table; else `file` unchanged.
pub fn with_shards(path: &Path, file: OpenedFile, opts: &ReadOptions) -> Result<OpenedFile> {
    if crate::model::Container::format(&file).codec().sets != SetStyle::ShardTable {
        return Ok(file);
    }
    // A root read by range (remote) is opened alone: its shards are not fetched.
    let Some(bytes) = file.bytes() else {
        return Ok(file);
    };
    let table: Vec<(String, u64, String)> = Ztensor2File::parse(bytes, opts)?.shards().to_vec();
    if table.is_empty() {
        return Ok(file);
    }
    let named = |e: Error| e.in_file(path.display().to_string());
    let mut shards = Vec::with_capacity(table.len());
    let mut found = Vec::new();
    let mut matched = Vec::new();
    for (name, size, digest) in &table {
        let p = match by_identity(path, name, *size, digest).map_err(&named)? {
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
    assemble(files, label, found, &matched, opts).map_err(named)
}

/// The root and its shard files (in table order) opened as one file named `label`,
/// with `warnings` (how shards were found) added: local files, or remote objects
/// (`set/remote.rs`). `matched`: shards whose whole-file digest was found to match
/// while resolving them (not hashed again before a checked read).
pub(super) fn assemble(
    files: Files,
    label: String,
    warnings: Vec<String>,
    matched: &[String],
    opts: &ReadOptions,
) -> Result<OpenedFile> {
    OpenedFile::from_files(files, |f| {
        let srcs: Vec<SourceRef<'_>> = f.shards.iter().map(Backing::source).collect();
        let mut zt = Ztensor2File::parse(f.main.source(), opts)?
            .with_shards(srcs)?
            .named(label.clone());
        for w in &warnings {
            zt = zt.warn(w.clone());
        }
        for m in matched {
            zt = zt.shard_digest_matched(m);
        }
        Ok(Box::new(zt) as Box<dyn crate::model::Container + '_>)
    })
}

/// The file standing for shard `name` (`size` bytes, whole-file `digest`) when the
/// positional sibling is missing or of another size: the first regular file in the
/// root's directory, by name, with that size and digest (see the module docs). `None`
/// when the positional file fits, or nothing does (the caller then reports the
/// positional path).
fn by_identity(root: &Path, name: &str, size: u64, digest: &str) -> Result<Option<PathBuf>> {
    let positional = shard_path(root, name);
    if std::fs::metadata(&positional).is_ok_and(|m| m.is_file() && m.len() == size) {
        return Ok(None);
    }
    let algo = match digest.split_once(':') {
        Some((a @ ("xxh3" | "sha256"), _)) => a,
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
        if file_digest(&c, algo)? == digest {
            return Ok(Some(c));
        }
    }
    Ok(None)
}

/// `<algo>:<lowercase hex>` of a whole file (`xxh3` or `sha256`), read in 1 MiB blocks.
fn file_digest(path: &Path, algo: &str) -> Result<String> {
    use sha2::Digest as _;
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut xxh = xxhash_rust::xxh3::Xxh3::new();
    let mut sha = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        if algo == "xxh3" {
            xxh.update(&buf[..n]);
        } else {
            sha.update(&buf[..n]);
        }
    }
    Ok(if algo == "xxh3" {
        format!("xxh3:{:016x}", xxh.digest())
    } else {
        format!("sha256:{}", crate::util::hex(&sha.finalize()))
    })
}

/// Writes `src` (prepared for zTensor v2) as data shards `<stem>-0000i-of-0000n.zt`
/// (shard names `0000i-of-0000n`, each group's tensors in name order) and the root
/// `<stem>.zt` at `path`, whose manifest states every object with its parts' `shard`
/// and the table of each shard's size and SHA-256. Files go into `tmp` (a directory
/// beside `path`); returns their names, shards first, the root last.
pub fn write_set(
    src: &dyn crate::model::TensorSource,
    groups: &[std::ops::Range<usize>],
    path: &Path,
    tmp: &Path,
    opts: &crate::convert::WriteOptions,
) -> Result<Vec<String>> {
    use crate::formats::ztensor2::Ztensor2Writer;
    use std::io::{BufWriter, Write};
    let root_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = groups.len();
    let infos = src.tensor_infos();
    let mut root_file = BufWriter::new(std::fs::File::create(tmp.join(&root_name))?);
    let mut root = Ztensor2Writer::new(&mut root_file, opts)?;
    root.set_metadata(src.metadata())?;
    let mut names = Vec::with_capacity(n + 1);
    for (i, g) in groups.iter().enumerate() {
        let label = format!("{:05}-of-{n:05}", i + 1);
        let file = shard_path(path, &label);
        let fname = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let at = tmp.join(&fname);
        let mut out = BufWriter::new(std::fs::File::create(&at)?);
        let mut w = Ztensor2Writer::new(&mut out, opts)?;
        let mut group: Vec<&str> = infos[g.clone()].iter().map(|t| t.name.as_str()).collect();
        group.sort_unstable();
        for name in group {
            let view = src.tensor(name)?;
            w.add_tensor(&view, src)
                .map_err(|e| e.at_subject(format!("tensor {name:?}")))?;
        }
        let (_, objects) = w.finish_data_shard()?;
        out.flush()?;
        let f = out.into_inner().map_err(|e| Error::from(e.into_error()))?;
        f.sync_all()?;
        drop(f);
        let (size, digest) = sha256_file(&at)?;
        root.add_shard(&label, size, format!("sha256:{digest}"), objects)?;
        names.push(fname);
    }
    root.finish()?;
    root_file.flush()?;
    let f = root_file
        .into_inner()
        .map_err(|e| Error::from(e.into_error()))?;
    f.sync_all()?;
    names.push(root_name);
    Ok(names)
}

/// A file's size and SHA-256 (hex), read in 1 MiB blocks.
fn sha256_file(path: &Path) -> Result<(u64, String)> {
    use sha2::Digest as _;
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        size += n as u64;
    }
    Ok((size, crate::util::hex(&h.finalize())))
}
