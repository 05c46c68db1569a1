//! Deterministic CBOR (RFC 8949 §4.2.1) for the v2 manifest: a checked decoder into a
//! small value tree, and the encoder the writer uses.
//!
//! Decoding walks the bytes with ciborium's low-level decoder (`ciborium-ll`) and adds
//! what "deterministic" needs and ciborium does not check: every head in its shortest
//! form (compared with the bytes the head took), definite lengths only, no tags, only
//! `false`/`true`/`null` among the simple values, floats in their shortest exact width
//! and NaN only as `f9 7e00`, map keys strictly ascending by their encoded bytes (which
//! also refuses duplicates). Every length is compared with the bytes left before
//! anything is allocated from it; nesting stops at [`MAX_DEPTH`].
//!
//! Encoding is hand-written (a head is one to nine bytes): ciborium's encoder does not
//! promise the shortest float width, and map keys must be sorted by their encoded
//! bytes, which a serde layer does not do.

use ciborium_io::Read as _;
use ciborium_ll::{Decoder, Header};

use crate::error::{Error, Result};

/// Nesting limit, counted from the manifest root (spec §3.1).
pub const MAX_DEPTH: usize = 32;

/// A CBOR value of the subset the spec permits.
#[derive(Debug, Clone, PartialEq)]
pub enum CVal {
    /// Unsigned integer.
    Uint(u64),
    /// Negative integer `-1 - n`.
    Nint(u64),
    /// Byte string.
    Bytes(Vec<u8>),
    /// Text string.
    Text(String),
    /// Array.
    Array(Vec<CVal>),
    /// Map, in file order (ascending by encoded key when decoded).
    Map(Vec<(CVal, CVal)>),
    /// `false` / `true`.
    Bool(bool),
    /// `null`.
    Null,
    /// Float.
    Float(f64),
}

impl CVal {
    /// The text, when this is a text string.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            CVal::Text(s) => Some(s),
            _ => None,
        }
    }
    /// The kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            CVal::Uint(_) | CVal::Nint(_) => "an integer",
            CVal::Bytes(_) => "a byte string",
            CVal::Text(_) => "a text string",
            CVal::Array(_) => "an array",
            CVal::Map(_) => "a map",
            CVal::Bool(_) => "a boolean",
            CVal::Null => "null",
            CVal::Float(_) => "a float",
        }
    }
}

/// Bytes a head with argument `n` takes in shortest form.
fn head_len(n: u64) -> usize {
    match n {
        0..=23 => 1,
        24..=0xff => 2,
        0x100..=0xffff => 3,
        0x1_0000..=0xffff_ffff => 5,
        _ => 9,
    }
}

struct Reader<'a> {
    input: &'a [u8],
    dec: Decoder<&'a [u8]>,
}

fn bad(msg: impl std::fmt::Display) -> Error {
    Error::malformed(format!("manifest CBOR: {msg}"))
}

impl<'a> Reader<'a> {
    fn pos(&mut self) -> usize {
        self.dec.offset()
    }
    fn remaining(&mut self) -> usize {
        self.input.len().saturating_sub(self.pos())
    }
    fn check_len(&mut self, n: usize, min: usize, at: usize) -> Result<usize> {
        if n > self.remaining() / min {
            return Err(bad(format!(
                "length {n} at byte {at} exceeds the bytes left"
            )));
        }
        Ok(n)
    }

