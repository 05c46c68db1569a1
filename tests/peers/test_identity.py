"""`tessera id` against an independent implementation of the identity it documents.

The model is written by the `safetensors` package and by gguf-py (writers other than
ours); the identity is recomputed here from numpy arrays with the `blake3` package,
following the definition in crates/tessera/src/identity.rs (tessera-id/1), and must
equal what `tessera id --json` prints for both files. A signature made on the
safetensors file must verify against the GGUF one.
"""
import struct

import blake3
import numpy as np
from safetensors.numpy import save_file

from conftest import run, run_json

import gguf


def u64(n):
    return struct.pack("<Q", n)


def s(b):
    b = b.encode() if isinstance(b, str) else b
    return u64(len(b)) + b


def tensor_digest(name, arr):
    dtype = {np.float32: "f32", np.float16: "f16", np.int32: "i32", np.int8: "i8"}[arr.dtype.type]
    h = blake3.blake3()
    h.update(b"tessera-id/1 tensor\0")
    h.update(s(name))
    h.update(s(dtype))
    h.update(u64(arr.ndim))
    for d in arr.shape:
        h.update(u64(d))
    h.update(s("dense"))
    h.update(u64(1))
    data = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
    h.update(s("data"))
    h.update(u64(len(data)))
    h.update(data)
    return h.digest()


def merkle(leaves):
    if len(leaves) == 0:
        return blake3.blake3(b"tessera-id/1 empty\0").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return blake3.blake3(b"tessera-id/1 node\0" + merkle(leaves[:k]) + merkle(leaves[k:])).digest()


def model_id(tensors):
    names = sorted(tensors, key=lambda n: n.encode())
    leaves = [tensor_digest(n, tensors[n]) for n in names]
    root = blake3.blake3(b"tessera-id/1 root\0" + u64(len(names)) + merkle(leaves) + b"\0")
    return "blake3:" + root.hexdigest(), {n: "blake3:" + d.hex() for n, d in zip(names, leaves)}


def tensors():
    rng = np.random.default_rng(7)
    return {
        "token_embd.weight": rng.standard_normal((32, 16)).astype(np.float32),
        "blk.0.attn_norm.weight": rng.standard_normal(16).astype(np.float32),
        "blk.0.ffn_up.weight": rng.standard_normal((16, 24)).astype(np.float16),
        "output.bias": np.arange(-5, 5, dtype=np.int32),
        "a": rng.integers(-100, 100, size=(3, 2, 2), dtype=np.int8),
    }


def test_id_matches_an_independent_implementation(tmp_path):
    t = tensors()
    want, per_tensor = model_id(t)
    st = tmp_path / "m.safetensors"
    save_file(t, str(st))
    doc = run_json("id", st)
    assert doc["id"] == want
    assert {e["name"]: e["digest"] for e in doc["tensors"]} == per_tensor


def test_gguf_written_by_gguf_py_has_the_same_id(tmp_path):
    t = tensors()
    want, _ = model_id(t)
    path = tmp_path / "m.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    for name, arr in t.items():
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert run_json("id", path)["id"] == want
    # A signature made over the safetensors copy verifies the GGUF one.
    st = tmp_path / "m.safetensors"
    save_file(t, str(st))
    run("keygen", "-o", tmp_path / "k")
    run("sign", st, "--key", tmp_path / "k", "-o", tmp_path / "m.sig")
    p = run("verify", path, "--signature", tmp_path / "m.sig", "--public-key", tmp_path / "k.pub")
    assert "signed manifest" in p.stdout
    # One value changed in gguf-py's file: caught, naming the tensor.
    t["output.bias"][3] += 1
    bad = tmp_path / "bad.gguf"
    w = gguf.GGUFWriter(str(bad), "llama")
    for name, arr in t.items():
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    p = run("verify", bad, "--signature", tmp_path / "m.sig", "--public-key", tmp_path / "k.pub", check=False)
    assert p.returncode == 1
    assert "output.bias" in p.stdout and "FAILED" in p.stdout
