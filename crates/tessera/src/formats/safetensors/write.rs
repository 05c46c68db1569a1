//! [`SafetensorsWriter`]: plans the header from the tensor list, then streams the data
//! one tensor at a time, byte-identical to the `safetensors` package (0.8.0).

use std::io::Write;

use super::raw::{self, METADATA_KEY};
use crate::error::{Error, Result};
use crate::metadata::{Metadata, Value};
use crate::model::TensorSource;
use crate::options::WriteOptions;
use crate::tensor::{Layout, TensorInfo, TensorView};
use crate::write::{InOrder, StreamWriter, WriteReport, WriteSeek};

/// One planned tensor: its name, safetensors dtype name, shape and byte length.
#[derive(Debug, Clone)]
struct Planned {
    name: String,
    dtype: &'static str,
    rank: usize,
    shape: Vec<u64>,
    nbytes: u64,
}

/// A streaming safetensors writer. [`SafetensorsWriter::new`] writes the header (it
/// needs every tensor's dtype and shape, not its bytes); then
/// [`SafetensorsWriter::write_tensor`] takes the bytes in [`SafetensorsWriter::order`]
/// and [`SafetensorsWriter::finish`] checks that all came.
pub struct SafetensorsWriter<W: Write> {
    out: W,
    plan: Vec<Planned>,
    next: InOrder,
}

/// Renders a metadata value as the string safetensors stores: strings as they are,
/// everything else as compact JSON text.
pub fn metadata_string(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        other => other.to_json().to_string(),
    }
}

/// The header bytes (JSON padded with spaces to a multiple of 8) for tensors already in
/// file order. Compact JSON with `__metadata__` first, escaping as serde_json does,
/// which is what the original emits.
fn header_bytes(metadata: &Metadata, plan: &[Planned]) -> Result<Vec<u8>> {
    let js = |s: &str| serde_json::to_string(s).map_err(|e| Error::invalid_input(e.to_string()));
    let mut h = String::from("{");
    let mut first = true;
    if !metadata.is_empty() {
        h.push_str(&js(METADATA_KEY)?);
        h.push_str(":{");
        for (i, (k, v)) in metadata.iter().enumerate() {
            if i > 0 {
                h.push(',');
            }
            h.push_str(&js(k)?);
            h.push(':');
            h.push_str(&js(&metadata_string(v))?);
        }
        h.push('}');
        first = false;
    }
    let mut offset = 0u64;
    for p in plan {
        if !first {
            h.push(',');
        }
        first = false;
        let end = offset
            .checked_add(p.nbytes)
            .ok_or_else(|| Error::invalid_input("total tensor bytes overflow u64"))?;
        let shape: Vec<String> = p.shape.iter().map(u64::to_string).collect();
        h.push_str(&js(&p.name)?);
        h.push_str(&format!(
            r#":{{"dtype":"{}","shape":[{}],"data_offsets":[{offset},{end}]}}"#,
            p.dtype,
            shape.join(",")
        ));
        offset = end;
    }
    h.push('}');
    let mut bytes = h.into_bytes();
    let extra = (8 - bytes.len() % 8) % 8;
    bytes.resize(bytes.len() + extra, b' ');
    Ok(bytes)
}

/// The tensors in the given order, checked as [`SafetensorsWriter::new`] checks them.
fn plan(infos: &[TensorInfo]) -> Result<Vec<Planned>> {
    let mut plan = Vec::with_capacity(infos.len());
    let mut names = std::collections::HashSet::new();
    for info in infos {
        if info.layout != Layout::Dense {
            return Err(Error::unsupported(format!(
                "tensor {:?} is {}; safetensors stores only dense tensors",
                info.name, info.layout
            ))
            .with_hint(crate::refusal::Hint::Densify));
        }
        if info.name == METADATA_KEY {
            return Err(Error::invalid_input(
                "a tensor cannot be named \"__metadata__\" in safetensors",
            ));
        }
        if !names.insert(info.name.as_str()) {
            return Err(Error::invalid_input(format!(
                "duplicate tensor name {:?}",
                info.name
            )));
        }
        let (dtype, rank) = raw::dtype_name(info.dtype).ok_or_else(|| {
            Error::unsupported(format!(
                "tensor {:?} is {}, which safetensors cannot store",
                info.name, info.dtype
            ))
            .with_hint(crate::refusal::Hint::Cast)
        })?;
        raw::check_whole_bytes(info.dtype, &info.shape)
            .map_err(|e| Error::unsupported(format!("tensor {:?}: {}", info.name, e.message())))?;
        plan.push(Planned {
            name: info.name.clone(),
            dtype,
            rank,
            shape: info.shape.clone(),
            nbytes: info.dense_nbytes()?,
        });
    }
    Ok(plan)
}

