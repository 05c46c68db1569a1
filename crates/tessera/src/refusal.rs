//! Refusals and the hints that would lift them, as data.
//!
//! A conversion that cannot be made as asked is refused with every reason at once (each
//! tensor whose dtype, layout or packing the target cannot hold, the metadata or chunks
//! it cannot carry), not one per run. Each [`Refusal`] carries a [`Hint`]: the option
//! that would allow the loss. The library never spells an option as a CLI flag or a
//! Python keyword; the front ends do ([`crate::Error::render`] takes their spelling):
//! the CLI shows `Hint::Cast` as `--cast`, Python as `cast=True`.

use std::fmt::Write as _;

/// What the caller could say to make a refused operation go through.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hint {
    /// Cast dtypes the target cannot hold ([`crate::ConvertOptions::cast`]).
    Cast,
    /// Store sparse tensors densely ([`crate::ConvertOptions::densify`]).
    Densify,
    /// Drop metadata and opaque chunks the target cannot carry
    /// ([`crate::ConvertOptions::drop_metadata`]).
    DropMetadata,
    /// Decode quantized blocks to a float dtype the target holds
    /// ([`crate::ConvertOptions::dequantize`]: f32, f16 or bf16).
    Dequantize,
    /// Read what can be read and report the rest as lost
    /// ([`crate::ReadOptions::salvage`]).
    Salvage,
    /// Say that a loss (salvaged parts missing from the output) is expected.
    AcceptLoss,
    /// Skip the stored digests ([`crate::ReadOptions::verify`] off).
    NoVerify,
    /// Give the passphrase of an age-encrypted file.
    Passphrase,
    /// Give an age identity (secret key) of an age-encrypted file.
    Identity,
}

impl Hint {
    /// The option's neutral name (`cast`, `drop-metadata`, …), as `Display` shows it.
    pub const fn name(self) -> &'static str {
        match self {
            Hint::Cast => "cast",
            Hint::Densify => "densify",
            Hint::DropMetadata => "drop-metadata",
            Hint::Dequantize => "dequantize",
            Hint::Salvage => "salvage",
            Hint::AcceptLoss => "accept-loss",
            Hint::NoVerify => "no-verify",
            Hint::Passphrase => "passphrase",
            Hint::Identity => "identity",
        }
    }
}

/// One thing a conversion cannot do as asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The tensor refused, or `None` for the file as a whole (metadata, chunks).
    pub tensor: Option<String>,
    /// Why, worded to follow "tensor "w" is" / "3 tensors are" for a tensor
    /// (`f64, which GPTRS cannot store`), a whole sentence otherwise.
    pub reason: String,
    /// The option that would allow it, if any.
    pub hint: Option<Hint>,
}

impl Refusal {
    /// A tensor refused for `reason`.
    pub fn tensor(name: &str, reason: impl Into<String>, hint: Option<Hint>) -> Refusal {
        Refusal {
            tensor: Some(name.to_string()),
            reason: reason.into(),
            hint,
        }
    }
    /// The file as a whole refused for `reason`.
    pub fn file(reason: impl Into<String>, hint: Option<Hint>) -> Refusal {
        Refusal {
            tensor: None,
            reason: reason.into(),
            hint,
        }
    }
}

/// A part of a file that a salvaging read ([`crate::ReadOptions::salvage`]) could not
/// read and left out: what (an array, a chunk and the tensors it held) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    /// What was left out, in the file's terms (`array "w"`, `STEN chunk "c0"`).
    pub what: String,
    /// Why it could not be read.
    pub why: String,
}

/// How many tensor names a group of refusals lists before "and K more".
pub const NAMED: usize = 5;

/// Renders refusals grouped by reason and hint, in first-seen order: one line per group
/// (`12 tensors are f64, which GPTRS cannot store: "a", "b", … and 7 more (hint)`).
/// `hint` spells a hint as the caller's front end does.
pub fn render(refusals: &[Refusal], hint: &dyn Fn(Hint) -> String) -> Vec<String> {
    let mut groups: Vec<(&str, Option<Hint>, bool, Vec<&str>)> = Vec::new();
    for r in refusals {
        let key = (r.reason.as_str(), r.hint, r.tensor.is_some());
        let at = match groups.iter().position(|g| (g.0, g.1, g.2) == key) {
            Some(i) => i,
            None => {
                groups.push((key.0, key.1, key.2, Vec::new()));
                groups.len() - 1
            }
        };
        let group = &mut groups[at];
        if let Some(t) = &r.tensor {
            group.3.push(t);
        }
    }
    groups
        .into_iter()
        .map(|(reason, h, is_tensor, names)| {
            let mut line = String::new();
            if !is_tensor {
                line.push_str(reason);
            } else if names.len() == 1 {
                let _ = write!(line, "tensor {:?} is {reason}", names[0]);
            } else {
                let _ = write!(line, "{} tensors are {reason}: ", names.len());
                let shown: Vec<String> =
                    names.iter().take(NAMED).map(|n| format!("{n:?}")).collect();
                line.push_str(&shown.join(", "));
                if names.len() > NAMED {
                    let _ = write!(line, " and {} more", names.len() - NAMED);
                }
            }
            if let Some(h) = h {
                let _ = write!(line, " ({})", hint(h));
            }
            line
        })
        .collect()
}
