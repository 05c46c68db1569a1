//! DELTA v2: the chunks that changed between two snapshots, and applying them.
//!
//! The conforming form (RESOLUTIONS item 15), what [`make`] writes by default:
//!
//! ```text
//! WTXT-DELTA 2 base_sha256_all=<hex256>
//! meta …            (the target's meta line)
//! arr name=R
//! ch ix=000007 off=… len=… sha256=… crc32c=… b64=on width=76 lines=…
//! <base64 lines + parity>
//! endch
//! endarr
//! enddelta
//! ```
//!
//! An `arr` block is written for every array with a changed chunk; each `ch` matches the
//! base chunk's `ix`, `off` and `len`. Applying it ([`apply`]) checks the base's
//! `sha256_all`, every chunk's crc32c and sha256, then rebuilds the snapshot: the base's
//! `cap` line, the delta's `meta` line, each changed array's `arr` line with its new
//! sha256, and a `root` line computed from the result with `merkle_prev` = the base's
//! `merkle_this` (the chain a delta moves along). The result is byte-identical to a
//! target written with `--prev BASE` whose arrays carry no HMAC; a changed array's HMAC
//! cannot be recomputed without the key, so it comes out unauthenticated (`hmac=0…0`)
//! and unchanged arrays keep theirs. The result is unsigned (re-sign with
//! `tessera wtxt sign`).
//!
//! **Extension** (`tessera wtxt delta --with-target-root`, [`make_with_target_root`]):
//! the target's `cap` and `root` lines follow the `meta` line, and an `arr` line carries
//! `hmac=`/`salt=` when the target's are not zero; an `arr` block is also written for an
//! array whose HMAC alone changed. With them the applier rebuilds any target byte for
//! byte (a `merkle_prev` of any chain, keyed HMACs) and checks its result against the
//! target's `sha256_all`, `merkle_this` and `fastxor` before writing anything. A
//! conforming reader rejects these lines; [`apply`] accepts both forms.
//!
//! Both snapshots must have the same arrays (names, dtypes, shapes, `idx` lines,
//! chunking); otherwise the delta is refused with a request for a full snapshot.

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

/// The conforming delta (RESOLUTIONS item 15) that turns `base` into `target`.
pub fn make(base: &WtxtFile<'_>, target: &WtxtFile<'_>) -> Result<Vec<u8>> {
    make_form(base, target, false)
}

/// The extended delta: the target's `cap` and `root` lines and arrays' `hmac`/`salt`
/// ride along, so any target is rebuilt byte for byte and checked against its root.
/// Not readable by a conforming DELTA v2 reader.
pub fn make_with_target_root(base: &WtxtFile<'_>, target: &WtxtFile<'_>) -> Result<Vec<u8>> {
    make_form(base, target, true)
}

fn make_form(base: &WtxtFile<'_>, target: &WtxtFile<'_>, extended: bool) -> Result<Vec<u8>> {
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
        "WTXT-DELTA 2 base_sha256_all={}\n{}\n",
        hex(&broot.sha256_all),
        target.meta.line(),
    )
    .into_bytes();
    if extended {
        out.extend_from_slice(
            format!(
                "{}\n{}\n",
                std::str::from_utf8(&target.bytes()[target.cap_line.clone()]).unwrap_or_default(),
                troot.line()
            )
            .as_bytes(),
        );
    }
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
        if changed.is_empty() && !(extended && auth_differs) {
            continue;
        }
        out.extend_from_slice(format!("arr name={name}").as_bytes());
        if extended && keyed {
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
        if rest.is_empty() {
            return Err(bad(
                self.n + 1,
                "delta: the file ends before its enddelta line",
            ));
        }
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
    // The extension's target `cap` and `root` lines, when present.
    let save = (l.pos, l.n);
    let (n, next) = l.next()?;
    let target = if next.starts_with("cap ") {
        header::parse_cap(next, n)?;
        let (n, root_s) = l.next()?;
        Some((next, Root::parse(root_s, n)?))
    } else {
        (l.pos, l.n) = save;
        None
    };
    let mut arrays: Vec<(String, DeltaArray)> = Vec::new();
    loop {
        let (n, s) = l.next()?;
        if s == "enddelta" {
            if l.pos != delta.len() {
                return Err(bad(n + 1, "delta: text after enddelta"));
            }
            break;
        }
        let (name, hmac, salt) = if s.contains(" hmac=") && target.is_some() {
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
            armor::decode_chunk(body, &mut raw, &mut Vec::new()).map_err(|e| {
                let (k, what) = match e {
                    armor::ArmorFault::Line(k, w) => (k as usize, w),
                    armor::ArmorFault::Parity(k, got, want) => (
                        k as usize,
                        format!(
                            "parity nibble {} should be {}",
                            got.escape_ascii(),
                            (want as char).escape_default()
                        ),
                    ),
                    armor::ArmorFault::Base64(k) => {
                        (k.unwrap_or(0) as usize, "bad base64".to_string())
                    }
                };
                bad(
                    m + 1 + k,
                    format!("delta chunk {:06} of {name:?}: {what}", ch.ix),
                )
            })?;
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
    if arrays
        .iter()
        .any(|(n, _)| arrays.iter().filter(|(m, _)| m == n).count() > 1)
    {
        return Err(Error::malformed("delta: an array has two arr blocks"));
    }
    rebuild(base, delta, &meta, target, broot, &arrays)
}

fn rebuild(
    base: &WtxtFile<'_>,
    delta: &[u8],
    meta: &Meta,
    target: Option<(&str, Root)>,
    broot: Root,
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
    let (cap, troot) = match target {
        Some((cap, troot)) => {
            let this = header::merkle_this(&troot.merkle_prev, &sha256_all, meta);
            if sha256_all != troot.sha256_all || this != troot.merkle_this || xor != troot.fastxor {
                return Err(Error::integrity(
                    "applying the delta does not give the target's root (sha256_all, merkle_this or fastxor differ)",
                ));
            }
            (cap.to_string(), troot)
        }
        None => {
            // Conforming form: the root is the result's own, chained from the base.
            let merkle_prev = broot.merkle_this;
            let root = Root {
                sha256_all,
                merkle_prev,
                merkle_this: header::merkle_this(&merkle_prev, &sha256_all, meta),
                fastxor: xor,
            };
            let cap = std::str::from_utf8(&base.bytes()[base.cap_line.clone()])
                .map_err(|_| Error::malformed("base: cap line is not UTF-8"))?
                .to_string();
            (cap, root)
        }
    };
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
