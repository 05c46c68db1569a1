//! [`ZtensorFile`]: parse and validate a zTensor file, hand out tensor views.

use std::borrow::Cow;

use super::entry::{check_depth, is_index_role, tensor_entry, Component, Encoding};
use super::manifest::{self as mf, RawManifest};
use super::raw::{self, ParsedDigest, MAGIC};
use crate::any::ReadOptions;
use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::format::Format;
use crate::limits::{self, Limits};
use crate::metadata::{Map, Metadata};
use crate::model::{Container, TensorSource};
use crate::source::SourceRef;
use crate::tensor::{Layout, Part, TensorInfo, TensorView};
use crate::verify::{Status, VerifyOptions, VerifyReport};

/// The largest output a zstd frame can produce per input byte: a 4-byte RLE block
/// (3-byte header + 1 byte) expands to at most one 128 KiB block. Any decoded size above
/// `stored_len * ZSTD_MAX_RATIO` is impossible, so it bounds components whose decoded
/// size the manifest does not state.
const ZSTD_MAX_RATIO: u64 = 32 * 1024;

/// An opened zTensor v1.0 (or v1.1) file. See the module docs for what is checked.
pub struct ZtensorFile<'data> {
    src: SourceRef<'data>,
    version: String,
    generator: Option<String>,
    footer_magic: bool,
    manifest_start: u64,
    metadata: Metadata,
    infos: Vec<TensorInfo>,
    components: Vec<Vec<Component>>,
    /// Tensor positions sorted by name, for lookups by binary search.
    by_name: Vec<usize>,
    warnings: Vec<String>,
    limits: Limits,
    /// Check stored digests before handing bytes out ([`ReadOptions::verify`]).
    verify: bool,
    /// Per tensor (file order): set once every digest of its components has matched,
    /// so a tensor read twice is hashed once.
    checked: Vec<std::sync::OnceLock<()>>,
}

impl std::fmt::Debug for ZtensorFile<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZtensorFile")
            .field("version", &self.version)
            .field("tensors", &self.infos.len())
            .finish()
    }
}

/// Checks the `version` string against §6.1: `1.x` is read (a newer minor with a
/// warning, and one more when a `1.x` file, x ≥ 1, lacks the v1.1 footer magic), any
/// other major is `UnsupportedVersion`.
fn check_version(v: &str, footer_magic: bool, warnings: &mut Vec<String>) -> Result<()> {
    let mut it = v.split('.');
    let major = it.next().and_then(|s| s.parse::<u64>().ok());
    let minor = match it.next() {
        None => Some(0),
        Some(s) => s.parse::<u64>().ok(),
    };
    let rest_ok = it.all(|s| s.parse::<u64>().is_ok());
    match (major, minor, rest_ok) {
        (Some(1), Some(0), true) => Ok(()),
        (Some(1), Some(m), true) => {
            warnings.push(format!(
                "file version {v} is newer than 1.0: read as 1.0, features of 1.{m} may be missed"
            ));
            // §6.1: a newer minor is "warn, proceed". v1.1 writers end the file with the
            // footer magic; one without it was read by the v1.0 rule (size last) and is
            // said to be unusual, not refused.
            if !footer_magic {
                warnings.push(format!(
                    "file version {v} has no footer magic ZTEN1000 after the manifest size \
                     (v1.1 writers add it): read with the v1.0 footer"
                ));
            }
            Ok(())
        }
        (Some(2), _, _) => Err(Error::unsupported_version(format!(
            "zTensor v2 is not supported (file version {v:?}; Tessera reads v1.x)"
        ))),
        (Some(maj), _, _) => Err(Error::unsupported_version(format!(
            "zTensor version {v:?} (major {maj}) is not supported; Tessera reads v1.x"
        ))),
        (None, _, _) => Err(Error::malformed(format!(
            "manifest: version {v:?} is not a version number"
        ))),
    }
}

