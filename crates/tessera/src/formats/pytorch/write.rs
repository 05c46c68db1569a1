//! The `.pt` writer: a state dict as `torch.save` writes it (zip, stored records, data
//! 64-byte aligned), one storage per tensor, streamed one tensor at a time.

use std::io::Write;

use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

use super::pickler::{self, Entry};
use crate::convert::{WriteOptions, WriteReport, WriteSeek};
use crate::error::{Error, Result};
use crate::model::TensorSource;
use crate::options::{OptionKind, OptionSpec};
use crate::tensor::Layout;

/// `-O archive=NAME`: the folder the records sit in (torch names it after the file's
/// stem; Tessera writes `archive`, as torch does for a buffer).
pub const ARCHIVE: OptionSpec = OptionSpec {
    name: "archive",
    kind: OptionKind::Text,
    help: "the folder name inside the zip (default: archive)",
    aliases: &[],
};

/// torch aligns every record's data to 64 bytes (`kFieldAlignment`).
const ALIGN: u16 = 64;

fn zip_err(e: zip::result::ZipError) -> Error {
    match e {
        zip::result::ZipError::Io(e) => e.into(),
        e => Error::invalid_input(format!("zip: {e}")),
    }
}

fn archive_name(opts: &WriteOptions) -> Result<String> {
    let name = opts.extra_text(ARCHIVE.name).unwrap_or("archive");
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

/// The `WRITE` entry point: `src` as a `torch.save` state dict.
pub fn write(
    src: &dyn TensorSource,
    out: &mut dyn WriteSeek,
    opts: &WriteOptions,
) -> Result<WriteReport> {
    let archive = archive_name(opts)?;
    let infos = src.tensor_infos();
    let mut names = std::collections::HashSet::new();
    let mut entries = Vec::with_capacity(infos.len());
    for (i, info) in infos.iter().enumerate() {
        if info.layout != Layout::Dense {
            return Err(Error::unsupported(format!(
                "tensor {:?} is {}; .pt is written with dense tensors only",
                info.name, info.layout
            ))
            .with_hint(crate::refusal::Hint::Densify));
        }
        if pickler::storage_class(info.dtype).is_none() {
            return Err(Error::unsupported(format!(
                "tensor {:?} is {}, which torch 1.13 has no storage for",
                info.name, info.dtype
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
            shape: &info.shape,
        });
    }
    let pkl = pickler::state_dict(&entries, src.metadata(), super::pickle::METADATA_ATTR);

    let base = SimpleFileOptions::default()
        .compression_method(CompressionMethod::Stored)
        .with_alignment(ALIGN);
    let mut zip = ZipWriter::new(out);
    let record = |zip: &mut ZipWriter<_>, name: &str, bytes: &[u8]| -> Result<()> {
        let o = base.large_file(bytes.len() as u64 >= u32::MAX as u64);
        zip.start_file(format!("{archive}/{name}"), o)
            .map_err(zip_err)?;
        zip.write_all(bytes)?;
        Ok(())
    };
    record(&mut zip, "data.pkl", &pkl)?;
    // As torch 2.x: storages in numeric key order (format version 1), 64-byte aligned.
    record(&mut zip, ".format_version", b"1")?;
    record(&mut zip, ".storage_alignment", ALIGN.to_string().as_bytes())?;
    record(&mut zip, "byteorder", b"little")?;
    for (e, info) in entries.iter().zip(infos) {
        let view = src.tensor(&info.name)?;
        let data = view.data()?;
        let want = info.dense_nbytes()?;
        if data.len() as u64 != want {
            return Err(Error::invalid_input(format!(
                "tensor {:?}: {} bytes given, {want} expected",
                info.name,
                data.len()
            )));
        }
        record(&mut zip, &format!("data/{}", e.key), data)?;
    }
    record(&mut zip, "version", b"3\n")?;
    zip.finish().map_err(zip_err)?.flush()?;
    let mut report = WriteReport::default();
    let with_attrs = infos.iter().filter(|i| !i.attrs.is_empty()).count();
    if with_attrs > 0 {
        report.notes.push(format!(
            ".pt has no per-tensor attributes: dropped those of {with_attrs} tensors"
        ));
    }
    Ok(report)
}
