//! Page manifests: a BLAKE3 digest per fixed-size page of every tensor's bytes, so a
//! reader that loads a slice of a tensor (a rank's rows, one expert) checks just the
//! pages it touches, without reading the rest of the tensor.
//!
//! A whole-tensor digest (safetensors has none; zTensor, AERO's IHSH, GGUF-in-Tessera
//! sets, the content identity) can only be checked by reading the whole tensor; a page
//! manifest makes a partial read verifiable. Like the content identity
//! ([`crate::identity`]) it is computed from what readers hand out — the canonical
//! (little-endian, row-major, decoded) bytes — so one manifest serves every format and
//! conversion of the model.
//!
//! # The file (`tessera-pages/1`, JSON; `tessera id --pages 1M MODEL -o MODEL.pages`)
//!
//! ```json
//! {
//!   "type": "tessera-pages/1",
//!   "id": "blake3:…",
//!   "page_size": 1048576,
//!   "tensors": [
//!     {"name": "w", "dtype": "f32", "shape": [1024, 1024], "layout": "dense",
//!      "bytes": 4194304, "digest": "blake3:…", "pages": ["<64 hex>", …]}
//!   ]
//! }
//! ```
//!
//! - `id` is the model's content identity (tensors only, `tessera-id/1`), and each
//!   entry's `digest` its tensor digest: a manifest names the model it belongs to, and
//!   `id` must equal the identity recomputed from the entries.
//! - A tensor's bytes are its parts concatenated in the order the identity hashes them
//!   (by role name; a dense tensor has one part, `data`). Page *i* covers bytes
//!   `[i·page_size, min((i+1)·page_size, bytes))`; its digest is the plain BLAKE3 of
//!   those bytes, so any BLAKE3 tool can recompute one. A tensor of `bytes` bytes has
//!   exactly ⌈bytes / page_size⌉ pages.
//! - `page_size` is a power of two from 4 KiB to 1 GiB. Entries are in name order,
//!   names unique.
//!
//! The manifest is trusted as given: `tessera sign MODEL --pages MODEL.pages` puts its
//! digest ([`PageManifest::digest`]: BLAKE3 of the compact re-encoding) in the signed
//! manifest, so a verified signature covers every page.

use std::collections::HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::identity::{self, Digest, TensorId};
use crate::model::TensorSource;
use crate::tensor::TensorView;
use crate::verify::VerifyReport;

/// The `type` of a page manifest.
pub const TYPE: &str = "tessera-pages/1";
/// The layer name in verify reports.
pub const LAYER: &str = "pages";
/// Page manifests larger than this are refused before parsing (a 1 TiB model in 4 KiB
/// pages would need more; such a model takes larger pages).
pub const MAX_FILE: u64 = 1 << 30;
/// The smallest page size.
pub const MIN_PAGE: u64 = 4 << 10;
/// The largest page size.
pub const MAX_PAGE: u64 = 1 << 30;
/// The page size `tessera id --pages` takes when given none.
pub const DEFAULT_PAGE: u64 = 1 << 20;

/// One tensor's pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorPages {
    /// The tensor's entry in the content identity.
    pub id: TensorId,
    /// Its byte count (the parts together).
    pub bytes: u64,
    /// One digest per page.
    pub pages: Vec<Digest>,
}

/// A page manifest (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageManifest {
    /// The page size.
    pub page_size: u64,
    /// The content identity (tensors only).
    pub id: Digest,
    /// The tensors, in name order.
    pub tensors: Vec<TensorPages>,
    index: HashMap<String, usize>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    #[serde(rename = "type")]
    kind: String,
    id: String,
    page_size: u64,
    tensors: Vec<EntryDoc>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryDoc {
    name: String,
    dtype: String,
    shape: Vec<u64>,
    layout: String,
    bytes: u64,
    digest: String,
    pages: Vec<String>,
}

/// Checks a page size.
pub fn check_page_size(page_size: u64) -> Result<()> {
    if !(MIN_PAGE..=MAX_PAGE).contains(&page_size) || !page_size.is_power_of_two() {
        return Err(Error::invalid_input(format!(
            "page size {page_size}: must be a power of two from 4 KiB to 1 GiB"
        )));
    }
    Ok(())
}

