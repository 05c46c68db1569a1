//! The WTXT writer: one pass over the source, arrays in ASCII name order, the root (and
//! `sign`) line patched in place at the end, or left `root_pending` with a WSUM sibling
//! in streaming mode.
//!
//! The driver ([`crate::write::drive`]) feeds it, the arrays hashed and encoded on the
//! rayon pool by its companion ([`super::pipeline::ArrayEncoder`]) a batch at a time
//! while the previous batch is written; an array over one segment (16 MiB) is encoded
//! a segment at a time as it is written, so memory stays near two batches of tensors
//! and their text.

use std::io::{Seek, SeekFrom, Write};

use sha2::{Digest, Sha256};

use super::header::{self, cap_line, is_timestamp, is_token, Meta, Root, Sign, ROOT_PENDING};
use super::pipeline::{ArrayEncoder, EncodedArray, Placed, Salts};
use super::raw::{self, IdxLine};
use super::wsum::Wsum;
use super::WtxtOptions;
use crate::error::{Error, Result};
use crate::model::TensorSource;
use crate::options::WriteOptions;
use crate::tensor::{Layout, TensorInfo, TensorView};
use crate::write::{Encoder, InOrder, StreamWriter, WriteReport, WriteSeek};

/// Raw chunk size without row blocking, and the target with it (RESOLUTIONS 5).
pub const CHUNK: u64 = 32 * 1024;
/// How one array is cut into chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunking {
    /// The `idx` line, when row blocking is used.
    pub idx: Option<IdxLine>,
    /// Raw bytes per chunk (the last may be shorter).
    pub chunk: u64,
}

/// The chunking of an array: with `rows_per_chunk` given, row blocking for every array
/// of rank ≥ 1; by default, row blocking with `rows_per_chunk = 32768 / row_size` when a
/// row fits in 32 KiB (so chunks are at most 32 KiB and end on row boundaries), and plain
/// 32 KiB chunks otherwise (scalars, rows over 32 KiB). Empty arrays have no chunks.
pub fn chunking(info: &TensorInfo, bytes: u64, rows_per_chunk: Option<u64>) -> Result<Chunking> {
    let plain = Chunking {
        idx: None,
        chunk: CHUNK,
    };
    if info.shape.is_empty() || bytes == 0 {
        return Ok(plain);
    }
    let row_size = raw::row_size(info.dtype, &info.shape)?;
    let rpc = match rows_per_chunk {
        Some(0) => return Err(Error::invalid_input("rows_per_chunk must be at least 1")),
        Some(r) => r,
        None if row_size <= CHUNK => CHUNK / row_size,
        None => return Ok(plain),
    };
    let chunk = rpc.checked_mul(row_size).ok_or_else(|| {
        Error::invalid_input(format!(
            "rows_per_chunk {rpc} × row size {row_size} overflows"
        ))
    })?;
    Ok(Chunking {
        idx: Some(IdxLine {
            rows_per_chunk: rpc,
            row_size,
            row_blocking: true,
        }),
        chunk,
    })
}

fn token(v: Option<&String>, default: &str, what: &str) -> Result<String> {
    let v = v.map(String::as_str).unwrap_or(default);
    if !is_token(v) {
        return Err(Error::invalid_input(format!(
            "wtxt {what} {v:?}: 1+ printable ASCII characters, no space, '=' or '\"'"
        )));
    }
    Ok(v.to_string())
}

/// The previous snapshot's `merkle_this` and `gen`, for chaining.
fn read_prev(opts: &WtxtOptions) -> Result<([u8; 32], Option<u64>)> {
    match &opts.prev {
        Some(p) => super::wsum::chain_from(p),
        None => Ok(([0; 32], None)),
    }
}

