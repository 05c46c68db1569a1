//! The `.pt` writer: a state dict as `torch.save` writes it (zip, stored records, data
//! 64-byte aligned), one storage per tensor, streamed one tensor at a time.

use std::io::{Seek, Write};

use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

use super::pickler::{self, Entry};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::metadata::Metadata;
use crate::model::TensorSource;
use crate::options::WriteOptions;
use crate::tensor::{Layout, TensorInfo, TensorView};
use crate::write::{InOrder, StreamWriter, WriteReport, WriteSeek};

/// torch aligns every record's data to 64 bytes (`kFieldAlignment`).
const ALIGN: u16 = 64;

fn zip_err(e: zip::result::ZipError) -> Error {
    match e {
        zip::result::ZipError::Io(e) => e.into(),
        e => Error::invalid_input(format!("zip: {e}")),
    }
}

fn archive_name(name: Option<&str>) -> Result<String> {
    let name = name.unwrap_or("archive");
    let ok = !name.is_empty()
        && name.len() <= 200
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == '\\' || c.is_control());
    if !ok {
        return Err(Error::invalid_input(format!(
            "archive={name:?}: a non-empty folder name of at most 200 bytes without '/', \
             '\\' or control characters"
        )));
    }
    Ok(name.to_string())
}

/// A streaming `.pt` writer. [`PytorchWriter::new`] writes the pickled state dict (it
/// needs every tensor's name, dtype and shape, not its bytes) and the records torch
/// writes before the data; [`PytorchWriter::write_tensor`] then takes each tensor's
/// bytes in [`PytorchWriter::order`] (the order given), one 64-byte aligned stored
/// record each; [`PytorchWriter::finish`] writes the `version` record and the zip's
/// central directory.
pub struct PytorchWriter<W: Write + Seek> {
    zip: ZipWriter<W>,
    archive: String,
    /// Name, storage key and byte length of each tensor, in order.
    plan: Vec<(String, String, u64)>,
    next: InOrder,
}

impl<W: Write + Seek> PytorchWriter<W> {
    /// Plans the state dict and writes everything before the first tensor's data.
    /// `archive` is the folder inside the zip (`archive` when `None`, as the
    /// `-O archive=` option). Errors name a tensor that is not dense, one whose dtype
    /// torch has no dtype for, an `f4_e2m1` one whose last dimension is odd (torch holds
    /// pairs), or a duplicate name.
    pub fn new(
        out: W,
        infos: &[TensorInfo],
        metadata: &Metadata,
        archive: Option<&str>,
    ) -> Result<Self> {
        Self::start(out, infos, archive, |entries| {
            pickler::state_dict(entries, metadata, super::pickle::METADATA_ATTR)
        })
    }

    /// As [`PytorchWriter::new`], for a training checkpoint as pyfolds'
    /// `save_fold_or_mind` saves one: `{"state_dict": OrderedDict(the tensors), **top}`
    /// (`top`: `config`, `step_id`, `epoch`, …), which `torch.load(weights_only=True)`
    /// loads. A `top` key `state_dict` is refused.
    pub fn checkpoint(
        out: W,
        infos: &[TensorInfo],
        top: &Metadata,
        archive: Option<&str>,
    ) -> Result<Self> {
        if top.get("state_dict").is_some() {
            return Err(Error::invalid_input(
                "a checkpoint's entry \"state_dict\" holds the tensors: the metadata has a key of that name",
            ));
        }
        Self::start(out, infos, archive, |entries| {
            pickler::checkpoint(entries, top)
        })
    }

