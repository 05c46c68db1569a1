//! `tessera-bench all --quick` runs every suite and the table and writes a well-formed
//! docs page and chart (into a temporary directory here). Timings are not checked.

use std::process::Command;

#[test]
fn all_quick_writes_the_table_and_the_chart() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_tessera-bench"))
        .args([
            "all",
            "--quick",
            "--size-mib",
            "2",
            "--tensors",
            "8",
            "--reps",
            "1",
        ])
        .arg("--no-python")
        .arg("--out")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(dir.path().join("benchmarks.md")).unwrap();
    let svg = std::fs::read_to_string(dir.path().join("benchmarks.svg")).unwrap();
    assert!(md.starts_with("# Benchmarks"));
    assert!(md.contains("![ratios](benchmarks.svg)"));
    assert!(md.contains("- CPU: "), "no machine section");
    let header = "| operation | Tessera | peer or bound | ratio | goal | note |";
    let at = md.find(header).expect("the table");
    let rows: Vec<&str> = md[at..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    assert_eq!(rows.len(), 13, "{rows:#?}");
    for r in &rows {
        assert_eq!(r.matches(" | ").count(), 5, "not six cells: {r}");
    }
    // The Rust rows and the suites' FOLD and WTXT rows were measured in this run.
    for op in [
        "Rust zTensor open",
        "convert zstd",
        "FOLD write",
        "FOLD read",
        "WTXT",
    ] {
        let r = rows.iter().find(|r| r.contains(op)).expect(op);
        assert!(r.contains("x** |"), "{op} not measured: {r}");
    }
    // Python was skipped, and says so.
    assert!(md.contains("Python rows skipped"));
    assert!(md.contains("## Every suite"));
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    // The six Python rows are never measured with --no-python; the two stats rows are
    // when the stats suite finds numpy (its peer), and not otherwise.
    for r in rows.iter().filter(|r| r.starts_with("| Python")) {
        assert!(r.contains("not measured"), "{r}");
    }
    let n = svg.matches("not measured").count();
    assert!(n == 6 || n == 8, "{n} bars not measured");
}
