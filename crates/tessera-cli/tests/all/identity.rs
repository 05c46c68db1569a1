//! `tessera id`, `sign` and `verify --signature`: one identity for a model in every
//! format, and a signature that survives conversion but not a changed byte, name, dtype
//! or shape, a swapped file, another key or a damaged signature file.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::process::Output;

use tessera::convert::{capabilities, prepare, write_file, MetadataSupport};
use tessera::{ConvertOptions, DType, Format, Model, TensorInfo, TensorView, WriteOptions};

use crate::common::{run, tessera, text};

/// Three f32 tensors (the dtype every format holds), one of them 2-D, and metadata.
fn model(scale: f32) -> Model {
    let mut m = Model::new();
    m.metadata.insert("general.architecture", "test");
    for (name, shape) in [
        ("embed.weight", vec![16u64, 8]),
        ("head.bias", vec![8]),
        ("norm", vec![3]),
    ] {
        let n: u64 = shape.iter().product();
        let bytes: Vec<u8> = (0..n)
            .flat_map(|i| (i as f32 * scale - 3.0).to_le_bytes())
            .collect();
        m.push(
            TensorView::dense(
                TensorInfo::dense(name, DType::F32, shape),
                Cow::Owned(bytes),
            )
            .unwrap(),
        )
        .unwrap();
    }
    m
}

/// Writes `m` as `format` under `dir`, dropping metadata where the format has none.
fn write(m: &Model, format: Format, dir: &Path) -> PathBuf {
    let caps = capabilities(format).unwrap();
    let opts = ConvertOptions::default().drop_metadata(caps.metadata == MetadataSupport::None);
    // zTensor v2 shares `.zt` with v1: it gets a name of its own here.
    let ext = format
        .extensions()
        .first()
        .copied()
        .unwrap_or(format.name());
    let p = dir.join(format!("m.{ext}"));
    let prepared = prepare(m, format, opts).unwrap();
    write_file(format, &prepared, &p, &WriteOptions::default()).unwrap();
    p
}

/// Formats that hold several named f32 tensors (every writable one but `.npy`, which
/// holds one array).
fn formats() -> Vec<Format> {
    Format::ALL
        .into_iter()
        .filter(|f| f.can_read() && f.can_write() && *f != Format::Npy)
        .collect()
}

fn id_json(path: &Path, extra: &[&str]) -> serde_json::Value {
    let mut c = tessera();
    c.arg("id").arg("--json").args(extra).arg(path);
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn one_model_has_one_id_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(0.5);
    let mut ids = Vec::new();
    for f in formats() {
        let p = write(&m, f, dir.path());
        let doc = id_json(&p, &[]);
        assert_eq!(doc["tensors"].as_array().unwrap().len(), 3, "{f}");
        ids.push((f, doc["id"].as_str().unwrap().to_string()));
    }
    assert!(ids.len() >= 8, "{ids:?}");
    for (f, id) in &ids {
        assert!(id.starts_with("blake3:") && id.len() == 7 + 64, "{f}: {id}");
        assert_eq!(id, &ids[0].1, "{f} differs from {}", ids[0].0);
    }
}

#[test]
fn a_changed_byte_name_dtype_or_shape_changes_the_id() {
    let dir = tempfile::tempdir().unwrap();
    let base = id_json(&write(&model(0.5), Format::Safetensors, dir.path()), &[]);
    let variants: Vec<(&str, Model)> = vec![
        ("one value", {
            let mut m = model(0.5);
            let mut bytes = m.tensor_bytes("norm");
            bytes[0] ^= 1;
            m.replace("norm", DType::F32, vec![3], bytes);
            m
        }),
        ("a name", {
            let mut m = model(0.5);
            let bytes = m.tensor_bytes("norm");
            m.remove("norm");
            m.push_dense("norm2", DType::F32, vec![3], bytes);
            m
        }),
        ("a dtype", {
            let mut m = model(0.5);
            let bytes = m.tensor_bytes("norm");
            m.replace("norm", DType::I32, vec![3], bytes);
            m
        }),
        ("a shape", {
            let mut m = model(0.5);
            let bytes = m.tensor_bytes("embed.weight");
            m.replace("embed.weight", DType::F32, vec![8, 16], bytes);
            m
        }),
    ];
    for (what, m) in variants {
        let sub = dir.path().join(what.replace(' ', "_"));
        std::fs::create_dir(&sub).unwrap();
        let doc = id_json(&write(&m, Format::Safetensors, &sub), &[]);
        assert_ne!(doc["id"], base["id"], "changing {what} kept the id");
    }
}

