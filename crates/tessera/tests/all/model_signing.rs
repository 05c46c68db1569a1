//! OpenSSF model-signing bundles written by the `model-signing` package itself
//! (tests/data/model_signing/gen.py): Tessera verifies them, refuses another key, and
//! names a changed, missing or extra file. The other direction (model-signing accepting
//! Tessera's bundles) is tests/peers/test_model_signing.py.

use std::path::{Path, PathBuf};

use tessera::signing::bundle::{is_bundle, Bundle, Statement};
use tessera::signing::key::{PublicKey, SecretKey};
use tessera::{ErrorKind, Status, VerifyReport};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/model_signing")
}

fn key() -> PublicKey {
    PublicKey::load(&data().join("key.pub.pem")).unwrap()
}

fn statement(sig: &str) -> Statement {
    let bytes = std::fs::read(data().join(sig)).unwrap();
    assert!(is_bundle(&bytes));
    Bundle::parse(&bytes).unwrap().verify(&key()).unwrap()
}

fn check(st: &Statement, root: &Path) -> VerifyReport {
    let mut r = VerifyReport::default();
    st.check_files(root, &[], &mut r).unwrap();
    r
}

/// A copy of the model directory to damage.
fn copy_model() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for f in ["model.safetensors", "config.json"] {
        std::fs::copy(data().join("model").join(f), d.path().join(f)).unwrap();
    }
    d
}

#[test]
fn a_directory_bundle_verifies_and_names_each_file() {
    let st = statement("model.sig");
    assert_eq!(st.model_name, "model");
    assert!(st.tensors.is_none());
    let r = check(&st, &data().join("model"));
    assert!(r.is_ok(), "{r:?}");
    let subjects: Vec<&str> = r.checks.iter().map(|c| c.subject.as_str()).collect();
    assert_eq!(
        subjects,
        ["file \"config.json\"", "file \"model.safetensors\""]
    );
}

#[test]
fn single_file_and_shard_bundles_verify() {
    let st = statement("file.sig");
    assert_eq!(st.resources.len(), 1);
    assert_eq!(st.resources[0].name, ".");
    assert!(check(&st, &data().join("model/model.safetensors")).is_ok());
    let st = statement("shards.sig");
    assert!(st.resources.len() > 2, "{:?}", st.resources);
    let r = check(&st, &data().join("model"));
    assert!(r.is_ok(), "{r:?}");
}

#[test]
fn a_changed_byte_a_missing_file_and_an_extra_one_fail() {
    for sig in ["model.sig", "shards.sig"] {
        let st = statement(sig);
        let d = copy_model();
        let p = d.path().join("model.safetensors");
        let mut b = std::fs::read(&p).unwrap();
        let last = b.len() - 1;
        b[last] ^= 1;
        std::fs::write(&p, b).unwrap();
        std::fs::write(d.path().join("extra.bin"), b"x").unwrap();
        std::fs::remove_file(d.path().join("config.json")).unwrap();
        let r = check(&st, d.path());
        let failed: Vec<String> = r
            .failures()
            .map(|c| format!("{} {}", c.subject, c.detail.clone().unwrap_or_default()))
            .collect();
        assert!(
            failed
                .iter()
                .any(|f| f.contains("model.safetensors") && f.contains("differs")),
            "{failed:?}"
        );
        assert!(
            failed
                .iter()
                .any(|f| f.contains("config.json") && f.contains("missing")),
            "{failed:?}"
        );
        assert!(
            failed
                .iter()
                .any(|f| f.contains("extra.bin") && f.contains("not signed")),
            "{failed:?}"
        );
        // Git files are skipped, as model-signing skips them.
        let d = copy_model();
        std::fs::write(d.path().join(".gitattributes"), b"*.bin lfs").unwrap();
        assert!(check(&st, d.path())
            .checks
            .iter()
            .all(|c| c.status == Status::Ok));
    }
}

#[test]
fn another_key_a_forged_statement_and_a_truncated_bundle_are_refused() {
    let bytes = std::fs::read(data().join("model.sig")).unwrap();
    let b = Bundle::parse(&bytes).unwrap();
    let other = PublicKey::load(&data().join("other.pub.pem")).unwrap();
    let e = b.verify(&other).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    // Without the hint, the signature itself fails for the other key.
    let mut no_hint = b.clone();
    no_hint.hint = None;
    assert_eq!(
        no_hint.verify(&other).unwrap_err().kind(),
        ErrorKind::Integrity
    );
    // One changed digest character in the statement.
    let mut forged = b.clone();
    let text = String::from_utf8(forged.payload.clone()).unwrap();
    let at = text.find("\"digest\": \"").unwrap() + 11;
    let mut p = forged.payload.clone();
    p[at] = if p[at] == b'0' { b'1' } else { b'0' };
    forged.payload = p;
    assert_eq!(
        forged.verify(&key()).unwrap_err().kind(),
        ErrorKind::Integrity
    );
    let cut = Bundle::parse(&bytes[..bytes.len() / 2]).unwrap_err();
    assert_eq!(cut.kind(), ErrorKind::Malformed, "{cut}");
    // An Ed25519 key is refused for a bundle, saying what is needed.
    let e = b.verify(&PublicKey::Ed25519(tessera::signing::ed25519::public_key(
        &[1; 32],
    )));
    assert!(e.unwrap_err().to_string().contains("P-256"));
}

#[test]
fn model_signing_key_files_load_in_both_pem_forms() {
    let pkcs8 = SecretKey::load(&data().join("key.pem")).unwrap();
    let sec1 = SecretKey::load(&data().join("key.sec1.pem")).unwrap();
    assert_eq!(pkcs8.public(), key());
    assert_eq!(sec1.public(), key());
    // Our SPKI PEM is byte for byte cryptography's (model-signing's key hint hashes it).
    assert_eq!(
        key().to_file_text().unwrap(),
        std::fs::read_to_string(data().join("key.pub.pem")).unwrap()
    );
}
