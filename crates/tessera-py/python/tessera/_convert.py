"""Element types and array conversions between tessera, numpy and torch.

Tensor bytes come from the native module as buffers exposing ``__array_interface__``;
``np.asarray`` wraps them without a copy (the buffer becomes the array's ``base`` and
keeps the mapped file alive). bf16 and fp8 use ml_dtypes' numpy types; torch tensors are
made by viewing the raw bytes as an integer tensor of the same width and then as the
torch dtype, so every dtype torch has works.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import ml_dtypes
import numpy as np

from . import _tessera
from .errors import InvalidInputError, UnsupportedError

# tessera canonical name -> numpy dtype (little-endian: tessera's canonical byte order).
NUMPY_DTYPES: Dict[str, np.dtype] = {
    "bool": np.dtype(np.bool_),
    "u8": np.dtype("<u1"),
    "u16": np.dtype("<u2"),
    "u32": np.dtype("<u4"),
    "u64": np.dtype("<u8"),
    "i8": np.dtype("<i1"),
    "i16": np.dtype("<i2"),
    "i32": np.dtype("<i4"),
    "i64": np.dtype("<i8"),
    "f16": np.dtype("<f2"),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype("<f4"),
    "f64": np.dtype("<f8"),
    "f8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "f8_e4m3fnuz": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "f8_e5m2fnuz": np.dtype(ml_dtypes.float8_e5m2fnuz),
    "c64": np.dtype("<c8"),
    "c128": np.dtype("<c16"),
}
if hasattr(ml_dtypes, "float8_e8m0fnu"):
    NUMPY_DTYPES["f8_e8m0"] = np.dtype(ml_dtypes.float8_e8m0fnu)
# The packed sub-byte floats: numpy holds them one per byte (ml_dtypes' layout), files
# hold them packed (two f4 per byte, four f6 per three bytes, least significant bits
# first); arrays are unpacked on read and packed on save.
for _name, _ml in (("f4_e2m1", "float4_e2m1fn"), ("f6_e2m3", "float6_e2m3fn"), ("f6_e3m2", "float6_e3m2fn")):
    if hasattr(ml_dtypes, _ml):
        NUMPY_DTYPES[_name] = np.dtype(getattr(ml_dtypes, _ml))
PACKED = frozenset(("f4_e2m1", "f6_e2m3", "f6_e3m2"))

# tessera canonical name -> safetensors' dtype string (safe_open().get_slice().get_dtype()).
SAFETENSORS_NAMES: Dict[str, str] = {
    "bool": "BOOL",
    "f4_e2m1": "F4",
    "f6_e2m3": "F6_E2M3",
    "f6_e3m2": "F6_E3M2",
    "u8": "U8",
    "i8": "I8",
    "f8_e5m2": "F8_E5M2",
    "f8_e4m3fn": "F8_E4M3",
    "f8_e8m0": "F8_E8M0",
    "f8_e4m3fnuz": "F8_E4M3FNUZ",
    "f8_e5m2fnuz": "F8_E5M2FNUZ",
    "i16": "I16",
    "u16": "U16",
    "f16": "F16",
    "bf16": "BF16",
    "i32": "I32",
    "u32": "U32",
    "f32": "F32",
    "c64": "C64",
    "f64": "F64",
    "i64": "I64",
    "u64": "U64",
}

_SIZES = dict(_tessera.dtypes())
_INT_OF_SIZE = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a tessera dtype name."""
    try:
        return NUMPY_DTYPES[name]
    except KeyError:
        raise UnsupportedError(f"dtype {name} has no numpy equivalent") from None


def dtype_name(dtype: Any) -> str:
    """The tessera canonical name of a numpy dtype, a torch dtype or a name."""
    s = str(dtype)
    if s.startswith("torch."):
        return _tessera.canonical_dtype(s[len("torch."):])
    if isinstance(dtype, str):
        return _tessera.canonical_dtype(dtype)
    d = np.dtype(dtype)
    if d.kind in "OSUVMmT" and d.name not in _ML_NAMES:
        raise InvalidInputError(f"numpy dtype {d} cannot be stored as a tensor")
    return _tessera.canonical_dtype(d.name)


