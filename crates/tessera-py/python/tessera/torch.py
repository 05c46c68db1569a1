"""Drop-in for ``safetensors.torch``, for every format tessera reads and writes.

Needs torch. Loaded tensors are owned and writable (copied out of the mapped file, as
safetensors does); bf16 and fp8 tensors keep their dtype. ``save_file`` accepts tensors
on any device (they are moved to the CPU for writing).

As safetensors, ``save``/``save_file`` take only a dict of dense, contiguous torch
tensors that share no memory (a tensor and a view of it would come back as two
copies): anything else is refused, with safetensors' errors. ``save_model`` and
``load_model`` handle models whose parameters are shared (tied weights), and
``tessera.save`` writes any tensors (views are packed, sparse ones kept sparse).

``load_sharded`` loads a model over a ``torch.distributed`` device mesh: each rank reads
only its own slice of each tensor (through :func:`tessera.load_slices`) and gets
DTensors, split exactly as ``torch.distributed.tensor.distribute_tensor`` splits them.
"""
from __future__ import annotations

import fnmatch
import os
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Union

import torch

from . import _refuse_unasked
from . import load as _load_bytes
from . import open as _open
from . import save as _save
from ._convert import torch_dtype
from .numpy import _format_for

__all__ = [
    "save",
    "save_file",
    "load",
    "load_file",
    "save_model",
    "load_model",
    "load_sharded",
    "storage_ptr",
    "storage_size",
]


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



def _placements_for(name: str, placements: Any, ndim: int) -> Tuple[Any, ...]:
    """The placements (one per mesh dimension) of tensor ``name``: ``placements`` is one
    list for every tensor, or a dict of name or glob -> list (an exact name first, then
    the first glob that matches, in the dict's order); a tensor nothing names, or named
    with ``None``, is replicated."""
    from torch.distributed.tensor import Replicate

    chosen: Any = placements
    if isinstance(placements, dict):
        if name in placements:
            chosen = placements[name]
        else:
            chosen = next((v for k, v in placements.items() if fnmatch.fnmatchcase(name, k)), None)
    if chosen is None:
        return tuple(Replicate() for _ in range(ndim))
    if not isinstance(chosen, (list, tuple)):
        chosen = (chosen,)
    if len(chosen) != ndim:
        raise ValueError(
            f"tensor {name!r}: {len(chosen)} placement(s) {list(chosen)} for a {ndim}-dimensional device mesh "
            "(one per mesh dimension)"
        )
    return tuple(chosen)


