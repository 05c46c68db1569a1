//! One file opened from a path: its bytes ([`FileData`], a read-only map or a buffer,
//! or any other [`ByteSource`] such as a remote object) and the container parsed from
//! them, tied together by `self_cell` (the container borrows the bytes). A zTensor v2
//! root whose shard table names other files owns those files' bytes too
//! (`zt2_shards.rs`): its parts in them read as its own.

use std::path::Path;

use crate::any::{Load, ReadOptions};
use crate::error::Result;
use crate::model::Container;
use crate::source::{ByteSource, FileData};

type DynContainer<'a> = Box<dyn Container + 'a>;

/// What an [`OpenedFile`] reads from.
pub enum Backing {
    /// A map or a buffer: the whole file in memory.
    Data(FileData),
    /// A source read by range (a remote object).
    Source(Box<dyn ByteSource>),
}

impl Backing {
    /// The bytes, when they are in memory (not for a source read by range).
    pub fn data(&self) -> Option<&FileData> {
        match self {
            Backing::Data(d) => Some(d),
            Backing::Source(_) => None,
        }
    }

    /// The bytes as a source, in memory or read by range.
    pub fn source(&self) -> crate::source::SourceRef<'_> {
        match self {
            Backing::Data(d) => crate::source::SourceRef::from(&d[..]),
            Backing::Source(s) => crate::source::SourceRef::from(&**s),
        }
    }
}

/// The bytes an [`OpenedFile`] owns: the file's, and those of the shard files its
/// manifest names (zTensor v2 only; empty otherwise).
pub struct Files {
    /// The file itself.
    pub main: Backing,
    /// Shard files, in the order of the file's shard table (remote shards, beside a
    /// remote root, are read by range).
    pub shards: Vec<Backing>,
}

self_cell::self_cell!(
    /// An opened file that owns its bytes.
    pub struct OpenedFile {
        owner: Files,
        #[not_covariant]
        dependent: DynContainer,
    }
);

impl OpenedFile {
    /// Opens the file at `path` as whatever format its bytes say; its errors name the
    /// file (`opts.path` is set to `path`); mapped or read whole as `opts.load` says.
    pub fn open(path: &Path, opts: &ReadOptions) -> Result<OpenedFile> {
        let data = match opts.load {
            Load::Map => FileData::open(path)?,
            Load::Read => FileData::read(path)?,
        };
        let mut opts = opts.clone();
        opts.path = Some(path.to_path_buf());
        OpenedFile::from_data(data, &opts)
    }

    /// Opens bytes already in hand.
    pub fn from_data(data: FileData, opts: &ReadOptions) -> Result<OpenedFile> {
        OpenedFile::from_backing(Backing::Data(data), opts)
    }

    /// Opens a source read by range (a remote object).
    pub fn from_source(src: Box<dyn ByteSource>, opts: &ReadOptions) -> Result<OpenedFile> {
        OpenedFile::from_backing(Backing::Source(src), opts)
    }

    fn from_backing(main: Backing, opts: &ReadOptions) -> Result<OpenedFile> {
        let files = Files {
            main,
            shards: Vec::new(),
        };
        OpenedFile::try_new(files, |f| match &f.main {
            Backing::Data(d) => crate::formats::open(d, opts),
            Backing::Source(s) => crate::formats::open(&**s, opts),
        })
    }

    /// Opens files already in hand with `open`, which may borrow all of them.
    pub fn from_files(
        files: Files,
        open: impl for<'a> FnOnce(&'a Files) -> Result<DynContainer<'a>>,
    ) -> Result<OpenedFile> {
        OpenedFile::try_new(files, open)
    }

    /// The file's bytes, when they are in memory (not for a source read by range).
    pub fn bytes(&self) -> Option<&[u8]> {
        self.borrow_owner().main.data().map(|d| &d[..])
    }

    /// The file's size in bytes.
    pub fn len(&self) -> u64 {
        match &self.borrow_owner().main {
            Backing::Data(d) => d.len(),
            Backing::Source(s) => s.len(),
        }
    }

    /// True for an empty file (none opens: every format has a header).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The file's bytes as a source (in memory, or read by range).
    pub fn source(&self) -> crate::source::SourceRef<'_> {
        self.borrow_owner().main.source()
    }

    /// The bytes of the shard files it opened besides (zTensor v2).
    pub fn shard_bytes(&self) -> Vec<&[u8]> {
        let shards = &self.borrow_owner().shards;
        shards
            .iter()
            .filter_map(|b| b.data().map(|d| &d[..]))
            .collect()
    }

    /// True when the bytes are a memory map.
    pub fn is_mapped(&self) -> bool {
        let f = self.borrow_owner();
        let mapped = |b: &Backing| b.data().is_some_and(FileData::is_mapped);
        mapped(&f.main) && f.shards.iter().all(mapped)
    }

    /// What the bytes are read from (`mmap`, `memory`, `remote`, …).
    pub fn source_kind(&self) -> &'static str {
        match &self.borrow_owner().main {
            Backing::Data(d) => d.kind(),
            Backing::Source(s) => s.kind(),
        }
    }
}

crate::model::forward_to_dependent!(OpenedFile);
