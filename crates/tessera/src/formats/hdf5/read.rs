//! [`Hdf5File`]: the superblock, object headers, groups and messages (see the module
//! docs for the subset), and datasets read by range.

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::{HashMap, HashSet};

use crate::any::ReadOptions;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::limits::Limits;
use crate::metadata::{Metadata, Value};
use crate::model::{Container, TensorSource};
use crate::source::SourceRef;
use crate::tensor::{Storage, TensorInfo, TensorView};
use crate::verify::{Status, VerifyOptions, VerifyReport};

const SIGNATURE: &[u8; 8] = b"\x89HDF\r\n\x1a\n";

fn bad(msg: impl Into<String>) -> Error {
    Error::malformed(msg)
}

/// A little-endian cursor over bytes read from the file at `base`.
struct Cur<'a> {
    b: &'a [u8],
    pos: usize,
    base: u64,
    what: &'a str,
}

impl<'a> Cur<'a> {
    fn new(b: &'a [u8], base: u64, what: &'a str) -> Cur<'a> {
        Cur {
            b,
            pos: 0,
            base,
            what,
        }
    }
    fn here(&self) -> u64 {
        self.base + self.pos as u64
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        match self.pos.checked_add(n).filter(|&e| e <= self.b.len()) {
            Some(end) => {
                let s = &self.b[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(bad(format!(
                "{}: {n} bytes needed, {} left",
                self.what,
                self.b.len() - self.pos
            ))
            .at_offset(self.here())),
        }
    }
    fn skip(&mut self, n: usize) -> Result<()> {
        self.take(n).map(|_| ())
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(self.uint(2)? as u16)
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(self.uint(4)? as u32)
    }
    /// An unsigned little-endian integer of `n` ≤ 8 bytes.
    fn uint(&mut self, n: usize) -> Result<u64> {
        let s = self.take(n)?;
        Ok(s.iter().rev().fold(0u64, |a, &x| (a << 8) | x as u64))
    }
    fn rest(&self) -> &'a [u8] {
        &self.b[self.pos..]
    }
    /// Skips to the next multiple of 8 from the start of the buffer.
    fn align8(&mut self) -> Result<()> {
        let pad = (8 - self.pos % 8) % 8;
        self.skip(pad.min(self.b.len() - self.pos))
    }
}

fn pad8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// A datatype, as far as we represent it.
#[derive(Debug, Clone, PartialEq)]
enum Ty {
    Num {
        dtype: DType,
        big: bool,
    },
    /// Fixed-length string of `size` bytes; `pad` 0 null-terminated, 1 null-padded,
    /// 2 space-padded.
    Str {
        size: usize,
        pad: u8,
    },
    /// Variable-length string (global heap references).
    VlenStr {
        size: usize,
    },
    /// Anything else, described for the error.
    Other {
        size: usize,
        what: String,
    },
}

impl Ty {
    fn size(&self) -> usize {
        match self {
            Ty::Num { dtype, .. } => dtype.size(),
            Ty::Str { size, .. } | Ty::VlenStr { size } | Ty::Other { size, .. } => *size,
        }
    }
}

/// A message of an object header: its type and body, and where the body starts.
struct Msg {
    kind: u16,
    at: u64,
    body: Vec<u8>,
}

/// How a dataset's bytes are stored.
#[derive(Debug, Clone)]
enum Data {
    /// `len` bytes at `offset` (contiguous, or compact inside the object header).
    Range { offset: u64, len: u64 },
    /// Never written: the fill value repeated.
    Fill,
    /// Chunked: the B-tree at `btree`, chunks of `chunk` elements per dimension.
    Chunked { btree: u64, chunk: Vec<u64> },
}

#[derive(Debug, Clone)]
struct Dataset {
    big: bool,
    data: Data,
    /// Filter ids, in pipeline order (deflate 1, shuffle 2).
    filters: Vec<u16>,
    /// One element of fill value (zeros when none is defined).
    fill: Vec<u8>,
}

/// An opened HDF5 file: its datasets listed, read when asked.
#[derive(Debug)]
pub struct Hdf5File<'data> {
    src: SourceRef<'data>,
    sizes: (usize, usize),
    base: u64,
    limits: Limits,
    infos: Vec<TensorInfo>,
    sets: Vec<Dataset>,
    by_name: HashMap<String, usize>,
    metadata: Metadata,
    warnings: Vec<String>,
    version: u8,
}

/// What parsing needs: the source, sizes, the budget of metadata bytes read.
struct Parser<'d, 'o> {
    src: SourceRef<'d>,
    /// Size of offsets, size of lengths.
    so: usize,
    sl: usize,
    base: u64,
    limits: &'o Limits,
    budget: Cell<u64>,
    /// Datasets and attributes seen (against `max_entries`).
    entries: u64,
    infos: Vec<TensorInfo>,
    sets: Vec<Dataset>,
    meta: Vec<(String, Value)>,
    meta_keys: HashSet<String>,
    warnings: Vec<String>,
    heap_cache: HashMap<u64, Vec<u8>>,
}