impl<'data> ZtensorFile<'data> {
    /// Parses and validates the file `src` holds: reads the magic, the footer and the
    /// manifest only; components are read when a tensor is asked for.
    pub fn parse(
        src: impl Into<SourceRef<'data>>,
        opts: &ReadOptions,
    ) -> Result<ZtensorFile<'data>> {
        let mut f = Self::parse_inner(src.into(), &opts.limits)
            .map_err(|e| e.in_format(Format::Ztensor))?;
        f.verify = opts.verify;
        Ok(f)
    }

    fn parse_inner(src: SourceRef<'data>, limits: &Limits) -> Result<ZtensorFile<'data>> {
        let len = src.len();
        let head = src.read_up_to(0, 8)?;
        if !head.starts_with(MAGIC) {
            return Err(if head.len() < MAGIC.len() && MAGIC.starts_with(&head) {
                Error::malformed(format!("truncated: {len} bytes, the magic alone needs 8"))
            } else {
                Error::malformed("not a zTensor file: no ZTEN1000 magic at byte 0").at_offset(0)
            });
        }
        // v1.1 appends the magic after the size. A v1.0 size can never read as
        // "ZTEN1000" (that is ~3.5e18 bytes, more than any file), so this is unambiguous.
        let tail16 = src.read_at(len.saturating_sub(16), len.min(16))?;
        let footer_magic = len >= 16 && tail16.ends_with(MAGIC);
        let tail = if footer_magic { 16 } else { 8 };
        if len < 8 + tail {
            return Err(Error::malformed(format!(
                "truncated: {len} bytes, too short for the magic and the manifest size"
            )));
        }
        let size_at = len - tail;
        let manifest_size = u64::from_le_bytes(
            limits::slice(
                &tail16,
                size_at - (len - tail16.len() as u64),
                8,
                "manifest size",
            )?
            .try_into()
            .map_err(|_| Error::malformed("manifest size"))?,
        );
        // §7.1 says manifest_size < FILE_SIZE - 16; the original accepts ==, which is what
        // a file with no components is (magic, manifest, size), so we accept it too.
        let room = size_at - 8;
        if manifest_size > room {
            return Err(Error::malformed(format!(
                "manifest size {manifest_size} exceeds the {room} bytes between the magic and the footer"
            ))
            .at_offset(size_at));
        }
        limits
            .check_index(manifest_size)
            .map_err(|e| e.at_offset(size_at))?;
        let manifest_start = size_at - manifest_size;
        let manifest = src.slice(manifest_start, manifest_size, "manifest")?;
        let manifest = &manifest[..];
        let depth = limits.max_depth.saturating_add(8).min(512);

        // One pass over the manifest. When it does not fit our schema, a second pass
        // reads only its version, so a v2 manifest is reported as a version error.
        let mut warnings = Vec::new();
        let m: RawManifest = match mf::decode(manifest, depth) {
            Ok(m) => m,
            Err(e) => {
                if let Some(v) = mf::version_only(manifest, depth) {
                    check_version(&v, footer_magic, &mut warnings)?;
                }
                return Err(e.at_offset(manifest_start));
            }
        };
        let version = m.version.clone().ok_or_else(|| {
            Error::malformed("manifest has no \"version\"").at_offset(manifest_start)
        })?;
        check_version(&version, footer_magic, &mut warnings)?;

        let tensors = m.tensors.ok_or_else(|| {
            Error::malformed("manifest has no \"tensors\" map").at_offset(manifest_start)
        })?;
        limits.check_entries(tensors.len() as u64)?;

        let mut metadata = Map::new();
        // Duplicate keys were rejected by the decoder.
        for (k, v) in m.attributes {
            check_depth(&v, limits.max_depth, &k)?;
            metadata.push_new(k, v);
        }

        let mut parsed = Vec::with_capacity(tensors.len());
        for (name, t) in tensors {
            limits
                .check_name(name.len() as u64)
                .map_err(|e| e.at_subject(format!("tensor {name:?}")))?;
            parsed.push(tensor_entry(
                name,
                t,
                manifest_start,
                limits,
                &mut warnings,
            )?);
        }
        // File order: by the first byte each tensor occupies; an empty tensor shares its
        // offset with the next one and was written before it; then by name. (Sorting
        // indices, not the entries, keeps the large entries in place.)
        fn key(i: &TensorInfo) -> (u64, bool, &str) {
            (
                i.storage.offset.unwrap_or(u64::MAX),
                i.storage.stored_bytes > 0,
                i.name.as_str(),
            )
        }
        let mut place: Vec<(u64, bool, usize)> = parsed
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let (o, n, _) = key(&p.0);
                (o, n, i)
            })
            .collect();
        if !place
            .windows(2)
            .all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1))
        {
            place.sort_unstable();
            // Equal places (empty tensors at one offset): by name, as written.
            place.sort_by(|a, b| {
                (a.0, a.1)
                    .cmp(&(b.0, b.1))
                    .then_with(|| parsed[a.2].0.name.cmp(&parsed[b.2].0.name))
            });
        }
        let order: Vec<usize> = place.iter().map(|p| p.2).collect();
        // Writers sort the manifest by name (the original's BTreeMap): then the name
        // index comes for free.
        let names_sorted = parsed.windows(2).all(|w| w[0].0.name < w[1].0.name);
        let mut file_pos = vec![0usize; parsed.len()];
        for (pos, &i) in order.iter().enumerate() {
            file_pos[i] = pos;
        }
        let mut slots: Vec<Option<(TensorInfo, Vec<Component>)>> =
            parsed.into_iter().map(Some).collect();
        let mut infos = Vec::with_capacity(slots.len());
        let mut components = Vec::with_capacity(slots.len());
        for &i in &order {
            if let Some((info, comps)) = slots[i].take() {
                infos.push(info);
                components.push(comps);
            }
        }
        let by_name: Vec<usize> = if names_sorted {
            file_pos
        } else {
            let mut by_name: Vec<usize> = (0..infos.len()).collect();
            by_name.sort_unstable_by(|&a, &b| infos[a].name.cmp(&infos[b].name));
            if let Some(w) = by_name
                .windows(2)
                .find(|w| infos[w[0]].name == infos[w[1]].name)
            {
                return Err(Error::malformed(format!(
                    "duplicate tensor name {:?}",
                    infos[w[0]].name
                )));
            }
            by_name
        };
        check_no_overlap(&infos, &components)?;
        let checked = (0..infos.len()).map(|_| Default::default()).collect();
        Ok(ZtensorFile {
            checked,
            src,
            version,
            generator: m.generator,
            footer_magic,
            manifest_start,
            metadata,
            infos,
            components,
            by_name,
            warnings,
            limits: limits.clone(),
            verify: true,
        })
    }

    /// The `version` the file states (`1.0`, `1.1.0`, …).
    pub fn version_str(&self) -> &str {
        &self.version
    }
    /// The `generator` the file states, if any.
    pub fn generator(&self) -> Option<&str> {
        self.generator.as_deref()
    }
    /// True when the file ends with the v1.1 footer magic.
    pub fn has_footer_magic(&self) -> bool {
        self.footer_magic
    }
    /// The components of tensor `name`, in part order.
    pub fn components(&self, name: &str) -> Option<&[Component]> {
        self.find(name).map(|i| self.components[i].as_slice())
    }

    /// Bytes between the magic, the components and the manifest must be zero (spec §2:
    /// "to prevent data leakage"). Returns a warning naming the first non-zero gap.
    fn nonzero_padding(&self) -> Option<String> {
        let mut spans: Vec<(u64, u64)> = self
            .components
            .iter()
            .flatten()
            .map(|c| (c.offset, c.offset.saturating_add(c.length)))
            .collect();
        spans.sort_unstable();
        spans.push((self.manifest_start, self.manifest_start));
        let mut at = MAGIC.len() as u64;
        let mut bad: Option<(u64, u64)> = None;
        let mut count = 0u64;
        for (start, end) in spans {
            if start > at {
                let gap = self.src.slice(at, start - at, "padding").ok()?;
                let n = gap.iter().filter(|&&b| b != 0).count() as u64;
                if n > 0 {
                    bad.get_or_insert((at, start));
                    count += n;
                }
            }
            at = at.max(end);
        }
        bad.map(|(a, b)| {
            format!(
                "{count} non-zero padding bytes outside the components (first gap {a}..{b}); the spec requires zero padding"
            )
        })
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.by_name
            .binary_search_by(|&i| self.infos[i].name.as_str().cmp(name))
            .ok()
            .map(|k| self.by_name[k])
    }

    fn position(&self, name: &str) -> Result<usize> {
        self.find(name).ok_or_else(|| Error::no_tensor(name))
    }

    /// The decoded bytes of one component from its `stored` bytes. `bound`: the exact
    /// decoded size when the manifest fixes it (dense data), else an upper bound.
    fn decode_component(
        &self,
        c: &Component,
        stored: Cow<'data, [u8]>,
        bound: u64,
        exact: bool,
    ) -> Result<Cow<'data, [u8]>> {
        match &c.encoding {
            Encoding::Raw => Ok(stored),
            Encoding::Zstd => {
                let cap = if exact {
                    bound
                } else {
                    bound
                        .min(self.limits.max_decoded_bytes)
                        .min(c.length.saturating_add(64).saturating_mul(ZSTD_MAX_RATIO))
                };
                let out = crate::util::zstd_decode_bounded(&stored, cap, exact)
                    .map_err(|e| e.at_offset(c.offset))?;
                Ok(Cow::Owned(out))
            }
            Encoding::Other(e) => Err(Error::unsupported(format!(
                "component {:?}: encoding {e:?} is not supported (raw, zstd)",
                c.role
            ))),
        }
    }

    /// Checks a component's stored digest over its `stored` bytes (the digests cover
    /// what is on disk, compressed or not). An unknown algorithm cannot be checked and
    /// is let through (it shows as "not checked" in `verify`); a malformed digest is an
    /// integrity failure.
    fn check_digest(c: &Component, stored: &[u8]) -> Result<()> {
        let Some(d) = &c.digest else { return Ok(()) };
        let fail = |layer: &str, detail: String| {
            Err(Error::integrity(format!(
                "component {:?}: {layer} mismatch: {detail}",
                c.role
            ))
            .at_offset(c.offset))
        };
        match raw::parse_digest(d) {
            ParsedDigest::Crc32c(want) => {
                let got = crate::util::crc32c(stored);
                if got != want {
                    return fail(
                        "crc32c",
                        format!("stored 0x{want:08X}, computed 0x{got:08X}"),
                    );
                }
            }
            ParsedDigest::Sha256(want) => {
                let got = crate::util::sha256(stored);
                if got != want {
                    return fail(
                        "sha256",
                        format!(
                            "stored {}, computed {}",
                            crate::util::hex(&want),
                            crate::util::hex(&got)
                        ),
                    );
                }
            }
            ParsedDigest::Bad { algorithm, reason } => {
                return Err(Error::integrity(format!(
                    "component {:?}: malformed {algorithm} digest: {reason}",
                    c.role
                )))
            }
            ParsedDigest::Unknown(_) => {}
        }
        Ok(())
    }

    /// Reads tensor `i`: every component's stored bytes in one batch of ranges, their
    /// digests checked (when `verify`, once per tensor: a tensor that passed is not
    /// hashed again) before anything is decoded, then decoded.
    fn read_view(&self, i: usize, verify: bool) -> Result<TensorView<'data>> {
        let info = &self.infos[i];
        let comps = &self.components[i];
        let numel = info.numel()?;
        let ranges: Vec<(u64, u64)> = comps.iter().map(|c| (c.offset, c.length)).collect();
        let stored = self.src.read_ranges(&ranges)?;
        if verify && (self.checked[i].get().is_none() || !self.src.rereads_same()) {
            for (c, s) in comps.iter().zip(&stored) {
                Self::check_digest(c, s)?;
            }
            let _ = self.checked[i].set(());
        }
        let mut parts = Vec::with_capacity(comps.len());
        for (c, stored) in comps.iter().zip(stored) {
            let (bound, exact) = decoded_bound(info, c, numel)?;
            let mut bytes = self.decode_component(c, stored, bound, exact)?;
            if is_index_role(&info.layout, &c.role) {
                if let Some(d) = c.dtype.filter(|d| *d != DType::U64) {
                    bytes = Cow::Owned(widen_to_u64(&bytes, d, &c.role)?);
                }
            }
            parts.push(Part {
                role: c.role.to_string(),
                bytes,
            });
        }
        let view = TensorView {
            info: info.clone(),
            parts,
        };
        view.validate()?;
        Ok(view)
    }
}

