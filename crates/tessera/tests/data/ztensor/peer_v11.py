#!/usr/bin/env python3
"""Writes `valid-pypi-ztensor-1.0.2-v11.zt` with the real PyPI `ztensor` 1.0.2, whose
files are the zTensor v1.1 layout (footer magic `ZTEN1000` after the size, `objects`
instead of `tensors`, per-component short dtypes, version "1.1.0"). 1.0.2 is not the
pinned peer (1.0.1 is), so it is run from its unpacked wheel, never installed:

    pip download ztensor==1.0.2 --no-deps -d /tmp/zt102
    unzip -q /tmp/zt102/ztensor-1.0.2-*.whl -d /tmp/zt102/ext
    PYTHONPATH=/tmp/zt102/ext python3 peer_v11.py
"""
import pathlib

import numpy as np
import scipy.sparse as sp
import ztensor

assert ztensor.__file__.startswith("/tmp/zt102"), ztensor.__file__
out = pathlib.Path(__file__).resolve().parent / "valid-pypi-ztensor-1.0.2-v11.zt"
with ztensor.Writer(str(out)) as w:
    w.add_tensor("w", np.arange(6, dtype=np.float32).reshape(2, 3))
    w.add_tensor("z", np.arange(100, dtype=np.int64), compress=True)
    w.add_tensor("h", np.arange(4, dtype=np.float16))
    m = sp.csr_matrix(np.array([[1, 0, 2], [0, 0, 3]], dtype=np.float32))
    w.add_sparse_csr("csr", m.data, m.indices, m.indptr, m.shape)
    w.add_sparse_coo("coo", np.array([5, 6], dtype=np.int32), np.array([[0, 1], [2, 0]]), (2, 3))
