//! Every verb that hands tensor bytes on (`convert`, `extract`, `diff`) checks the
//! digests the file stores for them first: one flipped byte inside a digest-protected
//! tensor makes each of them exit 1 with a message naming the file, the tensor or chunk
//! and the layer, and writes no output. `--no-verify` lets the bytes through and says so.

use std::borrow::Cow;
use std::path::Path;

use tessera::{DType, Format, Model, TensorInfo, TensorView};

use crate::common::run;

fn source(dir: &Path) -> std::path::PathBuf {
    let mut m = Model::new();
    let w: Vec<u8> = (0..64 * 64)
        .flat_map(|i| (i as f32 * 0.5).to_le_bytes())
        .collect();
    m.push(
        TensorView::dense(
            TensorInfo::dense("w", DType::F32, vec![64, 64]),
            Cow::Owned(w),
        )
        .unwrap(),
    )
    .unwrap();
    let b: Vec<u8> = (0..100i64).flat_map(|i| i.to_le_bytes()).collect();
    m.push(
        TensorView::dense(TensorInfo::dense("b", DType::I64, vec![100]), Cow::Owned(b)).unwrap(),
    )
    .unwrap();
    let p = dir.join("src.safetensors");
    tessera::convert::write_file(Format::Safetensors, &m, &p, &Default::default()).unwrap();
    p
}

