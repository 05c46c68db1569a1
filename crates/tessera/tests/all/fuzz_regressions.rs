//! Replays every input the fuzzers ever crashed on (`fuzz/regressions/<target>/`), and
//! every interop sample, through the same entry points the fuzz targets use. A fixed
//! crash stays fixed.

use std::path::{Path, PathBuf};

use tessera::Format;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The format a fuzz target exercises: the first registry entry it covers.
fn target_format(target: &str) -> Option<Format> {
    Format::ALL
        .into_iter()
        .find(|f| f.codec().fuzz_target == Some(target))
}

/// Fuzz targets that are not one format's reader.
const GENERIC_TARGETS: [&str; 3] = ["detect", "roundtrip", "ranged"];

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

/// Every readable format of the registry has its fuzz target (`fuzz/fuzz_targets/<t>.rs`,
/// a `[[bin]]` in `fuzz/Cargo.toml`, exercising that format) and its test data
/// (`crates/tessera/tests/data/<t>/`); every target file belongs to a registry format or
/// is generic. `scripts/fuzz.sh` runs the files of `fuzz/fuzz_targets/`, so it runs them all.
#[test]
fn fuzz_targets_and_test_data_follow_the_registry() {
    let targets_dir = root().join("fuzz/fuzz_targets");
    let cargo = std::fs::read_to_string(root().join("fuzz/Cargo.toml")).unwrap();
    let mut wanted = std::collections::BTreeSet::new();
    for f in Format::ALL {
        let Some(t) = f.codec().fuzz_target else {
            assert!(!f.can_read(), "{f}: readable but no fuzz target");
            continue;
        };
        wanted.insert(t);
        let file = targets_dir.join(format!("{t}.rs"));
        let code = std::fs::read_to_string(&file)
            .unwrap_or_else(|_| panic!("{f}: no fuzz target {}", file.display()));
        let exercised = Format::ALL
            .into_iter()
            .filter(|g| g.codec().fuzz_target == Some(t))
            .any(|g| code.contains(&format!("Format::{g:?}")));
        assert!(
            exercised,
            "{}: exercises none of its formats",
            file.display()
        );
        assert!(
            cargo.contains(&format!("name = \"{t}\"")),
            "fuzz/Cargo.toml has no [[bin]] {t}"
        );
        let data = root().join("crates/tessera/tests/data").join(t);
        assert!(data.is_dir(), "{f}: no test data in {}", data.display());
    }
    let script = std::fs::read_to_string(root().join("scripts/fuzz.sh")).unwrap();
    assert!(
        script.contains("$(ls fuzz/fuzz_targets"),
        "scripts/fuzz.sh must take its targets from fuzz/fuzz_targets/"
    );
    for t in GENERIC_TARGETS {
        assert!(targets_dir.join(format!("{t}.rs")).is_file(), "{t}");
    }
    for e in std::fs::read_dir(&targets_dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let stem = name.trim_end_matches(".rs");
        assert!(
            wanted.contains(stem) || GENERIC_TARGETS.contains(&stem),
            "fuzz target {name} covers no registry format"
        );
    }
}
