//! Writer options: what each format declares it takes, and the one parser that sets them
//! from the CLI (`-O name=value`, and the older flags as aliases) and from Python keyword
//! arguments (`compression="zstd"`), with one spelling for both.
//!
//! A format lists its options in its codec
//! ([`crate::formats::Codec::options`]), each an [`OptionSpec`] (name, type, help,
//! aliases). [`WriteOptions::apply`] parses a value for an option; the lookups over every
//! format's codec — [`WriteOptions::set`] by name, [`crate::formats::check_options`]
//! (run by every write), which refuses an option the target does not declare, naming
//! the option and the format — sit above the formats, in [`crate::formats`]. The options the formats share — one field of
//! [`WriteOptions`] each, typed — are the constants below; an option only one format
//! has can also live in that format's module and reach its writer through
//! [`WriteOptions::extra`] ([`WriteOptions::extra_int`] and friends).

use std::path::PathBuf;

use crate::error::{Error, Result};

/// Compression for formats that have it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Compression {
    /// Stored as is.
    #[default]
    None,
    /// zstd at a level (3 is the zstd default).
    Zstd(i32),
}

/// A per-tensor/chunk digest to write, for formats that let the writer choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Digest {
    /// CRC-32C (Castagnoli).
    Crc32c,
    /// SHA-256.
    Sha256,
}

/// Options for writers. Each format declares the options it takes (its registry entry,
/// [`crate::options`]) and reads those fields; a write refuses an option the target does
/// not declare. `tessera convert` and Python's `save` set them with
/// [`WriteOptions::set`]. Timestamps, salts and UUIDs default to "now"/random unless
/// fixed here, which makes output byte-deterministic. Its `Debug` never shows the keys
/// (`hmac_key`, `sign_key`): only whether they are set.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct WriteOptions {
    /// Compression (zTensor, FOLD, AERO metadata).
    pub compression: Compression,
    /// Digests to store (zTensor).
    pub digests: Vec<Digest>,
    /// Reed-Solomon parity bytes per block (FOLD `--ecc N`).
    pub ecc: Option<u8>,
    /// HMAC key (WTXT).
    pub hmac_key: Option<Vec<u8>>,
    /// Ed25519 secret key seed, 32 bytes (WTXT `sign`).
    pub sign_key: Option<[u8; 32]>,
    /// Previous snapshot to chain the merkle from (WTXT `--prev`).
    pub prev: Option<PathBuf>,
    /// Generation number (WTXT `gen`).
    pub generation: Option<u64>,
    /// Timestamp `YYYY-MM-DDTHH:MM:SSZ` (WTXT `ts`, zTensor `created_at` if asked).
    pub timestamp: Option<String>,
    /// Build identifier (WTXT `build`).
    pub build: Option<String>,
    /// Host name (WTXT `host`).
    pub host: Option<String>,
    /// CUDA version token (WTXT `cuda`).
    pub cuda: Option<String>,
    /// The optional `audit` line of a WTXT snapshot: `key=value` fields, quoted values
    /// allowed (`kahan_max_resid=1.1e-15 notes="gamma=0.96"`).
    pub audit: Option<String>,
    /// Rows per chunk (WTXT row blocking).
    pub rows_per_chunk: Option<u64>,
    /// Streaming finalization (WTXT-S + WSUM).
    pub streaming: bool,
    /// Fixed HMAC salts instead of random ones (tests, reproducible builds).
    pub fixed_salt: Option<[u8; 8]>,
    /// Maximum shard size in bytes (AERO).
    pub shard_size: Option<u64>,
    /// Per-tensor BLAKE3 hashes (AERO `hash_b3`).
    pub tensor_hashes: bool,
    /// Control-plane integrity chunk (AERO IHSH).
    pub control_integrity: bool,
    /// Page hashes with this page size (AERO PHSH).
    pub page_hashes: Option<u64>,
    /// Fixed file UUID (AERO).
    pub uuid: Option<[u8; 16]>,
    /// Store base_id 0 as the original Python exporter does (GPTRS).
    pub zero_base_id: bool,
    /// Store no digest where the format would store one by default (zTensor v1's
    /// crc32c): `digests=none` (or an empty list).
    pub no_digest: bool,
    /// Where the output goes, for writers that also write a sibling file (WTXT `.wsum`).
    pub path: Option<PathBuf>,
    /// Skip the fsyncs of [`crate::convert::write_file`] (Python's `durable=False`, `tessera convert
    /// --no-fsync`): still atomic, not flushed ([`crate::util::atomic::Durability`]).
    /// Not a format option: every format takes it.
    pub no_fsync: bool,
    /// Options only one format has, declared in its module and set by
    /// [`WriteOptions::set`] (read them with [`WriteOptions::extra_int`] and friends).
    pub extra: std::collections::BTreeMap<String, crate::options::OptionValue>,
}

