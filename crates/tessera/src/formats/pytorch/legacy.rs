//! The legacy (before torch 1.6, `_use_new_zipfile_serialization=False`) layout: five
//! pickles one after another, then the raw storages.

use std::collections::HashMap;

use super::pickle::{self, Graph, Obj};
use super::read::{Loc, Parts, StorageLoc};
use super::tree;
use crate::any::ReadOptions;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::source::SourceRef;

/// The magic number of the first pickle (`0x1950a86a20f9469cfc6c`).
pub const MAGIC: i128 = 0x1950a86a20f9469cfc6c;

/// Parses the pickles, reading a growing prefix of the file until they all fit (their
/// length is not stored), then walks the storage headers.
pub fn parse<'d>(src: SourceRef<'d>, opts: &ReadOptions) -> Result<Parts<'d>> {
    let cap = src.len().min(opts.limits.max_index_bytes);
    let mut want = cap.min(1 << 20);
    loop {
        let head = src.read_at(0, want)?;
        match pickles(&head, opts) {
            Ok(p) => return storages(src, p, opts),
            Err(_) if want < cap => want = cap.min(want * 4),
            Err(e) => return Err(e),
        }
    }
}

struct Pickles {
    little_endian: bool,
    protocol: i128,
    object: Graph,
    keys: Vec<String>,
    end: u64,
}

fn pickles(head: &[u8], opts: &ReadOptions) -> Result<Pickles> {
    let l = &opts.limits;
    let (magic, at) = pickle::load(head, 0, l, "magic number pickle")?;
    if magic.get(magic.root) != &Obj::Int(MAGIC) {
        return Err(Error::malformed(
            "not a PyTorch legacy file: wrong magic number",
        ));
    }
    let (proto, at) = pickle::load(head, at, l, "protocol version pickle")?;
    let protocol = match proto.get(proto.root) {
        Obj::Int(1001) => 1001,
        Obj::Int(p) => {
            return Err(Error::unsupported_version(format!(
                "legacy protocol version {p} (1001 is read)"
            )))
        }
        _ => return Err(Error::malformed("protocol version is not an int")),
    };
    let (info, at) = pickle::load(head, at, l, "sys_info pickle")?;
    let little_endian = match info.get(info.root) {
        Obj::Dict(d) => d
            .iter()
            .find(|(k, _)| info.get(*k) == &Obj::Str("little_endian".into()))
            .map(|(_, v)| info.get(*v) != &Obj::Bool(false))
            .unwrap_or(true),
        _ => return Err(Error::malformed("sys_info is not a dict")),
    };
    let (object, at) = pickle::load(head, at, l, "object pickle")?;
    let (keys_g, at) = pickle::load(head, at, l, "storage keys pickle")?;
    let keys = match keys_g.get(keys_g.root) {
        Obj::List(k) => k
            .iter()
            .map(|&id| match keys_g.get(id) {
                Obj::Str(s) => Ok(s.clone()),
                _ => Err(Error::malformed("a storage key is not a str")),
            })
            .collect::<Result<Vec<_>>>()?,
        _ => return Err(Error::malformed("the storage keys are not a list")),
    };
    Ok(Pickles {
        little_endian,
        protocol,
        object,
        keys,
        end: at as u64,
    })
}

fn storages<'d>(src: SourceRef<'d>, p: Pickles, opts: &ReadOptions) -> Result<Parts<'d>> {
    let flat = tree::flatten(&p.object, &opts.limits)?;
    // Each storage's element type, from the tensors naming it.
    let mut dtypes: HashMap<&str, DType> = HashMap::new();
    for (_, t) in &flat.tensors {
        dtypes.insert(&t.storage.key, t.storage.dtype);
    }
    opts.limits.check_entries(p.keys.len() as u64)?;
    let mut storages = Vec::with_capacity(p.keys.len().min(1 << 16));
    let mut at = p.end;
    for key in &p.keys {
        let subject = || format!("storage {key:?}");
        let dtype = *dtypes.get(key.as_str()).ok_or_else(|| {
            Error::malformed("the storage is listed but no tensor names it").at_subject(subject())
        })?;
        let n8 = src.slice(at, 8, "storage size")?;
        let mut b = [0u8; 8];
        b.copy_from_slice(&n8);
        let numel = if p.little_endian {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        };
        let nbytes = numel
            .checked_mul(dtype.size() as u64)
            .ok_or_else(|| Error::malformed("storage size overflows").at_subject(subject()))?;
        crate::limits::check_range(at + 8, nbytes, src.len(), "storage data")
            .map_err(|e| e.at_subject(subject()))?;
        storages.push(StorageLoc {
            key: key.clone(),
            dtype,
            numel,
            loc: Loc::Raw(at + 8),
        });
        at += 8 + nbytes;
    }
    let mut by_key = HashMap::with_capacity(storages.len());
    for (i, s) in storages.iter().enumerate() {
        if by_key.insert(s.key.as_str(), i).is_some() {
            return Err(Error::malformed(format!(
                "storage {:?} is listed twice",
                s.key
            )));
        }
    }
    let mut warnings: Vec<String> = p.object.notes.clone();
    for (name, t) in &flat.tensors {
        if let Some(s) = by_key.get(t.storage.key.as_str()).map(|&i| &storages[i]) {
            if t.storage.view.is_none() && s.numel != t.storage.numel {
                return Err(Error::malformed(format!(
                    "storage {:?} holds {} elements, the pickle says {}",
                    s.key, s.numel, t.storage.numel
                ))
                .at_subject(format!("tensor {name:?}")));
            }
        }
    }
    if at < src.len() {
        warnings.push(format!(
            "{} bytes after the last storage are ignored",
            src.len() - at
        ));
    }
    Ok(Parts {
        src,
        version: format!("legacy {}", p.protocol),
        big_endian: !p.little_endian,
        records: Vec::new(),
        storages,
        flat,
        warnings,
    })
}
