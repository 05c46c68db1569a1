#!/usr/bin/env python3
"""AEROSET test vectors written by the original implementation, aerotensor's
`write_aeroset` (bhuvanprakash/Aero, `aerotensor/` at f1d395da0f0f72a6cfc6b79ca0c8f6fc12c59d03,
whose `aeroset.py` is byte-identical to `py/aerotensor/aeroset.py` at HEAD 630e8a4).

    AEROTENSOR_SRC=/path/to/Aero/aerotensor python gen.py

(AEROTENSOR_SRC: the directory holding the `aerotensor` package.) Needs numpy, msgpack,
blake3, zstandard. Writes:

- valid-aerotensor/: five shards in three parts of 2, 2 and 1 (max_shard_bytes=64,
  max_part_shards=2), every part with IHSH and PHSH pages of 32 bytes (write_model's
  add_control_integrity/add_page_hashes, which write_aeroset does not pass on: its
  AeroWriter is wrapped here to turn them on), `hash_b3` on every tensor (given through
  TensorSpec.extra, which write_aeroset copies into both the global and each part's
  TIDX: its own tensor_hash=True rewrites each part's TIDX over the first shard, the
  writer bug ORIGINALS.md §3 records), and a packed Q4_0 tensor (dtype 0x8000,
  quant_id/quant_params, its descriptor in extra_meta, as gguf_to_aero writes one).
- expected.json: each tensor's dtype, shape, SHA-256 of its bytes and (for dense
  tensors) its values, computed here with numpy, not by tessera.
- hostile variants of it (JSON edited or a part altered), named by the outcome a reader
  must give (vectors.json says why).
"""
import hashlib
import json
import os
import shutil
import sys

import blake3
import numpy as np

sys.path.insert(0, os.environ["AEROTENSOR_SRC"])
import aerotensor.aeroset as aeroset  # noqa: E402
from aerotensor.writer import AeroWriter, TensorSpec  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
UUID = b"\x11" * 16

# aerotensor's dtype codes.
CODES = {"float16": 0, "float32": 1, "float64": 3, "int8": 4, "uint8": 5, "int16": 6,
         "uint16": 7, "int32": 8, "uint32": 9, "int64": 10, "uint64": 11, "bool": 12}
TESSERA = {"float16": "f16", "float32": "f32", "float64": "f64", "int8": "i8", "uint8": "u8",
           "int16": "i16", "uint16": "u16", "int32": "i32", "uint32": "u32", "int64": "i64",
           "uint64": "u64", "bool": "bool"}


class WithIntegrity(AeroWriter):
    """write_model with IHSH and 32-byte PHSH pages on."""

    def write_model(self, *a, **k):
        k.update(add_control_integrity=True, add_page_hashes=True, page_hash_page_size=32)
        return super().write_model(*a, **k)


def tensors():
    rng = np.random.default_rng(7)
    out = [
        ("embed.weight", np.arange(24, dtype=np.float32).reshape(4, 6) / 8),
        ("layer.0.wq", (rng.standard_normal((4, 4)) * 3).astype(np.float16)),
        ("layer.0.bias", np.array([0.5, -0.5, 1.25, -2.0], dtype=np.float32)),
        ("layer.0.scale", np.array([1.5, -2.25, 3.0], dtype=np.float64)),
        ("layer.1.idx", np.array([[-3, 7, 100], [0, -128, 127]], dtype=np.int8)),
        ("layer.1.count", np.array([1, 2, 3, 40000], dtype=np.int32)),
        ("layer.1.mask", np.array([True, False, True, True, False], dtype=np.bool_)),
        ("head.weight", np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)),
    ]
    return out


