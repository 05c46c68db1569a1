//! Model sets: one model stored as several shard files, opened as one [`Container`].
//!
//! # Set kinds
//!
//! - **Hugging Face index** (`hf.rs`): `model.safetensors.index.json` beside shards
//!   `model-00001-of-00004.safetensors` …, or `pytorch_model.bin.index.json` beside
//!   PyTorch shards `pytorch_model-00001-of-00002.bin`. The index is JSON: `{"metadata":
//!   {"total_size": N, …}, "weight_map": {tensor: shard file, …}}`. The set's tensors
//!   are the `weight_map`'s, in its order; its metadata is the index's `metadata` minus
//!   `total_size`, with each shard's own metadata (safetensors `__metadata__`) merged in:
//!   a key the shards disagree on keeps the index's or the first shard's value and is
//!   named in a warning (see `hf.rs`). Shards are opened as whatever format their bytes
//!   say and must all be of one format.
//! - **GGUF splits** (`gguf_split.rs`, llama.cpp's `gguf-split` and gguf-py's
//!   `GGUFWriter(split_max_tensors=…, split_max_size=…)`): `{prefix}-00001-of-00003.gguf`
//!   …, each a complete GGUF file carrying `split.no` (0-based), `split.count` and
//!   `split.tensors.count` keys. The first split holds the model's keys; the set's
//!   metadata is the first split's minus `split.*`, its tensors every split's in order.
//! - **zTensor v2 shard tables** (`zt2_shards.rs`): a root `.zt` whose manifest names
//!   shard files by label; the root opens as one file ([`OpenedFile`]) that owns its
//!   shards' bytes too, since a tensor's parts may lie in several files. Checks: each
//!   shard present, of the table's size, a v2 file (fatal); its whole-file digest in
//!   `verify`, and before a checked read's first part from it (once per shard).
//! - **Tessera set indexes** (`tessera_index.rs`): `<stem>.tessera-set.json` beside
//!   shards `<stem>-00001-of-0000n.<ext>` of any other format (zTensor v1, FOLD, WTXT,
//!   GPTRS, npz, PyTorch): the format, each shard's size and BLAKE3, `weight_map`
//!   tensor → shard. The set's metadata is the first shard's.
//! - **Sets of a format's own index kind** (`indexed.rs`): AERO's AEROSET
//!   (`model.aeroset.json`, `index.aero`, `part-NNN.aero`), opened by the codec's
//!   [`crate::formats::IndexedSet`] hooks as one [`OpenedFile`] whose parts open lazily;
//!   its checks are the format module's (`formats/aero/set.rs`), not the table below.
//!
//! # Checks
//!
//! Opening a set runs the set-level checks below; each is a named layer in
//! [`Container::verify`] (subject: the shard file or the index), followed by every
//! shard's own `verify` with its subjects prefixed by the shard's file name.
//!
//! | layer | what | fatal to an open |
//! | --- | --- | --- |
//! | (none: an error) | a name from an index is a plain file name (no `..`, `/`, `\`, absolute path) | always, even an audit |
//! | `shard present` | the shard exists and opens | yes |
//! | `shard format` | every shard has the first shard's format | yes |
//! | `index lists each tensor once` | no name twice in a `weight_map` | yes |
//! | `shards indexed` | a numbered set (`-0000i-of-0000n`) is named whole by its index: no shard, present or not, left out | yes |
//! | `tensors present` | every tensor the index names is in the shard it names | yes |
//! | `tensors in one shard` | no tensor name in two shards | yes |
//! | `tensors indexed` | no tensor in a shard that the index omits | yes |
//! | `total_size` | the index's `metadata.total_size` equals the tensors' stored bytes | no |
//! | `split.no` / `split.count` / `split.tensors.count` | each split's keys agree with its place, the number of splits and the tensors in all | yes |
//! | `shard size` | (Tessera index) the shard's size is the index's | yes |
//! | `total_size` | (Tessera index) the index's `total_size` is its shards' sizes added | yes |
//! | `shard digest` | (Tessera index, `verify` and checked reads) the shard's BLAKE3 is the index's | a checked read fails |
//!
//! A fatal failure fails the open with an `Integrity` error naming the check (a shard
//! that does not open fails it with the shard's own error) — unless
//! [`ReadOptions::audit`] (`inspect`, `verify`), which opens what it can and reports
//! every failure in `warnings()` and `verify`; [`ModelSet::refusal`] then gives the
//! error a plain open would have given (`tessera inspect` prints the set, then exits
//! with it). A `total_size` mismatch is only reported (it is advisory: loaders do not
//! read it).
//!
//! Hostile indexes: the index file must be under [`crate::Limits::max_index_bytes`], its
//! entry count under `max_entries`, names under `max_name_len`; shard names must be
//! plain names in the index's directory; a split count comes from the file name
//! (five digits) and is checked against every split's keys.
//!
//! Reads are each shard's own: checked (digests) as that shard's format checks them,
//! errors naming the shard file. A shard of a Tessera index, or of a zTensor v2 shard
//! table, is also hashed whole once, before the first tensor read from it, when reads
//! are checked ([`ReadOptions::verify`]).
//!
//! Links are followed everywhere (a Hugging Face cache's snapshot holds links into
//! `blobs/`); a shard is known by the name the index gives, its link's name.
//!
//! Writing sets: [`convert_set`] (`write.rs`).
//!
//! The opener ([`open_path`], in `opener.rs`) is the one place a path becomes a
//! container: a plain file, an index, any shard of a set, or a directory.

