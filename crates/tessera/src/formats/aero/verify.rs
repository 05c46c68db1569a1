//! `verify` for AERO: IHSH (control region), BLAKE3 of every chunk, PHSH pages and
//! per-tensor `hash_b3`; and the narrow checks behind `--control` and `--tensor`.

use rayon::prelude::*;

use super::codec;
use super::read::{AeroFile, HASH_BLOCK};
use crate::error::{Error, Result};
use crate::metadata::Value;
use crate::util::hex;
use crate::verify::{progress_bytes, progress_share, Status, VerifyOptions, VerifyReport};

/// Above this, a buffer is hashed with BLAKE3's multi-threaded `update_rayon`.
const PARALLEL_HASH: usize = 128 << 10;

/// BLAKE3-256 of `bytes`, multi-threaded when large.
pub fn blake3_of(bytes: &[u8]) -> [u8; 32] {
    if bytes.len() >= PARALLEL_HASH {
        *blake3::Hasher::new()
            .update_rayon(bytes)
            .finalize()
            .as_bytes()
    } else {
        *blake3::hash(bytes).as_bytes()
    }
}

/// Adds `bytes` to `h`, multi-threaded when large.
pub fn blake3_update(h: &mut blake3::Hasher, bytes: &[u8]) {
    if bytes.len() >= PARALLEL_HASH {
        h.update_rayon(bytes);
    } else {
        h.update(bytes);
    }
}

/// Runs the checks `opts` asks for.
pub fn verify(f: &AeroFile<'_>, opts: &VerifyOptions) -> VerifyReport {
    let mut r = VerifyReport {
        warnings: f.warnings.clone(),
        ..VerifyReport::default()
    };
    control(f, &mut r);
    if f.index_only {
        // An AEROSET's index.aero: its chunks (MMSG, TIDX, …); the tensors it lists are
        // checked in the parts that hold them (`set.rs`).
        for (i, c) in f.chunks.iter().enumerate() {
            match f.chunk_blake3(i) {
                Ok(h) => r.compare(c.subject(), "blake3", &hex(&c.entry.blake3_256), &hex(&h)),
                Err(e) => r.failed(c.subject(), "blake3", e.to_string()),
            }
        }
        padding(f, &mut r);
        return r;
    }
    if opts.control_only {
        // The tensors are skipped: done, as far as progress goes.
        opts.advance_tensors(&f.infos);
        return r;
    }
    if !opts.tensors.is_empty() {
        let mut done = vec![false; f.infos.len()];
        for name in &opts.tensors {
            match f.tensor_index(name) {
                Ok(i) => {
                    verify_tensor(f, i, &mut r);
                    if !std::mem::replace(&mut done[i], true) {
                        opts.advance(progress_bytes(&f.infos[i]));
                    }
                }
                Err(e) => r.failed(format!("tensor {name:?}"), "lookup", e.to_string()),
            }
        }
        let skipped = f.infos.iter().zip(&done).filter(|(_, d)| !**d);
        opts.advance_tensors(skipped.map(|(t, _)| t));
        return r;
    }
    let p = Passes::of(f);
    // Every chunk, in parallel (each large one is itself hashed in parallel).
    let hashes: Vec<Result<[u8; 32]>> = (0..f.chunks.len())
        .into_par_iter()
        .map(|i| {
            // Each tensor's first share once the hash has gone past its last byte.
            let ends = &p.chunk[i];
            let mut next = 0;
            let h = f.chunk_blake3_with(i, &mut |done| {
                while let Some(&(_, n)) = ends.get(next).filter(|(end, _)| *end <= done) {
                    opts.advance(n);
                    next += 1;
                }
            });
            // The rest: a read that failed half-way, a tensor past its chunk's end.
            opts.advance(ends.get(next..).unwrap_or(&[]).iter().map(|e| e.1).sum());
            h
        })
        .collect();
    for (c, h) in f.chunks.iter().zip(hashes) {
        match h {
            Ok(h) => r.compare(c.subject(), "blake3", &hex(&c.entry.blake3_256), &hex(&h)),
            Err(e) => r.failed(c.subject(), "blake3", e.to_string()),
        }
    }
    // Page hashes of every shard that has them.
    for (ci, c) in f.chunks.iter().enumerate() {
        if &c.entry.fourcc == b"WTSH" {
            if let Some(pi) = phsh_for(f, ci) {
                pages(f, ci, pi, None, &mut r);
            }
        }
        opts.advance(p.pages[ci]);
    }
    for c in &f.chunks {
        if &c.entry.fourcc == b"PHSH" {
            let shard = c.name.strip_suffix(".phsh").unwrap_or("");
            if !f
                .chunks
                .iter()
                .any(|s| &s.entry.fourcc == b"WTSH" && s.name == shard)
            {
                r.warnings.push(format!(
                    "PHSH chunk {:?} has no matching WTSH shard",
                    c.name
                ));
            }
        }
    }
    // Per-tensor hash_b3.
    let hashed = |i: usize| {
        if p.hash_b3 {
            p.share(f, i, p.passes - 1)
        } else {
            0
        }
    };
    let unhashed = (f.locs.iter().enumerate()).filter(|(_, l)| l.hash_b3.is_none());
    for (i, _) in unhashed {
        opts.advance(hashed(i));
    }
    let tensor_hashes: Vec<(usize, Result<[u8; 32]>)> = f
        .locs
        .par_iter()
        .enumerate()
        .filter(|(_, l)| l.hash_b3.is_some())
        .map(|(i, _)| {
            let h = f.tensor_bytes(i).map(|b| blake3_of(&b));
            opts.advance(hashed(i));
            (i, h)
        })
        .collect();
    for (i, h) in tensor_hashes {
        let subject = format!("tensor {:?}", f.infos[i].name);
        let want = f.locs[i].hash_b3.map(|h| hex(&h)).unwrap_or_default();
        match h {
            Ok(h) => r.compare(subject, "hash_b3", &want, &hex(&h)),
            Err(e) => r.failed(subject, "hash_b3", e.to_string()),
        }
    }
    padding(f, &mut r);
    r
}