/// A WTXT file being written. [`WtxtWriter::new`] plans every array (it needs each
/// tensor's name, dtype and shape, not its bytes) and writes the header lines with a
/// placeholder root; [`WtxtWriter::write_tensor`] then takes the arrays in
/// [`WtxtWriter::order`] (ASCII name order, as the spec lays them out), each hashed and
/// encoded on every core; [`WtxtWriter::finish`] writes `audit`/`endwtxt` and patches
/// the root (and `sign`) lines in place — or, with `streaming`, leaves `root_pending`
/// and returns the WSUM text that must go beside the file (`OUT.wsum`).
///
/// The options are [`WtxtOptions`] (`generation`/`prev` chaining, `build`, `host`,
/// `cuda`, `rows_per_chunk`, `hmac_key`, `sign_key`, `streaming`, `audit`) and the
/// shared `timestamp`, read from the [`WriteOptions`] given.
pub struct WtxtWriter<W: Write + Seek> {
    out: W,
    opts: WtxtOptions,
    meta: Meta,
    exts: Vec<&'static str>,
    /// The arrays in file order, with their byte lengths and chunkings.
    arrays: Vec<(TensorInfo, u64, Chunking)>,
    next: InOrder,
    start: u64,
    root_pos: u64,
    head_len: usize,
    merkle_prev: [u8; 32],
    sign_key: Option<[u8; 32]>,
    all: Sha256,
    fastxor: u64,
    /// The encoding companion (the arrays' places and the HMAC key).
    encoder: ArrayEncoder,
}

/// What [`WtxtWriter::finish`] gives back.
#[derive(Debug)]
#[non_exhaustive]
pub struct Finished<W> {
    /// The sink, positioned after `endwtxt`.
    pub out: W,
    /// With `streaming`: the WSUM file's text (its root and `sign` line), to be written
    /// as `OUT.wsum` ([`super::wsum::wsum_path`]) together with the main file.
    pub wsum: Option<String>,
}

