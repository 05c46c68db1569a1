//! [`PytorchFile`]: an opened checkpoint (zip or legacy), its tensors as strided views
//! of storages, read by range when asked.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;

use super::pickle::TensorRef;
use super::tree::Flat;
use super::zip::{self, Method, Record};
use crate::any::ReadOptions;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::limits::Limits;
use crate::metadata::Metadata;
use crate::model::{Container, TensorSource};
use crate::source::SourceRef;
use crate::tensor::{Storage, TensorInfo, TensorView};
use crate::verify::{Status, VerifyOptions, VerifyReport};

/// Where a storage's bytes are.
#[derive(Debug, Clone)]
pub enum Loc {
    /// A zip record (index into the records).
    Record(usize),
    /// Raw bytes at this absolute offset (legacy format).
    Raw(u64),
}

/// One storage: `numel` elements of `dtype`.
#[derive(Debug, Clone)]
pub struct StorageLoc {
    /// The key the pickle names it by.
    pub key: String,
    /// Element type.
    pub dtype: DType,
    /// Elements.
    pub numel: u64,
    /// Where the bytes are.
    pub loc: Loc,
}

/// One tensor: a strided view of storage `storage`, its first element at byte `base`
/// of the storage, `size` and `stride` counted in elements of `es` bytes (torch's: a
/// `float4_e2m1fn_x2` element is one byte holding two values).
#[derive(Debug, Clone)]
struct Entry {
    storage: usize,
    base: u64,
    size: Vec<u64>,
    stride: Vec<u64>,
    es: u64,
    /// The bytes swapped together in a big-endian file (a complex number's parts).
    swap: usize,
    contiguous: bool,
}

/// An opened PyTorch checkpoint.
#[derive(Debug)]
pub struct PytorchFile<'d> {
    src: SourceRef<'d>,
    version: String,
    big_endian: bool,
    records: Vec<Record>,
    storages: Vec<StorageLoc>,
    entries: Vec<Entry>,
    infos: Vec<TensorInfo>,
    index: HashMap<String, usize>,
    metadata: Metadata,
    warnings: Vec<String>,
    verify: bool,
    /// Per storage: set once its record's CRC-32 matched.
    checked: Vec<OnceLock<()>>,
}

/// The parts of a checkpoint a container format found; [`PytorchFile::assemble`] turns
/// them into tensors.
pub struct Parts<'d> {
    pub src: SourceRef<'d>,
    pub version: String,
    pub big_endian: bool,
    pub records: Vec<Record>,
    pub storages: Vec<StorageLoc>,
    pub flat: Flat,
    pub warnings: Vec<String>,
}

fn contiguous(size: &[u64], stride: &[u64]) -> bool {
    if size.contains(&0) {
        return true;
    }
    let mut want = 1u64;
    for (&n, &s) in size.iter().zip(stride).rev() {
        if n != 1 && s != want {
            return false;
        }
        want = want.saturating_mul(n);
    }
    true
}

/// The last element a view touches, relative to its first (`None` when it has none).
fn last_element(size: &[u64], stride: &[u64]) -> Result<Option<u64>> {
    if size.contains(&0) {
        return Ok(None);
    }
    let mut last = 0u64;
    for (&n, &s) in size.iter().zip(stride) {
        last = (n - 1)
            .checked_mul(s)
            .and_then(|x| x.checked_add(last))
            .ok_or_else(|| Error::malformed("size × stride overflows"))?;
    }
    Ok(Some(last))
}

