//! `verify`: every layer, reported per line, chunk, array and file.
//!
//! A pipeline of steps of about [`STEP`] raw bytes (small arrays grouped, a large one
//! cut into runs of its chunks): while every core decodes one step's chunks straight
//! into a step buffer (armor, parity, base64, crc32c, chunk SHA-256, fastxor, each
//! chunk one task), the previous step's bytes are hashed beside them: `sha256_all` in
//! file order (one task: it is one stream), each array's SHA-256 and HMAC (one task
//! per array run, states carried across steps). Memory: two step buffers and a hash
//! state per array, whatever the array sizes.

use std::ops::Range;

use hmac::Mac;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::chunk::{check_one, ChunkFault};
use super::header::{self, Root};
use super::read::WtxtFile;
use super::write::xor_at;
use crate::util::hex;
use crate::verify::{Status, VerifyOptions, VerifyReport};

/// Raw bytes per step of the pipeline.
const STEP: u64 = 8 << 20;

/// A run of one array's chunks within a step.
struct Seg {
    /// The array.
    k: usize,
    /// Its chunks in this run.
    chunks: Range<usize>,
    /// The run starts the array (its `arr` line goes into `sha256_all` first).
    first: bool,
    /// The run ends the array (its hashes are final after it).
    last: bool,
    /// Raw bytes of the run.
    len: usize,
}

/// The steps: runs of consecutive arrays' chunks, each step at least [`STEP`] bytes
/// (but the last); an array appears at most once per step.
fn plan(f: &WtxtFile<'_>) -> Vec<Vec<Seg>> {
    let mut steps = Vec::new();
    let mut cur: Vec<Seg> = Vec::new();
    let mut cur_bytes = 0u64;
    for (k, a) in f.arrays.iter().enumerate() {
        let n = a.chunks.len();
        if n == 0 {
            cur.push(Seg {
                k,
                chunks: 0..0,
                first: true,
                last: true,
                len: 0,
            });
            continue;
        }
        let (mut start, mut run) = (0, 0u64);
        for (j, c) in a.chunks.iter().enumerate() {
            run += c.ch.len;
            if cur_bytes + run >= STEP || j + 1 == n {
                cur.push(Seg {
                    k,
                    chunks: start..j + 1,
                    first: start == 0,
                    last: j + 1 == n,
                    len: run as usize,
                });
                cur_bytes += run;
                (start, run) = (j + 1, 0);
                if cur_bytes >= STEP {
                    steps.push(std::mem::take(&mut cur));
                    cur_bytes = 0;
                }
            }
        }
    }
    if !cur.is_empty() {
        steps.push(cur);
    }
    steps
}

/// One array's running hashes and faults.
struct ArrState {
    sha: Sha256,
    mac: Option<hmac::SimpleHmac<Sha256>>,
    faults: Vec<ChunkFault>,
}

fn array_checks(
    r: &mut VerifyReport,
    f: &WtxtFile<'_>,
    k: usize,
    faults: &[ChunkFault],
    sha: [u8; 32],
    mac: Option<[u8; 32]>,
    key: bool,
) {
    let a = &f.arrays[k];
    let name = &a.arr.name;
    let subj = format!("array {name:?} (line {})", a.line_no);
    if faults.is_empty() {
        if !a.chunks.is_empty() {
            r.push(
                subj.clone(),
                "chunks",
                Status::Ok,
                Some(format!(
                    "all {} chunks pass parity, base64, crc32c and sha256",
                    a.chunks.len()
                )),
            );
        }
    } else {
        for fault in faults {
            r.failed(fault.subject(name), fault.layer, fault.detail.clone());
        }
    }
    r.compare(subj.clone(), "sha256", &hex(&a.arr.sha256), &hex(&sha));
    match (a.arr.unauthenticated(), key, mac) {
        (true, _, _) => r.push(
            subj,
            "hmac",
            Status::Unauthenticated,
            Some("hmac=0 (no HMAC in the file)".into()),
        ),
        (false, false, _) | (false, true, None) => r.push(
            subj,
            "hmac",
            Status::Unauthenticated,
            Some("no HMAC key given (--hmac-key-file)".into()),
        ),
        (false, true, Some(m)) => {
            if m == a.arr.hmac {
                r.ok(subj, "hmac");
            } else {
                r.failed(
                    subj,
                    "hmac",
                    "HMAC-SHA256 does not match (wrong key or altered data)",
                );
            }
        }
    }
}