_ML_NAMES = {np.dtype(v).name for k, v in NUMPY_DTYPES.items() if k == "bf16" or k[:2] in ("f8", "f6", "f4")}


def buffer_array(buf: Any) -> np.ndarray:
    """A 1-D uint8 array over a native buffer, without a copy."""
    return np.asarray(buf)


def to_numpy(raw: np.ndarray, dtype: str, shape: Sequence[int]) -> np.ndarray:
    """Views raw little-endian bytes as an array of `dtype` and `shape` (no copy); a
    packed sub-byte dtype is unpacked into a new array, one element per byte."""
    if dtype in PACKED:
        return unpack(raw, dtype, shape)
    return raw.view(numpy_dtype(dtype)).reshape(tuple(shape))


def unpack(raw: np.ndarray, dtype: str, shape: Sequence[int]) -> np.ndarray:
    """The stored bytes of a packed sub-byte tensor as an ml_dtypes array (owned)."""
    nt = numpy_dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    raw = np.asarray(raw).reshape(-1).view(np.uint8)
    if dtype == "f4_e2m1":
        if raw.size * 2 < n:
            raise InvalidInputError(f"{raw.size} bytes hold fewer than {n} f4_e2m1 elements")
        codes = np.empty(raw.size * 2, dtype=np.uint8)
        codes[0::2] = raw & 0x0F
        codes[1::2] = raw >> 4
        codes = codes[:n]
    else:
        codes = np.frombuffer(_tessera.unpack_bits(dtype, raw.tobytes(), n), dtype=np.uint8).copy()
    return codes.view(nt).reshape(tuple(shape))


def pack(codes: np.ndarray, dtype: str) -> np.ndarray:
    """One element per byte (an ml_dtypes array's bytes) packed as files store them."""
    return np.frombuffer(_tessera.pack_bits(dtype, raw_bytes(codes).tobytes()), dtype=np.uint8)


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("framework='pt' needs torch: pip install torch") from e
    return torch


def torch_dtype(name: str):
    """The torch dtype of a tessera dtype name."""
    torch = _torch()
    attr = {
        "bool": "bool",
        "u8": "uint8",
        "u16": "uint16",
        "u32": "uint32",
        "u64": "uint64",
        "i8": "int8",
        "i16": "int16",
        "i32": "int32",
        "i64": "int64",
        "f16": "float16",
        "bf16": "bfloat16",
        "f32": "float32",
        "f64": "float64",
        "f8_e4m3fn": "float8_e4m3fn",
        "f8_e5m2": "float8_e5m2",
        "f8_e4m3fnuz": "float8_e4m3fnuz",
        "f8_e5m2fnuz": "float8_e5m2fnuz",
        "f8_e8m0": "float8_e8m0fnu",
        "f4_e2m1": "float4_e2m1fn_x2",
        "c64": "complex64",
        "c128": "complex128",
    }.get(name)
    dt = getattr(torch, attr, None) if attr else None
    if dt is None:
        raise UnsupportedError(f"dtype {name} has no equivalent in torch {torch.__version__}")
    return dt


