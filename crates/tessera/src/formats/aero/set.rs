//! AEROSET v0.1 / v0.2 (the AERO repository's `docs/AEROSET.md`; writer and reader
//! `aerotensor.aeroset`): one model in several AERO files, opened as one container.
//!
//! # Layout
//!
//! ```text
//! model.aeroset.json   the index (JSON, below)
//! index.aero           an AERO file: MMSG + TIDX listing every tensor of the set, no WTSH
//! part-000.aero        a complete AERO file holding some of the shards (`weights.shardN`)
//! part-001.aero        …
//! ```
//!
//! `model.aeroset.json`: `{"format": {"name": "AEROSET", "version": [0, 1|2]}, "model":
//! {"name", "architecture"}, "parts": [{"path", "sha256", "size_bytes", "shards": [ids]}…],
//! "global_tidx": {"path", "sha256", "size_bytes"}}`, and in v0.2 optionally `base_url`
//! (relative paths resolve as `base_url + "/" + path`) and `cache` (hints, ignored: the
//! remote layer's own cache applies). A `path` is a plain file name beside the index, or
//! (v0.2) an `http(s)://` or `s3://` URL. A v0.1 index reads as v0.2 (both optional
//! fields absent).
//!
//! The global TIDX's `shard_id` is the set's shard number: the part whose `shards` lists
//! it holds the tensor. Inside the part the tensor is found through the part's own TIDX
//! (what `AeroSetReader` and the C++ `AeroSetFile` do), where aerotensor numbers the
//! part's shards from 0 again: global shard `parts[p].shards[k]` is `weights.shard{k}` of
//! part `p`. We accept that or the global number (the spec's prose names the chunk
//! `weights.shard{shard_id}`), and check everything else the two TIDX say of a tensor
//! agrees (dtype, shape, layout, `data_off`, `data_len`, `hash_b3`).
//!
//! # Reading
//!
//! Opening reads the JSON and `index.aero`'s header, TOC, MMSG and TIDX (by range, as any
//! AERO open; its BLAKE3s checked), never a part. A part is opened when a tensor in it is
//! first read (its header, TOC, metadata chunks and TIDX), its size checked against
//! `size_bytes` and its TIDX against the global one; the tensor's bytes are then checked
//! as a single AERO file checks them (chunk BLAKE3, `hash_b3`, PHSH pages the tensor
//! touches) unless `--no-verify`. A part's SHA-256 covers the whole file, so only `verify`
//! hashes it (with `index.aero`'s), then verifies each part as an AERO file.
//!
//! Checked at open, each an error naming what and where: the JSON's shape and types,
//! `format.name`, the version (0.1 or 0.2), every `path` (a plain name, or a URL of the
//! schemes above: no `..`, no absolute or `file://` path), a shard listed by two parts,
//! two parts of one path, a TIDX tensor whose shard no part lists, counts under
//! [`crate::Limits`]. `index.aero`'s size against its `size_bytes`.
//!
//! # Metadata
//!
//! The set's metadata is `index.aero`'s: its `meta.json` when it has one (ours), else
//! `model_name`/`architecture` from its MMSG `model` (aerotensor's index has no
//! `meta.json`; the `extra_meta` it writes into each part is then not listed at the set
//! level). A packed tensor's layout is named by `meta.json`'s descriptors; without them
//! (aerotensor's index) by its `ggml_type` (`ggml_q4_0`), as the parts' descriptors name
//! it.
//!
//! # Writing
//!
//! [`write_set`]: tensors cut into shards as `--max-shard-size` says (aerotensor's
//! `max_shard_bytes`, default 2 GiB; its `plan_shards` rule), shards grouped into parts
//! of `max_part_shards` (default 4), each part a complete AERO file (every writer option
//! applies: `tensor_hashes`, `page_hashes`, `control_integrity`, `uuid`) whose shards are
//! numbered from 0 as aerotensor numbers them; then `index.aero` (MJSN, MMSG, TIDX: every
//! tensor with its set-wide `shard_id`), then the JSON (`version` [0, 1]: nothing of v0.2
//! is needed). All go into a temporary directory and are moved into place the JSON last
//! (`set/write.rs`).
//!
//! # Deviations
//!
//! - Our `index.aero` carries a `meta.json` (the model's metadata, as every part's), which
//!   aerotensor's lacks; readers that look for MMSG and TIDX only are unaffected.
//! - Opaque chunks of the source are refused (the parts hold tensors; `--drop-metadata`
//!   leaves them out), where a single AERO file carries them.
//! - aerotensor's `validate` skips the SHA-256 of remote parts; `verify` hashes every part
//!   it can read, remote ones fetched whole for it.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use super::read::AeroFile;
use crate::any::ReadOptions;
use crate::error::{Error, ErrorKind, Result};
use crate::format::Format;
use crate::formats::{IndexedSet, SetFiles};
use crate::metadata::Metadata;
use crate::model::{Container, TensorSource};
use crate::options::WriteOptions;
use crate::source::{ByteSource, SourceRef};
use crate::tensor::{ChunkInfo, TensorInfo, TensorView};
use crate::verify::{VerifyOptions, VerifyReport};

