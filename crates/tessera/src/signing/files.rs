//! A model's files hashed as OpenSSF model-signing 1.x serializes them.
//!
//! model-signing signs a *model path* — a file or a directory — as a list of resources,
//! each a name and a digest:
//!
//! - **`files`**: one resource per regular file under the path, named by its path
//!   relative to the model path with `/` separators (a model that is a single file is
//!   one resource named `.`), the digest the SHA-256 (or BLAKE2b-512, or BLAKE3) of the
//!   file's bytes.
//! - **`shards`**: each file cut into `shard_size`-byte pieces, named
//!   `PATH:START:END`, each hashed alone (the algorithm recorded as
//!   `sha256-sharded-SIZE`).
//!
//! Paths named in the signature's `ignore_paths` (and the git files model-signing skips by
//! default: `.git`, `.gitattributes`, `.github`, `.gitignore`) are skipped with everything
//! under them. Symbolic links are refused unless the signature says `allow_symlinks`,
//! then a link to a file is hashed as that file (a link to a directory is refused).
//!
//! Resources are ordered as model-signing orders them — by path *components*, then start
//! and end — and the statement's subject digest is the SHA-256 of their raw digests
//! concatenated in that order. model-signing's `blake2` is BLAKE2b with its 64-byte
//! digest (Python's `hashlib.blake2b()`), recorded as `blake2b`. A hash this does not
//! know is refused as unsupported, never reported as a failed check.
//!
//! Hand-written because no crate implements model-signing's serialization; it is short.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use crate::error::{Error, Result};

/// The git paths model-signing ignores unless told otherwise.
pub const GIT_PATHS: [&str; 4] = [".git", ".gitattributes", ".github", ".gitignore"];

/// The hash of each resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashType {
    /// SHA-256 (model-signing's default).
    Sha256,
    /// BLAKE2b-512 (model-signing's `blake2`, recorded as `blake2b`).
    Blake2b,
    /// BLAKE3.
    Blake3,
}

impl HashType {
    /// The name model-signing records.
    pub fn name(self) -> &'static str {
        match self {
            HashType::Sha256 => "sha256",
            HashType::Blake2b => "blake2b",
            HashType::Blake3 => "blake3",
        }
    }

    /// Parses a recorded name.
    pub fn parse(s: &str) -> Result<HashType> {
        match s {
            "sha256" => Ok(HashType::Sha256),
            "blake2b" | "blake2" => Ok(HashType::Blake2b),
            "blake3" => Ok(HashType::Blake3),
            other => Err(Error::unsupported(format!(
                "model-signing hash {other:?} (Tessera checks sha256, blake2b and blake3)"
            ))),
        }
    }
}

/// How the model's files were cut into resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    /// One resource per file.
    Files,
    /// Files cut into pieces of this many bytes.
    Shards(u64),
}

/// The signature's `serialization` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Serialization {
    /// Files or shards.
    pub method: Method,
    /// The hash.
    pub hash: HashType,
    /// Whether symbolic links were followed.
    pub allow_symlinks: bool,
    /// Paths relative to the model path that were skipped.
    pub ignore_paths: Vec<String>,
}

/// One signed resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// `PATH` or `PATH:START:END`.
    pub name: String,
    /// `sha256`, `blake3`, `sha256-sharded-SIZE`…
    pub algorithm: String,
    /// The raw digest.
    pub digest: Vec<u8>,
}

/// The subject digest: SHA-256 over the resources' raw digests, in their order.
pub fn root_digest(resources: &[Resource]) -> [u8; 32] {
    let mut h = Sha256::new();
    for r in resources {
        h.update(&r.digest);
    }
    h.finalize().into()
}

/// Sorts resources as model-signing does: by path components, then start, end.
pub fn sort(resources: &mut [Resource]) {
    fn key(name: &str) -> (Vec<&str>, u64, u64) {
        let mut parts = name.rsplitn(3, ':');
        let (end, start, path) = (parts.next(), parts.next(), parts.next());
        match (
            path,
            start.and_then(|s| s.parse().ok()),
            end.and_then(|e| e.parse().ok()),
        ) {
            (Some(p), Some(s), Some(e)) => (p.split('/').collect(), s, e),
            _ => (name.split('/').collect(), 0, 0),
        }
    }
    resources.sort_by(|a, b| key(&a.name).cmp(&key(&b.name)));
}