impl std::fmt::Debug for WriteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secret = |set: bool| if set { "<redacted>" } else { "none" };
        // Destructured so that a new field is a compile error here until it is shown
        // (or, if it is a secret, redacted).
        let WriteOptions {
            compression,
            digests,
            ecc,
            hmac_key,
            sign_key,
            prev,
            generation,
            timestamp,
            build,
            host,
            cuda,
            audit,
            rows_per_chunk,
            streaming,
            fixed_salt,
            shard_size,
            tensor_hashes,
            control_integrity,
            page_hashes,
            uuid,
            zero_base_id,
            no_digest,
            path,
            no_fsync,
            extra,
        } = self;
        f.debug_struct("WriteOptions")
            .field("compression", compression)
            .field("digests", digests)
            .field("ecc", ecc)
            .field("hmac_key", &secret(hmac_key.is_some()))
            .field("sign_key", &secret(sign_key.is_some()))
            .field("prev", prev)
            .field("generation", generation)
            .field("timestamp", timestamp)
            .field("build", build)
            .field("host", host)
            .field("cuda", cuda)
            .field("audit", audit)
            .field("rows_per_chunk", rows_per_chunk)
            .field("streaming", streaming)
            .field("fixed_salt", fixed_salt)
            .field("shard_size", shard_size)
            .field("tensor_hashes", tensor_hashes)
            .field("control_integrity", control_integrity)
            .field("page_hashes", page_hashes)
            .field("uuid", uuid)
            .field("zero_base_id", zero_base_id)
            .field("no_digest", no_digest)
            .field("path", path)
            .field("no_fsync", no_fsync)
            .field("extra", extra)
            .finish()
    }
}

crate::setters::setters!(WriteOptions {
    /// Sets `compression` (zTensor, FOLD, AERO metadata).
    compression: Compression,
    /// Sets `digests`, the digests to store (zTensor).
    digests: Vec<Digest>,
    /// Sets `ecc`, Reed-Solomon parity bytes per block (FOLD).
    ecc: Option<u8>,
    /// Sets `hmac_key` (WTXT).
    hmac_key: Option<Vec<u8>>,
    /// Sets `sign_key`, the Ed25519 secret key seed (WTXT `sign`).
    sign_key: Option<[u8; 32]>,
    /// Sets `prev`, the previous snapshot to chain the merkle from (WTXT).
    prev: Option<PathBuf>,
    /// Sets `generation` (WTXT `gen`).
    generation: Option<u64>,
    /// Sets `timestamp`, `YYYY-MM-DDTHH:MM:SSZ` (WTXT `ts`, zTensor `created_at`).
    timestamp: Option<String>,
    /// Sets `build`, the build identifier (WTXT).
    build: Option<String>,
    /// Sets `host`, the host name (WTXT).
    host: Option<String>,
    /// Sets `cuda`, the CUDA version token (WTXT).
    cuda: Option<String>,
    /// Sets `audit`, the `key=value` fields of WTXT's `audit` line.
    audit: Option<String>,
    /// Sets `rows_per_chunk` (WTXT row blocking).
    rows_per_chunk: Option<u64>,
    /// Sets `streaming` finalization (WTXT-S + WSUM).
    streaming: bool,
    /// Sets `fixed_salt`, fixed HMAC salts instead of random ones.
    fixed_salt: Option<[u8; 8]>,
    /// Sets `shard_size`, the maximum shard size in bytes (AERO).
    shard_size: Option<u64>,
    /// Sets `tensor_hashes`, per-tensor BLAKE3 hashes (AERO `hash_b3`).
    tensor_hashes: bool,
    /// Sets `control_integrity`, the control-plane integrity chunk (AERO IHSH).
    control_integrity: bool,
    /// Sets `page_hashes`, page hashes with this page size (AERO PHSH).
    page_hashes: Option<u64>,
    /// Sets `uuid`, a fixed file UUID (AERO).
    uuid: Option<[u8; 16]>,
    /// Sets `zero_base_id`: store base_id 0 as the original exporter does (GPTRS).
    zero_base_id: bool,
    /// Sets `no_digest`: store no digest where the format stores one by default
    /// (zTensor v1's crc32c).
    no_digest: bool,
    /// Sets `path`, where the output goes (for sibling files such as WTXT's `.wsum`).
    path: Option<PathBuf>,
    /// Sets `no_fsync`: skip the fsyncs of `write_file` (still atomic).
    no_fsync: bool,
    /// Sets `extra`, the options only one format has (usually set by `set`).
    extra: std::collections::BTreeMap<String, crate::options::OptionValue>,
});

