//! An allow-list pickle reader: interprets the opcodes of protocols 2–5 and builds only
//! the objects a PyTorch checkpoint needs, executing nothing.
//!
//! Hand-written because no crate does this safely: `serde-pickle` and `pickle`-style
//! crates either refuse `GLOBAL`/`REDUCE` outright (so they cannot read a state dict at
//! all) or turn them into generic "class call" values with no bounds on what a hostile
//! stream allocates, and none interprets PyTorch's persistent ids. Here a global is
//! resolved against a fixed table ([`Global`]); any other global is refused by name, and
//! `REDUCE`/`NEWOBJ`/`BUILD` apply only the few allowed callables to arguments of the
//! expected shapes — anything else is an error, never a call.
//!
//! Objects live in an arena ([`Graph`]): the stack, the memo and the containers hold
//! indices, so a container filled after it was memoized is seen filled through the memo
//! (as in Python), and nothing is dropped recursively. The arena, the memo, the stack and
//! the mark stack are bounded by [`Limits`]; every length is checked against the bytes
//! left before anything is read or allocated.

use std::collections::HashMap;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::limits::Limits;

/// An index into [`Graph::objs`].
pub type Id = u32;

/// A global the reader knows. Nothing else can be named by a pickle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Global {
    /// `collections.OrderedDict`: `OrderedDict()` is an empty dict.
    OrderedDict,
    /// `torch._utils._rebuild_tensor_v2` (and the older `_rebuild_tensor`).
    RebuildTensor,
    /// `torch._utils._rebuild_tensor_v3`: torch 2.x's rebuild for dtypes without a
    /// storage class of their own (u16/u32/u64, the float8s, `float4_e2m1fn_x2`, …):
    /// an `UntypedStorage` of bytes and the dtype as the seventh argument.
    RebuildTensorV3,
    /// `torch._utils._rebuild_parameter` (and `_rebuild_parameter_with_state`).
    RebuildParameter,
    /// `torch._tensor._rebuild_from_type_v2(func, type, args, state)`: what torch
    /// writes for tensor subclasses and tensors carrying Python attributes.
    RebuildFromType,
    /// `torch.Tensor` or `torch.nn.parameter.Parameter` (the full name): the only
    /// classes `_rebuild_from_type_v2` may rebuild as.
    TensorClass(&'static str),
    /// `torch.Size`.
    Size,
    /// `torch.FloatStorage`, …, `torch.UntypedStorage`: names a storage's element type.
    Storage(&'static str, DType),
    /// `torch.float32`, …: a dtype (kept as metadata text).
    DType(&'static str),
    /// A plain-data class or function of PyTorch Distributed Checkpoint's metadata
    /// ([`resolve_dcp`]), by its full name.
    Dcp(&'static str),
}

/// A storage named by a persistent id `('storage', type, key, location, numel[, view])`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageRef {
    /// The storage class name (`FloatStorage`).
    pub type_name: &'static str,
    /// Its element type.
    pub dtype: DType,
    /// The key (`data/<key>` in a zip, the storage's position in a legacy file).
    pub key: String,
    /// Elements in the storage.
    pub numel: u64,
    /// Legacy storage views: `(offset, numel)` in elements into the root storage `key`.
    pub view: Option<(u64, u64)>,
}

/// A tensor rebuilt by `_rebuild_tensor_v2` or `_v3`: a strided view of a storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorRef {
    /// The storage.
    pub storage: StorageRef,
    /// Offset of the first element, in elements of `dtype`.
    pub offset: u64,
    /// The shape (torch's: for `float4_e2m1fn_x2`, pairs of values).
    pub size: Vec<u64>,
    /// The strides, in elements of `dtype`.
    pub stride: Vec<u64>,
    /// The element type: the storage's for `_rebuild_tensor_v2`, the dtype argument of
    /// `_rebuild_tensor_v3` (whose storage is bytes). [`DType::F4E2M1`] stands for
    /// torch's `float4_e2m1fn_x2`, one byte per element (two values, low nibble
    /// first); for a torch dtype Tessera has no [`DType`] for (`undecoded`), an
    /// unsigned integer of its size.
    pub dtype: DType,
    /// The torch dtype (`complex32`) when Tessera has no [`DType`] for it: the tensor is
    /// carried as its bytes ([`crate::Layout::undecoded`]).
    pub undecoded: Option<&'static str>,
}

/// What a torch dtype named in `_rebuild_tensor_v3` is to Tessera: its [`DType`] (see
/// [`TensorRef::dtype`]), and its name when Tessera carries it undecoded. `None` for the
/// quantized dtypes (and any torch cannot save).
pub fn torch_dtype(name: &str) -> Option<(DType, Option<&'static str>)> {
    use DType::*;
    Some(match name {
        "bool" => (Bool, None),
        "uint8" => (U8, None),
        "int8" => (I8, None),
        "int16" => (I16, None),
        "int32" => (I32, None),
        "int64" => (I64, None),
        "uint16" => (U16, None),
        "uint32" => (U32, None),
        "uint64" => (U64, None),
        "float16" => (F16, None),
        "bfloat16" => (BF16, None),
        "float32" => (F32, None),
        "float64" => (F64, None),
        "complex64" => (C64, None),
        "complex128" => (C128, None),
        "float8_e4m3fn" => (F8E4M3FN, None),
        "float8_e5m2" => (F8E5M2, None),
        "float8_e4m3fnuz" => (F8E4M3FNUZ, None),
        "float8_e5m2fnuz" => (F8E5M2FNUZ, None),
        "float8_e8m0fnu" => (F8E8M0, None),
        "float4_e2m1fn_x2" => (F4E2M1, None),
        "complex32" => (U32, Some("torch.complex32")),
        "bcomplex32" => (U32, Some("torch.bcomplex32")),
        "bits16" => (U16, Some("torch.bits16")),
        "bits8" => (U8, Some("torch.bits8")),
        "bits1x8" => (U8, Some("torch.bits1x8")),
        "bits2x4" => (U8, Some("torch.bits2x4")),
        "bits4x2" => (U8, Some("torch.bits4x2")),
        _ => return None,
    })
}

/// A Python object the reader may build.
#[derive(Debug, Clone, PartialEq)]
pub enum Obj {
    /// `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An int (up to 128 bits).
    Int(i128),
    /// A float.
    Float(f64),
    /// A str.
    Str(String),
    /// bytes or bytearray.
    Bytes(Vec<u8>),
    /// A tuple.
    Tuple(Vec<Id>),
    /// A list.
    List(Vec<Id>),
    /// A dict or OrderedDict, in insertion order.
    Dict(Vec<(Id, Id)>),
    /// An allowed global (a class, a function or a dtype).
    Global(Global),
    /// A storage (from a persistent id).
    Storage(Box<StorageRef>),
    /// A tensor or parameter.
    Tensor(Box<TensorRef>),
    /// An instance of an allowed plain-data class ([`Global::Dcp`]) made by `NEWOBJ`
    /// with no arguments, and the state `BUILD` gave it (a dict or a tuple), unapplied.
    Object {
        /// The class's full name.
        class: &'static str,
        /// Its state, once built.
        state: Option<Id>,
    },
}

/// The objects one pickle built, and the one it returned.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// Every object, by [`Id`].
    pub objs: Vec<Obj>,
    /// What the pickle returned.
    pub root: Id,
    /// Things the reader accepted but dropped (attributes set on a dict by `BUILD`).
    pub notes: Vec<String>,
    /// Dicts given a [`METADATA_ATTR`] attribute by `BUILD`: (dict, value).
    pub metadata_attrs: Vec<(Id, Id)>,
}