/// Components may not share bytes (empty ones aside): the spec lays them out one after
/// the other, and overlapping ranges would let a small file make `verify` hash (or a
/// reader decode) the same bytes over and over.
fn check_no_overlap(infos: &[TensorInfo], components: &[Vec<Component>]) -> Result<()> {
    let mut spans: Vec<(u64, u64, usize, usize)> = Vec::new();
    for (t, comps) in components.iter().enumerate() {
        for (k, c) in comps.iter().enumerate() {
            if c.length > 0 {
                // offset + length was checked for overflow already.
                spans.push((c.offset, c.offset.saturating_add(c.length), t, k));
            }
        }
    }
    spans.sort_unstable();
    for w in spans.windows(2) {
        let ((_, end, ta, ka), (start, _, tb, kb)) = (w[0], w[1]);
        if start < end {
            let name = |t: usize, k: usize| {
                format!(
                    "tensor {:?} component {:?}",
                    infos[t].name, components[t][k].role
                )
            };
            return Err(Error::malformed(format!(
                "{} overlaps {} at byte {start}",
                name(tb, kb),
                name(ta, ka)
            ))
            .at_offset(start));
        }
    }
    Ok(())
}

/// The decoded-size bound of a component (see the module docs).
fn decoded_bound(info: &TensorInfo, c: &Component, numel: u64) -> Result<(u64, bool)> {
    let esize = info.dtype.size() as u64;
    let ndim = info.shape.len() as u64;
    let idx = c.dtype.map_or(8, |d| d.size() as u64);
    let b = match (&info.layout, c.role.as_ref()) {
        (Layout::Dense, "data") => return Ok((info.dense_nbytes()?, true)),
        (Layout::SparseCsr, "indptr") => {
            return Ok((info.shape[0].saturating_add(1).saturating_mul(idx), true))
        }
        (Layout::SparseCsr | Layout::SparseCoo, "values") => numel.saturating_mul(esize),
        (Layout::SparseCsr, "indices") => numel.saturating_mul(idx),
        (Layout::SparseCoo, "coords") => numel.saturating_mul(ndim).saturating_mul(idx),
        _ => u64::MAX,
    };
    Ok((b, false))
}

