"""Slice reads: File.get_slice(name)[...] and tessera.load_slices(path, plan) equal
numpy's slicing of the full tensor, for every dtype of every writable format; the
plan's rules (globs, even splits, errors); unverified slices said once."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tessera

from conftest import ext, same, sample_arrays

SELECTIONS = [
    np.s_[1:4],
    np.s_[::2, 1, :],
    np.s_[-1],
    np.s_[::-1, ::-2, 1:],
    np.s_[..., 0],
    np.s_[2:2],
    np.s_[:, :, ::-1],
    np.s_[1, 2, 3],
    np.s_[:, 1:4:2, -3:-1],
    np.s_[...],
]


def shaped(fmt, seed=0):
    """Each sample dtype the format stores, as a (6, 5, 4) tensor."""
    out = {}
    for k, v in sample_arrays(seed).items():
        if k in fmt["dtypes"]:
            out[k] = np.resize(v.reshape(-1), 120).reshape(6, 5, 4)
    return out


def test_slices_equal_numpy_every_dtype(fmt, tmp):
    arrays = shaped(fmt)
    assert arrays
    path = tmp / f"m.{ext(fmt)}"
    tessera.save(arrays, path)
    f = tessera.open(path, verify=False)
    for name, a in arrays.items():
        s = f.get_slice(name)
        assert s.shape == a.shape and s.dtype == tessera._convert.dtype_name(a.dtype)
        for ix in SELECTIONS:
            got = s[ix]
            assert same(got, a[ix]), (fmt["name"], name, ix)
            assert got.flags.writeable


def test_load_slices_plan_splits_as_array_split(tmp):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((7, 10)).astype(np.float32)
    b = rng.standard_normal((3, 5, 2)).astype(np.float64)
    path = tmp / "m.safetensors"
    tessera.save({"layer.0.w": a, "layer.1.w": b, "bias": np.arange(5, dtype=np.int64)}, path)
    for parts in (1, 3, 4, 9):
        for part in range(parts):
            got = tessera.load_slices(
                path, {"layer.0.*": ("rows", part, parts), "layer.1.w": (1, part, parts), "bias": ("cols", part, parts)}
            )
            assert same(got["layer.0.w"], np.array_split(a, parts, axis=0)[part])
            assert same(got["layer.1.w"], np.array_split(b, parts, axis=1)[part])
            assert same(got["bias"], np.array_split(np.arange(5), parts)[part])
            cols = tessera.load_slices(path, {"layer.0.w": ("cols", part, parts), "layer.1.w": (-1, part, parts)})
            assert same(cols["layer.0.w"], np.array_split(a, parts, axis=1)[part])
            assert same(cols["layer.1.w"], np.array_split(b, parts, axis=2)[part])


def test_load_slices_plan_rules(tmp):
    a = np.arange(24, dtype=np.int32).reshape(4, 6)
    path = tmp / "m.safetensors"
    tessera.save({"x.w": a, "y.w": a + 1, "z": a + 2}, path)
    # The first matching entry wins; unmatched tensors are not read; None is whole.
    got = tessera.load_slices(path, {"x.w": (slice(0, 2),), "*.w": None})
    assert sorted(got) == ["x.w", "y.w"]
    assert same(got["x.w"], a[:2]) and same(got["y.w"], a + 1)
    # An index as text, as the CLI takes it; an opened File.
    f = tessera.open(path)
    assert same(tessera.load_slices(f, {"z": "1:3, ::-2"})["z"], (a + 2)[1:3, ::-2])
    # An entry shadowed by an earlier one still matches a tensor: no error.
    assert sorted(tessera.load_slices(path, {"*": None, "z": ("rows", 0, 2)})) == ["x.w", "y.w", "z"]
    with pytest.raises(tessera.NotFoundError, match=r"'nope\*'"):
        tessera.load_slices(path, {"x.w": None, "nope*": None})
    with pytest.raises(tessera.InvalidInputError, match="'x.w'.*part 2 of 2"):
        tessera.load_slices(path, {"x.w": ("rows", 2, 2)})
    with pytest.raises(tessera.InvalidInputError, match="'x.w'.*'diag'"):
        tessera.load_slices(path, {"x.w": ("diag", 0, 2)})
    with pytest.raises(tessera.InvalidInputError, match="x.w.*dimension 1 of size 6"):
        tessera.load_slices(path, {"x.w": np.s_[:, 6]})
    with pytest.raises(tessera.InvalidInputError, match="x.w.*stop 7.*dimension 1 of size 6"):
        f.get_slice("x.w")[:, 2:7]
    with pytest.raises(tessera.InvalidInputError, match="basic indexing"):
        f.get_slice("x.w")[[0, 1]]
    with pytest.raises(tessera.InvalidInputError, match="threads"):
        tessera.load_slices(path, {"x.w": None}, threads=0)
    assert same(tessera.load_slices(path, {"x.w": ("rows", 1, 2)}, threads=2)["x.w"], a[2:])


def test_big_endian_and_fortran_npy(tmp):
    # numpy writes these (a writer other than ours).
    a = (np.arange(120, dtype=">f4") / 7).astype(">f4").reshape(6, 5, 4)
    np.save(tmp / "be.npy", a)
    f = np.asfortranarray(np.arange(12, dtype="<i8").reshape(3, 4))
    np.save(tmp / "fo.npy", f)
    be = tessera.open(tmp / "be.npy")
    s = be.get_slice(be.keys()[0])
    for ix in SELECTIONS:
        assert np.array_equal(s[ix], a[ix]) and s[ix].dtype == np.float32
    g = tessera.open(tmp / "fo.npy")
    assert np.array_equal(g.get_slice(g.keys()[0])[1:, ::3], f[1:, ::3])


def test_safetensors_written_by_safetensors(tmp):
    from safetensors.numpy import save_file

    rng = np.random.default_rng(2)
    t = {"a": rng.standard_normal((9, 7)).astype(np.float16), "b": rng.integers(0, 9, (5, 3, 2)).astype(np.uint8)}
    save_file(t, str(tmp / "p.safetensors"))
    got = tessera.load_slices(tmp / "p.safetensors", {"a": ("cols", 1, 3), "b": np.s_[::-1, 1, :]})
    assert same(got["a"], np.array_split(t["a"], 3, axis=1)[1])
    assert same(got["b"], t["b"][::-1, 1, :])
    # The safetensors drop-in reads its slices the same way.
    with tessera.safe_open(tmp / "p.safetensors", framework="np") as f:
        assert same(f.get_slice("a")[2:5, 1:], t["a"][2:5, 1:])


def test_whole_tensor_digest_slice_says_unverified_once(tmp):
    a = np.arange(40, dtype=np.float32).reshape(8, 5)
    path = tmp / "m.zt"
    tessera.save({"a": a, "b": a * 2}, path, format="ztensor", digests="sha256")
    with pytest.warns(UserWarning, match="unverified") as rec:
        got = tessera.load_slices(path, {"*": ("rows", 0, 2)})
    assert len([w for w in rec if "unverified" in str(w.message)]) == 1
    assert same(got["a"], a[:4]) and same(got["b"], (a * 2)[:4])
    # verify=False asks for no checks: nothing to say.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tessera.load_slices(path, {"a": ("rows", 0, 2)}, verify=False)


def test_a_missing_page_manifest_is_an_error_naming_it(tmp):
    path = tmp / "m.safetensors"
    tessera.save({"a": np.zeros((2, 2), np.float32)}, path)
    with pytest.raises(tessera.TesseraError, match="m.pages"):
        tessera.load_slices(path, {"a": None}, pages=tmp / "m.pages")


def test_framework_pt(tmp):
    torch = pytest.importorskip("torch")
    a = np.arange(30, dtype=np.float32).reshape(6, 5)
    path = tmp / "m.safetensors"
    tessera.save({"a": a}, path)
    got = tessera.load_slices(path, {"a": ("rows", 1, 2)}, framework="pt")["a"]
    assert isinstance(got, torch.Tensor)
    assert np.array_equal(got.numpy(), a[3:])


def test_aero_pages_check_the_slice_they_touch(tmp):
    # 64 rows of 1 KiB: 4 rows a 4 KiB page.
    a = np.arange(64 * 256, dtype=np.float32).reshape(64, 256)
    path = tmp / "m.aero"
    tessera.save({"w": a}, path, page_hashes=4096)
    off = tessera.open(path).tensor_info("w")["storage"]["offset"]
    data = bytearray(path.read_bytes())
    data[off + 21 * 1024 + 8] ^= 0x10  # row 21: page 5
    bad = tmp / "bad.aero"
    bad.write_bytes(bytes(data))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # checked by its pages: nothing unverified
        got = tessera.load_slices(bad, {"w": np.s_[24:40]})
    assert same(got["w"], a[24:40])
    with pytest.raises(tessera.IntegrityError, match=r"'?\"?w\"?.*page 5"):
        tessera.load_slices(bad, {"w": np.s_[20:22]})
    with pytest.raises(tessera.IntegrityError):
        tessera.open(bad).get_slice("w")[:, 0]
    # Without pages, the shard's BLAKE3 covers more than a slice: said once.
    tessera.save({"w": a}, tmp / "plain.aero")
    with pytest.warns(UserWarning, match="unverified"):
        tessera.load_slices(tmp / "plain.aero", {"w": ("rows", 0, 4)})


def test_load_slices_over_http_costs_the_slices_bytes(tmp_path, monkeypatch):
    import os

    url, root, log = (os.environ.get(k) for k in ("TESSERA_TEST_HTTP_URL", "TESSERA_TEST_HTTP_ROOT", "TESSERA_TEST_HTTP_LOG"))
    if not (url and root and log):
        if os.environ.get("TESSERA_REQUIRE_REMOTE") == "1":
            pytest.fail("TESSERA_REQUIRE_REMOTE=1: no test servers")
        pytest.skip("no test servers (scripts/test.sh starts them)")
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "cache"))
    from safetensors.numpy import save_file

    rng = np.random.default_rng(3)
    t = {f"l{i}.w": rng.standard_normal((64, 1024)).astype(np.float32) for i in range(8)}
    name = f"py-slices-{os.getpid()}.safetensors"
    save_file(t, os.path.join(root, name))

    def served():
        total = 0
        with open(log) as f:
            for line in f:
                parts = line.split(" ")
                if len(parts) > 1 and parts[1] == f"/{name}":
                    total += int(parts[-1])
        return total

    got = tessera.load_slices(f"{url}/{name}", {"*": ("rows", 1, 4)}, cache=False, concurrency=4)
    for k, v in t.items():
        assert same(got[k], v[16:32])
    quarter = sum(v.nbytes for v in t.values()) // 4
    # The index at open (64 KiB at most) and the quarter's bytes.
    assert served() <= quarter + (64 << 10) + 8 * 1024, (served(), quarter)
