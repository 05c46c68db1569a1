//! The pickle `torch.save` writes for a state dict, written without Python: protocol 2,
//! the opcodes torch 1.13's `weights_only` unpickler accepts (`GLOBAL`, `REDUCE`,
//! `BINPERSID`, `BINUNICODE`, `BININT*`, `LONG1`, `MARK`/`TUPLE*`, `SETITEMS`,
//! `APPENDS`, `BUILD`, `BINPUT`/`BINGET`), plus `BINFLOAT` and `BINBYTES` for float and
//! bytes metadata values (which newer torch's `weights_only` and every plain unpickler
//! read, and torch 1.13's `weights_only` refuses).
//!
//! Hand-written: the object is fixed in shape (an `OrderedDict` of
//! `_rebuild_tensor_v2` calls over persistent storage ids, `_rebuild_tensor_v3` over an
//! `UntypedStorage` for the dtypes without a storage class), so an encoder is a few
//! opcodes; `serde-pickle` cannot emit `GLOBAL`/`REDUCE`/`BINPERSID`.

use crate::dtype::DType;
use crate::metadata::{Map, Value};

/// Memo slots of the globals (written once, then fetched with `BINGET`).
const ORDERED_DICT: u8 = 0;
const REBUILD: u8 = 1;
/// The first slot of the storage classes, one per dtype in [`storage_class`] order.
const STORAGE0: u8 = 2;
const REBUILD_V3: u8 = 14;
const UNTYPED: u8 = 15;
/// The first slot of the dtypes written with `_rebuild_tensor_v3`, in [`v3_dtype`] order.
const DTYPE0: u8 = 16;
/// Memo slots in all.
const SLOTS: usize = 32;

/// The storage class torch names a dtype's storage by (`FloatStorage`), and its slot.
pub fn storage_class(d: DType) -> Option<(&'static str, u8)> {
    let all = [
        (DType::F64, "DoubleStorage"),
        (DType::F32, "FloatStorage"),
        (DType::F16, "HalfStorage"),
        (DType::BF16, "BFloat16Storage"),
        (DType::I64, "LongStorage"),
        (DType::I32, "IntStorage"),
        (DType::I16, "ShortStorage"),
        (DType::I8, "CharStorage"),
        (DType::U8, "ByteStorage"),
        (DType::Bool, "BoolStorage"),
        (DType::C64, "ComplexFloatStorage"),
        (DType::C128, "ComplexDoubleStorage"),
    ];
    all.iter()
        .position(|(x, _)| *x == d)
        .map(|i| (all[i].1, STORAGE0 + i as u8))
}

/// The torch dtype (`uint16`) of a dtype torch 2.x pickles with `_rebuild_tensor_v3`
/// (no legacy storage class; a torch 2.x that has the dtype loads it: float8 since 2.1,
/// u16/u32/u64 2.3, e8m0 2.7, f4 2.8), and its memo slot. `F4E2M1`
/// is torch's `float4_e2m1fn_x2`, two values per element.
pub fn v3_dtype(d: DType) -> Option<(&'static str, u8)> {
    let all = [
        (DType::U16, "uint16"),
        (DType::U32, "uint32"),
        (DType::U64, "uint64"),
        (DType::F8E4M3FN, "float8_e4m3fn"),
        (DType::F8E5M2, "float8_e5m2"),
        (DType::F8E4M3FNUZ, "float8_e4m3fnuz"),
        (DType::F8E5M2FNUZ, "float8_e5m2fnuz"),
        (DType::F8E8M0, "float8_e8m0fnu"),
        (DType::F4E2M1, "float4_e2m1fn_x2"),
    ];
    all.iter()
        .position(|(x, _)| *x == d)
        .map(|i| (all[i].1, DTYPE0 + i as u8))
}

/// One tensor of the state dict: its storage key (`data/<key>`), dtype and shape
/// (a contiguous view of the whole storage).
pub struct Entry<'a> {
    /// The state dict key.
    pub name: &'a str,
    /// The storage record's key.
    pub key: String,
    /// Element type.
    pub dtype: DType,
    /// Shape (torch's: for `F4E2M1`, pairs of values, the last dimension halved).
    pub shape: &'a [u64],
}

