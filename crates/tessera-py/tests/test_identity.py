"""tessera.id / sign / verify_signature: one identity across formats, and a detached
signature that survives conversion but names a changed tensor. The signature and the id
are also checked against the CLI's (`tessera sign`/`id`), the same definition."""
import json
import os
import subprocess

import numpy as np
import pytest

import tessera
from tessera.numpy import save_file


def tensors(scale=1.0):
    rng = np.random.default_rng(3)
    return {
        "w": (rng.standard_normal((8, 4)) * scale).astype(np.float32),
        "b": np.arange(5, dtype=np.int32),
    }


def test_id_is_the_same_across_formats(tmp_path):
    ids = set()
    for ext in ["safetensors", "zt", "aero", "fold", "gguf", "npz"]:
        p = tmp_path / f"m.{ext}"
        save_file(tensors(), str(p))
        doc = tessera.id(p)
        assert doc["id"].startswith("blake3:")
        assert sorted(t["name"] for t in doc["tensors"]) == ["b", "w"]
        ids.add(doc["id"])
    assert len(ids) == 1
    other = tmp_path / "other.safetensors"
    save_file(tensors(2.0), str(other))
    assert tessera.id(other)["id"] not in ids


def test_sign_then_verify_after_conversion(tmp_path):
    src = tmp_path / "m.safetensors"
    save_file(tensors(), str(src))
    secret = bytes(range(32))
    public = tessera.public_key(secret)
    sig = tessera.sign(src, secret, tmp_path / "m.sig")
    assert json.loads(sig)["type"] == "tessera-signed-manifest/1"
    converted = tmp_path / "m.aero"
    tessera.convert(src, converted)
    report = tessera.verify_signature(converted, tmp_path / "m.sig", public)
    assert report.ok, report
    assert any(c.layer == "signed manifest" and c.status == "ok" for c in report.checks)

    changed = tensors()
    changed["b"][2] += 1
    bad = tmp_path / "bad.zt"
    save_file(changed, str(bad))
    report = tessera.verify_signature(bad, sig, public)
    assert not report.ok
    assert [c.subject for c in report.failures] == ['tensor "b"']
    # Only "w" asked for: "b" is not read, the check passes and says what it skipped.
    partial = tessera.verify_signature(bad, sig, public, tensors=["w"])
    assert partial.ok
    assert any(c.status == "not checked" for c in partial.checks)

    wrong = tessera.public_key(bytes(32))
    assert not tessera.verify_signature(converted, sig, wrong).ok
    with pytest.raises(tessera.FormatError):
        tessera.verify_signature(converted, sig[: len(sig) // 2].encode(), public)


def test_key_files_from_tessera_keygen_work(tmp_path):
    binary = os.environ.get("TESSERA_BIN")
    if not binary or not os.path.exists(binary):
        pytest.skip("TESSERA_BIN not set")
    key = tmp_path / "k"
    subprocess.run([binary, "keygen", "-o", str(key)], check=True, capture_output=True)
    src = tmp_path / "m.safetensors"
    save_file(tensors(), str(src))
    sig = tessera.sign(src, key)
    assert tessera.verify_signature(src, sig, tmp_path / "k.pub").ok
    # The CLI accepts what Python signed, and prints the id Python computes.
    (tmp_path / "py.sig").write_text(sig)
    out = subprocess.run(
        [binary, "verify", str(src), "--signature", str(tmp_path / "py.sig"), "--public-key", str(tmp_path / "k.pub")],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    cli = json.loads(subprocess.run([binary, "id", "--json", str(src)], capture_output=True, text=True, check=True).stdout)
    assert cli["id"] == tessera.id(src)["id"]


def test_open_with_a_signature_refuses_a_tensor_that_does_not_match_on_read(tmp_path):
    src = tmp_path / "m.safetensors"
    save_file(tensors(), str(src))
    key = tmp_path / "k"
    key.write_bytes(bytes(range(32)))
    pub = tessera.public_key(bytes(range(32)))
    sig = tmp_path / "m.sig"
    tessera.sign(src, key, sig)
    # A conversion of the signed model opens and reads, each tensor checked.
    gguf = tmp_path / "m.gguf"
    save_file(tensors(), str(gguf))
    f = tessera.open(gguf, signature=sig, public_key=pub)
    np.testing.assert_array_equal(f["w"], tensors()["w"])
    np.testing.assert_array_equal(f.get_tensors(["b", "w"])["b"], tensors()["b"])
    # One value changed: the open succeeds (names and shapes match), the read of that
    # tensor is refused, the other tensor still reads.
    t = tensors()
    t["w"][3, 1] += 1.0
    bad = tmp_path / "bad.zt"
    save_file(t, str(bad))
    f = tessera.open(bad, signature=sig, public_key=pub)
    np.testing.assert_array_equal(f["b"], t["b"])
    with pytest.raises(tessera.IntegrityError, match="w"):
        f["w"]
    with pytest.raises(tessera.IntegrityError):
        f.get_tensors(["w"])
    # A renamed tensor, another key, or a signature without a key: refused at open.
    renamed = tmp_path / "renamed.safetensors"
    save_file({"w2": tensors()["w"], "b": tensors()["b"]}, str(renamed))
    with pytest.raises(tessera.IntegrityError, match="w2"):
        tessera.open(renamed, signature=sig, public_key=pub)
    with pytest.raises(tessera.IntegrityError):
        tessera.open(src, signature=sig, public_key=tessera.public_key(bytes(32)))
    with pytest.raises(tessera.InvalidInputError):
        tessera._tessera.open_file(str(src), signature=sig.read_bytes())


def test_ecdsa_p256_pem_keys_sign_and_verify(tmp_path):
    ec = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ec")
    ser = pytest.importorskip("cryptography.hazmat.primitives.serialization")
    k = ec.generate_private_key(ec.SECP256R1())
    priv = k.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption())
    pub = k.public_key().public_bytes(ser.Encoding.PEM, ser.PublicFormat.SubjectPublicKeyInfo)
    src = tmp_path / "m.safetensors"
    save_file(tensors(), str(src))
    text = tessera.sign(src, priv)
    assert json.loads(text)["signature"]["algorithm"] == "ecdsa-p256"
    conv = tmp_path / "m.fold"
    save_file(tensors(), str(conv))
    assert tessera.verify_signature(conv, text, pub).ok
    pub_path = tmp_path / "k.pub.pem"
    pub_path.write_bytes(pub)
    f = tessera.open(conv, signature=text, public_key=pub_path)
    np.testing.assert_array_equal(f["w"], tensors()["w"])
    other = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        ser.Encoding.PEM, ser.PublicFormat.SubjectPublicKeyInfo)
    assert not tessera.verify_signature(conv, text, other).ok


def test_verify_with_a_public_key_requires_a_signature(tmp_path):
    src = tmp_path / "m.safetensors"
    save_file(tensors(), str(src))
    secret = bytes(range(32))
    public = tessera.public_key(secret)
    # Unsigned: a key given means a signature is required (was ok).
    r = tessera.open(src).verify(public_key=public)
    assert not r.ok
    assert r.checks[0].detail == "no signature found for this key", r
    # An embedded signature is found and checked, as `tessera verify` does.
    signed = tmp_path / "signed.safetensors"
    key = tmp_path / "k"
    key.write_bytes(secret)
    text = tessera.sign(src, key)
    meta = {"tessera.signature": text}
    save_file(tensors(), str(signed), metadata=meta)
    r = tessera.open(signed).verify(public_key=public)
    assert r.ok and any(c.layer == "signed manifest" and c.status == "ok" for c in r.checks), r
    assert not tessera.open(signed).verify(public_key=tessera.public_key(bytes(32))).ok


def test_key_files_of_the_wrong_kind_are_refused(tmp_path):
    binary = os.environ.get("TESSERA_BIN")
    if not binary or not os.path.exists(binary):
        pytest.skip("TESSERA_BIN not set")
    key = tmp_path / "k"
    subprocess.run([binary, "keygen", "-o", str(key)], check=True, capture_output=True)
    assert (tmp_path / "k.pub").read_text().startswith("-----BEGIN PUBLIC KEY-----")
    src = tmp_path / "m.safetensors"
    save_file(tensors(), str(src))
    sig = tessera.sign(src, key)
    # The secret key file where the public key is wanted, and the reverse.
    with pytest.raises(tessera.InvalidInputError, match="secret key file") as e:
        tessera.verify_signature(src, sig, key)
    secret_lines = [l for l in key.read_text().splitlines() if not l.startswith("-----")]
    assert not any(l in str(e.value) for l in secret_lines)
    with pytest.raises(tessera.InvalidInputError, match="public key file"):
        tessera.sign(src, tmp_path / "k.pub")
    with pytest.raises(tessera.InvalidInputError, match="secret key file"):
        tessera.open(src).verify(public_key=key)
    assert tessera.verify_signature(src, sig, tmp_path / "k.pub").ok


def _compact(text):
    """The canonical compact JSON of a document, by Python's json (not tessera's)."""
    return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)


