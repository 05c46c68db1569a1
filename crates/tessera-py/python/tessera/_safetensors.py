"""safetensors 0.8's API names that :mod:`tessera` re-exports beside its own.

``TensorSpec`` is what 0.8's ``serialize``/``serialize_file`` take: a tensor's dtype,
shape and bytes. As in safetensors the bytes may be given as a raw address
(``data_ptr``, ``data_len``); tessera also takes ``data=`` (any bytes-like object),
which needs no trust in an address. ``handle_source`` says where
:class:`tessera._safe_open_handle` reads an already opened file from.
"""
from __future__ import annotations

import ctypes
import os
from typing import Any, List, Optional, Sequence, Union

import numpy as np

from . import _tessera
from ._convert import SAFETENSORS_NAMES
from .errors import InvalidInputError, TesseraError, UnsupportedError

# The dtype names safetensors 0.8's TensorSpec takes (torch's and numpy's spellings).
_SPEC_DTYPES = (
    "bool, int8, uint8, int16, uint16, int32, uint32, int64, uint64, float16, float32, "
    "float64, bfloat16, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, "
    "float8_e8m0fnu, complex64 (or a safetensors code: F32, BF16, …)"
)


def _code(dtype: Any) -> str:
    """The safetensors code of a dtype name (``float32`` or ``F32`` -> ``F32``)."""
    name = str(dtype)
    if name.startswith("torch."):
        name = name[len("torch."):]
    if name in ("float4_e2m1fn_x2", "F4"):
        return "F4"
    if name in ("F6_E2M3", "F6_E3M2"):
        return name
    try:
        canonical = _tessera.canonical_dtype(name)
    except TesseraError:
        raise InvalidInputError(f"Unknown dtype {name!r}. Supported dtypes: {_SPEC_DTYPES}") from None
    code = SAFETENSORS_NAMES.get(canonical)
    if code is None:
        raise UnsupportedError(f"dtype {name!r} has no safetensors name")
    return code


def _nonneg_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise InvalidInputError(f"TensorSpec: {what} must be a non-negative int, not {value!r}")
    return int(value)


class TensorSpec:
    """One tensor for :func:`tessera.serialize` / :func:`tessera.serialize_file`
    (safetensors 0.8's ``TensorSpec``)::

        TensorSpec(dtype="float32", shape=[2, 3], data_ptr=a.ctypes.data, data_len=a.nbytes)
        TensorSpec(dtype="F32", shape=[2, 3], data=a.tobytes())

    ``dtype``: a name (``float32``, ``bfloat16``, …) or a safetensors code (``F32``); an
    unknown one raises :class:`tessera.SafetensorError` (an :class:`InvalidInputError`)
    here, not at serialization. ``data_ptr``/``data_len``: the address and length of
    the tensor's contiguous little-endian bytes. As in safetensors, the caller must keep
    that memory alive and unchanged until the ``serialize`` call that uses the spec
    returns: the address cannot be checked. ``data=`` (bytes, bytearray, memoryview or
    a numpy array) is the safe alternative: the spec keeps it alive. The bytes' length
    must match the dtype and shape (checked when serializing).
    """

    __slots__ = ("_dtype", "_shape", "_data_ptr", "_data_len", "_data")

    def __init__(
        self,
        *,
        dtype: str,
        shape: Sequence[int],
        data_ptr: Optional[int] = None,
        data_len: Optional[int] = None,
        data: Any = None,
    ) -> None:
        self._dtype = _code(dtype)
        if isinstance(shape, (str, bytes)):
            raise InvalidInputError(f"TensorSpec: shape must be a sequence of ints, not {shape!r}")
        self._shape: List[int] = [_nonneg_int(d, "every dimension") for d in shape]
        if self._dtype == "F4" and self._shape:
            # As safetensors does: the shape given is the storage shape of two F4 per
            # byte (torch's float4_e2m1fn_x2); the header records the logical one.
            self._shape[-1] *= 2
        if data is not None:
            if data_ptr is not None or data_len is not None:
                raise InvalidInputError("TensorSpec: give data= or data_ptr=/data_len=, not both")
            arr = np.frombuffer(data if not isinstance(data, np.ndarray) else np.ascontiguousarray(data), dtype=np.uint8)
            self._data: Optional[np.ndarray] = arr
            self._data_ptr = arr.ctypes.data if arr.size else 0
            self._data_len = int(arr.size)
            return
        if data_ptr is None or data_len is None:
            raise InvalidInputError("TensorSpec: needs data_ptr= and data_len= (or data=)")
        self._data = None
        self._data_ptr = _nonneg_int(data_ptr, "data_ptr")
        self._data_len = _nonneg_int(data_len, "data_len")
        if self._data_len and not self._data_ptr:
            raise InvalidInputError(f"TensorSpec: data_ptr is 0 (NULL) for {self._data_len} bytes")

    @property
    def dtype(self) -> str:
        """The safetensors code (``F32``, ``BF16``, ``F8_E5M2FNUZ``…)."""
        return self._dtype

    @property
    def shape(self) -> List[int]:
        return list(self._shape)

    @property
    def data_ptr(self) -> int:
        return self._data_ptr

    @property
    def data_len(self) -> int:
        return self._data_len

    def _bytes(self) -> Union[bytes, np.ndarray]:
        """The bytes as a 1-D uint8 array the native writer reads in place (no copy)."""
        if self._data is not None:
            return self._data
        if not self._data_len:
            return b""
        # The caller vouches for the address (safetensors' contract): a view, no copy.
        buf = (ctypes.c_ubyte * self._data_len).from_address(self._data_ptr)
        return np.frombuffer(buf, dtype=np.uint8)

    def __repr__(self) -> str:
        return (
            f"TensorSpec(dtype={self._dtype!r}, shape={self._shape}, "
            f"data_ptr={self._data_ptr}, data_len={self._data_len})"
        )