impl<W: Write + Seek> WtxtWriter<W> {
    /// Plans the arrays of `infos` and writes the header. Errors name a tensor WTXT
    /// cannot store (not dense, a dtype outside its list, a name outside its
    /// characters, too many bytes or chunks) or a bad option value.
    pub fn new(mut out: W, infos: &[TensorInfo], options: &WriteOptions) -> Result<Self> {
        let opts = &WtxtOptions::from_options(options)?;
        let (merkle_prev, prev_gen) = read_prev(opts)?;
        let gen = opts.generation.or(prev_gen.map(|g| g + 1)).unwrap_or(0);
        let ts = match &options.timestamp {
            Some(t) if is_timestamp(t) => t.clone(),
            Some(t) => {
                return Err(Error::invalid_input(format!(
                    "wtxt timestamp {t:?} is not YYYY-MM-DDTHH:MM:SSZ"
                )))
            }
            None => crate::util::clock::utc_string(crate::util::clock::stamp_secs()?),
        };
        let meta = Meta {
            schema: "weights/v1".into(),
            gen: format!("{gen:06}"),
            ts,
            build: token(
                opts.build.as_ref(),
                concat!("tessera-", env!("CARGO_PKG_VERSION")),
                "build",
            )?,
            host: token(opts.host.as_ref(), "cpu", "host")?,
            cuda: token(opts.cuda.as_ref(), "off", "cuda")?,
        };

        // Plan every array first: names, dtypes, chunkings, extensions.
        let mut infos: Vec<&TensorInfo> = infos.iter().collect();
        infos.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        if let Some(w) = infos.windows(2).find(|w| w[0].name == w[1].name) {
            return Err(Error::invalid_input(format!(
                "duplicate tensor name {:?}",
                w[0].name
            )));
        }
        let mut exts = vec!["crc32c", "line_parity"];
        if opts.hmac_key.is_some() {
            exts.push("arr_hmac");
        }
        let mut arrays = Vec::with_capacity(infos.len());
        for info in &infos {
            let name = &info.name;
            if info.layout != Layout::Dense {
                return Err(Error::unsupported(format!(
                    "tensor {name:?} is {}; WTXT stores dense arrays only",
                    info.layout
                ))
                .with_hint(crate::refusal::Hint::Densify));
            }
            if raw::EXT_DTYPES.contains(&info.dtype) {
                exts.push("ext_dtypes");
            } else if !raw::BASE_DTYPES.contains(&info.dtype) {
                return Err(Error::unsupported(format!(
                    "tensor {name:?}: WTXT cannot store {}",
                    info.dtype
                ))
                .with_hint(crate::refusal::Hint::Cast));
            }
            if !raw::is_spec_name(name) {
                if !raw::is_ext_name(name) {
                    return Err(Error::invalid_input(format!(
                        "tensor name {name:?} cannot be written to WTXT (printable ASCII without space, '=' or '\"')"
                    )));
                }
                exts.push("ext_names");
            }
            let bytes = info.dense_nbytes()?;
            if bytes > raw::MAX_ARRAY_BYTES {
                return Err(Error::invalid_input(format!(
                    "tensor {name:?}: {bytes} bytes, WTXT arrays hold at most {} (off= has 12 digits)",
                    raw::MAX_ARRAY_BYTES
                )));
            }
            let ch = chunking(info, bytes, opts.rows_per_chunk)?;
            if bytes.div_ceil(ch.chunk) > raw::MAX_CHUNKS {
                return Err(Error::invalid_input(format!(
                    "tensor {name:?}: more than {} chunks (ix= has 6 digits); raise rows_per_chunk",
                    raw::MAX_CHUNKS
                )));
            }
            if ch.idx.is_some() {
                exts.push("row_blocking");
                exts.push("delta_v2");
            }
            arrays.push(((*info).clone(), bytes, ch));
        }
        if let Some(audit) = &opts.audit {
            super::pipeline::check_audit(audit)?;
        }

        let sign_key = if opts.streaming { None } else { opts.sign_key };
        let mut head = format!("WTXT 1\n{}\n{}\n", meta.line(), cap_line(&exts));
        let root_pos = head.len() as u64;
        if opts.streaming {
            head.push_str(ROOT_PENDING);
            head.push('\n');
        } else {
            head.push_str(
                &Root {
                    sha256_all: [0; 32],
                    merkle_prev,
                    merkle_this: [0; 32],
                    fastxor: 0,
                }
                .line(),
            );
            head.push('\n');
            if sign_key.is_some() {
                head.push_str(
                    &Sign {
                        sig: [0; 64],
                        keyid: [0; 8],
                    }
                    .line(),
                );
                head.push('\n');
            }
        }
        let mut base = 0u64;
        let mut placed = std::collections::HashMap::with_capacity(arrays.len());
        for (info, bytes, chunking) in &arrays {
            let p = Placed {
                bytes: *bytes,
                base,
                chunking: *chunking,
            };
            placed.insert(info.name.clone(), p);
            base = base.saturating_add(*bytes);
        }
        let salts = match (&opts.fixed_salt, &opts.salt_seed) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid_input(
                    "wtxt: give fixed_salt (one salt for every array) or salt_seed (derived \
                     per generation and array), not both",
                ))
            }
            (Some(s), None) => Salts::Fixed(*s),
            (None, Some(seed)) => Salts::Derived {
                seed: seed.as_bytes().to_vec(),
                generation: gen,
            },
            (None, None) => Salts::Random,
        };
        let encoder = ArrayEncoder::new(placed, opts.hmac_key.clone(), salts);
        let start = out.stream_position()?;
        out.write_all(head.as_bytes())?;
        Ok(WtxtWriter {
            out,
            opts: opts.clone(),
            meta,
            exts,
            arrays,
            next: InOrder::new(),
            start,
            root_pos,
            head_len: head.len(),
            merkle_prev,
            sign_key,
            all: Sha256::new(),
            fastxor: 0,
            encoder,
        })
    }

    /// Tensor names in the order their bytes must be given (ASCII order).
    pub fn order(&self) -> impl Iterator<Item = &str> {
        self.arrays.iter().map(|a| a.0.name.as_str())
    }

    /// Encodes the next array (`name` must be the next in [`Self::order`]), hashed and
    /// encoded on every core.
    pub fn write_tensor(&mut self, name: &str, data: &[u8]) -> Result<()> {
        let (info, _, _) = self.next.next(&self.arrays, name, |a| &a.0.name)?;
        let view = TensorView::dense(info.clone(), std::borrow::Cow::Borrowed(data))?;
        let enc = self.encoder.encode(&view)?;
        self.write_encoded(name, &view, enc)
    }

    /// Writes the next array as its companion encoded it: the `arr` (and `idx`) line,
    /// the `ch` blocks (the rest of an array over one segment encoded here, a segment
    /// at a time on the pool) and `endarr`, while a thread of its own adds the array to
    /// `sha256_all` when it is over 1 MiB.
    fn write_encoded(
        &mut self,
        name: &str,
        view: &TensorView<'_>,
        enc: EncodedArray,
    ) -> Result<()> {
        let (_, bytes, ch) = self.next.next(&self.arrays, name, |a| &a.0.name)?;
        let (bytes, ch) = (*bytes, *ch);
        let data = view.data()?;
        if data.len() as u64 != bytes || enc.first > data.len() {
            return Err(Error::invalid_input(format!(
                "tensor {name:?}: {} bytes, {bytes} expected",
                data.len()
            )));
        }
        let EncodedArray {
            line,
            texts,
            xor,
            first,
        } = enc;
        let mut head = format!("{line}\n");
        if let Some(idx) = &ch.idx {
            head.push_str(&idx.line());
            head.push('\n');
        }
        let base = self.encoder.base(name);
        let (out, all, fastxor) = (&mut self.out, &mut self.all, &mut self.fastxor);
        *fastxor ^= xor;
        let write = |out: &mut W, fastxor: &mut u64| -> Result<Vec<Vec<u8>>> {
            out.write_all(head.as_bytes())?;
            for t in &texts {
                out.write_all(t)?;
            }
            let mut pos = first;
            while pos < data.len() {
                let end = (pos + super::pipeline::segment_len(ch.chunk)).min(data.len());
                let seg = super::pipeline::encode_segment(data, pos, end, ch.chunk, base, fastxor);
                for t in &seg {
                    out.write_all(t)?;
                }
                pos = end;
            }
            out.write_all(b"endarr\n")?;
            Ok(texts)
        };
        let texts = if data.len() >= 1 << 20 {
            std::thread::scope(|s| {
                let h = s.spawn(|| {
                    all.update(line.as_bytes());
                    all.update(data);
                });
                let written = write(out, fastxor);
                h.join().map_err(|_| {
                    Error::new(
                        crate::error::ErrorKind::Io,
                        "wtxt: a hashing thread panicked",
                    )
                })?;
                written
            })?
        } else {
            all.update(line.as_bytes());
            all.update(data);
            write(out, fastxor)?
        };
        self.encoder.reuse(texts);
        self.next.advance();
        Ok(())
    }

    /// Checks every array was written, writes the trailer and the root.
    pub fn finish(mut self) -> Result<Finished<W>> {
        (self.next).all_written("WTXT writer", &self.arrays, |a| &a.0.name)?;
        super::pipeline::end_arrays(&self.opts, &mut self.out)?;
        let sha256_all: [u8; 32] = self.all.finalize().into();
        let merkle_prev = self.merkle_prev;
        let merkle_this = header::merkle_this(&merkle_prev, &sha256_all, &self.meta);
        let root = Root {
            sha256_all,
            merkle_prev,
            merkle_this,
            fastxor: self.fastxor,
        };
        let mut out = self.out;
        let wsum = if self.opts.streaming {
            Some(Wsum::new(root, self.opts.sign_key.as_ref()).text())
        } else {
            let end = out.stream_position()?;
            let mut patched = format!(
                "WTXT 1\n{}\n{}\n{}\n",
                self.meta.line(),
                cap_line(&self.exts),
                root.line()
            );
            if let Some(seed) = &self.sign_key {
                let sig = Sign::create(seed, patched.as_bytes());
                patched.push_str(&sig.line());
                patched.push('\n');
            }
            debug_assert_eq!(patched.len(), self.head_len);
            out.seek(SeekFrom::Start(self.start + self.root_pos))?;
            out.write_all(&patched.as_bytes()[self.root_pos as usize..])?;
            out.seek(SeekFrom::Start(end))?;
            None
        };
        out.flush()?;
        Ok(Finished { out, wsum })
    }
}