/// The type of an option's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OptionKind {
    /// `true`/`false` (`1`/`0`, `yes`/`no`, `on`/`off`); a bare `-O name` means true.
    Bool,
    /// A non-negative integer.
    Int,
    /// A size in bytes, `K`, `M`, `G`, `T` suffixes allowed (`1G`, `4MiB`).
    Size,
    /// Any text.
    Text,
    /// A file path.
    Path,
    /// One of these words (a list of them where the option says so).
    Choice(&'static [&'static str]),
    /// `none`, `zstd` or `zstd:LEVEL` (1–22).
    Compression,
    /// Exactly this many bytes, as hex digits (or bytes from Python).
    Hex(usize),
    /// Key bytes: from a file on the command line, `bytes`/`str` from Python.
    Secret,
}

impl OptionKind {
    /// How the value is written, for help and errors.
    pub fn describe(self) -> String {
        match self {
            OptionKind::Bool => "bool".into(),
            OptionKind::Int => "integer".into(),
            OptionKind::Size => "size (bytes, K/M/G suffixes)".into(),
            OptionKind::Text => "text".into(),
            OptionKind::Path => "path".into(),
            OptionKind::Choice(c) => c.join("|"),
            OptionKind::Compression => "none|zstd|zstd:LEVEL".into(),
            OptionKind::Hex(n) => format!("{} hex digits", 2 * n),
            OptionKind::Secret => "key file (bytes in Python)".into(),
        }
    }
}

/// One writer option a format declares.
#[derive(Debug, Clone, Copy)]
pub struct OptionSpec {
    /// The name, the same in `-O name=value` and Python's `name=value`.
    pub name: &'static str,
    /// Its type.
    pub kind: OptionKind,
    /// One line of help.
    pub help: &'static str,
    /// Older spellings that still work (`compress` for `compression`).
    pub aliases: &'static [&'static str],
}

/// A value handed to [`WriteOptions::set`]: text from the command line, typed values
/// from Python.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum OptionValue {
    /// A flag given without a value (`-O streaming`).
    Flag,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// Text, parsed by the option's kind.
    Text(String),
    /// Bytes (keys, salts, UUIDs).
    Bytes(Vec<u8>),
    /// Several values (`digests=["crc32c", "sha256"]`).
    List(Vec<OptionValue>),
}

const fn opt(name: &'static str, kind: OptionKind, help: &'static str) -> OptionSpec {
    OptionSpec {
        name,
        kind,
        help,
        aliases: &[],
    }
}

const fn aka(mut o: OptionSpec, aliases: &'static [&'static str]) -> OptionSpec {
    o.aliases = aliases;
    o
}

