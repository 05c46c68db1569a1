//! Writing a model as a set: shards plus the index its ecosystem reads.
//!
//! - safetensors → a Hugging Face set: `{stem}-0000i-of-0000n.safetensors` (each shard's
//!   metadata `{"format": "pt"}`, which `transformers` requires) and
//!   `{stem}.safetensors.index.json` (`{"metadata": {"total_size": N, …the source's
//!   metadata as JSON}, "weight_map": {tensor: shard}}`, indented as huggingface_hub
//!   writes it).
//! - GGUF → llama.cpp splits `{stem}-0000i-of-0000n.gguf`: the first carries the
//!   model's keys, every split `split.no` (u16, 0-based), `split.count` (u16) and
//!   `split.tensors.count` (i32), as gguf-py and `gguf-split` write them.
//! - zTensor v2 → data shards `{stem}-0000i-of-0000n.zt` (no manifest; shard names
//!   `0000i-of-0000n`, spec Appendix B's positional convention) and the root
//!   `{stem}.zt`: the manifest with every object, its parts' `shard`, and the shard
//!   table (each file's size and SHA-256, so signing the root covers every byte, spec
//!   §6.4). The root is moved into place last, as an index is.
//! - AERO → one file (the spec's multi-shard): one WTSH chunk `weights.shard{i}` per
//!   group (with its PHSH when page hashes are on), TIDX `shard_id` naming it; or, to a
//!   path named `*.aeroset.json` ([`indexed_output`]), an AEROSET: parts, `index.aero`
//!   and the JSON index, written by the codec's hooks ([`crate::formats::IndexedSet`]).
//! - Any other format with a writer (zTensor v1, FOLD, WTXT, GPTRS, npz, PyTorch) →
//!   shards `{stem}-0000i-of-0000n.{ext}` (the output's extension), the model's
//!   metadata in the first only, and a Tessera index `{stem}.tessera-set.json` recording
//!   each shard's size and BLAKE3 (`tessera_index.rs`). A WTXT shard's `.wsum` moves
//!   with it. A source with opaque chunks is refused (a shard holds tensors only) unless
//!   `drop_metadata` drops them; `.npy` (one tensor a file) is refused: write `.npz`.
//!
//! Tensors keep the source's order. [`Split::MaxBytes`] cuts as huggingface_hub does (a
//! new shard when the next tensor would pass the size; a tensor larger than the size
//! alone in its own shard — where huggingface_hub sets such a tensor aside in a shard
//! before the one being filled, reordering, we keep the order and close the shard); [`Split::Shards`] cuts into that many shards of about equal
//! bytes, none empty. A plan of one shard writes a plain file at the target, as both
//! tools do.
//!
//! Atomic as a whole: every file is written (and fsynced, unless
//! [`WriteOptions::no_fsync`]) into a temporary directory
//! beside the target, then renamed into place, the index last; a failure before the
//! index is in place removes the shards already moved, so nothing of the set remains.

use std::path::{Path, PathBuf};

use super::hf::INDEX_SUFFIX;
use crate::convert::{prepare, write_file, ConvertOptions};
use crate::error::{Error, Result};
use crate::format::Format;
use crate::metadata::Metadata;
use crate::model::TensorSource;
use crate::options::WriteOptions;
use crate::tensor::{TensorInfo, TensorView};
use crate::write::{SetStyle, WriteReport};

/// How to cut a model into shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Split {
    /// Shards of at most this many tensor bytes (one larger tensor goes alone).
    MaxBytes(u64),
    /// This many shards (at most one per tensor).
    Shards(u32),
}

/// What [`convert_set`] wrote.
#[derive(Debug, Clone, Default)]
pub struct SetReport {
    /// The files written, shards first, the index (if any) last.
    pub files: Vec<PathBuf>,
    /// Notes from preparing and writing.
    pub notes: Vec<String>,
}

