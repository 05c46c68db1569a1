//! Writing and converting: the driver that finds a format's writer ([`writer_for`],
//! [`capabilities`]), and the adapter that makes a source fit a target (or refuses,
//! naming the tensor and the reason). What a writer is given and returns — the write
//! contract — is [`crate::write`] and [`crate::options`], below the formats; it is
//! re-exported here under its old paths.
//!
//! A conversion never loses anything silently. When the target cannot hold a tensor's
//! dtype or layout, or the file's metadata or opaque chunks, [`prepare`] refuses with one
//! `Unsupported` error listing every refusal ([`Error::refusals`]), each naming the
//! tensor and carrying the [`Hint`] that would allow the loss (cast, densify,
//! drop-metadata, dequantize: the CLI shows them as flags, Python as keywords); with
//! the option it converts and reports what it changed.

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::metadata::Metadata;
use crate::model::TensorSource;
use crate::refusal::{Hint, Refusal};
use crate::tensor::{ChunkInfo, Layout, TensorInfo, TensorView};

pub use crate::options::{Compression, Digest, WriteOptions};
pub use crate::write::{Capabilities, MetadataSupport, WriteFn, WriteReport, WriteSeek};

/// Options of a conversion that allow a loss, each explicitly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConvertOptions {
    /// Decode packed ggml blocks (GGUF's quantized tensors, layout `ggml_*`, in any
    /// format that carries them) to this float dtype (F32, F16 or BF16), bit-identical
    /// to gguf-py's `dequantize` (`--dequantize`; [`crate::quant`]).
    pub dequantize: Option<DType>,
    /// Writing a format whose codec [`quantizes`](crate::formats::Codec::quantizes)
    /// (GGUF): encode float tensors as these blocks, bit-identical to gguf-py's
    /// `quantize`; 1-D tensors and rows that are not whole blocks stay float, noted
    /// (`--quantize`).
    pub quantize: Option<crate::quant::QuantKind>,
    /// Cast dtypes the target cannot hold to the nearest one it can.
    pub cast: bool,
    /// Store sparse tensors densely when the target has no sparse layouts.
    pub densify: bool,
    /// Drop file metadata and opaque chunks the target cannot carry.
    pub drop_metadata: bool,
}

crate::setters::setters!(ConvertOptions {
    /// Sets `dequantize`: decode packed ggml blocks to this float dtype.
    dequantize: Option<DType>,
    /// Sets `quantize`: encode float tensors as these ggml blocks.
    quantize: Option<crate::quant::QuantKind>,
    /// Sets `cast`: cast dtypes the target cannot hold to the nearest one it can.
    cast: bool,
    /// Sets `densify`: store sparse tensors densely when the target cannot.
    densify: bool,
    /// Sets `drop_metadata`: drop metadata and chunks the target cannot carry.
    drop_metadata: bool,
});

/// The writer for a format, when it is implemented (from its codec).
pub fn writer_for(format: Format) -> Option<WriteFn> {
    format.codec().writer
}

/// The capabilities of a format, when Tessera knows how to write it (from its codec).
pub fn capabilities(format: Format) -> Option<Capabilities> {
    format.codec().capabilities.map(|c| c())
}

/// A source adapted to a target: tensors densified or cast as allowed, metadata and
/// chunks dropped as allowed. Built by [`prepare`].
pub struct Prepared<'s> {
    src: &'s dyn TensorSource,
    infos: Vec<TensorInfo>,
    plans: Vec<Plan>,
    /// Tensor name → position in `infos`/`plans`.
    index: std::collections::HashMap<String, usize>,
    metadata: Metadata,
    /// The source's metadata value types, forwarded to a target of the same format.
    metadata_types: Option<Metadata>,
    /// The source's chunks less the TSAV chunks whose tensors go out as tensors.
    chunks: Vec<ChunkInfo>,
    keep_chunks: bool,
    notes: Vec<String>,
    /// The MXFP4 pairs `--dequantize` decodes ([`Plan::MxPair`] indexes it).
    mx_pairs: Vec<crate::quant::mx::MxPair>,
}

/// The packed dtype of a tensor carried as its stored bytes ([`Layout::undecoded`]
/// `dense:f4_e2m1`, dtype `u8`, one part), when Tessera knows it.
fn carried_dtype(info: &TensorInfo) -> Option<DType> {
    let d = DType::from_name(info.layout.undecoded_type()?)?;
    (d.is_packed() && info.dtype == DType::U8).then_some(d)
}

