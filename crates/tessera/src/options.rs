//! Writer options: what each format declares it takes, and the one parser that sets them
//! from the CLI (`-O name=value`, and the older flags as aliases) and from Python keyword
//! arguments (`compression="zstd"`), with one spelling for both.
//!
//! What several formats share — compression, digests, timestamp — is a typed field of
//! [`WriteOptions`] each, declared by the constants [`SHARED`]. Everything else is
//! owned by its format: the format declares its options with `format_options!` in its
//! module (one line each: field, type, kind, help, aliases), which makes a typed struct
//! (`WtxtOptions`, `FoldOptions`, …) with the [`OptionSpec`]s its codec lists
//! ([`crate::formats::Codec::options`]) and `from_options`, which its writer calls to
//! read them from the checked bag [`WriteOptions::extra`]. [`WriteOptions::apply`]
//! parses a value for an option, checked against the declaring field's type
//! ([`OptionField`]) when it is set; the lookups over every format's codec —
//! [`WriteOptions::set`] by name, [`crate::formats::check_options`] (run by every
//! write), which refuses an option the target does not declare, naming the option and
//! the format — sit above the formats, in [`crate::formats`]. The CLI derives a flag
//! per option from the same declarations. A new option is one line in its format's
//! `format_options!` and its use in the writer.

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

/// Options for writers. What several formats share is a typed field here (compression,
/// digests, timestamp, durability, the output path); each format's own options —
/// WTXT's keys and header tokens, FOLD's `ecc`, AERO's hashes and shards, … — are
/// declared by the format (`format_options!`: `WtxtOptions`, `FoldOptions`, …), kept
/// here in [`WriteOptions::extra`], checked, and parsed into the format's typed struct
/// by its writer. Set them by name with [`WriteOptions::set`] (`tessera convert -O
/// name=value`, Python keywords) or typed with [`WriteOptions::with`]
/// (`WriteOptions::default().with(FoldOptions::default().ecc(Some(16)))`); a write
/// refuses an option the target does not declare. Timestamps, salts and UUIDs default
/// to "now"/random unless fixed, which makes output byte-deterministic. Its `Debug`
/// never shows a key: only whether it is set.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct WriteOptions {
    /// Compression (zTensor, FOLD, NPZ, AERO metadata).
    pub compression: Compression,
    /// Digests to store (zTensor).
    pub digests: Vec<Digest>,
    /// Timestamp `YYYY-MM-DDTHH:MM:SSZ` (WTXT `ts`, FOLD, zTensor `created_at` if asked).
    pub timestamp: Option<String>,
    /// Store no digest where the format would store one by default (zTensor v1's
    /// crc32c): `digests=none` (or an empty list).
    pub no_digest: bool,
    /// Where the output goes, for writers that also write a sibling file (WTXT `.wsum`).
    pub path: Option<PathBuf>,
    /// Skip the fsyncs of [`crate::convert::write_file`] (Python's `durable=False`, `tessera convert
    /// --no-fsync`): still atomic, not flushed ([`crate::util::atomic::Durability`]).
    /// Not a format option: every format takes it.
    pub no_fsync: bool,
    /// The options one format has, by name, each value checked against its declaration
    /// when set ([`WriteOptions::set`], [`WriteOptions::with`]); the format's writer reads
    /// them into its typed struct (`FoldOptions::from_options`).
    pub extra: std::collections::BTreeMap<String, OptionValue>,
}

impl std::fmt::Debug for WriteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Destructured so that a new field is a compile error here until it is shown
        // (or, if it is a secret, redacted). Keys in `extra` are `OptionValue::Secret`,
        // whose `Debug` redacts itself.
        let WriteOptions {
            compression,
            digests,
            timestamp,
            no_digest,
            path,
            no_fsync,
            extra,
        } = self;
        f.debug_struct("WriteOptions")
            .field("compression", compression)
            .field("digests", digests)
            .field("timestamp", timestamp)
            .field("no_digest", no_digest)
            .field("path", path)
            .field("no_fsync", no_fsync)
            .field("extra", extra)
            .finish()
    }
}

