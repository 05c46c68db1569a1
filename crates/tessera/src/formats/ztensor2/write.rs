//! [`Ztensor2Writer`]: the streaming writer (canonical form by default).
//!
//! Blobs go out as tensors come (zero padding to the next 64 KiB boundary before each);
//! only the manifest entries are kept until [`Ztensor2Writer::finish`] writes the
//! manifest blob and the footer. The `write` entry point hands the writer to the driver
//! ([`crate::write::drive`]) with an encoding companion (`encode_parts`: each part's
//! digest, and its seekable zstd stream or the XXH3-128 that finds a shared blob),
//! so the tensors of a batch are digested and compressed on every core while the
//! previous batch is written; memory stays near two batches.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write;

use xxhash_rust::xxh3::{xxh3_128, xxh3_64};

use super::cbor::{self, CVal};
use super::layout::{COO, CSR, PART_TYPES};
use super::raw::{self, check_name, storage_of, ALIGN_CANONICAL, MAGIC, VERSION};
use super::read::ZSTD_SEEKABLE;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::metadata::{Map, Value};
use crate::model::TensorSource;
use crate::options::{Compression, Digest, WriteOptions};
use crate::tensor::{Layout, TensorView};
use crate::write::{Encoder, StreamWriter, WriteReport, WriteSeek};

/// Decoded bytes per zstd frame of `zt.zstd-seekable/1` (the spec allows up to 16 MiB).
const FRAME: usize = 1 << 20;
const SKIPPABLE_MAGIC: u32 = 0x184D_2A5E;
const SEEKABLE_MAGIC: u32 = 0x8F92_EAB1;

fn text(s: &str) -> CVal {
    CVal::Text(s.to_string())
}

/// A metadata value as CBOR (attribute keys checked against the name rules, nesting
/// against the reader's 32 levels counted from the manifest root).
fn to_cbor(v: &Value, depth: usize) -> Result<CVal> {
    if depth > cbor::MAX_DEPTH {
        return Err(Error::invalid_input(
            "an attribute nests deeper than zTensor v2's 32 levels",
        ));
    }
    Ok(match v {
        Value::Null => CVal::Null,
        Value::Bool(b) => CVal::Bool(*b),
        Value::Int(i) if *i >= 0 => CVal::Uint(u64::try_from(*i).map_err(|_| {
            Error::invalid_input(format!("attribute integer {i} does not fit CBOR"))
        })?),
        Value::Int(i) => CVal::Nint(u64::try_from(-1 - *i).map_err(|_| {
            Error::invalid_input(format!("attribute integer {i} does not fit CBOR"))
        })?),
        Value::Float(x) => CVal::Float(*x),
        Value::Str(s) => CVal::Text(s.clone()),
        Value::Bytes(b) => CVal::Bytes(b.clone()),
        Value::List(l) => CVal::Array(
            l.iter()
                .map(|x| to_cbor(x, depth + 1))
                .collect::<Result<_>>()?,
        ),
        Value::Map(m) => map_to_cbor(m, depth)?,
    })
}

/// A map as a CBOR attributes map (`depth`: the map's own level).
fn map_to_cbor(m: &Map, depth: usize) -> Result<CVal> {
    let mut out = Vec::with_capacity(m.len());
    for (k, v) in m.iter() {
        check_name(k, "attribute key").map_err(|e| Error::invalid_input(e.message()))?;
        out.push((text(k), to_cbor(v, depth + 1)?));
    }
    Ok(CVal::Map(out))
}

/// `dtype[:type]` (the [`PART_TYPES`] form) as (storage, logical).
fn parse_label(s: &str) -> Option<(DType, Option<String>)> {
    let (d, t) = match s.split_once(':') {
        Some((d, t)) => (d, Some(t.to_string())),
        None => (s, None),
    };
    Some((raw::dtype_from_name(d)?, t))
}

