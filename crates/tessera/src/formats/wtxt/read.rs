//! Parsing a WTXT file into its structure: header values, and for every array its `arr`
//! line, optional `idx` line and chunk ranges. Chunk bodies are skipped by their
//! computed size (O(1) per chunk) and decoded only when a tensor is read or verified.
//!
//! A chunk whose body does not have the size its `ch` line implies is recorded as
//! damaged (with the first offending line) and parsing resumes at its `endch`, so one
//! damaged chunk never hides the others. Anything else that breaks the grammar is a
//! Malformed error at its line; with `salvage`, an array whose block is broken is
//! skipped (and reported lost) instead.

use std::borrow::Cow;
use std::ops::Range;

use super::armor;
use super::header::{self, bad, check_text, Meta, Root, Sign};
use super::raw::{ArrLine, ChLine, IdxLine};
use super::wsum::Wsum;
use crate::any::ReadOptions;
use crate::error::Result;

/// One `ch` block.
#[derive(Debug, Clone)]
pub struct ChunkRef {
    /// The parsed `ch` line.
    pub ch: ChLine,
    /// Line number of the `ch` line (1-based).
    pub line_no: usize,
    /// Byte range of its base64 lines (LFs included).
    pub text: Range<usize>,
    /// Why its lines cannot be decoded, when their layout is broken (line number, what).
    pub damage: Option<(usize, String)>,
}

/// One `arr … endarr` block.
#[derive(Debug, Clone)]
pub struct ArrayRef {
    /// The parsed `arr` line.
    pub arr: ArrLine,
    /// Line number of the `arr` line.
    pub line_no: usize,
    /// Byte range of the `arr` line without its LF (hashed into `sha256_all`).
    pub line: Range<usize>,
    /// The `idx` line, if any.
    pub idx: Option<IdxLine>,
    /// Byte range of the `idx` line without LF, if any.
    pub idx_line: Option<Range<usize>>,
    /// The chunks, tiling `[0, bytes)` in order.
    pub chunks: Vec<ChunkRef>,
    /// Byte range of the whole block (from `arr` to `endarr` LF).
    pub block: Range<usize>,
}

/// A parsed WTXT file. Owns or borrows its bytes.
pub struct WtxtFile<'d> {
    pub(super) data: Cow<'d, [u8]>,
    /// The `meta` values.
    pub meta: Meta,
    /// Byte range of the `meta` line without LF.
    pub meta_line: Range<usize>,
    /// The `cap ext=` items.
    pub caps: Vec<String>,
    /// Byte range of the `cap` line without LF.
    pub cap_line: Range<usize>,
    /// The `root` line, or `None` for a WTXT-S (`root_pending`).
    pub root: Option<Root>,
    /// The WSUM beside a WTXT-S, when found.
    pub wsum: Option<Wsum>,
    /// Why the WSUM could not be used, when it could not.
    pub wsum_problem: Option<String>,
    /// The `sign` line and the number of bytes it covers.
    pub sign: Option<(Sign, usize)>,
    /// False when salvage skipped a broken header (no root to check).
    pub header_ok: bool,
    /// The arrays, in file (= name) order.
    pub arrays: Vec<ArrayRef>,
    /// Arrays skipped by salvage: (what, why).
    pub lost: Vec<(String, String)>,
    /// The `audit` line, if any.
    pub audit: Option<String>,
    pub(super) warnings: Vec<String>,
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    n: usize,
}

impl<'a> Cursor<'a> {
    /// The next line (without LF), its number and start; `None` at EOF.
    fn next(&mut self) -> Result<Option<(usize, usize, &'a [u8])>> {
        if self.pos >= self.data.len() {
            return Ok(None);
        }
        let start = self.pos;
        let rest = &self.data[start..];
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| bad(self.n + 1, "the file does not end with LF (truncated?)"))?;
        self.pos = start + end + 1;
        self.n += 1;
        Ok(Some((self.n, start, &rest[..end])))
    }
    fn text(&mut self, what: &str) -> Result<(usize, usize, &'a str)> {
        let (n, s, l) = self.next()?.ok_or_else(|| {
            bad(
                self.n + 1,
                format!("unexpected end of file, expected {what}"),
            )
        })?;
        Ok((n, s, check_text(l, n)?))
    }
    fn peek_starts(&self, p: &[u8]) -> bool {
        self.data[self.pos.min(self.data.len())..].starts_with(p)
    }
}

