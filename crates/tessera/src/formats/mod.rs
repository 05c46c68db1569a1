//! One module per format, and the codec table that lists what each can do.
//!
//! Each `formats/<fmt>/mod.rs` opens with its byte layout, what we support and every
//! deviation from the spec, and describes what it can do in one `CODEC: Codec` (reader,
//! writer, capabilities, options). What a format *is* (name, extensions, magic, feature)
//! is its line in the identity table of [`crate::format`], a leaf that imports nothing.
//!
//! The `codecs!` table below lists the codecs, one line per format, both `cfg` arms
//! generated from the line: built with the format's Cargo feature, the format's
//! `CODEC`; without it, [`Codec::UNBUILT`], so the file is still recognised and refused
//! with "… was built without feature `fold`" rather than "unknown format". The table is
//! a `match` on every [`Format`]: a format added to the identity table without its line
//! here is a compile error, and a const check holds each line's feature equal to its
//! identity's. Detection, names, `reader_for`, `writer_for`, `capabilities`, `tessera
//! formats`, the conversion matrix, the fuzz regressions and `scripts/fuzz.sh` all read
//! these two tables.
//!
//! # Cargo features
//!
//! Each format's module is built behind its Cargo feature (`safetensors`, `npy`,
//! `gguf`, `ztensor`, `fold`, `aero`, `gptrs`, `wtxt`, `pytorch`, `hdf5`, and `age` for the age
//! envelope; all on by default). Tests check that every feature named in the tables
//! exists in `Cargo.toml` and is on by default.
//!
//! Adding a format: its folder `formats/<fmt>/` (with `CODEC`), its `pub mod` behind its
//! feature here, one line in the identity table of [`crate::format`] and one line in the
//! codec table below, its feature in `Cargo.toml` (in `default`, with its optional
//! dependencies: `.ci/run` checks each default feature alone), its test data under
//! `crates/tessera/tests/data/<fmt>/` and its fuzz target `fuzz/fuzz_targets/<fmt>.rs` (a
//! test names whatever is missing).

use std::path::{Path, PathBuf};

use crate::any::{Access, OpenFn, ReadOptions};
use crate::error::{Error, ErrorKind, Result};
use crate::format::Format;
use crate::model::{Container, TensorSource};
use crate::options::{OptionSpec, WriteOptions};
use crate::source::SourceRef;
use crate::write::{Capabilities, SetStyle, WriteFn, WriteReport, WriteSeek};

pub use open::{open, reader_for};
pub use options::{all_options, check_options, find_option};

#[cfg(feature = "aero")]
pub mod aero;
#[cfg(feature = "dcp")]
pub mod dcp;
#[cfg(feature = "fold")]
pub mod fold;
#[cfg(feature = "gguf")]
pub mod gguf;
#[cfg(feature = "gptrs")]
pub mod gptrs;
#[cfg(feature = "hdf5")]
pub mod hdf5;
#[cfg(feature = "npy")]
pub mod npy;
#[cfg(feature = "onnx")]
pub mod onnx;
mod open;
mod options;
#[cfg(feature = "pytorch")]
pub mod pytorch;
#[cfg(feature = "safetensors")]
pub mod safetensors;
#[cfg(feature = "wtxt")]
pub mod wtxt;
#[cfg(feature = "ztensor")]
pub mod ztensor;
#[cfg(feature = "ztensor")]
pub mod ztensor2;