/// Lists the files of the model at `root` (relative name, path), skipping `ignore`
/// (paths relative to `root`, each skipping what is under it).
fn list_files(
    root: &Path,
    ser: &Serialization,
    ignore: &[String],
) -> Result<Vec<(String, PathBuf)>> {
    let meta = std::fs::symlink_metadata(root)
        .map_err(|e| Error::from(e).at_subject(root.display().to_string()))?;
    let follow = |path: &Path, meta: std::fs::Metadata| -> Result<std::fs::Metadata> {
        if !meta.file_type().is_symlink() {
            return Ok(meta);
        }
        if !ser.allow_symlinks {
            return Err(Error::unsupported(format!(
                "{} is a symbolic link, and the signature does not allow symlinks",
                path.display()
            )));
        }
        std::fs::metadata(path).map_err(|e| Error::from(e).at_subject(path.display().to_string()))
    };
    let meta = follow(root, meta)?;
    if meta.is_file() {
        return Ok(vec![(".".to_string(), root.to_path_buf())]);
    }
    let skipped = |rel: &str| {
        ignore.iter().any(|i| {
            let i = i.trim_end_matches('/');
            rel == i
                || rel
                    .strip_prefix(i)
                    .is_some_and(|rest| rest.starts_with('/'))
        })
    };
    let mut out = Vec::new();
    let mut stack = vec![(String::new(), root.to_path_buf())];
    while let Some((prefix, dir)) = stack.pop() {
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| Error::from(e).at_subject(dir.display().to_string()))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::from(e).at_subject(dir.display().to_string()))?;
            let name = entry
                .file_name()
                .into_string()
                .map_err(|n| Error::unsupported(format!("a file name that is not UTF-8: {n:?}")))?;
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            if skipped(&rel) {
                continue;
            }
            let path = entry.path();
            let meta = entry
                .metadata()
                .map_err(|e| Error::from(e).at_subject(path.display().to_string()))?;
            let was_link = meta.file_type().is_symlink();
            let meta = follow(&path, meta)?;
            if meta.is_dir() {
                if was_link {
                    return Err(Error::unsupported(format!(
                        "{} is a symbolic link to a directory",
                        path.display()
                    )));
                }
                stack.push((rel, path));
            } else if meta.is_file() {
                out.push((rel, path));
            } else {
                return Err(Error::unsupported(format!(
                    "{} is neither a file nor a directory",
                    path.display()
                )));
            }
        }
    }
    Ok(out)
}

/// Hashes `len` bytes of `file` from where it stands.
fn hash_reader(file: &mut impl Read, hash: HashType, len: u64, path: &Path) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; 1 << 20];
    let mut sha = Sha256::new();
    let mut b2 = blake2::Blake2b512::new();
    let mut b3 = blake3::Hasher::new();
    let mut left = len;
    while left > 0 {
        let want = usize::try_from(left.min(buf.len() as u64)).unwrap_or(buf.len());
        let n = file
            .read(&mut buf[..want])
            .map_err(|e| Error::from(e).at_subject(path.display().to_string()))?;
        if n == 0 {
            return Err(Error::invalid_input(format!(
                "{} shrank while it was hashed",
                path.display()
            )));
        }
        match hash {
            HashType::Sha256 => sha.update(&buf[..n]),
            HashType::Blake2b => b2.update(&buf[..n]),
            HashType::Blake3 => {
                b3.update(&buf[..n]);
            }
        }
        left -= n as u64;
    }
    Ok(match hash {
        HashType::Sha256 => sha.finalize().to_vec(),
        HashType::Blake2b => b2.finalize().to_vec(),
        HashType::Blake3 => b3.finalize().as_bytes().to_vec(),
    })
}