/// `zt.zstd-seekable/1`: independent checksummed frames of [`FRAME`] decoded
/// bytes, then the seek table (a skippable frame with the seekable footer). The
/// frames are independent, so a tensor of several frames is compressed on every
/// core (rayon), then concatenated in order: the same bytes as one by one.
fn seekable(bytes: &[u8], level: i32) -> Result<Vec<u8>> {
    use rayon::prelude::*;
    let frames: Vec<Vec<u8>> = bytes
        .par_chunks(FRAME)
        .map(|chunk| -> Result<Vec<u8>> {
            let mut enc = zstd::stream::write::Encoder::new(Vec::new(), level)?;
            enc.include_checksum(true)?;
            enc.write_all(chunk)?;
            Ok(enc.finish()?)
        })
        .collect::<Result<_>>()?;
    let mut out = Vec::with_capacity(frames.iter().map(Vec::len).sum::<usize>() + 64);
    let mut table = Vec::with_capacity(frames.len());
    for (frame, chunk) in frames.iter().zip(bytes.chunks(FRAME)) {
        table.push((frame.len() as u32, chunk.len() as u32));
        out.extend_from_slice(frame);
    }
    out.extend_from_slice(&SKIPPABLE_MAGIC.to_le_bytes());
    out.extend_from_slice(&((table.len() * 8 + 9) as u32).to_le_bytes());
    for (c, d) in &table {
        out.extend_from_slice(&c.to_le_bytes());
        out.extend_from_slice(&d.to_le_bytes());
    }
    out.extend_from_slice(&(table.len() as u32).to_le_bytes());
    out.push(0);
    out.extend_from_slice(&SEEKABLE_MAGIC.to_le_bytes());
    Ok(out)
}

/// What the pool makes of one part ([`encode_parts`]).
pub(super) struct PartEnc {
    digest: String,
    /// The `zt.zstd-seekable/1` stream, when compressing.
    zstd: Option<Vec<u8>>,
    /// XXH3-128 of the raw bytes, when not (finds a blob to share).
    key: u128,
    /// The bytes stored when they are not the part's own ([`stored_bytes`]: a sparse
    /// index part narrowed back to u32).
    narrowed: Option<Vec<u8>>,
}

/// The stored type of a sparse tensor's index parts (one type for all: the profiles
/// want `indices` and `indptr` alike): u32 when the tensor came with u32 indices
/// ([`PART_TYPES`] names each index part `u32`, as the reader records a v2 file's) and
/// every index still fits, else u64 (how [`Layout::SparseCsr`] and
/// [`Layout::SparseCoo`] hold them).
fn index_type(view: &TensorView<'_>) -> DType {
    let labels = match view.info.attrs.get(PART_TYPES) {
        Some(Value::Map(m)) => m,
        _ => return DType::U64,
    };
    let fits = |b: &[u8]| {
        b.len() % 8 == 0
            && (b.chunks_exact(8))
                .all(|c| u64::from_le_bytes(c.try_into().unwrap_or([0xff; 8])) <= u32::MAX as u64)
    };
    let narrow = (view.parts.iter()).filter(|p| p.role != "values").all(|p| {
        matches!(labels.get(&p.role), Some(Value::Str(s)) if s == "u32") && fits(&p.bytes)
    });
    if narrow {
        DType::U32
    } else {
        DType::U64
    }
}

/// The bytes part `i` of `view` is stored as: its own, or, for a sparse index part
/// stored as u32 ([`index_type`]), narrowed from the u64 it is held as.
fn stored_bytes<'v>(view: &'v TensorView<'_>, i: usize) -> Cow<'v, [u8]> {
    let p = &view.parts[i];
    let sparse = matches!(view.info.layout, Layout::SparseCsr | Layout::SparseCoo);
    if sparse && p.role != "values" && index_type(view) == DType::U32 {
        let mut out = Vec::with_capacity(p.bytes.len() / 2);
        for c in p.bytes.chunks_exact(8) {
            out.extend_from_slice(&c[..4]);
        }
        Cow::Owned(out)
    } else {
        Cow::Borrowed(&p.bytes[..])
    }
}

/// Each part's digest (SHA-256 or XXH3-64) and its seekable zstd stream (with
/// `compression`) or its XXH3-128, in the order of `view.parts`: the work on a tensor's
/// bytes, done on any thread before the writer places it.
fn encode_parts(
    view: &TensorView<'_>,
    compression: Compression,
    sha256: bool,
) -> Result<Vec<PartEnc>> {
    (0..view.parts.len())
        .map(|i| {
            let bytes = stored_bytes(view, i);
            let digest = if sha256 {
                format!("sha256:{}", crate::util::hex(&crate::util::sha256(&bytes)))
            } else {
                format!("xxh3:{:016x}", xxh3_64(&bytes))
            };
            let (zstd, key) = match compression {
                Compression::None => (None, xxh3_128(&bytes)),
                Compression::Zstd(level) => (Some(seekable(&bytes, level)?), 0),
            };
            let narrowed = match bytes {
                Cow::Owned(b) => Some(b),
                Cow::Borrowed(_) => None,
            };
            Ok(PartEnc {
                digest,
                zstd,
                key,
                narrowed,
            })
        })
        .collect()
}

