//! The v2 container's pieces: constants, the footer, and the manifest schema (objects,
//! parts, shards) read out of a [`CVal`] tree with every spec §3 rule checked.

use super::cbor::CVal;
use crate::dtype::DType;
use crate::error::{Error, Result};

/// `\x89ZT2\r\n\x1a\n`, at byte 0 and at the end of the footer.
pub const MAGIC: &[u8; 8] = b"\x89ZT2\r\n\x1a\n";
/// Footer size.
pub const FOOTER_LEN: u64 = 40;
/// Every blob offset is a multiple of this, and at least this.
pub const ALIGN_FLOOR: u64 = 4096;
/// Canonical placement (spec §6.3).
pub const ALIGN_CANONICAL: u64 = 65536;
/// The footer `version` this reader knows.
pub const VERSION: u32 = 2;
/// The manifest cap (spec §3.1).
pub const MAX_MANIFEST: u64 = 1 << 30;
/// Names: at most this many bytes (spec §3.5).
pub const MAX_NAME: usize = 1024;
/// Rank limit (spec §3.3).
pub const MAX_RANK: usize = 64;
/// Shard names: at most this many bytes (spec §7.1).
pub const MAX_SHARD_NAME: usize = 64;

/// The last 40 bytes.
#[derive(Debug, Clone, Copy)]
pub struct Footer {
    /// Absolute offset of the manifest blob (0: none).
    pub manifest_offset: u64,
    /// Its length (0: a data shard).
    pub manifest_length: u64,
    /// XXH3-64 of the manifest bytes.
    pub manifest_hash: u64,
    /// Footer version (2).
    pub version: u32,
}

fn le64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Parses the footer (magic and version checked; bounds are the caller's).
pub fn parse_footer(b: &[u8]) -> Result<Footer> {
    if b.len() != FOOTER_LEN as usize {
        return Err(Error::malformed("footer: not 40 bytes"));
    }
    if &b[32..40] != MAGIC {
        return Err(Error::malformed(
            "footer magic missing: the file is truncated, or an append did not finish",
        ));
    }
    let version = u32::from_le_bytes([b[24], b[25], b[26], b[27]]);
    if version != VERSION {
        return Err(Error::unsupported_version(format!(
            "zTensor footer version {version} (this reader knows version 2)"
        )));
    }
    Ok(Footer {
        manifest_offset: le64(b, 0),
        manifest_length: le64(b, 8),
        manifest_hash: le64(b, 16),
        version,
    })
}

/// The 12 storage types (spec §4.1).
pub fn dtype_from_name(s: &str) -> Option<DType> {
    Some(match s {
        "f64" => DType::F64,
        "f32" => DType::F32,
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        "i64" => DType::I64,
        "i32" => DType::I32,
        "i16" => DType::I16,
        "i8" => DType::I8,
        "u64" => DType::U64,
        "u32" => DType::U32,
        "u16" => DType::U16,
        "u8" => DType::U8,
        _ => return None,
    })
}

/// A tessera dtype as v2 `(dtype, type)`: storage type and logical type.
pub fn storage_of(d: DType) -> (&'static str, Option<&'static str>) {
    match d {
        DType::F64 => ("f64", None),
        DType::F32 => ("f32", None),
        DType::F16 => ("f16", None),
        DType::BF16 => ("bf16", None),
        DType::I64 => ("i64", None),
        DType::I32 => ("i32", None),
        DType::I16 => ("i16", None),
        DType::I8 => ("i8", None),
        DType::U64 => ("u64", None),
        DType::U32 => ("u32", None),
        DType::U16 => ("u16", None),
        DType::U8 => ("u8", None),
        DType::Bool => ("u8", Some("bool")),
        DType::F8E4M3FN => ("u8", Some("f8_e4m3fn")),
        DType::F8E5M2 => ("u8", Some("f8_e5m2")),
        DType::F8E4M3FNUZ => ("u8", Some("f8_e4m3fnuz")),
        DType::F8E5M2FNUZ => ("u8", Some("f8_e5m2fnuz")),
        DType::F8E8M0 => ("u8", Some("f8_e8m0")),
        DType::C64 => ("f32", Some("complex64")),
        DType::C128 => ("f64", Some("complex128")),
        DType::F4E2M1 => ("u8", Some("f4_e2m1")),
        // Not registered in Appendix A, so not in the writer's capabilities: never
        // written; named as the pattern would name them.
        DType::F6E2M3 => ("u8", Some("f6_e2m3")),
        DType::F6E3M2 => ("u8", Some("f6_e3m2")),
    }
}

/// Registered logical types (spec Appendix A): their required storage type, and the
/// tessera dtype when there is one.
pub fn logical_type(t: &str) -> Option<(DType, Option<DType>)> {
    Some(match t {
        "bool" => (DType::U8, Some(DType::Bool)),
        "f8_e4m3fn" => (DType::U8, Some(DType::F8E4M3FN)),
        "f8_e5m2" => (DType::U8, Some(DType::F8E5M2)),
        "f8_e4m3fnuz" => (DType::U8, Some(DType::F8E4M3FNUZ)),
        "f8_e5m2fnuz" => (DType::U8, Some(DType::F8E5M2FNUZ)),
        "f8_e8m0" => (DType::U8, Some(DType::F8E8M0)),
        "f4_e2m1" => (DType::U8, Some(DType::F4E2M1)),
        "complex64" => (DType::F32, Some(DType::C64)),
        "complex128" => (DType::F64, Some(DType::C128)),
        _ => return None,
    })
}

/// A part's `digest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Digest {
    /// `xxh3:<16 hex>`, XXH3-64.
    Xxh3(u64),
    /// `sha256:<64 hex>`.
    Sha256([u8; 32]),
    /// Another algorithm (well-formed, not checked).
    Other(String),
}

