//! One module per format, and the registry that lists them.
//!
//! Each `formats/<fmt>/mod.rs` opens with its byte layout, what we support and every
//! deviation from the spec, and describes itself in one `SPEC: FormatSpec` (name, title,
//! extensions, magic, reader, writer, capabilities): see [`crate::format::FormatSpec`].
//!
//! The `registry!` below lists those descriptions, one line per format, and generates
//! the [`Format`] enum, [`Format::ALL`] and [`Format::spec`] from them. Detection, names,
//! `reader_for`, `writer_for`, `capabilities`, `tessera formats`, the conversion matrix,
//! the fuzz regressions and `scripts/fuzz.sh` all read this one list.
//!
//! # Cargo features
//!
//! Each line also names the Cargo feature that builds the format's module (`safetensors`,
//! `npy`, `gguf`, `ztensor`, `fold`, `aero`, `gptrs`, `wtxt`, `pytorch`, and `age` for the
//! age envelope; all on by default). Built without it, the line's second description
//! stands in, from [`unbuilt`]: the same name, extensions, magic and content test but no
//! reader or writer, so the file is still recognised and refused with "… was built
//! without feature `fold`" rather than "unknown format". The [`Format`] enum keeps every
//! variant whatever the features. Tests check that every feature named here exists in
//! `Cargo.toml` and that each stand-in matches its format's `SPEC`.
//!
//! Adding a format: its folder `formats/<fmt>/` (with `SPEC`), its `pub mod` behind its
//! feature and one line here, its stand-in in [`unbuilt`], its feature in `Cargo.toml`
//! (in `default`, with its optional dependencies: `.ci/run` checks each default feature
//! alone), its test data under `crates/tessera/tests/data/<fmt>/` and its fuzz target
//! `fuzz/fuzz_targets/<fmt>.rs` (a test names whatever is missing).

use crate::format::FormatSpec;

#[cfg(feature = "aero")]
pub mod aero;
#[cfg(feature = "fold")]
pub mod fold;
#[cfg(feature = "gguf")]
pub mod gguf;
#[cfg(feature = "gptrs")]
pub mod gptrs;
#[cfg(feature = "npy")]
pub mod npy;
#[cfg(feature = "pytorch")]
pub mod pytorch;
#[cfg(feature = "safetensors")]
pub mod safetensors;
pub mod sniff;
#[cfg(any(
    feature = "safetensors",
    feature = "gguf",
    feature = "wtxt",
    feature = "pytorch",
    feature = "npy"
))]
mod stream;
#[doc(hidden)]
pub mod unbuilt;
#[cfg(feature = "wtxt")]
pub mod wtxt;
#[cfg(feature = "ztensor")]
pub mod ztensor;
#[cfg(feature = "ztensor")]
pub mod ztensor2;

/// Generates [`Format`] (one variant per line, documented by the line's doc comment),
/// [`Format::ALL`], [`Format::spec`], [`Format::feature`] and [`Format::is_built`].
/// A line is `Variant: "feature" => module::SPEC | unbuilt::STAND_IN,`.
macro_rules! registry {
    ($( $(#[$doc:meta])* $variant:ident : $feature:literal => $spec:path | $off:path, )*) => {
        /// Every format Tessera knows, implemented or not: one variant per line of the
        /// registry in `formats/mod.rs`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Format {
            $( $(#[$doc])* $variant, )*
        }

        impl Format {
            /// Every format, in registry order.
            pub const ALL: [Format; <[&str]>::len(&[$(stringify!($variant)),*])] =
                [$(Format::$variant),*];

            /// The format's description, from its module; when the crate is built
            /// without the format's feature, a stand-in with the same name, extensions
            /// and magic but no reader or writer.
            pub fn spec(self) -> &'static FormatSpec {
                match self {
                    $(
                        #[cfg(feature = $feature)]
                        Format::$variant => &$spec,
                        #[cfg(not(feature = $feature))]
                        Format::$variant => &$off,
                    )*
                }
            }

            /// The Cargo feature that builds this format's reader and writer.
            pub fn feature(self) -> &'static str {
                match self {
                    $( Format::$variant => $feature, )*
                }
            }

            /// The stand-in [`Format::spec`] is without the format's feature.
            #[cfg(test)]
            pub(crate) fn stand_in(self) -> &'static FormatSpec {
                match self {
                    $( Format::$variant => &$off, )*
                }
            }

            /// True when the crate was built with [`Format::feature`].
            pub fn is_built(self) -> bool {
                match self {
                    $( Format::$variant => cfg!(feature = $feature), )*
                }
            }
        }
    };
}

