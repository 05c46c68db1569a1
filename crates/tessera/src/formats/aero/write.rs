//! The AERO writer: plans every offset from the tensor list (a first pass of its own:
//! packed lengths and `tensor_hashes` need the bytes before the TIDX is written), writes
//! the control region and the metadata chunks, streams the shards tensor by tensor
//! (hashing as it goes) as a [`StreamWriter`] fed by the driver
//! ([`crate::write::drive`]: read-ahead on the pool, interruption asked between
//! tensors), then patches the TOC hashes of the shards and page-hash chunks.

use std::io::{BufWriter, Seek, SeekFrom, Write};

use super::plan::*;
use super::raw::*;
use super::read::MMSG_EXACT_METADATA;
use crate::error::{Error, Result};
use crate::model::TensorSource;
use crate::options::WriteOptions;
use crate::tensor::TensorView;
use crate::write::{InOrder, StreamWriter, WriteReport, WriteSeek};

/// zstd level of the original writer.
const ZSTD_LEVEL: i32 = 6;

enum Payload {
    Bytes(Vec<u8>),
    Shard(usize),
    Phsh(usize),
    Opaque(String),
}

struct ChunkPlan {
    fourcc: [u8; 4],
    flags: u32,
    name: String,
    payload: Payload,
    length: u64,
    ulen: u64,
    /// Bytes reserved in the layout (PHSH reserves more than it uses, as the original).
    reserve: u64,
    offset: u64,
    hash: [u8; 32],
}

impl ChunkPlan {
    fn new(
        fourcc: &[u8; 4],
        flags: u32,
        name: &str,
        payload: Payload,
        length: u64,
        ulen: u64,
    ) -> ChunkPlan {
        ChunkPlan {
            fourcc: *fourcc,
            flags,
            name: name.to_string(),
            payload,
            length,
            ulen,
            reserve: length,
            offset: 0,
            hash: [0; 32],
        }
    }
    fn bytes(
        fourcc: &[u8; 4],
        flags: u32,
        name: &str,
        raw: Vec<u8>,
        zstd: bool,
    ) -> Result<ChunkPlan> {
        let hash = *blake3::hash(&raw).as_bytes();
        let ulen = raw.len() as u64;
        let stored = if zstd {
            zstd::bulk::compress(&raw, ZSTD_LEVEL).map_err(|e| {
                Error::new(crate::ErrorKind::Io, "zstd compression failed").with_source(e)
            })?
        } else {
            raw
        };
        let mut c = ChunkPlan::new(
            fourcc,
            flags,
            name,
            Payload::Bytes(Vec::new()),
            stored.len() as u64,
            ulen,
        );
        c.payload = Payload::Bytes(stored);
        c.hash = hash;
        Ok(c)
    }
}

/// Writes `src` as AERO v0.1.
pub fn write(
    src: &dyn TensorSource,
    out: &mut dyn WriteSeek,
    opts: &WriteOptions,
) -> Result<WriteReport> {
    write_in_shards(src, out, opts, None)
}

/// [`fn@write`] with the tensors cut into given shards: `groups` are consecutive ranges of
/// `src`'s tensors, one WTSH chunk `weights.shard{i}` each (with its PHSH when page
/// hashes are on); `None` cuts by `opts.shard_size`. `tessera convert --shards N /
/// --max-shard-size` uses it (`crate::set::write`).
pub fn write_in_shards(
    src: &dyn TensorSource,
    out: &mut dyn WriteSeek,
    opts: &WriteOptions,
    groups: Option<&[std::ops::Range<usize>]>,
) -> Result<WriteReport> {
    let opts = &super::AeroOptions::from_options(opts)?;
    if opts.max_part_shards.is_some() {
        return Err(Error::invalid_input(
            "max_part_shards applies to an AEROSET (an output named NAME.aeroset.json, or --to aeroset), not to one AERO file",
        ));
    }
    let mut notes = Vec::new();
    let meta = super::plan::metadata_for(src, opts, &mut notes);
    let mut plans = plan_tensors(src, opts, groups)?;
    let mjsn_meta = super::quant::resolve(&mut plans, &meta);
    let mut report = write_planned(src, &meta, out, opts, &plans, None, &mjsn_meta, true)?;
    report.notes.extend(notes);
    Ok(report)
}

