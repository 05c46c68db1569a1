//! `.metadata`: the pickled `Metadata` of a DCP checkpoint, read through the allow-list
//! pickle reader (`formats/pytorch/pickle.rs`, its DCP section) and checked here into a
//! [`Checkpoint`]: every tensor with its chunks and where each is stored, every
//! non-tensor item with where it is stored.

use std::collections::HashMap;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::formats::pytorch::pickle::{self, describe, Graph, Id, Obj};
use crate::limits::Limits;

const MD: &str = "torch.distributed.checkpoint.metadata.";
const FS: &str = "torch.distributed.checkpoint.filesystem.";

/// Where an item's bytes are: `length` bytes at `offset` of the file `path` (a plain
/// name beside `.metadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The file (`__0_0.distcp`).
    pub path: String,
    /// The item's first byte in it.
    pub offset: u64,
    /// The item's length.
    pub length: u64,
}

/// One chunk of a tensor: the box `offsets .. offsets + sizes`, stored at `at`.
#[derive(Debug, Clone)]
pub struct Chunk {
    /// Where the box starts, per dimension.
    pub offsets: Vec<u64>,
    /// Its extent, per dimension.
    pub sizes: Vec<u64>,
    /// Where its `torch.save` archive is.
    pub at: Stored,
}

/// A tensor of the checkpoint.
#[derive(Debug, Clone)]
pub struct TensorMeta {
    /// The flattened name (`model.embed.weight`).
    pub name: String,
    /// Its element type.
    pub dtype: DType,
    /// Its full shape.
    pub shape: Vec<u64>,
    /// The chunks that tile it.
    pub chunks: Vec<Chunk>,
}

/// A non-tensor item (a `torch.save` of a Python object).
#[derive(Debug, Clone)]
pub struct ItemMeta {
    /// The flattened name (`step`).
    pub name: String,
    /// Where its `torch.save` archive is.
    pub at: Stored,
}

/// A checked `.metadata`.
#[derive(Debug, Clone, Default)]
pub struct Checkpoint {
    /// The tensors, in the order of `state_dict_metadata`.
    pub tensors: Vec<TensorMeta>,
    /// The non-tensor items, in that order.
    pub items: Vec<ItemMeta>,
    /// `version` (`1.0.0`), when given.
    pub version: Option<String>,
    /// The files named, in first-named order.
    pub files: Vec<String>,
}

fn bad(msg: impl Into<String>) -> Error {
    Error::malformed(msg.into())
}

/// The torch dtype names DCP writes (`torch.float32`) → ours.
fn dtype_of(name: &str) -> Option<DType> {
    use DType::*;
    Some(match name {
        "float64" => F64,
        "float32" => F32,
        "float16" => F16,
        "bfloat16" => BF16,
        "int64" => I64,
        "int32" => I32,
        "int16" => I16,
        "int8" => I8,
        "uint8" => U8,
        "uint16" => U16,
        "uint32" => U32,
        "uint64" => U64,
        "bool" => Bool,
        "complex64" => C64,
        "complex128" => C128,
        "float8_e4m3fn" => F8E4M3FN,
        "float8_e5m2" => F8E5M2,
        _ => return None,
    })
}

/// The torch dtype name of ours (what the writer pickles).
pub fn torch_dtype(d: DType) -> Option<&'static str> {
    use DType::*;
    Some(match d {
        F64 => "float64",
        F32 => "float32",
        F16 => "float16",
        BF16 => "bfloat16",
        I64 => "int64",
        I32 => "int32",
        I16 => "int16",
        I8 => "int8",
        U8 => "uint8",
        U16 => "uint16",
        U32 => "uint32",
        U64 => "uint64",
        Bool => "bool",
        C64 => "complex64",
        C128 => "complex128",
        F8E4M3FN => "float8_e4m3fn",
        F8E5M2 => "float8_e5m2",
        _ => return None,
    })
}

struct R<'g> {
    g: &'g Graph,
    limits: &'g Limits,
}

