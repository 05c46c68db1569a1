//! FOLD v1.2 (`.fold` / `.mind`): big-endian chunks, a JSON index at the end, CRC-32C,
//! SHA-256, hierarchical hashes and optional Reed-Solomon parity.
//!
//! Contract: `shared/specs/fold-v1.2.md`, the FOLD part of `RESOLUTIONS.md`, and the
//! behaviour of pyfolds 1.0.2 (`ORIGINALS.md` §1), which it interoperates with both ways.
//!
//! # Layout (all big-endian, no padding anywhere)
//!
//! | bytes | field | notes |
//! | --- | --- | --- |
//! | 0..8 | `magic` | `FOLDv1\0\0` |
//! | 8..12 | `header_len` u32 | 28 |
//! | 12..20 | `index_off` u64 | patched at the end; 0 in an unfinished file |
//! | 20..28 | `index_len` u64 | ≤ `MAX_INDEX_SIZE` (100 MiB) |
//! | chunk +0..4 | `ctype` | 4 ASCII bytes (`STEN`, `NPZ0`, `TSAV`, `JSON`, `RAW0`, …) |
//! | chunk +4..8 | `flags` u32 | 0 none, 1 zstd (one frame with its content size) |
//! | chunk +8..16 | `uncomp_len` u64 | ≤ `MAX_CHUNK_SIZE` (1 GiB) |
//! | chunk +16..24 | `comp_len` u64 | ≤ 1 GiB |
//! | chunk +24..28 | `crc32c` u32 | CRC-32C of the stored payload |
//! | chunk +28..32 | `ecc_len` u32 | parity bytes after the payload |
//! | then | payload, parity | `comp_len` + `ecc_len` bytes |
//! | `index_off`.. | index | UTF-8 JSON `{format, version, created_at_unix, metadata, chunks}` |
//!
//! Parity (`ecc_algo` `"rs(N)"`): reedsolo's Reed-Solomon over the stored payload in
//! blocks of `255 - N` bytes, `N` parity bytes each, concatenated ([`ecc`]).
//!
//! # Reading
//!
//! [`FoldFile::parse`] runs spec §6 steps 1–3 at open: header (size, magic,
//! `header_len == 28`, `index_off >= 28`), `index_len <= MAX_INDEX_SIZE`, index bounds,
//! UTF-8 JSON, `format == "fold"` (an unknown `version` is a warning), then per chunk
//! the anti-DoS limits (`comp_len`, `uncomp_len`, `ecc_len` ≤ 1 GiB), bounds (the chunk
//! lies between the header and the index); chunks may not overlap and names are unique.
//! The index entry's values are the ones used (its `sha256` is covered by
//! `chunk_hashes` and the manifest); the chunk header, which no checksum covers, must
//! repeat them — pyfolds never compares the two and trusts the header. A disagreement
//! is a warning at open, a failed `chunk header` check in `verify`, and `repair`
//! rewrites the header from the index when the payload matches every index value.
//!
//! **What opening reads.** The reader works over any byte source by range: the 28-byte
//! header, the index (at `index_off`), each chunk's 32-byte header, and — because a
//! `STEN`/`NPZ0` chunk's tensors are listed only from bytes that passed their CRC-32C
//! (or were repaired with the parity), and a tensor chunk damaged beyond repair fails
//! the open — the stored payload of every tensor chunk, one chunk at a time (its parity
//! only when a repair needs it; a mapped or in-memory file has its `STEN` chunks
//! checked and their headers decoded on every core, then listed in file order). Opaque chunks are not read at open. So FOLD's open
//! touches the tensor bytes once, unlike the other range-read formats; relaxing that
//! (listing from the safetensors header alone, checking on read) would change the
//! contract above. The manifest hash needs only the index. Each tensor and chunk is
//! then read by range when asked: borrowed from an in-memory source (zero-copy), one
//! owned read otherwise. Read in file order by one thread, the next `STEN` chunk is
//! decoded ahead on another core; a caller already on the rayon pool (the parallel
//! `tensors`) reads none ahead.
//!
//! Integrity (§6 step 4–6) is checked when bytes are read and by `verify`, in that
//! order: CRC-32C and SHA-256 **first**; only when one fails is the parity used to
//! repair the payload, which must then pass both (RESOLUTIONS). This reads pyfolds 1.0.2
//! files whose multi-block parity is in its buggy layout (their data is intact) and
//! repairs files in the correct layout. Then `metadata.chunk_hashes[name]` against the
//! entry's `sha256`, `manifest_hash` (recomputed with [`pyjson`], Python's exact
//! `json.dumps` text; a mismatch is a warning at open, as in pyfolds, and a failed check
//! in `verify`), and decompression bounded by `uncomp_len`, which must match exactly.
//! A `sha256:` prefix (later pyfolds) is accepted; `hmac-sha256:` hashes are reported
//! "not checked". Tensor and chunk reads check CRC-32C, SHA-256 and the chunk's
//! `chunk_hashes` entry (and repair with the parity), once per chunk, when
//! `ReadOptions::verify` is on (the default); with it off, CRC-32C only (it triggers
//! the repair). Uncompressed tensors are then borrowed from the mapped file (zero-copy). `verify` checks
//! everything, including whether the parity still matches the payload. Stricter than
//! pyfolds: a missing `manifest_hash` or `chunk_hashes`, a chunk `chunk_hashes` does
//! not list, or a listed name with no chunk, fails `verify` (spec §4 requires them;
//! without them a renamed or added chunk would go unnoticed).
//!
//! `metadata()` is the index `metadata` without `chunk_hashes` and `manifest_hash`
//! (the writer recomputes both).
//!
//! # Chunks and tensors
//!
//! - `STEN`: a safetensors file ([`sten`]). Our tensors are written one per chunk (the
//!   default layout; see Writing for the checkpoint layout),
//!   named after the tensor, as a safetensors payload any safetensors reader loads.
//!   A dense tensor of a dtype safetensors has is a single entry named after the
//!   tensor. Anything else keeps the logical description in `__metadata__`:
//!   `tessera.layout` (`sparse_csr`, `sparse_coo`, or another layout name),
//!   `tessera.dtype` and `tessera.shape` (JSON list), and the parts as entries keyed by
//!   role (`values`, `indices`, `indptr`, `coords`, or component names; `c128`, which
//!   safetensors lacks, `f8_e4m3fnuz` and `f8_e5m2fnuz`, and other layouts' parts are
//!   stored as `U8` bytes). Per-tensor attributes go to `tessera.attrs` (JSON). This is lossless for
//!   every dtype and layout. A `STEN` payload without these keys (pyfolds HEAD's
//!   `torch_state`) yields one tensor per entry, `<chunk>/<entry>`.
//! - `NPZ0` (pyfolds' `nuclear_arrays`): a numpy `.npz`; each array is a tensor
//!   `<chunk>/<array>`. Object arrays are refused, never unpickled. A FOLD→FOLD
//!   rewrite copies the chunk (see Writing), so pyfolds' `read_nuclear_arrays` still
//!   finds it.
//! - `TSAV` (pyfolds' `torch_state`, a `torch.save` file): an opaque chunk whose
//!   tensors are also listed, `<chunk>/<name>`, read through the PyTorch reader's
//!   allow-list pickle interpreter ([`tsav`]; nothing is executed). FOLD→FOLD rewrites
//!   copy the chunk byte for byte and leave its tensors out of the STEN chunks, so
//!   they are stored once. A payload the reader refuses stays opaque with a warning
//!   naming what was refused.
//! - Every other ctype (`JSON`, `RAW0`, unknown ones) is an opaque chunk: listed,
//!   extracted, verified, carried through FOLD→FOLD rewrites. `JSON` chunks are kept
//!   as chunks so their bytes survive unchanged.
//!
//! A `STEN` or `NPZ0` chunk whose tensors cannot be listed (damaged beyond repair,
//! malformed payload) fails the open, naming the chunk: its tensors would otherwise be
//! missing from every conversion without a word. With `ReadOptions::salvage` the rest
//! is read and the loss is a warning; with `ReadOptions::audit` (`inspect`, `verify`)
//! the chunk is listed as damaged and `verify` reports it. Such a chunk is never
//! carried or dropped as an opaque chunk.
//!
//! # Writing
//!
//! [`FoldWriter`] streams: the header is written with `index_off = 0`; each chunk's
//! payload goes through zstd (frames carry their content size, which pyfolds needs),
//! CRC-32C, SHA-256 and the parity encoder — for tensors on every core, as the encoding
//! companion of the driver ([`crate::write::drive`], [`write::StenStream`]), while the
//! previous batch is written (the frames are the ones a single encoder writes, byte
//! for byte) — and goes out header,
//! payload, parity; `finish` writes the index as pyfolds does (`ensure_ascii=False`, insertion
//! order, metadata + `chunk_hashes` + `manifest_hash`) and patches the global header.
//! Compression is applied when asked (`WriteOptions::compression`, `--compress zstd`);
//! uncompressed tensors read back zero-copy. Two layouts:
//!
//! - **tensors** (the default): the JSON chunks given with `chunk` (`--chunk NAME=FILE`,
//!   Python `chunks={NAME: obj}`; NAME one of `llm_manifest`, `metrics`, `history`,
//!   `telemetry`), then the source's opaque chunks, then one `STEN` chunk per tensor
//!   (RESOLUTIONS' rule). pyfolds' `load_fold_or_mind` finds no `torch_state` in it.
//! - **checkpoint** (`checkpoint`, `--checkpoint`; [`checkpoint`]): spec §7's standard
//!   chunks as pyfolds' `save_fold_or_mind` writes them — `torch_state` (TSAV, a
//!   `torch.save` zip of `{"state_dict": …, **metadata}` by our `.pt` writer, which
//!   `torch.load(weights_only=True)` and `load_fold_or_mind` load), `llm_manifest`,
//!   the given JSON chunks, `nuclear_arrays` (NPZ0: numpy dtypes torch lacks, and the
//!   tensors `nuclear` names), then `STEN` for what neither archive holds. Read back,
//!   the tensors are named `torch_state/state_dict.<name>` and `nuclear_arrays/<name>`.
//!
//! `created_at_unix` comes
//! from `WriteOptions::timestamp` (else `SOURCE_DATE_EPOCH`, else now; whole seconds), so output is deterministic given it.
//!
//! **FOLD→FOLD copies every chunk byte for byte.** A FOLD source hands each chunk over
//! as stored ([`FoldFile::stored_chunk`] through `TensorSource::chunk_stored`: the
//! header with the index entry's values, the payload checked as a read checks it —
//! repaired by the parity when needed — and the parity), and the writer copies it
//! ([`FoldWriter::copy_chunk`]) after checking the header against the bytes, the
//! CRC-32C and the index entry's SHA-256, keeping its `ecc_algo`: JSON, TSAV, NPZ0 and
//! STEN chunks alike, pyfolds' zstd frames and pyfolds 1.0.2's parity layout included,
//! in the source's order; `chunk_hashes` and `manifest_hash` come out the same. A file
//! of ours rewritten with the same timestamp is the same file. What changes a chunk,
//! each said in the report's notes: `ecc` (`--ecc N`; 0 removes it) computes the parity
//! anew over the same stored payload; `compression` zstd compresses the chunks stored
//! raw (compressed ones are kept; their parity of the kind they had); `recode`
//! (`--recode`) decodes every chunk and encodes it as a fresh write would. A `STEN` or
//! `NPZ0` chunk is copied only while every tensor it holds is written as the chunk has
//! it (same name, dtype, shape, layout, attributes): one dequantized, or left out by
//! the caller's source, makes its tensors go out as `STEN` chunks, with a note naming
//! the chunk and the tensor. Tensors of copied chunks (and of a copied `TSAV`) are not
//! written again. From any other source, opaque chunks are encoded from their bytes.
//!
//! Parity is written block-wise; a chunk of at most `255 - N` stored bytes has the same
//! parity in pyfolds 1.0.2's layout, so 1.0.2 reads such files with its ECC check.
//! Given the same chunks, metadata and timestamp, the output is byte-identical to
//! pyfolds 1.0.2's `FoldWriter` (a peer test checks it).
//!
//! # Deviations and limits
//!
//! - `MAX_CHUNK_SIZE` is the spec's 1 GiB (pyfolds uses 2 GiB): larger chunks are
//!   refused on read (`LimitExceeded`) and on write.
//! - The index is read as Python's `json` reads it ([`pyjson::loads`]): `NaN` and
//!   `Infinity` tokens and big integers are accepted (up to 128 bits; Python has no
//!   bound), so their `manifest_hash` verifies. A lone UTF-16 surrogate escape, which a
//!   Rust string cannot hold, becomes U+FFFD (and such a manifest will not verify).
//! - Duplicate chunk names (pyfolds reads the first) are rejected.
//! - On write, the index is Python's JSON as pyfolds writes it: non-finite floats are
//!   bare `NaN`/`Infinity` and integers keep every digit (strict JSON parsers other than
//!   Python's refuse the former).
//!   Byte strings are stored as `{"$bytes": "<hex>"}` and read back as that map.
//! - `flags` other than 0 and 1 (pyfolds treats them as uncompressed) are refused.

