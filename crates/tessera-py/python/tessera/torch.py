"""Drop-in for ``safetensors.torch``, for every format tessera reads and writes.

Needs torch. Loaded tensors are owned and writable (copied out of the mapped file, as
safetensors does); bf16 and fp8 tensors keep their dtype. ``save_file`` accepts tensors
on any device (they are moved to the CPU for writing).

As safetensors, ``save``/``save_file`` take only a dict of dense, contiguous torch
tensors that share no memory (a tensor and a view of it would come back as two
copies): anything else is refused, with safetensors' errors. ``save_model`` and
``load_model`` handle models whose parameters are shared (tied weights), and
``tessera.save`` writes any tensors (views are packed, sparse ones kept sparse).
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Set, Tuple, Union

import torch

from . import _refuse_unasked
from . import load as _load_bytes
from . import open as _open
from . import save as _save
from .numpy import _format_for

__all__ = ["save", "save_file", "load", "load_file", "save_model", "load_model", "storage_ptr", "storage_size"]


def storage_ptr(tensor: "torch.Tensor") -> int:
    """The address of the storage the tensor is a view of (0 when it has none: meta)."""
    try:
        return tensor.untyped_storage().data_ptr()
    except (NotImplementedError, RuntimeError):
        return 0


def storage_size(tensor: "torch.Tensor") -> int:
    """The size in bytes of the storage the tensor is a view of."""
    try:
        return tensor.untyped_storage().nbytes()
    except (NotImplementedError, RuntimeError):
        return tensor.nelement() * tensor.element_size()


def _end_ptr(tensor: "torch.Tensor") -> int:
    """One past the last byte of the tensor's last element (its start when empty)."""
    if not tensor.nelement():
        return tensor.data_ptr()
    last = sum((n - 1) * abs(st) for n, st in zip(tensor.shape, tensor.stride()))
    return tensor.data_ptr() + (last + 1) * tensor.element_size()


def _is_complete(tensor: "torch.Tensor") -> bool:
    """True when the tensor is its whole storage (starts at it and fills it)."""
    return tensor.data_ptr() == storage_ptr(tensor) and tensor.nelement() * tensor.element_size() == storage_size(
        tensor
    )


def _find_shared_tensors(state_dict: Dict[str, "torch.Tensor"]) -> List[Set[str]]:
    """The names grouped by the memory they share: one set per group of tensors whose
    bytes overlap within one storage (tensors on the meta device, or without storage,
    are left out). Groups come in the order their storage first appears, then by
    address."""
    by_storage: Dict[Tuple[Any, int, int], List[str]] = {}
    for name, t in state_dict.items():
        if t.device.type == "meta":
            continue
        ptr, size = storage_ptr(t), storage_size(t)
        if ptr and size:
            by_storage.setdefault((t.device, ptr, size), []).append(name)
    groups: List[Set[str]] = []
    for names in by_storage.values():
        spans = sorted((state_dict[n].data_ptr(), _end_ptr(state_dict[n]), n) for n in names)
        end = None
        for start, stop, name in spans:
            if end is not None and start < end:
                groups[-1].add(name)
                end = max(end, stop)
            else:
                groups.append({name})
                end = stop
    return groups


def _remove_duplicate_names(
    state_dict: Dict[str, "torch.Tensor"],
    *,
    preferred_names: Optional[List[str]] = None,
    discard_names: Optional[List[str]] = None,
) -> Dict[str, List[str]]:
    """For each group of tensors sharing memory, the name to keep (one covering the
    whole storage: a preferred one, else one not to discard, else the first by name)
    and the names to drop. A group where no tensor covers its storage is refused
    (saving a part would lose the rest, saving the whole would store unused bytes)."""
    preferred = set(preferred_names or ())
    discard = set(discard_names or ())
    out: Dict[str, List[str]] = {}
    for group in _find_shared_tensors(state_dict):
        complete = sorted(n for n in group if _is_complete(state_dict[n]))
        if not complete:
            raise RuntimeError(
                f"tensors {sorted(group)} share memory and none of them covers all of it: "
                "refusing to choose one to save or load, which would store more memory than "
                "the tensors hold or lose part of it"
            )
        keep = complete[0]
        kept = [n for n in complete if n not in discard]
        if kept:
            keep = kept[0]
        wanted = [n for n in complete if n in preferred]
        if wanted:
            keep = wanted[0]
        drop = sorted(n for n in group if n != keep)
        if drop:
            out[keep] = drop
    return out


