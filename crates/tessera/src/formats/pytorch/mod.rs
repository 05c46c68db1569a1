//! PyTorch checkpoints (`torch.save`: `.pt`, `.pth`, `.bin`, `.ckpt`), read without
//! running any code: the pickle inside is interpreted by an allow-list reader
//! (`pickle.rs`) that builds tensors, storages, dicts, lists and plain values and
//! refuses everything else by name. Written as zip state dicts (`write.rs`,
//! `pickler.rs`) that `torch.load(weights_only=True)` accepts.
//!
//! # Zip layout (torch ≥ 1.6, the default)
//!
//! A zip archive (stored records, 64-byte aligned data, CRC-32 per record) whose records
//! all sit under one folder `<archive>/` (the file's stem, or `archive`):
//!
//! | record | what |
//! | --- | --- |
//! | `<archive>/data.pkl` | the object, pickled (protocol 2 by default); always the first record |
//! | `<archive>/data/<key>` | one storage's raw bytes, `numel × element size` of them |
//! | `<archive>/byteorder` | `little` or `big` (absent before torch 1.10: little) |
//! | `<archive>/version` | the serialization version (`3`) |
//! | `<archive>/.data/serialization_id`, `.format_version`, `.storage_alignment` | newer torch; ignored (CRC-checked by `verify`) |
//!
//! Tensors in the pickle are `torch._utils._rebuild_tensor_v2(storage, storage_offset,
//! size, stride, requires_grad, backward_hooks[, metadata])`, parameters
//! `_rebuild_parameter(tensor, requires_grad, backward_hooks)`, and storages the
//! persistent ids `('storage', torch.<Type>Storage, key, location, numel)`. Torch 2.x
//! pickles the dtypes without a legacy storage class (u16/u32/u64, the float8s,
//! `float4_e2m1fn_x2`, `complex32`, `bits*`) as `_rebuild_tensor_v3(storage, offset,
//! size, stride, requires_grad, backward_hooks, dtype[, metadata])` over
//! `torch.storage.UntypedStorage`, whose `numel` counts bytes (offset and strides count
//! the dtype's elements). One storage may be seen by tensors of different dtypes (an
//! f8 tensor and its u8 view: torch 2.x saves both as byte storages). `backward_hooks`
//! is an empty `OrderedDict`, or `None` in files of old torch. `location` is `cpu` or a
//! device (`cuda:0`).
//!
//! Torch 2.x's tensors with Python state: a parameter whose `__getstate__` is truthy is
//! `_rebuild_parameter_with_state(tensor, requires_grad, hooks, state)`; a tensor
//! subclass, or a tensor carrying attributes, is `torch._tensor._rebuild_from_type_v2(
//! _rebuild_tensor_v2, cls, args, state)`. Both are read when the class is
//! `torch.Tensor` or `torch.nn.parameter.Parameter` and the state sets nothing (`None`,
//! `{}`, or an empty `(dict, slots)` pair), as the plain tensor; a subclass's own
//! class (`__main__.ScaledTensor`) is a global off the allow-list, refused by name, and
//! a state with attributes is refused naming the class and the attributes (torch's
//! `weights_only` loader would set them; we would have to drop them).
//!
//! # Legacy layout (before torch 1.6, `_use_new_zipfile_serialization=False`)
//!
//! Five pickles back to back — the magic number `0x1950a86a20f9469cfc6c`, the protocol
//! version `1001`, `sys_info` (`little_endian`, type sizes), the object, the list of
//! storage keys — then, for each key in that order, the storage's element count (8
//! bytes, the file's byte order) and its raw bytes. Persistent ids carry a sixth item,
//! a storage view `(view_key, offset, numel)` or `None`.
//!
//! # What we read, and choices
//!
//! - Element types from the storage class: `Double/Float/Half/BFloat16/Long/Int/Short/
//!   Char/Byte/Bool/ComplexFloat/ComplexDouble Storage`, and `UntypedStorage` as u8;
//!   from `_rebuild_tensor_v3`'s dtype argument: every dtype Tessera has (the f6s
//!   aside, which torch lacks). Torch's `float4_e2m1fn_x2` (one byte, two values, low
//!   nibble first) is `f4_e2m1` with the last dimension doubled (a scalar is `[2]`), as
//!   the safetensors package and our Python drop-in count it. Torch dtypes Tessera
//!   has no dtype for (`complex32`, `bcomplex32`, `bits8/16/1x8/2x4/4x2`) are carried
//!   as their bytes ([`crate::Layout::undecoded`] `dense:torch.complex32`, listed as
//!   u8 with torch's shape): the rest of the file reads, and a conversion refuses only
//!   them, by name. Quantized tensors (`_rebuild_qtensor`, `QInt8Storage`, a quantized
//!   dtype given to `_rebuild_tensor_v3`) are refused by name, the whole file: their
//!   quantizer parameters are not read.
//! - Storage locations (`cuda:0`, `mps`) are not looked at: every storage is read into
//!   host memory, as `torch.load(map_location="cpu")`.
//! - Names: nested dicts, lists and tuples are flattened with `.` (the `state_dict`
//!   convention; a list's items by position: `layers.0.weight`); a tensor saved alone
//!   is named `tensor`. Int dict keys (optimizer state) become their decimal text.
//!   Two entries with the same joined name are an error.
//! - Everything that is not a tensor — a subtree holding no tensor (`epoch`,
//!   `optimizer.param_groups`) — becomes one file metadata value under its joined name;
//!   dtypes in it become text (`torch.float32`). A state dict's `_metadata` attribute
//!   (module versions) is dropped; other dict attributes are dropped with a warning.
//! - Views: a tensor is a strided view of its storage. A contiguous view is a range of
//!   the storage record (zero-copy from an in-memory source); any other is copied into
//!   row-major order when read, with a warning at open. Tensors whose element ranges
//!   overlap in one storage (tied weights) are each readable and reported in
//!   `warnings()`; conversions write each as its own copy.
//! - Big-endian files (`byteorder` = `big`, legacy `little_endian: False`) are swapped
//!   into owned little-endian bytes, by the tensor's dtype (a complex one by
//!   component). Deviation: torch 2.15 swaps an `UntypedStorage` as bytes, that is not
//!   at all, so it reads a big-endian file's u16/u32/u64 byte-reversed; we swap them.
//! - Torch 2.15 writes `_rebuild_tensor_v3` into legacy files too (storage count in
//!   bytes) but cannot load those back; we read them.
//! - `verify` checks the CRC-32 of every zip record; a checked read (`ReadOptions::
//!   verify`) checks a storage record's CRC-32 once before handing its bytes out.
//!   The legacy format stores no checksums: `verify` says so.
//! - Records may be deflated (an archive re-packed by another tool): they are inflated
//!   up to the declared size and always CRC-checked.
//! - Not read: TorchScript archives (`torch.jit.save`: `code/`, `constants.pkl`), the
//!   older tar-based format (torch < 0.4), sparse and quantized tensors, tensor
//!   subclasses other than the plain classes above, and any pickle outside the
//!   allow-list.
//!
//! # Writing
//!
//! What `torch.save(model.state_dict(), f)` writes, record for record: a flat
//! `OrderedDict` (name → `_rebuild_tensor_v2(storage, 0, size, contiguous stride,
//! False, OrderedDict())`, or for u16/u32/u64, the float8s and f4 as torch 2.x writes
//! them, `_rebuild_tensor_v3(UntypedStorage of bytes, 0, size, stride, False,
//! OrderedDict(), torch.<dtype>)`: v2 wherever the dtype has a storage class, so such
//! files stay loadable by torch 1.x), protocol 2, one storage per tensor keyed `0`, `1`, …
//! in tensor order, records stored (not deflated) with their data 64-byte aligned (the
//! `zip` crate's alignment padding in the local header's extra field, where torch puts
//! its own `FB` padding field), under the folder `archive` (`-O archive=NAME`; torch
//! names it after the file's stem). Records, in torch 2.x's order: `data.pkl`,
//! `.format_version` (`1`: storages in numeric key order, which ours are) and
//! `.storage_alignment` (`64`) as torch 2.x writes them (torch 2.x uses them to compute
//! storage offsets without reading the zip directory; torch 1.13 ignores records it
//! does not know), `byteorder` (`little`), `data/<n>`, `version` (`3\n`). Deviations
//! from what torch writes:
//! - file metadata goes into the state dict's attribute `_tessera_metadata` (a dict, set
//!   by `BUILD` as torch sets `_metadata`), where `load_state_dict` never sees it; the
//!   reader turns it back into metadata. Its keys are apart from the state dict's
//!   entries, so a key may equal a tensor's name (metadata and tensors are separate
//!   namespaces in every format); one equal to another metadata key is an error. Float and bytes values in it use `BINFLOAT` and
//!   `BINBYTES`, which torch 1.13's `weights_only` loader refuses (torch 2.x accepts
//!   them; a plain `torch.load` always does). A checkpoint's top-level non-tensor entries
//!   (`epoch`) read as metadata therefore come back in that attribute, not as entries.
//! - not written: torch 2.x's `.data/serialization_id` (a random id per save; no
//!   torch needs it).
//! - every tensor gets its own storage: views are written contiguous, and tensors that
//!   shared a storage (tied weights) are written as copies — the model carries no tie.
//! - dtypes: those torch has storage classes for (the list above, complex included),
//!   and with `_rebuild_tensor_v3` u16/u32/u64, `float8_e4m3fn/e5m2/e4m3fnuz/e5m2fnuz/
//!   e8m0fnu` and `f4_e2m1` as `float4_e2m1fn_x2` (the last dimension halved: an f4
//!   tensor whose last dimension is odd, or a scalar, is refused naming it, `--cast`;
//!   torch's `float4_e2m1fn_x2` scalar, read as `[2]`, comes back as shape `[1]`),
//!   which a torch 2.x that has the dtype loads. The f6s are refused naming the tensor
//!   (`--cast`), sparse layouts need `--densify`, undecoded ones are refused. Tensor
//!   attributes are dropped (noted).
//!
//! # Detection
//!
//! A zip whose first record is named `<archive>/data.pkl` or `<archive>/data/<key>`
//! (read within the first [`crate::format::DETECT_LEN`] bytes, so archive names up to
//! about 470 bytes); a pickle that starts with the legacy magic number (after PROTO and
//! maybe FRAME). Other zips stay NumPy `.npz`.
//!
//! # Hostile input
//!
//! The pickle reader bounds its object count, memo, stack and MARK nesting
//! ([`crate::Limits`]), refuses memo indices past `max_entries`, and checks every length
//! against the bytes left; flattening bounds depth (`max_depth`) and the number of
//! nodes visited (a pickle can share one container many times). Every view is checked
//! against its storage (offset + Σ (size−1)·stride < numel, no overflow), every storage
//! against its record or the file, and decoded sizes against `max_decoded_bytes`. A
//! view that repeats elements (stride 0, overlapping strides) may decode to more bytes
//! than its storage holds only up to `max_index_bytes`.