/// What a format can do, as its module describes it: reader, writer, capabilities,
/// options. Built with [`Codec::new`] and the `const` setters, so a field added later
/// does not break existing descriptions.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct Codec {
    /// The reader and how it reads, when implemented.
    pub reader: Option<(OpenFn, Access)>,
    /// The writer, when implemented.
    pub writer: Option<WriteFn>,
    /// What the format can hold, when Tessera writes it.
    pub capabilities: Option<fn() -> Capabilities>,
    /// The libFuzzer target (`fuzz/fuzz_targets/<name>.rs`) and test-data folder
    /// (`crates/tessera/tests/data/<name>/`) that cover this format's reader; formats
    /// that share a reader share it.
    pub fuzz_target: Option<&'static str>,
    /// The writer options the format takes ([`crate::options`]); any other is refused.
    pub options: &'static [OptionSpec],
    /// The error when a detected format has no reader or writer (defaults to "… is
    /// detected but not supported yet").
    pub refusal: Option<(ErrorKind, &'static str)>,
    /// How it is written as a model set of several files.
    pub sets: SetStyle,
    /// Its writer stores float tensors quantized to ggml's blocks
    /// (`ConvertOptions::quantize`, [`crate::quant`]): they are its own tensor types
    /// (GGUF). Any target carries packed tensors it is given; this says which ones
    /// `--quantize` may write.
    pub quantizes: bool,
    /// How the format signs its own files, when it does (WTXT's `sign` lines: "WTXT has
    /// its own: tessera wtxt sign"): said when a signature embedded in the metadata is
    /// refused for want of metadata.
    pub own_signature: Option<&'static str>,
    /// A metadata key the format's writers put in every file by convention, not model
    /// metadata (safetensors' framework key `format`): `diff` leaves it out when only one
    /// side has it.
    pub marker: Option<MetadataMarker>,
    /// The prefix of the metadata keys its reader gives for the file's own header (WTXT's
    /// `wtxt.`: `wtxt.gen`, `wtxt.ts`, …): provenance, not model metadata. Its writer
    /// takes them back (a WTXT→WTXT conversion keeps the header); a target that carries
    /// no metadata leaves them out with a note instead of refusing the conversion.
    pub provenance: Option<&'static str>,
    /// What opening and writing its sets take, for a format whose root file names its
    /// shard files in a table ([`SetStyle::ShardTable`]: zTensor v2).
    pub shard_table: Option<ShardTable>,
    /// Its writer of one file holding the tensors in several shards, for a format
    /// written as a set in one file ([`SetStyle::OneFile`]: AERO's `WTSH` chunks).
    pub one_file_sets: Option<WriteGroupsFn>,
    /// Its sets described by an index file of their own kind, which names the set's
    /// files (AERO's AEROSET: `model.aeroset.json`, `index.aero`, `part-NNN.aero`):
    /// opened and written through these hooks, so `set/` never names the format.
    pub indexed_set: Option<IndexedSet>,
}

/// What opening and writing a set described by its own index file takes
/// ([`Codec::indexed_set`]: AEROSET). The set code (`set/opener.rs`, `set/write.rs`)
/// finds the index by its name or bytes, hands it over with a [`SetFiles`] that opens
/// the files it names, and wraps what comes back as one opened file.
#[derive(Clone, Copy)]
pub struct IndexedSet {
    /// The name a user gives to ask for such a set (`--to aeroset`, Python
    /// `format="aeroset"`).
    pub name: &'static str,
    /// The index file's name ends with this (`.aeroset.json`).
    pub suffix: &'static str,
    /// The index's usual name (`model.aeroset.json`): what a directory named as the
    /// output gets.
    pub default_index: &'static str,
    /// True when JSON bytes are such an index (read from a file of another name).
    pub looks_like: fn(&[u8]) -> bool,
    /// The set of the index `bytes` (shown as `label`), its files opened with `files`
    /// when needed (lazily: a part no tensor is read from is never opened).
    pub open: OpenIndexedFn,
    /// The plain file names beside the index that an index's bytes name (what a new set
    /// written over it replaces); empty when they do not parse.
    pub names: fn(&[u8]) -> Vec<String>,
    /// Writes a set: `(source, groups of its tensors, the index's path, the temporary
    /// directory to write into, options)` → the files written there, the index last.
    pub write: WriteSetFn,
    /// The shard size used when the writer is given none (aerotensor's
    /// `max_shard_bytes`: 2 GiB).
    pub default_shard_size: u64,
    /// The set's files are ranks that each hold a part of every tensor (DCP), not
    /// groups of whole tensors: `--shards N` gives the writer N groups, each of every
    /// tensor; no `--max-shard-size` is taken. Such a set is a directory: its index is
    /// `default_index` inside the output, whatever the output is named.
    pub ranks: bool,
}