impl<'d> PytorchFile<'d> {
    /// Checks every tensor's view against its storage and indexes them.
    pub fn assemble(p: Parts<'d>, opts: &ReadOptions) -> Result<PytorchFile<'d>> {
        let limits = &opts.limits;
        let by_key: HashMap<&str, usize> = p
            .storages
            .iter()
            .enumerate()
            .map(|(i, s)| (s.key.as_str(), i))
            .collect();
        let mut warnings = p.warnings.clone();
        let (mut entries, mut infos) = (Vec::new(), Vec::new());
        let mut index = HashMap::new();
        limits.check_entries(p.flat.tensors.len() as u64)?;
        for (name, t) in &p.flat.tensors {
            let (e, info) = entry(&p, &by_key, name, t, limits)
                .map_err(|e| e.at_subject(format!("tensor {name:?}")))?;
            if !e.contiguous {
                warnings.push(format!(
                    "tensor {name:?} has strides {:?} for shape {:?} (not contiguous): it is \
                     read as a contiguous copy",
                    e.stride, e.size
                ));
            }
            index.insert(name.clone(), infos.len());
            entries.push(e);
            infos.push(info);
        }
        warnings.extend(shared(&entries, &infos));
        Ok(PytorchFile {
            src: p.src,
            version: p.version,
            big_endian: p.big_endian,
            records: p.records,
            checked: (0..p.storages.len()).map(|_| OnceLock::new()).collect(),
            storages: p.storages,
            entries,
            infos,
            index,
            metadata: p.flat.metadata,
            warnings,
            verify: opts.verify,
        })
    }

    /// `len` bytes at byte `off` of storage `s`, CRC-checked first when asked.
    fn storage_bytes(&self, si: usize, off: u64, len: u64) -> Result<Cow<'d, [u8]>> {
        let s = &self.storages[si];
        match s.loc {
            Loc::Raw(at) => self.src.read_at(at + off, len),
            Loc::Record(ri) => {
                let r = &self.records[ri];
                if r.method == Method::Deflated {
                    let all = zip::content(self.src, r)?;
                    return Ok(Cow::Owned(all[off as usize..(off + len) as usize].to_vec()));
                }
                if self.verify && !self.src.rereads_same() {
                    // Fresh bytes on every read (`pread`, remote): the bytes handed out
                    // are the ones the CRC was computed over.
                    let all = self.src.read_at(r.start, r.size)?;
                    zip::check_crc(r, &all)?;
                    let part = usize::try_from(off)
                        .ok()
                        .zip(usize::try_from(off.saturating_add(len)).ok())
                        .and_then(|(a, b)| all.get(a..b))
                        .ok_or_else(|| Error::malformed("a tensor runs past its zip record"))?;
                    return Ok(Cow::Owned(part.to_vec()));
                }
                if self.verify && self.checked[si].get().is_none() {
                    zip::check_crc(r, &self.src.read_at(r.start, r.size)?)?;
                    let _ = self.checked[si].set(());
                }
                self.src.read_at(r.start + off, len)
            }
        }
    }
}