def _check_for_save(tensors: Any) -> None:
    """safetensors' checks before a save, with its errors."""
    if not isinstance(tensors, dict):
        raise ValueError(f"Expected a dict of [str, torch.Tensor] but received {type(tensors)}")
    sparse = []
    for k, v in tensors.items():
        if not isinstance(v, torch.Tensor):
            raise ValueError(f"Key `{k}` is invalid, expected torch.Tensor but received {type(v)}")
        if v.layout != torch.strided:
            sparse.append(k)
    if sparse:
        raise ValueError(
            f"You are trying to save a sparse tensors: `{sparse}` which this library does not support."
            " You can make it a dense tensor before saving with `.to_dense()` but be aware this might"
            " make a much larger file than needed."
        )
    shared = [g for g in _find_shared_tensors(tensors) if len(g) > 1]
    if shared:
        raise RuntimeError(
            f"tensors share memory: {shared}; saved as they are, each would be a separate copy on "
            "disk and load as separate tensors. Use save_model (it keeps one of each group), or "
            "save clones (tessera.save packs views without this check)."
        )
    for k, v in tensors.items():
        if not v.is_contiguous():
            raise ValueError(
                f"You are trying to save a non contiguous tensor: `{k}` which is not allowed. Call "
                "`.contiguous()` on it first (or use tessera.save, which packs it)."
            )


def save_model(
    model: "torch.nn.Module",
    filename: Union[str, "os.PathLike[str]"],
    metadata: Optional[Dict[str, str]] = None,
    force_contiguous: bool = True,
) -> None:
    """Saves a model's ``state_dict`` (safetensors' ``save_model``): of each group of
    tied parameters only one is written, and each dropped name is recorded in the
    metadata as ``dropped -> kept`` (the caller's own entries win). With
    ``force_contiguous`` (default) non-contiguous tensors are packed first."""
    state_dict = model.state_dict()
    metadata = dict(metadata) if metadata else {}
    for kept, dropped in _remove_duplicate_names(state_dict).items():
        for name in dropped:
            metadata.setdefault(name, kept)
            del state_dict[name]
    if force_contiguous:
        state_dict = {k: v.contiguous() for k, v in state_dict.items()}
    try:
        save_file(state_dict, filename, metadata=metadata or None)
    except ValueError as e:
        raise ValueError(f"{e} Or use save_model(..., force_contiguous=True).") from e


def load_model(
    model: "torch.nn.Module",
    filename: Union[str, "os.PathLike[str]"],
    strict: bool = True,
    device: Any = "cpu",
    *,
    backend: Optional[str] = None,
    verify: bool = True,
) -> Tuple[List[str], List[str]]:
    """Loads a file into a model (safetensors' ``load_model``), tied parameters
    included: a name the file lacks because it was saved tied to another is not
    missing. Returns ``(missing, unexpected)`` names; with ``strict`` (default) either
    raises ``RuntimeError`` listing them."""
    state_dict = load_file(filename, device, backend=backend, verify=verify)
    tied = _remove_duplicate_names(model.state_dict(), preferred_names=list(state_dict))
    missing_keys, unexpected_keys = model.load_state_dict(state_dict, strict=False)
    missing, unexpected = set(missing_keys), list(unexpected_keys)
    for dropped in tied.values():
        for name in dropped:
            if name in missing:
                missing.discard(name)
            else:
                unexpected.append(name)
    if strict and (missing or unexpected):
        error = f"Error(s) in loading state_dict for {model.__class__.__name__}:"
        if missing:
            error += "\n    Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in sorted(missing))
        if unexpected:
            error += "\n    Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in sorted(unexpected))
        raise RuntimeError(error)
    return sorted(missing), unexpected


def save(
    tensors: Dict[str, Any],
    metadata: Optional[Dict[str, str]] = None,
    *,
    format: str = "safetensors",
    **options: Any,
) -> bytes:
    """Serializes torch tensors to bytes (safetensors unless ``format=`` says otherwise)."""
    _check_for_save(tensors)
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
    _check_for_save(tensors)
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
    backend: Optional[str] = None,
    verify: bool = True,
    dequantize: Optional[str] = None,
    shard: bool = False,
    token: Union[str, bool, None] = None,
    cache: bool = True,
) -> Dict[str, Any]:
    """Loads every tensor of a file of any supported format as torch tensors; every
    digest the file stores is checked first (over the copy handed out) unless
    ``verify=False``. GGUF packed tensors need ``dequantize=`` ("f32", "f16", "bf16"),
    as in :func:`tessera.numpy.load_file`. ``backend`` ("mmap" or "pread") is accepted
    as safetensors takes it: tessera maps the file and copies with positional reads
    either way. ``shard=True``: the file named alone, not the model set it is a
    shard of. ``token``, ``cache``: for a remote location, as in :func:`tessera.open`."""
    if backend not in (None, "mmap", "pread"):
        from .errors import InvalidInputError

        raise InvalidInputError(f"backend={backend!r}: expected 'mmap' or 'pread'")
    f = _open(
        filename, "pt", device=device, verify=verify, dequantize=dequantize, shard=shard, token=token, cache=cache
    )
    _refuse_unasked(f, dequantize)
    return {k: f.get_tensor(k, densify=True) for k in f}
