"""Sparse tensors: scipy.sparse and tessera.Tensor in, tessera.Tensor out, densified
on request (safe_open/load_file densify, as a dense-only API must)."""
from __future__ import annotations

import numpy as np
import pytest

import tessera
import tessera.numpy as tnp

from conftest import ROUNDTRIP, ext, same

sp = pytest.importorskip("scipy.sparse")
SPARSE = [f for f in ROUNDTRIP if f["sparse"]]
DENSE_ONLY = [f for f in ROUNDTRIP if not f["sparse"]]


def matrix():
    d = np.zeros((4, 5), dtype=np.float32)
    d[0, 1], d[2, 3], d[3, 0], d[3, 4] = 1.5, -2.0, 3.0, 4.0
    return d


def test_a_sparse_format_is_available():
    assert SPARSE, "no readable+writable format stores sparse tensors"


@pytest.mark.parametrize("sfmt", SPARSE, ids=[f["name"] for f in SPARSE])
def test_scipy_csr_and_coo_round_trip(sfmt, tmp):
    d = matrix()
    path = tmp / f"m.{ext(sfmt)}"
    tessera.save({"csr": sp.csr_matrix(d), "coo": sp.coo_matrix(d), "dense": d}, path)
    f = tessera.open(path)
    csr, coo = f["csr"], f["coo"]
    assert isinstance(csr, tessera.Tensor) and csr.layout == "sparse_csr"
    assert isinstance(coo, tessera.Tensor) and coo.layout == "sparse_coo"
    assert csr.shape == (4, 5) and csr.dtype == "f32"
    assert same(csr.to_dense(), d) and same(coo.to_dense(), d)
    assert same(np.asarray(csr.to_scipy().toarray()), d)
    assert same(f.get_tensor("csr", densify=True), d)
    assert same(tnp.load_file(path)["coo"], d)
    with tessera.safe_open(path, framework="np") as s:
        assert same(s.get_tensor("csr"), d)
        assert same(s.get_slice("coo")[1:, :2], d[1:, :2])
    # A Tensor read back saves back unchanged.
    tessera.save({"csr": csr, "coo": coo}, tmp / f"again.{ext(sfmt)}")
    g = tessera.open(tmp / f"again.{ext(sfmt)}")
    assert same(g["csr"].to_dense(), d) and same(g["coo"].to_dense(), d)


@pytest.mark.parametrize("dfmt", DENSE_ONLY, ids=[f["name"] for f in DENSE_ONLY])
def test_dense_only_format_needs_densify(dfmt, tmp):
    path = tmp / f"m.{ext(dfmt)}"
    with pytest.raises(tessera.UnsupportedError, match="densify"):
        tessera.save({"s": sp.csr_matrix(matrix())}, path)
    tessera.save({"s": sp.csr_matrix(matrix())}, path, densify=True)
    assert same(tessera.open(path)["s"], matrix())


def test_native_save_refuses_non_contiguous_buffers(tmp):
    a = np.arange(10, dtype=np.uint8)[::2]
    fmt = ROUNDTRIP[0]
    with pytest.raises(TypeError, match="contiguous"):
        tessera._tessera.save([("x", "u8", [5], "dense", [("data", a)])], str(tmp / f"m.{ext(fmt)}"))
    with pytest.raises(TypeError):
        tessera._tessera.save([("x", "u8", [5], "dense", [("data", [1, 2, 3, 4, 5])])], str(tmp / f"m.{ext(fmt)}"))
    with pytest.raises(tessera.InvalidInputError):  # bytes that disagree with the shape
        tessera._tessera.save([("x", "f32", [5], "dense", [("data", b"1234")])], str(tmp / f"m.{ext(fmt)}"))


def test_native_save_trusts_only_numpy_arrays(tmp):
    class Liar:
        __array_interface__ = {"version": 3, "shape": (64,), "typestr": "|u1", "data": (8, True)}

    fmt = ROUNDTRIP[0]
    with pytest.raises(TypeError, match="contiguous"):
        tessera._tessera.save([("x", "u8", [64], "dense", [("data", Liar())])], str(tmp / f"m.{ext(fmt)}"))
