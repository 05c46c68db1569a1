//! The checkpoint layout (`checkpoint` option, `--checkpoint`): the standard chunks of
//! spec §7 as pyfolds' `save_fold_or_mind` writes them, so that pyfolds'
//! `load_fold_or_mind` resumes from our file and `read_nuclear_arrays` finds its arrays.
//!
//! | chunk | ctype | what |
//! | --- | --- | --- |
//! | `torch_state` | `TSAV` | a `torch.save` zip archive (Tessera's `.pt` writer) of `{"state_dict": OrderedDict(the tensors), **metadata}`: every dense tensor of a dtype torch has a storage for, by its name; the file metadata's top-level entries beside it (`config`, `step_id`, `epoch`, …). `torch.load(..., weights_only=True)` loads it. |
//! | `llm_manifest` | `JSON` | given (`chunk`), the source's, or made: `format`, `version`, `created_at_unix`, `writer`, `model_type` (from the metadata, when there), `routing` (`resume_training`: `torch_state`, `audit`: the other standard chunks written) and `chunks_expected` |
//! | `metrics`, `history`, `telemetry` | `JSON` | given with `chunk` (`--chunk NAME=FILE`, Python `chunks={NAME: obj}`), or the source's |
//! | `nuclear_arrays` | `NPZ0` | an `np.savez_compressed`-style zip (deflate): the dense tensors torch has no storage for that numpy has (u16, u32, u64), and the tensors `nuclear` names (of numpy's dtypes), as copies |
//!
//! A PyTorch training checkpoint (`{"model": …, "optimizer": …, "epoch": 3}`) comes
//! through as Tessera reads it: the tensors under their joined names
//! (`model.fc.weight`, `optimizer.state.0.exp_avg`) in `state_dict`, the non-tensor
//! entries (`epoch`, `optimizer.param_groups`) beside it — flat, not re-nested (the
//! joined names do not say where a module's own dots were).
//!
//! Then the source's other opaque chunks, copied, and, as one `STEN` chunk each, the
//! tensors neither archive can hold (sparse and other layouts, the fp8 types; `nuclear`
//! naming a tensor numpy cannot hold, bf16 say, is refused). A
//! source that already has a `torch_state` or `nuclear_arrays` chunk (a FOLD
//! checkpoint) is refused: rewritten without `checkpoint`, its chunks are copied as
//! they are. Read back, the tensors are `torch_state/state_dict.<name>` and
//! `nuclear_arrays/<name>` (the FOLD reader's names for them).
//!
//! `chunk` values are checked before anything is written: a name outside
//! [`JSON_CHUNKS`], a name given twice, a file that cannot be read or text that is
//! not JSON (as Python's `json` reads it: pyfolds' `read_json`) is refused naming it.
//! The bytes are stored as given. They also work without `checkpoint`, added as
//! `JSON` chunks before the tensors; a source chunk of the same name is replaced (noted).

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::metadata::{Map, Value};
use crate::model::TensorSource;
use crate::options::{OptionField, OptionSpec, OptionValue};
use crate::tensor::{Layout, TensorInfo, TensorView};

/// The JSON chunks `chunk` may give (spec §7).
pub const JSON_CHUNKS: [&str; 4] = ["llm_manifest", "metrics", "history", "telemetry"];

/// The chunks the checkpoint layout makes from the tensors.
pub const TENSOR_CHUNKS: [&str; 2] = ["torch_state", "nuclear_arrays"];

/// Where a `chunk` option's JSON comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum ChunkFrom {
    /// A file (`--chunk metrics=FILE`), read when the file is written.
    File(PathBuf),
    /// The bytes themselves (Python's `chunks={...}`).
    Bytes(Vec<u8>),
}

/// The `chunk` option: JSON chunks to add, by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChunkArgs(pub Vec<(String, ChunkFrom)>);

fn bad(o: &OptionSpec, why: String) -> Error {
    Error::invalid_input(format!("option {}: {why}", o.name))
}

fn check_name(o: &OptionSpec, name: &str, seen: &[(String, ChunkFrom)]) -> Result<()> {
    if !JSON_CHUNKS.contains(&name) {
        return Err(bad(
            o,
            format!(
                "unknown chunk {name:?} (NAME=FILE with NAME one of {})",
                JSON_CHUNKS.join(", ")
            ),
        ));
    }
    if seen.iter().any(|(n, _)| n == name) {
        return Err(bad(o, format!("chunk {name:?} given twice")));
    }
    Ok(())
}