impl<'d> Parser<'d, '_> {
    fn undefined(&self, addr: u64) -> bool {
        (self.so == 8 && addr == u64::MAX) || (self.so < 8 && addr == (1u64 << (8 * self.so)) - 1)
    }

    /// The absolute offset of file address `addr`.
    fn abs(&self, addr: u64, what: &str) -> Result<u64> {
        self.base
            .checked_add(addr)
            .ok_or_else(|| bad(format!("{what}: address {addr} overflows")))
    }

    /// `len` metadata bytes at address `addr`, counted against `max_index_bytes`.
    fn meta(&self, addr: u64, len: u64, what: &str) -> Result<Cow<'d, [u8]>> {
        let left = self.budget.get();
        if len > left {
            return Err(Error::limit(format!(
                "{what}: the file's metadata exceeds max_index_bytes ({} bytes)",
                self.limits.max_index_bytes
            )));
        }
        self.budget.set(left - len);
        let off = self.abs(addr, what)?;
        self.src.slice(off, len, what)
    }

    fn superblock(&mut self) -> Result<(u8, u64)> {
        let head = self.src.read_up_to(0, 24)?;
        if head.len() < 9 || &head[..8] != SIGNATURE {
            return Err(bad("not an HDF5 file (no signature at byte 0)"));
        }
        let version = head[8];
        if version > 1 {
            return Err(Error::unsupported(format!(
                "HDF5 superblock version {version} (written with libver=\"latest\" or \
                 HDF5 ≥ 1.10 features): only versions 0 and 1 are read"
            ))
            .at_offset(8));
        }
        let mut c = Cur::new(&head, 0, "superblock");
        c.skip(13)?;
        let so = c.u8()? as usize;
        let sl = c.u8()? as usize;
        for (n, what) in [(so, "offsets"), (sl, "lengths")] {
            if !matches!(n, 2 | 4 | 8) {
                return Err(bad(format!("superblock: size of {what} {n} (2, 4 or 8)")));
            }
        }
        self.so = so;
        self.sl = sl;
        let fixed = if version == 1 { 28 } else { 24 };
        let len = fixed + 4 * so + 2 * so + 24;
        let sb = self.src.slice(0, len as u64, "superblock")?;
        let mut c = Cur::new(&sb, 0, "superblock");
        c.skip(fixed)?;
        self.base = c.uint(so)?;
        let _free = c.uint(so)?;
        let eof = c.uint(so)?;
        let _driver = c.uint(so)?;
        // Root symbol table entry: link name offset, object header address.
        let _name = c.uint(so)?;
        let root = c.uint(so)?;
        // As libhdf5 does, a file shorter than its superblock says is truncated.
        let end = self.base.saturating_add(eof);
        if end > self.src.len() {
            return Err(bad(format!(
                "truncated: the superblock says the file ends at byte {end}; it has {} bytes",
                self.src.len()
            ))
            .at_offset((fixed + 2 * so) as u64));
        }
        Ok((version, root))
    }

    /// The messages of the object header at `addr` (v1), continuation blocks followed.
    fn header(&self, addr: u64, what: &str) -> Result<Vec<Msg>> {
        let pre = self.meta(addr, 16, what)?;
        if pre.starts_with(b"OHDR") {
            return Err(Error::unsupported(format!(
                "{what}: object header version 2 (written with libver=\"latest\"): only \
                 version 1 is read"
            )));
        }
        let mut c = Cur::new(&pre, self.abs(addr, what)?, what);
        let v = c.u8()?;
        if v != 1 {
            return Err(
                bad(format!("{what}: object header version {v} (1 expected)")).at_offset(c.base),
            );
        }
        c.skip(1)?;
        let count = c.u16()? as usize;
        c.skip(4)?;
        let size = c.u32()? as u64;
        let mut blocks = vec![(addr + 16, size)];
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        while let Some((at, len)) = blocks.pop() {
            if !seen.insert(at) {
                return Err(bad(format!("{what}: continuation block at {at} repeats")));
            }
            let block = self.meta(at, len, what)?;
            let mut c = Cur::new(&block, self.abs(at, what)?, what);
            while c.rest().len() >= 8 && out.len() < count {
                let kind = c.u16()?;
                let size = c.u16()? as usize;
                c.skip(4)?;
                let at = c.here();
                let body = c.take(size)?.to_vec();
                c.align8()?;
                if kind == 0x10 {
                    let mut b = Cur::new(&body, at, "continuation message");
                    blocks.push((b.uint(self.so)?, b.uint(self.sl)?));
                }
                out.push(Msg { kind, at, body });
            }
        }
        Ok(out)
    }

    /// A name from a local heap's data segment at `off`.
    fn heap_name(&self, heap: &[u8], off: u64, heap_at: u64) -> Result<String> {
        let start = usize::try_from(off)
            .ok()
            .filter(|&s| s < heap.len())
            .ok_or_else(|| {
                bad(format!("link name offset {off} outside the local heap")).at_offset(heap_at)
            })?;
        let s = &heap[start..];
        let end = s.iter().position(|&b| b == 0).ok_or_else(|| {
            bad(format!("link name at heap offset {off} is not terminated")).at_offset(heap_at)
        })?;
        self.limits.check_name(end as u64)?;
        let name = std::str::from_utf8(&s[..end]).map_err(|_| {
            bad(format!("link name at heap offset {off} is not UTF-8")).at_offset(heap_at)
        })?;
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(
                bad(format!("link name {name:?} (empty, `.`, `..` or with `/`)"))
                    .at_offset(heap_at),
            );
        }
        Ok(name.to_string())
    }

    /// The local heap's data segment at `addr`.
    fn local_heap(&self, addr: u64) -> Result<(Vec<u8>, u64)> {
        let h = self.meta(addr, (8 + 2 * self.sl + self.so) as u64, "local heap")?;
        let mut c = Cur::new(&h, self.abs(addr, "local heap")?, "local heap");
        if c.take(4)? != b"HEAP" {
            return Err(bad("local heap: no HEAP signature").at_offset(c.base));
        }
        c.skip(4)?;
        let size = c.uint(self.sl)?;
        let _free = c.uint(self.sl)?;
        let data = c.uint(self.so)?;
        let seg = self.meta(data, size, "local heap data")?.into_owned();
        Ok((seg, self.abs(data, "local heap data")?))
    }

    /// The entries (name, object header address) of the symbol-table group whose B-tree
    /// and local heap are given.
    fn group_entries(&mut self, btree: u64, heap: u64, path: &str) -> Result<Vec<(String, u64)>> {
        let (heap, heap_at) = self.local_heap(heap)?;
        let mut out = Vec::new();
        let mut stack = vec![(btree, 0usize)];
        let mut seen = HashSet::new();
        while let Some((node, depth)) = stack.pop() {
            if !seen.insert(node) {
                return Err(bad(format!("group /{path}: B-tree node at {node} repeats")));
            }
            if depth > 64 {
                return Err(bad(format!("group /{path}: B-tree deeper than 64")));
            }
            let head = self.meta(node, (8 + 2 * self.so) as u64, "group B-tree node")?;
            let mut c = Cur::new(&head, self.abs(node, "B-tree")?, "group B-tree node");
            if c.take(4)? != b"TREE" || c.u8()? != 0 {
                return Err(bad(format!(
                    "group /{path}: not a group B-tree node (TREE, type 0)"
                ))
                .at_offset(c.base));
            }
            let level = c.u8()?;
            let used = c.u16()? as u64;
            let body_len = used * (self.sl + self.so) as u64 + self.sl as u64;
            let body = self.meta(node + 8 + 2 * self.so as u64, body_len, "group B-tree node")?;
            let mut c = Cur::new(&body, 0, "group B-tree node");
            let mut children = Vec::new();
            for _ in 0..used {
                c.uint(self.sl)?;
                children.push(c.uint(self.so)?);
            }
            if level > 0 {
                stack.extend(children.into_iter().rev().map(|a| (a, depth + 1)));
                continue;
            }
            for snod in children {
                if !seen.insert(snod) {
                    return Err(bad(format!(
                        "group /{path}: symbol table node at {snod} repeats"
                    )));
                }
                let h = self.meta(snod, 8, "symbol table node")?;
                let mut c = Cur::new(&h, self.abs(snod, "SNOD")?, "symbol table node");
                if c.take(4)? != b"SNOD" {
                    return Err(bad(format!("group /{path}: no SNOD signature")).at_offset(c.base));
                }
                c.skip(2)?;
                let n = c.u16()? as u64;
                let entry = (2 * self.so + 24) as u64;
                let es = self.meta(snod + 8, n * entry, "symbol table node")?;
                let mut c = Cur::new(&es, 0, "symbol table node");
                for _ in 0..n {
                    let name = c.uint(self.so)?;
                    let obj = c.uint(self.so)?;
                    let cache = c.u32()?;
                    c.skip(20)?;
                    let name = self.heap_name(&heap, name, heap_at)?;
                    if cache == 2 {
                        self.warnings.push(format!(
                            "/{}: a soft link, skipped",
                            join(path, &name).escape_debug()
                        ));
                        continue;
                    }
                    out.push((name, obj));
                }
            }
        }
        Ok(out)
    }

    /// Walks the group at `addr` (path `path`, `""` for the root); `stack` holds the
    /// groups above it.
    fn group(&mut self, addr: u64, path: &str, stack: &mut Vec<u64>) -> Result<()> {
        if stack.len() > self.limits.max_depth {
            return Err(Error::limit(format!(
                "group /{path}: nested deeper than max_depth ({})",
                self.limits.max_depth
            )));
        }
        let what = format!("object header of /{}", path.escape_debug());
        let msgs = self.header(addr, &what)?;
        self.attributes(&msgs, path)?;
        let Some(st) = msgs.iter().find(|m| m.kind == 0x11) else {
            if msgs.iter().any(|m| m.kind == 0x06 || m.kind == 0x02) {
                return Err(Error::unsupported(format!(
                    "group /{path}: new-style group (link messages): only symbol-table \
                     groups are read"
                )));
            }
            return Ok(());
        };
        let mut c = Cur::new(&st.body, st.at, "symbol table message");
        let btree = c.uint(self.so)?;
        let heap = c.uint(self.so)?;
        stack.push(addr);
        for (name, obj) in self.group_entries(btree, heap, path)? {
            let child = join(path, &name);
            if stack.contains(&obj) {
                return Err(bad(format!(
                    "/{}: a link to a group above it (a cycle in the group graph)",
                    child.escape_debug()
                )));
            }
            self.entries += 1;
            self.limits.check_entries(self.entries)?;
            let msgs = self.header(obj, &format!("object header of /{}", child.escape_debug()))?;
            if msgs.iter().any(|m| m.kind == 0x11 || m.kind == 0x02) {
                self.group(obj, &child, stack)?;
            } else if msgs.iter().any(|m| m.kind == 0x08) {
                self.attributes(&msgs, &child)?;
                self.dataset(&msgs, &child)?;
            } else {
                self.warnings.push(format!(
                    "/{}: neither a group nor a dataset (a named datatype?), skipped",
                    child.escape_debug()
                ));
            }
        }
        stack.pop();
        Ok(())
    }

    fn dataspace(&self, body: &[u8], at: u64) -> Result<Option<Vec<u64>>> {
        let mut c = Cur::new(body, at, "dataspace");
        let v = c.u8()?;
        let rank = c.u8()? as usize;
        let _flags = c.u8()?;
        match v {
            1 => c.skip(5)?,
            2 => match c.u8()? {
                0 => return Ok(Some(Vec::new())),
                1 => {}
                2 => return Ok(None),
                t => return Err(bad(format!("dataspace type {t}")).at_offset(at)),
            },
            _ => return Err(Error::unsupported(format!("dataspace version {v}")).at_offset(at)),
        }
        self.limits.check_rank(rank as u64)?;
        (0..rank)
            .map(|_| c.uint(self.sl))
            .collect::<Result<_>>()
            .map(Some)
    }

    fn datatype(&self, c: &mut Cur<'_>, depth: usize) -> Result<Ty> {
        if depth > 8 {
            return Err(bad("datatype nested too deeply").at_offset(c.here()));
        }
        let at = c.here();
        let cv = c.u8()?;
        let (class, version) = (cv & 0x0f, cv >> 4);
        let bits = c.uint(3)? as u32;
        let size = c.u32()? as usize;
        let other = |what: &str| Ty::Other {
            size,
            what: what.to_string(),
        };
        Ok(match class {
            0 => {
                let (_off, prec) = (c.u16()?, c.u16()?);
                let signed = bits & 8 != 0;
                let dtype = match (size, signed) {
                    (1, true) => Some(DType::I8),
                    (2, true) => Some(DType::I16),
                    (4, true) => Some(DType::I32),
                    (8, true) => Some(DType::I64),
                    (1, false) => Some(DType::U8),
                    (2, false) => Some(DType::U16),
                    (4, false) => Some(DType::U32),
                    (8, false) => Some(DType::U64),
                    _ => None,
                };
                match dtype {
                    Some(dtype) if prec as usize == 8 * size => Ty::Num {
                        dtype,
                        big: bits & 1 != 0,
                    },
                    _ => other(&format!("{size}-byte integer of {prec} bits")),
                }
            }
            1 => {
                let (_off, _prec) = (c.u16()?, c.u16()?);
                let (_el, es, _ml, ms) = (c.u8()?, c.u8()?, c.u8()?, c.u8()?);
                c.skip(4)?;
                if bits & 0x40 != 0 {
                    return Ok(other("VAX-order float"));
                }
                let dtype = match (size, es, ms) {
                    (2, 5, 10) => Some(DType::F16),
                    (4, 8, 23) => Some(DType::F32),
                    (8, 11, 52) => Some(DType::F64),
                    _ => None,
                };
                match dtype {
                    Some(dtype) => Ty::Num {
                        dtype,
                        big: bits & 1 != 0,
                    },
                    None => other(&format!(
                        "{size}-byte float ({es} exponent, {ms} mantissa bits)"
                    )),
                }
            }
            3 => Ty::Str {
                size,
                pad: (bits & 0x0f) as u8,
            },
            8 => {
                let base = self.datatype(c, depth + 1)?;
                let n = (bits & 0xffff) as usize;
                let mut names = Vec::new();
                for _ in 0..n.min(64) {
                    let s = c.rest();
                    let end = s.iter().position(|&b| b == 0).ok_or_else(|| {
                        bad("enum member name not terminated").at_offset(c.here())
                    })?;
                    names.push(s[..end].to_vec());
                    c.skip(if version < 3 { pad8(end + 1) } else { end + 1 })?;
                }
                let values = if n == 2 {
                    c.take(2 * base.size())?.to_vec()
                } else {
                    Vec::new()
                };
                let is_bool = n == 2
                    && matches!(
                        base,
                        Ty::Num {
                            dtype: DType::I8 | DType::U8,
                            ..
                        }
                    )
                    && names == [b"FALSE".to_vec(), b"TRUE".to_vec()]
                    && values == [0, 1];
                if is_bool {
                    Ty::Num {
                        dtype: DType::Bool,
                        big: false,
                    }
                } else {
                    other("enum")
                }
            }
            9 => {
                let base = self.datatype(c, depth + 1)?;
                let _ = base;
                if bits & 0x0f == 1 {
                    Ty::VlenStr { size }
                } else {
                    other("variable-length sequence")
                }
            }
            2 => other("time"),
            4 => other("bitfield"),
            5 => other("opaque"),
            6 => other("compound (complex numbers are one)"),
            7 => other("reference"),
            10 => other("array"),
            _ => return Err(bad(format!("datatype class {class}")).at_offset(at)),
        })
    }

    fn dataset(&mut self, msgs: &[Msg], path: &str) -> Result<()> {
        let shown = path.escape_debug().to_string();
        let find = |k: u16| msgs.iter().find(|m| m.kind == k);
        let space = find(0x01).ok_or_else(|| bad(format!("dataset /{shown}: no dataspace")))?;
        let shape = self
            .dataspace(&space.body, space.at)?
            .ok_or_else(|| Error::unsupported(format!("dataset /{shown}: null dataspace")))?;
        let tm = find(0x03).ok_or_else(|| bad(format!("dataset /{shown}: no datatype")))?;
        let ty = self.datatype(&mut Cur::new(&tm.body, tm.at, "datatype"), 0)?;
        let (dtype, big) = match ty {
            Ty::Num { dtype, big } => (dtype, big),
            Ty::Str { .. } | Ty::VlenStr { .. } => {
                return Err(Error::unsupported(format!(
                    "dataset /{shown}: strings are read as attributes only"
                )))
            }
            Ty::Other { what, .. } => {
                return Err(Error::unsupported(format!(
                    "dataset /{shown}: datatype {what}"
                )))
            }
        };
        let nbytes = crate::tensor::dense_nbytes(dtype, &shape)?;
        self.limits.check_decoded(nbytes)?;
        let mut filters = Vec::new();
        if let Some(m) = find(0x0b) {
            filters = self.filters(&m.body, m.at, &shown)?;
        }
        let mut fill = vec![0u8; dtype.size()];
        for m in msgs.iter().filter(|m| m.kind == 0x05 || m.kind == 0x04) {
            if let Some(f) = fill_value(m)? {
                if f.len() != dtype.size() {
                    return Err(bad(format!(
                        "dataset /{shown}: fill value of {} bytes for {dtype}",
                        f.len()
                    )));
                }
                fill = f;
            }
        }
        let lm = find(0x08).ok_or_else(|| bad(format!("dataset /{shown}: no data layout")))?;
        let mut c = Cur::new(&lm.body, lm.at, "data layout");
        let v = c.u8()?;
        if v != 3 {
            return Err(Error::unsupported(format!(
                "dataset /{shown}: data layout message version {v} (3 is read)"
            )));
        }
        let class = c.u8()?;
        let (data, encoding, offset, stored) = match class {
            0 => {
                let len = c.u16()? as u64;
                let at = c.here();
                c.skip(len as usize)?;
                if len != nbytes {
                    return Err(bad(format!(
                        "dataset /{shown}: compact data of {len} bytes, {nbytes} expected"
                    ))
                    .at_offset(at));
                }
                (Data::Range { offset: at, len }, "compact", Some(at), len)
            }
            1 => {
                let addr = c.uint(self.so)?;
                let len = c.uint(self.sl)?;
                if self.undefined(addr) {
                    (Data::Fill, "contiguous, unwritten", None, 0)
                } else {
                    if len != nbytes {
                        return Err(bad(format!(
                            "dataset /{shown}: contiguous data of {len} bytes, {nbytes} expected"
                        )));
                    }
                    let off = self.abs(addr, &shown)?;
                    self.src
                        .check_range(off, len, &format!("dataset /{shown}"))?;
                    (
                        Data::Range { offset: off, len },
                        "contiguous",
                        Some(off),
                        len,
                    )
                }
            }
            2 => {
                let dims = c.u8()? as usize;
                let btree = c.uint(self.so)?;
                if dims != shape.len() + 1 {
                    return Err(bad(format!(
                        "dataset /{shown}: chunk of rank {} for a rank-{} dataset",
                        dims.saturating_sub(1),
                        shape.len()
                    )));
                }
                let mut chunk = Vec::new();
                for _ in 0..dims {
                    chunk.push(c.u32()? as u64);
                }
                let el = chunk.pop().unwrap_or(0);
                if el != dtype.size() as u64 || chunk.contains(&0) {
                    return Err(bad(format!(
                        "dataset /{shown}: chunk {chunk:?} of {el}-byte elements for {dtype}"
                    )));
                }
                let enc = if self.undefined(btree) {
                    "chunked, unwritten"
                } else {
                    "chunked"
                };
                (Data::Chunked { btree, chunk }, enc, None, 0)
            }
            k => {
                return Err(Error::unsupported(format!(
                    "dataset /{shown}: layout class {k}"
                )))
            }
        };
        let mut info = TensorInfo::dense(path, dtype, shape);
        let mut encoding = encoding.to_string();
        for f in &filters {
            encoding.push_str(if *f == 1 { ", deflate" } else { ", shuffle" });
        }
        if big && dtype.size() > 1 {
            encoding.push_str(", big-endian");
        }
        info.storage = Storage {
            offset,
            stored_bytes: stored,
            encoding,
            digests: Vec::new(),
        };
        self.infos.push(info);
        self.sets.push(Dataset {
            big,
            data,
            filters,
            fill,
        });
        Ok(())
    }

    fn filters(&self, body: &[u8], at: u64, shown: &str) -> Result<Vec<u16>> {
        let mut c = Cur::new(body, at, "filter pipeline");
        let v = c.u8()?;
        let n = c.u8()?;
        if v == 1 {
            c.skip(6)?;
        } else if v != 2 {
            return Err(Error::unsupported(format!("filter pipeline version {v}")).at_offset(at));
        }
        let mut out = Vec::new();
        for _ in 0..n {
            let id = c.u16()?;
            let name_len = if v == 1 || id >= 256 {
                c.u16()? as usize
            } else {
                0
            };
            let flags = c.u16()?;
            let nvals = c.u16()? as usize;
            let name = c.take(if v == 1 { pad8(name_len) } else { name_len })?;
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            c.skip(4 * nvals)?;
            if v == 1 && nvals % 2 == 1 {
                c.skip(4)?;
            }
            match id {
                1 | 2 => out.push(id),
                _ => {
                    let known = match id {
                        3 => "fletcher32",
                        4 => "szip",
                        5 => "nbit",
                        6 => "scaleoffset",
                        32000 => "lzf",
                        32001 => "blosc",
                        32004 => "lz4",
                        32008 => "bitshuffle",
                        32015 => "zstd",
                        _ => "",
                    };
                    let name = if name.is_empty() {
                        known.to_string()
                    } else {
                        String::from_utf8_lossy(name).escape_debug().to_string()
                    };
                    let optional = if flags & 1 != 0 { " (optional)" } else { "" };
                    return Err(Error::unsupported(format!(
                        "dataset /{shown}: filter {id} {name}{optional}: only deflate and \
                         shuffle are read"
                    )));
                }
            }
        }
        Ok(out)
    }

    fn attributes(&mut self, msgs: &[Msg], path: &str) -> Result<()> {
        if msgs.iter().any(|m| m.kind == 0x15) {
            self.warnings.push(format!(
                "/{}: attributes in dense storage (attribute info message) are not read",
                path.escape_debug()
            ));
        }
        for m in msgs.iter().filter(|m| m.kind == 0x0c) {
            self.entries += 1;
            self.limits.check_entries(self.entries)?;
            let (name, value) = match self.attribute(&m.body, m.at) {
                Ok(Some(nv)) => nv,
                Ok(None) => continue,
                Err(e) => {
                    self.warnings.push(format!(
                        "/{}: an attribute skipped: {e}",
                        path.escape_debug()
                    ));
                    continue;
                }
            };
            let key = if path.is_empty() {
                name
            } else {
                format!("{path}/{name}")
            };
            if !self.meta_keys.insert(key.clone()) {
                return Err(bad(format!(
                    "metadata key {:?} given twice (an attribute name with `/`?)",
                    key
                )));
            }
            self.meta.push((key, value));
        }
        Ok(())
    }

    /// An attribute's name and value; `None` for one we skip without a word.
    fn attribute(&mut self, body: &[u8], at: u64) -> Result<Option<(String, Value)>> {
        let mut c = Cur::new(body, at, "attribute");
        let v = c.u8()?;
        let flags = c.u8()?;
        let nl = c.u16()? as usize;
        let tl = c.u16()? as usize;
        let sl = c.u16()? as usize;
        if v == 3 {
            c.skip(1)?;
        } else if v != 1 && v != 2 {
            return Err(Error::unsupported(format!("attribute message version {v}")));
        }
        if flags != 0 && v > 1 {
            return Err(Error::unsupported("shared datatype or dataspace"));
        }
        let p = |n: usize| if v == 1 { pad8(n) } else { n };
        let name = c.take(p(nl))?;
        let name = &name[..name
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(name.len().min(nl))];
        self.limits.check_name(name.len() as u64)?;
        let name = std::str::from_utf8(name)
            .map_err(|_| bad("attribute name is not UTF-8").at_offset(at))?
            .to_string();
        let tb = c.take(p(tl))?;
        let ty = self.datatype(&mut Cur::new(tb, at, "attribute datatype"), 0)?;
        let sb = c.take(p(sl))?;
        let shape = match self.dataspace(sb, at)? {
            Some(s) => s,
            None => return Ok(Some((name, Value::Null))),
        };
        let n = crate::tensor::numel(&shape)?;
        self.limits.check_entries(n)?;
        let need = n
            .checked_mul(ty.size() as u64)
            .ok_or_else(|| bad("attribute size overflows"))?;
        let data = c.rest();
        if (data.len() as u64) < need {
            return Err(bad(format!(
                "attribute {name:?}: {need} data bytes needed, {} present",
                data.len()
            )));
        }
        let size = ty.size();
        let mut flat = Vec::with_capacity(n as usize);
        for i in 0..n as usize {
            let el = &data[i * size..(i + 1) * size];
            flat.push(self.element(&ty, el)?);
        }
        Ok(Some((name, nest(&shape, flat))))
    }

    fn element(&mut self, ty: &Ty, el: &[u8]) -> Result<Value> {
        Ok(match ty {
            Ty::Num { dtype, big } => {
                let mut b = el.to_vec();
                if *big {
                    b.reverse();
                }
                let u = b.iter().rev().fold(0u64, |a, &x| (a << 8) | x as u64);
                let bits = 8 * b.len() as u32;
                match dtype {
                    DType::Bool => Value::Bool(u != 0),
                    DType::F16 => Value::Float(half::f16::from_bits(u as u16).to_f64()),
                    DType::F32 => Value::Float(f32::from_bits(u as u32) as f64),
                    DType::F64 => Value::Float(f64::from_bits(u)),
                    DType::I8 | DType::I16 | DType::I32 | DType::I64 => {
                        let s = ((u << (64 - bits)) as i64) >> (64 - bits);
                        Value::Int(s as i128)
                    }
                    _ => Value::Int(u as i128),
                }
            }
            Ty::Str { pad, .. } => {
                let s = match pad {
                    0 => &el[..el.iter().position(|&b| b == 0).unwrap_or(el.len())],
                    1 => &el[..el.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1)],
                    _ => &el[..el.iter().rposition(|&b| b != b' ').map_or(0, |p| p + 1)],
                };
                text(s)
            }
            Ty::VlenStr { .. } => {
                let mut c = Cur::new(el, 0, "variable-length string");
                let len = c.u32()? as u64;
                let coll = c.uint(self.so)?;
                let idx = c.u32()?;
                if len == 0 {
                    return Ok(Value::Str(String::new()));
                }
                let obj = self.global(coll, idx)?;
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                if len > obj.len() {
                    return Err(bad(format!(
                        "a string of {len} bytes in a heap object of {}",
                        obj.len()
                    )));
                }
                text(&obj[..len])
            }
            Ty::Other { what, .. } => {
                return Err(Error::unsupported(format!("datatype {what}")));
            }
        })
    }

    /// Object `idx` of the global heap collection at `addr`.
    fn global(&mut self, addr: u64, idx: u32) -> Result<Vec<u8>> {
        if !self.heap_cache.contains_key(&addr) {
            let h = self.meta(addr, 8 + self.sl as u64, "global heap")?;
            let mut c = Cur::new(&h, self.abs(addr, "global heap")?, "global heap");
            if c.take(4)? != b"GCOL" {
                return Err(bad("global heap: no GCOL signature").at_offset(c.base));
            }
            c.skip(4)?;
            let size = c.uint(self.sl)?;
            if size < 8 + self.sl as u64 {
                return Err(bad("global heap: collection too small").at_offset(c.base));
            }
            let all = self.meta(addr, size, "global heap")?.into_owned();
            self.heap_cache.insert(addr, all);
        }
        let all = &self.heap_cache[&addr];
        let mut c = Cur::new(all, addr, "global heap");
        c.skip(8 + self.sl)?;
        while c.rest().len() >= 8 + self.sl {
            let i = c.u16()?;
            c.skip(6)?;
            let size = c.uint(self.sl)?;
            if i == 0 {
                break;
            }
            let size = usize::try_from(size).unwrap_or(usize::MAX);
            if i as u32 == idx {
                return Ok(c.take(size)?.to_vec());
            }
            c.skip(pad8(size.min(c.rest().len())))?;
        }
        Err(bad(format!("global heap at {addr}: no object {idx}")))
    }
}

