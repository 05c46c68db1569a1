//! Reed-Solomon parity as pyfolds stores it (RESOLUTIONS, ORIGINALS §1.6).
//!
//! The code is `reedsolo`'s default `RSCodec(nsym)`: GF(2^8), primitive polynomial
//! 0x11d, generator 2, first consecutive root 0, systematic (parity appended). The
//! stored payload is cut into blocks of `255 - nsym` bytes (the last one shorter); each
//! block gets `nsym` parity bytes; the parity of all blocks is concatenated after the
//! payload. Up to `nsym / 2` wrong bytes per block (payload or parity) are corrected.
//!
//! The `reed-solomon` crate computes exactly reedsolo's parity (the unit tests check the
//! known answers from `shared/interop-samples/MANIFEST.md`) and does the decoding (error
//! correction). Its encoder runs at about 40 MB/s, which made writing a protected 1 GiB
//! model take half a minute, so parity is computed here by a table-driven LFSR over the
//! same generator polynomial (a 16-byte register is one `u128`): the same bytes — the
//! tests compare it with the crate for every `nsym` on random data — many times faster.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{Error, Result};

/// Parses an index `ecc_algo`: `"none"` → `None`, `"rs(N)"` → `Some(N)` (1 ≤ N ≤ 254).
pub fn parse_algo(s: &str) -> Result<Option<u8>> {
    if s == "none" {
        return Ok(None);
    }
    let n = s
        .strip_prefix("rs(")
        .and_then(|r| r.strip_suffix(')'))
        .and_then(|n| n.parse::<u8>().ok())
        .filter(|n| (1..=254).contains(n));
    match n {
        Some(n) => Ok(Some(n)),
        None => Err(Error::unsupported(format!(
            "unknown ecc_algo {s:?} (known: \"none\", \"rs(N)\" with 1 <= N <= 254)"
        ))),
    }
}

/// The `ecc_algo` string for `nsym` parity bytes.
pub fn algo_name(nsym: Option<u8>) -> String {
    match nsym {
        Some(n) => format!("rs({n})"),
        None => "none".into(),
    }
}

/// Data bytes per block.
pub fn block_len(nsym: u8) -> usize {
    255 - nsym as usize
}

/// `ecc_len` for a payload of `comp_len` bytes: `ceil(comp_len / (255 - nsym)) * nsym`.
pub fn ecc_len(comp_len: u64, nsym: u8) -> u64 {
    comp_len.div_ceil(block_len(nsym) as u64) * u64::from(nsym)
}

/// GF(2^8) with reedsolo's primitive polynomial 0x11d.
fn gf_tables() -> ([u8; 512], [u8; 256]) {
    let mut exp = [0u8; 512];
    let mut log = [0u8; 256];
    let mut x: u16 = 1;
    for (i, e) in exp.iter_mut().take(255).enumerate() {
        *e = x as u8;
        log[x as usize] = i as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= 0x11d;
        }
    }
    for i in 255..512 {
        exp[i] = exp[i - 255];
    }
    (exp, log)
}

/// Parity of one block (at most 255 - nsym bytes) by a table-driven LFSR.
struct BlockEncoder {
    nsym: usize,
    /// `rows[fb]` = fb × g(x) without its leading 1, packed big-endian in a u128
    /// (nsym <= 16).
    rows128: Vec<u128>,
    /// The same as bytes, `nsym` per feedback value (any nsym).
    rows: Vec<u8>,
}

impl BlockEncoder {
    fn new(nsym: usize) -> BlockEncoder {
        let (exp, log) = gf_tables();
        let mul = |a: u8, b: u8| -> u8 {
            if a == 0 || b == 0 {
                0
            } else {
                exp[log[a as usize] as usize + log[b as usize] as usize]
            }
        };
        // g(x) = prod_{i < nsym} (x - 2^i), highest degree first, as reedsolo builds it.
        let mut g = vec![1u8];
        for &root in exp.iter().take(nsym) {
            let mut next = vec![0u8; g.len() + 1];
            for (j, &c) in g.iter().enumerate() {
                next[j] ^= c;
                next[j + 1] ^= mul(c, root);
            }
            g = next;
        }
        let mut rows = vec![0u8; 256 * nsym];
        let mut rows128 = Vec::new();
        for fb in 0..256usize {
            for j in 0..nsym {
                rows[fb * nsym + j] = mul(fb as u8, g[j + 1]);
            }
        }
        if nsym <= 16 {
            rows128 = (0..256)
                .map(|fb| {
                    let mut b = [0u8; 16];
                    b[..nsym].copy_from_slice(&rows[fb * nsym..(fb + 1) * nsym]);
                    u128::from_be_bytes(b)
                })
                .collect();
        }
        BlockEncoder {
            nsym,
            rows128,
            rows,
        }
    }