/// A part's (storage, logical) type.
type PartType = (DType, Option<String>);

/// Where a blob went: its offset, and which tensor part first held the bytes.
struct Placed {
    offset: u64,
    tensor: String,
    role: String,
}

/// The manifest objects of a data shard, for its root's manifest.
pub struct ShardObjects(Vec<(CVal, CVal)>);

/// Streams a zTensor v2 file into `W`: canonical form (spec §6.3) unless compression
/// is asked for. Byte-identical to ztensor 2.1.2's canonical `Writer` for the same
/// tensors: see the module docs.
pub struct Ztensor2Writer<W: Write> {
    out: W,
    pos: u64,
    align: u64,
    compression: Compression,
    /// `sha256` digests instead of `xxh3` (not canonical form).
    sha256: bool,
    attributes: Option<CVal>,
    objects: Vec<(CVal, CVal)>,
    /// The shard table (spec §7.1): name, size, digest.
    shards: Vec<(String, u64, String)>,
    /// (XXH3-128, length) → the blob already holding those bytes.
    dedup: HashMap<(u128, u64), Placed>,
    last_name: Option<String>,
    failed: bool,
}

impl<W: Write> Ztensor2Writer<W> {
    /// Starts a file: writes the magic. `out` must be at the start of the file.
    pub fn new(mut out: W, opts: &WriteOptions) -> Result<Ztensor2Writer<W>> {
        if let Compression::Zstd(level) = opts.compression {
            let range = zstd::compression_level_range();
            if !range.contains(&level) {
                return Err(Error::invalid_input(format!(
                    "zstd level {level} is outside {}..={}",
                    range.start(),
                    range.end()
                )));
            }
        }
        out.write_all(MAGIC)?;
        Ok(Ztensor2Writer {
            out,
            pos: MAGIC.len() as u64,
            align: ALIGN_CANONICAL,
            compression: opts.compression,
            sha256: opts.digests.contains(&Digest::Sha256),
            attributes: None,
            objects: Vec::new(),
            shards: Vec::new(),
            dedup: HashMap::new(),
            last_name: None,
            failed: false,
        })
    }

    /// Sets the file attributes (written when `m` is not empty).
    pub fn set_metadata(&mut self, m: &Map) -> Result<()> {
        self.attributes = if m.is_empty() {
            None
        } else {
            Some(map_to_cbor(m, 1)?)
        };
        Ok(())
    }

    fn pad_to_next(&mut self) -> Result<u64> {
        let target = self
            .pos
            .checked_add(self.align - 1)
            .map(|v| v & !(self.align - 1))
            .ok_or_else(|| Error::invalid_input("file offset overflow"))?;
        let mut gap = target - self.pos;
        const ZEROS: [u8; 4096] = [0u8; 4096];
        while gap > 0 {
            let n = gap.min(ZEROS.len() as u64) as usize;
            self.out.write_all(&ZEROS[..n])?;
            gap -= n as u64;
        }
        self.pos = target;
        Ok(target)
    }

    fn write_blob(&mut self, bytes: &[u8]) -> Result<u64> {
        let at = self.pad_to_next()?;
        self.out.write_all(bytes)?;
        self.pos += bytes.len() as u64;
        Ok(at)
    }

    /// Writes raw `bytes` or shares the blob that already holds them (spec §6.3 rule
    /// 3), confirmed on the bytes themselves, reread from `src`.
    fn write_or_share(
        &mut self,
        bytes: &[u8],
        hash: u128,
        tensor: &str,
        role: &str,
        src: &dyn TensorSource,
    ) -> Result<u64> {
        let key = (hash, bytes.len() as u64);
        if let Some(p) = self.dedup.get(&key) {
            let earlier = src.tensor(&p.tensor)?;
            if earlier.part(&p.role) == Some(bytes) {
                return Ok(p.offset);
            }
        }
        let offset = self.write_blob(bytes)?;
        self.dedup.entry(key).or_insert(Placed {
            offset,
            tensor: tensor.to_string(),
            role: role.to_string(),
        });
        Ok(offset)
    }

