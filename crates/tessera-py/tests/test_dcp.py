"""PyTorch Distributed Checkpoints through the Python API: the 4-rank checkpoint torch
wrote (crates/tessera/tests/data/dcp/valid-r4/, gen_dcp.py) opens with ``tessera.open``
by its directory or its ``.metadata``, every tensor equal to the full tensor torch saved
(expected.json, by SHA-256), its non-tensor items as metadata; ``tessera.save(...,
format="dcp")`` writes a checkpoint into a directory (one rank, or ``shards=N``) that
reads back equal."""
import hashlib
import json
import os
import pathlib

import numpy as np
import pytest

import tessera

DATA = pathlib.Path(__file__).resolve().parents[2] / "tessera" / "tests" / "data" / "dcp"
EXPECTED = json.loads((DATA / "expected.json").read_text())


@pytest.mark.parametrize("path", [DATA / "valid-r4", DATA / "valid-r4" / ".metadata"])
def test_torchs_four_ranks_read_equal(path):
    want = EXPECTED["valid-r4/"]["tensors"]
    f = tessera.open(path)
    assert sorted(f.keys()) == sorted(want)
    for name, t in want.items():
        data = np.ascontiguousarray(f.get_tensor(name)).tobytes()
        assert hashlib.sha256(data).hexdigest() == t["sha256"], name
    assert f.metadata["run_name"] == "tiny-run"
    assert f.metadata["step"] == 7


@pytest.mark.parametrize("shards", [None, 3])
def test_save_format_dcp_into_a_directory(tmp_path, shards):
    tensors = {
        "model.w": np.arange(21, dtype=np.float32).reshape(7, 3),
        "model.b": np.arange(2, dtype=np.int64),
    }
    out = tmp_path / "ckpt"
    kw = {} if shards is None else {"shards": shards}
    tessera.save(tensors, out, format="dcp", metadata={"note": "py"}, **kw)
    files = sorted(os.listdir(out))
    assert files == [".metadata"] + [f"__{r}_0.distcp" for r in range(shards or 1)]
    f = tessera.open(out)
    for k, v in tensors.items():
        assert np.array_equal(f.get_tensor(k), v), k
    assert f.metadata["note"] == "py"
