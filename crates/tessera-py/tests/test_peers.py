"""Files cross between tessera and the original zTensor package (ztensor==1.0.1)."""
from __future__ import annotations

import numpy as np
import pytest

import tessera
import tessera.numpy as tnp

from conftest import ROUNDTRIP, same

ztensor_numpy = pytest.importorskip("ztensor.numpy")


def need_ztensor():
    assert "ztensor" in {f["name"] for f in ROUNDTRIP}, "the ztensor format is not merged yet"


def arrays():
    rng = np.random.default_rng(3)
    return {
        "w": rng.standard_normal((32, 16)).astype(np.float32),
        "b": rng.standard_normal((16,)).astype(np.float64),
        "ids": np.arange(10, dtype=np.int32),
        "h": rng.standard_normal((5,)).astype(np.float16),
    }


def test_ztensor_reads_what_tessera_writes(tmp):
    need_ztensor()
    for opts in ({}, {"compression": "zstd"}, {"digests": ["crc32c"]}, {"digests": "sha256", "compression": 5}):
        path = tmp / "ours.zt"
        tessera.save(arrays(), path, **opts)
        got = ztensor_numpy.load_file(str(path))
        assert sorted(got) == sorted(arrays()), opts
        for k, v in arrays().items():
            assert same(got[k], v), (k, opts)


def test_tessera_reads_what_ztensor_writes(tmp):
    need_ztensor()
    path = tmp / "theirs.zt"
    ztensor_numpy.save_file(arrays(), str(path))
    f = tessera.open(path)
    assert f.format == "ztensor"
    for k, v in arrays().items():
        assert same(f[k], v)
    assert f.verify().ok
    loaded = tnp.load_file(path)
    assert sorted(loaded) == sorted(arrays())