/// How a full verify gives out progress: each tensor's share split over the passes that
/// read its bytes — its chunk's BLAKE3, then (when any shard has them) the PHSH pages,
/// then (when any tensor has one) `hash_b3`. Per chunk, its tensors' part of the first
/// pass, each at the end of its bytes (sorted), and of the second.
struct Passes {
    passes: u64,
    hash_b3: bool,
    chunk: Vec<Vec<(u64, u64)>>,
    pages: Vec<u64>,
}

impl Passes {
    fn of(f: &AeroFile<'_>) -> Passes {
        let has_pages = (0..f.chunks.len())
            .any(|ci| &f.chunks[ci].entry.fourcc == b"WTSH" && phsh_for(f, ci).is_some());
        let hash_b3 = f.locs.iter().any(|l| l.hash_b3.is_some());
        let mut p = Passes {
            passes: 1 + u64::from(has_pages) + u64::from(hash_b3),
            hash_b3,
            chunk: vec![Vec::new(); f.chunks.len()],
            pages: vec![0; f.chunks.len()],
        };
        for (i, l) in f.locs.iter().enumerate() {
            let (c, pg) = (p.share(f, i, 0), has_pages.then(|| p.share(f, i, 1)));
            if let Some(x) = p.chunk.get_mut(l.chunk) {
                x.push((l.data_off.saturating_add(l.data_len), c));
            }
            if let (Some(x), Some(pg)) = (p.pages.get_mut(l.chunk), pg) {
                *x = x.saturating_add(pg);
            }
        }
        for ends in &mut p.chunk {
            ends.sort_unstable();
        }
        p
    }
    /// Tensor `i`'s share in pass `k`.
    fn share(&self, f: &AeroFile<'_>, i: usize, k: u64) -> u64 {
        progress_share(progress_bytes(&f.infos[i]), self.passes, k)
    }
}

