"""The safetensors drop-in behaves as safetensors does: the same calls on the real
package and on tessera, side by side (not outputs written down here)."""
from __future__ import annotations

import errno

import numpy as np
import pytest
import safetensors
import safetensors.numpy as stnp
from safetensors import safe_open as st_open

import tessera
import tessera.numpy
from tessera import safe_open as ts_open

INDEXES = [
    (slice(0, 3),),
    (slice(0, 5),),  # past the end: refused, not clamped
    (5,),
    (-1,),
    (-4,),
    (slice(None), slice(0, 10)),
    (slice(1, 3), 2),
    (Ellipsis,),
    (Ellipsis, 3),
    (Ellipsis, 4),
    ([0, 1],),  # fancy indexing: refused
    (np.array([0, 1]),),
    (0, 0, 0),  # more indices than dimensions
]


@pytest.fixture()
def path(tmp_path):
    p = tmp_path / "m.safetensors"
    stnp.save_file({"a": np.arange(12, dtype=np.float32).reshape(3, 4)}, str(p))
    return p


def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 - the class is compared below
        return ("raised", e)


@pytest.mark.parametrize("index", INDEXES, ids=[repr(i) for i in INDEXES])
def test_get_slice_follows_safetensors(path, index):
    with st_open(str(path), "np") as f:
        want = _outcome(lambda: f.get_slice("a")[index])
    with ts_open(path, "np") as f:
        got = _outcome(lambda: f.get_slice("a")[index])
    assert got[0] == want[0], (index, want, got)
    if want[0] == "ok":
        np.testing.assert_array_equal(got[1], want[1])
    else:
        assert isinstance(got[1], tessera.TesseraError)


@pytest.mark.parametrize("method", ["keys", "offset_keys", "metadata", "get_tensor", "get_slice"])
def test_a_closed_handle_refuses_every_method(path, method):
    for opener in (st_open, ts_open):
        with opener(str(path), "np") as f:
            pass
        call = getattr(f, method)
        args = ("a",) if method in ("get_tensor", "get_slice") else ()
        with pytest.raises(Exception) as e:
            call(*args)
        assert "closed" in str(e.value).lower()
    with pytest.raises(tessera.TesseraError):
        f.keys()


def test_os_errors_are_the_builtin_classes_with_errno(tmp_path):
    missing = tmp_path / "missing.safetensors"
    with pytest.raises(FileNotFoundError):
        st_open(str(missing), "np")
    with pytest.raises(FileNotFoundError) as e:
        ts_open(missing, "np")
    assert isinstance(e.value, tessera.TesseraError) and e.value.errno == errno.ENOENT
    assert str(missing) in str(e.value)
    with pytest.raises(OSError):
        st_open(str(tmp_path), "np")
    with pytest.raises(IsADirectoryError) as e:
        ts_open(tmp_path, "np")
    assert isinstance(e.value, tessera.TesseraError) and e.value.errno == errno.EISDIR
    for load in (tessera.numpy.load_file, tessera.open):
        with pytest.raises(FileNotFoundError):
            load(missing)


@pytest.mark.skipif(__import__("os").geteuid() == 0, reason="root reads any file")
def test_permission_error(tmp_path, path):
    path.chmod(0)
    with pytest.raises(PermissionError) as e:
        ts_open(path, "np")
    assert isinstance(e.value, tessera.TesseraError) and e.value.errno == errno.EACCES


def test_backend_is_accepted(path):
    with ts_open(path, "np", backend="rust") as f:
        assert f.keys() == ["a"]
    with pytest.raises(tessera.InvalidInputError):
        ts_open(path, "np", backend="something-else")


def test_bytes_level_functions_match_safetensors(path):
    blob = path.read_bytes()
    want = safetensors.deserialize(blob)
    got = tessera.deserialize(blob)
    assert [(n, t["dtype"], list(t["shape"]), bytes(t["data"])) for n, t in got] == [
        (n, t["dtype"], list(t["shape"]), bytes(t["data"])) for n, t in want
    ]
    spec = {"w": {"dtype": "F32", "shape": [2, 3], "data": bytes(range(24))}}
    ours = tessera.serialize(spec, metadata={"k": "v"})
    # safetensors reads what we serialize, and it is what was given.
    (name, t), = safetensors.deserialize(ours)
    assert name == "w" and t["dtype"] == "F32" and list(t["shape"]) == [2, 3]
    assert bytes(t["data"]) == bytes(range(24))
    assert stnp.load(ours)["w"].shape == (2, 3)
    tessera.serialize_file(spec, path.parent / "s.safetensors")
    np.testing.assert_array_equal(stnp.load_file(str(path.parent / "s.safetensors"))["w"], stnp.load(ours)["w"])
    # numpy-level bytes functions, both ways.
    arrays = {"x": np.arange(5, dtype=np.int16)}
    np.testing.assert_array_equal(stnp.load(tessera.numpy.save(arrays))["x"], arrays["x"])
    np.testing.assert_array_equal(tessera.numpy.load(stnp.save(arrays))["x"], arrays["x"])


def test_a_missing_file_says_so_as_safetensors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for framework in ("np", "pt"):
        with pytest.raises(FileNotFoundError) as want:
            st_open("notafile", framework=framework)
        with pytest.raises(FileNotFoundError) as got:
            ts_open("notafile", framework=framework)
        assert str(got.value) == str(want.value)
    assert got.value.strerror == __import__("os").strerror(errno.ENOENT)
    assert got.value.filename == "notafile"
