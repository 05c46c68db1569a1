//! [`ZtensorWriter`]: the streaming writer.
//!
//! Components go out in order, zero padding to 64 bytes before each. Raw components
//! without a digest are written as they are; the others are first encoded (zstd, with
//! a reused context per thread; the digest over the stored bytes), which
//! [`ZtensorWriter::add_tensors`] does for a batch of tensors on every core while this
//! thread writes the previous batch. Memory stays near two batches
//! ([`BATCH_BYTES`] of input, or one tensor); only the manifest entries (a few dozen
//! bytes per component) are kept until [`ZtensorWriter::finish`] writes the CBOR
//! manifest and its size.

use std::collections::BTreeMap;
use std::io::Write;

use rayon::prelude::*;

use super::raw::{self, OutComponent, OutManifest, OutTensor, ALIGNMENT, MAGIC};
use crate::error::{Error, Result};
use crate::metadata::{Metadata, Value};
use crate::model::TensorSource;
use crate::options::{Compression, Digest, WriteOptions};
use crate::tensor::TensorView;
use crate::write::{WriteReport, WriteSeek};

/// The `generator` we write.
pub const GENERATOR: &str = concat!("tessera v", env!("CARGO_PKG_VERSION"));

/// Input bytes of one batch of tensors encoded in parallel (at least one tensor).
pub const BATCH_BYTES: u64 = 64 << 20;

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

/// A tensor checked and its parts put in component order, ready to be encoded.
struct Planned<'v> {
    view: TensorView<'v>,
    dtype: &'static str,
    order: Vec<usize>,
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
    /// [`BATCH_BYTES`] (smaller in tests, to cross batches).
    batch: u64,
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
            batch: BATCH_BYTES,
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

    /// Adds tensors in order, encoding each batch's components on the rayon pool while
    /// this thread writes the previous batch (raw components without a digest need no
    /// encoding: they are written as they are). `next` yields the tensors; an error
    /// ends the write.
    pub fn add_tensors<'v>(
        &mut self,
        mut next: impl FnMut() -> Option<Result<TensorView<'v>>>,
    ) -> Result<()> {
        self.check()?;
        let (compression, digest) = (self.compression, self.digest);
        if compression == Compression::None && digest.is_none() {
            // Nothing to encode: each tensor goes out as it comes.
            while let Some(view) = next() {
                self.add_tensor(&view?)?;
            }
            return Ok(());
        }
        let encode_batch = |batch: &[Planned<'v>]| -> Vec<Vec<Result<Encoded>>> {
            let jobs: Vec<(usize, &[u8])> = batch
                .iter()
                .enumerate()
                .flat_map(|(t, p)| {
                    p.order
                        .iter()
                        .map(move |&i| (t, &p.view.parts[i].bytes[..]))
                })
                .collect();
            let mut out: Vec<Vec<Result<Encoded>>> = batch.iter().map(|_| Vec::new()).collect();
            let done: Vec<(usize, Result<Encoded>)> = jobs
                .par_iter()
                .map(|&(t, b)| (t, encode(b, compression, digest)))
                .collect();
            for (t, e) in done {
                out[t].push(e);
            }
            out
        };
        let budget = self.batch;
        crate::util::pipeline::encode_while_writing(
            self,
            budget,
            |w, batch: &[Planned<'v>]| {
                let view = match next()? {
                    Ok(v) => v,
                    Err(e) => return Some(Err(e)),
                };
                if batch.iter().any(|p| p.view.info.name == view.info.name) {
                    return Some(Err(Error::invalid_input(format!(
                        "duplicate tensor name {:?}",
                        view.info.name
                    ))));
                }
                let (dtype, order) = match w.plan(&view) {
                    Ok(planned) => planned,
                    Err(e) => return Some(Err(e)),
                };
                let size = view.parts.iter().map(|p| p.bytes.len() as u64).sum::<u64>();
                Some(Ok((Planned { view, dtype, order }, size)))
            },
            encode_batch,
            |w, planned, enc| {
                planned
                    .iter()
                    .zip(enc)
                    .try_for_each(|(p, e)| w.place_encoded(p, e))
            },
            "ztensor",
        )
    }

    fn place_encoded(&mut self, p: &Planned<'_>, enc: Vec<Result<Encoded>>) -> Result<()> {
        self.place(&p.view, p.dtype, &p.order, enc)
    }

    fn encode_part(&self, bytes: &[u8]) -> Result<Encoded> {
        encode(bytes, self.compression, self.digest)
    }

    /// Checks a tensor and orders its parts as components (layout order).
    fn plan(&self, view: &TensorView<'_>) -> Result<(&'static str, Vec<usize>)> {
        let info = &view.info;
        let subject = format!("tensor {:?}", info.name);
        if self.tensors.contains_key(&info.name) {
            return Err(Error::invalid_input(format!(
                "duplicate tensor name {:?}",
                info.name
            )));
        }
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
            return Err(
                Error::invalid_input(format!("duplicate part {:?}", w[0])).at_subject(subject)
            );
        }
        Ok((dtype, order))
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
    let mut infos = src.tensor_infos().iter();
    w.add_tensors(|| {
        let info = infos.next()?;
        let view = src.tensor(&info.name);
        if let Ok(view) = &view {
            if !view.info.attrs.is_empty() {
                let keys: Vec<&str> = view.info.attrs.keys().collect();
                report.notes.push(format!(
                    "dropped per-tensor attributes of {:?} (zTensor v1.0 has none): {}",
                    info.name,
                    keys.join(", ")
                ));
            }
        }
        Some(view)
    })?;
    w.finish()?;
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
            for batch in [1, 10_000, BATCH_BYTES] {
                let mut w = ZtensorWriter::new(Vec::new(), &opts).unwrap();
                w.batch = batch;
                let mut it = views.iter().cloned();
                w.add_tensors(|| it.next().map(Ok)).unwrap();
                assert_eq!(w.finish().unwrap(), one, "batch {batch}");
            }
            // A name seen in an earlier batch is refused.
            let mut w = ZtensorWriter::new(Vec::new(), &opts).unwrap();
            w.batch = 1;
            let mut it = views.iter().chain(&views[..1]).cloned();
            let e = w.add_tensors(|| it.next().map(Ok)).unwrap_err();
            assert!(e.to_string().contains("duplicate tensor name"), "{e}");
        }
    }
}