    /// The v2 layout id and each part's (storage, logical) type.
    fn part_types(view: &TensorView<'_>) -> Result<(String, Vec<PartType>)> {
        let info = &view.info;
        let value = storage_of(info.dtype);
        let value = (
            raw::dtype_from_name(value.0).unwrap_or(DType::U8),
            value.1.map(str::to_string),
        );
        let (layout, types): (String, Vec<_>) = match &info.layout {
            Layout::Dense => ("dense".into(), vec![value]),
            Layout::SparseCsr | Layout::SparseCoo => {
                let id = if info.layout == Layout::SparseCsr {
                    CSR
                } else {
                    COO
                };
                let types = view
                    .parts
                    .iter()
                    .map(|p| {
                        if p.role == "values" {
                            value.clone()
                        } else {
                            (index_type(view), None)
                        }
                    })
                    .collect();
                (id.into(), types)
            }
            Layout::Other(_) if info.layout.undecoded_type().is_some() => {
                let t = info.layout.undecoded_type().unwrap_or_default();
                if value.1.is_some() {
                    return Err(Error::invalid_input(format!(
                        "tensor {:?}: {t} is stored as {}, which is not a storage type",
                        info.name, info.dtype
                    )));
                }
                ("dense".into(), vec![(value.0, Some(t.to_string()))])
            }
            Layout::Other(l) => {
                let labels = info.attrs.get(PART_TYPES);
                let types = view
                    .parts
                    .iter()
                    .map(|p| match labels {
                        Some(Value::Map(m)) => match m.get(&p.role) {
                            Some(Value::Str(s)) => parse_label(s).ok_or_else(|| {
                                Error::invalid_input(format!(
                                    "{PART_TYPES} of part {:?}: {s:?} is not dtype[:type]",
                                    p.role
                                ))
                            }),
                            _ => Err(Error::invalid_input(format!(
                                "{PART_TYPES} names no type for part {:?}",
                                p.role
                            ))),
                        },
                        _ => Ok(value.clone()),
                    })
                    .collect::<Result<_>>()?;
                (l.clone(), types)
            }
        };
        Ok((layout, types))
    }

    /// Appends one tensor. Canonical form wants names in ascending byte order;
    /// `src` is where earlier tensors can be reread to confirm a shared blob.
    pub fn add_tensor(&mut self, view: &TensorView<'_>, src: &dyn TensorSource) -> Result<()> {
        self.check_ready()?;
        let enc = encode_parts(view, self.compression, self.sha256)?;
        self.add_encoded(view, enc, src)
    }

    fn check_ready(&self) -> Result<()> {
        if self.failed {
            return Err(Error::invalid_input(
                "ztensor2 writer: an earlier write failed",
            ));
        }
        Ok(())
    }