mod file;
mod gguf_split;
mod hf;
mod indexed;
pub mod names;
mod opener;
mod place;
#[cfg(feature = "remote")]
mod remote;
pub mod tessera_index;
pub mod write;
mod zt2_shards;

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use file::{Backing, OpenedFile};
pub use opener::{open_path, Opened};
pub use tessera_index::TesseraSet;
pub use write::{convert_set, Split};

use crate::any::ReadOptions;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::metadata::Metadata;
use crate::model::{Container, TensorSource};
use crate::tensor::{ChunkInfo, TensorInfo, TensorView};
use crate::verify::{Status, VerifyOptions, VerifyReport};

/// What kind of set this is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SetKind {
    /// A Hugging Face `*.safetensors.index.json` or `*.bin.index.json` (its file name).
    HfIndex(String),
    /// llama.cpp GGUF splits (the first split's file name).
    GgufSplit(String),
    /// A Tessera set index (`*.tessera-set.json`) and what it records.
    Tessera(TesseraSet),
}

impl SetKind {
    /// The index's file name (for GGUF splits, the first split's).
    pub fn index_name(&self) -> &str {
        match self {
            SetKind::HfIndex(n) | SetKind::GgufSplit(n) => n,
            SetKind::Tessera(t) => &t.index,
        }
    }

    /// The format of the set's shards when none of them opened: the one its index
    /// records (Tessera), or the one whose extension the shards' names carry
    /// (`*.safetensors.index.json` → safetensors, `*.bin.index.json` → PyTorch, a GGUF
    /// split's own name).
    pub fn shard_format(&self) -> Option<Format> {
        match self {
            SetKind::HfIndex(n) => Format::from_path(Path::new(n.strip_suffix(".index.json")?)),
            SetKind::GgufSplit(n) => Format::from_path(Path::new(n)),
            SetKind::Tessera(t) => Some(t.format),
        }
    }
}

/// One shard of a set.
pub struct Shard {
    /// Its file name (in the set's directory).
    pub name: String,
    /// The opened file, when it opened.
    pub file: Option<OpenedFile>,
}

