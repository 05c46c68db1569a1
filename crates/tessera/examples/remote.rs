//! Read a model over the network: an `http(s)://`, `s3://` or `hf://` URL (ranged
//! reads: only the header and the tensors asked for are fetched).
//!
//! `cargo run -p tessera --features remote --example remote -- URL [TENSOR]`
//!
//! Credentials come from the environment (`AWS_*`, `HF_TOKEN`, `TESSERA_HTTP_TOKEN`), as
//! in the CLI. Without the `remote` feature the open is refused with a clear error.

use tessera::ReadOptions;

fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(url) = args.next() else {
        eprintln!("usage: remote URL [TENSOR]");
        eprintln!("  e.g. remote https://huggingface.co/ORG/REPO/resolve/main/model.safetensors");
        return std::process::ExitCode::from(2);
    };
    match run(&url, args.next()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(url: &str, tensor: Option<String>) -> tessera::Result<()> {
    // The same opener as for a local path: a URL parses as a remote location.
    let opened = tessera::open_path(url, &ReadOptions::default())?;
    let file = opened.container();
    println!(
        "{url}: {} {}, {} tensors",
        file.format().name(),
        file.version(),
        file.tensor_infos().len()
    );
    for info in file.tensor_infos().iter().take(10) {
        println!("  {} {} {:?}", info.name, info.dtype, info.shape);
    }
    if let Some(name) = tensor {
        // Fetches this tensor's byte range only, checked against the file's digests.
        let t = file.tensor(&name)?;
        println!("{name}: {} bytes read", t.nbytes());
    }
    let (requests, bytes) = tessera::remote::totals();
    println!("{requests} requests, {bytes} bytes fetched");
    Ok(())
}
