//! [`Ztensor2File`]: open a zTensor v2 file by range (footer, then manifest), check the
//! manifest against spec §3.6, hand out tensors.

use std::borrow::Cow;
use std::sync::OnceLock;

use super::cbor::{self, CVal};
use super::layout::{self, Entry};
use super::raw::{self, Footer, Manifest, ObjectRef, PartRef, ALIGN_FLOOR, FOOTER_LEN, MAGIC};
use crate::any::ReadOptions;
use crate::error::{Error, ErrorKind, Result};
use crate::format::Format;
use crate::limits::Limits;
use crate::metadata::{Map, Metadata, Value};
use crate::model::{Container, TensorSource};
use crate::source::SourceRef;
use crate::tensor::{Layout, Part, TensorInfo, TensorView};
use crate::verify::{progress_bytes, progress_share, Status, VerifyOptions, VerifyReport};

/// The encoding profile this reader decodes.
pub const ZSTD_SEEKABLE: &str = "zt.zstd-seekable/1";

/// An opened zTensor v2 file. See the module docs for what is checked.
pub struct Ztensor2File<'data> {
    src: SourceRef<'data>,
    footer: Footer,
    shards: Vec<(String, u64, String)>,
    /// The shard files given by [`Ztensor2File::with_shards`], in table order.
    shard_srcs: Vec<SourceRef<'data>>,
    /// Per shard: its whole-file digest checked (`Err`: the mismatch), once, before a
    /// checked read's first part from it.
    shard_checked: Vec<OnceLock<std::result::Result<(), String>>>,
    /// The file's path, named by read errors (set with the shards, by `set/`).
    file: Option<String>,
    /// The CBOR `zt.content/1` hashes, or why the model has none.
    content: std::result::Result<Vec<u8>, String>,
    metadata: Metadata,
    /// Tensors in name order.
    infos: Vec<TensorInfo>,
    entries: Vec<Entry>,
    warnings: Vec<String>,
    limits: Limits,
    verify: bool,
    /// Per tensor: set once its digests matched.
    checked: Vec<OnceLock<()>>,
}

impl std::fmt::Debug for Ztensor2File<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ztensor2File")
            .field("tensors", &self.infos.len())
            .finish()
    }
}

/// A CBOR attribute value as a metadata value.
pub fn to_value(v: &CVal) -> Value {
    match v {
        CVal::Uint(n) => Value::Int(*n as i128),
        CVal::Nint(n) => Value::Int(-1 - *n as i128),
        CVal::Bytes(b) => Value::Bytes(b.clone()),
        CVal::Text(s) => Value::Str(s.clone()),
        CVal::Array(a) => Value::List(a.iter().map(to_value).collect()),
        CVal::Map(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let key = match k {
                    CVal::Text(s) => s.clone(),
                    other => format!("{other:?}"),
                };
                out.push_new(key, to_value(v));
            }
            Value::Map(out)
        }
        CVal::Bool(b) => Value::Bool(*b),
        CVal::Null => Value::Null,
        CVal::Float(x) => Value::Float(*x),
    }
}

/// A blob reference: (offset, length, who).
type Span = (u64, u64, String);

/// Blob references into one file must be identical or disjoint (spec §2.4); zero-length
/// ones are exempt. `spans`: (offset, length, who).
fn check_overlap(mut spans: Vec<Span>, file: &str) -> Result<()> {
    spans.retain(|s| s.1 > 0);
    spans.sort_unstable_by_key(|a| (a.0, a.1));
    spans.dedup_by(|b, a| a.0 == b.0 && a.1 == b.1);
    for w in spans.windows(2) {
        let ((ao, al, an), (bo, _, bn)) = (&w[0], &w[1]);
        if *bo < ao.saturating_add(*al) {
            return Err(Error::malformed(format!(
                "{bn} partially overlaps {an} at byte {bo}{file}"
            ))
            .at_offset(*bo));
        }
    }
    Ok(())
}

impl<'data> Ztensor2File<'data> {
    /// Reads the footer and the manifest (two ranges), checks everything spec §3.6 lists.
    pub fn parse(src: impl Into<SourceRef<'data>>, opts: &ReadOptions) -> Result<Self> {
        let mut f = Self::parse_inner(src.into(), &opts.limits)
            .map_err(|e| e.in_format(Format::ZtensorV2))?;
        f.verify = opts.verify;
        Ok(f)
    }