/// A model stored as several shard files, read as one container. See the module docs.
pub struct ModelSet {
    kind: SetKind,
    dir: PathBuf,
    shards: Vec<Shard>,
    infos: Vec<TensorInfo>,
    place: HashMap<String, usize>,
    metadata: Metadata,
    metadata_types: Option<Metadata>,
    format: Format,
    checks: VerifyReport,
    /// Tessera index: hash each shard before the first tensor read from it.
    check_shards: bool,
    /// Per shard, the outcome of that hash (Err: the detail).
    shard_digests: Vec<OnceLock<std::result::Result<(), String>>>,
    /// What opening found worth saying that is no failed check (metadata that differs
    /// between shards).
    notes: Vec<String>,
    /// The first fatal check failure of an audit open: the error a plain open gives.
    refusal: Option<(String, String, String)>,
}

/// The error a failed fatal check (subject, layer, detail) gives, naming the index.
fn refusal_error(dir: &Path, index: &str, (at, layer, detail): &(String, String, String)) -> Error {
    let mut e = Error::integrity(format!("model set check {layer:?} failed: {detail}"));
    if at != index {
        e = e.at_subject(at.clone());
    }
    e.in_file(dir.join(index).display().to_string())
}

/// A set-level check outcome recorded while opening.
struct Checks {
    report: VerifyReport,
    /// The first fatal failure: subject, layer, detail.
    fatal: Option<(String, String, String)>,
}

impl Checks {
    fn new() -> Checks {
        Checks {
            report: VerifyReport::default(),
            fatal: None,
        }
    }
    fn ok(&mut self, subject: &str, layer: &str) {
        self.report.ok(subject, layer);
    }
    /// A failed check; `fatal` ones fail a non-audit open.
    fn fail(&mut self, subject: &str, layer: &str, detail: String, fatal: bool) {
        if fatal && self.fatal.is_none() {
            self.fatal = Some((subject.into(), layer.into(), detail.clone()));
        }
        self.report.failed(subject, layer, detail);
    }
    /// Records `ok` when `bad` is empty, else one failure listing (some of) them.
    fn list(&mut self, subject: &str, layer: &str, what: &str, bad: &[String], fatal: bool) {
        if bad.is_empty() {
            return self.ok(subject, layer);
        }
        let shown: Vec<&str> = bad.iter().take(8).map(String::as_str).collect();
        let more = match bad.len() - shown.len() {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        let detail = format!("{} {what}: {}{more}", bad.len(), shown.join(", "));
        self.fail(subject, layer, detail, fatal);
    }
}

/// What a set kind's module found before the shards are read.
struct Plan {
    kind: SetKind,
    dir: PathBuf,
    /// Shard file names, in set order (already checked plain).
    shards: Vec<String>,
    /// HF: tensor → shard position, in index order.
    weight_map: Option<Vec<(String, usize)>>,
    /// The index's metadata (HF, minus `total_size`).
    metadata: Metadata,
    total_size: Option<u64>,
    checks: Checks,
}

impl ModelSet {
    /// Opens the shards a plan names (`open` opens one by its name: a local file or a
    /// remote object, `place.rs`, `remote.rs`) and runs the set-level checks.
    fn build_with(
        plan: Plan,
        opts: &ReadOptions,
        open: &dyn Fn(&str) -> Result<OpenedFile>,
    ) -> Result<ModelSet> {
        let Plan {
            kind,
            dir,
            shards: names,
            weight_map,
            metadata,
            total_size,
            mut checks,
        } = plan;
        let mut shards = Vec::with_capacity(names.len());
        let mut format = None;
        for name in names {
            match open(&name) {
                Ok(f) => {
                    checks.ok(&name, "shard present");
                    let fmt = f.format();
                    match format {
                        None => format = Some(fmt),
                        Some(first) if first != fmt => checks.fail(
                            &name,
                            "shard format",
                            format!("{} where the first shard is {}", fmt.name(), first.name()),
                            true,
                        ),
                        Some(_) => {}
                    }
                    shards.push(Shard {
                        name,
                        file: Some(f),
                    });
                }
                Err(e) => {
                    // The error names the shard file already.
                    if !opts.audit {
                        return Err(e);
                    }
                    checks.fail(&name, "shard present", e.to_string(), true);
                    shards.push(Shard { name, file: None });
                }
            }
        }
        let format = match format {
            Some(f) => f,
            None => kind.shard_format().ok_or_else(|| {
                Error::malformed(format!(
                    "{}: no format has the extension of its shards",
                    kind.index_name()
                ))
            })?,
        };
        // Where each tensor is, from the shards themselves.
        let mut found: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, s) in shards.iter().enumerate() {
            if let Some(f) = &s.file {
                for info in f.tensor_infos() {
                    found.entry(info.name.as_str()).or_default().push(i);
                }
            }
        }
        let subject = kind.index_name().to_string();
        let mut twice: Vec<String> = found
            .iter()
            .filter(|(_, v)| v.len() > 1)
            .map(|(n, v)| {
                let in_: Vec<&str> = v.iter().map(|&i| shards[i].name.as_str()).collect();
                format!("{n:?} in {}", in_.join(" and "))
            })
            .collect();
        twice.sort();
        checks.list(
            &subject,
            "tensors in one shard",
            "tensors in more than one shard",
            &twice,
            true,
        );