/// Writes one AERO file holding the tensors `plans` place (their `shard` numbers this
/// file's own, from 0), read from `src`, with the metadata `meta`; its TIDX lists `listing` instead when given
/// (an AEROSET's `index.aero`: every tensor of the set, no shard of its own; `plans`
/// empty). `mjsn_meta` is the metadata `meta.json` carries (`quant::resolve`'s);
/// `with_chunks`: the source's opaque chunks go in too.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_planned(
    src: &dyn TensorSource,
    meta: &crate::metadata::Metadata,
    out: &mut dyn WriteSeek,
    opts: &super::AeroOptions,
    plans: &[TensorPlan],
    listing: Option<&[TensorPlan]>,
    mjsn_meta: &crate::metadata::Metadata,
    with_chunks: bool,
) -> Result<WriteReport> {
    let n_shards = plans.iter().map(|p| p.shard + 1).max().unwrap_or(0);
    let mut shard_len = vec![0u64; n_shards];
    let mut shard_count = vec![0u64; n_shards];
    for p in plans {
        shard_len[p.shard] = shard_len[p.shard].max(p.off + p.len);
        shard_count[p.shard] += 1;
    }
    let page = match opts.page_hashes {
        Some(0) => return Err(Error::invalid_input("page size must be positive")),
        p => p,
    };

    // The chunk list, in the original's order.
    let mut chunks: Vec<ChunkPlan> = Vec::new();
    if opts.control_integrity {
        let n = IHSH_PAYLOAD_SIZE as u64;
        chunks.push(ChunkPlan::new(
            b"IHSH",
            CHUNK_IS_OPTIONAL,
            "control.integrity",
            Payload::Bytes(Vec::new()),
            n,
            n,
        ));
    }
    let (mjsn, exact) = meta_json(mjsn_meta, meta);
    chunks.push(ChunkPlan::bytes(
        b"MJSN",
        0,
        "meta.json",
        mjsn.into_bytes(),
        false,
    )?);
    let mmsg_at = chunks.len();
    chunks.push(ChunkPlan::new(
        b"MMSG",
        COMPRESSED_ZSTD,
        "manifest",
        Payload::Bytes(Vec::new()),
        0,
        0,
    ));
    let listed_tensors = listing.unwrap_or(plans);
    let tidx_bytes = msgpack(&tidx(listed_tensors))?;
    check_metadata_ulen(
        "TIDX",
        tidx_bytes.len() as u64,
        MAX_METADATA_ULEN,
        &format!("{} tensors", listed_tensors.len()),
    )?;
    chunks.push(ChunkPlan::bytes(
        b"TIDX",
        CHUNK_IS_INDEX | COMPRESSED_ZSTD,
        "tensors",
        tidx_bytes,
        true,
    )?);
    let mut shard_toc = Vec::new();
    for (s, &len) in shard_len.iter().enumerate() {
        shard_toc.push(chunks.len());
        chunks.push(ChunkPlan::new(
            b"WTSH",
            CHUNK_IS_MMAP_CRITICAL,
            &format!("weights.shard{s}"),
            Payload::Shard(s),
            len,
            len,
        ));
        if let Some(ps) = page.filter(|_| len > 0) {
            let n_pages = len.div_ceil(ps);
            let actual = phsh_payload(
                s,
                ps,
                &vec![[0u8; 32]; crate::limits::to_usize(n_pages, "pages")?],
            )?
            .len() as u64;
            let name = format!("weights.shard{s}.phsh");
            let mut c = ChunkPlan::new(
                b"PHSH",
                CHUNK_IS_OPTIONAL,
                &name,
                Payload::Phsh(s),
                actual,
                actual,
            );
            // The original reserves 80 + len(name) + 32 per page; from 18 pages on the real
            // payload (34 bytes per digest) outgrows that and would run into the next
            // chunk, so we reserve at least what the payload needs.
            let original = 80 + format!("weights.shard{s}").len() as u64 + 32 * n_pages;
            c.reserve = original.max(actual);
            chunks.push(c);
        }
    }
    for c in (src.chunks().iter()).filter(|c| with_chunks && !c.holds_tensors) {
        if chunks.iter().any(|x| x.name == c.name) {
            return Err(Error::invalid_input(format!(
                "chunk name {:?} is reserved by AERO",
                c.name
            )));
        }
        let bytes = src.chunk(&c.name)?;
        let mut p = ChunkPlan::new(
            &opaque_fourcc(&c.kind),
            CHUNK_IS_OPTIONAL,
            &c.name,
            Payload::Opaque(c.name.clone()),
            bytes.len() as u64,
            bytes.len() as u64,
        );
        p.hash = *blake3::hash(&bytes).as_bytes();
        chunks.push(p);
    }

    // MMSG: needs the TOC indices, known now.
    let listed: Vec<([u8; 4], Option<usize>)> = chunks
        .iter()
        .map(|c| match c.payload {
            Payload::Shard(s) | Payload::Phsh(s) => (c.fourcc, Some(s)),
            _ => (c.fourcc, None),
        })
        .collect();
    let shards: Vec<ShardInfo> = (0..n_shards)
        .map(|s| ShardInfo {
            toc_index: shard_toc[s],
            size: shard_len[s],
            count: shard_count[s],
        })
        .collect();
    let mmsg = msgpack(&manifest(&listed, &shards, meta, exact))?;
    check_metadata_ulen(
        "MMSG",
        mmsg.len() as u64,
        MAX_METADATA_ULEN,
        &format!(
            "{} chunks, {} shards and {} metadata keys",
            listed.len(),
            shards.len(),
            meta.len()
        ),
    )?;
    chunks[mmsg_at] = ChunkPlan::bytes(b"MMSG", COMPRESSED_ZSTD, "manifest", mmsg, true)?;

    // Layout.
    let mut st = Vec::new();
    let mut names = Vec::new();
    for c in &chunks {
        let off =
            u32::try_from(st.len()).map_err(|_| Error::invalid_input("string table too large"))?;
        let len =
            u32::try_from(c.name.len()).map_err(|_| Error::invalid_input("chunk name too long"))?;
        names.push((off, len));
        st.extend_from_slice(c.name.as_bytes());
        st.push(0);
    }
    st.resize(st.len().div_ceil(8) * 8, 0);
    let n = chunks.len() as u64;
    if n > MAX_ENTRY_COUNT || st.len() as u64 > MAX_STRING_TABLE {
        return Err(Error::invalid_input(format!(
            "{n} chunks with a {}-byte string table: AERO allows at most {MAX_ENTRY_COUNT} \
             chunks and a {MAX_STRING_TABLE}-byte string table",
            st.len()
        )));
    }
    let toc_length = TOC_HEADER_SIZE + TOC_ENTRY_SIZE * n;
    let st_off = HEADER_SIZE + toc_length;
    let payloads_start = align_up(st_off + st.len() as u64, 16)?;
    let mut pos = payloads_start;
    for c in &mut chunks {
        c.offset = align_up(pos, 16)?;
        pos = c
            .offset
            .checked_add(c.reserve)
            .ok_or_else(|| Error::invalid_input("file too large"))?;
    }
    let uuid = opts.uuid.unwrap_or_else(|| {
        let mut u: [u8; 16] = rand::random();
        u[6] = (u[6] & 0x0f) | 0x40;
        u[8] = (u[8] & 0x3f) | 0x80;
        u
    });
    let header = FileHeader {
        version_major: 0,
        version_minor: 1,
        header_size: HEADER_SIZE as u32,
        toc_offset: HEADER_SIZE,
        toc_length,
        string_table_offset: st_off,
        string_table_length: st.len() as u64,
        file_flags: 0,
        uuid,
        reserved: [0; 28],
    };
    let control = |chunks: &[ChunkPlan], zero_hashes: bool| -> Vec<u8> {
        let mut b = header.to_bytes();
        b.extend(
            TocHeader {
                entry_count: n as u32,
                reserved0: 0,
                reserved1: 0,
            }
            .to_bytes(),
        );
        for (c, &(name_off, name_len)) in chunks.iter().zip(&names) {
            b.extend(
                TocEntry {
                    fourcc: c.fourcc,
                    chunk_flags: c.flags,
                    chunk_offset: c.offset,
                    chunk_length: c.length,
                    chunk_ulen: c.ulen,
                    name_off,
                    name_len,
                    reserved0: 0,
                    blake3_256: if zero_hashes { [0; 32] } else { c.hash },
                }
                .to_bytes(),
            );
        }
        b.extend_from_slice(&st);
        b.resize(payloads_start as usize, 0);
        b
    };
    if opts.control_integrity {
        let digest = *blake3::hash(&control(&chunks, true)).as_bytes();
        chunks[0] = ChunkPlan::bytes(
            b"IHSH",
            CHUNK_IS_OPTIONAL,
            "control.integrity",
            ihsh_payload(payloads_start, &digest)?,
            false,
        )?;
        chunks[0].offset = payloads_start;
    }

    // Stream: the driver feeds the shards' tensors; the chunks between go out as
    // they come.
    let mut w = BufWriter::with_capacity(1 << 20, out);
    w.write_all(&control(&chunks, false))?;
    let stream = Stream {
        src,
        plans,
        page,
        w,
        chunks,
        next_chunk: 0,
        at: payloads_start,
        shard: None,
        shard_pages: vec![Vec::new(); n_shards],
        patched: Vec::new(),
        next: InOrder::new(),
    };
    let Stream {
        mut w,
        mut chunks,
        at,
        patched,
        ..
    } = crate::write::drive(src, stream)?;
    // Patch the TOC with the hashes known only now.
    for (ci, h) in patched {
        chunks[ci].hash = h;
    }
    w.seek(SeekFrom::Start(0))?;
    w.write_all(&control(&chunks, false)[..(HEADER_SIZE + toc_length) as usize])?;
    w.seek(SeekFrom::Start(at))?;
    w.flush()?;
    let mut report = WriteReport::default();
    if !exact {
        report.notes.push(format!(
            "metadata kept exactly under MMSG key {MMSG_EXACT_METADATA:?} (meta.json holds its JSON form)"
        ));
    }
    Ok(report)
}