    fn parse_inner(src: SourceRef<'data>, limits: &Limits) -> Result<Self> {
        let len = src.len();
        let head = src.read_up_to(0, 8)?;
        if head.as_ref() != MAGIC {
            return Err(if head.len() < 8 {
                Error::malformed(format!("truncated: {len} bytes, a v2 file has at least 48"))
            } else {
                Error::malformed("no zTensor v2 magic at byte 0").at_offset(0)
            });
        }
        if len < 8 + FOOTER_LEN {
            return Err(Error::malformed(format!(
                "truncated: {len} bytes, a v2 file has at least 48"
            )));
        }
        let data_end = len - FOOTER_LEN;
        let footer = raw::parse_footer(&src.read_at(data_end, FOOTER_LEN)?)
            .map_err(|e| e.at_offset(data_end))?;
        let mut warnings = Vec::new();
        if footer.manifest_length == 0 && (footer.manifest_offset, footer.manifest_hash) != (0, 0) {
            return Err(Error::malformed(
                "footer: no manifest (length 0) but a non-zero manifest offset or hash",
            )
            .at_offset(data_end));
        }
        if footer.manifest_length == 0 {
            // A data shard (spec §7.2): blobs only, described by another file's manifest.
            warnings
                .push("a data shard: no manifest, its blobs are described by the root file".into());
            return Self::new(src, footer, Manifest::default(), warnings, limits);
        }
        let (mo, ml) = (footer.manifest_offset, footer.manifest_length);
        if ml > raw::MAX_MANIFEST {
            return Err(Error::limit(format!(
                "manifest of {ml} bytes exceeds the spec's 1 GiB cap"
            )));
        }
        limits.check_index(ml).map_err(|e| e.at_offset(data_end))?;
        if mo % ALIGN_FLOOR != 0 || mo < ALIGN_FLOOR {
            return Err(Error::malformed(format!(
                "manifest offset {mo} is not a multiple of 4096 at or past 4096"
            ))
            .at_offset(data_end));
        }
        if mo.checked_add(ml).is_none_or(|e| e > data_end) {
            return Err(Error::malformed(format!(
                "manifest {mo}+{ml} runs past the data region (ends at {data_end})"
            ))
            .at_offset(data_end));
        }
        let bytes = src.read_at(mo, ml)?;
        let got = xxhash_rust::xxh3::xxh3_64(&bytes);
        if got != footer.manifest_hash {
            return Err(Error::integrity(format!(
                "manifest XXH3-64 mismatch: footer says {:016x}, the manifest hashes to {got:016x}",
                footer.manifest_hash
            ))
            .at_offset(mo));
        }
        let root = cbor::decode(&bytes).map_err(|e| e.at_offset(mo))?;
        drop(bytes);
        let manifest = raw::manifest(&root, limits.max_entries, limits.max_rank)
            .map_err(|e| e.at_offset(mo))?;
        drop(root);
        // Blob bounds and overlap, per file (spec §3.6 items 3 and 4).
        let mut local = vec![(mo, ml, "the manifest".to_string())];
        let mut foreign: Vec<(String, Vec<Span>)> = Vec::new();
        for o in &manifest.objects {
            limits.check_name(o.name.len() as u64)?;
            for p in &o.parts {
                let who = format!("tensor {:?} part {:?}", o.name, p.name);
                if p.offset % ALIGN_FLOOR != 0 || p.offset < ALIGN_FLOOR {
                    return Err(Error::malformed(format!(
                        "{who}: blob offset {} is not a multiple of 4096 at or past 4096",
                        p.offset
                    ))
                    .at_offset(mo));
                }
                let end_limit = match &p.shard {
                    None => data_end,
                    Some(s) => manifest
                        .shards
                        .iter()
                        .find(|(n, _, _)| n == s)
                        .map_or(0, |(_, size, _)| size.saturating_sub(FOOTER_LEN)),
                };
                if p.offset.checked_add(p.length).is_none_or(|e| e > end_limit) {
                    return Err(Error::malformed(format!(
                        "{who}: blob {}+{} runs past the data region (ends at {end_limit})",
                        p.offset, p.length
                    ))
                    .at_offset(mo));
                }
                let span = (p.offset, p.length, who);
                match &p.shard {
                    None => local.push(span),
                    Some(s) => match foreign.iter_mut().find(|(n, _)| n == s) {
                        Some((_, v)) => v.push(span),
                        None => foreign.push((s.clone(), vec![span])),
                    },
                }
            }
        }
        check_overlap(local, "")?;
        for (s, spans) in foreign {
            check_overlap(spans, &format!(" in shard {s:?}"))?;
        }
        Self::new(src, footer, manifest, warnings, limits)
    }