impl Digest {
    /// Parses `"<algorithm>:<lowercase hex>"` (spec §3.4).
    pub fn parse(d: &str) -> Result<Digest> {
        let bad = || Error::malformed(format!("digest {d:?} is not \"algorithm:lowercase-hex\""));
        let (algo, hex) = d.split_once(':').ok_or_else(bad)?;
        let ok = !algo.is_empty()
            && !hex.is_empty()
            && algo
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !ok {
            return Err(bad());
        }
        match algo {
            "xxh3" if hex.len() == 16 => u64::from_str_radix(hex, 16)
                .map(Digest::Xxh3)
                .map_err(|_| bad()),
            "sha256" if hex.len() == 64 => {
                let v = crate::util::unhex(hex).ok_or_else(bad)?;
                let mut w = [0u8; 32];
                w.copy_from_slice(&v);
                Ok(Digest::Sha256(w))
            }
            "xxh3" | "sha256" => Err(Error::malformed(format!(
                "digest {d:?}: wrong length for {algo}"
            ))),
            other => Ok(Digest::Other(other.to_string())),
        }
    }
    /// The algorithm name.
    pub fn algorithm(&self) -> &str {
        match self {
            Digest::Xxh3(_) => "xxh3",
            Digest::Sha256(_) => "sha256",
            Digest::Other(a) => a,
        }
    }
    /// Checks `bytes`; `None` for an algorithm we do not compute, else `(want, got)`
    /// as text when they differ.
    pub fn check(&self, bytes: &[u8]) -> Option<std::result::Result<(), (String, String)>> {
        match self {
            Digest::Xxh3(want) => {
                let got = xxhash_rust::xxh3::xxh3_64(bytes);
                Some(if got == *want {
                    Ok(())
                } else {
                    Err((format!("{want:016x}"), format!("{got:016x}")))
                })
            }
            Digest::Sha256(want) => {
                let got = crate::util::sha256(bytes);
                Some(if got == *want {
                    Ok(())
                } else {
                    Err((crate::util::hex(want), crate::util::hex(&got)))
                })
            }
            Digest::Other(_) => None,
        }
    }
}

/// One part of an object (spec §3.4).
#[derive(Debug, Clone)]
pub struct PartRef {
    /// Name (part role or object name).
    pub name: String,
    /// Storage type.
    pub dtype: DType,
    /// Logical type (`type`).
    pub logical: Option<String>,
    /// Blob offset.
    pub offset: u64,
    /// Blob length (stored bytes).
    pub length: u64,
    /// Shard name; `None`: this file.
    pub shard: Option<String>,
    /// Encoding profile; `None`: raw.
    pub encoding: Option<String>,
    /// Decoded length (with `encoding`).
    pub decoded_length: Option<u64>,
    /// Digest over the decoded bytes.
    pub digest: Option<Digest>,
    /// The digest text as stored.
    pub digest_text: Option<String>,
}

impl PartRef {
    /// Decoded size: the blob length when raw, else `decoded_length`.
    pub fn decoded_size(&self) -> u64 {
        self.decoded_length.unwrap_or(self.length)
    }
}

/// One object (spec §3.3).
#[derive(Debug, Clone)]
pub struct ObjectRef {
    /// Name (part role or object name).
    pub name: String,
    /// Logical shape.
    pub shape: Vec<u64>,
    /// Layout id.
    pub layout: String,
    /// Attributes.
    pub attributes: Option<Vec<(String, CVal)>>,
    /// In name order (the manifest's key order).
    pub parts: Vec<PartRef>,
}

