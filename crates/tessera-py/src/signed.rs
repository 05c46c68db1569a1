//! `tessera.open(path, signature=…, public_key=…)`: a file held to a signed manifest.
//!
//! At open, the manifest's signature is checked with the trusted key and the file's
//! tensors against its entries (the same names, dtypes, shapes and layouts: a renamed,
//! added or missing tensor refuses the open). Each tensor's bytes are then hashed
//! (`tessera-id/1`) the first time it is read, and a tensor whose digest differs from
//! the signed one is refused with an `IntegrityError` instead of being handed out; a
//! tensor that passed is not hashed again.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use tessera::identity::{tensor_digest, TensorId};
use tessera::signing::key::PublicKey;
use tessera::signing::SignedManifest;
use tessera::{Error, Result, TensorInfo, TensorView};

/// The signed entries a file is held to, and the tensors already checked.
pub struct SignedCheck {
    entries: HashMap<String, TensorId>,
    /// The signed manifest (for the page manifest it may cover).
    manifest: SignedManifest,
    checked: Mutex<HashSet<String>>,
}

impl SignedCheck {
    /// Checks the signature file `signature` with `public_key` (32 Ed25519 bytes, hex,
    /// or PEM) and the file's tensor `infos` against its entries.
    pub fn new(signature: &[u8], public_key: &[u8], infos: &[TensorInfo]) -> Result<SignedCheck> {
        let key = PublicKey::from_bytes(public_key)?;
        let signed = SignedManifest::parse(signature)?;
        signed.check_signature(&key)?;
        let entries: HashMap<String, TensorId> = signed
            .tensors
            .clone()
            .into_iter()
            .map(|t| (t.name.clone(), t))
            .collect();
        let mut problems = Vec::new();
        for info in infos {
            match entries.get(&info.name) {
                None => problems.push(format!("{:?} is not in the signed manifest", info.name)),
                Some(e) => {
                    if e.dtype != info.dtype.name()
                        || e.shape != info.shape
                        || e.layout != info.layout.name()
                    {
                        problems.push(format!(
                            "{:?} is {} {:?} {}, signed as {} {:?} {}",
                            info.name,
                            info.dtype.name(),
                            info.shape,
                            info.layout.name(),
                            e.dtype,
                            e.shape,
                            e.layout
                        ));
                    }
                }
            }
        }
        let present: HashSet<&str> = infos.iter().map(|i| i.name.as_str()).collect();
        let mut missing: Vec<&str> = entries
            .keys()
            .map(String::as_str)
            .filter(|n| !present.contains(n))
            .collect();
        missing.sort_unstable();
        problems.extend(
            missing
                .iter()
                .map(|n| format!("{n:?} is signed, but missing")),
        );
        if !problems.is_empty() {
            let more = problems.len().saturating_sub(5);
            problems.truncate(5);
            let tail = if more > 0 {
                format!(" (and {more} more)")
            } else {
                String::new()
            };
            return Err(Error::integrity(format!(
                "the file does not match the signed manifest: {}{tail}",
                problems.join("; ")
            )));
        }
        Ok(SignedCheck {
            entries,
            manifest: signed,
            checked: Mutex::new(HashSet::new()),
        })
    }

    /// Whether the signature covers page manifest `m` (signed with `tessera sign
    /// --pages`); Err says why not.
    pub fn covers_pages(&self, m: &tessera::pages::PageManifest) -> Result<()> {
        self.manifest.covers_pages(m)
    }

    /// Refuses `view` unless its digest is the signed one (hashed once per tensor).
    pub fn check(&self, view: &TensorView<'_>) -> Result<()> {
        let name = &view.info.name;
        let done = |s: &Self| {
            s.checked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(name)
        };
        if done(self) {
            return Ok(());
        }
        let entry = self.entries.get(name).ok_or_else(|| {
            Error::integrity(format!("tensor {name:?} is not in the signed manifest"))
        })?;
        let got = tensor_digest(view);
        if got != entry.digest {
            return Err(Error::integrity(format!(
                "tensor {name:?}: content digest {got} differs from the signed {}",
                entry.digest
            )));
        }
        self.checked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.clone());
        Ok(())
    }
}