    fn new(
        src: SourceRef<'data>,
        footer: Footer,
        manifest: Manifest,
        mut warnings: Vec<String>,
        limits: &Limits,
    ) -> Result<Self> {
        let mut metadata = Map::new();
        for (k, v) in manifest.attributes.iter().flatten() {
            metadata.push_new(k.clone(), to_value(v));
        }
        let mut objects: Vec<ObjectRef> = manifest.objects;
        objects.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let content = super::content::content_bytes(&objects);
        let mut infos = Vec::with_capacity(objects.len());
        let mut entries = Vec::with_capacity(objects.len());
        for o in objects {
            let (info, entry) = layout::interpret(o, &mut warnings)?;
            infos.push(info);
            entries.push(entry);
        }
        if !manifest.shards.is_empty() {
            warnings.push(format!(
                "{} shard(s) in the shard table; parts stored in a shard cannot be read through this file alone",
                manifest.shards.len()
            ));
        }
        let checked = (0..infos.len()).map(|_| OnceLock::new()).collect();
        Ok(Ztensor2File {
            src,
            footer,
            shards: manifest.shards,
            shard_srcs: Vec::new(),
            shard_checked: Vec::new(),
            file: None,
            content,
            metadata,
            infos,
            entries,
            warnings,
            limits: limits.clone(),
            verify: true,
            checked,
        })
    }

    /// Gives the files of the shard table, in its order, so parts stored in them read
    /// as this file's. Each is checked here as spec §7.3's cheap rungs ask: its size
    /// equals the table's, it ends in a v2 footer (magic, version). The whole-file
    /// digest is checked by [`Container::verify`] (layer `shard digest`) and, when
    /// reads are checked ([`ReadOptions::verify`]), once per shard before the first
    /// part read from it: the whole shard is hashed then.
    pub fn with_shards(mut self, srcs: Vec<SourceRef<'data>>) -> Result<Self> {
        self.add_shards(srcs)
            .map_err(|e| e.in_format(Format::ZtensorV2))?;
        Ok(self)
    }

    /// Adds a warning (how the opener resolved the shards, say).
    pub fn warn(mut self, w: impl Into<String>) -> Self {
        self.warnings.push(w.into());
        self
    }

    /// Names the file in every later read error (as `tessera::open` does for a path).
    pub fn named(mut self, file: impl Into<String>) -> Self {
        self.file = Some(file.into());
        self
    }

    fn add_shards(&mut self, srcs: Vec<SourceRef<'data>>) -> Result<()> {
        if srcs.len() != self.shards.len() {
            return Err(Error::invalid_input(format!(
                "{} shard files given for a table of {}",
                srcs.len(),
                self.shards.len()
            )));
        }
        for ((name, size, _), src) in self.shards.iter().zip(&srcs) {
            let subject = || format!("shard {name:?}");
            if src.len() != *size {
                return Err(Error::integrity(format!(
                    "the shard file is {} bytes, the shard table says {size}",
                    src.len()
                ))
                .at_subject(subject()));
            }
            if *size < 8 + FOOTER_LEN || src.read_at(0, 8)?.as_ref() != MAGIC {
                return Err(
                    Error::malformed("not a zTensor v2 file (no magic at byte 0)")
                        .at_subject(subject()),
                );
            }
            raw::parse_footer(&src.read_at(size - FOOTER_LEN, FOOTER_LEN)?)
                .map_err(|e| e.at_subject(subject()))?;
        }
        self.shard_checked = srcs.iter().map(|_| OnceLock::new()).collect();
        self.shard_srcs = srcs;
        self.warnings.retain(|w| !w.contains("in the shard table"));
        Ok(())
    }

    /// Records that shard `name`'s whole-file digest is known to match (the opener
    /// hashed it to find the file), so a checked read does not hash it again.
    pub fn shard_digest_matched(mut self, name: &str) -> Self {
        if let Some(i) = self.shards.iter().position(|(n, _, _)| n == name) {
            if let Some(c) = self.shard_checked.get_mut(i) {
                let _ = c.set(Ok(()));
            }
        }
        self
    }

