//! zTensor v2 sets of several files (spec §7): what the set code (`set/zt2_shards.rs`,
//! `set/write.rs`, `set/remote.rs`) needs of the format, given through
//! [`crate::formats::Codec::shard_table`] so that it never names zTensor: the shard
//! table a root holds, the positional name of a shard (Appendix B: shard `n` of the
//! root `<stem>.zt` is the sibling `<stem>-<n>.zt`), a whole-file digest in the
//! table's algorithms (`xxh3`, `sha256`), the root opened with its shard files, and the
//! writer of a set (data shards, then the root naming them).

use std::path::{Path, PathBuf};

use super::{Ztensor2File, Ztensor2Writer};
use crate::any::ReadOptions;
use crate::error::{Error, Result};
use crate::formats::ShardTable;
use crate::model::{Container, TensorSource};
use crate::options::WriteOptions;
use crate::source::SourceRef;

/// zTensor v2's shard-table hooks.
pub const HOOKS: ShardTable = ShardTable {
    table,
    shard_path,
    digest_algorithms: &["xxh3", "sha256"],
    file_digest,
    open: open_with_shards,
    write: write_set,
};

/// The shard table of the root `src`: label, size and whole-file digest per shard.
fn table(src: SourceRef<'_>, opts: &ReadOptions) -> Result<Vec<(String, u64, String)>> {
    Ok(Ztensor2File::parse(src, opts)?.shards().to_vec())
}

/// The path shard `name` of the root at `root` resolves to.
pub fn shard_path(root: &Path, name: &str) -> PathBuf {
    let stem = root
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    root.with_file_name(format!("{stem}-{name}.zt"))
}

/// The root `main` with its shard files `shards` (in table order) as one container
/// named `label`, with `warnings` (how shards were found) added; `matched`: shards whose
/// whole-file digest was found to match while resolving them (not hashed again before
/// a checked read).
fn open_with_shards<'d>(
    main: SourceRef<'d>,
    shards: Vec<SourceRef<'d>>,
    label: &str,
    warnings: &[String],
    matched: &[String],
    opts: &ReadOptions,
) -> Result<Box<dyn Container + 'd>> {
    let mut zt = Ztensor2File::parse(main, opts)?
        .with_shards(shards)?
        .named(label);
    for w in warnings {
        zt = zt.warn(w.clone());
    }
    for m in matched {
        zt = zt.shard_digest_matched(m);
    }
    Ok(Box::new(zt))
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
fn write_set(
    src: &dyn TensorSource,
    groups: &[std::ops::Range<usize>],
    path: &Path,
    tmp: &Path,
    opts: &WriteOptions,
) -> Result<Vec<String>> {
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
        let w = Ztensor2Writer::new(&mut out, opts)?;
        // The group's tensors in name order, read ahead and encoded on the pool.
        let group = Some(infos[g.clone()].iter().map(|t| t.name.clone()).collect());
        let stream = super::write::Ztensor2Stream {
            w,
            src,
            names: group,
        };
        let (_, objects) = crate::write::drive(src, stream)?.finish_data_shard()?;
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
