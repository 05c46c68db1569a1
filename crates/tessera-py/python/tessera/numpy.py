"""Drop-in for ``safetensors.numpy``, for every format tessera reads and writes.

``load_file``/``load`` return numpy arrays the caller owns (writable, independent of the
file), as safetensors does; the copy out of the memory-mapped file goes into fresh
buffers advised for transparent huge pages, which is what makes it fast (tensors under
2 MiB are packed together into shared buffers of about 16 MiB: an array keeps its
buffer alive, see :meth:`tessera.File.get_tensors`). ``copy=False``
returns zero-copy arrays instead: read-only views of the mapped file (or of the bytes
given to ``load``) when the format stores tensors raw; decoded tensors (compressed,
text, big-endian) are owned and writable either way. ``tessera.open(path)[name]`` is
zero-copy too.
``save_file`` picks the format from the file extension (``.safetensors``, ``.zt``,
``.fold``, ``.aero``, …) or ``format=``, defaulting to safetensors for unknown
extensions; extra keyword options are those of :func:`tessera.save`.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Union

import numpy as np

from . import _progress, _tessera
from . import _refuse_unasked
from . import load as _load_bytes
from . import open as _open
from . import save as _save

__all__ = ["save", "save_file", "load", "load_file"]


def _format_for(filename: Union[str, "os.PathLike[str]"], format: Optional[str]) -> str:
    if format is not None:
        return format
    ext = os.path.splitext(os.fspath(filename))[1].lstrip(".").lower()
    for f in _tessera.formats():
        # As the library's Format::from_path: an extension, or a format's name.
        if (ext in f["extensions"] or ext == f["name"]) and f["writable"]:
            return f["name"]
    return "safetensors"


def save(
    tensor_dict: Dict[str, np.ndarray],
    metadata: Optional[Dict[str, str]] = None,
    *,
    format: str = "safetensors",
    **options: Any,
) -> bytes:
    """Serializes to bytes (safetensors unless ``format=`` says otherwise)."""
    return _save(tensor_dict, None, format=format, metadata=metadata, **options)  # type: ignore[return-value]


def save_file(
    tensor_dict: Dict[str, np.ndarray],
    filename: Union[str, "os.PathLike[str]"],
    metadata: Optional[Dict[str, str]] = None,
    *,
    format: Optional[str] = None,
    durable: bool = True,
    **options: Any,
) -> None:
    """Writes a file atomically (format from ``format=`` or the extension): a temporary
    file renamed over ``filename``, so readers never see a half file. ``durable=True``
    (default) also fsyncs it and its directory: the file survives a power loss once this
    returns. ``durable=False`` skips the fsyncs (as safetensors, numpy and torch always
    do): still atomic, but a power loss or OS crash soon after may lose the new file."""
    _save(tensor_dict, filename, format=_format_for(filename, format), metadata=metadata, durable=durable, **options)


def load(
    data: bytes, *, copy: bool = True, verify: bool = True, dequantize: Optional[str] = None
) -> Dict[str, np.ndarray]:
    """Deserializes bytes of any supported format into writable arrays; with
    ``copy=False``, raw-stored tensors are read-only views of one internal copy of
    ``data``. ``verify`` and ``dequantize`` as in :func:`load_file`."""
    f = _load_bytes(data, verify=bool(verify), dequantize=dequantize)
    _refuse_unasked(f, dequantize)
    return f.get_tensors(densify=True, copy=copy)


def load_file(
    filename: Union[str, "os.PathLike[str]"],
    *,
    copy: bool = True,
    verify: bool = True,
    dequantize: Optional[str] = None,
    progress: Any = False,
    shard: bool = False,
    token: Union[str, bool, None] = None,
    cache: bool = True,
) -> Dict[str, np.ndarray]:
    """Loads every tensor of a file of any supported format into writable arrays the
    caller owns (as ``safetensors.numpy.load_file``). ``copy=False``: zero-copy,
    read-only arrays over the memory-mapped file where the format stores tensors raw
    (the map stays alive as long as any of them).

    Every digest the file stores for a tensor's bytes (zTensor crc32c/sha256, FOLD
    CRC-32C/SHA-256, AERO BLAKE3, npz CRC-32, …) is checked before the tensor is
    returned, raising :class:`tessera.IntegrityError` naming the tensor on a mismatch;
    copies are checked over the copy itself (see :meth:`tessera.File.get_tensor`).
    ``verify=False`` skips the check. GGUF tensors stored in packed blocks (``q8_0``,
    ``q4_k``, …) need ``dequantize="f32"`` (or ``"f16"``, ``"bf16"``): they are decoded
    as gguf-py's ``dequantize`` does; without it such a file is refused with
    :class:`tessera.UnsupportedError` naming the tensor (every value returned is an
    ``ndarray``). ``progress=True`` shows a bar on stderr (tqdm's
    when installed, on a terminal), a callable gets ``(done_bytes, total_bytes)`` in the
    tensors' dense bytes: the tensors are then read in batches of about 64 MiB, one call
    each. ``shard=True``: the file named alone, not the model set it is a shard of.
    ``token``, ``cache``: for a remote location, as in :func:`tessera.open`."""
    f = _open(filename, verify=bool(verify), dequantize=dequantize, shard=shard, token=token, cache=cache)
    _refuse_unasked(f, dequantize)
    bar = _progress.reporter(progress, "loading")
    if bar is None:
        return f.get_tensors(densify=True, copy=copy)
    sizes = {i["name"]: int(i["nbytes"] or 0) for i in f.tensor_infos()}
    total = sum(sizes.values())
    out: Dict[str, np.ndarray] = {}
    batch: list = []
    held = done = 0
    names = list(f.keys())
    for k, name in enumerate(names):
        batch.append(name)
        held += sizes.get(name, 0)
        if held >= 64 << 20 or k == len(names) - 1:
            out.update(f.get_tensors(batch, densify=True, copy=copy))
            done += held
            bar(done, total)
            batch, held = [], 0
    if not names:
        bar(0, 0)
    return out
