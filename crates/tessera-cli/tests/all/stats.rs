//! `tessera stats` against numpy on the same arrays (NaN and Inf placed on purpose;
//! `tests/data/stats/gen.py` wrote them with numpy's own `savez` and numpy's results),
//! and `verify --values` failing on NaN or Inf, naming the tensors.

use std::process::{Command, Output};

fn data(rel: &str) -> String {
    format!(
        "{}/../tessera/tests/data/stats/{rel}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn tessera(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .output()
        .unwrap()
}

fn close(x: f64, y: f64) -> bool {
    (x - y).abs() <= 1e-9 * y.abs().max(1.0)
}

#[test]
fn stats_match_numpy() {
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("expected.json")).unwrap()).unwrap();
    let o = tessera(&["stats", &data("values.npz"), "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let tensors = doc["tensors"].as_array().unwrap();
    let expected = expected.as_object().unwrap();
    assert_eq!(tensors.len(), expected.len());
    for t in tensors {
        let name = t["name"].as_str().unwrap();
        let e = &expected[name];
        for k in ["count", "nan", "pos_inf", "neg_inf", "zeros"] {
            assert_eq!(t[k], e[k], "{name} {k}");
        }
        for k in ["min", "max", "mean", "std"] {
            let (x, y) = (t[k].as_f64().unwrap(), e[k].as_f64().unwrap());
            assert!(close(x, y), "{name} {k}: ours {x}, numpy {y}");
        }
    }
    // --filter, as inspect's.
    let o = tessera(&["stats", &data("values.npz"), "--filter", "?", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = doc["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["w", "h", "d", "i"]);
    // The text names the tensors with NaN or Inf.
    let o = tessera(&["stats", &data("values.npz")]);
    let t = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        t.lines()
            .last()
            .unwrap()
            .ends_with("NaN or Inf in 3: w, h, big_f64"),
        "{t}"
    );
}

#[test]
fn verify_values_fails_on_nan_and_inf_naming_the_tensors() {
    let f = data("values.npz");
    let o = tessera(&["verify", "--values", &f]);
    assert_eq!(o.status.code(), Some(1));
    let t = String::from_utf8_lossy(&o.stdout).into_owned();
    let failed: Vec<&str> = t.lines().filter(|l| l.starts_with("FAILED")).collect();
    assert_eq!(failed.len(), 3, "{t}");
    assert!(
        failed[0].contains("tensor \"w\"")
            && failed[0].contains("1 NaN, 1 +Inf, 1 -Inf of 2112 elements"),
        "{t}"
    );
    assert!(
        failed[1].contains("tensor \"h\"") && failed[1].contains("1 NaN"),
        "{t}"
    );
    assert!(
        failed[2].contains("tensor \"big_f64\"") && failed[2].contains("1 NaN, 1 -Inf of 5000"),
        "{t}"
    );
    // Only the tensors named; and without --values the file verifies.
    assert_eq!(
        tessera(&["verify", "--values", "--tensor", "clean", &f])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(tessera(&["verify", &f]).status.code(), Some(0));
}

#[test]
fn plot_draws_numpys_histograms_into_an_svg() {
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("expected.json")).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("h.svg");
    let o = tessera(&[
        "stats",
        &data("values.npz"),
        "--json",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for t in doc["tensors"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        assert_eq!(
            t["histogram"]["counts"], expected[name]["hist"],
            "{name}: numpy.histogram's counts"
        );
    }
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(text.trim_end().ends_with("</svg>"));
    // One bar per non-empty bin of every tensor.
    let bars: usize = expected
        .as_object()
        .unwrap()
        .values()
        .map(|e| {
            e["hist"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c.as_u64() != Some(0))
                .count()
        })
        .sum();
    assert_eq!(text.matches("<rect x=").count(), bars);
    // Only SVG is written; refused before reading.
    let o = tessera(&["stats", &data("values.npz"), "--plot", "x.png"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The table's sparkline, drawn from numpy's own 40-bin counts by the documented rule
/// (two bins a character, eight heights relative to the fullest pair, blank when empty).
#[test]
fn the_table_ends_with_a_sparkline_of_numpys_histogram() {
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("expected.json")).unwrap()).unwrap();
    let o = tessera(&["stats", &data("values.npz")]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8(o.stdout).unwrap();
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let mut drawn = 0;
    for (name, e) in expected.as_object().unwrap() {
        let counts: Vec<u64> = match e["hist"].as_array() {
            Some(a) if !a.is_empty() => a.iter().map(|c| c.as_u64().unwrap()).collect(),
            _ => continue,
        };
        let pairs: Vec<u64> = counts
            .chunks(2)
            .map(|c| c[0] + c.get(1).unwrap_or(&0))
            .collect();
        let top = *pairs.iter().max().unwrap();
        if top == 0 {
            continue;
        }
        let want: String = pairs
            .iter()
            .map(|&c| {
                if c == 0 {
                    ' '
                } else {
                    BARS[((c as f64 / top as f64) * 7.0).round() as usize]
                }
            })
            .collect();
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name.as_str()))
            .unwrap_or_else(|| panic!("no row for {name}: {text}"));
        assert!(
            line.trim_end().ends_with(want.trim_end()),
            "{name}: {line:?} should end with {want:?}"
        );
        drawn += 1;
    }
    assert!(drawn >= 3, "only {drawn} tensors had a histogram");
}
