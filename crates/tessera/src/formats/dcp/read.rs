//! [`DcpCheckpoint`]: a DCP directory opened as one container. `.metadata` is read and
//! checked at open, with the non-tensor items (they are the metadata); a `.distcp` file
//! is opened when something in it is first read, and every range the metadata places in
//! it is checked against its size then. A tensor read allocates the dense tensor and
//! copies each chunk's elements into its box.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use super::meta::{Checkpoint, Stored, TensorMeta};
use crate::any::ReadOptions;
use crate::error::{Error, ErrorKind, Result};
use crate::format::Format;
use crate::formats::pytorch::pickle::{self, Graph, Id, Obj};
use crate::formats::pytorch::{self as pt, PytorchFile};
use crate::formats::SetFiles;
use crate::metadata::{Map, Metadata, Value};
use crate::model::{Container, TensorSource};
use crate::source::{ByteSource, SourceRef};
use crate::tensor::{ChunkInfo, TensorInfo, TensorView};
use crate::verify::{VerifyOptions, VerifyReport};

/// `length` bytes at `base` of another source, as a source of their own (an item's
/// `torch.save` archive inside a `.distcp`): read by range, never copied whole.
pub(super) struct Window<'a> {
    pub src: &'a dyn ByteSource,
    pub base: u64,
    pub len: u64,
}

impl ByteSource for Window<'_> {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        let end = offset.checked_add(len).filter(|&e| e <= self.len);
        if end.is_none() {
            return Err(crate::source::truncated(offset, len, self.len));
        }
        self.src.read_at(self.base + offset, len)
    }
    fn as_slice(&self) -> Option<&[u8]> {
        let s = self.src.as_slice()?;
        s.get(usize::try_from(self.base).ok()?..usize::try_from(self.base + self.len).ok()?)
    }
    fn kind(&self) -> &'static str {
        self.src.kind()
    }
}

/// A `.distcp` file, opened on first use.
struct DataFile {
    name: String,
    shown: String,
    src: OnceLock<Box<dyn ByteSource>>,
}

/// A DCP checkpoint opened.
pub struct DcpCheckpoint {
    label: String,
    cp: Checkpoint,
    files: Arc<dyn SetFiles>,
    data: Vec<DataFile>,
    by_file: HashMap<String, usize>,
    infos: Vec<TensorInfo>,
    by_name: HashMap<String, usize>,
    metadata: Metadata,
    opts: ReadOptions,
    warnings: Vec<String>,
}

/// Opens the checkpoint whose `.metadata` is `bytes` (the hook of
/// [`crate::formats::IndexedSet::open`]).
pub fn open(
    bytes: &[u8],
    label: &str,
    files: Arc<dyn SetFiles>,
    opts: &ReadOptions,
) -> Result<Box<dyn Container + 'static>> {
    let cp = super::meta::parse(bytes, &opts.limits).map_err(|e| e.in_format(Format::Dcp))?;
    let data: Vec<DataFile> = cp
        .files
        .iter()
        .map(|n| DataFile {
            name: n.clone(),
            shown: files.shown(n),
            src: OnceLock::new(),
        })
        .collect();
    let by_file = (cp.files.iter().enumerate())
        .map(|(i, n)| (n.clone(), i))
        .collect();
    let infos: Vec<TensorInfo> = cp
        .tensors
        .iter()
        .map(|t| TensorInfo::dense(t.name.clone(), t.dtype, t.shape.clone()))
        .collect();
    let by_name = (infos.iter().enumerate())
        .map(|(i, t)| (t.name.clone(), i))
        .collect();
    let mut o = opts.clone();
    o.path = None;
    let mut c = DcpCheckpoint {
        label: label.to_string(),
        cp,
        files,
        data,
        by_file,
        infos,
        by_name,
        metadata: Metadata::new(),
        opts: o,
        warnings: Vec::new(),
    };
    for i in 0..c.cp.items.len() {
        let item = c.cp.items[i].clone();
        let v = c.item_value(&item.name, &item.at)?;
        if c.by_name.contains_key(&item.name) {
            return Err(Error::malformed(format!(
                "{:?} is both a tensor and an item",
                item.name.escape_debug().to_string()
            ))
            .in_file(label.to_string()));
        }
        c.metadata.insert(item.name.clone(), v);
    }
    Ok(Box::new(c))
}

