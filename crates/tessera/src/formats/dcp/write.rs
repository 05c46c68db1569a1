//! Writing a DCP checkpoint as `torch.distributed.checkpoint.save` with N ranks writes
//! one (`FileSystemWriter`, `torch_save` items): rank r's items in `__r_0.distcp`, each a
//! `torch.save` archive of one tensor (or of one Python value), then `.metadata`.
//!
//! Every tensor of rank ≥ 1 is cut by rows across the N ranks as FSDP shards it
//! (`torch.chunk` on dim 0: ⌈rows / N⌉ rows a rank, the last ranks shorter or empty; an
//! empty chunk is not written); a 0-d tensor is written whole by rank 0. The metadata
//! values (the source's metadata) are the checkpoint's non-tensor items, written by rank
//! 0. `planner_data` maps each name to the one-part path `(name,)`: the names are kept
//! as the source gives them (`model.layers.0.attn.q.weight`), which is what DCP's
//! flattening of a nested state dict gives too.

use std::io::Write;
use std::path::Path;

use super::meta::torch_dtype;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::metadata::Value;
use crate::model::TensorSource;
use crate::options::WriteOptions;
use crate::write::{Capabilities, MetadataSupport};

/// What a DCP checkpoint holds: the dtypes `torch.save` writes with a typed storage.
pub fn capabilities() -> Capabilities {
    use DType::*;
    Capabilities {
        format: Format::Dcp,
        dtypes: &[F64, F32, F16, BF16, I64, I32, I16, I8, U8, Bool, C64, C128],
        sparse: false,
        other_layouts: false,
        metadata: MetadataSupport::Tree,
        chunks: false,
        compression: &[],
        integrity: &["crc32"],
        zero_copy: false,
        chunk_copies: false,
        typed_metadata: false,
    }
}

// A minimal pickle writer (protocol 2, as torch.save and DCP's metadata use): only the
// opcodes these few objects take.
struct Pickle(Vec<u8>);

impl Pickle {
    fn new() -> Pickle {
        Pickle(vec![0x80, 2])
    }
    fn op(&mut self, b: u8) -> &mut Self {
        self.0.push(b);
        self
    }
    fn global(&mut self, module: &str, name: &str) -> &mut Self {
        self.0.push(b'c');
        self.0.extend_from_slice(module.as_bytes());
        self.0.push(b'\n');
        self.0.extend_from_slice(name.as_bytes());
        self.0.push(b'\n');
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.0.push(b'X');
        self.0.extend_from_slice(&(s.len() as u32).to_le_bytes());
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    fn int(&mut self, i: i128) -> &mut Self {
        if let Ok(v) = i32::try_from(i) {
            self.0.push(b'J');
            self.0.extend_from_slice(&v.to_le_bytes());
        } else {
            // LONG1: little-endian two's complement, shortest.
            let bytes = i.to_le_bytes();
            let mut n = 16;
            while n > 1 {
                let top = bytes[n - 1];
                let next = bytes[n - 2];
                if (top == 0 && next & 0x80 == 0) || (top == 0xff && next & 0x80 != 0) {
                    n -= 1;
                } else {
                    break;
                }
            }
            self.0.push(0x8a);
            self.0.push(n as u8);
            self.0.extend_from_slice(&bytes[..n]);
        }
        self
    }
    fn float(&mut self, f: f64) -> &mut Self {
        self.0.push(b'G');
        self.0.extend_from_slice(&f.to_be_bytes());
        self
    }
    fn bool(&mut self, b: bool) -> &mut Self {
        self.op(if b { 0x88 } else { 0x89 })
    }
    fn none(&mut self) -> &mut Self {
        self.op(b'N')
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        // Protocol 2 has no bytes opcode: `_codecs.encode(text, "latin1")`, as Python
        // pickles bytes at protocol 2.
        let text: String = b.iter().map(|&c| c as char).collect();
        self.global("_codecs", "encode")
            .str(&text)
            .str("latin1")
            .op(0x86)
            .op(b'R')
    }
    fn size(&mut self, dims: &[u64]) -> &mut Self {
        self.global("torch", "Size");
        self.tuple(dims);
        self.op(0x85).op(b'R')
    }
    fn tuple(&mut self, dims: &[u64]) -> &mut Self {
        self.op(b'(');
        for &d in dims {
            self.int(d as i128);
        }
        self.op(b't')
    }
    /// `cls()` then BUILD with a dict state: the caller pushes MARK, key/value pairs,
    /// and calls [`Pickle::end_object`].
    fn object(&mut self, module: &str, class: &str) -> &mut Self {
        self.global(module, class)
            .op(b')')
            .op(0x81)
            .op(b'}')
            .op(b'(')
    }
    fn end_object(&mut self) -> &mut Self {
        self.op(b'u').op(b'b')
    }
    fn value(&mut self, v: &Value) -> &mut Self {
        match v {
            Value::Null => self.none(),
            Value::Bool(b) => self.bool(*b),
            Value::Int(i) => self.int(*i),
            Value::Float(f) => self.float(*f),
            Value::Str(s) => self.str(s),
            Value::Bytes(b) => self.bytes(b),
            Value::List(l) => {
                self.op(b']').op(b'(');
                for x in l {
                    self.value(x);
                }
                self.op(b'e')
            }
            Value::Map(m) => {
                self.op(b'}').op(b'(');
                for (k, x) in m.iter() {
                    self.str(k);
                    self.value(x);
                }
                self.op(b'u')
            }
        }
    }
    fn finish(mut self) -> Vec<u8> {
        self.0.push(b'.');
        self.0
    }
}

/// The `torch.save` storage class of a dtype.
fn storage_class(d: DType) -> Option<&'static str> {
    use DType::*;
    Some(match d {
        F64 => "DoubleStorage",
        F32 => "FloatStorage",
        F16 => "HalfStorage",
        BF16 => "BFloat16Storage",
        I64 => "LongStorage",
        I32 => "IntStorage",
        I16 => "ShortStorage",
        I8 => "CharStorage",
        U8 => "ByteStorage",
        Bool => "BoolStorage",
        C64 => "ComplexFloatStorage",
        C128 => "ComplexDoubleStorage",
        _ => return None,
    })
}