/// The number of pages of `bytes` bytes.
fn page_count(bytes: u64, page_size: u64) -> u64 {
    bytes.div_ceil(page_size)
}

/// The page digests of a tensor's bytes (its parts in the identity's role order).
fn page_digests(view: &TensorView<'_>, page_size: u64) -> Vec<Digest> {
    use rayon::prelude::*;
    let mut parts: Vec<_> = view.parts.iter().collect();
    parts.sort_by(|a, b| a.role.as_bytes().cmp(b.role.as_bytes()));
    let page = page_size as usize;
    let mut pages = Vec::with_capacity(page_count(view.nbytes(), page_size) as usize);
    let mut carry: Vec<u8> = Vec::new();
    for p in parts {
        let mut bytes: &[u8] = &p.bytes;
        if !carry.is_empty() {
            let take = (page - carry.len()).min(bytes.len());
            carry.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if carry.len() == page {
                pages.push(Digest(*blake3::hash(&carry).as_bytes()));
                carry.clear();
            }
        }
        let whole = bytes.len() / page * page;
        // Pages hash on every core: one page is one task.
        let mut hashed: Vec<Digest> = bytes[..whole]
            .par_chunks(page)
            .map(|c| Digest(*blake3::hash(c).as_bytes()))
            .collect();
        pages.append(&mut hashed);
        carry.extend_from_slice(&bytes[whole..]);
    }
    if !carry.is_empty() {
        pages.push(Digest(*blake3::hash(&carry).as_bytes()));
    }
    pages
}

/// Hashes one tensor: its identity digest and its pages.
fn tensor_pages(view: &TensorView<'_>, page_size: u64) -> TensorPages {
    let info = &view.info;
    TensorPages {
        id: TensorId {
            name: info.name.clone(),
            dtype: info.dtype.name().to_string(),
            shape: info.shape.clone(),
            layout: info.layout.name().to_string(),
            digest: identity::tensor_digest(view),
        },
        bytes: view.nbytes(),
        pages: page_digests(view, page_size),
    }
}

impl PageManifest {
    /// Computes the manifest of every tensor in `src`, reading each tensor once (the
    /// identity and the pages in one pass); `progress` gets each tensor's byte count.
    pub fn compute(
        src: &dyn TensorSource,
        page_size: u64,
        progress: &mut dyn FnMut(u64),
    ) -> Result<PageManifest> {
        check_page_size(page_size)?;
        let mut tensors = Vec::with_capacity(src.tensor_infos().len());
        for info in src.tensor_infos() {
            src.interrupted()?;
            let view = src.tensor(&info.name)?;
            tensors.push(tensor_pages(&view, page_size));
            progress(view.nbytes());
        }
        tensors.sort_by(|a, b| a.id.name.as_bytes().cmp(b.id.name.as_bytes()));
        Self::assemble(page_size, tensors)
    }

    fn assemble(page_size: u64, tensors: Vec<TensorPages>) -> Result<PageManifest> {
        let ids: Vec<TensorId> = tensors.iter().map(|t| t.id.clone()).collect();
        let id = identity::identity(&ids, None);
        let mut index = HashMap::with_capacity(tensors.len());
        for (i, t) in tensors.iter().enumerate() {
            if index.insert(t.id.name.clone(), i).is_some() {
                return Err(Error::invalid_input(format!(
                    "page manifest: tensor {:?} is listed twice",
                    t.id.name
                )));
            }
        }
        Ok(PageManifest {
            page_size,
            id,
            tensors,
            index,
        })
    }

    /// The tensor's pages, if the manifest lists it.
    pub fn get(&self, name: &str) -> Option<&TensorPages> {
        self.index.get(name).map(|&i| &self.tensors[i])
    }

