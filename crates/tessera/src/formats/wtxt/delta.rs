//! DELTA v2: the chunks that changed between two snapshots, and applying them.
//!
//! ```text
//! WTXT-DELTA 2 base_sha256_all=<hex256>
//! meta …            (the target's meta line)
//! cap ext=…         (the target's cap line)            -- ours, see below
//! root …            (the target's root line)           -- ours, see below
//! arr name=R[ hmac=<hex256> salt=<hex16>]
//! ch ix=000007 off=… len=… sha256=… crc32c=… b64=on width=76 lines=…
//! <base64 lines + parity>
//! endch
//! endarr
//! enddelta
//! ```
//!
//! An `arr` block is written for every array whose chunks or `hmac`/`salt` differ; the
//! `hmac=`/`salt=` fields are present when the target's are not zero. Carrying the
//! target's `cap` and `root` lines lets the applier rebuild the target byte for byte
//! (a `merkle_prev` and keyed HMACs cannot be recomputed) and check its result against
//! the target's `sha256_all`, `merkle_this` and `fastxor` before writing anything.
//! Both snapshots must have the same arrays (names, dtypes, shapes, `idx` lines,
//! chunking); otherwise the delta is refused with a request for a full snapshot. The
//! result is unsigned (re-sign with `tessera wtxt sign`).

use sha2::{Digest, Sha256};

use super::armor;
use super::header::{self, bad, check_text, fields, hex_n, Meta, Root};
use super::raw::{ArrLine, ChLine};
use super::read::{ArrayRef, WtxtFile};
use crate::error::{Error, Result};
use crate::util::hex;

fn final_root(f: &WtxtFile<'_>, what: &str) -> Result<Root> {
    f.final_root().ok_or_else(|| {
        Error::invalid_input(format!(
            "{what}: a WTXT-S without its WSUM cannot take part in a delta"
        ))
    })
}

fn full_snapshot(msg: String) -> Error {
    Error::unsupported(format!(
        "{msg}: DELTA v2 only replaces chunks; send a full snapshot"
    ))
}

fn block<'a>(f: &'a WtxtFile<'_>, a: &ArrayRef, ix: usize) -> &'a [u8] {
    let c = &a.chunks[ix];
    let start = f.bytes()[..c.text.start - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    &f.bytes()[start..c.text.end + 6]
}

/// The delta that turns `base` into `target`.
pub fn make(base: &WtxtFile<'_>, target: &WtxtFile<'_>) -> Result<Vec<u8>> {
    let broot = final_root(base, "base")?;
    let troot = final_root(target, "target")?;
    let names = |f: &WtxtFile<'_>| {
        f.arrays
            .iter()
            .map(|a| a.arr.name.clone())
            .collect::<Vec<_>>()
    };
    if names(base) != names(target) {
        return Err(full_snapshot("the snapshots hold different arrays".into()));
    }
    let mut out = format!(
        "WTXT-DELTA 2 base_sha256_all={}\n{}\n{}\n{}\n",
        hex(&broot.sha256_all),
        target.meta.line(),
        std::str::from_utf8(&target.bytes()[target.cap_line.clone()]).unwrap_or_default(),
        troot.line()
    )
    .into_bytes();
    for (a, b) in base.arrays.iter().zip(&target.arrays) {
        let name = &a.arr.name;
        let same_layout = a.arr.dtype == b.arr.dtype
            && a.arr.shape == b.arr.shape
            && a.idx == b.idx
            && a.chunks.len() == b.chunks.len()
            && a.chunks
                .iter()
                .zip(&b.chunks)
                .all(|(x, y)| x.ch.off == y.ch.off && x.ch.len == y.ch.len);
        if !same_layout {
            return Err(full_snapshot(format!(
                "array {name:?} changed dtype, shape or chunking"
            )));
        }
        let changed: Vec<usize> = (0..a.chunks.len())
            .filter(|&i| block(base, a, i) != block(target, b, i))
            .collect();
        let keyed = b.arr.hmac != [0; 32] || b.arr.salt != [0; 8];
        let auth_differs = (a.arr.hmac, a.arr.salt) != (b.arr.hmac, b.arr.salt);
        if changed.is_empty() && !auth_differs {
            continue;
        }
        out.extend_from_slice(format!("arr name={name}").as_bytes());
        if keyed {
            out.extend_from_slice(
                format!(" hmac={} salt={}", hex(&b.arr.hmac), hex(&b.arr.salt)).as_bytes(),
            );
        }
        out.push(b'\n');
        for i in changed {
            out.extend_from_slice(block(target, b, i));
        }
        out.extend_from_slice(b"endarr\n");
    }
    out.extend_from_slice(b"enddelta\n");
    Ok(out)
}