pub mod check;
pub mod checkpoint;
pub mod ecc;
pub mod index;
pub mod npz;
pub mod raw;
pub mod read;
pub mod sten;
pub mod tsav;
pub mod write;

/// Python's `json` text, shared with AERO (it lives in [`crate::util::pyjson`]); kept
/// here too so the path `formats::fold::pyjson` still works.
pub use crate::util::pyjson;

use std::borrow::Cow;
use std::collections::HashSet;

pub use check::{manifest_hash, ChunkRepair, RepairPlan};
pub use read::FoldFile;
pub use write::FoldWriter;

use crate::any::{Access, ReadOptions};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::formats::Codec;
use crate::metadata::Metadata;
use crate::model::{Container, TensorSource};
use crate::options;
use crate::options::WriteOptions;
use crate::source::SourceRef;
use crate::tensor::{ChunkInfo, TensorInfo, TensorView};
use crate::verify::{VerifyOptions, VerifyReport};
use crate::write::{Capabilities, MetadataSupport, WriteReport, WriteSeek};

/// FOLD in the codec table.
pub const CODEC: Codec = Codec::new()
    .reader(open, Access::Ranges, "fold")
    .writer(write, capabilities)
    .options(FoldOptions::OPTIONS);

options::format_options! {
    /// FOLD's writer options (`-O ecc=16`, Python `ecc=16`, or
    /// `WriteOptions::default().with(FoldOptions::default().ecc(Some(16)))`), beside
    /// the shared `compression` and `timestamp`.
    pub struct FoldOptions {
        shared: [options::COMPRESSION, options::TIMESTAMP],
        /// Reed-Solomon parity bytes per 255-byte block (`ecc_algo` `reed_solomon:N`).
        pub ecc: Option<u8> = (options::OptionKind::Int, "Reed-Solomon parity bytes per 255-byte block"),
        /// Re-encode the chunks of a FOLD source (decode them, then compress and add
        /// parity as this write says) instead of copying their stored bytes.
        pub recode: bool = (options::OptionKind::Bool,
            "FOLD source: re-encode its chunks with this write's compression and parity instead of copying them"),
        /// Write the spec's standard checkpoint chunks (`torch_state`, `llm_manifest`,
        /// `nuclear_arrays`, …) instead of one `STEN` chunk per tensor ([`checkpoint`]).
        pub checkpoint: bool = (options::OptionKind::Bool,
            "write a checkpoint: tensors in torch_state (a torch.save archive pyfolds resumes from) and nuclear_arrays (NPZ0), plus llm_manifest"),
        /// JSON chunks to add: `llm_manifest`, `metrics`, `history`, `telemetry`
        /// (`--chunk NAME=FILE`, repeatable; Python `chunks={NAME: obj}`).
        pub chunk: checkpoint::ChunkArgs = (options::OptionKind::Texts,
            "add a JSON chunk NAME=FILE, NAME one of llm_manifest, metrics, history, telemetry (repeatable)",
            aliases: &["chunks"]),
        /// With `checkpoint`: tensors also copied into `nuclear_arrays` (as pyfolds
        /// keeps N, I, W there for analysis without torch).
        pub nuclear: Vec<String> = (options::OptionKind::Texts,
            "with checkpoint: a tensor also copied into nuclear_arrays (repeatable)"),
    }
}