fn text(s: &[u8]) -> Value {
    match std::str::from_utf8(s) {
        Ok(s) => Value::Str(s.to_string()),
        Err(_) => Value::Bytes(s.to_vec()),
    }
}

/// Elements in C order as nested lists of `shape` (a scalar as itself).
fn nest(shape: &[u64], flat: Vec<Value>) -> Value {
    if shape.is_empty() {
        return flat.into_iter().next().unwrap_or(Value::Null);
    }
    let mut level = flat;
    for &d in shape[1..].iter().rev() {
        let d = d.max(1) as usize;
        let mut out = Vec::with_capacity(level.len() / d);
        let mut it = level.into_iter();
        loop {
            let row: Vec<Value> = it.by_ref().take(d).collect();
            if row.is_empty() {
                break;
            }
            out.push(Value::List(row));
        }
        level = out;
    }
    Value::List(level)
}

/// The fill value a fill value message (new `0x05` or old `0x04`) defines, if any.
fn fill_value(m: &Msg) -> Result<Option<Vec<u8>>> {
    let mut c = Cur::new(&m.body, m.at, "fill value");
    if m.kind == 0x04 {
        let n = c.u32()? as usize;
        return (n > 0).then(|| c.take(n).map(<[u8]>::to_vec)).transpose();
    }
    let v = c.u8()?;
    let defined = match v {
        1 | 2 => {
            c.skip(2)?;
            c.u8()? != 0
        }
        3 => c.u8()? & 0x20 != 0,
        _ => {
            return Err(Error::unsupported(format!(
                "fill value message version {v}"
            )))
        }
    };
    if !defined {
        return Ok(None);
    }
    let n = c.u32()? as usize;
    (n > 0).then(|| c.take(n).map(<[u8]>::to_vec)).transpose()
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}/{name}")
    }
}