#[derive(Clone, Copy)]
enum Plan {
    AsIs,
    /// A packed sub-byte tensor as [`Layout::undecoded`] `u8` bytes.
    Carry,
    Densify,
    Cast(DType),
    DensifyCast(DType),
    /// `--dequantize` / `--quantize` (`quant::adapt`).
    Quant(crate::quant::adapt::Step),
    /// `--dequantize` of an MXFP4 `_blocks` + `_scales` pair (`quant::mx`): the tensor
    /// is read from the two (`Prepared::mx_pairs[k]`).
    MxPair(usize),
}

/// Checks that `target` can hold everything in `src`, applying the losses `opts`
/// allows. A source it cannot hold is refused with every reason at once
/// ([`Error::refusals`]: each tensor, the metadata, the chunks, with the [`Hint`] that
/// would allow it), not only the first.
pub fn prepare<'s>(
    src: &'s dyn TensorSource,
    target: Format,
    opts: ConvertOptions,
) -> Result<Prepared<'s>> {
    let caps = capabilities(target).ok_or_else(|| target.not_supported_yet())?;
    use crate::quant::adapt;
    adapt::check_dequantize(opts.dequantize)?;
    if opts.quantize.is_some() && !target.codec().quantizes {
        let to: Vec<&str> = Format::ALL
            .into_iter()
            .filter(|f| f.codec().quantizes)
            .map(Format::title)
            .collect();
        let to = match to.is_empty() {
            true => "a format this build has none of".to_string(),
            false => to.join(" or "),
        };
        return Err(Error::invalid_input(format!(
            "quantize writes {to}; the target is {title}",
            title = target.title()
        )));
    }
    let title = target.title();
    let mut infos = Vec::new();
    let mut plans = Vec::new();
    let mut notes = Vec::new();
    let mut refused: Vec<Refusal> = Vec::new();
    // MXFP4 pairs (`X_blocks` + `X_scales`, gpt-oss): with `--dequantize`, one tensor
    // `X` where `X_blocks` was, and `X_scales` consumed.
    let mx_pairs = match opts.dequantize {
        Some(_) => crate::quant::mx::pairs(src.tensor_infos()),
        None => Vec::new(),
    };
    let scales_of_pairs: std::collections::HashSet<&str> =
        mx_pairs.iter().map(|p| p.scales.as_str()).collect();
    for info in src.tensor_infos() {
        let name = info.name.as_str();
        if scales_of_pairs.contains(name) {
            continue;
        }
        if let (Some(k), Some(to)) = (
            mx_pairs.iter().position(|p| p.blocks == name),
            opts.dequantize,
        ) {
            let pair = &mx_pairs[k];
            match crate::quant::mx::pair_info(pair, info, to) {
                Ok(out) if caps.dtypes.contains(&to) => {
                    notes.push(format!(
                        "dequantized the MXFP4 pair {:?} + {:?} -> {:?} ({to})",
                        pair.blocks, pair.scales, pair.name
                    ));
                    infos.push(out);
                    plans.push(Plan::MxPair(k));
                }
                Ok(_) => refused.push(Refusal::tensor(
                    name,
                    format!("dequantized to {to}, which {title} cannot store"),
                    Some(Hint::Dequantize),
                )),
                Err(e) => refused.push(Refusal::tensor(name, e.message(), None)),
            }
            continue;
        }
        let decoded;
        let info = match carried_dtype(info) {
            Some(d) => {
                let mut i = info.clone();
                i.layout = Layout::Dense;
                i.dtype = d;
                decoded = i;
                &decoded
            }
            _ => info,
        };
        match adapt::plan(info, opts.dequantize, opts.quantize, &mut notes) {
            Ok(Some((out, step))) => {
                if !caps.dtypes.contains(&out.dtype) && out.layout == Layout::Dense {
                    refused.push(Refusal::tensor(
                        name,
                        format!("dequantized to {}, which {title} cannot store", out.dtype),
                        Some(Hint::Dequantize),
                    ));
                }
                infos.push(out);
                plans.push(Plan::Quant(step));
                continue;
            }
            Ok(None) => {}
            Err(e) => {
                let mut r = Refusal::file(e.message(), None);
                r.hint = e.hints().first().copied();
                refused.push(r);
                continue;
            }
        }
        let mut out = info.clone();
        let densify = match &info.layout {
            Layout::Dense => false,
            Layout::SparseCsr | Layout::SparseCoo if caps.sparse => false,
            Layout::SparseCsr | Layout::SparseCoo => {
                if !opts.densify {
                    refused.push(Refusal::tensor(
                        name,
                        format!("{}, and {title} stores only dense tensors", info.layout),
                        Some(Hint::Densify),
                    ));
                    continue;
                }
                out.layout = Layout::Dense;
                notes.push(format!("densified {:?} ({})", info.name, info.layout));
                true
            }
            Layout::Other(_) if caps.other_layouts => false,
            Layout::Other(_) if info.layout.undecoded_type().is_some() => {
                refused.push(Refusal::tensor(name, undecoded_reason(info, title), None));
                continue;
            }
            Layout::Other(l) => {
                let hint = adapt::packed_type(info).map(|_| Hint::Dequantize);
                refused.push(Refusal::tensor(
                    name,
                    format!("in layout {l:?}, which {title} cannot store"),
                    hint,
                ));
                continue;
            }
        };
        // A packed sub-byte float the target has no dtype for, into a format that keeps
        // layouts by name (FOLD, zTensor v1, AERO): carried as its stored bytes, the
        // type in the layout (`dense:f4_e2m1`), as zTensor v2 names it, unless a cast
        // was asked for.
        if info.layout == Layout::Dense
            && info.dtype.is_packed()
            && !caps.dtypes.contains(&info.dtype)
            && caps.other_layouts
            && !opts.cast
        {
            out.layout = Layout::undecoded(info.dtype.name());
            out.dtype = DType::U8;
            out.storage = Default::default();
            notes.push(format!(
                "carried {:?} ({}) as its packed bytes",
                info.name, info.dtype
            ));
            infos.push(out);
            plans.push(Plan::Carry);
            continue;
        }
        // For `Other` layouts the dtype is a storage type (GGUF's packed ggml blocks are
        // u8); whether the target can hold the layout is the writer's call.
        let cast = if caps.dtypes.contains(&info.dtype) || matches!(info.layout, Layout::Other(_)) {
            None
        } else if !opts.cast {
            refused.push(Refusal::tensor(
                name,
                format!("{}, which {title} cannot store", info.dtype),
                Some(Hint::Cast),
            ));
            continue;
        } else if !matches!(out.layout, Layout::Dense) {
            refused.push(Refusal::tensor(
                name,
                format!("{}, and a {} tensor cannot be cast", info.dtype, out.layout),
                Some(Hint::Densify),
            ));
            continue;
        } else {
            let Some(to) = crate::cast::cast_target(info.dtype, caps.dtypes) else {
                refused.push(Refusal::tensor(
                    name,
                    format!("{}, and {title} has no dtype it can be cast to", info.dtype),
                    None,
                ));
                continue;
            };
            notes.push(format!("cast {:?} {} -> {}", info.name, info.dtype, to));
            out.dtype = to;
            Some(to)
        };
        out.storage = Default::default();
        infos.push(out);
        plans.push(match (densify, cast) {
            (false, None) => Plan::AsIs,
            (true, None) => Plan::Densify,
            (false, Some(d)) => Plan::Cast(d),
            (true, Some(d)) => Plan::DensifyCast(d),
        });
    }
    let mut metadata = src.metadata().clone();
    // Provenance ([`crate::formats::Codec::provenance`]): into a target that carries no
    // metadata, its own header's keys go to its writer (WTXT -> WTXT keeps the header)
    // and the source's are left out with a note; model metadata is refused as ever.
    let mut header = Metadata::new();
    if caps.metadata == MetadataSupport::None {
        let own = target.codec().provenance;
        let theirs = src.source_format().and_then(|f| f.codec().provenance);
        let keys: Vec<String> = metadata.keys().map(str::to_string).collect();
        let mut left_out = Vec::new();
        for k in keys {
            if own.is_some_and(|p| k.starts_with(p)) {
                if let Some(v) = metadata.remove(&k) {
                    header.push_new(k, v);
                }
            } else if theirs.is_some_and(|p| k.starts_with(p)) {
                metadata.remove(&k);
                left_out.push(k);
            }
        }
        if !left_out.is_empty() {
            notes.push(format!(
                "left out the source's header ({}), which {title} carries no metadata for",
                left_out.join(", ")
            ));
        }
    }
    if !metadata.is_empty() && caps.metadata == MetadataSupport::None {
        if !opts.drop_metadata {
            let n = metadata.len();
            refused.push(Refusal::file(
                format!(
                    "{title} carries no file metadata and the source has {n} key{}",
                    if n == 1 { "" } else { "s" }
                ),
                Some(Hint::DropMetadata),
            ));
        } else {
            notes.push(match metadata.len() {
                1 => "dropped 1 metadata key".to_string(),
                n => format!("dropped {n} metadata keys"),
            });
            metadata = Metadata::new();
        }
    }
    for (k, v) in header.iter() {
        metadata.insert(k, v.clone());
    }
    // GGUF's value types ride beside the metadata into a target that carries them
    // (`Capabilities::typed_metadata`: GGUF); into any other format they are kept in the
    // metadata under `tessera.gguf_types` (unless the source has a key of that name), so
    // GGUF -> X -> GGUF keeps them.
    let mut metadata_types = None;
    if let Some(types) = src.metadata_types() {
        if caps.typed_metadata {
            metadata_types = Some(types.clone());
        } else if caps.metadata != MetadataSupport::None
            && !metadata.is_empty()
            && metadata.get(crate::metadata::GGUF_TYPES_KEY).is_none()
        {
            metadata.insert(
                crate::metadata::GGUF_TYPES_KEY,
                crate::metadata::Value::Map(types.clone()),
            );
        }
    }
    // A chunk holding copies of tensors the source lists (FOLD's TSAV: `ChunkInfo::copies`).
    // A target that carries such chunks keeps it and leaves the copies out; any other
    // target gets them as tensors, once, and the chunk is dropped.
    let mut chunks = src.chunks().to_vec();
    if !caps.chunk_copies {
        chunks.retain(|c| match c.copies {
            Some(n) => {
                notes.push(format!(
                    "dropped chunk {:?} ({}): its {n} tensors are written as tensors",
                    c.name, c.kind
                ));
                false
            }
            None => true,
        });
    }
    let opaque = chunks.iter().filter(|c| !c.holds_tensors).count();
    let keep_chunks = caps.chunks || opaque == 0;
    if !keep_chunks {
        if !opts.drop_metadata {
            let first = chunks
                .iter()
                .find(|c| !c.holds_tensors)
                .map(|c| c.name.clone());
            refused.push(Refusal::file(
                format!(
                    "{title} cannot carry opaque chunks and the source has {opaque} (first: {:?})",
                    first.unwrap_or_default()
                ),
                Some(Hint::DropMetadata),
            ));
        } else {
            notes.push(format!("dropped {opaque} opaque chunks"));
        }
    }
    if !refused.is_empty() {
        let n = refused.len();
        return Err(Error::refused(
            format!(
                "{title} cannot hold the source as it is ({n} refusal{})",
                if n == 1 { "" } else { "s" }
            ),
            refused,
        ));
    }
    let index = infos
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.clone(), i))
        .collect();
    Ok(Prepared {
        src,
        infos,
        plans,
        index,
        metadata,
        metadata_types,
        chunks,
        keep_chunks,
        notes,
        mx_pairs,
    })
}

