//! One file opened from a path: its bytes ([`FileData`], a read-only map or a buffer)
//! and the container parsed from them, tied together by `self_cell` (the container
//! borrows the bytes).

use std::path::Path;

use crate::any::ReadOptions;
use crate::error::Result;
use crate::model::Container;
use crate::source::FileData;

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

crate::model::forward_to_dependent!(OpenedFile);
