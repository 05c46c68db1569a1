#!/usr/bin/env python3
"""Generates the ggml block-quantization vectors with the reference peer, gguf-py
(`pip install gguf==0.19.0`; numpy 2.4). Run from this directory: `python gen.py`.

Dequantize vectors, one pair per type gguf-py decodes and Tessera implements:
- `<type>.blocks`: raw packed blocks: random bytes, then the f16 scales (and the
  E8M0/UE4M3 scales of MXFP4/NVFP4) overwritten with sane random values, except edge
  blocks: scales 0, -0, the largest and smallest (subnormal) f16, NaN and +-inf, and
  blocks whose payload bytes are all 0x00 or all 0xFF.
- `<type>.f32`: `gguf.quants.dequantize(blocks, type)`, little-endian float32.

The grid IQ types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) are made the
same way after the others, from a second generator (`rng_iq`) so the earlier files do
not change: random bytes (every grid index, sign and sub-scale bit pattern is valid),
the f16 `d` at byte 0 overwritten with sane values and the edge values; IQ1_M has no
`d` field: its f16 is the top nibbles of the four u16 scales (bytes 48..56), set
nibble by nibble.

Quantize vectors:
- `quant_input.f32`: float32 inputs, 32 per block: normal random values at several
  scales, plus edge blocks (all zero, -0 and 0 mixed, one value repeated, ties for the
  largest magnitude with both signs, exact .5 ties after scaling, f16 overflow and
  subnormal magnitudes, a NaN, +-inf, integers, signed zeros among
  negatives or positives).
- `<type>.quant`: `gguf.quants.quantize(input.reshape(-1, 32), type)` bytes.

manifest.json lists each file with its type, element count and SHA-256.
"""
import hashlib
import json
import warnings

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

DEQUANT = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K",
           "Q6_K", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4", "IQ4_NL", "IQ4_XS"]
GRID_IQ = ["IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M"]
QUANT = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"]

# Byte offsets of the f16 scales inside each block.
F16_AT = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
    "TQ1_0": [52], "TQ2_0": [64], "IQ4_NL": [0], "IQ4_XS": [0],
    "IQ2_XXS": [0], "IQ2_XS": [0], "IQ2_S": [0], "IQ3_XXS": [0], "IQ3_S": [0],
    "IQ1_S": [0],
}
EDGE_F16 = [0.0, -0.0, 65504.0, -65504.0, 2.0**-24, np.nan, np.inf, -np.inf]

rng = np.random.default_rng(20261124)
rng_iq = np.random.default_rng(20261125)
manifest = {}


def save(name, data: bytes, **extra):
    with open(name, "wb") as f:
        f.write(data)
    manifest[name] = {"sha256": hashlib.sha256(data).hexdigest(), **extra}


def set_iq1m_d(row, value):
    """Stores f16 `value` as IQ1_M keeps its scale: nibble k of its bits in the top
    nibble of the u16 scale k (bytes 48 + 2k, 49 + 2k)."""
    bits = int(np.array([value], np.float16).view(np.uint16)[0])
    for k in range(4):
        hi = 49 + 2 * k
        row[hi] = (row[hi] & 0x0F) | (((bits >> (4 * k)) & 0x0F) << 4)