impl<W: Write + Seek> StreamWriter for WtxtWriter<W> {
    type Encoded = EncodedArray;
    type Done = Finished<W>;
    fn order(&self) -> Vec<String> {
        self.order().map(str::to_string).collect()
    }
    fn read_ahead(&self) -> u64 {
        super::pipeline::STEP
    }
    fn encoder(&self) -> Option<Encoder<EncodedArray>> {
        let enc = self.encoder.clone();
        Some(Box::new(move |view: &TensorView<'_>| enc.encode(view)))
    }
    fn write_tensor(
        &mut self,
        name: &str,
        view: TensorView<'_>,
        enc: Option<EncodedArray>,
    ) -> Result<()> {
        let enc = match enc {
            Some(e) => e,
            None => self.encoder.encode(&view)?,
        };
        self.write_encoded(name, &view, enc)
    }
    fn finish(self) -> Result<Finished<W>> {
        self.finish()
    }
}

/// Writes `src` as WTXT.
pub fn write(
    src: &dyn TensorSource,
    out: &mut dyn WriteSeek,
    opts: &WriteOptions,
) -> Result<WriteReport> {
    // With streaming, the WSUM goes to `wsum`, else beside OUT: refuse before writing
    // anything when there is neither.
    let wo = WtxtOptions::from_options(opts)?;
    let wpath = match (wo.streaming, wo.wsum.clone(), &opts.path) {
        (true, Some(w), _) => Some(w),
        (true, None, Some(p)) => Some(super::wsum::wsum_path(p)),
        (true, None, None) => return Err(Error::invalid_input(
            "wtxt streaming writes OUT.wsum beside OUT: an output path (or wsum=PATH) is needed",
        )),
        (false, Some(_), _) => {
            return Err(Error::invalid_input(
                "option wsum: a WSUM is written only with streaming",
            ))
        }
        (false, None, _) => None,
    };
    let encrypt = !wo.age_recipients.is_empty() || wo.age_passphrase.is_some();
    let wsum = if encrypt {
        // The text is built in memory (the root is patched in place), encrypted there,
        // and only the armored bytes reach `out`: no plaintext touches the disk.
        let mut plain = std::io::Cursor::new(Vec::new());
        let w = WtxtWriter::new(&mut plain, src.tensor_infos(), opts)?;
        let wsum = crate::write::drive(src, w)?.wsum;
        out.write_all(&encrypt_armored(plain.get_ref(), &wo)?)?;
        wsum
    } else {
        let w = WtxtWriter::new(&mut *out, src.tensor_infos(), opts)?;
        crate::write::drive(src, w)?.wsum
    };
    let mut report = WriteReport::default();
    if let (Some(wpath), Some(text)) = (wpath, wsum) {
        // Committed with the main file by the caller (module docs: "Writing").
        report.side_files.push(crate::util::atomic::SideFile {
            path: wpath.clone(),
            bytes: text.into_bytes(),
        });
        report.extra_files.push(wpath);
    }
    Ok(report)
}

/// `plain` encrypted with age for the options' recipients or passphrase.
#[cfg(feature = "age")]
fn encrypt_armored(plain: &[u8], wo: &WtxtOptions) -> Result<Vec<u8>> {
    let pass = match &wo.age_passphrase {
        Some(p) => Some(
            String::from_utf8(p.clone())
                .map_err(|_| Error::invalid_input("option age_passphrase: not UTF-8 text"))?
                .trim_end_matches(['\n', '\r'])
                .to_string(),
        ),
        None => None,
    };
    super::crypt::encrypt(plain, &wo.age_recipients, pass.as_deref())
}

/// Without the `age` feature there is no encryption to do.
#[cfg(not(feature = "age"))]
fn encrypt_armored(_: &[u8], _: &WtxtOptions) -> Result<Vec<u8>> {
    Err(Error::unsupported(
        "this build of tessera has no age encryption (feature `age`)",
    ))
}

/// HMAC-SHA256(key, salt ‖ raw).
pub fn hmac(key: &[u8], salt: &[u8; 8], raw: &[u8]) -> [u8; 32] {
    use hmac::Mac;
    let mut m = hmac_start(key, salt);
    m.update(raw);
    m.finalize().into_bytes().into()
}

/// An HMAC-SHA256 state keyed with `key` that has taken `salt`: feed it the raw bytes
/// (in pieces), then finalize: [`fn@hmac`] incrementally.
pub fn hmac_start(key: &[u8], salt: &[u8; 8]) -> hmac::SimpleHmac<Sha256> {
    use hmac::{Mac, SimpleHmac};
    // HMAC takes keys of any length, so this never fails.
    let mut m = <SimpleHmac<Sha256> as Mac>::new_from_slice(key).unwrap_or_else(|_| {
        <SimpleHmac<Sha256> as hmac::digest::KeyInit>::new(&Default::default())
    });
    m.update(salt);
    m
}

/// XOR of `b` as little-endian u64 words starting at lane `off % 8` of the global stream.
pub fn xor_at(b: &[u8], off: u64) -> u64 {
    let mut w = b.chunks_exact(8);
    let mut acc = 0u64;
    for c in &mut w {
        let mut a = [0u8; 8];
        a.copy_from_slice(c);
        acc ^= u64::from_le_bytes(a);
    }
    let mut tail = [0u8; 8];
    tail[..w.remainder().len()].copy_from_slice(w.remainder());
    acc ^= u64::from_le_bytes(tail);
    acc.rotate_left(((off % 8) * 8) as u32)
}
