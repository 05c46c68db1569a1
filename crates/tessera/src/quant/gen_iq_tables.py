#!/usr/bin/env python3
"""Writes iq_tables.bin, the ggml lattice codebooks the grid IQ types decode with, taken
from gguf-py (`pip install gguf==0.19.0`, MIT licence, the version pinned in
tests/requirements.txt). Run from this directory: `python gen_iq_tables.py`.

The tables are ggml format constants (a file's block bytes index into them), needed to
read those files; they are not typed in by hand but read from gguf-py's
`gguf.quants` classes: `IQ2_XXS.ksigns` and each class's decoded `grid` (what
`init_grid()` unpacks from its packed hex).

Layout of iq_tables.bin, sections back to back, one byte per value:
    ksigns     128 bytes          sign byte for a 7-bit sign index
    iq2xxs     256 x 8  (u8)      IQ2_XXS grid rows
    iq2xs      512 x 8  (u8)      IQ2_XS
    iq2s      1024 x 8  (u8)      IQ2_S
    iq3xxs     256 x 4  (u8)      IQ3_XXS
    iq3s       512 x 4  (u8)      IQ3_S
    iq1s      2048 x 8  (i8)      IQ1_S and IQ1_M: -1, 0 or 1
The Rust side (iq.rs) states the same offsets and checks the total length at compile
time. The SHA-256 of the file is printed.
"""
import hashlib

import numpy as np
from gguf import quants

SECTIONS = [
    ("IQ2_XXS", (256, 8), np.uint8),
    ("IQ2_XS", (512, 8), np.uint8),
    ("IQ2_S", (1024, 8), np.uint8),
    ("IQ3_XXS", (256, 4), np.uint8),
    ("IQ3_S", (512, 4), np.uint8),
    ("IQ1_S", (2048, 8), np.int8),
]


def main():
    out = bytearray(quants.IQ2_XXS.ksigns)
    assert len(out) == 128
    for name, shape, dtype in SECTIONS:
        cls = getattr(quants, name)
        cls.init_grid()
        grid = np.asarray(cls.grid, dtype=np.float32).reshape(shape)
        as_int = grid.astype(dtype)
        # Every value is a small integer: the byte form loses nothing.
        assert np.array_equal(as_int.astype(np.float32), grid), name
        out += as_int.tobytes()
    # IQ1_M shares IQ1_S's grid.
    quants.IQ1_M.init_grid()
    assert np.array_equal(quants.IQ1_M.grid, quants.IQ1_S.grid)
    with open("iq_tables.bin", "wb") as f:
        f.write(out)
    print(len(out), "bytes, sha256", hashlib.sha256(out).hexdigest())


if __name__ == "__main__":
    main()