    /// Parity of four equal-length blocks at once: four independent LFSR chains keep
    /// the CPU busy while each waits on its table lookup.
    fn parity4_into(&self, b: [&[u8]; 4], out: &mut Vec<u8>) {
        let n = self.nsym;
        if n > 16 || b.iter().any(|x| x.len() != b[0].len()) {
            for x in b {
                self.parity_into(x, out);
            }
            return;
        }
        let mut r = [0u128; 4];
        for i in 0..b[0].len() {
            for (reg, blk) in r.iter_mut().zip(&b) {
                let fb = blk[i] ^ (*reg >> 120) as u8;
                *reg = (*reg << 8) ^ self.rows128[fb as usize];
            }
        }
        for reg in r {
            out.extend_from_slice(&reg.to_be_bytes()[..n]);
        }
    }

    fn parity_into(&self, block: &[u8], out: &mut Vec<u8>) {
        let n = self.nsym;
        if n <= 16 {
            let mut reg: u128 = 0;
            for &b in block {
                let fb = b ^ (reg >> 120) as u8;
                reg = (reg << 8) ^ self.rows128[fb as usize];
            }
            out.extend_from_slice(&reg.to_be_bytes()[..n]);
        } else {
            let mut reg = vec![0u8; n];
            for &b in block {
                let fb = (b ^ reg[0]) as usize;
                reg.copy_within(1.., 0);
                reg[n - 1] = 0;
                for (r, t) in reg.iter_mut().zip(&self.rows[fb * n..(fb + 1) * n]) {
                    *r ^= t;
                }
            }
            out.extend_from_slice(&reg);
        }
    }
}

/// A streaming parity encoder: feed the payload in pieces, get the concatenated parity.
pub struct Encoder {
    nsym: u8,
    rs: BlockEncoder,
    pending: Vec<u8>,
    parity: Vec<u8>,
}

impl Encoder {
    /// An encoder for `nsym` parity bytes per block (1..=254).
    pub fn new(nsym: u8) -> Result<Encoder> {
        if !(1..=254).contains(&nsym) {
            return Err(Error::invalid_input(format!(
                "Reed-Solomon parity must be 1..=254 bytes per block, not {nsym}"
            )));
        }
        Ok(Encoder {
            nsym,
            rs: BlockEncoder::new(nsym as usize),
            pending: Vec::with_capacity(block_len(nsym)),
            parity: Vec::new(),
        })
    }

    /// Feeds payload bytes.
    pub fn update(&mut self, mut data: &[u8]) {
        let k = block_len(self.nsym);
        if !self.pending.is_empty() {
            let take = (k - self.pending.len()).min(data.len());
            self.pending.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.pending.len() == k {
                self.rs.parity_into(&self.pending, &mut self.parity);
                self.pending.clear();
            }
        }
        let mut quads = data.chunks_exact(4 * k);
        for q in &mut quads {
            let (a, rest) = q.split_at(k);
            let (b, rest) = rest.split_at(k);
            let (c, d) = rest.split_at(k);
            self.rs.parity4_into([a, b, c, d], &mut self.parity);
        }
        let mut blocks = quads.remainder().chunks_exact(k);
        for b in &mut blocks {
            self.rs.parity_into(b, &mut self.parity);
        }
        self.pending.extend_from_slice(blocks.remainder());
    }

    /// The parity of everything fed (empty for an empty payload).
    pub fn finish(mut self) -> Vec<u8> {
        if !self.pending.is_empty() {
            self.rs.parity_into(&self.pending, &mut self.parity);
        }
        self.parity
    }
}

/// The block-wise parity of `data`.
pub fn encode(data: &[u8], nsym: u8) -> Result<Vec<u8>> {
    let mut e = Encoder::new(nsym)?;
    e.update(data);
    Ok(e.finish())
}

