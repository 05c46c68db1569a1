//! `zt.content/1`: the content digest of a zTensor v2 model, as the reference
//! implementation (ztensor's `Manifest::content_digest`) defines it — a digest of the
//! deterministic CBOR `["zt.content/1", {name: {shape, layout, attributes?, parts:
//! {part: {dtype, type?, digest}}}}]`, computed from the manifest alone. Offsets,
//! lengths, alignment, encodings, blob sharing and the shard table are left out, so the
//! same tensors give the same digest in one file or many, raw or compressed. Only for
//! a model whose every part carries a digest. (ztensor 2.1.2 does not expose it; the
//! test vector's value is computed by `tests/data/ztensor2/shards/gen.py` from the
//! reference's definition with `cbor2` and `hashlib`.)

use super::cbor::{self, CVal};
use super::raw::{storage_of, ObjectRef};

fn text(s: &str) -> CVal {
    CVal::Text(s.to_string())
}

/// The CBOR bytes the content digest hashes, or why there is none (a part without a
/// digest).
pub fn content_bytes(objects: &[ObjectRef]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(objects.len());
    for o in objects {
        let mut parts = Vec::with_capacity(o.parts.len());
        for p in &o.parts {
            let Some(d) = &p.digest_text else {
                return Err(format!(
                    "tensor {:?} part {:?} carries no digest, so the model has no zt.content/1 digest",
                    o.name, p.name
                ));
            };
            let mut f = vec![(text("dtype"), text(storage_of(p.dtype).0))];
            if let Some(t) = &p.logical {
                f.push((text("type"), text(t)));
            }
            f.push((text("digest"), text(d)));
            parts.push((text(&p.name), CVal::Map(f)));
        }
        let mut f = vec![
            (
                text("shape"),
                CVal::Array(o.shape.iter().map(|&d| CVal::Uint(d)).collect()),
            ),
            (text("layout"), text(&o.layout)),
        ];
        if let Some(a) = &o.attributes {
            let m = a.iter().map(|(k, v)| (text(k), v.clone())).collect();
            f.push((text("attributes"), CVal::Map(m)));
        }
        f.push((text("parts"), CVal::Map(parts)));
        out.push((text(&o.name), CVal::Map(f)));
    }
    let value = CVal::Array(vec![text("zt.content/1"), CVal::Map(out)]);
    let mut bytes = Vec::new();
    cbor::encode(&value, &mut bytes).map_err(|e| e.message().to_string())?;
    Ok(bytes)
}