registry! {
    /// WTXT/Chunks v1.1 snapshot (`WTXT 1`).
    Wtxt: "wtxt" => wtxt::SPEC | unbuilt::WTXT,
    /// WTXT DELTA v2 (`WTXT-DELTA 2`): detected, applied with `tessera wtxt apply`.
    WtxtDelta: "wtxt" => wtxt::DELTA_SPEC | unbuilt::WTXT_DELTA,
    /// WSUM finalization line of a streamed WTXT (`WSUM 1`).
    Wsum: "wtxt" => wtxt::WSUM_SPEC | unbuilt::WSUM,
    /// An age ASCII-armored encrypted file (typically a WTXT snapshot).
    AgeArmor: "age" => wtxt::AGE_SPEC | unbuilt::AGE_ARMOR,
    /// zTensor v1.0 / v1.1 (`ZTEN1000`).
    Ztensor: "ztensor" => ztensor::SPEC | unbuilt::ZTENSOR,
    /// zTensor v2 (`\x89ZT2\r\n\x1a\n`).
    ZtensorV2: "ztensor" => ztensor2::SPEC | unbuilt::ZTENSOR_V2,
    /// FOLD `.fold` / `.mind` (`FOLDv1\0\0`).
    Fold: "fold" => fold::SPEC | unbuilt::FOLD,
    /// AERO v0.1 (`AERO`).
    Aero: "aero" => aero::SPEC | unbuilt::AERO,
    /// GPTRS v2 checkpoint (`GPTRSCHK`).
    GptrsCheckpoint: "gptrs" => gptrs::CHECKPOINT_SPEC | unbuilt::GPTRS_CHECKPOINT,
    /// GPTRS v2 tensor archive (`GPTRSTEN`).
    GptrsArchive: "gptrs" => gptrs::ARCHIVE_SPEC | unbuilt::GPTRS_ARCHIVE,
    /// safetensors (u64 header length, then a JSON object).
    Safetensors: "safetensors" => safetensors::SPEC | unbuilt::SAFETENSORS,
    /// NumPy `.npy` (`\x93NUMPY`).
    Npy: "npy" => npy::NPY_SPEC | unbuilt::NPY,
    /// NumPy `.npz` (a zip of `.npy` members).
    Npz: "npy" => npy::NPZ_SPEC | unbuilt::NPZ,
    /// GGUF v2/v3 (`GGUF`).
    Gguf: "gguf" => gguf::SPEC | unbuilt::GGUF,
    /// PyTorch checkpoint (`torch.save`: a zip with `<archive>/data.pkl`, or legacy).
    Pytorch: "pytorch" => pytorch::SPEC | unbuilt::PYTORCH,
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

    /// A stand-in is its format's `SPEC` without reader and writer, refused naming the
    /// feature; compared for the formats this build has.
    #[test]
    fn the_stand_ins_match_their_formats() {
        for f in Format::ALL {
            let off = f.stand_in();
            assert!(off.reader.is_none() && off.writer.is_none(), "{f}");
            let (_, message) = off.not_supported.expect("a stand-in is refused");
            assert!(
                message.ends_with(&format!("built without feature `{}`", f.feature())),
                "{f}: {message}"
            );
            let spec = f.spec();
            if !f.is_built() {
                assert_eq!(spec.name, off.name);
                continue;
            }
            assert_eq!(spec.name, off.name, "{f}");
            assert_eq!(spec.title, off.title, "{f}");
            assert_eq!(spec.extensions, off.extensions, "{f}");
            assert_eq!(spec.aliases, off.aliases, "{f}");
            assert_eq!(spec.magic, off.magic, "{f}");
            assert_eq!(spec.sniff.is_some(), off.sniff.is_some(), "{f}");
            assert_eq!(spec.listed, off.listed, "{f}");
            assert_eq!(spec.single_tensor, off.single_tensor, "{f}");
        }
    }

    /// The stand-ins alone detect what the formats detect: a build without some format
    /// still names its files.
    #[test]
    fn the_stand_ins_detect_the_same_files() {
        let heads: [&[u8]; 6] = [
            b"\x10\0\0\0\0\0\0\0{\"__metadata__\"",
            b"PK\x03\x04",
            b"FOLDv1\0\0\0",
            b"GGUF\x03\0\0\0",
            b"\x93NUMPY\x01\x00",
            b"WTXT 1\nmeta",
        ];
        for head in heads {
            let f = Format::detect(head).unwrap();
            let by_stand_in = Format::ALL.into_iter().find(|g| {
                let s = g.stand_in();
                s.magic.iter().any(|m| head.starts_with(m)) && s.sniff.is_none_or(|t| t(head))
                    || (s.magic.is_empty() && s.sniff.is_some_and(|t| t(head)))
            });
            assert_eq!(by_stand_in, Some(f), "{head:?}");
        }
    }
}
