//! Content identity: a digest of a model's tensors that does not depend on the container.
//!
//! The same tensors written as safetensors, zTensor, AERO, FOLD, GPTRS, GGUF, WTXT or npz
//! have the same identity, because it is computed from what every reader hands out — the
//! tensor's name, dtype, logical shape, layout and the canonical (little-endian,
//! row-major, decoded) bytes of each of its parts — never from how a format stores them
//! (offsets, alignment, compression, per-format attributes, tensor order).
//!
//! # Definition (`tessera-id/1`)
//!
//! All integers are u64 little-endian; a *string* is its byte length then its UTF-8
//! bytes. BLAKE3 throughout.
//!
//! - **Tensor digest** = BLAKE3 of `"tessera-id/1 tensor\0"`, the name, the dtype name
//!   (`f32`, `bf16`, … — the storage dtype for a packed layout), the rank and each
//!   dimension, the layout name (`dense`, `sparse_csr`, `sparse_coo`, `ggml_q8_0`, …),
//!   the part count, then each part **in order of its role name** (bytewise): the role,
//!   the byte length, the bytes.
//! - **Tensor root**: the tensor digests in order of tensor name (bytewise), folded into
//!   a binary Merkle tree as RFC 6962 does (the left subtree holds the largest power of
//!   two below the count): a node is BLAKE3 of `"tessera-id/1 node\0"`, left, right; a
//!   single digest is its own tree; no tensors give BLAKE3 of `"tessera-id/1 empty\0"`.
//! - **Metadata digest** (only when asked): BLAKE3 of `"tessera-id/1 metadata\0"` and the
//!   value tree encoded with one tag byte per value — `0` null, `1` bool (one byte), `2`
//!   integer (i128 LE, 16 bytes), `3` float (f64 bits), `4` string, `5` bytes (length,
//!   bytes), `6` list (count, items), `7` map (count, then key string and value per
//!   entry, **keys sorted** bytewise).
//! - **Identity** = BLAKE3 of `"tessera-id/1 root\0"`, the tensor count, the tensor
//!   root, then a byte `0`, or `1` and the metadata digest.
//!
//! It is shown as `blake3:<64 hex digits>`. Per-format tensor attributes
//! (`requires_grad`, zTensor per-object attributes) are not part of it: formats differ in
//! which they can carry. Metadata is optional for the same reason — a conversion into a
//! format that carries only strings (safetensors) or none changes it — so the default
//! identity covers the tensors only.
//!
//! Tensors are read one at a time (memory near one tensor); each part is hashed with
//! BLAKE3's multi-threaded hasher, so large tensors hash on every core.

use std::fmt;

use crate::error::Result;
use crate::metadata::{Metadata, Value};
use crate::model::TensorSource;
use crate::tensor::TensorView;

/// A 32-byte BLAKE3 digest.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// `blake3:<hex>`.
    pub fn to_prefixed(&self) -> String {
        format!("blake3:{}", crate::util::hex(&self.0))
    }
    /// Parses `blake3:<64 hex>` (or bare hex).
    pub fn parse(s: &str) -> Option<Digest> {
        let hex = s.strip_prefix("blake3:").unwrap_or(s);
        let v = crate::util::unhex(hex).filter(|v| v.len() == 32)?;
        let mut d = [0u8; 32];
        d.copy_from_slice(&v);
        Some(Digest(d))
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_prefixed())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", self.to_prefixed())
    }
}

/// One tensor's entry in an identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorId {
    /// The tensor's name.
    pub name: String,
    /// Its dtype name (the storage dtype for a packed layout).
    pub dtype: String,
    /// Its logical shape.
    pub shape: Vec<u64>,
    /// Its layout name.
    pub layout: String,
    /// The tensor digest.
    pub digest: Digest,
}

/// A model's content identity: per-tensor digests (sorted by name) and the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelId {
    /// Every tensor hashed, in name order.
    pub tensors: Vec<TensorId>,
    /// The metadata digest, when metadata was included.
    pub metadata: Option<Digest>,
    /// The identity.
    pub root: Digest,
}

const TENSOR_TAG: &[u8] = b"tessera-id/1 tensor\0";
const NODE_TAG: &[u8] = b"tessera-id/1 node\0";
const EMPTY_TAG: &[u8] = b"tessera-id/1 empty\0";
const METADATA_TAG: &[u8] = b"tessera-id/1 metadata\0";
const ROOT_TAG: &[u8] = b"tessera-id/1 root\0";

