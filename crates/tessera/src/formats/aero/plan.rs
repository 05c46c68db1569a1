//! Planning an AERO file: the tensor list (dtype codes, lengths, shards, offsets,
//! optional `hash_b3`) and the metadata payloads (TIDX, `meta.json`, IHSH, PHSH), laid
//! out exactly as the original writer does.

use super::codec::{self, map_of};
use super::quant::Packed;
use super::raw::*;
use super::read::{MMSG_EXACT_METADATA, STANDARD};
use crate::error::{Error, Result};
use crate::metadata::{Map, Metadata, Value};
use crate::model::TensorSource;
use crate::tensor::{Layout, TensorView};
use crate::util::pyjson;

#[derive(Clone)]
pub(super) struct TensorPlan {
    pub(super) name: String,
    pub(super) code: u16,
    pub(super) shape: Vec<u64>,
    pub(super) len: u64,
    pub(super) shard: usize,
    pub(super) off: u64,
    pub(super) quant_id: Option<Value>,
    pub(super) quant_params: Option<Value>,
    pub(super) flags: u64,
    pub(super) hash: Option<[u8; 32]>,
    pub(super) attrs: Option<Value>,
    pub(super) packed: Option<Packed>,
    /// Alignment of the data inside its shard: the element size (1 for packed data).
    pub(super) align: u64,
}

/// The bytes of a tensor as AERO stores them: the `data` part of a dense tensor, the one
/// part of a packed (`Layout::Other`) tensor.
pub(super) fn tensor_bytes<'a>(v: &'a TensorView<'_>) -> Result<&'a [u8]> {
    match &v.info.layout {
        Layout::Dense => v.data(),
        // Packed bytes read back as u8: another storage type would come back changed.
        Layout::Other(l) if v.info.dtype != crate::dtype::DType::U8 => {
            Err(Error::unsupported(format!(
                "tensor {:?} ({l}) is stored as {}; AERO stores a packed tensor as bytes (u8) only",
                v.info.name, v.info.dtype
            )))
        }
        Layout::Other(_) if v.parts.len() == 1 => Ok(&v.parts[0].bytes),
        Layout::Other(l) => Err(Error::unsupported(format!(
            "tensor {:?}: AERO stores a packed tensor as one byte string; layout {l:?} has {} parts",
            v.info.name,
            v.parts.len()
        ))),
        l => Err(Error::unsupported(format!(
            "tensor {:?} is {l}; AERO stores dense or packed tensors only",
            v.info.name
        )).with_hint(crate::refusal::Hint::Densify)),
    }
}

