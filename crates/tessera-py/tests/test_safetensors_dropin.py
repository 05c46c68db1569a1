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


# --- safetensors 0.8's names: SafetensorError, TensorSpec, _safe_open_handle ---------


def test_safetensor_error_is_every_tessera_error(path):
    import importlib

    assert tessera.SafetensorError is tessera.TesseraError
    importlib.import_module(tessera.SafetensorError.__module__)
    with ts_open(path, "np") as f:
        pass
    for opener, err in ((st_open, safetensors.SafetensorError), (ts_open, tessera.SafetensorError)):
        with opener(str(path), "np") as f:
            pass
        with pytest.raises(err):
            f.keys()


def _specs(mod, arrays):
    return {
        k: mod.TensorSpec(dtype=a.dtype.name, shape=a.shape, data_ptr=a.ctypes.data, data_len=a.nbytes)
        for k, a in arrays.items()
    }


def test_tensor_spec_serializes_as_safetensors(tmp_path):
    arrays = {
        "w": np.arange(12, dtype=np.float32).reshape(3, 4),
        "i": np.arange(5, dtype=np.int8),
        "empty": np.zeros((0, 3), dtype=np.float16),
        "scalar": np.array(7, dtype=np.int64),
    }
    theirs, ours = _specs(safetensors, arrays), _specs(tessera, arrays)
    for k in arrays:
        for attr in ("dtype", "shape", "data_ptr", "data_len"):
            assert getattr(ours[k], attr) == getattr(theirs[k], attr), (k, attr)
    assert tessera.serialize(ours) == safetensors.serialize(theirs)
    meta = {"k": "v"}
    assert tessera.serialize(ours, metadata=meta) == safetensors.serialize(theirs, metadata=meta)
    tessera.serialize_file(ours, tmp_path / "ours.safetensors")
    safetensors.serialize_file(theirs, str(tmp_path / "theirs.safetensors"))
    assert (tmp_path / "ours.safetensors").read_bytes() == (tmp_path / "theirs.safetensors").read_bytes()
    # data= (tessera's own, no raw address) gives the same bytes.
    by_data = {k: tessera.TensorSpec(dtype=a.dtype.name, shape=a.shape, data=a.tobytes()) for k, a in arrays.items()}
    assert tessera.serialize(by_data) == safetensors.serialize(theirs)
    # A length that does not match dtype and shape is refused, not written.
    bad = {"w": tessera.TensorSpec(dtype="float32", shape=[3, 4], data=b"\0" * 47)}
    with pytest.raises(tessera.SafetensorError):
        tessera.serialize(bad)


def test_tensor_spec_refuses_as_safetensors():
    for mod in (safetensors, tessera):
        with pytest.raises(mod.SafetensorError):
            mod.TensorSpec(dtype="nonsense", shape=[1], data_ptr=0, data_len=0)
        # 0.8 takes TensorSpecs only: a raw dict of pointers is a TypeError.
        with pytest.raises(TypeError):
            mod.serialize({"t": {"dtype": "float32", "shape": [1], "data_ptr": 0, "data_len": 0}})
    # NULL with a length is refused at construction (safetensors would read address 0).
    with pytest.raises(tessera.SafetensorError):
        tessera.TensorSpec(dtype="float32", shape=[1], data_ptr=0, data_len=4)


def test_serialize_still_takes_dicts_with_bytes():
    """safetensors 0.7's input, {"dtype", "shape", "data": bytes}, keeps working."""
    data = np.arange(6, dtype=np.float32).tobytes()
    ours = tessera.serialize({"w": {"dtype": "F32", "shape": [2, 3], "data": data}})
    spec = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert ours == safetensors.serialize(_specs(safetensors, {"w": spec}))


def test_safe_open_handle_reads_an_open_file(path, tmp_path):
    import io

    want = stnp.load_file(str(path))
    with builtins_open(path, "r") as f, safetensors._safe_open_handle(f, framework="np", device="cpu") as g:
        theirs = {k: g.get_tensor(k) for k in g.keys()}
    for mode in ("r", "rb"):
        with builtins_open(path, mode) as f, tessera._safe_open_handle(f, framework="np", device="cpu") as g:
            ours = {k: g.get_tensor(k) for k in g.keys()}
            assert g.metadata() is None
        assert ours.keys() == theirs.keys() == want.keys()
        for k in want:
            np.testing.assert_array_equal(ours[k], theirs[k])
    # Objects without a usable name (fsspec, s3fs, BytesIO) are read through read().
    with tessera._safe_open_handle(io.BytesIO(path.read_bytes()), "np") as g:
        np.testing.assert_array_equal(g.get_tensor("a"), want["a"])
    # The name no longer leads to the open file: its descriptor is read, not the name.
    with builtins_open(path, "rb") as f:
        path.rename(tmp_path / "moved.safetensors")
        stnp.save_file({"other": np.zeros(1, np.float32)}, str(path))
        with tessera._safe_open_handle(f, "np") as g:
            assert g.keys() == ["a"]
            np.testing.assert_array_equal(g.get_tensor("a"), want["a"])
    with pytest.raises(TypeError):
        tessera._safe_open_handle(object(), "np")


builtins_open = open


@pytest.fixture()
def wide(tmp_path):
    p = tmp_path / "wide.safetensors"
    stnp.save_file({"a": np.random.default_rng(0).random((10, 5))}, str(p))
    return p


# Indexes safetensors refuses, each with its own message; and the empty list it takes.
SAFETENSORS_SLICES = [
    (slice(2, None), -6),
    [0, 1],
    (slice(2, None), 20),
    (slice(None, 20),),
    slice(None, 20),
    (slice(None), slice(None, 20)),
    [],
    (),
    (slice(2, None), -1),
    (slice(None, 2), slice(1, 3)),
]


@pytest.mark.parametrize("index", SAFETENSORS_SLICES, ids=[repr(i) for i in SAFETENSORS_SLICES])
def test_slices_fail_with_safetensors_words(wide, index):
    with st_open(str(wide), "np") as f:
        want = _outcome(lambda: f.get_slice("a")[index])
    with ts_open(wide, "np") as f:
        got = _outcome(lambda: f.get_slice("a")[index])
    assert got[0] == want[0], (want, got)
    if want[0] == "ok":
        assert got[1].shape == want[1].shape
        np.testing.assert_array_equal(got[1], want[1])
    else:
        assert isinstance(got[1], tessera.SafetensorError)
        assert str(got[1]) == str(want[1])


def test_safe_open_get_tensors_and_pread_backend(path):
    with st_open(str(path), "np", backend="pread") as f:
        want = f.get_tensors()
    with ts_open(path, "np", backend="pread") as f:
        got = f.get_tensors()
    assert list(got) == list(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
        assert got[k].flags.writeable


def test_a_missing_file_says_so_as_safetensors(tmp_path, monkeypatch):
    import importlib.util

    monkeypatch.chdir(tmp_path)
    # (safetensors may need torch for "pt" before it opens anything; CI has no torch.)
    for framework in ("np", "pt") if importlib.util.find_spec("torch") else ("np",):
        with pytest.raises(FileNotFoundError) as want:
            st_open("notafile", framework=framework)
        with pytest.raises(FileNotFoundError) as got:
            ts_open("notafile", framework=framework)
        assert str(got.value) == str(want.value)
    assert got.value.strerror == __import__("os").strerror(errno.ENOENT)
    assert got.value.filename == "notafile"