/// Cuts `sizes` (bytes per tensor, in order) into groups of consecutive indices.
pub fn plan(sizes: &[u64], split: Split) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    let mut start = 0;
    match split {
        Split::MaxBytes(max) => {
            let mut acc = 0u64;
            for (i, &s) in sizes.iter().enumerate() {
                if i > start && acc.saturating_add(s) > max {
                    out.push(start..i);
                    start = i;
                    acc = 0;
                }
                acc = acc.saturating_add(s);
            }
        }
        Split::Shards(n) => {
            let n = (n.max(1) as usize).min(sizes.len().max(1));
            let total: u128 = sizes.iter().map(|&s| u128::from(s)).sum();
            let mut acc = 0u128;
            for (i, &s) in sizes.iter().enumerate() {
                let made = out.len() + 1; // shards so far, the open one included
                let forced = sizes.len() - i <= n - made;
                let full = acc * n as u128 >= total * made as u128;
                if i > start && made < n && (forced || full) {
                    out.push(start..i);
                    start = i;
                }
                acc += u128::from(s);
            }
        }
    }
    if start < sizes.len() || out.is_empty() {
        out.push(start..sizes.len());
    }
    out
}

/// One shard: a subset of the source's tensors, with its own metadata.
struct ShardSource<'s> {
    src: &'s dyn TensorSource,
    infos: Vec<TensorInfo>,
    metadata: Metadata,
    types: Option<Metadata>,
}

impl TensorSource for ShardSource<'_> {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        if !self.infos.iter().any(|t| t.name == name) {
            return Err(Error::no_tensor(name));
        }
        self.src.tensor(name)
    }
    fn tensors(&self, names: &[&str]) -> Vec<Result<TensorView<'_>>> {
        if !names
            .iter()
            .all(|n| self.infos.iter().any(|t| t.name == *n))
        {
            // Each name outside the shard gets its own error, in its place.
            return names.iter().map(|n| self.tensor(n)).collect();
        }
        self.src.tensors(names)
    }
    fn interrupted(&self) -> Result<()> {
        self.src.interrupted()
    }
    // `chunks`/`chunk`/`chunk_stored`: the default (none) on purpose: a shard holds tensors only (a
    // source with opaque chunks is refused, see the module docs).
    fn source_format(&self) -> Option<Format> {
        self.src.source_format()
    }
    fn metadata_types(&self) -> Option<&Metadata> {
        self.types.as_ref()
    }
    fn raw_extent(&self, name: &str) -> Result<Option<crate::slice::RawExtent<'_>>> {
        if !self.infos.iter().any(|t| t.name == name) {
            return Err(Error::no_tensor(name));
        }
        self.src.raw_extent(name)
    }
}

fn size_of(t: &TensorInfo) -> u64 {
    t.dense_nbytes().unwrap_or(t.storage.stored_bytes)
}