/// Plans every tensor: `groups` (consecutive ranges of `src`'s tensors, one per shard)
/// places them; without it, `opts.shard_size` does.
pub(super) fn plan_tensors(
    src: &dyn TensorSource,
    opts: &super::AeroOptions,
    groups: Option<&[std::ops::Range<usize>]>,
) -> Result<Vec<TensorPlan>> {
    let mut plans = Vec::new();
    for info in src.tensor_infos() {
        if info.name.len() > MAX_TENSOR_NAME || info.shape.len() > MAX_RANK {
            return Err(Error::invalid_input(format!(
                "tensor {:?}: AERO readers accept names up to {MAX_TENSOR_NAME} bytes and rank up to {MAX_RANK}",
                info.name
            )));
        }
        let mut attrs = info.attrs.clone();
        // AERO's own fields, when they have the type the TIDX needs; anything else stays
        // an ordinary attribute (and travels in `tessera_attrs`).
        let take = |attrs: &mut Map, k: &str, ok: fn(&Value) -> bool| match attrs.get(k) {
            Some(v) if ok(v) => attrs.remove(k),
            _ => None,
        };
        let quant_id = take(&mut attrs, "quant_id", |v| matches!(v, Value::Int(_)));
        let mut packed = None;
        let flags = take(&mut attrs, "aero_flags", |v| {
            v.as_int().is_some_and(|i| u64::try_from(i).is_ok())
        })
        .and_then(|v| v.as_int())
        .and_then(|i| u64::try_from(i).ok())
        .unwrap_or(0);
        let (code, len, quant_params, extra) = match &info.layout {
            Layout::Dense => {
                let code = dtype_to_u16(info.dtype).ok_or_else(|| {
                    Error::unsupported(format!(
                        "tensor {:?} is {}; AERO cannot store it",
                        info.name, info.dtype
                    ))
                    .with_hint(crate::refusal::Hint::Cast)
                })?;
                let q = take(&mut attrs, "quant_params", |v| matches!(v, Value::Map(_)));
                // Attributes AERO has no field for (`requires_grad`, …) ride in TIDX.
                let extra = (!attrs.is_empty()).then_some(Value::Map(attrs));
                (code, info.dense_nbytes()?, q, extra)
            }
            Layout::Other(l) => {
                let v = src.tensor(&info.name)?;
                let len = tensor_bytes(&v)?.len() as u64;
                // Every other attribute is a codec parameter; `quant::resolve` assigns
                // the quant_id and finishes quant_params.
                let mut params = match attrs.remove("quant_params") {
                    Some(Value::Map(m)) => m,
                    _ => Map::new(),
                };
                for (k, v) in attrs {
                    params.insert(k, v);
                }
                packed = Some(Packed {
                    layout: l.clone(),
                    params,
                    quant_id: quant_id.as_ref().and_then(Value::as_int),
                });
                (DTYPE_PACKED, len, None, None)
            }
            l => {
                return Err(Error::unsupported(format!(
                    "tensor {:?} is {l}; AERO stores dense or packed tensors only",
                    info.name
                ))
                .with_hint(crate::refusal::Hint::Densify))
            }
        };
        let hash = if opts.tensor_hashes {
            let v = src.tensor(&info.name)?;
            Some(crate::formats::aero::verify::blake3_of(tensor_bytes(&v)?))
        } else {
            None
        };
        plans.push(TensorPlan {
            name: info.name.clone(),
            code,
            shape: info.shape.clone(),
            len,
            shard: 0,
            off: 0,
            quant_id,
            quant_params,
            flags,
            hash,
            attrs: extra,
            align: if code == DTYPE_PACKED {
                1
            } else {
                info.dtype.size() as u64
            },
            packed,
        });
    }
    // aerotensor's converters write tensors in name order (`sorted(names)`: code point
    // order, which is UTF-8 byte order), back to back.
    if opts.aerotensor {
        plans.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        for p in &mut plans {
            p.align = 1;
        }
    }
    // Shards: caller order, a tensor goes to the current shard unless it would exceed the
    // maximum; an empty shard always accepts. Inside a shard each tensor starts at a
    // multiple of its element size (the original packs back to back; the two agree
    // whenever sizes are multiples, as in every sample), so typed views need no copy.
    if let Some(groups) = groups {
        return place_in_groups(plans, groups);
    }
    let max = opts.shard_size.unwrap_or(DEFAULT_MAX_SHARD);
    if max == 0 {
        return Err(Error::invalid_input("shard size must be positive"));
    }
    let (mut shard, mut used, mut count) = (0usize, 0u64, 0usize);
    for p in &mut plans {
        let mut start = align_up(used, p.align)?;
        if count > 0 && start.saturating_add(p.len) > max {
            shard += 1;
            start = 0;
            count = 0;
        }
        p.shard = shard;
        p.off = start;
        used = start
            .checked_add(p.len)
            .ok_or_else(|| Error::invalid_input("shard size overflows"))?;
        count += 1;
    }
    Ok(plans)
}

/// Puts tensor `i` into the shard whose range holds it, each aligned as above.
fn place_in_groups(
    mut plans: Vec<TensorPlan>,
    groups: &[std::ops::Range<usize>],
) -> Result<Vec<TensorPlan>> {
    let covered = groups.iter().map(|g| g.len()).sum::<usize>();
    let contiguous = groups.windows(2).all(|w| w[0].end == w[1].start);
    if covered != plans.len() || !contiguous || groups.first().is_some_and(|g| g.start != 0) {
        return Err(Error::invalid_input(format!(
            "shard plan covers {covered} of {} tensors",
            plans.len()
        )));
    }
    for (s, g) in groups.iter().enumerate() {
        let mut used = 0u64;
        for p in &mut plans[g.clone()] {
            let start = align_up(used, p.align)?;
            p.shard = s;
            p.off = start;
            used = start
                .checked_add(p.len)
                .ok_or_else(|| Error::invalid_input("shard size overflows"))?;
        }
    }
    Ok(plans)
}

