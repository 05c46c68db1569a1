//! Writers: one `.npy` (exactly what `np.save` writes for the same C-order array), and
//! `.npz` (a zip of `NAME.npy` members, stored or deflated), streamed one tensor at a
//! time.

use std::io::{Seek, Write};

use super::header;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::model::TensorSource;
use crate::options::{Compression, WriteOptions};
use crate::tensor::{Layout, TensorInfo, TensorView};
use crate::write::{StreamWriter, WriteReport, WriteSeek};

fn check_dense(info: &TensorInfo) -> Result<()> {
    if info.layout != Layout::Dense {
        return Err(Error::unsupported(format!(
            "tensor {:?} is {}; NumPy arrays are dense",
            info.name, info.layout
        ))
        .with_hint(crate::refusal::Hint::Densify));
    }
    Ok(())
}

fn notes(src: &dyn TensorSource) -> Vec<String> {
    let mut notes = Vec::new();
    let fp8 = src
        .tensor_infos()
        .iter()
        .filter(|i| {
            matches!(
                i.dtype,
                DType::F8E5M2 | DType::F8E4M3FNUZ | DType::F8E5M2FNUZ | DType::F8E8M0
            )
        })
        .count();
    if fp8 > 0 {
        notes.push(format!(
            "{fp8} fp8 tensors written as '<V1' (NumPy has no fp8; reads back as f8_e4m3fn)"
        ));
    }
    let attrs = src
        .tensor_infos()
        .iter()
        .filter(|i| !i.attrs.is_empty())
        .count();
    if attrs > 0 {
        notes.push(format!(
            "NumPy files have no per-tensor attributes: dropped those of {attrs} tensors"
        ));
    }
    notes
}

/// Writes one array: the `np.save` header, then the bytes.
fn write_array(src: &dyn TensorSource, info: &TensorInfo, out: &mut dyn Write) -> Result<()> {
    check_dense(info)?;
    let view = src.tensor(&info.name)?;
    let data = view.data()?;
    out.write_all(&header::write(info.dtype, &info.shape))?;
    out.write_all(data)?;
    Ok(())
}

/// The `WRITE_NPY` entry point: the source must hold exactly one tensor.
pub fn write_npy(
    src: &dyn TensorSource,
    out: &mut dyn WriteSeek,
    _opts: &WriteOptions,
) -> Result<WriteReport> {
    let infos = src.tensor_infos();
    let [info] = infos else {
        return Err(Error::invalid_input(format!(
            "a .npy file holds exactly one array; the source has {} tensors (write .npz, or \
             `tessera extract FILE NAME -o OUT.npy`)",
            infos.len()
        )));
    };
    write_array(src, info, out)?;
    out.flush()?;
    Ok(WriteReport {
        notes: notes(src),
        ..Default::default()
    })
}

/// Refuses tensor names that would make a hostile zip entry.
fn check_member_name(name: &str) -> Result<()> {
    let bad = name.is_empty()
        || name.starts_with('/')
        || name.contains('\\')
        || name.contains('\0')
        || name.split('/').any(|c| c == ".." || c.is_empty());
    if bad {
        return Err(Error::invalid_input(format!(
            "tensor name {name:?} cannot be an .npz member name (empty, absolute or '..' path)"
        )));
    }
    Ok(())
}

/// A streaming `.npz` writer over any `Write + Seek`.
pub struct NpzWriter<W: Write + Seek> {
    zip: zip::ZipWriter<W>,
    options: zip::write::SimpleFileOptions,
}

impl<W: Write + Seek> NpzWriter<W> {
    /// Starts an archive; `deflate = Some(level)` (1–9) compresses every member (as
    /// `np.savez_compressed`, which uses level 6), `None` stores them (as `np.savez`).
    pub fn new(out: W, deflate: Option<i64>) -> NpzWriter<W> {
        let (method, level) = match deflate {
            Some(l) => (zip::CompressionMethod::Deflated, Some(l.clamp(1, 9))),
            None => (zip::CompressionMethod::Stored, None),
        };
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(method)
            .compression_level(level)
            .last_modified_time(zip::DateTime::default())
            .unix_permissions(0o644);
        NpzWriter {
            zip: zip::ZipWriter::new(out),
            options,
        }
    }

    /// Adds `NAME.npy` with the header and `data` (little-endian, C order).
    pub fn add(&mut self, name: &str, dtype: DType, shape: &[u64], data: &[u8]) -> Result<()> {
        check_member_name(name)?;
        let head = header::write(dtype, shape);
        let total = head.len() as u64 + data.len() as u64;
        let opts = self.options.large_file(total >= u32::MAX as u64);
        self.zip
            .start_file(format!("{name}.npy"), opts)
            .map_err(|e| Error::invalid_input(format!("zip: {e}")).at_subject(name))?;
        self.zip.write_all(&head)?;
        self.zip.write_all(data)?;
        Ok(())
    }

    /// Writes the central directory and returns the sink.
    pub fn finish(self) -> Result<W> {
        self.zip
            .finish()
            .map_err(|e| Error::from(std::io::Error::other(e)))
    }
}

/// An [`NpzWriter`] with the order its members come in (the source's). Deflate runs
/// on the writing thread, inside the zip writer: its output is the `zip` crate's,
/// which an encoding companion would have to reproduce.
struct NpzStream<W: Write + Seek> {
    w: NpzWriter<W>,
    order: Vec<String>,
}

impl<W: Write + Seek> StreamWriter for NpzStream<W> {
    type Encoded = ();
    type Done = W;
    fn order(&self) -> Vec<String> {
        self.order.clone()
    }
    fn write_tensor(&mut self, name: &str, view: TensorView<'_>, _: Option<()>) -> Result<()> {
        let info = &view.info;
        self.w.add(name, info.dtype, &info.shape, view.data()?)
    }
    fn finish(self) -> Result<W> {
        self.w.finish()
    }
}

/// The `WRITE_NPZ` entry point: stored members, or deflated when any compression is
/// asked for (`--compress zstd[:L]` → deflate at level L clamped to 1–9, default 3: zip
/// members of an .npz that NumPy reads can only be stored or deflated).
pub fn write_npz(
    src: &dyn TensorSource,
    out: &mut dyn WriteSeek,
    opts: &WriteOptions,
) -> Result<WriteReport> {
    let deflate = match opts.compression {
        Compression::None => None,
        Compression::Zstd(l) => Some(l as i64),
    };
    for info in src.tensor_infos() {
        check_dense(info)?;
    }
    let w = NpzStream {
        w: NpzWriter::new(&mut *out, deflate),
        order: src.tensor_infos().iter().map(|i| i.name.clone()).collect(),
    };
    crate::write::drive(src, w)?.flush()?;
    let mut notes = notes(src);
    if let Compression::Zstd(_) = opts.compression {
        notes.push(format!(
            "npz members compressed with deflate level {} (NumPy reads no zstd)",
            deflate.unwrap_or(3).clamp(1, 9)
        ));
    }
    Ok(WriteReport {
        notes,
        ..Default::default()
    })
}