/// Converts `src` into a set of `format` shards at `path` (`dir/model.safetensors` →
/// `dir/model-00001-of-0000n.safetensors` … and `dir/model.safetensors.index.json`).
/// See the module docs.
pub fn convert_set(
    src: &dyn TensorSource,
    format: Format,
    path: &Path,
    split: Split,
    convert: ConvertOptions,
    opts: &WriteOptions,
) -> Result<SetReport> {
    match split {
        Split::MaxBytes(0) => {
            return Err(Error::invalid_input(
                "a model set's maximum shard size must be at least 1 byte, not 0",
            ))
        }
        Split::Shards(0) => {
            return Err(Error::invalid_input(
                "a model set needs at least 1 shard, not 0",
            ))
        }
        _ => {}
    }
    // How the target is written as a set: its codec says (`SetStyle`); this writer
    // names no format.
    let style = format.codec().sets;
    if style == SetStyle::None {
        return Err(Error::unsupported(format!(
            "writing a model set as {}: a {} file holds one tensor; write the shards in a \
             format that holds several (npz, safetensors, …)",
            format.name(),
            format.title(),
        )));
    }
    let own_index = format
        .codec()
        .indexed_set
        .filter(|h| index_file_name(path).is_some_and(|n| n.ends_with(h.suffix)));
    if let Some(hooks) = own_index {
        return convert_indexed(src, format, &hooks, path, split, convert, opts);
    }
    let tessera = style == SetStyle::TesseraIndex;
    let prepared = prepare(src, format, convert)?;
    if tessera && !prepared.chunks().is_empty() {
        let names: Vec<&str> = prepared.chunks().iter().map(|c| c.name.as_str()).collect();
        return Err(Error::unsupported(format!(
            "writing a model set: the shards hold tensors only, and the source has {} chunk(s) ({}); --drop-metadata leaves them out",
            names.len(),
            names.join(", ")
        )));
    }
    let mut notes = prepared.notes().to_vec();
    let infos = prepared.tensor_infos();
    let sizes: Vec<u64> = infos.iter().map(size_of).collect();
    let groups = plan(&sizes, split);
    if let (SetStyle::OneFile, Some(write_groups)) = (style, format.codec().one_file_sets) {
        // One file holding every shard (AERO: one WTSH chunk per group).
        let mut o = opts.clone();
        o.path = Some(path.to_path_buf());
        crate::formats::check_options(format, &o)?;
        let durability = crate::util::atomic::Durability::from_durable(!o.no_fsync);
        let mut r = crate::util::atomic::write_atomic_with(path, durability, |f| {
            write_groups(&prepared, f, &o, &groups).map_err(|e| e.in_format(format))
        })?;
        notes.append(&mut r.notes);
        return Ok(SetReport {
            files: vec![path.to_path_buf()],
            notes,
        });
    }
    // The set this write replaces (read before the new index replaces its index).
    let old = old_set(format, style, path);
    if groups.len() == 1 {
        let mut r = write_file(format, &prepared, path, opts)?;
        notes.append(&mut r.notes);
        let mut keep = vec![path.to_path_buf()];
        keep.extend(r.extra_files.iter().cloned());
        remove_old_set(&old, &keep, &mut notes);
        return Ok(SetReport {
            files: vec![path.to_path_buf()],
            notes,
        });
    }
    let n = groups.len();
    if n > 99_999 {
        return Err(Error::invalid_input(format!(
            "{n} shards: shard names have room for 99999"
        )));
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let (stem, ext) = stem_and_ext(format, style, path);
    let names: Vec<String> = (1..=n)
        .map(|i| format!("{stem}-{i:05}-of-{n:05}.{ext}"))
        .collect();
    // Named after this process and listed for the signal handler's cleanup; those of
    // writers that have ended are removed first (`util::atomic::temp_dir`).
    let tmp = crate::util::atomic::temp_dir(&dir, &format!(".{stem}.set."))
        .map_err(|e| crate::util::atomic::create_error(e, &dir))?;
    let meta = prepared.metadata();
    let mut written = Vec::new();
    let mut index_name = None;
    if let (SetStyle::ShardTable, Some(st)) = (style, format.codec().shard_table) {
        written = (st.write)(&prepared, &groups, path, tmp.path(), opts)?;
    }
    for (i, g) in groups.iter().enumerate() {
        if style == SetStyle::ShardTable {
            break;
        }
        let shard_infos = infos[g.clone()].to_vec();
        let (metadata, types) = match style {
            SetStyle::GgufSplit => gguf_keys(&prepared, meta, i, n, infos.len()),
            _ if tessera && i == 0 => (meta.clone(), prepared.metadata_types().cloned()),
            _ if tessera => (Metadata::new(), None),
            _ => {
                let mut m = Metadata::new();
                m.insert("format", "pt");
                (m, None)
            }
        };
        let shard = ShardSource {
            src: &prepared,
            infos: shard_infos,
            metadata,
            types,
        };
        let at = tmp.path().join(&names[i]);
        // write_file commits side files (WTXT .wsum) with the shard and lists them in
        // extra_files; side_files is empty after it.
        let WriteReport {
            notes: mut n2,
            extra_files,
            ..
        } = write_file(format, &shard, &at, opts)?;
        notes.append(&mut n2);
        written.push(names[i].clone());
        // Sidecars (WTXT .wsum) move with their shard, before the index.
        for x in extra_files {
            if let Some(n) = x.file_name() {
                written.push(n.to_string_lossy().into_owned());
            }
        }
    }
    if tessera {
        let mut records = Vec::with_capacity(n);
        for name in &names {
            let data = crate::source::FileData::open(&tmp.path().join(name))?;
            records.push(super::tessera_index::ShardRecord {
                file: name.clone(),
                size: data.len() as u64,
                blake3: super::tessera_index::blake3_hex(&data),
            });
        }
        let mut wm = Vec::with_capacity(infos.len());
        for (g, name) in groups.iter().zip(&names) {
            for t in &infos[g.clone()] {
                wm.push((t.name.clone(), name.clone()));
            }
        }
        let text = super::tessera_index::index_json(format, &records, &wm)?;
        let iname = format!("{stem}{}", super::tessera_index::INDEX_SUFFIX);
        let durability = crate::util::atomic::Durability::from_durable(!opts.no_fsync);
        crate::util::atomic::write_atomic_with(&tmp.path().join(&iname), durability, |w| {
            Ok(std::io::Write::write_all(w, text.as_bytes())?)
        })?;
        index_name = Some(iname);
    }
    if style == SetStyle::HfIndex {
        let total: u64 = sizes.iter().sum();
        let mut md = serde_json::Map::new();
        md.insert("total_size".into(), total.into());
        for (k, v) in meta.iter() {
            if k != "total_size" {
                md.insert(k.to_string(), v.to_json());
            }
        }
        let mut wm = serde_json::Map::new();
        for (g, name) in groups.iter().zip(&names) {
            for t in &infos[g.clone()] {
                wm.insert(t.name.clone(), name.clone().into());
            }
        }
        let doc = serde_json::json!({"metadata": md, "weight_map": wm});
        let text = serde_json::to_string_pretty(&doc)
            .map_err(|e| Error::invalid_input(format!("the index: {e}")))?;
        let iname = format!("{stem}{INDEX_SUFFIX}");
        let durability = crate::util::atomic::Durability::from_durable(!opts.no_fsync);
        crate::util::atomic::write_atomic_with(&tmp.path().join(&iname), durability, |w| {
            Ok(std::io::Write::write_all(w, text.as_bytes())?)
        })?;
        index_name = Some(iname);
    }
    // Into place: shards, then the index; undo the shards on a failure.
    let mut moved: Vec<PathBuf> = Vec::new();
    for name in written.iter().chain(index_name.iter()) {
        let to = dir.join(name);
        if let Err(e) = crate::util::atomic::rename_over(&tmp.path().join(name), &to) {
            for m in &moved {
                let _ = std::fs::remove_file(m);
            }
            return Err(Error::from(e).at_subject(to.display().to_string()));
        }
        moved.push(to);
    }
    // The new set is in place, its index last: the old set's files it did not replace
    // go (a set resharded in place, or written over a set of more shards).
    remove_old_set(&old, &moved, &mut notes);
    if !opts.no_fsync {
        crate::util::atomic::sync_dir(&dir);
    }
    Ok(SetReport {
        files: moved,
        notes,
    })
}

fn index_file_name(path: &Path) -> Option<String> {
    path.file_name().map(|n| n.to_string_lossy().into_owned())
}

/// The index path an output asks for when it is a set of its format's own index kind
/// (AEROSET): `path` when its name ends with the kind's suffix (`model.aeroset.json`),
/// or — when the kind was asked for by name (`--to aeroset`, `to`) — the kind's usual
/// index name inside `path`, a directory (one that exists, or a path ending with `/`).
/// `None` when the output is no such set; an error when the kind was asked for by name
/// and `path` is neither.
pub fn indexed_output(format: Format, to: Option<&str>, path: &Path) -> Result<Option<PathBuf>> {
    let Some(hooks) = format.codec().indexed_set else {
        return Ok(None);
    };
    if index_file_name(path)
        .is_some_and(|n| n.len() > hooks.suffix.len() && n.ends_with(hooks.suffix))
    {
        return Ok(Some(path.to_path_buf()));
    }
    // A kind that is a directory (DCP) is always written into the output directory.
    let asked = hooks.ranks
        || to.is_some_and(|t| t.trim_start_matches('.').eq_ignore_ascii_case(hooks.name));
    if !asked {
        return Ok(None);
    }
    let dir_like =
        hooks.ranks || path.is_dir() || path.as_os_str().to_string_lossy().ends_with('/');
    if dir_like {
        return Ok(Some(path.join(hooks.default_index)));
    }
    Err(Error::invalid_input(format!(
        "{}: a set of this kind is written as NAME{} (or into a directory): name its index so",
        path.display(),
        hooks.suffix
    )))
}

/// [`convert_set`] into a set of the format's own index kind (AEROSET): the hook writes
/// every file into a temporary directory beside `path`, then they are moved into place,
/// the index last.
fn convert_indexed(
    src: &dyn TensorSource,
    format: Format,
    hooks: &crate::formats::IndexedSet,
    path: &Path,
    split: Split,
    convert: ConvertOptions,
    opts: &WriteOptions,
) -> Result<SetReport> {
    let prepared = prepare(src, format, convert)?;
    let notes = prepared.notes().to_vec();
    let mut o = opts.clone();
    o.path = Some(path.to_path_buf());
    crate::formats::check_options(format, &o)?;
    let infos = prepared.tensor_infos();
    let sizes: Vec<u64> = infos.iter().map(size_of).collect();
    let groups = match (hooks.ranks, split) {
        (false, _) => plan(&sizes, split),
        (true, Split::Shards(n)) => vec![0..infos.len(); n as usize],
        (true, Split::MaxBytes(b)) if b == hooks.default_shard_size => {
            std::iter::once(0..infos.len()).collect()
        }
        (true, Split::MaxBytes(_)) => {
            return Err(Error::invalid_input(format!(
                "a {} checkpoint is cut by ranks, each holding a part of every tensor: give --shards N, not a maximum shard size",
                format.name()
            )))
        }
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // A set that is a directory (DCP) is made when missing; removed again if empty
    // when the write fails.
    let made_dir = hooks.ranks && !dir.exists();
    if made_dir {
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::from(e).at_subject(dir.display().to_string()))?;
    }
    let result = write_indexed(&prepared, hooks, &groups, path, &dir, &o, format, notes);
    if made_dir && result.is_err() {
        let _ = std::fs::remove_dir(&dir);
    }
    result
}

/// The files of an indexed set written into a temporary directory in `dir`, then moved
/// into place, the index last.
#[allow(clippy::too_many_arguments)]
fn write_indexed(
    prepared: &dyn TensorSource,
    hooks: &crate::formats::IndexedSet,
    groups: &[std::ops::Range<usize>],
    path: &Path,
    dir: &Path,
    o: &WriteOptions,
    format: Format,
    mut notes: Vec<String>,
) -> Result<SetReport> {
    let dir = dir.to_path_buf();
    let index = index_file_name(path).unwrap_or_default();
    let stem = index
        .strip_suffix(hooks.suffix)
        .unwrap_or(&index)
        .to_string();
    // The set this write replaces: what its index names.
    let mut old: Vec<PathBuf> = match crate::source::FileData::open(path) {
        Ok(b) => (hooks.names)(&b)
            .into_iter()
            .filter(|n| super::names::check_plain(n).is_ok())
            .map(|n| dir.join(n))
            .collect(),
        Err(_) => Vec::new(),
    };
    old.push(path.to_path_buf());
    let tmp = crate::util::atomic::temp_dir(&dir, &format!(".{stem}.set."))
        .map_err(|e| crate::util::atomic::create_error(e, &dir))?;
    let written =
        (hooks.write)(prepared, groups, path, tmp.path(), o).map_err(|e| e.in_format(format))?;
    let mut moved: Vec<PathBuf> = Vec::new();
    for name in &written {
        let to = dir.join(name);
        if let Err(e) = crate::util::atomic::rename_over(&tmp.path().join(name), &to) {
            for m in &moved {
                let _ = std::fs::remove_file(m);
            }
            return Err(Error::from(e).at_subject(to.display().to_string()));
        }
        moved.push(to);
    }
    remove_old_set(&old, &moved, &mut notes);
    if !o.no_fsync {
        crate::util::atomic::sync_dir(&dir);
    }
    Ok(SetReport {
        files: moved,
        notes,
    })
}

/// The stem and extension of a set's file names at `path` (`dir/model.safetensors` →
/// `model`, `safetensors`).
/// Sets whose readers find shards by name (GGUF splits, a Hugging Face index) take the
/// format's own extension whatever `path` ends with.
fn stem_and_ext(format: Format, style: SetStyle, path: &Path) -> (String, String) {
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let own = format.extensions().first().copied().unwrap_or("bin");
    let ext = match style {
        SetStyle::GgufSplit | SetStyle::HfIndex => own.to_string(),
        _ => match path.extension() {
            Some(e) => e.to_string_lossy().into_owned(),
            None => format
                .extensions()
                .first()
                .copied()
                .unwrap_or("bin")
                .to_string(),
        },
    };
    let stem = file_name
        .strip_suffix(&format!(".{ext}"))
        .unwrap_or(&file_name)
        .to_string();
    (stem, ext)
}

/// The files of the set of `format` already at `path` (which a new set or file written
/// there replaces): what its index names, and the index. A Hugging Face index
/// (`{stem}.safetensors.index.json`: its `weight_map`'s shards), a Tessera index
/// (`{stem}.tessera-set.json`: its shards, a WTXT shard's `.wsum` with it), GGUF splits
/// (`{stem}-00001-of-0000m.gguf` and its `m - 1` siblings; the first split is the set's
/// index), a zTensor v2 root (`{stem}.zt`: the shards its table names). Only plain
/// names beside the index ([`super::names::check_plain`]); an index that does not parse
/// names nothing. Empty when there is no such set.
fn old_set(format: Format, style: SetStyle, path: &Path) -> Vec<PathBuf> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let (stem, _) = stem_and_ext(format, style, path);
    let opts = crate::any::ReadOptions::default();
    let mut names: Vec<String> = Vec::new();
    let mut index = None;
    match style {
        SetStyle::HfIndex => {
            let i = dir.join(format!("{stem}{INDEX_SUFFIX}"));
            if let Ok(b) = super::hf::read_index(&i, &opts) {
                names = super::hf::shard_names(&b).unwrap_or_default();
                index = Some(i);
            }
        }
        SetStyle::GgufSplit => {
            let first = std::fs::read_dir(&dir)
                .into_iter()
                .flatten()
                .flatten()
                .find_map(|e| {
                    let n = super::names::Numbered::parse(e.file_name().to_str()?, ".gguf")?;
                    (n.prefix == stem && n.no == 1).then_some(n)
                });
            if let Some(n) = first {
                names = (1..=n.count).map(|i| n.sibling(i)).collect();
            }
        }
        SetStyle::ShardTable => {
            let st = format.codec().shard_table;
            if let (Some(st), Ok(data)) = (st, crate::source::FileData::open(path)) {
                if let Ok(table) = (st.table)((&data[..]).into(), &opts) {
                    names = table
                        .iter()
                        .filter_map(|(label, _, _)| {
                            let p = (st.shard_path)(path, label);
                            Some(p.file_name()?.to_string_lossy().into_owned())
                        })
                        .collect();
                }
            }
        }
        SetStyle::OneFile => {}
        _ => {
            let i = dir.join(format!("{stem}{}", super::tessera_index::INDEX_SUFFIX));
            if let Ok(b) = super::hf::read_index(&i, &opts) {
                names = super::tessera_index::shard_names(&b).unwrap_or_default();
                names.extend(
                    names
                        .iter()
                        .filter(|n| n.ends_with(".wtxt"))
                        .map(|n| format!("{n}.wsum"))
                        .collect::<Vec<_>>(),
                );
                index = Some(i);
            }
        }
    }
    names.sort();
    names.dedup();
    let mut out: Vec<PathBuf> = names
        .iter()
        .filter(|n| super::names::check_plain(n).is_ok())
        .map(|n| dir.join(n))
        .collect();
    out.extend(index);
    out
}