fn parse_one(o: &OptionSpec, v: &OptionValue, out: &mut Vec<(String, ChunkFrom)>) -> Result<()> {
    match v {
        OptionValue::Text(s) => {
            let Some((name, file)) = s.split_once('=') else {
                return Err(bad(o, format!("{s:?} is not NAME=FILE")));
            };
            let name = name.trim();
            check_name(o, name, out)?;
            if file.is_empty() {
                return Err(bad(o, format!("chunk {name:?}: no file given")));
            }
            out.push((name.to_string(), ChunkFrom::File(PathBuf::from(file))));
        }
        // `NAME=` then the JSON bytes (what Python's `chunks={NAME: obj}` hands over).
        OptionValue::Bytes(b) => {
            let at = b
                .iter()
                .position(|&c| c == b'=')
                .ok_or_else(|| bad(o, "bytes that do not start with NAME=".into()))?;
            let name = std::str::from_utf8(&b[..at])
                .map_err(|_| bad(o, "a chunk name that is not UTF-8".into()))?;
            check_name(o, name, out)?;
            out.push((name.to_string(), ChunkFrom::Bytes(b[at + 1..].to_vec())));
        }
        OptionValue::List(items) => {
            for i in items {
                parse_one(o, i, out)?;
            }
        }
        _ => return Err(bad(o, "expected NAME=FILE".into())),
    }
    Ok(())
}

impl OptionField for ChunkArgs {
    fn parse(o: &OptionSpec, v: &OptionValue) -> Result<Self> {
        let mut out = Vec::new();
        parse_one(o, v, &mut out)?;
        Ok(ChunkArgs(out))
    }
    fn to_value(&self) -> Option<OptionValue> {
        let items = (self.0.iter())
            .map(|(name, from)| match from {
                ChunkFrom::File(p) => OptionValue::Text(format!("{name}={}", p.display())),
                ChunkFrom::Bytes(b) => {
                    let mut v = format!("{name}=").into_bytes();
                    v.extend_from_slice(b);
                    OptionValue::Bytes(v)
                }
            })
            .collect::<Vec<_>>();
        (!items.is_empty()).then_some(OptionValue::List(items))
    }
}

impl ChunkArgs {
    /// Each chunk's bytes, checked to be JSON as Python reads it; errors name the chunk
    /// (and the file).
    pub fn load(&self, limits: &crate::Limits) -> Result<Vec<(String, Vec<u8>)>> {
        let mut out = Vec::with_capacity(self.0.len());
        for (name, from) in &self.0 {
            let (bytes, whence) = match from {
                ChunkFrom::File(p) => {
                    let b = std::fs::read(p).map_err(|e| {
                        Error::from(e).at_subject(format!("chunk {name:?} file {}", p.display()))
                    })?;
                    (b, format!(" (file {})", p.display()))
                }
                ChunkFrom::Bytes(b) => (b.clone(), String::new()),
            };
            limits.check_index(bytes.len() as u64)?;
            crate::util::pyjson::loads(&bytes, limits.max_depth).map_err(|e| {
                Error::invalid_input(format!(
                    "chunk {name:?}{whence} is not JSON: {}",
                    e.message()
                ))
            })?;
            out.push((name.clone(), bytes));
        }
        Ok(out)
    }
}

/// Which tensors go where in the checkpoint layout.
pub struct Plan {
    /// Into `torch_state`, in source order.
    pub torch: Vec<TensorInfo>,
    /// Into `nuclear_arrays`, in source order (copies of `torch` ones included).
    pub npz: Vec<TensorInfo>,
    /// Names that go out in neither archive (one `STEN` chunk each).
    pub sten: Vec<String>,
}

