//! What every reader is given and how it reads: [`ReadOptions`], the reader entry point
//! [`OpenFn`] and its [`Access`], and the two wrappers the opener puts around a reader's
//! container (a file read whole; errors labelled with the file and format). Opening by
//! content — detect the format, dispatch to its codec's reader — is
//! [`crate::formats::open`], above the formats.

use std::borrow::Cow;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::format::Format;
use crate::limits::Limits;
use crate::metadata::Metadata;
use crate::model::Container;
use crate::model::TensorSource;
use crate::remote::RemoteOptions;
use crate::source::SourceRef;
use crate::tensor::{ChunkInfo, TensorInfo, TensorView};
use crate::verify::{VerifyOptions, VerifyReport};

/// Options for opening a file. Its `Debug` output never shows the keys or the
/// passphrase it holds.
#[derive(Clone)]
#[non_exhaustive]
pub struct ReadOptions {
    /// Caps on what the reader accepts.
    pub limits: Limits,
    /// The path the bytes came from (for sibling files such as WTXT's `.wsum`).
    pub path: Option<PathBuf>,
    /// Keep reading past damaged tensors (WTXT `--salvage`): damaged ones are reported
    /// and skipped instead of failing the open.
    pub salvage: bool,
    /// age identities (X25519 secret keys, `AGE-SECRET-KEY-1…`) for encrypted files.
    pub age_identities: Vec<String>,
    /// age passphrase for encrypted files.
    pub age_passphrase: Option<String>,
    /// Check every digest the format stores for a tensor's or chunk's bytes before
    /// [`crate::TensorSource::tensor`] / `chunk` hands them out (an `Integrity` error
    /// names the file, tensor or chunk and the layer otherwise). On by default; off only
    /// when the caller asks (`--no-verify`, `verify=False`), and then the output says so.
    /// A checked read is still zero-copy where the bytes are stored raw: the bytes are
    /// hashed in place, once per tensor or chunk.
    pub verify: bool,
    /// Open to inspect or verify, not to hand tensors out: a part too damaged to list
    /// (a FOLD tensor chunk whose payload fails its checks) is reported in `warnings()`
    /// and by `verify` instead of failing the open. `tessera inspect` and `tessera
    /// verify` set it; a reader that would otherwise silently list fewer tensors fails.
    pub audit: bool,
    /// HMAC key for formats whose arrays carry keyed MACs (WTXT `arr … hmac=`): with a
    /// key, a read also checks the array's HMAC, and refuses an array that carries none.
    pub hmac_key: Option<Vec<u8>>,
    /// Open a path as the one file it is ([`crate::open_path`]): a shard of a set
    /// alone (its own tensors and metadata, no index looked for), a zTensor v2 root
    /// without its shard files; a directory or a set's index is then an error. Off by
    /// default (`--shard-only`, `shard=True`).
    pub shard_only: bool,
    /// How a local file's bytes are brought in: a read-only memory map (the default)
    /// or read whole into memory.
    pub load: Load,
    /// How a remote location (`s3://`, `http(s)://`) is reached: an endpoint, which
    /// token goes where ([`crate::open_path`] with a URL).
    pub remote: RemoteOptions,
    /// How a sibling file (`<path><suffix>`: WTXT's `.wsum`) is read when `path` names
    /// a remote object: fetched beside it (set by the remote opener, `set/remote.rs`).
    /// `None`: read from disk beside `path`.
    #[cfg_attr(not(feature = "wtxt"), allow(dead_code))]
    pub(crate) sibling: Option<Sibling>,
}

/// How a local file's bytes are brought in ([`ReadOptions::load`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Load {
    /// A read-only memory map (zero-copy reads).
    #[default]
    Map,
    /// Read whole into memory.
    Read,
}

/// Reads the sibling `<path><suffix>` of at most `max` bytes; the error is the message
/// to report (`unfinalized: URL not found` when there is none).
pub(crate) type Sibling =
    std::sync::Arc<dyn Fn(&str, u64) -> std::result::Result<Vec<u8>, String> + Send + Sync>;

impl std::fmt::Debug for ReadOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secret = |set: bool| if set { "<redacted>" } else { "none" };
        f.debug_struct("ReadOptions")
            .field("limits", &self.limits)
            .field("path", &self.path)
            .field("salvage", &self.salvage)
            .field("verify", &self.verify)
            .field("audit", &self.audit)
            .field("shard_only", &self.shard_only)
            .field("load", &self.load)
            .field("remote", &self.remote)
            .field("age_identities", &self.age_identities.len())
            .field("age_passphrase", &secret(self.age_passphrase.is_some()))
            .field("hmac_key", &secret(self.hmac_key.is_some()))
            .finish()
    }
}

impl Default for ReadOptions {
    fn default() -> ReadOptions {
        ReadOptions {
            limits: Limits::default(),
            path: None,
            salvage: false,
            age_identities: Vec::new(),
            age_passphrase: None,
            verify: true,
            audit: false,
            hmac_key: None,
            shard_only: false,
            load: Load::Map,
            remote: RemoteOptions::default(),
            sibling: None,
        }
    }
}

