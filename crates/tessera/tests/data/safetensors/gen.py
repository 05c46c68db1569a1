"""Writes the safetensors test vectors with the `safetensors` package (0.8.0) itself,
plus `expected.json` (names, dtypes, shapes, data as hex, metadata) computed by numpy.

Run: /tmp/pyenv/bin/python gen.py   (needs numpy, ml_dtypes, safetensors==0.8.0)
The Rust tests (crates/tessera/tests/all/safetensors.rs) read these files and compare with
expected.json; the files are also the byte-identity oracle for our writer.
"""
import json
import pathlib

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

HERE = pathlib.Path(__file__).parent

# Our canonical dtype names for the numpy/ml_dtypes types.
CANON = {
    "bool": "bool", "uint8": "u8", "int8": "i8", "uint16": "u16", "int16": "i16",
    "uint32": "u32", "int32": "i32", "uint64": "u64", "int64": "i64", "float16": "f16",
    "bfloat16": "bf16", "float32": "f32", "float64": "f64", "complex64": "c64",
    "float8_e4m3fn": "f8_e4m3fn", "float8_e5m2": "f8_e5m2", "float8_e8m0fnu": "f8_e8m0",
    "float8_e4m3fnuz": "f8_e4m3fnuz", "float8_e5m2fnuz": "f8_e5m2fnuz",
}


def vectors():
    r = np.random.default_rng(7)
    mixed = {
        "model.embed.weight": r.standard_normal((3, 4)).astype(np.float32),
        "model.norm.bias": r.standard_normal(5).astype(np.float64),
        "b16": r.standard_normal((2, 3)).astype(ml_dtypes.bfloat16),
        "half": r.standard_normal(3).astype(np.float16),
        "i16": np.array([-3, 7], np.int16),
        "u16": np.array([65535, 1], np.uint16),
        "i32": np.array([-1, 2, 3], np.int32),
        "u32": np.array([4000000000], np.uint32),
        "i64": np.array([-(2**62), 5], np.int64),
        "u64": np.array([2**63 + 11], np.uint64),
        "e4m3": np.array([1.5, -2, 448, 0.001953125], ml_dtypes.float8_e4m3fn),
        "e5m2": np.array([1.5, -2, 57344, np.inf], ml_dtypes.float8_e5m2),
        "e8m0": np.array([1, 2, 0.5], ml_dtypes.float8_e8m0fnu),
        "e4m3fnuz": np.array([1, -3], ml_dtypes.float8_e4m3fnuz),
        "e5m2fnuz": np.array([1, -3], ml_dtypes.float8_e5m2fnuz),
        "i8": np.array([-128, 127], np.int8),
        "u8": np.arange(6, dtype=np.uint8).reshape(2, 3),
        "flags": np.array([True, False, True]),
        "scalar": np.array(3.25, np.float32),
        "empty": np.zeros((0, 4), np.float32),
        "cplx": np.array([1 + 2j, -3.5j], np.complex64),
    }
    return {
        "mixed.safetensors": (mixed, {"format": "np"}),
        "nometa.safetensors": ({"a": np.arange(4, dtype=np.int32), "B": np.ones(3, np.float16)}, None),
        "bf16_fp8.safetensors": ({
            "w": r.standard_normal((4, 4)).astype(ml_dtypes.bfloat16),
            "q4": r.standard_normal(7).astype(ml_dtypes.float8_e4m3fn),
            "q5": r.standard_normal(7).astype(ml_dtypes.float8_e5m2),
        }, {"quant": "fp8 \"e4m3\" / é"}),
        "empty.safetensors": ({}, None),
        "meta_only.safetensors": ({}, {"only": "metadata"}),
    }


def main():
    expected = {}
    for fname, (tensors, meta) in vectors().items():
        save_file(tensors, str(HERE / fname), metadata=meta)
        expected[fname] = {
            "metadata": meta or {},
            "tensors": {
                k: {"dtype": CANON[v.dtype.name], "shape": list(v.shape), "hex": v.tobytes().hex()}
                for k, v in tensors.items()
            },
        }
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