def spec_item(name: str, spec: Any):
    """One ``serialize`` input as the native writer takes it. A ``TensorSpec``, or a
    dict ``{"dtype", "shape", "data"}`` with the bytes in ``data`` (safetensors 0.7's
    input, still taken); anything else is a ``TypeError``, as in safetensors 0.8."""
    if not isinstance(name, str):
        raise TypeError(f"tensor names must be str, not {type(name).__name__}")
    if isinstance(spec, dict) and "data" in spec and not ({"data_ptr", "data_len"} & spec.keys()):
        if spec.get("dtype") is None or spec.get("shape") is None:
            raise InvalidInputError(f"tensor {name!r}: needs dtype, shape and data (bytes)")
        spec = TensorSpec(dtype=spec["dtype"], shape=spec["shape"], data=spec["data"])
    if not isinstance(spec, TensorSpec):
        raise TypeError(
            f"tensor {name!r}: expected a TensorSpec (or a dict with dtype, shape and data bytes), "
            f"not {type(spec).__name__}"
        )
    dtype = _tessera.canonical_dtype(spec.dtype)
    return (name, dtype, spec.shape, "dense", [("data", spec._bytes())])


def handle_source(f: Any) -> Union[str, bytes]:
    """Where to read an opened file object from: its path when ``f.name`` names the very
    file ``f`` has open (same device and inode), so that it is memory-mapped; otherwise
    its bytes, read through the object from the start (``fsspec``/``s3fs`` files,
    ``io.BytesIO``…)."""
    name = getattr(f, "name", None)
    fileno = getattr(f, "fileno", None)
    if isinstance(name, (str, bytes, os.PathLike)) and callable(fileno):
        try:
            a, b = os.fstat(fileno()), os.stat(name)
            if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
                return os.fsdecode(name)
        except (OSError, ValueError, TypeError, AttributeError):
            pass  # not a real descriptor (io.BytesIO), or the name no longer leads to it
    fd = None
    try:
        fd = fileno() if callable(fileno) else None
    except (OSError, ValueError, AttributeError):
        fd = None
    if fd is not None:
        # A text-mode handle (open(path, "r")) reads str: read the descriptor instead.
        size = os.fstat(fd).st_size
        chunks, pos = [], 0
        while pos < size:
            chunk = os.pread(fd, min(size - pos, 1 << 26), pos)
            if not chunk:
                break
            chunks.append(chunk)
            pos += len(chunk)
        return b"".join(chunks)
    read = getattr(f, "read", None)
    if not callable(read):
        raise TypeError(f"expected an opened file (with read() or fileno()), not {type(f).__name__}")
    if callable(getattr(f, "seek", None)):
        f.seek(0)
    data = read()
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError("the file object must be opened in binary mode ('rb')")
    return bytes(data)