/// The index file's suffix.
pub const SUFFIX: &str = ".aeroset.json";
/// The index's usual name.
pub const INDEX_NAME: &str = "model.aeroset.json";
/// The global index file's name, as aerotensor writes it.
pub const GLOBAL_NAME: &str = "index.aero";
/// aerotensor's defaults: `max_shard_bytes`, `max_part_shards`.
pub const DEFAULT_SHARD_BYTES: u64 = 2 << 30;
/// See [`DEFAULT_SHARD_BYTES`].
pub const DEFAULT_PART_SHARDS: u64 = 4;

/// AEROSET in the AERO codec ([`crate::formats::Codec::indexed_set`]).
pub const HOOKS: IndexedSet = IndexedSet {
    name: "aeroset",
    suffix: SUFFIX,
    default_index: INDEX_NAME,
    looks_like,
    open,
    names,
    write: write_set,
    default_shard_size: DEFAULT_SHARD_BYTES,
    ranks: false,
};

/// JSON whose `format.name` is `AEROSET`.
fn looks_like(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(bytes).is_ok_and(|v| {
        v.get("format")
            .and_then(|f| f.get("name"))
            .and_then(|n| n.as_str())
            == Some("AEROSET")
    })
}

/// The plain names an index names (its parts and `index.aero`).
fn names(bytes: &[u8]) -> Vec<String> {
    let Ok(ix) = Index::parse(bytes, &crate::Limits::default()) else {
        return Vec::new();
    };
    std::iter::once(&ix.global.path)
        .chain(ix.parts.iter().map(|p| &p.file.path))
        .filter_map(|p| match p {
            Target::Beside(n) => Some(n.clone()),
            Target::Url(_) => None,
        })
        .collect()
}

/// Where a file the index names is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Target {
    /// A plain name beside the index.
    Beside(String),
    /// An absolute URL (`http(s)://`, `s3://`).
    Url(String),
}

/// A file the index names, with what it says of it.
#[derive(Debug, Clone)]
struct FileRef {
    /// As the index writes it.
    given: String,
    path: Target,
    sha256: Option<[u8; 32]>,
    size: Option<u64>,
}

#[derive(Debug, Clone)]
struct PartRef {
    file: FileRef,
    shards: Vec<u64>,
}

/// `model.aeroset.json`, checked.
#[derive(Debug, Clone)]
struct Index {
    version: (u64, u64),
    parts: Vec<PartRef>,
    global: FileRef,
}

fn bad(what: impl Into<String>) -> Error {
    Error::malformed(what.into())
}

fn is_url(s: &str) -> bool {
    let l = s.to_ascii_lowercase();
    l.starts_with("http://") || l.starts_with("https://") || l.starts_with("s3://")
}