fn open<'d>(src: SourceRef<'d>, opts: &ReadOptions) -> Result<Box<dyn Container + 'd>> {
    let mut f = FoldFile::open(src, opts)?;
    if let Some((stored, computed)) = f.manifest_check() {
        if stored != computed {
            f.warnings.push(format!(
                "manifest_hash mismatch: stored {stored}, computed {computed} (metadata may be corrupted)"
            ));
        }
    }
    Ok(Box::new(f))
}

fn write(
    src: &dyn TensorSource,
    out: &mut dyn WriteSeek,
    opts: &WriteOptions,
) -> Result<WriteReport> {
    let fo = FoldOptions::from_options(opts)?;
    let limits = crate::Limits::default();
    let given = fo.chunk.load(&limits)?;
    if !fo.checkpoint && !fo.nuclear.is_empty() {
        return Err(Error::invalid_input("option nuclear needs checkpoint"));
    }
    let plan = match fo.checkpoint {
        true => Some(checkpoint::plan(src, &fo.nuclear)?),
        false => None,
    };
    let created = match &opts.timestamp {
        Some(t) => write::parse_timestamp(t).ok_or_else(|| {
            Error::invalid_input(format!("timestamp {t:?} is not YYYY-MM-DDTHH:MM:SSZ"))
        })?,
        // Whole seconds, like a given timestamp; SOURCE_DATE_EPOCH when set.
        None => crate::util::clock::stamp_secs()? as f64,
    };
    let mut report = WriteReport::default();
    let mut w = FoldWriter::new(out, opts.compression, fo.ecc)?;
    // Tensors that go out inside a chunk (copied from the source, or the checkpoint's
    // archives), not as STEN chunks.
    let mut carried: HashSet<String> = HashSet::new();
    let is_given = |name: &str| given.iter().any(|(n, _)| n == name);
    let json = |w: &mut FoldWriter<_>, name: &str, bytes: &[u8]| {
        w.add_chunk(name, *b"JSON", &[bytes])
            .map_err(|e| e.at_subject(format!("chunk {name:?}")))
    };
    if let Some(plan) = &plan {
        let has = |name: &str| is_given(name) || src.chunks().iter().any(|c| c.name == name);
        let mut written = vec!["torch_state"];
        written.extend(
            JSON_ORDER
                .iter()
                .copied()
                .filter(|n| has(n) || *n == "llm_manifest"),
        );
        if !plan.npz.is_empty() {
            written.push("nuclear_arrays");
        }
        let torch = checkpoint::torch_state(src, &plan.torch)?;
        w.add_chunk("torch_state", *b"TSAV", &[&torch])
            .map_err(|e| e.at_subject("chunk \"torch_state\""))?;
        drop(torch);
        if !has("llm_manifest") {
            json(
                &mut w,
                "llm_manifest",
                &checkpoint::manifest(src.metadata(), created, &written),
            )?;
        }
        // In pyfolds' order, whatever the order given.
        for name in JSON_ORDER {
            if let Some((_, bytes)) = given.iter().find(|(n, _)| n == name) {
                json(&mut w, name, bytes)?;
            }
        }
        if !plan.npz.is_empty() {
            let npz = checkpoint::nuclear_arrays(src, &plan.npz)?;
            w.add_chunk("nuclear_arrays", *b"NPZ0", &[&npz])
                .map_err(|e| e.at_subject("chunk \"nuclear_arrays\""))?;
        }
        carried.extend(plan.torch.iter().map(|t| t.name.clone()));
        carried.extend(plan.npz.iter().map(|t| t.name.clone()));
        if !plan.sten.is_empty() {
            report.notes.push(format!(
                "{} tensors neither torch_state nor nuclear_arrays can hold written as STEN chunks (first: {:?})",
                plan.sten.len(),
                plan.sten[0]
            ));
        }
    } else {
        for (name, bytes) in &given {
            json(&mut w, name, bytes)?;
        }
    }
    // Chunks copied as stored, with new parity, compressed now (`write::Copied`).
    let mut copied = [0usize; 3];
    for c in src.chunks() {
        if is_given(&c.name) {
            report.notes.push(format!(
                "chunk {:?} of the source replaced by the one given",
                c.name
            ));
            continue;
        }
        if plan.is_some() && c.holds_tensors {
            // The checkpoint's archives (or fresh STEN chunks) hold these tensors.
            continue;
        }
        let stored = match fo.recode {
            true => None,
            false => match src.chunk_stored(&c.name) {
                Ok(s) => s.filter(|s| s.format == Format::Fold),
                // A tensor chunk that cannot be read: its tensors are not listed either
                // (a salvaging open reports them lost); it is not carried.
                Err(e) if c.holds_tensors => {
                    report
                        .notes
                        .push(format!("chunk {:?} not carried: {e}", c.name));
                    continue;
                }
                Err(e) => return Err(e.at_subject(format!("chunk {:?}", c.name))),
            },
        };
        if c.holds_tensors {
            // A FOLD source's STEN/NPZ0 chunk is copied when every tensor it holds is
            // written as the source has it; otherwise its tensors go out as STEN chunks.
            let Some(stored) = stored else { continue };
            match carried_tensors(src, c, &stored, &limits) {
                Ok(names) => {
                    let how = w
                        .copy_chunk(&c.name, &stored, fo.ecc)
                        .map_err(|e| e.at_subject(format!("chunk {:?}", c.name)))?;
                    copied[how as usize] += 1;
                    carried.extend(names);
                }
                Err(why) => report.notes.push(format!(
                    "chunk {:?} ({}) rewritten, one STEN chunk per tensor: {why}",
                    c.name, c.kind
                )),
            }
            continue;
        }
        if let Some(stored) = stored {
            let how = w
                .copy_chunk(&c.name, &stored, fo.ecc)
                .map_err(|e| e.at_subject(format!("chunk {:?}", c.name)))?;
            copied[how as usize] += 1;
            continue;
        }
        let ctype: [u8; 4] = match c.kind.as_bytes().try_into() {
            Ok(b) if c.kind.bytes().all(|x| x.is_ascii_graphic() || x == b' ') => b,
            _ => {
                report.notes.push(format!(
                    "chunk {:?} of kind {:?} stored as ctype RAW0",
                    c.name, c.kind
                ));
                *b"RAW0"
            }
        };
        let bytes = src.chunk(&c.name)?;
        w.add_chunk(&c.name, ctype, &[&bytes])
            .map_err(|e| e.at_subject(format!("chunk {:?}", c.name)))?;
    }
    if copied[1] > 0 {
        report.notes.push(format!(
            "{} chunks copied with their parity computed anew (ecc)",
            copied[1]
        ));
    }
    if copied[2] > 0 {
        report.notes.push(format!(
            "{} chunks stored raw in the source compressed",
            copied[2]
        ));
    }
    // Tensors a carried TSAV chunk lists are in it already (tsav.rs).
    carried.extend(tsav::listed_in_carried(src, &limits));
    let order = (src.tensor_infos().iter())
        .filter(|i| !carried.contains(&i.name))
        .map(|i| i.name.clone())
        .collect();
    let w = crate::write::drive(src, write::StenStream { w, order })?;
    w.finish(src.metadata(), created)?;
    Ok(report)
}