/// IHSH: BLAKE3 over the covered control region with every TOC hash field zeroed.
fn control(f: &AeroFile<'_>, r: &mut VerifyReport) {
    let Some(ci) = f.chunks.iter().position(|c| &c.entry.fourcc == b"IHSH") else {
        r.push(
            "control region",
            "ihsh",
            Status::NotChecked,
            Some("the file has no IHSH chunk".into()),
        );
        return;
    };
    let subject = f.chunks[ci].subject();
    match control_digest(f, ci) {
        Ok((want, got, desc)) => r.compare(
            format!("control region {desc}"),
            "ihsh",
            &hex(&want),
            &hex(&got),
        ),
        Err(e) => r.failed(subject, "ihsh", e.to_string()),
    }
}

fn control_digest(f: &AeroFile<'_>, ci: usize) -> Result<([u8; 32], [u8; 32], String)> {
    let payload = f.chunk_payload(ci)?;
    let (v, _) = codec::decode(&payload, 8, 64)?; // trailing zero padding ignored
    let m = v
        .as_map()
        .ok_or_else(|| Error::malformed("IHSH payload is not a map"))?;
    match m.get("algo").and_then(Value::as_str) {
        Some("blake3-256") => {}
        Some(a) => return Err(Error::unsupported(format!("IHSH algo {a:?}"))),
        None => return Err(Error::malformed("IHSH has no algo")),
    }
    let want: [u8; 32] = match m.get("digest") {
        Some(Value::Bytes(b)) if b.len() == 32 => {
            let mut d = [0u8; 32];
            d.copy_from_slice(b);
            d
        }
        _ => return Err(Error::malformed("IHSH digest is not 32 bytes")),
    };
    let ranges = m
        .get("covered_ranges")
        .and_then(Value::as_list)
        .filter(|l| !l.is_empty() && l.len() <= 64)
        .ok_or_else(|| Error::malformed("IHSH covered_ranges is not a non-empty list"))?;
    let size = f.src.len();
    let mut spans = Vec::new();
    for rg in ranges {
        let pair = rg.as_list().filter(|p| p.len() == 2);
        let nums: Option<Vec<u64>> = pair.map(|p| {
            p.iter()
                .filter_map(|x| x.as_int().and_then(|i| u64::try_from(i).ok()))
                .collect()
        });
        match nums.as_deref() {
            Some([s, e]) if s <= e && *e <= size => spans.push((*s, *e)),
            _ => {
                return Err(Error::malformed(format!(
                    "IHSH covered range {rg} is not [start, end] within the file ({size} bytes)"
                )))
            }
        }
    }
    // The hash fields of every TOC entry read as zeros.
    let zeros: Vec<(u64, u64)> = f
        .chunks
        .iter()
        .map(|c| {
            let s = c.entry_pos + super::raw::TOC_HASH_FIELD;
            (s, s + 32)
        })
        .collect();
    let mut h = blake3::Hasher::new();
    // Every span lies inside the file (checked above).
    let hash_range = |h: &mut blake3::Hasher, s: u64, e: u64| {
        f.src
            .for_each_block(s, e - s, HASH_BLOCK, "IHSH covered range", |b| {
                blake3_update(h, b);
                Ok(())
            })
    };
    for &(s, e) in &spans {
        let mut cur = s;
        for &(zs, ze) in &zeros {
            if ze <= cur || zs >= e {
                continue;
            }
            if zs > cur {
                hash_range(&mut h, cur, zs)?;
            }
            let zend = ze.min(e);
            let zstart = zs.max(cur);
            h.update(&[0u8; 32][..(zend - zstart) as usize]);
            cur = zend;
        }
        hash_range(&mut h, cur, e)?;
    }
    let desc = spans
        .iter()
        .map(|(s, e)| format!("[{s}, {e})"))
        .collect::<Vec<_>>()
        .join(" ");
    // The ranges must cover the whole control region, or a matching digest proves
    // nothing about the part left out.
    let mut sorted = spans.clone();
    sorted.sort_unstable();
    let mut covered = 0u64;
    for (s, e) in sorted {
        if s <= covered {
            covered = covered.max(e);
        }
    }
    if covered < f.payloads_start {
        return Err(Error::integrity(format!(
            "IHSH covers {desc}, not the whole control region [0, {})",
            f.payloads_start
        )));
    }
    Ok((want, *h.finalize().as_bytes(), desc))
}

