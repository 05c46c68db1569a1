//! Writing and converting: write options, per-format capabilities, and the adapter that
//! makes a source fit a target (or refuses, naming the tensor and the reason).
//!
//! A conversion never loses anything silently. When the target cannot hold a tensor's
//! dtype or layout, or the file's metadata or opaque chunks, [`prepare`] refuses with one
//! `Unsupported` error listing every refusal ([`Error::refusals`]), each naming the
//! tensor and carrying the [`Hint`] that would allow the loss (cast, densify,
//! drop-metadata, dequantize: the CLI shows them as flags, Python as keywords); with
//! the option it converts and reports what it changed.

use std::borrow::Cow;
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::metadata::Metadata;
use crate::model::TensorSource;
use crate::refusal::{Hint, Refusal};
use crate::tensor::{ChunkInfo, Layout, TensorInfo, TensorView};

/// `Write + Seek`, object-safe, for writers that patch a header at the end.
pub trait WriteSeek: Write + Seek {}
impl<T: Write + Seek> WriteSeek for T {}

/// Compression for formats that have it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Compression {
    /// Stored as is.
    #[default]
    None,
    /// zstd at a level (3 is the zstd default).
    Zstd(i32),
}

/// A per-tensor/chunk digest to write, for formats that let the writer choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Digest {
    /// CRC-32C (Castagnoli).
    Crc32c,
    /// SHA-256.
    Sha256,
}

/// Options for writers. Each format declares the options it takes (its registry entry,
/// [`crate::options`]) and reads those fields; a write refuses an option the target does
/// not declare. `tessera convert` and Python's `save` set them with
/// [`WriteOptions::set`]. Timestamps, salts and UUIDs default to "now"/random unless
/// fixed here, which makes output byte-deterministic. Its `Debug` never shows the keys
/// (`hmac_key`, `sign_key`): only whether they are set.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct WriteOptions {
    /// Compression (zTensor, FOLD, AERO metadata).
    pub compression: Compression,
    /// Digests to store (zTensor).
    pub digests: Vec<Digest>,
    /// Reed-Solomon parity bytes per block (FOLD `--ecc N`).
    pub ecc: Option<u8>,
    /// HMAC key (WTXT).
    pub hmac_key: Option<Vec<u8>>,
    /// Ed25519 secret key seed, 32 bytes (WTXT `sign`).
    pub sign_key: Option<[u8; 32]>,
    /// Previous snapshot to chain the merkle from (WTXT `--prev`).
    pub prev: Option<PathBuf>,
    /// Generation number (WTXT `gen`).
    pub generation: Option<u64>,
    /// Timestamp `YYYY-MM-DDTHH:MM:SSZ` (WTXT `ts`, zTensor `created_at` if asked).
    pub timestamp: Option<String>,
    /// Build identifier (WTXT `build`).
    pub build: Option<String>,
    /// Host name (WTXT `host`).
    pub host: Option<String>,
    /// CUDA version token (WTXT `cuda`).
    pub cuda: Option<String>,
    /// The optional `audit` line of a WTXT snapshot: `key=value` fields, quoted values
    /// allowed (`kahan_max_resid=1.1e-15 notes="gamma=0.96"`).
    pub audit: Option<String>,
    /// Rows per chunk (WTXT row blocking).
    pub rows_per_chunk: Option<u64>,
    /// Streaming finalization (WTXT-S + WSUM).
    pub streaming: bool,
    /// Fixed HMAC salts instead of random ones (tests, reproducible builds).
    pub fixed_salt: Option<[u8; 8]>,
    /// Maximum shard size in bytes (AERO).
    pub shard_size: Option<u64>,
    /// Per-tensor BLAKE3 hashes (AERO `hash_b3`).
    pub tensor_hashes: bool,
    /// Control-plane integrity chunk (AERO IHSH).
    pub control_integrity: bool,
    /// Page hashes with this page size (AERO PHSH).
    pub page_hashes: Option<u64>,
    /// Fixed file UUID (AERO).
    pub uuid: Option<[u8; 16]>,
    /// Store base_id 0 as the original Python exporter does (GPTRS).
    pub zero_base_id: bool,
    /// Store no digest where the format would store one by default (zTensor v1's
    /// crc32c): `digests=none` (or an empty list).
    pub no_digest: bool,
    /// Where the output goes, for writers that also write a sibling file (WTXT `.wsum`).
    pub path: Option<PathBuf>,
    /// Skip the fsyncs of [`write_file`] (Python's `durable=False`, `tessera convert
    /// --no-fsync`): still atomic, not flushed ([`crate::util::atomic::Durability`]).
    /// Not a format option: every format takes it.
    pub no_fsync: bool,
    /// Options only one format has, declared in its module and set by
    /// [`WriteOptions::set`] (read them with [`WriteOptions::extra_int`] and friends).
    pub extra: std::collections::BTreeMap<String, crate::options::OptionValue>,
}