/// The JSON chunks in the order pyfolds writes them.
const JSON_ORDER: [&str; 4] = checkpoint::JSON_CHUNKS;

/// The tensors a FOLD tensor chunk (`STEN`, `NPZ0`) of the source holds, when each is
/// written as the chunk has it (same name, dtype, shape, layout, attributes: not cast,
/// densified, dequantized or left out), so the chunk can be copied; otherwise why not.
fn carried_tensors(
    src: &dyn TensorSource,
    c: &ChunkInfo,
    stored: &crate::tensor::StoredChunk<'_>,
    limits: &crate::Limits,
) -> std::result::Result<Vec<String>, String> {
    let listed: Vec<TensorInfo> = match c.kind.as_str() {
        "STEN" => {
            let header = stored
                .pieces
                .first()
                .and_then(|h| raw::ChunkHeader::parse(h).ok())
                .ok_or("no chunk header")?;
            let payload = stored.pieces.get(1).ok_or("no payload")?;
            let h = match header.flags {
                raw::FLAG_COMP_ZSTD => zstd::stream::read::Decoder::with_buffer(payload.as_ref())
                    .map_err(|e| Error::malformed("zstd").with_source(e))
                    .and_then(|d| sten::read_header(d, header.uncomp_len)),
                _ => sten::read_header(payload.as_ref(), header.uncomp_len),
            };
            let h = h.map_err(|e| e.to_string())?;
            (sten::logical_tensors(&c.name, &h).map_err(|e| e.to_string())?)
                .into_iter()
                .map(|(i, _)| i)
                .collect()
        }
        "NPZ0" => {
            let bytes = src.chunk(&c.name).map_err(|e| e.to_string())?;
            let (arrays, _) = npz::list(&bytes, limits).map_err(|e| e.to_string())?;
            (arrays.into_iter())
                .map(|a| TensorInfo::dense(format!("{}/{}", c.name, a.name), a.dtype, a.shape))
                .collect()
        }
        other => return Err(format!("a {other:?} chunk's tensors cannot be listed")),
    };
    let infos = src.tensor_infos();
    let mut names = Vec::with_capacity(listed.len());
    for t in listed {
        let Some(got) = infos.iter().find(|i| i.name == t.name) else {
            return Err(format!("tensor {:?} is not written", t.name));
        };
        if got.dtype != t.dtype
            || got.shape != t.shape
            || got.layout != t.layout
            || got.attrs != t.attrs
        {
            return Err(format!(
                "tensor {:?} is written as {} {:?} {}, the chunk holds {} {:?} {}",
                t.name, got.dtype, got.shape, got.layout, t.dtype, t.shape, t.layout
            ));
        }
        names.push(t.name);
    }
    Ok(names)
}