impl<'d> WtxtFile<'d> {
    /// Parses and validates the structure of `data`.
    pub fn parse(data: Cow<'d, [u8]>, opts: &ReadOptions) -> Result<WtxtFile<'d>> {
        let mut f = {
            let bytes: &[u8] = &data;
            let mut c = Cursor {
                data: bytes,
                pos: 0,
                n: 0,
            };
            let mut lost = Vec::new();
            let (meta, meta_line, caps, cap_line, root, sign, header_ok) = match header(&mut c) {
                Ok(h) => (h.0, h.1, h.2, h.3, h.4, h.5, true),
                Err(e) if opts.salvage => {
                    // Keep the arrays: skip to the first one, accept every extension.
                    lost.push(("header".to_string(), e.to_string()));
                    c.pos = 0;
                    c.n = 0;
                    resync_from(&mut c);
                    let meta = Meta {
                        schema: "?".into(),
                        gen: "0".into(),
                        ts: "?".into(),
                        build: "?".into(),
                        host: "?".into(),
                        cuda: "?".into(),
                    };
                    let caps = header::CAP_ORDER.iter().map(|s| s.to_string()).collect();
                    (meta, 0..0, caps, 0..0, None, None, false)
                }
                Err(e) => return Err(e),
            };
            let mut arrays: Vec<ArrayRef> = Vec::new();
            let mut audit = None;
            loop {
                if opts.salvage && c.pos >= bytes.len() {
                    lost.push(("end of file".into(), "truncated: no endwtxt".into()));
                    break;
                }
                let save = (c.pos, c.n);
                let (n, s, l) = c.text("arr, audit or endwtxt")?;
                if l.starts_with("arr ") {
                    c.pos = save.0;
                    c.n = save.1;
                    match parse_array(&mut c, &caps, opts) {
                        Ok(a) => {
                            if let Some(p) = arrays.last() {
                                if p.arr.name.as_bytes() >= a.arr.name.as_bytes() {
                                    return Err(bad(a.line_no, format!(
                                        "arrays out of ASCII name order or duplicated: {:?} after {:?}",
                                        a.arr.name, p.arr.name
                                    )));
                                }
                            }
                            arrays.push(a);
                        }
                        Err(e) if opts.salvage => {
                            lost.push((format!("array at line {n}"), e.to_string()));
                            resync(&mut c, s);
                        }
                        Err(e) => return Err(e),
                    }
                } else if l.starts_with("audit ") && audit.is_none() {
                    audit = Some(l.to_string());
                    if !c.peek_starts(b"endwtxt\n") {
                        return Err(bad(n + 1, "expected endwtxt after the audit line"));
                    }
                } else if l == "endwtxt" {
                    if c.pos != bytes.len() {
                        return Err(bad(n + 1, "text after endwtxt"));
                    }
                    break;
                } else {
                    return Err(bad(
                        n,
                        format!("expected arr, audit or endwtxt, found {:?}", short(l)),
                    ));
                }
            }
            opts.limits.check_entries(arrays.len() as u64)?;
            WtxtFile {
                meta,
                meta_line,
                caps,
                cap_line,
                root,
                wsum: None,
                wsum_problem: None,
                sign,
                header_ok,
                arrays,
                lost,
                audit,
                warnings: Vec::new(),
                data: Cow::Borrowed(&[][..]),
            }
        };
        f.data = data;
        if f.root.is_none() && f.header_ok {
            match &opts.sibling {
                Some(get) => f.load_wsum_from(get),
                None => f.load_wsum(opts.path.as_deref()),
            }
        }
        Ok(f)
    }

    /// Reads `<path>.wsum` for a WTXT-S.
    pub fn load_wsum(&mut self, path: Option<&std::path::Path>) {
        match path {
            None => {
                self.wsum_problem =
                    Some("unfinalized: WTXT-S opened without a path, no WSUM".into())
            }
            Some(p) => match read_wsum(p) {
                Ok(w) => {
                    self.wsum = Some(w);
                    self.wsum_problem = None;
                }
                Err(e) => self.wsum_problem = Some(e),
            },
        }
    }

    /// Reads the `.wsum` of a WTXT-S opened by URL, fetched beside it by `get`.
    fn load_wsum_from(&mut self, get: &crate::any::Sibling) {
        match get(".wsum", 4096).and_then(|b| Wsum::parse(&b).map_err(|e| format!(".wsum: {e}"))) {
            Ok(w) => {
                self.wsum = Some(w);
                self.wsum_problem = None;
            }
            Err(e) => self.wsum_problem = Some(e),
        }
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// The root values: the `root` line, or the WSUM of a WTXT-S.
    pub fn final_root(&self) -> Option<Root> {
        self.root.or(self.wsum.as_ref().map(|w| w.root))
    }

    /// The array named `name`.
    pub fn array(&self, name: &str) -> Option<&ArrayRef> {
        self.arrays.iter().find(|a| a.arr.name == name)
    }

    /// Bytes of the `arr` line (no LF) of an array.
    pub fn arr_line_bytes(&self, a: &ArrayRef) -> &[u8] {
        &self.data[a.line.clone()]
    }
}

/// Reads and parses `<path>.wsum`; the error says why it cannot be used.
pub fn read_wsum(path: &std::path::Path) -> std::result::Result<Wsum, String> {
    let wp = super::wsum::wsum_path(path);
    match std::fs::read(&wp) {
        Ok(b) if b.len() <= 4096 => Wsum::parse(&b).map_err(|e| format!("{}: {e}", wp.display())),
        Ok(_) => Err(format!("{}: too long for a WSUM", wp.display())),
        Err(_) => Err(format!("unfinalized: {} not found", wp.display())),
    }
}

fn short(l: &str) -> String {
    l.chars().take(40).collect()
}

type Header = (
    Meta,
    Range<usize>,
    Vec<String>,
    Range<usize>,
    Option<Root>,
    Option<(Sign, usize)>,
);

/// Lines 1–4 (5 with `sign`).
fn header(c: &mut Cursor<'_>) -> Result<Header> {
    let (n, _, l) = c.text("WTXT 1")?;
    if l != "WTXT 1" {
        return Err(bad(n, format!("expected \"WTXT 1\", found {l:?}")));
    }
    let (n, s, l) = c.text("meta")?;
    let meta = Meta::parse(l, n)?;
    let meta_line = s..s + l.len();
    let (n, s, l) = c.text("cap")?;
    let caps = header::parse_cap(l, n)?;
    let cap_line = s..s + l.len();
    let (n, _, l) = c.text("root")?;
    let root = if l.starts_with("root_pending ") {
        header::parse_root_pending(l, n)?;
        None
    } else {
        Some(Root::parse(l, n)?)
    };
    let mut sign = None;
    if c.peek_starts(b"sign ") {
        let (n, s, l) = c.text("sign")?;
        if root.is_none() {
            return Err(bad(
                n,
                "a WTXT-S (root_pending) is signed in its WSUM, not by a sign line",
            ));
        }
        sign = Some((Sign::parse(l, n)?, s));
    }
    Ok((meta, meta_line, caps, cap_line, root, sign))
}

/// Moves the cursor to the next line starting `arr `, `audit ` or equal to `endwtxt`
/// (at or after the cursor).
fn resync_from(c: &mut Cursor<'_>) {
    loop {
        let save = (c.pos, c.n);
        match c.next() {
            Ok(Some((_, _, l)))
                if l.starts_with(b"arr ") || l.starts_with(b"audit ") || l == b"endwtxt" =>
            {
                c.pos = save.0;
                c.n = save.1;
                return;
            }
            Ok(Some(_)) => {}
            _ => {
                c.pos = save.0;
                c.n = save.1;
                return;
            }
        }
    }
}

/// Skips to the next `arr `, `audit ` or `endwtxt` line after the one at `from`.
fn resync(c: &mut Cursor<'_>, from: usize) {
    c.pos = from;
    // Recount lines from the start for exact numbers.
    c.n = c.data[..from].iter().filter(|&&b| b == b'\n').count();
    let _ = c.next();
    resync_from(c);
}

fn parse_array(c: &mut Cursor<'_>, caps: &[String], opts: &ReadOptions) -> Result<ArrayRef> {
    let (n, start, l) = c.text("arr")?;
    let arr = ArrLine::parse(l, n, caps, opts.limits.max_rank)?;
    opts.limits.check_name(arr.name.len() as u64)?;
    if arr.bytes > c.data.len() as u64 {
        return Err(bad(
            n,
            format!(
                "arr {:?}: {} bytes cannot fit in a {}-byte file",
                arr.name,
                arr.bytes,
                c.data.len()
            ),
        ));
    }
    opts.limits
        .check_decoded(arr.bytes)
        .map_err(|e| e.at_subject(format!("line {n}")))?;
    let line = start..start + l.len();
    let mut idx = None;
    let mut idx_line = None;
    let mut idx_no = n;
    if c.peek_starts(b"idx ") {
        let (m, s, l) = c.text("idx")?;
        idx = Some(IdxLine::parse(l, m)?);
        idx_line = Some(s..s + l.len());
        idx_no = m;
    }
    let mut chunks: Vec<ChunkRef> = Vec::new();
    let mut off = 0u64;
    loop {
        let (m, _, l) = c.text("ch or endarr")?;
        if l == "endarr" {
            break;
        }
        if !l.starts_with("ch ") {
            return Err(bad(
                m,
                format!("expected ch or endarr, found {:?}", short(l)),
            ));
        }
        let ch = ChLine::parse(l, m)?;
        if ch.ix != chunks.len() as u64 {
            return Err(bad(
                m,
                format!("ch ix={:06}, expected {:06}", ch.ix, chunks.len()),
            ));
        }
        if ch.off != off {
            return Err(bad(
                m,
                format!("ch off={} leaves a gap or overlap (expected {off})", ch.off),
            ));
        }
        off = off
            .checked_add(ch.len)
            .filter(|&e| e <= arr.bytes)
            .ok_or_else(|| bad(m, format!("ch ends past the array's {} bytes", arr.bytes)))?;
        chunks.push(body(c, ch, m)?);
    }
    if off != arr.bytes {
        return Err(bad(
            c.n,
            format!(
                "array {:?}: chunks cover {off} of {} bytes",
                arr.name, arr.bytes
            ),
        ));
    }
    if let Some(ix) = &idx {
        check_row_blocking(ix, idx_no, &arr, &chunks)?;
    }
    Ok(ArrayRef {
        arr,
        line_no: n,
        line,
        idx,
        idx_line,
        chunks,
        block: start..c.pos,
    })
}

/// An `idx` line with `row_blocking=on` must say what the chunks are: `row_size` is
/// the array's row size (RESOLUTIONS 5) and every chunk but the last holds exactly
/// `rows_per_chunk` rows (the last at most that many). Nothing else checks these
/// numbers, so without this a changed `idx` line would go unnoticed.
fn check_row_blocking(ix: &IdxLine, n: usize, arr: &ArrLine, chunks: &[ChunkRef]) -> Result<()> {
    if !ix.row_blocking {
        return Ok(());
    }
    let want =
        super::raw::row_size(arr.dtype, &arr.shape).map_err(|e| bad(n, e.message().to_string()))?;
    if ix.row_size != want {
        return Err(bad(
            n,
            format!(
                "idx row_size={} but a row of {:?} ({} {:?}) is {want} bytes",
                ix.row_size, arr.name, arr.dtype, arr.shape
            ),
        ));
    }
    let per = ix
        .rows_per_chunk
        .checked_mul(ix.row_size)
        .filter(|_| ix.rows_per_chunk > 0)
        .ok_or_else(|| {
            bad(
                n,
                format!("idx rows_per_chunk={} is impossible", ix.rows_per_chunk),
            )
        })?;
    for (k, ch) in chunks.iter().enumerate() {
        let last = k + 1 == chunks.len();
        if (!last && ch.ch.len != per) || (last && ch.ch.len > per) {
            return Err(bad(
                ch.line_no,
                format!(
                    "ch len={} disagrees with idx rows_per_chunk={} × row_size={} ({per} bytes)",
                    ch.ch.len, ix.rows_per_chunk, ix.row_size
                ),
            ));
        }
    }
    Ok(())
}

/// Skips a chunk's base64 lines and its `endch`; records damage when the layout is off.
fn body(c: &mut Cursor<'_>, ch: ChLine, line_no: usize) -> Result<ChunkRef> {
    let start = c.pos;
    let tl = armor::text_len(ch.len);
    let lines = armor::lines_for(ch.len) as usize;
    let end = (start as u64)
        .checked_add(tl)
        .and_then(|e| usize::try_from(e).ok());
    if let Some(end) = end {
        if c.data.get(end..).is_some_and(|r| r.starts_with(b"endch\n")) && c.data[end - 1] == b'\n'
        {
            c.pos = end + 6;
            c.n += lines + 1;
            return Ok(ChunkRef {
                ch,
                line_no,
                text: start..end,
                damage: None,
            });
        }
    }
    // Slow path: walk the lines to the endch, noting the first that is out of shape.
    let mut damage = None;
    let full = lines.saturating_sub(1);
    let mut i = 0usize;
    loop {
        let (m, s, l) = c
            .next()?
            .ok_or_else(|| bad(line_no, "chunk without endch before the end of the file"))?;
        if l == b"endch" {
            if damage.is_none() {
                damage = Some((m, format!("{i} base64 lines, lines={lines} expected")));
            }
            return Ok(ChunkRef {
                ch,
                line_no,
                text: start..s,
                damage,
            });
        }
        if l.starts_with(b"endarr") || l.starts_with(b"ch ") || l.starts_with(b"arr ") {
            return Err(bad(m, "chunk without endch"));
        }
        if damage.is_none() {
            let want = if i < full { armor::WIDTH + 2 } else { l.len() };
            if let Some(p) = l.iter().position(|&b| !(0x20..=0x7e).contains(&b)) {
                let what = match l[p] {
                    b'\r' => "a CR (LF line ends only)".to_string(),
                    b'\t' => "a tab".to_string(),
                    b => format!("byte 0x{b:02x} (printable ASCII only)"),
                };
                damage = Some((m, format!("column {}: {what}", p + 1)));
            } else if l.last() == Some(&b' ') {
                damage = Some((m, "trailing space".into()));
            } else if i >= lines || l.len() != want || l.len() < 3 || l[l.len() - 2] != b' ' {
                damage = Some((
                    m,
                    format!(
                        "base64 line {} of the chunk is out of shape ({} characters)",
                        i + 1,
                        l.len()
                    ),
                ));
            }
        }
        i += 1;
    }
}
