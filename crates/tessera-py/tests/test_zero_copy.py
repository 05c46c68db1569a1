"""Raw tensors come back as read-only numpy arrays over the mapped file, with no copy;
decoded ones are owned and writable; the map lives as long as any array needs it. The
safetensors-style drop-ins (load_file, load, safe_open) copy instead, into buffers the
arrays own, as safetensors does; copy=False gives them the zero-copy arrays."""
from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import tessera
import tessera.numpy as tnp
from tessera import _tessera

from conftest import ROUNDTRIP, ext, same

ZERO_COPY = [f for f in ROUNDTRIP if f["zero_copy"]]


def root_base(a):
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


def address(a) -> int:
    return a.__array_interface__["data"][0]


def borrowed(a) -> bool:
    """True when the array (or the array it views) borrows a tessera file's bytes."""
    r = root_base(a)
    return isinstance(r, _tessera.Buffer) and r.borrowed


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


# --- the drop-ins copy (writable, the caller's), unless copy=False -------------------


def test_load_file_arrays_are_owned_writable_and_independent(fmt, tmp):
    path = tmp / f"m.{ext(fmt)}"
    tessera.save(big(), path, format=fmt["name"])
    before = path.read_bytes()
    first = tnp.load_file(path)
    again = tnp.load_file(path)
    for k, v in big().items():
        a = first[k]
        assert same(a, v)
        assert a.flags.writeable and a.flags.owndata is False
        assert not root_base(a).borrowed
        a *= 0.5  # in place, as with safetensors
        a[0] = 42.0
        assert a[0] == 42.0 and a[2] == v[2] * 0.5
        # Neither another load's array, nor a re-load, nor the file changed.
        assert same(again[k], v)
        assert same(tnp.load_file(path)[k], v)
        assert address(a) != address(again[k])
    assert path.read_bytes() == before


def test_large_copies_use_huge_page_buffers(fmt, tmp):
    """Copies of 2 MiB and more go into anonymous maps advised for huge pages (the fast
    path); small ones into the heap. (A checked copy — a tensor the file stores a digest
    for, read with verify on — is instead the private buffer its digest was computed
    over: see test_checked_reads.py. verify=False here takes the copying path.)"""
    path = tmp / f"m.{ext(fmt)}"
    arrays = {"w": np.arange(1 << 20, dtype=np.float32), "b": np.arange(10, dtype=np.float32)}
    tessera.save(arrays, path, format=fmt["name"])
    checked = tnp.load_file(path)
    assert same(checked["w"], arrays["w"]) and same(checked["b"], arrays["b"])
    loaded = tnp.load_file(path, verify=False)
    assert same(loaded["w"], arrays["w"]) and same(loaded["b"], arrays["b"])
    assert not root_base(loaded["b"]).huge_pages
    if fmt["zero_copy"]:
        assert root_base(loaded["w"]).huge_pages
        assert address(loaded["w"]) % 4096 == 0
    # Zero-copy reads never copy.
    assert not root_base(tessera.open(path)["w"]).huge_pages


@pytest.mark.parametrize("zfmt", ZERO_COPY, ids=[f["name"] for f in ZERO_COPY])
def test_load_file_copy_false_is_zero_copy_and_read_only(zfmt, tmp):
    path = tmp / f"m.{ext(zfmt)}"
    arrays = {"w": np.arange(1 << 16, dtype=np.float32), "b": np.arange(10, dtype=np.float32) - 7.5}
    tessera.save(arrays, path, format=zfmt["name"])
    loaded = tnp.load_file(path, copy=False)
    w, b = loaded["w"], loaded["b"]
    assert same(w, arrays["w"]) and same(b, arrays["b"])
    for a in (w, b):
        assert not a.flags.writeable
        with pytest.raises(ValueError):
            a *= 0.5
        with pytest.raises(ValueError):
            a.flags.writeable = True
        assert root_base(a).borrowed and not root_base(a).huge_pages
    # Both arrays lie in one mapping of the file, as far apart as their bytes are in it.
    data = path.read_bytes()
    assert address(w) - address(b) == data.find(w.tobytes()) - data.find(b.tobytes())
    assert root_base(w) is not root_base(b)  # one Buffer per tensor, one map per file