/// A path the index gives (`at`: where, for messages), resolved against `base_url`.
fn target(given: &str, base_url: Option<&str>, at: &str) -> Result<Target> {
    if is_url(given) {
        return Ok(Target::Url(given.to_string()));
    }
    if given.contains("://") || given.to_ascii_lowercase().starts_with("file:") {
        return Err(bad(format!(
            "{at}: path {given:?} is a URL of a scheme AEROSET does not take (http, https, s3)"
        )));
    }
    let escapes = given.is_empty()
        || given.starts_with(['/', '\\'])
        || given.contains('\0')
        || given
            .split(['/', '\\'])
            .any(|c| c == ".." || c == "." || c.is_empty())
        || (given.len() > 1 && given.as_bytes()[1] == b':');
    if escapes {
        return Err(bad(format!(
            "{at}: path {given:?} leaves the set's directory (an absolute path, `..`, or an empty component)"
        )));
    }
    if let Some(base) = base_url {
        return Ok(Target::Url(format!(
            "{}/{given}",
            base.trim_end_matches('/')
        )));
    }
    if given.contains(['/', '\\']) {
        return Err(bad(format!(
            "{at}: path {given:?} is not a plain file name: an index without base_url names files in its own directory"
        )));
    }
    Ok(Target::Beside(given.to_string()))
}

fn hex32(v: &serde_json::Value, at: &str) -> Result<Option<[u8; 32]>> {
    match v {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::String(s) => {
            let b = crate::util::unhex(s)
                .filter(|b| b.len() == 32)
                .ok_or_else(|| bad(format!("{at}: sha256 is not 64 hex digits")))?;
            let mut h = [0u8; 32];
            h.copy_from_slice(&b);
            Ok(Some(h))
        }
        _ => Err(bad(format!("{at}: sha256 is not a string"))),
    }
}

fn file_ref(
    v: &serde_json::Value,
    base_url: Option<&str>,
    at: &str,
    limits: &crate::Limits,
) -> Result<FileRef> {
    let o = v
        .as_object()
        .ok_or_else(|| bad(format!("{at} is not an object")))?;
    let given = o
        .get("path")
        .and_then(|p| p.as_str())
        .ok_or_else(|| bad(format!("{at} has no \"path\" string")))?;
    limits
        .check_name(given.len() as u64)
        .map_err(|e| e.at_subject(at.to_string()))?;
    let size = match o.get("size_bytes") {
        None | Some(serde_json::Value::Null) => None,
        Some(s) => Some(
            s.as_u64()
                .ok_or_else(|| bad(format!("{at}: size_bytes is not a non-negative integer")))?,
        ),
    };
    Ok(FileRef {
        given: given.to_string(),
        path: target(given, base_url, at)?,
        sha256: hex32(o.get("sha256").unwrap_or(&serde_json::Value::Null), at)?,
        size,
    })
}

impl Index {
    fn parse(bytes: &[u8], limits: &crate::Limits) -> Result<Index> {
        let v: serde_json::Value = serde_json::from_slice(bytes)
            .map_err(|e| bad("the AEROSET index is not valid JSON").with_source(e))?;
        let o = v
            .as_object()
            .ok_or_else(|| bad("the AEROSET index is not a JSON object"))?;
        let format = o
            .get("format")
            .and_then(|f| f.as_object())
            .ok_or_else(|| bad("no \"format\" object"))?;
        if format.get("name").and_then(|n| n.as_str()) != Some("AEROSET") {
            return Err(bad("format.name is not \"AEROSET\""));
        }
        let version = match format
            .get("version")
            .and_then(|v| v.as_array())
            .map(|a| a.iter().map(serde_json::Value::as_u64).collect::<Vec<_>>())
        {
            Some(v) if v.len() == 2 && v.iter().all(Option::is_some) => {
                (v[0].unwrap_or(0), v[1].unwrap_or(0))
            }
            _ => return Err(bad("format.version is not [major, minor]")),
        };
        if version.0 != 0 || version.1 > 2 {
            return Err(Error::unsupported_version(format!(
                "AEROSET version {}.{}: only 0.1 and 0.2 are supported",
                version.0, version.1
            )));
        }
        let base_url = match o.get("base_url") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(s)) if s.is_empty() => None,
            Some(serde_json::Value::String(s)) if is_url(s) => Some(s.as_str()),
            Some(serde_json::Value::String(s)) => {
                return Err(bad(format!(
                    "base_url {s:?} is not an http(s):// or s3:// URL"
                )))
            }
            Some(_) => return Err(bad("base_url is not a string")),
        };
        let parts_v = o
            .get("parts")
            .and_then(|p| p.as_array())
            .ok_or_else(|| bad("no \"parts\" array"))?;
        limits.check_entries(parts_v.len() as u64)?;
        let mut parts = Vec::with_capacity(parts_v.len());
        let mut shards_total = 0u64;
        for (i, p) in parts_v.iter().enumerate() {
            let at = format!("parts[{i}]");
            let file = file_ref(p, base_url, &at, limits)?;
            let list = p
                .get("shards")
                .and_then(|s| s.as_array())
                .ok_or_else(|| bad(format!("{at} has no \"shards\" array")))?;
            shards_total += list.len() as u64;
            limits.check_entries(shards_total)?;
            let shards = list
                .iter()
                .map(|s| {
                    s.as_u64().ok_or_else(|| {
                        bad(format!("{at}: a shard id is not a non-negative integer"))
                    })
                })
                .collect::<Result<Vec<u64>>>()?;
            parts.push(PartRef { file, shards });
        }
        let global = file_ref(
            o.get("global_tidx")
                .ok_or_else(|| bad("no \"global_tidx\" object"))?,
            base_url,
            "global_tidx",
            limits,
        )?;
        Ok(Index {
            version,
            parts,
            global,
        })
    }
}

