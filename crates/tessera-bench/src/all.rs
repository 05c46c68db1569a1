//! `tessera-bench all [--quick] [--size-mib N] [--reps N] [--out DIR] [--no-python]`:
//! every suite, the table's Rust rows ([`crate::issue`]) and its Python rows
//! (crates/tessera-py/bench/bench_load.py, run with the Python that has the package:
//! `$TESSERA_PYTHON`, else `.venv/bin/python`, else `python3`), then
//! `docs/benchmarks.md` (the table with ratios, the machine, every suite's lines) and
//! `docs/benchmarks.svg` (the ratios as bars). Timings are printed and written, never
//! asserted. `--quick`: 32 MiB of 40 tensors, for a smoke run. Sections after
//! [`KEPT_MARK`] in an existing benchmarks.md (written by their own scripts, e.g.
//! scripts/bench-sharded.sh) are kept as they are.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::common::{median, set_suite, take_rows, Opts, Row};
use crate::issue::Measured;

/// A suite: its name and entry point.
pub type Suite = (&'static str, fn(&Opts) -> tessera::Result<()>);

/// The table's rows, in the issue's order: (key, operation, goal). The key finds the
/// row among the measured ones (Python, Rust) or a suite's reported lines.
const TABLE: &[(&str, &str, f64)] = &[
    (
        "save_file .safetensors, durable",
        "Python save_file .safetensors, durable both sides",
        1.2,
    ),
    (
        "save_file .safetensors, no fsync",
        "Python save, no fsync either side (durable=False)",
        1.2,
    ),
    (
        "save_file .zt, durable",
        "Python save .zt vs ztensor 1.0.1, durable both sides",
        1.2,
    ),
    (
        "load_file .safetensors, cold cache",
        "Python load_file .safetensors, cold page cache",
        1.3,
    ),
    (
        "load_file .safetensors, hot cache",
        "Python load_file .safetensors, hot cache",
        2.0,
    ),
    (
        "load_file .zt, hot cache",
        "Python load .zt vs ztensor 1.0.1, hot",
        1.5,
    ),
    (
        "Rust zTensor open + index",
        "Rust zTensor open + index vs safetensors crate",
        1.0,
    ),
    (
        "convert zstd .zt → .safetensors",
        "convert zstd .zt → .safetensors",
        0.9,
    ),
    ("fold write, zstd", "FOLD write with zstd", 0.9),
    (
        "fold read every tensor, zstd",
        "FOLD read with zstd (every tensor, digests checked)",
        0.9,
    ),
    ("wtxt decode+verify", "WTXT decode + verify", 0.9),
    (
        "stats f32, against numpy",
        "stats f32 (min/max/mean/std/NaN/Inf/zeros) vs numpy",
        1.0,
    ),
    (
        "stats bf16, against numpy",
        "stats bf16 vs numpy (widened to f32 first)",
        1.0,
    ),
];

/// Runs everything and writes the report.
pub fn run(opts: &Opts, suites: &[Suite]) -> tessera::Result<()> {
    let mut problems: Vec<String> = Vec::new();
    for (name, suite) in suites {
        println!("\n== {name}");
        set_suite(name);
        // One suite failing (or panicking) does not stop the others.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| suite(opts))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                eprintln!("suite {name}: {e}");
                problems.push(format!("suite `{name}` failed: {e}"));
            }
            Err(_) => problems.push(format!("suite `{name}` panicked (see its output)")),
        }
    }
    let suite_rows = take_rows();
    println!("\n== table: Rust rows");
    let mut measured = match crate::issue::run(opts) {
        Ok(m) => m,
        Err(e) => {
            problems.push(format!("Rust table rows failed: {e}"));
            Vec::new()
        }
    };
    let mut machine_py = serde_json::Map::new();
    if opts.no_python {
        problems.push("Python rows skipped (--no-python)".into());
    } else {
        println!("\n== table: Python rows");
        match python_rows(opts) {
            Ok((rows, m)) => {
                measured.extend(rows);
                machine_py = m;
            }
            Err(e) => problems.push(format!("Python rows not measured: {e}")),
        }
    }
    let out = opts.out.clone().unwrap_or_else(|| PathBuf::from("docs"));
    std::fs::create_dir_all(&out)?;
    let table = table_rows(&measured, &suite_rows);
    let bars: Vec<crate::chart::Bar> = table
        .iter()
        .map(|(op, m, goal)| (op.to_string(), m.as_ref().map(Measured::ratio), *goal))
        .collect();
    let title = format!(
        "Tessera vs peers: {} MiB, {} tensors (ratio, above 1 = Tessera faster)",
        opts.size_mib, opts.tensors
    );
    std::fs::write(out.join("benchmarks.svg"), crate::chart::svg(&title, &bars))?;
    let md = markdown(opts, &table, &suite_rows, &machine_py, &problems);
    let old = std::fs::read_to_string(out.join("benchmarks.md")).unwrap_or_default();
    std::fs::write(out.join("benchmarks.md"), with_kept(md, &old))?;
    println!(
        "\nwrote {} and {}",
        out.join("benchmarks.md").display(),
        out.join("benchmarks.svg").display()
    );
    Ok(())
}