/// Hashes the model at `root` as `ser` describes, skipping `ser.ignore_paths`, the git
/// paths and `extra_ignore` (paths relative to `root`). Resources come back sorted.
pub fn hash_model(
    root: &Path,
    ser: &Serialization,
    extra_ignore: &[String],
) -> Result<Vec<Resource>> {
    let mut ignore: Vec<String> = ser.ignore_paths.clone();
    ignore.extend(GIT_PATHS.iter().map(|s| s.to_string()));
    ignore.extend(extra_ignore.iter().cloned());
    let mut out = Vec::new();
    for (rel, path) in list_files(root, ser, &ignore)? {
        let mut f = std::fs::File::open(&path)
            .map_err(|e| Error::from(e).at_subject(path.display().to_string()))?;
        let size = f
            .metadata()
            .map_err(|e| Error::from(e).at_subject(path.display().to_string()))?
            .len();
        match ser.method {
            Method::Files => out.push(Resource {
                name: rel,
                algorithm: ser.hash.name().to_string(),
                digest: hash_reader(&mut f, ser.hash, size, &path)?,
            }),
            Method::Shards(step) => {
                let mut start = 0u64;
                loop {
                    let end = start.saturating_add(step).min(size);
                    out.push(Resource {
                        name: format!("{rel}:{start}:{end}"),
                        algorithm: format!("{}-sharded-{step}", ser.hash.name()),
                        digest: hash_reader(&mut f, ser.hash, end - start, &path)?,
                    });
                    start = end;
                    if start >= size {
                        break;
                    }
                }
            }
        }
    }
    sort(&mut out);
    Ok(out)
}

/// The path of `inner` relative to the model path `root`, when it lies inside it.
pub fn relative_inside(root: &Path, inner: &Path) -> Option<String> {
    let root = std::fs::canonicalize(root).ok()?;
    let parent = inner.parent().filter(|p| !p.as_os_str().is_empty());
    let parent = std::fs::canonicalize(parent.unwrap_or(Path::new("."))).ok()?;
    let full = parent.join(inner.file_name()?);
    let rel = full.strip_prefix(&root).ok()?;
    let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
    let parts = parts?;
    (!parts.is_empty()).then(|| parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(name: &str) -> Resource {
        Resource {
            name: name.into(),
            algorithm: "sha256".into(),
            digest: vec![],
        }
    }

    #[test]
    fn order_is_by_path_components_as_python_sorts_paths() {
        let mut r = vec![
            res("a.txt"),
            res("a/b"),
            res("b:10:20"),
            res("b:0:10"),
            res("a"),
        ];
        sort(&mut r);
        let names: Vec<&str> = r.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["a", "a/b", "a.txt", "b:0:10", "b:10:20"]);
    }

    #[test]
    fn directories_skip_ignored_and_git_paths() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join(".git/objects")).unwrap();
        std::fs::create_dir_all(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join(".git/objects/x"), b"1").unwrap();
        std::fs::write(d.path().join("sub/w"), b"hello").unwrap();
        std::fs::write(d.path().join("model.sig"), b"{}").unwrap();
        let ser = Serialization {
            method: Method::Shards(3),
            hash: HashType::Sha256,
            allow_symlinks: false,
            ignore_paths: vec!["model.sig".into()],
        };
        let r = hash_model(d.path(), &ser, &[]).unwrap();
        let names: Vec<&str> = r.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["sub/w:0:3", "sub/w:3:5"]);
        assert_eq!(r[0].digest, Sha256::digest(b"hel").to_vec());
        assert_eq!(
            relative_inside(d.path(), &d.path().join("sub/x.sig")).as_deref(),
            Some("sub/x.sig")
        );
    }

    #[test]
    fn blake2b_is_the_512_bit_digest_of_rfc_7693() {
        let got = hash_reader(&mut &b"abc"[..], HashType::Blake2b, 3, Path::new("abc")).unwrap();
        assert_eq!(
            crate::util::hex(&got),
            "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1\
             7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923"
        );
        assert_eq!(HashType::parse("blake2b").unwrap(), HashType::Blake2b);
        assert_eq!(
            HashType::parse("md5").unwrap_err().kind(),
            crate::ErrorKind::Unsupported
        );
    }
}