/// zTensor, FOLD, npz: compression of tensor data.
pub const COMPRESSION: OptionSpec = aka(
    opt(
        "compression",
        OptionKind::Compression,
        "compress tensor data",
    ),
    &["compress"],
);
/// zTensor: digests stored per tensor.
pub const DIGESTS: OptionSpec = aka(
    opt(
        "digests",
        OptionKind::Choice(&["crc32c", "sha256", "none"]),
        "digest stored per tensor (repeatable; zTensor v1 stores crc32c unless told none)",
    ),
    &["digest"],
);
/// FOLD: Reed-Solomon parity bytes per 255-byte block.
pub const ECC: OptionSpec = opt(
    "ecc",
    OptionKind::Int,
    "Reed-Solomon parity bytes per 255-byte block",
);
/// WTXT and FOLD: the timestamp written.
pub const TIMESTAMP: OptionSpec = aka(
    opt(
        "timestamp",
        OptionKind::Text,
        "timestamp, YYYY-MM-DDTHH:MM:SSZ",
    ),
    &["ts"],
);
/// WTXT: HMAC-SHA256 key.
pub const HMAC_KEY: OptionSpec = aka(
    opt(
        "hmac_key",
        OptionKind::Secret,
        "HMAC-SHA256 key for every array",
    ),
    &["hmac_key_file"],
);
/// WTXT: Ed25519 signing key.
pub const SIGN_KEY: OptionSpec = opt(
    "sign_key",
    OptionKind::Secret,
    "Ed25519 secret key (file) to sign with",
);
/// WTXT: the previous snapshot.
pub const PREV: OptionSpec = opt(
    "prev",
    OptionKind::Path,
    "previous snapshot to chain the merkle from",
);
/// WTXT: generation number.
pub const GENERATION: OptionSpec = aka(
    opt("generation", OptionKind::Int, "generation number"),
    &["gen"],
);
/// WTXT: build identifier.
pub const BUILD: OptionSpec = opt("build", OptionKind::Text, "build identifier");
/// WTXT: host name.
pub const HOST: OptionSpec = opt("host", OptionKind::Text, "host name");
/// WTXT: CUDA version token.
pub const CUDA: OptionSpec = opt("cuda", OptionKind::Text, "CUDA version token");
/// WTXT: the audit line.
pub const AUDIT: OptionSpec = opt(
    "audit",
    OptionKind::Text,
    "audit line fields, e.g. 'kahan_max_resid=1.1e-15 notes=\"gamma=0.96\"'",
);
/// WTXT: rows per chunk.
pub const ROWS_PER_CHUNK: OptionSpec = opt(
    "rows_per_chunk",
    OptionKind::Int,
    "rows per chunk (row blocking)",
);
/// WTXT: streaming finalization.
pub const STREAMING: OptionSpec = opt(
    "streaming",
    OptionKind::Bool,
    "streaming finalization (WTXT-S plus OUT.wsum)",
);
/// WTXT: fixed HMAC salt.
pub const FIXED_SALT: OptionSpec = aka(
    opt(
        "fixed_salt",
        OptionKind::Hex(8),
        "fixed HMAC salt for reproducible output",
    ),
    &["salt"],
);
/// AERO: maximum shard size.
pub const SHARD_SIZE: OptionSpec = opt("shard_size", OptionKind::Size, "maximum shard size");
/// AERO: per-tensor BLAKE3.
pub const TENSOR_HASHES: OptionSpec = opt(
    "tensor_hashes",
    OptionKind::Bool,
    "store a BLAKE3 hash per tensor (hash_b3)",
);
/// AERO: IHSH chunk.
pub const CONTROL_INTEGRITY: OptionSpec = opt(
    "control_integrity",
    OptionKind::Bool,
    "add the IHSH control-integrity chunk",
);
/// AERO: PHSH page hashes.
pub const PAGE_HASHES: OptionSpec = opt(
    "page_hashes",
    OptionKind::Size,
    "add PHSH page hashes with this page size",
);
/// AERO: fixed file UUID.
pub const UUID: OptionSpec = opt(
    "uuid",
    OptionKind::Hex(16),
    "fixed file UUID for byte-deterministic output",
);
/// GPTRS: base_id 0.
pub const ZERO_BASE_ID: OptionSpec = opt(
    "zero_base_id",
    OptionKind::Bool,
    "store base_id 0 as the original Python exporter does",
);

/// Splits `name=value` (`-O shard_size=1G`); a bare `name` is a flag.
pub fn parse_assignment(s: &str) -> Result<(String, OptionValue)> {
    match s.split_once('=') {
        Some((k, _)) if k.trim().is_empty() => Err(Error::invalid_input(format!(
            "option {s:?} has no name (expected NAME=VALUE)"
        ))),
        Some((k, v)) => Ok((k.trim().to_string(), OptionValue::Text(v.to_string()))),
        None if s.trim().is_empty() => {
            Err(Error::invalid_input("empty option (expected NAME=VALUE)"))
        }
        None => Ok((s.trim().to_string(), OptionValue::Flag)),
    }
}

fn bad(o: &OptionSpec, v: &OptionValue, why: &str) -> Error {
    let shown = match v {
        OptionValue::Text(s) => format!("{s:?}"),
        OptionValue::Flag => "no value".into(),
        other => format!("{other:?}"),
    };
    Error::invalid_input(format!(
        "option {}: {why} (got {shown}; expected {})",
        o.name,
        o.kind.describe()
    ))
}

fn as_bool(o: &OptionSpec, v: &OptionValue) -> Result<bool> {
    match v {
        OptionValue::Flag => Ok(true),
        OptionValue::Bool(b) => Ok(*b),
        OptionValue::Int(i @ (0 | 1)) => Ok(*i == 1),
        OptionValue::Text(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            _ => Err(bad(o, v, "not a bool")),
        },
        _ => Err(bad(o, v, "not a bool")),
    }
}

fn as_int(o: &OptionSpec, v: &OptionValue) -> Result<u64> {
    match v {
        OptionValue::Int(i) => u64::try_from(*i).map_err(|_| bad(o, v, "negative")),
        OptionValue::Text(s) => s
            .trim()
            .parse()
            .map_err(|_| bad(o, v, "not a non-negative integer")),
        _ => Err(bad(o, v, "not an integer")),
    }
}