    /// Shard `i` hashed whole against the table once: an `Integrity` error naming the
    /// shard when it does not match (every later read from it fails the same way). A
    /// read that fails (I/O) is an error now and tried again next time. An algorithm
    /// Tessera does not compute passes, as an unknown part digest does (`verify` says
    /// it was not checked).
    fn ensure_shard(&self, i: usize) -> Result<()> {
        let Some(slot) = self.shard_checked.get(i) else {
            return Ok(());
        };
        let outcome = match slot.get() {
            Some(o) => o,
            None => {
                let o = self.check_shard(i)?.unwrap_or(Ok(()));
                slot.get_or_init(|| o)
            }
        };
        outcome.clone().map_err(|d| {
            Error::integrity(format!(
                "a part is in shard {:?}, whose whole file does not match the shard table (shard digest): {d}",
                self.shards[i].0
            ))
        })
    }

    /// The source a part's blob is in: this file or its shard's.
    fn source_of(&self, p: &PartRef) -> Result<SourceRef<'data>> {
        let Some(s) = &p.shard else {
            return Ok(self.src);
        };
        let i = self.shards.iter().position(|(n, _, _)| n == s);
        match i.and_then(|i| self.shard_srcs.get(i)) {
            Some(src) => Ok(*src),
            None => Err(Error::unsupported(format!(
                "part {:?} is stored in shard {s:?}, which was not opened (open the root \
                 file by path, with its shards beside it as <stem>-{s}.zt)",
                p.name
            ))),
        }
    }

    /// Hashes shard `i` whole (in 16 MiB blocks) against the table's digest: `None`
    /// for an algorithm Tessera does not compute.
    fn check_shard(&self, i: usize) -> Result<Option<std::result::Result<(), String>>> {
        use sha2::Digest as _;
        let (_, size, digest) = &self.shards[i];
        let src = self.shard_srcs[i];
        let want = raw::Digest::parse(digest)?;
        let mut xxh = xxhash_rust::xxh3::Xxh3::new();
        let mut sha = sha2::Sha256::new();
        let mut at = 0u64;
        while at < *size {
            let n = (size - at).min(16 << 20);
            let block = src.read_at(at, n)?;
            match want {
                raw::Digest::Xxh3(_) => xxh.update(&block),
                raw::Digest::Sha256(_) => sha.update(&block),
                raw::Digest::Other(_) => return Ok(None),
            }
            at += n;
        }
        Ok(Some(match want {
            raw::Digest::Xxh3(w) if xxh.digest() != w => Err(format!(
                "stored xxh3:{w:016x}, computed xxh3:{:016x}",
                xxh.digest()
            )),
            raw::Digest::Sha256(w) => {
                let got: [u8; 32] = sha.finalize().into();
                if got == w {
                    Ok(())
                } else {
                    Err(format!(
                        "stored sha256:{}, computed sha256:{}",
                        crate::util::hex(&w),
                        crate::util::hex(&got)
                    ))
                }
            }
            _ => Ok(()),
        }))
    }

    /// The model's `zt.content/1` digest (`xxh3:<hex>`, or `sha256:<hex>` when
    /// `sha256`): the same for the same tensors in any layout, shards or encodings
    /// (see `content.rs`). `Unsupported` when a part carries no digest.
    pub fn content_digest(&self, sha256: bool) -> Result<String> {
        let bytes = self.content.as_ref().map_err(Error::unsupported)?;
        Ok(if sha256 {
            format!("sha256:{}", crate::util::hex(&crate::util::sha256(bytes)))
        } else {
            format!("xxh3:{:016x}", xxhash_rust::xxh3::xxh3_64(bytes))
        })
    }

    /// The footer.
    pub fn footer(&self) -> Footer {
        self.footer
    }
    /// The shard table: (name, size, digest).
    pub fn shards(&self) -> &[(String, u64, String)] {
        &self.shards
    }
    /// The parts of tensor `name` as the manifest states them.
    pub fn parts(&self, name: &str) -> Option<&[PartRef]> {
        self.find(name).map(|i| self.entries[i].parts.as_slice())
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.infos
            .binary_search_by(|i| i.name.as_str().cmp(name))
            .ok()
    }

    /// One part's decoded bytes: raw parts borrowed, encoded ones decoded (exactly
    /// `decoded_length`).
    fn decode(&self, p: &PartRef, stored: Cow<'data, [u8]>) -> Result<Cow<'data, [u8]>> {
        match p.encoding.as_deref() {
            None => Ok(stored),
            Some(ZSTD_SEEKABLE) => {
                let n = p.decoded_size();
                self.limits.check_decoded(n)?;
                Ok(Cow::Owned(
                    crate::util::zstd_decode_bounded(&stored, n, true)
                        .map_err(|e| e.at_offset(p.offset))?,
                ))
            }
            Some(e) => Err(Error::unsupported(format!(
                "part {:?}: encoding {e:?} is not supported ({ZSTD_SEEKABLE} and raw are)",
                p.name
            ))),
        }
    }

    /// Reads tensor `i`: its parts' stored bytes, decoded, digests checked over the
    /// decoded bytes (when `verify`, once per tensor), data rules checked.
    fn read_view(&self, i: usize, verify: bool) -> Result<TensorView<'data>> {
        let info = &self.infos[i];
        let entry = &self.entries[i];
        let stored = if entry.parts.iter().all(|p| p.shard.is_none()) {
            let ranges: Vec<(u64, u64)> =
                entry.parts.iter().map(|p| (p.offset, p.length)).collect();
            self.src.read_ranges(&ranges)?
        } else {
            if verify {
                for p in &entry.parts {
                    let at = p
                        .shard
                        .as_ref()
                        .and_then(|s| self.shards.iter().position(|(n, _, _)| n == s));
                    if let Some(i) = at {
                        self.ensure_shard(i)?;
                    }
                }
            }
            (entry.parts.iter())
                .map(|p| self.source_of(p)?.read_at(p.offset, p.length))
                .collect::<Result<Vec<_>>>()?
        };
        let mut decoded = Vec::with_capacity(stored.len());
        for (p, s) in entry.parts.iter().zip(stored) {
            decoded.push(self.decode(p, s)?);
        }
        if verify && (self.checked[i].get().is_none() || !self.src.rereads_same()) {
            for (p, d) in entry.parts.iter().zip(&decoded) {
                if let Some(Err((want, got))) = p.digest.as_ref().and_then(|dg| dg.check(d)) {
                    return Err(Error::integrity(format!(
                        "part {:?}: {} mismatch: stored {want}, computed {got}",
                        p.name,
                        p.digest.as_ref().map_or("", |d| d.algorithm())
                    ))
                    .at_offset(p.offset));
                }
            }
            let _ = self.checked[i].set(());
        }
        for (p, d) in entry.parts.iter().zip(&decoded) {
            layout::check_data(p, d, entry.elements)?;
        }
        let parts = entry
            .parts
            .iter()
            .zip(decoded)
            .map(|(p, bytes)| layout::to_part(&info.layout, p, bytes))
            .collect::<Result<Vec<Part>>>()?;
        let view = TensorView {
            info: info.clone(),
            parts,
        };
        view.validate()?;
        layout::check_profile_data(&view)?;
        Ok(view)
    }
}

