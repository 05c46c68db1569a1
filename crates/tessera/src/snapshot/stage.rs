//! The staging arena: where `request()` pins a generation. A copy of each tensor's bytes
//! into buffers kept between generations (a tensor of the same size reuses its buffer:
//! after the first generation a request allocates nothing), or, under `copy=False`,
//! references the caller promised not to mutate ([`Pinned`]), read by the writer when it
//! needs them. The arena is a [`TensorSource`], which the writers take as they take a
//! file.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::metadata::Metadata;
use crate::model::TensorSource;
use crate::tensor::{TensorInfo, TensorView};

/// Bytes the caller holds for the snapshot (`copy=False`): read by the writing thread,
/// perhaps more than once, while the generation is pinned.
pub trait Pinned: Send + Sync {
    /// The bytes (borrowed where they can be, else a copy made now).
    fn bytes(&self) -> Result<Cow<'_, [u8]>>;
}

impl Pinned for Vec<u8> {
    fn bytes(&self) -> Result<Cow<'_, [u8]>> {
        Ok(Cow::Borrowed(self))
    }
}

enum Buf {
    Owned(Vec<u8>),
    Held(Arc<dyn Pinned>),
}

/// A tensor handed to [`crate::snapshot::Snapshotter::request_pinned`]: its info (dense)
/// and its bytes.
pub struct PinnedTensor {
    /// Name, dtype, shape.
    pub info: TensorInfo,
    /// The bytes, held until the generation is written.
    pub bytes: Arc<dyn Pinned>,
}

/// The staged tensors of one generation.
#[derive(Default)]
pub struct Arena {
    infos: Vec<TensorInfo>,
    bufs: Vec<Buf>,
    index: HashMap<String, usize>,
    metadata: Metadata,
    /// Buffers of the last generation by byte length, for reuse.
    spare: HashMap<usize, Vec<Vec<u8>>>,
}

impl Arena {
    /// Bytes held as copies (the arena's own memory).
    pub fn owned_bytes(&self) -> u64 {
        self.bufs
            .iter()
            .map(|b| match b {
                Buf::Owned(v) => v.len() as u64,
                Buf::Held(_) => 0,
            })
            .sum::<u64>()
            + self
                .spare
                .values()
                .flatten()
                .map(|v| v.len() as u64)
                .sum::<u64>()
    }

    fn reset(&mut self, metadata: Metadata) {
        for b in self.bufs.drain(..) {
            if let Buf::Owned(v) = b {
                self.spare.entry(v.len()).or_default().push(v);
            }
        }
        self.infos.clear();
        self.index.clear();
        self.metadata = metadata;
    }

    /// Drops the buffers left from the last generation that this one did not reuse.
    fn trim(&mut self) {
        self.spare.clear();
    }

    fn add_info(&mut self, info: TensorInfo) -> Result<()> {
        if self
            .index
            .insert(info.name.clone(), self.infos.len())
            .is_some()
        {
            return Err(Error::invalid_input(format!(
                "duplicate tensor name {:?}",
                info.name
            )));
        }
        self.infos.push(info);
        Ok(())
    }

    /// Stages a copy of every tensor of `src` (dense tensors: a snapshot is of a
    /// training state), copied on the rayon pool, reusing last generation's buffers.
    pub fn copy_from(&mut self, src: &dyn TensorSource, metadata: Metadata) -> Result<()> {
        self.reset(metadata);
        let infos = src.tensor_infos().to_vec();
        let mut dests = Vec::with_capacity(infos.len());
        for info in infos {
            let n = usize::try_from(info.dense_nbytes()?)
                .map_err(|_| Error::invalid_input("tensor too large for this machine"))?;
            if !info.layout.required_parts().iter().all(|p| *p == "data") {
                return Err(Error::invalid_input(format!(
                    "{}: only dense tensors are snapshotted (layout {})",
                    info.name,
                    info.layout.name()
                )));
            }
            let buf = match self.spare.get_mut(&n).and_then(Vec::pop) {
                Some(b) => b,
                None => vec![0u8; n],
            };
            self.add_info(info)?;
            dests.push(buf);
        }
        self.trim();
        let infos = &self.infos;
        dests
            .par_iter_mut()
            .zip(infos.par_iter())
            .try_for_each(|(dst, info)| -> Result<()> {
                let t = src.tensor(&info.name)?;
                let data = t.data()?;
                if data.len() != dst.len() {
                    return Err(Error::invalid_input(format!(
                        "{}: {} bytes for a {:?} {} tensor",
                        info.name,
                        data.len(),
                        info.shape,
                        info.dtype
                    )));
                }
                dst.copy_from_slice(data);
                Ok(())
            })?;
        self.bufs = dests.into_iter().map(Buf::Owned).collect();
        Ok(())
    }

    /// Stages references (`copy=False`): nothing is copied now.
    pub fn hold(&mut self, tensors: Vec<PinnedTensor>, metadata: Metadata) -> Result<()> {
        self.reset(metadata);
        self.trim();
        for t in tensors {
            self.add_info(t.info)?;
            self.bufs.push(Buf::Held(t.bytes));
        }
        Ok(())
    }

    /// Lets go of held references (the generation is written or failed).
    pub fn release(&mut self) {
        let held = self.bufs.iter().any(|b| matches!(b, Buf::Held(_)));
        if held {
            self.bufs.clear();
            self.infos.clear();
            self.index.clear();
        }
    }

    /// Bytes of the staged tensors.
    pub fn nbytes(&self) -> u64 {
        self.infos
            .iter()
            .map(|i| i.dense_nbytes().unwrap_or(0))
            .sum()
    }
}

impl TensorSource for Arena {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let i = crate::model::tensor_position(&self.index, name)?;
        let data = match &self.bufs[i] {
            Buf::Owned(v) => Cow::Borrowed(&v[..]),
            Buf::Held(p) => p.bytes()?,
        };
        TensorView::dense(self.infos[i].clone(), data)
    }
}
