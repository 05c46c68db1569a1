"""HDF5: h5py writes (contiguous, compact-free defaults, chunked with gzip and shuffle,
big-endian, bool), tessera reads: `inspect --json` lists what h5py wrote, and `convert` to
safetensors gives the arrays h5py holds, read back by the safetensors package; filters
we do not read are refused by name."""
import h5py
import numpy as np
import pytest
from safetensors.numpy import load_file

from conftest import run, run_json

LAYOUTS = {
    "contiguous": {},
    "gzip": {"chunks": True, "compression": "gzip"},
    "shuffle_gzip": {"chunks": True, "compression": "gzip", "compression_opts": 9, "shuffle": True},
    "chunked_plain": {"chunks": True},
}


def arrays():
    rng = np.random.default_rng(7)
    return {
        "layer/kernel": rng.standard_normal((33, 17)).astype(np.float32),
        "layer/bias": rng.standard_normal(17).astype(np.float16),
        "steps": np.arange(-50, 50, dtype=">i8"),
        "deep/er/mask": rng.integers(0, 2, (9, 4)).astype(bool),
        "bytes": rng.integers(0, 255, (4, 5, 6), dtype=np.uint8),
    }


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_h5py_files_inspect_and_convert(tmp_path, layout):
    src = tmp_path / "w.h5"
    want = arrays()
    with h5py.File(src, "w") as f:
        f.attrs["note"] = "written by h5py"
        for k, a in want.items():
            f.create_dataset(k, data=a, **LAYOUTS[layout])
    doc = run_json("inspect", src)
    got = {t["name"]: t for t in doc["tensors"]}
    assert sorted(got) == sorted(want)
    for k, a in want.items():
        assert got[k]["shape"] == list(a.shape)
    assert doc["metadata"]["note"] == "written by h5py"
    out = tmp_path / "w.safetensors"
    run("convert", src, out)
    back = load_file(str(out))
    for k, a in want.items():
        assert back[k].dtype == a.dtype.newbyteorder("="), k
        assert np.array_equal(back[k], a), k


def test_filters_we_do_not_read_are_refused_by_name(tmp_path):
    p = tmp_path / "lzf.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("x", data=np.arange(100, dtype=np.float32), chunks=(10,), compression="lzf")
    r = run("inspect", p, check=False)
    assert r.returncode != 0
    assert "lzf" in r.stderr
