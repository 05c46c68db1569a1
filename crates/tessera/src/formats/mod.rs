//! One module per format, and the registry that lists them.
//!
//! Each `formats/<fmt>/mod.rs` opens with its byte layout, what we support and every
//! deviation from the spec, and describes itself in one `SPEC: FormatSpec` (name, title,
//! extensions, magic, reader, writer, capabilities): see [`crate::format::FormatSpec`].
//!
//! The [`registry!`] below lists those descriptions, one line per format, and generates
//! the [`Format`] enum, [`Format::ALL`] and [`Format::spec`] from them. Detection, names,
//! `reader_for`, `writer_for`, `capabilities`, `tessera formats`, the conversion matrix,
//! the fuzz regressions and `scripts/fuzz.sh` all read this one list.
//!
//! Adding a format: its folder `formats/<fmt>/` (with `SPEC`), its `pub mod` and one line
//! here, its test data under `crates/tessera/tests/data/<fmt>/` and its fuzz target
//! `fuzz/fuzz_targets/<fmt>.rs` (a test names whatever is missing).

use crate::format::FormatSpec;

pub mod aero;
pub mod fold;
pub mod gguf;
pub mod gptrs;
pub mod npy;
pub mod pytorch;
pub mod safetensors;
pub mod wtxt;
pub mod ztensor;
pub mod ztensor2;

/// Generates [`Format`] (one variant per line, documented by the line's doc comment),
/// [`Format::ALL`] and [`Format::spec`].
macro_rules! registry {
    ($( $(#[$doc:meta])* $variant:ident => $spec:path, )*) => {
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

            /// The format's description, from its module.
            pub fn spec(self) -> &'static FormatSpec {
                match self {
                    $( Format::$variant => &$spec, )*
                }
            }
        }
    };
}

registry! {
    /// WTXT/Chunks v1.1 snapshot (`WTXT 1`).
    Wtxt => wtxt::SPEC,
    /// WTXT DELTA v2 (`WTXT-DELTA 2`): detected, applied with `tessera wtxt apply`.
    WtxtDelta => wtxt::DELTA_SPEC,
    /// WSUM finalization line of a streamed WTXT (`WSUM 1`).
    Wsum => wtxt::WSUM_SPEC,
    /// An age ASCII-armored encrypted file (typically a WTXT snapshot).
    AgeArmor => wtxt::AGE_SPEC,
    /// zTensor v1.0 / v1.1 (`ZTEN1000`).
    Ztensor => ztensor::SPEC,
    /// zTensor v2 (`\x89ZT2\r\n\x1a\n`).
    ZtensorV2 => ztensor2::SPEC,
    /// FOLD `.fold` / `.mind` (`FOLDv1\0\0`).
    Fold => fold::SPEC,
    /// AERO v0.1 (`AERO`).
    Aero => aero::SPEC,
    /// GPTRS v2 checkpoint (`GPTRSCHK`).
    GptrsCheckpoint => gptrs::CHECKPOINT_SPEC,
    /// GPTRS v2 tensor archive (`GPTRSTEN`).
    GptrsArchive => gptrs::ARCHIVE_SPEC,
    /// safetensors (u64 header length, then a JSON object).
    Safetensors => safetensors::SPEC,
    /// NumPy `.npy` (`\x93NUMPY`).
    Npy => npy::NPY_SPEC,
    /// NumPy `.npz` (a zip of `.npy` members).
    Npz => npy::NPZ_SPEC,
    /// GGUF v2/v3 (`GGUF`).
    Gguf => gguf::SPEC,
    /// PyTorch checkpoint (`torch.save`: a zip with `<archive>/data.pkl`, or legacy).
    Pytorch => pytorch::SPEC,
}