impl<'data> Hdf5File<'data> {
    /// Parses the superblock and walks the groups from the root: reads metadata only.
    pub fn parse(src: impl Into<SourceRef<'data>>, opts: &ReadOptions) -> Result<Hdf5File<'data>> {
        let src = src.into();
        let mut p = Parser {
            src,
            so: 8,
            sl: 8,
            base: 0,
            limits: &opts.limits,
            budget: Cell::new(opts.limits.max_index_bytes),
            entries: 0,
            infos: Vec::new(),
            sets: Vec::new(),
            meta: Vec::new(),
            meta_keys: HashSet::new(),
            warnings: Vec::new(),
            heap_cache: HashMap::new(),
        };
        let (version, root) = p.superblock()?;
        p.group(root, "", &mut Vec::new())?;
        let mut by_name = HashMap::new();
        for (i, info) in p.infos.iter().enumerate() {
            if by_name.insert(info.name.clone(), i).is_some() {
                return Err(bad(format!(
                    "dataset /{} listed twice",
                    info.name.escape_debug()
                )));
            }
        }
        Ok(Hdf5File {
            src,
            sizes: (p.so, p.sl),
            base: p.base,
            limits: opts.limits.clone(),
            metadata: Metadata::from_unique(p.meta),
            warnings: p.warnings,
            infos: p.infos,
            sets: p.sets,
            by_name,
            version,
        })
    }

    fn read(&self, i: usize) -> Result<Cow<'data, [u8]>> {
        let info = &self.infos[i];
        let set = &self.sets[i];
        let nbytes = info.dense_nbytes()?;
        let size = info.dtype.size();
        let stored = match &set.data {
            Data::Range { offset, len } => self.src.read_at(*offset, *len)?,
            Data::Fill => Cow::Owned(repeat(&set.fill, nbytes)?),
            Data::Chunked { btree, chunk } => {
                Cow::Owned(self.chunked(info, set, *btree, chunk, nbytes)?)
            }
        };
        if set.big && size > 1 {
            // Stored (fill value included) in the dataset's byte order.
            let mut b = stored.into_owned();
            for el in b.chunks_exact_mut(size) {
                el.reverse();
            }
            return Ok(Cow::Owned(b));
        }
        Ok(stored)
    }

