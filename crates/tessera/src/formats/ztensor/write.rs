//! [`ZtensorWriter`]: the streaming writer.
//!
//! Components go out in order, zero padding to 64 bytes before each. Raw components
//! without a digest are written as they are; the others are first encoded (zstd, with
//! a reused context per thread; the digest over the stored bytes). The `write` entry
//! point hands the writer to the driver ([`crate::write::drive`]) with that encoding as
//! its companion, so a batch of tensors is encoded on every core while this thread
//! writes the previous batch; memory stays near two batches
//! ([`crate::write::stream::READ_AHEAD`] of input, or one tensor). Only the manifest
//! entries (a few dozen bytes per component) are kept until [`ZtensorWriter::finish`]
//! writes the CBOR manifest and its size.

use std::collections::BTreeMap;
use std::io::Write;

use super::raw::{self, OutComponent, OutManifest, OutTensor, ALIGNMENT, MAGIC};
use crate::error::{Error, Result};
use crate::metadata::{Metadata, Value};
use crate::model::TensorSource;
use crate::options::{Compression, Digest, WriteOptions};
use crate::tensor::TensorView;
use crate::write::{Encoder, StreamWriter, WriteReport, WriteSeek};

/// The `generator` we write.
pub const GENERATOR: &str = concat!("tessera v", env!("CARGO_PKG_VERSION"));

/// A component ready to be written: the zstd stream (none when raw: the part's own
/// bytes go out) and the digest of the stored bytes.
struct Encoded {
    zstd: Option<Vec<u8>>,
    digest: Option<String>,
}

/// Compresses `bytes` as asked (a streaming frame without a content size, as the
/// original writes) and computes the digest over the stored bytes.
fn encode(bytes: &[u8], compression: Compression, digest: Option<Digest>) -> Result<Encoded> {
    let zstd = match compression {
        Compression::None => None,
        Compression::Zstd(level) => {
            let mut z = Vec::new();
            crate::util::zstd_encode(&[bytes], level, false, &mut z)?;
            Some(z)
        }
    };
    let stored = zstd.as_deref().unwrap_or(bytes);
    let digest = match digest {
        None => None,
        Some(Digest::Crc32c) => Some(format!("crc32c:0x{:08X}", crate::util::crc32c(stored))),
        Some(Digest::Sha256) => Some(format!(
            "sha256:{}",
            crate::util::hex(&crate::util::sha256(stored))
        )),
    };
    Ok(Encoded { zstd, digest })
}

/// A tensor checked, its parts put in component order and encoded: what the encoding
/// companion makes on the pool.
struct Planned {
    dtype: &'static str,
    order: Vec<usize>,
    /// One per part, in `order`.
    enc: Vec<Result<Encoded>>,
}

/// Checks a tensor and orders its parts as components (layout order); the duplicate
/// name check is the writer's.
fn plan_view(view: &TensorView<'_>) -> Result<(&'static str, Vec<usize>)> {
    let info = &view.info;
    let subject = format!("tensor {:?}", info.name);
    let dtype = raw::dtype_name(info.dtype).ok_or_else(|| {
        Error::unsupported(format!("zTensor v1.0 cannot store dtype {}", info.dtype))
            .at_subject(subject.clone())
    })?;
    view.validate().map_err(|e| e.at_subject(subject.clone()))?;
    let mut order: Vec<usize> = (0..view.parts.len()).collect();
    let required = info.layout.required_parts();
    order.sort_by_key(|&i| {
        required
            .iter()
            .position(|r| *r == view.parts[i].role)
            .unwrap_or(usize::MAX)
    });
    let mut roles: Vec<&str> = view.parts.iter().map(|p| p.role.as_str()).collect();
    roles.sort_unstable();
    if let Some(w) = roles.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::invalid_input(format!("duplicate part {:?}", w[0])).at_subject(subject));
    }
    Ok((dtype, order))
}

/// Streams a zTensor v1.0 file into `W`, byte-compatible with the original writer
/// (ztensor 1.0.0 crate / 1.0.1 PyPI): see the module docs.
pub struct ZtensorWriter<W: Write> {
    out: W,
    pos: u64,
    compression: Compression,
    digest: Option<Digest>,
    attributes: BTreeMap<String, String>,
    tensors: BTreeMap<String, OutTensor>,
    failed: bool,
}

impl<W: Write> ZtensorWriter<W> {
    /// Starts a file: writes the magic. Offsets are counted from here, so `out` must be
    /// at the start of the file. `opts.digests` may name at most one digest (zTensor has
    /// one `digest` per component).
    pub fn new(mut out: W, opts: &WriteOptions) -> Result<ZtensorWriter<W>> {
        let digest =
            match opts.digests.as_slice() {
                // crc32c by default, so `verify` has something to check (ztensor 1.0.1
                // reads and checks it); `digests=none` stores none.
                [] if opts.no_digest => None,
                [] => Some(Digest::Crc32c),
                [d] => Some(*d),
                [a, rest @ ..] if rest.iter().all(|d| d == a) => Some(*a),
                _ => return Err(Error::invalid_input(
                    "ztensor stores one digest per component: choose crc32c or sha256, not both",
                )),
            };
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
        Ok(ZtensorWriter {
            out,
            pos: MAGIC.len() as u64,
            compression: opts.compression,
            digest,
            attributes: BTreeMap::new(),
            tensors: BTreeMap::new(),
            failed: false,
        })
    }

