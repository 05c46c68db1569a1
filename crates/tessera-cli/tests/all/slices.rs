//! `tessera extract FILE NAME --slice SPEC -o OUT`: part of a tensor, numpy's slicing
//! syntax; the elements equal a cut of the whole tensor computed here; out-of-range
//! bounds refused naming the tensor and dimension; a slice of a tensor whose format
//! keeps only a whole-tensor digest says on stderr that it is unverified.

use std::borrow::Cow;
use std::path::Path;

use tessera::{DType, Format, Model, TensorInfo, TensorSource, TensorView};

use crate::common::run;

/// `w`: f32 64×64 whose element (r, c) is r * 64 + c.
fn source(dir: &Path) -> std::path::PathBuf {
    let mut m = Model::new();
    let w: Vec<u8> = (0..64 * 64)
        .flat_map(|i| (i as f32).to_le_bytes())
        .collect();
    let info = TensorInfo::dense("w", DType::F32, vec![64, 64]);
    m.push(TensorView::dense(info, Cow::Owned(w)).unwrap())
        .unwrap();
    let p = dir.join("src.safetensors");
    tessera::convert::write_file(Format::Safetensors, &m, &p, &Default::default()).unwrap();
    p
}

/// The one tensor of an extracted file: shape and values.
fn read_out(path: &Path) -> (Vec<u64>, Vec<f32>) {
    let f = tessera::open_path(path, &Default::default()).unwrap();
    let c = f.container();
    let name = c.tensor_infos()[0].name.clone();
    let v = c.tensor(&name).unwrap();
    let vals = v.parts[0]
        .bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    (v.info.shape.clone(), vals)
}

#[test]
fn extract_slice_cuts_as_numpy_in_every_raw_format() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    // (slice, shape, element (r, c) of each output position in order)
    let cases: &[(&str, Vec<u64>, Vec<(u64, u64)>)] = &[
        (
            "2:4,:",
            vec![2, 64],
            (2..4).flat_map(|r| (0..64).map(move |c| (r, c))).collect(),
        ),
        ("-1", vec![64], (0..64).map(|c| (63, c)).collect()),
        (
            "::-30,5:9:2",
            vec![3, 2],
            [63, 33, 3]
                .iter()
                .flat_map(|&r| [5, 7].map(|c| (r, c)))
                .collect(),
        ),
        ("...,-2", vec![64], (0..64).map(|r| (r, 62)).collect()),
    ];
    for (label, ext, flags) in [
        ("safetensors", "safetensors", &[][..]),
        ("zt", "zt", &[][..]),
        ("zt-zstd", "zt", &["--compress", "zstd"][..]),
        ("npy", "npy", &[][..]),
    ] {
        let file = dir.path().join(format!("{label}.{ext}"));
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"convert", &src, &file];
        for f in flags {
            args.push(f);
        }
        let o = run(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let name = if ext == "npy" { "array" } else { "w" };
        for (spec, shape, cells) in cases {
            let out = dir.path().join("out.safetensors");
            let o = run(&[&"extract", &file, &name, &"--slice", spec, &"-o", &out]);
            assert!(
                o.status.success(),
                "{label} {spec}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let (got_shape, got) = read_out(&out);
            assert_eq!(&got_shape, shape, "{label} {spec}");
            let want: Vec<f32> = cells.iter().map(|&(r, c)| (r * 64 + c) as f32).collect();
            assert_eq!(got, want, "{label} {spec}");
        }
    }
}

#[test]
fn extract_slice_refuses_out_of_range_and_says_unverified() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    let out = dir.path().join("o.npy");
    let o = run(&[&"extract", &src, &"w", &"--slice", &"0:65,:", &"-o", &out]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("\"w\"") && err.contains("dimension 0 of size 64"),
        "{err}"
    );
    assert!(!out.exists());
    let o = run(&[&"extract", &src, &"w", &"--slice", &"1,2,3", &"-o", &out]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("3 indices for a tensor of 2"));

    let zt = dir.path().join("d.zt");
    assert!(run(&[&"convert", &src, &zt, &"--digest", &"sha256"])
        .status
        .success());
    let o = run(&[&"extract", &zt, &"w", &"--slice", &"0:2", &"-o", &out]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(err.matches("unverified").count(), 1, "{err}");
    assert!(err.contains("sha256"), "{err}");
    // Without --slice the whole tensor is read and checked: nothing to say.
    let o = run(&[&"extract", &zt, &"w", &"-o", &out]);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("unverified"));
}