    fn chunked(
        &self,
        info: &TensorInfo,
        set: &Dataset,
        btree: u64,
        chunk: &[u64],
        nbytes: u64,
    ) -> Result<Vec<u8>> {
        let mut out = repeat(&set.fill, nbytes)?;
        let (so, sl) = self.sizes;
        let _ = sl;
        let shape = &info.shape;
        let rank = shape.len();
        let size = info.dtype.size() as u64;
        let shown = info.name.escape_debug().to_string();
        let undefined =
            (so == 8 && btree == u64::MAX) || (so < 8 && btree == (1u64 << (8 * so)) - 1);
        if undefined || nbytes == 0 {
            return Ok(out);
        }
        let chunk_elems = crate::tensor::numel(chunk)?;
        let chunk_bytes = chunk_elems
            .checked_mul(size)
            .ok_or_else(|| bad(format!("dataset /{shown}: chunk size overflows")))?;
        self.limits.check_decoded(chunk_bytes)?;
        let key_len = 8 + 8 * (rank + 1);
        let mut stack = vec![(btree, 0usize)];
        let mut seen = HashSet::new();
        let mut budget = self.limits.max_index_bytes;
        while let Some((node, depth)) = stack.pop() {
            if !seen.insert(node) || depth > 64 {
                return Err(bad(format!(
                    "dataset /{shown}: chunk B-tree node at {node} repeats or nests too deep"
                )));
            }
            let at = self
                .base
                .checked_add(node)
                .ok_or_else(|| bad("address overflows"))?;
            let head = self
                .src
                .slice(at, (8 + 2 * so) as u64, "chunk B-tree node")?;
            let mut c = Cur::new(&head, at, "chunk B-tree node");
            if c.take(4)? != b"TREE" || c.u8()? != 1 {
                return Err(bad(format!(
                    "dataset /{shown}: not a chunk B-tree node (TREE, type 1)"
                ))
                .at_offset(at));
            }
            let level = c.u8()?;
            let used = c.u16()? as u64;
            let body_len = used
                .checked_mul((key_len + so) as u64)
                .and_then(|n| n.checked_add(key_len as u64))
                .ok_or_else(|| bad("chunk B-tree node size overflows"))?;
            budget = budget.checked_sub(body_len).ok_or_else(|| {
                Error::limit(format!(
                    "dataset /{shown}: chunk index exceeds max_index_bytes"
                ))
            })?;
            let body = self
                .src
                .slice(at + 8 + 2 * so as u64, body_len, "chunk B-tree node")?;
            let mut c = Cur::new(&body, at + 8 + 2 * so as u64, "chunk B-tree node");
            for _ in 0..used {
                let csize = c.u32()? as u64;
                let mask = c.u32()?;
                let mut offs = Vec::with_capacity(rank);
                for _ in 0..rank {
                    offs.push(c.uint(8)?);
                }
                c.skip(8)?;
                let child = c.uint(so)?;
                if level > 0 {
                    stack.push((child, depth + 1));
                    continue;
                }
                for (d, (&o, (&n, &k))) in offs.iter().zip(shape.iter().zip(chunk)).enumerate() {
                    if o >= n || o % k != 0 {
                        return Err(bad(format!(
                            "dataset /{shown}: chunk at {offs:?} outside the shape {shape:?} \
                             or off the chunk grid (dimension {d})"
                        )));
                    }
                }
                let cat = self
                    .base
                    .checked_add(child)
                    .ok_or_else(|| bad("address overflows"))?;
                let raw = self
                    .src
                    .slice(cat, csize, &format!("chunk of dataset /{shown}"))?;
                let data = self.unfilter(raw, &set.filters, mask, chunk_bytes, size, &shown)?;
                place(&mut out, &data, shape, chunk, &offs, size as usize);
            }
        }
        Ok(out)
    }

