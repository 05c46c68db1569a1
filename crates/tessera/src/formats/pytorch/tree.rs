//! From an unpickled object tree to named tensors and metadata.
//!
//! Dict keys and list positions are joined with `.` (the `state_dict` convention:
//! `encoder.layers.0.weight`); a tensor at the root is named `tensor`. A subtree that
//! holds no tensor becomes one metadata value under its joined name (`epoch`,
//! `optimizer.param_groups`); tensors never go into metadata. The root container's
//! entries are always walked one by one, so a checkpoint without tensors still gives
//! one metadata key per top-level entry. The root dict's attribute `_tessera_metadata`
//! (set by Tessera's writer) gives one metadata value per entry too; its keys are not
//! entries of the state dict, so one may be named like a tensor.

use std::collections::HashSet;

use super::pickle::{describe, Graph, Id, Obj, TensorRef, METADATA_ATTR};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::metadata::{Map, Metadata, Value};

/// The tensors and metadata of one checkpoint object.
#[derive(Debug, Default)]
pub struct Flat {
    /// Tensors by name, in pickle order.
    pub tensors: Vec<(String, TensorRef)>,
    /// Every non-tensor value, by joined name.
    pub metadata: Metadata,
}

/// Flattens `g` (see the module docs). Names must be unique; depth and the number of
/// visits (a pickle may share one container many times) are bounded by `limits`.
pub fn flatten(g: &Graph, limits: &Limits) -> Result<Flat> {
    let mut w = Walk {
        g,
        limits,
        visits: 0,
        names: HashSet::new(),
        out: Flat::default(),
    };
    match g.get(g.root) {
        Obj::Dict(_) | Obj::List(_) | Obj::Tuple(_) => {
            w.node(g.root, "", 0)?;
            w.metadata_attr()?;
        }
        _ if w.has_tensor(g.root, 0)? => w.node(g.root, "tensor", 0)?,
        o => {
            return Err(Error::unsupported(format!(
                "the checkpoint holds {} and no tensors",
                describe(o)
            )))
        }
    }
    Ok(w.out)
}

struct Walk<'a> {
    g: &'a Graph,
    limits: &'a Limits,
    visits: u64,
    names: HashSet<String>,
    out: Flat,
}