mod legacy;
pub mod pickle;
mod pickler;
mod read;
mod tree;
mod write;
pub(crate) mod zip;

pub use read::PytorchFile;
pub use write::PytorchWriter;

use std::collections::HashMap;

use crate::any::{Access, ReadOptions};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::formats::Codec;
use crate::model::Container;
use crate::source::SourceRef;
use crate::write::{Capabilities, MetadataSupport};
use read::{Loc, Parts, StorageLoc};

pub use crate::format::sniff::{is_legacy, is_zip_checkpoint};

fn open<'d>(src: SourceRef<'d>, opts: &ReadOptions) -> Result<Box<dyn Container + 'd>> {
    let head = src.read_up_to(0, 64)?;
    let parts = if is_legacy(&head) {
        legacy::parse(src, opts)?
    } else {
        open_zip(src, opts)?
    };
    Ok(Box::new(PytorchFile::assemble(parts, opts)?))
}

/// PyTorch checkpoints in the codec table. A zip shares npz's magic and is told
/// apart by its first record's name; the legacy format starts with a pickle's protocol
/// opcode and torch's magic number. Written as zip state dicts.
pub const CODEC: Codec = Codec::new()
    .reader(open, Access::Ranges, "pytorch")
    .writer(write::write, capabilities)
    .options(PytorchOptions::OPTIONS);

