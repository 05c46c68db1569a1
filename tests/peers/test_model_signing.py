"""OpenSSF model-signing interop, both ways, with the `model-signing` package (1.1.1).

- model-signing signs (its `sign key` CLI, ECDSA P-256): `tessera verify --signature`
  accepts the bundle for a directory and a single file, and fails naming the file
  when one byte changed or another key is given.
- Tessera signs (`tessera sign --format model-signing`): `model_signing verify key`
  accepts the bundle, and refuses it after one byte changed; the tensor manifest the
  bundle carries verifies a conversion of the model (`--tensors-only`) and catches a
  changed tensor value in it.
- Keys: a `tessera keygen --algorithm ecdsa-p256` pair works with model-signing, and a
  SEC1 PEM key from `cryptography` works with Tessera.
- Hashes: bundles model-signing hashed with `blake2` (files and shards) verify, and fail
  naming the file after one byte changed; a validly signed bundle whose hash Tessera
  does not know exits 3 (unsupported), never 1.
"""
import base64
import json
import subprocess
import sys

import numpy as np
import pytest
from cryptography.hazmat.primitives import serialization as s
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from safetensors.numpy import save_file

from conftest import run


def ms(*args):
    return subprocess.run([sys.executable, "-m", "model_signing", *map(str, args)],
                          capture_output=True, text=True)


@pytest.fixture
def keys(tmp_path):
    k = ec.generate_private_key(ec.SECP256R1())
    priv, pub = tmp_path / "key.pem", tmp_path / "key.pub.pem"
    priv.write_bytes(k.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, s.NoEncryption()))
    pub.write_bytes(k.public_key().public_bytes(s.Encoding.PEM, s.PublicFormat.SubjectPublicKeyInfo))
    other = ec.generate_private_key(ec.SECP256R1())
    opub = tmp_path / "other.pub.pem"
    opub.write_bytes(other.public_key().public_bytes(s.Encoding.PEM, s.PublicFormat.SubjectPublicKeyInfo))
    return priv, pub, opub


@pytest.fixture
def model(tmp_path):
    d = tmp_path / "model"
    d.mkdir()
    rng = np.random.default_rng(5)
    save_file({
        "embed.weight": rng.standard_normal((16, 8)).astype(np.float32),
        "head.bias": np.arange(8, dtype=np.float16),
    }, str(d / "model.safetensors"))
    (d / "config.json").write_text('{"hidden_size": 8}\n')
    return d


def flip_last_byte(p):
    b = bytearray(p.read_bytes())
    b[-1] ^= 1
    p.write_bytes(bytes(b))


def test_tessera_verifies_what_model_signing_signed(tmp_path, keys, model):
    priv, pub, opub = keys
    sig = tmp_path / "model.sig"
    assert ms("sign", "key", model, "--private_key", priv, "--signature", sig).returncode == 0
    out = run("verify", model, "--signature", sig, "--public-key", pub, "-v").stdout
    assert 'file "model.safetensors"' in out and 'file "config.json"' in out
    one = tmp_path / "one.sig"
    assert ms("sign", "key", model / "model.safetensors", "--private_key", priv,
              "--signature", one).returncode == 0
    run("verify", model / "model.safetensors", "--signature", one, "--public-key", pub)
    # Another key.
    p = run("verify", model, "--signature", sig, "--public-key", opub, check=False)
    assert p.returncode == 1 and "FAILED" in p.stdout
    # One changed byte, named.
    flip_last_byte(model / "model.safetensors")
    p = run("verify", model, "--signature", sig, "--public-key", pub, check=False)
    assert p.returncode == 1
    failed = [l for l in p.stdout.splitlines() if l.startswith("FAILED")]
    assert len(failed) == 1 and "model.safetensors" in failed[0], p.stdout


def test_model_signing_verifies_what_tessera_signed(tmp_path, keys, model):
    priv, pub, _ = keys
    inside = model / "model.sig"
    run("sign", model, "--format", "model-signing", "--key", priv, "-o", inside)
    p = ms("verify", "key", model, "--signature", inside, "--public_key", pub)
    assert p.returncode == 0, p.stdout + p.stderr
    one = tmp_path / "one.sig"
    run("sign", model / "model.safetensors", "--format", "model-signing", "--key", priv, "-o", one)
    p = ms("verify", "key", model / "model.safetensors", "--signature", one, "--public_key", pub)
    assert p.returncode == 0, p.stdout + p.stderr
    # Tessera's own check of its bundle, then of a conversion through the tensor manifest.
    run("verify", model, "--signature", inside, "--public-key", pub)
    conv = tmp_path / "conv.gguf"
    run("convert", model / "model.safetensors", conv)
    assert run("verify", conv, "--signature", one, "--public-key", pub, check=False).returncode == 1
    run("verify", conv, "--signature", one, "--public-key", pub, "--tensors-only")
    # One changed byte: model-signing refuses, and so does Tessera for a changed tensor.
    flip_last_byte(model / "model.safetensors")
    p = ms("verify", "key", model, "--signature", inside, "--public_key", pub)
    assert p.returncode != 0 and "model.safetensors" in p.stdout + p.stderr
    conv2 = tmp_path / "conv2.gguf"
    run("convert", model / "model.safetensors", conv2)
    p = run("verify", conv2, "--signature", one, "--public-key", pub, "--tensors-only", check=False)
    assert p.returncode == 1 and 'tensor "head.bias"' in p.stdout, p.stdout