def to_torch(raw: np.ndarray, dtype: str, shape: Sequence[int], device: Any = "cpu"):
    """A torch tensor of `dtype` and `shape` from raw bytes. The bytes are copied when
    they are read-only (a mapped file): torch tensors are writable."""
    torch = _torch()
    tdt = torch_dtype(dtype)
    if dtype == "f4_e2m1":
        # torch holds f4 as float4_e2m1fn_x2: two per byte, the last dimension halved.
        if not shape or shape[-1] % 2:
            raise UnsupportedError(
                f"an f4_e2m1 tensor of shape {list(shape)} is not a float4_e2m1fn_x2 tensor "
                f"(torch packs pairs along an even last dimension): read it with framework='np'"
            )
        shape = list(shape[:-1]) + [shape[-1] // 2]
    size = _SIZES[dtype]
    ints = raw.view(_INT_OF_SIZE[size]) if raw.size else np.zeros(0, dtype=_INT_OF_SIZE[size])
    if not ints.flags.writeable or not ints.flags.aligned:
        ints = ints.copy()
    t = torch.from_numpy(ints)
    if tdt != t.dtype:
        t = t.view(tdt)
    t = t.reshape(tuple(shape))
    if device not in (None, "cpu") and str(device) != "cpu":
        t = t.to(device)
    return t


def is_torch_tensor(x: Any) -> bool:
    mod = type(x).__module__
    return mod.startswith("torch") and type(x).__name__ in ("Tensor", "Parameter")


def raw_bytes(a: np.ndarray) -> np.ndarray:
    """The array's bytes as a C-contiguous 1-D uint8 array: a view when the array is
    already contiguous (the native writer then reads it in place), a copy otherwise."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def from_array(name: str, x: Any) -> Tuple[str, str, List[int], str, List[Tuple[str, Any]]]:
    """One tensor as the native `save` takes it: (name, dtype, shape, layout, parts),
    each part's data a contiguous uint8 array (or bytes)."""
    from .tensor import Tensor

    if isinstance(x, Tensor):
        parts = [(role, raw_bytes(a)) for role, a in x.parts.items()]
        return (name, x.dtype, list(x.shape), x.layout, parts)
    if _is_scipy_sparse(x):
        return _from_scipy(name, x)
    if is_torch_tensor(x):
        torch = _torch()
        t = x.detach()
        if t.device.type != "cpu":
            t = t.to("cpu")
        if t.is_sparse or t.layout != torch.strided:
            raise InvalidInputError(f"tensor {name!r}: torch sparse layouts are not supported; pass a dense tensor")
        shape = list(t.shape)
        if str(t.dtype) == "torch.float4_e2m1fn_x2":
            # Two f4 per byte, as files hold them: the logical last dimension is twice
            # torch's (safetensors' rule).
            dt = "f4_e2m1"
            shape = shape[:-1] + [2 * shape[-1]] if shape else [2]
        else:
            dt = dtype_name(t.dtype)
        flat = t.contiguous().reshape(-1)
        data = flat.view(torch.uint8).numpy() if flat.numel() else b""
        return (name, dt, shape, "dense", [("data", data)])
    a = np.asarray(x)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    dt = dtype_name(a.dtype)
    if dt in PACKED:
        return (name, dt, list(a.shape), "dense", [("data", pack(a, dt))])
    return (name, dt, list(a.shape), "dense", [("data", raw_bytes(a))])


def _is_scipy_sparse(x: Any) -> bool:
    return type(x).__module__.startswith("scipy.sparse") and hasattr(x, "tocsr")


def _from_scipy(name: str, m: Any):
    fmt = m.format
    if fmt == "coo":
        values = np.asarray(m.data)
        coords = np.stack([np.asarray(m.row), np.asarray(m.col)]).astype("<u8")
        return (
            name,
            dtype_name(values.dtype),
            list(m.shape),
            "sparse_coo",
            [("values", raw_bytes(values)), ("coords", raw_bytes(coords))],
        )
    c = m.tocsr()
    c.sort_indices()
    values = np.asarray(c.data)
    return (
        name,
        dtype_name(values.dtype),
        list(c.shape),
        "sparse_csr",
        [
            ("values", raw_bytes(values)),
            ("indices", raw_bytes(np.asarray(c.indices).astype("<u8"))),
            ("indptr", raw_bytes(np.asarray(c.indptr).astype("<u8"))),
        ],
    )