    fn unfilter<'a>(
        &self,
        raw: Cow<'a, [u8]>,
        filters: &[u16],
        mask: u32,
        chunk_bytes: u64,
        size: u64,
        shown: &str,
    ) -> Result<Cow<'a, [u8]>> {
        let mut data = raw;
        for (i, f) in filters.iter().enumerate().rev() {
            if i < 32 && mask & (1 << i) != 0 {
                continue;
            }
            data = match f {
                1 => Cow::Owned(inflate(&data, chunk_bytes, shown)?),
                _ => Cow::Owned(unshuffle(&data, size as usize)),
            };
        }
        if data.len() as u64 != chunk_bytes {
            return Err(bad(format!(
                "dataset /{shown}: a chunk decodes to {} bytes, {chunk_bytes} expected",
                data.len()
            )));
        }
        Ok(data)
    }
}

fn repeat(fill: &[u8], nbytes: u64) -> Result<Vec<u8>> {
    let n = crate::limits::to_usize(nbytes, "dataset size")?;
    if fill.iter().all(|&b| b == 0) {
        return Ok(vec![0; n]);
    }
    let mut v = Vec::with_capacity(n);
    while v.len() < n {
        v.extend_from_slice(&fill[..fill.len().min(n - v.len())]);
    }
    Ok(v)
}