/// The attribute Tessera's writer sets on the state dict to carry file metadata (where
/// `load_state_dict` never sees it); read back as metadata.
pub const METADATA_ATTR: &str = "_tessera_metadata";

impl Graph {
    /// The object `id`.
    pub fn get(&self, id: Id) -> &Obj {
        // Ids are only ever made by `Vm::new_obj`, which pushes the object first.
        &self.objs[id as usize]
    }
}

/// Resolves `module.name` against the allow-list.
fn resolve(module: &str, name: &str) -> Option<Global> {
    use DType::*;
    const STORAGES: &[(&str, DType)] = &[
        ("DoubleStorage", F64),
        ("FloatStorage", F32),
        ("HalfStorage", F16),
        ("BFloat16Storage", BF16),
        ("LongStorage", I64),
        ("IntStorage", I32),
        ("ShortStorage", I16),
        ("CharStorage", I8),
        ("ByteStorage", U8),
        ("BoolStorage", Bool),
        ("ComplexFloatStorage", C64),
        ("ComplexDoubleStorage", C128),
        ("UntypedStorage", U8),
    ];
    const DTYPES: &[&str] = &[
        "float64",
        "float32",
        "float16",
        "bfloat16",
        "int64",
        "int32",
        "int16",
        "int8",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "bool",
        "complex64",
        "complex128",
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
        "float8_e8m0fnu",
        "float4_e2m1fn_x2",
        "complex32",
        "bcomplex32",
        "bits16",
        "bits8",
        "bits1x8",
        "bits2x4",
        "bits4x2",
        "qint8",
        "quint8",
        "qint32",
        "quint4x2",
        "quint2x4",
    ];
    Some(match (module, name) {
        ("collections", "OrderedDict") => Global::OrderedDict,
        ("torch._utils", "_rebuild_tensor_v2" | "_rebuild_tensor") => Global::RebuildTensor,
        ("torch._utils", "_rebuild_tensor_v3") => Global::RebuildTensorV3,
        ("torch._utils", "_rebuild_parameter" | "_rebuild_parameter_with_state") => {
            Global::RebuildParameter
        }
        ("torch._tensor", "_rebuild_from_type_v2") => Global::RebuildFromType,
        ("torch", "Tensor") => Global::TensorClass("torch.Tensor"),
        ("torch.nn.parameter", "Parameter") => Global::TensorClass("torch.nn.parameter.Parameter"),
        ("torch", "Size") => Global::Size,
        ("torch" | "torch.storage", n) => {
            if let Some(&(s, d)) = STORAGES.iter().find(|(s, _)| *s == n) {
                Global::Storage(s, d)
            } else if let Some(&d) = DTYPES.iter().find(|d| **d == n) {
                Global::DType(d)
            } else {
                return None;
            }
        }
        _ => return resolve_dcp(module, name),
    })
}