def _local_ranges(
    name: str, shape: Sequence[int], placements: Sequence[Any], mesh_shape: Sequence[int], coord: Sequence[int]
) -> Tuple[Tuple[Any, ...], List[Tuple[int, int]]]:
    """This rank's part of a tensor of ``shape`` under ``placements``, as
    ``distribute_tensor`` cuts it: mesh dimension by mesh dimension, a ``Shard(d)``
    splits the part left so far along ``d`` with ``torch.chunk``'s rule (pieces of
    ceil(n / k) elements, the last ones shorter or empty: not numpy.array_split's), and
    the rank's coordinate on that mesh dimension picks its piece. Returns the
    normalized placements and one ``(start, stop)`` per tensor dimension."""
    from torch.distributed.tensor import Replicate, Shard

    ranges = [(0, n) for n in shape]
    normalized = []
    for i, p in enumerate(placements):
        if type(p) is Shard:
            d = p.dim + len(shape) if p.dim < 0 else p.dim
            if not 0 <= d < len(shape):
                raise ValueError(
                    f"tensor {name!r} of shape {list(shape)}: Shard({p.dim}) on mesh dimension {i} names no "
                    "dimension of it"
                )
            lo, hi = ranges[d]
            size, parts = hi - lo, mesh_shape[i]
            chunk = -(-size // parts)
            start = min(coord[i] * chunk, size)
            ranges[d] = (lo + start, lo + min(start + chunk, size))
            normalized.append(Shard(d))
        elif type(p) is Replicate:
            normalized.append(p)
        else:
            raise ValueError(
                f"tensor {name!r}: placement {p!r} on mesh dimension {i} cannot be loaded from a file "
                "(only Shard(dim) and Replicate())"
            )
    return tuple(normalized), ranges


def load_sharded(
    path_or_url: Union[str, "os.PathLike[str]"],
    mesh: Any,
    placements: Any = None,
    *,
    names: Optional[Sequence[str]] = None,
    pages: Any = None,
    as_dtensor: bool = True,
    device: Any = None,
    threads: Optional[int] = None,
    **read_options: Any,
) -> Dict[str, Any]:
    """Loads a model over a ``torch.distributed`` ``DeviceMesh`` (1-D or 2-D, any
    backend; call it on every rank of the mesh): each rank reads only the bytes of its
    own part of each tensor, from a local file or an ``http(s)://`` / ``s3://`` URL,
    through :func:`tessera.load_slices` (checked as it reads; ``pages=`` a page
    manifest), and gets a state dict of ``DTensor`` shards, cut exactly as
    ``torch.distributed.tensor.distribute_tensor`` cuts the full tensor (``Shard(d)``
    uses ``torch.chunk``'s sizes, so uneven dimensions give shorter or empty last
    pieces; ``DTensor.full_tensor()`` gathers the tensor back).

    ``placements``: one per mesh dimension (``[Shard(0)]``, ``[Replicate(), Shard(1)]``;
    a single placement for a 1-D mesh), for every tensor; or a dict of name or glob ->
    placements (an exact name wins, then the first matching glob in order), where a
    tensor nothing matches, or matched to ``None``, is replicated (read whole by every
    rank). ``None``: every tensor replicated. ``names``: only the tensors with these
    names or globs (a pipeline stage's subset); default all, in file order.
    ``as_dtensor=False`` gives each rank's plain local tensors instead. ``device``:
    where the local tensors go (default: the mesh's device type, its current device).
    ``threads`` and ``read_options`` (``verify``, ``token``, ``cache``, …) go to
    :func:`tessera.load_slices`."""
    from . import open as open_file

    coord = mesh.get_coordinate()
    mesh_shape = tuple(mesh.shape)
    if device is None:
        kind = mesh.device_type
        device = torch.device(kind) if kind == "cpu" else torch.device(kind, getattr(torch, kind).current_device())
    # Opened once (the index: names and shapes), then one load_slices call on that
    # File reads every part.
    f = open_file(path_or_url, **read_options)
    try:
        infos = {i["name"]: i for i in f.tensor_infos()}
        order = list(f.keys())
        if names is not None:
            wanted = list(names)
            order = [n for n in order if n in wanted or any(fnmatch.fnmatchcase(n, w) for w in wanted)]
            missing = [w for w in wanted if w not in infos and not any(fnmatch.fnmatchcase(n, w) for n in infos)]
            if missing:
                from .errors import NotFoundError

                raise NotFoundError(f"{os.fspath(path_or_url)}: no tensor named or matching {missing}")
        plan: Dict[str, Any] = {}
        cuts: Dict[str, Tuple[Tuple[Any, ...], List[int]]] = {}
        for name in order:
            info = infos[name]
            if info["layout"] != "dense":
                raise ValueError(f"tensor {name!r} is stored {info['layout']}: only dense tensors load sharded")
            shape = list(info["shape"])
            tensor_placements, ranges = _local_ranges(
                name,
                shape,
                _placements_for(name, placements, len(mesh_shape)),
                mesh_shape,
                coord or [0] * len(mesh_shape),
            )
            local_shape = [b - a for a, b in ranges]
            cuts[name] = (tensor_placements, shape, local_shape)
            # A rank outside the mesh holds nothing, and an empty piece reads nothing.
            if coord is None or 0 in local_shape:
                continue
            # The plan's keys are globs: a name is escaped to match only itself.
            key = _glob_escape(name)
            plan[key] = None if local_shape == shape else tuple(slice(a, b) for a, b in ranges)
        from . import load_slices

        local = load_slices(f, plan, pages=pages, framework="pt", threads=threads) if plan else {}
    finally:
        f.close()
    out: Dict[str, Any] = {}
    for name in order:
        tensor_placements, shape, local_shape = cuts[name]
        t = local.get(name)
        if t is None:  # an empty piece (or none: a rank outside the mesh), as distribute_tensor gives
            t = torch.empty(local_shape if coord is not None else [0], dtype=torch_dtype(infos[name]["dtype"]))
        t = t.to(device)
        if as_dtensor:
            from torch.distributed.tensor import DTensor

            stride = torch.empty(shape, device="meta").stride()
            t = DTensor.from_local(
                t, mesh, tensor_placements, run_check=False, shape=torch.Size(shape), stride=stride
            )
        out[name] = t
    return out


def _glob_escape(name: str) -> str:
    """``name`` as an fnmatch pattern that matches only ``name``."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)
