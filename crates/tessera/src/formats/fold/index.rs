//! The index: chunk entries as the JSON index and the chunk headers describe them
//! (spec §4, §6 steps 2–3).

use super::ecc;
use super::raw::{
    ctype_str, ChunkHeader, FileHeader, CHUNK_HEADER_LEN, FLAG_COMP_NONE, FLAG_COMP_ZSTD,
    HEADER_LEN, MAX_CHUNK_SIZE,
};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::metadata::{Map, Value};
use crate::source::SourceRef;

/// A stored hash string from the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashField {
    /// Plain or `sha256:`-prefixed SHA-256.
    Sha256([u8; 32]),
    /// Something we cannot check (`hmac-sha256:…` needs pyfolds' integrity key).
    Other(String),
}

impl HashField {
    pub(super) fn parse(s: &str) -> Option<HashField> {
        let hex = s.strip_prefix("sha256:").unwrap_or(s);
        if let Some(b) = crate::util::unhex(hex).filter(|b| b.len() == 32) {
            let mut a = [0u8; 32];
            a.copy_from_slice(&b);
            return Some(HashField::Sha256(a));
        }
        if s.contains(':') {
            return Some(HashField::Other(s.to_string()));
        }
        None
    }
}

/// How a chunk's parity can be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EccState {
    /// No parity.
    None,
    /// Block-wise `rs(N)`.
    Rs(u8),
    /// Present but unusable (unknown algorithm, wrong length); the reason.
    Unusable(String),
}

/// One chunk as the index and its header describe it (they must agree).
#[derive(Debug, Clone)]
pub struct Entry {
    /// Name.
    pub name: String,
    /// The chunk header as the index entry gives it.
    pub header: ChunkHeader,
    /// Set when the stored chunk header says otherwise (what differs).
    pub header_mismatch: Option<String>,
    /// Absolute offset of the chunk header.
    pub offset: u64,
    /// The index `sha256`.
    pub sha256: HashField,
    /// The index `ecc_algo`.
    pub ecc_algo: String,
    /// Whether the parity is usable.
    pub ecc: EccState,
}

impl Entry {
    /// Absolute offset of the stored payload.
    pub fn payload_off(&self) -> u64 {
        self.offset + CHUNK_HEADER_LEN
    }
    /// `ctype` as text.
    pub fn ctype(&self) -> String {
        ctype_str(&self.header.ctype)
    }
    pub(super) fn subject(&self) -> String {
        format!("chunk {:?}", self.name)
    }
}

fn field_u64(o: &Map, key: &str, name: &str) -> Result<u64> {
    let v = o
        .get(key)
        .and_then(Value::as_int)
        .and_then(|i| u64::try_from(i).ok());
    v.ok_or_else(|| {
        Error::malformed(format!(
            "index entry {name:?}: {key:?} missing or not an unsigned integer"
        ))
    })
}

