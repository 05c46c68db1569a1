"""Drop-in for ``safetensors.torch``, for every format tessera reads and writes.

Needs torch. Loaded tensors are owned and writable (copied out of the mapped file, as
safetensors does); bf16 and fp8 tensors keep their dtype. ``save_file`` accepts tensors
on any device (they are moved to the CPU for writing).
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Union

from . import _refuse_unasked
from . import load as _load_bytes
from . import open as _open
from . import save as _save
from .numpy import _format_for

__all__ = ["save", "save_file", "load", "load_file"]


def save(
    tensors: Dict[str, Any],
    metadata: Optional[Dict[str, str]] = None,
    *,
    format: str = "safetensors",
    **options: Any,
) -> bytes:
    """Serializes torch tensors to bytes (safetensors unless ``format=`` says otherwise)."""
    return _save(tensors, None, format=format, metadata=metadata, **options)  # type: ignore[return-value]


def save_file(
    tensors: Dict[str, Any],
    filename: Union[str, "os.PathLike[str]"],
    metadata: Optional[Dict[str, str]] = None,
    *,
    format: Optional[str] = None,
    durable: bool = True,
    **options: Any,
) -> None:
    """Writes torch tensors to a file atomically (format from ``format=`` or the
    extension); ``durable`` as in :func:`tessera.numpy.save_file`."""
    _save(tensors, filename, format=_format_for(filename, format), metadata=metadata, durable=durable, **options)


def load(
    data: bytes, device: Any = "cpu", *, verify: bool = True, dequantize: Optional[str] = None
) -> Dict[str, Any]:
    """Deserializes bytes of any supported format into torch tensors (stored digests
    checked unless ``verify=False``; ``dequantize`` as in :func:`load_file`)."""
    f = _load_bytes(data, framework="pt", verify=verify, dequantize=dequantize)
    _refuse_unasked(f, dequantize)
    f._device = device
    return {k: f.get_tensor(k, densify=True) for k in f}


def load_file(
    filename: Union[str, "os.PathLike[str]"],
    device: Any = "cpu",
    *,
    verify: bool = True,
    dequantize: Optional[str] = None,
) -> Dict[str, Any]:
    """Loads every tensor of a file of any supported format as torch tensors; every
    digest the file stores is checked first (over the copy handed out) unless
    ``verify=False``. GGUF packed tensors need ``dequantize=`` ("f32", "f16", "bf16"),
    as in :func:`tessera.numpy.load_file`."""
    f = _open(filename, "pt", device=device, verify=verify, dequantize=dequantize)
    _refuse_unasked(f, dequantize)
    return {k: f.get_tensor(k, densify=True) for k in f}
