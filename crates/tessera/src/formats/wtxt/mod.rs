//! WTXT/Chunks v1.1: armored, deterministic, signed, delta-able text snapshots.
//!
//! No other implementation exists; this one defines the format, following
//! `wtxt-v1.1.md` and RESOLUTIONS (WTXT 1–16) exactly.
//!
//! # Layout (all ASCII, LF line ends)
//!
//! | line | content |
//! | --- | --- |
//! | 1 | `WTXT 1` |
//! | 2 | `meta schema=weights/v1 gen=000123 ts=…Z build=… endian=LE host=… cuda=…` |
//! | 3 | `cap ext=crc32c,line_parity[,arr_hmac][,delta_v2,row_blocking][,ext_dtypes][,ext_names]` |
//! | 4 | `root sha256_all=… merkle_prev=… merkle_this=… fastxor=<hex16>` or, in a WTXT-S, `root_pending sha256_all=0… note="finalize with WSUM"` |
//! | 5? | `sign ed25519=<88 base64> keyid=<hex16>` (signs lines 1–4 with their LFs) |
//! | … | per array, in ASCII name order: `arr name= dtype= shape= order=C bytes= sha256= hmac= salt=`, optional `idx rows_per_chunk= row_size= row_blocking=on`, chunks `ch ix=%06 off=%012 len= sha256= crc32c=%08x b64=on width=76 lines=` + base64 lines (76 chars, the last 1–76, each + ` <parity nibble>`) + `endch`, then `endarr` |
//! | last | optional `audit …`, then `endwtxt` |
//!
//! Hashes: `sha256_all` = SHA-256 over every array's `arr` line (no LF) then its raw
//! bytes; `merkle_this` = SHA-256(merkle_prev ‖ sha256_all ‖ ts ‖ gen ‖ build);
//! `fastxor` = XOR of all raw bytes as LE u64 words (tail zero-padded); HMAC =
//! HMAC-SHA256(key, salt ‖ raw); `keyid` = SHA-256(public key)[..8].
//!
//! # What the writer chooses
//!
//! - Chunking: by default row blocking with `rows_per_chunk = 32768 / row_size` (rows of
//!   at most 32 KiB; chunks ≤ 32 KiB ending on row boundaries: a 4096×64 f64 matrix gets
//!   `rows_per_chunk=64`, 32 KiB chunks); plain 32 KiB chunks without `idx` for scalars and
//!   rows over 32 KiB; `WtxtOptions::rows_per_chunk` forces row blocking. Readers
//!   accept any chunking that tiles the array.
//! - `cap` lists what the file uses: `crc32c,line_parity` always; `arr_hmac` with a
//!   key; `delta_v2,row_blocking` when an array has an `idx` line; `ext_dtypes` for
//!   f16/bf16/bool/f8; `ext_names` (ours, see below).
//! - Defaults: `gen` = previous snapshot's + 1 (with `prev`) or 0, `ts` now (`SOURCE_DATE_EPOCH` when set), `build`
//!   `tessera-<version>`, `host=cpu`, `cuda=off`. Without an HMAC key `hmac` and `salt`
//!   are zeros; with one, a random salt per array unless `fixed_salt`.
//! - The root (and `sign`) line has a fixed width: it is written as a placeholder and
//!   patched once every array is hashed, so the source is read once. With
//!   `WtxtOptions::streaming` the header says `root_pending` instead and the root goes
//!   to `OUT.wsum` (listed in `WriteReport::extra_files`). The writer hands the WSUM to
//!   its caller (`WriteReport::side_files`), and `convert::write_file` commits it with
//!   the main file (`util::atomic::write_atomic_group`): both temporaries written and
//!   fsynced (neither with `WriteOptions::no_fsync`), then the old `OUT.wsum` removed,
//!   `OUT` renamed, `OUT.wsum` renamed, directory fsynced. A crash in between leaves
//!   the old pair, a main file without a WSUM (read as "unfinalized", never as
//!   damage), or the new pair: never a new `OUT` beside a stale `OUT.wsum` that fails
//!   verify, nor an old `OUT` beside a new one. (Removing the old WSUM first is what
//!   rules the mixed pairs out: two renames cannot be one step.) `WtxtOptions::wsum`
//!   names another path for the WSUM (the output may then be a pipe); `tessera wtxt
//!   finalize` ([`wsum::finalize`]) writes the WSUM of a WTXT-S that has none, after
//!   checking every array.
//! - Encryption as written (`WtxtOptions::age_recipients` / `age_passphrase`): the text
//!   is built in memory, encrypted there (age ASCII armor, [`crypt`]) and only the
//!   armor is written, so no plaintext reaches the disk.
//! - Speed: the writer speaks the one writer protocol ([`crate::write::stream`]): the
//!   driver reads arrays in ~4 MiB batches and its companion ([`pipeline::ArrayEncoder`])
//!   hashes and encodes them on the rayon pool (crc32c, SHA-256, base64 with
//!   `base64-simd`, parity) while the writing thread writes the previous batch's text
//!   and adds it to `sha256_all`; an array up to 2 MiB is hashed and encoded by one
//!   task, so the second pass finds it in cache. An array over 16 MiB is encoded a
//!   segment at a time (the whole chunks that fit in 16 MiB, so no chunk is cut) with
//!   its `sha256_all` share hashed beside. Memory: two batches of tensors and text (or
//!   one 16 MiB segment),
//!   plus the hash states. SHA-256 is `sha2`, which uses the SHA-NI instructions when
//!   the CPU has them (no `asm` feature needed).
//!
//! # Deviations and extensions (each says why)
//!
//! - `ext_names`: tensor names from other formats carry `.` (`layers.0.weight`), which
//!   `[A-Za-z0-9_]+` forbids. Rather than rename (lossy) we allow any TOKEN (printable
//!   ASCII, no space, `=`, `"`) when `cap` lists `ext_names`.
//! - DELTA v2 is written as RESOLUTIONS item 15 says (header, the target's `meta`, bare
//!   `arr name=` blocks, `enddelta`); applying it chains the result's root from the
//!   base. As an opt-in extension (`--with-target-root`) a delta also carries the
//!   target's `cap` and `root` lines and `hmac=`/`salt=` on `arr` lines, which rebuilds
//!   any target byte for byte (a `merkle_prev` of another chain and keyed HMACs cannot
//!   be recomputed) and checks the result against the target's root. `apply` reads
//!   both; see [`delta`].
//! - A WTXT-S carries no `sign` line; its WSUM is signed (RESOLUTIONS 14).
//!
//! # Reading
//!
//! Strict: every header, `arr`, `idx`, `ch` line is checked for ASCII, LF, single spaces,
//! field order and widths; violations are Malformed with `line N`. Chunk bodies are
//! checked when decoded (layout, parity, base64, crc32c, sha256), so a damaged chunk
//! fails only its own array; `verify` lists every damaged chunk; `salvage` drops the
//! damaged arrays (listed in `warnings()`) and keeps the rest. A WTXT-S is finalized by
//! `<path>.wsum`; opening a `.wsum` opens its WTXT. age-armored files are decrypted with
//! the identities or passphrase of `ReadOptions`.
//!
//! The optional `audit` line is written from `WtxtOptions::audit` (checked to be
//! `key=value` fields) and read into `WtxtFile::audit`; no integrity layer covers it.
//!
//! # Limits
//!
//! Arrays of at most 999,999,999,999 bytes and 1,000,000 chunks (field widths); an
//! array's declared size must fit in the file and in `Limits::max_decoded_bytes`.