/// The PHSH chunk of WTSH chunk `ci`, found by name `<shard>.phsh`.
pub(super) fn phsh_for(f: &AeroFile<'_>, ci: usize) -> Option<usize> {
    let want = format!("{}.phsh", f.chunks[ci].name);
    f.chunks
        .iter()
        .position(|c| &c.entry.fourcc == b"PHSH" && c.name == want)
}

/// Parses a PHSH chunk (after checking its own BLAKE3) for a shard of `shard_len` bytes.
fn parse_phsh(
    f: &AeroFile<'_>,
    pi: usize,
    shard: &str,
    shard_len: u64,
) -> Result<(u64, Vec<[u8; 32]>)> {
    let c = &f.chunks[pi];
    let payload = f.chunk_payload(pi)?;
    if blake3_of(&payload) != c.entry.blake3_256 {
        return Err(Error::integrity("the PHSH chunk fails its own BLAKE3"));
    }
    let (v, _) = codec::decode(&payload, 8, super::index::MAX_MANIFEST_VALUES)?;
    let m = v
        .as_map()
        .ok_or_else(|| Error::malformed("PHSH payload is not a map"))?;
    if m.get("shard_name").and_then(Value::as_str) != Some(shard) {
        return Err(Error::malformed(format!(
            "PHSH shard_name is not {shard:?}"
        )));
    }
    let ps = m
        .get("page_size")
        .and_then(Value::as_int)
        .and_then(|i| u64::try_from(i).ok())
        .filter(|&p| p > 0)
        .ok_or_else(|| Error::malformed("PHSH page_size is not a positive integer"))?;
    let list = m
        .get("digests")
        .and_then(Value::as_list)
        .ok_or_else(|| Error::malformed("PHSH digests is not a list"))?;
    let want = shard_len.div_ceil(ps);
    if list.is_empty() || list.len() as u64 != want {
        return Err(Error::malformed(format!(
            "PHSH has {} digests, a {shard_len}-byte shard in {ps}-byte pages needs {want}",
            list.len()
        )));
    }
    let mut out = Vec::with_capacity(list.len());
    for d in list {
        match d {
            Value::Bytes(b) if b.len() == 32 => {
                let mut a = [0u8; 32];
                a.copy_from_slice(b);
                out.push(a);
            }
            _ => return Err(Error::malformed("PHSH digest is not 32 bytes")),
        }
    }
    Ok((ps, out))
}

/// A shard's PHSH pages as the check of slice reads: ranges of the shard's payload
/// widened to whole pages, each page hashed against its digest.
pub(super) struct PhshCheck {
    shard: String,
    shard_len: u64,
    page_size: u64,
    digests: Vec<[u8; 32]>,
}

impl PhshCheck {
    /// The pages of shard `ci` from its PHSH chunk `pi` (checked against its own
    /// BLAKE3).
    pub(super) fn new(f: &AeroFile<'_>, ci: usize, pi: usize) -> Result<PhshCheck> {
        let c = &f.chunks[ci];
        let (page_size, digests) = parse_phsh(f, pi, &c.name, c.entry.chunk_ulen)
            .map_err(|e| e.at_subject(format!("PHSH of {:?}", c.name)))?;
        Ok(PhshCheck {
            shard: c.name.clone(),
            shard_len: c.entry.chunk_ulen,
            page_size,
            digests,
        })
    }
}

