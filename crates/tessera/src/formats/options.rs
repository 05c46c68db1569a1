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
