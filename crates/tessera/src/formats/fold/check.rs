//! `verify` and `repair` for FOLD.

use std::io::Write;

use rayon::prelude::*;

use super::ecc;
use super::read::{EccState, FoldFile, HashField};
use crate::error::{Error, Result};
use crate::metadata::{Map, Value};
use crate::util::pyjson::{dumps_map, DumpOptions};
use crate::verify::{progress_share, Status, VerifyOptions, VerifyReport};

/// `manifest_hash` of `metadata` as pyfolds computes it: SHA-256 (hex) of
/// `json.dumps(metadata minus "manifest_hash", sort_keys=True, separators=(",", ":"))`.
pub fn manifest_hash(metadata: &Map) -> String {
    let mut m = metadata.clone();
    m.remove("manifest_hash");
    crate::util::hex(&crate::util::sha256(
        dumps_map(&m, DumpOptions::CANONICAL).as_bytes(),
    ))
}

fn strip_sha(s: &str) -> &str {
    s.strip_prefix("sha256:").unwrap_or(s)
}

impl FoldFile<'_> {
    /// The stored `manifest_hash` against the recomputed one: `None` when absent.
    pub fn manifest_check(&self) -> Option<(String, String)> {
        let stored = self.raw_metadata.get("manifest_hash")?;
        let stored = match stored {
            Value::Str(s) => strip_sha(s).to_ascii_lowercase(),
            other => other.to_string(),
        };
        Some((stored, manifest_hash(&self.raw_metadata)))
    }

    /// Decompresses chunk `i`'s checked payload, bounded, and checks its size is
    /// `uncomp_len`; the bytes are not kept ([`crate::util::zstd_decoded_len`]: a
    /// reused buffer per thread, none the size of a chunk over 64 MiB).
    fn check_decompressed_len(&self, i: usize, comp: &[u8]) -> Result<()> {
        let e = &self.entries[i];
        let want = e.header.uncomp_len;
        let got = if e.header.flags == super::raw::FLAG_COMP_ZSTD {
            crate::util::zstd_decoded_len(comp, want)?
        } else {
            comp.len() as u64
        };
        if got > want {
            return Err(Error::malformed(format!(
                "decompresses to more than uncomp_len ({want} bytes)"
            )));
        }
        if got < want {
            return Err(Error::malformed(format!(
                "decompresses to {got} bytes, uncomp_len is {want}"
            )));
        }
        Ok(())
    }

    /// Every integrity layer, in the order of spec §6. Chunks are checked in parallel
    /// (each on one core: its CRC-32C, SHA-256, parity, then its decompression), their
    /// checks reported in file order. Progress: a chunk's tensors count half when its
    /// stored bytes are checked, the other half when it is decompressed.
    pub fn verify_report(&self, opts: &VerifyOptions) -> VerifyReport {
        let progress = self.chunk_progress();
        let mut r = VerifyReport {
            warnings: self.warnings.clone(),
            ..VerifyReport::default()
        };
        let hashes = self
            .raw_metadata
            .get("chunk_hashes")
            .and_then(Value::as_map);
        let per_chunk: Vec<(VerifyReport, bool)> = (0..self.entries.len())
            .into_par_iter()
            .map(|i| {
                let mut r = VerifyReport::default();
                let intact = self.verify_chunk(i, hashes, &mut r);
                opts.advance(progress_share(progress[i], 2, 0));
                (r, intact)
            })
            .collect();
        let mut intact = Vec::with_capacity(per_chunk.len());
        for (sub, ok) in per_chunk {
            r.checks.extend(sub.checks);
            intact.push(ok);
        }
        // Listed lazily at open, a STEN chunk failing its CRC-32C beyond repair is
        // reported here as the eager open (which reads every chunk) reports it.
        for (i, ok) in intact.iter().enumerate() {
            let e = &self.entries[i];
            if *ok || !self.lazy || &e.header.ctype != b"STEN" {
                continue;
            }
            if let Err(err) = self.checked(i, false) {
                r.warnings.push(format!(
                    "{}: STEN chunk whose tensors cannot be read (lost to a conversion): {err}",
                    e.subject()
                ));
            }
        }
        self.verify_metadata(hashes, &mut r);
        // §6.6: decompression bounded by uncomp_len, and the payload's own structure.
        let decoded: Vec<VerifyReport> = (0..self.entries.len())
            .into_par_iter()
            .map(|i| {
                let mut r = VerifyReport::default();
                if intact[i] {
                    self.verify_decoded(i, &mut r);
                }
                opts.advance(progress_share(progress[i], 2, 1));
                r
            })
            .collect();
        for sub in decoded {
            r.checks.extend(sub.checks);
        }
        r
    }

    /// The layers of chunk `i`'s stored bytes (CRC-32C, SHA-256, parity, its
    /// `chunk_hashes` entry) into `r`; true when its payload is intact (or repaired).
    /// A chunk that passes every check unrepaired is not hashed again when read.
    fn verify_chunk(&self, i: usize, hashes: Option<&Map>, r: &mut VerifyReport) -> bool {
        let e = &self.entries[i];
        {
            let subject = format!("chunk {:?}", e.name);
            if let Some(m) = &e.header_mismatch {
                r.failed(
                    &subject,
                    "chunk header",
                    format!(
                        "{m}; `tessera repair` rewrites it when the payload proves the index right"
                    ),
                );
            }
            let (comp, parity) = match self.stored(i) {
                Ok(s) => s,
                Err(err) => {
                    r.failed(&subject, "crc32c", err.to_string());
                    return false;
                }
            };
            let (comp, parity) = (&comp[..], &parity[..]);
            let crc_ok = crate::util::crc32c(comp) == e.header.crc32c;
            let sha_ok = match &e.sha256 {
                HashField::Sha256(h) => Some(crate::util::sha256(comp) == *h),
                HashField::Other(s) => {
                    r.push(
                        &subject,
                        "sha256",
                        Status::NotChecked,
                        Some(format!("hash {s:?} needs a key we do not have")),
                    );
                    None
                }
            };
            let mut data_ok = crc_ok && sha_ok != Some(false);
            // Set when ECC restored the payload (and with it the parity).
            let mut repaired = false;
            if data_ok {
                r.ok(&subject, "crc32c");
                if sha_ok.is_some() {
                    r.ok(&subject, "sha256");
                }
            } else {
                match self.checked(i, true) {
                    Ok(c) => {
                        let fix = c.repair.as_ref();
                        let detail = fix.map(|f| {
                            format!(
                                "restored by {}: {} bytes fixed in {} block{}; `tessera repair` writes the fixed file",
                                e.ecc_algo,
                                f.bytes_fixed,
                                f.blocks_fixed,
                                if f.blocks_fixed == 1 { "" } else { "s" }
                            )
                        });
                        r.push(
                            &subject,
                            "crc32c",
                            if crc_ok { Status::Ok } else { Status::Repaired },
                            if crc_ok { None } else { detail.clone() },
                        );
                        if sha_ok.is_some() {
                            r.push(
                                &subject,
                                "sha256",
                                if sha_ok == Some(true) {
                                    Status::Ok
                                } else {
                                    Status::Repaired
                                },
                                if sha_ok == Some(true) {
                                    None
                                } else {
                                    detail.clone()
                                },
                            );
                        }
                        r.push(&subject, "reed-solomon", Status::Repaired, detail);
                        repaired = fix.is_some();
                        data_ok = true;
                    }
                    Err(err) => {
                        let msg = err.message().to_string();
                        if !crc_ok {
                            r.failed(&subject, "crc32c", msg.clone());
                        } else {
                            r.ok(&subject, "crc32c");
                        }
                        if sha_ok == Some(false) {
                            r.failed(&subject, "sha256", msg);
                        } else if sha_ok.is_some() {
                            r.ok(&subject, "sha256");
                        }
                    }
                }
            }
            // The parity itself: does it still protect the payload?
            if data_ok && !repaired {
                if let EccState::Rs(n) = e.ecc {
                    match ecc::encode(comp, n) {
                        Ok(p) if p == parity => r.ok(&subject, "reed-solomon"),
                        Ok(_)
                            if ecc::pyfolds102_layout(comp, n).ok().as_deref() == Some(parity) =>
                        {
                            let why = format!(
                                "{}: the pyfolds 1.0.2 multi-block layout (its bug), unusable \
                                 for repair; the payload is intact; `tessera repair` rewrites it",
                                e.ecc_algo
                            );
                            r.push(&subject, "reed-solomon", Status::NotChecked, Some(why));
                        }
                        Ok(p) => {
                            let bad = p.iter().zip(parity).filter(|(a, b)| a != b).count();
                            let why = format!(
                                "{bad} parity bytes do not match the intact payload; \
                                 `tessera repair` rewrites them"
                            );
                            r.failed(&subject, "reed-solomon", why);
                        }
                        Err(err) => r.failed(&subject, "reed-solomon", err.to_string()),
                    }
                }
            }
            if let EccState::Unusable(why) = &e.ecc {
                r.push(
                    &subject,
                    "reed-solomon",
                    Status::NotChecked,
                    Some(why.clone()),
                );
            }
            let mut listed_ok = hashes.is_none();
            match hashes.map(|h| h.get(&e.name)) {
                Some(Some(want)) => {
                    let want = want.as_str().map(strip_sha).unwrap_or("");
                    let have = match &e.sha256 {
                        HashField::Sha256(h) => crate::util::hex(h),
                        HashField::Other(s) => strip_sha(s).to_string(),
                    };
                    listed_ok = want.eq_ignore_ascii_case(&have);
                    r.compare(&subject, "chunk_hashes", want, &have);
                }
                // The hierarchy covers every chunk: one it does not list was added or
                // renamed after the manifest was computed.
                Some(None) => r.failed(
                    &subject,
                    "chunk_hashes",
                    "not listed in metadata.chunk_hashes",
                ),
                None => {}
            }
            if data_ok && !repaired && sha_ok == Some(true) && listed_ok {
                self.mark_verified(i);
            }
            data_ok
        }
    }

    /// The index-level layers: `chunk_hashes` naming no chunk, `manifest_hash`.
    fn verify_metadata(&self, hashes: Option<&Map>, r: &mut VerifyReport) {
        if let Some(h) = hashes {
            for k in h.keys() {
                if !self.entries.iter().any(|e| e.name == k) {
                    r.failed(
                        "metadata",
                        "chunk_hashes",
                        format!("lists chunk {k:?}, which is not in the index"),
                    );
                }
            }
        }
        match self.manifest_check() {
            Some((stored, computed)) => r.compare("metadata", "manifest_hash", &stored, &computed),
            // Spec §4: the metadata includes chunk_hashes and manifest_hash; without
            // them nothing covers the metadata or the chunk list.
            None => r.failed(
                "metadata",
                "manifest_hash",
                "missing from the index metadata (spec §4 requires it)",
            ),
        }
        if hashes.is_none() {
            r.failed(
                "metadata",
                "chunk_hashes",
                "missing from the index metadata (spec §4 requires it)",
            );
        }
    }

    /// §6.6 for chunk `i`: decompression bounded by `uncomp_len`, and the payload's own
    /// structure.
    fn verify_decoded(&self, i: usize, r: &mut VerifyReport) {
        let e = &self.entries[i];
        {
            let subject = format!("chunk {:?}", e.name);
            let layer = if e.header.flags == super::raw::FLAG_COMP_ZSTD {
                "zstd"
            } else {
                "uncomp_len"
            };
            // A payload that just passed CRC-32C and SHA-256 unrepaired is not
            // checked again; any other is checked (and repaired) first.
            let stored = if self.is_verified(i) {
                self.stored_payload(i)
            } else {
                self.checked(i, false).map(|c| c.bytes)
            };
            match stored.and_then(|b| self.check_decompressed_len(i, &b)) {
                Ok(_) => r.ok(&subject, layer),
                Err(err) => r.failed(&subject, layer, err.message().to_string()),
            }
            // Listed lazily from bytes not yet checked: a chunk that did not pass
            // every check unrepaired is listed again from its checked bytes.
            let damaged = self.damaged.iter().any(|(d, _)| *d == i);
            if self.lazy && &e.header.ctype == b"STEN" && !self.is_verified(i) && !damaged {
                match self.listing_holds(i) {
                    Ok(true) => {}
                    Ok(false) => r.failed(
                        &subject,
                        "payload",
                        "its tensors were listed at open from damaged bytes (read before the chunk's checks) that its ECC has since restored: reopen the file to list them right, or `tessera repair` it",
                    ),
                    Err(err) => r.failed(&subject, "payload", err.message().to_string()),
                }
            }
            if let Some((_, err)) = self.damaged.iter().find(|(d, _)| *d == i) {
                // An array type we do not read is not damage.
                let status = if err.kind() == crate::error::ErrorKind::Unsupported {
                    Status::NotChecked
                } else {
                    Status::Failed
                };
                r.push(&subject, "payload", status, Some(err.to_string()));
            }
        }
    }

    /// Plans the repair of every chunk its parity can restore, and the rewrite of
    /// parity that no longer matches an intact payload (damaged, or pyfolds 1.0.2's
    /// multi-block layout). Chunks that cannot be restored are listed as
    /// `unrecoverable`; [`RepairPlan::is_complete`] is false then.
    pub fn plan_repair(&self) -> Result<RepairPlan> {
        let mut plan = RepairPlan::default();
        for (i, e) in self.entries.iter().enumerate() {
            let (comp, parity) = self.stored(i)?;
            let (comp, parity) = (&comp[..], &parity[..]);
            let mut action = ChunkRepair {
                name: e.name.clone(),
                status: "intact",
                bytes_fixed: 0,
                blocks_fixed: 0,
                detail: None,
            };
            let checked = self.checked(i, true).and_then(|c| {
                if e.header_mismatch.is_some() {
                    // Rewrite the header from the index only when the payload matches
                    // every index value: checksums above, decompressed size here.
                    self.check_decompressed_len(i, &c.bytes)?;
                    plan.patches.push((e.offset, e.header.to_bytes().to_vec()));
                }
                Ok(c)
            });
            match checked {
                Err(err) => {
                    action.status = "unrecoverable";
                    action.detail = Some(match &e.header_mismatch {
                        Some(m) => format!("{m}; {}", err.message()),
                        None => err.message().to_string(),
                    });
                }
                Ok(c) => {
                    if e.header_mismatch.is_some() {
                        action.status = "header rewritten";
                    }
                    if let Some(fix) = &c.repair {
                        action.status = "repaired";
                        action.bytes_fixed = fix.bytes_fixed;
                        action.blocks_fixed = fix.blocks_fixed;
                        let off = e.payload_off();
                        plan.patches.push((off, c.bytes.to_vec()));
                        plan.patches
                            .push((off + comp.len() as u64, fix.parity.clone()));
                    } else if let EccState::Rs(n) = e.ecc {
                        let p = ecc::encode(comp, n)?;
                        if p != parity {
                            action.status = "parity rewritten";
                            action.bytes_fixed =
                                p.iter().zip(parity).filter(|(a, b)| a != b).count() as u64;
                            plan.patches.push((e.payload_off() + comp.len() as u64, p));
                        }
                    }
                }
            }
            plan.chunks.push(action);
        }
        plan.patches.sort_by_key(|p| p.0);
        Ok(plan)
    }
}