impl crate::slice::RangeCheck for PhshCheck {
    fn widen(&self, _: &str, r: std::ops::Range<u64>) -> std::ops::Range<u64> {
        let ps = self.page_size;
        (r.start / ps * ps)..r.end.div_ceil(ps).saturating_mul(ps).min(self.shard_len)
    }
    fn check(&self, tensor: &str, r: std::ops::Range<u64>, bytes: &[u8]) -> Result<()> {
        let ps = self.page_size;
        let first = r.start / ps;
        let bad = (first..r.end.div_ceil(ps))
            .into_par_iter()
            .find_first(|&p| {
                let s = (p * ps - r.start) as usize;
                let e = (((p + 1) * ps).min(self.shard_len) - r.start) as usize;
                let want = self.digests.get(p as usize);
                bytes.get(s..e).map(blake3_of).as_ref() != want
            });
        match bad {
            None => Ok(()),
            Some(p) => Err(Error::integrity(format!(
                "phsh mismatch: page {p} of {:?} ({ps}-byte pages, bytes {}..{}) does not \
                 match its digest",
                self.shard,
                p * ps,
                ((p + 1) * ps).min(self.shard_len)
            ))
            .at_subject(format!("tensor {tensor:?}"))),
        }
    }
}

/// Checks the pages of shard `ci` (all, or those overlapping `range`).
/// `range` is `(name, data_off, data_len)` of the tensor whose pages are wanted.
fn pages(
    f: &AeroFile<'_>,
    ci: usize,
    pi: usize,
    range: Option<(&str, u64, u64)>,
    r: &mut VerifyReport,
) {
    let c = &f.chunks[ci];
    let subject = match range {
        None => format!("pages of {:?}", c.name),
        Some((t, ..)) => format!("tensor {t:?} pages of {:?}", c.name),
    };
    // A compressed shard (never written) is decoded here, so that a failure to decode
    // is reported as this check's; a raw one is read by range, page batch by batch.
    if c.entry.is_zstd() {
        if let Err(e) = f.chunk_payload(ci) {
            return r.failed(subject, "phsh", e.to_string());
        }
    }
    let shard_len = c.entry.chunk_ulen;
    let (ps, digests) = match parse_phsh(f, pi, &c.name, shard_len) {
        Ok(x) => x,
        Err(e) => return r.failed(subject, "phsh", e.to_string()),
    };
    let n = digests.len() as u64;
    let (first, last) = match range {
        None => (0, n),
        Some((_, _, 0)) => {
            return r.push(
                subject,
                "phsh",
                Status::Ok,
                Some("empty tensor: no page".into()),
            )
        }
        Some((_, off, len)) => (off / ps, ((off + len - 1) / ps + 1).min(n)),
    };
    // Pages in batches of about HASH_BLOCK bytes: one range read per batch, its pages
    // hashed in parallel.
    let batch = (HASH_BLOCK / ps).max(1);
    let mut bad: Vec<(u64, String)> = Vec::new();
    let mut b0 = first;
    while b0 < last {
        let b1 = last.min(b0.saturating_add(batch));
        let (start, end) = (b0 * ps, (b1 * ps).min(shard_len));
        let bytes = match f.payload_range(ci, start, end - start, "pages outside their shard") {
            Ok(b) => b,
            Err(e) => return r.failed(subject, "phsh", e.to_string()),
        };
        bad.extend(
            (b0..b1)
                .into_par_iter()
                .filter_map(|p| {
                    let s = (p * ps - start) as usize;
                    let e = (((p + 1) * ps).min(shard_len) - start) as usize;
                    let h = blake3_of(&bytes[s..e]);
                    (h != digests[p as usize]).then(|| {
                        (
                            p,
                            format!(
                                "expected {}, computed {}",
                                hex(&digests[p as usize]),
                                hex(&h)
                            ),
                        )
                    })
                })
                .collect::<Vec<_>>(),
        );
        b0 = b1;
    }
    if bad.is_empty() {
        r.push(
            subject,
            "phsh",
            Status::Ok,
            Some(format!("pages {first}..{last} of {n} ({ps}-byte pages)")),
        );
    }
    for (p, d) in bad {
        r.failed(format!("page {p} of {:?}", c.name), "phsh", d);
    }
}

