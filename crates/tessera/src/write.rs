//! The write contract: what a writer entry point is ([`WriteFn`]), writes to
//! ([`WriteSeek`]), returns ([`WriteReport`]) and declares it can hold
//! ([`Capabilities`]). Below the formats, which implement it; the driver that picks a
//! writer for a format is [`crate::convert`]. The writer's options are
//! [`crate::options`]. The protocol every streaming writer speaks, and the one loop
//! that feeds it from a source, are [`stream`].

use std::io::{Seek, Write};
use std::path::PathBuf;

use crate::dtype::DType;
use crate::error::Result;
use crate::format::Format;
use crate::model::TensorSource;
use crate::options::WriteOptions;

pub mod stream;
pub use stream::{drive, Encoder, InOrder, StreamWriter};

/// `Write + Seek`, object-safe, for writers that patch a header at the end.
pub trait WriteSeek: Write + Seek {}
impl<T: Write + Seek> WriteSeek for T {}

/// What a writer did that the caller should know.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteReport {
    /// One line per notable change (`cast "w" f64 -> f32`, `densified "s"`, …).
    pub notes: Vec<String>,
    /// Sibling files written beside the output (WTXT `.wsum`).
    pub extra_files: Vec<PathBuf>,
    /// Sibling files a writer leaves to its caller, to appear with the output:
    /// [`crate::convert::write_file`] commits them with it ([`crate::util::atomic::write_atomic_group`]),
    /// [`crate::convert::write_to`] writes each atomically once the writer returns. Empty after either.
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

/// What a format can hold; `tessera formats` prints it, [`crate::convert::prepare`] enforces it.
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
    /// Carries a chunk that holds copies of listed tensors ([`crate::ChunkInfo::copies`])
    /// as the chunk, leaving the copies out (FOLD's `TSAV`).
    pub chunk_copies: bool,
    /// Carries the value types of its metadata beside it
    /// ([`crate::TensorSource::metadata_types`]: GGUF's typed key-values); into any
    /// other target they are kept in the metadata under `tessera.gguf_types`.
    pub typed_metadata: bool,
}

/// How a format is written as a model set of several files (`--shards`,
/// `--max-shard-size`): the set behaviour of its codec ([`crate::formats::Codec::sets`]),
/// so that the set writer (`set/write.rs`) never names a format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SetStyle {
    /// Shards of the format plus a Tessera index (`*.tessera-set.json`) naming each
    /// shard's size and BLAKE3: any format without a set layout of its own.
    #[default]
    TesseraIndex,
    /// Not written as a set: a file holds one tensor (`.npy`; write `.npz` shards).
    None,
    /// Shards plus a Hugging Face index (`*.safetensors.index.json`, `weight_map`), each
    /// shard's metadata `{"format": "pt"}` as `transformers` writes it.
    HfIndex,
    /// GGUF splits (`-0000i-of-0000n.gguf`), the model's keys in the first, the
    /// `split.*` keys in every one.
    GgufSplit,
    /// A root file whose shard table names the shard files (zTensor v2).
    ShardTable,
    /// One file holding every shard (AERO's `WTSH` chunks, one per group).
    OneFile,
}
