//! `convert --no-fsync`: the same file as a durable convert, still written atomically
//! (no temporary left beside it, an existing target replaced whole).

use std::borrow::Cow;
use std::path::Path;
use std::process::Command;

use tessera::{DType, Format, Model, TensorInfo, TensorView};

fn source(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("m.safetensors");
    let mut m = Model::new();
    for (name, n) in [("big", 5usize << 20), ("small", 1000)] {
        let w: Vec<u8> = (0..n as u32)
            .flat_map(|i| ((i % 13) as f32).to_le_bytes())
            .collect();
        let info = TensorInfo::dense(name, DType::F32, vec![n as u64]);
        m.push(TensorView::dense(info, Cow::Owned(w)).unwrap())
            .unwrap();
    }
    tessera::convert::write_file(Format::Safetensors, &m, &p, &Default::default()).unwrap();
    p
}

#[test]
fn no_fsync_writes_the_same_file_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    let durable = dir.path().join("d.zt");
    let quick = dir.path().join("q.zt");
    std::fs::write(&quick, b"an old file to replace").unwrap();
    for (out, extra) in [(&durable, None), (&quick, Some("--no-fsync"))] {
        let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .arg("convert")
            .arg(&src)
            .arg(out)
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let (a, b) = (
        std::fs::read(&durable).unwrap(),
        std::fs::read(&quick).unwrap(),
    );
    assert!(a.len() > 20 << 20);
    assert!(a == b, "--no-fsync wrote different bytes");
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.ends_with(".tmp")),
        "temporary left behind: {names:?}"
    );
}