    /// Sets an attribute (string values as they are).
    pub fn set_attribute(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.attributes.insert(key.into(), value.into());
    }

    /// Sets every metadata key as an attribute: strings as they are, any other value as
    /// its JSON text (zTensor v1.0 attributes are strings; the original reader fails on
    /// anything else).
    pub fn set_metadata(&mut self, m: &Metadata) {
        for (k, v) in m.iter() {
            let s = match v {
                Value::Str(s) => s.clone(),
                other => other.to_json().to_string(),
            };
            self.attributes.insert(k.to_string(), s);
        }
    }

    fn check(&self) -> Result<()> {
        if self.failed {
            return Err(Error::invalid_input(
                "ztensor writer: an earlier write failed",
            ));
        }
        Ok(())
    }

    /// Appends one tensor: validates it, then writes its parts as components, in the
    /// layout's order (`data`; `values, indices, indptr`; `values, coords`; other
    /// layouts: the parts in their order).
    pub fn add_tensor(&mut self, view: &TensorView<'_>) -> Result<()> {
        self.check()?;
        let (dtype, order) = self.plan(view)?;
        let enc = order
            .iter()
            .map(|&i| self.encode_part(&view.parts[i].bytes))
            .collect::<Vec<_>>();
        self.place(view, dtype, &order, enc)
    }

    fn encode_part(&self, bytes: &[u8]) -> Result<Encoded> {
        encode(bytes, self.compression, self.digest)
    }

    /// Checks a tensor and orders its parts as components (layout order).
    fn plan(&self, view: &TensorView<'_>) -> Result<(&'static str, Vec<usize>)> {
        let info = &view.info;
        if self.tensors.contains_key(&info.name) {
            return Err(Error::invalid_input(format!(
                "duplicate tensor name {:?}",
                info.name
            )));
        }
        plan_view(view)
    }

    /// Writes a planned tensor's components (`enc`: one per part in `order`).
    fn place(
        &mut self,
        view: &TensorView<'_>,
        dtype: &'static str,
        order: &[usize],
        enc: Vec<Result<Encoded>>,
    ) -> Result<()> {
        let info = &view.info;
        let subject = || format!("tensor {:?}", info.name);
        if self.tensors.contains_key(&info.name) {
            return Err(Error::invalid_input(format!(
                "duplicate tensor name {:?}",
                info.name
            )));
        }
        let mut components = BTreeMap::new();
        for (&i, e) in order.iter().zip(enc) {
            let p = &view.parts[i];
            let c = e
                .and_then(|e| self.write_component(&p.bytes, e))
                .map_err(|e| {
                    self.failed = true;
                    e.at_subject(subject())
                })?;
            components.insert(p.role.clone(), c);
        }
        self.tensors.insert(
            info.name.clone(),
            OutTensor {
                dtype,
                shape: info.shape.clone(),
                format: info.layout.name().to_string(),
                components,
            },
        );
        Ok(())
    }

    fn write_component(&mut self, bytes: &[u8], e: Encoded) -> Result<OutComponent> {
        let pad = (ALIGNMENT - self.pos % ALIGNMENT) % ALIGNMENT;
        self.out.write_all(&[0u8; 64][..pad as usize])?;
        self.pos += pad;
        let offset = self.pos;
        let stored = e.zstd.as_deref().unwrap_or(bytes);
        self.out.write_all(stored)?;
        let length = stored.len() as u64;
        self.pos += length;
        Ok(OutComponent {
            offset,
            length,
            encoding: e.zstd.is_some().then_some("zstd"),
            digest: e.digest,
        })
    }