pub(super) fn parse_entry(
    src: SourceRef<'_>,
    header: &FileHeader,
    e: &Value,
    i: usize,
    limits: &Limits,
) -> Result<Entry> {
    let o = e
        .as_map()
        .ok_or_else(|| Error::malformed(format!("index chunk entry {i} is not an object")))?;
    let name = o
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::malformed(format!("index chunk entry {i} has no name")))?
        .to_string();
    limits.check_name(name.len() as u64)?;
    let subject = format!("chunk {name:?}");
    let ctype_s = o
        .get("ctype")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::malformed("no ctype").at_subject(subject.clone()))?;
    let offset = field_u64(o, "offset", &name)?;
    let comp_len = field_u64(o, "comp_len", &name)?;
    let uncomp_len = field_u64(o, "uncomp_len", &name)?;
    let flags = field_u64(o, "flags", &name)?;
    let crc = field_u64(o, "crc32c", &name)?;
    let ecc_len = field_u64(o, "ecc_len", &name)?;
    if let Some(h) = o.get("header_len") {
        if h.as_int() != Some(i128::from(CHUNK_HEADER_LEN)) {
            return Err(Error::malformed(format!("header_len {h}, must be 32")).at_subject(subject));
        }
    }
    let sha_s = o
        .get("sha256")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::malformed("no sha256").at_subject(subject.clone()))?;
    let sha256 = HashField::parse(sha_s).ok_or_else(|| {
        Error::malformed(format!("sha256 {sha_s:?} is not a SHA-256 hex digest"))
            .at_subject(subject.clone())
    })?;
    let ecc_algo = o
        .get("ecc_algo")
        .and_then(Value::as_str)
        .unwrap_or("none")
        .to_string();
    // §6.2 anti-DoS limits.
    for (what, v) in [
        ("comp_len", comp_len),
        ("uncomp_len", uncomp_len),
        ("ecc_len", ecc_len),
    ] {
        if v > MAX_CHUNK_SIZE {
            return Err(Error::limit(format!(
                "{what} {v} exceeds MAX_CHUNK_SIZE ({MAX_CHUNK_SIZE})"
            ))
            .at_subject(subject));
        }
    }
    limits
        .check_decoded(uncomp_len)
        .map_err(|e| e.at_subject(subject.clone()))?;
    // §6.3 bounds: the chunk lies between the header and the index.
    let end = offset
        .checked_add(CHUNK_HEADER_LEN)
        .and_then(|x| x.checked_add(comp_len))
        .and_then(|x| x.checked_add(ecc_len));
    match end {
        Some(end) if offset >= HEADER_LEN && end <= header.index_off && end <= src.len() => {}
        _ => {
            return Err(Error::malformed(format!(
                "chunk at {offset} (32 + {comp_len} + {ecc_len} bytes) is not inside the chunk region 28..{}",
                header.index_off
            ))
            .at_subject(subject)
            .at_offset(offset))
        }
    }
    let hb = src.slice(offset, CHUNK_HEADER_LEN, "chunk header")?;
    let stored = ChunkHeader::parse(&hb)?;
    // The index entry is what we use (its bounds were checked above, and its sha256 is
    // covered by chunk_hashes and the manifest); the 32-byte chunk header, which no
    // checksum covers, must repeat it. A disagreement is reported by verify and
    // rewritten by repair when the payload proves the index right.
    let u32_field = |what: &str, v: u64| {
        u32::try_from(v).map_err(|_| {
            Error::malformed(format!("{what} {v} does not fit in 32 bits"))
                .at_subject(subject.clone())
        })
    };
    let ctype: [u8; 4] = ctype_s.as_bytes().try_into().map_err(|_| {
        Error::malformed(format!("ctype {ctype_s:?} is not 4 bytes")).at_subject(subject.clone())
    })?;
    let ch = ChunkHeader {
        ctype,
        flags: u32_field("flags", flags)?,
        uncomp_len,
        comp_len,
        crc32c: u32_field("crc32c", crc)?,
        ecc_len: u32_field("ecc_len", ecc_len)?,
    };
    let mut differ = Vec::new();
    if stored.ctype != ch.ctype {
        differ.push(format!(
            "ctype {} (index {ctype_s})",
            ctype_str(&stored.ctype)
        ));
    }
    for (what, f, x) in [
        ("flags", u64::from(stored.flags), flags),
        ("uncomp_len", stored.uncomp_len, uncomp_len),
        ("comp_len", stored.comp_len, comp_len),
        ("crc32c", u64::from(stored.crc32c), crc),
        ("ecc_len", u64::from(stored.ecc_len), ecc_len),
    ] {
        if f != x {
            differ.push(format!("{what} {f} (index {x})"));
        }
    }
    let header_mismatch = (!differ.is_empty()).then(|| {
        format!(
            "the chunk header disagrees with the index: {}",
            differ.join(", ")
        )
    });
    if ch.flags != FLAG_COMP_NONE && ch.flags != FLAG_COMP_ZSTD {
        return Err(
            Error::unsupported(format!("unknown compression flags {}", ch.flags))
                .at_subject(subject),
        );
    }
    let ecc = match ecc::parse_algo(&ecc_algo) {
        _ if ecc_len == 0 => EccState::None,
        Ok(None) => EccState::None,
        Ok(Some(n)) if ecc::ecc_len(comp_len, n) == ecc_len => EccState::Rs(n),
        Ok(Some(n)) => EccState::Unusable(format!(
            "ecc_len {ecc_len} does not fit rs({n}) over {comp_len} bytes ({} expected)",
            ecc::ecc_len(comp_len, n)
        )),
        Err(err) => EccState::Unusable(err.message().to_string()),
    };
    Ok(Entry {
        name,
        header: ch,
        header_mismatch,
        offset,
        sha256,
        ecc_algo,
        ecc,
    })
}
