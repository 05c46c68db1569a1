#!/usr/bin/env python3
"""Generates the OpenSSF model-signing test vectors with the real tool. Run from this
directory: `python gen.py` (model-signing==1.1.1 with pyOpenSSL, safetensors==0.8.0,
numpy, cryptography; no network).

- key.pem / key.pub.pem: an ECDSA P-256 pair written by `cryptography` (PKCS#8 and
  SubjectPublicKeyInfo PEM, what `model_signing sign key` takes); other.pub.pem another
  key's public half; key.sec1.pem the first key in SEC1 ("EC PRIVATE KEY") form.
- model/: model.safetensors (written by `safetensors.numpy.save_file`) and config.json.
- model.sig: `model_signing sign key model` (files serialization, SHA-256).
- file.sig: `model_signing sign key model/model.safetensors` (one file: resource ".").
- shards.sig: the Python API with `use_shard_serialization(shard_size=100)`.

ECDSA signatures are randomised, so each run writes different .sig files (all valid).
"""
import pathlib
import subprocess
import sys

import numpy as np
from cryptography.hazmat.primitives import serialization as s
from cryptography.hazmat.primitives.asymmetric import ec
from safetensors.numpy import save_file

import model_signing

here = pathlib.Path(__file__).resolve().parent


def write_key(name):
    k = ec.generate_private_key(ec.SECP256R1())
    (here / f"{name}.pem").write_bytes(
        k.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, s.NoEncryption()))
    (here / f"{name}.pub.pem").write_bytes(
        k.public_key().public_bytes(s.Encoding.PEM, s.PublicFormat.SubjectPublicKeyInfo))
    return k


k = write_key("key")
(here / "key.sec1.pem").write_bytes(
    k.private_bytes(s.Encoding.PEM, s.PrivateFormat.TraditionalOpenSSL, s.NoEncryption()))
write_key("other")
(here / "other.pem").unlink()

model = here / "model"
model.mkdir(exist_ok=True)
rng = np.random.default_rng(17)
save_file({
    "embed.weight": rng.standard_normal((8, 4)).astype(np.float32),
    "norm.bias": np.arange(4, dtype=np.float16),
}, str(model / "model.safetensors"))
(model / "config.json").write_text('{"hidden_size": 4}\n')

cli = [sys.executable, "-m", "model_signing", "sign", "key"]
subprocess.run(cli + ["model", "--private_key", "key.pem", "--signature", "model.sig"],
               cwd=here, check=True)
subprocess.run(cli + ["model/model.safetensors", "--private_key", "key.pem",
                      "--signature", "file.sig"], cwd=here, check=True)
(model_signing.signing.Config()
 .use_elliptic_key_signer(private_key=here / "key.pem")
 .set_hashing_config(model_signing.hashing.Config().use_shard_serialization(shard_size=100))
 .sign(model, here / "shards.sig"))