/// What FOLD v1.2 can hold.
pub fn capabilities() -> Capabilities {
    Capabilities {
        format: Format::Fold,
        dtypes: &DType::ALL,
        sparse: true,
        other_layouts: true,
        metadata: MetadataSupport::Tree,
        chunks: true,
        compression: &["zstd"],
        integrity: &[
            "crc32c",
            "sha256",
            "chunk_hashes",
            "manifest_hash",
            "reed-solomon",
        ],
        zero_copy: true,
        chunk_copies: true,
        typed_metadata: false,
    }
}

/// Repairs `data` (a FOLD file) into `out` (see [`FoldFile::plan_repair`]). An
/// `Integrity` error, with nothing written, when a chunk cannot be restored.
pub fn repair(
    data: &[u8],
    opts: &ReadOptions,
    out: &mut dyn std::io::Write,
) -> Result<Vec<ChunkRepair>> {
    let f = FoldFile::parse(data, &opts.limits)?;
    let plan = f.plan_repair()?;
    if let Some(c) = plan.chunks.iter().find(|c| c.status == "unrecoverable") {
        return Err(Error::integrity(format!(
            "cannot repair: {}",
            c.detail.as_deref().unwrap_or("unrecoverable")
        ))
        .at_subject(format!("chunk {:?}", c.name)));
    }
    plan.write_repaired(data, out)?;
    Ok(plan.chunks)
}