/// A `torch.save` zip archive of `records` (name, bytes), stored, each record's data
/// aligned to 64 bytes as torch aligns them, the names under `archive/`.
fn archive(records: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in records {
        let name = format!("archive/{name}");
        let offset = out.len() as u32;
        let crc = crc32fast::hash(data);
        let header = 30 + name.len();
        // Padding in an extra field (id "FB", as torch's writer) to align the data.
        let pad = (64 - (out.len() + header + 4) % 64) % 64;
        let extra_len = 4 + pad;
        let mut h = Vec::with_capacity(header + extra_len);
        h.extend_from_slice(b"PK\x03\x04");
        h.extend_from_slice(&20u16.to_le_bytes()); // version needed
        h.extend_from_slice(&0u16.to_le_bytes()); // flags
        h.extend_from_slice(&0u16.to_le_bytes()); // stored
        h.extend_from_slice(&0u32.to_le_bytes()); // time, date
        h.extend_from_slice(&crc.to_le_bytes());
        h.extend_from_slice(&(data.len() as u32).to_le_bytes());
        h.extend_from_slice(&(data.len() as u32).to_le_bytes());
        h.extend_from_slice(&(name.len() as u16).to_le_bytes());
        h.extend_from_slice(&(extra_len as u16).to_le_bytes());
        h.extend_from_slice(name.as_bytes());
        h.extend_from_slice(b"FB");
        h.extend_from_slice(&(pad as u16).to_le_bytes());
        h.extend(std::iter::repeat_n(b'Z', pad));
        out.extend_from_slice(&h);
        out.extend_from_slice(data);
        let mut c = Vec::new();
        c.extend_from_slice(b"PK\x01\x02");
        c.extend_from_slice(&20u16.to_le_bytes()); // version made by
        c.extend_from_slice(&20u16.to_le_bytes()); // version needed
        c.extend_from_slice(&0u16.to_le_bytes());
        c.extend_from_slice(&0u16.to_le_bytes());
        c.extend_from_slice(&0u32.to_le_bytes());
        c.extend_from_slice(&crc.to_le_bytes());
        c.extend_from_slice(&(data.len() as u32).to_le_bytes());
        c.extend_from_slice(&(data.len() as u32).to_le_bytes());
        c.extend_from_slice(&(name.len() as u16).to_le_bytes());
        c.extend_from_slice(&0u16.to_le_bytes()); // extra
        c.extend_from_slice(&0u16.to_le_bytes()); // comment
        c.extend_from_slice(&0u16.to_le_bytes()); // disk
        c.extend_from_slice(&0u16.to_le_bytes()); // internal attributes
        c.extend_from_slice(&0u32.to_le_bytes()); // external attributes
        c.extend_from_slice(&offset.to_le_bytes());
        c.extend_from_slice(name.as_bytes());
        central.extend_from_slice(&c);
    }
    let cd_at = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(b"PK\x05\x06");
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(records.len() as u16).to_le_bytes());
    out.extend_from_slice(&(records.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_at.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// `torch.save(tensor)` of a contiguous tensor of `dtype` and `shape` holding `data`.
fn tensor_archive(dtype: DType, shape: &[u64], data: &[u8]) -> Result<Vec<u8>> {
    let class = storage_class(dtype)
        .ok_or_else(|| Error::unsupported(format!("a DCP checkpoint holds no {dtype} tensors")))?;
    let numel: u64 = shape.iter().product();
    let mut stride = vec![1u64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        stride[d] = stride[d + 1] * shape[d + 1];
    }
    let mut p = Pickle::new();
    p.global("torch._utils", "_rebuild_tensor_v2").op(b'(');
    // The storage, by persistent id ('storage', class, key, location, numel).
    p.op(b'(')
        .str("storage")
        .global("torch", class)
        .str("0")
        .str("cpu");
    p.int(numel as i128).op(b't').op(b'Q');
    p.int(0).tuple(shape).tuple(&stride).bool(false);
    p.global("collections", "OrderedDict").op(b')').op(b'R');
    p.op(b't').op(b'R');
    let pkl = p.finish();
    Ok(archive(&[
        ("data.pkl", &pkl),
        ("byteorder", b"little"),
        ("data/0", data),
        ("version", b"3\n"),
    ]))
}

/// `torch.save(value)` of a plain Python value.
fn value_archive(v: &Value) -> Vec<u8> {
    let mut p = Pickle::new();
    p.value(v);
    let pkl = p.finish();
    archive(&[
        ("data.pkl", &pkl),
        ("byteorder", b"little"),
        ("version", b"3\n"),
    ])
}

/// Rows `[a, b)` of dim 0 for each of `ranks` ranks, as `torch.chunk` cuts `rows`.
pub fn row_split(rows: u64, ranks: u64) -> Vec<(u64, u64)> {
    let per = rows.div_ceil(ranks.max(1)).max(1);
    (0..ranks)
        .map(|r| ((r * per).min(rows), ((r + 1) * per).min(rows)))
        .collect()
}

struct Written {
    fqn: String,
    /// A chunk's offsets and sizes (`None` for an item).
    offsets: Option<(Vec<u64>, Vec<u64>)>,
    file: String,
    offset: u64,
    length: u64,
}

/// Writes `src` as a DCP checkpoint of `ranks` (the number of `groups`: each names every
/// tensor) into `tmp`: the `.distcp` files, then `.metadata`; returns their names,
/// `.metadata` last. See the module docs.
pub fn write_set(
    src: &dyn TensorSource,
    groups: &[std::ops::Range<usize>],
    _index: &Path,
    tmp: &Path,
    opts: &WriteOptions,
) -> Result<Vec<String>> {
    let ranks = groups.len().max(1);
    let infos = src.tensor_infos();
    let names: Vec<String> = (0..ranks).map(|r| format!("__{r}_0.distcp")).collect();
    let mut files = Vec::with_capacity(ranks);
    let mut at = vec![0u64; ranks];
    for n in &names {
        let p = tmp.join(n);
        let f = std::fs::File::create(&p)
            .map_err(|e| Error::from(e).at_subject(p.display().to_string()))?;
        files.push(std::io::BufWriter::new(f));
    }
    let mut written: Vec<Written> = Vec::new();
    let mut put = |rank: usize,
                   fqn: &str,
                   offsets: Option<(Vec<u64>, Vec<u64>)>,
                   bytes: &[u8]|
     -> Result<()> {
        files[rank].write_all(bytes)?;
        written.push(Written {
            fqn: fqn.to_string(),
            offsets,
            file: names[rank].clone(),
            offset: at[rank],
            length: bytes.len() as u64,
        });
        at[rank] += bytes.len() as u64;
        Ok(())
    };
    let metadata = src.metadata();
    for (k, v) in metadata.iter() {
        if infos.iter().any(|t| t.name == *k) {
            return Err(Error::invalid_input(format!(
                "metadata key {k:?} is also a tensor's name: a DCP checkpoint has one namespace"
            )));
        }
        put(0, k, None, &value_archive(v))?;
    }
    for t in infos {
        src.interrupted()?;
        let view = src.tensor(&t.name)?;
        let data = view.data()?;
        torch_dtype(t.dtype).ok_or_else(|| {
            Error::unsupported(format!("a DCP checkpoint holds no {} tensors", t.dtype))
        })?;
        if t.shape.is_empty() {
            let a = tensor_archive(t.dtype, &t.shape, data)?;
            put(0, &t.name, Some((Vec::new(), Vec::new())), &a)?;
            continue;
        }
        let row = (data.len() as u64).checked_div(t.shape[0]).unwrap_or(0);
        for (r, (a, b)) in row_split(t.shape[0], ranks as u64).into_iter().enumerate() {
            if a == b && t.shape[0] != 0 {
                continue;
            }
            let mut shape = t.shape.clone();
            shape[0] = b - a;
            let mut offsets = vec![0u64; t.shape.len()];
            offsets[0] = a;
            let bytes = &data[(a * row) as usize..(b * row) as usize];
            let archive = tensor_archive(t.dtype, &shape, bytes)?;
            put(r, &t.name, Some((offsets, shape)), &archive)?;
            if t.shape[0] == 0 {
                break;
            }
        }
    }
    for (f, n) in files.into_iter().zip(&names) {
        let f = f
            .into_inner()
            .map_err(|e| Error::from(e.into_error()).at_subject(n.clone()))?;
        if !opts.no_fsync {
            f.sync_all()?;
        }
    }
    let meta = metadata_pickle(src, &written)?;
    let p = tmp.join(super::METADATA);
    let mut f = std::fs::File::create(&p)?;
    f.write_all(&meta)?;
    if !opts.no_fsync {
        f.sync_all()?;
    }
    let mut out = names;
    out.push(super::METADATA.to_string());
    Ok(out)
}

/// The `Metadata` pickle of what was written.
fn metadata_pickle(src: &dyn TensorSource, written: &[Written]) -> Result<Vec<u8>> {
    const MD: &str = "torch.distributed.checkpoint.metadata";
    const FS: &str = "torch.distributed.checkpoint.filesystem";
    let mut p = Pickle::new();
    p.object(MD, "Metadata");
    p.str("state_dict_metadata").op(b'}').op(b'(');
    for (k, _) in src.metadata().iter() {
        p.str(k)
            .global(MD, "BytesStorageMetadata")
            .op(b')')
            .op(0x81);
    }
    for t in src.tensor_infos() {
        let dtype = torch_dtype(t.dtype).ok_or_else(|| {
            Error::unsupported(format!("a DCP checkpoint holds no {} tensors", t.dtype))
        })?;
        p.str(&t.name).object(MD, "TensorStorageMetadata");
        p.str("properties")
            .global(MD, "TensorProperties")
            .op(b')')
            .op(0x81);
        // (dtype, layout, requires_grad, memory_format, pin_memory): __setstate__'s tuple.
        p.op(b'(').global("torch", dtype);
        p.global("torch.serialization", "_get_layout")
            .str("torch.strided")
            .op(0x85)
            .op(b'R');
        p.bool(false);
        p.global(MD, "_MEM_FORMAT_ENCODING")
            .int(0)
            .op(0x85)
            .op(b'R');
        p.bool(false).op(b't').op(b'b');
        p.str("size").size(&t.shape);
        p.str("chunks").op(b']').op(b'(');
        for w in written.iter().filter(|w| w.fqn == t.name) {
            let Some((off, sizes)) = &w.offsets else {
                continue;
            };
            p.object(MD, "ChunkStorageMetadata");
            p.str("offsets").size(off).str("sizes").size(sizes);
            p.end_object();
        }
        p.op(b'e');
        p.end_object();
    }
    p.op(b'u');
    p.str("planner_data").op(b'}').op(b'(');
    for (k, _) in src.metadata().iter() {
        p.str(k).op(b'(').str(k).op(b't');
    }
    for t in src.tensor_infos() {
        p.str(&t.name).op(b'(').str(&t.name).op(b't');
    }
    p.op(b'u');
    p.str("storage_data").op(b'}').op(b'(');
    for (i, w) in written.iter().enumerate() {
        p.object(MD, "MetadataIndex");
        p.str("fqn").str(&w.fqn).str("offset");
        match &w.offsets {
            Some((o, _)) => p.size(o),
            None => p.none(),
        };
        p.str("index");
        match &w.offsets {
            Some(_) => p.int(written[..i].iter().filter(|x| x.fqn == w.fqn).count() as i128),
            None => p.none(),
        };
        p.end_object();
        p.object(FS, "_StorageInfo");
        p.str("relative_path").str(&w.file);
        p.str("offset").int(w.offset as i128);
        p.str("length").int(w.length as i128);
        p.end_object();
    }
    p.op(b'u');
    p.str("storage_meta").none();
    p.str("version").str("1.0.0");
    p.end_object();
    Ok(p.finish())
}