self_cell::self_cell!(
    /// An AERO file of the set and the source it is read from.
    struct AeroCell {
        owner: Box<dyn ByteSource>,
        #[not_covariant]
        dependent: AeroFile,
    }
);

/// A part, opened when first needed.
struct Part {
    r: PartRef,
    shown: String,
    file: OnceLock<AeroCell>,
}

/// An AEROSET opened: the global index, and the parts opened lazily.
pub struct AeroSet {
    label: String,
    index: Index,
    files: Arc<dyn SetFiles>,
    global: AeroCell,
    parts: Vec<Part>,
    /// Global shard id → (part, position in its `shards`).
    shard_part: HashMap<u64, (usize, usize)>,
    infos: Vec<TensorInfo>,
    /// Per tensor: its global TIDX entry's shard, data_off, data_len, hash_b3.
    locs: Vec<super::read::TensorLoc>,
    by_name: HashMap<String, usize>,
    metadata: Metadata,
    opts: ReadOptions,
    /// Failed set-level checks found at open (an audit open keeps going).
    checks: VerifyReport,
    warnings: Vec<String>,
}

fn shown_of(files: &dyn SetFiles, t: &Target) -> String {
    match t {
        Target::Beside(n) => files.shown(n),
        Target::Url(u) => crate::remote::Location::parse(u)
            .map(|l| l.display())
            .unwrap_or_else(|_| u.clone()),
    }
}

fn open_source(files: &dyn SetFiles, t: &Target) -> Result<Box<dyn ByteSource>> {
    match t {
        Target::Beside(n) => files.beside(n),
        Target::Url(u) => files.url(u),
    }
}

/// Opens the AERO file `f` names, its size checked against the index's.
fn open_cell(
    files: &dyn SetFiles,
    f: &FileRef,
    shown: &str,
    opts: &ReadOptions,
    index_only: bool,
) -> Result<AeroCell> {
    // A local file's error names its path already (as its subject).
    let src = open_source(files, &f.path).map_err(|e| match e.to_string().contains(shown) {
        true => e,
        false => e.in_file(shown.to_string()),
    })?;
    if let Some(size) = f.size {
        if src.len() != size {
            return Err(Error::integrity(format!(
                "the AEROSET index says {size} bytes (size_bytes), the file has {}",
                src.len()
            ))
            .in_file(shown.to_string()));
        }
    }
    let limits = opts.limits.clone();
    let verify = opts.verify;
    AeroCell::try_new(src, |s| {
        let src = SourceRef::from(&**s);
        let mut a = match index_only {
            true => AeroFile::open_index(src, &limits),
            false => AeroFile::open(src, &limits),
        }?;
        a.verify = verify;
        Ok::<_, Error>(a)
    })
    .map_err(|e| e.in_format(Format::Aero).in_file(shown.to_string()))
}