    /// Writes the manifest (right after the last component, unaligned, as the original
    /// does) and its u64 LE size; returns the output.
    pub fn finish(mut self) -> Result<W> {
        self.check()?;
        let manifest = OutManifest {
            version: raw::VERSION,
            generator: GENERATOR,
            attributes: &self.attributes,
            tensors: &self.tensors,
        };
        let mut cbor = Vec::new();
        ciborium::ser::into_writer(&manifest, &mut cbor)
            .map_err(|e| Error::invalid_input(format!("ztensor: encoding the manifest: {e}")))?;
        self.out.write_all(&cbor)?;
        self.out.write_all(&(cbor.len() as u64).to_le_bytes())?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A [`ZtensorWriter`] fed by the driver, the tensors in `order` (the source's). Its
/// encoding companion checks a tensor, orders its components and compresses and
/// digests each on the pool; none when there is nothing to encode (raw components
/// without a digest go out as they are).
struct ZtensorStream<W: Write> {
    w: ZtensorWriter<W>,
    order: Vec<String>,
}

impl<W: Write> StreamWriter for ZtensorStream<W> {
    type Encoded = Planned;
    type Done = W;
    fn order(&self) -> Vec<String> {
        self.order.clone()
    }
    fn encoder(&self) -> Option<Encoder<Planned>> {
        let (compression, digest) = (self.w.compression, self.w.digest);
        if compression == Compression::None && digest.is_none() {
            return None;
        }
        Some(Box::new(move |view: &TensorView<'_>| {
            let (dtype, order) = plan_view(view)?;
            let enc = order
                .iter()
                .map(|&i| encode(&view.parts[i].bytes, compression, digest))
                .collect();
            Ok(Planned { dtype, order, enc })
        }))
    }
    fn write_tensor(
        &mut self,
        _: &str,
        view: TensorView<'_>,
        planned: Option<Planned>,
    ) -> Result<()> {
        match planned {
            None => self.w.add_tensor(&view),
            Some(p) => {
                self.w.check()?;
                self.w.place(&view, p.dtype, &p.order, p.enc)
            }
        }
    }
    fn finish(self) -> Result<W> {
        self.w.finish()
    }
}

/// The `WRITE` entry point: streams `src` as zTensor v1.0.
pub fn write(
    src: &dyn TensorSource,
    out: &mut dyn WriteSeek,
    opts: &WriteOptions,
) -> Result<WriteReport> {
    let mut report = WriteReport::default();
    if let Some(c) = src.chunks().iter().find(|c| !c.holds_tensors) {
        return Err(Error::unsupported(format!(
            "zTensor cannot carry opaque chunks (first: {:?})",
            c.name
        ))
        .with_hint(crate::refusal::Hint::DropMetadata));
    }
    let mut w = ZtensorWriter::new(out, opts)?;
    w.set_metadata(src.metadata());
    for (k, v) in src.metadata().iter() {
        if !matches!(v, Value::Str(_)) {
            report.notes.push(format!(
                "metadata {k:?} written as JSON text (zTensor attributes are strings)"
            ));
        }
    }
    for info in src.tensor_infos().iter().filter(|i| !i.attrs.is_empty()) {
        let keys: Vec<&str> = info.attrs.keys().collect();
        report.notes.push(format!(
            "dropped per-tensor attributes of {:?} (zTensor v1.0 has none): {}",
            info.name,
            keys.join(", ")
        ));
    }
    let order = src.tensor_infos().iter().map(|i| i.name.clone()).collect();
    crate::write::drive(src, ZtensorStream { w, order })?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::tensor::TensorInfo;

    /// Tensors encoded in parallel batches come out byte for byte as one at a time.
    #[test]
    fn batches_write_what_one_at_a_time_writes() {
        let views: Vec<TensorView<'static>> = (0..7u8)
            .map(|i| {
                let data: Vec<u8> = (0..4000u32 * u32::from(i + 1))
                    .map(|x| (x * 7 + u32::from(i)) as u8 % 13)
                    .collect();
                let n = data.len() as u64;
                TensorView::dense(
                    TensorInfo::dense(format!("t{}", 6 - i), DType::U8, vec![n]),
                    data.into(),
                )
                .unwrap()
            })
            .collect();
        for (compression, digests) in [
            (Compression::Zstd(3), vec![Digest::Sha256]),
            (Compression::Zstd(1), vec![]),
            (Compression::None, vec![Digest::Crc32c]),
        ] {
            let opts = WriteOptions {
                compression,
                digests,
                ..WriteOptions::default()
            };
            let mut one = ZtensorWriter::new(Vec::new(), &opts).unwrap();
            for v in &views {
                one.add_tensor(v).unwrap();
            }
            let one = one.finish().unwrap();
            let mut model = crate::model::Model::new();
            for v in &views {
                model.push(v.clone()).unwrap();
            }
            let order: Vec<String> = views.iter().map(|v| v.info.name.clone()).collect();
            let stream = |order: Vec<String>| ZtensorStream {
                w: ZtensorWriter::new(Vec::new(), &opts).unwrap(),
                order,
            };
            for batch in [1, 10_000, crate::write::stream::READ_AHEAD] {
                let got = crate::write::stream::drive_by(&model, stream(order.clone()), batch);
                assert_eq!(got.unwrap(), one, "batch {batch}");
            }
            // A name seen in an earlier batch is refused.
            let twice = order.iter().chain(&order[..1]).cloned().collect();
            let e = crate::write::stream::drive_by(&model, stream(twice), 1).unwrap_err();
            assert!(e.to_string().contains("duplicate tensor name"), "{e}");
        }
    }
}