/// Opcode names for error messages (the ones we do not interpret).
fn opcode_name(op: u8) -> Option<&'static str> {
    Some(match op {
        b'P' => "PERSID",
        b'i' => "INST",
        b'o' => "OBJ",
        b'I' => "INT",
        b'L' => "LONG",
        b'F' => "FLOAT",
        b'S' => "STRING",
        b'V' => "UNICODE",
        b'p' => "PUT",
        b'g' => "GET",
        0x82..=0x84 => "EXT",
        0x8f => "EMPTY_SET",
        0x90 => "ADDITEMS",
        0x91 => "FROZENSET",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        _ => return None,
    })
}

/// Unpickles one pickle from `data[start..]`, returning its objects and the position
/// just after its `STOP`. `what` names the stream in errors (`archive/data.pkl`).
pub fn load(data: &[u8], start: usize, limits: &Limits, what: &str) -> Result<(Graph, usize)> {
    let mut vm = Vm {
        data,
        pos: start,
        op_pos: start,
        limits,
        graph: Graph::default(),
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
    };
    vm.run()
        .map(|root| {
            vm.graph.root = root;
            (std::mem::take(&mut vm.graph), vm.pos)
        })
        .map_err(|e| e.at_subject(what.to_string()))
}

struct Vm<'a> {
    data: &'a [u8],
    pos: usize,
    /// Where the opcode being run starts (for errors).
    op_pos: usize,
    limits: &'a Limits,
    graph: Graph,
    stack: Vec<Id>,
    marks: Vec<usize>,
    memo: HashMap<u32, Id>,
}