/// The manifest (spec §3.2).
#[derive(Debug, Clone, Default)]
pub struct Manifest {
    /// Attributes.
    pub attributes: Option<Vec<(String, CVal)>>,
    /// Shard name → (size, digest text).
    pub shards: Vec<(String, u64, String)>,
    /// Objects, in manifest order.
    pub objects: Vec<ObjectRef>,
}

/// Object, part and attribute names (spec §3.5).
pub fn check_name(s: &str, what: &str) -> Result<()> {
    if s.is_empty() || s.len() > MAX_NAME || s.contains('\0') {
        return Err(Error::malformed(format!(
            "{what} {s:?}: names are 1..=1024 bytes without NUL"
        )));
    }
    Ok(())
}

/// Shard names (spec §7.1).
pub fn check_shard_name(s: &str) -> Result<()> {
    let ok = !s.is_empty()
        && s.len() <= MAX_SHARD_NAME
        && !s.starts_with('.')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !ok {
        return Err(Error::malformed(format!(
            "shard name {s:?}: 1..=64 bytes of A-Z a-z 0-9 . _ -, not starting with '.'"
        )));
    }
    Ok(())
}

fn text<'v>(v: &'v CVal, what: &str) -> Result<&'v str> {
    v.as_text()
        .ok_or_else(|| Error::malformed(format!("{what} must be text, got {}", v.kind())))
}

fn uint(v: &CVal, what: &str) -> Result<u64> {
    match v {
        CVal::Uint(n) => Ok(*n),
        other => Err(Error::malformed(format!(
            "{what} must be an unsigned integer, got {}",
            other.kind()
        ))),
    }
}

fn map<'v>(v: &'v CVal, what: &str) -> Result<&'v [(CVal, CVal)]> {
    match v {
        CVal::Map(m) => Ok(m),
        other => Err(Error::malformed(format!(
            "{what} must be a map, got {}",
            other.kind()
        ))),
    }
}

/// An `attributes` map: text keys obeying the name rules; values anything untagged
/// (the decoder refused tags).
fn attributes(v: &CVal, what: &str) -> Result<Vec<(String, CVal)>> {
    let m = map(v, what)?;
    let mut out = Vec::with_capacity(m.len());
    for (k, val) in m {
        let k = text(k, &format!("{what} key"))?;
        check_name(k, "attribute key")?;
        out.push((k.to_string(), val.clone()));
    }
    Ok(out)
}

fn part(name: &str, v: &CVal) -> Result<PartRef> {
    let m = map(v, "part")?;
    let mut p = PartRef {
        name: name.to_string(),
        dtype: DType::U8,
        logical: None,
        offset: 0,
        length: 0,
        shard: None,
        encoding: None,
        decoded_length: None,
        digest: None,
        digest_text: None,
    };
    let (mut dtype, mut blob) = (false, false);
    for (k, val) in m {
        match k.as_text() {
            Some("dtype") => {
                let d = text(val, "dtype")?;
                p.dtype = dtype_from_name(d).ok_or_else(|| {
                    Error::malformed(format!(
                        "unknown dtype {d:?} (not one of the 12 storage types)"
                    ))
                })?;
                dtype = true;
            }
            Some("type") => p.logical = Some(text(val, "type")?.to_string()),
            Some("blob") => {
                let CVal::Array(a) = val else {
                    return Err(Error::malformed("blob must be an array [offset, length]"));
                };
                let [o, l] = a.as_slice() else {
                    return Err(Error::malformed(format!(
                        "blob has {} elements, not 2",
                        a.len()
                    )));
                };
                p.offset = uint(o, "blob offset")?;
                p.length = uint(l, "blob length")?;
                blob = true;
            }
            Some("shard") => {
                let s = text(val, "shard")?;
                check_shard_name(s)?;
                p.shard = Some(s.to_string());
            }
            Some("encoding") => p.encoding = Some(text(val, "encoding")?.to_string()),
            Some("decoded_length") => p.decoded_length = Some(uint(val, "decoded_length")?),
            Some("digest") => {
                let d = text(val, "digest")?;
                p.digest = Some(Digest::parse(d)?);
                p.digest_text = Some(d.to_string());
            }
            _ => {}
        }
    }
    if !dtype || !blob {
        return Err(Error::malformed("part lacks \"dtype\" or \"blob\""));
    }
    if p.encoding.is_some() != p.decoded_length.is_some() {
        return Err(Error::malformed(
            "\"decoded_length\" is required exactly when \"encoding\" is present",
        ));
    }
    if let Some(t) = &p.logical {
        if let Some((need, _)) = logical_type(t) {
            if need != p.dtype {
                return Err(Error::malformed(format!(
                    "logical type {t:?} requires dtype {}, the part says {}",
                    storage_of(need).0,
                    storage_of(p.dtype).0
                )));
            }
        }
    }
    Ok(p)
}

