"""Raw tensors come back as read-only numpy arrays over the mapped file, with no copy;
decoded ones are owned and writable; the map lives as long as any array needs it."""
from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import tessera
from tessera import _tessera

from conftest import ROUNDTRIP, ext, same

ZERO_COPY = [f for f in ROUNDTRIP if f["zero_copy"]]


def root_base(a):
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


def address(a) -> int:
    return a.__array_interface__["data"][0]


def big(n=1 << 16):
    return {"w": np.arange(n, dtype=np.float32), "b": np.arange(10, dtype=np.float32)}


def test_a_zero_copy_format_is_available():
    assert ZERO_COPY, "no readable+writable zero-copy format"


@pytest.mark.parametrize("zfmt", ZERO_COPY, ids=[f["name"] for f in ZERO_COPY])
def test_raw_tensors_borrow_the_mapped_file(zfmt, tmp):
    path = tmp / f"m.{ext(zfmt)}"
    tessera.save(big(), path, format=zfmt["name"])
    f = tessera.open(path)
    a, b = f["w"], f["w"]
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 1.0
    with pytest.raises(ValueError):
        a.flags.writeable = True
    owner = root_base(a)
    assert isinstance(owner, _tessera.Buffer) and owner.borrowed
    # Two reads of the same tensor are the same memory: nothing was copied.
    assert address(a) == address(b)
    # The bytes are in the file as they are in the array.
    assert path.read_bytes().find(a.tobytes()) != -1


@pytest.mark.parametrize("zfmt", ZERO_COPY, ids=[f["name"] for f in ZERO_COPY])
def test_arrays_outlive_the_file_object(zfmt, tmp):
    path = tmp / f"m.{ext(zfmt)}"
    tessera.save(big(), path, format=zfmt["name"])
    with tessera.open(path) as f:
        a = f["w"][1000:1010]
    del f
    gc.collect()
    assert list(a) == list(range(1000, 1010))
    g = tessera.open(path)
    g.close()
    with pytest.raises(ValueError, match="closed"):
        g["w"]


def test_decoded_tensors_are_owned_and_writable(tmp):
    comp = [f for f in ROUNDTRIP if "zstd" in f["compression"]]
    if not comp:
        pytest.fail("no readable+writable format with zstd compression")
    fmt = comp[0]
    path = tmp / f"m.{ext(fmt)}"
    tessera.save(big(), path, format=fmt["name"], compression="zstd")
    f = tessera.open(path)
    a = f["w"]
    assert same(a, big()["w"])
    assert a.flags.writeable
    assert not root_base(a).borrowed
    a[0] = 42.0  # owned: writing changes this array only
    assert f["w"][0] == 0.0


def test_concurrent_reads_from_threads(tmp):
    fmt = ROUNDTRIP[0]
    arrays = {f"t{i}": np.full((256,), i, dtype=np.float32) for i in range(32)}
    path = tmp / f"m.{ext(fmt)}"
    tessera.save(arrays, path)
    f = tessera.open(path)
    errors = []

    def worker(k):
        try:
            for _ in range(20):
                for name in arrays:
                    assert f[name][0] == int(name[1:])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
