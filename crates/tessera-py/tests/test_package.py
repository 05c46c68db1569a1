"""Package-level behaviour that does not depend on a particular format."""
from __future__ import annotations

import pathlib

import ml_dtypes
import numpy as np
import pytest

import tessera
import tessera.errors as E
from tessera import _convert

from conftest import ROUNDTRIP, WRITABLE, sample_arrays

PKG = pathlib.Path(tessera.__file__).parent


def test_some_format_is_writable_and_readable():
    # The parametrized tests run over these; with none they would pass vacuously.
    assert WRITABLE, "no writable format: the format tests would not run"
    assert ROUNDTRIP, "no format is both writable and readable"


def test_formats_describe_capabilities():
    fs = {f["name"]: f for f in tessera.formats()}
    assert {"safetensors", "ztensor", "fold", "aero", "wtxt", "gguf"} <= set(fs)
    for f in fs.values():
        assert isinstance(f["readable"], bool) and isinstance(f["writable"], bool)
        if f["writable"]:
            assert f["dtypes"], f["name"]
            assert f["metadata"] in ("none", "strings", "tree")


def test_every_tessera_dtype_maps_to_numpy_and_back():
    names = [n for n, _ in tessera._tessera.dtypes()]
    for n in names:
        if n == "f8_e8m0" and not hasattr(ml_dtypes, "float8_e8m0fnu"):
            continue
        dt = _convert.numpy_dtype(n)
        assert _convert.dtype_name(dt) == n
        assert dt.itemsize == dict(tessera._tessera.dtypes())[n]
    assert set(sample_arrays()) <= set(names)


def test_dtype_names_accept_aliases_and_refuse_others():
    assert _convert.dtype_name("float32") == "f32"
    assert _convert.dtype_name(np.dtype(ml_dtypes.bfloat16)) == "bf16"
    assert _convert.dtype_name("torch.float8_e4m3fn") == "f8_e4m3fn"
    with pytest.raises(tessera.InvalidInputError):
        _convert.dtype_name(np.dtype(object))
    with pytest.raises(ValueError):  # InvalidInputError is a ValueError
        _convert.dtype_name("q4_0")


def test_exception_hierarchy():
    assert issubclass(E.FormatError, E.TesseraError)
    assert issubclass(E.UnknownFormatError, E.FormatError)
    assert issubclass(E.IntegrityError, E.TesseraError)
    assert not issubclass(E.IntegrityError, E.FormatError)  # malformed != integrity
    assert issubclass(E.LimitError, E.TesseraError)
    assert issubclass(E.UnsupportedVersionError, E.UnsupportedError)
    assert issubclass(E.NotFoundError, KeyError)
    assert issubclass(E.IoError, OSError)
    assert issubclass(E.InvalidInputError, ValueError)
    for name in E.__all__:
        assert getattr(tessera, name) is getattr(E, name)


def test_typed_stubs_ship_with_the_package():
    assert (PKG / "py.typed").exists()
    for mod in ("__init__", "numpy", "torch", "errors", "_tessera", "tensor"):
        assert (PKG / f"{mod}.pyi").exists(), mod


def test_detect_by_content():
    assert tessera._tessera.detect(b"ZTEN1000" + b"\0" * 8) == "ztensor"
    assert tessera._tessera.detect(b"FOLDv1\0\0") == "fold"
    assert tessera._tessera.detect(b"hello") is None


def test_the_public_namespace_is_the_api():
    # Issue 30 §5: dir(tessera) listed np, os, json, … (the module's own imports).
    names = dir(tessera)
    for leaked in ("np", "os", "json", "warnings", "builtins", "re", "Any", "Mapping", "dataclass"):
        assert leaked not in names, leaked
    public = {n for n in names if not n.startswith("_")}
    assert public == set(tessera.__all__) | {"errors", "numpy", "torch", "wtxt"}
    assert len(tessera.__all__) == len(set(tessera.__all__))
    for name in tessera.__all__:
        assert hasattr(tessera, name), name
    star: dict = {}
    exec("from tessera import *", star)
    assert {n for n in star if not n.startswith("__")} == set(tessera.__all__)
