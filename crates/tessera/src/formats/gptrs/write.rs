//! [`GptrsWriter`]: plans the index from the tensor list, writes header and index, then
//! streams the data one tensor at a time; [`write_source`] has the driver
//! ([`crate::write::drive`]) feed it from a [`TensorSource`].

use std::io::Write;

use super::config;
use super::raw::{self, IndexEntry, Kind, VERSION};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::metadata::Value;
use crate::model::TensorSource;
use crate::options::WriteOptions;
use crate::tensor::{dense_nbytes, Layout, TensorInfo, TensorView};
use crate::write::{InOrder, StreamWriter, WriteReport};

/// A tensor the writer will store: what the index needs before any data is written.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedTensor {
    /// Name (ASCII for checkpoints).
    pub name: String,
    /// f32, f16, bf16 or i32.
    pub dtype: DType,
    /// Shape; empty for a scalar (stored as rank 0).
    pub shape: Vec<u64>,
    /// The `requires_grad` flag.
    pub requires_grad: bool,
}

/// Streaming GPTRS v2 writer. [`GptrsWriter::new`] writes the header and the whole
/// index (offsets are planned from the shapes); then the data of every tensor must be
/// given, in name order, with [`GptrsWriter::write_tensor`]; [`GptrsWriter::finish`]
/// checks that all were written and flushes. Nothing is finalized in `Drop`.
pub struct GptrsWriter<W: Write> {
    out: W,
    entries: Vec<IndexEntry>,
    next: InOrder,
}

impl<W: Write> GptrsWriter<W> {
    /// Plans the layout and writes header + index. `config_json` is required for a
    /// checkpoint and refused for an archive. `zero_base_id` stores 0 instead of the
    /// real base ids (as the original Python exporter does).
    pub fn new(
        mut out: W,
        kind: Kind,
        config_json: Option<&[u8]>,
        mut tensors: Vec<PlannedTensor>,
        zero_base_id: bool,
    ) -> Result<GptrsWriter<W>> {
        let config_json = match (kind, config_json) {
            (Kind::Checkpoint, Some(c)) => Some(c),
            (Kind::Checkpoint, None) => {
                return Err(Error::invalid_input(
                    "a GPTRS checkpoint needs a config_json",
                ))
            }
            (Kind::Archive, None) => None,
            (Kind::Archive, Some(_)) => {
                return Err(Error::invalid_input(
                    "a GPTRS tensor archive has no config_json",
                ))
            }
        };
        tensors.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        if let Some(w) = tensors.windows(2).find(|w| w[0].name == w[1].name) {
            return Err(Error::invalid_input(format!(
                "duplicate tensor name {:?}",
                w[0].name
            )));
        }
        let mut entries = Vec::with_capacity(tensors.len());
        for t in &tensors {
            let subject = || format!("tensor {:?}", t.name);
            if kind == Kind::Checkpoint && !t.name.is_ascii() {
                return Err(Error::invalid_input(
                    "checkpoint tensor names must be ASCII (gpt.rs derives base ids from them)",
                )
                .at_subject(subject()));
            }
            let dtype_tag = raw::tag_from_dtype(t.dtype).ok_or_else(|| {
                Error::unsupported(format!(
                    "GPTRS cannot store {} (f32, f16, bf16, i32 only)",
                    t.dtype
                ))
                .with_hint(crate::refusal::Hint::Cast)
                .at_subject(subject())
            })?;
            let byte_len = dense_nbytes(t.dtype, &t.shape)
                .map_err(|e| Error::invalid_input(e.message().to_string()).at_subject(subject()))?;
            entries.push(IndexEntry {
                name: t.name.clone(),
                stored_base_id: if zero_base_id {
                    [0; 16]
                } else {
                    raw::base_id(&t.name)
                },
                dims: t.shape.clone(),
                dtype_tag,
                requires_grad: u8::from(t.requires_grad),
                offset_abs: 0,
                byte_len,
            });
        }
        let too_big = |what: &str| Error::invalid_input(format!("{what} exceeds 4 GiB"));
        let index_len = entries
            .iter()
            .try_fold(4u64, |acc, e| acc.checked_add(e.encoded_len(kind)))
            .ok_or_else(|| too_big("the index"))?;
        let index_len32 = u32::try_from(index_len).map_err(|_| too_big("the index"))?;
        let count = u32::try_from(entries.len()).map_err(|_| {
            Error::invalid_input(format!("{} tensors exceed the u32 count", entries.len()))
        })?;
        let config_len = config_json.map_or(0, |c| c.len() as u64);
        let header = 8
            + 4
            + if config_json.is_some() {
                4 + config_len
            } else {
                0
            }
            + 4;
        let mut offset = header + index_len;
        for e in &mut entries {
            e.offset_abs = offset;
            offset = offset
                .checked_add(e.byte_len)
                .ok_or_else(|| too_big("the file").at_subject(format!("tensor {:?}", e.name)))?;
        }
        let mut head = Vec::with_capacity(header as usize + index_len32 as usize);
        head.extend_from_slice(kind.magic());
        head.extend_from_slice(&VERSION.to_le_bytes());
        if let Some(c) = config_json {
            let n = u32::try_from(c.len()).map_err(|_| too_big("config_json"))?;
            head.extend_from_slice(&n.to_le_bytes());
            head.extend_from_slice(c);
        }
        head.extend_from_slice(&index_len32.to_le_bytes());
        head.extend_from_slice(&count.to_le_bytes());
        for e in &entries {
            e.encode(kind, &mut head)?;
        }
        out.write_all(&head)?;
        Ok(GptrsWriter {
            out,
            entries,
            next: InOrder::new(),
        })
    }