    fn value(&mut self, depth: usize) -> Result<CVal> {
        if depth > MAX_DEPTH {
            return Err(bad(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        let at = self.pos();
        let h = self.dec.pull().map_err(|_| {
            bad(format!(
                "truncated or invalid item at byte {at} (an indefinite length or reserved head?)"
            ))
        })?;
        let took = self.pos() - at;
        let not_shortest = |n: u64| -> Result<()> {
            if head_len(n) != took {
                return Err(bad(format!(
                    "head at byte {at} is not in shortest form (not deterministic CBOR)"
                )));
            }
            Ok(())
        };
        let definite = |n: Option<usize>| -> Result<usize> {
            n.ok_or_else(|| bad(format!("indefinite length at byte {at}")))
        };
        Ok(match h {
            Header::Positive(n) => {
                not_shortest(n)?;
                CVal::Uint(n)
            }
            Header::Negative(n) => {
                not_shortest(n)?;
                CVal::Nint(n)
            }
            Header::Float(x) => {
                let raw = self.input.get(at..at + took).unwrap_or_default();
                check_float(x, raw).map_err(|m| bad(format!("{m} at byte {at}")))?;
                CVal::Float(x)
            }
            Header::Simple(20) => CVal::Bool(false),
            Header::Simple(21) => CVal::Bool(true),
            Header::Simple(22) => CVal::Null,
            Header::Simple(s) => return Err(bad(format!("simple value {s} at byte {at}"))),
            Header::Tag(_) => {
                return Err(bad(format!("tag at byte {at} (tags are not permitted)")))
            }
            Header::Break => return Err(bad(format!("break at byte {at}"))),
            Header::Bytes(n) | Header::Text(n) => {
                let n = definite(n)?;
                not_shortest(n as u64)?;
                let n = self.check_len(n, 1, at)?;
                let mut buf = vec![0u8; n];
                self.dec
                    .read_exact(&mut buf)
                    .map_err(|_| bad(format!("string at byte {at} is truncated")))?;
                if matches!(h, Header::Bytes(_)) {
                    CVal::Bytes(buf)
                } else {
                    CVal::Text(
                        String::from_utf8(buf)
                            .map_err(|_| bad(format!("text at byte {at} is not UTF-8")))?,
                    )
                }
            }
            Header::Array(n) => {
                let n = definite(n)?;
                not_shortest(n as u64)?;
                let n = self.check_len(n, 1, at)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(depth + 1)?);
                }
                CVal::Array(items)
            }
            Header::Map(n) => {
                let n = definite(n)?;
                not_shortest(n as u64)?;
                let n = self.check_len(n, 2, at)?;
                let mut entries = Vec::with_capacity(n);
                let mut prev: Option<(usize, usize)> = None;
                for _ in 0..n {
                    let ks = self.pos();
                    let key = self.value(depth + 1)?;
                    let ke = self.pos();
                    if let Some((ps, pe)) = prev {
                        match self.input[ps..pe].cmp(&self.input[ks..ke]) {
                            std::cmp::Ordering::Less => {}
                            std::cmp::Ordering::Equal => {
                                return Err(bad(format!("duplicate map key at byte {ks}")))
                            }
                            std::cmp::Ordering::Greater => {
                                return Err(bad(format!(
                                    "map keys not in ascending order at byte {ks} (not deterministic CBOR)"
                                )))
                            }
                        }
                    }
                    prev = Some((ks, ke));
                    let v = self.value(depth + 1)?;
                    entries.push((key, v));
                }
                CVal::Map(entries)
            }
        })
    }
}

/// A float must be in the shortest width that holds it exactly; NaN only as `f9 7e00`.
fn check_float(x: f64, raw: &[u8]) -> std::result::Result<(), &'static str> {
    if x.is_nan() {
        return if raw == [0xf9, 0x7e, 0x00] {
            Ok(())
        } else {
            Err("NaN other than f9 7e00")
        };
    }
    if raw.len() != float_width(x) + 1 {
        return Err("float not in its shortest width");
    }
    Ok(())
}

/// The payload width (2, 4 or 8 bytes) of the shortest exact encoding of `x` (not NaN).
fn float_width(x: f64) -> usize {
    let h = half::f16::from_f64(x);
    if h.to_f64().to_bits() == x.to_bits() {
        2
    } else if ((x as f32) as f64).to_bits() == x.to_bits() {
        4
    } else {
        8
    }
}

/// Decodes one deterministic-CBOR item that must fill `input` exactly.
pub fn decode(input: &[u8]) -> Result<CVal> {
    let mut r = Reader {
        input,
        dec: Decoder::from(input),
    };
    let v = r.value(0)?;
    let end = r.pos();
    if end != input.len() {
        return Err(bad(format!(
            "{} trailing bytes after the manifest map",
            input.len() - end
        )));
    }
    Ok(v)
}