/// Widens a v1.1 index component of another integer dtype to u64.
fn widen_to_u64(bytes: &[u8], d: DType, role: &str) -> Result<Vec<u8>> {
    let sz = d.size();
    if bytes.len() % sz != 0 {
        return Err(Error::malformed(format!(
            "{role}: {} bytes is not a whole number of {d}",
            bytes.len()
        )));
    }
    let n = bytes.len() / sz;
    let mut out = Vec::with_capacity(n * 8);
    for i in 0..n {
        let b = &bytes[i * sz..(i + 1) * sz];
        let mut w = [0u8; 8];
        w[..sz].copy_from_slice(b);
        let v = match d {
            DType::U8 | DType::U16 | DType::U32 => u64::from_le_bytes(w),
            DType::I8 | DType::I16 | DType::I32 | DType::I64 => {
                let shift = 64 - 8 * sz as u32;
                let s = (i64::from_le_bytes(w) << shift) >> shift;
                u64::try_from(s).map_err(|_| {
                    Error::malformed(format!("{role}: negative index {s} at position {i}"))
                })?
            }
            _ => {
                return Err(Error::malformed(format!(
                    "{role}: dtype {d} is not an integer"
                )))
            }
        };
        out.extend_from_slice(&v.to_le_bytes());
    }
    Ok(out)
}