/// The original's order: dtype rank descending, then name bytewise ascending.
fn sort_plan(plan: &mut [Planned]) {
    plan.sort_by(|a, b| b.rank.cmp(&a.rank).then_with(|| a.name.cmp(&b.name)));
}

/// The 8-byte length and the header for `infos` laid out in the order given (their
/// bytes follow in that order), for callers that write the data themselves (FOLD's STEN
/// chunks). Same text as [`SafetensorsWriter::new`], which sorts the tensors as the
/// `safetensors` package does; every safetensors reader accepts any order.
pub fn header_in_order(infos: &[TensorInfo], metadata: &Metadata) -> Result<Vec<u8>> {
    let text = header_bytes(metadata, &plan(infos)?)?;
    let mut out = Vec::with_capacity(8 + text.len());
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(&text);
    Ok(out)
}

impl<W: Write> SafetensorsWriter<W> {
    /// Plans the file from the tensor descriptions and writes the 8-byte length and the
    /// header. Errors (`Unsupported`) name a tensor that is not dense or whose dtype
    /// safetensors cannot name (c128).
    pub fn new(mut out: W, infos: &[TensorInfo], metadata: &Metadata) -> Result<Self> {
        let mut plan = plan(infos)?;
        sort_plan(&mut plan);
        let header = header_bytes(metadata, &plan)?;
        out.write_all(&(header.len() as u64).to_le_bytes())?;
        out.write_all(&header)?;
        Ok(SafetensorsWriter {
            out,
            plan,
            next: InOrder::new(),
        })
    }

    /// Tensor names in the order their bytes must be given.
    pub fn order(&self) -> impl Iterator<Item = &str> {
        self.plan.iter().map(|p| p.name.as_str())
    }

    /// Writes the next tensor's bytes; `name` must be the next in [`Self::order`].
    pub fn write_tensor(&mut self, name: &str, data: &[u8]) -> Result<()> {
        let p = self.next.next(&self.plan, name, |p| &p.name)?;
        if data.len() as u64 != p.nbytes {
            return Err(Error::invalid_input(format!(
                "tensor {name:?}: {} bytes given, {} planned",
                data.len(),
                p.nbytes
            )));
        }
        self.out.write_all(data)?;
        self.next.advance();
        Ok(())
    }

    /// Checks every planned tensor was written, flushes and returns the sink.
    pub fn finish(mut self) -> Result<W> {
        (self.next).all_written("safetensors writer", &self.plan, |p| &p.name)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: Write> StreamWriter for SafetensorsWriter<W> {
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

/// The `WRITE` entry point: streams `src` as safetensors.
pub fn write(
    src: &dyn TensorSource,
    out: &mut dyn WriteSeek,
    _opts: &WriteOptions,
) -> Result<WriteReport> {
    let infos = src.tensor_infos();
    let w = SafetensorsWriter::new(&mut *out, infos, src.metadata())?;
    crate::write::drive(src, w)?;
    let mut report = WriteReport::default();
    let with_attrs = infos.iter().filter(|i| !i.attrs.is_empty()).count();
    if with_attrs > 0 {
        report.notes.push(format!(
            "safetensors has no per-tensor attributes: dropped those of {with_attrs} tensors"
        ));
    }
    let non_str = src
        .metadata()
        .iter()
        .filter(|(_, v)| !matches!(v, Value::Str(_)))
        .count();
    if non_str > 0 {
        report.notes.push(format!(
            "safetensors metadata holds strings only: {non_str} non-string values written as JSON text"
        ));
    }
    Ok(report)
}
