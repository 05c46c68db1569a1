//! The emitter: writes one pinned generation into the ring. Its identity root (BLAKE3 of
//! the staged tensors), then the snapshot through the format's writer, atomically
//! (`convert::convert_file`: a temporary, fsynced, renamed), chained to the previous
//! written generation; then its signature and sidecar (each atomic and fsynced); then
//! the `written` record. A failure logs `failed gen=N reason=…` and leaves the ring as
//! it was (the atomic write removes its temporary).

use std::collections::BTreeMap;
use std::path::Path;

use super::ring::{self, Sidecar};
use super::stage::Arena;
use super::wal::Record;
use super::{hook, Core, Job};
use crate::convert::ConvertOptions;
use crate::error::{Error, Result};
use crate::metadata::{Metadata, Value};
use crate::model::TensorSource;
use crate::options::OptionValue;
use crate::tensor::{TensorInfo, TensorView};
use crate::write::MetadataSupport;

/// The staged tensors with the generation's metadata, pausing at the `write` test hook
/// on the first tensor the writer reads.
struct Emitting<'a> {
    arena: &'a Arena,
    metadata: Metadata,
    started: std::sync::Once,
}

impl TensorSource for Emitting<'_> {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        self.arena.tensor_infos()
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        self.started.call_once(|| hook("write"));
        self.arena.tensor(name)
    }
}

pub(super) fn run(core: &Core, mut job: Job) {
    let gen = job.gen;
    let result = write(core, &job);
    job.arena.release();
    {
        let mut inner = core.lock();
        inner.arena = Some(std::mem::take(&mut job.arena));
        if let Err(e) = &result {
            inner.errors.push(format!("generation {gen}: {e}"));
        }
    }
    core.cond.notify_all();
    match result {
        Ok(r) => {
            if core.log(r).is_ok() {
                hook("written");
                core.retain();
            }
        }
        Err(e) => {
            // Whatever the write left under the generation's names goes.
            for f in ring::files_of(&core.dir, gen) {
                let _ = std::fs::remove_file(f);
            }
            let _ = core.log(Record::Failed {
                gen,
                target: None,
                reason: e.to_string().replace(['\n', '\r'], " "),
            });
        }
    }
}

fn file_len(p: &Path) -> Result<u64> {
    Ok(std::fs::metadata(p)
        .map_err(|e| Error::from(e).at_subject(p.display().to_string()))?
        .len())
}

fn write(core: &Core, job: &Job) -> Result<Record> {
    let format = core.format;
    let gen = job.gen;
    let prev = core.lock().state.last_written().cloned();
    let (prev_gen, prev_file, prev_root) = match &prev {
        Some(g) => {
            let (file, _, root) = g.written.clone().unwrap_or_default();
            (Some(g.gen), Some(core.dir.join(file)), Some(root))
        }
        None => (None, None, None),
    };
    let id = crate::identity::model_id(&job.arena, false)?;
    let root = id.root.to_prefixed();

    let ext = format.extensions().first().copied().unwrap_or("bin");
    let name = format!("{}.{ext}", ring::stem(gen));
    let path = core.dir.join(&name);

    // The format's own chaining, where its codec declares it.
    let mut opts = core.write.clone();
    let declares = |n: &str| format.codec().options.iter().any(|o| o.name == n);
    if declares("generation") {
        opts.set("generation", OptionValue::Int(gen as i64))?;
    }
    if declares("prev") {
        if let Some(p) = prev_file.as_ref().filter(|p| p.exists()) {
            opts.set("prev", OptionValue::Text(p.display().to_string()))?;
        }
    }
    if declares("timestamp") && opts.timestamp.is_none() {
        opts.timestamp = Some(job.time.clone());
    }
    #[cfg(feature = "signing")]
    if let (Some(crate::signing::key::SecretKey::Ed25519(seed)), true) =
        (&core.sign_key, declares("sign_key"))
    {
        if !opts.extra.contains_key("sign_key") {
            opts.set("sign_key", OptionValue::Secret(seed.to_vec()))?;
        }
    }

    let mut metadata = Metadata::new();
    let caps = crate::convert::capabilities(format);
    if caps.is_some_and(|c| c.metadata != MetadataSupport::None) {
        for (k, v) in &job.metadata {
            metadata.insert(k.clone(), Value::from(v.clone()));
        }
        metadata.insert("tessera.snapshot.gen", Value::from(gen.to_string()));
        if let Some(s) = job.step {
            metadata.insert("tessera.snapshot.step", Value::from(s.to_string()));
        }
        metadata.insert("tessera.snapshot.time", Value::from(job.time.clone()));
        if let Some(r) = &prev_root {
            metadata.insert("tessera.snapshot.prev", Value::from(r.clone()));
        }
    }
    let src = Emitting {
        arena: &job.arena,
        metadata,
        started: std::sync::Once::new(),
    };
    let report =
        crate::convert::convert_file(&src, format, &path, ConvertOptions::default(), &opts)?;
    let mut files: Vec<(String, u64)> = vec![(name.clone(), file_len(&path)?)];
    for extra in &report.extra_files {
        let n = extra
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        if n.starts_with(&ring::stem(gen)) && extra != &path {
            files.push((
                n,
                file_len(&core.dir.join(extra.file_name().unwrap_or_default()))?,
            ));
        }
    }
    hook("sidecar");
    #[cfg(feature = "signing")]
    if let Some(key) = &core.sign_key {
        let sig = crate::signing::SignedManifest::sign_id(&id, key)?;
        let sig_name = format!("{name}.sig");
        let sig_path = core.dir.join(&sig_name);
        crate::util::atomic::write_bytes_atomic(&sig_path, sig.to_json()?.as_bytes())?;
        files.push((sig_name, file_len(&sig_path)?));
    }
    let sidecar = Sidecar {
        gen,
        step: job.step,
        time: job.time.clone(),
        format: format.name().to_string(),
        root: root.clone(),
        prev_gen,
        prev_root,
        files: files.clone(),
        metadata: job.metadata.clone().into_iter().collect::<BTreeMap<_, _>>(),
        writer: format!("tessera {}", env!("CARGO_PKG_VERSION")),
    };
    let text = serde_json::to_string_pretty(&sidecar)
        .map_err(|e| Error::invalid_input(format!("sidecar: {e}")))?;
    crate::util::atomic::write_bytes_atomic(
        &core.dir.join(ring::sidecar_name(gen)),
        text.as_bytes(),
    )?;
    Ok(Record::Written {
        gen,
        file: name,
        bytes: files.iter().map(|(_, b)| b).sum(),
        root,
    })
}