        let mut infos = Vec::new();
        let mut place = HashMap::new();
        match &weight_map {
            Some(map) => {
                let mut missing = Vec::new();
                for (name, at) in map {
                    let info = shards[*at]
                        .file
                        .as_ref()
                        .and_then(|f| f.tensor_infos().iter().find(|t| &t.name == name));
                    match info {
                        Some(info) if !place.contains_key(name) => {
                            place.insert(name.clone(), *at);
                            infos.push(info.clone());
                        }
                        Some(_) => {}
                        None if shards[*at].file.is_some() => {
                            missing.push(format!("{name:?} (in {})", shards[*at].name))
                        }
                        None => {} // the shard itself is reported missing
                    }
                }
                checks.list(
                    &subject,
                    "tensors present",
                    "tensors the index names are not in their shard",
                    &missing,
                    true,
                );
                let named: std::collections::HashSet<&str> =
                    map.iter().map(|(n, _)| n.as_str()).collect();
                let mut extra: Vec<String> = found
                    .iter()
                    .filter(|(n, _)| !named.contains(*n))
                    .map(|(n, v)| format!("{n:?} (in {})", shards[v[0]].name))
                    .collect();
                extra.sort();
                checks.list(
                    &subject,
                    "tensors indexed",
                    "tensors in shards the index omits",
                    &extra,
                    true,
                );
            }
            None => {
                for (i, s) in shards.iter().enumerate() {
                    for info in s.file.iter().flat_map(|f| f.tensor_infos()) {
                        if !place.contains_key(&info.name) {
                            place.insert(info.name.clone(), i);
                            infos.push(info.clone());
                        }
                    }
                }
            }
        }
        let whole = shards.iter().all(|s| s.file.is_some());
        if let (Some(total), false) = (total_size, whole) {
            checks.report.push(
                &subject,
                "total_size",
                Status::NotChecked,
                Some(format!(
                    "the index says {total} bytes; not all shards opened"
                )),
            );
        }
        if let (Some(total), true) = (total_size, whole) {
            // Tensors sharing one stored range of a shard (tied weights of a PyTorch
            // shard) count it once, as huggingface_hub's splitter counts storage.
            let mut seen = std::collections::HashSet::new();
            let sum: u64 = (infos.iter())
                .filter(|t| {
                    let at =
                        (t.storage.offset).map(|o| (place[&t.name], o, t.storage.stored_bytes));
                    at.is_none_or(|k| seen.insert(k))
                })
                .map(|t| t.storage.stored_bytes)
                .sum();
            if sum == total {
                checks.ok(&subject, "total_size");
            } else {
                checks.fail(
                    &subject,
                    "total_size",
                    format!("the index says {total} bytes, the tensors it names hold {sum}"),
                    false,
                );
            }
        }
        let mut notes = Vec::new();
        let (metadata, metadata_types) = match &kind {
            SetKind::GgufSplit(_) => {
                gguf_split::check(&shards, whole.then_some(infos.len()), &mut checks)
            }
            SetKind::HfIndex(_) => (hf::merge_metadata(metadata, &shards, &mut notes), None),
            SetKind::Tessera(t) => tessera_index::check(t, &shards, &mut checks),
        };
        let refusal = checks.fatal.take();
        if let (Some(fatal), false) = (&refusal, opts.audit) {
            return Err(refusal_error(&dir, &subject, fatal));
        }
        let check_shards = opts.verify && matches!(kind, SetKind::Tessera(_));
        let shard_digests = shards.iter().map(|_| OnceLock::new()).collect();
        Ok(ModelSet {
            kind,
            dir,
            shards,
            infos,
            place,
            metadata,
            metadata_types,
            format,
            checks: checks.report,
            check_shards,
            shard_digests,
            notes,
            refusal,
        })
    }