fn head(major: u8, n: u64, out: &mut Vec<u8>) {
    let m = major << 5;
    match n {
        0..=23 => out.push(m | n as u8),
        24..=0xff => out.extend_from_slice(&[m | 24, n as u8]),
        0x100..=0xffff => {
            out.push(m | 25);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(m | 26);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        _ => {
            out.push(m | 27);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

/// Encodes `v` deterministically: shortest heads and floats, map keys sorted by their
/// encoded bytes. Duplicate keys are an error.
pub fn encode(v: &CVal, out: &mut Vec<u8>) -> Result<()> {
    match v {
        CVal::Uint(n) => head(0, *n, out),
        CVal::Nint(n) => head(1, *n, out),
        CVal::Bytes(b) => {
            head(2, b.len() as u64, out);
            out.extend_from_slice(b);
        }
        CVal::Text(s) => {
            head(3, s.len() as u64, out);
            out.extend_from_slice(s.as_bytes());
        }
        CVal::Array(items) => {
            head(4, items.len() as u64, out);
            for i in items {
                encode(i, out)?;
            }
        }
        CVal::Map(entries) => {
            let mut enc = Vec::with_capacity(entries.len());
            for (k, val) in entries {
                let mut kb = Vec::new();
                encode(k, &mut kb)?;
                enc.push((kb, val));
            }
            enc.sort_by(|a, b| a.0.cmp(&b.0));
            if let Some(w) = enc.windows(2).find(|w| w[0].0 == w[1].0) {
                return Err(Error::invalid_input(format!(
                    "duplicate map key {:?}",
                    String::from_utf8_lossy(&w[0].0)
                )));
            }
            head(5, enc.len() as u64, out);
            for (kb, val) in enc {
                out.extend_from_slice(&kb);
                encode(val, out)?;
            }
        }
        CVal::Bool(b) => out.push(if *b { 0xf5 } else { 0xf4 }),
        CVal::Null => out.push(0xf6),
        CVal::Float(x) => {
            if x.is_nan() {
                out.extend_from_slice(&[0xf9, 0x7e, 0x00]);
            } else {
                match float_width(*x) {
                    2 => {
                        out.push(0xf9);
                        out.extend_from_slice(&half::f16::from_f64(*x).to_bits().to_be_bytes());
                    }
                    4 => {
                        out.push(0xfa);
                        out.extend_from_slice(&(*x as f32).to_bits().to_be_bytes());
                    }
                    _ => {
                        out.push(0xfb);
                        out.extend_from_slice(&x.to_bits().to_be_bytes());
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: &CVal) -> Vec<u8> {
        let mut out = Vec::new();
        encode(v, &mut out).unwrap();
        out
    }

    #[test]
    fn round_trips_and_sorts_keys() {
        let v = CVal::Map(vec![
            (CVal::Text("bb".into()), CVal::Float(1.5)),
            (CVal::Text("a".into()), CVal::Nint(9)),
            (CVal::Text("c".into()), CVal::Float(0.1)),
        ]);
        let b = enc(&v);
        // "a" (61 61) sorts before "bb" (62 62 62): shorter encodings first.
        assert_eq!(&b[..4], &[0xa3, 0x61, b'a', 0x29]);
        let back = decode(&b).unwrap();
        let CVal::Map(m) = back else { panic!() };
        assert_eq!(m[0].0, CVal::Text("a".into()));
        // "c" (61 63) before "bb" (62 62 62): a shorter key's head is smaller.
        assert_eq!(m[1], (CVal::Text("c".into()), CVal::Float(0.1)));
        assert_eq!(m[2], (CVal::Text("bb".into()), CVal::Float(1.5)));
    }

    #[test]
    fn refuses_non_deterministic_input() {
        // 1 as a two-byte head.
        assert!(decode(&[0x18, 0x01]).is_err());
        // Unsorted and duplicate keys.
        assert!(decode(&[0xa2, 0x61, b'b', 0x01, 0x61, b'a', 0x02]).is_err());
        assert!(decode(&[0xa2, 0x61, b'a', 0x01, 0x61, b'a', 0x02]).is_err());
        // Indefinite array, a tag, undefined, a float wider than needed, a NaN payload.
        assert!(decode(&[0x9f, 0xff]).is_err());
        assert!(decode(&[0xc1, 0x01]).is_err());
        assert!(decode(&[0xf7]).is_err());
        assert!(decode(&[0xfa, 0x3f, 0xc0, 0x00, 0x00]).is_err());
        assert!(decode(&[0xf9, 0x7e, 0x01]).is_err());
        assert!(decode(&[0xf9, 0x7e, 0x00]).is_ok());
        // A length past the end, trailing bytes.
        assert!(decode(&[0x5a, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(decode(&[0x01, 0x01]).is_err());
        // Depth.
        let mut deep = vec![0x81; 40];
        deep.push(0x01);
        assert!(decode(&deep).is_err());
    }
}