crate::setters::setters!(WriteOptions {
    /// Sets `compression` (zTensor, FOLD, NPZ, AERO metadata).
    compression: Compression,
    /// Sets `digests`, the digests to store (zTensor).
    digests: Vec<Digest>,
    /// Sets `timestamp`, `YYYY-MM-DDTHH:MM:SSZ` (WTXT `ts`, FOLD, zTensor `created_at`).
    timestamp: Option<String>,
    /// Sets `no_digest`: store no digest where the format stores one by default
    /// (zTensor v1's crc32c).
    no_digest: bool,
    /// Sets `path`, where the output goes (for sibling files such as WTXT's `.wsum`).
    path: Option<PathBuf>,
    /// Sets `no_fsync`: skip the fsyncs of `write_file` (still atomic).
    no_fsync: bool,
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
    /// One or more texts: the option repeated adds one (`-O age_recipients=age1…` twice),
    /// a list from Python.
    Texts,
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
            OptionKind::Texts => "text (repeatable)".into(),
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
    /// Older spellings that still work (`compress` for `compression`); the CLI takes
    /// each as a flag too (`--compress`).
    pub aliases: &'static [&'static str],
    /// What the option given without a value means, for options that are not bools
    /// (`-O page_hashes` = `page_hashes=4M`).
    pub flag_value: Option<&'static str>,
    /// Checks a value for this option and returns it as it is kept in
    /// [`WriteOptions::extra`] (`None`: the default, as if not given). For an option of a
    /// format's `format_options!` struct, the field type's [`OptionField`] parser.
    pub check: fn(&OptionSpec, &OptionValue) -> Result<Option<OptionValue>>,
}

impl OptionSpec {
    /// An option checked by its kind alone ([`OptionKind`]).
    pub const fn new(name: &'static str, kind: OptionKind, help: &'static str) -> OptionSpec {
        OptionSpec {
            name,
            kind,
            help,
            aliases: &[],
            flag_value: None,
            check: check_by_kind,
        }
    }

    /// The option whose value is a `T` (a field of a format's options struct).
    pub const fn typed<T: OptionField>(
        name: &'static str,
        kind: OptionKind,
        help: &'static str,
    ) -> OptionSpec {
        OptionSpec {
            check: check_typed::<T>,
            ..OptionSpec::new(name, kind, help)
        }
    }

    /// With older spellings.
    pub const fn aliases(mut self, aliases: &'static [&'static str]) -> OptionSpec {
        self.aliases = aliases;
        self
    }

    /// With a meaning for the bare option.
    pub const fn flag_value(mut self, v: &'static str) -> OptionSpec {
        self.flag_value = Some(v);
        self
    }
}

/// A value handed to [`WriteOptions::set`]: text from the command line, typed values
/// from Python.
#[derive(Clone, PartialEq)]
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
    /// Bytes (salts, UUIDs).
    Bytes(Vec<u8>),
    /// Key bytes, as an option of kind [`OptionKind::Secret`] keeps them: its `Debug`
    /// never shows them.
    Secret(Vec<u8>),
    /// Several values (`digests=["crc32c", "sha256"]`).
    List(Vec<OptionValue>),
}

impl std::fmt::Debug for OptionValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OptionValue::Flag => f.write_str("Flag"),
            OptionValue::Bool(b) => f.debug_tuple("Bool").field(b).finish(),
            OptionValue::Int(i) => f.debug_tuple("Int").field(i).finish(),
            OptionValue::Text(s) => f.debug_tuple("Text").field(s).finish(),
            OptionValue::Bytes(b) => f.debug_tuple("Bytes").field(b).finish(),
            OptionValue::Secret(_) => f.write_str("Secret(<redacted>)"),
            OptionValue::List(l) => f.debug_tuple("List").field(l).finish(),
        }
    }
}

const fn opt(name: &'static str, kind: OptionKind, help: &'static str) -> OptionSpec {
    OptionSpec::new(name, kind, help)
}

/// zTensor, FOLD, npz: compression of tensor data.
pub const COMPRESSION: OptionSpec = opt(
    "compression",
    OptionKind::Compression,
    "compress tensor data",
)
.aliases(&["compress"]);
/// zTensor: digests stored per tensor.
pub const DIGESTS: OptionSpec = opt(
    "digests",
    OptionKind::Choice(&["crc32c", "sha256", "none"]),
    "digest stored per tensor (repeatable; zTensor v1 stores crc32c unless told none)",
)
.aliases(&["digest"]);
/// WTXT and FOLD: the timestamp written.
pub const TIMESTAMP: OptionSpec = opt(
    "timestamp",
    OptionKind::Text,
    "timestamp, YYYY-MM-DDTHH:MM:SSZ",
)
.aliases(&["ts"]);

