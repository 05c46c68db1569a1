//! One file opened from a path: its bytes ([`FileData`], a read-only map or a buffer)
//! and the container parsed from them, tied together by `self_cell` (the container
//! borrows the bytes).

use std::borrow::Cow;
use std::path::Path;

use crate::any::ReadOptions;
use crate::error::Result;
use crate::format::Format;
use crate::metadata::Metadata;
use crate::model::{Container, TensorSource};
use crate::source::FileData;
use crate::tensor::{ChunkInfo, TensorInfo, TensorView};
use crate::verify::{VerifyOptions, VerifyReport};

type DynContainer<'a> = Box<dyn Container + 'a>;

self_cell::self_cell!(
    /// An opened file that owns its bytes.
    pub struct OpenedFile {
        owner: FileData,
        #[not_covariant]
        dependent: DynContainer,
    }
);

/// How a path's bytes are brought in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Load {
    /// A read-only memory map (zero-copy reads).
    #[default]
    Map,
    /// Read whole into memory.
    Read,
}

impl OpenedFile {
    /// Opens the file at `path` as whatever format its bytes say; its errors name the
    /// file (`opts.path` is set to `path`).
    pub fn open(path: &Path, opts: &ReadOptions, load: Load) -> Result<OpenedFile> {
        let data = match load {
            Load::Map => FileData::open(path)?,
            Load::Read => FileData::read(path)?,
        };
        let mut opts = opts.clone();
        opts.path = Some(path.to_path_buf());
        OpenedFile::from_data(data, &opts)
    }

    /// Opens bytes already in hand.
    pub fn from_data(data: FileData, opts: &ReadOptions) -> Result<OpenedFile> {
        OpenedFile::try_new(data, |d| crate::any::open(d, opts))
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.borrow_owner()
    }

    /// True when the bytes are a memory map.
    pub fn is_mapped(&self) -> bool {
        self.borrow_owner().is_mapped()
    }
}

impl TensorSource for OpenedFile {
    fn metadata(&self) -> &Metadata {
        self.with_dependent(|_, c| c.metadata())
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        self.with_dependent(|_, c| c.tensor_infos())
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        self.with_dependent(|_, c| c.tensor(name))
    }
    fn chunks(&self) -> &[ChunkInfo] {
        self.with_dependent(|_, c| c.chunks())
    }
    fn chunk(&self, name: &str) -> Result<Cow<'_, [u8]>> {
        self.with_dependent(|_, c| c.chunk(name))
    }
    fn source_format(&self) -> Option<Format> {
        self.with_dependent(|_, c| c.source_format())
    }
    fn metadata_types(&self) -> Option<&Metadata> {
        self.with_dependent(|_, c| c.metadata_types())
    }
}

impl Container for OpenedFile {
    fn format(&self) -> Format {
        self.with_dependent(|_, c| c.format())
    }
    fn version(&self) -> String {
        self.with_dependent(|_, c| c.version())
    }
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport {
        self.with_dependent(|_, c| c.verify(opts))
    }
    fn warnings(&self) -> Vec<String> {
        self.with_dependent(|_, c| c.warnings())
    }
}
