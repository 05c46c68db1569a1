//! The `.npy` header: magic, version, header length, and the Python dict literal
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`, parsed by a small strict
//! parser (no crate parses numpy's header dict; it is a Python literal, not JSON), and
//! written exactly as `np.save` writes it.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::limits::Limits;

/// `\x93NUMPY`.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// numpy aligns the data start to this (`ARRAY_ALIGN`).
pub const ARRAY_ALIGN: usize = 64;
/// numpy pads the header so the first shape entry can grow to this many digits.
pub const GROWTH_AXIS_MAX_DIGITS: usize = 21;

/// Byte order of the stored elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    /// `<`, `|` or `=`.
    Little,
    /// `>`.
    Big,
}

/// A parsed `.npy` header.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyHeader {
    /// `(major, minor)`: (1,0), (2,0) or (3,0).
    pub version: (u8, u8),
    /// The `descr` string as written.
    pub descr: String,
    /// The element type it maps to.
    pub dtype: DType,
    /// Stored byte order.
    pub order: ByteOrder,
    /// `fortran_order`.
    pub fortran_order: bool,
    /// `shape`.
    pub shape: Vec<u64>,
    /// Offset of the first data byte.
    pub data_offset: usize,
    /// Why the dtype is a guess, when `descr` is ambiguous (`<V2`, `<V1`).
    pub ambiguity: Option<String>,
}

/// Maps a descr (`<f4`, `|b1`, `>c16`, ml_dtypes' `<V2`/`<V1`/`<f1`) to our dtype.
/// Returns the dtype, byte order and, for ambiguous void descrs, a note.
pub fn dtype_from_descr(descr: &str) -> Result<(DType, ByteOrder, Option<String>)> {
    let (order, code) = match descr.as_bytes().first() {
        Some(b'<' | b'|' | b'=') => (ByteOrder::Little, &descr[1..]),
        Some(b'>') => (ByteOrder::Big, &descr[1..]),
        _ => (ByteOrder::Little, descr),
    };
    let mut note = None;
    let d = match code {
        "b1" | "?" => DType::Bool,
        "u1" => DType::U8,
        "u2" => DType::U16,
        "u4" => DType::U32,
        "u8" => DType::U64,
        "i1" => DType::I8,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        "c8" => DType::C64,
        "c16" => DType::C128,
        // ml_dtypes' float8_e5m2 saves as '<f1' (numpy itself cannot load it).
        "f1" => DType::F8E5M2,
        // ml_dtypes' bfloat16 saves as '<V2'; no other 2-byte ml_dtypes type does.
        "V2" => {
            note = Some(format!(
                "descr {descr:?} is a 2-byte void type: read as bf16 (what ml_dtypes' bfloat16 saves as)"
            ));
            DType::BF16
        }
        // Every 1-byte ml_dtypes type except float8_e5m2 saves as '<V1'.
        "V1" => {
            note = Some(format!(
                "descr {descr:?} is a 1-byte void type that ml_dtypes writes for every fp8 \
                 flavour but e5m2: read as f8_e4m3fn"
            ));
            DType::F8E4M3FN
        }
        "O" => {
            return Err(Error::unsupported(format!(
                "dtype descr {descr:?} is an array of pickled Python objects: not supported \
                 (object arrays are never unpickled)"
            )))
        }
        _ => {
            return Err(Error::unsupported(format!(
                "dtype descr {descr:?} is not supported (bool, integers, f2/f4/f8, c8/c16 and \
                 ml_dtypes' bf16/fp8 are)"
            )))
        }
    };
    Ok((d, order, note))
}

/// The descr we write for a dtype: what `np.save` writes for it (little-endian), except
/// that every fp8 flavour is written `<V1` (ml_dtypes writes `<f1` for e5m2, which
/// `np.load` refuses).
pub fn descr_for(d: DType) -> &'static str {
    match d {
        DType::Bool => "|b1",
        DType::U8 => "|u1",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::F16 => "<f2",
        DType::BF16 => "<V2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::F8E4M3FN | DType::F8E5M2 | DType::F8E4M3FNUZ | DType::F8E5M2FNUZ | DType::F8E8M0 => {
            "<V1"
        }
        DType::C64 => "<c8",
        DType::C128 => "<c16",
        // Not in the writer's capabilities (NumPy has no packed type): never written.
        DType::F4E2M1 | DType::F6E2M3 | DType::F6E3M2 => "|V1",
    }
}

/// Parses the preamble and header dict at the start of `data`.
pub fn parse(data: &[u8], limits: &Limits) -> Result<NpyHeader> {
    if data.len() < 8 {
        return Err(Error::malformed(format!(
            "truncated: {} bytes, the .npy preamble needs 8",
            data.len()
        )));
    }
    if &data[..6] != MAGIC {
        return Err(Error::malformed("not a .npy file: no \\x93NUMPY magic").at_offset(0));
    }
    let version = (data[6], data[7]);
    let (len_size, utf8) = match version {
        (1, 0) => (2usize, false),
        (2, 0) => (4, false),
        (3, 0) => (4, true),
        (a, b) => {
            return Err(Error::unsupported_version(format!(
                ".npy format version {a}.{b} is not supported (1.0, 2.0, 3.0 are)"
            ))
            .at_offset(6))
        }
    };
    let Some(len_bytes) = data.get(8..8 + len_size) else {
        return Err(Error::malformed("truncated: header length").at_offset(8));
    };
    let hlen = if len_size == 2 {
        u16::from_le_bytes([len_bytes[0], len_bytes[1]]) as u64
    } else {
        u32::from_le_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]) as u64
    };
    limits.check_index(hlen).map_err(|e| e.at_offset(8))?;
    let start = 8 + len_size;
    let end = start as u64 + hlen;
    if end > data.len() as u64 {
        return Err(Error::malformed(format!(
            "truncated: header of {hlen} bytes runs past the end ({} bytes)",
            data.len()
        ))
        .at_offset(8));
    }
    let end = end as usize;
    let raw = &data[start..end];
    let text: String = if utf8 {
        std::str::from_utf8(raw)
            .map_err(|e| {
                Error::malformed(format!("header is not UTF-8: {e}"))
                    .at_offset((start + e.valid_up_to()) as u64)
            })?
            .to_string()
    } else {
        // latin1: every byte is a char.
        raw.iter().map(|&b| b as char).collect()
    };
    let dict = DictParser::new(&text, start).parse_dict(limits)?;
    let (dtype, order, ambiguity) = dtype_from_descr(&dict.descr)?;
    Ok(NpyHeader {
        version,
        descr: dict.descr,
        dtype,
        order,
        fortran_order: dict.fortran_order,
        shape: dict.shape,
        data_offset: end,
        ambiguity,
    })
}

#[derive(Debug)]
struct Dict {
    descr: String,
    fortran_order: bool,
    shape: Vec<u64>,
}

/// A strict parser for the one dict literal numpy writes: string keys, values a string,
/// `True`/`False`, or a tuple of non-negative integers; whitespace anywhere; an optional
/// trailing comma. A list `descr` (structured dtype) is reported as unsupported.
struct DictParser<'a> {
    s: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> DictParser<'a> {
    fn new(s: &'a str, base: usize) -> Self {
        DictParser {
            s: s.as_bytes(),
            pos: 0,
            base,
        }
    }
    fn err(&self, msg: impl Into<String>) -> Error {
        Error::malformed(format!("header dict: {}", msg.into()))
            .at_offset((self.base + self.pos) as u64)
    }
    fn ws(&mut self) {
        while self.pos < self.s.len() && matches!(self.s[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.pos).copied()
    }
    fn expect(&mut self, c: u8) -> Result<()> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(format!("expected {:?}", c as char)))
        }
    }
    fn string(&mut self) -> Result<String> {
        let q = match self.peek() {
            Some(q @ (b'\'' | b'"')) => q,
            _ => return Err(self.err("expected a quoted string")),
        };
        self.pos += 1;
        let start = self.pos;
        while self.pos < self.s.len() && self.s[self.pos] != q {
            if self.s[self.pos] == b'\\' {
                return Err(self.err("escapes are not allowed in header strings"));
            }
            self.pos += 1;
        }
        if self.pos >= self.s.len() {
            return Err(self.err("unterminated string"));
        }
        let out = String::from_utf8_lossy(&self.s[start..self.pos]).into_owned();
        self.pos += 1;
        Ok(out)
    }
    fn word(&mut self) -> &'a [u8] {
        self.ws();
        let start = self.pos;
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_alphanumeric() {
            self.pos += 1;
        }
        &self.s[start..self.pos]
    }
    fn boolean(&mut self) -> Result<bool> {
        match self.word() {
            b"True" => Ok(true),
            b"False" => Ok(false),
            _ => Err(self.err("expected True or False")),
        }
    }
    fn tuple(&mut self, limits: &Limits) -> Result<Vec<u64>> {
        self.expect(b'(')?;
        let mut out = Vec::new();
        loop {
            if self.peek() == Some(b')') {
                self.pos += 1;
                break;
            }
            let w = self.word();
            let digits = w.strip_suffix(b"L").unwrap_or(w); // Python 2 longs
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return Err(self.err("shape entries must be non-negative integers"));
            }
            let n = std::str::from_utf8(digits)
                .ok()
                .and_then(|d| d.parse::<u64>().ok())
                .ok_or_else(|| self.err("shape entry does not fit in u64"))?;
            out.push(n);
            limits
                .check_rank(out.len() as u64)
                .map_err(|e| e.at_offset((self.base + self.pos) as u64))?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b')') => {
                    // (3) is an int in Python, not a tuple.
                    if out.len() == 1 {
                        return Err(self.err("a one-entry shape needs a trailing comma: (n,)"));
                    }
                }
                _ => return Err(self.err("expected ',' or ')' in shape")),
            }
        }
        Ok(out)
    }
    fn parse_dict(mut self, limits: &Limits) -> Result<Dict> {
        self.expect(b'{')?;
        let (mut descr, mut fortran, mut shape) = (None, None, None);
        loop {
            if self.peek() == Some(b'}') {
                self.pos += 1;
                break;
            }
            let key = self.string()?;
            self.expect(b':')?;
            match key.as_str() {
                "descr" if descr.is_none() => {
                    if self.peek() == Some(b'[') {
                        return Err(Error::unsupported(
                            "structured (record) dtypes are not supported",
                        )
                        .at_offset((self.base + self.pos) as u64));
                    }
                    descr = Some(self.string()?);
                }
                "fortran_order" if fortran.is_none() => fortran = Some(self.boolean()?),
                "shape" if shape.is_none() => shape = Some(self.tuple(limits)?),
                "descr" | "fortran_order" | "shape" => {
                    return Err(self.err(format!("duplicate key {key:?}")))
                }
                _ => return Err(self.err(format!("unexpected key {key:?}"))),
            }
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {}
                _ => return Err(self.err("expected ',' or '}'")),
            }
        }
        if self.peek().is_some() {
            return Err(self.err("trailing characters after the dict"));
        }
        match (descr, fortran, shape) {
            (Some(descr), Some(fortran_order), Some(shape)) => Ok(Dict {
                descr,
                fortran_order,
                shape,
            }),
            _ => Err(self.err("the dict needs the keys 'descr', 'fortran_order' and 'shape'")),
        }
    }
}

/// The header bytes `np.save` writes for a C-order array of `dtype` and `shape`:
/// preamble, dict with sorted keys and numpy's reprs, the growth padding, spaces and a
/// newline up to a multiple of 64. Version 1.0 when the header fits in a u16, else 2.0.
pub fn write(dtype: DType, shape: &[u64]) -> Vec<u8> {
    let shape_repr = match shape {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape_repr}, }}",
        descr_for(dtype)
    );
    if let Some(first) = shape.first() {
        let digits = first.to_string().len();
        dict.push_str(&" ".repeat(GROWTH_AXIS_MAX_DIGITS.saturating_sub(digits)));
    }
    let hlen = dict.len() + 1; // + '\n'
    let wrap = |len_size: usize| {
        let pad = ARRAY_ALIGN - (MAGIC.len() + 2 + len_size + hlen) % ARRAY_ALIGN;
        let total = hlen + pad;
        (pad, total)
    };
    let (pad, total) = wrap(2);
    let mut out = Vec::with_capacity(total + 12);
    out.extend_from_slice(MAGIC);
    if total <= u16::MAX as usize {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(total as u16).to_le_bytes());
        out.extend_from_slice(dict.as_bytes());
        out.resize(out.len() + pad, b' ');
    } else {
        let (pad, total) = wrap(4);
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(total as u32).to_le_bytes());
        out.extend_from_slice(dict.as_bytes());
        out.resize(out.len() + pad, b' ');
    }
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_we_write() {
        for shape in [vec![], vec![3], vec![2, 3, 0]] {
            let h = write(DType::F32, &shape);
            assert_eq!(h.len() % 64, 0);
            let p = parse(&h, &Limits::default()).unwrap();
            assert_eq!(p.shape, shape);
            assert_eq!(p.dtype, DType::F32);
            assert_eq!(p.data_offset, h.len());
        }
    }

    #[test]
    fn dict_parser_is_strict() {
        let l = Limits::default();
        let ok = |s: &str| DictParser::new(s, 0).parse_dict(&l);
        assert!(ok("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }  \n").is_ok());
        assert!(ok("{\"descr\":\"<f4\",\"fortran_order\":True,\"shape\":(2L,)}").is_ok());
        assert!(ok("{'descr': '<f4', 'fortran_order': False, 'shape': (2), }").is_err());
        assert!(ok("{'descr': '<f4', 'fortran_order': False}").is_err());
        assert!(ok("{'descr': '<f4', 'fortran_order': 0, 'shape': ()}").is_err());
        assert!(
            ok("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}").is_err()
        );
        assert!(ok("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}").is_err());
        assert!(ok("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}").is_err());
        assert!(ok("{'descr': '<f4', 'fortran_order': False, 'shape': ()} x").is_err());
        assert!(ok(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}"
        )
        .is_err());
        let e = ok("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}").unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Unsupported);
    }

    #[test]
    fn descr_map() {
        assert_eq!(dtype_from_descr(">i4").unwrap().1, ByteOrder::Big);
        assert_eq!(dtype_from_descr("<V2").unwrap().0, DType::BF16);
        assert!(dtype_from_descr("<V2").unwrap().2.is_some());
        assert_eq!(dtype_from_descr("<f1").unwrap().0, DType::F8E5M2);
        assert!(dtype_from_descr("<U3").is_err());
        assert!(dtype_from_descr("|O").is_err());
        for d in DType::ALL {
            let (back, _, _) = dtype_from_descr(descr_for(d)).unwrap();
            assert_eq!(back.size(), d.size());
        }
    }
}