crate::options::format_options! {
    /// PyTorch's writer options.
    pub struct PytorchOptions {
        shared: [],
        /// The folder the records sit in inside the zip (torch names it after the
        /// file's stem; Tessera writes `archive`, as torch does for a buffer).
        pub archive: Option<String> = (crate::options::OptionKind::Text,
            "the folder name inside the zip (default: archive)"),
    }
}

/// The dtypes torch has a storage class for (`FloatStorage`, …), written with
/// `_rebuild_tensor_v2`, which every torch loads: what FOLD's checkpoint layout keeps in
/// its torch state (the others go to its npz or safetensors part, as before torch 2.x's
/// dtypes were written).
pub const STORAGE_CLASS_DTYPES: &[DType] = {
    use DType::*;
    &[F64, F32, F16, BF16, I64, I32, I16, I8, U8, Bool, C64, C128]
};

/// What a `.pt` state dict holds as Tessera writes it: the dtypes torch has storage
/// classes for and those torch 2.x writes with `_rebuild_tensor_v3` (u16/u32/u64, the
/// float8s, f4 as `float4_e2m1fn_x2`), dense tensors, a metadata tree.
pub fn capabilities() -> Capabilities {
    use DType::*;
    Capabilities {
        format: Format::Pytorch,
        dtypes: &[
            F64, F32, F16, BF16, I64, I32, I16, I8, U8, Bool, C64, C128, U16, U32, U64, F8E4M3FN,
            F8E5M2, F8E4M3FNUZ, F8E5M2FNUZ, F8E8M0, F4E2M1,
        ],
        sparse: false,
        other_layouts: false,
        metadata: MetadataSupport::Tree,
        chunks: false,
        compression: &[],
        integrity: &["crc32"],
        zero_copy: true,
        chunk_copies: false,
        typed_metadata: false,
    }
}