def make_blocks(tname, rng=rng):
    block, size = GGML_QUANT_SIZES[Q[tname]]
    n = 48 if block == 32 else 20
    b = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    if tname == "IQ1_M":
        vals = (rng.standard_normal(n) * 0.05).astype(np.float16)
        for i in range(n):
            set_iq1m_d(b[i], EDGE_F16[i] if i < len(EDGE_F16) else vals[i])
    elif tname == "MXFP4":
        b[:, 0] = rng.integers(110, 140, size=n)
        b[-4:, 0] = [0, 1, 2, 255]
    elif tname == "NVFP4":
        b[:-4, :4] = rng.integers(0, 256, size=(n - 4, 4))
        b[-4:, :4] = [[0, 0x7F, 0xFF, 0x80], [1, 7, 8, 0x7E], [0x78, 0x79, 0xF8, 0x07],
                      [0, 0, 0, 0]]
    else:
        for off in F16_AT[tname]:
            vals = (rng.standard_normal(n) * 0.05).astype(np.float16)
            b[:, off:off + 2] = vals.view(np.uint8).reshape(n, 2)
            for i, v in enumerate(EDGE_F16):
                b[i, off:off + 2] = np.array([v], np.float16).view(np.uint8)
    # Payloads of all zeros and all ones (scales kept).
    keep = set()
    for off in F16_AT.get(tname, []):
        keep |= {off, off + 1}
    if tname == "MXFP4":
        keep = {0}
    if tname == "NVFP4":
        keep = {0, 1, 2, 3}
    for row, fill in ((n - 6, 0x00), (n - 5, 0xFF)):
        for c in range(size):
            if c not in keep:
                b[row, c] = fill
        if tname == "IQ1_M":
            set_iq1m_d(b[row], 0.03125)
    return b


def quant_input():
    blocks = []
    for s in (1.0, 1e-3, 100.0, 3e4):
        blocks += list((rng.standard_normal((8, 32)) * s).astype(np.float32))
    edge = np.zeros((16, 32), np.float32)
    edge[1, ::2] = -0.0
    edge[2, :] = 0.75
    edge[3, :] = -2.5
    edge[4, 5], edge[4, 9] = 3.0, -3.0          # equal magnitudes, + first
    edge[5, 5], edge[5, 9] = -3.0, 3.0          # equal magnitudes, - first
    edge[6, :] = np.arange(32) - 16.0           # ties after scaling
    edge[7, :] = (np.arange(32) - 16.0) * 0.5
    edge[8, :] = rng.standard_normal(32) * 1e6  # d overflows f16
    edge[9, :] = rng.standard_normal(32) * 1e-7  # subnormal f16 scales
    edge[10, :] = rng.standard_normal(32)
    edge[10, 3] = np.nan
    edge[11, :] = rng.standard_normal(32)
    edge[11, 7] = np.inf
    edge[12, :] = rng.standard_normal(32)
    edge[12, 0] = -np.inf
    edge[13, :] = np.arange(32, dtype=np.float32) * 127 / 31
    edge[14, :] = 1e-45                         # smallest subnormal: 1/d overflows
    edge[15, :] = rng.integers(-8, 8, 32)
    blocks += list(edge)
    # Signed zeros among negatives (max is a zero) and positives (min is a zero): which
    # zero numpy's reduction returns is what gguf-py stores as the Q4_1/Q5_1 minimum.
    for other in (-1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0):
        ch = rng.integers(0, 3, 32)
        blocks.append(np.where(ch == 0, other, np.where(ch == 1, -0.0, 0.0)))
    return np.stack(blocks).astype(np.float32)


def main():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.seterr(all="ignore")
        for t in DEQUANT:
            b = make_blocks(t)
            out = dequantize(b, Q[t]).astype("<f4")
            save(f"{t.lower()}.blocks", b.tobytes(), type=t, blocks=b.shape[0])
            save(f"{t.lower()}.f32", out.tobytes(), type=t, elements=out.size)
        x = quant_input()
        save("quant_input.f32", x.astype("<f4").tobytes(), elements=x.size)
        for t in QUANT:
            q = quantize(x, Q[t])
            save(f"{t.lower()}.quant", q.tobytes(), type=t, blocks=x.shape[0])
        for t in GRID_IQ:
            b = make_blocks(t, rng_iq)
            out = dequantize(b, Q[t]).astype("<f4")
            save(f"{t.lower()}.blocks", b.tobytes(), type=t, blocks=b.shape[0])
            save(f"{t.lower()}.f32", out.tobytes(), type=t, elements=out.size)
    with open("manifest.json", "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