impl R<'_> {
    fn obj(&self, id: Id) -> &Obj {
        self.g.get(id)
    }
    /// The fields of an object of class `class` (its dict state).
    fn fields(&self, id: Id, class: &str, what: &str) -> Result<HashMap<&str, Id>> {
        match self.obj(id) {
            Obj::Object {
                class: c,
                state: Some(s),
            } if *c == class => match self.obj(*s) {
                Obj::Dict(d) => {
                    let mut m = HashMap::new();
                    for (k, v) in d {
                        match self.obj(*k) {
                            Obj::Str(k) => {
                                m.insert(k.as_str(), *v);
                            }
                            o => {
                                return Err(bad(format!(
                                    "{what}: a field named by {}",
                                    describe(o)
                                )))
                            }
                        }
                    }
                    Ok(m)
                }
                o => Err(bad(format!(
                    "{what}: the state of {class} is {}",
                    describe(o)
                ))),
            },
            o => Err(bad(format!("{what} is {}, not a {class}", describe(o)))),
        }
    }
    fn field(&self, f: &HashMap<&str, Id>, name: &str, what: &str) -> Result<Id> {
        f.get(name)
            .copied()
            .ok_or_else(|| bad(format!("{what} has no field {name:?}")))
    }
    fn str(&self, id: Id, what: &str) -> Result<String> {
        match self.obj(id) {
            Obj::Str(s) => Ok(s.clone()),
            o => Err(bad(format!("{what} is {}, not a str", describe(o)))),
        }
    }
    fn uint(&self, id: Id, what: &str) -> Result<u64> {
        match self.obj(id) {
            Obj::Int(i) => u64::try_from(*i)
                .map_err(|_| bad(format!("{what} is {i}, not a non-negative integer"))),
            o => Err(bad(format!("{what} is {}, not an int", describe(o)))),
        }
    }
    /// A `torch.Size` (read as its tuple) of non-negative ints.
    fn size(&self, id: Id, what: &str) -> Result<Vec<u64>> {
        match self.obj(id) {
            Obj::Tuple(t) | Obj::List(t) => {
                self.limits.check_rank(t.len() as u64)?;
                t.iter().map(|&i| self.uint(i, what)).collect()
            }
            o => Err(bad(format!("{what} is {}, not a size", describe(o)))),
        }
    }
}

/// A `relative_path`: a plain file name in the checkpoint's directory.
fn plain(name: &str, what: &str) -> Result<()> {
    let bad_name = name.is_empty()
        || name == "."
        || name == ".."
        || name.contains(['/', '\\', '\0'])
        || name.contains(':');
    if bad_name {
        return Err(bad(format!(
            "{what}: relative_path {:?} is not a plain file name in the checkpoint's directory",
            name.escape_debug().to_string()
        )));
    }
    Ok(())
}

