//! The read side every format shares: [`TensorSource`] (anything tensors can be read
//! from, file or memory) and [`Container`] (an opened file), plus [`Model`], an owned
//! in-memory set of tensors.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::format::Format;
use crate::metadata::Metadata;
use crate::tensor::{ChunkInfo, Part, TensorInfo, TensorView};
use crate::verify::{VerifyOptions, VerifyReport};

/// The position of tensor `name` in a reader's name → index map, or
/// [`Error::no_tensor`]: the lookup every reader's `tensor()` starts with.
pub fn tensor_position(index: &HashMap<String, usize>, name: &str) -> Result<usize> {
    index
        .get(name)
        .copied()
        .ok_or_else(|| Error::no_tensor(name))
}

/// Anything tensors can be read from: an opened file, an in-memory [`Model`], or an
/// adapter (cast, densify) over another source. Writers take a `&dyn TensorSource` and
/// ask for its tensors a batch at a time ([`crate::write::drive`]), so memory stays
/// near two batches.
///
/// A wrapper over another source forwards every method, those with a default too
/// (otherwise it answers with the default instead of the inner source's better answer):
/// the unit tests of each wrapper check it with `model::probe`.
pub trait TensorSource: Send + Sync {
    /// File-level metadata.
    fn metadata(&self) -> &Metadata;
    /// Every tensor, in file order.
    fn tensor_infos(&self) -> &[TensorInfo];
    /// One tensor's bytes: borrowed from the file when stored canonically, decoded
    /// otherwise. May be called more than once for the same tensor.
    fn tensor(&self, name: &str) -> Result<TensorView<'_>>;
    /// Several tensors, in the order of `names`, read in parallel on the rayon pool
    /// (each as [`TensorSource::tensor`] reads it, its digests checked): decompression
    /// and hashing of compressed formats on every core, ranges of remote files in
    /// parallel. Memory holds every tensor decoded at once; read in batches to bound it.
    fn tensors(&self, names: &[&str]) -> Vec<Result<TensorView<'_>>> {
        use rayon::prelude::*;
        names.par_iter().map(|n| self.tensor(n)).collect()
    }
    /// Whether the work reading this source should stop (the Python package's Ctrl-C),
    /// asked by writers between tensors on the thread that drives the write (reads may
    /// run on pool threads, where Python cannot see a signal). Wrappers forward it.
    fn interrupted(&self) -> Result<()> {
        Ok(())
    }
    /// Opaque chunks (not tensors), in file order.
    fn chunks(&self) -> &[ChunkInfo] {
        &[]
    }
    /// One chunk's decoded bytes.
    fn chunk(&self, name: &str) -> Result<Cow<'_, [u8]>> {
        Err(Error::not_found(format!("no chunk named {name:?}")))
    }
    /// The format the source was read from, if any (conversions keep format-specific
    /// metadata only within the same format).
    fn source_format(&self) -> Option<Format> {
        None
    }
    /// Value-type annotations of the metadata that only the source's format has (GGUF's
    /// `u32` vs `i64`, `[str]`, …: key → annotation), kept beside the metadata rather
    /// than in it, so a writer of the same format rewrites the metadata exactly.
    fn metadata_types(&self) -> Option<&crate::metadata::Map> {
        None
    }
    /// Chunk `name` as the source's format stores it, its digests checked as
    /// [`TensorSource::chunk`] checks them, for a writer of the same format to copy it
    /// byte for byte ([`StoredChunk`]); `None` when the source has no stored form to
    /// hand over (the writer then encodes [`TensorSource::chunk`]'s bytes).
    fn chunk_stored(&self, name: &str) -> Result<Option<crate::tensor::StoredChunk<'_>>> {
        let _ = name;
        Ok(None)
    }
    /// Where tensor `name`'s dense bytes lie raw (uncompressed, unencrypted, row-major,
    /// contiguous) in a source the reader holds, for slice reads
    /// ([`crate::slice::read_slice`]) that read only the bytes asked for; `None` (the
    /// default) when they do not, and the slice is cut from the whole tensor as
    /// [`TensorSource::tensor`] reads it. A wrapper that changes a tensor's bytes (a
    /// cast) answers `None` for it.
    fn raw_extent(&self, name: &str) -> Result<Option<crate::slice::RawExtent<'_>>> {
        let _ = name;
        Ok(None)
    }
}