mod armor;
pub mod chunk;
#[cfg(feature = "age")]
pub mod crypt;
pub mod delta;
pub mod header;
pub mod pipeline;
pub mod raw;
pub mod read;
pub mod verify;
pub mod write;
pub mod wsum;

use std::borrow::Cow;

pub use armor::{lines_for, parity};
pub use read::WtxtFile;
pub use write::WtxtWriter;

use crate::any::{Access, ReadOptions};
use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::format::Format;
use crate::formats::Codec;
use crate::metadata::Metadata;
use crate::model::{Container, TensorSource};
use crate::options::{self, OptionKind};
use crate::source::SourceRef;
use crate::tensor::{Storage, TensorInfo, TensorView};
use crate::verify::{VerifyOptions, VerifyReport};
use crate::write::{Capabilities, MetadataSupport};
use std::path::PathBuf;

options::format_options! {
    /// WTXT's writer options (`-O name=value`, Python keywords, or
    /// `WriteOptions::default().with(WtxtOptions::default().generation(Some(3)))`); the
    /// shared `timestamp` is the header's `ts`.
    pub struct WtxtOptions {
        shared: [options::TIMESTAMP],
        /// The HMAC-SHA256 key for every array.
        pub hmac_key: Option<Vec<u8>> = (OptionKind::Secret, "HMAC-SHA256 key for every array",
            aliases: &["hmac_key_file"]),
        /// The Ed25519 secret key seed to sign with.
        pub sign_key: Option<[u8; 32]> = (OptionKind::Secret, "Ed25519 secret key to sign with"),
        /// The previous snapshot to chain the merkle from.
        pub prev: Option<PathBuf> = (OptionKind::Path, "previous snapshot to chain the merkle from"),
        /// The generation number (`gen`); the previous one's plus one by default.
        pub generation: Option<u64> = (OptionKind::Int, "generation number", aliases: &["gen"]),
        /// The build identifier (`build`).
        pub build: Option<String> = (OptionKind::Text, "build identifier"),
        /// The host name (`host`).
        pub host: Option<String> = (OptionKind::Text, "host name"),
        /// The CUDA version token (`cuda`).
        pub cuda: Option<String> = (OptionKind::Text, "CUDA version token"),
        /// The optional `audit` line: `key=value` fields, quoted values allowed
        /// (`kahan_max_resid=1.1e-15 notes="gamma=0.96"`).
        pub audit: Option<String> = (OptionKind::Text,
            "audit line fields, e.g. 'kahan_max_resid=1.1e-15 notes=\"gamma=0.96\"'"),
        /// Rows per chunk (row blocking).
        pub rows_per_chunk: Option<u64> = (OptionKind::Int, "rows per chunk (row blocking)"),
        /// Streaming finalization (WTXT-S plus `OUT.wsum`).
        pub streaming: bool = (OptionKind::Bool, "streaming finalization (WTXT-S plus OUT.wsum)"),
        /// With `streaming`: where the WSUM goes instead of beside the output (needed
        /// when the output is a pipe).
        pub wsum: Option<PathBuf> = (OptionKind::Path,
            "with streaming: the WSUM's path (default OUT.wsum; needed when OUT is a pipe)"),
        /// Encrypt the file as it is written, with age (ASCII armor), for these X25519
        /// recipients (`age1…`): no plaintext touches the disk.
        pub age_recipients: Vec<String> = (OptionKind::Texts,
            "encrypt as written for this age recipient (age1…; repeatable)",
            aliases: &["age_recipient"]),
        /// Encrypt the file as it is written, with this age passphrase.
        pub age_passphrase: Option<Vec<u8>> = (OptionKind::Secret,
            "encrypt as written with this age passphrase",
            aliases: &["age_passphrase_file"]),
        /// One fixed HMAC salt for every array instead of random ones (byte-exact test
        /// vectors; identical content in two generations then gets the same HMAC: use
        /// `salt_seed` for reproducible snapshots).
        pub fixed_salt: Option<[u8; 8]> = (OptionKind::Hex(8),
            "one fixed HMAC salt for every array (test vectors; see salt_seed)",
            aliases: &["salt"]),
        /// Reproducible salts that still rotate: each array's derived from this seed, the
        /// generation and the array's name.
        pub salt_seed: Option<String> = (OptionKind::Text,
            "reproducible HMAC salts derived from this seed, the generation and the array name"),
    }
}