@pytest.mark.parametrize("zfmt", ZERO_COPY, ids=[f["name"] for f in ZERO_COPY])
def test_load_bytes_copies_unless_asked_not_to(zfmt, tmp):
    blob = tnp.save(big(), format=zfmt["name"])
    a = tnp.load(blob)["w"]
    assert a.flags.writeable and not root_base(a).borrowed
    a += 1
    assert same(tnp.load(blob)["w"], big()["w"])
    z = tnp.load(blob, copy=False)["w"]
    assert same(z, big()["w"]) and not z.flags.writeable and root_base(z).borrowed


@pytest.mark.parametrize("zfmt", ZERO_COPY, ids=[f["name"] for f in ZERO_COPY])
def test_safe_open_copies_unless_asked_not_to(zfmt, tmp):
    path = tmp / f"m.{ext(zfmt)}"
    tessera.save(big(), path, format=zfmt["name"])
    with tessera.safe_open(path, framework="np") as f:
        a, part = f.get_tensor("w"), f.get_slice("w")[10:20]
        assert a.flags.writeable and not borrowed(a)
        assert part.flags.writeable and not borrowed(part)
        a[:] = 0
        part[:] = 0
        assert same(f.get_tensor("w"), big()["w"])
    with tessera.safe_open(path, framework="np", copy=False) as f:
        a, part = f.get_tensor("w"), f.get_slice("w")[10:20]
        assert same(a, big()["w"]) and list(part) == list(range(10, 20))
        assert not a.flags.writeable and borrowed(a)
        assert not part.flags.writeable and borrowed(part)
        assert address(part) == address(a) + 10 * 4


def test_decoded_tensors_are_not_copied_twice(tmp):
    comp = [f for f in ROUNDTRIP if "zstd" in f["compression"]]
    if not comp:
        pytest.fail("no readable+writable format with zstd compression")
    path = tmp / f"m.{ext(comp[0])}"
    arrays = {"w": np.arange(1 << 20, dtype=np.float32)}
    tessera.save(arrays, path, format=comp[0]["name"], compression="zstd")
    a = tnp.load_file(path)["w"]
    assert same(a, arrays["w"]) and a.flags.writeable
    owner = root_base(a)
    # The decoder's own buffer, handed over as is (a copy would be a huge-page buffer).
    assert not owner.borrowed and not owner.huge_pages


def test_small_copies_are_packed_into_shared_huge_page_buffers(fmt, tmp):
    """load_file packs tensors under 2 MiB into shared huge-page chunks (~16 MiB each):
    every array still has its own bytes (disjoint, writable, independent)."""
    path = tmp / f"m.{ext(fmt)}"
    # 40 tensors of 512 KiB (20 MiB: more than one chunk) and a tiny one.
    arrays = {f"t{i:02}": np.full(1 << 17, i, dtype=np.float32) for i in range(40)}
    arrays["tiny"] = np.arange(3, dtype=np.float32)
    tessera.save(arrays, path, format=fmt["name"])
    loaded = tnp.load_file(path, verify=False)  # checked copies: see the test above
    assert list(loaded) == list(tessera.open(path))
    for k, v in arrays.items():
        assert same(loaded[k], v), k
    if not fmt["zero_copy"]:
        return  # decoded tensors are handed over, not copied
    owners = [root_base(a) for a in loaded.values()]
    assert all(o.packed and o.huge_pages and not o.borrowed for o in owners)
    spans = sorted((address(a), address(a) + a.nbytes) for a in loaded.values())
    assert all(end <= nxt for (_, end), (nxt, _) in zip(spans, spans[1:])), "copies overlap"
    assert all(address(a) % 64 == 0 for a in loaded.values())
    # Writing one array changes no other, nor the file.
    loaded["t05"][:] = -1.0
    loaded["tiny"] *= 2
    for k, v in arrays.items():
        if k not in ("t05", "tiny"):
            assert same(loaded[k], v), k
    assert same(tnp.load_file(path)["t05"], arrays["t05"])
    # An array outlives the others of its chunk.
    keep = loaded["t07"]
    del loaded, owners
    gc.collect()
    assert same(keep, arrays["t07"])
    # get_tensors(copy=False) is zero-copy, like get_tensor.
    zc = tessera.open(path).get_tensors(["t01", "tiny"])
    assert list(zc) == ["t01", "tiny"] and all(borrowed(a) for a in zc.values())