use std::io::Read as _;

/// The spec's `MAX_METADATA_ULEN` ("readers and writers enforce"): a metadata chunk
/// (`TIDX`, `MMSG`) whose uncompressed size is over `limit` is refused before anything
/// is written, naming its size and what made it (`what`: "40000000 tensors"), since no
/// AERO reader would open the file.
fn check_metadata_ulen(fourcc: &str, ulen: u64, limit: u64, what: &str) -> Result<()> {
    if ulen > limit {
        return Err(Error::invalid_input(format!(
            "the {fourcc} chunk for {what} would be {ulen} bytes uncompressed, over AERO's \
             MAX_METADATA_ULEN of {limit} bytes: no AERO reader opens it (write fewer \
             tensors per file, e.g. a set with --max-shard-size)"
        )));
    }
    Ok(())
}

/// A shard being written: its BLAKE3 and page digests so far.
struct OpenShard {
    s: usize,
    /// Its chunk in the TOC.
    ci: usize,
    h: blake3::Hasher,
    pages: Vec<[u8; 32]>,
    ph: blake3::Hasher,
    fill: u64,
    len: u64,
}

impl OpenShard {
    fn new(s: usize, ci: usize) -> OpenShard {
        OpenShard {
            s,
            ci,
            h: blake3::Hasher::new(),
            pages: Vec::new(),
            ph: blake3::Hasher::new(),
            fill: 0,
            len: 0,
        }
    }