/// Parses and checks `.metadata` (see the module docs of `formats/dcp`).
pub fn parse(bytes: &[u8], limits: &Limits) -> Result<Checkpoint> {
    limits.check_index(bytes.len() as u64)?;
    let (g, end) = pickle::load(bytes, 0, limits, ".metadata")?;
    if end != bytes.len() {
        return Err(bad(format!(
            ".metadata: {} bytes after the end of the pickle",
            bytes.len() - end
        )));
    }
    let r = R { g: &g, limits };
    let top = r.fields(g.root, &format!("{MD}Metadata"), ".metadata")?;
    let version = match top.get("version").map(|&v| r.obj(v)) {
        None | Some(Obj::None) => None,
        Some(Obj::Str(s)) => Some(s.clone()),
        Some(o) => return Err(bad(format!("Metadata.version is {}", describe(o)))),
    };
    if let Some(v) = &version {
        if !v.starts_with("1.") {
            return Err(Error::unsupported_version(format!(
                "DCP metadata version {:?} (1.x is read)",
                v.escape_debug().to_string()
            )));
        }
    }
    // storage_data: MetadataIndex(fqn, offset) → _StorageInfo.
    let sd = r.field(&top, "storage_data", "Metadata")?;
    let Obj::Dict(entries) = r.obj(sd) else {
        return Err(bad(format!(
            "Metadata.storage_data is {}, not a dict (a storage layer other than the file system's?)",
            describe(r.obj(sd))
        )));
    };
    limits.check_entries(entries.len() as u64)?;
    let mut stored: HashMap<(String, Option<Vec<u64>>), Stored> = HashMap::new();
    let mut files: Vec<String> = Vec::new();
    for (k, v) in entries {
        let kf = r.fields(*k, &format!("{MD}MetadataIndex"), "a storage_data key")?;
        let fqn = r.str(r.field(&kf, "fqn", "MetadataIndex")?, "MetadataIndex.fqn")?;
        limits.check_name(fqn.len() as u64)?;
        let what = format!("storage_data[{:?}]", fqn.escape_debug().to_string());
        let offset = match kf.get("offset").map(|&o| (o, r.obj(o))) {
            None | Some((_, Obj::None)) => None,
            Some((o, _)) => Some(r.size(o, &format!("{what}: MetadataIndex.offset"))?),
        };
        let vf = r.fields(*v, &format!("{FS}_StorageInfo"), &what)?;
        if let Some(&t) = vf.get("transform_descriptors") {
            match r.obj(t) {
                Obj::None => {}
                Obj::List(l) | Obj::Tuple(l) if l.is_empty() => {}
                Obj::List(l) | Obj::Tuple(l) => {
                    let names: Vec<String> = l
                        .iter()
                        .map(|&i| match r.obj(i) {
                            Obj::Str(s) => format!("{:?}", s.escape_debug().to_string()),
                            o => describe(o),
                        })
                        .collect();
                    return Err(Error::unsupported(format!(
                        "{what}: stored through transforms ({}): only items stored as written (no transform_descriptors) are read",
                        names.join(", ")
                    )));
                }
                o => {
                    return Err(bad(format!(
                        "{what}: transform_descriptors is {}",
                        describe(o)
                    )))
                }
            }
        }
        let path = r.str(
            r.field(&vf, "relative_path", &what)?,
            &format!("{what}: relative_path"),
        )?;
        plain(&path, &what)?;
        let at = Stored {
            offset: r.uint(r.field(&vf, "offset", &what)?, &format!("{what}: offset"))?,
            length: r.uint(r.field(&vf, "length", &what)?, &format!("{what}: length"))?,
            path,
        };
        at.offset
            .checked_add(at.length)
            .ok_or_else(|| bad(format!("{what}: offset + length overflows")))?;
        if !files.contains(&at.path) {
            limits.check_entries(files.len() as u64 + 1)?;
            files.push(at.path.clone());
        }
        if stored.insert((fqn, offset), at).is_some() {
            return Err(bad(format!("{what}: stored twice")));
        }
    }
    // state_dict_metadata: fqn → TensorStorageMetadata | BytesStorageMetadata.
    let sdm = r.field(&top, "state_dict_metadata", "Metadata")?;
    let Obj::Dict(items) = r.obj(sdm) else {
        return Err(bad("Metadata.state_dict_metadata is not a dict"));
    };
    limits.check_entries(items.len() as u64)?;
    let mut cp = Checkpoint {
        version,
        ..Checkpoint::default()
    };
    let mut chunks_total = 0u64;
    for (k, v) in items {
        let name = r.str(*k, "a state_dict_metadata key")?;
        limits.check_name(name.len() as u64)?;
        let what = format!("{:?}", name.escape_debug().to_string());
        match r.obj(*v) {
            Obj::Object { class, .. } if *class == format!("{MD}BytesStorageMetadata") => {
                let at = stored.remove(&(name.clone(), None)).ok_or_else(|| {
                    bad(format!(
                        "item {what}: no storage_data entry says where it is"
                    ))
                })?;
                cp.items.push(ItemMeta { name, at });
            }
            _ => {
                let t = tensor(&r, *v, &name, &what, &mut stored, &mut chunks_total)?;
                cp.tensors.push(t);
            }
        }
    }
    if let Some(((fqn, _), _)) = stored.iter().next() {
        return Err(bad(format!(
            "storage_data names {:?}, which state_dict_metadata does not hold (or not at that offset)",
            fqn.escape_debug().to_string()
        )));
    }
    cp.files = files;
    Ok(cp)
}

fn tensor(
    r: &R<'_>,
    v: Id,
    name: &str,
    what: &str,
    stored: &mut HashMap<(String, Option<Vec<u64>>), Stored>,
    chunks_total: &mut u64,
) -> Result<TensorMeta> {
    let subject = |e: Error| e.at_subject(format!("tensor {what}"));
    let f = r
        .fields(
            v,
            &format!("{MD}TensorStorageMetadata"),
            "its storage metadata",
        )
        .map_err(subject)?;
    let props = r
        .field(&f, "properties", "TensorStorageMetadata")
        .map_err(subject)?;
    let dtype = properties_dtype(r, props).map_err(subject)?;
    let shape = r
        .size(
            r.field(&f, "size", "TensorStorageMetadata")
                .map_err(subject)?,
            "size",
        )
        .map_err(subject)?;
    let numel = crate::tensor::numel(&shape).map_err(subject)?;
    let list = r
        .field(&f, "chunks", "TensorStorageMetadata")
        .map_err(subject)?;
    let (Obj::List(ids) | Obj::Tuple(ids)) = r.obj(list) else {
        return Err(subject(bad("chunks is not a list")));
    };
    *chunks_total += ids.len() as u64;
    r.limits.check_entries(*chunks_total)?;
    let mut chunks = Vec::with_capacity(ids.len());
    for (i, &c) in ids.iter().enumerate() {
        let cw = format!("chunk {i}");
        let cf = r
            .fields(c, &format!("{MD}ChunkStorageMetadata"), &cw)
            .map_err(subject)?;
        let offsets = r
            .size(
                r.field(&cf, "offsets", &cw).map_err(subject)?,
                &format!("{cw}: offsets"),
            )
            .map_err(subject)?;
        let sizes = r
            .size(
                r.field(&cf, "sizes", &cw).map_err(subject)?,
                &format!("{cw}: sizes"),
            )
            .map_err(subject)?;
        if offsets.len() != shape.len() || sizes.len() != shape.len() {
            return Err(subject(bad(format!(
                "{cw}: offsets {offsets:?} and sizes {sizes:?} are not of the tensor's rank {}",
                shape.len()
            ))));
        }
        for d in 0..shape.len() {
            if offsets[d]
                .checked_add(sizes[d])
                .is_none_or(|e| e > shape[d])
            {
                return Err(subject(bad(format!(
                    "{cw}: offsets {offsets:?} + sizes {sizes:?} pass the shape {shape:?} in dimension {d}"
                ))));
            }
        }
        let at = stored
            .remove(&(name.to_string(), Some(offsets.clone())))
            .ok_or_else(|| {
                subject(bad(format!(
                    "{cw} at offsets {offsets:?}: no storage_data entry says where it is"
                )))
            })?;
        chunks.push(Chunk { offsets, sizes, at });
    }
    check_tiling(&shape, numel, &chunks).map_err(subject)?;
    Ok(TensorMeta {
        name: name.to_string(),
        dtype,
        shape,
        chunks,
    })
}