/// WTXT/Chunks v1.1 in the codec table.
pub const CODEC: Codec = Codec::new()
    .own_signature("WTXT has its own: tessera wtxt sign")
    .reader(open, Access::Whole, "wtxt")
    .writer(write::write, capabilities)
    .options(WtxtOptions::OPTIONS);

/// A WTXT DELTA v2 file: detected, applied to its base with `tessera wtxt apply`.
pub const DELTA_CODEC: Codec = Codec::new().refusal(
    ErrorKind::Unsupported,
    "a WTXT delta holds changed chunks, not a model: apply it to its base with \
         `tessera wtxt apply BASE DELTA -o OUT`",
);

/// A WSUM finalization line (`.wsum`), read as the WTXT-S snapshot beside it.
pub const WSUM_CODEC: Codec = Codec::new().reader(open, Access::Whole, "wtxt");

/// An age ASCII-armored file, decrypted and read as the WTXT snapshot inside.
pub const AGE_CODEC: Codec = Codec::new().reader(open, Access::Whole, "wtxt");

/// An opened WTXT file.
pub struct WtxtContainer<'d> {
    file: WtxtFile<'d>,
    infos: Vec<TensorInfo>,
    metadata: Metadata,
    warnings: Vec<String>,
    /// What a salvaging open left out (also said in `warnings`).
    lost: Vec<crate::refusal::Lost>,
    /// [`ReadOptions::hmac_key`]: array HMACs are checked on read when set.
    hmac_key: Option<Vec<u8>>,
}