struct Lines<'a> {
    data: &'a [u8],
    pos: usize,
    n: usize,
}

impl<'a> Lines<'a> {
    fn next(&mut self) -> Result<(usize, &'a str)> {
        let rest = &self.data[self.pos.min(self.data.len())..];
        let end = rest.iter().position(|&b| b == b'\n').ok_or_else(|| {
            bad(
                self.n + 1,
                "delta: unexpected end (every line ends with LF)",
            )
        })?;
        self.pos += end + 1;
        self.n += 1;
        Ok((self.n, check_text(&rest[..end], self.n)?))
    }
}

struct DeltaArray {
    hmac: [u8; 32],
    salt: [u8; 8],
    chunks: Vec<(ChLine, Vec<u8>, std::ops::Range<usize>)>,
}

/// Applies `delta` to `base`; returns the target snapshot (unsigned).
pub fn apply(base: &WtxtFile<'_>, delta: &[u8]) -> Result<Vec<u8>> {
    let mut l = Lines {
        data: delta,
        pos: 0,
        n: 0,
    };
    let (n, first) = l.next()?;
    let f = fields(first, "WTXT-DELTA 2", &["base_sha256_all"], n)?;
    let want: [u8; 32] = hex_n(f[0], "base_sha256_all", n)?;
    let broot = final_root(base, "base")?;
    if want != broot.sha256_all {
        return Err(Error::invalid_input(format!(
            "this delta is for another base (base_sha256_all {}, the base has {})",
            hex(&want),
            hex(&broot.sha256_all)
        )));
    }
    let (n, meta_s) = l.next()?;
    let meta = Meta::parse(meta_s, n)?;
    let (n, cap_s) = l.next()?;
    header::parse_cap(cap_s, n)?;
    let (n, root_s) = l.next()?;
    let troot = Root::parse(root_s, n)?;
    let mut arrays: Vec<(String, DeltaArray)> = Vec::new();
    loop {
        let (n, s) = l.next()?;
        if s == "enddelta" {
            if l.pos != delta.len() {
                return Err(bad(n + 1, "delta: text after enddelta"));
            }
            break;
        }
        let (name, hmac, salt) = if s.contains(" hmac=") {
            let f = fields(s, "arr", &["name", "hmac", "salt"], n)?;
            (
                f[0].to_string(),
                hex_n(f[1], "hmac", n)?,
                hex_n(f[2], "salt", n)?,
            )
        } else {
            (
                fields(s, "arr", &["name"], n)?[0].to_string(),
                [0; 32],
                [0; 8],
            )
        };
        let a = base.array(&name).ok_or_else(|| {
            Error::invalid_input(format!("delta names array {name:?}, which the base lacks"))
        })?;
        let mut chunks = Vec::new();
        loop {
            let (m, s) = l.next()?;
            if s == "endarr" {
                break;
            }
            let ch = ChLine::parse(s, m)?;
            let bc = a
                .chunks
                .get(ch.ix as usize)
                .filter(|c| c.ch.off == ch.off && c.ch.len == ch.len);
            if bc.is_none() {
                return Err(bad(
                    m,
                    format!(
                        "delta chunk {:06} of {name:?} does not match the base's ix/off/len",
                        ch.ix
                    ),
                ));
            }
            let start = l.pos;
            let len = armor::text_len(ch.len) as usize;
            let body = delta
                .get(start..start + len)
                .ok_or_else(|| bad(m, "delta chunk cut short"))?;
            let mut raw = vec![0u8; ch.len as usize];
            armor::decode_chunk(body, &mut raw, &mut Vec::new())
                .map_err(|e| bad(m, format!("delta chunk {:06}: {e:?}", ch.ix)))?;
            if crate::util::crc32c(&raw) != ch.crc32c || crate::util::sha256(&raw) != ch.sha256 {
                return Err(Error::integrity(format!(
                    "delta chunk {:06} of {name:?} fails its crc32c/sha256",
                    ch.ix
                ))
                .at_subject(format!("line {m}")));
            }
            let block_start = delta[..start - 1]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |p| p + 1);
            l.pos = start + len;
            l.n += armor::lines_for(ch.len) as usize;
            let (k, e) = l.next()?;
            if e != "endch" {
                return Err(bad(k, "delta: expected endch"));
            }
            chunks.push((ch, raw, block_start..l.pos));
        }
        arrays.push((name, DeltaArray { hmac, salt, chunks }));
    }
    rebuild(base, delta, &meta, cap_s, &troot, &arrays)
}