impl TensorSource for ZtensorFile<'_> {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let i = self.position(name)?;
        self.read_view(i, self.verify).map_err(|e| {
            e.at_subject(format!("tensor {name:?}"))
                .in_format(Format::Ztensor)
        })
    }
    fn source_format(&self) -> Option<Format> {
        Some(Format::Ztensor)
    }
    fn raw_extent(&self, name: &str) -> Result<Option<crate::slice::RawExtent<'_>>> {
        let i = self.position(name)?;
        let info = &self.infos[i];
        let [c] = &self.components[i][..] else {
            return Ok(None);
        };
        if info.layout != Layout::Dense
            || c.role != "data"
            || !matches!(c.encoding, Encoding::Raw)
            || c.length != info.dense_nbytes()?
        {
            return Ok(None);
        }
        // A digest already matched over bytes that read the same again needs no
        // saying; otherwise a slice cannot check it.
        let checked = self.checked[i].get().is_some() && self.src.rereads_same();
        let whole_digests = match (&c.digest, self.verify && !checked) {
            (Some(d), true) => vec![d.split(':').next().unwrap_or(d).to_string()],
            _ => Vec::new(),
        };
        Ok(Some(crate::slice::RawExtent {
            src: self.src,
            offset: c.offset,
            big_endian: false,
            whole_digests,
            own_check: None,
        }))
    }
}