/// Why a tensor of a type Tessera does not decode ([`Layout::undecoded`]) cannot go
/// into `title`, whose tensors are dense arrays of its own dtypes.
fn undecoded_reason(info: &TensorInfo, title: &str) -> String {
    format!(
        "{}, a type Tessera carries as its stored bytes but does not decode, which {title} cannot store",
        info.dtype_label()
    )
}

impl Prepared<'_> {
    /// What the preparation changed.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }
}

impl TensorSource for Prepared<'_> {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn interrupted(&self) -> Result<()> {
        self.src.interrupted()
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let i = crate::model::tensor_position(&self.index, name)?;
        if let Plan::MxPair(k) = self.plans[i] {
            let pair = &self.mx_pairs[k];
            let read = |n: &str| self.src.tensor(n).map_err(|e| self.source_error(e));
            let (blocks, scales) = (read(&pair.blocks)?, read(&pair.scales)?);
            return crate::quant::mx::dequantize_pair(&blocks, &scales, &self.infos[i]);
        }
        let v = self.src.tensor(name).map_err(|e| self.source_error(e))?;
        self.adapt(i, v)
    }
    fn tensors(&self, names: &[&str]) -> Vec<Result<TensorView<'_>>> {
        // The source's own batch read (parallel, remote ranges together), then each
        // tensor's plan.
        use rayon::prelude::*;
        let at: Vec<Result<usize>> = names
            .iter()
            .map(|n| crate::model::tensor_position(&self.index, n))
            .collect();
        let pair =
            |r: &Result<usize>| matches!(r, Ok(i) if matches!(self.plans[*i], Plan::MxPair(_)));
        if at.iter().any(|r| r.is_err() || pair(r)) {
            return names.par_iter().map(|n| self.tensor(n)).collect();
        }
        let got = self.src.tensors(names);
        got.into_par_iter()
            .zip(at)
            .map(|(v, i)| self.adapt(i?, v.map_err(|e| self.source_error(e))?))
            .collect()
    }
    fn chunks(&self) -> &[ChunkInfo] {
        if self.keep_chunks {
            &self.chunks
        } else {
            &[]
        }
    }
    fn chunk(&self, name: &str) -> Result<Cow<'_, [u8]>> {
        self.src.chunk(name).map_err(|e| self.source_error(e))
    }
    fn source_format(&self) -> Option<Format> {
        self.src.source_format()
    }
    fn metadata_types(&self) -> Option<&Metadata> {
        self.metadata_types.as_ref()
    }
    fn chunk_stored(&self, name: &str) -> Result<Option<crate::tensor::StoredChunk<'_>>> {
        self.src
            .chunk_stored(name)
            .map_err(|e| self.source_error(e))
    }
    fn raw_extent(&self, name: &str) -> Result<Option<crate::slice::RawExtent<'_>>> {
        // Only a tensor taken as it is has the source's bytes.
        let i = crate::model::tensor_position(&self.index, name)?;
        match self.plans[i] {
            Plan::AsIs => self.src.raw_extent(name).map_err(|e| self.source_error(e)),
            _ => Ok(None),
        }
    }
}