/// Runs every layer.
pub fn verify(f: &WtxtFile<'_>, opts: &VerifyOptions) -> VerifyReport {
    let mut r = VerifyReport::default();
    for (what, why) in &f.lost {
        r.failed(what.clone(), "structure", why.clone());
    }
    let data = f.bytes();
    let key = opts.hmac_key.as_deref();
    let mut all = Sha256::new();
    let mut xor = 0u64;
    let mut bases = Vec::with_capacity(f.arrays.len());
    let mut base = 0u64;
    for a in &f.arrays {
        bases.push(base);
        base = base.wrapping_add(a.arr.bytes);
    }
    let mut states: Vec<ArrState> = f
        .arrays
        .iter()
        .map(|a| ArrState {
            sha: Sha256::new(),
            mac: key
                .filter(|_| !a.arr.unauthenticated())
                .map(|k| super::write::hmac_start(k, &a.arr.salt)),
            faults: Vec::new(),
        })
        .collect();
    let steps = plan(f);
    let mut prev: Option<(usize, Vec<u8>)> = None;
    let mut spare: Vec<u8> = Vec::new();
    for s in 0..=steps.len() {
        let mut buf = std::mem::take(&mut spare);
        let mut results: Vec<(usize, Option<ChunkFault>, u64)> = Vec::new();
        rayon::scope(|sc| {
            if let Some((ps, pbuf)) = &prev {
                let segs = &steps[*ps];
                let all = &mut all;
                // sha256_all: one stream, in file order; spawned first, so it starts
                // at once on the other core.
                sc.spawn(move |_| {
                    let mut off = 0;
                    for g in segs {
                        if g.first {
                            all.update(f.arr_line_bytes(&f.arrays[g.k]));
                        }
                        all.update(&pbuf[off..off + g.len]);
                        off += g.len;
                    }
                });
                // Each array's run (one per array in a step, consecutive arrays).
                let k0 = segs.first().map_or(0, |g| g.k);
                let mut off = 0;
                for (g, st) in segs.iter().zip(states[k0..].iter_mut()) {
                    let bytes = &pbuf[off..off + g.len];
                    off += g.len;
                    sc.spawn(move |_| {
                        st.sha.update(bytes);
                        if let Some(m) = &mut st.mac {
                            m.update(bytes);
                        }
                    });
                }
            }
            if let Some(segs) = steps.get(s) {
                let total: usize = segs.iter().map(|g| g.len).sum();
                if buf.len() < total {
                    buf.resize(total, 0);
                }
                let mut jobs = Vec::new();
                let mut rest: &mut [u8] = &mut buf[..total];
                for g in segs {
                    for c in &f.arrays[g.k].chunks[g.chunks.clone()] {
                        let (out, tail) = rest.split_at_mut(c.ch.len as usize);
                        jobs.push((g.k, c, out));
                        rest = tail;
                    }
                }
                results = jobs
                    .into_par_iter()
                    .map_init(Vec::new, |scratch, (k, c, out)| {
                        let fault = check_one(data, c, out, scratch, true);
                        if fault
                            .as_ref()
                            .is_some_and(|f| !matches!(f.layer, "crc32c" | "sha256"))
                        {
                            // Not decoded (armor, parity, base64): zeros, as a fresh
                            // buffer would hold, not what the reused buffer held before.
                            // A chunk failing only a digest keeps its decoded bytes.
                            out.fill(0);
                        }
                        (k, fault, xor_at(out, bases[k].wrapping_add(c.ch.off)))
                    })
                    .collect();
                buf.truncate(total);
            }
        });
        for (k, fault, x) in results {
            xor ^= x;
            states[k].faults.extend(fault);
        }
        if let Some((ps, pbuf)) = prev.take() {
            for g in steps[ps].iter().filter(|g| g.last) {
                let st = &mut states[g.k];
                let sha: [u8; 32] = std::mem::take(&mut st.sha).finalize().into();
                let mac = st.mac.take().map(|m| m.finalize().into_bytes().into());
                let faults = std::mem::take(&mut st.faults);
                array_checks(&mut r, f, g.k, &faults, sha, mac, key.is_some());
            }
            spare = pbuf;
        }
        if s < steps.len() {
            prev = Some((s, buf));
        }
    }
    let sha256_all: [u8; 32] = all.finalize().into();
    file_checks(&mut r, f, opts, &sha256_all, xor);
    r.warnings.extend(f.warnings.iter().cloned());
    r
}