def test_keys_cross_over(tmp_path, model):
    key = tmp_path / "tk"
    run("keygen", "--algorithm", "ecdsa-p256", "-o", key)
    sig = tmp_path / "m.sig"
    p = ms("sign", "key", model, "--private_key", key, "--signature", sig)
    assert p.returncode == 0, p.stdout + p.stderr
    p = ms("verify", "key", model, "--signature", sig, "--public_key", f"{key}.pub")
    assert p.returncode == 0, p.stdout + p.stderr
    run("verify", model, "--signature", sig, "--public-key", f"{key}.pub")
    k = ec.generate_private_key(ec.SECP256R1())
    sec1 = tmp_path / "sec1.pem"
    sec1.write_bytes(k.private_bytes(s.Encoding.PEM, s.PrivateFormat.TraditionalOpenSSL,
                                     s.NoEncryption()))
    pub = tmp_path / "sec1.pub.pem"
    pub.write_bytes(k.public_key().public_bytes(s.Encoding.PEM, s.PublicFormat.SubjectPublicKeyInfo))
    run("sign", model, "--format", "model-signing", "--key", sec1, "-o", sig)
    p = ms("verify", "key", model, "--signature", sig, "--public_key", pub)
    assert p.returncode == 0, p.stdout + p.stderr


def test_blake2_bundles_verify_and_an_unknown_hash_is_unsupported(tmp_path, keys, model):
    import model_signing

    priv, pub, _ = keys
    for name, serialization in [
        ("files", lambda c: c.use_file_serialization(hashing_algorithm="blake2")),
        ("shards", lambda c: c.use_shard_serialization(hashing_algorithm="blake2", shard_size=100)),
    ]:
        sig = tmp_path / f"{name}.sig"
        model_signing.signing.Config().use_elliptic_key_signer(private_key=priv).set_hashing_config(
            serialization(model_signing.hashing.Config())
        ).sign(model, sig)
        bundle = json.loads(sig.read_text())
        statement = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
        assert statement["predicate"]["serialization"]["hash_type"] == "blake2b"
        p = run("verify", model, "--signature", sig, "--public-key", pub, "-v", check=False)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "model-signing blake2b" in p.stdout and "FAILED" not in p.stdout, p.stdout

    # One changed byte: exit 1, naming the file.
    sig = tmp_path / "files.sig"
    flip_last_byte(model / "config.json")
    p = run("verify", model, "--signature", sig, "--public-key", pub, check=False)
    failed = [l for l in p.stdout.splitlines() if l.startswith("FAILED")]
    assert p.returncode == 1 and len(failed) == 1 and "config.json" in failed[0], p.stdout
    flip_last_byte(model / "config.json")

    # The same statement with a hash Tessera does not know, validly signed by the key:
    # exit 3 (unsupported), saying which hash, never 1 ("FAILED").
    bundle = json.loads(sig.read_text())
    statement = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    statement["predicate"]["serialization"]["hash_type"] = "sha3-256"
    payload = json.dumps(statement).encode()
    kind = bundle["dsseEnvelope"]["payloadType"].encode()
    pae = b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)
    key = s.load_pem_private_key(priv.read_bytes(), None)
    bundle["dsseEnvelope"]["payload"] = base64.b64encode(payload).decode()
    bundle["dsseEnvelope"]["signatures"][0]["sig"] = base64.b64encode(
        key.sign(pae, ec.ECDSA(hashes.SHA256()))).decode()
    odd = tmp_path / "odd.sig"
    odd.write_text(json.dumps(bundle))
    p = run("verify", model, "--signature", odd, "--public-key", pub, check=False)
    assert p.returncode == 3, p.stdout + p.stderr
    assert "sha3-256" in p.stderr and "FAILED" not in p.stdout, p.stdout + p.stderr