impl Prepared<'_> {
    /// Tensor `i` of the source as the target takes it (its plan applied).
    fn adapt<'a>(&'a self, i: usize, mut v: TensorView<'a>) -> Result<TensorView<'a>> {
        // A tensor carried as the bytes of a packed dtype Tessera knows (a `dense:f4_e2m1`
        // read from FOLD, zTensor v1 or AERO) is taken as that dtype, as `prepare` planned.
        if let (Some(d), 1) = (carried_dtype(&v.info), v.parts.len()) {
            v.info.layout = Layout::Dense;
            v.info.dtype = d;
            // The stored bytes must be what the dtype and shape need.
            let bytes = v.parts.pop().map(|p| p.bytes).unwrap_or_default();
            v = TensorView::dense(v.info, bytes)?;
        }
        let mut v = match self.plans[i] {
            Plan::AsIs => v,
            Plan::Carry => {
                let mut v = v;
                v.info.layout = Layout::undecoded(v.info.dtype.name());
                v.info.dtype = DType::U8;
                v
            }
            Plan::Densify => crate::tensor::sparse::densify(v)?,
            Plan::Cast(d) => crate::cast::cast_view(v, d)?,
            Plan::DensifyCast(d) => crate::cast::cast_view(crate::tensor::sparse::densify(v)?, d)?,
            Plan::Quant(step) => crate::quant::adapt::apply(step, v, &self.infos[i])?,
            Plan::MxPair(_) => {
                return Err(Error::invalid_input(format!(
                    "tensor {:?} is read from its MXFP4 pair, not adapted",
                    self.infos[i].name
                )))
            }
        };
        v.info.storage = Default::default();
        Ok(v)
    }
}

