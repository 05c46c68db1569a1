"""Vectors for Tessera's Python-compatible JSON writer (formats/fold/pyjson.rs).

Run with CPython: python3 gen_pyjson.py > pyjson_vectors.json
Each case holds a value as a tagged tree (so floats and big ints travel exactly) and the
text CPython's json.dumps produces for it with the two option sets FOLD uses:
  canonical = json.dumps(v, sort_keys=True, separators=(",", ":"))      (manifest_hash)
  index     = json.dumps(v, ensure_ascii=False, separators=(",", ":"))  (pyfolds index)
"""
import json
import math
import random
import struct
import sys


def fbits(f):
    return struct.pack(">d", f).hex()


def tag(v):
    if v is None:
        return ["null", None]
    if isinstance(v, bool):
        return ["bool", v]
    if isinstance(v, int):
        return ["int", str(v)]
    if isinstance(v, float):
        return ["float", fbits(v)]
    if isinstance(v, str):
        return ["str", v]
    if isinstance(v, list):
        return ["list", [tag(x) for x in v]]
    if isinstance(v, dict):
        return ["dict", [[k, tag(x)] for k, x in v.items()]]
    raise TypeError(v)


FLOATS = [0.0, -0.0, 1.0, -1.0, 1.5, 0.1, 0.10000000149011612, 1e-4, 1e-5, 0.00012345,
          1.2345e-5, 1e15, 1e16, 1e17, 1.5e16, 123456789012345678.0, 9007199254740993.0,
          1e20, 1e21, 1e22, 1e100, 1e-100, 5e-324, 2.2250738585072014e-308,
          1.7976931348623157e308, math.pi, -math.e, 1795302243.65523, 0.5, 100.0, 1234.5,
          3.0e-7, 12345678901234567.0, 1e-3, 0.001234, 2.5e-4, 1/3, 2/3, 1e300 * 10,
          float("inf"), float("-inf"), float("nan")]
rng = random.Random(1234)
for _ in range(200):
    FLOATS.append(struct.unpack(">d", rng.getrandbits(64).to_bytes(8, "big"))[0])
for _ in range(100):
    FLOATS.append(rng.uniform(-1e6, 1e6))
    FLOATS.append(rng.random() * 10 ** rng.randint(-30, 30))

CASES = [
    None, True, False, 0, -1, 1453882350627420034, 2**64, -(2**70), 3**50,
    1.0, 0.1, float("nan"), float("inf"),
    "", "plain", "quote\" back\\slash /slash", "ctl \n\r\t\b\f \x00\x01\x1f \x7f \x80",
    "ã unicode", "é€ 中文", "emoji \U0001F600 astral \U00010000 \U0010FFFF",
    "\u2028\u2029 \ufeff", [], {}, [1, [2, [3, {}]]],
    {"b": 1, "a": 2, "A": 3, "_": 4, "é": 5, "z": [None, True]},
    {"note": "ã unicode", "chunk_hashes": {"small": "ab" * 32}},
    {"model_type": "X", "tags": {"k": "v"}, "expression": {"theta": 1.5, "r_hat": 0.10000000149011612,
     "mean_N": 0.0, "mean_I": 1e-05}, "reproducibility": {"torch_initial_seed": 1453882350627420034}},
    {"\U0001F600": 1, "\uffff": 2, "\ue000": 3, "~": 4},
    {"nested": {"z": {"y": 1, "x": [1.0, 2.5e-7, 1e16]}, "a": "x"}},
]

doc = {
    "python": sys.version,
    "floats": [[fbits(f), json.dumps(f)] for f in FLOATS],
    "cases": [
        {
            "value": tag(v),
            "canonical": json.dumps(v, sort_keys=True, separators=(",", ":")),
            "index": json.dumps(v, ensure_ascii=False, separators=(",", ":")),
        }
        for v in CASES
    ],
}
json.dump(doc, sys.stdout, ensure_ascii=True, indent=1)
sys.stdout.write("\n")