crate::setters::setters!(ReadOptions {
    /// Sets `limits`, the caps on what the reader accepts.
    limits: Limits,
    /// Sets `path`, where the bytes came from (for sibling files).
    path: Option<PathBuf>,
    /// Sets `salvage`: keep reading past damaged tensors.
    salvage: bool,
    /// Sets `age_identities`, the age secret keys for encrypted files.
    age_identities: Vec<String>,
    /// Sets `age_passphrase`, the age passphrase for encrypted files.
    age_passphrase: Option<String>,
    /// Sets `verify`: check stored digests before handing bytes out (on by default).
    verify: bool,
    /// Sets `audit`: open to inspect or verify, reporting damaged parts.
    audit: bool,
    /// Sets `hmac_key`, the key for keyed MACs (WTXT `hmac=`).
    hmac_key: Option<Vec<u8>>,
    /// Sets `shard_only`: open a shard of a set (or a zTensor v2 root) as the one file.
    shard_only: bool,
    /// Sets `load`: map local files (the default) or read them whole.
    load: Load,
    /// Sets `remote`, how remote locations are reached.
    remote: RemoteOptions,
});

/// A reader entry point: parse and validate the file `src` holds, return it opened.
pub type OpenFn = for<'d> fn(SourceRef<'d>, &ReadOptions) -> Result<Box<dyn Container + 'd>>;

/// How a format's reader reads its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Access {
    /// By range: opening reads only the header and index; each tensor is read when
    /// asked, borrowed from an in-memory source, read into a buffer otherwise.
    Ranges,
    /// The layout forces a full scan (WTXT's text): a source that is not in memory is
    /// read whole, sequentially, before parsing.
    Whole,
}

pub(crate) type DynContainer<'a> = Box<dyn Container + 'a>;

self_cell::self_cell!(
    /// A file read whole into memory (a full-scan format over a source that is not in
    /// memory) and the container parsed from those bytes.
    pub(crate) struct Wholly {
        owner: Vec<u8>,
        #[not_covariant]
        dependent: DynContainer,
    }
);

impl Wholly {
    /// Parses `bytes` with `open`, the container borrowing the bytes it owns.
    pub(crate) fn open(bytes: Vec<u8>, open: OpenFn, opts: &ReadOptions) -> Result<Wholly> {
        Wholly::try_new(bytes, |b| open(SourceRef::from(&b[..]), opts))
    }
}

crate::model::forward_to_dependent!(Wholly);

/// An opened file whose read errors name the file and its format.
pub(crate) struct Labeled<'d> {
    pub(crate) inner: Box<dyn Container + 'd>,
    pub(crate) file: String,
    pub(crate) format: Format,
}

impl Labeled<'_> {
    fn label(&self, e: Error) -> Error {
        e.in_format(self.format).in_file(self.file.clone())
    }
}

impl TensorSource for Labeled<'_> {
    fn metadata(&self) -> &Metadata {
        self.inner.metadata()
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        self.inner.tensor_infos()
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        self.inner.tensor(name).map_err(|e| self.label(e))
    }
    fn tensors(&self, names: &[&str]) -> Vec<Result<TensorView<'_>>> {
        let got = self.inner.tensors(names);
        got.into_iter()
            .map(|r| r.map_err(|e| self.label(e)))
            .collect()
    }
    fn interrupted(&self) -> Result<()> {
        self.inner.interrupted()
    }
    fn chunks(&self) -> &[ChunkInfo] {
        self.inner.chunks()
    }
    fn chunk(&self, name: &str) -> Result<Cow<'_, [u8]>> {
        self.inner.chunk(name).map_err(|e| self.label(e))
    }
    fn source_format(&self) -> Option<Format> {
        self.inner.source_format()
    }
    fn metadata_types(&self) -> Option<&Metadata> {
        self.inner.metadata_types()
    }
    fn chunk_stored(&self, name: &str) -> Result<Option<crate::tensor::StoredChunk<'_>>> {
        self.inner.chunk_stored(name).map_err(|e| self.label(e))
    }
    fn raw_extent(&self, name: &str) -> Result<Option<crate::slice::RawExtent<'_>>> {
        self.inner.raw_extent(name).map_err(|e| self.label(e))
    }
}

impl Container for Labeled<'_> {
    fn format(&self) -> Format {
        self.inner.format()
    }
    fn version(&self) -> String {
        self.inner.version()
    }
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport {
        self.inner.verify(opts)
    }
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings()
    }
    fn lost(&self) -> Vec<crate::refusal::Lost> {
        self.inner.lost()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_secrets() {
        let o = ReadOptions {
            hmac_key: Some(b"hmac-secret".to_vec()),
            age_passphrase: Some("pass-secret".into()),
            age_identities: vec!["AGE-SECRET-KEY-1SECRET".into()],
            remote: RemoteOptions::default().bearer_token(Some("bearer-secret".into())),
            ..ReadOptions::default()
        };
        let text = format!("{o:?}");
        for s in [
            "hmac-secret",
            "pass-secret",
            "SECRET-KEY",
            "104, 109",
            "bearer-secret",
        ] {
            assert!(!text.contains(s), "{text}");
        }
        assert!(text.contains("redacted"));
    }

    #[test]
    fn labeled_forwards_every_method() {
        use crate::model::probe::{check_forwards, Probe};
        let l = Labeled {
            inner: Box::new(Probe::new()),
            file: "f".into(),
            format: Format::Gguf,
        };
        check_forwards(&l, &[]);
        assert_eq!(l.warnings(), ["probe: warning"]);
    }
}