impl TensorSource for Ztensor2File<'_> {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let i = self.find(name).ok_or_else(|| Error::no_tensor(name))?;
        self.read_view(i, self.verify).map_err(|e| {
            let e = e
                .at_subject(format!("tensor {name:?}"))
                .in_format(Format::ZtensorV2);
            match &self.file {
                Some(f) => e.in_file(f.clone()),
                None => e,
            }
        })
    }
    fn source_format(&self) -> Option<Format> {
        Some(Format::ZtensorV2)
    }
    fn raw_extent(&self, name: &str) -> Result<Option<crate::slice::RawExtent<'_>>> {
        let i = self.find(name).ok_or_else(|| Error::no_tensor(name))?;
        let info = &self.infos[i];
        let [p] = &self.entries[i].parts[..] else {
            return Ok(None);
        };
        if info.layout != Layout::Dense
            || p.encoding.is_some()
            || p.length != info.dense_nbytes()?
        {
            return Ok(None);
        }
        let checked = self.checked[i].get().is_some() && self.src.rereads_same();
        let mut whole_digests = Vec::new();
        if self.verify && !checked {
            if let Some(d) = &p.digest {
                whole_digests.push(d.algorithm().to_string());
            }
            if p.shard.is_some() {
                whole_digests.push("shard digest".into());
            }
        }
        Ok(Some(crate::slice::RawExtent {
            src: self.source_of(p)?,
            offset: p.offset,
            start: 0,
            big_endian: false,
            whole_digests,
            own_check: None,
        }))
    }
}