impl Vm<'_> {
    fn at(&self, msg: impl std::fmt::Display) -> String {
        format!("{msg} at byte {}", self.op_pos)
    }
    fn malformed(&self, msg: impl std::fmt::Display) -> Error {
        Error::malformed(self.at(msg))
    }
    fn refuse(&self, msg: impl std::fmt::Display) -> Error {
        Error::unsupported(self.at(msg))
    }
    fn limit(&self, msg: impl std::fmt::Display) -> Error {
        Error::limit(self.at(msg))
    }

    fn take(&mut self, n: u64) -> Result<&[u8]> {
        let left = self.data.len().saturating_sub(self.pos) as u64;
        if n > left {
            return Err(self.malformed(format!("truncated pickle: {n} bytes wanted, {left} left")));
        }
        let s = &self.data[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn le<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N as u64)?);
        Ok(a)
    }
    fn u32(&mut self) -> Result<u64> {
        Ok(u32::from_le_bytes(self.le()?) as u64)
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.le()?))
    }
    fn line(&mut self) -> Result<String> {
        let rest = self.data.get(self.pos..).unwrap_or(&[]);
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| self.malformed("truncated pickle: GLOBAL name without a newline"))?;
        let s = std::str::from_utf8(&rest[..n])
            .map_err(|_| self.malformed("GLOBAL name is not UTF-8"))?
            .to_string();
        self.pos += n + 1;
        Ok(s)
    }
    fn text(&mut self, n: u64) -> Result<Obj> {
        let b = self.take(n)?;
        match std::str::from_utf8(b) {
            Ok(s) => Ok(Obj::Str(s.to_string())),
            Err(_) => Err(self.malformed("string is not UTF-8")),
        }
    }
    fn bytes(&mut self, n: u64) -> Result<Obj> {
        Ok(Obj::Bytes(self.take(n)?.to_vec()))
    }

    fn new_obj(&mut self, o: Obj) -> Result<Id> {
        let n = self.graph.objs.len() as u64;
        if n >= self.limits.max_entries {
            return Err(self.limit(format!(
                "more than {} pickle objects",
                self.limits.max_entries
            )));
        }
        self.graph.objs.push(o);
        Ok(n as Id)
    }
    fn push(&mut self, o: Obj) -> Result<()> {
        let id = self.new_obj(o)?;
        self.push_id(id)
    }
    fn push_id(&mut self, id: Id) -> Result<()> {
        if self.stack.len() as u64 >= self.limits.max_entries {
            return Err(self.limit("pickle stack too deep"));
        }
        self.stack.push(id);
        Ok(())
    }
    fn pop(&mut self) -> Result<Id> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.malformed("pickle stack underflow"));
        }
        self.stack
            .pop()
            .ok_or_else(|| self.malformed("pickle stack underflow"))
    }
    fn top(&self) -> Result<Id> {
        let floor = self.marks.last().copied().unwrap_or(0);
        match self.stack.last() {
            Some(&id) if self.stack.len() > floor => Ok(id),
            _ => Err(self.malformed("pickle stack underflow")),
        }
    }
    /// Pops everything above the last MARK, and the mark.
    fn pop_mark(&mut self) -> Result<Vec<Id>> {
        let m = self
            .marks
            .pop()
            .ok_or_else(|| self.malformed("no MARK on the pickle stack"))?;
        Ok(self.stack.split_off(m))
    }
    fn memo_put(&mut self, idx: u64) -> Result<()> {
        if idx >= self.limits.max_entries {
            return Err(self.limit(format!(
                "memo index {idx} is over the limit of {}",
                self.limits.max_entries
            )));
        }
        let id = self.top()?;
        self.memo.insert(idx as u32, id);
        Ok(())
    }
    fn memo_get(&mut self, idx: u64) -> Result<()> {
        let id = u32::try_from(idx)
            .ok()
            .and_then(|i| self.memo.get(&i).copied())
            .ok_or_else(|| self.malformed(format!("memo index {idx} was never stored")))?;
        self.push_id(id)
    }
    fn int_le(&self, b: &[u8]) -> Result<Obj> {
        if b.len() > 16 {
            return Err(self.refuse(format!("a {}-byte integer is too large", b.len())));
        }
        let mut v: i128 = 0;
        for (i, &x) in b.iter().enumerate() {
            v |= (x as i128) << (8 * i);
        }
        if let Some(&last) = b.last() {
            if last & 0x80 != 0 && b.len() < 16 {
                v -= 1i128 << (8 * b.len());
            }
        }
        Ok(Obj::Int(v))
    }

    /// Runs opcodes until STOP; returns the object on top of the stack.
    fn run(&mut self) -> Result<Id> {
        loop {
            self.op_pos = self.pos;
            let op = self.u8()?;
            match op {
                0x80 => {
                    let p = self.u8()?;
                    if !(2..=5).contains(&p) {
                        return Err(self.refuse(format!("pickle protocol {p} (2 to 5 are read)")));
                    }
                }
                0x95 => {
                    self.u64()?; // FRAME: a length hint; opcodes are read as they come
                }
                b'.' => {
                    let root = self.pop()?;
                    if !self.marks.is_empty() {
                        return Err(self.malformed("STOP with an open MARK"));
                    }
                    return Ok(root);
                }
                b'(' => {
                    if self.marks.len() >= self.limits.max_depth * 2 {
                        return Err(self.limit("pickle MARKs nested too deeply"));
                    }
                    self.marks.push(self.stack.len());
                }
                b'0' => {
                    if self.stack.len() > self.marks.last().copied().unwrap_or(0) {
                        self.pop()?;
                    } else {
                        self.pop_mark()?;
                    }
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let id = self.top()?;
                    self.push_id(id)?;
                }
                b'}' => self.push(Obj::Dict(Vec::new()))?,
                b']' => self.push(Obj::List(Vec::new()))?,
                b')' => self.push(Obj::Tuple(Vec::new()))?,
                b't' => {
                    let items = self.pop_mark()?;
                    self.push(Obj::Tuple(items))?;
                }
                0x85..=0x87 => {
                    let n = (op - 0x84) as usize;
                    let mut items = Vec::with_capacity(n);
                    for _ in 0..n {
                        items.push(self.pop()?);
                    }
                    items.reverse();
                    self.push(Obj::Tuple(items))?;
                }
                b'l' => {
                    let items = self.pop_mark()?;
                    self.push(Obj::List(items))?;
                }
                b'd' => {
                    let items = self.pop_mark()?;
                    let pairs = self.pairs(items)?;
                    self.push(Obj::Dict(pairs))?;
                }
                b'a' => {
                    let v = self.pop()?;
                    self.extend(vec![v])?;
                }
                b'e' => {
                    let items = self.pop_mark()?;
                    self.extend(items)?;
                }
                b's' => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    self.extend(vec![k, v])?;
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    self.extend(items)?;
                }
                b'q' => {
                    let i = self.u8()? as u64;
                    self.memo_put(i)?;
                }
                b'r' => {
                    let i = self.u32()?;
                    self.memo_put(i)?;
                }
                0x94 => self.memo_put(self.memo.len() as u64)?,
                b'h' => {
                    let i = self.u8()? as u64;
                    self.memo_get(i)?;
                }
                b'j' => {
                    let i = self.u32()?;
                    self.memo_get(i)?;
                }
                b'J' => {
                    let v = i32::from_le_bytes(self.le()?);
                    self.push(Obj::Int(v as i128))?;
                }
                b'K' => {
                    let v = self.u8()?;
                    self.push(Obj::Int(v as i128))?;
                }
                b'M' => {
                    let v = u16::from_le_bytes(self.le()?);
                    self.push(Obj::Int(v as i128))?;
                }
                0x8a | 0x8b => {
                    let n = if op == 0x8a {
                        self.u8()? as u64
                    } else {
                        let n = i32::from_le_bytes(self.le()?);
                        u64::try_from(n).map_err(|_| self.malformed("negative LONG4 length"))?
                    };
                    let b = self.take(n)?.to_vec();
                    let o = self.int_le(&b)?;
                    self.push(o)?;
                }
                b'G' => {
                    let v = f64::from_be_bytes(self.le()?);
                    self.push(Obj::Float(v))?;
                }
                b'X' | 0x8c | 0x8d | b'T' | b'U' => {
                    let n = match op {
                        b'X' | b'T' => self.u32()?,
                        0x8d => self.u64()?,
                        _ => self.u8()? as u64,
                    };
                    let o = self.text(n)?;
                    self.push(o)?;
                }
                b'B' | b'C' | 0x8e | 0x96 => {
                    let n = match op {
                        b'B' => self.u32()?,
                        b'C' => self.u8()? as u64,
                        _ => self.u64()?,
                    };
                    let o = self.bytes(n)?;
                    self.push(o)?;
                }
                b'N' => self.push(Obj::None)?,
                0x88 => self.push(Obj::Bool(true))?,
                0x89 => self.push(Obj::Bool(false))?,
                b'c' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    self.global(&module, &name)?;
                }
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    match (self.graph.get(module), self.graph.get(name)) {
                        (Obj::Str(m), Obj::Str(n)) => {
                            let (m, n) = (m.clone(), n.clone());
                            self.global(&m, &n)?;
                        }
                        _ => return Err(self.malformed("STACK_GLOBAL wants two strings")),
                    }
                }
                b'R' => {
                    let args = self.pop()?;
                    let f = self.pop()?;
                    let o = self.reduce(f, args)?;
                    self.push(o)?;
                }
                0x81 | 0x92 => {
                    if op == 0x92 {
                        let kw = self.pop()?;
                        if !matches!(self.graph.get(kw), Obj::Dict(d) if d.is_empty()) {
                            return Err(self.refuse("NEWOBJ_EX with keyword arguments"));
                        }
                    }
                    let args = self.pop()?;
                    let cls = self.pop()?;
                    match (self.graph.get(cls), self.graph.get(args)) {
                        (Obj::Global(Global::OrderedDict), Obj::Tuple(a)) if a.is_empty() => {
                            self.push(Obj::Dict(Vec::new()))?
                        }
                        (Obj::Global(Global::Dcp(c)), Obj::Tuple(a))
                            if a.is_empty() && DCP_CLASSES.contains(c) =>
                        {
                            let class = *c;
                            self.push(Obj::Object { class, state: None })?
                        }
                        (c, _) => {
                            return Err(self.refuse(format!(
                                "refused NEWOBJ on {} (only OrderedDict() is allowed)",
                                describe(c)
                            )))
                        }
                    }
                }
                b'b' => {
                    let state = self.pop()?;
                    let obj = self.top()?;
                    self.build(obj, state)?;
                }
                b'Q' => {
                    let pid = self.pop()?;
                    let o = self.persistent(pid)?;
                    self.push(o)?;
                }
                _ => {
                    return Err(match opcode_name(op) {
                        Some(n) => self.refuse(format!("pickle opcode {n} is not supported")),
                        None => self.malformed(format!("unknown pickle opcode 0x{op:02x}")),
                    })
                }
            }
        }
    }

    fn global(&mut self, module: &str, name: &str) -> Result<()> {
        match resolve(module, name) {
            Some(g) => self.push(Obj::Global(g)),
            None => Err(self.refuse(format!(
                "refused global {}.{} (not on the allow-list; nothing is executed)",
                short(module),
                short(name)
            ))),
        }
    }

    fn pairs(&self, items: Vec<Id>) -> Result<Vec<(Id, Id)>> {
        if items.len() % 2 != 0 {
            return Err(self.malformed("odd number of items for a dict"));
        }
        Ok(items.chunks(2).map(|p| (p[0], p[1])).collect())
    }

    /// APPEND(S) / SETITEM(S): adds `items` to the list or dict on top of the stack.
    fn extend(&mut self, items: Vec<Id>) -> Result<()> {
        let target = self.top()?;
        let pairs = match self.graph.get(target) {
            Obj::Dict(_) => Some(self.pairs(items.clone())?),
            Obj::List(_) => None,
            o => {
                return Err(self.refuse(format!("cannot add items to {}", describe(o))));
            }
        };
        match (&mut self.graph.objs[target as usize], pairs) {
            (Obj::Dict(d), Some(p)) => d.extend(p),
            (Obj::List(l), None) => l.extend(items),
            _ => {}
        }
        Ok(())
    }

    /// BUILD: only a dict's attributes: a state dict's `_metadata` (dropped), Tessera's
    /// [`METADATA_ATTR`] (kept), others dropped with a note.
    fn build(&mut self, obj: Id, state: Id) -> Result<()> {
        match (self.graph.get(obj), self.graph.get(state)) {
            (Obj::Dict(_), Obj::Dict(attrs)) => {
                let mut notes = Vec::new();
                let mut kept = Vec::new();
                for (k, v) in attrs {
                    match self.graph.get(*k) {
                        Obj::Str(s) if s == "_metadata" => {}
                        Obj::Str(s) if s == METADATA_ATTR => kept.push((obj, *v)),
                        Obj::Str(s) => {
                            notes.push(format!("attribute {s:?} set on a dict is dropped"))
                        }
                        _ => return Err(self.malformed("BUILD with a non-string attribute")),
                    }
                }
                self.graph.notes.extend(notes);
                self.graph.metadata_attrs.extend(kept);
                Ok(())
            }
            (Obj::Dict(_), Obj::None) => Ok(()),
            (Obj::Object { .. }, _) => self.build_object(obj, state),
            (o, _) => Err(self.refuse(format!("refused BUILD on {}", describe(o)))),
        }
    }

    fn tuple(&self, id: Id) -> Option<&[Id]> {
        match self.graph.get(id) {
            Obj::Tuple(t) => Some(t),
            _ => None,
        }
    }
    fn uint(&self, id: Id) -> Option<u64> {
        match self.graph.get(id) {
            Obj::Int(i) => u64::try_from(*i).ok(),
            _ => None,
        }
    }
    fn uints(&self, id: Id) -> Option<Vec<u64>> {
        let t = self.tuple(id)?;
        if t.len() > self.limits.max_rank {
            return None;
        }
        t.iter().map(|&i| self.uint(i)).collect()
    }

    /// REDUCE: applies an allowed callable to arguments of the expected shapes.
    fn reduce(&self, f: Id, args: Id) -> Result<Obj> {
        let g = match self.graph.get(f) {
            Obj::Global(g) => *g,
            o => return Err(self.refuse(format!("refused REDUCE on {}", describe(o)))),
        };
        let a = self
            .tuple(args)
            .ok_or_else(|| self.malformed("REDUCE arguments are not a tuple"))?;
        let misuse = |what: &str| {
            self.malformed(format!("{} called with {what}", describe(&Obj::Global(g))))
        };
        match g {
            Global::OrderedDict if a.is_empty() => Ok(Obj::Dict(Vec::new())),
            Global::OrderedDict => Err(misuse("arguments (only OrderedDict() is allowed)")),
            Global::Size => match a {
                [t] if self.uints(*t).is_some() => Ok(self.graph.get(*t).clone()),
                _ => Err(misuse("something other than a tuple of sizes")),
            },
            Global::RebuildTensor | Global::RebuildTensorV3 => {
                // v2: (storage, storage_offset, size, stride[, requires_grad,
                // backward_hooks[, metadata]]); v3: (storage, storage_offset, size,
                // stride, requires_grad, backward_hooks, dtype[, metadata]).
                let v3 = g == Global::RebuildTensorV3;
                let arity = if v3 { 7..=8 } else { 4..=7 };
                if !arity.contains(&a.len()) {
                    return Err(misuse(&format!("{} arguments", a.len())));
                }
                let storage = match self.graph.get(a[0]) {
                    Obj::Storage(s) => (**s).clone(),
                    _ => return Err(misuse("a first argument that is not a storage")),
                };
                let (dtype, undecoded) = if v3 {
                    if storage.type_name != "UntypedStorage" {
                        return Err(misuse(&format!(
                            "a torch.{} (an UntypedStorage is its storage)",
                            storage.type_name
                        )));
                    }
                    match self.graph.get(a[6]) {
                        Obj::Global(Global::DType(n)) => torch_dtype(n).ok_or_else(|| {
                            self.refuse(format!(
                                "refused a tensor of dtype torch.{n} (quantized tensors are \
                                 not read)"
                            ))
                        })?,
                        _ => return Err(misuse("a seventh argument that is not a dtype")),
                    }
                } else {
                    (storage.dtype, None)
                };
                let offset = self
                    .uint(a[1])
                    .ok_or_else(|| misuse("a bad storage offset"))?;
                let size = self.uints(a[2]).ok_or_else(|| misuse("a bad size"))?;
                let stride = self.uints(a[3]).ok_or_else(|| misuse("a bad stride"))?;
                if size.len() != stride.len() {
                    return Err(misuse("size and stride of different ranks"));
                }
                // Old torch pickled `None` for no hooks, newer an empty OrderedDict.
                if let Some(&h) = a.get(5) {
                    if !matches!(self.graph.get(h), Obj::None)
                        && !matches!(self.graph.get(h), Obj::Dict(d) if d.is_empty())
                    {
                        return Err(misuse("backward hooks"));
                    }
                }
                Ok(Obj::Tensor(Box::new(TensorRef {
                    storage,
                    offset,
                    size,
                    stride,
                    dtype,
                    undecoded,
                })))
            }
            Global::RebuildParameter => {
                // (data, requires_grad, backward_hooks[, state])
                let empty = |i: &Id| match self.graph.get(*i) {
                    Obj::Dict(d) => d.is_empty(),
                    Obj::None => true,
                    _ => false,
                };
                match a {
                    [t, _, h, rest @ ..] if rest.len() <= 1 && empty(h) => {
                        if let Some(&state) = rest.first() {
                            self.empty_state(state, "torch.nn.parameter.Parameter")?;
                        }
                        match self.graph.get(*t) {
                            Obj::Tensor(_) => Ok(self.graph.get(*t).clone()),
                            _ => Err(misuse("data that is not a tensor")),
                        }
                    }
                    _ => Err(misuse("arguments other than (tensor, requires_grad, {})")),
                }
            }
            Global::RebuildFromType => {
                // (func, type, args, state): `func(*args)` made an instance of `type`,
                // then given `state` as its attributes. Only the plain classes with no
                // attributes are read; a subclass's own global was refused by name.
                let [func, class, args, state] = a else {
                    return Err(misuse(&format!("{} arguments", a.len())));
                };
                let class = match self.graph.get(*class) {
                    Obj::Global(Global::TensorClass(n)) => *n,
                    o => {
                        return Err(self.refuse(format!(
                            "refused torch._tensor._rebuild_from_type_v2 as {} (only \
                             torch.Tensor and torch.nn.parameter.Parameter are read)",
                            describe(o)
                        )))
                    }
                };
                if !matches!(
                    self.graph.get(*func),
                    Obj::Global(
                        Global::RebuildTensor | Global::RebuildTensorV3 | Global::RebuildParameter
                    )
                ) {
                    return Err(misuse("a function that does not rebuild a tensor"));
                }
                self.empty_state(*state, class)?;
                self.reduce(*func, *args)
            }
            Global::TensorClass(n) => Err(self.refuse(format!("refused REDUCE on {n}"))),
            Global::Storage(..) | Global::DType(_) => {
                Err(self.refuse(format!("refused REDUCE on {}", describe(&Obj::Global(g)))))
            }
            Global::Dcp(name) => self.reduce_dcp(name, a),
        }
    }

    /// Accepts a tensor's Python state that sets nothing: `None`, `{}`, or the
    /// `(dict, slots)` pair with both empty; refuses any other, naming `class` and the
    /// attributes it would set.
    fn empty_state(&self, state: Id, class: &str) -> Result<()> {
        let mut names = Vec::new();
        let parts: Vec<Id> = match self.graph.get(state) {
            Obj::Tuple(t) if t.len() == 2 => t.clone(),
            _ => vec![state],
        };
        for p in parts {
            match self.graph.get(p) {
                Obj::None => {}
                Obj::Dict(d) => names.extend(d.iter().map(|(k, _)| match self.graph.get(*k) {
                    Obj::Str(s) => format!("\"{}\"", short(s)),
                    o => describe(o),
                })),
                o => {
                    return Err(self.refuse(format!(
                        "refused a {class} whose Python state is {}",
                        describe(o)
                    )))
                }
            }
        }
        if names.is_empty() {
            return Ok(());
        }
        let more = if names.len() > 8 { ", …" } else { "" };
        names.truncate(8);
        Err(self.refuse(format!(
            "refused a {class} carrying Python attributes ({}{more}); only tensors and \
             parameters without attributes are read",
            names.join(", ")
        )))
    }

    /// BINPERSID: `('storage', storage_type, key, location, numel[, view_metadata])`.
    fn persistent(&self, pid: Id) -> Result<Obj> {
        let bad =
            || self.refuse("persistent id other than ('storage', type, key, location, numel)");
        let t = self.tuple(pid).ok_or_else(bad)?;
        if !(5..=6).contains(&t.len()) || self.graph.get(t[0]) != &Obj::Str("storage".into()) {
            return Err(bad());
        }
        let (type_name, dtype) = match self.graph.get(t[1]) {
            Obj::Global(Global::Storage(n, d)) => (*n, *d),
            _ => return Err(bad()),
        };
        let key = match self.graph.get(t[2]) {
            Obj::Str(s) => s.clone(),
            Obj::Int(i) => i.to_string(),
            _ => return Err(bad()),
        };
        if !matches!(self.graph.get(t[3]), Obj::Str(_)) {
            return Err(bad());
        }
        let numel = self.uint(t[4]).ok_or_else(bad)?;
        let view = match t.get(5).map(|&v| self.graph.get(v)) {
            None | Some(Obj::None) => None,
            Some(Obj::Tuple(v)) if v.len() == 3 => match (self.uint(v[1]), self.uint(v[2])) {
                (Some(off), Some(n)) => Some((off, n)),
                _ => return Err(bad()),
            },
            Some(_) => return Err(bad()),
        };
        Ok(Obj::Storage(Box::new(StorageRef {
            type_name,
            dtype,
            key,
            numel,
            view,
        })))
    }
}