/// What pyfolds 1.0.2 stored for a payload (its bug, ORIGINALS §1.6): the tail of
/// reedsolo's interleaved `[d0 p0][d1 p1]…` output. Equal to [`encode`] for one block.
pub fn pyfolds102_layout(data: &[u8], nsym: u8) -> Result<Vec<u8>> {
    let k = block_len(nsym);
    let rs = BlockEncoder::new(nsym as usize);
    let mut all = Vec::with_capacity(data.len() + ecc_len(data.len() as u64, nsym) as usize);
    for b in data.chunks(k) {
        all.extend_from_slice(b);
        rs.parity_into(b, &mut all);
    }
    let n = all.len() - data.len();
    Ok(all.split_off(all.len() - n))
}

/// The outcome of a successful correction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corrected {
    /// The corrected payload.
    pub data: Vec<u8>,
    /// The corrected parity.
    pub parity: Vec<u8>,
    /// Bytes changed (payload and parity).
    pub bytes_fixed: u64,
    /// Blocks that needed a change.
    pub blocks_fixed: u64,
}

/// Corrects `data` with its block-wise `parity`. Fails with an `Integrity` error naming
/// the first block with more errors than `nsym / 2`.
pub fn correct(data: &[u8], parity: &[u8], nsym: u8) -> Result<Corrected> {
    if !(1..=254).contains(&nsym) {
        return Err(Error::invalid_input(format!("bad parity size {nsym}")));
    }
    let k = block_len(nsym);
    let n = nsym as usize;
    if parity.len() as u64 != ecc_len(data.len() as u64, nsym) {
        return Err(Error::integrity(format!(
            "{} parity bytes, rs({nsym}) over {} bytes needs {}",
            parity.len(),
            data.len(),
            ecc_len(data.len() as u64, nsym)
        )));
    }
    let dec = reed_solomon::Decoder::new(n);
    let mut out = Corrected {
        data: Vec::with_capacity(data.len()),
        parity: Vec::with_capacity(parity.len()),
        bytes_fixed: 0,
        blocks_fixed: 0,
    };
    let mut msg = Vec::with_capacity(255);
    for (i, (block, par)) in data.chunks(k).zip(parity.chunks(n)).enumerate() {
        msg.clear();
        msg.extend_from_slice(block);
        msg.extend_from_slice(par);
        // The decoder indexes fixed-size arrays by positions it computes; a malformed
        // codeword must be an error, never a crash, so a panic inside is caught.
        let fixed = catch_unwind(AssertUnwindSafe(|| {
            dec.correct_err_count(&msg, None)
                .map(|(buf, _)| buf.to_vec())
        }));
        let word = match fixed {
            Ok(Ok(w)) if w.len() == msg.len() => w,
            _ => {
                return Err(Error::integrity(format!(
                    "rs({nsym}) block {i} has more than {} damaged bytes: cannot repair",
                    n / 2
                )))
            }
        };
        let changed = word.iter().zip(&msg).filter(|(a, b)| a != b).count() as u64;
        if changed > 0 {
            out.bytes_fixed += changed;
            out.blocks_fixed += 1;
        }
        out.data.extend_from_slice(&word[..block.len()]);
        out.parity.extend_from_slice(&word[block.len()..]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::hex;

    #[test]
    fn parity_matches_reedsolo_known_answers() {
        // shared/interop-samples/MANIFEST.md, computed with reedsolo.
        assert_eq!(
            hex(&encode(b"hello", 16).unwrap()),
            "e81fbd0f8b4a8c73533b819fc7a85555"
        );
        assert_eq!(
            hex(&encode(b"hello", 32).unwrap()),
            "83a1159e8dd8f11ce833c6d0ae8fa5de089988b583c783a86ffb644f24fddb9a"
        );
        let r: Vec<u8> = (0..239u8).collect();
        assert_eq!(
            hex(&encode(&r, 16).unwrap()),
            "3d4a1daccc4a4caa43488e7b4f6559c4"
        );
        assert_eq!(encode(b"", 16).unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn table_encoder_equals_the_reed_solomon_crate_for_every_nsym() {
        let data: Vec<u8> = (0..255u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for nsym in 1..=254u8 {
            let k = block_len(nsym);
            let crate_parity = reed_solomon::Encoder::new(nsym as usize)
                .encode(&data[..k])
                .ecc()
                .to_vec();
            assert_eq!(
                encode(&data[..k], nsym).unwrap(),
                crate_parity,
                "nsym {nsym}"
            );
            let short = &data[..k.min(7)];
            let crate_short = reed_solomon::Encoder::new(nsym as usize)
                .encode(short)
                .ecc()
                .to_vec();
            assert_eq!(
                encode(short, nsym).unwrap(),
                crate_short,
                "nsym {nsym} short"
            );
        }
    }

    #[test]
    fn streaming_equals_one_shot_and_layout_is_blockwise() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 256) as u8).collect();
        let whole = encode(&data, 16).unwrap();
        assert_eq!(whole.len() as u64, ecc_len(1000, 16));
        assert_eq!(&whole[..16], encode(&data[..239], 16).unwrap().as_slice());
        assert_eq!(&whole[64..], encode(&data[956..], 16).unwrap().as_slice());
        let mut e = Encoder::new(16).unwrap();
        for piece in data.chunks(37) {
            e.update(piece);
        }
        assert_eq!(e.finish(), whole);
        // One block: the 1.0.2 layout is the same; several: it differs.
        assert_eq!(
            pyfolds102_layout(&data[..200], 16).unwrap(),
            encode(&data[..200], 16).unwrap()
        );
        assert_ne!(pyfolds102_layout(&data, 16).unwrap(), whole);
    }

    #[test]
    fn corrects_up_to_half_nsym_per_block_and_refuses_more() {
        let data: Vec<u8> = (0..2000u32).map(|i| (i * 31 % 251) as u8).collect();
        let parity = encode(&data, 16).unwrap();
        let mut bad = data.clone();
        let mut bad_parity = parity.clone();
        // 8 errors in each block: 7 in the payload, one in its parity.
        for b in 0..data.len().div_ceil(239) {
            for j in 0..7 {
                let i = b * 239 + j * 13;
                if i < bad.len() {
                    bad[i] ^= 0x5a;
                }
            }
            bad_parity[b * 16 + 3] ^= 0xff;
        }
        let c = correct(&bad, &bad_parity, 16).unwrap();
        assert_eq!(c.data, data);
        assert_eq!(c.parity, parity);
        assert_eq!(c.blocks_fixed, 9);
        assert_eq!(c.bytes_fixed, 9 * 8);
        // 9 errors in block 2: beyond nsym/2.
        let mut worse = data.clone();
        for j in 0..9 {
            worse[2 * 239 + j] ^= 1;
        }
        let e = correct(&worse, &parity, 16).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Integrity);
        assert!(e.to_string().contains("block 2"), "{e}");
    }
}
#[cfg(test)]
mod random_damage {
    /// Random damage: up to nsym/2 wrong bytes anywhere in a block are always corrected;
    /// more give an error (or, rarely, another codeword, which the CRC/SHA re-check
    /// after repair rejects) and never a crash.
    #[test]
    fn corrects_all_within_capacity() {
        let data: Vec<u8> = (0..239u32).map(|i| (i * 13 % 256) as u8).collect();
        let parity = super::encode(&data, 16).unwrap();
        let mut x: u32 = 12345;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        let mut beyond_failed = 0;
        for round in 0..3000 {
            let mut d = data.clone();
            let mut p = parity.clone();
            let n = (round % 40) as usize;
            let mut hit = std::collections::BTreeSet::new();
            while hit.len() < n {
                hit.insert((rnd() % 255) as usize);
            }
            for &pos in &hit {
                let v = rnd() as u8 | 1;
                if pos < 239 {
                    d[pos] ^= v
                } else {
                    p[pos - 239] ^= v
                }
            }
            match super::correct(&d, &p, 16) {
                Ok(c) if n <= 8 => {
                    assert_eq!(c.data, data, "{n} errors");
                    assert_eq!(c.bytes_fixed, n as u64);
                }
                Ok(_) => {}
                Err(e) => {
                    assert!(n > 8, "{n} errors not corrected: {e}");
                    beyond_failed += 1;
                }
            }
        }
        assert!(beyond_failed > 2000);
    }
}