    /// Writes `b` and hashes it (pages of `page` bytes).
    fn feed(&mut self, b: &[u8], page: Option<u64>, w: &mut impl Write) -> Result<()> {
        w.write_all(b)?;
        if b.len() >= 1 << 20 {
            self.h.update_rayon(b);
        } else {
            self.h.update(b);
        }
        if let Some(ps) = page {
            let mut rest = b;
            while !rest.is_empty() {
                let take = ((ps - self.fill) as usize).min(rest.len());
                self.ph.update(&rest[..take]);
                rest = &rest[take..];
                self.fill += take as u64;
                if self.fill == ps {
                    self.pages.push(*self.ph.finalize().as_bytes());
                    self.ph.reset();
                    self.fill = 0;
                }
            }
        }
        Ok(())
    }
}

/// The second pass as a [`StreamWriter`]: the tensors in plan order (shard by shard,
/// the shards in TOC order), each padded to its offset and hashed into its shard; the
/// chunks before a shard, between shards and after the last go out as the stream
/// reaches them. `finish` gives back the writer, the chunks and the hashes to patch.
struct Stream<'a, W: Write> {
    src: &'a dyn TensorSource,
    plans: &'a [TensorPlan],
    page: Option<u64>,
    w: W,
    chunks: Vec<ChunkPlan>,
    /// The first chunk not yet written.
    next_chunk: usize,
    /// Where the output is (payload offsets).
    at: u64,
    shard: Option<OpenShard>,
    shard_pages: Vec<Vec<[u8; 32]>>,
    /// (chunk, hash) known only once its payload is written.
    patched: Vec<(usize, [u8; 32])>,
    next: InOrder,
}

