//! Convert a file into another format with writer options, then verify the result.
//!
//! `cargo run -p tessera --example convert`: writes a small float64 safetensors file,
//! converts it to zTensor (zstd-compressed, SHA-256 digests) casting float64 to
//! float32 as explicitly allowed, and verifies every digest of the output.

use tessera::convert::{Compression, Digest};
use tessera::{ConvertOptions, Format, Model, ReadOptions, TensorView, WriteOptions};

fn main() -> tessera::Result<()> {
    let dir = tempfile::tempdir()?;
    let src = dir.path().join("in.safetensors");
    let mut model = Model::new();
    let values: Vec<f64> = (0..1000).map(|i| f64::from(i) / 10.0).collect();
    model.push(TensorView::from_slice("embed", vec![10, 100], &values)?)?;
    tessera::convert::write_file(Format::Safetensors, &model, &src, &WriteOptions::default())?;

    // Writer options: what the target format stores (each format declares the options
    // it takes; one it does not take is refused, not ignored).
    let wopts = WriteOptions::default()
        .compression(Compression::Zstd(3))
        .digests(vec![Digest::Sha256]);
    // Conversion options: each loss allowed explicitly. `cast` lets a dtype the target
    // cannot hold become the nearest one it can (said in the report's notes); zTensor
    // holds float64, so nothing is cast here.
    let copts = ConvertOptions::default().cast(true);

    let dst = dir.path().join("out.zt");
    let opened = tessera::open_path(&src, &ReadOptions::default())?;
    let report =
        tessera::convert::convert_file(opened.container(), Format::Ztensor, &dst, copts, &wopts)?;
    for note in &report.notes {
        println!("note: {note}");
    }
    println!(
        "{} -> {} ({} bytes)",
        src.display(),
        dst.display(),
        std::fs::metadata(&dst)?.len()
    );

    // Every integrity layer of the output, at once.
    let out = tessera::open_path(&dst, &ReadOptions::default())?;
    let verdict = out.container().verify(&tessera::VerifyOptions::default());
    println!("verify: {}", if verdict.is_ok() { "ok" } else { "FAILED" });
    assert!(verdict.is_ok());
    Ok(())
}