pub(super) fn tidx(plans: &[TensorPlan]) -> Value {
    let list = plans
        .iter()
        .map(|p| {
            let mut e = vec![
                ("name", Value::Str(p.name.clone())),
                ("dtype", Value::Int(p.code as i128)),
                (
                    "shape",
                    Value::List(p.shape.iter().map(|&d| Value::Int(d as i128)).collect()),
                ),
                ("shard_id", Value::Int(p.shard as i128)),
                ("data_off", Value::Int(p.off as i128)),
                ("data_len", Value::Int(p.len as i128)),
                ("flags", Value::Int(p.flags as i128)),
            ];
            if let Some(q) = &p.quant_id {
                e.push(("quant_id", q.clone()));
            }
            if let Some(q) = &p.quant_params {
                e.push(("quant_params", q.clone()));
            }
            if let Some(h) = &p.hash {
                e.push(("hash_b3", Value::Str(crate::util::hex(h))));
            }
            if let Some(a) = &p.attrs {
                e.push((TIDX_ATTRS, a.clone()));
            }
            map_of(e)
        })
        .collect();
    map_of(vec![("tensors", Value::List(list))])
}

/// `meta.json` text (Python's `json.dumps(sort_keys=True, separators=(",", ":"))`), and
/// whether it holds the metadata exactly, key order aside (a JSON object is unordered and
/// the original sorts it); when not, MMSG carries the exact tree.
pub(super) fn meta_json(mjsn: &Metadata, meta: &Metadata) -> (String, bool) {
    // meta.json stays strict JSON (our reader and most others refuse Python's bare
    // `NaN`/`Infinity`): values JSON cannot hold take `Value::to_json`'s form first
    // (non-finite floats and integers beyond 64 bits as strings, bytes as
    // `{"$bytes": hex}`); the exact tree rides in MMSG (`exact` is false then).
    let strict = Value::from_json(&Value::Map(mjsn.clone()).to_json());
    let text = pyjson::dumps(&strict, pyjson::DumpOptions::CANONICAL);
    let exact = serde_json::from_str::<serde_json::Value>(&text)
        .map(|j| sorted(&Value::from_json(&j)) == sorted(&Value::Map(meta.clone())))
        .unwrap_or(false);
    (text, exact)
}

