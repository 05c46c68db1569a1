//! Replays every input the fuzzers ever crashed on (`fuzz/regressions/<target>/`), and
//! every interop sample, through the same entry points the fuzz targets use. A fixed
//! crash stays fixed.

use std::path::{Path, PathBuf};

use tessera::Format;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn target_format(target: &str) -> Option<Format> {
    Some(match target {
        "ztensor" => Format::Ztensor,
        "ztensor2" => Format::ZtensorV2,
        "safetensors" => Format::Safetensors,
        "fold" => Format::Fold,
        "aero" => Format::Aero,
        "gptrs" => Format::GptrsCheckpoint,
        "wtxt" => Format::Wtxt,
        "npy" => Format::Npy,
        "gguf" => Format::Gguf,
        "pytorch" => Format::Pytorch,
        _ => return None,
    })
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn fuzz_regressions_replay_without_panic() {
    let dir = root().join("fuzz/regressions");
    let mut n = 0;
    for target_dir in files_under(&dir)
        .iter()
        .filter_map(|p| p.parent())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let target = target_dir
            .file_name()
            .and_then(|s| s.to_str())
            .unwrap_or("");
        for f in files_under(target_dir) {
            let data = std::fs::read(&f).unwrap();
            match target {
                "detect" => tessera::fuzzing::exercise_any(&data),
                "roundtrip" => tessera::fuzzing::round_trip(&data),
                "ranged" => tessera::fuzzing::ranged(&data),
                t => {
                    if let Some(fmt) = target_format(t) {
                        tessera::fuzzing::exercise(fmt, &data);
                    }
                }
            }
            n += 1;
        }
    }
    eprintln!("replayed {n} regression inputs");
}

#[test]
fn interop_samples_exercise_without_panic() {
    let samples = root().join("tests/interop-samples");
    let files: Vec<PathBuf> = files_under(&samples)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e != "md"))
        .collect();
    assert!(
        files.len() >= 11,
        "interop samples missing at {}",
        samples.display()
    );
    for f in files {
        let data = std::fs::read(&f).unwrap();
        tessera::fuzzing::exercise_any(&data);
        // Every prefix and a byte flipped at every 7th position: never a panic.
        for cut in 0..data.len() {
            tessera::fuzzing::exercise_any(&data[..cut]);
        }
        let mut d = data.clone();
        for i in (0..d.len()).step_by(7) {
            d[i] ^= 0x5a;
            tessera::fuzzing::exercise_any(&d);
            d[i] ^= 0x5a;
        }
    }
}
