//! `TSAV` chunk payloads (pyfolds' `torch_state`: a `torch.save` file), read through
//! the PyTorch reader's allow-list pickle interpreter (`formats/pytorch`): nothing in
//! them is ever executed. Their tensors are listed as `<chunk>/<name>` (the PyTorch
//! reader's `.`-joined names, as NPZ0 arrays are `<chunk>/<array>`), and read from the
//! checked, decompressed payload.
//!
//! The chunk itself stays an opaque chunk (`holds_tensors: false`): FOLD→FOLD rewrites
//! carry it byte for byte, and the writer then leaves out the tensors it lists
//! ([`listed_in_carried`]) so they are not stored twice. A payload the reader refuses
//! (a global outside the allow-list, a TorchScript archive, damage) is only a warning
//! naming what was refused: the chunk stays opaque, as before, with no tensors.
//! The first tensor read from a chunk decodes all of the chunk's tensors into a
//! [`Cache`] (as much memory as the payload), so reading them one after another parses
//! the pickle once, not once per tensor.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::any::ReadOptions;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::limits::Limits;
use crate::model::{Container, Model, TensorSource};

/// One tensor of a `TSAV` payload: its name inside the payload, dtype and shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The PyTorch reader's name (`state_dict.layer.weight`).
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Vec<u64>,
}

fn open<'p>(payload: &'p [u8], limits: &Limits) -> Result<Box<dyn Container + 'p>> {
    let opts = ReadOptions {
        limits: limits.clone(),
        ..ReadOptions::default()
    };
    let f = crate::formats::open(payload, &opts)?;
    if f.format() != Format::Pytorch {
        return Err(Error::unsupported(format!(
            "the payload is {}, not a torch.save file",
            f.format().name()
        )));
    }
    Ok(f)
}

/// Lists the tensors of a `TSAV` payload, and the PyTorch reader's warnings about it.
pub fn list(payload: &[u8], limits: &Limits) -> Result<(Vec<Entry>, Vec<String>)> {
    let f = open(payload, limits)?;
    let entries = (f.tensor_infos().iter())
        .map(|t| Entry {
            name: t.name.clone(),
            dtype: t.dtype,
            shape: t.shape.clone(),
        })
        .collect();
    Ok((entries, f.warnings()))
}

/// The tensors of the last `TSAV` chunk read, decoded.
#[derive(Debug, Default)]
pub struct Cache(Mutex<Option<(usize, Arc<Model>)>>);

impl Cache {
    /// Tensor `name` of chunk `chunk` (little-endian, C order); `payload` gives the
    /// chunk's checked, decompressed bytes when the chunk is not the one cached.
    pub fn read<'p>(
        &self,
        chunk: usize,
        name: &str,
        payload: impl FnOnce() -> Result<std::borrow::Cow<'p, [u8]>>,
        limits: &Limits,
    ) -> Result<Vec<u8>> {
        let cached = match self.0.lock() {
            Ok(g) => g
                .as_ref()
                .filter(|(c, _)| *c == chunk)
                .map(|(_, m)| m.clone()),
            Err(_) => None,
        };
        let model = match cached {
            Some(m) => m,
            None => {
                let p = payload()?;
                let f = open(&p, limits)?;
                let m = Arc::new(Model::from_source(f.as_ref())?);
                if let Ok(mut g) = self.0.lock() {
                    *g = Some((chunk, m.clone()));
                }
                m
            }
        };
        let view = model.tensor(name)?;
        Ok(view.data()?.to_vec())
    }
}

/// The names (`<chunk>/<name>`) of the tensors that the `TSAV` chunks `src` carries as
/// opaque chunks hold: a FOLD writer that carries those chunks leaves them out.
pub fn listed_in_carried(src: &dyn TensorSource, limits: &Limits) -> HashSet<String> {
    let mut out = HashSet::new();
    for c in src.chunks().iter().filter(|c| !c.holds_tensors) {
        if c.kind != "TSAV" {
            continue;
        }
        let Ok(bytes) = src.chunk(&c.name) else {
            continue;
        };
        if let Ok((entries, _)) = list(&bytes, limits) {
            out.extend(
                entries
                    .into_iter()
                    .map(|e| format!("{}/{}", c.name, e.name)),
            );
        }
    }
    out
}
