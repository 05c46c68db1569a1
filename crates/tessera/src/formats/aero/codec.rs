//! msgpack (via `rmp`) for AERO's metadata chunks (`meta.json` is written with the
//! shared [`crate::util::pyjson`]).
//!
//! The decoder reads into our own [`Value`] tree with every length checked against the
//! bytes left (each element takes at least one byte, so no allocation can exceed the
//! input size) and the nesting depth capped. The encoder writes the smallest encodings,
//! `str` for strings and `bin` for bytes, as Python's `msgpack.packb(use_bin_type=True)`
//! does, so maps written in the original's key order give the original's bytes.

use rmp::Marker;

use crate::error::{Error, Result};
use crate::metadata::{Map, Value};
use crate::util::bytes::ByteReader;

/// Decodes one msgpack value from the start of `data`; returns it and the bytes used.
/// At most `max_values` values (of any nesting level) are built, so a hostile payload
/// cannot turn a few bytes per element into an unbounded tree.
pub fn decode(data: &[u8], max_depth: usize, max_values: u64) -> Result<(Value, usize)> {
    let mut d = Decoder::new(data, max_depth, max_values);
    let v = d.value()?;
    Ok((v, d.pos()))
}

/// A bounded msgpack reader: nesting depth and the number of values built are capped,
/// and every length is checked against the bytes left before anything is allocated.
pub struct Decoder<'a> {
    r: ByteReader<'a>,
    depth: usize,
    budget: u64,
}