fn open(
    bytes: &[u8],
    label: &str,
    files: Arc<dyn SetFiles>,
    opts: &ReadOptions,
) -> Result<Box<dyn Container + 'static>> {
    let index = Index::parse(bytes, &opts.limits)?;
    let global_shown = shown_of(&*files, &index.global.path);
    let global = open_cell(&*files, &index.global, &global_shown, opts, true)?;
    let mut checks = VerifyReport::default();
    let mut fatal: Option<Error> = None;
    let mut fail = |checks: &mut VerifyReport, subject: &str, layer: &str, detail: String| {
        if fatal.is_none() {
            fatal = Some(
                Error::integrity(format!("AEROSET check {layer:?} failed: {detail}"))
                    .at_subject(subject.to_string()),
            );
        }
        checks.failed(subject, layer, detail);
    };
    // Parts: paths once each, shards in one part each.
    let mut parts = Vec::with_capacity(index.parts.len());
    let mut shard_part: HashMap<u64, (usize, usize)> = HashMap::new();
    let mut paths: HashMap<&Target, usize> = HashMap::new();
    for (i, p) in index.parts.iter().enumerate() {
        let shown = shown_of(&*files, &p.file.path);
        if let Some(j) = paths.insert(&p.file.path, i) {
            fail(
                &mut checks,
                &shown,
                "parts listed once",
                format!("parts[{j}] and parts[{i}] are both {:?}", p.file.given),
            );
        }
        for (k, &s) in p.shards.iter().enumerate() {
            if let Some((j, _)) = shard_part.insert(s, (i, k)) {
                fail(
                    &mut checks,
                    &shown,
                    "shards in one part",
                    format!(
                        "shard {s} is listed by parts[{j}] ({:?}) and parts[{i}] ({:?})",
                        index.parts[j].file.given, p.file.given
                    ),
                );
            }
        }
        parts.push(Part {
            r: p.clone(),
            shown,
            file: OnceLock::new(),
        });
    }
    let (infos, locs, metadata, mut warnings) = global.with_dependent(|_, g| {
        // Without a meta.json (aerotensor's index), the AERO reader takes MMSG `model`.
        let metadata = g.metadata().clone();
        let w: Vec<String> = g
            .warnings
            .iter()
            .map(|w| format!("{GLOBAL_NAME}: {w}"))
            .collect();
        (
            g.tensor_infos().to_vec(),
            g.locations().to_vec(),
            metadata,
            w,
        )
    });
    let mut orphans = Vec::new();
    for (t, l) in infos.iter().zip(&locs) {
        if !shard_part.contains_key(&l.shard_id) {
            orphans.push(format!("{:?} (shard {})", t.name, l.shard_id));
        }
    }
    if !orphans.is_empty() {
        let n = orphans.len();
        orphans.truncate(8);
        fail(
            &mut checks,
            &global_shown,
            "tensors in a part",
            format!(
                "{n} tensors of the global TIDX are in shards no part lists: {}",
                orphans.join(", ")
            ),
        );
    }
    if let Some(e) = fatal {
        if !opts.audit {
            return Err(e.in_file(label.to_string()));
        }
        warnings.extend(checks.failures().map(|c| {
            format!(
                "set check {:?} failed for {}: {}",
                c.layer,
                c.subject,
                c.detail.as_deref().unwrap_or("")
            )
        }));
    }
    let by_name = (infos.iter().enumerate())
        .map(|(i, t)| (t.name.clone(), i))
        .collect();
    let mut o = opts.clone();
    o.path = None;
    Ok(Box::new(AeroSet {
        label: label.to_string(),
        index,
        files,
        global,
        parts,
        shard_part,
        infos,
        locs,
        by_name,
        metadata,
        opts: o,
        checks,
        warnings,
    }))
}

impl AeroSet {
    /// Part `p`, opened (and checked against the global TIDX) on first use. A failure
    /// is not kept: the next read tries again (a remote part may answer later).
    fn part(&self, p: usize) -> Result<&AeroCell> {
        let part = &self.parts[p];
        if let Some(c) = part.file.get() {
            return Ok(c);
        }
        let cell = open_cell(&*self.files, &part.r.file, &part.shown, &self.opts, false)?;
        let bad = self.agreement(p, &cell);
        if let Some(first) = bad.first() {
            return Err(Error::integrity(format!(
                "the part and the global TIDX ({GLOBAL_NAME}) disagree: {first}{}",
                match bad.len() {
                    1 => String::new(),
                    n => format!(" (and {} more)", n - 1),
                }
            ))
            .in_file(part.shown.clone()));
        }
        Ok(part.file.get_or_init(|| cell))
    }

