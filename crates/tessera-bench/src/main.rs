//! `cargo run --release -p tessera-bench -- <suite> [--size-mib N]`
//!
//! Each suite prints throughput in MB/s for Tessera and, in the same run, for the bound
//! or peer it is measured against, and the ratio. Timings are printed, never asserted.

// Shared pieces are used by suites that land one format at a time.
mod aero;
#[allow(dead_code)]
mod common;
mod fold;
mod foundation;
mod gguf;
mod gguf_quants;
mod gptrs;
mod identity;
mod npy;
mod safetensors;
mod wtxt;
mod ztensor;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let suite = args.first().map(String::as_str).unwrap_or("help");
    let opts = common::Opts::parse(&args[1.min(args.len())..]);
    let result = match suite {
        "baseline" => common::baseline(&opts),
        "aero" => aero::run(&opts),
        "fold" => fold::run(&opts),
        "foundation" => foundation::run(&opts),
        "gguf" => gguf::run(&opts),
        "gguf-quants" => gguf_quants::run(&opts),
        "gptrs" => gptrs::run(&opts),
        "identity" => identity::run(&opts),
        "npy" => npy::run(&opts),
        "safetensors" => safetensors::run(&opts),
        "wtxt" => wtxt::run(&opts),
        "ztensor" => ztensor::run(&opts),
        _ => {
            eprintln!(
                "suites: baseline aero fold foundation gguf gguf-quants gptrs identity npy safetensors wtxt ztensor"
            );
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("tessera-bench: {e}");
        std::process::exit(1);
    }
}
