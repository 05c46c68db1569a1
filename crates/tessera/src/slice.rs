//! Slice reads: part of one tensor, reading only the bytes of the elements asked for.
//!
//! A selection is numpy's basic indexing per dimension ([`Index`]: `i`, `a:b:s`, `...`,
//! negative positions counting from the end, negative steps), parsed from text by
//! [`parse`] (the CLI's `--slice 0:1024,:`) or built as values, or an even split of one
//! dimension ([`split`], numpy's `array_split` rule). Unlike numpy, a bound outside its
//! dimension is refused (naming the tensor and the dimension), never clamped.
//!
//! [`read_slice`] is the one routine every format goes through:
//! - where a reader knows that a tensor's dense bytes lie raw and contiguous at an offset
//!   of its source ([`TensorSource::raw_extent`]: safetensors, npy, zTensor raw, GGUF
//!   dense, …), the selection becomes byte ranges — runs of consecutive elements,
//!   merged when the gap between two is under [`SliceOptions::gap`], their number
//!   capped at [`SliceOptions::max_ranges`] by widening the gap — read with one
//!   `read_ranges` (a remote source fetches them on its bounded pool), byte-swapped
//!   from a big-endian source, and copied into the output;
//! - otherwise (compressed, encrypted, sparse, text) the tensor is read whole, as
//!   [`TensorSource::tensor`] reads it (its digests checked), and cut.
//!
//! Verification plugs in at one place, [`RangeCheck`]: each range is widened to what
//! its check needs (page boundaries) before it is read, and checked after. A format
//! that checks smaller units itself (AERO PHSH pages, WTXT and FOLD chunks) hands its
//! own check in its [`RawExtent`]; a caller's (a page manifest) is passed to
//! [`read_slice`]. A tensor whose format stores only a whole-tensor digest is read
//! unchecked without one, and [`Slice::unverified`] says so: never silently.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::model::TensorSource;
use crate::source::SourceRef;
use crate::tensor::{Layout, TensorInfo};
use crate::DType;

/// A check of byte ranges of a tensor's stored bytes (a page manifest, or a format's
/// own chunk or page digests).
pub trait RangeCheck: Send + Sync {
    /// Widen a byte range of a tensor's stored bytes to what must be read to check it
    /// (page boundaries). Identity when the check has no pages for that tensor.
    fn widen(&self, tensor: &str, range: Range<u64>) -> Range<u64>;
    /// Check bytes read for a widened range; Err names tensor and page.
    fn check(&self, tensor: &str, range: Range<u64>, bytes: &[u8]) -> Result<()>;
}

/// Where a tensor's dense, canonical-order bytes lie raw and contiguous in a source
/// ([`TensorSource::raw_extent`]).
pub struct RawExtent<'a> {
    /// The source holding them.
    pub src: SourceRef<'a>,
    /// Where the tensor's first byte is.
    pub offset: u64,
    /// The elements are stored big-endian (swapped to little-endian when read).
    pub big_endian: bool,
    /// The digests the format stores over the whole tensor (`sha256`, `crc32c`, …),
    /// which a slice read cannot check; empty when there are none or when the file was
    /// opened with `verify` off. With no [`RangeCheck`], a slice of such a tensor is
    /// [`Slice::unverified`].
    pub whole_digests: Vec<String>,
    /// The format's own check of smaller units (AERO pages, WTXT or FOLD chunks),
    /// applied to every range read.
    pub own_check: Option<Box<dyn RangeCheck + 'a>>,
}

/// One dimension's index, as numpy's basic indexing has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    /// One position (the dimension is dropped from the result); negative counts from
    /// the end.
    At(i64),
    /// `start:stop:step`, numpy's defaults for what is `None`; negative bounds count
    /// from the end; a negative step walks backwards. The step is never 0.
    Range {
        /// First position (default: 0, or the last with a negative step).
        start: Option<i64>,
        /// Position after the last (default: the end, or before the first).
        stop: Option<i64>,
        /// Step (default 1).
        step: Option<i64>,
    },
    /// `...`: as many `:` as the dimensions not otherwise indexed.
    Ellipsis,
}

impl Index {
    /// `:`, the whole dimension.
    pub const ALL: Index = Index::Range {
        start: None,
        stop: None,
        step: None,
    };