    /// What the part's own TIDX and the global one disagree on, for the part's shards.
    fn agreement(&self, p: usize, cell: &AeroCell) -> Vec<String> {
        cell.with_dependent(|_, f| {
            let mut bad = Vec::new();
            let mut seen = 0usize;
            for (i, (t, l)) in self.infos.iter().zip(&self.locs).enumerate() {
                let Some(&(pp, k)) = self.shard_part.get(&l.shard_id) else {
                    continue;
                };
                if pp != p {
                    continue;
                }
                seen += 1;
                let Ok(j) = f.tensor_index(&t.name) else {
                    bad.push(format!("tensor {:?} is not in the part", t.name));
                    continue;
                };
                let (pt, pl) = (&f.tensor_infos()[j], &f.locations()[j]);
                let chunk = &f.toc()[pl.chunk].name;
                let local = format!("weights.shard{k}");
                let global = format!("weights.shard{}", l.shard_id);
                let mut diff = Vec::new();
                if *chunk != local && *chunk != global {
                    diff.push(format!("in {chunk}, not {local}"));
                }
                if pt.dtype != t.dtype || pt.shape != t.shape || pt.layout != t.layout {
                    diff.push(format!(
                        "{} {:?} {} where the global TIDX says {} {:?} {}",
                        pt.dtype, pt.shape, pt.layout, t.dtype, t.shape, t.layout
                    ));
                }
                if (pl.data_off, pl.data_len) != (l.data_off, l.data_len) {
                    diff.push(format!(
                        "data_off {} data_len {} where the global TIDX says {} {}",
                        pl.data_off, pl.data_len, l.data_off, l.data_len
                    ));
                }
                if l.hash_b3.is_some() && pl.hash_b3 != l.hash_b3 {
                    diff.push("another hash_b3".to_string());
                }
                if !diff.is_empty() {
                    bad.push(format!(
                        "tensor {:?}: {}",
                        self.infos[i].name,
                        diff.join("; ")
                    ));
                }
            }
            if f.tensor_infos().len() != seen {
                let extra: Vec<String> = f
                    .tensor_infos()
                    .iter()
                    .filter(|t| {
                        self.by_name.get(&t.name).is_none_or(|&i| {
                            self.shard_part.get(&self.locs[i].shard_id).map(|x| x.0) != Some(p)
                        })
                    })
                    .take(8)
                    .map(|t| format!("{:?}", t.name))
                    .collect();
                if !extra.is_empty() {
                    bad.push(format!(
                        "the part holds tensors the global TIDX does not place in it: {}",
                        extra.join(", ")
                    ));
                }
            }
            bad
        })
    }

    /// The index's label (its path or URL).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// SHA-256 of a whole file, read in blocks.
    fn sha256(src: SourceRef<'_>) -> Result<[u8; 32]> {
        use sha2::Digest as _;
        let mut h = sha2::Sha256::new();
        src.for_each_block(0, src.len(), super::read::HASH_BLOCK, "file", |b| {
            h.update(b);
            Ok(())
        })?;
        Ok(h.finalize().into())
    }

    /// `size` and `sha256` of a file against the index.
    fn check_file(r: &mut VerifyReport, subject: &str, f: &FileRef, src: SourceRef<'_>) {
        match f.size {
            Some(s) if s == src.len() => r.ok(subject, "size"),
            Some(s) => r.failed(
                subject,
                "size",
                format!("the index says {s} bytes, the file has {}", src.len()),
            ),
            None => r.push(subject, "size", crate::verify::Status::NotChecked, None),
        }
        match (f.sha256, Self::sha256(src)) {
            (Some(want), Ok(got)) => r.compare(
                subject,
                "sha256",
                &crate::util::hex(&want),
                &crate::util::hex(&got),
            ),
            (Some(_), Err(e)) => r.failed(subject, "sha256", e.to_string()),
            (None, _) => r.push(
                subject,
                "sha256",
                crate::verify::Status::NotChecked,
                Some("the index gives none".into()),
            ),
        }
    }
}

/// A subject in a verify report for a file of the set: its name as the index gives it.
fn prefixed(r: &mut VerifyReport, name: &str, sub: VerifyReport) {
    for c in sub.checks {
        r.push(
            format!("{name}: {}", c.subject),
            c.layer,
            c.status,
            c.detail,
        );
    }
    r.warnings
        .extend(sub.warnings.into_iter().map(|w| format!("{name}: {w}")));
}