/// Checks one tensor against its storage.
fn entry(
    p: &Parts<'_>,
    by_key: &HashMap<&str, usize>,
    name: &str,
    t: &TensorRef,
    limits: &Limits,
) -> Result<(Entry, TensorInfo)> {
    let st = &t.storage;
    let &si = by_key
        .get(st.key.as_str())
        .ok_or_else(|| Error::malformed(format!("storage {:?} is missing", st.key)))?;
    let s = &p.storages[si];
    if s.dtype != st.dtype {
        return Err(Error::malformed(format!(
            "storage {:?} is named as {} and as {}",
            st.key, s.dtype, st.dtype
        )));
    }
    limits.check_rank(t.size.len() as u64)?;
    // A legacy storage view: a window of the root storage.
    let (view_off, view_len) = st.view.unwrap_or((0, s.numel));
    if view_off.checked_add(view_len).is_none_or(|e| e > s.numel) {
        return Err(Error::malformed(format!(
            "storage view {view_off}+{view_len} runs past the {} elements of storage {:?}",
            s.numel, st.key
        )));
    }
    // Bytes from here on: a `_rebuild_tensor_v3` tensor counts its offset and strides
    // in its own dtype over a storage of bytes. Storage sizes were checked against
    // their records (or the file), so these products fit.
    let ss = s.dtype.size() as u64;
    let (view_off, view_len) = (view_off * ss, view_len * ss);
    let es = t.dtype.size() as u64; // F4E2M1: 1, a float4_e2m1fn_x2 byte
    let base = t
        .offset
        .checked_mul(es)
        .and_then(|o| o.checked_add(view_off));
    let past = || {
        Error::malformed(format!(
            "view (offset {}, size {:?}, stride {:?}) of {}-byte elements runs past the \
             {view_len} bytes of storage {:?}",
            t.offset, t.size, t.stride, es, st.key
        ))
    };
    let base = base.ok_or_else(past)?;
    if let Some(last) = last_element(&t.size, &t.stride)? {
        t.offset
            .checked_add(last)
            .and_then(|l| l.checked_add(1))
            .and_then(|n| n.checked_mul(es))
            .filter(|&end| end <= view_len)
            .ok_or_else(past)?;
    }
    let nbytes = crate::tensor::numel(&t.size)?
        .checked_mul(es)
        .ok_or_else(|| Error::malformed(format!("shape {:?} overflows u64", t.size)))?;
    limits.check_decoded(nbytes)?;
    // A view that repeats elements (stride 0, overlapping strides) can decode to more
    // than its storage holds: a few stored bytes must not become gigabytes.
    let stored = view_len;
    if nbytes > stored && nbytes > limits.max_index_bytes {
        return Err(Error::limit(format!(
            "a view of {nbytes} bytes repeating the {stored} bytes of storage {:?} is over \
             the limit of {} bytes",
            st.key, limits.max_index_bytes
        )));
    }
    let e = Entry {
        storage: si,
        base,
        size: t.size.clone(),
        stride: t.stride.clone(),
        es,
        swap: match (t.dtype, t.undecoded) {
            (DType::C64 | DType::C128, _) | (_, Some("torch.complex32" | "torch.bcomplex32")) => {
                es as usize / 2
            }
            _ => es as usize,
        },
        contiguous: contiguous(&t.size, &t.stride),
    };
    let (offset, encoding, digests) = match s.loc {
        Loc::Raw(at) => (at.checked_add(e.base), "raw", vec![]),
        Loc::Record(ri) => {
            let r = &p.records[ri];
            match r.method {
                Method::Stored => (r.start.checked_add(e.base), "raw", vec!["crc32".into()]),
                Method::Deflated => (Some(r.start), "deflate", vec!["crc32".into()]),
            }
        }
    };
    let mut info = match (t.dtype, t.undecoded) {
        // Torch's float4_e2m1fn_x2 holds two values per element: the logical last
        // dimension is twice torch's (a scalar is two values), as the safetensors
        // package and Tessera's Python drop-in count it.
        (DType::F4E2M1, None) => {
            let mut shape = t.size.clone();
            match shape.last_mut() {
                Some(d) => {
                    *d = d.checked_mul(2).ok_or_else(|| {
                        Error::malformed(format!("shape {:?} overflows u64", t.size))
                    })?
                }
                None => shape.push(2),
            }
            TensorInfo::dense(name, DType::F4E2M1, shape)
        }
        (d, None) => TensorInfo::dense(name, d, t.size.clone()),
        (_, Some(torch)) => {
            let mut i = TensorInfo::dense(name, DType::U8, t.size.clone());
            i.layout = crate::tensor::Layout::undecoded(torch);
            i
        }
    };
    info.storage = Storage {
        offset: if e.contiguous { offset } else { None },
        stored_bytes: nbytes,
        encoding: if e.contiguous { encoding } else { "strided" }.into(),
        digests,
    };
    Ok((e, info))
}

/// Warnings for tensors whose element ranges overlap in one storage (tied weights).
fn shared(entries: &[Entry], infos: &[TensorInfo]) -> Vec<String> {
    let mut spans: Vec<(usize, u64, u64, usize)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if let Ok(Some(last)) = last_element(&e.size, &e.stride) {
            // In bytes: tensors of different dtypes may view one storage.
            spans.push((e.storage, e.base, e.base + (last + 1) * e.es, i));
        }
    }
    spans.sort();
    let mut out = Vec::new();
    let mut held: Option<(usize, u64, usize)> = None; // storage, furthest end, who
    for &(s, start, end, i) in &spans {
        match held {
            Some((hs, hend, who)) if hs == s && start < hend => {
                if out.len() < 100 {
                    out.push(format!(
                        "tensors {:?} and {:?} share storage bytes (tied weights): both are \
                         read, and a conversion writes each as its own copy",
                        infos[who].name, infos[i].name
                    ));
                }
                if end > hend {
                    held = Some((s, end, i));
                }
            }
            _ => held = Some((s, end, i)),
        }
    }
    out
}