/// The options [`WriteOptions`] holds as typed fields, shared by several formats (a
/// format lists those it takes among its options).
pub const SHARED: &[OptionSpec] = &[COMPRESSION, DIGESTS, TIMESTAMP];

/// A Rust type a format option's value parses into: a field of a format's
/// `format_options!` struct. [`OptionField::parse`] takes what the CLI gives (text),
/// what Python gives (typed values) and what [`OptionField::to_value`] kept.
pub trait OptionField: Sized + Default {
    /// Parses a value given for the option `o`, with a message naming it when it is not one.
    fn parse(o: &OptionSpec, v: &OptionValue) -> Result<Self>;
    /// The value kept in [`WriteOptions::extra`]; `None` for the default (not given).
    fn to_value(&self) -> Option<OptionValue>;
}

fn check_typed<T: OptionField>(o: &OptionSpec, v: &OptionValue) -> Result<Option<OptionValue>> {
    Ok(kept(o, T::parse(o, v)?.to_value()))
}

/// A value as [`WriteOptions::extra`] keeps it: the bytes of a key as
/// [`OptionValue::Secret`].
fn kept(o: &OptionSpec, v: Option<OptionValue>) -> Option<OptionValue> {
    match v {
        Some(OptionValue::Bytes(b)) if o.kind == OptionKind::Secret => Some(OptionValue::Secret(b)),
        other => other,
    }
}

fn check_by_kind(o: &OptionSpec, v: &OptionValue) -> Result<Option<OptionValue>> {
    normalize(o, v).map(Some)
}

impl OptionField for bool {
    fn parse(o: &OptionSpec, v: &OptionValue) -> Result<Self> {
        as_bool(o, v)
    }
    fn to_value(&self) -> Option<OptionValue> {
        self.then_some(OptionValue::Bool(true))
    }
}

impl OptionField for Option<u64> {
    fn parse(o: &OptionSpec, v: &OptionValue) -> Result<Self> {
        match o.kind {
            OptionKind::Size => as_size(o, v).map(Some),
            _ => as_int(o, v).map(Some),
        }
    }
    fn to_value(&self) -> Option<OptionValue> {
        self.map(|n| OptionValue::Int(i64::try_from(n).unwrap_or(i64::MAX)))
    }
}

impl OptionField for Option<u8> {
    fn parse(o: &OptionSpec, v: &OptionValue) -> Result<Self> {
        let n = as_int(o, v)?;
        u8::try_from(n)
            .map(Some)
            .map_err(|_| bad(o, v, "at most 255"))
    }
    fn to_value(&self) -> Option<OptionValue> {
        self.map(|n| OptionValue::Int(n.into()))
    }
}

impl OptionField for Option<String> {
    fn parse(o: &OptionSpec, v: &OptionValue) -> Result<Self> {
        let s = as_text(o, v)?;
        if let OptionKind::Choice(c) = o.kind {
            if !c.contains(&s.as_str()) {
                return Err(bad(o, v, "not one of the choices"));
            }
        }
        Ok(Some(s))
    }
    fn to_value(&self) -> Option<OptionValue> {
        self.clone().map(OptionValue::Text)
    }
}

fn texts(o: &OptionSpec, v: &OptionValue) -> Result<Vec<String>> {
    match v {
        OptionValue::List(items) => items.iter().map(|i| as_text(o, i)).collect(),
        one => Ok(vec![as_text(o, one)?]),
    }
}

/// Several texts ([`OptionKind::Texts`]); none is the default.
impl OptionField for Vec<String> {
    fn parse(o: &OptionSpec, v: &OptionValue) -> Result<Self> {
        texts(o, v)
    }
    fn to_value(&self) -> Option<OptionValue> {
        (!self.is_empty())
            .then(|| OptionValue::List(self.iter().cloned().map(OptionValue::Text).collect()))
    }
}