/// An opened file of some format.
pub trait Container: TensorSource {
    /// The format.
    fn format(&self) -> Format;
    /// The version as the file states it (`1.0`, `v2`, `0.1`, …).
    fn version(&self) -> String;
    /// Runs every integrity layer the format has.
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport;
    /// Non-fatal observations made while opening (newer minor version, unaligned data…).
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }
    /// What a salvaging open ([`crate::ReadOptions::salvage`]) left out: each part it
    /// could not read. Empty when nothing was lost (and for every strict open).
    fn lost(&self) -> Vec<crate::refusal::Lost> {
        Vec::new()
    }
}

/// Implements [`TensorSource`] and [`Container`] for a `self_cell` whose dependent is a
/// `Box<dyn Container>` (a container tied to the bytes it borrows): every call is
/// forwarded to the dependent.
macro_rules! forward_to_dependent {
    ($t:ty) => {
        impl $crate::model::TensorSource for $t {
            fn metadata(&self) -> &$crate::metadata::Metadata {
                self.with_dependent(|_, c| c.metadata())
            }
            fn tensor_infos(&self) -> &[$crate::tensor::TensorInfo] {
                self.with_dependent(|_, c| c.tensor_infos())
            }
            fn tensor(&self, name: &str) -> $crate::error::Result<$crate::tensor::TensorView<'_>> {
                self.with_dependent(|_, c| c.tensor(name))
            }
            fn tensors(
                &self,
                names: &[&str],
            ) -> Vec<$crate::error::Result<$crate::tensor::TensorView<'_>>> {
                self.with_dependent(|_, c| c.tensors(names))
            }
            fn interrupted(&self) -> $crate::error::Result<()> {
                self.with_dependent(|_, c| c.interrupted())
            }
            fn chunks(&self) -> &[$crate::tensor::ChunkInfo] {
                self.with_dependent(|_, c| c.chunks())
            }
            fn chunk(&self, name: &str) -> $crate::error::Result<std::borrow::Cow<'_, [u8]>> {
                self.with_dependent(|_, c| c.chunk(name))
            }
            fn source_format(&self) -> Option<$crate::format::Format> {
                self.with_dependent(|_, c| c.source_format())
            }
            fn metadata_types(&self) -> Option<&$crate::metadata::Metadata> {
                self.with_dependent(|_, c| c.metadata_types())
            }
            fn chunk_stored(
                &self,
                name: &str,
            ) -> $crate::error::Result<Option<$crate::tensor::StoredChunk<'_>>> {
                self.with_dependent(|_, c| c.chunk_stored(name))
            }
            fn raw_extent(
                &self,
                name: &str,
            ) -> $crate::error::Result<Option<$crate::slice::RawExtent<'_>>> {
                self.with_dependent(|_, c| c.raw_extent(name))
            }
        }

        impl $crate::model::Container for $t {
            fn format(&self) -> $crate::format::Format {
                self.with_dependent(|_, c| c.format())
            }
            fn version(&self) -> String {
                self.with_dependent(|_, c| c.version())
            }
            fn verify(&self, opts: &$crate::verify::VerifyOptions) -> $crate::verify::VerifyReport {
                self.with_dependent(|_, c| c.verify(opts))
            }
            fn warnings(&self) -> Vec<String> {
                self.with_dependent(|_, c| c.warnings())
            }
            fn lost(&self) -> Vec<$crate::refusal::Lost> {
                self.with_dependent(|_, c| c.lost())
            }
        }
    };
}
pub(crate) use forward_to_dependent;

/// An owned, in-memory model: metadata, tensors, chunks.
#[derive(Debug, Clone, Default)]
pub struct Model {
    /// File-level metadata.
    pub metadata: Metadata,
    /// The source's metadata value types, see [`TensorSource::metadata_types`].
    pub metadata_types: Option<Metadata>,
    infos: Vec<TensorInfo>,
    /// The parts of `infos[i]`.
    parts: Vec<Vec<Part<'static>>>,
    /// Tensor name → position, so pushes and lookups stay O(1) for big models.
    index: HashMap<String, usize>,
    chunk_infos: Vec<ChunkInfo>,
    /// The bytes of `chunk_infos[i]`.
    chunk_bytes: Vec<Vec<u8>>,
}

