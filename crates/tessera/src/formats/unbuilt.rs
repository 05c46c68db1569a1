//! The registry's stand-ins for formats built without their Cargo feature: each has its
//! format's name, title, extensions, aliases, magic and content test, so the format is
//! still recognised (and named by `--to`), but no reader or writer; reading or writing
//! it is refused as Unsupported, naming the feature. A test checks each against its
//! format's `SPEC` in a build with every feature.

use crate::error::ErrorKind;
use crate::format::FormatSpec;

use super::sniff;

/// `FormatSpec::new(name, title)` refused with "TITLE is recognised, but this build of
/// Tessera was built without feature `FEATURE`".
macro_rules! unbuilt {
    ($name:literal, $title:literal, $feature:literal) => {
        FormatSpec::new($name, $title).not_supported(
            ErrorKind::Unsupported,
            concat!(
                $title,
                " is recognised, but this build of Tessera was built without feature `",
                $feature,
                "`"
            ),
        )
    };
}

/// WTXT/Chunks v1.1.
pub const WTXT: FormatSpec = unbuilt!("wtxt", "WTXT/Chunks v1.1", "wtxt")
    .extensions(&["wtxt"])
    .magic(&[b"WTXT 1\n"]);
/// WTXT DELTA v2.
pub const WTXT_DELTA: FormatSpec = unbuilt!("wtxt-delta", "WTXT DELTA v2", "wtxt")
    .extensions(&["wtxtdelta"])
    .magic(&[b"WTXT-DELTA 2"])
    .unlisted();
/// WTXT WSUM.
pub const WSUM: FormatSpec = unbuilt!("wsum", "WTXT WSUM", "wtxt")
    .extensions(&["wsum"])
    .magic(&[b"WSUM 1"])
    .unlisted();
/// age ASCII armor.
pub const AGE_ARMOR: FormatSpec = unbuilt!("age", "age-encrypted (ASCII armor)", "age")
    .extensions(&["age"])
    .magic(&[b"-----BEGIN AGE ENCRYPTED FILE-----"])
    .unlisted();
/// zTensor v1.
pub const ZTENSOR: FormatSpec = unbuilt!("ztensor", "zTensor v1.0", "ztensor")
    .extensions(&["zt", "ztensor"])
    .magic(&[b"ZTEN1000"]);
/// zTensor v2.
pub const ZTENSOR_V2: FormatSpec = unbuilt!("ztensor-v2", "zTensor v2", "ztensor")
    .aliases(&["ztensor2"])
    .magic(&[b"\x89ZT2\r\n\x1a\n"]);
/// FOLD.
pub const FOLD: FormatSpec = unbuilt!("fold", "FOLD v1.2", "fold")
    .extensions(&["fold", "mind"])
    .magic(&[b"FOLDv1\0\0"]);
/// AERO.
pub const AERO: FormatSpec = unbuilt!("aero", "AERO v0.1", "aero")
    .extensions(&["aero"])
    .magic(&[b"AERO"]);
/// GPTRS checkpoint.
pub const GPTRS_CHECKPOINT: FormatSpec = unbuilt!("gptrs", "GPTRS v2 checkpoint", "gptrs")
    .extensions(&["gptrs"])
    .magic(&[b"GPTRSCHK"]);
/// GPTRS tensor archive.
pub const GPTRS_ARCHIVE: FormatSpec = unbuilt!("gptrsten", "GPTRS v2 tensor archive", "gptrs")
    .extensions(&["gptrsten"])
    .magic(&[b"GPTRSTEN"]);
/// safetensors.
pub const SAFETENSORS: FormatSpec = unbuilt!("safetensors", "safetensors", "safetensors")
    .extensions(&["safetensors"])
    .sniff(sniff::safetensors);
/// NumPy .npy.
pub const NPY: FormatSpec = unbuilt!("npy", "NumPy .npy", "npy")
    .extensions(&["npy"])
    .magic(&[b"\x93NUMPY"])
    .single_tensor();
/// NumPy .npz.
pub const NPZ: FormatSpec = unbuilt!("npz", "NumPy .npz", "npy")
    .extensions(&["npz"])
    .magic(&[b"PK\x03\x04", b"PK\x05\x06"]);
/// GGUF.
pub const GGUF: FormatSpec = unbuilt!("gguf", "GGUF", "gguf")
    .extensions(&["gguf"])
    .magic(&[b"GGUF"]);
/// PyTorch checkpoints.
pub const PYTORCH: FormatSpec = unbuilt!("pytorch", "PyTorch checkpoint", "pytorch")
    .extensions(&["pt", "pth", "bin", "ckpt"])
    .magic(&[b"PK\x03\x04", b"\x80"])
    .sniff(sniff::pytorch);
