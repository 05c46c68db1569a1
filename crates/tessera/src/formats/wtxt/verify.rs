//! `verify`: every layer, reported per line, chunk, array and file.
//!
//! Arrays are decoded one after the other, each with its chunks in parallel; the
//! previous array's SHA-256 (and HMAC) and its share of `sha256_all` run beside the
//! next array's decoding, so both cores stay busy.

use sha2::{Digest, Sha256};

use super::chunk::{decode_array_into, Decoded};
use super::header::{self, Root};
use super::read::WtxtFile;
use crate::util::hex;
use crate::verify::{Status, VerifyOptions, VerifyReport};

fn array_checks(
    r: &mut VerifyReport,
    f: &WtxtFile<'_>,
    k: usize,
    d: &Decoded,
    sha: [u8; 32],
    mac: Option<[u8; 32]>,
    key: bool,
) {
    let a = &f.arrays[k];
    let name = &a.arr.name;
    let subj = format!("array {name:?} (line {})", a.line_no);
    if d.faults.is_empty() {
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
        for fault in &d.faults {
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
            Some("no HMAC key given".into()),
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
    let (mut r, sha256_all, xor) = check_arrays(f, opts);
    file_checks(&mut r, f, opts, &sha256_all, xor);
    r.warnings.extend(f.warnings.iter().cloned());
    r
}

/// Checks every array (chunks, SHA-256, HMAC) and computes what the root covers: the
/// report, `sha256_all` and `fastxor`.
pub(super) fn check_arrays(
    f: &WtxtFile<'_>,
    opts: &VerifyOptions,
) -> (VerifyReport, [u8; 32], u64) {
    let mut r = VerifyReport::default();
    for (what, why) in &f.lost {
        r.failed(what.clone(), "structure", why.clone());
    }
    let data = f.bytes();
    let key = opts.hmac_key.as_deref();
    let mut all = Sha256::new();
    let mut xor = 0u64;
    let mut base = 0u64;
    let mut prev: Option<(usize, Decoded)> = None;
    let mut spare: Option<Vec<u8>> = None;
    let n = f.arrays.len();
    for k in 0..=n {
        let mut sha = [0u8; 32];
        let mut mac = None;
        let mut cur = None;
        rayon::scope(|s| {
            if let Some((pk, d)) = &prev {
                let a = &f.arrays[*pk];
                s.spawn(|_| sha = crate::util::sha256(&d.buf));
                if let Some(key) = key.filter(|_| !a.arr.unauthenticated()) {
                    s.spawn(|_| mac = Some(super::write::hmac(key, &a.arr.salt, &d.buf)));
                }
                all.update(f.arr_line_bytes(a));
                all.update(&d.buf);
            }
            if k < n {
                let buf = spare.take().unwrap_or_default();
                cur = Some(decode_array_into(data, &f.arrays[k], true, base, buf));
            }
        });
        if let Some((pk, d)) = prev.take() {
            array_checks(&mut r, f, pk, &d, sha, mac, key.is_some());
            spare = Some(d.buf);
            let a = &f.arrays[pk].arr;
            opts.advance(crate::tensor::dense_nbytes(a.dtype, &a.shape).unwrap_or(0));
        }
        if let Some(d) = cur {
            xor ^= d.xor;
            base += f.arrays[k].arr.bytes;
            prev = Some((k, d));
        }
    }
    let sha256_all: [u8; 32] = all.finalize().into();
    (r, sha256_all, xor)
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
                "signed by keyid {}; no public key given",
                hex(&s.keyid)
            )),
        ),
        (None, Some(_)) => r.failed(
            "file",
            "signature",
            format!(
                "{}: a public key was given but the file is not signed",
                crate::verify::NO_SIGNATURE
            ),
        ),
        (None, None) => {}
    }
}
