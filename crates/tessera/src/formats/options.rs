//! The writer options the codecs declare, looked up over the whole table: by name
//! (`-O name=value`, Python keywords) and against a target format. The options
//! themselves — their types, parsers and the shared declarations — are
//! [`crate::options`], below the formats.

use crate::error::{Error, Result};
use crate::format::Format;
use crate::options::{OptionSpec, OptionValue, WriteOptions};

/// Every option some format's codec declares (first declaration of each name).
pub fn all_options() -> Vec<&'static OptionSpec> {
    let mut out: Vec<&'static OptionSpec> = Vec::new();
    for f in Format::ALL {
        for o in f.codec().options {
            if !out.iter().any(|x| x.name == o.name) {
                out.push(o);
            }
        }
    }
    out
}

/// The option a name or alias means, among all formats' options.
pub fn find_option(name: &str) -> Option<&'static OptionSpec> {
    let n = name.trim().trim_start_matches("--").replace('-', "_");
    all_options()
        .into_iter()
        .find(|o| o.name == n || o.aliases.contains(&n.as_str()))
}

/// Refuses every option set in `opts` that `format` does not declare, naming them and
/// the format, and what it does take.
pub fn check_options(format: Format, opts: &WriteOptions) -> Result<()> {
    let declared = format.codec().options;
    let refused: Vec<&str> = opts
        .given()
        .into_iter()
        .filter(|n| !declared.iter().any(|o| o.name == *n))
        .collect();
    if refused.is_empty() {
        return Ok(());
    }
    let takes = if declared.is_empty() {
        "it takes no options".to_string()
    } else {
        let names: Vec<&str> = declared.iter().map(|o| o.name).collect();
        format!("it takes {}", names.join(", "))
    };
    let (what, list) = if refused.len() == 1 {
        ("option", refused[0].to_string())
    } else {
        ("options", refused.join(", "))
    };
    Err(Error::invalid_input(format!(
        "{} does not use the {what} {list}: {takes}",
        format.title()
    )))
}

impl WriteOptions {
    /// Sets the option `name` (or one of its aliases) from `value`: the one parser behind
    /// `-O name=value`, the CLI's older flags and Python's keyword arguments. The option
    /// must be one some format declares; whether the target format takes it is
    /// [`check_options`]'s call, at write time. Keys (`hmac_key`, `sign_key`) arrive as
    /// `Bytes` (the CLI reads them from the file named).
    pub fn set(&mut self, name: &str, value: OptionValue) -> Result<()> {
        let o = find_option(name).ok_or_else(|| {
            let names: Vec<&str> = all_options().iter().map(|o| o.name).collect();
            Error::invalid_input(format!(
                "unknown option {name:?}; the formats take {}",
                names.join(", ")
            ))
        })?;
        self.apply(o, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{Compression, Digest, OptionKind};

    fn set(o: &mut WriteOptions, k: &str, v: &str) -> Result<()> {
        o.set(k, OptionValue::Text(v.into()))
    }

    #[test]
    #[cfg(all(feature = "aero", feature = "wtxt", feature = "ztensor"))]
    fn one_parser_for_every_format_s_names_and_aliases() {
        use crate::formats::aero::AeroOptions;
        use crate::formats::wtxt::WtxtOptions;
        let mut o = WriteOptions::default();
        set(&mut o, "compress", "zstd:7").unwrap();
        assert_eq!(o.compression, Compression::Zstd(7));
        set(&mut o, "shard_size", "1G").unwrap();
        assert_eq!(
            AeroOptions::from_options(&o).unwrap().shard_size,
            Some(1 << 30)
        );
        set(&mut o, "--shard-size", "4K").unwrap();
        o.set("tensor_hashes", OptionValue::Flag).unwrap();
        o.set("page_hashes", OptionValue::Flag).unwrap();
        let a = AeroOptions::from_options(&o).unwrap();
        assert_eq!(
            (a.shard_size, a.tensor_hashes, a.page_hashes),
            (Some(4096), true, Some(4 << 20))
        );
        set(&mut o, "gen", "7").unwrap();
        set(&mut o, "salt", "0011223344556677").unwrap();
        let w = WtxtOptions::from_options(&o).unwrap();
        assert_eq!(w.generation, Some(7));
        assert_eq!(
            w.fixed_salt,
            Some([0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77])
        );
        set(&mut o, "digest", "sha256").unwrap();
        assert_eq!(o.digests, vec![Digest::Sha256]);
        let e = set(&mut o, "no_such_option", "1").unwrap_err();
        assert!(
            e.to_string().contains("unknown option \"no_such_option\""),
            "{e}"
        );
    }

    #[test]
    #[cfg(all(feature = "fold", feature = "aero"))]
    fn a_format_s_option_is_refused_at_set_time_when_its_field_cannot_hold_it() {
        let mut o = WriteOptions::default();
        let e = set(&mut o, "ecc", "300").unwrap_err();
        assert!(
            e.to_string().contains("ecc") && e.to_string().contains("255"),
            "{e}"
        );
        let e = set(&mut o, "uuid", "abcd").unwrap_err();
        assert!(e.to_string().contains("uuid"), "{e}");
        assert!(o.given().is_empty());
    }

    #[test]
    #[cfg(all(
        feature = "safetensors",
        feature = "ztensor",
        feature = "gguf",
        feature = "fold",
        feature = "wtxt"
    ))]
    fn undeclared_options_are_refused_naming_option_and_format() {
        use crate::formats::fold::FoldOptions;
        use crate::formats::wtxt::WtxtOptions;
        let o = WriteOptions::default().compression(Compression::Zstd(15));
        let s = check_options(Format::Safetensors, &o)
            .unwrap_err()
            .to_string();
        assert!(
            s.contains("compression") && s.contains("safetensors"),
            "{s}"
        );
        assert!(check_options(Format::Ztensor, &o).is_ok());
        let o = WriteOptions::default()
            .with(FoldOptions::default().ecc(Some(8)))
            .with(WtxtOptions::default().generation(Some(2)));
        let s = check_options(Format::Gguf, &o).unwrap_err().to_string();
        assert!(s.contains("ecc, generation") && s.contains("GGUF"), "{s}");
        assert!(check_options(Format::Gguf, &WriteOptions::default()).is_ok());
        // An option only a format's own bag knows: refused where it is not declared.
        let mut w = WriteOptions::default();
        w.extra.insert("part_size".into(), OptionValue::Int(2048));
        assert!(check_options(Format::Ztensor, &w).is_err());
    }

    #[test]
    fn every_declared_option_is_settable_and_given() {
        for o in all_options() {
            let mut w = WriteOptions::default();
            let v = match o.kind {
                OptionKind::Bool => OptionValue::Flag,
                OptionKind::Int | OptionKind::Size => OptionValue::Text("8".into()),
                // FOLD's `chunk` is NAME=FILE.
                OptionKind::Texts if o.name == "chunk" => OptionValue::Text("metrics=x".into()),
                OptionKind::Text | OptionKind::Path | OptionKind::Texts => {
                    OptionValue::Text("x".into())
                }
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

    /// An option two formats declare is one option: the same kind (set by name, it
    /// is parsed by the first declaration).
    #[test]
    fn an_option_two_formats_declare_has_one_kind() {
        for f in Format::ALL {
            for o in f.codec().options {
                let first = find_option(o.name).unwrap();
                assert_eq!(first.kind, o.kind, "{}: {}", f.name(), o.name);
                assert_eq!(first.flag_value, o.flag_value, "{}: {}", f.name(), o.name);
            }
        }
    }
}