    /// The name whose data is expected next, if any.
    pub fn next_name(&self) -> Option<&str> {
        (self.entries.get(self.next.written())).map(|e| e.name.as_str())
    }

    /// Writes the data of the next tensor (in name order): little-endian, row-major,
    /// exactly the planned length.
    pub fn write_tensor(&mut self, name: &str, data: &[u8]) -> Result<()> {
        let e = self.next.next(&self.entries, name, |e| &e.name)?;
        if data.len() as u64 != e.byte_len {
            return Err(Error::invalid_input(format!(
                "tensor {name:?}: {} bytes given, {} planned",
                data.len(),
                e.byte_len
            )));
        }
        self.out.write_all(data)?;
        self.next.advance();
        Ok(())
    }

    /// Checks that every planned tensor was written, flushes, returns the output.
    pub fn finish(mut self) -> Result<W> {
        (self.next).all_written("GPTRS writer", &self.entries, |e| &e.name)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

fn requires_grad(info: &TensorInfo) -> Result<bool> {
    match info.attrs.get("requires_grad") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::Int(i)) => Ok(*i != 0),
        Some(Value::Str(s)) if s == "true" || s == "false" => Ok(s == "true"),
        Some(other) => Err(Error::invalid_input(format!(
            "attribute requires_grad is {other}, not a boolean"
        ))
        .at_subject(format!("tensor {:?}", info.name))),
    }
}

/// The checkpoint's `config_json` for `src`: the source's own bytes when it is a GPTRS
/// checkpoint whose metadata is unchanged, else the metadata serialized.
fn config_for(src: &dyn TensorSource, report: &mut WriteReport) -> Result<Vec<u8>> {
    let meta = src.metadata();
    if let Ok(raw) = src.chunk(config::RAW_CONFIG_CHUNK) {
        if let Ok(p) = config::parse(&raw, &crate::limits::Limits::default()) {
            if p.metadata == *meta {
                return Ok(raw.into_owned());
            }
        }
    }
    let foreign = src.source_format() != Some(Format::GptrsCheckpoint);
    let (bytes, mut notes) = config::serialize(meta, foreign)?;
    report.notes.append(&mut notes);
    Ok(bytes)
}

/// A [`GptrsWriter`] fed by the driver, which checks each tensor's dtype against the
/// plan (the bytes' length alone would not tell f16 from bf16).
struct GptrsStream<W: Write> {
    w: GptrsWriter<W>,
    dtypes: std::collections::HashMap<String, DType>,
}

impl<W: Write> StreamWriter for GptrsStream<W> {
    type Encoded = ();
    type Done = W;
    fn order(&self) -> Vec<String> {
        self.w.entries.iter().map(|e| e.name.clone()).collect()
    }
    fn write_tensor(&mut self, name: &str, view: TensorView<'_>, _: Option<()>) -> Result<()> {
        let want = self.dtypes.get(name).copied();
        if want != Some(view.info.dtype) {
            return Err(Error::invalid_input(format!(
                "the source described {} but gave {} data",
                want.map_or("nothing", DType::name),
                view.info.dtype
            ))
            .at_subject(format!("tensor {name:?}")));
        }
        self.w.write_tensor(name, view.data()?)
    }
    fn finish(self) -> Result<W> {
        self.w.finish()
    }
}

/// Writes `src` as a GPTRS checkpoint or archive.
pub fn write_source(
    src: &dyn TensorSource,
    out: &mut dyn Write,
    opts: &WriteOptions,
    kind: Kind,
) -> Result<WriteReport> {
    let mut report = WriteReport::default();
    let mut planned = Vec::with_capacity(src.tensor_infos().len());
    for info in src.tensor_infos() {
        if info.layout != Layout::Dense {
            return Err(Error::unsupported(format!(
                "GPTRS stores only dense tensors, this one is {}",
                info.layout
            ))
            .with_hint(crate::refusal::Hint::Densify)
            .at_subject(format!("tensor {:?}", info.name)));
        }
        planned.push(PlannedTensor {
            name: info.name.clone(),
            dtype: info.dtype,
            shape: info.shape.clone(),
            requires_grad: requires_grad(info)?,
        });
    }
    let config = match kind {
        Kind::Checkpoint => Some(config_for(src, &mut report)?),
        Kind::Archive => {
            let n = src.metadata().len();
            if n > 0 {
                return Err(Error::unsupported(format!(
                    "a GPTRS tensor archive carries no metadata and the source has {n} keys \
                     (or write a .gptrs checkpoint)"
                ))
                .with_hint(crate::refusal::Hint::DropMetadata));
            }
            None
        }
    };
    let dtypes = planned.iter().map(|t| (t.name.clone(), t.dtype)).collect();
    let zero_base_id = super::GptrsOptions::from_options(opts)?.zero_base_id;
    let w = GptrsWriter::new(out, kind, config.as_deref(), planned, zero_base_id)?;
    crate::write::drive(src, GptrsStream { w, dtypes })?;
    Ok(report)
}