/// Parts at least this large are hashed with BLAKE3's multi-threaded hasher.
const PARALLEL_HASH_MIN: usize = 1 << 20;

fn put_u64(h: &mut blake3::Hasher, v: u64) {
    h.update(&v.to_le_bytes());
}

fn put_str(h: &mut blake3::Hasher, s: &[u8]) {
    put_u64(h, s.len() as u64);
    h.update(s);
}

/// The digest of one tensor (see the module docs).
pub fn tensor_digest(view: &TensorView<'_>) -> Digest {
    let info = &view.info;
    let mut h = blake3::Hasher::new();
    h.update(TENSOR_TAG);
    put_str(&mut h, info.name.as_bytes());
    put_str(&mut h, info.dtype.name().as_bytes());
    put_u64(&mut h, info.shape.len() as u64);
    for &d in &info.shape {
        put_u64(&mut h, d);
    }
    put_str(&mut h, info.layout.name().as_bytes());
    let mut parts: Vec<_> = view.parts.iter().collect();
    parts.sort_by(|a, b| a.role.as_bytes().cmp(b.role.as_bytes()));
    put_u64(&mut h, parts.len() as u64);
    for p in parts {
        put_str(&mut h, p.role.as_bytes());
        put_u64(&mut h, p.bytes.len() as u64);
        if p.bytes.len() >= PARALLEL_HASH_MIN {
            h.update_rayon(&p.bytes);
        } else {
            h.update(&p.bytes);
        }
    }
    Digest(*h.finalize().as_bytes())
}

/// The Merkle root of digests already in name order (RFC 6962's shape).
pub fn merkle_root(leaves: &[Digest]) -> Digest {
    match leaves {
        [] => Digest(*blake3::hash(EMPTY_TAG).as_bytes()),
        [one] => *one,
        _ => {
            let split = largest_power_of_two_below(leaves.len());
            let left = merkle_root(&leaves[..split]);
            let right = merkle_root(&leaves[split..]);
            let mut h = blake3::Hasher::new();
            h.update(NODE_TAG);
            h.update(&left.0);
            h.update(&right.0);
            Digest(*h.finalize().as_bytes())
        }
    }
}

/// The largest power of two strictly below `n` (n ≥ 2).
fn largest_power_of_two_below(n: usize) -> usize {
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    k
}

/// The metadata digest (see the module docs).
pub fn metadata_digest(metadata: &Metadata) -> Digest {
    let mut h = blake3::Hasher::new();
    h.update(METADATA_TAG);
    put_map(&mut h, metadata);
    Digest(*h.finalize().as_bytes())
}

fn put_map(h: &mut blake3::Hasher, m: &Metadata) {
    let mut entries: Vec<(&str, &Value)> = m.iter().collect();
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    h.update(&[7]);
    put_u64(h, entries.len() as u64);
    for (k, v) in entries {
        put_str(h, k.as_bytes());
        put_value(h, v);
    }
}

fn put_value(h: &mut blake3::Hasher, v: &Value) {
    match v {
        Value::Null => {
            h.update(&[0]);
        }
        Value::Bool(b) => {
            h.update(&[1, u8::from(*b)]);
        }
        Value::Int(i) => {
            h.update(&[2]);
            h.update(&i.to_le_bytes());
        }
        Value::Float(f) => {
            h.update(&[3]);
            h.update(&f.to_bits().to_le_bytes());
        }
        Value::Str(s) => {
            h.update(&[4]);
            put_str(h, s.as_bytes());
        }
        Value::Bytes(b) => {
            h.update(&[5]);
            put_str(h, b);
        }
        Value::List(items) => {
            h.update(&[6]);
            put_u64(h, items.len() as u64);
            for i in items {
                put_value(h, i);
            }
        }
        Value::Map(m) => put_map(h, m),
    }
}

/// The identity from tensor entries in name order and an optional metadata digest.
pub fn identity(tensors: &[TensorId], metadata: Option<Digest>) -> Digest {
    let leaves: Vec<Digest> = tensors.iter().map(|t| t.digest).collect();
    let tree = merkle_root(&leaves);
    let mut h = blake3::Hasher::new();
    h.update(ROOT_TAG);
    put_u64(&mut h, tensors.len() as u64);
    h.update(&tree.0);
    match metadata {
        None => {
            h.update(&[0]);
        }
        Some(d) => {
            h.update(&[1]);
            h.update(&d.0);
        }
    }
    Digest(*h.finalize().as_bytes())
}