fn inflate(data: &[u8], max: u64, shown: &str) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::ZlibDecoder::new(data)
        .take(max + 1)
        .read_to_end(&mut out)
        .map_err(|e| bad(format!("dataset /{shown}: a chunk does not inflate: {e}")))?;
    Ok(out)
}

/// Undoes HDF5's shuffle: byte `j` of every element was stored together.
fn unshuffle(data: &[u8], size: usize) -> Vec<u8> {
    if size <= 1 {
        return data.to_vec();
    }
    let n = data.len() / size;
    let mut out = data.to_vec();
    for j in 0..size {
        for i in 0..n {
            out[i * size + j] = data[j * n + i];
        }
    }
    out
}

/// Copies a whole chunk (`chunk` elements per dimension, at element offsets `offs`) into
/// the array of `shape`, cutting what lies past the edges.
fn place(out: &mut [u8], data: &[u8], shape: &[u64], chunk: &[u64], offs: &[u64], size: usize) {
    let rank = shape.len();
    if rank == 0 {
        return;
    }
    // Extent of the chunk inside the array, per dimension.
    let ext: Vec<u64> = (0..rank)
        .map(|d| chunk[d].min(shape[d] - offs[d]))
        .collect();
    let row = ext[rank - 1] as usize * size;
    let mut idx = vec![0u64; rank - 1];
    loop {
        let mut src = 0u64;
        let mut dst = 0u64;
        for d in 0..rank {
            let i = if d < rank - 1 { idx[d] } else { 0 };
            src = src * chunk[d] + i;
            dst = dst * shape[d] + offs[d] + i;
        }
        let (s, t) = (src as usize * size, dst as usize * size);
        out[t..t + row].copy_from_slice(&data[s..s + row]);
        // Odometer over all but the last dimension.
        let mut d = rank - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < ext[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

impl TensorSource for Hdf5File<'_> {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let &i = self.by_name.get(name).ok_or_else(|| {
            Error::not_found(format!("no dataset named {:?}", name.escape_debug()))
        })?;
        TensorView::dense(self.infos[i].clone(), self.read(i)?)
    }
    fn source_format(&self) -> Option<Format> {
        Some(Format::Hdf5)
    }
}