/// Opens an indexed set ([`IndexedSet::open`]): `(index bytes, label, files, options)`.
pub type OpenIndexedFn = fn(
    &[u8],
    &str,
    std::sync::Arc<dyn SetFiles>,
    &ReadOptions,
) -> Result<Box<dyn Container + 'static>>;

/// Opens the files an index names, where the index is (a local directory, or beside a
/// URL): given to [`IndexedSet::open`] by the set code.
pub trait SetFiles: Send + Sync {
    /// The file `name` beside the index: a plain name (no `/`, `\`, `..`), refused
    /// otherwise; read by range (a map of a local file, a remote object).
    fn beside(&self, name: &str) -> Result<Box<dyn crate::source::ByteSource>>;
    /// The object at an absolute URL (`https://…`, `http://…`, `s3://…`); refused
    /// without the `remote` feature.
    fn url(&self, url: &str) -> Result<Box<dyn crate::source::ByteSource>>;
    /// How the file `name` beside the index is shown in messages (its path or URL).
    fn shown(&self, name: &str) -> String;
    /// True when the index was itself read from a URL (its siblings are remote).
    fn is_remote(&self) -> bool;
}

/// A writer of one file holding `groups` (ranges of the source's tensors) as shards.
pub type WriteGroupsFn = fn(
    &dyn TensorSource,
    &mut dyn WriteSeek,
    &WriteOptions,
    &[std::ops::Range<usize>],
) -> Result<WriteReport>;

/// The root and its shards opened as one container: `(root, shards in table order,
/// label, warnings to add, shards whose digest already matched, options)`.
pub type OpenWithShardsFn = for<'d> fn(
    SourceRef<'d>,
    Vec<SourceRef<'d>>,
    &str,
    &[String],
    &[String],
    &ReadOptions,
) -> Result<Box<dyn Container + 'd>>;

/// What the set code (`set/zt2_shards.rs`, `set/write.rs`, `set/remote.rs`) needs of
/// a format whose root names its shard files in a table ([`Codec::shard_table`]), so
/// that it never names the format.
#[derive(Clone, Copy)]
pub struct ShardTable {
    /// The table of a root file: label, size and whole-file digest (`<algo>:<hex>`) per
    /// shard; empty for a root without shards.
    pub table: ReadTableFn,
    /// Where shard `label` of the root at a path is (its positional sibling).
    pub shard_path: fn(&Path, &str) -> PathBuf,
    /// The digest algorithms a table names (`xxh3`, `sha256`); a digest of another
    /// cannot be matched by searching the directory.
    pub digest_algorithms: &'static [&'static str],
    /// A whole file's digest (`<algo>:<hex>`) in one of those algorithms.
    pub file_digest: fn(&Path, &str) -> Result<String>,
    /// The root with its shards, as one container.
    pub open: OpenWithShardsFn,
    /// Writes a set: `(source, groups of its tensors, the root's path, the temporary
    /// directory to write into, options)` → the files written there, the root last.
    pub write: WriteSetFn,
}

/// One shard a root's table names: its label, size and whole-file digest.
pub type ShardEntry = (String, u64, String);

/// Reads a root's shard table ([`ShardTable::table`]).
pub type ReadTableFn = fn(SourceRef<'_>, &ReadOptions) -> Result<Vec<ShardEntry>>;

/// Writes a set by shard table ([`ShardTable::write`]).
pub type WriteSetFn = fn(
    &dyn TensorSource,
    &[std::ops::Range<usize>],
    &Path,
    &Path,
    &WriteOptions,
) -> Result<Vec<String>>;

/// A metadata key a format's writers add by convention ([`Codec::marker`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetadataMarker {
    /// The key (`format`).
    pub key: &'static str,
    /// The values that make it a marker (`pt`, `tf`, …); another value is metadata.
    pub values: &'static [&'static str],
    /// What it is, as a report says it (`safetensors' framework marker`).
    pub what: &'static str,
}