/// A protocol 2 pickle being written.
struct Pickle {
    out: Vec<u8>,
    /// Which memo slots hold a global already.
    memo: [bool; SLOTS],
}

impl Pickle {
    fn op(&mut self, op: u8) {
        self.out.push(op);
    }
    fn global(&mut self, slot: u8, module: &str, name: &str) {
        if self.memo[slot as usize] {
            self.out.extend_from_slice(&[b'h', slot]);
            return;
        }
        self.out.push(b'c');
        self.out.extend_from_slice(module.as_bytes());
        self.out.push(b'\n');
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(b'\n');
        self.out.extend_from_slice(&[b'q', slot]);
        self.memo[slot as usize] = true;
    }
    fn str(&mut self, s: &str) {
        self.out.push(b'X');
        self.out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        self.out.extend_from_slice(s.as_bytes());
    }
    fn int(&mut self, i: i128) {
        match i {
            0..=0xff => self.out.extend_from_slice(&[b'K', i as u8]),
            0x100..=0xffff => {
                self.out.push(b'M');
                self.out.extend_from_slice(&(i as u16).to_le_bytes());
            }
            _ if i32::try_from(i).is_ok() => {
                self.out.push(b'J');
                self.out.extend_from_slice(&(i as i32).to_le_bytes());
            }
            _ => {
                // LONG1: the shortest two's complement little-endian bytes.
                let b = i.to_le_bytes();
                let mut n = 16;
                while n > 1 {
                    let (last, prev) = (b[n - 1], b[n - 2]);
                    if (last == 0 && prev < 0x80) || (last == 0xff && prev >= 0x80) {
                        n -= 1;
                    } else {
                        break;
                    }
                }
                self.out.extend_from_slice(&[0x8a, n as u8]);
                self.out.extend_from_slice(&b[..n]);
            }
        }
    }
    fn ints(&mut self, v: &[u64]) {
        match v.len() {
            0 => self.op(b')'),
            1..=3 => {
                v.iter().for_each(|&x| self.int(x as i128));
                self.op([0x85, 0x86, 0x87][v.len() - 1]);
            }
            _ => {
                self.op(b'(');
                v.iter().for_each(|&x| self.int(x as i128));
                self.op(b't');
            }
        }
    }
    fn empty_ordered_dict(&mut self) {
        self.global(ORDERED_DICT, "collections", "OrderedDict");
        self.out.extend_from_slice(b")R");
    }
    fn value(&mut self, v: &Value) {
        match v {
            Value::Null => self.op(b'N'),
            Value::Bool(b) => self.op(if *b { 0x88 } else { 0x89 }),
            Value::Int(i) => self.int(*i),
            Value::Float(f) => {
                self.op(b'G');
                self.out.extend_from_slice(&f.to_be_bytes());
            }
            Value::Str(s) => self.str(s),
            Value::Bytes(b) => {
                self.op(b'B');
                self.out.extend_from_slice(&(b.len() as u32).to_le_bytes());
                self.out.extend_from_slice(b);
            }
            Value::List(l) => {
                self.op(b']');
                for batch in l.chunks(1000) {
                    self.op(b'(');
                    batch.iter().for_each(|x| self.value(x));
                    self.op(b'e');
                }
            }
            Value::Map(m) => self.map(m),
        }
    }
    fn map(&mut self, m: &Map) {
        self.op(b'}');
        let items: Vec<(&str, &Value)> = m.iter().collect();
        for batch in items.chunks(1000) {
            self.op(b'(');
            for (k, v) in batch {
                self.str(k);
                self.value(v);
            }
            self.op(b'u');
        }
    }
    /// `_rebuild_tensor_v2(storage, 0, size, stride, False, OrderedDict())` over a
    /// typed storage, or, with `v3` (a dtype without one), `_rebuild_tensor_v3(…,
    /// torch.<dtype>)` over an `UntypedStorage` counted in bytes, as torch 2.x writes.
    fn tensor(&mut self, e: &Entry<'_>, class: (&str, u8), v3: Option<(&str, u8)>) {
        match v3 {
            None => self.global(REBUILD, "torch._utils", "_rebuild_tensor_v2"),
            Some(_) => self.global(REBUILD_V3, "torch._utils", "_rebuild_tensor_v3"),
        }
        self.op(b'(');
        // The persistent id ('storage', torch.<Class>, key, 'cpu', numel).
        self.op(b'(');
        self.str("storage");
        match v3 {
            None => self.global(class.1, "torch", class.0),
            Some(_) => self.global(UNTYPED, "torch.storage", "UntypedStorage"),
        }
        self.str(&e.key);
        self.str("cpu");
        let numel = e.shape.iter().product::<u64>();
        // An UntypedStorage counts bytes; a float4_e2m1fn_x2 element is one byte.
        let unit = match (v3, e.dtype) {
            (None, _) | (_, DType::F4E2M1) => 1,
            (Some(_), d) => d.size() as u64,
        };
        self.int(numel.saturating_mul(unit) as i128);
        self.op(b't');
        self.op(b'Q');
        self.int(0);
        self.ints(e.shape);
        let mut stride = vec![0u64; e.shape.len()];
        let mut acc = 1u64;
        for (s, &n) in stride.iter_mut().zip(e.shape).rev() {
            *s = acc;
            acc = acc.saturating_mul(n.max(1));
        }
        self.ints(&stride);
        self.op(0x89); // requires_grad False
        self.empty_ordered_dict(); // backward hooks
        if let Some((name, slot)) = v3 {
            self.global(slot, "torch", name);
        }
        self.op(b't');
        self.op(b'R');
    }
}

