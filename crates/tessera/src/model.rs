//! The read side every format shares: [`TensorSource`] (anything tensors can be read
//! from, file or memory) and [`Container`] (an opened file), plus [`Model`], an owned
//! in-memory set of tensors.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::format::Format;
use crate::metadata::Metadata;
use crate::tensor::{ChunkInfo, Part, TensorInfo, TensorView};
use crate::verify::{VerifyOptions, VerifyReport};

/// The position of tensor `name` in a reader's name → index map, or
/// [`Error::no_tensor`]: the lookup every reader's `tensor()` starts with.
pub fn tensor_position(index: &HashMap<String, usize>, name: &str) -> Result<usize> {
    index
        .get(name)
        .copied()
        .ok_or_else(|| Error::no_tensor(name))
}

/// Anything tensors can be read from: an opened file, an in-memory [`Model`], or an
/// adapter (cast, densify) over another source. Writers take a `&dyn TensorSource` and
/// ask for one tensor at a time, so memory stays near one tensor.
pub trait TensorSource: Send + Sync {
    /// File-level metadata.
    fn metadata(&self) -> &Metadata;
    /// Every tensor, in file order.
    fn tensor_infos(&self) -> &[TensorInfo];
    /// One tensor's bytes: borrowed from the file when stored canonically, decoded
    /// otherwise. May be called more than once for the same tensor.
    fn tensor(&self, name: &str) -> Result<TensorView<'_>>;
    /// Several tensors, in the order of `names`, read in parallel on the rayon pool
    /// (each as [`TensorSource::tensor`] reads it, its digests checked): decompression
    /// and hashing of compressed formats on every core, ranges of remote files in
    /// parallel. Memory holds every tensor decoded at once; read in batches to bound it.
    fn tensors(&self, names: &[&str]) -> Vec<Result<TensorView<'_>>> {
        use rayon::prelude::*;
        names.par_iter().map(|n| self.tensor(n)).collect()
    }
    /// Whether the work reading this source should stop (the Python package's Ctrl-C),
    /// asked by writers between tensors on the thread that drives the write (reads may
    /// run on pool threads, where Python cannot see a signal). Wrappers forward it.
    fn interrupted(&self) -> Result<()> {
        Ok(())
    }
    /// Opaque chunks (not tensors), in file order.
    fn chunks(&self) -> &[ChunkInfo] {
        &[]
    }
    /// One chunk's decoded bytes.
    fn chunk(&self, name: &str) -> Result<Cow<'_, [u8]>> {
        Err(Error::not_found(format!("no chunk named {name:?}")))
    }
    /// The format the source was read from, if any (conversions keep format-specific
    /// metadata only within the same format).
    fn source_format(&self) -> Option<Format> {
        None
    }
    /// Value-type annotations of the metadata that only the source's format has (GGUF's
    /// `u32` vs `i64`, `[str]`, …: key → annotation), kept beside the metadata rather
    /// than in it, so a writer of the same format rewrites the metadata exactly.
    fn metadata_types(&self) -> Option<&crate::metadata::Map> {
        None
    }
}

/// An opened file of some format.
pub trait Container: TensorSource {
    /// The format.
    fn format(&self) -> Format;
    /// The version as the file states it (`1.0`, `v2`, `0.1`, …).
    fn version(&self) -> String;
    /// Runs every integrity layer the format has.
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport;
    /// Non-fatal observations made while opening (newer minor version, unaligned data…).
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }
    /// What a salvaging open ([`crate::ReadOptions::salvage`]) left out: each part it
    /// could not read. Empty when nothing was lost (and for every strict open).
    fn lost(&self) -> Vec<crate::refusal::Lost> {
        Vec::new()
    }
}

/// Implements [`TensorSource`] and [`Container`] for a `self_cell` whose dependent is a
/// `Box<dyn Container>` (a container tied to the bytes it borrows): every call is
/// forwarded to the dependent.
macro_rules! forward_to_dependent {
    ($t:ty) => {
        impl $crate::model::TensorSource for $t {
            fn metadata(&self) -> &$crate::metadata::Metadata {
                self.with_dependent(|_, c| c.metadata())
            }
            fn tensor_infos(&self) -> &[$crate::tensor::TensorInfo] {
                self.with_dependent(|_, c| c.tensor_infos())
            }
            fn tensor(&self, name: &str) -> $crate::error::Result<$crate::tensor::TensorView<'_>> {
                self.with_dependent(|_, c| c.tensor(name))
            }
            fn chunks(&self) -> &[$crate::tensor::ChunkInfo] {
                self.with_dependent(|_, c| c.chunks())
            }
            fn chunk(&self, name: &str) -> $crate::error::Result<std::borrow::Cow<'_, [u8]>> {
                self.with_dependent(|_, c| c.chunk(name))
            }
            fn source_format(&self) -> Option<$crate::format::Format> {
                self.with_dependent(|_, c| c.source_format())
            }
            fn metadata_types(&self) -> Option<&$crate::metadata::Metadata> {
                self.with_dependent(|_, c| c.metadata_types())
            }
        }

        impl $crate::model::Container for $t {
            fn format(&self) -> $crate::format::Format {
                self.with_dependent(|_, c| c.format())
            }
            fn version(&self) -> String {
                self.with_dependent(|_, c| c.version())
            }
            fn verify(&self, opts: &$crate::verify::VerifyOptions) -> $crate::verify::VerifyReport {
                self.with_dependent(|_, c| c.verify(opts))
            }
            fn warnings(&self) -> Vec<String> {
                self.with_dependent(|_, c| c.warnings())
            }
            fn lost(&self) -> Vec<$crate::refusal::Lost> {
                self.with_dependent(|_, c| c.lost())
            }
        }
    };
}
pub(crate) use forward_to_dependent;

