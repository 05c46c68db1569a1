"""Shared helpers for the tessera Python package tests.

Most tests are parametrized over the formats ``tessera.formats()`` reports as writable,
so they cover each format as it lands. When no format is writable the parametrized
tests are not silently skipped: ``test_formats.py::test_some_format_is_writable`` fails.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tessera

WRITABLE = [f for f in tessera.formats() if f["writable"]]
READABLE = {f["name"] for f in tessera.formats() if f["readable"]}
# Formats we can both write and read back, holding several tensors (a .npy file holds
# exactly one array: it has its own test).
ROUNDTRIP = [f for f in WRITABLE if f["name"] in READABLE and f["name"] != "npy"]
SINGLE = [f for f in WRITABLE if f["name"] in READABLE and f["name"] == "npy"]


def ext(fmt: dict) -> str:
    return fmt["extensions"][0] if fmt["extensions"] else fmt["name"]


def pytest_generate_tests(metafunc):
    if "fmt" in metafunc.fixturenames:
        metafunc.parametrize("fmt", ROUNDTRIP, ids=[f["name"] for f in ROUNDTRIP])


# numpy arrays of every dtype tessera names, with values that exercise each type.
def sample_arrays(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    f = rng.standard_normal(24).astype(np.float32)
    out = {
        "bool": rng.integers(0, 2, (2, 3)).astype(np.bool_),
        "u8": rng.integers(0, 255, (4, 3), dtype=np.uint8),
        "u16": rng.integers(0, 65535, (5,), dtype=np.uint16),
        "u32": rng.integers(0, 2**32 - 1, (2, 2), dtype=np.uint32),
        "u64": np.array([0, 1, 2**64 - 1], dtype=np.uint64),
        "i8": rng.integers(-128, 127, (3, 1, 2), dtype=np.int8),
        "i16": rng.integers(-(2**15), 2**15 - 1, (3,), dtype=np.int16),
        "i32": rng.integers(-(2**31), 2**31 - 1, (2, 3), dtype=np.int32),
        "i64": np.array([[-(2**63), 2**63 - 1], [0, -1]], dtype=np.int64),
        "f16": f[:6].astype(np.float16).reshape(2, 3),
        "bf16": f[:8].astype(ml_dtypes.bfloat16).reshape(2, 2, 2),
        "f32": f.reshape(4, 6),
        "f64": rng.standard_normal((3, 3)),
        "f8_e4m3fn": f[:6].astype(ml_dtypes.float8_e4m3fn),
        "f8_e5m2": f[:6].astype(ml_dtypes.float8_e5m2),
        "f8_e4m3fnuz": f[:4].astype(ml_dtypes.float8_e4m3fnuz),
        "f8_e5m2fnuz": f[:4].astype(ml_dtypes.float8_e5m2fnuz),
        "c64": (f[:4] + 1j * f[4:8]).astype(np.complex64),
        "c128": (f[:4] + 1j * f[4:8]).astype(np.complex128),
    }
    if hasattr(ml_dtypes, "float8_e8m0fnu"):
        out["f8_e8m0"] = np.array([0.25, 1.0, 4.0], dtype=ml_dtypes.float8_e8m0fnu)
    return out


def arrays_for(fmt: dict, seed: int = 0) -> dict:
    """Sample arrays restricted to the dtypes the format stores, plus a scalar and an
    empty tensor (named so that they sort between the others)."""
    arrays = {k: v for k, v in sample_arrays(seed).items() if k in fmt["dtypes"]}
    if "f32" in fmt["dtypes"]:
        arrays["f32_scalar"] = np.array(3.25, dtype=np.float32)
        arrays["f32_empty"] = np.zeros((0, 3), dtype=np.float32)
    return arrays


def find_meta(md: dict, key: str):
    """A metadata value by key, at the top level or one level down (formats such as
    GPTRS keep user metadata in a nested map: "config")."""
    if key in md:
        return md[key]
    for v in md.values():
        if isinstance(v, dict) and key in v:
            return v[key]
    raise KeyError(key)


def lossless(notes) -> bool:
    """True when a save report says nothing was cast, densified or dropped."""
    return not any(n.startswith(("cast", "densified", "dropped")) for n in notes)


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal dtype, shape and bytes (NaN-safe, bitwise)."""
    a, b = np.asarray(a), np.asarray(b)
    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
    )


@pytest.fixture
def tmp(tmp_path):
    return tmp_path