fn object(name: &str, v: &CVal, max_rank: usize) -> Result<ObjectRef> {
    let m = map(v, "object")?;
    let mut o = ObjectRef {
        name: name.to_string(),
        shape: Vec::new(),
        layout: String::new(),
        attributes: None,
        parts: Vec::new(),
    };
    let (mut shape, mut layout, mut parts) = (false, false, false);
    for (k, val) in m {
        match k.as_text() {
            Some("shape") => {
                let CVal::Array(a) = val else {
                    return Err(Error::malformed("shape must be an array"));
                };
                if a.len() > max_rank.min(MAX_RANK) {
                    return Err(Error::malformed(format!(
                        "rank {} exceeds {}",
                        a.len(),
                        max_rank.min(MAX_RANK)
                    )));
                }
                o.shape = a
                    .iter()
                    .map(|d| uint(d, "shape dimension"))
                    .collect::<Result<_>>()?;
                o.shape
                    .iter()
                    .try_fold(1u64, |acc, &d| acc.checked_mul(d))
                    .ok_or_else(|| Error::malformed("shape product overflows u64"))?;
                shape = true;
            }
            Some("layout") => {
                o.layout = text(val, "layout")?.to_string();
                layout = true;
            }
            Some("attributes") => o.attributes = Some(attributes(val, "object attributes")?),
            Some("parts") => {
                for (pk, pv) in map(val, "parts")? {
                    let pn = text(pk, "part name")?;
                    check_name(pn, "part name")?;
                    o.parts
                        .push(part(pn, pv).map_err(|e| e.at_subject(format!("part {pn:?}")))?);
                }
                parts = true;
            }
            _ => {}
        }
    }
    if !shape || !layout || !parts {
        return Err(Error::malformed(
            "object lacks \"shape\", \"layout\" or \"parts\"",
        ));
    }
    if o.parts.is_empty() {
        return Err(Error::malformed("object has no parts"));
    }
    Ok(o)
}

/// Reads the manifest schema out of the decoded root.
pub fn manifest(root: &CVal, max_entries: u64, max_rank: usize) -> Result<Manifest> {
    let m = map(root, "manifest root")?;
    let mut out = Manifest::default();
    let mut objects = false;
    for (k, v) in m {
        match k.as_text() {
            Some("attributes") => out.attributes = Some(attributes(v, "attributes")?),
            Some("shards") => {
                for (sk, sv) in map(v, "shards")? {
                    let name = text(sk, "shard table key")?;
                    check_shard_name(name)?;
                    let (mut size, mut digest) = (None, None);
                    for (fk, fv) in map(sv, "shard entry")? {
                        match fk.as_text() {
                            Some("size") => size = Some(uint(fv, "shard size")?),
                            Some("digest") => {
                                let d = text(fv, "shard digest")?;
                                Digest::parse(d)?;
                                digest = Some(d.to_string());
                            }
                            _ => {}
                        }
                    }
                    let (Some(size), Some(digest)) = (size, digest) else {
                        return Err(Error::malformed(format!(
                            "shard {name:?} lacks \"size\" or \"digest\""
                        )));
                    };
                    out.shards.push((name.to_string(), size, digest));
                }
            }
            Some("objects") => {
                let om = map(v, "objects")?;
                if om.len() as u64 > max_entries {
                    return Err(Error::limit(format!(
                        "{} objects exceed the limit of {max_entries}",
                        om.len()
                    )));
                }
                out.objects.reserve(om.len());
                for (ok, ov) in om {
                    let name = text(ok, "object name")?;
                    check_name(name, "object name")?;
                    out.objects.push(
                        object(name, ov, max_rank)
                            .map_err(|e| e.at_subject(format!("tensor {name:?}")))?,
                    );
                }
                objects = true;
            }
            _ => {}
        }
    }
    if !objects {
        return Err(Error::malformed("manifest has no \"objects\" map"));
    }
    for o in &out.objects {
        for p in &o.parts {
            if let Some(s) = &p.shard {
                if !out.shards.iter().any(|(n, _, _)| n == s) {
                    return Err(Error::malformed(format!(
                        "tensor {:?} part {:?}: shard {s:?} is not in the shard table",
                        o.name, p.name
                    )));
                }
            }
        }
    }
    Ok(out)
}