/// Parses a size: a number (decimals allowed: `2.5M`), then an optional unit. `K`, `M`,
/// `G`, `T` and `KiB` … `TiB` are powers of 1024 (`1G` = 2^30, as Tessera always took
/// it); `KB`, `MB`, `GB`, `TB` are powers of 1000, as huggingface_hub's
/// `max_shard_size="5GB"` (5·10^9) means them. Case is ignored; a fraction of a byte
/// is dropped.
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let invalid = || Error::invalid_input(format!("invalid size {s:?}"));
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() && frac.is_empty() || frac.contains('.') || frac.len() > 18 {
        return Err(invalid());
    }
    let int: u128 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| invalid())?
    };
    let mul: u128 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => {
            return Err(Error::invalid_input(format!(
                "invalid size unit in {s:?} (K, M, G, T or KiB … TiB: powers of 1024; \
                 KB, MB, GB, TB: powers of 1000)"
            )))
        }
    };
    let frac_bytes = if frac.is_empty() {
        0
    } else {
        let digits: u128 = frac.parse().map_err(|_| invalid())?;
        digits * mul / 10u128.pow(frac.len() as u32)
    };
    int.checked_mul(mul)
        .and_then(|b| b.checked_add(frac_bytes))
        .and_then(|b| u64::try_from(b).ok())
        .ok_or_else(|| Error::invalid_input(format!("size {s:?} overflows")))
}

fn as_size(o: &OptionSpec, v: &OptionValue) -> Result<u64> {
    match v {
        OptionValue::Text(s) => parse_size(s).map_err(|e| bad(o, v, e.message())),
        _ => as_int(o, v),
    }
}

fn as_text(o: &OptionSpec, v: &OptionValue) -> Result<String> {
    match v {
        OptionValue::Text(s) => Ok(s.clone()),
        _ => Err(bad(o, v, "not text")),
    }
}

/// The zstd levels the `zstd` crate accepts that we offer.
const ZSTD_LEVELS: std::ops::RangeInclusive<i64> = 1..=22;

/// Parses a compression value: `none`/`raw`, `zstd`, `zstd:LEVEL`, a bool (zstd at level
/// 3 or none) or a level.
pub fn parse_compression(v: &OptionValue) -> Result<Compression> {
    let level = |l: i64| {
        if ZSTD_LEVELS.contains(&l) {
            Ok(Compression::Zstd(l as i32))
        } else {
            Err(Error::invalid_input(format!(
                "option compression: zstd levels are 1–22, got {l}"
            )))
        }
    };
    match v {
        OptionValue::Bool(false) => Ok(Compression::None),
        OptionValue::Bool(true) | OptionValue::Flag => Ok(Compression::Zstd(3)),
        OptionValue::Int(l) => level(*l),
        OptionValue::Text(s) => {
            let lower = s.trim().to_ascii_lowercase();
            match lower.split_once(':') {
                None if lower == "none" || lower == "raw" => Ok(Compression::None),
                None if lower == "zstd" => Ok(Compression::Zstd(3)),
                Some(("zstd", l)) => match l.trim().parse::<i64>() {
                    Ok(l) => level(l),
                    Err(_) => Err(Error::invalid_input(format!(
                        "option compression: bad zstd level in {s:?} (zstd levels are 1–22)"
                    ))),
                },
                _ => Err(Error::invalid_input(format!(
                    "option compression: unknown compression {s:?} (none, zstd, zstd:LEVEL)"
                ))),
            }
        }
        _ => Err(Error::invalid_input(
            "option compression: expected none, zstd, zstd:LEVEL, a bool or a level",
        )),
    }
}

fn parse_digest(o: &OptionSpec, v: &OptionValue) -> Result<Digest> {
    match v {
        OptionValue::Text(s) => match s.trim().to_ascii_lowercase().as_str() {
            "crc32c" => Ok(Digest::Crc32c),
            "sha256" => Ok(Digest::Sha256),
            _ => Err(bad(o, v, "unknown digest")),
        },
        _ => Err(bad(o, v, "not a digest name")),
    }
}

fn fixed<const N: usize>(o: &OptionSpec, v: &OptionValue) -> Result<[u8; N]> {
    let b = match v {
        OptionValue::Bytes(b) => b.clone(),
        OptionValue::Text(s) => crate::util::unhex(s.trim().replace('-', "").as_str())
            .ok_or_else(|| bad(o, v, "not hex"))?,
        _ => return Err(bad(o, v, "not bytes or hex")),
    };
    <[u8; N]>::try_from(b.as_slice()).map_err(|_| bad(o, v, &format!("{} bytes", b.len())))
}