/// The table's rows in order, each with its measurement when there is one.
fn table_rows(
    measured: &[Measured],
    suite_rows: &[Row],
) -> Vec<(&'static str, Option<Measured>, f64)> {
    TABLE
        .iter()
        .map(|&(key, op, goal)| {
            let m = measured
                .iter()
                .find(|m| m.row.starts_with(key))
                .cloned()
                .or_else(|| {
                    let r = suite_rows.iter().find(|r| r.name.starts_with(key))?;
                    let (peer, t) = r.reference.clone()?;
                    Some(Measured {
                        row: r.name.clone(),
                        peer,
                        bytes: r.bytes,
                        ours: vec![r.secs],
                        theirs: vec![t],
                        goal,
                        note: format!("suite `{}`: best of its repetitions", r.suite),
                    })
                });
            (op, m, goal)
        })
        .collect()
}

/// Runs the Python script; its rows and the machine it describes.
fn python_rows(
    opts: &Opts,
) -> tessera::Result<(Vec<Measured>, serde_json::Map<String, serde_json::Value>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = root.join("crates/tessera-py/bench/bench_load.py");
    let python = std::env::var_os("TESSERA_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            let v = root.join(".venv/bin/python");
            v.exists().then_some(v)
        })
        .unwrap_or_else(|| PathBuf::from("python3"));
    let dir = tempfile::tempdir()?;
    let json = dir.path().join("rows.json");
    let status = std::process::Command::new(&python)
        .arg(&script)
        .args(["--size-mib", &opts.size_mib.to_string()])
        .args(["--tensors", &opts.tensors.to_string()])
        .args(["--reps", &opts.reps.max(3).to_string()])
        .arg("--json")
        .arg(&json)
        .status()
        .map_err(|e| tessera::Error::from(e).at_subject(python.display().to_string()))?;
    if !status.success() {
        return Err(tessera::Error::invalid_input(format!(
            "{} {} exited with {status} (needs tessera, safetensors and ztensor==1.0.1 installed)",
            python.display(),
            script.display()
        )));
    }
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json)?)
        .map_err(|e| tessera::Error::malformed(format!("the Python rows: {e}")))?;
    let times = |x: &serde_json::Value| -> Vec<f64> {
        x.as_array()
            .map(|a| a.iter().filter_map(|t| t.as_f64()).collect())
            .unwrap_or_default()
    };
    let text = |x: &serde_json::Value| x.as_str().unwrap_or_default().to_string();
    let rows = v["rows"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| Measured {
                    row: text(&r["row"]),
                    peer: text(&r["peer"]),
                    bytes: r["bytes"].as_u64().unwrap_or(0) as usize,
                    ours: times(&r["ours_s"]),
                    theirs: times(&r["peer_s"]),
                    goal: r["goal"].as_f64().unwrap_or(1.0),
                    note: text(&r["note"]),
                })
                .collect()
        })
        .unwrap_or_default();
    let machine = v["machine"].as_object().cloned().unwrap_or_default();
    Ok((rows, machine))
}