/// What an object is, for errors (`torch._utils._rebuild_tensor_v2`, `a list`).
pub fn describe(o: &Obj) -> String {
    match o {
        Obj::Global(g) => match g {
            Global::OrderedDict => "collections.OrderedDict".into(),
            Global::RebuildTensor => "torch._utils._rebuild_tensor_v2".into(),
            Global::RebuildTensorV3 => "torch._utils._rebuild_tensor_v3".into(),
            Global::RebuildParameter => "torch._utils._rebuild_parameter".into(),
            Global::RebuildFromType => "torch._tensor._rebuild_from_type_v2".into(),
            Global::TensorClass(n) => (*n).into(),
            Global::Size => "torch.Size".into(),
            Global::Storage(n, _) => format!("torch.{n}"),
            Global::DType(n) => format!("torch.{n}"),
            Global::Dcp(n) => (*n).into(),
        },
        Obj::None => "None".into(),
        Obj::Bool(_) => "a bool".into(),
        Obj::Int(_) => "an int".into(),
        Obj::Float(_) => "a float".into(),
        Obj::Str(_) => "a str".into(),
        Obj::Bytes(_) => "bytes".into(),
        Obj::Tuple(_) => "a tuple".into(),
        Obj::List(_) => "a list".into(),
        Obj::Dict(_) => "a dict".into(),
        Obj::Storage(_) => "a storage".into(),
        Obj::Tensor(_) => "a tensor".into(),
        Obj::Object { class, .. } => format!("a {class}"),
    }
}

