"""Writes `fp4_torch.safetensors` with torch 2.x and the `safetensors` package (its torch
path: `safetensors.torch.save_file`), and its entry in `expected.json` (beside gen.py's):
every tensor's dtype, logical shape, stored bytes and values, computed here with
ml_dtypes.

Run: python gen_fp4.py   (needs torch >= 2.8, safetensors 0.8.0, numpy, ml_dtypes)

torch holds f4 as `float4_e2m1fn_x2` (two values per byte, shape = logical shape with
the last dimension halved); safetensors writes dtype `F4` with the logical shape. The
values are read low nibble first, as gpt-oss's MXFP4 blocks and zTensor v2 pack them
(`lut[b & 0x0F]` is the even element).
"""
import json
import pathlib

import ml_dtypes
import numpy as np
import torch
from safetensors.torch import save_file

HERE = pathlib.Path(__file__).parent

packed = np.array([[0x21, 0x43], [0x65, 0xF7], [0x08, 0x9A]], dtype=np.uint8)
scales = np.array([127, 128, 126], dtype=np.uint8)  # 1, 2, 0.5 as E8M0
tensors = {
    "blocks": torch.from_numpy(packed.copy()).view(torch.float4_e2m1fn_x2),
    "scales": torch.from_numpy(scales.copy()).view(torch.float8_e8m0fnu),
    "bias": torch.tensor([0.25, -1.5], dtype=torch.bfloat16),
}
save_file(tensors, HERE / "fp4_torch.safetensors", metadata={"format": "pt"})

codes = np.empty(packed.size * 2, dtype=np.uint8)
codes[0::2] = packed.reshape(-1) & 0x0F
codes[1::2] = packed.reshape(-1) >> 4
f4 = codes.view(ml_dtypes.float4_e2m1fn).astype(np.float64)
bias = np.array([0.25, -1.5], dtype=ml_dtypes.bfloat16)
tensors = {
    "blocks": {"dtype": "f4_e2m1", "shape": [3, 4], "hex": packed.tobytes().hex(), "values": f4.tolist()},
    "scales": {"dtype": "f8_e8m0", "shape": [3], "hex": scales.tobytes().hex(),
               "values": scales.view(ml_dtypes.float8_e8m0fnu).astype(np.float64).tolist()},
    "bias": {"dtype": "bf16", "shape": [2], "hex": bias.tobytes().hex(), "values": bias.astype(np.float64).tolist()},
}
path = HERE / "expected.json"
expected = json.loads(path.read_text())
expected["fp4_torch.safetensors"] = {"metadata": {"format": "pt"}, "tensors": tensors}
path.write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