fn read(p: &str) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// What the machine is, from /proc (Linux) and the Python side.
fn machine(py: &serde_json::Map<String, serde_json::Value>) -> String {
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "?".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let mem = read("/proc/meminfo")
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<f64>().ok())
        .map(|k| format!("{:.1} GiB", k / 1048576.0))
        .unwrap_or_else(|| "?".into());
    let kernel = read("/proc/sys/kernel/osrelease");
    let thp = read("/sys/kernel/mm/transparent_hugepage/enabled");
    let mut s = format!(
        "- CPU: {cpu}, {cores} cores available (shared with other jobs)\n- memory: {mem}; \
         kernel {}; transparent huge pages: `{}`\n",
        kernel.trim(),
        thp.trim()
    );
    if !py.is_empty() {
        let g = |k: &str| {
            py.get(k)
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string())
                })
                .unwrap_or_else(|| "?".into())
        };
        let _ = writeln!(
            s,
            "- Python {}, numpy {}, tessera {}, safetensors {}; cold cache made by `{}`",
            g("python"),
            g("numpy"),
            g("tessera"),
            g("safetensors"),
            g("cold_method")
        );
    }
    s
}

fn spread(v: &[f64], bytes: usize) -> String {
    let m = median(v);
    if bytes == 0 {
        return format!("{:.1} µs", m * 1e6);
    }
    let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = v.iter().cloned().fold(0.0, f64::max);
    if v.len() > 1 {
        format!(
            "{:.0} MB/s ({:.0}–{:.0} ms, median {:.0})",
            bytes as f64 / m / 1e6,
            lo * 1e3,
            hi * 1e3,
            m * 1e3
        )
    } else {
        format!("{:.0} MB/s ({:.0} ms)", bytes as f64 / m / 1e6, m * 1e3)
    }
}