/// A name from the file, escaped and cut short for an error message.
fn short(s: &str) -> String {
    let mut out: String = s.chars().take(100).flat_map(char::escape_debug).collect();
    if s.chars().count() > 100 {
        out.push('…');
    }
    out
}

// PyTorch Distributed Checkpoint (`formats/dcp`): the plain-data classes of its
// `.metadata` pickle, and the few functions it reduces. Kept apart from the tensor
// rebuilding above: an instance is only recorded (class and state), never constructed;
// `formats/dcp/meta.rs` reads the fields it knows from the state.

/// The DCP classes `NEWOBJ` may instantiate (with no arguments) and `BUILD` give a
/// dict or tuple state.
pub const DCP_CLASSES: &[&str] = &[
    "torch.distributed.checkpoint.metadata.Metadata",
    "torch.distributed.checkpoint.metadata.TensorStorageMetadata",
    "torch.distributed.checkpoint.metadata.BytesStorageMetadata",
    "torch.distributed.checkpoint.metadata.ChunkStorageMetadata",
    "torch.distributed.checkpoint.metadata.TensorProperties",
    "torch.distributed.checkpoint.metadata.MetadataIndex",
    "torch.distributed.checkpoint.metadata.StorageMeta",
    "torch.distributed.checkpoint.filesystem._StorageInfo",
    "torch.distributed.checkpoint.filesystem._StoragePrefix",
];