    /// `start:stop`.
    pub fn range(start: i64, stop: i64) -> Index {
        Index::Range {
            start: Some(start),
            stop: Some(stop),
            step: None,
        }
    }
}

impl std::fmt::Display for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let o = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
        match *self {
            Index::At(i) => write!(f, "{i}"),
            Index::Ellipsis => f.write_str("..."),
            Index::Range { start, stop, step } => {
                write!(f, "{}:{}", o(start), o(stop))?;
                match step {
                    Some(s) => write!(f, ":{s}"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// A selection as text: `0:1024,:`, `::2,-1`, `...,3`.
pub fn show(index: &[Index]) -> String {
    let parts: Vec<String> = index.iter().map(|i| i.to_string()).collect();
    format!("[{}]", parts.join(","))
}

/// Parses numpy's slicing syntax, dimensions separated by commas: `i`, `a:b`, `a:b:s`,
/// `:`, `...`, negative numbers counting from the end; spaces ignored; empty text is
/// the whole tensor.
pub fn parse(text: &str) -> Result<Vec<Index>> {
    let text: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let text = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(&text);
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let bad = |item: &str, why: &str| {
        Error::invalid_input(format!(
            "slice {text:?}: {item:?} {why} (expected numpy's syntax per dimension, \
             separated by commas: i, a:b, a:b:s, :, ...)"
        ))
    };
    let mut out = Vec::new();
    for item in text.split(',') {
        if item == "..." {
            out.push(Index::Ellipsis);
            continue;
        }
        let num = |s: &str| -> Result<Option<i64>> {
            if s.is_empty() {
                return Ok(None);
            }
            s.parse::<i64>()
                .map(Some)
                .map_err(|_| bad(item, "is not an integer or a range"))
        };
        let fields: Vec<&str> = item.split(':').collect();
        match fields.as_slice() {
            [""] => return Err(bad(item, "is empty")),
            [i] => out.push(Index::At(num(i)?.unwrap_or(0))),
            [a, b] => out.push(Index::Range {
                start: num(a)?,
                stop: num(b)?,
                step: None,
            }),
            [a, b, s] => {
                let step = num(s)?;
                if step == Some(0) {
                    return Err(bad(item, "has a step of 0"));
                }
                out.push(Index::Range {
                    start: num(a)?,
                    stop: num(b)?,
                    step,
                })
            }
            _ => return Err(bad(item, "has more than two ':'")),
        }
    }
    Ok(out)
}

/// Part `part` of `parts` of dimension `dim` of a tensor of `shape`, as
/// `numpy.array_split` cuts it: the first `size % parts` parts have one element more
/// (`size / parts + 1`), the others `size / parts`; parts past the size are empty.
/// A negative `dim` counts from the end.
pub fn split(shape: &[u64], dim: i64, part: u64, parts: u64) -> Result<Vec<Index>> {
    let n = shape.len() as i64;
    let d = if dim < 0 { dim + n } else { dim };
    if d < 0 || d >= n {
        return Err(Error::invalid_input(format!(
            "split dimension {dim} of a tensor of {n} dimensions {shape:?}"
        )));
    }
    if parts == 0 || part >= parts {
        return Err(Error::invalid_input(format!(
            "part {part} of {parts}: the part must be in 0..{parts}"
        )));
    }
    let size = shape[d as usize];
    let (each, extra) = (size / parts, size % parts);
    let start = part * each + part.min(extra);
    let len = each + u64::from(part < extra);
    let mut out = vec![Index::ALL; shape.len()];
    out[d as usize] = Index::range(start as i64, (start + len) as i64);
    Ok(out)
}

/// One dimension's selection, checked against the shape: the lowest position taken,
/// how many, the step's size, whether the result runs backwards, whether the
/// dimension stays in the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dim {
    /// The lowest position selected.
    pub low: u64,
    /// How many positions.
    pub count: u64,
    /// Distance between two selected positions (≥ 1).
    pub step: u64,
    /// The result lists them from the highest down (a negative step).
    pub reversed: bool,
    /// The dimension is kept (a range), not dropped (an integer index).
    pub keep: bool,
}

/// Checks `index` against `shape` (of tensor `name`, for messages): each dimension's
/// [`Dim`]. At most as many indices as dimensions (one `...` at most); missing ones are
/// `:`. A position or bound outside its dimension is refused, naming the tensor and
/// the dimension.
pub fn resolve(name: &str, shape: &[u64], index: &[Index]) -> Result<Vec<Dim>> {
    let refuse = |msg: String| {
        Error::invalid_input(format!("slice {} of {shape:?}: {msg}", show(index)))
            .at_subject(format!("tensor {name:?}"))
    };
    let ellipses = index.iter().filter(|i| **i == Index::Ellipsis).count();
    if ellipses > 1 {
        return Err(refuse("more than one '...'".into()));
    }
    let fixed = index.len() - ellipses;
    if fixed > shape.len() {
        return Err(refuse(format!(
            "{fixed} indices for a tensor of {} dimensions",
            shape.len()
        )));
    }
    let mut full: Vec<Index> = Vec::with_capacity(shape.len());
    for i in index {
        if *i == Index::Ellipsis {
            full.extend(std::iter::repeat_n(Index::ALL, shape.len() - fixed));
        } else {
            full.push(*i);
        }
    }
    full.resize(shape.len(), Index::ALL);
    let mut dims = Vec::with_capacity(shape.len());
    for (d, (&size, ix)) in shape.iter().zip(&full).enumerate() {
        let isize = i64::try_from(size)
            .map_err(|_| refuse(format!("dimension {d} of size {size} is too large")))?;
        let at = |v: i64, what: &str, allow_end: bool| -> Result<i64> {
            let p = if v < 0 { v + isize } else { v };
            let top = if allow_end { isize } else { isize - 1 };
            if p < 0 || p > top {
                return Err(refuse(format!(
                    "{what} {v} is out of range for dimension {d} of size {size}"
                )));
            }
            Ok(p)
        };
        dims.push(match *ix {
            Index::At(i) => Dim {
                low: at(i, "index", false)? as u64,
                count: 1,
                step: 1,
                reversed: false,
                keep: false,
            },
            Index::Range { start, stop, step } => {
                let step = step.unwrap_or(1);
                if step == 0 {
                    return Err(refuse(format!("dimension {d}: a step of 0")));
                }
                if step > 0 {
                    let a = start.map_or(Ok(0), |v| at(v, "start", true))?;
                    let b = stop.map_or(Ok(isize), |v| at(v, "stop", true))?;
                    let count = if b > a { (b - a + step - 1) / step } else { 0 };
                    Dim {
                        low: a as u64,
                        count: count as u64,
                        step: step as u64,
                        reversed: false,
                        keep: true,
                    }
                } else {
                    // Backwards: from `a` down to just above `b` (-1: past the start).
                    let a = match start {
                        None => isize - 1,
                        Some(v) => at(v, "start", true)?.min(isize - 1),
                    };
                    let b = match stop {
                        None => -1,
                        Some(v) => at(v, "stop", true)?,
                    };
                    let s = -step;
                    let count = if a > b { (a - b + s - 1) / s } else { 0 };
                    let low = if count > 0 { a - (count - 1) * s } else { 0 };
                    Dim {
                        low: low as u64,
                        count: count as u64,
                        step: s as u64,
                        reversed: true,
                        keep: true,
                    }
                }
            }
            Index::Ellipsis => unreachable!("expanded above"),
        });
    }
    Ok(dims)
}

/// How ranges are formed ([`read_slice_with`]).
#[derive(Debug, Clone, Copy)]
pub struct SliceOptions {
    /// Two runs of selected bytes closer than this are read as one range (the bytes
    /// between them read and dropped). Default: 0 for a source in memory, 4 KiB for a
    /// file read with `pread`, 64 KiB for a remote object.
    pub gap: Option<u64>,
    /// At most this many ranges per tensor: beyond it the gap is widened until the
    /// runs merge into this many (default 4096).
    pub max_ranges: usize,
}

impl Default for SliceOptions {
    fn default() -> SliceOptions {
        SliceOptions {
            gap: None,
            max_ranges: 4096,
        }
    }
}

/// A slice read: its description (the tensor's name and dtype, the slice's shape) and
/// its dense little-endian bytes.
#[derive(Debug, Clone)]
pub struct Slice {
    /// The tensor's name and dtype, the slice's shape, dense layout.
    pub info: TensorInfo,
    /// The elements, row-major, little-endian.
    pub data: Vec<u8>,
    /// Why the bytes were not checked, when the format stores a digest over the whole
    /// tensor only and no [`RangeCheck`] covered the slice.
    pub unverified: Option<String>,
    /// Bytes read from the source (the ranges, widened and merged; the whole tensor's
    /// bytes on the path that reads it whole).
    pub bytes_read: u64,
    /// Ranges read.
    pub ranges: usize,
}

/// [`read_slice_with`] with the default [`SliceOptions`].
pub fn read_slice(
    src: &dyn TensorSource,
    name: &str,
    index: &[Index],
    check: Option<&dyn RangeCheck>,
) -> Result<Slice> {
    read_slice_with(src, name, index, check, &SliceOptions::default())
}

/// Reads the elements `index` selects of tensor `name`: by range where the format
/// stores the tensor raw ([`TensorSource::raw_extent`]), otherwise by reading it whole
/// and cutting. `check` (a page manifest) checks the ranges read.
pub fn read_slice_with(
    src: &dyn TensorSource,
    name: &str,
    index: &[Index],
    check: Option<&dyn RangeCheck>,
    opts: &SliceOptions,
) -> Result<Slice> {
    let info = src
        .tensor_infos()
        .iter()
        .find(|i| i.name == name)
        .ok_or_else(|| Error::no_tensor(name))?
        .clone();
    let dims = resolve(name, &info.shape, index)?;
    let plan = Plan::new(&info, &dims)?;
    let out_shape: Vec<u64> = dims.iter().filter(|d| d.keep).map(|d| d.count).collect();
    let out_info = TensorInfo::dense(name, info.dtype, out_shape);
    let mut data = Vec::new();
    data.try_reserve_exact(plan.out_bytes as usize)
        .map_err(|_| {
            Error::limit(format!(
                "cannot allocate {} bytes for a slice of tensor {name:?}",
                plan.out_bytes
            ))
        })?;
    data.resize(plan.out_bytes as usize, 0);
    if info.layout == Layout::Dense {
        if let Some(ext) = src.raw_extent(name)? {
            let (bytes_read, ranges) = plan.read(&ext, name, check, opts, &mut data)?;
            if ext.big_endian {
                swap(info.dtype, &mut data);
            }
            let unverified = match (&ext.whole_digests[..], check, &ext.own_check) {
                ([], _, _) | (_, Some(_), _) | (_, _, Some(_)) => None,
                (d, None, None) => Some(format!(
                    "slice of tensor {name:?} is unverified: its stored {} covers the whole \
                     tensor, which a slice read does not read (give a page manifest, \
                     pages=, to check slices)",
                    d.join(", ")
                )),
            };
            return Ok(Slice {
                info: out_info,
                data,
                unverified,
                bytes_read,
                ranges,
            });
        }
    }
    // The whole tensor, read (and checked) as the format reads it, then cut.
    let mut view = src.tensor(name)?;
    if matches!(view.info.layout, Layout::SparseCsr | Layout::SparseCoo) {
        view = crate::sparse::densify(view)?;
    }
    if view.info.layout != Layout::Dense {
        return Err(Error::unsupported(format!(
            "tensor {name:?} is stored in {} blocks of {}: a slice read needs dense elements \
             (dequantize it first)",
            view.info.layout.name(),
            view.info.dtype
        )));
    }
    let whole = view
        .parts
        .iter()
        .find(|p| p.role == "data")
        .ok_or_else(|| Error::malformed(format!("tensor {name:?} has no data part")))?;
    plan.copy_from(&whole.bytes, &mut data)?;
    Ok(Slice {
        info: out_info,
        data,
        unverified: None,
        bytes_read: whole.bytes.len() as u64,
        ranges: 1,
    })
}

/// Reverses each element (each component of a complex) of little/big-endian bytes.
fn swap(dtype: DType, data: &mut [u8]) {
    let unit = match dtype {
        DType::C64 | DType::C128 => dtype.size() / 2,
        d if d.is_packed() => 1,
        d => d.size(),
    };
    if unit > 1 {
        for el in data.chunks_exact_mut(unit) {
            el.reverse();
        }
    }
}

/// A selection as runs of consecutive elements: `outer` dimensions walked by an
/// odometer (each step one run), a run of `run` elements.
struct Plan {
    /// Bits per element.
    bits: u64,
    /// Per outer dimension: lowest position, count, step, stride (elements) in the
    /// tensor, stride (elements) in the output, reversed.
    outer: Vec<(u64, u64, u64, u64, u64, bool)>,
    /// Element offset where the runs start (the run dimension's low × its stride).
    base: u64,
    /// Elements per run.
    run: u64,
    /// Runs in all (0: nothing selected).
    runs: u64,
    /// The output's bytes.
    out_bytes: u64,
    /// The tensor's stored bytes.
    total_bytes: u64,
}

impl Plan {
    fn new(info: &TensorInfo, dims: &[Dim]) -> Result<Plan> {
        let dtype = info.dtype;
        let bits = dtype.bits() as u64;
        let n = dims.len();
        let shape = &info.shape;
        let mut stride = vec![1u64; n];
        for d in (0..n.saturating_sub(1)).rev() {
            stride[d] = stride[d + 1]
                .checked_mul(shape[d + 1])
                .ok_or_else(|| Error::malformed("shape overflows"))?;
        }
        let out_numel: u64 = dims.iter().map(|d| d.count).product();
        let mut ostride = vec![1u64; n];
        for d in (0..n.saturating_sub(1)).rev() {
            ostride[d] = ostride[d + 1] * dims[d + 1].count;
        }
        let full = |d: usize| dims[d].low == 0 && dims[d].count == shape[d] && dims[d].step == 1;
        let mut k = n;
        while k > 0 && full(k - 1) && !dims[k - 1].reversed {
            k -= 1;
        }
        let inner: u64 = shape[k..].iter().product();
        let (outer_n, run, base) = if k > 0 && dims[k - 1].step == 1 && !dims[k - 1].reversed {
            (
                k - 1,
                dims[k - 1].count * inner,
                dims[k - 1].low * stride[k - 1],
            )
        } else {
            (k, inner, 0)
        };
        let outer: Vec<_> = (0..outer_n)
            .map(|d| {
                let x = &dims[d];
                (x.low, x.count, x.step, stride[d], ostride[d], x.reversed)
            })
            .collect();
        let runs = if out_numel == 0 {
            0
        } else {
            outer.iter().map(|o| o.1).product()
        };
        let out_bytes = dtype
            .nbytes(out_numel)
            .ok_or_else(|| Error::malformed("slice size overflows"))?;
        let total_bytes = info.dense_nbytes()?;
        let plan = Plan {
            bits,
            outer,
            base,
            run,
            runs,
            out_bytes,
            total_bytes,
        };
        if bits % 8 != 0 && runs > 0 {
            // Every run must start and end on a byte, in the tensor and in the output.
            let mut bad = None;
            plan.each(|src, dst, len| {
                if bad.is_none() && (src % 8 != 0 || dst % 8 != 0 || len % 8 != 0) {
                    bad = Some(src / bits);
                }
            });
            if let Some(el) = bad {
                return Err(Error::unsupported(format!(
                    "{dtype} stores {bits}-bit elements packed, and the slice {} cuts a byte \
                     (at element {el}): slice whole bytes ({} elements at a time along the \
                     last dimension, from a multiple of that)",
                    show(&to_index(dims)),
                    8 / gcd(bits, 8)
                ))
                .at_subject(format!("tensor {:?}", info.name)));
            }
        }
        Ok(plan)
    }

    /// Calls `f(src_bit, dst_bit, len_bits)` for every run, in increasing `src_bit`.
    fn each(&self, mut f: impl FnMut(u64, u64, u64)) {
        if self.runs == 0 {
            return;
        }
        let n = self.outer.len();
        let mut pos = vec![0u64; n];
        let run_bits = self.run * self.bits;
        loop {
            let mut src = self.base;
            let mut dst = 0u64;
            for (d, &(low, count, step, stride, ostride, rev)) in self.outer.iter().enumerate() {
                src += (low + pos[d] * step) * stride;
                let o = if rev { count - 1 - pos[d] } else { pos[d] };
                dst += o * ostride;
            }
            // `dst` counts output elements of the outer dimensions; a run is contiguous
            // in the output too (the inner dimensions are whole, or the run dimension
            // is the last outer one's child).
            f(src * self.bits, dst * self.bits, run_bits);
            let mut d = n;
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                pos[d] += 1;
                if pos[d] < self.outer[d].1 {
                    break;
                }
                pos[d] = 0;
            }
        }
    }

    /// Copies the selection out of the tensor's whole bytes.
    fn copy_from(&self, whole: &[u8], out: &mut [u8]) -> Result<()> {
        if (whole.len() as u64) < self.total_bytes {
            return Err(Error::malformed(format!(
                "{} bytes for a tensor of {}",
                whole.len(),
                self.total_bytes
            )));
        }
        self.each(|s, d, l| {
            let (s, d, l) = ((s / 8) as usize, (d / 8) as usize, (l / 8) as usize);
            out[d..d + l].copy_from_slice(&whole[s..s + l]);
        });
        Ok(())
    }

    /// The runs as byte ranges of the tensor, merged across gaps under `gap`; `None`
    /// when there would be more than `max`.
    fn ranges(&self, gap: u64, max: usize) -> Option<Vec<Range<u64>>> {
        let mut out: Vec<Range<u64>> = Vec::new();
        let mut over = false;
        self.each(|s, _, l| {
            if over {
                return;
            }
            let (s, e) = (s / 8, (s + l).div_ceil(8));
            match out.last_mut() {
                Some(r) if s <= r.end.saturating_add(gap) => r.end = r.end.max(e),
                _ => {
                    if out.len() == max {
                        over = true;
                    } else {
                        out.push(s..e)
                    }
                }
            }
        });
        (!over).then_some(out)
    }

    /// Reads the selection through `ext` into `out`; (bytes read, ranges).
    fn read(
        &self,
        ext: &RawExtent<'_>,
        name: &str,
        check: Option<&dyn RangeCheck>,
        opts: &SliceOptions,
        out: &mut [u8],
    ) -> Result<(u64, usize)> {
        if self.runs == 0 {
            return Ok((0, 0));
        }
        ext.src
            .check_range(ext.offset, self.total_bytes, &format!("tensor {name:?}"))?;
        let mut gap = opts.gap.unwrap_or(match ext.src.as_slice() {
            Some(_) => 0,
            None if ext.src.kind() == "remote" => 64 << 10,
            None => 4 << 10,
        });
        let max = opts.max_ranges.max(1);
        let mut ranges = loop {
            if let Some(r) = self.ranges(gap, max) {
                break r;
            }
            gap = (gap.max(1) * 4).min(self.total_bytes);
        };
        // Widen to what the checks need, and merge what then overlaps.
        let checks: Vec<&dyn RangeCheck> =
            ext.own_check.as_deref().into_iter().chain(check).collect();
        if !checks.is_empty() {
            for r in ranges.iter_mut() {
                for c in &checks {
                    let w = c.widen(name, r.clone());
                    *r = w.start.min(r.start)..w.end.max(r.end).min(self.total_bytes);
                }
            }
            let mut merged: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
            for r in ranges {
                match merged.last_mut() {
                    Some(m) if r.start <= m.end => m.end = m.end.max(r.end),
                    _ => merged.push(r),
                }
            }
            ranges = merged;
        }
        let abs: Vec<(u64, u64)> = ranges
            .iter()
            .map(|r| (ext.offset + r.start, r.end - r.start))
            .collect();
        let got = ext.src.read_ranges(&abs)?;
        for (r, b) in ranges.iter().zip(&got) {
            if b.len() as u64 != r.end - r.start {
                return Err(Error::malformed(format!(
                    "tensor {name:?}: {} bytes read for a range of {}",
                    b.len(),
                    r.end - r.start
                )));
            }
            for c in &checks {
                c.check(name, r.clone(), b)?;
            }
        }
        let bytes_read = ranges.iter().map(|r| r.end - r.start).sum();
        let mut i = 0;
        self.each(|s, d, l| {
            let (s, d, l) = (s / 8, (d / 8) as usize, (l / 8) as usize);
            while ranges[i].end < s + l as u64 {
                i += 1;
            }
            let at = (s - ranges[i].start) as usize;
            out[d..d + l].copy_from_slice(&got[i][at..at + l]);
        });
        Ok((bytes_read, ranges.len()))
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The selection `dims` as indices (for messages).
fn to_index(dims: &[Dim]) -> Vec<Index> {
    dims.iter()
        .map(|d| match d.keep {
            false => Index::At(d.low as i64),
            true => Index::Range {
                start: Some(d.low as i64),
                stop: Some((d.low + d.count * d.step) as i64),
                step: (d.step != 1).then_some(d.step as i64),
            },
        })
        .collect()
}
