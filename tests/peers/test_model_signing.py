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
"""
import subprocess
import sys

import numpy as np
import pytest
from cryptography.hazmat.primitives import serialization as s
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