fn file_checks(
    r: &mut VerifyReport,
    f: &WtxtFile<'_>,
    opts: &VerifyOptions,
    all: &[u8; 32],
    xor: u64,
) {
    // A WTXT-S opened without its path: look for the WSUM beside VerifyOptions::path.
    let late = match (&f.root, &f.wsum, &opts.path) {
        (None, None, Some(p)) => super::read::read_wsum(p).ok(),
        _ => None,
    };
    let wsum = f.wsum.as_ref().or(late.as_ref());
    let root: Option<Root> = f.root.or(wsum.map(|w| w.root));
    if !f.header_ok {
        return;
    }
    let root_subject = if f.root.is_some() {
        "root (line 4)".to_string()
    } else {
        "wsum".to_string()
    };
    if f.root.is_none() {
        match (wsum, &f.wsum_problem) {
            (Some(_), _) => r.ok("wsum", "finalized"),
            (None, p) => r.failed(
                "root_pending (line 4)",
                "wsum",
                p.clone().unwrap_or_else(|| "unfinalized: no WSUM".into()),
            ),
        }
    }
    let Some(root) = root else {
        return;
    };
    if !f.lost.is_empty() {
        r.push(
            root_subject.clone(),
            "sha256_all",
            Status::NotChecked,
            Some("arrays were lost".into()),
        );
    } else {
        r.compare(
            root_subject.clone(),
            "sha256_all",
            &hex(&root.sha256_all),
            &hex(all),
        );
    }
    let m = header::merkle_this(&root.merkle_prev, &root.sha256_all, &f.meta);
    r.compare(
        root_subject.clone(),
        "merkle_this",
        &hex(&root.merkle_this),
        &hex(&m),
    );
    if f.lost.is_empty() {
        r.compare(
            root_subject,
            "fastxor",
            &format!("{:016x}", root.fastxor),
            &format!("{xor:016x}"),
        );
    }
    let signed: Option<(header::Sign, Vec<u8>)> = match (&f.sign, wsum) {
        (Some((s, len)), _) => Some((*s, f.bytes()[..*len].to_vec())),
        (None, Some(w)) => w.sign.map(|s| (s, w.unsigned_line().into_bytes())),
        _ => None,
    };
    let subject = if f.sign.is_some() {
        "sign (line 5)"
    } else {
        "wsum"
    };
    match (signed, opts.public_key) {
        (Some((s, msg)), Some(pk)) => match s.verify(&pk, &msg) {
            Ok(()) => r.ok(subject, "signature"),
            Err(e) => r.failed(subject, "signature", e),
        },
        (Some((s, _)), None) => r.push(
            subject,
            "signature",
            Status::Unauthenticated,
            Some(format!(
                "signed by keyid {}; no public key given (--public-key)",
                hex(&s.keyid)
            )),
        ),
        (None, Some(_)) => r.failed(
            "file",
            "signature",
            "a public key was given but the file is not signed",
        ),
        (None, None) => {}
    }
}