/// Where tensor `name`'s stored bytes are, from `inspect --json`.
fn stored_range(path: &Path, name: &str) -> (u64, u64) {
    let out = run(&[&"inspect", &"--json", &path]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = j["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap();
    (
        t["offset"].as_u64().unwrap(),
        t["stored_bytes"].as_u64().unwrap(),
    )
}

/// (label, extension, convert flags, the layer the error must name)
const CASES: &[(&str, &str, &[&str], &str)] = &[
    ("zt-sha256", "zt", &["--digest", "sha256"], "sha256"),
    ("zt-crc32c", "zt", &["--digest", "crc32c"], "crc32c"),
    (
        "zt-zstd-sha256",
        "zt",
        &["--compress", "zstd", "--digest", "sha256"],
        "sha256",
    ),
    ("fold", "fold", &[], "CRC-32C"),
    ("fold-zstd", "fold", &["--compress", "zstd"], "CRC-32C"),
    ("aero-hash_b3", "aero", &["--tensor-hashes"], "hash_b3"),
    ("aero-blake3", "aero", &[], "blake3"),
    ("aero-phsh", "aero", &["--page-hashes", "4096"], "phsh"),
    ("npz", "npz", &[], "crc32"),
];

#[test]
fn damaged_tensor_bytes_fail_convert_extract_and_diff() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    for (label, ext, flags, layer) in CASES {
        let good = dir.path().join(format!("{label}.{ext}"));
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"convert", &src, &good];
        for f in flags.iter() {
            args.push(f);
        }
        let out = run(&args);
        assert!(
            out.status.success(),
            "{label}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (off, len) = stored_range(&good, "w");
        let mut bytes = std::fs::read(&good).unwrap();
        bytes[(off + len / 2) as usize] ^= 0x04;
        let bad = dir.path().join(format!("bad-{label}.{ext}"));
        std::fs::write(&bad, &bytes).unwrap();
        let bad_name = bad.display().to_string();

        let target = dir.path().join("out.safetensors");
        let npy = dir.path().join("w.npy");
        for (verb, out) in [
            ("convert", run(&[&"convert", &bad, &target])),
            ("extract", run(&[&"extract", &bad, &"w", &"-o", &npy])),
            ("diff", run(&[&"diff", &bad, &good])),
        ] {
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{label} {verb}: {err}");
            assert!(
                err.contains(&bad_name),
                "{label} {verb} names the file: {err}"
            );
            assert!(
                err.contains(layer),
                "{label} {verb} names the layer {layer}: {err}"
            );
            assert!(
                err.contains("\"w\"") || err.contains("chunk"),
                "{label} {verb} names the tensor or chunk: {err}"
            );
            assert!(
                !target.exists() && !npy.exists(),
                "{label} {verb} wrote output"
            );
        }
        // The opt-out lets the damaged bytes through, and says so. FOLD's CRC-32C is
        // checked even then: it is what triggers its Reed-Solomon repair.
        let out = run(&[&"convert", &"--no-verify", &bad, &target]);
        if *ext == "fold" {
            assert_eq!(out.status.code(), Some(1), "{label}");
            continue;
        }
        assert!(
            out.status.success(),
            "{label}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("not checked (--no-verify)"));
        assert!(String::from_utf8_lossy(&out.stderr).contains("--no-verify"));
        std::fs::remove_file(&target).unwrap();
        // The undamaged file converts.
        let out = run(&[&"convert", &good, &target]);
        assert!(
            out.status.success(),
            "{label}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::remove_file(&target).unwrap();
    }
}

/// The defect that started it: a FOLD file (no ECC) with one flipped byte inside the
/// zstd NPZ0 chunk holding its tensors converted to a file with 0 tensors, exit 0.
#[test]
fn a_damaged_fold_tensor_chunk_is_never_dropped_as_opaque() {
    let dir = tempfile::tempdir().unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/interop-samples/fold/pyfolds102_save_fold_or_mind_MPJRDNeuron.fold");
    let out = run(&[&"inspect", &"--json", &sample]);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = j["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "NPZ0")
        .unwrap()
        .clone();
    let (off, len) = (
        c["offset"].as_u64().unwrap(),
        c["stored_bytes"].as_u64().unwrap(),
    );
    let mut bytes = std::fs::read(&sample).unwrap();
    bytes[(off + len / 2) as usize] ^= 0x10;
    let bad = dir.path().join("bad.fold");
    std::fs::write(&bad, &bytes).unwrap();
    let target = dir.path().join("out.safetensors");
    for extra in [&[][..], &["--drop-metadata"][..]] {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"convert", &bad, &target];
        for e in extra {
            args.push(e);
        }
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {err}");
        assert!(
            err.contains("nuclear_arrays") && err.contains("CRC-32C"),
            "{err}"
        );
        assert!(!target.exists());
    }
    // inspect and verify still open it and report the damage.
    let out = run(&[&"verify", &bad]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("nuclear_arrays"));
    let out = run(&[&"inspect", &bad]);
    assert!(out.status.success());
    let all = [out.stdout, out.stderr].concat();
    assert!(String::from_utf8_lossy(&all).contains("cannot be read"));
    // --salvage converts the rest, names what it lost on stderr and in the report, and
    // exits 6 (written, with losses) unless the loss is accepted.
    let out = run(&[&"convert", &"--salvage", &"--drop-metadata", &bad, &target]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert!(
        err.contains("nuclear_arrays") && err.contains("--accept-loss"),
        "{err}"
    );
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report
            .lines()
            .any(|l| l.starts_with("lost: ") && l.contains("nuclear_arrays")),
        "{report}"
    );
    assert!(target.exists());
    std::fs::remove_file(&target).unwrap();
    let out = run(&[
        &"convert",
        &"--salvage",
        &"--accept-loss",
        &"--drop-metadata",
        &bad,
        &target,
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(target.exists());
    // An intact file loses nothing: exit 0 with --salvage alone.
    let out = run(&[
        &"convert",
        &"--salvage",
        &"--drop-metadata",
        &sample,
        &target,
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn no_verify_is_refused_where_no_bytes_are_handed_out() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    for verb in ["inspect", "verify"] {
        let out = run(&[&verb, &"--no-verify", &src]);
        assert_eq!(out.status.code(), Some(2), "{verb}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--no-verify"));
    }
}

/// WTXT arrays carry keyed HMACs: with `--input-hmac-key-file` a read authenticates them.
#[test]
fn wtxt_hmac_is_checked_on_read_when_a_key_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    let key = dir.path().join("k");
    std::fs::write(&key, b"the right key").unwrap();
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, b"another key").unwrap();
    let keyed = dir.path().join("keyed.wtxt");
    let plain = dir.path().join("plain.wtxt");
    assert!(run(&[&"convert", &src, &keyed, &"--hmac-key-file", &key])
        .status
        .success());
    assert!(run(&[&"convert", &src, &plain]).status.success());
    let out = dir.path().join("o.safetensors");
    let ok = run(&[&"convert", &"--input-hmac-key-file", &key, &keyed, &out]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    std::fs::remove_file(&out).unwrap();
    for (file, k, why) in [
        (&keyed, &wrong, "hmac mismatch"),
        (&plain, &key, "carries no HMAC"),
    ] {
        let r = run(&[&"convert", &"--input-hmac-key-file", k, file, &out]);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{err}");
        assert!(err.contains(why), "{err}");
        assert!(!out.exists());
    }
}