impl TensorSource for AeroSet {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let i = crate::model::tensor_position(&self.by_name, name)?;
        let shard = self.locs[i].shard_id;
        let &(p, _) = self.shard_part.get(&shard).ok_or_else(|| {
            Error::integrity(format!(
                "tensor {name:?} is in shard {shard}, which no part of the set lists"
            ))
            .in_file(self.label.clone())
        })?;
        let cell = self.part(p)?;
        cell.with_dependent(|_, f| f.tensor_read(name))
            .map_err(|e| {
                e.in_format(Format::Aero)
                    .in_file(self.parts[p].shown.clone())
            })
    }
    fn raw_extent(&self, name: &str) -> Result<Option<crate::slice::RawExtent<'_>>> {
        let i = crate::model::tensor_position(&self.by_name, name)?;
        let Some(&(p, _)) = self.shard_part.get(&self.locs[i].shard_id) else {
            // Read whole: its error says which shard is missing.
            return Ok(None);
        };
        let cell = self.part(p)?;
        cell.with_dependent(|_, f| f.raw_extent_of(name))
            .map_err(|e| {
                e.in_format(Format::Aero)
                    .in_file(self.parts[p].shown.clone())
            })
    }
    fn chunks(&self) -> &[ChunkInfo] {
        &[]
    }
    fn chunk(&self, name: &str) -> Result<std::borrow::Cow<'_, [u8]>> {
        Err(Error::not_found(format!(
            "no chunk named {name:?} (an AEROSET lists tensors only)"
        )))
    }
    fn source_format(&self) -> Option<Format> {
        Some(Format::Aero)
    }
}

impl Container for AeroSet {
    fn format(&self) -> Format {
        Format::Aero
    }
    fn version(&self) -> String {
        let (a, b) = self.index.version;
        format!("0.1, AEROSET {a}.{b} of {} parts", self.index.parts.len())
    }
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport {
        let mut r = self.checks.clone();
        r.warnings.extend(self.warnings.iter().cloned());
        // index.aero: size, SHA-256, then as an AERO file.
        let g = &self.index.global.given;
        self.global.with_dependent(|owner, f| {
            Self::check_file(&mut r, g, &self.index.global, SourceRef::from(&**owner));
            prefixed(&mut r, g, super::verify::verify(f, opts));
        });
        let narrow = !opts.tensors.is_empty();
        let wanted: Vec<usize> = match narrow {
            true => {
                let mut w = Vec::new();
                for name in &opts.tensors {
                    match self.by_name.get(name) {
                        Some(&i) => {
                            if let Some(&(p, _)) = self.shard_part.get(&self.locs[i].shard_id) {
                                w.push(p);
                            }
                        }
                        None => r.failed(
                            format!("tensor {name:?}"),
                            "lookup",
                            format!("no tensor named {name:?}"),
                        ),
                    }
                }
                w.sort_unstable();
                w.dedup();
                w
            }
            false => (0..self.parts.len()).collect(),
        };
        for p in wanted {
            let part = &self.parts[p];
            let name = &part.r.file.given;
            let cell = match self.part(p) {
                Ok(c) => c,
                Err(e) => {
                    // Opened alone, to report size and hash still.
                    let layer = match e.kind() {
                        ErrorKind::Integrity => "part agrees with the index",
                        _ => "part present",
                    };
                    r.failed(name, layer, e.to_string());
                    if let Ok(c) = open_cell(
                        &*self.files,
                        &FileRef {
                            size: None,
                            ..part.r.file.clone()
                        },
                        &part.shown,
                        &self.opts,
                        false,
                    ) {
                        c.with_dependent(|owner, _| {
                            Self::check_file(&mut r, name, &part.r.file, SourceRef::from(&**owner))
                        });
                    }
                    continue;
                }
            };
            r.ok(name, "part present");
            r.ok(name, "global TIDX");
            cell.with_dependent(|owner, f| {
                if !narrow {
                    Self::check_file(&mut r, name, &part.r.file, SourceRef::from(&**owner));
                }
                let mut o = opts.clone();
                if narrow {
                    o.tensors = (opts.tensors.iter())
                        .filter(|t| f.tensor_index(t).is_ok())
                        .cloned()
                        .collect();
                }
                prefixed(&mut r, name, super::verify::verify(f, &o));
            });
        }
        r
    }
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}

