"""Write with tessera.save, read with tessera.open: every writable format, every dtype
it stores, metadata, determinism, bytes vs file, odd inputs."""
from __future__ import annotations

import numpy as np
import pytest

import tessera
import tessera.numpy as tnp

from conftest import SINGLE, arrays_for, ext, find_meta, lossless, same, sample_arrays

FIXED = {"timestamp": "2024-01-02T03:04:05Z", "uuid": bytes(range(16)), "fixed_salt": b"saltsalt"}


def fixed(fmt):
    """The reproducibility options this format takes (others would be refused)."""
    return {k: v for k, v in FIXED.items() if k in fmt["options"]}


def metadata_for(fmt):
    if fmt["metadata"] == "none":
        return None
    if fmt["metadata"] == "strings":
        return {"model": "tiny", "step": "42"}
    return {"model": "tiny", "step": 42, "nested": {"lr": 0.5, "tags": ["a", "b"]}}


def test_roundtrip_every_dtype(fmt, tmp):
    arrays = arrays_for(fmt)
    assert arrays, f"{fmt['name']} stores none of the sample dtypes"
    md = metadata_for(fmt)
    path = tmp / f"m.{ext(fmt)}"
    report = tessera.save(arrays, path, metadata=md, **fixed(fmt))
    assert lossless(report.notes), report.notes
    f = tessera.open(path)
    assert f.format == fmt["name"]
    assert sorted(f) == sorted(arrays)
    assert len(f) == len(arrays)
    for k, a in arrays.items():
        got = f[k]
        assert isinstance(got, np.ndarray)
        assert same(got, a), k
        info = f.tensor_info(k)
        assert info["dtype"] == tessera._convert.dtype_name(a.dtype)
        assert tuple(info["shape"]) == a.shape
    if md is not None:
        for k, v in md.items():
            assert find_meta(f.metadata, k) == v
    assert f.verify().ok


def test_save_to_bytes_equals_the_file_and_loads(fmt, tmp):
    arrays = arrays_for(fmt, seed=1)
    path = tmp / f"m.{ext(fmt)}"
    tessera.save(arrays, path, format=fmt["name"], **fixed(fmt))
    data = tessera.save(arrays, None, format=fmt["name"], **fixed(fmt))
    assert isinstance(data, bytes)
    assert data == path.read_bytes()
    f = tessera.load(data)
    for k, a in arrays.items():
        assert same(f[k], a)


def test_output_is_deterministic(fmt, tmp):
    arrays = arrays_for(fmt, seed=2)
    a, b = tmp / f"a.{ext(fmt)}", tmp / f"b.{ext(fmt)}"
    tessera.save(arrays, a, metadata=metadata_for(fmt), **fixed(fmt))
    tessera.save(arrays, b, metadata=metadata_for(fmt), **fixed(fmt))
    assert a.read_bytes() == b.read_bytes()


def test_numpy_module_round_trip(fmt, tmp):
    arrays = arrays_for(fmt, seed=3)
    path = tmp / f"m.{ext(fmt)}"
    tnp.save_file(arrays, path)
    assert tessera.open(path).format == fmt["name"]
    loaded = tnp.load_file(path)
    assert sorted(loaded) == sorted(arrays)
    for k, a in arrays.items():
        assert same(loaded[k], a)
    data = tnp.save(arrays, format=fmt["name"])
    for k, a in tnp.load(data).items():
        assert same(a, arrays[k])


def test_non_contiguous_and_big_endian_inputs(fmt, tmp):
    if "f32" not in fmt["dtypes"] or "i32" not in fmt["dtypes"]:
        pytest.fail(f"{fmt['name']} stores neither f32 nor i32; adapt the test")
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    arrays = {
        "transposed": base.T,
        "strided": base[:, ::2],
        "big_endian": np.arange(5, dtype=">i4"),
    }
    if "f64" in fmt["dtypes"]:
        arrays["from_list"] = [[1.5, 2.5]]
    path = tmp / f"m.{ext(fmt)}"
    tessera.save(arrays, path)
    f = tessera.open(path)
    assert same(f["transposed"], np.ascontiguousarray(base.T))
    assert same(f["strided"], np.ascontiguousarray(base[:, ::2]))
    assert same(f["big_endian"], np.arange(5, dtype="<i4"))
    if "from_list" in arrays:
        assert same(f["from_list"], np.array([[1.5, 2.5]]))