/// Opens WTXT bytes (or a WSUM, or an age-armored file).
pub fn open<'d>(src: SourceRef<'d>, opts: &ReadOptions) -> Result<Box<dyn Container + 'd>> {
    let data = src.in_memory()?;
    Ok(Box::new(open_container(Cow::Borrowed(data), opts)?))
}

/// [`open`] returning the concrete type.
pub fn open_container<'d>(data: Cow<'d, [u8]>, opts: &ReadOptions) -> Result<WtxtContainer<'d>> {
    match Format::detect(&data) {
        Some(Format::Wtxt) => {}
        #[cfg(feature = "age")]
        Some(Format::AgeArmor) => {
            let plain = crypt::decrypt(&data, opts)?;
            if Format::detect(&plain) != Some(Format::Wtxt) {
                return Err(Error::unsupported(
                    "the decrypted file is not a WTXT snapshot",
                ));
            }
            return open_container(Cow::Owned(plain), opts);
        }
        Some(Format::Wsum) => {
            let wsum = wsum::Wsum::parse(&data)?;
            let p = opts
                .path
                .as_ref()
                .and_then(|p| p.to_str())
                .and_then(|s| s.strip_suffix(".wsum"))
                .ok_or_else(|| {
                    Error::invalid_input("a WSUM is read beside its WTXT-S: open FILE.wsum by path")
                })?;
            let main = std::fs::read(p).map_err(|e| Error::from(e).at_subject(p.to_string()))?;
            let mut o = opts.clone();
            o.path = None;
            let mut c = open_container(Cow::Owned(main), &o)?;
            c.file.wsum = Some(wsum);
            c.file.wsum_problem = None;
            return Ok(c);
        }
        #[cfg(not(feature = "age"))]
        Some(Format::AgeArmor) => {
            return Err(Error::unsupported("age: built without the `age` feature"));
        }
        // Anything else fails on line 1 with the reason.
        _ => {}
    }
    let file = WtxtFile::parse(data, opts)?;
    let mut lost: Vec<crate::refusal::Lost> = file
        .lost
        .iter()
        .map(|(what, why)| crate::refusal::Lost {
            what: what.clone(),
            why: why.clone(),
        })
        .collect();
    let mut warnings: Vec<String> = file
        .lost
        .iter()
        .map(|(what, why)| format!("lost {what}: {why}"))
        .collect();
    if let Some(p) = &file.wsum_problem {
        warnings.push(format!("WTXT-S {p}"));
    }
    let mut keep = vec![true; file.arrays.len()];
    if opts.salvage {
        for (i, a) in file.arrays.iter().enumerate() {
            if let Err(e) = decode_checked(&file, a, true) {
                keep[i] = false;
                warnings.push(format!("lost array {:?}: {e}", a.arr.name));
                lost.push(crate::refusal::Lost {
                    what: format!("array {:?}", a.arr.name),
                    why: e.to_string(),
                });
            }
        }
    }
    let infos = file
        .arrays
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(a, _)| {
            let mut info = TensorInfo::dense(a.arr.name.clone(), a.arr.dtype, a.arr.shape.clone());
            let mut digests = vec!["crc32c".to_string(), "sha256".to_string()];
            if !a.arr.unauthenticated() {
                digests.push("hmac-sha256".into());
            }
            info.storage = Storage {
                offset: Some(a.block.start as u64),
                stored_bytes: a.block.len() as u64,
                encoding: "base64".into(),
                digests,
            };
            info
        })
        .collect();
    Ok(WtxtContainer {
        file,
        infos,
        metadata: Metadata::new(),
        warnings,
        lost,
        hmac_key: opts.hmac_key.clone(),
    })
}