impl DcpCheckpoint {
    /// The data file `name`, opened (its ranges checked) on first use. A failure is not
    /// kept: the next read tries again.
    fn file(&self, name: &str) -> Result<&dyn ByteSource> {
        let &i = self.by_file.get(name).ok_or_else(|| {
            Error::malformed(format!("no file {name:?} is named by the metadata"))
        })?;
        let f = &self.data[i];
        if let Some(s) = f.src.get() {
            return Ok(&**s);
        }
        let src = self.files.beside(&f.name).map_err(|e| {
            let e = match e.kind() {
                ErrorKind::NotFound => Error::new(
                    ErrorKind::Io,
                    format!(
                        "{} is missing: the checkpoint's metadata stores items in it",
                        f.name
                    ),
                ),
                _ => e,
            };
            match e.to_string().contains(&f.shown) {
                true => e,
                false => e.in_file(f.shown.clone()),
            }
        })?;
        let len = src.len();
        let stored = self
            .cp
            .tensors
            .iter()
            .flat_map(|t| t.chunks.iter().map(move |c| (t.name.as_str(), &c.at)))
            .chain(self.cp.items.iter().map(|i| (i.name.as_str(), &i.at)));
        for (name, at) in stored.filter(|(_, at)| at.path == f.name) {
            if at.offset + at.length > len {
                return Err(Error::malformed(format!(
                    "the metadata places an item of {:?} at bytes [{}, {}), past the file's end at {len}",
                    name.escape_debug().to_string(),
                    at.offset,
                    at.offset + at.length
                ))
                .in_format(Format::Dcp)
                .in_file(f.shown.clone()));
            }
        }
        Ok(&**f.src.get_or_init(|| src))
    }