#[test]
fn metadata_changes_the_id_only_when_included() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(&model(0.5), Format::Aero, dir.path());
    let mut other = model(0.5);
    other.metadata.insert("general.architecture", "changed");
    let sub = dir.path().join("b");
    std::fs::create_dir(&sub).unwrap();
    let b = write(&other, Format::Aero, &sub);
    assert_eq!(id_json(&a, &[])["id"], id_json(&b, &[])["id"]);
    let (am, bm) = (id_json(&a, &["--metadata"]), id_json(&b, &["--metadata"]));
    assert_ne!(am["id"], bm["id"]);
    assert_ne!(am["id"], id_json(&a, &[])["id"]);
    assert!(am["metadata"].as_str().unwrap().starts_with("blake3:"));
}

struct Signed {
    dir: tempfile::TempDir,
    key: PathBuf,
    sig: PathBuf,
}

fn signed() -> Signed {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("signer");
    assert!(run(&[&"keygen", &"-o", &key]).status.success());
    let src = write(&model(0.5), Format::Safetensors, dir.path());
    let sig = dir.path().join("model.sig");
    let o = run(&[&"sign", &src, &"--key", &key, &"-o", &sig]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    Signed { dir, key, sig }
}

fn verify(s: &Signed, file: &Path, extra: &[&str]) -> Output {
    let mut c = tessera();
    c.arg("verify")
        .arg(file)
        .arg("--signature")
        .arg(&s.sig)
        .arg("--public-key")
        .arg(s.key.with_extension("pub"))
        .args(extra);
    c.output().unwrap()
}

#[test]
fn a_signature_verifies_after_conversion_to_every_format() {
    let s = signed();
    for f in formats() {
        let sub = s.dir.path().join(f.name());
        std::fs::create_dir(&sub).unwrap();
        let p = write(&model(0.5), f, &sub);
        let o = verify(&s, &p, &[]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(0), "{f}: {t}");
        assert!(t.contains("signed manifest"), "{f}: {t}");
    }
}

#[test]
fn each_kind_of_tampering_is_caught_and_named() {
    let s = signed();
    let d = s.dir.path();
    // A tensor changed by one value, after conversion.
    let mut m = model(0.5);
    let mut bytes = m.tensor_bytes("head.bias");
    bytes[5] ^= 0x40;
    m.replace("head.bias", DType::F32, vec![8], bytes);
    let sub = d.join("tampered");
    std::fs::create_dir(&sub).unwrap();
    let p = write(&m, Format::Ztensor, &sub);
    let o = verify(&s, &p, &[]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("head.bias") && t.contains("FAILED"), "{t}");
    assert!(!t.contains("\"norm\": FAILED"), "{t}");

    // A renamed tensor: the signed name is missing, the new one is unexpected.
    let mut m = model(0.5);
    let bytes = m.tensor_bytes("norm");
    m.remove("norm");
    m.push_dense("norm_renamed", DType::F32, vec![3], bytes);
    let sub = d.join("renamed");
    std::fs::create_dir(&sub).unwrap();
    let t = text(&verify(&s, &write(&m, Format::Aero, &sub), &[]));
    assert!(
        t.contains("missing from the file") && t.contains("norm_renamed"),
        "{t}"
    );

    // Another model entirely (a different scale: every tensor differs).
    let sub = d.join("other");
    std::fs::create_dir(&sub).unwrap();
    let o = verify(&s, &write(&model(2.0), Format::Safetensors, &sub), &[]);
    assert_eq!(o.status.code(), Some(1));

    // The wrong key.
    let other_key = d.join("other_key");
    assert!(run(&[&"keygen", &"-o", &other_key]).status.success());
    let src = d.join("m.safetensors");
    let mut c = tessera();
    c.arg("verify").arg(&src).arg("--signature").arg(&s.sig);
    c.arg("--public-key").arg(other_key.with_extension("pub"));
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("not by the trusted key"), "{}", text(&o));

    // A truncated signature file: malformed (exit 4), never "ok".
    let sig = std::fs::read(&s.sig).unwrap();
    std::fs::write(&s.sig, &sig[..sig.len() / 2]).unwrap();
    let o = verify(&s, &src, &[]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    std::fs::write(&s.sig, &sig).unwrap();
    assert_eq!(verify(&s, &src, &[]).status.code(), Some(0));
}

#[test]
fn partial_verification_checks_only_the_named_tensors() {
    let s = signed();
    let mut m = model(0.5);
    let mut bytes = m.tensor_bytes("head.bias");
    bytes[0] ^= 1;
    m.replace("head.bias", DType::F32, vec![8], bytes);
    let sub = s.dir.path().join("partial");
    std::fs::create_dir(&sub).unwrap();
    let p = write(&m, Format::Fold, &sub);
    // The damaged tensor is not among those named: ok, and it says what was skipped.
    let o = verify(&s, &p, &["--tensor", "norm", "--tensor", "embed.weight"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("not checked"), "{t}");
    // Named, it fails.
    let o = verify(&s, &p, &["--tensor", "head.bias"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // A name the manifest does not have fails too.
    let o = verify(&s, &p, &["--tensor", "nope"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

/// The ECDSA P-256 pair written by Python's `cryptography` for the model-signing vectors.
fn pem_keys() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tessera/tests/data/model_signing")
}

#[test]
fn ecdsa_p256_keys_sign_manifests_that_survive_conversion() {
    let dir = tempfile::tempdir().unwrap();
    let src = write(&model(0.5), Format::Safetensors, dir.path());
    let sub = dir.path().join("gguf");
    std::fs::create_dir(&sub).unwrap();
    let converted = write(&model(0.5), Format::Gguf, &sub);
    let verify_with = |sig: &Path, public: &Path, file: &Path| {
        run(&[
            &"verify",
            &file,
            &"--signature",
            &sig,
            &"--public-key",
            &public,
        ])
    };
    // A PEM key another tool wrote.
    let sig = dir.path().join("pem.sig");
    let o = run(&[
        &"sign",
        &src,
        &"--key",
        &pem_keys().join("key.pem"),
        &"-o",
        &sig,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&sig).unwrap()).unwrap();
    assert_eq!(doc["signature"]["algorithm"], "ecdsa-p256");
    let o = verify_with(&sig, &pem_keys().join("key.pub.pem"), &converted);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = verify_with(&sig, &pem_keys().join("other.pub.pem"), &converted);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("not by the trusted key"), "{}", text(&o));
    // keygen's own P-256 pair; an Ed25519 key does not verify its signature.
    let key = dir.path().join("k");
    let o = run(&[&"keygen", &"--algorithm", &"ecdsa-p256", &"-o", &key]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(std::fs::read_to_string(&key)
        .unwrap()
        .starts_with("-----BEGIN PRIVATE KEY-----"));
    let o = run(&[&"sign", &src, &"--key", &key, &"-o", &sig]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = verify_with(&sig, &key.with_extension("pub"), &converted);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let ed = dir.path().join("ed");
    assert!(run(&[&"keygen", &"-o", &ed]).status.success());
    let o = verify_with(&sig, &ed.with_extension("pub"), &converted);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // A model-signing bundle needs an ECDSA key.
    let o = run(&[
        &"sign",
        &src,
        &"--format",
        &"model-signing",
        &"--key",
        &ed,
        &"-o",
        &sig,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn an_embedded_signature_travels_in_the_file_and_through_conversions() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = d.join("k");
    assert!(run(&[&"keygen", &"-o", &key]).status.success());
    let public = key.with_extension("pub");
    for format in [
        Format::Safetensors,
        Format::Gguf,
        Format::Ztensor,
        Format::Fold,
        Format::Aero,
    ] {
        let sub = d.join(format.name());
        std::fs::create_dir(&sub).unwrap();
        let src = write(&model(0.5), format, &sub);
        // Signed in place, metadata included.
        let o = run(&[
            &"sign",
            &src,
            &"--key",
            &key,
            &"--embed",
            &"--metadata",
            &"-o",
            &src,
        ]);
        assert_eq!(o.status.code(), Some(0), "{format}: {}", text(&o));
        let o = run(&[&"verify", &src, &"--public-key", &public, &"-v"]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(0), "{format}: {t}");
        assert!(t.contains("ok               metadata"), "{format}: {t}");
        // Without a key it is found, and said to be unchecked.
        let t = text(&run(&[&"verify", &src, &"-v"]));
        assert!(
            t.contains("embedded signature") && t.contains("not checked"),
            "{t}"
        );
        let t = text(&run(&[&"verify", &src]));
        assert!(
            t.contains("signed manifest") && t.contains("give --public-key to check it")
                || t.contains("nothing checked: it carries a signed manifest, and no --public-key"),
            "{format}: {t}"
        );
        // Converted into another format that keeps the key: still valid.
        let conv = sub.join("conv.fold");
        assert!(run(&[&"convert", &src, &conv]).status.success());
        let o = run(&[&"verify", &conv, &"--public-key", &public]);
        assert_eq!(o.status.code(), Some(0), "{format}: {}", text(&o));
        // The same key and value over different tensors: the changed tensor is named.
        let mut m = model(0.5);
        let mut bytes = m.tensor_bytes("norm");
        bytes[0] ^= 1;
        m.replace("norm", DType::F32, vec![3], bytes);
        let signed = tessera::FileData::open(&src).unwrap();
        let signed = tessera::open(&signed, &Default::default()).unwrap();
        let sig = signed.metadata().get("tessera.signature").unwrap().clone();
        // Stored in its canonical form: compact JSON, one line (it was indented).
        let tessera::Value::Str(stored) = &sig else {
            panic!("{format}: {sig:?}")
        };
        let doc: serde_json::Value = serde_json::from_str(stored).unwrap();
        assert_eq!(stored, &serde_json::to_string(&doc).unwrap(), "{format}");
        assert!(
            !stored.contains('\n') && doc["type"].is_string(),
            "{format}"
        );
        m.metadata.insert("tessera.signature", sig);
        let forged_dir = sub.join("forged");
        std::fs::create_dir(&forged_dir).unwrap();
        let forged = write(&m, format, &forged_dir);
        let o = run(&[&"verify", &forged, &"--public-key", &public]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{format}: {t}");
        assert!(
            t.contains("FAILED           tensor \"norm\""),
            "{format}: {t}"
        );
    }
    // Formats without metadata are refused, naming why.
    let sub = d.join("npz");
    std::fs::create_dir(&sub).unwrap();
    let src = write(&model(0.5), Format::Npz, &sub);
    let o = run(&[&"sign", &src, &"--key", &key, &"--embed", &"-o", &src]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("no metadata"), "{}", text(&o));
}

/// Small helpers on `Model` for building variants.
trait Edit {
    fn tensor_bytes(&self, name: &str) -> Vec<u8>;
    fn remove(&mut self, name: &str);
    fn replace(&mut self, name: &str, dtype: DType, shape: Vec<u64>, bytes: Vec<u8>);
    fn push_dense(&mut self, name: &str, dtype: DType, shape: Vec<u64>, bytes: Vec<u8>);
}

impl Edit for Model {
    fn tensor_bytes(&self, name: &str) -> Vec<u8> {
        use tessera::TensorSource;
        self.tensor(name).unwrap().data().unwrap().to_vec()
    }
    fn remove(&mut self, name: &str) {
        use tessera::TensorSource;
        let mut m = Model::new();
        m.metadata = self.metadata.clone();
        for info in self.tensor_infos() {
            if info.name != name {
                m.push(self.tensor(&info.name).unwrap()).unwrap();
            }
        }
        *self = m;
    }
    fn replace(&mut self, name: &str, dtype: DType, shape: Vec<u64>, bytes: Vec<u8>) {
        use tessera::TensorSource;
        let mut m = Model::new();
        m.metadata = self.metadata.clone();
        for info in self.tensor_infos() {
            if info.name == name {
                m.push_dense(name, dtype, shape.clone(), bytes.clone());
            } else {
                m.push(self.tensor(&info.name).unwrap()).unwrap();
            }
        }
        *self = m;
    }
    fn push_dense(&mut self, name: &str, dtype: DType, shape: Vec<u64>, bytes: Vec<u8>) {
        self.push(
            TensorView::dense(TensorInfo::dense(name, dtype, shape), Cow::Owned(bytes)).unwrap(),
        )
        .unwrap();
    }
}
