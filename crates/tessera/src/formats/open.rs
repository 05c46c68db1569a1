//! Opening a file by its content: detect the format from the first bytes, dispatch to
//! its codec's reader (the one place that maps a [`Format`] to a reader).

use crate::any::{Access, Labeled, OpenFn, ReadOptions, Wholly};
use crate::error::{Error, Result};
use crate::format::Format;
use crate::model::Container;
use crate::source::SourceRef;

/// The reader for a format, when it is implemented, and how it reads (from the
/// format's codec, [`crate::formats::Codec::reader`]).
pub fn reader_for(format: Format) -> Option<(OpenFn, Access)> {
    format.codec().reader
}

/// Opens the file `src` holds (a [`crate::FileData`] map, a [`crate::source::PreadFile`],
/// a `&[u8]` or `Vec<u8>`, any `&dyn ByteSource`) as whatever format its first bytes
/// say. A known format that is not implemented, or whose Cargo feature this build left
/// out, is an `Unsupported` error ("… is detected but not supported yet", "… was built
/// without feature `fold`"), not `UnknownFormat`.
///
/// Opening reads only what the format needs to build its index (header, table of
/// contents, manifest) — except for formats whose layout forces a full scan
/// ([`Access::Whole`]) — and each tensor's bytes are read when asked.
///
/// When `opts.path` is set, every error the opened file returns later (a tensor or chunk
/// read that fails its digest, say) names that file first.
pub fn open<'d>(
    src: impl Into<SourceRef<'d>>,
    opts: &ReadOptions,
) -> Result<Box<dyn Container + 'd>> {
    let src = src.into();
    let named = |e: Error| match &opts.path {
        Some(p) => e.in_file(p.display().to_string()),
        None => e,
    };
    if src.is_empty() {
        return Err(named(Error::new(
            crate::ErrorKind::UnknownFormat,
            "empty file: 0 bytes, no format to detect",
        )));
    }
    let head = src
        .read_up_to(0, crate::format::DETECT_LEN as u64)
        .map_err(named)?;
    let format = Format::detect_or_err(&head).map_err(named)?;
    let (open, access) = reader_for(format).ok_or_else(|| named(format.not_supported_yet()))?;
    let file = match (access, src.as_slice()) {
        (Access::Whole, None) => {
            let bytes = src.read_all().map_err(named)?.into_owned();
            Wholly::open(bytes, open, opts).map(|f| Box::new(f) as Box<dyn Container + 'd>)
        }
        _ => open(src, opts),
    };
    let file = file.map_err(|e| named(e.in_format(format)))?;
    Ok(match &opts.path {
        Some(p) => Box::new(Labeled {
            inner: file,
            file: p.display().to_string(),
            format,
        }),
        None => file,
    })
}
