#!/usr/bin/env python3
"""Writes values.npz (numpy's own writer) and expected.json: numpy's statistics of each
array, what `tessera stats` must report (tests/all/stats.rs in tessera-cli).

min, max, mean and std are over the finite elements (std with ddof=0), in float64; nan,
pos_inf, neg_inf and zeros are counts. NaN and infinities are placed on purpose.
hist is numpy's `histogram` of the finite elements in 40 bins over [min, max] (what
`tessera stats --plot` counts).

Run: python gen.py  (numpy 2.x)
"""
import json
import pathlib

import numpy as np

here = pathlib.Path(__file__).parent
rng = np.random.default_rng(16)

w = rng.standard_normal((64, 33)).astype(np.float32)
w[3, 4] = np.nan
w[10, 0] = np.inf
w[20, 7] = -np.inf
w[5, :] = 0.0
h = (rng.standard_normal(1000) * 100).astype(np.float16)  # some overflow to inf
h[17] = np.nan
arrays = {
    "w": w,
    "h": h,
    "d": rng.uniform(-1e6, 1e6, 257).astype(np.float64),
    "i": rng.integers(-(2**31), 2**31 - 1, 300, dtype=np.int32),
    "u8": np.arange(256, dtype=np.uint8),
    "flags": rng.integers(0, 2, 50).astype(np.bool_),
    "clean": np.linspace(-1, 1, 101, dtype=np.float32),
}
# Wider dtypes over several 1024-element tiles, one with NaN and Inf in the middle.
big = rng.uniform(-1e3, 1e3, 5000)
big[2500] = np.nan
big[4000] = -np.inf
arrays["big_f64"] = big
arrays["i64"] = rng.integers(-(2**62), 2**62, 3000, dtype=np.int64)
arrays["u32"] = rng.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32)
arrays["u64"] = rng.integers(0, 2**63, 3000, dtype=np.uint64) * np.uint64(2)
np.savez(here / "values.npz", **arrays)

expected = {}
for name, a in arrays.items():
    x = a.astype(np.float64).ravel()
    fin = x[np.isfinite(x)]
    expected[name] = {
        "count": int(x.size),
        "nan": int(np.isnan(x).sum()),
        "pos_inf": int(np.isposinf(x).sum()),
        "neg_inf": int(np.isneginf(x).sum()),
        "zeros": int((x == 0).sum()),
        "min": float(fin.min()),
        "max": float(fin.max()),
        "mean": float(fin.mean()),
        "std": float(fin.std()),
        "hist": [int(c) for c in np.histogram(fin, bins=40, range=(fin.min(), fin.max()))[0]],
    }
(here / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