def test_an_embedded_signature_is_compact_json_and_verifies(tmp_path):
    # Issue 30 §5: sign(embed=True) is `tessera sign --embed`; the text stored under
    # "tessera.signature" is compact JSON (one line), the canonical form.
    secret = bytes(range(32))
    public = tessera.public_key(secret)
    for ext in ("safetensors", "zt", "gguf"):
        src = tmp_path / f"m.{ext}"
        save_file(tensors(), str(src))
        out = tmp_path / f"signed.{ext}"
        text = tessera.sign(src, secret, out, embed=True)
        stored = tessera.open(out).metadata["tessera.signature"]
        assert stored == text and "\n" not in text
        assert text == _compact(text)
        # The same document as the detached signature file, field for field.
        assert json.loads(text) == json.loads(tessera.sign(src, secret))
        assert tessera.verify_signature(out, stored, public).ok
    with pytest.raises(tessera.InvalidInputError):
        tessera.sign(src, secret, embed=True)


def test_the_cli_embeds_the_same_compact_form(tmp_path):
    binary = os.environ.get("TESSERA_BIN")
    if not binary or not os.path.exists(binary):
        pytest.skip("TESSERA_BIN not set")
    key = tmp_path / "k"
    subprocess.run([binary, "keygen", "-o", str(key)], check=True, capture_output=True)
    src = tmp_path / "m.safetensors"
    save_file(tensors(), str(src))
    out = tmp_path / "cli.safetensors"
    subprocess.run([binary, "sign", str(src), "--key", str(key), "--embed", "-o", str(out)], check=True, capture_output=True)
    cli = tessera.open(out).metadata["tessera.signature"]
    assert "\n" not in cli and cli == _compact(cli)
    py = tessera.sign(src, key, tmp_path / "py.safetensors", embed=True)
    # Ed25519 signatures are deterministic: the CLI and Python store the same text.
    assert cli == py
