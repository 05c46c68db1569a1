//! Sets described by an index file of their own kind (AERO's AEROSET:
//! `model.aeroset.json`), opened through their format's codec hooks
//! ([`crate::formats::IndexedSet`]): the opener (`opener.rs`) finds the index by its name
//! or its bytes, and this module gives the hook a [`SetFiles`] that opens the files the
//! index names — beside a local index (mapped or read as [`ReadOptions::load`] says), or
//! beside a remote one, and any URL the index gives (feature `remote`) — then wraps the
//! container the hook builds as one [`OpenedFile`] (its parts are its own business:
//! opened lazily by the hook's container).

use std::path::PathBuf;
use std::sync::Arc;

use super::file::{Backing, Files, OpenedFile};
use super::names::check_plain;
use crate::any::{Load, ReadOptions};
use crate::error::Result;
use crate::formats::{IndexedSet, SetFiles};
use crate::remote::{Location, RemoteOptions};
use crate::source::{ByteSource, FileData};

/// The files beside a local index.
pub(super) struct LocalFiles {
    pub(super) dir: PathBuf,
    pub(super) load: Load,
    pub(super) remote: RemoteOptions,
}

impl SetFiles for LocalFiles {
    fn beside(&self, name: &str) -> Result<Box<dyn ByteSource>> {
        check_plain(name)?;
        let p = self.dir.join(name);
        let data = match self.load {
            Load::Map => FileData::open(&p)?,
            Load::Read => FileData::read(&p)?,
        };
        Ok(Box::new(data))
    }
    fn url(&self, url: &str) -> Result<Box<dyn ByteSource>> {
        open_url(url, &self.remote)
    }
    fn shown(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
    fn is_remote(&self) -> bool {
        false
    }
}

/// The objects beside a remote index.
#[cfg(feature = "remote")]
pub(super) struct RemoteFiles {
    pub(super) loc: Location,
    pub(super) remote: RemoteOptions,
}

#[cfg(feature = "remote")]
impl SetFiles for RemoteFiles {
    fn beside(&self, name: &str) -> Result<Box<dyn ByteSource>> {
        check_plain(name)?;
        open_loc(&self.loc.sibling(name), &self.remote)
    }
    fn url(&self, url: &str) -> Result<Box<dyn ByteSource>> {
        open_url(url, &self.remote)
    }
    fn shown(&self, name: &str) -> String {
        self.loc.sibling(name).display()
    }
    fn is_remote(&self) -> bool {
        true
    }
}

fn open_url(url: &str, remote: &RemoteOptions) -> Result<Box<dyn ByteSource>> {
    let loc = Location::parse(url)?;
    if !loc.is_remote() {
        return Err(crate::Error::malformed(format!(
            "{url:?} is not a remote URL"
        )));
    }
    open_loc(&loc, remote)
}

#[cfg(feature = "remote")]
fn open_loc(loc: &Location, remote: &RemoteOptions) -> Result<Box<dyn ByteSource>> {
    let src =
        crate::remote::RemoteSource::open(loc, remote).map_err(|e| e.in_file(loc.display()))?;
    Ok(Box::new(src))
}

#[cfg(not(feature = "remote"))]
fn open_loc(loc: &Location, _remote: &RemoteOptions) -> Result<Box<dyn ByteSource>> {
    Err(crate::remote::not_enabled(loc))
}

/// The set of the index `bytes` (shown as `label`), its files opened by `files`, as one
/// opened file that owns the index's bytes.
pub(super) fn open(
    hooks: &IndexedSet,
    bytes: Vec<u8>,
    label: &str,
    files: Arc<dyn SetFiles>,
    opts: &ReadOptions,
) -> Result<OpenedFile> {
    let container = (hooks.open)(&bytes, label, files, opts).map_err(|e| e.in_file(label))?;
    let files = Files {
        main: Backing::Data(FileData::from(bytes)),
        shards: Vec::new(),
    };
    OpenedFile::from_files(files, |_| Ok(container))
}