def main():
    specs, expected = [], {}
    for name, a in tensors():
        data = a.tobytes()
        specs.append(TensorSpec(name=name, dtype=CODES[str(a.dtype)], shape=list(a.shape),
                                data_len=len(data), read_data=(lambda d=data: d),
                                extra={"hash_b3": blake3.blake3(data).hexdigest()}))
        expected[name] = {"dtype": TESSERA[str(a.dtype)], "shape": list(a.shape),
                          "sha256": hashlib.sha256(data).hexdigest(),
                          "values": a.astype(np.float64).tolist() if a.dtype != np.bool_ else a.tolist()}
    # A packed Q4_0 tensor of 64 elements: 2 blocks of 18 bytes (f16 scale, 16 nibble bytes).
    blocks = b"".join(np.float16(0.25 * (i + 1)).tobytes() + bytes(range(16 * i, 16 * i + 16)) for i in range(2))
    specs.insert(3, TensorSpec(name="layer.0.wq_q4", dtype=0x8000, shape=[64], data_len=len(blocks),
                               read_data=lambda: blocks,
                               extra={"quant_id": 0, "quant_params": {"ggml_type": 2},
                                      "hash_b3": blake3.blake3(blocks).hexdigest()}))
    expected["layer.0.wq_q4"] = {"dtype": "u8", "layout": "ggml_q4_0", "shape": [64],
                                 "sha256": hashlib.sha256(blocks).hexdigest()}
    out = os.path.join(HERE, "valid-aerotensor")
    shutil.rmtree(out, ignore_errors=True)
    aeroset.AeroWriter = WithIntegrity
    aeroset.write_aeroset(
        out, specs, "tiny-set", "llama", max_shard_bytes=64, max_part_shards=2, uuid=UUID,
        extra_meta={"quant_descriptors": [{"id": 0, "quant_name": "Q4_0", "codec": "ggml",
                                           "params": {"ggml_type": 2}}]})
    index = json.load(open(os.path.join(out, "model.aeroset.json")))
    # What aerotensor's own reader makes of it.
    with aeroset.AeroSetReader(os.path.join(out, "model.aeroset.json")) as r:
        assert r.validate() == [], r.validate()
        for name, e in expected.items():
            assert hashlib.sha256(r.read_tensor_bytes(name)).hexdigest() == e["sha256"], name
        order = [t["name"] for t in r.list_tensors()]
    json.dump({"about": "written by gen.py with numpy: the tensors of valid-aerotensor/",
               "model": {"name": "tiny-set", "architecture": "llama"},
               "parts": len(index["parts"]),
               "shards_per_part": [len(p["shards"]) for p in index["parts"]],
               "order": order, "tensors": expected},
              open(os.path.join(HERE, "expected.json"), "w"), indent=1, sort_keys=True)

    def variant(name, edit=None, part=None):
        d = os.path.join(HERE, name)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(out, d)
        if edit:
            ix = json.load(open(os.path.join(d, "model.aeroset.json")))
            edit(ix)
            json.dump(ix, open(os.path.join(d, "model.aeroset.json"), "w"), indent=2)
        if part:
            part(d)

    def escape(ix):
        ix["parts"][1]["path"] = "../part-001.aero"
    variant("malformed-part-escapes", escape)

    def absolute(ix):
        ix["parts"][0]["path"] = "/etc/passwd"
    variant("malformed-part-absolute", absolute)

    def orphan(ix):
        ix["parts"][2]["shards"] = []  # shard 4 is in no part
    variant("integrity-shard-in-no-part", orphan)

    def twice(ix):
        ix["parts"][1]["shards"] = [1, 3]  # shard 1 in parts 0 and 1
    variant("integrity-shard-in-two-parts", twice)

    def size(ix):
        ix["parts"][1]["size_bytes"] += 1
    variant("integrity-part-size", size)

    def missing(d):
        os.remove(os.path.join(d, "part-002.aero"))
    variant("io-part-missing", part=missing)

    def flip(d):
        # One byte of a tensor of part-001.aero: its sha256 (the JSON's) and its
        # PHSH/hash_b3 no longer match; the JSON is left as it was.
        p = os.path.join(d, "part-001.aero")
        b = bytearray(open(p, "rb").read())
        b[-3] ^= 0x40
        open(p, "wb").write(bytes(b))
    variant("verify-fail-part-byte", part=flip)

    def version(ix):
        ix["format"]["version"] = [1, 0]
    variant("unsupported-version", version)


if __name__ == "__main__":
    main()