    /// The `torch.save` archive of the item at `at`, as a PyTorch checkpoint of its own.
    fn with_archive<T>(
        &self,
        at: &Stored,
        f: impl FnOnce(SourceRef<'_>) -> Result<T>,
    ) -> Result<T> {
        let src = self.file(&at.path)?;
        let w = Window {
            src,
            base: at.offset,
            len: at.length,
        };
        f(SourceRef::new(&w)).map_err(|e| {
            e.in_format(Format::Dcp)
                .in_file(self.data[self.by_file[&at.path]].shown.clone())
        })
    }

    /// A non-tensor item as a metadata value: plain Python data as is; any other object
    /// as its pickle's bytes (never executed), with a warning.
    fn item_value(&mut self, name: &str, at: &Stored) -> Result<Value> {
        let opts = self.opts.clone();
        let shown = name.escape_debug().to_string();
        let (pkl, graph) = self
            .with_archive(at, |s| {
                let records = pt::zip::records(s, &opts.limits)?;
                let mut pkls = records.iter().filter(|r| r.name.ends_with("/data.pkl"));
                let (Some(r), None) = (pkls.next(), pkls.next()) else {
                    return Err(Error::malformed(
                        "not a torch.save archive: no single <archive>/data.pkl record",
                    ));
                };
                opts.limits.check_index(r.size)?;
                let bytes = pt::zip::content(s, r)?.into_owned();
                if opts.verify {
                    pt::zip::check_crc(r, &bytes)?;
                }
                let g = match pickle::load(&bytes, 0, &opts.limits, &r.name) {
                    Ok((g, _)) => Some(g),
                    Err(e) if e.kind() == ErrorKind::Unsupported => None,
                    Err(e) => return Err(e),
                };
                Ok((bytes, g))
            })
            .map_err(|e| e.at_subject(format!("item {shown:?}")))?;
        match graph.and_then(|g| plain(&g, g.root, 0, &opts.limits)) {
            Some(v) => Ok(v),
            None => {
                self.warnings.push(format!(
                    "item {shown:?} is a Python object the allow-list does not read: kept as its pickle's {} bytes, not executed",
                    pkl.len()
                ));
                Ok(Value::Bytes(pkl))
            }
        }
    }

    /// Chunk `c` of `t`: its archive's one tensor, checked against the chunk, its
    /// elements copied into their box of `buf` (the dense tensor) straight from the
    /// archive's bytes (borrowed from the file's map when it is one: no copy between).
    fn place_chunk(&self, t: &TensorMeta, c: usize, buf: &mut [u8]) -> Result<()> {
        let ch = &t.chunks[c];
        let opts = &self.opts;
        self.with_archive(&ch.at, |s| {
            let parts = pt::open_zip(s, opts)?;
            let file = PytorchFile::assemble(parts, opts)?;
            let infos = file.tensor_infos();
            if infos.len() != 1 {
                return Err(Error::malformed(format!(
                    "the chunk's archive holds {} tensors, not one",
                    infos.len()
                )));
            }
            let info = &infos[0];
            if info.dtype != t.dtype || info.shape != ch.sizes {
                return Err(Error::malformed(format!(
                    "the chunk at offsets {:?} holds {} {:?} where the metadata says {} {:?}",
                    ch.offsets, info.dtype, info.shape, t.dtype, ch.sizes
                )));
            }
            let name = info.name.clone();
            let v = file.tensor(&name)?;
            let es = t.dtype.size();
            place(buf, &t.shape, &ch.offsets, &ch.sizes, v.data()?, es);
            Ok(())
        })
        .map_err(|e| e.at_subject(format!("tensor {:?}", t.name.escape_debug().to_string())))
    }

    /// The tensor `t` assembled from its chunks.
    fn assemble(&self, i: usize) -> Result<Vec<u8>> {
        let t = &self.cp.tensors[i];
        let es = t.dtype.size() as u64;
        // Every chunk is read from an archive at least as long as its elements, so the
        // tensor's size is bounded by the files' bytes, checked before allocating.
        let mut stored = 0u64;
        for ch in &t.chunks {
            let n = ch.sizes.iter().product::<u64>() * es;
            if n > ch.at.length {
                return Err(Error::malformed(format!(
                    "the chunk at offsets {:?} needs {n} bytes, its item has {}",
                    ch.offsets, ch.at.length
                ))
                .at_subject(format!("tensor {:?}", t.name.escape_debug().to_string())));
            }
            stored = stored.saturating_add(ch.at.length);
        }
        let nbytes = crate::tensor::dense_nbytes(t.dtype, &t.shape)?;
        if nbytes > stored {
            return Err(Error::malformed("the chunks are smaller than the tensor"));
        }
        let mut buf = vec![0u8; nbytes as usize];
        for c in 0..t.chunks.len() {
            let ch = &t.chunks[c];
            if ch.sizes.contains(&0) {
                continue;
            }
            self.place_chunk(t, c, &mut buf)?;
        }
        Ok(buf)
    }

    /// Each chunk's archive checked as a PyTorch file (its records' CRC-32s), whatever
    /// the read options say.
    fn check_archives(&self, t: &TensorMeta) -> Result<()> {
        for ch in t.chunks.iter().filter(|c| !c.sizes.contains(&0)) {
            self.with_archive(&ch.at, |s| {
                let f = PytorchFile::assemble(pt::open_zip(s, &self.opts)?, &self.opts)?;
                let report = f.verify(&VerifyOptions::default());
                let first = report
                    .failures()
                    .next()
                    .map(|c| format!("{} {}", c.layer, c.detail.as_deref().unwrap_or("failed")));
                match first {
                    Some(c) => Err(Error::integrity(format!(
                        "the chunk at offsets {:?}: {c}",
                        ch.offsets
                    ))),
                    None => Ok(()),
                }
            })?;
        }
        Ok(())
    }

    /// The checkpoint's `.metadata` path or URL.
    pub fn label(&self) -> &str {
        &self.label
    }
}

/// Copies a chunk's row-major elements `src` into their box (`off`, `sizes`) of the
/// row-major tensor `dst` of `shape`: runs as long as the chunk's trailing dimensions
/// cover the tensor's (whole rows for a row shard, a column block's rows otherwise).
pub fn place(dst: &mut [u8], shape: &[u64], off: &[u64], sizes: &[u64], src: &[u8], es: usize) {
    let n = shape.len();
    if n == 0 {
        dst.copy_from_slice(&src[..es]);
        return;
    }
    let mut k = n - 1;
    while k > 0 && sizes[k] == shape[k] {
        k -= 1;
    }
    let mut stride = vec![1u64; n];
    for d in (0..n - 1).rev() {
        stride[d] = stride[d + 1] * shape[d + 1];
    }
    let run = (sizes[k] * stride[k]) as usize * es;
    let outer: u64 = sizes[..k].iter().product();
    let mut idx = vec![0u64; k];
    let mut s_at = 0usize;
    for _ in 0..outer {
        let mut e = off[k] * stride[k];
        for d in 0..k {
            e += (off[d] + idx[d]) * stride[d];
        }
        let at = e as usize * es;
        dst[at..at + run].copy_from_slice(&src[s_at..s_at + run]);
        s_at += run;
        for d in (0..k).rev() {
            idx[d] += 1;
            if idx[d] < sizes[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// Plain Python data (None, bool, int, float, str, bytes, and lists, tuples and dicts
/// with str keys of those) as a metadata value; `None` for anything else.
fn plain(g: &Graph, id: Id, depth: usize, limits: &crate::limits::Limits) -> Option<Value> {
    if depth > limits.max_depth {
        return None;
    }
    Some(match g.get(id) {
        Obj::None => Value::Null,
        Obj::Bool(b) => Value::Bool(*b),
        Obj::Int(i) => Value::Int(*i),
        Obj::Float(f) => Value::Float(*f),
        Obj::Str(s) => Value::Str(s.clone()),
        Obj::Bytes(b) => Value::Bytes(b.clone()),
        Obj::List(l) | Obj::Tuple(l) => Value::List(
            l.iter()
                .map(|&c| plain(g, c, depth + 1, limits))
                .collect::<Option<_>>()?,
        ),
        Obj::Dict(d) => {
            let mut m = Map::new();
            for (k, v) in d {
                let Obj::Str(k) = g.get(*k) else { return None };
                m.insert(k.clone(), plain(g, *v, depth + 1, limits)?);
            }
            Value::Map(m)
        }
        _ => return None,
    })
}

impl TensorSource for DcpCheckpoint {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let i = crate::model::tensor_position(&self.by_name, name)?;
        let buf = self.assemble(i)?;
        TensorView::dense(self.infos[i].clone(), Cow::Owned(buf))
    }
    fn chunks(&self) -> &[ChunkInfo] {
        &[]
    }
    fn chunk(&self, name: &str) -> Result<Cow<'_, [u8]>> {
        Err(Error::not_found(format!(
            "no chunk named {name:?} (a DCP checkpoint lists tensors and items)"
        )))
    }
    fn source_format(&self) -> Option<Format> {
        Some(Format::Dcp)
    }
}

impl Container for DcpCheckpoint {
    fn format(&self) -> Format {
        Format::Dcp
    }
    fn version(&self) -> String {
        format!(
            "{}, {} data file{}",
            self.cp
                .version
                .as_deref()
                .unwrap_or("unversioned")
                .escape_debug(),
            self.cp.files.len(),
            if self.cp.files.len() == 1 { "" } else { "s" }
        )
    }
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport {
        let mut r = VerifyReport::default();
        r.warnings.extend(self.warnings.iter().cloned());
        let narrow = !opts.tensors.is_empty();
        if !narrow {
            for f in &self.data {
                match self.file(&f.name) {
                    Ok(_) => r.ok(&f.name, "present, items in bounds"),
                    Err(e) => r.failed(&f.name, "present, items in bounds", e.to_string()),
                }
            }
        }
        for (i, t) in self.cp.tensors.iter().enumerate() {
            if narrow && !opts.tensors.contains(&t.name) {
                continue;
            }
            let subject = format!("tensor {:?}", t.name);
            let layer = "chunks (zip CRC-32, shapes, tiling)";
            match self.check_archives(t).and_then(|_| self.assemble(i)) {
                Ok(_) => r.ok(subject, layer),
                Err(e) => r.failed(subject, layer, e.to_string()),
            }
        }
        for name in &opts.tensors {
            if !self.by_name.contains_key(name) {
                r.failed(
                    format!("tensor {name:?}"),
                    "lookup",
                    format!("no tensor named {name:?}"),
                );
            }
        }
        r
    }
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}