/// What reading tensor `i` touches: its `hash_b3`, the PHSH pages it overlaps, or (with
/// neither) its whole shard's BLAKE3.
pub fn verify_tensor(f: &AeroFile<'_>, i: usize, r: &mut VerifyReport) {
    let loc = &f.locs[i];
    let subject = format!("tensor {:?}", f.infos[i].name);
    if let Some(want) = loc.hash_b3 {
        match f.tensor_bytes(i) {
            Ok(b) => r.compare(
                subject.clone(),
                "hash_b3",
                &hex(&want),
                &hex(&blake3_of(&b)),
            ),
            Err(e) => r.failed(subject.clone(), "hash_b3", e.to_string()),
        }
    }
    if let Some(pi) = phsh_for(f, loc.chunk) {
        let name = f.infos[i].name.as_str();
        pages(
            f,
            loc.chunk,
            pi,
            Some((name, loc.data_off, loc.data_len)),
            r,
        );
    } else if loc.hash_b3.is_none() {
        let c = &f.chunks[loc.chunk];
        match f.chunk_blake3(loc.chunk) {
            Ok(h) => r.compare(c.subject(), "blake3", &hex(&c.entry.blake3_256), &hex(&h)),
            Err(e) => r.failed(c.subject(), "blake3", e.to_string()),
        }
    }
}

/// Padding between payloads should be zeros; anything else is reported as a warning
/// (no hash covers those bytes).
fn padding(f: &AeroFile<'_>, r: &mut VerifyReport) {
    let mut spans: Vec<(u64, u64)> = f
        .chunks
        .iter()
        .map(|c| {
            (
                c.entry.chunk_offset,
                c.entry.chunk_offset + c.entry.chunk_length,
            )
        })
        .collect();
    spans.sort_unstable();
    let size = f.src.len();
    // Any non-zero byte in [s, e) (read in blocks; a read error counts as none found:
    // the chunks' own checks report it).
    let nonzero = |s: u64, e: u64| {
        let mut any = false;
        let _ = f.src.for_each_block(s, e - s, HASH_BLOCK, "padding", |b| {
            any |= b.iter().any(|&x| x != 0);
            Ok(())
        });
        any
    };
    let mut cur = f.payloads_start.min(size);
    for (s, e) in spans {
        if s > cur && nonzero(cur, s) {
            r.warnings
                .push(format!("non-zero padding bytes in {cur}..{s}"));
        }
        cur = cur.max(e);
    }
    if cur < size && nonzero(cur, size) {
        r.warnings
            .push(format!("non-zero bytes after the last payload, at {cur}.."));
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::super::read::AeroFile;
    use crate::{DType, Format, Limits, Model, TensorInfo, TensorView, WriteOptions};

    #[test]
    fn a_large_shard_reports_its_hashing_block_by_block() {
        // 40 MiB in one shard (a mapped file hands the range over whole): the hash
        // reports every 16 MiB, and the digest is the one of the whole payload.
        let mut m = Model::new();
        for (name, mib) in [("a", 20usize), ("b", 20)] {
            let info = TensorInfo::dense(name, DType::U8, vec![(mib << 20) as u64]);
            let bytes: Vec<u8> = (0..mib << 20).map(|i| (i % 251) as u8).collect();
            m.push(TensorView::dense(info, Cow::Owned(bytes)).unwrap())
                .unwrap();
        }
        let mut out = std::io::Cursor::new(Vec::new());
        crate::convert::write_to(Format::Aero, &m, &mut out, &WriteOptions::default()).unwrap();
        let bytes = out.into_inner();
        let f = AeroFile::open(&bytes[..], &Limits::default()).unwrap();
        let ci = f.locs[0].chunk;
        let mut seen = Vec::new();
        let h = f
            .chunk_blake3_with(ci, &mut |done| seen.push(done))
            .unwrap();
        let payload = f.chunk_payload(ci).unwrap();
        assert_eq!(h, *blake3::hash(&payload).as_bytes());
        let len = payload.len() as u64;
        assert!(len >= 40 << 20);
        let mut want: Vec<u64> = (1..)
            .map(|k| k * (16 << 20))
            .take_while(|&n| n < len)
            .collect();
        want.push(len);
        assert_eq!(seen, want);
    }
}