    /// [`Self::add_tensor`] with its parts encoded ([`encode_parts`], one per part of
    /// `view`, as this writer's options ask).
    fn add_encoded(
        &mut self,
        view: &TensorView<'_>,
        mut enc: Vec<PartEnc>,
        src: &dyn TensorSource,
    ) -> Result<()> {
        self.check_ready()?;
        let info = &view.info;
        let name = &info.name;
        check_name(name, "tensor name").map_err(|e| Error::invalid_input(e.message()))?;
        if let Some(last) = &self.last_name {
            if name.as_str() <= last.as_str() {
                return Err(Error::invalid_input(format!(
                    "tensors go in ascending name order: {name:?} after {last:?}"
                )));
            }
        }
        if info.shape.len() > raw::MAX_RANK {
            return Err(Error::invalid_input(format!(
                "rank {} exceeds zTensor v2's 64",
                info.shape.len()
            )));
        }
        view.validate()?;
        let (layout, types) = Self::part_types(view)?;
        let mut order: Vec<usize> = (0..view.parts.len()).collect();
        order.sort_by(|&a, &b| view.parts[a].role.cmp(&view.parts[b].role));
        if order
            .windows(2)
            .any(|w| view.parts[w[0]].role == view.parts[w[1]].role)
        {
            return Err(Error::invalid_input("duplicate part role"));
        }
        let mut parts = Vec::with_capacity(order.len());
        for &i in &order {
            let p = &view.parts[i];
            check_name(&p.role, "part name").map_err(|e| Error::invalid_input(e.message()))?;
            let (dtype, logical) = &types[i];
            let e = enc.get_mut(i).ok_or_else(|| {
                Error::invalid_input(format!("no encoding given for part {:?}", p.role))
            })?;
            let digest = std::mem::take(&mut e.digest);
            let narrowed = e.narrowed.take();
            let bytes = narrowed.as_deref().unwrap_or(&p.bytes);
            let written = match e.zstd.take() {
                None => self
                    .write_or_share(bytes, e.key, name, &p.role, src)
                    .map(|o| (o, bytes.len() as u64, false)),
                Some(z) => {
                    let n = z.len() as u64;
                    self.write_blob(&z).map(|o| (o, n, true))
                }
            };
            let (offset, length, encoded) = written.inspect_err(|_| self.failed = true)?;
            let mut m = vec![(text("dtype"), text(storage_of(*dtype).0))];
            if let Some(t) = logical {
                m.push((text("type"), text(t)));
            }
            m.push((
                text("blob"),
                CVal::Array(vec![CVal::Uint(offset), CVal::Uint(length)]),
            ));
            if encoded {
                m.push((text("encoding"), text(ZSTD_SEEKABLE)));
                m.push((text("decoded_length"), CVal::Uint(bytes.len() as u64)));
            }
            m.push((text("digest"), CVal::Text(digest)));
            parts.push((text(&p.role), CVal::Map(m)));
        }
        let mut obj = vec![
            (
                text("shape"),
                CVal::Array(info.shape.iter().map(|&d| CVal::Uint(d)).collect()),
            ),
            (text("layout"), CVal::Text(layout)),
        ];
        let mut attrs = info.attrs.clone();
        attrs.remove(PART_TYPES);
        if !attrs.is_empty() {
            obj.push((text("attributes"), map_to_cbor(&attrs, 3)?));
        }
        obj.push((text("parts"), CVal::Map(parts)));
        self.objects.push((text(name), CVal::Map(obj)));
        self.last_name = Some(name.clone());
        Ok(())
    }

    /// Ends a data shard (spec §7.2): the footer with no manifest right after the last
    /// blob. Returns `out` and the objects added, whose parts a root file states with
    /// [`Ztensor2Writer::add_shard`].
    pub fn finish_data_shard(mut self) -> Result<(W, ShardObjects)> {
        if self.failed {
            return Err(Error::invalid_input(
                "ztensor2 writer: an earlier write failed",
            ));
        }
        let mut footer = [0u8; 40];
        footer[24..28].copy_from_slice(&VERSION.to_le_bytes());
        footer[32..40].copy_from_slice(MAGIC);
        self.out.write_all(&footer)?;
        self.out.flush()?;
        Ok((self.out, ShardObjects(std::mem::take(&mut self.objects))))
    }

    /// States the objects of data shard `name` (`size` bytes, whole-file `digest`) in
    /// this file's manifest: every part gains `"shard": name`.
    pub fn add_shard(
        &mut self,
        name: &str,
        size: u64,
        digest: String,
        objects: ShardObjects,
    ) -> Result<()> {
        raw::check_shard_name(name)?;
        for (k, mut obj) in objects.0 {
            if let CVal::Map(fields) = &mut obj {
                for (fk, fv) in fields.iter_mut() {
                    if let (CVal::Text(f), CVal::Map(parts)) = (&*fk, fv) {
                        if f == "parts" {
                            for (_, part) in parts.iter_mut() {
                                if let CVal::Map(pm) = part {
                                    pm.push((text("shard"), text(name)));
                                }
                            }
                        }
                    }
                }
            }
            self.objects.push((k, obj));
        }
        self.shards.push((name.to_string(), size, digest));
        Ok(())
    }

