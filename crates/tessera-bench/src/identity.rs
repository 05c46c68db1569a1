//! `identity` suite: `tessera id` (the content identity of a model: every tensor hashed
//! with BLAKE3, per tensor, then a Merkle root) against the BLAKE3 bound — one
//! multi-threaded BLAKE3 pass over the same bytes concatenated, on every core — in the
//! same run, on an in-memory model and on a mapped safetensors file (page cache warm).

use tessera::{Format, Model, ReadOptions, TensorSource};

use crate::common::{best_of, report, synthetic_model, Opts};

/// Runs the suite.
pub fn run(opts: &Opts) -> tessera::Result<()> {
    let model = synthetic_model(opts)?;
    let total: usize = model
        .tensor_infos()
        .iter()
        .map(|i| model.tensor(&i.name).map(|v| v.nbytes() as usize))
        .sum::<tessera::Result<usize>>()?;
    // One checked run first: an error must not pass for a fast run.
    tessera::identity::model_id(&model, false)?;
    let concat = concatenated(&model)?;
    let bound = best_of(opts.reps, || {
        let mut h = blake3::Hasher::new();
        h.update_rayon(&concat);
        h.finalize()
    });
    let t_mem = best_of(opts.reps, || {
        tessera::identity::model_id(&model, false).map(|i| i.root)
    });
    report(
        "id, in memory",
        total,
        t_mem,
        Some(("blake3 bound, all cores", bound)),
    );

    let dir = tempfile::tempdir().map_err(tessera::Error::from)?;
    let path = dir.path().join("m.safetensors");
    tessera::convert::write_file(Format::Safetensors, &model, &path, &Default::default())?;
    drop(concat);
    let data = tessera::FileData::open(&path)?;
    let t_file = best_of(opts.reps, || {
        let f = tessera::open(&data, &ReadOptions::default())?;
        tessera::identity::model_id(f.as_ref(), false).map(|i| i.root)
    });
    report(
        "id, mapped safetensors",
        total,
        t_file,
        Some(("blake3 bound, all cores", bound)),
    );
    Ok(())
}

fn concatenated(m: &Model) -> tessera::Result<Vec<u8>> {
    let mut out = Vec::new();
    for info in m.tensor_infos() {
        out.extend_from_slice(&m.tensor(&info.name)?.parts[0].bytes);
    }
    Ok(out)
}