impl std::fmt::Debug for WriteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secret = |set: bool| if set { "<redacted>" } else { "none" };
        // Destructured so that a new field is a compile error here until it is shown
        // (or, if it is a secret, redacted).
        let WriteOptions {
            compression,
            digests,
            ecc,
            hmac_key,
            sign_key,
            prev,
            generation,
            timestamp,
            build,
            host,
            cuda,
            audit,
            rows_per_chunk,
            streaming,
            fixed_salt,
            shard_size,
            tensor_hashes,
            control_integrity,
            page_hashes,
            uuid,
            zero_base_id,
            no_digest,
            path,
            no_fsync,
            extra,
        } = self;
        f.debug_struct("WriteOptions")
            .field("compression", compression)
            .field("digests", digests)
            .field("ecc", ecc)
            .field("hmac_key", &secret(hmac_key.is_some()))
            .field("sign_key", &secret(sign_key.is_some()))
            .field("prev", prev)
            .field("generation", generation)
            .field("timestamp", timestamp)
            .field("build", build)
            .field("host", host)
            .field("cuda", cuda)
            .field("audit", audit)
            .field("rows_per_chunk", rows_per_chunk)
            .field("streaming", streaming)
            .field("fixed_salt", fixed_salt)
            .field("shard_size", shard_size)
            .field("tensor_hashes", tensor_hashes)
            .field("control_integrity", control_integrity)
            .field("page_hashes", page_hashes)
            .field("uuid", uuid)
            .field("zero_base_id", zero_base_id)
            .field("no_digest", no_digest)
            .field("path", path)
            .field("no_fsync", no_fsync)
            .field("extra", extra)
            .finish()
    }
}

/// Options of a conversion that allow a loss, each explicitly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConvertOptions {
    /// Decode GGUF's packed quantized tensors (layout `ggml_*`) to this float dtype
    /// (F32, F16 or BF16), bit-identical to gguf-py's `dequantize` (`--dequantize`).
    pub dequantize: Option<DType>,
    /// Writing GGUF: encode float tensors as these blocks, bit-identical to gguf-py's
    /// `quantize`; 1-D tensors and rows that are not whole blocks stay float, noted
    /// (`--quantize`). Only with feature `gguf`.
    #[cfg(feature = "gguf")]
    pub quantize: Option<crate::formats::gguf::quants::QuantKind>,
    /// Cast dtypes the target cannot hold to the nearest one it can.
    pub cast: bool,
    /// Store sparse tensors densely when the target has no sparse layouts.
    pub densify: bool,
    /// Drop file metadata and opaque chunks the target cannot carry.
    pub drop_metadata: bool,
}

crate::setters::setters!(WriteOptions {
    /// Sets `compression` (zTensor, FOLD, AERO metadata).
    compression: Compression,
    /// Sets `digests`, the digests to store (zTensor).
    digests: Vec<Digest>,
    /// Sets `ecc`, Reed-Solomon parity bytes per block (FOLD).
    ecc: Option<u8>,
    /// Sets `hmac_key` (WTXT).
    hmac_key: Option<Vec<u8>>,
    /// Sets `sign_key`, the Ed25519 secret key seed (WTXT `sign`).
    sign_key: Option<[u8; 32]>,
    /// Sets `prev`, the previous snapshot to chain the merkle from (WTXT).
    prev: Option<PathBuf>,
    /// Sets `generation` (WTXT `gen`).
    generation: Option<u64>,
    /// Sets `timestamp`, `YYYY-MM-DDTHH:MM:SSZ` (WTXT `ts`, zTensor `created_at`).
    timestamp: Option<String>,
    /// Sets `build`, the build identifier (WTXT).
    build: Option<String>,
    /// Sets `host`, the host name (WTXT).
    host: Option<String>,
    /// Sets `cuda`, the CUDA version token (WTXT).
    cuda: Option<String>,
    /// Sets `audit`, the `key=value` fields of WTXT's `audit` line.
    audit: Option<String>,
    /// Sets `rows_per_chunk` (WTXT row blocking).
    rows_per_chunk: Option<u64>,
    /// Sets `streaming` finalization (WTXT-S + WSUM).
    streaming: bool,
    /// Sets `fixed_salt`, fixed HMAC salts instead of random ones.
    fixed_salt: Option<[u8; 8]>,
    /// Sets `shard_size`, the maximum shard size in bytes (AERO).
    shard_size: Option<u64>,
    /// Sets `tensor_hashes`, per-tensor BLAKE3 hashes (AERO `hash_b3`).
    tensor_hashes: bool,
    /// Sets `control_integrity`, the control-plane integrity chunk (AERO IHSH).
    control_integrity: bool,
    /// Sets `page_hashes`, page hashes with this page size (AERO PHSH).
    page_hashes: Option<u64>,
    /// Sets `uuid`, a fixed file UUID (AERO).
    uuid: Option<[u8; 16]>,
    /// Sets `zero_base_id`: store base_id 0 as the original exporter does (GPTRS).
    zero_base_id: bool,
    /// Sets `no_digest`: store no digest where the format stores one by default
    /// (zTensor v1's crc32c).
    no_digest: bool,
    /// Sets `path`, where the output goes (for sibling files such as WTXT's `.wsum`).
    path: Option<PathBuf>,
    /// Sets `no_fsync`: skip the fsyncs of `write_file` (still atomic).
    no_fsync: bool,
    /// Sets `extra`, the options only one format has (usually set by `set`).
    extra: std::collections::BTreeMap<String, crate::options::OptionValue>,
});