    /// The JSON text (pretty).
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(&self.doc())
            .map_err(|e| Error::invalid_input(format!("page manifest: {e}")))
    }

    /// The digest that a signed manifest records: BLAKE3 of `"tessera-pages/1\0"` and
    /// the compact re-encoding (so whitespace added by another tool does not matter).
    pub fn digest(&self) -> Digest {
        // Strings, integers and lists of them: encoding cannot fail; were it to, the
        // digest would cover nothing and match no signed one.
        let compact = serde_json::to_vec(&self.doc()).unwrap_or_default();
        let mut h = blake3::Hasher::new();
        h.update(TYPE.as_bytes());
        h.update(&[0]);
        h.update(&compact);
        Digest(*h.finalize().as_bytes())
    }

    fn doc(&self) -> FileDoc {
        FileDoc {
            kind: TYPE.to_string(),
            id: self.id.to_prefixed(),
            page_size: self.page_size,
            tensors: self
                .tensors
                .iter()
                .map(|t| EntryDoc {
                    name: t.id.name.clone(),
                    dtype: t.id.dtype.clone(),
                    shape: t.id.shape.clone(),
                    layout: t.id.layout.clone(),
                    bytes: t.bytes,
                    digest: t.id.digest.to_prefixed(),
                    pages: t.pages.iter().map(|d| crate::util::hex(&d.0)).collect(),
                })
                .collect(),
        }
    }

    /// Parses and checks a manifest: its type, page size, every digest, each tensor's
    /// page count against its byte count, names unique and in order, and `id` against
    /// the identity of its entries. `what` names the file in errors.
    pub fn parse(bytes: &[u8], what: &str) -> Result<PageManifest> {
        let bad = |m: String| Error::invalid_input(format!("{what}: {m}"));
        if bytes.len() as u64 > MAX_FILE {
            return Err(bad(format!(
                "{} bytes, more than a page manifest may have ({MAX_FILE})",
                bytes.len()
            )));
        }
        let doc: FileDoc =
            serde_json::from_slice(bytes).map_err(|e| bad(format!("not a page manifest: {e}")))?;
        if doc.kind != TYPE {
            return Err(bad(format!("type {:?}, expected {TYPE:?}", doc.kind)));
        }
        check_page_size(doc.page_size).map_err(|e| bad(e.to_string()))?;
        let mut tensors = Vec::with_capacity(doc.tensors.len());
        let mut previous: Option<String> = None;
        for e in doc.tensors {
            let shown = &e.name;
            if let Some(p) = &previous {
                if p.as_bytes() >= e.name.as_bytes() {
                    return Err(bad(format!(
                        "tensor {shown:?} is out of name order or listed twice"
                    )));
                }
            }
            let digest = Digest::parse(&e.digest)
                .ok_or_else(|| bad(format!("tensor {shown:?}: digest is not blake3:<64 hex>")))?;
            let want = page_count(e.bytes, doc.page_size);
            if e.pages.len() as u64 != want {
                return Err(bad(format!(
                    "tensor {shown:?}: {} pages listed, {want} expected for {} bytes in pages of {}",
                    e.pages.len(),
                    e.bytes,
                    doc.page_size
                )));
            }
            let mut pages = Vec::with_capacity(e.pages.len());
            for (i, p) in e.pages.iter().enumerate() {
                pages.push(
                    Digest::parse(p)
                        .filter(|_| !p.starts_with("blake3:"))
                        .ok_or_else(|| {
                            bad(format!("tensor {shown:?}: page {i} is not 64 hex digits"))
                        })?,
                );
            }
            previous = Some(e.name.clone());
            tensors.push(TensorPages {
                id: TensorId {
                    name: e.name,
                    dtype: e.dtype,
                    shape: e.shape,
                    layout: e.layout,
                    digest,
                },
                bytes: e.bytes,
                pages,
            });
        }
        let stated =
            Digest::parse(&doc.id).ok_or_else(|| bad("id is not blake3:<64 hex>".into()))?;
        let m = Self::assemble(doc.page_size, tensors).map_err(|e| bad(e.to_string()))?;
        if m.id != stated {
            return Err(bad(format!(
                "id {stated} does not match its tensor entries ({}): the manifest was altered",
                m.id
            )));
        }
        Ok(m)
    }

    /// Reads a manifest from a local path or (with the `remote` feature) a URL.
    pub fn load(path_or_url: &str) -> Result<PageManifest> {
        let bytes = read_bounded(path_or_url)?;
        Self::parse(&bytes, path_or_url)
    }

    /// Checks that `src`'s tensors are the ones this manifest describes: every tensor of
    /// `src` listed with the same dtype, shape, layout and byte count. A manifest for
    /// another model (or another version of it) fails here, naming the first tensor
    /// that differs, before any page is read.
    pub fn matches(&self, src: &dyn TensorSource) -> Result<()> {
        for info in src.tensor_infos() {
            let shown = &info.name;
            let Some(t) = self.get(&info.name) else {
                return Err(Error::invalid_input(format!(
                    "tensor {shown:?} is not in the page manifest (it describes another model)"
                )));
            };
            let differs = t.id.dtype != info.dtype.name()
                || t.id.shape != info.shape
                || t.id.layout != info.layout.name();
            if differs {
                return Err(Error::invalid_input(format!(
                    "tensor {shown:?}: the page manifest says {} {:?} {}, the file {} {:?} {} \
                     (it describes another model)",
                    t.id.dtype,
                    t.id.shape,
                    t.id.layout,
                    info.dtype.name(),
                    info.shape,
                    info.layout.name()
                )));
            }
        }
        Ok(())
    }

    /// Widens a byte range of a tensor to whole pages (clamped to the tensor's end).
    /// Identity when the manifest does not list the tensor ([`PageManifest::check`]
    /// then refuses it).
    pub fn widen(&self, tensor: &str, range: Range<u64>) -> Range<u64> {
        match self.get(tensor) {
            None => range,
            Some(t) => {
                let start = range.start / self.page_size * self.page_size;
                let end = range
                    .end
                    .div_ceil(self.page_size)
                    .saturating_mul(self.page_size)
                    .min(t.bytes);
                start.min(end)..end
            }
        }
    }

    /// Checks `bytes`, the tensor's bytes at `range` (widened by [`Self::widen`]: it
    /// must start on a page and end on one or at the tensor's end). The error names the
    /// tensor and the first page that does not match.
    pub fn check(&self, tensor: &str, range: Range<u64>, bytes: &[u8]) -> Result<()> {
        let shown = tensor;
        let t = self.get(tensor).ok_or_else(|| {
            Error::invalid_input(format!(
                "tensor {shown:?} is not in the page manifest: its bytes cannot be checked"
            ))
        })?;
        let ps = self.page_size;
        let aligned = range.start % ps == 0
            && range.end <= t.bytes
            && (range.end % ps == 0 || range.end == t.bytes)
            && range.start <= range.end
            && bytes.len() as u64 == range.end - range.start;
        if !aligned {
            return Err(Error::invalid_input(format!(
                "tensor {shown:?}: bytes {}..{} ({} given) are not whole pages of {ps} \
                 within its {} bytes",
                range.start,
                range.end,
                bytes.len(),
                t.bytes
            )));
        }
        let first = range.start / ps;
        let failed = bytes
            .chunks(ps as usize)
            .enumerate()
            .find(|(i, c)| Digest(*blake3::hash(c).as_bytes()) != t.pages[first as usize + i]);
        if let Some((i, _)) = failed {
            let page = first + i as u64;
            let start = page * ps;
            return Err(Error::integrity(format!(
                "tensor {shown:?}: page {page} (bytes {start}..{}) does not match the page \
                 manifest: the bytes read are damaged",
                (start + ps).min(t.bytes)
            )));
        }
        Ok(())
    }

    /// Checks every page of every tensor `src` holds (reading each tensor once), one
    /// check per tensor; tensors of the manifest missing from `src` fail too.
    pub fn verify(&self, src: &dyn TensorSource, report: &mut VerifyReport) {
        if let Err(e) = self.matches(src) {
            report.failed("page manifest", LAYER, e.to_string());
            return;
        }
        for info in src.tensor_infos() {
            let subject = format!("tensor {:?}", info.name);
            let view = match src.tensor(&info.name) {
                Ok(v) => v,
                Err(e) => {
                    report.failed(&subject, LAYER, e.to_string());
                    continue;
                }
            };
            let Some(want) = self.get(&info.name) else {
                report.failed(&subject, LAYER, "not in the page manifest");
                continue;
            };
            // Only the pages: the tensor digest is not what this checks.
            let got = page_digests(&view, self.page_size);
            if view.nbytes() != want.bytes {
                report.failed(
                    &subject,
                    LAYER,
                    format!("{} bytes, the manifest says {}", view.nbytes(), want.bytes),
                );
            } else if let Some(i) = (0..got.len()).find(|&i| got[i] != want.pages[i]) {
                report.failed(
                    &subject,
                    LAYER,
                    format!("page {i} does not match the page manifest"),
                );
            } else {
                report.push(
                    &subject,
                    LAYER,
                    crate::verify::Status::Ok,
                    Some(format!("{} pages", got.len())),
                );
            }
        }
        let held: std::collections::HashSet<&str> =
            src.tensor_infos().iter().map(|i| i.name.as_str()).collect();
        for t in &self.tensors {
            if !held.contains(t.id.name.as_str()) {
                report.failed(
                    format!("tensor {:?}", t.id.name),
                    LAYER,
                    "in the page manifest but not in the file".to_string(),
                );
            }
        }
    }
}

