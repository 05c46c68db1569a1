"""Writes `mxfp4_pair.safetensors`, MXFP4 weights as gpt-oss checkpoints store them, with
the `safetensors` package (numpy path), and its entry in `expected.json`: each stored
tensor's dtype, shape and bytes, and under "mxfp4" what `--dequantize f32` must make of
each `_blocks` + `_scales` pair, computed here with ml_dtypes (`float4_e2m1fn` codes,
`float8_e8m0fnu` scales), not by Tessera.

Run: python gen_mxfp4.py   (needs numpy, ml_dtypes, safetensors)

gpt-oss stores `<name>_blocks` u8 (..., G, 16): 32 E2M1 codes per block, the even
element in the low nibble, and `<name>_scales` u8 (..., G): an E8M0 exponent per block.
One scale here is 0xFF, NaN in E8M0 (OCP MX), so NaN must come out for that block.
`lonely_blocks` has no scales and must pass unchanged; `bias` is a plain tensor.
"""
import json
import pathlib

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

HERE = pathlib.Path(__file__).parent
rng = np.random.default_rng(20261128)

stem = "model.layers.0.mlp.experts.gate_up_proj"
blocks = rng.integers(0, 256, size=(2, 3, 2, 16), dtype=np.uint8)
scales = rng.integers(118, 136, size=(2, 3, 2), dtype=np.uint8)
scales[1, 2, 1] = 0xFF
scales[0, 0, 0] = 0
tensors = {
    f"{stem}_blocks": blocks,
    f"{stem}_scales": scales,
    "model.layers.0.mlp.experts.gate_up_proj_bias": rng.standard_normal((2, 6)).astype(np.float32),
    "lonely_blocks": rng.integers(0, 256, size=(1, 16), dtype=np.uint8),
}
path = HERE / "mxfp4_pair.safetensors"
save_file(tensors, path, metadata={"format": "pt"})


def dequantized(b, s):
    codes = np.empty(b.shape[:-1] + (32,), dtype=np.uint8)
    codes[..., 0::2] = b & 0x0F
    codes[..., 1::2] = b >> 4
    vals = codes.view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    k = s.view(ml_dtypes.float8_e8m0fnu).astype(np.float32)[..., None]
    out = (vals * k).reshape(b.shape[:-2] + (b.shape[-2] * 32,))
    return out


out = dequantized(blocks, scales)
assert np.isnan(out[1, 2, 32:]).all() and not np.isnan(out[1, 2, :32]).any()
names = {"float32": "f32", "uint8": "u8"}
entry = {
    "metadata": {"format": "pt"},
    "tensors": {
        n: {"dtype": names[str(a.dtype)], "shape": list(a.shape), "hex": a.tobytes().hex()}
        for n, a in tensors.items()
    },
    "mxfp4": {
        stem: {
            "shape": list(out.shape),
            "f32_hex": out.astype("<f4").tobytes().hex(),
            "bf16_hex": out.astype(ml_dtypes.bfloat16).tobytes().hex(),
        }
    },
}
expected_path = HERE / "expected.json"
expected = json.loads(expected_path.read_text())
expected["mxfp4_pair.safetensors"] = entry
expected_path.write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
