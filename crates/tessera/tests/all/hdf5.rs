//! HDF5: vectors written by h5py (tests/data/hdf5/gen.py) read with the values and
//! attributes h5py read back (expected.json); refusals name what they refuse; a group
//! cycle and every single-byte corruption of a valid file are clean errors, never a
//! panic.

use tessera::{ErrorKind, ReadOptions};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/hdf5/");

fn load(name: &str) -> Vec<u8> {
    std::fs::read(format!("{DIR}{name}")).unwrap()
}

fn open(data: &[u8]) -> tessera::Result<Box<dyn tessera::Container + '_>> {
    tessera::open(data, &ReadOptions::default())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn h5py_vectors_read_as_h5py_reads_them() {
    let s = std::fs::read_to_string(format!("{DIR}expected.json")).unwrap();
    let all: serde_json::Value = serde_json::from_str(&s).unwrap();
    let all = all.as_object().unwrap();
    assert!(all.len() >= 2);
    for (file, want) in all {
        let data = load(file);
        let f = open(&data).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(f.format(), tessera::Format::Hdf5);
        let tensors = want["tensors"].as_object().unwrap();
        let mut names: Vec<&str> = f.tensor_infos().iter().map(|t| t.name.as_str()).collect();
        names.sort();
        let mut wanted: Vec<&str> = tensors.keys().map(String::as_str).collect();
        wanted.sort();
        assert_eq!(names, wanted, "{file}");
        for (name, t) in tensors {
            let v = f
                .tensor(name)
                .unwrap_or_else(|e| panic!("{file} {name}: {e}"));
            assert_eq!(
                v.info.dtype.name(),
                t["dtype"].as_str().unwrap(),
                "{file} {name}"
            );
            let shape: Vec<u64> = t["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect();
            assert_eq!(v.info.shape, shape, "{file} {name}");
            assert_eq!(
                hex(v.data().unwrap()),
                t["hex"].as_str().unwrap(),
                "{file} {name}"
            );
        }
        let meta: serde_json::Map<String, serde_json::Value> = f
            .metadata()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_json()))
            .collect();
        assert_eq!(
            &serde_json::Value::Object(meta),
            &want["metadata"],
            "{file}"
        );
        assert!(f.warnings().is_empty(), "{file}: {:?}", f.warnings());
    }
}

#[test]
fn big_endian_and_unwritten_datasets_are_described() {
    let data = load("valid-nested.h5");
    let f = open(&data).unwrap();
    let info = |n: &str| {
        f.tensor_infos()
            .iter()
            .find(|t| t.name == n)
            .unwrap()
            .clone()
    };
    assert!(info("a/be_f64").storage.encoding.contains("big-endian"));
    assert_eq!(info("compact_f32").storage.encoding, "compact");
    assert_eq!(info("unwritten").storage.encoding, "contiguous, unwritten");
    // h5py's fill value 7, as int32.
    assert_eq!(
        f.tensor("unwritten").unwrap().data().unwrap(),
        [7, 0, 0, 0].repeat(4)
    );
    assert_eq!(f.tensor("nope").unwrap_err().kind(), ErrorKind::NotFound);
}

#[test]
fn refusals_name_what_they_refuse() {
    for (file, words) in [
        ("unsupported-lzf.h5", "lzf"),
        ("unsupported-latest.h5", "superblock version"),
        ("unsupported-complex.h5", "compound"),
    ] {
        let data = load(file);
        let e = match open(&data) {
            Ok(_) => panic!("{file} opened"),
            Err(e) => e,
        };
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{file}: {e}");
        assert!(e.to_string().contains(words), "{file}: {e}");
    }
}

#[test]
fn a_group_that_contains_itself_is_refused() {
    let data = load("malformed-cycle.h5");
    let e = open(&data).err().expect("a cycle opened");
    assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
    assert!(e.to_string().contains("cycle"), "{e}");
}

/// Every byte of a valid file flipped in turn: each open and read ends in a value or an
/// error, never a panic, and reads stay within the limits.
#[test]
fn every_single_byte_corruption_is_survived() {
    for file in ["valid-nested.h5", "valid-keras_weights.h5"] {
        let good = load(file);
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0xff;
            let opts = ReadOptions::default().limits(tessera::fuzzing::fuzz_limits());
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                if let Ok(f) = tessera::open(&bad[..], &opts) {
                    for t in f.tensor_infos() {
                        let _ = f.tensor(&t.name);
                    }
                }
            }));
            assert!(r.is_ok(), "{file}: byte {i} flipped panics");
        }
    }
}

/// The conversion matrix's rows for HDF5 (read only): every valid vector converts to
/// every writable format that holds a model, each tensor read back with the bytes, dtype
/// and shape h5py gave, or the conversion is refused naming the flag that allows it.
#[test]
fn every_vector_converts_to_every_writable_format_or_names_the_flag() {
    use tessera::convert::{prepare, write_to};
    use tessera::{ConvertOptions, Format, WriteOptions};
    let mut converted = 0;
    for file in [
        "valid-nested.h5",
        "valid-keras_weights.h5",
        "valid-chunked.h5",
    ] {
        let data = load(file);
        let src = open(&data).unwrap();
        for to in Format::ALL {
            if !to.can_write() || to.identity().single_tensor {
                continue;
            }
            let mut opts = ConvertOptions::default();
            let prepared = loop {
                match prepare(src.as_ref(), to, opts) {
                    Ok(p) => break Some(p),
                    Err(e) => {
                        let m = e.to_string();
                        // The refusal names the option that allows it; metadata is
                        // the one a lossless conversion may give up.
                        assert!(
                            m.contains("option: ") || m.contains("--"),
                            "{file} → {to}: {m}"
                        );
                        if m.contains("drop-metadata") && !opts.drop_metadata {
                            opts = opts.drop_metadata(true);
                            continue;
                        }
                        eprintln!("{file} → {to}: refused: {m}");
                        break None;
                    }
                }
            };
            let Some(prepared) = prepared else { continue };
            let mut out = std::io::Cursor::new(Vec::new());
            if let Err(e) = write_to(to, &prepared, &mut out, &WriteOptions::default()) {
                assert!(e.to_string().contains("--"), "{file} → {to}: {e}");
                continue;
            }
            let bytes = out.into_inner();
            let back = open(&bytes).unwrap_or_else(|e| panic!("{file} → {to}: {e}"));
            for t in src.tensor_infos() {
                let want = src.tensor(&t.name).unwrap();
                let got = back
                    .tensor(&t.name)
                    .unwrap_or_else(|e| panic!("{file} → {to}: {}: {e}", t.name));
                assert_eq!(got.info.dtype, t.dtype, "{file} → {to}: {}", t.name);
                assert_eq!(got.info.shape, t.shape, "{file} → {to}: {}", t.name);
                assert_eq!(
                    got.data().unwrap(),
                    want.data().unwrap(),
                    "{file} → {to}: {}",
                    t.name
                );
            }
            converted += 1;
        }
    }
    eprintln!("{converted} conversions");
    assert!(converted >= 6, "{converted} conversions");
}
