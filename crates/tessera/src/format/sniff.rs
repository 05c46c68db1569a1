//! The content tests of formats without a magic of their own (or sharing one), part of
//! the formats' identity: built whatever the Cargo features, so a format built without
//! its feature is still recognised by them. Like the rest of [`crate::format`], this
//! module imports nothing of the library.

/// safetensors: a u64 LE header length of at least 2, then `{`.
pub fn safetensors(head: &[u8]) -> bool {
    match (head.get(..8), head.get(8)) {
        (Some(n), Some(b'{')) => n.try_into().map(u64::from_le_bytes).is_ok_and(|n| n >= 2),
        _ => false,
    }
}

/// A PyTorch checkpoint: a zip one ([`is_zip_checkpoint`]) or a legacy one
/// ([`is_legacy`]).
pub fn pytorch(head: &[u8]) -> bool {
    is_zip_checkpoint(head) || is_legacy(head)
}

/// The legacy magic number as the first pickle spells it (LONG1, 10 bytes).
const LEGACY_MAGIC: [u8; 12] = [
    0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19,
];

/// True when `head` starts a legacy checkpoint: PROTO 2–5, maybe a FRAME, the magic.
pub fn is_legacy(head: &[u8]) -> bool {
    let [0x80, p, rest @ ..] = head else {
        return false;
    };
    let rest = match rest.first() {
        Some(0x95) => rest.get(9..).unwrap_or(&[]),
        _ => rest,
    };
    (2..=5).contains(p) && rest.starts_with(&LEGACY_MAGIC)
}

/// True when `head` starts a zip whose first record is `<archive>/data.pkl` (or
/// `<archive>/data/<key>`, as `torch.jit.save` writes: refused later with a reason).
pub fn is_zip_checkpoint(head: &[u8]) -> bool {
    if !head.starts_with(b"PK\x03\x04") || head.len() < 30 {
        return false;
    }
    let n = u16::from_le_bytes([head[26], head[27]]) as usize;
    let Some(name) = head.get(30..30 + n) else {
        return false;
    };
    let parts: Vec<&[u8]> = name.split(|&b| b == b'/').collect();
    match parts[..] {
        [a, b"data.pkl"] => !a.is_empty(),
        [a, b"data", k] => !a.is_empty() && !k.is_empty(),
        _ => false,
    }
}

/// A PyTorch Distributed Checkpoint's `.metadata`: a pickle (PROTO 2–5) that names
/// `torch.distributed.checkpoint.metadata` within its first bytes (its first global,
/// `Metadata`).
pub fn dcp_metadata(head: &[u8]) -> bool {
    const MODULE: &[u8] = b"torch.distributed.checkpoint.metadata";
    matches!(head, [0x80, 2..=5, ..]) && head.windows(MODULE.len()).take(64).any(|w| w == MODULE)
}

/// ONNX: a protobuf `ModelProto` starting, as every writer serializes it, with
/// `ir_version` (field 1, a varint from 1 to 99), each following field in the first
/// bytes one `ModelProto` defines with its wire type (length-delimited fields skipped by
/// their length; a varint that does not end after `ir_version` is left to the reader).
pub fn onnx(head: &[u8]) -> bool {
    fn varint(b: &[u8], i: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        for k in 0..10 {
            let x = *b.get(*i)?;
            *i += 1;
            v |= u64::from(x & 0x7f) << (7 * k);
            if x & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    let mut i = 0;
    if head.first() != Some(&0x08) {
        return false;
    }
    let mut first = true;
    while i < head.len() {
        // A varint cut off or over 10 bytes after `ir_version`: ONNX-like, for the
        // reader to refuse as malformed.
        let Some(tag) = varint(head, &mut i) else {
            return !first;
        };
        let (number, wire) = (tag >> 3, tag & 7);
        let ok = match number {
            1 | 5 => wire == 0,
            2 | 3 | 4 | 6 | 7 | 8 | 14 | 20 | 25 | 26 => wire == 2,
            _ => false,
        };
        if !ok {
            return false;
        }
        let Some(v) = varint(head, &mut i) else {
            return !first;
        };
        if first && !(1..100).contains(&v) {
            return false;
        }
        first = false;
        if wire == 2 {
            i = i.saturating_add(usize::try_from(v).unwrap_or(usize::MAX));
        }
    }
    !first
}