impl<W: Write> Stream<'_, W> {
    /// Zero padding up to chunk `ci`'s offset.
    fn pad_to(&mut self, ci: usize) -> Result<()> {
        let chunk = &self.chunks[ci];
        let gap = chunk.offset.checked_sub(self.at).ok_or_else(|| {
            Error::invalid_input(format!("chunk {:?} overlaps the previous one", chunk.name))
        })?;
        std::io::copy(&mut std::io::repeat(0).take(gap), &mut self.w)?;
        self.at = chunk.offset;
        Ok(())
    }

    /// Ends the open shard: its hash to patch, its page digests for its PHSH.
    fn close_shard(&mut self) -> Result<()> {
        if let Some(mut sh) = self.shard.take() {
            if sh.fill > 0 {
                sh.pages.push(*sh.ph.finalize().as_bytes());
            }
            self.patched.push((sh.ci, *sh.h.finalize().as_bytes()));
            self.shard_pages[sh.s] = sh.pages;
            self.at += sh.len;
            self.next_chunk = sh.ci + 1;
        }
        Ok(())
    }

    /// Writes the chunks up to `end` (exclusive); a shard among them has no tensors.
    fn chunks_until(&mut self, end: usize) -> Result<()> {
        while self.next_chunk < end {
            let ci = self.next_chunk;
            self.pad_to(ci)?;
            let written = match &self.chunks[ci].payload {
                Payload::Bytes(b) => {
                    self.w.write_all(b)?;
                    b.len() as u64
                }
                Payload::Opaque(name) => {
                    let b = self.src.chunk(name)?;
                    if b.len() as u64 != self.chunks[ci].length {
                        return Err(Error::invalid_input(format!(
                            "chunk {name:?} changed size while writing"
                        )));
                    }
                    self.w.write_all(&b)?;
                    b.len() as u64
                }
                Payload::Shard(s) => {
                    self.shard = Some(OpenShard::new(*s, ci));
                    self.close_shard()?;
                    continue;
                }
                Payload::Phsh(s) => {
                    let ps = self.page.unwrap_or(PHSH_PAGE_SIZE_DEFAULT);
                    let b = phsh_payload(*s, ps, &self.shard_pages[*s])?;
                    if b.len() as u64 != self.chunks[ci].length {
                        return Err(Error::invalid_input("PHSH payload size changed"));
                    }
                    self.patched.push((ci, *blake3::hash(&b).as_bytes()));
                    self.w.write_all(&b)?;
                    b.len() as u64
                }
            };
            self.at += written;
            self.next_chunk = ci + 1;
        }
        Ok(())
    }
}

impl<W: Write> StreamWriter for Stream<'_, W> {
    type Encoded = ();
    type Done = Self;
    fn order(&self) -> Vec<String> {
        self.plans.iter().map(|p| p.name.clone()).collect()
    }
    fn write_tensor(&mut self, name: &str, view: TensorView<'_>, _: Option<()>) -> Result<()> {
        let p = self.next.next(self.plans, name, |p| &p.name)?;
        if self.shard.as_ref().map(|sh| sh.s) != Some(p.shard) {
            self.close_shard()?;
            let ci = (self.next_chunk..self.chunks.len())
                .find(|&ci| matches!(self.chunks[ci].payload, Payload::Shard(s) if s == p.shard))
                .ok_or_else(|| Error::invalid_input("tensor placement out of order"))?;
            self.chunks_until(ci)?;
            self.pad_to(ci)?;
            self.shard = Some(OpenShard::new(p.shard, ci));
        }
        let (page, w) = (self.page, &mut self.w);
        let sh = self
            .shard
            .as_mut()
            .ok_or_else(|| Error::invalid_input("tensor placement out of order"))?;
        // Zero padding up to the tensor's aligned offset.
        let pad = p
            .off
            .checked_sub(sh.len)
            .filter(|&n| n < 16)
            .ok_or_else(|| Error::invalid_input("tensor placement out of order"))?;
        sh.feed(&[0u8; 16][..pad as usize], page, w)?;
        let b = tensor_bytes(&view)?;
        if b.len() as u64 != p.len {
            return Err(Error::invalid_input(format!(
                "tensor {:?}: {} bytes, {} planned",
                p.name,
                b.len(),
                p.len
            )));
        }
        sh.feed(b, page, w)?;
        sh.len = p.off + p.len;
        self.next.advance();
        Ok(())
    }
    fn finish(mut self) -> Result<Self> {
        (self.next).all_written("AERO writer", self.plans, |p| &p.name)?;
        self.close_shard()?;
        self.chunks_until(self.chunks.len())?;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_chunks_over_the_limit_are_refused_naming_size_and_counts() {
        check_metadata_ulen("TIDX", 100, 100, "3 tensors").unwrap();
        let e = check_metadata_ulen("TIDX", 101, 100, "3 tensors").unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
        let m = e.to_string();
        assert!(
            m.contains("TIDX") && m.contains("3 tensors") && m.contains("101 bytes"),
            "{m}"
        );
        assert!(m.contains("MAX_METADATA_ULEN"), "{m}");
    }
}
