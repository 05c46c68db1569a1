//! One file opened from a path: its bytes ([`FileData`], a read-only map or a buffer,
//! or any other [`ByteSource`] such as a remote object) and the container parsed from
//! them, tied together by `self_cell` (the container borrows the bytes).

use std::path::Path;

use crate::any::ReadOptions;
use crate::error::Result;
use crate::model::Container;
use crate::source::{ByteSource, FileData};

type DynContainer<'a> = Box<dyn Container + 'a>;

self_cell::self_cell!(
    /// An opened file that owns its bytes.
    pub struct OpenedFile {
        owner: Backing,
        #[not_covariant]
        dependent: DynContainer,
    }
);

/// What an [`OpenedFile`] reads from.
pub enum Backing {
    /// A map or a buffer: the whole file in memory.
    Data(FileData),
    /// A source read by range (a remote object).
    Source(Box<dyn ByteSource>),
}

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
        OpenedFile::try_new(Backing::Data(data), |b| open_backing(b, opts))
    }

    /// Opens a source read by range (a remote object).
    pub fn from_source(src: Box<dyn ByteSource>, opts: &ReadOptions) -> Result<OpenedFile> {
        OpenedFile::try_new(Backing::Source(src), |b| open_backing(b, opts))
    }

    /// The file's bytes, when they are in memory (not for a source read by range).
    pub fn bytes(&self) -> Option<&[u8]> {
        match self.borrow_owner() {
            Backing::Data(d) => Some(d),
            Backing::Source(_) => None,
        }
    }

    /// True when the bytes are a memory map.
    pub fn is_mapped(&self) -> bool {
        matches!(self.borrow_owner(), Backing::Data(d) if d.is_mapped())
    }

    /// What the bytes are read from (`mmap`, `memory`, `remote`, …).
    pub fn source_kind(&self) -> &'static str {
        match self.borrow_owner() {
            Backing::Data(d) => d.kind(),
            Backing::Source(s) => s.kind(),
        }
    }
}

fn open_backing<'a>(b: &'a Backing, opts: &ReadOptions) -> Result<DynContainer<'a>> {
    match b {
        Backing::Data(d) => crate::any::open(d, opts),
        Backing::Source(s) => crate::any::open(&**s, opts),
    }
}

crate::model::forward_to_dependent!(OpenedFile);