impl Model {
    /// An empty model.
    pub fn new() -> Model {
        Model::default()
    }

    /// Adds a tensor after validating it. Names must be unique.
    pub fn push(&mut self, view: TensorView<'_>) -> Result<()> {
        view.validate()?;
        if self.index.contains_key(&view.info.name) {
            return Err(Error::invalid_input(format!(
                "duplicate tensor name {:?}",
                view.info.name
            )));
        }
        let view = view.into_owned();
        self.index.insert(view.info.name.clone(), self.infos.len());
        self.infos.push(view.info);
        self.parts.push(view.parts);
        Ok(())
    }

    /// Adds an opaque chunk. Names must be unique.
    pub fn push_chunk(&mut self, mut info: ChunkInfo, bytes: Vec<u8>) -> Result<()> {
        if self.chunk_infos.iter().any(|c| c.name == info.name) {
            return Err(Error::invalid_input(format!(
                "duplicate chunk name {:?}",
                info.name
            )));
        }
        info.len = Some(bytes.len() as u64);
        self.chunk_infos.push(info);
        self.chunk_bytes.push(bytes);
        Ok(())
    }

    /// Copies every tensor, chunk and the metadata out of a source.
    pub fn from_source(src: &dyn TensorSource) -> Result<Model> {
        let mut m = Model::new();
        m.metadata = src.metadata().clone();
        m.metadata_types = src.metadata_types().cloned();
        for info in src.tensor_infos() {
            m.push(src.tensor(&info.name)?)?;
        }
        for c in src.chunks() {
            m.push_chunk(c.clone(), src.chunk(&c.name)?.into_owned())?;
        }
        Ok(m)
    }
}

impl TensorSource for Model {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn metadata_types(&self) -> Option<&Metadata> {
        self.metadata_types.as_ref()
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let i = tensor_position(&self.index, name)?;
        Ok(TensorView {
            info: self.infos[i].clone(),
            parts: self.parts[i]
                .iter()
                .map(|p| Part {
                    role: p.role.clone(),
                    bytes: Cow::Borrowed(p.bytes.as_ref()),
                })
                .collect(),
        })
    }
    fn chunks(&self) -> &[ChunkInfo] {
        &self.chunk_infos
    }
    fn chunk(&self, name: &str) -> Result<Cow<'_, [u8]>> {
        self.chunk_infos
            .iter()
            .position(|c| c.name == name)
            .map(|i| Cow::Borrowed(self.chunk_bytes[i].as_slice()))
            .ok_or_else(|| Error::not_found(format!("no chunk named {name:?}")))
    }
}

/// A source whose every defaulted [`TensorSource`] method (and [`Container`]'s) answers
/// differently from the default, and the check that a wrapper passes those answers on.
#[cfg(test)]
pub(crate) mod probe {
    use super::*;
    use crate::DType;

    /// The trait's methods that have a default body: what [`check_forwards`] covers.
    pub const DEFAULTED: &[&str] = &[
        "tensors",
        "interrupted",
        "chunks",
        "chunk",
        "source_format",
        "metadata_types",
        "chunk_stored",
        "raw_extent",
    ];

    /// A source with one tensor `a` (read with `tensor`, an error naming `tensor`) and
    /// one chunk.
    pub struct Probe {
        infos: Vec<TensorInfo>,
        chunks: Vec<ChunkInfo>,
        metadata: Metadata,
        types: Metadata,
    }

    impl Probe {
        pub fn new() -> Probe {
            let mut types = Metadata::new();
            types.insert("probe", "u32");
            Probe {
                infos: vec![TensorInfo::dense("a", DType::F32, vec![1])],
                chunks: vec![ChunkInfo {
                    name: "probe-chunk".into(),
                    kind: "PROB".into(),
                    len: Some(5),
                    storage: Default::default(),
                    holds_tensors: false,
                    copies: None,
                }],
                metadata: Metadata::new(),
                types,
            }
        }
    }