crate::setters::setters!(ConvertOptions {
    /// Sets `dequantize`: decode GGUF's quantized tensors to this float dtype.
    dequantize: Option<DType>,
    /// Sets `quantize`: encode float tensors as these GGUF blocks.
    #[cfg(feature = "gguf")]
    quantize: Option<crate::formats::gguf::quants::QuantKind>,
    /// Sets `cast`: cast dtypes the target cannot hold to the nearest one it can.
    cast: bool,
    /// Sets `densify`: store sparse tensors densely when the target cannot.
    densify: bool,
    /// Sets `drop_metadata`: drop metadata and chunks the target cannot carry.
    drop_metadata: bool,
});

/// What a writer did that the caller should know.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteReport {
    /// One line per notable change (`cast "w" f64 -> f32`, `densified "s"`, …).
    pub notes: Vec<String>,
    /// Sibling files written beside the output (WTXT `.wsum`).
    pub extra_files: Vec<PathBuf>,
    /// Sibling files a writer leaves to its caller, to appear with the output:
    /// [`write_file`] commits them with it ([`crate::util::atomic::write_atomic_group`]),
    /// [`write_to`] writes each atomically once the writer returns. Empty after either.
    pub side_files: Vec<crate::util::atomic::SideFile>,
}

/// A writer entry point.
pub type WriteFn = fn(&dyn TensorSource, &mut dyn WriteSeek, &WriteOptions) -> Result<WriteReport>;

/// How much metadata a format carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetadataSupport {
    /// None at all.
    None,
    /// String values only (others are written as JSON text).
    Strings,
    /// A full value tree.
    Tree,
}

impl MetadataSupport {
    /// `none`, `strings` or `tree` (as `tessera formats` and Python show it).
    pub fn name(self) -> &'static str {
        match self {
            MetadataSupport::None => "none",
            MetadataSupport::Strings => "strings",
            MetadataSupport::Tree => "tree",
        }
    }
}

/// What a format can hold; `tessera formats` prints it, [`prepare`] enforces it.
#[derive(Debug, Clone)]
pub struct Capabilities {
    /// The format.
    pub format: Format,
    /// Dtypes it stores.
    pub dtypes: &'static [DType],
    /// Stores CSR/COO natively.
    pub sparse: bool,
    /// Stores other named-component layouts.
    pub other_layouts: bool,
    /// File metadata.
    pub metadata: MetadataSupport,
    /// Opaque chunks.
    pub chunks: bool,
    /// Compression methods.
    pub compression: &'static [&'static str],
    /// Integrity layers.
    pub integrity: &'static [&'static str],
    /// Raw tensors can be read without a copy.
    pub zero_copy: bool,
}

/// The writer for a format, when it is implemented (from its registry entry).
pub fn writer_for(format: Format) -> Option<WriteFn> {
    format.spec().writer
}

/// The capabilities of a format, when Tessera knows how to write it (from its registry
/// entry).
pub fn capabilities(format: Format) -> Option<Capabilities> {
    format.spec().capabilities.map(|c| c())
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
}