/// `TensorProperties`' state: `(dtype, layout, requires_grad, memory_format,
/// pin_memory[, strides])` (or a dict of fields, as a dataclass without `__getstate__`).
fn properties_dtype(r: &R<'_>, id: Id) -> Result<DType> {
    let class = format!("{MD}TensorProperties");
    let (dtype, layout) = match r.obj(id) {
        Obj::Object {
            class: c,
            state: Some(s),
        } if *c == class => match r.obj(*s) {
            Obj::Tuple(t) if (5..=6).contains(&t.len()) => (t[0], Some(t[1])),
            Obj::Dict(_) => {
                let f = r.fields(id, &class, "properties")?;
                (
                    r.field(&f, "dtype", "TensorProperties")?,
                    f.get("layout").copied(),
                )
            }
            o => return Err(bad(format!("TensorProperties' state is {}", describe(o)))),
        },
        o => {
            return Err(bad(format!(
                "properties is {}, not TensorProperties",
                describe(o)
            )))
        }
    };
    if let Some(l) = layout {
        match r.obj(l) {
            Obj::Str(s) if s == "torch.strided" => {}
            Obj::None => {}
            Obj::Str(s) => {
                return Err(Error::unsupported(format!(
                    "layout {:?}: only strided (dense) tensors are read",
                    s.escape_debug().to_string()
                )))
            }
            o => return Err(bad(format!("layout is {}", describe(o)))),
        }
    }
    match r.obj(dtype) {
        Obj::Global(g) => {
            let n = describe(&Obj::Global(*g));
            n.strip_prefix("torch.")
                .and_then(dtype_of)
                .ok_or_else(|| Error::unsupported(format!("dtype {n} is not read")))
        }
        o => Err(bad(format!("dtype is {}", describe(o)))),
    }
}

/// The chunks tile the tensor exactly: their volumes add up to its elements and no two
/// overlap (so none is left uncovered).
pub fn check_tiling(shape: &[u64], numel: u64, chunks: &[Chunk]) -> Result<()> {
    let mut total = 0u64;
    for c in chunks {
        let v = c
            .sizes
            .iter()
            .try_fold(1u64, |a, &s| a.checked_mul(s))
            .ok_or_else(|| bad("a chunk's size overflows"))?;
        total = total
            .checked_add(v)
            .ok_or_else(|| bad("the chunks' sizes overflow"))?;
    }
    // Overlaps, among the chunks with elements, sorted by their first offset.
    let mut live: Vec<&Chunk> = chunks.iter().filter(|c| !c.sizes.contains(&0)).collect();
    if !shape.is_empty() {
        live.sort_by_key(|c| c.offsets[0]);
    }
    for (i, a) in live.iter().enumerate() {
        for b in &live[i + 1..] {
            if !shape.is_empty() && b.offsets[0] >= a.offsets[0] + a.sizes[0] {
                break;
            }
            let meet = (0..shape.len()).all(|d| {
                a.offsets[d] < b.offsets[d] + b.sizes[d] && b.offsets[d] < a.offsets[d] + a.sizes[d]
            });
            if meet {
                return Err(bad(format!(
                    "chunks at offsets {:?} (sizes {:?}) and {:?} (sizes {:?}) overlap",
                    a.offsets, a.sizes, b.offsets, b.sizes
                )));
            }
        }
    }
    if total != numel {
        return Err(bad(format!(
            "the chunks cover {total} of the tensor's {numel} elements (shape {shape:?}): they leave a gap"
        )));
    }
    Ok(())
}