/// Removes the files of the old set ([`old_set`]) that the new write did not put in
/// place (`keep`): files and symbolic links only, never a directory. A file that
/// cannot be removed is a note, not a failure (the new set is complete).
fn remove_old_set(old: &[PathBuf], keep: &[PathBuf], notes: &mut Vec<String>) {
    let same =
        |a: &Path, b: &Path| a == b || (a.file_name() == b.file_name() && a.parent() == b.parent());
    for p in old {
        if keep.iter().any(|k| same(k, p)) {
            continue;
        }
        match std::fs::symlink_metadata(p) {
            Ok(m) if !m.is_dir() => {}
            _ => continue,
        }
        match std::fs::remove_file(p) {
            Ok(()) => notes.push(format!(
                "removed {} of the set this write replaced",
                p.display()
            )),
            Err(e) => notes.push(format!(
                "could not remove {} of the set this write replaced: {e}",
                p.display()
            )),
        }
    }
}

/// A GGUF split's keys and their types: the model's keys in the first split only, the
/// `split.*` keys in every one. A source whose format carries typed metadata
/// (`Capabilities::typed_metadata`: GGUF) gives its own types; another gives those kept
/// under `tessera.gguf_types` in its metadata.
fn gguf_keys(
    src: &dyn TensorSource,
    meta: &Metadata,
    i: usize,
    n: usize,
    tensors: usize,
) -> (Metadata, Option<Metadata>) {
    use super::gguf_split::{SPLIT_COUNT, SPLIT_NO, SPLIT_TENSORS};
    use crate::metadata::{Map, Value, GGUF_TYPES_KEY as TYPES_KEY};
    let typed = src
        .source_format()
        .and_then(crate::convert::capabilities)
        .is_some_and(|c| c.typed_metadata);
    let mut types = match src.metadata_types() {
        Some(t) => t.clone(),
        None if !typed => crate::metadata::kept_types(meta),
        None => Map::new(),
    };
    let mut m = Metadata::new();
    if i == 0 {
        let legacy = src.metadata_types().is_none();
        for (k, v) in meta.iter() {
            if k.starts_with("split.") || (legacy && k == TYPES_KEY) {
                continue;
            }
            m.insert(k, v.clone());
        }
    } else {
        types = Map::new();
    }
    m.insert(SPLIT_NO, Value::Int(i as i128));
    m.insert(SPLIT_COUNT, Value::Int(n as i128));
    m.insert(SPLIT_TENSORS, Value::Int(tensors as i128));
    types.insert(SPLIT_NO, "u16");
    types.insert(SPLIT_COUNT, "u16");
    types.insert(SPLIT_TENSORS, "i32");
    (m, Some(types))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_source_forwards_every_method() {
        let p = crate::model::probe::Probe::new();
        let shard = ShardSource {
            src: &p,
            infos: p.tensor_infos().to_vec(),
            metadata: Metadata::new(),
            types: None,
        };
        // Its own metadata types, and no chunks (a shard holds tensors only).
        let replaced = ["chunks", "chunk", "chunk_stored", "metadata_types"];
        crate::model::probe::check_forwards(&shard, &replaced);
        // A name outside the shard is refused in its place, not read from the source.
        let got = shard.tensors(&["a", "b"]);
        assert!(got[1]
            .as_ref()
            .is_err_and(|e| !e.to_string().contains("probe")));
    }

    #[test]
    fn plans() {
        let r = |s: &[u64], sp| plan(s, sp);
        // huggingface_hub's rule: [6, 6, 2, 6, 2, 2] under 10 → [6], [6, 2], [6, 2, 2].
        assert_eq!(
            r(&[6, 6, 2, 6, 2, 2], Split::MaxBytes(10)),
            vec![0..1, 1..3, 3..6]
        );
        assert_eq!(r(&[20, 1, 1], Split::MaxBytes(10)), vec![0..1, 1..3]);
        assert_eq!(r(&[1, 1, 1, 1], Split::Shards(2)), vec![0..2, 2..4]);
        assert_eq!(r(&[100, 1, 1], Split::Shards(3)), vec![0..1, 1..2, 2..3]);
        assert_eq!(r(&[1, 1], Split::Shards(5)), vec![0..1, 1..2]);
        assert_eq!(r(&[], Split::Shards(3)), vec![0..0]);
        assert_eq!(r(&[5], Split::MaxBytes(1)), vec![0..1]);
    }

    fn model() -> crate::model::Model {
        let mut m = crate::model::Model::new();
        for t in 0..6 {
            let data: Vec<u8> = (0..64u32)
                .flat_map(|i| ((i * 3 + t) as f32).to_le_bytes())
                .collect();
            let info = TensorInfo::dense(format!("t{t}"), crate::DType::F32, vec![64]);
            m.push(TensorView::dense(info, std::borrow::Cow::Owned(data)).unwrap())
                .unwrap();
        }
        m
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// A set written over a set of more shards (a reshard), or as one file over a set,
    /// leaves the new files only: the old set's shards and index go, after the new
    /// index is in place; files the old index does not name stay.
    #[test]
    fn a_set_written_over_a_set_removes_the_old_sets_files_only() {
        let mut kinds = vec![(Format::Safetensors, "m.safetensors")];
        #[cfg(feature = "gguf")]
        kinds.push((Format::Gguf, "m.gguf"));
        #[cfg(feature = "ztensor")]
        kinds.extend([(Format::ZtensorV2, "m.zt"), (Format::Ztensor, "m.zt")]);
        #[cfg(feature = "wtxt")]
        kinds.push((Format::Wtxt, "m.wtxt"));
        let m = model();
        let opts = WriteOptions::default().no_fsync(true);
        for (format, name) in kinds {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join(name);
            // Beside the set: files no index names (another set's shard, a shard
            // number the old index does not list, notes).
            let ext = name.rsplit_once('.').unwrap().1;
            let unrelated = [
                "notes.txt".to_string(),
                format!("other-00001-of-00002.{ext}"),
                format!("m-00009-of-00009.{ext}x"),
            ];
            for u in &unrelated {
                std::fs::write(dir.path().join(u), b"not ours").unwrap();
            }
            let conv = ConvertOptions::default();
            let four = convert_set(&m, format, &path, Split::Shards(4), conv, &opts).unwrap();
            assert!(four.files.len() >= 4, "{format:?}");
            let two = convert_set(&m, format, &path, Split::Shards(2), conv, &opts).unwrap();
            let mut want: Vec<String> = two
                .files
                .iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .chain(unrelated.iter().cloned())
                .collect();
            want.sort();
            assert_eq!(listing(dir.path()), want, "{format:?}");
            assert!(
                two.notes.iter().any(|n| n.contains("removed")),
                "{format:?}: {:?}",
                two.notes
            );
            // The new set opens whole.
            let index = two.files.last().unwrap();
            let opened = crate::set::open_path(index, &Default::default()).unwrap();
            assert_eq!(opened.container().tensor_infos().len(), 6, "{format:?}");
            // One file over the set: the set goes.
            convert_set(&m, format, &path, Split::Shards(1), conv, &opts).unwrap();
            let mut want: Vec<String> = unrelated.to_vec();
            want.push(name.to_string());
            if dir.path().join(format!("{name}.wsum")).exists() {
                want.push(format!("{name}.wsum"));
            }
            want.sort();
            assert_eq!(listing(dir.path()), want, "{format:?}");
        }
    }

    /// A set into a folder that does not exist: the error says so (ENOENT, a usage
    /// error), not "creating a temporary directory".
    #[test]
    fn a_set_into_a_missing_folder_names_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("m.safetensors");
        let e = convert_set(
            &model(),
            Format::Safetensors,
            &path,
            Split::Shards(2),
            ConvertOptions::default(),
            &WriteOptions::default(),
        )
        .unwrap_err();
        assert_eq!(e.os_error(), Some(libc::ENOENT), "{e}");
        assert!(e.to_string().contains("does not exist"), "{e}");
        assert!(e.to_string().contains("missing"), "{e}");
    }
}