def test_dtype_the_format_lacks_is_refused_then_cast_on_request(fmt, tmp):
    missing = [k for k in sample_arrays() if k not in fmt["dtypes"] and k != "f8_e8m0"]
    if not missing:
        pytest.skip(f"{fmt['name']} stores every dtype")
    name = missing[0]
    arrays = {name: sample_arrays()[name]}
    path = tmp / f"m.{ext(fmt)}"
    with pytest.raises(tessera.UnsupportedError, match=name):
        tessera.save(arrays, path)
    assert not path.exists()  # nothing half-written under the name
    try:
        report = tessera.save(arrays, path, cast=True)
    except tessera.UnsupportedError:
        return  # no dtype to cast to (e.g. complex into a real-only format): refused is right
    assert any(name in n for n in report.notes)
    assert tessera.open(path)[name].dtype != arrays[name].dtype


def test_metadata_the_format_cannot_hold_needs_drop_metadata(fmt, tmp):
    path = tmp / f"m.{ext(fmt)}"
    arrays = arrays_for(fmt)
    if fmt["metadata"] != "none":
        # Metadata values that are not strings: kept as a tree, or as JSON text.
        tessera.save(arrays, path, metadata={"n": 3})
        v = find_meta(tessera.open(path).metadata, "n")
        assert v in (3, "3")
        return
    with pytest.raises(tessera.UnsupportedError):
        tessera.save(arrays, path, metadata={"k": "v"})
    tessera.save(arrays, path, metadata={"k": "v"}, drop_metadata=True)
    # Only what the format's own header says (WTXT's `wtxt.gen`, … as metadata).
    assert all(k.startswith(fmt["name"] + ".") for k in tessera.open(path).metadata)
    assert "k" not in tessera.open(path).metadata


def test_names_are_kept_exactly(fmt, tmp):
    if "f32" not in fmt["dtypes"]:
        pytest.fail("adapt the test: no f32")
    path = tmp / f"m.{ext(fmt)}"
    ascii_names = ["model.layers.0.attn.q_proj.weight", "lm_head.weight", "a/b-c:d"]
    for names in (ascii_names, ascii_names + ["ünïcode/名前", "a b"]):
        arrays = {n: np.full((2,), i, dtype=np.float32) for i, n in enumerate(names)}
        try:
            tessera.save(arrays, path)
        except tessera.InvalidInputError as e:
            # A format may restrict names (WTXT: no spaces; GPTRS: ASCII); it must say which.
            assert names is not ascii_names and ("ünïcode" in str(e) or "a b" in str(e)), e
            continue
        f = tessera.open(path)
        assert sorted(f) == sorted(names)
        for i, n in enumerate(names):
            assert f[n][0] == i


@pytest.mark.parametrize("one", SINGLE, ids=[f["name"] for f in SINGLE])
def test_single_array_format(one, tmp):
    path = tmp / f"m.{ext(one)}"
    for name, a in sample_arrays().items():
        if name not in one["dtypes"]:
            continue
        tessera.save({"x": a}, path)
        f = tessera.open(path)
        assert len(f) == 1
        assert same(f[list(f)[0]], a), name
    with pytest.raises(tessera.TesseraError):
        tessera.save({"a": np.zeros(1, np.float32), "b": np.zeros(1, np.float32)}, path)


def test_convert_between_every_pair(fmt, tmp):
    """File.convert streams a file into every other writable format; what the target
    cannot hold is refused unless cast/densify/drop_metadata allow it."""
    from conftest import ROUNDTRIP

    arrays = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "v": np.ones(5, dtype=np.float32)}
    src = tmp / f"src.{ext(fmt)}"
    tessera.save(arrays, src)
    for target in ROUNDTRIP:
        dst = tmp / f"dst-{fmt['name']}-{target['name']}.{ext(target)}"
        report = tessera.convert(src, dst, drop_metadata=True)
        g = tessera.open(dst)
        assert g.format == target["name"]
        for k, a in arrays.items():
            assert same(g[k], a), (fmt["name"], target["name"], k)
        assert isinstance(report.notes, list)
