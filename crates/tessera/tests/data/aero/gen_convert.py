"""Writes `convert-input.safetensors` with the safetensors package (0.8.0), and
`valid-aerotensor-convert.aero`: that file converted by aerotensor's own safetensors converter
(`aerotensor.convert.safetensors_to_aero.convert_safetensors`, Aero commit 630e8a4)
with the file UUID 11…11. Tessera's `convert` of the same input with `-O uuid=11…11` must
give these bytes (crates/tessera/tests/all/aero_roundtrip.rs).

Run: PYTHONPATH=<Aero checkout>/py python gen_convert.py   (needs numpy, safetensors, msgpack,
blake3, zstandard)

The input's tensors are named so that name order differs from safetensors' order, and
`a.bias` (three f16, 6 bytes) puts the next tensor at an offset that is not a multiple
of its element size: with `-O aerotensor` Tessera packs back to back as aerotensor does.
The metadata key `license` is one the converter drops.
"""
import pathlib

import numpy as np
from safetensors.numpy import save_file

from aerotensor.convert.safetensors_to_aero import convert_safetensors

HERE = pathlib.Path(__file__).parent
save_file(
    {
        "c.steps": np.array([3, -4], dtype=np.int64),
        "b.weight": np.arange(6, dtype=np.float32).reshape(2, 3) / 4,
        "a.bias": np.array([0.5, -1, 2], dtype=np.float16),
    },
    HERE / "convert-input.safetensors",
    metadata={"format": "pt", "model_name": "tiny", "license": "mit"},
)
convert_safetensors(
    str(HERE / "convert-input.safetensors"),
    str(HERE / "valid-aerotensor-convert.aero"),
    uuid=bytes.fromhex("11" * 16),
)