    /// Writes the manifest blob (at the next boundary) and the footer; returns `out`.
    pub fn finish(mut self) -> Result<W> {
        if self.failed {
            return Err(Error::invalid_input(
                "ztensor2 writer: an earlier write failed",
            ));
        }
        let mut root = Vec::new();
        if let Some(a) = self.attributes.take() {
            root.push((text("attributes"), a));
        }
        if !self.shards.is_empty() {
            let table = (self.shards.iter())
                .map(|(n, size, d)| {
                    let entry = vec![(text("size"), CVal::Uint(*size)), (text("digest"), text(d))];
                    (text(n), CVal::Map(entry))
                })
                .collect();
            root.push((text("shards"), CVal::Map(table)));
        }
        root.push((
            text("objects"),
            CVal::Map(std::mem::take(&mut self.objects)),
        ));
        let mut manifest = Vec::new();
        cbor::encode(&CVal::Map(root), &mut manifest)?;
        if manifest.len() as u64 > raw::MAX_MANIFEST {
            return Err(Error::invalid_input(
                "the manifest exceeds zTensor v2's 1 GiB",
            ));
        }
        let at = self.write_blob(&manifest)?;
        let mut footer = [0u8; 40];
        footer[0..8].copy_from_slice(&at.to_le_bytes());
        footer[8..16].copy_from_slice(&(manifest.len() as u64).to_le_bytes());
        footer[16..24].copy_from_slice(&xxh3_64(&manifest).to_le_bytes());
        footer[24..28].copy_from_slice(&VERSION.to_le_bytes());
        footer[32..40].copy_from_slice(MAGIC);
        self.out.write_all(&footer)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A [`Ztensor2Writer`] fed by the driver: the tensors (all of `src`'s, or `names`: a
/// data shard's group) in name order, each part encoded on the pool (`encode_parts`);
/// `src` is where a shared blob is confirmed. Gives the writer back, for its caller to
/// finish as a file or as a data shard.
pub(super) struct Ztensor2Stream<'s, W: Write> {
    pub(super) w: Ztensor2Writer<W>,
    pub(super) src: &'s dyn TensorSource,
    pub(super) names: Option<Vec<String>>,
}

impl<W: Write> StreamWriter for Ztensor2Stream<'_, W> {
    type Encoded = Vec<PartEnc>;
    type Done = Ztensor2Writer<W>;
    fn order(&self) -> Vec<String> {
        let mut names: Vec<String> = match &self.names {
            Some(n) => n.clone(),
            None => (self.src.tensor_infos().iter())
                .map(|i| i.name.clone())
                .collect(),
        };
        names.sort_unstable();
        names
    }
    fn encoder(&self) -> Option<Encoder<Vec<PartEnc>>> {
        let (compression, sha256) = (self.w.compression, self.w.sha256);
        Some(Box::new(move |view: &TensorView<'_>| {
            encode_parts(view, compression, sha256)
        }))
    }
    fn write_tensor(
        &mut self,
        name: &str,
        view: TensorView<'_>,
        enc: Option<Vec<PartEnc>>,
    ) -> Result<()> {
        match enc {
            Some(enc) => self.w.add_encoded(&view, enc, self.src),
            None => self.w.add_tensor(&view, self.src),
        }
        .map_err(|e| e.at_subject(format!("tensor {name:?}")))
    }
    fn finish(self) -> Result<Ztensor2Writer<W>> {
        Ok(self.w)
    }
}

/// The `WRITE` entry point: streams `src` as zTensor v2, tensors in name order.
pub fn write(
    src: &dyn TensorSource,
    out: &mut dyn WriteSeek,
    opts: &WriteOptions,
) -> Result<WriteReport> {
    let mut report = WriteReport::default();
    if let Some(c) = src.chunks().iter().find(|c| !c.holds_tensors) {
        return Err(Error::unsupported(format!(
            "zTensor v2 cannot carry opaque chunks (first: {:?})",
            c.name
        ))
        .with_hint(crate::refusal::Hint::DropMetadata));
    }
    let mut w = Ztensor2Writer::new(out, opts)?;
    w.set_metadata(src.metadata())?;
    if opts.digests.contains(&Digest::Sha256) {
        report
            .notes
            .push("sha256 part digests instead of xxh3: not canonical form".into());
    }
    if opts.digests.contains(&Digest::Crc32c) {
        report
            .notes
            .push("zTensor v2 has no crc32c digest: wrote xxh3".into());
    }
    if matches!(opts.compression, Compression::Zstd(_)) {
        report.notes.push(format!(
            "parts written as {ZSTD_SEEKABLE}: not canonical form"
        ));
    }
    let names = None;
    crate::write::drive(src, Ztensor2Stream { w, src, names })?.finish()?;
    Ok(report)
}
