//! Entry points shared by the cargo-fuzz targets (`fuzz/`) and the regression tests
//! that replay their findings (`tests/all/fuzz_regressions.rs`). Not part of the stable API.
//!
//! The readers must never panic, hang or over-allocate on any input; [`exercise`] drives
//! everything a user can do with an opened file. [`round_trip`] builds a small model from
//! the fuzzer's bytes, writes it and reads it back, and panics if anything differs.

use std::borrow::Cow;
use std::io::Cursor;

use crate::any::ReadOptions;
use crate::convert::{capabilities, prepare, write_to, ConvertOptions, WriteOptions};
use crate::dtype::DType;
use crate::format::Format;
use crate::formats::reader_for;
use crate::limits::Limits;
use crate::model::{Model, TensorSource};
use crate::tensor::{TensorInfo, TensorView};
use crate::verify::VerifyOptions;

/// Limits for fuzzing: small enough that a run never needs much memory.
pub fn fuzz_limits() -> Limits {
    Limits {
        max_index_bytes: 16 << 20,
        max_entries: 100_000,
        max_decoded_bytes: 64 << 20,
        ..Limits::default()
    }
}

/// Opens `data` with `format`'s reader (skipping detection) and exercises it: every
/// tensor, every chunk, verify, and a same-format rewrite — once over the bytes in
/// memory, once over a source that hands out ranges only (the path of positional and
/// remote reads). Errors are fine; panics are the bugs this finds.
pub fn exercise(format: Format, data: &[u8]) {
    let Some((open, access)) = reader_for(format) else {
        return;
    };
    let opts = ReadOptions {
        limits: fuzz_limits(),
        ..ReadOptions::default()
    };
    if let Ok(file) = open(data.into(), &opts) {
        exercise_file(format, file.as_ref());
    }
    if access == crate::any::Access::Ranges {
        let ranged = crate::source::CountingSource::new(data.to_vec());
        let opened = open(crate::source::SourceRef::new(&ranged), &opts);
        if let Ok(file) = &opened {
            exercise_file(format, file.as_ref());
        }
    }
}

fn exercise_file(format: Format, file: &dyn crate::model::Container) {
    for info in file.tensor_infos() {
        if let Ok(v) = file.tensor(&info.name) {
            let _ = v.validate();
        }
    }
    for c in file.chunks() {
        let _ = file.chunk(&c.name);
    }
    let _ = file.verify(&VerifyOptions::default());
    let _ = file.warnings();
    if crate::convert::writer_for(format).is_some() {
        if let Ok(p) = prepare(file, format, ConvertOptions::default()) {
            let mut out = Cursor::new(Vec::new());
            let _ = write_to(format, &p, &mut out, &WriteOptions::default());
        }
    }
}

/// Detects the format of `data` and, when its reader reads by range, opens it both from
/// memory and over a source that is not in memory (a [`crate::source::CountingSource`]
/// takes the same path as `pread`: every range an owned read), then panics when the two
/// disagree: one opens and the other does not, or they list or hand out different
/// tensors. Both are exercised as [`exercise`] does.
pub fn ranged(data: &[u8]) {
    let Some(format) = Format::detect(data) else {
        return;
    };
    let Some((_, crate::any::Access::Ranges)) = reader_for(format) else {
        return;
    };
    let opts = ReadOptions {
        limits: fuzz_limits(),
        ..ReadOptions::default()
    };
    let counted = crate::source::CountingSource::new(data.to_vec());
    let mem = crate::formats::open(data, &opts);
    let rng = crate::formats::open(&counted, &opts);
    let (mem, rng) = match (mem, rng) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(_), Err(_)) => return,
        (a, b) => panic!(
            "{format}: memory open {:?}, ranged open {:?}",
            a.err().map(|e| e.to_string()),
            b.err().map(|e| e.to_string())
        ),
    };
    assert_eq!(
        mem.tensor_infos(),
        rng.tensor_infos(),
        "{format}: listings differ"
    );
    for info in mem.tensor_infos() {
        match (mem.tensor(&info.name), rng.tensor(&info.name)) {
            (Ok(a), Ok(b)) => assert!(
                a.parts.len() == b.parts.len()
                    && a.parts
                        .iter()
                        .zip(&b.parts)
                        .all(|(x, y)| x.bytes == y.bytes),
                "{format}: tensor {:?} differs between memory and ranged reads",
                info.name
            ),
            (Err(_), Err(_)) => {}
            (a, b) => panic!(
                "{format}: tensor {:?}: memory {:?}, ranged {:?}",
                info.name,
                a.err().map(|e| e.to_string()),
                b.err().map(|e| e.to_string())
            ),
        }
    }
    exercise_file(format, rng.as_ref());
}