impl OptionField for Option<PathBuf> {
    fn parse(o: &OptionSpec, v: &OptionValue) -> Result<Self> {
        as_text(o, v).map(|s| Some(PathBuf::from(s)))
    }
    fn to_value(&self) -> Option<OptionValue> {
        self.as_ref()
            .map(|p| OptionValue::Text(p.to_string_lossy().into_owned()))
    }
}

/// Key bytes of any length ([`OptionKind::Secret`]): kept as [`OptionValue::Secret`].
impl OptionField for Option<Vec<u8>> {
    fn parse(o: &OptionSpec, v: &OptionValue) -> Result<Self> {
        match v {
            OptionValue::Bytes(b) | OptionValue::Secret(b) => Ok(Some(b.clone())),
            _ => Err(bad(o, v, "not key bytes")),
        }
    }
    fn to_value(&self) -> Option<OptionValue> {
        self.clone().map(OptionValue::Secret)
    }
}

/// Exactly `N` bytes: hex text or bytes ([`OptionKind::Hex`]), or a fixed-size key
/// ([`OptionKind::Secret`], kept as [`OptionValue::Secret`]).
impl<const N: usize> OptionField for Option<[u8; N]> {
    fn parse(o: &OptionSpec, v: &OptionValue) -> Result<Self> {
        if o.kind == OptionKind::Secret {
            // Shown redacted in any error.
            let key = match v {
                OptionValue::Bytes(b) | OptionValue::Secret(b) => OptionValue::Secret(b.clone()),
                _ => return Err(bad(o, v, "not key bytes")),
            };
            return fixed::<N>(o, &key).map(Some);
        }
        fixed::<N>(o, v).map(Some)
    }
    fn to_value(&self) -> Option<OptionValue> {
        // Which of the two is decided by the kind at `check` time; a key's array is
        // kept as `Secret` by `WriteOptions::apply`.
        self.map(|b| OptionValue::Bytes(b.to_vec()))
    }
}

/// A format's typed options (a struct made by `format_options!`): what
/// [`WriteOptions::with`] stores.
pub trait FormatOptions {
    /// Every option the format takes: the shared ones its writer reads, then its own.
    fn options() -> &'static [OptionSpec]
    where
        Self: Sized;
    /// Each of the format's own options with its value (`None`: the default).
    fn values(&self) -> Vec<(&'static OptionSpec, Option<OptionValue>)>;
}

/// Declares a format's own writer options as a typed struct: one line per option
/// (field, type, kind, help, and optionally aliases and a bare-flag value), the shared
/// options the format also takes listed first. Generates the struct (`Default`,
/// `Clone`, a `Debug` that redacts keys, a builder setter per field), `OPTIONS` (for
/// the codec's `options`), `from_options(&WriteOptions)` (what the writer calls) and
/// [`FormatOptions`] (for [`WriteOptions::with`]). A new option is one line here and
/// its use in the writer; the CLI's flag and Python's keyword follow from the line.
#[allow(unused_macros)] // a build without any format that has options of its own
macro_rules! format_options {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            shared: [$($shared:path),* $(,)?],
            $(
                $(#[$fmeta:meta])*
                pub $field:ident : $ty:ty = ($kind:expr, $help:literal $(, aliases: $aliases:expr)? $(, flag: $flagv:literal)? $(,)?),
            )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Default, PartialEq)]
        #[non_exhaustive]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $name {
            /// Every option this format takes: the shared ones its writer reads
            /// ([`crate::options::SHARED`]), then its own.
            pub const OPTIONS: &'static [$crate::options::OptionSpec] = &[
                $($shared,)*
                $(
                    $crate::options::OptionSpec::typed::<$ty>(stringify!($field), $kind, $help)
                        $(.aliases($aliases))?
                        $(.flag_value($flagv))?,
                )*
            ];

            /// The declaration of one of this format's options.
            fn spec(name: &str) -> &'static $crate::options::OptionSpec {
                Self::OPTIONS
                    .iter()
                    .find(|o| o.name == name)
                    .expect("format_options! declares every field")
            }

            /// This format's options among `opts` (the ones not given at their
            /// defaults), each parsed into its field; a value that is not one is
            /// refused naming the option.
            pub fn from_options(opts: &$crate::options::WriteOptions) -> $crate::error::Result<Self> {
                #[allow(unused_mut)]
                let mut out = Self::default();
                $(
                    if let Some(v) = opts.extra.get(stringify!($field)) {
                        out.$field = <$ty as $crate::options::OptionField>::parse(
                            Self::spec(stringify!($field)),
                            v,
                        )?;
                    }
                )*
                Ok(out)
            }

            $(
                #[doc = concat!("Sets `", stringify!($field), "`.")]
                #[must_use]
                pub fn $field(mut self, v: $ty) -> Self {
                    self.$field = v;
                    self
                }
            )*
        }

        impl $crate::options::FormatOptions for $name {
            fn options() -> &'static [$crate::options::OptionSpec] {
                Self::OPTIONS
            }
            fn values(&self) -> Vec<(&'static $crate::options::OptionSpec, Option<$crate::options::OptionValue>)> {
                vec![$( (
                    Self::spec(stringify!($field)),
                    $crate::options::OptionField::to_value(&self.$field),
                ), )*]
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                #[allow(unused_mut)]
                let mut d = f.debug_struct(stringify!($name));
                $(
                    let secret = Self::spec(stringify!($field)).kind
                        == $crate::options::OptionKind::Secret;
                    let set = $crate::options::OptionField::to_value(&self.$field).is_some();
                    match (secret, set) {
                        (true, true) => d.field(stringify!($field), &"<redacted>"),
                        (true, false) => d.field(stringify!($field), &"none"),
                        _ => d.field(stringify!($field), &self.$field),
                    };
                )*
                d.finish()
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use format_options;

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
        OptionValue::Bytes(b) | OptionValue::Secret(b) => b.clone(),
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
        OptionKind::Texts => {
            OptionValue::List(texts(o, v)?.into_iter().map(OptionValue::Text).collect())
        }
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
            OptionValue::Bytes(b) | OptionValue::Secret(b) => OptionValue::Secret(b.clone()),
            _ => return Err(bad(o, v, "not key bytes")),
        },
    })
}