impl Codec {
    /// A format that is neither read nor written. Add the rest with the setters.
    pub const fn new() -> Codec {
        Codec {
            reader: None,
            writer: None,
            capabilities: None,
            fuzz_target: None,
            options: &[],
            refusal: None,
            sets: SetStyle::TesseraIndex,
            quantizes: false,
            own_signature: None,
            marker: None,
            provenance: None,
            shard_table: None,
            one_file_sets: None,
            indexed_set: None,
        }
    }
    /// The codec of a format this build left out (its Cargo feature is off): no reader,
    /// no writer; [`Format::not_supported_yet`] names the feature.
    pub const UNBUILT: Codec = Codec::new();
    /// The reader, how it reads, and the fuzz target that covers it.
    pub const fn reader(mut self, open: OpenFn, access: Access, fuzz: &'static str) -> Codec {
        self.reader = Some((open, access));
        self.fuzz_target = Some(fuzz);
        self
    }
    /// The writer and what it can hold.
    pub const fn writer(mut self, write: WriteFn, caps: fn() -> Capabilities) -> Codec {
        self.writer = Some(write);
        self.capabilities = Some(caps);
        self
    }
    /// The writer options the format takes.
    pub const fn options(mut self, o: &'static [OptionSpec]) -> Codec {
        self.options = o;
        self
    }
    /// How the format is written as a model set (default: shards and a Tessera index).
    pub const fn sets(mut self, style: SetStyle) -> Codec {
        self.sets = style;
        self
    }
    /// Its writer takes `--quantize` ([`Codec::quantizes`]).
    pub const fn quantizes(mut self) -> Codec {
        self.quantizes = true;
        self
    }
    /// How the format signs its own files ([`Codec::own_signature`]).
    pub const fn own_signature(mut self, how: &'static str) -> Codec {
        self.own_signature = Some(how);
        self
    }
    /// The metadata key its writers add by convention ([`Codec::marker`]).
    pub const fn marker(mut self, m: MetadataMarker) -> Codec {
        self.marker = Some(m);
        self
    }
    /// Its header's metadata prefix ([`Codec::provenance`]).
    pub const fn provenance(mut self, prefix: &'static str) -> Codec {
        self.provenance = Some(prefix);
        self
    }
    /// What its sets by shard table take ([`Codec::shard_table`]; with
    /// `.sets(SetStyle::ShardTable)`).
    pub const fn shard_table(mut self, hooks: ShardTable) -> Codec {
        self.shard_table = Some(hooks);
        self
    }
    /// Its writer of a set in one file ([`Codec::one_file_sets`]; with
    /// `.sets(SetStyle::OneFile)`).
    pub const fn one_file_sets(mut self, write: WriteGroupsFn) -> Codec {
        self.one_file_sets = Some(write);
        self
    }
    /// Its sets described by an index file of their own ([`Codec::indexed_set`]).
    pub const fn indexed_set(mut self, hooks: IndexedSet) -> Codec {
        self.indexed_set = Some(hooks);
        self
    }
    /// The error for this format when it cannot be read or written.
    pub const fn refusal(mut self, kind: ErrorKind, message: &'static str) -> Codec {
        self.refusal = Some((kind, message));
        self
    }
}

impl Default for Codec {
    fn default() -> Codec {
        Codec::new()
    }
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Codec")
            .field("read", &self.reader.map(|r| r.1))
            .field("write", &self.writer.is_some())
            .field("options", &self.options.len())
            .finish_non_exhaustive()
    }
}

/// Generates [`Format::codec`] from the lines `Variant: "feature" => module::CODEC,`:
/// with the feature, the module's codec; without it, [`Codec::UNBUILT`].
macro_rules! codecs {
    ($( $variant:ident : $feature:literal => $codec:path, )*) => {
        impl Format {
            /// What the format can do in this build: its module's codec, or
            /// [`Codec::UNBUILT`] when the build left its Cargo feature out.
            pub fn codec(self) -> &'static Codec {
                match self {
                    $(
                        #[cfg(feature = $feature)]
                        Format::$variant => &$codec,
                        #[cfg(not(feature = $feature))]
                        Format::$variant => &Codec::UNBUILT,
                    )*
                }
            }
        }

        const _: () = {
            $( assert!(
                crate::format::same(Format::$variant.identity().feature, $feature),
                concat!("the codec line of ", stringify!($variant),
                        " names another feature than its identity line")
            ); )*
        };
    };
}