/// An owned, in-memory model: metadata, tensors, chunks.
#[derive(Debug, Clone, Default)]
pub struct Model {
    /// File-level metadata.
    pub metadata: Metadata,
    /// The source's metadata value types, see [`TensorSource::metadata_types`].
    pub metadata_types: Option<Metadata>,
    infos: Vec<TensorInfo>,
    /// The parts of `infos[i]`.
    parts: Vec<Vec<Part<'static>>>,
    /// Tensor name → position, so pushes and lookups stay O(1) for big models.
    index: HashMap<String, usize>,
    chunk_infos: Vec<ChunkInfo>,
    /// The bytes of `chunk_infos[i]`.
    chunk_bytes: Vec<Vec<u8>>,
}

impl Model {
    /// An empty model.
    pub fn new() -> Model {
        Model::default()
    }

    /// Adds a tensor after validating it. Names must be unique.
    pub fn push(&mut self, view: TensorView<'_>) -> Result<()> {
        view.validate()?;
        if self.index.contains_key(&view.info.name) {
            return Err(Error::invalid_input(format!(
                "duplicate tensor name {:?}",
                view.info.name
            )));
        }
        let view = view.into_owned();
        self.index.insert(view.info.name.clone(), self.infos.len());
        self.infos.push(view.info);
        self.parts.push(view.parts);
        Ok(())
    }

    /// Adds an opaque chunk. Names must be unique.
    pub fn push_chunk(&mut self, mut info: ChunkInfo, bytes: Vec<u8>) -> Result<()> {
        if self.chunk_infos.iter().any(|c| c.name == info.name) {
            return Err(Error::invalid_input(format!(
                "duplicate chunk name {:?}",
                info.name
            )));
        }
        info.len = Some(bytes.len() as u64);
        self.chunk_infos.push(info);
        self.chunk_bytes.push(bytes);
        Ok(())
    }

    /// Copies every tensor, chunk and the metadata out of a source.
    pub fn from_source(src: &dyn TensorSource) -> Result<Model> {
        let mut m = Model::new();
        m.metadata = src.metadata().clone();
        m.metadata_types = src.metadata_types().cloned();
        for info in src.tensor_infos() {
            m.push(src.tensor(&info.name)?)?;
        }
        for c in src.chunks() {
            m.push_chunk(c.clone(), src.chunk(&c.name)?.into_owned())?;
        }
        Ok(m)
    }
}

impl TensorSource for Model {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn metadata_types(&self) -> Option<&Metadata> {
        self.metadata_types.as_ref()
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let i = tensor_position(&self.index, name)?;
        Ok(TensorView {
            info: self.infos[i].clone(),
            parts: self.parts[i]
                .iter()
                .map(|p| Part {
                    role: p.role.clone(),
                    bytes: Cow::Borrowed(p.bytes.as_ref()),
                })
                .collect(),
        })
    }
    fn chunks(&self) -> &[ChunkInfo] {
        &self.chunk_infos
    }
    fn chunk(&self, name: &str) -> Result<Cow<'_, [u8]>> {
        self.chunk_infos
            .iter()
            .position(|c| c.name == name)
            .map(|i| Cow::Borrowed(self.chunk_bytes[i].as_slice()))
            .ok_or_else(|| Error::not_found(format!("no chunk named {name:?}")))
    }
}

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync + ?Sized>() {}

    /// What a caller shares between threads (the Python package reads one file from
    /// many threads with no lock) is `Send + Sync`: opened files, sets, boxed containers.
    #[test]
    fn opened_files_and_sets_are_send_and_sync() {
        assert_send_sync::<dyn crate::Container>();
        assert_send_sync::<Box<dyn crate::Container>>();
        assert_send_sync::<crate::Opened>();
        assert_send_sync::<crate::ModelSet>();
        assert_send_sync::<crate::Model>();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DType, TensorInfo};

    /// `tensors` reads in parallel and answers in the order asked, an error in its place.
    #[test]
    fn tensors_come_back_in_the_order_asked() {
        let mut m = Model::new();
        for (name, byte) in [("a", 1u8), ("b", 2), ("c", 3)] {
            let info = TensorInfo::dense(name, DType::U8, vec![1000]);
            m.push(TensorView::dense(info, Cow::Owned(vec![byte; 1000])).unwrap())
                .unwrap();
        }
        let got = m.tensors(&["c", "zz", "a", "b", "a"]);
        assert_eq!(got.len(), 5);
        let first = |r: &Result<TensorView<'_>>| r.as_ref().ok().map(|v| v.data().unwrap()[0]);
        assert_eq!(
            got.iter().map(first).collect::<Vec<_>>(),
            [Some(3), None, Some(1), Some(2), Some(1)]
        );
        assert_eq!(
            got[1].as_ref().err().map(Error::kind),
            Some(crate::ErrorKind::NotFound)
        );
    }
}