impl crate::slice::RangeCheck for PageManifest {
    fn widen(&self, tensor: &str, range: Range<u64>) -> Range<u64> {
        PageManifest::widen(self, tensor, range)
    }
    fn check(&self, tensor: &str, range: Range<u64>, bytes: &[u8]) -> Result<()> {
        PageManifest::check(self, tensor, range, bytes)
    }
}

/// The page manifest a slice read of `model` (a path or URL) is checked against:
/// `given` when set (read, and refused when it does not describe `src`), else
/// `STEM.pages` beside the model when there is one (found as AERO finds its PHSH: by
/// name; a remote one costs one request), else none. A manifest found beside the model
/// that describes another model is an error too: it was put there to be used.
pub fn for_model(
    src: &dyn TensorSource,
    model: Option<&str>,
    given: Option<&str>,
) -> Result<Option<PageManifest>> {
    let path = match (given, model.and_then(beside)) {
        (Some(g), _) => g.to_string(),
        (None, Some(b)) => {
            if !exists(&b)? {
                return Ok(None);
            }
            b
        }
        (None, None) => return Ok(None),
    };
    let m = PageManifest::load(&path)?;
    m.matches(src)
        .map_err(|e| Error::invalid_input(format!("{path}: {}", e.message())))?;
    Ok(Some(m))
}