/// Decodes an array, failing on the first damaged chunk or a wrong array SHA-256.
fn decode_checked(f: &WtxtFile<'_>, a: &read::ArrayRef, chunk_sha: bool) -> Result<Vec<u8>> {
    let d = chunk::decode_array(f.bytes(), a, chunk_sha, 0);
    if let Some(fault) = d.faults.first() {
        // Damage inside a chunk's lines (armor, parity, base64, digests) is found by
        // WTXT's per-chunk integrity layers: an integrity failure (exit 1), as `verify`
        // reports it, whichever layer caught it.
        let msg = format!("{}: {}", fault.layer, fault.detail);
        return Err(Error::integrity(msg).at_subject(fault.subject(&a.arr.name)));
    }
    let sha = crate::util::sha256(&d.buf);
    if sha != a.arr.sha256 {
        return Err(Error::integrity(format!(
            "sha256: expected {}, computed {}",
            crate::util::hex(&a.arr.sha256),
            crate::util::hex(&sha)
        ))
        .at_subject(format!("array {:?} (line {})", a.arr.name, a.line_no)));
    }
    Ok(d.buf)
}

impl<'d> WtxtContainer<'d> {
    /// The parsed file.
    pub fn file(&self) -> &WtxtFile<'d> {
        &self.file
    }
}

impl TensorSource for WtxtContainer<'_> {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let info = self
            .infos
            .iter()
            .find(|i| i.name == name)
            .ok_or_else(|| Error::not_found(format!("no tensor named {name:?}")))?;
        let a = self
            .file
            .array(name)
            .ok_or_else(|| Error::not_found(format!("no tensor named {name:?}")))?;
        let buf = decode_checked(&self.file, a, false)?;
        if let Some(key) = &self.hmac_key {
            let subject = || format!("array {:?} (line {})", a.arr.name, a.line_no);
            if a.arr.unauthenticated() {
                return Err(Error::integrity(
                    "hmac: the array carries no HMAC (hmac=0) but a key was given",
                )
                .at_subject(subject()));
            }
            let mac = write::hmac(key, &a.arr.salt, &buf);
            if mac != a.arr.hmac {
                return Err(Error::integrity(format!(
                    "hmac mismatch: the file says {}, the key gives {}",
                    crate::util::hex(&a.arr.hmac),
                    crate::util::hex(&mac)
                ))
                .at_subject(subject()));
            }
        }
        TensorView::dense(info.clone(), Cow::Owned(buf))
    }
    fn source_format(&self) -> Option<Format> {
        Some(Format::Wtxt)
    }
}

impl Container for WtxtContainer<'_> {
    fn format(&self) -> Format {
        Format::Wtxt
    }
    fn version(&self) -> String {
        "1".into()
    }
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport {
        verify::verify(&self.file, opts)
    }
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
    fn lost(&self) -> Vec<crate::refusal::Lost> {
        self.lost.clone()
    }
}

/// What WTXT/Chunks v1.1 can hold.
pub fn capabilities() -> Capabilities {
    Capabilities {
        format: Format::Wtxt,
        dtypes: &[
            DType::F32,
            DType::F64,
            DType::I8,
            DType::I16,
            DType::I32,
            DType::I64,
            DType::U8,
            DType::U16,
            DType::U32,
            DType::U64,
            DType::F16,
            DType::BF16,
            DType::Bool,
            DType::F8E4M3FN,
            DType::F8E5M2,
        ],
        sparse: false,
        other_layouts: false,
        metadata: MetadataSupport::None,
        chunks: false,
        compression: &[],
        integrity: &[
            "line parity",
            "crc32c",
            "sha256",
            "hmac-sha256",
            "sha256_all",
            "merkle",
            "fastxor",
            "ed25519",
        ],
        zero_copy: false,
        chunk_copies: false,
        typed_metadata: false,
    }
}