impl<'a> Decoder<'a> {
    /// A decoder at the start of `data`.
    pub fn new(data: &'a [u8], max_depth: usize, max_values: u64) -> Decoder<'a> {
        Decoder {
            r: ByteReader::new(data),
            depth: max_depth,
            budget: max_values,
        }
    }

    /// Bytes consumed so far.
    pub fn pos(&self) -> usize {
        self.r.pos()
    }

    fn len_checked(&self, n: u64, per: u64, what: &str) -> Result<usize> {
        if n.saturating_mul(per) > self.r.remaining() as u64 {
            return Err(Error::malformed(format!(
                "msgpack {what} of {n} elements is longer than the {} bytes left",
                self.r.remaining()
            ))
            .at_offset(self.r.pos() as u64));
        }
        crate::limits::to_usize(n, what)
    }

    /// Reads a map header; returns its entry count (checked against the bytes left).
    pub fn map_len(&mut self) -> Result<usize> {
        let at = self.r.pos() as u64;
        let n = match Marker::from_u8(self.r.u8("msgpack marker")?) {
            Marker::FixMap(n) => n as u64,
            Marker::Map16 => self.r.u16_be("map16 length")? as u64,
            Marker::Map32 => self.r.u32_be("map32 length")? as u64,
            _ => return Err(Error::malformed("msgpack: expected a map").at_offset(at)),
        };
        self.len_checked(n, 2, "map")
    }

    /// Reads an array header; returns its length (checked against the bytes left).
    pub fn array_len(&mut self) -> Result<usize> {
        let at = self.r.pos() as u64;
        let n = match Marker::from_u8(self.r.u8("msgpack marker")?) {
            Marker::FixArray(n) => n as u64,
            Marker::Array16 => self.r.u16_be("array16 length")? as u64,
            Marker::Array32 => self.r.u32_be("array32 length")? as u64,
            _ => return Err(Error::malformed("msgpack: expected an array").at_offset(at)),
        };
        self.len_checked(n, 1, "array")
    }

    /// Reads a string (a map key).
    pub fn key(&mut self) -> Result<String> {
        let at = self.r.pos() as u64;
        match self.value()? {
            Value::Str(s) => Ok(s),
            _ => Err(Error::malformed("msgpack: map key is not a string").at_offset(at)),
        }
    }

    /// Reads one value built from at most `max_values` values (on top of the overall cap).
    pub fn value_bounded(&mut self, max_values: u64) -> Result<Value> {
        let saved = self.budget;
        let sub = saved.min(max_values);
        self.budget = sub;
        let v = self.value();
        self.budget = saved - (sub - self.budget);
        v
    }

    /// Reads one value.
    pub fn value(&mut self) -> Result<Value> {
        let at = self.r.pos() as u64;
        self.budget = self
            .budget
            .checked_sub(1)
            .ok_or_else(|| Error::limit("msgpack: too many values in one chunk").at_offset(at))?;
        let r = &mut self.r;
        Ok(match Marker::from_u8(r.u8("msgpack marker")?) {
            Marker::FixPos(v) => Value::Int(v as i128),
            Marker::FixNeg(v) => Value::Int(v as i128),
            Marker::Null => Value::Null,
            Marker::True => Value::Bool(true),
            Marker::False => Value::Bool(false),
            Marker::U8 => Value::Int(r.u8("uint8")? as i128),
            Marker::U16 => Value::Int(r.u16_be("uint16")? as i128),
            Marker::U32 => Value::Int(r.u32_be("uint32")? as i128),
            Marker::U64 => Value::Int(r.u64_be("uint64")? as i128),
            Marker::I8 => Value::Int(r.u8("int8")? as i8 as i128),
            Marker::I16 => Value::Int(r.u16_be("int16")? as i16 as i128),
            Marker::I32 => Value::Int(r.i32_be("int32")? as i128),
            Marker::I64 => Value::Int(r.i64_be("int64")? as i128),
            Marker::F32 => Value::Float(f32::from_bits(r.u32_be("float32")?) as f64),
            Marker::F64 => Value::Float(f64::from_bits(r.u64_be("float64")?)),
            Marker::FixStr(n) => Value::Str(string(r, n as u64)?),
            Marker::Str8 => {
                let n = r.u8("str8 length")? as u64;
                Value::Str(string(r, n)?)
            }
            Marker::Str16 => {
                let n = r.u16_be("str16 length")? as u64;
                Value::Str(string(r, n)?)
            }
            Marker::Str32 => {
                let n = r.u32_be("str32 length")? as u64;
                Value::Str(string(r, n)?)
            }
            Marker::Bin8 => {
                let n = r.u8("bin8 length")? as u64;
                Value::Bytes(r.take_u64(n, "bin")?.to_vec())
            }
            Marker::Bin16 => {
                let n = r.u16_be("bin16 length")? as u64;
                Value::Bytes(r.take_u64(n, "bin")?.to_vec())
            }
            Marker::Bin32 => {
                let n = r.u32_be("bin32 length")? as u64;
                Value::Bytes(r.take_u64(n, "bin")?.to_vec())
            }
            m @ (Marker::FixArray(_) | Marker::Array16 | Marker::Array32) => {
                let n = match m {
                    Marker::FixArray(n) => n as u64,
                    Marker::Array16 => r.u16_be("array16 length")? as u64,
                    _ => r.u32_be("array32 length")? as u64,
                };
                let n = self.len_checked(n, 1, "array")?;
                self.nested(|d| {
                    let mut v = Vec::with_capacity(n.min(1024));
                    for _ in 0..n {
                        v.push(d.value()?);
                    }
                    Ok(Value::List(v))
                })?
            }
            m @ (Marker::FixMap(_) | Marker::Map16 | Marker::Map32) => {
                let n = match m {
                    Marker::FixMap(n) => n as u64,
                    Marker::Map16 => r.u16_be("map16 length")? as u64,
                    _ => r.u32_be("map32 length")? as u64,
                };
                let n = self.len_checked(n, 2, "map")?;
                self.nested(|d| {
                    let mut m = Map::new();
                    for _ in 0..n {
                        let at = d.pos() as u64;
                        let k = d.key()?;
                        if m.contains_key(&k) {
                            return Err(Error::malformed(format!(
                                "msgpack: duplicate map key {k:?}"
                            ))
                            .at_offset(at));
                        }
                        let v = d.value()?;
                        m.insert(k, v);
                    }
                    Ok(Value::Map(m))
                })?
            }
            Marker::Reserved => {
                return Err(Error::malformed("msgpack: reserved marker 0xc1").at_offset(at))
            }
            _ => {
                return Err(
                    Error::malformed("msgpack: extension types are not supported").at_offset(at),
                )
            }
        })
    }

    fn nested(&mut self, f: impl FnOnce(&mut Self) -> Result<Value>) -> Result<Value> {
        if self.depth == 0 {
            return Err(Error::limit("msgpack nesting too deep").at_offset(self.pos() as u64));
        }
        self.depth -= 1;
        let v = f(self);
        self.depth += 1;
        v
    }
}

fn string(r: &mut ByteReader<'_>, n: u64) -> Result<String> {
    let at = r.pos() as u64;
    let b = r.take_u64(n, "msgpack str")?;
    String::from_utf8(b.to_vec())
        .map_err(|_| Error::malformed("msgpack: str is not valid UTF-8").at_offset(at))
}

/// Encodes a value as msgpack, appending to `out`.
pub fn encode(v: &Value, out: &mut Vec<u8>) -> Result<()> {
    use rmp::encode as e;
    let too_long = |_| Error::invalid_input("msgpack: value too long");
    match v {
        Value::Null => e::write_nil(out).map_err(|_| Error::invalid_input("msgpack"))?,
        Value::Bool(b) => e::write_bool(out, *b).map_err(|_| Error::invalid_input("msgpack"))?,
        Value::Int(i) => {
            if let Ok(i) = i64::try_from(*i) {
                e::write_sint(out, i).map_err(too_long)?;
            } else if let Ok(u) = u64::try_from(*i) {
                e::write_uint(out, u).map_err(too_long)?;
            } else {
                return Err(Error::invalid_input(format!(
                    "msgpack cannot hold the integer {i}"
                )));
            }
        }
        Value::Float(f) => e::write_f64(out, *f).map_err(too_long)?,
        Value::Str(s) => e::write_str(out, s).map_err(too_long)?,
        Value::Bytes(b) => e::write_bin(out, b).map_err(too_long)?,
        Value::List(l) => {
            e::write_array_len(out, len32(l.len())?).map_err(too_long)?;
            for x in l {
                encode(x, out)?;
            }
        }
        Value::Map(m) => {
            e::write_map_len(out, len32(m.len())?).map_err(too_long)?;
            for (k, x) in m.iter() {
                e::write_str(out, k).map_err(too_long)?;
                encode(x, out)?;
            }
        }
    }
    Ok(())
}

fn len32(n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::invalid_input("msgpack: container too long"))
}

/// A map from `(key, value)` pairs, in order.
pub fn map_of(pairs: Vec<(&str, Value)>) -> Value {
    Value::Map(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msgpack_round_trip_and_bounds() {
        let v = map_of(vec![
            ("a", Value::Int(-200)),
            (
                "b",
                Value::List(vec![Value::Bytes(vec![1, 2]), Value::Float(1.5)]),
            ),
            ("c", Value::Str("x".repeat(40))),
        ]);
        let mut out = Vec::new();
        encode(&v, &mut out).unwrap();
        let (back, used) = decode(&out, 8, 100).unwrap();
        assert!(decode(&out, 8, 5).is_err(), "value budget");
        assert_eq!(back, v);
        assert_eq!(used, out.len());
        // A map32 claiming 4 billion entries in 5 bytes is refused without allocating.
        assert!(decode(&[0xdf, 0xff, 0xff, 0xff, 0xff], 8, 100).is_err());
        // Nesting is bounded.
        assert!(decode(&[0x91; 100], 16, 1000).is_err());
    }
}