/// The DCP callables `REDUCE` may apply, each to plain arguments: the memory-format
/// enum (`_MEM_FORMAT_ENCODING(0)` → 0), the layout by name (`_get_layout("torch.strided")`
/// → the name), a path from its parts (`PosixPath("/", "ckpt")` → `"/ckpt"`), and bytes
/// as protocol 2 pickles them (`_codecs.encode("\x00\xff", "latin1")` → the bytes: a
/// `bytes` item of a DCP checkpoint, which `torch.save` pickles with protocol 2).
const DCP_FUNCTIONS: &[&str] = &[
    "torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING",
    "torch.serialization._get_layout",
    "pathlib.PosixPath",
    "pathlib.PurePosixPath",
    "pathlib.WindowsPath",
    "pathlib.PureWindowsPath",
    "_codecs.encode",
];

/// Resolves a DCP class or function ([`DCP_CLASSES`], [`DCP_FUNCTIONS`]).
fn resolve_dcp(module: &str, name: &str) -> Option<Global> {
    DCP_CLASSES
        .iter()
        .chain(DCP_FUNCTIONS)
        .find(|full| {
            full.len() == module.len() + 1 + name.len()
                && full.starts_with(module)
                && full[module.len()..].starts_with('.')
                && full.ends_with(name)
        })
        .map(|full| Global::Dcp(full))
}