/// Writes `src` as an AEROSET: its tensors cut into `groups` (shards), the shards into
/// parts of `max_part_shards`, each part an AERO file, then `index.aero` and the JSON
/// index, into `tmp`; returns the names written there, the JSON last. See the module
/// docs.
pub fn write_set(
    src: &dyn TensorSource,
    groups: &[std::ops::Range<usize>],
    index_path: &std::path::Path,
    tmp: &std::path::Path,
    opts: &WriteOptions,
) -> Result<Vec<String>> {
    use sha2::Digest as _;
    let aopts = super::AeroOptions::from_options(opts)?;
    let per_part = aopts.max_part_shards.unwrap_or(DEFAULT_PART_SHARDS);
    if per_part == 0 {
        return Err(Error::invalid_input(
            "max_part_shards must be at least 1, not 0",
        ));
    }
    if let Some(c) = src.chunks().iter().find(|c| !c.holds_tensors) {
        return Err(Error::unsupported(format!(
            "writing an AEROSET: its parts hold tensors only, and the source has chunk {:?}; --drop-metadata leaves it out",
            c.name
        )));
    }
    let index_name = index_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| INDEX_NAME.to_string());
    let meta = super::plan::metadata_for(src, &aopts, &mut Vec::new());
    let mut plans = super::plan::plan_tensors(src, &aopts, Some(groups))?;
    let mjsn_meta = super::quant::resolve(&mut plans, &meta);
    let n_shards = groups.len();
    let n_parts = n_shards.div_ceil(per_part as usize).max(1);
    let durable = !opts.no_fsync;
    let write_one =
        |name: &str, f: &dyn Fn(&mut std::fs::File) -> Result<()>| -> Result<(u64, [u8; 32])> {
            let path = tmp.join(name);
            let mut file = std::fs::File::create(&path)
                .map_err(|e| Error::from(e).at_subject(path.display().to_string()))?;
            f(&mut file)?;
            if durable {
                file.sync_all()?;
            }
            drop(file);
            let data = crate::source::FileData::open(&path)?;
            let h: [u8; 32] = sha2::Sha256::digest(&data[..]).into();
            Ok((data.len(), h))
        };
    let mut written = Vec::new();
    let mut parts_json = Vec::new();
    for p in 0..n_parts {
        let first = p * per_part as usize;
        let last = ((p + 1) * per_part as usize).min(n_shards);
        let local: Vec<super::plan::TensorPlan> = plans
            .iter()
            .filter(|t| (first..last).contains(&t.shard))
            .map(|t| {
                let mut t = t.clone();
                t.shard -= first;
                t
            })
            .collect();
        let name = format!("part-{p:03}.aero");
        let (size, sha) = write_one(&name, &|f| {
            super::write::write_planned(src, &meta, f, &aopts, &local, None, &mjsn_meta, false)
                .map(|_| ())
        })?;
        written.push(name.clone());
        parts_json.push(serde_json::json!({
            "path": name,
            "sha256": crate::util::hex(&sha),
            "size_bytes": size,
            "shards": (first..last).collect::<Vec<usize>>(),
        }));
    }
    let (gsize, gsha) = write_one(GLOBAL_NAME, &|f| {
        super::write::write_planned(src, &meta, f, &aopts, &[], Some(&plans), &mjsn_meta, false)
            .map(|_| ())
    })?;
    written.push(GLOBAL_NAME.to_string());
    let (name, arch) = super::plan::model_name_arch(&meta);
    let doc = serde_json::json!({
        "format": {"name": "AEROSET", "version": [0, 1]},
        "model": {"name": name, "architecture": arch},
        "parts": parts_json,
        "global_tidx": {
            "path": GLOBAL_NAME,
            "sha256": crate::util::hex(&gsha),
            "size_bytes": gsize,
        },
    });
    let text = serde_json::to_string_pretty(&doc)
        .map_err(|e| Error::invalid_input(format!("the AEROSET index: {e}")))?;
    write_one(&index_name, &|f| {
        std::io::Write::write_all(f, text.as_bytes())?;
        Ok(())
    })?;
    written.push(index_name);
    Ok(written)
}
