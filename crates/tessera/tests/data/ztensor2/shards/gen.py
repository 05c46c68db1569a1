"""Writes a zTensor v2 model stored across three files (spec §7), and checks that the
reference implementation, ztensor 2.1.2, reads it as one model.

    pip install --target DIR ztensor==2.1.2 numpy xxhash cbor2
    PYTHONPATH=DIR python3 gen.py

ztensor 2.1.2 reads shard tables but its Python `Writer` writes no external parts, so:
- the two shards, `model-00001.zt` and `model-00002.zt`, are ordinary files written by
  `ztensor.Writer` (4 KiB alignment; spec §7.2: any `.zt` may serve as a shard);
- the root `model.zt` is written here by hand: magic, one local blob, the manifest
  (deterministic CBOR by `cbor2`, canonical=True), the footer (XXH3-64 by `xxhash`). Its
  objects point at the shards' blobs (where ztensor's `Tensor.location` says they
  are), one object twice (a tied weight), one object with a part here and a part in a
  shard; its shard table gives each file's size and SHA-256.
Then ztensor 2.1.2 opens `model.zt` (positional resolution `<stem>-<name>.zt`),
`verify(deep=True)` checks the shard digests, and every tensor it reads must equal
the numpy array it came from. `expected.json`: per tensor, dtype, shape and the
SHA-256 of each part's bytes, from numpy (never from Tessera); and the model's
`zt.content/1` digests, computed here from the reference's definition.
"""

import hashlib
import json
import os
import struct

import cbor2
import numpy as np
import xxhash
import ztensor

HERE = os.path.dirname(os.path.abspath(__file__))
MAGIC = b"\x89ZT2\r\n\x1a\n"
rng = np.random.default_rng(18)


def sha(b):
    return hashlib.sha256(bytes(b)).hexdigest()


def write_shard(name, arrays):
    path = os.path.join(HERE, name)
    if os.path.exists(path):
        os.remove(path)
    w = ztensor.Writer(path, canonical=False, align=4096)
    for k, (a, dtype) in arrays.items():
        w.add(k, a.tobytes(), list(a.shape), dtype)
    w.finish()
    src = ztensor.open(path)
    blobs = {k: (src[k].location.offset, src[k].location.nbytes) for k in arrays}
    src.close()
    with open(path, "rb") as f:
        data = f.read()
    return blobs, {"size": len(data), "digest": "sha256:" + sha(data)}


def main():
    a = {
        "enc.weight": (rng.standard_normal((8, 6)).astype(np.float32), "f32"),
        "enc.bias": (rng.standard_normal(6).astype(np.float16), "f16"),
    }
    b = {
        "dec.weight": (rng.integers(-9, 9, (5, 7)).astype(np.int64), "i64"),
        "csr.values": (rng.standard_normal(4).astype(np.float32), "f32"),
    }
    blobs_a, id_a = write_shard("model-00001.zt", a)
    blobs_b, id_b = write_shard("model-00002.zt", b)

    local = rng.standard_normal(3).astype(np.float64)
    indptr = np.array([0, 1, 3, 4], dtype=np.uint64)
    indices = np.array([2, 0, 3, 1], dtype=np.uint64)
    local_blobs = [local.tobytes(), indptr.tobytes(), indices.tobytes()]

    def part(dtype, data, blob, shard=None):
        p = {"dtype": dtype, "blob": list(blob), "digest": "xxh3:%016x" % xxhash.xxh3_64_intdigest(data)}
        if shard:
            p["shard"] = shard
        return p

    heap, offsets = b"", []
    for blob in local_blobs:
        off = 4096 + len(heap)
        offsets.append((off, len(blob)))
        heap += blob + b"\0" * (-len(blob) % 4096)
    objects, expected = {}, {}

    def dense(name, arr, dtype, blob, shard=None):
        objects[name] = {"shape": list(arr.shape), "layout": "dense",
                         "parts": {"data": part(dtype, arr.tobytes(), blob, shard)}}
        expected[name] = {"dtype": dtype, "shape": list(arr.shape), "layout": "dense",
                          "parts": {"data": sha(arr.tobytes())}}

    for k, (arr, dtype) in a.items():
        dense(k, arr, dtype, blobs_a[k], "00001")
    dense("dec.weight", b["dec.weight"][0], "i64", blobs_b["dec.weight"], "00002")
    # A tied weight: the same blob as enc.weight.
    dense("head.weight", a["enc.weight"][0], "f32", blobs_a["enc.weight"], "00001")
    dense("local", local, "f64", offsets[0])
    values = b["csr.values"][0]
    objects["adj"] = {"shape": [3, 4], "layout": "zt.sparse_csr/1", "parts": {
        "values": part("f32", values.tobytes(), blobs_b["csr.values"], "00002"),
        "indptr": part("u64", indptr.tobytes(), offsets[1]),
        "indices": part("u64", indices.tobytes(), offsets[2]),
    }}
    expected["adj"] = {"dtype": "f32", "shape": [3, 4], "layout": "zt.sparse_csr/1", "parts": {
        "values": sha(values.tobytes()), "indptr": sha(indptr.tobytes()),
        "indices": sha(indices.tobytes())}}
    manifest = cbor2.dumps({
        "attributes": {"model": "sharded", "layers": 2},
        "shards": {"00001": id_a, "00002": id_b},
        "objects": objects,
    }, canonical=True)
    moff = 4096 + len(heap)
    body = MAGIC + b"\0" * (4096 - len(MAGIC)) + heap + manifest
    footer = struct.pack("<QQQII", moff, len(manifest), xxhash.xxh3_64_intdigest(manifest), 2, 0) + MAGIC
    with open(os.path.join(HERE, "model.zt"), "wb") as f:
        f.write(body + footer)

    # The reference reads it as one model.
    src = ztensor.open(os.path.join(HERE, "model.zt"))
    assert sorted(src.keys()) == sorted(expected), (sorted(src.keys()), sorted(expected))
    for name, want in expected.items():
        t = src[name]
        for pname, digest in want["parts"].items():
            got = t[pname].tobytes() if len(want["parts"]) > 1 else t.tobytes()
            assert sha(got) == digest, (name, pname)
    src.close()
    checked, undigested = ztensor.verify(os.path.join(HERE, "model.zt"), deep=True)
    assert checked > 0 and undigested == 0, (checked, undigested)
    # zt.content/1, as the reference defines it (ztensor's Manifest::content_digest):
    # the manifest's objects without blobs, shards or encodings.
    content = []
    for name, obj in objects.items():
        o = {"shape": obj["shape"], "layout": obj["layout"], "parts": {
            p: {k: v for k, v in part.items() if k in ("dtype", "type", "digest")}
            for p, part in obj["parts"].items()}}
        if "attributes" in obj:
            o["attributes"] = obj["attributes"]
        content.append((name, o))
    cbytes = cbor2.dumps(["zt.content/1", dict(content)], canonical=True)
    digests = {"xxh3": "xxh3:%016x" % xxhash.xxh3_64_intdigest(cbytes),
               "sha256": "sha256:" + sha(cbytes)}
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump({"attributes": {"model": "sharded", "layers": 2}, "tensors": expected,
                   "content": digests}, f, indent=1, sort_keys=True)
        f.write("\n")
    print("ok", len(expected), "tensors")


if __name__ == "__main__":
    main()