/// Detects the format of `data` and exercises it.
pub fn exercise_any(data: &[u8]) {
    if let Some(f) = Format::detect(data) {
        exercise(f, data);
    }
}

/// Builds a model from fuzzer bytes, writes it in a format chosen by the first byte,
/// reads it back and panics on any difference.
pub fn round_trip(data: &[u8]) {
    let writable: Vec<Format> = Format::ALL
        .into_iter()
        .filter(|f| f.can_write() && f.can_read())
        .collect();
    if writable.is_empty() || data.len() < 4 {
        return;
    }
    let format = writable[data[0] as usize % writable.len()];
    let Some(caps) = capabilities(format) else {
        return;
    };
    let mut model = Model::new();
    let mut rest = &data[1..];
    let mut i = 0;
    // A file of a single-tensor format (.npy) holds exactly one array.
    let one = format.identity().single_tensor;
    let max_tensors = if one { 1 } else { 4 };
    while rest.len() >= 3 && i < max_tensors {
        let dtype = caps.dtypes[rest[0] as usize % caps.dtypes.len()];
        let rank = (rest[1] % 4) as usize;
        let dims: Vec<u64> = rest[2..]
            .iter()
            .take(rank)
            .map(|&b| (b % 6) as u64)
            .collect();
        rest = &rest[(2 + dims.len()).min(rest.len())..];
        let Ok(n) = crate::tensor::dense_nbytes(dtype, &dims) else {
            return;
        };
        let n = n as usize;
        let mut bytes: Vec<u8> = rest.iter().copied().cycle().take(n).collect();
        bytes.resize(n, 0);
        if dtype == DType::Bool {
            bytes.iter_mut().for_each(|b| *b &= 1);
        }
        rest = &rest[n.min(rest.len())..];
        // .npy names its one array "array".
        let name = if one {
            "array".to_string()
        } else {
            format!("t{i}")
        };
        let info = TensorInfo::dense(name, dtype, dims);
        let Ok(view) = TensorView::dense(info, Cow::Owned(bytes)) else {
            return;
        };
        if model.push(view).is_err() {
            return;
        }
        i += 1;
    }
    let mut out = Cursor::new(Vec::new());
    let Ok(p) = prepare(&model, format, ConvertOptions::default()) else {
        return;
    };
    if let Err(e) = write_to(format, &p, &mut out, &WriteOptions::default()) {
        // Refusals are fine; anything else from a valid model is a bug.
        assert!(
            e.kind() == crate::ErrorKind::Unsupported,
            "{format}: writing a valid model failed: {e}"
        );
        return;
    }
    let bytes = out.into_inner();
    let file = match crate::open(&bytes, &ReadOptions::default()) {
        Ok(f) => f,
        Err(e) => panic!("{format}: reading our own output failed: {e}"),
    };
    assert!(
        file.verify(&VerifyOptions::default()).is_ok(),
        "{format}: our own output fails verify"
    );
    for info in model.tensor_infos() {
        let want = model.tensor(&info.name).map(|v| v.parts[0].bytes.to_vec());
        let got = file.tensor(&info.name).map(|v| v.parts[0].bytes.to_vec());
        match (want, got) {
            (Ok(w), Ok(g)) => assert!(w == g, "{format}: tensor {:?} bytes differ", info.name),
            (_, Err(e)) => panic!("{format}: tensor {:?} unreadable: {e}", info.name),
            (Err(_), _) => {}
        }
    }
}