    /// For a set opened with [`ReadOptions::audit`] that a plain open refuses (a fatal
    /// check failed: a shard missing, a tensor not where the index says, …), the
    /// `Integrity` error naming the first such check; `None` for a sound set. `tessera
    /// inspect` prints what it can, then exits with it.
    pub fn refusal(&self) -> Option<Error> {
        let subject = self.kind.index_name();
        (self.refusal.as_ref()).map(|f| refusal_error(&self.dir, subject, f))
    }

    /// The set's kind.
    pub fn kind(&self) -> &SetKind {
        &self.kind
    }

    /// The shards, in set order.
    pub fn shards(&self) -> &[Shard] {
        &self.shards
    }

    /// The directory the shards are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A Tessera index's shard `i` hashed whole, once: an `Integrity` error naming the
    /// shard when its BLAKE3 is not the index's.
    fn check_shard(&self, i: usize, file: &OpenedFile) -> Result<()> {
        let SetKind::Tessera(t) = &self.kind else {
            return Ok(());
        };
        let Some(rec) = t.shards.get(i) else {
            return Ok(());
        };
        let outcome = match self.shard_digests[i].get() {
            Some(o) => o,
            // A shard that cannot be read (a remote one, fetched block by block) is an
            // error now and tried again next time, not a digest failure kept.
            None => {
                let o = tessera_index::check_digest_of(rec, &file.source())?;
                self.shard_digests[i].get_or_init(|| o)
            }
        };
        outcome.clone().map_err(|d| {
            Error::integrity(format!("shard digest: {d}"))
                .in_file(self.dir.join(&self.shards[i].name).display().to_string())
        })
    }

    /// The shard holding tensor `name`.
    pub fn shard_of(&self, name: &str) -> Option<&str> {
        self.place.get(name).map(|&i| self.shards[i].name.as_str())
    }
}

impl TensorSource for ModelSet {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn metadata_types(&self) -> Option<&Metadata> {
        self.metadata_types.as_ref()
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let (i, file) = self
            .place
            .get(name)
            .and_then(|&i| Some((i, self.shards[i].file.as_ref()?)))
            .ok_or_else(|| Error::no_tensor(name))?;
        if self.check_shards {
            self.check_shard(i, file)?;
        }
        file.tensor(name)
    }
    fn chunks(&self) -> &[ChunkInfo] {
        &[]
    }
    fn chunk(&self, name: &str) -> Result<Cow<'_, [u8]>> {
        Err(Error::not_found(format!(
            "no chunk named {name:?} (a model set lists tensors only)"
        )))
    }
    fn source_format(&self) -> Option<Format> {
        Some(self.format)
    }
    fn raw_extent(&self, name: &str) -> Result<Option<crate::slice::RawExtent<'_>>> {
        let (i, file) = self
            .place
            .get(name)
            .and_then(|&i| Some((i, self.shards[i].file.as_ref()?)))
            .ok_or_else(|| Error::no_tensor(name))?;
        let mut ext = file.raw_extent(name)?;
        // A slice read does not read the whole shard its index digest covers: unless
        // that digest was checked already (a whole read), the slice says so.
        if let (Some(e), true) = (&mut ext, self.check_shards) {
            match self.shard_digests[i].get() {
                Some(Ok(())) => {}
                Some(Err(_)) => self.check_shard(i, file)?,
                None => e.whole_digests.push("shard digest (Tessera index)".into()),
            }
        }
        Ok(ext)
    }
}

