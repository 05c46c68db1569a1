//! Shard file names: the `-00001-of-00004` pattern both Hugging Face and llama.cpp use,
//! and the rule that a name an index gives must be a plain file name in the index's own
//! directory.

use crate::error::{Error, Result};

/// A name of the form `{prefix}-{no:05}-of-{count:05}{suffix}` (1-based `no`, as both
/// Hugging Face and llama.cpp write it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Numbered {
    /// What comes before `-00001-of-…`.
    pub prefix: String,
    /// The shard's number, from 1.
    pub no: u32,
    /// How many shards the name says there are.
    pub count: u32,
    /// What follows the count (`.gguf`, `.safetensors`).
    pub suffix: String,
}

impl Numbered {
    /// Parses `name` when it ends with `-NNNNN-of-NNNNN` + `suffix` (five digits each,
    /// `1 <= no <= count`).
    pub fn parse(name: &str, suffix: &str) -> Option<Numbered> {
        let stem = name.strip_suffix(suffix)?;
        // "-00001-of-00004" is 15 bytes.
        let split = stem.len().checked_sub(15)?;
        if !stem.is_char_boundary(split) {
            return None;
        }
        let (prefix, tail) = stem.split_at(split);
        let tail = tail.as_bytes();
        let digits = |b: &[u8]| -> Option<u32> {
            if b.len() == 5 && b.iter().all(u8::is_ascii_digit) {
                std::str::from_utf8(b).ok()?.parse().ok()
            } else {
                None
            }
        };
        if tail[0] != b'-' || &tail[6..10] != b"-of-" {
            return None;
        }
        let no = digits(&tail[1..6])?;
        let count = digits(&tail[10..15])?;
        (no >= 1 && no <= count).then(|| Numbered {
            prefix: prefix.to_string(),
            no,
            count,
            suffix: suffix.to_string(),
        })
    }

    /// The name of shard `no` (1-based) of the same set.
    pub fn sibling(&self, no: u32) -> String {
        format!(
            "{}-{no:05}-of-{:05}{}",
            self.prefix, self.count, self.suffix
        )
    }
}

/// The shards missing from a numbered set an index names: for every numbered set among
/// `names` (`suffix` gives the ending each name is numbered before: `.safetensors`, or
/// the name's own extension), each sibling `names` leaves out, as `"{name} (present)"`
/// or `"{name} (absent)"` by `exists`. A number an index skips is a shard whose tensors
/// it forgets.
pub fn unnamed_siblings(
    names: &[String],
    suffix: impl Fn(&str) -> Option<&str>,
    exists: impl Fn(&str) -> bool,
) -> Vec<String> {
    let named: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
    let sets: std::collections::BTreeSet<(String, u32, String)> = names
        .iter()
        .filter_map(|n| Numbered::parse(n, suffix(n)?))
        .map(|n| (n.prefix, n.count, n.suffix))
        .collect();
    let mut out = Vec::new();
    for (prefix, count, suffix) in sets {
        let n = Numbered {
            prefix,
            no: 1,
            count,
            suffix,
        };
        for sib in (1..=count).map(|i| n.sibling(i)) {
            if !named.contains(sib.as_str()) {
                let there = if exists(&sib) { "present" } else { "absent" };
                out.push(format!("{sib} ({there})"));
            }
        }
    }
    out
}

/// Checks that a shard name from an index is a plain file name: not empty, not `.` or
/// `..`, no `/`, `\` or NUL, no drive prefix, at most 255 bytes — so that it can only
/// name a file beside the index.
pub fn check_plain(name: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::malformed(format!(
            "shard file name {name:?} {why}: an index may only name files in its own directory"
        )))
    };
    if name.is_empty() {
        return bad("is empty");
    }
    if name == "." || name == ".." {
        return bad("is a directory reference");
    }
    if name.contains(['/', '\\']) {
        return bad("contains a path separator");
    }
    if name.contains('\0') {
        return bad("contains a NUL byte");
    }
    if name.len() > 1 && name.as_bytes()[0].is_ascii_alphabetic() && name.as_bytes()[1] == b':' {
        return bad("has a drive prefix");
    }
    if name.len() > 255 {
        return bad("is longer than 255 bytes");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_names() {
        let n = Numbered::parse("model-00002-of-00004.safetensors", ".safetensors").unwrap();
        assert_eq!((n.prefix.as_str(), n.no, n.count), ("model", 2, 4));
        assert_eq!(n.sibling(4), "model-00004-of-00004.safetensors");
        assert!(Numbered::parse("model-00005-of-00004.gguf", ".gguf").is_none());
        assert!(Numbered::parse("model-00000-of-00004.gguf", ".gguf").is_none());
        assert!(Numbered::parse("model-0001-of-00004.gguf", ".gguf").is_none());
        assert!(Numbered::parse("x.gguf", ".gguf").is_none());
        assert!(Numbered::parse("ü-00001-of-00001.gguf", ".gguf").is_some());
    }

    #[test]
    fn plain_names_only() {
        assert!(check_plain("model-00001-of-00002.safetensors").is_ok());
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "/etc/passwd",
            "a/b",
            "a\\b",
            "C:x",
            "a\0b",
        ] {
            assert!(check_plain(bad).is_err(), "{bad:?}");
        }
        assert!(check_plain(&"a".repeat(256)).is_err());
    }
}
