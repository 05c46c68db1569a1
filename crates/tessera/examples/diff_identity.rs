//! Compare two models value by value, and compute a model's content identity: a digest
//! of its tensors (name, dtype, shape, values) that does not depend on the container,
//! so the same model in safetensors and in zTensor has the same identity.
//!
//! `cargo run -p tessera --example diff_identity`

use tessera::diff::DiffOptions;
use tessera::{Format, Model, ReadOptions, TensorView, WriteOptions};

fn write(path: &std::path::Path, format: Format, w: &[f32]) -> tessera::Result<()> {
    let mut model = Model::new();
    model.push(TensorView::from_slice("w", vec![w.len() as u64], w)?)?;
    model.push(TensorView::from_slice("b", vec![2], &[0.5f32, -0.5])?)?;
    tessera::convert::write_file(format, &model, path, &WriteOptions::default()).map(|_| ())
}

fn main() -> tessera::Result<()> {
    let dir = tempfile::tempdir()?;
    let a = dir.path().join("a.safetensors");
    let b = dir.path().join("b.zt");
    let c = dir.path().join("c.safetensors");
    write(&a, Format::Safetensors, &[1.0, 2.0, 3.0])?;
    write(&b, Format::Ztensor, &[1.0, 2.0, 3.0])?; // same values, other format
    write(&c, Format::Safetensors, &[1.0, 2.0, 3.001])?; // one value moved

    let open = |p: &std::path::Path| tessera::open_path(p, &ReadOptions::default());
    let (a, b, c) = (open(&a)?, open(&b)?, open(&c)?);

    // Identity: tensors only (pass `true` to include the metadata).
    let id_a = tessera::identity::model_id(a.container(), false)?;
    let id_b = tessera::identity::model_id(b.container(), false)?;
    let id_c = tessera::identity::model_id(c.container(), false)?;
    println!("identity a (safetensors): {}", id_a.root);
    println!("identity b (zTensor):     {}", id_b.root);
    println!("identity c (changed):     {}", id_c.root);
    assert_eq!(id_a.root, id_b.root);
    assert_ne!(id_a.root, id_c.root);

    // Diff: exact, then with numpy's `isclose` tolerance.
    for opts in [DiffOptions::new(), DiffOptions::new().atol(1e-2)] {
        let d = tessera::diff::diff(a.container(), c.container(), &opts)?;
        println!(
            "atol {}: {} changed, {} within tolerance",
            opts.atol,
            d.changed.len(),
            d.within_tolerance.len()
        );
        for t in d.changed.iter().chain(&d.within_tolerance) {
            println!(
                "  {}: bytes equal {}, values {:?}",
                t.name, t.bytes_equal, t.values
            );
        }
    }
    Ok(())
}