    impl TensorSource for Probe {
        fn metadata(&self) -> &Metadata {
            &self.metadata
        }
        fn tensor_infos(&self) -> &[TensorInfo] {
            &self.infos
        }
        fn tensor(&self, _: &str) -> Result<TensorView<'_>> {
            Err(Error::malformed("probe: tensor"))
        }
        fn tensors(&self, names: &[&str]) -> Vec<Result<TensorView<'_>>> {
            names
                .iter()
                .map(|_| Err(Error::malformed("probe: tensors")))
                .collect()
        }
        fn interrupted(&self) -> Result<()> {
            Err(Error::malformed("probe: interrupted"))
        }
        fn chunks(&self) -> &[ChunkInfo] {
            &self.chunks
        }
        fn chunk(&self, _: &str) -> Result<Cow<'_, [u8]>> {
            Ok(Cow::Borrowed(b"probe"))
        }
        fn source_format(&self) -> Option<Format> {
            Some(Format::Gguf)
        }
        fn metadata_types(&self) -> Option<&crate::metadata::Map> {
            Some(&self.types)
        }
        fn chunk_stored(&self, _: &str) -> Result<Option<crate::tensor::StoredChunk<'_>>> {
            Ok(Some(crate::tensor::StoredChunk {
                format: Format::Gguf,
                pieces: vec![Cow::Borrowed(b"probe-stored")],
                params: Metadata::new(),
            }))
        }
        fn raw_extent(&self, _: &str) -> Result<Option<crate::slice::RawExtent<'_>>> {
            Ok(Some(crate::slice::RawExtent {
                src: crate::source::SourceRef::from(&b"probe-extent"[..]),
                offset: 6,
                big_endian: false,
                whole_digests: Vec::new(),
                own_check: None,
            }))
        }
    }

    impl Container for Probe {
        fn format(&self) -> Format {
            Format::Gguf
        }
        fn version(&self) -> String {
            "probe".into()
        }
        fn verify(&self, _: &VerifyOptions) -> VerifyReport {
            VerifyReport::default()
        }
        fn warnings(&self) -> Vec<String> {
            vec!["probe: warning".into()]
        }
        fn lost(&self) -> Vec<crate::refusal::Lost> {
            Vec::new()
        }
    }

    /// Asserts that `w`, wrapping a [`Probe`], gives the probe's answer to every
    /// defaulted method but those in `replaced` (methods the wrapper answers itself, on
    /// purpose: say why at the call).
    pub fn check_forwards(w: &dyn TensorSource, replaced: &[&str]) {
        let says = |r: Result<()>, what: &str| match r {
            Err(e) => assert!(e.to_string().contains(what), "{what}: {e}"),
            Ok(()) => panic!("{what}: Ok"),
        };
        for &m in DEFAULTED.iter().filter(|m| !replaced.contains(m)) {
            match m {
                "tensors" => {
                    let got = w.tensors(&["a"]);
                    assert_eq!(got.len(), 1);
                    let r = got.into_iter().next().unwrap().map(|_| ());
                    says(r, "probe: tensors");
                }
                "interrupted" => says(w.interrupted(), "probe: interrupted"),
                "chunks" => assert_eq!(w.chunks().len(), 1, "chunks"),
                "chunk" => assert_eq!(w.chunk("probe-chunk").unwrap().as_ref(), b"probe"),
                "source_format" => assert_eq!(w.source_format(), Some(Format::Gguf)),
                "metadata_types" => {
                    let t = w.metadata_types().expect("metadata_types");
                    assert!(t.get("probe").is_some(), "metadata_types");
                }
                "chunk_stored" => {
                    let s = w
                        .chunk_stored("probe-chunk")
                        .unwrap()
                        .expect("chunk_stored");
                    assert_eq!(s.pieces[0].as_ref(), b"probe-stored", "chunk_stored");
                }
                "raw_extent" => {
                    let e = w.raw_extent("a").unwrap().expect("raw_extent");
                    assert_eq!(e.offset, 6, "raw_extent");
                }
                other => panic!("check_forwards does not cover {other}"),
            }
        }
    }

    /// [`DEFAULTED`] is every method of [`TensorSource`] that has a default body, so
    /// a method added to the trait later is checked in every wrapper.
    #[test]
    fn defaulted_lists_every_default_method() {
        let src = include_str!("model.rs");
        let start = src.find("pub trait TensorSource").unwrap();
        let body = &src[start..start + src[start..].find("\n}\n").unwrap()];
        let mut found = Vec::new();
        let mut lines = body.lines().peekable();
        while let Some(l) = lines.next() {
            let Some(rest) = l.trim_start().strip_prefix("fn ") else {
                continue;
            };
            let name = &rest[..rest.find(['(', '<']).unwrap()];
            // The signature may span lines: it ends with `;` (required) or `{` (default).
            let mut sig = l.to_string();
            while !sig.trim_end().ends_with(';') && !sig.trim_end().ends_with('{') {
                sig = lines.next().unwrap().to_string();
            }
            if sig.trim_end().ends_with('{') {
                found.push(name.to_string());
            }
        }
        assert_eq!(found, DEFAULTED, "update DEFAULTED and check_forwards");
    }

    /// The macro's wrapper (an opened file tied to its bytes) forwards everything.
    #[test]
    fn forward_to_dependent_forwards_every_method() {
        self_cell::self_cell!(
            struct Cell {
                owner: Vec<u8>,
                #[not_covariant]
                dependent: DynProbe,
            }
        );
        type DynProbe<'a> = Box<dyn Container + 'a>;
        crate::model::forward_to_dependent!(Cell);
        let c = Cell::new(Vec::new(), |_| Box::new(Probe::new()));
        check_forwards(&c, &[]);
        assert_eq!(c.warnings(), ["probe: warning"]);
    }

    /// Checks the probe against the defaults, so that the checks above test something.
    #[test]
    fn the_probe_differs_from_every_default() {
        struct Bare(Probe);
        impl TensorSource for Bare {
            fn metadata(&self) -> &Metadata {
                self.0.metadata()
            }
            fn tensor_infos(&self) -> &[TensorInfo] {
                self.0.tensor_infos()
            }
            fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
                self.0.tensor(name)
            }
        }
        check_forwards(&Probe::new(), &[]);
        for &m in DEFAULTED {
            let others: Vec<&str> = DEFAULTED.iter().copied().filter(|o| *o != m).collect();
            let r = std::panic::catch_unwind(|| check_forwards(&Bare(Probe::new()), &others));
            assert!(r.is_err(), "the default of {m} passes the check");
        }
    }
}

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync + ?Sized>() {}

    /// What a caller shares between threads (the Python package reads one file from
    /// many threads with no lock) is `Send + Sync`: opened files, sets, boxed containers.
    #[test]
    fn opened_files_and_sets_are_send_and_sync() {
        assert_send_sync::<dyn crate::Container>();
        assert_send_sync::<Box<dyn crate::Container>>();
        assert_send_sync::<crate::Opened>();
        assert_send_sync::<crate::ModelSet>();
        assert_send_sync::<crate::Model>();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DType, TensorInfo};

    /// `tensors` reads in parallel and answers in the order asked, an error in its place.
    #[test]
    fn tensors_come_back_in_the_order_asked() {
        let mut m = Model::new();
        for (name, byte) in [("a", 1u8), ("b", 2), ("c", 3)] {
            let info = TensorInfo::dense(name, DType::U8, vec![1000]);
            m.push(TensorView::dense(info, Cow::Owned(vec![byte; 1000])).unwrap())
                .unwrap();
        }
        let got = m.tensors(&["c", "zz", "a", "b", "a"]);
        assert_eq!(got.len(), 5);
        let first = |r: &Result<TensorView<'_>>| r.as_ref().ok().map(|v| v.data().unwrap()[0]);
        assert_eq!(
            got.iter().map(first).collect::<Vec<_>>(),
            [Some(3), None, Some(1), Some(2), Some(1)]
        );
        assert_eq!(
            got[1].as_ref().err().map(Error::kind),
            Some(crate::ErrorKind::NotFound)
        );
    }
}