impl<'d> TensorSource for FoldFile<'d> {
    fn metadata(&self) -> &Metadata {
        self.user_metadata()
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        FoldFile::tensor_infos(self)
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        self.tensor_view(name)
    }
    fn chunks(&self) -> &[ChunkInfo] {
        self.chunk_infos()
    }
    fn chunk(&self, name: &str) -> Result<Cow<'_, [u8]>> {
        self.chunk_bytes(name)
    }
    fn source_format(&self) -> Option<Format> {
        Some(Format::Fold)
    }
    fn chunk_stored(&self, name: &str) -> Result<Option<crate::tensor::StoredChunk<'_>>> {
        self.stored_chunk(name).map(Some)
    }
}

impl<'d> Container for FoldFile<'d> {
    fn format(&self) -> Format {
        Format::Fold
    }
    fn version(&self) -> String {
        self.version.clone()
    }
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport {
        self.verify_report(opts)
    }
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
    fn lost(&self) -> Vec<crate::refusal::Lost> {
        self.damaged
            .iter()
            .filter_map(|(i, err)| {
                let e = self.entries.get(*i)?;
                Some(crate::refusal::Lost {
                    what: format!(
                        "{}, a {} chunk, and the tensors it holds",
                        e.subject(),
                        e.ctype()
                    ),
                    why: err.to_string(),
                })
            })
            .collect()
    }
}
