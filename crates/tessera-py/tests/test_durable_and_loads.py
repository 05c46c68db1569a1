"""Saves with durable=False are still atomic and write the same bytes; copying loads
(load_file, copy=True) read the file with parallel positional reads into buffers the
caller owns and return exactly what was saved, even after the path is replaced."""
from __future__ import annotations

import os

import numpy as np
import pytest

import tessera
import tessera.numpy as tnp


def model():
    rng = np.random.default_rng(7)
    m = {
        # Several 8 MiB pieces, one not piece-aligned, so the parallel fill runs.
        "big": rng.standard_normal((5 << 20) // 4 + 333).astype(np.float32),
        "mid": rng.standard_normal((3 << 20) // 4).astype(np.float32),
        "i8": rng.integers(-128, 127, size=(4097, 3), dtype=np.int8),
    }
    for i in range(40):
        m[f"small.{i}"] = rng.standard_normal(1000 + 37 * i).astype(np.float32)
    # Enough small ones to fill packed chunks beyond 16 MiB in all.
    for i in range(12):
        m[f"packed.{i}"] = rng.standard_normal((1 << 20) // 4 + i).astype(np.float32)
    return m


def temporaries(d) -> list:
    return [n for n in os.listdir(d) if n.endswith(".tmp")]


@pytest.mark.parametrize("ext", ["safetensors", "zt"])
def test_durable_false_writes_the_same_bytes(tmp_path, ext):
    m = model()
    a, b = tmp_path / f"a.{ext}", tmp_path / f"b.{ext}"
    tnp.save_file(m, a)
    b.write_bytes(b"old contents")
    tnp.save_file(m, b, durable=False)
    assert a.read_bytes() == b.read_bytes()
    assert temporaries(tmp_path) == []
    got = tnp.load_file(b)
    assert sorted(got) == sorted(m)
    for k in m:
        np.testing.assert_array_equal(got[k], m[k])


def test_failed_save_without_fsync_keeps_the_old_file(tmp_path):
    p = tmp_path / "m.safetensors"
    p.write_bytes(b"old")
    with pytest.raises(tessera.TesseraError):
        # Refused by the writer: safetensors takes no compression option.
        tnp.save_file(model(), p, durable=False, compression="zstd")
    assert p.read_bytes() == b"old"
    assert temporaries(tmp_path) == []


def test_durable_must_be_a_bool(tmp_path):
    with pytest.raises(TypeError):
        tessera.save({"x": np.zeros(3, np.float32)}, tmp_path / "x.safetensors", durable="no")


@pytest.mark.parametrize("ext", ["safetensors", "zt", "npy"])
def test_copying_loads_read_positionally_and_match(tmp_path, ext):
    m = model() if ext != "npy" else {"big": model()["big"]}
    p = tmp_path / f"m.{ext}"
    tnp.save_file(m, p)
    f = tessera.open(p)
    assert f.positional_reads
    got = f.get_tensors(copy=True)
    if ext == "npy":  # one array, under the file's own name
        (name,) = got
        m = {name: m["big"]}
    for k in m:
        assert got[k].flags.writeable
        np.testing.assert_array_equal(got[k], m[k])
    big = "big" if ext != "npy" else name
    one = f.get_tensor(big, copy=True)
    np.testing.assert_array_equal(one, m[big])
    # Owned: writing to a copy changes neither the file nor another load.
    got[big][:] = 0
    np.testing.assert_array_equal(tnp.load_file(p)[big], m[big])


def test_a_replaced_path_does_not_change_what_an_open_file_reads(tmp_path):
    m = model()
    p = tmp_path / "m.safetensors"
    tnp.save_file(m, p)
    f = tessera.open(p)
    other = {k: v + 1 for k, v in m.items()}
    tnp.save_file(other, p)  # atomic: a new inode under the same name
    got = f.get_tensors(copy=True)
    for k in m:
        np.testing.assert_array_equal(got[k], m[k])


def test_bytes_and_zero_copy_loads_do_not_read_positionally(tmp_path):
    m = model()
    p = tmp_path / "m.safetensors"
    tnp.save_file(m, p)
    f = tessera.load(p.read_bytes())
    assert not f.positional_reads
    got = f.get_tensors(copy=True)
    np.testing.assert_array_equal(got["mid"], m["mid"])
    views = tnp.load_file(p, copy=False)
    assert not views["big"].flags.writeable
    np.testing.assert_array_equal(views["big"], m["big"])