fn rebuild(
    base: &WtxtFile<'_>,
    delta: &[u8],
    meta: &Meta,
    cap: &str,
    troot: &Root,
    arrays: &[(String, DeltaArray)],
) -> Result<Vec<u8>> {
    let mut body = Vec::with_capacity(base.bytes().len());
    let mut all = Sha256::new();
    let mut xor = 0u64;
    let mut pos = 0u64;
    for a in &base.arrays {
        let mut raw = super::decode_checked(base, a, false)?;
        let d = arrays
            .iter()
            .find(|(n, _)| *n == a.arr.name)
            .map(|(_, d)| d);
        let Some(d) = d else {
            all.update(base.arr_line_bytes(a));
            all.update(&raw);
            xor ^= super::write::xor_at(&raw, pos);
            pos += raw.len() as u64;
            body.extend_from_slice(&base.bytes()[a.block.clone()]);
            continue;
        };
        for (ch, r, _) in &d.chunks {
            raw[ch.off as usize..(ch.off + ch.len) as usize].copy_from_slice(r);
        }
        let line = ArrLine {
            sha256: crate::util::sha256(&raw),
            hmac: d.hmac,
            salt: d.salt,
            ..a.arr.clone()
        }
        .line();
        all.update(line.as_bytes());
        all.update(&raw);
        xor ^= super::write::xor_at(&raw, pos);
        pos += raw.len() as u64;
        body.extend_from_slice(line.as_bytes());
        body.push(b'\n');
        if let Some(r) = &a.idx_line {
            body.extend_from_slice(&base.bytes()[r.clone()]);
            body.push(b'\n');
        }
        for (i, _) in a.chunks.iter().enumerate() {
            match d.chunks.iter().find(|(ch, _, _)| ch.ix == i as u64) {
                Some((_, _, r)) => body.extend_from_slice(&delta[r.clone()]),
                None => body.extend_from_slice(block(base, a, i)),
            }
        }
        body.extend_from_slice(b"endarr\n");
    }
    let sha256_all: [u8; 32] = all.finalize().into();
    let this = header::merkle_this(&troot.merkle_prev, &sha256_all, meta);
    if sha256_all != troot.sha256_all || this != troot.merkle_this || xor != troot.fastxor {
        return Err(Error::integrity(
            "applying the delta does not give the target's root (sha256_all, merkle_this or fastxor differ)",
        ));
    }
    let mut out = format!("WTXT 1\n{}\n{cap}\n{}\n", meta.line(), troot.line()).into_bytes();
    out.extend_from_slice(&body);
    out.extend_from_slice(b"endwtxt\n");
    Ok(out)
}

/// Adds or replaces the `sign` line of a finalized WTXT (or signs a WSUM file).
pub fn sign(data: &[u8], seed: &[u8; 32]) -> Result<Vec<u8>> {
    if data.starts_with(b"WSUM 1") {
        let w = super::wsum::Wsum::parse(data)?;
        return Ok(super::wsum::Wsum::new(w.root, Some(seed))
            .text()
            .into_bytes());
    }
    let f = WtxtFile::parse(std::borrow::Cow::Borrowed(data), &Default::default())?;
    if f.root.is_none() {
        return Err(Error::invalid_input(
            "a WTXT-S is signed through its WSUM: sign FILE.wsum",
        ));
    }
    // The first four lines, with their LFs.
    let mut end = 0;
    for _ in 0..4 {
        end += data[end..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
    }
    let rest = match &f.sign {
        Some(_) => {
            end + data[end..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(0, |p| p + 1)
        }
        None => end,
    };
    let s = header::Sign::create(seed, &data[..end]);
    let mut out = data[..end].to_vec();
    out.extend_from_slice(s.line().as_bytes());
    out.push(b'\n');
    out.extend_from_slice(&data[rest..]);
    Ok(out)
}