impl Prepared<'_> {
    /// A reading error names the source's format, not the target's (the writer that
    /// pulled the bytes would otherwise put its own name first).
    fn source_error(&self, e: Error) -> Error {
        match self.src.source_format() {
            Some(f) => e.in_format(f),
            None => e,
        }
    }
}

/// Writes `src` as `format` into any `Write + Seek`. Side files a writer asks for
/// (WTXT `.wsum`) are written atomically (fsynced unless [`WriteOptions::no_fsync`])
/// after the output; [`write_file`] commits them with the output instead.
pub fn write_to(
    format: Format,
    src: &dyn TensorSource,
    out: &mut dyn WriteSeek,
    opts: &WriteOptions,
) -> Result<WriteReport> {
    let mut report = write_keeping_sides(format, src, out, opts)?;
    let durability = crate::util::atomic::Durability::from_durable(!opts.no_fsync);
    for side in std::mem::take(&mut report.side_files) {
        crate::util::atomic::write_atomic_with(&side.path, durability, |w| {
            Ok(w.write_all(&side.bytes)?)
        })?;
    }
    Ok(report)
}

/// The writer alone: its side files stay in the report.
fn write_keeping_sides(
    format: Format,
    src: &dyn TensorSource,
    out: &mut dyn WriteSeek,
    opts: &WriteOptions,
) -> Result<WriteReport> {
    let write = writer_for(format).ok_or_else(|| format.not_supported_yet())?;
    crate::formats::check_options(format, opts)?;
    write(src, out, opts).map_err(|e| e.in_format(format))
}

