//! `tessera diff` as users read it: `--atol/--rtol` with numpy's `isclose` rule (NaN
//! equals NaN), the largest absolute and relative error and the RMS error of each
//! differing tensor, and metadata compared the same way within and across formats with
//! old -> new values, keys a format cannot carry listed apart.

use std::borrow::Cow;
use std::path::Path;
use std::process::{Command, Output};

use tessera::{DType, Format, Model, TensorInfo, TensorView, Value};

fn write(path: &Path, format: Format, w: &[f32], meta: &[(&str, &str)]) {
    let mut m = Model::new();
    let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
    m.push(
        TensorView::dense(
            TensorInfo::dense("w", DType::F32, vec![w.len() as u64]),
            Cow::Owned(bytes),
        )
        .unwrap(),
    )
    .unwrap();
    for (k, v) in meta {
        m.metadata.insert(*k, Value::from(*v));
    }
    tessera::convert::write_file(format, &m, path, &Default::default()).unwrap();
}

fn diff(a: &Path, b: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .arg("diff")
        .arg(a)
        .arg(b)
        .args(extra)
        .output()
        .unwrap()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn tolerances_follow_numpy_isclose_and_errors_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.safetensors"), dir.path().join("b.zt"));
    write(
        &a,
        Format::Safetensors,
        &[1.0, 2.0, 4.0, f32::NAN, 0.5],
        &[],
    );
    write(&b, Format::Ztensor, &[1.0, 2.0, 4.01, f32::NAN, 0.5], &[]);
    // Exact: one element differs (NaN against NaN is equal).
    let o = diff(&a, &b, &["--json"]);
    assert_eq!(o.status.code(), Some(1));
    let j = json(&o);
    let c = &j["changed"][0];
    assert_eq!(c["name"], "w");
    assert_eq!(c["elements_compared"], 5);
    assert_eq!(c["elements_differing"], 1);
    assert_eq!(c["nonfinite_mismatches"], 0);
    let d = (4.01f32 as f64) - 4.0;
    assert!(
        (c["max_abs_diff"].as_f64().unwrap() - d).abs() < 1e-12,
        "{c}"
    );
    let rel = d / (4.01f32 as f64);
    assert!(
        (c["max_rel_diff"].as_f64().unwrap() - rel).abs() < 1e-12,
        "{c}"
    );
    let rms = (d * d / 4.0).sqrt(); // over the 4 finite pairs
    assert!((c["rms_diff"].as_f64().unwrap() - rms).abs() < 1e-12, "{c}");
    let t = String::from_utf8_lossy(&diff(&a, &b, &[]).stdout).into_owned();
    assert!(
        t.contains("~ w: 1 of 5 elements differ, max abs diff") && t.contains("max rel diff"),
        "{t}"
    );
    // |a - b| = 0.01 <= atol 0.02: equal within tolerance, exit 0, and said so.
    let o = diff(&a, &b, &["--atol", "0.02"]);
    assert_eq!(o.status.code(), Some(0));
    let t = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(t.contains("= w: equal within --atol 0.02"), "{t}");
    let j = json(&diff(&a, &b, &["--atol", "0.02", "--json"]));
    assert_eq!(j["same"], true);
    assert_eq!(j["within_tolerance"][0]["name"], "w");
    // rtol is relative to b: 0.01 <= 0.003 * 4.01 holds, 0.002 * 4.01 does not.
    assert_eq!(diff(&a, &b, &["--rtol", "0.003"]).status.code(), Some(0));
    assert_eq!(diff(&a, &b, &["--rtol", "0.002"]).status.code(), Some(1));
    // A NaN against a number is a non-finite mismatch, whatever the tolerance.
    let c2 = dir.path().join("c.safetensors");
    write(&c2, Format::Safetensors, &[1.0, 2.0, 4.0, 7.0, 0.5], &[]);
    let o = diff(&a, &c2, &["--atol", "100", "--json"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(json(&o)["changed"][0]["nonfinite_mismatches"], 1);
    // A negative tolerance is a usage error.
    assert_eq!(diff(&a, &b, &["--atol=-1"]).status.code(), Some(2));
}

#[test]
fn metadata_counts_across_formats_with_old_and_new_values() {
    let dir = tempfile::tempdir().unwrap();
    let w = [1.0f32, 2.0];
    let a = dir.path().join("a.safetensors");
    let b = dir.path().join("b.zt");
    write(&a, Format::Safetensors, &w, &[("lr", "0.1"), ("gone", "x")]);
    write(&b, Format::Ztensor, &w, &[("lr", "0.2"), ("new", "y")]);
    let o = diff(&a, &b, &[]);
    assert_eq!(o.status.code(), Some(1), "metadata counts across formats");
    let t = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(t.contains("~ metadata lr: 0.1 -> 0.2"), "{t}");
    assert!(t.contains("- metadata gone = x"), "{t}");
    assert!(t.contains("+ metadata new = y"), "{t}");
    let j = json(&diff(&a, &b, &["--json"]));
    assert_eq!(j["tensors_same"], true);
    assert_eq!(j["metadata"]["changed"][0], "lr");
    assert_eq!(j["metadata"]["values"]["lr"][1], "0.2");
    // Same keys and values across formats: no differences.
    let c = dir.path().join("c.zt");
    write(&c, Format::Ztensor, &w, &[("lr", "0.1"), ("gone", "x")]);
    assert_eq!(diff(&a, &c, &[]).status.code(), Some(0));
    // A format without metadata (npz): the other's keys are listed, not counted.
    let n = dir.path().join("n.npz");
    write(&n, Format::Npz, &w, &[]);
    let o = diff(&a, &n, &[]);
    let t = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("not compared: 2 metadata keys of a"), "{t}");
    let j = json(&diff(&a, &n, &["--json"]));
    assert_eq!(j["metadata"]["not_compared"].as_array().unwrap().len(), 2);
}