/// Copies the elements of a strided view out of `span` (which starts at its first
/// element) in row-major order. The element offset is kept as a running sum (an
/// odometer over the dimensions), so each element costs O(1) amortized.
fn gather(span: &[u8], es: usize, size: &[u64], stride: &[u64], numel: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(numel as usize * es);
    let mut idx = vec![0u64; size.len()];
    let mut at = 0u64; // checked at open: never past the last element
    for _ in 0..numel {
        let b = at as usize * es;
        out.extend_from_slice(&span[b..b + es]);
        for d in (0..size.len()).rev() {
            if idx[d] + 1 < size[d] {
                idx[d] += 1;
                at += stride[d];
                break;
            }
            at -= idx[d] * stride[d];
            idx[d] = 0;
        }
    }
    out
}

/// Swaps every `n`-byte value (an element, or a component of a complex one) to
/// little-endian.
fn swap(bytes: &mut [u8], n: usize) {
    bytes.chunks_exact_mut(n).for_each(|c| c.reverse());
}

impl TensorSource for PytorchFile<'_> {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let i = crate::model::tensor_position(&self.index, name)?;
        let (e, info) = (&self.entries[i], &self.infos[i]);
        let es = e.es;
        let numel = crate::tensor::numel(&e.size)?; // torch's elements
        let subject = || format!("tensor {name:?}");
        let mut bytes = match last_element(&e.size, &e.stride)? {
            None => Cow::Owned(Vec::new()),
            Some(_) if e.contiguous => self
                .storage_bytes(e.storage, e.base, numel * es)
                .map_err(|x| x.at_subject(subject()))?,
            Some(last) => {
                let span = self
                    .storage_bytes(e.storage, e.base, (last + 1) * es)
                    .map_err(|x| x.at_subject(subject()))?;
                Cow::Owned(gather(&span, es as usize, &e.size, &e.stride, numel))
            }
        };
        if self.big_endian && e.swap > 1 {
            swap(bytes.to_mut(), e.swap);
        }
        if info.layout.undecoded_type().is_some() {
            // Carried as its bytes: `numel × size` of them, not one per listed u8.
            return Ok(TensorView {
                info: info.clone(),
                parts: vec![crate::tensor::Part {
                    role: "data".into(),
                    bytes,
                }],
            });
        }
        TensorView::dense(info.clone(), bytes)
    }
    fn source_format(&self) -> Option<Format> {
        Some(Format::Pytorch)
    }
}

impl Container for PytorchFile<'_> {
    fn format(&self) -> Format {
        Format::Pytorch
    }
    fn version(&self) -> String {
        self.version.clone()
    }
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport {
        let mut r = VerifyReport {
            warnings: self.warnings.clone(),
            ..Default::default()
        };
        // Progress: a tensor is done when the record holding its storage is checked;
        // one in the legacy format's raw bytes (no checksum) at the end.
        let mut per_record = vec![0u64; self.records.len()];
        let mut raw = 0u64;
        for (e, info) in self.entries.iter().zip(&self.infos) {
            let n = crate::verify::progress_bytes(info);
            let slot = match self.storages.get(e.storage).map(|s| &s.loc) {
                Some(Loc::Record(ri)) => per_record.get_mut(*ri),
                _ => None,
            };
            match slot {
                Some(s) => *s = s.saturating_add(n),
                None => raw = raw.saturating_add(n),
            }
        }
        if self.records.is_empty() {
            r.push(
                "file",
                "checksum",
                Status::NotChecked,
                Some(
                    "the legacy format stores no checksums; sizes and views were validated".into(),
                ),
            );
        }
        for (ri, rec) in self.records.iter().enumerate() {
            let subject = format!("record {:?}", rec.name);
            let got = zip::content(self.src, rec).and_then(|b| zip::check_crc(rec, &b));
            match got {
                Ok(()) => r.ok(subject, "crc32"),
                Err(e) => r.failed(subject, "crc32", e.message()),
            }
            opts.advance(per_record[ri]);
        }
        opts.advance(raw);
        r
    }
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}