codecs! {
    Wtxt: "wtxt" => wtxt::CODEC,
    WtxtDelta: "wtxt" => wtxt::DELTA_CODEC,
    Wsum: "wtxt" => wtxt::WSUM_CODEC,
    AgeArmor: "age" => wtxt::AGE_CODEC,
    Ztensor: "ztensor" => ztensor::CODEC,
    ZtensorV2: "ztensor" => ztensor2::CODEC,
    Fold: "fold" => fold::CODEC,
    Aero: "aero" => aero::CODEC,
    GptrsCheckpoint: "gptrs" => gptrs::CHECKPOINT_CODEC,
    GptrsArchive: "gptrs" => gptrs::ARCHIVE_CODEC,
    Safetensors: "safetensors" => safetensors::CODEC,
    Npy: "npy" => npy::NPY_CODEC,
    Npz: "npy" => npy::NPZ_CODEC,
    Gguf: "gguf" => gguf::CODEC,
    Pytorch: "pytorch" => pytorch::CODEC,
    Dcp: "dcp" => dcp::CODEC,
    Onnx: "onnx" => onnx::CODEC,
    Hdf5: "hdf5" => hdf5::CODEC,
}

/// The format and hooks of the indexed set kind (AEROSET) whose name is `name`
/// (`aeroset`), in this build.
pub fn indexed_set_named(name: &str) -> Option<(Format, IndexedSet)> {
    let name = name.trim_start_matches('.').to_ascii_lowercase();
    Format::ALL
        .into_iter()
        .find_map(|f| Some((f, f.codec().indexed_set?)).filter(|(_, s)| s.name == name))
}

/// The format and hooks of the indexed set kind whose index file name `file_name` ends
/// with its suffix (`model.aeroset.json`), in this build.
pub fn indexed_set_for_name(file_name: &str) -> Option<(Format, IndexedSet)> {
    Format::ALL.into_iter().find_map(|f| {
        let s = f.codec().indexed_set?;
        (file_name == s.default_index
            || (file_name.len() > s.suffix.len() && file_name.ends_with(s.suffix)))
        .then_some((f, s))
    })
}

/// The format and hooks of the indexed set kind whose index the JSON `bytes` are.
pub fn indexed_set_for_bytes(bytes: &[u8]) -> Option<(Format, IndexedSet)> {
    Format::ALL.into_iter().find_map(|f| {
        let s = f.codec().indexed_set?;
        (s.looks_like)(bytes).then_some((f, s))
    })
}

impl Format {
    /// True when Tessera can read tensors from this format in this build.
    pub fn can_read(self) -> bool {
        self.codec().reader.is_some()
    }

    /// True when Tessera can write this format in this build.
    pub fn can_write(self) -> bool {
        self.codec().writer.is_some()
    }

    /// The error for a detected format that this build cannot read or write: its
    /// codec's refusal, the feature the build left out, or "not supported yet".
    pub fn not_supported_yet(self) -> Error {
        if let Some((kind, message)) = self.codec().refusal {
            return Error::new(kind, message);
        }
        if !self.is_built() {
            return Error::unsupported(format!(
                "{} is recognised, but this build of Tessera was built without feature `{}`",
                self.title(),
                self.feature()
            ));
        }
        Error::unsupported(format!(
            "{} is detected but not supported yet",
            self.title()
        ))
    }