    fn start(
        out: W,
        infos: &[TensorInfo],
        archive: Option<&str>,
        pickle: impl FnOnce(&[Entry<'_>]) -> Vec<u8>,
    ) -> Result<Self> {
        let archive = archive_name(archive)?;
        let mut names = std::collections::HashSet::new();
        let mut entries = Vec::with_capacity(infos.len());
        let mut plan = Vec::with_capacity(infos.len());
        // float4_e2m1fn_x2 shapes: the logical last dimension halved.
        let pairs: Vec<Option<Vec<u64>>> = infos
            .iter()
            .map(|i| {
                (i.dtype == DType::F4E2M1).then(|| {
                    let mut s = i.shape.clone();
                    if let Some(d) = s.last_mut() {
                        *d /= 2;
                    }
                    s
                })
            })
            .collect();
        for (i, info) in infos.iter().enumerate() {
            if info.layout != Layout::Dense {
                return Err(Error::unsupported(format!(
                    "tensor {:?} is {}; .pt is written with dense tensors only",
                    info.name, info.layout
                ))
                .with_hint(crate::refusal::Hint::Densify));
            }
            if pickler::storage_class(info.dtype).is_none()
                && pickler::v3_dtype(info.dtype).is_none()
            {
                return Err(Error::unsupported(format!(
                    "tensor {:?} is {}, which torch has no dtype for",
                    info.name, info.dtype
                ))
                .with_hint(crate::refusal::Hint::Cast));
            }
            if info.dtype == DType::F4E2M1 && info.shape.last().is_none_or(|d| d % 2 != 0) {
                return Err(Error::unsupported(format!(
                    "tensor {:?} is f4_e2m1 of shape {:?}: torch's float4_e2m1fn_x2 holds \
                     pairs along the last dimension, which must be even",
                    info.name, info.shape
                ))
                .with_hint(crate::refusal::Hint::Cast));
            }
            if !names.insert(info.name.as_str()) {
                return Err(Error::invalid_input(format!(
                    "duplicate tensor name {:?}",
                    info.name
                )));
            }
            entries.push(Entry {
                name: &info.name,
                key: i.to_string(),
                dtype: info.dtype,
                shape: pairs[i].as_deref().unwrap_or(&info.shape),
            });
            plan.push((info.name.clone(), i.to_string(), info.dense_nbytes()?));
        }
        let pkl = pickle(&entries);
        let mut w = PytorchWriter {
            zip: ZipWriter::new(out),
            archive,
            plan,
            next: InOrder::new(),
        };
        w.record("data.pkl", &pkl)?;
        // As torch 2.x: storages in numeric key order (format version 1), 64-byte aligned.
        w.record(".format_version", b"1")?;
        w.record(".storage_alignment", ALIGN.to_string().as_bytes())?;
        w.record("byteorder", b"little")?;
        Ok(w)
    }

    fn record(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        let o = SimpleFileOptions::default()
            .compression_method(CompressionMethod::Stored)
            .with_alignment(ALIGN)
            .large_file(bytes.len() as u64 >= u32::MAX as u64);
        self.zip
            .start_file(format!("{}/{name}", self.archive), o)
            .map_err(zip_err)?;
        self.zip.write_all(bytes)?;
        Ok(())
    }

    /// Tensor names in the order their bytes must be given (the order of `infos`).
    pub fn order(&self) -> impl Iterator<Item = &str> {
        self.plan.iter().map(|p| p.0.as_str())
    }

    /// Writes the next tensor's bytes (`name` must be the next in [`Self::order`]) as
    /// its storage record.
    pub fn write_tensor(&mut self, name: &str, data: &[u8]) -> Result<()> {
        let (_, key, nbytes) = self.next.next(&self.plan, name, |p| &p.0)?;
        if data.len() as u64 != *nbytes {
            return Err(Error::invalid_input(format!(
                "tensor {name:?}: {} bytes given, {nbytes} expected",
                data.len()
            )));
        }
        let record = format!("data/{key}");
        self.record(&record, data)?;
        self.next.advance();
        Ok(())
    }

    /// Checks every planned tensor was written, writes the `version` record and the
    /// central directory, flushes and returns the sink.
    pub fn finish(mut self) -> Result<W> {
        (self.next).all_written(".pt writer", &self.plan, |p| &p.0)?;
        self.record("version", b"3\n")?;
        let mut out = self.zip.finish().map_err(zip_err)?;
        out.flush()?;
        Ok(out)
    }
}

impl<W: Write + Seek> StreamWriter for PytorchWriter<W> {
    type Encoded = ();
    type Done = W;
    fn order(&self) -> Vec<String> {
        self.order().map(str::to_string).collect()
    }
    fn write_tensor(&mut self, name: &str, view: TensorView<'_>, _: Option<()>) -> Result<()> {
        self.write_tensor(name, view.data()?)
    }
    fn finish(self) -> Result<W> {
        self.finish()
    }
}

/// The `WRITE` entry point: `src` as a `torch.save` state dict.
pub fn write(
    src: &dyn TensorSource,
    out: &mut dyn WriteSeek,
    opts: &WriteOptions,
) -> Result<WriteReport> {
    let infos = src.tensor_infos();
    let w = PytorchWriter::new(
        &mut *out,
        infos,
        src.metadata(),
        super::PytorchOptions::from_options(opts)?
            .archive
            .as_deref(),
    )?;
    crate::write::drive(src, w)?;
    let mut report = WriteReport::default();
    let with_attrs = infos.iter().filter(|i| !i.attrs.is_empty()).count();
    if with_attrs > 0 {
        report.notes.push(format!(
            ".pt has no per-tensor attributes: dropped those of {with_attrs} tensors"
        ));
    }
    Ok(report)
}
