//! PyTorch Distributed Checkpoint (DCP): the directories `torch.distributed.checkpoint.save`
//! writes through its `FileSystemWriter` (FSDP, torchtitan), read as one model, and
//! written as one or N ranks would write them.
//!
//! # Layout (torch 2.x, `FileSystemWriter`, `SerializationFormat.TORCH_SAVE`)
//!
//! ```text
//! ckpt/.metadata        pickle of torch.distributed.checkpoint.metadata.Metadata
//! ckpt/__0_0.distcp     rank 0's items, one after the other
//! ckpt/__1_0.distcp     rank 1's items, …
//! ```
//!
//! `Metadata` (a dataclass, pickled with its fields as a dict): `state_dict_metadata`
//! maps each flattened name (`model.layers.0.attn.q.weight`, `optim.state.….exp_avg`,
//! `optim.param_groups.0.lr`: DCP's own flattening, dotted) to a
//! `TensorStorageMetadata` (`properties`: `TensorProperties`, pickled as the tuple
//! `(dtype, layout, requires_grad, memory_format, pin_memory[, strides])`; `size`: a
//! `torch.Size`; `chunks`: `ChunkStorageMetadata(offsets, sizes)`, the box each rank
//! wrote) or a `BytesStorageMetadata` (a non-tensor item). `storage_data` maps
//! `MetadataIndex(fqn, offset)` (offset: the chunk's offsets, `None` for an item) to
//! `_StorageInfo(relative_path, offset, length[, transform_descriptors])`: the item is
//! `length` bytes at `offset` of the file `relative_path`. Each item is a whole
//! `torch.save` archive (a zip; stored, not deflated): a chunk's archive holds the one
//! tensor the rank held (its local shard, `sizes` in shape), an item's the pickled
//! Python object. `planner_data` (the names' paths) and `storage_meta` are read through
//! the allow-list and not used. Replicated tensors are written once (one chunk covering
//! the tensor); a rank whose shard is empty writes an empty chunk.
//!
//! # Reading
//!
//! A directory holding `.metadata` (or the `.metadata` file itself; local, `s3://`,
//! `http(s)://` — the file names come from the metadata, nothing is listed) opens
//! through the codec's indexed-set hooks (`set/indexed.rs`). `.metadata` goes through
//! the same allow-list pickle reader as `.pt` files (`formats/pytorch/pickle.rs`, its
//! DCP section: the dataclasses above are recorded as class + state, never
//! constructed; any other global is refused by name). Checked at open, each an error
//! naming the tensor or item: every chunk's offsets and sizes of the tensor's rank and
//! inside its shape; the chunks tile the tensor exactly (volumes adding up to its
//! elements, no two overlapping); every chunk and item has its storage entry and every
//! entry its tensor or item; `relative_path` a plain name; `transform_descriptors`
//! (compression, encryption extensions) refused as unsupported. A `.distcp` is opened
//! when first needed (a missing one is an I/O error naming it), and every range the
//! metadata places in it is checked against its size then. The non-tensor items are
//! the container's metadata, read at open: plain Python data (int, float, str, bytes,
//! lists, tuples, dicts) as values; any other object is kept as its pickle's bytes
//! with a warning, never executed.
//!
//! A tensor read allocates the dense tensor (bounded: every chunk's elements must fit
//! in its stored item, so the tensor is no larger than the files' bytes) and copies
//! each chunk's elements into its box (runs of whole rows for row shards, a row
//! segment per row for column shards). Each chunk's archive is read through the
//! PyTorch reader over its byte range of the `.distcp` (never a copy of the file), so
//! its records' CRC-32s are checked unless `--no-verify`; its one tensor must have the
//! tensor's dtype and the chunk's sizes. `verify` checks every file, range, chunk CRC
//! and tiling.
//!
//! # Writing
//!
//! [`write::write_set`], reached as `--to dcp` (Python `format="dcp"`) into a directory
//! (made when missing): one rank's `__0_0.distcp`, or with `--shards N` (the set code
//! hands the hook N groups, [`crate::formats::IndexedSet::ranks`]) N files, every
//! tensor cut by rows as FSDP cuts it (`torch.chunk` on dim 0; an empty chunk is not
//! written), a 0-d tensor whole in rank 0's file; each chunk a `torch.save` archive of
//! the one contiguous tensor (stored records, CRC-32, 64-byte aligned, protocol 2
//! pickle); the source's metadata values as non-tensor items in rank 0's file; then
//! `.metadata` (no memo: every global spelled out). All in a temporary directory, moved
//! into place `.metadata` last (`set/write.rs`); the files of a checkpoint it replaces
//! that it does not rewrite are removed. `--max-shard-size` is refused (ranks, not
//! sizes, cut a checkpoint).
//!
//! # Deviations
//!
//! - Our `storage_meta` is `None` (torch's reader makes an empty one) and `planner_data`
//!   maps each name to the one-part path `(name,)`: the names are kept as given, so a
//!   load into a nested state dict (`{"model": {...}}`) matches by DCP's flattening.
//! - Only the file-system layout with `torch.save` items is read; checkpoints written
//!   with `SerializationFormat.SAFETENSORS`, or through stream transforms
//!   (`transform_descriptors`), are refused.
//! - Non-tensor items come back as metadata values (lists for tuples); objects of other
//!   classes (a custom optimizer state object) as their pickle's bytes.
//! - DCP has no checksums of its own: integrity is the per-item zip CRC-32.

pub mod meta;
pub mod read;
pub mod write;

use crate::formats::{Codec, IndexedSet};

/// The metadata file's name, which is also what identifies a DCP directory.
pub const METADATA: &str = ".metadata";

/// DCP's directory as an indexed set ([`crate::formats::Codec::indexed_set`]).
pub const HOOKS: IndexedSet = IndexedSet {
    name: "dcp",
    suffix: METADATA,
    default_index: METADATA,
    looks_like,
    open: read::open,
    names,
    write: write::write_set,
    default_shard_size: u64::MAX,
    ranks: true,
};

/// The codec: no single-file reader or writer (a checkpoint is a directory, read and
/// written through [`HOOKS`]); the capabilities the set writer prepares a source for.
pub const CODEC: Codec = Codec {
    capabilities: Some(write::capabilities),
    ..Codec::new().indexed_set(HOOKS).refusal(
        crate::error::ErrorKind::Unsupported,
        "a PyTorch Distributed Checkpoint is a directory: read it by its directory (or its file named .metadata), write it into a directory with --to dcp",
    )
};

/// `.metadata` is a pickle, never JSON.
fn looks_like(_: &[u8]) -> bool {
    false
}

/// The data files a `.metadata` names.
fn names(bytes: &[u8]) -> Vec<String> {
    meta::parse(bytes, &crate::Limits::default())
        .map(|c| c.files)
        .unwrap_or_default()
}