pub(crate) fn open_zip<'d>(src: SourceRef<'d>, opts: &ReadOptions) -> Result<Parts<'d>> {
    let limits = &opts.limits;
    let records = zip::records(src, limits)?;
    let by_name: HashMap<&str, usize> = records
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name.as_str(), i))
        .collect();
    let mut pkls = records.iter().filter(|r| {
        r.name
            .strip_suffix("data.pkl")
            .is_some_and(|p| p.ends_with('/') && p.matches('/').count() == 1)
    });
    let (Some(pkl), None) = (pkls.next(), pkls.next()) else {
        return Err(Error::malformed(
            "not a PyTorch archive: no single <archive>/data.pkl record",
        ));
    };
    let prefix = &pkl.name[..pkl.name.len() - "data.pkl".len()];
    let record = |n: &str| {
        by_name
            .get(format!("{prefix}{n}").as_str())
            .map(|&i| &records[i])
    };
    if record("constants.pkl").is_some()
        || records
            .iter()
            .any(|r| r.name.starts_with(&format!("{prefix}code/")))
    {
        return Err(Error::unsupported(
            "a TorchScript archive (torch.jit.save) holds code, not a checkpoint; only \
             torch.save files are read",
        ));
    }
    limits.check_index(pkl.size)?;
    let bytes = zip::content(src, pkl)?;
    if opts.verify {
        zip::check_crc(pkl, &bytes)?;
    }
    let (graph, end) = pickle::load(&bytes, 0, limits, &pkl.name)?;
    let mut warnings = graph.notes.clone();
    if end < bytes.len() {
        warnings.push(format!(
            "{} bytes after the end of the pickle in {:?} are ignored",
            bytes.len() - end,
            pkl.name
        ));
    }
    let flat = tree::flatten(&graph, limits)?;
    let text = |n: &str| -> Result<Option<String>> {
        let Some(r) = record(n) else { return Ok(None) };
        if r.size > 64 {
            return Err(Error::malformed(format!(
                "record {:?} is {} bytes",
                r.name, r.size
            )));
        }
        let b = zip::content(src, r)?;
        Ok(Some(String::from_utf8_lossy(&b).trim().to_string()))
    };
    let big_endian = match text("byteorder")?.as_deref() {
        None | Some("little") => false,
        Some("big") => true,
        Some(o) => return Err(Error::malformed(format!("byteorder is {o:?}"))),
    };
    let version = match text("version")? {
        Some(v) => format!("zip v{}", v.escape_debug()),
        None => "zip".into(),
    };
    let mut storages: Vec<StorageLoc> = Vec::new();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (name, t) in &flat.tensors {
        let s = &t.storage;
        let subject = || format!("tensor {name:?}");
        if let Some(&i) = seen.get(s.key.as_str()) {
            if storages[i].numel != s.numel {
                return Err(Error::malformed(format!(
                    "storage {:?} is named with {} and {} elements",
                    s.key, storages[i].numel, s.numel
                ))
                .at_subject(subject()));
            }
            continue;
        }
        let ri = by_name
            .get(format!("{prefix}data/{}", s.key).as_str())
            .copied()
            .ok_or_else(|| {
                Error::malformed(format!("storage record data/{} is missing", s.key))
                    .at_subject(subject())
            })?;
        let want = s.numel.checked_mul(s.dtype.size() as u64);
        if want != Some(records[ri].size) {
            return Err(Error::malformed(format!(
                "storage record {:?} holds {} bytes, {} {} elements need {}",
                records[ri].name,
                records[ri].size,
                s.numel,
                s.dtype,
                want.map_or("more than 2^64".into(), |w| w.to_string())
            ))
            .at_subject(subject()));
        }
        seen.insert(&s.key, storages.len());
        storages.push(StorageLoc {
            key: s.key.clone(),
            dtype: s.dtype,
            numel: s.numel,
            loc: Loc::Record(ri),
        });
    }
    Ok(Parts {
        src,
        version,
        big_endian,
        storages,
        flat,
        warnings,
        records,
    })
}