/// Splits `src`'s tensors (see the module docs); `nuclear` names tensors to copy into
/// `nuclear_arrays` too. Refuses a source that has a chunk named like a tensor chunk
/// of the layout, and a `nuclear` name that is no tensor.
pub fn plan(src: &dyn TensorSource, nuclear: &[String]) -> Result<Plan> {
    if let Some(c) = (src.chunks().iter()).find(|c| TENSOR_CHUNKS.contains(&c.name.as_str())) {
        return Err(Error::invalid_input(format!(
            "checkpoint: the source already has a chunk {:?} (a FOLD checkpoint: rewrite it \
             without checkpoint, which copies its chunks)",
            c.name
        )));
    }
    let infos = src.tensor_infos();
    if let Some(n) = nuclear
        .iter()
        .find(|n| !infos.iter().any(|t| &t.name == *n))
    {
        return Err(Error::invalid_input(format!(
            "option nuclear: no tensor named {n:?}"
        )));
    }
    let torch_dtypes = crate::formats::pytorch::STORAGE_CLASS_DTYPES;
    // numpy's own dtypes: bf16 and the fp8 types would need ml_dtypes to load.
    use crate::dtype::DType::*;
    let npz_dtypes = [
        Bool, U8, U16, U32, U64, I8, I16, I32, I64, F16, F32, F64, C64, C128,
    ];
    let mut p = Plan {
        torch: Vec::new(),
        npz: Vec::new(),
        sten: Vec::new(),
    };
    for t in infos {
        let dense = t.layout == Layout::Dense;
        let in_torch = dense && torch_dtypes.contains(&t.dtype);
        let in_npz =
            dense && npz_dtypes.contains(&t.dtype) && (!in_torch || nuclear.contains(&t.name));
        let mut clean = t.clone();
        clean.storage = Default::default();
        if in_torch {
            p.torch.push(clean.clone());
        }
        if in_npz {
            p.npz.push(clean);
        } else if !in_torch {
            if nuclear.contains(&t.name) {
                return Err(Error::unsupported(format!(
                    "option nuclear: tensor {:?} is {} {}, which an .npz cannot hold",
                    t.name, t.dtype, t.layout
                )));
            }
            p.sten.push(t.name.clone());
        }
    }
    Ok(p)
}

/// `src`'s tensors `infos` alone, for the archive writers. Not a general wrapper (it
/// has no chunks on purpose: the archives hold tensors only).
struct Subset<'a> {
    src: &'a dyn TensorSource,
    infos: &'a [TensorInfo],
}

impl TensorSource for Subset<'_> {
    fn metadata(&self) -> &crate::metadata::Metadata {
        self.src.metadata()
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        self.src.tensor(name)
    }
    fn tensors(&self, names: &[&str]) -> Vec<Result<TensorView<'_>>> {
        self.src.tensors(names)
    }
    fn interrupted(&self) -> Result<()> {
        self.src.interrupted()
    }
}

/// The `torch_state` payload: `{"state_dict": …, **metadata}` as a `torch.save` zip.
pub fn torch_state(src: &dyn TensorSource, infos: &[TensorInfo]) -> Result<Vec<u8>> {
    let mut cur = std::io::Cursor::new(Vec::new());
    let w =
        crate::formats::pytorch::PytorchWriter::checkpoint(&mut cur, infos, src.metadata(), None)?;
    crate::write::drive(&Subset { src, infos }, w)?;
    Ok(cur.into_inner())
}

/// The `nuclear_arrays` payload: the arrays deflated, as `np.savez_compressed` (level 6).
pub fn nuclear_arrays(src: &dyn TensorSource, infos: &[TensorInfo]) -> Result<Vec<u8>> {
    let mut cur = std::io::Cursor::new(Vec::new());
    let mut w = crate::formats::npy::NpzWriter::new(&mut cur, Some(6));
    let sub = Subset { src, infos };
    for t in infos {
        sub.interrupted()?;
        let v = sub.tensor(&t.name)?;
        w.add(&t.name, t.dtype, &t.shape, v.data()?)
            .map_err(|e| e.at_subject(format!("tensor {:?}", t.name)))?;
    }
    w.finish()?;
    Ok(cur.into_inner())
}

/// The `llm_manifest` we make when none is given or carried.
pub fn manifest(metadata: &Map, created_at_unix: f64, written: &[&str]) -> Vec<u8> {
    let mut m = Map::new();
    m.insert("format", "fold");
    m.insert("version", super::raw::VERSION);
    m.insert("created_at_unix", created_at_unix);
    m.insert("writer", concat!("tessera ", env!("CARGO_PKG_VERSION")));
    if let Some(t) = metadata.get("model_type") {
        m.insert("model_type", t.clone());
    }
    let mut routing = Map::new();
    routing.insert("resume_training", "torch_state");
    routing.insert(
        "audit",
        Value::List(
            (written.iter())
                .filter(|n| **n != "torch_state")
                .map(|n| Value::Str(n.to_string()))
                .collect(),
        ),
    );
    m.insert("routing", routing);
    m.insert(
        "chunks_expected",
        Value::List(written.iter().map(|n| Value::Str(n.to_string())).collect()),
    );
    let text = crate::util::pyjson::dumps_map(&m, crate::util::pyjson::DumpOptions::INDEX);
    text.into_bytes()
}