impl WriteOptions {
    /// Sets the option `o` (declared by some format) from `value`. By name, with the
    /// lookup among every format's options, it is [`WriteOptions::set`]
    /// ([`crate::formats::find_option`]). The shared options set their fields; a
    /// format's own is checked by its declaration ([`OptionSpec::check`]) and kept in
    /// [`WriteOptions::extra`] (removed when set to its default).
    pub fn apply(&mut self, o: &OptionSpec, value: OptionValue) -> Result<()> {
        let value = match (&value, o.flag_value) {
            (OptionValue::Flag, Some(bare)) => OptionValue::Text(bare.to_string()),
            _ => value,
        };
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
            "timestamp" => self.timestamp = Some(as_text(o, v)?),
            // A repeatable option adds to what it holds.
            name if o.kind == OptionKind::Texts && self.extra.contains_key(name) => {
                let mut all = texts(o, &self.extra[name])?;
                all.extend(texts(o, v)?);
                let list = OptionValue::List(all.into_iter().map(OptionValue::Text).collect());
                if let Some(n) = (o.check)(o, &list)? {
                    self.extra.insert(name.to_string(), n);
                }
            }
            name => match (o.check)(o, v)? {
                Some(n) => {
                    self.extra.insert(name.to_string(), n);
                }
                None => {
                    self.extra.remove(name);
                }
            },
        }
        Ok(())
    }

    /// Sets the options given in a format's typed struct (`WtxtOptions`, `FoldOptions`,
    /// …): those not at their default, so that several `with`s add up
    /// (`.with(FoldOptions::default().ecc(Some(16))).with(WtxtOptions::default()
    /// .generation(Some(3)))`). An option is cleared by [`WriteOptions::set`] to its
    /// default, or by removing it from [`WriteOptions::extra`].
    #[must_use]
    pub fn with<O: FormatOptions>(mut self, options: O) -> WriteOptions {
        for (o, v) in options.values() {
            if let Some(v) = kept(o, v) {
                self.extra.insert(o.name.to_string(), v);
            }
        }
        self
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
        add(self.timestamp.is_some(), "timestamp");
        out.extend(self.extra.keys().map(String::as_str));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    format_options! {
        /// A format's options, as a format declares them.
        pub struct DemoOptions {
            shared: [COMPRESSION],
            /// A count that fits a byte.
            pub parity: Option<u8> = (OptionKind::Int, "parity bytes"),
            /// A size.
            pub part_size: Option<u64> = (OptionKind::Size, "part size", aliases: &["part"]),
            /// A key.
            pub key: Option<Vec<u8>> = (OptionKind::Secret, "a key"),
            /// A fixed-size key.
            pub seed: Option<[u8; 4]> = (OptionKind::Secret, "a seed"),
            /// A switch.
            pub on: bool = (OptionKind::Bool, "a switch"),
            /// A page size whose bare flag means 4 KiB.
            pub pages: Option<u64> = (OptionKind::Size, "pages", flag: "4K"),
            /// A salt.
            pub salt: Option<[u8; 2]> = (OptionKind::Hex(2), "a salt"),
            /// One of two words.
            pub mode: Option<String> = (OptionKind::Choice(&["a", "b"]), "a mode"),
        }
    }

    fn spec(name: &str) -> &'static OptionSpec {
        DemoOptions::OPTIONS
            .iter()
            .find(|o| o.name == name || o.aliases.contains(&name))
            .unwrap()
    }

    fn set(o: &mut WriteOptions, k: &str, v: OptionValue) -> Result<()> {
        o.apply(spec(k), v)
    }

    fn text(s: &str) -> OptionValue {
        OptionValue::Text(s.into())
    }

    #[test]
    fn a_format_declares_its_options_and_reads_them_typed() {
        let names: Vec<&str> = DemoOptions::OPTIONS.iter().map(|o| o.name).collect();
        assert_eq!(
            names,
            [
                "compression",
                "parity",
                "part_size",
                "key",
                "seed",
                "on",
                "pages",
                "salt",
                "mode"
            ]
        );
        let mut o = WriteOptions::default();
        set(&mut o, "compress", text("zstd:7")).unwrap();
        set(&mut o, "parity", text("16")).unwrap();
        set(&mut o, "part", text("2K")).unwrap();
        set(&mut o, "key", OptionValue::Bytes(b"k3y".to_vec())).unwrap();
        set(&mut o, "seed", OptionValue::Bytes(vec![9; 4])).unwrap();
        set(&mut o, "on", OptionValue::Flag).unwrap();
        set(&mut o, "pages", OptionValue::Flag).unwrap();
        set(&mut o, "salt", text("00ff")).unwrap();
        set(&mut o, "mode", text("b")).unwrap();
        assert_eq!(o.compression, Compression::Zstd(7));
        let d = DemoOptions::from_options(&o).unwrap();
        assert_eq!(d.parity, Some(16));
        assert_eq!(d.part_size, Some(2048));
        assert_eq!(d.key.as_deref(), Some(&b"k3y"[..]));
        assert_eq!(d.seed, Some([9; 4]));
        assert!(d.on);
        assert_eq!(d.pages, Some(4096));
        assert_eq!(d.salt, Some([0, 0xff]));
        assert_eq!(d.mode.as_deref(), Some("b"));
        let built = DemoOptions::default()
            .parity(Some(16))
            .part_size(Some(2048))
            .key(Some(b"k3y".to_vec()))
            .seed(Some([9; 4]))
            .on(true)
            .pages(Some(4096))
            .salt(Some([0, 0xff]))
            .mode(Some("b".into()));
        assert_eq!(built, d);
        assert_eq!(
            o.given(),
            [
                "compression",
                "key",
                "mode",
                "on",
                "pages",
                "parity",
                "part_size",
                "salt",
                "seed"
            ]
        );
        // Typed, the same bag.
        let typed = WriteOptions::default()
            .compression(Compression::Zstd(7))
            .with(d.clone());
        assert_eq!(typed.extra, o.extra);
        assert_eq!(DemoOptions::from_options(&typed).unwrap(), d);
        // `with`s add up; setting the default value clears an option.
        let more = typed.clone().with(DemoOptions::default().parity(Some(2)));
        assert_eq!(more.given(), o.given());
        assert_eq!(DemoOptions::from_options(&more).unwrap().parity, Some(2));
        assert_eq!(DemoOptions::from_options(&more).unwrap().key, d.key);
        assert_eq!(
            typed.clone().with(DemoOptions::default()).extra,
            typed.extra
        );
        set(&mut o, "on", OptionValue::Bool(false)).unwrap();
        assert!(!o.given().contains(&"on"));
    }

    #[test]
    fn a_value_the_field_cannot_hold_is_refused_when_set_naming_the_option() {
        let mut o = WriteOptions::default();
        for (k, v, why) in [
            ("parity", text("300"), "at most 255"),
            ("parity", text("-1"), "non-negative"),
            ("part_size", text("1Q"), "part_size"),
            ("on", text("maybe"), "not a bool"),
            ("salt", text("abcdef"), "3 bytes"),
            ("mode", text("c"), "not one of the choices"),
            ("seed", OptionValue::Bytes(vec![1; 5]), "5 bytes"),
            ("key", text("k3y"), "not key bytes"),
        ] {
            let e = set(&mut o, k, v).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains(spec(k).name), "{k}: {e}");
        }
        assert!(o.given().is_empty(), "{:?}", o.given());
        // A bag filled by hand is checked when the writer reads it.
        o.extra.insert("parity".into(), text("many"));
        let e = DemoOptions::from_options(&o).unwrap_err().to_string();
        assert!(e.contains("parity"), "{e}");
    }

    #[test]
    fn keys_never_show_in_debug_nor_in_errors() {
        let o = WriteOptions::default()
            .timestamp(Some("2026-01-01T00:00:00Z".into()))
            .with(
                DemoOptions::default()
                    .key(Some(b"hmac-secret".to_vec()))
                    .seed(Some([0xA7; 4]))
                    .parity(Some(3)),
            );
        let d = DemoOptions::from_options(&o).unwrap();
        let text = format!("{o:?} {o:#?} {d:?} {d:#?}");
        // The key's bytes in any of the forms Debug prints them.
        for s in ["hmac-secret", "104, 109, 97, 99", "167", "0xa7", "a7a7"] {
            assert!(!text.contains(s), "{s} in {text}");
        }
        assert!(text.contains("<redacted>"), "{text}");
        assert!(
            text.contains("parity: Some(3)"),
            "the others still show: {text}"
        );
        assert!(text.contains("2026-01-01"), "{text}");
        assert!(
            !format!("{:?} {:?}", WriteOptions::default(), DemoOptions::default())
                .contains("redacted")
        );
        let mut w = WriteOptions::default();
        let e = set(&mut w, "seed", OptionValue::Bytes(vec![0xA7; 5])).unwrap_err();
        assert!(!e.to_string().contains("167"), "{e}");
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
    fn shared_options_parse_into_their_fields() {
        let mut o = WriteOptions::default();
        o.apply(&COMPRESSION, text("zstd:99")).unwrap_err();
        let e = o.apply(&COMPRESSION, text("zstd:0")).unwrap_err();
        assert!(e.to_string().contains("1–22"), "{e}");
        let e = o.apply(&COMPRESSION, text("lz4")).unwrap_err();
        assert!(e.to_string().contains("unknown compression"), "{e}");
        o.apply(&DIGESTS, text("sha256")).unwrap();
        o.apply(&DIGESTS, text("crc32c")).unwrap();
        assert_eq!(o.digests, [Digest::Sha256, Digest::Crc32c]);
        o.apply(&DIGESTS, text("none")).unwrap();
        assert!(o.digests.is_empty() && o.no_digest);
        o.apply(&TIMESTAMP, text("2026-01-01T00:00:00Z")).unwrap();
        assert_eq!(o.given(), ["digests", "timestamp"]);
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
    fn an_option_checked_by_its_kind_alone() {
        let size = opt("part_size", OptionKind::Size, "");
        let mut w = WriteOptions::default();
        w.apply(&size, text("2K")).unwrap();
        assert_eq!(w.extra["part_size"], OptionValue::Int(2048));
        assert!(w.apply(&size, text("2Q")).is_err());
        let pick = opt("mode", OptionKind::Choice(&["a", "b"]), "");
        assert!(w.apply(&pick, text("c")).is_err());
        assert_eq!(w.given(), ["part_size"]);
    }
}