/// Hashes the tensors `src` holds whose names `only` accepts (all when `None`), reading
/// them one at a time; `progress` is called with each tensor's byte count after it is
/// hashed. Entries come back in name order.
pub fn tensor_ids(
    src: &dyn TensorSource,
    only: Option<&dyn Fn(&str) -> bool>,
    progress: &mut dyn FnMut(u64),
) -> Result<Vec<TensorId>> {
    let mut out = Vec::new();
    for info in src.tensor_infos() {
        if only.is_some_and(|f| !f(&info.name)) {
            continue;
        }
        let view = src.tensor(&info.name)?;
        let digest = tensor_digest(&view);
        progress(view.nbytes());
        out.push(TensorId {
            name: view.info.name.clone(),
            dtype: view.info.dtype.name().to_string(),
            shape: view.info.shape.clone(),
            layout: view.info.layout.name().to_string(),
            digest,
        });
    }
    out.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    Ok(out)
}

/// The content identity of every tensor in `src` (and its metadata when
/// `with_metadata`).
///
/// [`crate::convert::convert_file`]'s example computes one.
pub fn model_id(src: &dyn TensorSource, with_metadata: bool) -> Result<ModelId> {
    model_id_with_progress(src, with_metadata, &mut |_| {})
}

/// [`model_id`] with a callback per tensor hashed (its byte count), for progress bars.
pub fn model_id_with_progress(
    src: &dyn TensorSource,
    with_metadata: bool,
    progress: &mut dyn FnMut(u64),
) -> Result<ModelId> {
    let tensors = tensor_ids(src, None, progress)?;
    let metadata = with_metadata.then(|| metadata_digest(src.metadata()));
    let root = identity(&tensors, metadata);
    Ok(ModelId {
        tensors,
        metadata,
        root,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DType, Model, TensorInfo};
    use std::borrow::Cow;

    fn model(names: &[&str]) -> Model {
        let mut m = Model::new();
        for (i, n) in names.iter().enumerate() {
            let info = TensorInfo::dense(*n, DType::F32, vec![2]);
            let bytes: Vec<u8> = [i as f32, 1.5]
                .iter()
                .flat_map(|f| f.to_le_bytes())
                .collect();
            m.push(TensorView::dense(info, Cow::Owned(bytes)).unwrap())
                .unwrap();
        }
        m
    }

    #[test]
    fn merkle_shapes_differ_by_count_and_order() {
        let d = |b: u8| Digest([b; 32]);
        let roots: Vec<Digest> = (0..6)
            .map(|n| merkle_root(&(0..n).map(d).collect::<Vec<_>>()))
            .collect();
        for (i, a) in roots.iter().enumerate() {
            for b in &roots[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_ne!(merkle_root(&[d(1), d(2)]), merkle_root(&[d(2), d(1)]));
        assert_eq!(merkle_root(&[d(9)]), d(9));
    }

    #[test]
    fn tensor_order_does_not_matter_but_names_do() {
        let a = model_id(&model(&["a", "b", "c"]), false).unwrap();
        let mut reordered = Model::new();
        let src = model(&["a", "b", "c"]);
        for n in ["c", "a", "b"] {
            reordered.push(src.tensor(n).unwrap()).unwrap();
        }
        assert_eq!(model_id(&reordered, false).unwrap().root, a.root);
        let renamed = model_id(&model(&["a", "b", "d"]), false).unwrap();
        assert_ne!(renamed.root, a.root);
    }

    #[test]
    fn metadata_counts_only_when_asked_and_not_its_key_order() {
        let mut m1 = model(&["a"]);
        let mut m2 = model(&["a"]);
        m1.metadata.insert("x", "1");
        m1.metadata.insert("y", 2i64);
        m2.metadata.insert("y", 2i64);
        m2.metadata.insert("x", "1");
        let plain = model_id(&model(&["a"]), false).unwrap().root;
        assert_eq!(model_id(&m1, false).unwrap().root, plain);
        let with1 = model_id(&m1, true).unwrap().root;
        assert_ne!(with1, plain);
        assert_eq!(model_id(&m2, true).unwrap().root, with1);
        m2.metadata.insert("x", "2");
        assert_ne!(model_id(&m2, true).unwrap().root, with1);
    }

    #[test]
    fn digests_parse_back() {
        let d = model_id(&model(&["a"]), false).unwrap().root;
        assert_eq!(Digest::parse(&d.to_prefixed()), Some(d));
        assert_eq!(Digest::parse("blake3:00"), None);
    }
}
