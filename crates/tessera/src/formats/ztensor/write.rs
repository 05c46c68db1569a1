//! [`ZtensorWriter`]: the streaming writer.
//!
//! Components go out as they come (zero padding to 64 bytes before each, zstd streamed
//! through a hashing, counting sink), so memory stays near one tensor; only the manifest
//! entries (a few dozen bytes per component) are kept until [`ZtensorWriter::finish`]
//! writes the CBOR manifest and its size.

use std::collections::BTreeMap;
use std::io::Write;

use super::raw::{self, OutComponent, OutManifest, OutTensor, ALIGNMENT, MAGIC};
use crate::convert::{Compression, Digest, WriteOptions, WriteReport, WriteSeek};
use crate::error::{Error, Result};
use crate::metadata::{Metadata, Value};
use crate::model::TensorSource;
use crate::tensor::TensorView;

/// The `generator` we write.
pub const GENERATOR: &str = concat!("tessera v", env!("CARGO_PKG_VERSION"));

/// Counts bytes and hashes them on their way to `inner`.
struct Sink<'a, W: Write> {
    inner: &'a mut W,
    count: u64,
    crc: Option<u32>,
    sha: Option<sha2::Sha256>,
}

impl<W: Write> Write for Sink<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        let done = &buf[..n];
        self.count += n as u64;
        if let Some(c) = &mut self.crc {
            *c = crc32c::crc32c_append(*c, done);
        }
        if let Some(s) = &mut self.sha {
            sha2::Digest::update(s, done);
        }
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
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
                [] => None,
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
        let mut components = BTreeMap::new();
        for &i in &order {
            let p = &view.parts[i];
            if components.contains_key(&p.role) {
                return Err(Error::invalid_input(format!("duplicate part {:?}", p.role))
                    .at_subject(subject));
            }
            let c = self.write_component(&p.bytes).map_err(|e| {
                self.failed = true;
                e.at_subject(subject.clone())
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

    fn write_component(&mut self, bytes: &[u8]) -> Result<OutComponent> {
        let pad = (ALIGNMENT - self.pos % ALIGNMENT) % ALIGNMENT;
        self.out.write_all(&[0u8; 64][..pad as usize])?;
        self.pos += pad;
        let offset = self.pos;
        let mut sink = Sink {
            inner: &mut self.out,
            count: 0,
            crc: (self.digest == Some(Digest::Crc32c)).then_some(0),
            sha: (self.digest == Some(Digest::Sha256)).then(<sha2::Sha256 as sha2::Digest>::new),
        };
        let encoding = match self.compression {
            Compression::None => {
                sink.write_all(bytes)?;
                None
            }
            Compression::Zstd(level) => {
                // A streaming frame without a content size, as the original writes.
                let mut enc = zstd::stream::write::Encoder::new(&mut sink, level)?;
                enc.write_all(bytes)?;
                enc.finish()?;
                Some("zstd")
            }
        };
        let digest = match (sink.crc, sink.sha.take()) {
            (Some(c), _) => Some(format!("crc32c:0x{c:08X}")),
            (None, Some(s)) => Some(format!(
                "sha256:{}",
                crate::util::hex(&sha2::Digest::finalize(s))
            )),
            _ => None,
        };
        let length = sink.count;
        self.pos += length;
        Ok(OutComponent {
            offset,
            length,
            encoding,
            digest,
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
            "zTensor cannot carry opaque chunks (first: {:?}); convert with --drop-metadata",
            c.name
        )));
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
    for info in src.tensor_infos() {
        let view = src.tensor(&info.name)?;
        if !view.info.attrs.is_empty() {
            let keys: Vec<&str> = view.info.attrs.keys().collect();
            report.notes.push(format!(
                "dropped per-tensor attributes of {:?} (zTensor v1.0 has none): {}",
                info.name,
                keys.join(", ")
            ));
        }
        w.add_tensor(&view)?;
    }
    w.finish()?;
    Ok(report)
}