fn markdown(
    opts: &Opts,
    table: &[(&'static str, Option<Measured>, f64)],
    suite_rows: &[Row],
    py: &serde_json::Map<String, serde_json::Value>,
    problems: &[String],
) -> String {
    let when = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let mut s = String::new();
    let _ = write!(
        s,
        "# Benchmarks\n\n\
         Generated by `cargo run --release -p tessera-bench -- all{}` ({when}); do not edit \
         by hand. Model: {} MiB of {} f32 tensors. Ratio = peer (or bound) time / Tessera \
         time: above 1, Tessera is faster.\n\n\
         Method: the two sides of a row alternate repetition by repetition (ABBA), \
         `sync` runs before every timed operation (one save's write-back is not paid by \
         the next), cold rows drop the page cache first, and each side's figure is the \
         median of at least 3 repetitions with its min–max. Rows taken from a suite are \
         that suite's best of `--reps`. The machine is shared: repeated runs move by tens \
         of percent; compare ratios, not MB/s.\n\n## Machine\n\n{}\n## The table\n\n\
         ![ratios](benchmarks.svg)\n\n\
         | operation | Tessera | peer or bound | ratio | goal | note |\n\
         | --- | --- | --- | --- | --- | --- |\n",
        if opts.quick { " --quick" } else { "" },
        opts.size_mib,
        opts.tensors,
        machine(py)
    );
    for (op, m, goal) in table {
        match m {
            Some(m) => {
                let r = m.ratio();
                let mark = if r >= *goal { "met" } else { "missed" };
                let _ = writeln!(
                    s,
                    "| {op} | {} | {}: {} | **{r:.2}x** | ≥ {goal}x ({mark}) | {} |",
                    spread(&m.ours, m.bytes),
                    m.peer,
                    spread(&m.theirs, m.bytes),
                    m.note
                );
            }
            None => {
                let _ = writeln!(s, "| {op} | – | – | – | ≥ {goal}x | not measured |");
            }
        }
    }
    if !problems.is_empty() {
        s += "\nNot measured in this run:\n\n";
        for p in problems {
            let _ = writeln!(s, "- {p}");
        }
    }
    s += "\n## Every suite\n\nEach suite's lines, best of its repetitions (MB/s).\n\n\
          | suite | measurement | Tessera | reference | ratio |\n| --- | --- | --- | --- | --- |\n";
    for r in suite_rows {
        s += &suite_line(r);
    }
    s
}

/// One row of the "Every suite" table.
fn suite_line(r: &Row) -> String {
    let mbs = |t: f64| r.bytes as f64 / t / 1e6;
    let (reference, ratio) = match &r.reference {
        Some((n, t)) => (
            format!("{n}: {:.0}", mbs(*t)),
            format!("{:.2}x", t / r.secs),
        ),
        None => ("–".into(), "–".into()),
    };
    format!(
        "| {} | {} | {:.0} | {reference} | {ratio} |\n",
        r.suite,
        r.name.replace('|', "/"),
        mbs(r.secs)
    )
}

/// `SUITE --update-docs`: the suite's lines just reported replace its earlier lines in
/// the "Every suite" table of benchmarks.md (appended to the table when it had none),
/// with a line saying when and at what size they were measured; the rest of the file is
/// left as the last `all` wrote it.
pub fn update_suite_rows(opts: &Opts, suite: &str) -> tessera::Result<()> {
    let out = opts.out.clone().unwrap_or_else(|| PathBuf::from("docs"));
    let path = out.join("benchmarks.md");
    let old = std::fs::read_to_string(&path)
        .map_err(|e| tessera::Error::from(e).at_subject(path.display().to_string()))?;
    let (old, kept) = old.split_at(old.find(KEPT_MARK).unwrap_or(old.len()));
    let prefix = format!("| {suite} | ");
    let mut lines: Vec<String> = old
        .lines()
        .filter(|l| !l.starts_with(&prefix))
        .filter(|l| !l.starts_with(&format!("Suite `{suite}` lines: ")))
        .map(str::to_string)
        .collect();
    let table_end = lines
        .iter()
        .rposition(|l| l.starts_with("| "))
        .map(|i| i + 1)
        .unwrap_or(lines.len());
    let when = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let rows: Vec<String> = take_rows()
        .iter()
        .map(|r| suite_line(r).trim_end().to_string())
        .collect();
    let note = format!(
        "Suite `{suite}` lines: `tessera-bench {suite} --update-docs` ({when}, {} MiB, {} tensors, median of {} interleaved repetitions).",
        opts.size_mib,
        opts.tensors,
        opts.reps.max(1)
    );
    let at = table_end;
    lines.splice(at..at, rows);
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    lines.push(String::new());
    lines.push(note);
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(&path, with_kept(text, kept))?;
    println!("updated {}", path.display());
    Ok(())
}

/// The line of benchmarks.md after which sections written by their own scripts
/// (scripts/bench-sharded.sh) begin: `all` and `SUITE --update-docs` keep them.
pub const KEPT_MARK: &str =
    "<!-- Sections below are written by their own scripts; `tessera-bench all` keeps them. -->";

/// `md` followed by what `old` holds from [`KEPT_MARK`] on (nothing when it has none).
fn with_kept(mut md: String, old: &str) -> String {
    if let Some(at) = old.find(KEPT_MARK) {
        while md.ends_with("\n\n") {
            md.pop();
        }
        if !md.ends_with('\n') {
            md.push('\n');
        }
        md.push('\n');
        md.push_str(&old[at..]);
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewritten_page_keeps_the_sections_after_the_mark() {
        let kept =
            format!("{KEPT_MARK}\n\n## Loading at scale\n\n| a | b |\n| --- | --- |\n| 1 | 2 |\n");
        let old = format!("# Benchmarks\n\nold table\n\n{kept}");
        let new = with_kept("# Benchmarks\n\nnew table\n".to_string(), &old);
        assert_eq!(new, format!("# Benchmarks\n\nnew table\n\n{kept}"));
        // Without the mark nothing is appended (a page the scripts never touched).
        let plain = with_kept("# B\n".to_string(), "# B\n\n## other\n");
        assert_eq!(plain, "# B\n");
    }
}