impl Container for ModelSet {
    fn format(&self) -> Format {
        self.format
    }
    fn version(&self) -> String {
        let first = self.shards.iter().find_map(|s| s.file.as_ref());
        let n = self.shards.len();
        let kind = match self.kind {
            SetKind::HfIndex(_) => "Hugging Face index",
            SetKind::GgufSplit(_) => "GGUF splits",
            SetKind::Tessera(_) => "Tessera index",
        };
        match first {
            Some(f) => format!("{}, set of {n} shards ({kind})", f.version()),
            None => format!("set of {n} shards ({kind})"),
        }
    }
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport {
        let mut report = self.checks.clone();
        report.warnings.extend(self.notes.iter().cloned());
        for (i, s) in self.shards.iter().enumerate() {
            let Some(f) = &s.file else { continue };
            if let SetKind::Tessera(t) = &self.kind {
                if let Some(rec) = t.shards.get(i) {
                    match tessera_index::check_digest_of(rec, &f.source()) {
                        Ok(Ok(())) => report.ok(&s.name, "shard digest"),
                        Ok(Err(d)) => report.failed(&s.name, "shard digest", d),
                        Err(e) => report.failed(
                            &s.name,
                            "shard digest",
                            format!("the shard could not be read: {e}"),
                        ),
                    }
                }
            }
            let mut o = opts.clone();
            o.path = Some(self.dir.join(&s.name));
            let r = f.verify(&o);
            for c in r.checks {
                report.push(
                    format!("{}: {}", s.name, c.subject),
                    c.layer,
                    c.status,
                    c.detail,
                );
            }
            report
                .warnings
                .extend(r.warnings.into_iter().map(|w| format!("{}: {w}", s.name)));
        }
        report
    }
    fn lost(&self) -> Vec<crate::refusal::Lost> {
        let mut out = Vec::new();
        for s in &self.shards {
            let Some(f) = &s.file else { continue };
            out.extend(f.lost().into_iter().map(|mut l| {
                l.what = format!("{}: {}", s.name, l.what);
                l
            }));
        }
        out
    }
    fn warnings(&self) -> Vec<String> {
        let mut w: Vec<String> = self
            .checks
            .checks
            .iter()
            .filter(|c| c.status == Status::Failed)
            .map(|c| {
                format!(
                    "set check {:?} failed for {}: {}",
                    c.layer,
                    c.subject,
                    c.detail.as_deref().unwrap_or("")
                )
            })
            .collect();
        w.extend(self.notes.iter().cloned());
        for s in &self.shards {
            if let Some(f) = &s.file {
                w.extend(f.warnings().into_iter().map(|x| format!("{}: {x}", s.name)));
            }
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A set none of whose shards opened still says the format its names carry.
    #[test]
    fn a_set_kind_names_its_shards_format() {
        let kind = |k: SetKind| k.shard_format();
        assert_eq!(
            kind(SetKind::HfIndex("model.safetensors.index.json".into())),
            Some(Format::Safetensors)
        );
        assert_eq!(
            kind(SetKind::HfIndex("pytorch_model.bin.index.json".into())),
            Some(Format::Pytorch)
        );
        assert_eq!(
            kind(SetKind::GgufSplit("m-00001-of-00003.gguf".into())),
            Some(Format::Gguf)
        );
        assert_eq!(kind(SetKind::HfIndex("weights.json".into())), None);
    }
}