impl Container for ZtensorFile<'_> {
    fn format(&self) -> Format {
        Format::Ztensor
    }
    fn version(&self) -> String {
        self.version.clone()
    }
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport {
        let mut report = VerifyReport {
            warnings: self.warnings.clone(),
            ..VerifyReport::default()
        };
        if let Some(w) = self.nonzero_padding() {
            report.warnings.push(w);
        }
        for (i, info) in self.infos.iter().enumerate() {
            let comps = &self.components[i];
            let tensor = format!("tensor {:?}", info.name);
            let mut any_digest = false;
            for c in comps {
                let subject = if comps.len() == 1 {
                    tensor.clone()
                } else {
                    format!("{tensor} component {:?}", c.role)
                };
                let Some(d) = &c.digest else { continue };
                any_digest = true;
                let stored = match self.src.slice(c.offset, c.length, "component") {
                    Ok(s) => s,
                    Err(e) => {
                        report.failed(subject, "digest", e.to_string());
                        continue;
                    }
                };
                match raw::parse_digest(d) {
                    ParsedDigest::Crc32c(want) => report.compare(
                        subject,
                        "crc32c",
                        &format!("0x{want:08X}"),
                        &format!("0x{:08X}", crate::util::crc32c(&stored)),
                    ),
                    ParsedDigest::Sha256(want) => report.compare(
                        subject,
                        "sha256",
                        &crate::util::hex(&want),
                        &crate::util::hex(&crate::util::sha256(&stored)),
                    ),
                    ParsedDigest::Bad { algorithm, reason } => {
                        report.failed(subject, algorithm, format!("malformed digest: {reason}"))
                    }
                    ParsedDigest::Unknown(algo) => report.push(
                        subject,
                        algo.clone(),
                        Status::NotChecked,
                        Some(format!(
                            "digest algorithm {algo:?} is not one Tessera checks (crc32c, sha256)"
                        )),
                    ),
                }
            }
            if !any_digest {
                report.push(
                    tensor.clone(),
                    "digest",
                    Status::NotChecked,
                    Some("the file stores no digest for this tensor".into()),
                );
            }
            let needs_decode = comps.iter().any(|c| c.encoding != Encoding::Raw)
                || matches!(info.layout, Layout::SparseCsr | Layout::SparseCoo);
            if needs_decode {
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
            opts.advance(crate::verify::progress_bytes(info));
        }
        report
    }
}