/// Writes `src` as `format` to `path` atomically: into a temporary sibling, fsynced
/// (unless [`WriteOptions::no_fsync`]), renamed over `path`, directory fsynced. On any
/// error the target is untouched. Side files (WTXT `.wsum`) are committed with it in
/// the order [`crate::util::atomic::write_atomic_group`] describes.
pub fn write_file(
    format: Format,
    src: &dyn TensorSource,
    path: &Path,
    opts: &WriteOptions,
) -> Result<WriteReport> {
    let mut opts = opts.clone();
    opts.path = Some(path.to_path_buf());
    let durability = crate::util::atomic::Durability::from_durable(!opts.no_fsync);
    crate::util::atomic::write_atomic_group(path, durability, |f| {
        let mut r = write_keeping_sides(format, src, f, &opts)?;
        let sides = std::mem::take(&mut r.side_files);
        Ok((r, sides))
    })
}

/// Converts `src` into `format` at `path`: [`prepare`], then [`write_file`]. The report
/// lists what was cast, densified or dropped.
pub fn convert_file(
    src: &dyn TensorSource,
    format: Format,
    path: &Path,
    convert: ConvertOptions,
    opts: &WriteOptions,
) -> Result<WriteReport> {
    let prepared = prepare(src, format, convert)?;
    let mut report = write_file(format, &prepared, path, opts)?;
    let mut notes = prepared.notes().to_vec();
    notes.append(&mut report.notes);
    report.notes = notes;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepared_forwards_every_method() {
        let p = crate::model::probe::Probe::new();
        let opts = ConvertOptions {
            drop_metadata: true,
            ..ConvertOptions::default()
        };
        let prepared = prepare(&p, Format::Safetensors, opts).unwrap();
        // The chunks and metadata types are the target's (safetensors has neither).
        crate::model::probe::check_forwards(&prepared, &["chunks", "metadata_types"]);
    }

    /// `--quantize` writes only a format whose codec stores ggml blocks (GGUF), and says
    /// which; `--dequantize` takes the three float dtypes.
    #[test]
    fn quantize_and_dequantize_are_checked_before_any_tensor() {
        let p = crate::model::probe::Probe::new();
        let q = ConvertOptions::default().quantize(Some(crate::quant::QuantKind::Q8_0));
        let e = prepare(&p, Format::Safetensors, q).err().unwrap();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
        let want = if Format::Gguf.is_built() {
            "quantize writes GGUF; the target is safetensors"
        } else {
            "quantize writes a format this build has none of; the target is safetensors"
        };
        assert!(e.to_string().contains(want), "{e}");
        let d = ConvertOptions::default().dequantize(Some(DType::I8));
        let e = prepare(&p, Format::Safetensors, d).err().unwrap();
        assert!(e.to_string().contains("f32, f16 or bf16"), "{e}");
    }

    #[test]
    #[cfg(feature = "wtxt")]
    fn write_options_debug_never_shows_keys() {
        let w = crate::formats::wtxt::WtxtOptions::default()
            .hmac_key(Some(b"hmac-secret".to_vec()))
            .sign_key(Some([0xA7; 32]))
            .build(Some("b1".into()));
        let o = WriteOptions::default().with(w.clone());
        let text = format!("{o:?} {o:#?} {w:?}");
        // The key's bytes in any of the forms Debug prints them.
        for s in ["hmac-secret", "104, 109, 97, 99", "167", "0xa7", "a7a7"] {
            assert!(!text.contains(s), "{s} in {text}");
        }
        assert!(text.contains("<redacted>"), "{text}");
        assert!(
            text.contains("\"b1\""),
            "the other fields are still shown: {text}"
        );
        assert!(!format!("{:?}", WriteOptions::default()).contains("redacted"));
    }
}
