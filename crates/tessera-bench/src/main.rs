//! `cargo run --release -p tessera-bench -- <suite> [--size-mib N]`, or `-- all` for
//! every suite plus the benchmark table (Rust and Python rows), written to
//! docs/benchmarks.md and docs/benchmarks.svg ([`all`]).
//!
//! Each suite prints throughput in MB/s for Tessera and, in the same run, for the bound
//! or peer it is measured against, and the ratio. Timings are printed, never asserted.

// Shared pieces are used by suites that land one format at a time.
mod aero;
mod all;
mod chart;
#[allow(dead_code)]
mod common;
mod fold;
mod foundation;
mod gguf;
mod gguf_quants;
mod gptrs;
mod identity;
mod issue;
mod npy;
mod remote;
mod safetensors;
mod stats;
mod wtxt;
mod ztensor;

/// Every suite, in the order `all` runs them.
const SUITES: &[all::Suite] = &[
    ("baseline", common::baseline),
    ("foundation", foundation::run),
    ("ztensor", ztensor::run),
    ("safetensors", safetensors::run),
    ("npy", npy::run),
    ("fold", fold::run),
    ("aero", aero::run),
    ("gptrs", gptrs::run),
    ("gguf", gguf::run),
    ("gguf-quants", gguf_quants::run),
    ("wtxt", wtxt::run),
    ("identity", identity::run),
    ("stats", stats::run),
    ("remote", remote::run),
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let suite = args.first().map(String::as_str).unwrap_or("help");
    let opts = common::Opts::parse(&args[1.min(args.len())..]);
    let result = match suite {
        "all" => all::run(&opts, SUITES),
        "table" => all::run(&opts, &[]),
        name => match SUITES.iter().find(|(n, _)| *n == name) {
            Some((_, run)) => {
                crate::common::set_suite(name);
                run(&opts).and_then(|()| match opts.update_docs {
                    true => all::update_suite_rows(&opts, name),
                    false => Ok(()),
                })
            }
            None => {
                let names: Vec<&str> = SUITES.iter().map(|(n, _)| *n).collect();
                eprintln!("suites: all table {}", names.join(" "));
                std::process::exit(2);
            }
        },
    };
    if let Err(e) = result {
        eprintln!("tessera-bench: {e}");
        std::process::exit(1);
    }
}