/// Checks a value against an option's kind (for options kept in
/// [`WriteOptions::extra`]) and returns it normalized: `Bool`, `Int` (ints and sizes),
/// `Text` (text, paths, choices), `Bytes`.
fn normalize(o: &OptionSpec, v: &OptionValue) -> Result<OptionValue> {
    Ok(match o.kind {
        OptionKind::Bool => OptionValue::Bool(as_bool(o, v)?),
        OptionKind::Int => OptionValue::Int(as_int(o, v)? as i64),
        OptionKind::Size => OptionValue::Int(as_size(o, v)? as i64),
        OptionKind::Text | OptionKind::Path => OptionValue::Text(as_text(o, v)?),
        OptionKind::Choice(c) => {
            let s = as_text(o, v)?;
            if !c.contains(&s.as_str()) {
                return Err(bad(o, v, "not one of the choices"));
            }
            OptionValue::Text(s)
        }
        OptionKind::Compression => v.clone(),
        OptionKind::Hex(n) => {
            let b = match v {
                OptionValue::Bytes(b) => b.clone(),
                OptionValue::Text(s) => {
                    crate::util::unhex(s.trim()).ok_or_else(|| bad(o, v, "not hex"))?
                }
                _ => return Err(bad(o, v, "not bytes or hex")),
            };
            if b.len() != n {
                return Err(bad(o, v, &format!("{} bytes", b.len())));
            }
            OptionValue::Bytes(b)
        }
        OptionKind::Secret => match v {
            OptionValue::Bytes(_) => v.clone(),
            _ => return Err(bad(o, v, "not key bytes")),
        },
    })
}

impl WriteOptions {
    /// Sets the option `o` (declared by some format) from `value`. By name, with the
    /// lookup among every format's options, it is [`WriteOptions::set`]
    /// ([`crate::formats::find_option`]).
    pub fn apply(&mut self, o: &OptionSpec, value: OptionValue) -> Result<()> {
        let v = &value;
        match o.name {
            "compression" => self.compression = parse_compression(v)?,
            "digests" => {
                let items = match v {
                    OptionValue::List(l) => l.clone(),
                    one => vec![one.clone()],
                };
                let none = |i: &OptionValue| matches!(i, OptionValue::Text(s) if s.trim().eq_ignore_ascii_case("none"));
                if items.is_empty() || items.iter().all(none) {
                    // No digest at all (zTensor v1 otherwise stores crc32c).
                    self.no_digest = true;
                    self.digests.clear();
                    return Ok(());
                }
                self.no_digest = false;
                for i in &items {
                    let d = parse_digest(o, i)?;
                    if !self.digests.contains(&d) {
                        self.digests.push(d);
                    }
                }
            }
            "ecc" => {
                let n = as_int(o, v)?;
                self.ecc = Some(u8::try_from(n).map_err(|_| bad(o, v, "at most 255"))?);
            }
            "timestamp" => self.timestamp = Some(as_text(o, v)?),
            "hmac_key" => match v {
                OptionValue::Bytes(b) => self.hmac_key = Some(b.clone()),
                _ => return Err(bad(o, v, "not key bytes")),
            },
            "sign_key" => match v {
                OptionValue::Bytes(b) => {
                    self.sign_key = Some(fixed::<32>(o, &OptionValue::Bytes(b.clone()))?)
                }
                _ => return Err(bad(o, v, "not a 32-byte Ed25519 seed")),
            },
            "prev" => self.prev = Some(PathBuf::from(as_text(o, v)?)),
            "generation" => self.generation = Some(as_int(o, v)?),
            "build" => self.build = Some(as_text(o, v)?),
            "host" => self.host = Some(as_text(o, v)?),
            "cuda" => self.cuda = Some(as_text(o, v)?),
            "audit" => self.audit = Some(as_text(o, v)?),
            "rows_per_chunk" => self.rows_per_chunk = Some(as_int(o, v)?),
            "streaming" => self.streaming = as_bool(o, v)?,
            "fixed_salt" => self.fixed_salt = Some(fixed::<8>(o, v)?),
            "shard_size" => self.shard_size = Some(as_size(o, v)?),
            "tensor_hashes" => self.tensor_hashes = as_bool(o, v)?,
            "control_integrity" => self.control_integrity = as_bool(o, v)?,
            "page_hashes" => {
                self.page_hashes = Some(match v {
                    OptionValue::Flag | OptionValue::Bool(true) => 4 << 20,
                    _ => as_size(o, v)?,
                })
            }
            "uuid" => self.uuid = Some(fixed::<16>(o, v)?),
            "zero_base_id" => self.zero_base_id = as_bool(o, v)?,
            other => {
                let n = normalize(o, v)?;
                self.extra.insert(other.to_string(), n);
            }
        }
        Ok(())
    }