/// Whether a local path or URL names an existing file.
fn exists(path_or_url: &str) -> Result<bool> {
    #[cfg(feature = "remote")]
    if let loc @ (crate::remote::Location::S3 { .. } | crate::remote::Location::Http(_)) =
        crate::remote::Location::parse(path_or_url)?
    {
        return crate::remote::exists(&loc, &Default::default());
    }
    if path_or_url.contains("://") && !path_or_url.starts_with("file://") {
        return Ok(false);
    }
    let p = path_or_url.strip_prefix("file://").unwrap_or(path_or_url);
    Ok(std::path::Path::new(p).is_file())
}

/// The page manifest beside a model: `DIR/STEM.pages` for `DIR/STEM.EXT` (for a URL,
/// the same name beside it). `None` when the path has no file name.
pub fn beside(path_or_url: &str) -> Option<String> {
    let (dir, name) = match path_or_url.rfind('/') {
        Some(i) => (&path_or_url[..=i], &path_or_url[i + 1..]),
        None => ("", path_or_url),
    };
    if name.is_empty() {
        return None;
    }
    let stem = match name.rfind('.') {
        Some(0) | None => name,
        Some(i) => &name[..i],
    };
    Some(format!("{dir}{stem}.pages"))
}

/// Reads a small file (local or remote), refusing one larger than [`MAX_FILE`].
fn read_bounded(path_or_url: &str) -> Result<Vec<u8>> {
    #[cfg(feature = "remote")]
    if let loc @ (crate::remote::Location::S3 { .. } | crate::remote::Location::Http(_)) =
        crate::remote::Location::parse(path_or_url)?
    {
        let src = crate::remote::RemoteSource::open(&loc, &Default::default())?;
        let len = crate::source::ByteSource::len(&src);
        if len > MAX_FILE {
            return Err(Error::invalid_input(format!(
                "{path_or_url}: {len} bytes, more than a page manifest may have ({MAX_FILE})"
            )));
        }
        return Ok(crate::source::ByteSource::read_at(&src, 0, len)?.into_owned());
    }
    let path = std::path::Path::new(path_or_url);
    let meta =
        std::fs::metadata(path).map_err(|e| Error::from(e).in_file(path.display().to_string()))?;
    if meta.len() > MAX_FILE {
        return Err(Error::invalid_input(format!(
            "{}: {} bytes, more than a page manifest may have ({MAX_FILE})",
            path.display(),
            meta.len()
        )));
    }
    std::fs::read(path).map_err(|e| Error::from(e).in_file(path.display().to_string()))
}
