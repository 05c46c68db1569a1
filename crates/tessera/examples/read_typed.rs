//! Open a file (format detected by its bytes) and read its tensors as typed values.
//!
//! `cargo run -p tessera --example read_typed [FILE]`: without FILE it writes a small
//! safetensors file into a temporary directory and reads that.

use tessera::{Model, ReadOptions, TensorView};

fn main() -> tessera::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = match std::env::args_os().nth(1) {
        Some(p) => p.into(),
        None => {
            // A small model held in memory, written as safetensors.
            let mut model = Model::new();
            model.push(TensorView::from_slice(
                "w",
                vec![2, 3],
                &[1.0f32, 2., 3., 4., 5., 6.],
            )?)?;
            model.push(TensorView::from_slice("step", vec![], &[7i64])?)?;
            let path = dir.path().join("small.safetensors");
            tessera::convert::write_file(
                tessera::Format::Safetensors,
                &model,
                &path,
                &tessera::WriteOptions::default(),
            )?;
            path
        }
    };

    // Checked reads (every digest the format stores is compared before bytes are
    // handed out), files mapped read-only. A model set's index, a shard or a
    // directory opens the same way.
    let opened = tessera::open_path(&path, &ReadOptions::default())?;
    let file = opened.container();
    println!(
        "{} ({} {})",
        path.display(),
        file.format().name(),
        file.version()
    );
    for info in file.tensor_infos() {
        let t = file.tensor(&info.name)?; // zero-copy when stored raw
                                          // `to_vec::<T>` refuses a dtype that is not T's: cast explicitly if you need to.
        let shown = match info.dtype {
            tessera::DType::F32 => format!("{:?}", t.to_vec::<f32>()?),
            tessera::DType::I64 => format!("{:?}", t.to_vec::<i64>()?),
            other => format!("({other}, {} bytes)", t.nbytes()),
        };
        println!("  {} {:?} {}", info.name, info.shape, shown);
    }
    Ok(())
}