    /// The names of the options set to something other than their default, the fields
    /// of the shared options and the keys of [`WriteOptions::extra`] alike.
    pub fn given(&self) -> Vec<&str> {
        let d = WriteOptions::default();
        let mut out = Vec::new();
        let mut add = |set: bool, name: &'static str| {
            if set {
                out.push(name);
            }
        };
        add(self.compression != d.compression, "compression");
        add(!self.digests.is_empty() || self.no_digest, "digests");
        add(self.ecc.is_some(), "ecc");
        add(self.timestamp.is_some(), "timestamp");
        add(self.hmac_key.is_some(), "hmac_key");
        add(self.sign_key.is_some(), "sign_key");
        add(self.prev.is_some(), "prev");
        add(self.generation.is_some(), "generation");
        add(self.build.is_some(), "build");
        add(self.host.is_some(), "host");
        add(self.cuda.is_some(), "cuda");
        add(self.audit.is_some(), "audit");
        add(self.rows_per_chunk.is_some(), "rows_per_chunk");
        add(self.streaming, "streaming");
        add(self.fixed_salt.is_some(), "fixed_salt");
        add(self.shard_size.is_some(), "shard_size");
        add(self.tensor_hashes, "tensor_hashes");
        add(self.control_integrity, "control_integrity");
        add(self.page_hashes.is_some(), "page_hashes");
        add(self.uuid.is_some(), "uuid");
        add(self.zero_base_id, "zero_base_id");
        out.extend(self.extra.keys().map(String::as_str));
        out
    }

    /// A format-specific option kept in [`WriteOptions::extra`], as an integer (ints and
    /// sizes).
    pub fn extra_int(&self, name: &str) -> Option<u64> {
        match self.extra.get(name) {
            Some(OptionValue::Int(i)) => u64::try_from(*i).ok(),
            _ => None,
        }
    }

    /// A format-specific boolean option (false when not given).
    pub fn extra_bool(&self, name: &str) -> bool {
        matches!(self.extra.get(name), Some(OptionValue::Bool(true)))
    }

    /// A format-specific text, path or choice option.
    pub fn extra_text(&self, name: &str) -> Option<&str> {
        match self.extra.get(name) {
            Some(OptionValue::Text(s)) => Some(s),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Format;

    fn set(o: &mut WriteOptions, k: &str, v: &str) -> Result<()> {
        o.set(k, OptionValue::Text(v.into()))
    }

    #[test]
    fn one_parser_for_names_and_aliases() {
        let mut o = WriteOptions::default();
        set(&mut o, "compress", "zstd:7").unwrap();
        assert_eq!(o.compression, Compression::Zstd(7));
        set(&mut o, "compression", "none").unwrap();
        assert_eq!(o.compression, Compression::None);
        set(&mut o, "shard_size", "1G").unwrap();
        assert_eq!(o.shard_size, Some(1 << 30));
        set(&mut o, "--shard-size", "4K").unwrap();
        assert_eq!(o.shard_size, Some(4096));
        set(&mut o, "gen", "7").unwrap();
        assert_eq!(o.generation, Some(7));
        o.set("tensor_hashes", OptionValue::Flag).unwrap();
        assert!(o.tensor_hashes);
        set(&mut o, "digest", "sha256").unwrap();
        assert_eq!(o.digests, vec![Digest::Sha256]);
        set(&mut o, "salt", "0011223344556677").unwrap();
        assert_eq!(
            o.fixed_salt,
            Some([0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77])
        );
    }

    #[test]
    fn sizes_take_decimals_and_huggingface_units() {
        assert_eq!(parse_size("2.5M").unwrap(), 5 << 19);
        assert_eq!(parse_size("5G").unwrap(), 5 << 30);
        assert_eq!(parse_size("5GiB").unwrap(), 5 << 30);
        assert_eq!(parse_size("5GB").unwrap(), 5_000_000_000);
        assert_eq!(parse_size("1.5kb").unwrap(), 1500);
        assert_eq!(parse_size("0.5").unwrap(), 0);
        assert_eq!(parse_size("1.0000001K").unwrap(), 1024);
        for bad in ["", ".", "1.2.3", "2.5Q", "M", "-1"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert!(parse_size("99999999999999999999G").is_err());
    }

    #[test]
    fn bad_values_say_what_was_expected() {
        let mut o = WriteOptions::default();
        let e = set(&mut o, "compression", "zstd:99").unwrap_err();
        assert!(e.to_string().contains("zstd levels are 1–22"), "{e}");
        let e = set(&mut o, "compression", "zstd:0").unwrap_err();
        assert!(e.to_string().contains("1–22"), "{e}");
        let e = set(&mut o, "compression", "lz4").unwrap_err();
        assert!(e.to_string().contains("unknown compression"), "{e}");
        let e = set(&mut o, "ecc", "300").unwrap_err();
        assert!(e.to_string().contains("ecc"), "{e}");
        let e = set(&mut o, "shard_size", "1Q").unwrap_err();
        assert!(e.to_string().contains("shard_size"), "{e}");
        let e = set(&mut o, "streaming", "maybe").unwrap_err();
        assert!(e.to_string().contains("not a bool"), "{e}");
        let e = set(&mut o, "uuid", "abcd").unwrap_err();
        assert!(e.to_string().contains("uuid"), "{e}");
        let e = set(&mut o, "no_such_option", "1").unwrap_err();
        assert!(
            e.to_string().contains("unknown option \"no_such_option\""),
            "{e}"
        );
    }

    #[test]
    fn assignments_split_at_the_first_equals() {
        assert_eq!(
            parse_assignment("audit=a=1 b=2").unwrap(),
            ("audit".into(), OptionValue::Text("a=1 b=2".into()))
        );
        assert_eq!(
            parse_assignment("streaming").unwrap(),
            ("streaming".into(), OptionValue::Flag)
        );
        assert!(parse_assignment("=1").is_err());
        assert!(parse_assignment("").is_err());
    }

    #[test]
    fn undeclared_options_are_refused_naming_option_and_format() {
        let o = WriteOptions {
            compression: Compression::Zstd(15),
            ..Default::default()
        };
        let e = crate::formats::check_options(Format::Safetensors, &o).unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("compression") && s.contains("safetensors"),
            "{s}"
        );
        assert!(crate::formats::check_options(Format::Ztensor, &o).is_ok());
        let o = WriteOptions {
            ecc: Some(8),
            generation: Some(2),
            ..Default::default()
        };
        let s = crate::formats::check_options(Format::Gguf, &o)
            .unwrap_err()
            .to_string();
        assert!(s.contains("ecc, generation") && s.contains("GGUF"), "{s}");
        assert!(crate::formats::check_options(Format::Gguf, &WriteOptions::default()).is_ok());
    }

    #[test]
    fn a_format_specific_option_is_checked_by_its_kind() {
        let size = opt("part_size", OptionKind::Size, "");
        assert_eq!(
            normalize(&size, &OptionValue::Text("2K".into())).unwrap(),
            OptionValue::Int(2048)
        );
        assert!(normalize(&size, &OptionValue::Text("2Q".into())).is_err());
        let pick = opt("mode", OptionKind::Choice(&["a", "b"]), "");
        assert!(normalize(&pick, &OptionValue::Text("c".into())).is_err());
        let mut w = WriteOptions::default();
        w.extra.insert("part_size".into(), OptionValue::Int(2048));
        assert_eq!(w.extra_int("part_size"), Some(2048));
        assert_eq!(w.given(), vec!["part_size"]);
        // Not declared by any registry format: refused.
        assert!(crate::formats::check_options(Format::Ztensor, &w).is_err());
    }

    #[test]
    fn every_declared_option_is_settable_and_given() {
        for o in crate::formats::all_options() {
            let mut w = WriteOptions::default();
            let v = match o.kind {
                OptionKind::Bool => OptionValue::Flag,
                OptionKind::Int | OptionKind::Size => OptionValue::Text("8".into()),
                OptionKind::Text | OptionKind::Path => OptionValue::Text("x".into()),
                OptionKind::Choice(c) => OptionValue::Text(c[0].into()),
                OptionKind::Compression => OptionValue::Text("zstd".into()),
                OptionKind::Hex(n) => OptionValue::Bytes(vec![1; n]),
                OptionKind::Secret => OptionValue::Bytes(vec![1; 32]),
            };
            w.set(o.name, v)
                .unwrap_or_else(|e| panic!("{}: {e}", o.name));
            assert_eq!(w.given(), vec![o.name], "{}", o.name);
        }
    }
}