impl Vm<'_> {
    /// BUILD on a DCP object: its state (a dict of fields, or the tuple
    /// `TensorProperties.__getstate__` gives), recorded once.
    fn build_object(&mut self, obj: Id, state: Id) -> Result<()> {
        let class = match self.graph.get(obj) {
            Obj::Object { class, state: None } => *class,
            o => return Err(self.refuse(format!("refused a second BUILD on {}", describe(o)))),
        };
        if !matches!(self.graph.get(state), Obj::Dict(_) | Obj::Tuple(_)) {
            return Err(self.refuse(format!(
                "refused BUILD on {class} with {} as its state",
                describe(self.graph.get(state))
            )));
        }
        self.graph.objs[obj as usize] = Obj::Object {
            class,
            state: Some(state),
        };
        Ok(())
    }

    /// REDUCE of a DCP function ([`DCP_FUNCTIONS`]) on plain arguments.
    fn reduce_dcp(&self, name: &'static str, a: &[Id]) -> Result<Obj> {
        let misuse = |what: &str| self.malformed(format!("{name} called with {what}"));
        match name {
            "torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING" => match a {
                [v] => match self.graph.get(*v) {
                    Obj::Int(i) if (0..=2).contains(i) => Ok(Obj::Int(*i)),
                    _ => Err(misuse("something other than 0, 1 or 2")),
                },
                _ => Err(misuse(&format!("{} arguments", a.len()))),
            },
            "torch.serialization._get_layout" => match a {
                [v] => match self.graph.get(*v) {
                    Obj::Str(s) => Ok(Obj::Str(s.clone())),
                    _ => Err(misuse("something other than a layout's name")),
                },
                _ => Err(misuse(&format!("{} arguments", a.len()))),
            },
            "_codecs.encode" => match a {
                [t, e] => match (self.graph.get(*t), self.graph.get(*e)) {
                    (Obj::Str(t), Obj::Str(e)) if e == "latin1" || e == "latin-1" => t
                        .chars()
                        .map(|c| u8::try_from(u32::from(c)).ok())
                        .collect::<Option<Vec<u8>>>()
                        .map(Obj::Bytes)
                        .ok_or_else(|| misuse("a character past U+00FF")),
                    _ => Err(misuse("something other than (str, \"latin1\")")),
                },
                _ => Err(misuse(&format!("{} arguments", a.len()))),
            },
            n if n.starts_with("pathlib.") => {
                let mut path = String::new();
                for v in a {
                    let Obj::Str(s) = self.graph.get(*v) else {
                        return Err(misuse("parts that are not strings"));
                    };
                    if !path.is_empty() && !path.ends_with(['/', '\\']) {
                        path.push('/');
                    }
                    path.push_str(s);
                }
                Ok(Obj::Str(path))
            }
            _ => Err(self.refuse(format!("refused REDUCE on {name}"))),
        }
    }
}