    /// Like [`Format::detect`], but an `UnknownFormat` error when nothing matches.
    pub fn detect_or_err(head: &[u8]) -> Result<Format> {
        Format::detect(head).ok_or_else(|| {
            Error::new(
                ErrorKind::UnknownFormat,
                format!(
                    "unknown format: no known magic at the start of the file (starts with \"{}\")",
                    Format::shown_head(head)
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `[features]` table of the crate's `Cargo.toml`: each feature and its list.
    fn cargo_features() -> Vec<(&'static str, &'static str)> {
        let toml = include_str!("../../Cargo.toml");
        let table = toml
            .split("\n[features]\n")
            .nth(1)
            .expect("Cargo.toml has a [features] table");
        let table = table.split("\n[").next().unwrap_or(table);
        table
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .filter_map(|l| l.split_once(" = "))
            .map(|(k, v)| (k.trim(), v.trim()))
            .collect()
    }

    #[test]
    fn every_format_names_a_default_feature() {
        let features = cargo_features();
        let default = features
            .iter()
            .find(|(k, _)| *k == "default")
            .map(|(_, v)| *v)
            .expect("a default feature set");
        for f in Format::ALL {
            let feature = f.feature();
            assert!(
                features.iter().any(|(k, _)| *k == feature),
                "{f}: feature `{feature}` is not in Cargo.toml's [features]"
            );
            assert!(
                default.contains(&format!("\"{feature}\"")),
                "{f}: feature `{feature}` is not on by default"
            );
        }
    }

    /// Every folder under `formats/` is a module built behind a feature (`pub mod` in
    /// this file, right after its `#[cfg(feature = "…")]`), and that feature is one a
    /// registry line names.
    #[test]
    fn every_format_module_has_its_feature() {
        let this = include_str!("mod.rs");
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/formats");
        let lines: Vec<&str> = this.lines().collect();
        let mut folders = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            if !entry.file_type().unwrap().is_dir() {
                continue;
            }
            folders += 1;
            let name = entry.file_name().into_string().unwrap();
            let at = lines
                .iter()
                .position(|l| *l == format!("pub mod {name};"))
                .unwrap_or_else(|| panic!("formats/{name}/ has no `pub mod {name};`"));
            let feature = at
                .checked_sub(1)
                .and_then(|i| lines[i].strip_prefix("#[cfg(feature = \""))
                .and_then(|l| l.strip_suffix("\")]"))
                .unwrap_or_else(|| panic!("`pub mod {name};` is not behind a feature"));
            assert!(
                Format::ALL.iter().any(|f| f.feature() == feature),
                "formats/{name}/: feature `{feature}` names no registry line"
            );
        }
        assert!(folders >= 10, "{folders} format folders");
    }

    /// A format this build left out has no reader and no writer, and is refused naming
    /// its feature; a format it has reads (and writes) what its codec says, with a
    /// fuzz target for each reader and capabilities naming the format for each writer.
    #[test]
    fn the_codecs_follow_the_build() {
        for f in Format::ALL {
            let c = f.codec();
            assert_eq!(c.reader.is_some(), c.fuzz_target.is_some(), "{f}");
            // A format written only as a directory set (DCP) has capabilities, no writer.
            let dir_only = c.indexed_set.is_some_and(|h| h.ranks);
            assert_eq!(
                c.writer.is_some(),
                c.capabilities.is_some() && !dir_only,
                "{f}"
            );
            if let Some(caps) = c.capabilities {
                assert_eq!(caps().format, f, "{f}: capabilities name another format");
            }
            if !f.is_built() {
                assert!(c.reader.is_none() && c.writer.is_none(), "{f}");
                let message = f.not_supported_yet().to_string();
                assert!(
                    message.ends_with(&format!("built without feature `{}`", f.feature())),
                    "{f}: {message}"
                );
            } else if !f.can_read() || !f.can_write() {
                assert!(!f.not_supported_yet().to_string().is_empty(), "{f}");
            }
        }
    }

    /// A format whose files hold one tensor is never written as a set; every other
    /// writable format is, in its own layout or with a Tessera index.
    #[test]
    fn set_styles_follow_what_a_file_holds() {
        for f in Format::ALL.into_iter().filter(|f| f.can_write()) {
            let one = f.identity().single_tensor;
            assert_eq!(f.codec().sets == SetStyle::None, one, "{f}");
        }
    }

    /// A set style that needs the format's own code has it in the codec, and only then.
    #[test]
    fn set_styles_come_with_their_hooks() {
        for f in Format::ALL.into_iter().filter(|f| f.can_write()) {
            let c = f.codec();
            assert_eq!(
                c.sets == SetStyle::ShardTable,
                c.shard_table.is_some(),
                "{f}"
            );
            assert_eq!(
                c.sets == SetStyle::OneFile,
                c.one_file_sets.is_some(),
                "{f}"
            );
        }
    }

    #[test]
    fn an_unknown_head_is_named_escaped() {
        let e = Format::detect_or_err(b"\x1b[2Jhello").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnknownFormat);
        assert!(e.to_string().contains("\\x1b[2Jhel"), "{e}");
    }
}