impl Walk<'_> {
    fn visit(&mut self, depth: usize) -> Result<()> {
        self.visits += 1;
        if self.visits > self.limits.max_entries {
            return Err(Error::limit(format!(
                "the checkpoint's objects expand to more than {} nodes",
                self.limits.max_entries
            )));
        }
        if depth > self.limits.max_depth {
            return Err(Error::limit(format!(
                "the checkpoint nests deeper than {} levels",
                self.limits.max_depth
            )));
        }
        Ok(())
    }

    /// The children of a container as (key, id).
    fn children(&self, id: Id) -> Result<Vec<(String, Id)>> {
        Ok(match self.g.get(id) {
            Obj::Dict(d) => d
                .iter()
                .map(|&(k, v)| Ok((self.key(k)?, v)))
                .collect::<Result<_>>()?,
            Obj::List(l) | Obj::Tuple(l) => l
                .iter()
                .enumerate()
                .map(|(i, &v)| (i.to_string(), v))
                .collect(),
            _ => Vec::new(),
        })
    }

    fn key(&self, k: Id) -> Result<String> {
        Ok(match self.g.get(k) {
            Obj::Str(s) => s.clone(),
            Obj::Int(i) => i.to_string(),
            Obj::Bool(b) => if *b { "True" } else { "False" }.into(),
            Obj::None => "None".into(),
            o => {
                return Err(Error::unsupported(format!(
                    "a dict key that is {} (str and int keys are read)",
                    describe(o)
                )))
            }
        })
    }

    fn has_tensor(&mut self, id: Id, depth: usize) -> Result<bool> {
        self.visit(depth)?;
        match self.g.get(id) {
            Obj::Tensor(_) | Obj::Storage(_) => Ok(true),
            Obj::Dict(_) | Obj::List(_) | Obj::Tuple(_) => {
                for (_, c) in self.children(id)? {
                    if self.has_tensor(c, depth + 1)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            _ => Ok(false),
        }
    }

    fn claim(&mut self, name: &str) -> Result<()> {
        self.limits.check_name(name.len() as u64)?;
        if !self.names.insert(name.to_string()) {
            return Err(Error::malformed(format!(
                "two entries of the checkpoint are both named {name:?}"
            )));
        }
        Ok(())
    }

    fn node(&mut self, id: Id, name: &str, depth: usize) -> Result<()> {
        self.visit(depth)?;
        let join = |k: &str| {
            if name.is_empty() {
                k.to_string()
            } else {
                format!("{name}.{k}")
            }
        };
        match self.g.get(id) {
            Obj::Tensor(t) => {
                self.claim(name)?;
                self.out.tensors.push((name.to_string(), (**t).clone()));
            }
            Obj::Storage(s) => {
                // A bare storage: its elements as a 1-D tensor.
                self.claim(name)?;
                let t = TensorRef {
                    storage: (**s).clone(),
                    offset: 0,
                    size: vec![s.view.map_or(s.numel, |v| v.1)],
                    stride: vec![1],
                    dtype: s.dtype,
                    undecoded: None,
                };
                self.out.tensors.push((name.to_string(), t));
            }
            Obj::Dict(_) | Obj::List(_) | Obj::Tuple(_)
                if name.is_empty() || self.has_tensor(id, depth)? =>
            {
                for (k, c) in self.children(id)? {
                    self.node(c, &join(&k), depth + 1)?;
                }
            }
            _ => {
                self.claim(name)?;
                let v = self.value(id, depth)?;
                self.out.metadata.insert(name.to_string(), v);
            }
        }
        Ok(())
    }

    /// The root dict's [`METADATA_ATTR`] (what Tessera's writer stores file metadata
    /// in): each of its entries one metadata value, named by its key. Its keys are
    /// metadata names only, never entries of the state dict: one may equal a tensor's
    /// name (file metadata and tensors are separate namespaces in every format), but
    /// not another metadata key (a non-tensor entry of the state dict, or a key twice).
    fn metadata_attr(&mut self) -> Result<()> {
        let root = self.g.root;
        let attrs: Vec<Id> = (self.g.metadata_attrs.iter())
            .filter(|(d, _)| *d == root)
            .map(|(_, v)| *v)
            .collect();
        for v in attrs {
            if !matches!(self.g.get(v), Obj::Dict(_)) {
                return Err(Error::malformed(format!(
                    "the state dict's attribute {METADATA_ATTR:?} is {}, not a dict",
                    describe(self.g.get(v))
                )));
            }
            for (k, c) in self.children(v)? {
                self.limits.check_name(k.len() as u64)?;
                if self.out.metadata.get(&k).is_some() {
                    return Err(Error::malformed(format!(
                        "two metadata entries of the checkpoint are both named {k:?}"
                    )));
                }
                let value = self.value(c, 1)?;
                self.out.metadata.insert(k, value);
            }
        }
        Ok(())
    }

    /// A tensor-free object as a metadata value.
    fn value(&mut self, id: Id, depth: usize) -> Result<Value> {
        self.visit(depth)?;
        Ok(match self.g.get(id) {
            Obj::None => Value::Null,
            Obj::Bool(b) => Value::Bool(*b),
            Obj::Int(i) => Value::Int(*i),
            Obj::Float(f) => Value::Float(*f),
            Obj::Str(s) => Value::Str(s.clone()),
            Obj::Bytes(b) => Value::Bytes(b.clone()),
            Obj::List(l) | Obj::Tuple(l) => Value::List(
                l.iter()
                    .map(|&c| self.value(c, depth + 1))
                    .collect::<Result<_>>()?,
            ),
            Obj::Dict(_) => {
                let mut m = Map::new();
                for (k, c) in self.children(id)? {
                    let v = self.value(c, depth + 1)?;
                    m.insert(k, v);
                }
                Value::Map(m)
            }
            o @ Obj::Global(_) => Value::Str(describe(o)),
            o => {
                return Err(Error::unsupported(format!(
                    "{} cannot be metadata",
                    describe(o)
                )))
            }
        })
    }
}