impl Container for Hdf5File<'_> {
    fn format(&self) -> Format {
        Format::Hdf5
    }
    fn version(&self) -> String {
        self.version.to_string()
    }
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport {
        opts.advance_tensors(&self.infos);
        let mut r = VerifyReport {
            warnings: self.warnings.clone(),
            ..Default::default()
        };
        r.ok("file", "structure");
        r.push(
            "file",
            "checksum",
            Status::NotChecked,
            Some(
                "HDF5 files written by h5py store no checksums; the structure was validated".into(),
            ),
        );
        r
    }
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unshuffle_regroups_bytes() {
        // Two 2-byte elements 0x0201, 0x0403 shuffled: low bytes first.
        assert_eq!(unshuffle(&[1, 3, 2, 4], 2), [1, 2, 3, 4]);
    }

    #[test]
    fn place_cuts_edge_chunks() {
        // A 3x3 u8 array, a 2x2 chunk at (2, 2): only its top-left element lands.
        let mut out = vec![0u8; 9];
        place(&mut out, &[9, 8, 7, 6], &[3, 3], &[2, 2], &[2, 2], 1);
        assert_eq!(out, [0, 0, 0, 0, 0, 0, 0, 0, 9]);
        place(&mut out, &[1, 2, 3, 4], &[3, 3], &[2, 2], &[0, 0], 1);
        assert_eq!(out, [1, 2, 0, 3, 4, 0, 0, 0, 9]);
    }
}