/// `v` with every map's keys sorted, recursively.
fn sorted(v: &Value) -> Value {
    match v {
        Value::Map(m) => {
            let mut e: Vec<(String, Value)> =
                m.iter().map(|(k, x)| (k.to_string(), sorted(x))).collect();
            e.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Map(e.into_iter().collect())
        }
        Value::List(l) => Value::List(l.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

pub(super) fn msgpack(v: &Value) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    codec::encode(v, &mut out)?;
    Ok(out)
}

pub(super) fn phsh_payload(shard: usize, page: u64, digests: &[[u8; 32]]) -> Result<Vec<u8>> {
    msgpack(&map_of(vec![
        ("shard_name", Value::Str(format!("weights.shard{shard}"))),
        ("page_size", Value::Int(page as i128)),
        (
            "digests",
            Value::List(digests.iter().map(|d| Value::Bytes(d.to_vec())).collect()),
        ),
    ]))
}

pub(super) fn ihsh_payload(end: u64, digest: &[u8; 32]) -> Result<Vec<u8>> {
    let mut b = msgpack(&map_of(vec![
        ("algo", Value::Str("blake3-256".into())),
        (
            "covered_ranges",
            Value::List(vec![Value::List(vec![
                Value::Int(0),
                Value::Int(end as i128),
            ])]),
        ),
        ("digest", Value::Bytes(digest.to_vec())),
    ]))?;
    b.resize(IHSH_PAYLOAD_SIZE, 0);
    Ok(b)
}

pub(super) fn opaque_fourcc(kind: &str) -> [u8; 4] {
    let b = kind.as_bytes();
    if b.len() == 4 && b.iter().all(|c| c.is_ascii_alphanumeric()) {
        let f = [b[0], b[1], b[2], b[3]];
        if !STANDARD.contains(&&f) {
            return f;
        }
    }
    *b"BLOB"
}

/// A shard as MMSG lists it.
pub(super) struct ShardInfo {
    pub(super) toc_index: usize,
    pub(super) size: u64,
    pub(super) count: u64,
}

/// The MMSG manifest, keys in the original's order: `format`, `model`, `chunks` (role,
/// fourcc, toc_index, shard_id for shards and page hashes), `shards`; plus
/// `tessera_metadata` when `meta.json` cannot hold the metadata exactly.
pub(super) fn manifest(
    chunks: &[([u8; 4], Option<usize>)],
    shards: &[ShardInfo],
    meta: &Metadata,
    exact: bool,
) -> Value {
    let role = |f: &[u8; 4]| match f {
        b"IHSH" => "control_integrity",
        b"MJSN" => "json",
        b"MMSG" => "manifest",
        b"TIDX" => "tensors",
        b"WTSH" => "weights",
        b"PHSH" => "page_hashes",
        _ => "opaque",
    };
    let chunk_list = chunks
        .iter()
        .enumerate()
        .map(|(i, (fourcc, shard))| {
            let mut e = vec![
                ("role", Value::Str(role(fourcc).into())),
                ("fourcc", Value::Str(fourcc_text(fourcc))),
                ("toc_index", Value::Int(i as i128)),
            ];
            if let Some(s) = shard {
                e.push(("shard_id", Value::Int(*s as i128)));
            }
            map_of(e)
        })
        .collect();
    let shard_list = shards
        .iter()
        .enumerate()
        .map(|(s, info)| {
            map_of(vec![
                ("shard_id", Value::Int(s as i128)),
                ("toc_index", Value::Int(info.toc_index as i128)),
                ("size_bytes", Value::Int(info.size as i128)),
                ("tensor_count", Value::Int(info.count as i128)),
                ("mmap_critical", Value::Bool(true)),
            ])
        })
        .collect();
    let (name, arch) = model_name_arch(meta);
    let mut m = vec![
        (
            "format",
            map_of(vec![
                ("name", "AERO".into()),
                ("version", Value::List(vec![Value::Int(0), Value::Int(1)])),
            ]),
        ),
        (
            "model",
            map_of(vec![
                ("name", Value::Str(name)),
                ("architecture", Value::Str(arch)),
            ]),
        ),
        ("chunks", Value::List(chunk_list)),
        ("shards", Value::List(shard_list)),
    ];
    if !exact {
        m.push((MMSG_EXACT_METADATA, Value::Map(meta.clone())));
    }
    map_of(m)
}

/// The metadata written for `src`: its own; with `-O aerotensor`, what aerotensor's
/// converters (`safetensors_to_aero.py`, `gguf_to_aero.py`) write in `meta.json`:
/// `model_name` and `architecture` (the source's, GGUF's `general.name` and
/// `general.architecture`, else `converted` (`converted-gguf`) and `unknown`) and
/// `source_format` (the source's format name); every other key is left out, with a note,
/// as the converters drop them.
pub(super) fn metadata_for(
    src: &dyn TensorSource,
    opts: &super::AeroOptions,
    notes: &mut Vec<String>,
) -> Metadata {
    let meta = src.metadata();
    if !opts.aerotensor {
        return meta.clone();
    }
    let source = src.source_format();
    let gguf = source.is_some_and(|f| f.name() == "gguf");
    let text = |keys: &[&str], default: &str| {
        (keys.iter())
            .find_map(|k| meta.get(k).and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| default.to_string())
    };
    let mut out = Metadata::new();
    let name = match gguf {
        true => text(&["model_name", "general.name"], "converted-gguf"),
        false => text(&["model_name"], "converted"),
    };
    out.insert("model_name", name);
    out.insert(
        "architecture",
        text(&["architecture", "general.architecture"], "unknown"),
    );
    out.insert(
        "source_format",
        source.map_or("unknown", |f| f.name()).to_string(),
    );
    let left: Vec<&str> = (meta.keys())
        .filter(|k| !["model_name", "architecture"].contains(k))
        .collect();
    if !left.is_empty() {
        notes.push(format!(
            "left out metadata {} (aerotensor's converters write model_name, architecture and source_format only)",
            left.join(", ")
        ));
    }
    out
}

/// MMSG `model`'s name and architecture: `model_name`/`architecture`, else GGUF's
/// `general.name`/`general.architecture` (as the original's gguf_to_aero does), else "".
pub(super) fn model_name_arch(meta: &Metadata) -> (String, String) {
    let text = |k: &str, gguf: &str| match meta.get(k).or_else(|| meta.get(gguf)) {
        Some(Value::Str(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => String::new(),
    };
    (
        text("model_name", "general.name"),
        text("architecture", "general.architecture"),
    )
}