impl Container for Ztensor2File<'_> {
    fn format(&self) -> Format {
        Format::ZtensorV2
    }
    fn version(&self) -> String {
        self.footer.version.to_string()
    }
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport {
        let mut report = VerifyReport {
            warnings: self.warnings.clone(),
            ..VerifyReport::default()
        };
        // Progress: with shard files to hash, half of each tensor's share is given out
        // over the shards as they are hashed, the other half as the tensor is checked.
        let passes: u64 = if self.shard_srcs.is_empty() || self.shards.is_empty() {
            1
        } else {
            2
        };
        let shard_pass: u64 = match passes {
            2 => (self.infos.iter())
                .map(|t| progress_share(progress_bytes(t), 2, 1))
                .fold(0, u64::saturating_add),
            _ => 0,
        };
        if self.footer.manifest_length > 0 {
            // Checked at open: a file whose hash failed does not open.
            report.ok("manifest", "xxh3-64");
        }
        for (i, (name, _, _)) in self.shards.iter().enumerate() {
            let subject = format!("shard {name:?}");
            if self.shard_srcs.is_empty() {
                report.push(
                    subject,
                    "shard digest",
                    Status::NotChecked,
                    Some("the shard file was not opened".into()),
                );
                continue;
            }
            let outcome = self.check_shard(i);
            if let (Ok(Some(o)), Some(slot)) = (&outcome, self.shard_checked.get(i)) {
                let _ = slot.set(o.clone());
            }
            match outcome {
                Ok(Some(Ok(()))) => report.ok(subject, "shard digest"),
                Ok(Some(Err(m))) => report.failed(subject, "shard digest", m),
                Ok(None) => report.push(
                    subject,
                    "shard digest",
                    Status::NotChecked,
                    Some("a digest algorithm Tessera does not compute".into()),
                ),
                Err(e) => report.failed(subject, "shard digest", e.to_string()),
            }
            opts.advance(progress_share(
                shard_pass,
                self.shards.len() as u64,
                i as u64,
            ));
        }
        for (i, info) in self.infos.iter().enumerate() {
            let tensor = format!("tensor {:?}", info.name);
            let entry = &self.entries[i];
            let mut failed = false;
            for p in &entry.parts {
                let subject = if entry.parts.len() == 1 {
                    tensor.clone()
                } else {
                    format!("{tensor} part {:?}", p.name)
                };
                let bytes = self
                    .source_of(p)
                    .and_then(|src| src.read_at(p.offset, p.length))
                    .and_then(|s| self.decode(p, s));
                let bytes = match bytes {
                    Ok(b) => b,
                    Err(e) if e.kind() == ErrorKind::Unsupported => {
                        report.push(
                            subject,
                            "decode",
                            Status::NotChecked,
                            Some(e.message().into()),
                        );
                        failed = true;
                        continue;
                    }
                    Err(e) => {
                        report.failed(subject, "decode", e.to_string());
                        failed = true;
                        continue;
                    }
                };
                match &p.digest {
                    None => report.push(
                        subject,
                        "digest",
                        Status::NotChecked,
                        Some("the part stores no digest".into()),
                    ),
                    Some(d) => match d.check(&bytes) {
                        None => report.push(
                            subject,
                            d.algorithm().to_string(),
                            Status::NotChecked,
                            Some(format!(
                                "digest algorithm {:?} is not one Tessera computes (xxh3, sha256)",
                                d.algorithm()
                            )),
                        ),
                        Some(Ok(())) => report.ok(subject, d.algorithm().to_string()),
                        Some(Err((want, got))) => {
                            failed = true;
                            report.failed(
                                subject,
                                d.algorithm().to_string(),
                                format!("stored {want}, computed {got}"),
                            )
                        }
                    },
                }
                drop(bytes);
            }
            if !failed {
                match self.read_view(i, false) {
                    Ok(_) => report.ok(tensor, "structure"),
                    Err(e) if e.kind() == ErrorKind::Unsupported => report.push(
                        tensor,
                        "structure",
                        Status::NotChecked,
                        Some(e.message().to_string()),
                    ),
                    Err(e) => report.failed(tensor, "structure", e.to_string()),
                }
            }
            opts.advance(progress_share(progress_bytes(info), passes, 0));
        }
        report
    }
}