/// A training checkpoint as pyfolds' `save_fold_or_mind` pickles it: a dict whose
/// `state_dict` entry is the `OrderedDict` of `entries` (as [`state_dict`] writes it,
/// without metadata), followed by the entries of `top` in order (`config`, `step_id`,
/// `epoch`, …). The caller keeps `state_dict` out of `top`.
pub fn checkpoint(entries: &[Entry<'_>], top: &Map) -> Vec<u8> {
    let mut p = Pickle {
        out: vec![0x80, 2],
        memo: [false; SLOTS],
    };
    p.op(b'}');
    p.op(b'(');
    p.str("state_dict");
    p.ordered_dict(entries);
    for (k, v) in top.iter() {
        p.str(k);
        p.value(v);
    }
    p.op(b'u');
    p.op(b'.');
    p.out
}

impl Pickle {
    /// `OrderedDict` of `entries`, in order.
    fn ordered_dict(&mut self, entries: &[Entry<'_>]) {
        self.empty_ordered_dict();
        for batch in entries.chunks(1000) {
            self.op(b'(');
            for e in batch {
                self.str(e.name);
                if let Some(class) = storage_class(e.dtype) {
                    self.tensor(e, class, None);
                } else if let Some(v3) = v3_dtype(e.dtype) {
                    self.tensor(e, ("", 0), Some(v3));
                } else {
                    self.op(b'N');
                }
            }
            self.op(b'u');
        }
    }
}

/// The state dict pickle: `OrderedDict` of `entries` in order; `metadata`, when not
/// empty, set as the dict's attribute `attr` (by `BUILD`, as a state dict's own
/// `_metadata` is), where `load_state_dict` never sees it. Every entry's dtype must have
/// a [`storage_class`] or a [`v3_dtype`] (the caller checked).
pub fn state_dict(entries: &[Entry<'_>], metadata: &Map, attr: &str) -> Vec<u8> {
    let mut p = Pickle {
        out: vec![0x80, 2],
        memo: [false; SLOTS],
    };
    p.ordered_dict(entries);
    if !metadata.is_empty() {
        p.op(b'}');
        p.op(b'(');
        p.str(attr);
        p.map(metadata);
        p.op(b'u');
        p.op(b'b');
    }
    p.op(b'.');
    p.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_take_the_shortest_opcode() {
        let enc = |i: i128| {
            let mut p = Pickle {
                out: Vec::new(),
                memo: [false; SLOTS],
            };
            p.int(i);
            p.out
        };
        assert_eq!(enc(7), [b'K', 7]);
        assert_eq!(enc(300), [b'M', 0x2c, 1]);
        assert_eq!(enc(-1), [b'J', 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(enc(1 << 31), [0x8a, 5, 0, 0, 0, 0x80, 0]);
        assert_eq!(enc(-(1 << 40)), [0x8a, 6, 0, 0, 0, 0, 0, 0xff]);
    }
}