#[derive(Clone, Copy)]
enum Plan {
    AsIs,
    Densify,
    Cast(DType),
    DensifyCast(DType),
    /// `--dequantize` / `--quantize` (formats::gguf::quants::adapt).
    #[cfg(feature = "gguf")]
    Quant(crate::formats::gguf::quants::adapt::Step),
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
    #[cfg(feature = "gguf")]
    use crate::formats::gguf::quants::adapt;
    #[cfg(feature = "gguf")]
    adapt::check_options(opts.dequantize, opts.quantize, target)?;
    #[cfg(not(feature = "gguf"))]
    if opts.dequantize.is_some() {
        return Err(Error::unsupported(
            "dequantizing GGUF's packed tensors: this build of Tessera was built without feature `gguf`",
        ));
    }
    let title = target.title();
    let mut infos = Vec::new();
    let mut plans = Vec::new();
    let mut notes = Vec::new();
    let mut refused: Vec<Refusal> = Vec::new();
    for info in src.tensor_infos() {
        let name = info.name.as_str();
        #[cfg(feature = "gguf")]
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
                #[cfg(feature = "gguf")]
                let hint = adapt::packed_type(info).map(|_| Hint::Dequantize);
                #[cfg(not(feature = "gguf"))]
                let hint = None;
                refused.push(Refusal::tensor(
                    name,
                    format!("in layout {l:?}, which {title} cannot store"),
                    hint,
                ));
                continue;
            }
        };
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
    // GGUF's value types ride beside the metadata into a GGUF target; into any other
    // format they are kept in the metadata under `tessera.gguf_types` (unless the source
    // has a key of that name), so GGUF -> X -> GGUF keeps them.
    let mut metadata_types = None;
    if let Some(types) = src.metadata_types() {
        if target == Format::Gguf {
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
    // A FOLD TSAV chunk whose tensors the source lists holds them a second time
    // (formats/fold/tsav.rs). A FOLD target carries the chunk and leaves those tensors
    // out; any other target gets them as tensors, once, and the chunk is dropped.
    let mut chunks = src.chunks().to_vec();
    if target != Format::Fold {
        chunks.retain(|c| match tsav_tensors(src, c) {
            Some(n) => {
                notes.push(format!(
                    "dropped chunk {:?} (TSAV): its {n} tensors are written as tensors",
                    c.name
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

/// The number of tensors an opaque `TSAV` chunk holds when the source lists every one
/// of them as its own (`<chunk>/<name>`, as the FOLD reader does); `None` for any other
/// chunk, or when the payload is refused or some of its tensors are not listed (a
/// `TSAV` chunk another format carried: then the chunk is the only copy).
#[cfg(feature = "fold")]
fn tsav_tensors(src: &dyn TensorSource, c: &ChunkInfo) -> Option<usize> {
    if c.holds_tensors || c.kind != "TSAV" {
        return None;
    }
    let bytes = src.chunk(&c.name).ok()?;
    let (entries, _) = crate::formats::fold::tsav::list(&bytes, &crate::Limits::default()).ok()?;
    let listed: std::collections::HashSet<&str> =
        src.tensor_infos().iter().map(|t| t.name.as_str()).collect();
    let all = entries
        .iter()
        .all(|e| listed.contains(format!("{}/{}", c.name, e.name).as_str()));
    (all && !entries.is_empty()).then_some(entries.len())
}

/// Built without feature `fold`, no reader lists a `TSAV` chunk's tensors: every such
/// chunk is the only copy.
#[cfg(not(feature = "fold"))]
fn tsav_tensors(_: &dyn TensorSource, _: &ChunkInfo) -> Option<usize> {
    None
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
        if at.iter().any(|r| r.is_err()) {
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
}

impl Prepared<'_> {
    /// Tensor `i` of the source as the target takes it (its plan applied).
    fn adapt<'a>(&'a self, i: usize, v: TensorView<'a>) -> Result<TensorView<'a>> {
        let mut v = match self.plans[i] {
            Plan::AsIs => v,
            Plan::Densify => crate::sparse::densify(v)?,
            Plan::Cast(d) => crate::cast::cast_view(v, d)?,
            Plan::DensifyCast(d) => crate::cast::cast_view(crate::sparse::densify(v)?, d)?,
            #[cfg(feature = "gguf")]
            Plan::Quant(step) => {
                crate::formats::gguf::quants::adapt::apply(step, v, &self.infos[i])?
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
    crate::options::check_options(format, opts)?;
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

    #[test]
    fn write_options_debug_never_shows_keys() {
        let o = WriteOptions {
            hmac_key: Some(b"hmac-secret".to_vec()),
            sign_key: Some([0xA7; 32]),
            build: Some("b1".into()),
            ..WriteOptions::default()
        };
        let text = format!("{o:?} {o:#?}");
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