/// What `repair` did to one chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkRepair {
    /// The chunk.
    pub name: String,
    /// `intact`, `repaired`, `parity rewritten`, `header rewritten` or `unrecoverable`.
    pub status: &'static str,
    /// Bytes changed.
    pub bytes_fixed: u64,
    /// Blocks changed (repairs only).
    pub blocks_fixed: u64,
    /// Why a chunk is unrecoverable.
    pub detail: Option<String>,
}

/// The byte changes that repair a file.
#[derive(Debug, Clone, Default)]
pub struct RepairPlan {
    /// Per chunk, in file order.
    pub chunks: Vec<ChunkRepair>,
    /// `(offset, bytes)` to overwrite, sorted, non-overlapping.
    pub patches: Vec<(u64, Vec<u8>)>,
}

impl RepairPlan {
    /// True when nothing needs changing.
    pub fn is_clean(&self) -> bool {
        self.patches.is_empty() && self.is_complete()
    }

    /// True when every chunk is intact or restored.
    pub fn is_complete(&self) -> bool {
        self.chunks.iter().all(|c| c.status != "unrecoverable")
    }

    /// Writes `data` with the patches applied.
    pub fn write_repaired(&self, data: &[u8], w: &mut dyn Write) -> Result<()> {
        let mut pos = 0usize;
        for (off, bytes) in &self.patches {
            let off = usize::try_from(*off).map_err(|_| Error::invalid_input("patch offset"))?;
            let end = off + bytes.len();
            if off < pos || end > data.len() {
                return Err(Error::invalid_input(
                    "repair patches overlap or run past the file",
                ));
            }
            w.write_all(&data[pos..off])?;
            w.write_all(bytes)?;
            pos = end;
        }
        w.write_all(&data[pos..])?;
        Ok(())
    }
}
