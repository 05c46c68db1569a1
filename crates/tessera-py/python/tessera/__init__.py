"""Tessera: read, write, verify and convert tensor containers from Python.

    >>> import tessera
    >>> f = tessera.open("model.safetensors")     # any supported format, by content
    >>> f.format, list(f)[:3], f.metadata
    >>> w = f["embed.weight"]                      # numpy, zero-copy, read-only
    >>> f.verify().ok
    >>> tessera.save({"w": w}, "model.zt", compression="zstd", digests="sha256")

Drop-in replacements for safetensors' API live in :mod:`tessera.numpy`,
:mod:`tessera.torch` and :func:`tessera.safe_open`; they work on every format.
"""
from __future__ import annotations

import builtins as _builtins
import json as _json
import os as _os
import re as _re
import warnings as _warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as _np

from . import _convert
from . import _progress
from . import _tessera
from ._convert import PACKED as _PACKED
from ._convert import SAFETENSORS_NAMES, from_array, numpy_dtype, to_numpy, to_torch
from ._convert import pack as _pack
from .errors import (
    ConversionWarning,
    FormatError,
    IntegrityError,
    InvalidInputError,
    IoError,
    LimitError,
    NotFoundError,
    SafetensorError,
    TesseraError,
    TesseraFileNotFoundError,
    TesseraIsADirectoryError,
    TesseraPermissionError,
    UnknownFormatError,
    UnsupportedError,
    UnsupportedVersionError,
)
from .tensor import Tensor
from ._safetensors import TensorSpec, handle_source, spec_item

__version__: str = _tessera.__version__

__all__ = [
    "open",
    "load",
    "load_slices",
    "save",
    "convert",
    "safe_open",
    "TensorSpec",
    "SafetensorError",
    "serialize",
    "serialize_file",
    "deserialize",
    "formats",
    "public_key",
    "id",
    "sign",
    "verify_signature",
    "diff",
    "Snapshotter",
    "restore",
    "Restored",
    "File",
    "TensorSlice",
    "Tensor",
    "VerifyReport",
    "Check",
    "SaveReport",
    "TesseraError",
    "FormatError",
    "UnknownFormatError",
    "UnsupportedError",
    "UnsupportedVersionError",
    "IntegrityError",
    "LimitError",
    "InvalidInputError",
    "NotFoundError",
    "TesseraFileNotFoundError",
    "TesseraIsADirectoryError",
    "TesseraPermissionError",
    "ConversionWarning",
    "IoError",
]

_builtin_open = _builtins.open

PathLike = Union[str, "_os.PathLike[str]"]
_FRAMEWORKS = {"np": "np", "numpy": "np", "pt": "pt", "torch": "pt", "pytorch": "pt"}


def _framework(framework: str) -> str:
    try:
        return _FRAMEWORKS[framework]
    except KeyError:
        raise UnsupportedError(
            f"framework {framework!r} is not supported (use 'np' or 'pt')"
        ) from None


def public_key(secret: bytes) -> bytes:
    """The Ed25519 public key of a 32-byte secret key seed (the ``sign_key`` of
    :func:`save`), to pass to :meth:`File.verify` as ``public_key``."""
    return _tessera.public_key(bytes(secret))


def _key_bytes(key: Union[bytes, PathLike], what: str) -> bytes:
    """A key as bytes: given as bytes (PEM text, or an Ed25519 key as 32 raw bytes or 64
    hex digits), passed on as is; given as a path, read by the library with the CLI's
    rules (a key file of the wrong kind, secret for public or public for secret, is
    refused, an untyped one too when it can be told apart) and passed on as PEM."""
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key)
    return _tessera._read_key_file(_os.fspath(key), what == "public key").encode()


def _signature_bytes(signature: Union[str, bytes, PathLike]) -> bytes:
    if isinstance(signature, (bytes, bytearray, memoryview)):
        return bytes(signature)
    if isinstance(signature, str) and signature.lstrip().startswith("{"):
        return signature.encode()
    with _builtin_open(_os.fspath(signature), "rb") as f:
        return f.read()


def id(  # noqa: A001
    path: PathLike,
    *,
    metadata: bool = False,
    pages: Union[None, int, str] = None,
    output: Optional[PathLike] = None,
    **kwargs: Any,
) -> Dict[str, Any]:
    """The content identity of a file or model set: see :meth:`File.identity`.

    ``pages=SIZE`` (bytes, or ``"1M"``, ``"64K"``: a power of two from 4 KiB to 1 GiB), as
    ``tessera id --pages``, also writes a page manifest (a BLAKE3 digest per page of every
    tensor, so a slice read checks just the pages it touches) to ``output``, or to
    ``STEM.pages`` beside the file; the result then has ``"pages": {"file", "page_size",
    "count"}``."""
    f = open(path, **kwargs)
    if pages is None:
        if output is not None:
            raise InvalidInputError("id(output=...) is where pages= writes its manifest: pass pages=")
        return f.identity(metadata=metadata)
    if isinstance(pages, bool) or not isinstance(pages, (int, str)):
        raise InvalidInputError(f"pages= is a page size such as 4096 or '1M', not {pages!r}")
    if output is None:
        base = _os.fspath(path)
        if "://" in base:
            raise InvalidInputError("id(pages=...) of a URL: pass output= (a local path)")
        stem, _ext = _os.path.splitext(base)
        output = stem + ".pages"
    text = f._f.write_page_manifest(str(pages), _os.fspath(output))
    doc = _json.loads(text)
    result = f.identity(metadata=metadata) if metadata else {
        "id": doc["id"],
        "metadata": None,
        "tensors": [
            {k: t[k] for k in ("name", "dtype", "shape", "layout", "digest")} for t in doc["tensors"]
        ],
    }
    result["pages"] = {
        "file": _os.fspath(output),
        "page_size": doc["page_size"],
        "count": sum(len(t["pages"]) for t in doc["tensors"]),
    }
    return result


def sign(
    path: PathLike,
    secret_key: Union[bytes, PathLike],
    output: Optional[PathLike] = None,
    *,
    metadata: bool = False,
    embed: bool = False,
    **kwargs: Any,
) -> str:
    """Signs a file's tensor manifest (Ed25519 or ECDSA P-256 after the key, as ``tessera
    sign``); writes it to
    ``output`` when given and returns its text.

    ``embed=True`` (``tessera sign --embed``) writes ``output`` instead as a copy of the
    file, in the same format, with the signed manifest in its metadata under
    ``tessera.signature``, stored as compact JSON (one line, no spaces, no trailing
    newline; the signature file's fields in the same order); returns that text.
    :meth:`File.verify` with ``public_key=`` checks it, in this file and in any
    conversion that keeps the key."""
    if embed:
        if output is None:
            raise InvalidInputError("sign(embed=True) writes a signed copy of the file: pass output=")
        f = open(path, **kwargs)
        return f._f.sign_embedded(
            _key_bytes(secret_key, "secret key"), _os.fspath(output), metadata=metadata
        )
    text = open(path, **kwargs).sign(secret_key, metadata=metadata)
    if output is not None:
        with _builtin_open(_os.fspath(output), "w") as f:
            f.write(text)
    return text


def verify_signature(
    path: PathLike,
    signature: Union[str, bytes, PathLike],
    public_key: Union[bytes, PathLike],
    *,
    tensors: Optional[Sequence[str]] = None,
    **kwargs: Any,
) -> VerifyReport:
    """Checks a file (any conversion of the signed model) against a detached signature:
    see :meth:`File.verify_signature`."""
    return open(path, **kwargs).verify_signature(signature, public_key, tensors=tensors)


def diff(
    a: Union[PathLike, "File"],
    b: Union[PathLike, "File"],
    *,
    atol: float = 0.0,
    rtol: float = 0.0,
    **kwargs: Any,
) -> Dict[str, Any]:
    """Compares two files (paths or opened :class:`File` objects, any formats) as ``tessera
    diff --json`` does: tensors ``added`` / ``removed`` / ``changed`` (dtype, shape,
    layout, element counts and largest differences), ``within_tolerance`` (values all
    close: numpy's ``isclose`` with ``atol``/``rtol``, exact by default), ``metadata``
    (``added``, ``removed``, ``changed``, ``values``: key -> (a, b), ``not_compared``),
    and ``same``. ``kwargs`` go to :func:`open` for paths."""
    fa = a if isinstance(a, File) else open(a, **kwargs)
    fb = b if isinstance(b, File) else open(b, **kwargs)
    return fa._f.diff(fb._f, atol=float(atol), rtol=float(rtol))


def formats() -> List[Dict[str, Any]]:
    """Every format tessera knows: ``name``, ``title``, ``extensions``, ``readable``,
    ``writable``, the writer ``options`` they take and, for writable ones, what they
    hold (``dtypes``, ``sparse``, ``metadata``, ``compression``, ``integrity``,
    ``zero_copy``…)."""
    return _tessera.formats()


@dataclass(frozen=True)
class Check:
    """One integrity check of one layer on one subject."""

    subject: str
    layer: str
    status: str  # "ok", "failed", "not checked", "unauthenticated", "repaired"
    detail: Optional[str] = None


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of :meth:`File.verify`: ``ok`` is False when any check failed."""

    ok: bool
    checks: List[Check] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)

    @property
    def failures(self) -> List[Check]:
        return [c for c in self.checks if c.status == "failed"]

    def __bool__(self) -> bool:
        return self.ok

    def raise_for_failure(self) -> None:
        """Raises :class:`IntegrityError` naming the first failed check."""
        for c in self.failures:
            e = IntegrityError(f"{c.subject}: {c.layer} failed" + (f": {c.detail}" if c.detail else ""))
            e.kind, e.subject = "integrity", c.subject
            raise e


def _report(notes: Sequence[str], extra: Sequence[Any], path: Optional[PathLike]) -> "SaveReport":
    """The report of a save, and a :class:`ConversionWarning` listing what it changed."""
    notes = list(notes)
    if notes:
        where = "" if path is None else f" {_os.fspath(path)}"
        _warnings.warn(
            f"tessera: wrote{where} with changes: " + "; ".join(notes),
            ConversionWarning,
            stacklevel=3,
        )
    return SaveReport(notes, [str(p) for p in extra])


@dataclass(frozen=True)
class SaveReport:
    """What :func:`save` did beyond writing: casts, densifications, dropped metadata
    (``notes``) and sibling files written (``extra_files``)."""

    notes: List[str]
    extra_files: List[str]


class File(Mapping):
    """An opened tensor container: a read-only mapping of tensor names to arrays.

    Dense tensors come back as numpy arrays that borrow the memory-mapped file without a
    copy (read-only) when the format stores them raw, and as owned, writable arrays when
    they had to be decoded (compressed, text, big-endian); ``get_tensor(name,
    copy=True)`` always gives an owned, writable array. With ``framework="pt"`` they are
    torch tensors (always owned). Tensors in other layouts come back as :class:`Tensor`.
    """

    def __init__(
        self, native: Any, framework: str = "np", device: Any = "cpu", dequantize: Optional[str] = None
    ) -> None:
        self._f = native
        self._framework = _framework(framework)
        self._device = device
        self._dequantize = dequantize
        self._names: List[str] = native.names()
        self._infos: Optional[Dict[str, Dict[str, Any]]] = None
        # Opened with dequantize=: an MXFP4 pair (X_blocks + X_scales, gpt-oss) is one
        # tensor X of that dtype, listed where X_blocks was.
        self._pairs: Dict[str, Dict[str, Any]] = {}
        if dequantize is not None:
            pairs = native.mx_pairs(dequantize)
            if pairs:
                stems = {b: x for x, b, _s, _i in pairs}
                scales = {sc for _x, _b, sc, _i in pairs}
                self._pairs = {x: i for x, _b, _s, i in pairs}
                self._names = [stems.get(n, n) for n in self._names if n not in scales]

    # -- the file
    @property
    def format(self) -> str:
        """The format's short name (``safetensors``, ``ztensor``, …)."""
        return self._f.format

    @property
    def title(self) -> str:
        return self._f.title

    @property
    def version(self) -> str:
        return self._f.version

    @property
    def path(self) -> Optional[str]:
        p = self._f.path
        return None if p is None else str(p)

    @property
    def metadata(self) -> Dict[str, Any]:
        """File metadata as a dict (insertion order kept)."""
        return self._f.metadata()

    @property
    def chunks(self) -> List[Dict[str, Any]]:
        """Opaque chunks (not tensors): name, kind, len, offset, encoding…"""
        return self._f.chunks()

    @property
    def warnings(self) -> List[str]:
        return self._f.warnings

    @property
    def positional_reads(self) -> bool:
        """True when copying loads (``copy=True``, ``load_file``) read the file with
        parallel positional reads into the arrays' buffers (a file opened by path and
        mapped) rather than copying from memory."""
        return self._f.positional_reads

    def chunk(self, name: str) -> bytes:
        """One opaque chunk's decoded bytes."""
        return self._f.chunk(name)

    def verify(
        self,
        *,
        hmac_key: Union[bytes, str, None] = None,
        public_key: Union[bytes, PathLike, None] = None,
        control_only: bool = False,
        tensors: Optional[Sequence[str]] = None,
        progress: Any = False,
    ) -> VerifyReport:
        """Runs every integrity layer the format has (checksums, hashes, HMAC,
        signatures, ECC) and reports each check. Never raises for a failed check.
        ``progress=True`` shows a bar on stderr while it checks (tqdm's when installed,
        on a terminal; a plain line otherwise), a callable gets ``(done_bytes,
        total_bytes)`` as the tensors are checked: their dense bytes, ``done`` never
        going back and ending at ``total``. An exception the callable raises is raised
        once the checks end."""
        if isinstance(hmac_key, str):
            hmac_key = hmac_key.encode()
        r = self._f.verify(
            hmac_key=hmac_key,
            public_key=None if public_key is None else _key_bytes(public_key, "public key"),
            control_only=control_only,
            tensors=list(tensors) if tensors is not None else None,
            progress=_progress.reporter(progress, "verifying"),
        )
        return VerifyReport(r["ok"], [Check(**c) for c in r["checks"]], r["warnings"])

    def identity(self, *, metadata: bool = False) -> Dict[str, Any]:
        """The content identity of the tensors (``tessera-id/1``): the same in every
        format the model is converted to. ``{"id", "metadata", "tensors": [{"name",
        "dtype", "shape", "layout", "digest"}]}``; digests are ``blake3:<hex>``."""
        return self._f.identity(metadata=metadata)

    def sign(self, secret_key: Union[bytes, PathLike], *, metadata: bool = False) -> str:
        """A detached Ed25519 or ECDSA P-256 signature over the tensor manifest (a
        ``tessera keygen`` key of either algorithm, or PEM P-256), as the text of a
        ``.sig`` file; it verifies against any conversion of the model."""
        return self._f.sign(_key_bytes(secret_key, "secret key"), metadata=metadata)

    def verify_signature(
        self,
        signature: Union[str, bytes, PathLike],
        public_key: Union[bytes, PathLike],
        *,
        tensors: Optional[Sequence[str]] = None,
    ) -> VerifyReport:
        """Checks the tensors against a detached signature (its text, bytes, or a path to
        a ``.sig`` file) with the trusted public key; only ``tensors`` when given (only
        those are read). Never raises for a failed check."""
        r = self._f.verify_signature(
            _signature_bytes(signature),
            _key_bytes(public_key, "public key"),
            tensors=list(tensors) if tensors is not None else None,
        )
        return VerifyReport(r["ok"], [Check(**c) for c in r["checks"]], r["warnings"])

    def convert(self, path: PathLike, format: Optional[str] = None, **options: Any) -> SaveReport:
        """Writes this whole file (tensors, metadata, opaque chunks) as another format,
        streaming from the mapped file without going through Python objects. Options
        are those of :func:`save`; a loss (``cast``, ``densify``, ``drop_metadata``)
        happens only when its option allows it, and is reported in the notes.
        ``progress=True`` shows a bar on stderr (tqdm's when installed, on a terminal);
        a callable gets ``(done_bytes, total_bytes)`` after each tensor."""
        bar = _progress.reporter(options.pop("progress", None), "converting")
        split = _split_options(options)
        _json_chunks(options)
        notes, extra = self._f.convert(
            _os.fspath(path), format=format, options=options, progress=bar, **split
        )
        return _report(notes, extra, path)

    # -- slices
    def get_slice(self, name: str) -> "TensorSlice":
        """Tensor ``name``'s shape and dtype without reading it; index the result
        (``f.get_slice("w")[0:1024, :]``, numpy's basic indexing: ints, slices with any
        step, negative positions, ``...``) to read only the bytes of the elements asked
        for. A bound outside its dimension is refused, naming the tensor and dimension
        (numpy would clamp it). See :func:`load_slices`."""
        self.tensor_info(name)
        return TensorSlice(self, name)

    def load_slices(
        self,
        plan: Mapping[str, Any],
        *,
        pages: Optional[PathLike] = None,
        framework: Optional[str] = None,
        threads: Optional[int] = None,
    ) -> Dict[str, Any]:
        """:func:`load_slices` on this opened file."""
        fw = self._framework if framework is None else _framework(framework)
        requests = _plan_requests(self, plan)
        return self._read_slices(requests, pages=pages, framework=fw, threads=threads)

    def _read_slices(
        self,
        requests: Sequence[Tuple[str, Any]],
        *,
        pages: Optional[PathLike] = None,
        framework: str = "np",
        threads: Optional[int] = None,
    ) -> Dict[str, Any]:
        native: List[Tuple[str, List[Tuple[str, Any, Any, Any]]]] = []
        whole: List[Tuple[str, Tuple[Any, ...]]] = []
        for name, index in requests:
            info = self.tensor_info(name)
            items = _index_items(index)
            # Tensors this handle decodes (GGUF blocks, MXFP4 pairs, with dequantize=)
            # are read whole, decoded, then cut.
            if name in self._pairs or (self._dequantize is not None and _is_packed(info)):
                whole.append((name, _np_index(items)))
            else:
                native.append((name, items))
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise InvalidInputError(f"threads={threads!r}: expected a positive int or None")
        got = self._f.slices(
            native, pages=None if pages is None else _os.fspath(pages), threads=threads
        )
        out: Dict[str, Any] = {}
        unverified = []
        for (name, _), (info, buf, why) in zip(native, got):
            raw = _np.asarray(buf)
            if framework == "pt":
                out[name] = to_torch(raw, info["dtype"], info["shape"], self._device)
            else:
                out[name] = to_numpy(raw, info["dtype"], info["shape"])
            if why is not None:
                unverified.append(why)
        for name, index in whole:
            arr = self.get_tensor(name, framework="np", densify=True, copy=True)
            part = _np.array(arr[index], copy=True)
            if framework == "pt":
                dt = _convert.dtype_name(part.dtype)
                out[name] = to_torch(_np.ascontiguousarray(part).reshape(-1).view(_np.uint8), dt, part.shape, self._device)
            else:
                out[name] = part
        if unverified:
            _warnings.warn(
                "; ".join(unverified) if len(unverified) < 4 else
                f"{len(unverified)} slices are unverified (their formats store digests over "
                f"whole tensors only; pass pages= to check slices): {unverified[0]}",
                stacklevel=3,
            )
        return out

    # -- tensors
    def tensor_info(self, name: str) -> Dict[str, Any]:
        """A tensor's description: dtype, shape, layout, attrs, storage, and ``nbytes``
        (its dense size: what ``progress=`` counts)."""
        if self._infos is None:
            self._infos = {i["name"]: i for i in self._f.tensor_infos()}
            self._infos.update(self._pairs)
        try:
            return self._infos[name]
        except KeyError:
            raise NotFoundError(f"no tensor named {name!r}") from None

    def tensor_infos(self) -> List[Dict[str, Any]]:
        return [self.tensor_info(n) for n in self._names]

    def get_tensor(
        self,
        name: str,
        *,
        framework: Optional[str] = None,
        densify: bool = False,
        copy: bool = False,
        dequantize: Optional[str] = None,
        packed: bool = False,
    ) -> Any:
        """One tensor as a numpy array (or torch tensor with ``framework="pt"``).
        Sub-byte floats (``f4_e2m1``, ``f6_e2m3``, ``f6_e3m2``) come back as ml_dtypes
        arrays (``float4_e2m1fn``, …: one element per byte, a new array) and, in torch, as
        ``float4_e2m1fn_x2`` (two per byte, the last dimension halved); ``packed=True``
        gives their stored bytes instead, as a :class:`Tensor` (``.parts["data"]``: two
        f4 per byte low nibble first, four f6 per three bytes).
        ``densify=True`` turns sparse tensors into dense arrays. ``dequantize`` ("f32",
        "f16" or "bf16"; default: the one given to :func:`open`) decodes a GGUF tensor
        stored in packed blocks (``q8_0``, ``q4_k``, …) into a dense array of that dtype,
        bit for bit as gguf-py's ``dequantize`` does; without it such a tensor comes back
        as a :class:`Tensor` holding the packed bytes (``.parts["data"]``, ``uint8``) and
        its ggml type (``.dtype``, ``.attrs["ggml_type"]``). With it, the name ``X`` of an
        MXFP4 pair ``X_blocks`` + ``X_scales`` (gpt-oss) is the pair decoded; a file
        opened with ``dequantize=`` lists such pairs as that one name.

        Reads are checked (unless the file was opened with ``verify=False``): with
        ``copy=True`` the stored bytes of a tensor the file keeps a digest for are read
        into a private buffer, the digest is computed over that buffer, and that buffer
        (or what is decoded from it) is what you get, so the copy is exactly the bytes
        that were checked even if the file changes meanwhile. A zero-copy view
        (``copy=False``) is checked when it is read, once per tensor, but it *is* the
        mapped file: a later change of the file on disk shows through it unchecked.

        numpy arrays of raw-stored tensors borrow the mapped file (zero-copy, read-only)
        unless ``copy=True``, which copies them into a fresh buffer the array owns
        (writable, independent of the file; buffers of 2 MiB and more are advised for
        transparent huge pages, which makes the copy several times faster than into
        ``malloc``'d memory). Decoded tensors are owned and writable either way, and are
        never copied twice. torch tensors are always owned."""
        fw = self._framework if framework is None else _framework(framework)
        dq = self._dequantize if dequantize is None else dequantize
        # torch tensors are copies: made from a checked copy.
        info, parts = self._f.tensor(name, densify=densify, copy=copy or fw == "pt", dequantize=dq)
        return self._wrap(info, parts, fw, packed)

    def get_tensors(
        self,
        names: Optional[Sequence[str]] = None,
        *,
        framework: Optional[str] = None,
        densify: bool = False,
        copy: bool = False,
        dequantize: Optional[str] = None,
        packed: bool = False,
    ) -> Dict[str, Any]:
        """Several tensors (default: all, in file order) as a dict, read in one call
        with the GIL released. As :meth:`get_tensor`, except that with ``copy=True``
        tensors under 2 MiB are copied packed together into shared huge-page buffers of
        about 16 MiB (faster; an array keeps its whole buffer alive, its neighbours'
        bytes included). This is what :func:`tessera.numpy.load_file` does."""
        fw = self._framework if framework is None else _framework(framework)
        dq = self._dequantize if dequantize is None else dequantize
        names = list(self._names if names is None else names)
        loaded = self._f.tensors(names, densify=densify, copy=copy or fw == "pt", dequantize=dq)
        return {n: self._wrap(info, parts, fw, packed) for n, (info, parts) in zip(names, loaded)}

    def _wrap(self, info: Dict[str, Any], parts: Any, fw: str, packed: bool = False) -> Any:
        raw = {role: _np.asarray(buf) for role, buf in parts}
        if info["layout"] != "dense" or (packed and info["dtype"] in _PACKED):
            return Tensor._from_raw(info, raw)
        if fw == "pt":
            return to_torch(raw["data"], info["dtype"], info["shape"], self._device)
        return to_numpy(raw["data"], info["dtype"], info["shape"])

    def __getitem__(self, name: str) -> Any:
        return self.get_tensor(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names if isinstance(name, str) else False

    def keys(self):  # type: ignore[override]
        return list(self._names)

    def close(self) -> None:
        """Drops this handle. Arrays already returned stay valid (they keep the map)."""
        self._f = _Closed()

    def __enter__(self) -> "File":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return repr(self._f)


class _Closed:
    def __getattr__(self, name: str) -> Any:
        raise ValueError("I/O operation on a closed tessera file")


def open(
    path: PathLike,
    framework: str = "np",
    *,
    device: Any = "cpu",
    mmap: bool = True,
    salvage: bool = False,
    verify: bool = True,
    dequantize: Optional[str] = None,
    hmac_key: Optional[bytes] = None,
    age_identities: Optional[Sequence[str]] = None,
    age_passphrase: Optional[str] = None,
    signature: Optional[Union[str, bytes, PathLike]] = None,
    public_key: Optional[Union[bytes, PathLike]] = None,
    shard: bool = False,
    token: Union[str, bool, None] = None,
    cache: bool = True,
    concurrency: Optional[int] = None,
) -> File:
    """Opens a tensor container of any supported format, detected by content (never by
    extension). The file is memory-mapped unless ``mmap=False``.

    ``signature`` (a ``tessera sign`` file: its path, text or bytes) with ``public_key``
    (the trusted key: a path, or bytes) holds the file to that signed manifest: the
    signature and the tensor names, dtypes and shapes are checked at open, and each
    tensor's bytes when it is first read (``f[name]``, ``get_tensor``, ``get_tensors``);
    a tensor that does not match the signed digest raises :class:`IntegrityError`
    instead of being handed out. It works for any conversion of the signed model.

    Reads are checked: every digest the file stores for a tensor's or chunk's bytes
    (zTensor crc32c/sha256, FOLD CRC-32C/SHA-256, AERO BLAKE3, WTXT chunk digests, npz
    CRC-32, …) is compared with the bytes before they are handed out, and a mismatch
    raises :class:`IntegrityError` naming the tensor; ``verify=False`` skips the
    comparison (faster; for files you trust). Copies (``copy=True``, ``framework="pt"``,
    the ``load_file`` functions) are checked over the copy itself; ``f[name]`` and
    ``get_tensor(..., copy=False)`` are zero-copy views of the mapped file, checked once
    when first read, after which they show the file as it is on disk (see
    :meth:`File.get_tensor`). :meth:`File.verify` checks everything at once and reports
    every layer. ``dequantize`` ("f32", "f16", "bf16") is the default of
    :meth:`File.get_tensor`'s: GGUF tensors stored in packed blocks come back decoded.
    ``hmac_key``: a WTXT file's arrays are authenticated as they are read (an array
    whose HMAC fails, or that has none, is refused).

    A path that does not exist (a local file, or a remote object) raises
    :class:`TesseraFileNotFoundError`, a ``FileNotFoundError``.

    A model set opens whole from its directory, its index or any shard;
    ``shard=True`` opens the file named alone (one shard's own tensors and metadata;
    a directory or an index is then refused).

    ``token``, for an ``http(s)://`` location: a string is a bearer token sent to that
    URL's host only (in place of ``TESSERA_HTTP_TOKEN`` or ``HF_TOKEN``); ``True`` sends
    ``TESSERA_HTTP_TOKEN`` to that host (the CLI's ``--token``). It is never shown in a
    message or a ``repr``.

    ``cache``, for an ``s3://`` or ``http(s)://`` location: the byte ranges fetched are
    kept in a disk cache (``TESSERA_CACHE_DIR``, else ``$XDG_CACHE_HOME/tessera`` or
    ``~/.cache/tessera``; at most ``TESSERA_CACHE_MAX_MB``, 2048 by default, the least
    recently used dropped first), keyed by the URL, the object's ETag and the range,
    so opening the same object again sends one ``HEAD`` and fetches no bytes;
    cached bytes are checked like fetched ones. ``cache=False`` neither reads nor
    writes it (the CLI's ``--no-cache``).

    ``concurrency``, for a remote location: at most this many range requests to the
    object in flight at once, shared by every read of it (default:
    ``TESSERA_REMOTE_CONCURRENCY``, else 16)."""
    if token is not None and not isinstance(token, (str, bool)):
        raise TypeError(f"token must be a str or a bool, not {type(token).__name__}")
    native = _tessera.open_file(
        _os.fspath(path),
        mmap=mmap,
        salvage=salvage,
        verify=verify,
        hmac_key=None if hmac_key is None else bytes(hmac_key),
        age_identities=list(age_identities) if age_identities else None,
        age_passphrase=age_passphrase,
        signature=None if signature is None else _signature_bytes(signature),
        public_key=None if public_key is None else _key_bytes(public_key, "public key"),
        shard=shard,
        token=token if isinstance(token, str) else None,
        token_host=token is True,
        cache=bool(cache),
        concurrency=None if concurrency is None else max(1, int(concurrency)),
    )
    return File(native, framework, device, dequantize)


class TensorSlice:
    """``File.get_slice(name)``: the tensor's shape and dtype, read nothing; ``[...]``
    reads the elements asked for (:meth:`File.get_slice`)."""

    def __init__(self, file: File, name: str) -> None:
        self._file = file
        self._name = name
        self._info = file.tensor_info(name)

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self._info["shape"])

    @property
    def dtype(self) -> str:
        return self._info["dtype"]

    def get_shape(self) -> List[int]:
        return list(self._info["shape"])

    def __len__(self) -> int:
        shape = self._info["shape"]
        if not shape:
            raise TypeError("len() of a 0-d tensor")
        return shape[0]

    def __getitem__(self, index: Any) -> Any:
        return self._file._read_slices([(self._name, index)], framework=self._file._framework)[self._name]

    def __repr__(self) -> str:
        return f"<tessera slice of {self._name!r}: {self.dtype} {list(self.shape)}>"


def _index_items(index: Any) -> List[Tuple[str, Any, Any, Any]]:
    """A numpy basic index (an int, a slice, ``...``, a tuple of those; a string in the
    CLI's syntax, ``"0:1024,:"``) as the native slice reader's items."""
    if index is None:
        return []
    if isinstance(index, str):
        return [_text_item(t, index) for t in index.replace(" ", "").strip("[]").split(",") if index.strip("[] ")]
    items = index if isinstance(index, tuple) else (index,)
    out: List[Tuple[str, Any, Any, Any]] = []
    for pos, x in enumerate(items):
        if x is Ellipsis:
            out.append(("e", None, None, None))
        elif isinstance(x, slice):
            bounds = []
            for what, v in (("start", x.start), ("stop", x.stop), ("step", x.step)):
                if v is not None and (isinstance(v, bool) or not isinstance(v, (int, _np.integer))):
                    raise InvalidInputError(f"slice {what} {v!r} at position {pos} is not an int")
                bounds.append(None if v is None else int(v))
            if bounds[2] == 0:
                raise InvalidInputError(f"slice step 0 at position {pos}")
            out.append(("r", bounds[0], bounds[1], bounds[2]))
        elif isinstance(x, (int, _np.integer)) and not isinstance(x, (bool, _np.bool_)):
            out.append(("i", int(x), None, None))
        else:
            raise InvalidInputError(
                f"unsupported index at position {pos}: expected an int, a slice or '...', "
                f"not {type(x).__name__} (basic indexing only)"
            )
    return out


def _text_item(t: str, whole: str) -> Tuple[str, Any, Any, Any]:
    if t == "...":
        return ("e", None, None, None)
    fields = t.split(":")
    try:
        nums = [None if f == "" else int(f) for f in fields]
    except ValueError:
        raise InvalidInputError(f"slice {whole!r}: {t!r} is not an int or a range") from None
    if len(fields) == 1 and nums[0] is not None:
        return ("i", nums[0], None, None)
    if len(fields) in (2, 3):
        nums += [None] * (3 - len(nums))
        if nums[2] == 0:
            raise InvalidInputError(f"slice {whole!r}: a step of 0")
        return ("r", nums[0], nums[1], nums[2])
    raise InvalidInputError(f"slice {whole!r}: {t!r} is not an int or a range")


def _np_index(items: Sequence[Tuple[str, Any, Any, Any]]) -> Tuple[Any, ...]:
    return tuple(
        Ellipsis if k == "e" else a if k == "i" else slice(a, b, c) for k, a, b, c in items
    )


_SPLIT_DIMS = {"rows": 0, "cols": -1}


def _split_spec(name: str, spec: Any, shape: Sequence[int]) -> Any:
    """A plan's spec as an index: an even split ``("rows"|"cols"|dim, part, parts)``
    becomes the range of that part (numpy.array_split's rule); anything else is an
    index as it is."""
    if spec is None:
        return ()
    if not (
        isinstance(spec, tuple)
        and len(spec) == 3
        and (isinstance(spec[0], str) or (isinstance(spec[0], (int, _np.integer)) and not isinstance(spec[0], bool)))
        and all(isinstance(v, (int, _np.integer)) and not isinstance(v, bool) for v in spec[1:])
    ):
        return spec
    how, part, parts = spec
    if isinstance(how, str):
        if how not in _SPLIT_DIMS:
            raise InvalidInputError(
                f"tensor {name!r}: split {how!r}: expected 'rows', 'cols' or a dimension number"
            )
        dim = _SPLIT_DIMS[how]
    else:
        dim = int(how)
    n = len(shape)
    d = dim + n if dim < 0 else dim
    if not 0 <= d < n:
        raise InvalidInputError(
            f"tensor {name!r}: split along {how!r}: the tensor has {n} dimensions {list(shape)}"
        )
    part, parts = int(part), int(parts)
    if parts < 1 or not 0 <= part < parts:
        raise InvalidInputError(f"tensor {name!r}: part {part} of {parts}: the part must be in 0..{parts}")
    size = int(shape[d])
    each, extra = divmod(size, parts)
    start = part * each + min(part, extra)
    stop = start + each + (1 if part < extra else 0)
    return (slice(None),) * d + (slice(start, stop),)


def _plan_requests(f: File, plan: Mapping[str, Any]) -> List[Tuple[str, Any]]:
    """Each tensor of `f` a plan entry matches, in file order, with its index."""
    import fnmatch

    if not isinstance(plan, Mapping):
        raise InvalidInputError(f"plan must be a dict of name or glob -> spec, not {type(plan).__name__}")
    entries = list(plan.items())
    used = [False] * len(entries)
    out: List[Tuple[str, Any]] = []
    for name in f:
        for i, (pattern, spec) in enumerate(entries):
            if not isinstance(pattern, str):
                raise InvalidInputError(f"plan key {pattern!r} is not a str")
            if pattern == name or fnmatch.fnmatchcase(name, pattern):
                used[i] = True
                out.append((name, _split_spec(name, spec, f.tensor_info(name)["shape"])))
                break
    # An entry shadowed by an earlier one still counts as matching a tensor.
    for i, (pattern, _) in enumerate(entries):
        if not used[i] and any(n == pattern or fnmatch.fnmatchcase(n, pattern) for n in f):
            used[i] = True
    missing = [p for (p, _), u in zip(entries, used) if not u]
    if missing:
        raise NotFoundError(
            f"plan entries match no tensor: {', '.join(repr(m) for m in missing)} "
            f"({len(f)} tensors in the file)"
        )
    return out


def load_slices(
    path_or_url: Union[PathLike, File],
    plan: Mapping[str, Any],
    *,
    pages: Optional[PathLike] = None,
    framework: str = "np",
    threads: Optional[int] = None,
    **read_options: Any,
) -> Dict[str, Any]:
    """Reads a slice of each tensor the plan names, and only those bytes::

        tessera.load_slices("s3://b/model.safetensors",
                            {"*.q_proj.weight": ("rows", rank, world),
                             "*.o_proj.weight": ("cols", rank, world),
                             "lm_head.weight": (slice(0, 1024), slice(None)),
                             "*.norm.weight": None})

    ``plan`` maps a tensor name or a glob (``fnmatch``: ``*``, ``?``, ``[...]``) to a
    spec; a tensor matched by several entries takes the first in dict order; tensors no
    entry matches are not read; an entry that matches no tensor is an error naming it.
    A spec is one of:

    - ``("rows", part, parts)``, ``("cols", part, parts)`` or ``(dim, part, parts)``:
      part ``part`` (from 0) of ``parts`` even parts of dimension 0 (``rows``), of the
      last dimension (``cols``) or of ``dim`` (negative counts from the end), cut by
      ``numpy.array_split``'s rule: the first ``size % parts`` parts have
      ``size // parts + 1`` elements, the others ``size // parts`` (parts past the size
      are empty). A 3-tuple of ints is always such a split;
    - an index as numpy's basic indexing takes it: an int, a slice (any step, negative
      positions), ``...``, or a tuple of those per dimension (or the CLI's text,
      ``"0:1024,:"``). Bounds outside a dimension are refused, never clamped;
    - ``None``: the whole tensor.

    Where the format stores a tensor raw (safetensors, npy, zTensor raw, GGUF dense,
    …), only the byte ranges of the elements asked for are read — runs of elements,
    nearby ones merged — straight from the file or, for an ``s3://`` / ``http(s)://``
    location, fetched on a bounded pool of parallel range requests; other tensors
    (compressed, text, sparse) are read whole, checked, and cut. Tensors are read in
    parallel (``threads``: the size of that pool; default: all cores).

    Formats that check small units (AERO pages, WTXT and FOLD chunks) check the units a
    slice touches; a tensor whose only digest covers the whole tensor cannot be checked
    from a slice: such slices are reported once, by a ``warnings.warn``, as unverified.
    ``pages``: a page manifest (``tessera id --pages``, :func:`id` with ``pages=``) to
    check every range read: ranges are widened to whole pages and each page read is
    checked, the error naming the tensor and page that fails. Without ``pages``, a
    ``STEM.pages`` beside the file (or URL) is used when there is one. A manifest that
    describes another model is refused. With ``open(..., signature=, public_key=)``
    the manifest must be the one signed (``tessera sign --pages``), or the slices are
    reported as checked against the manifest only.

    ``framework``: ``"np"`` (numpy arrays, owned and writable) or ``"pt"`` (torch).
    ``read_options`` are :func:`open`'s (``token=``, ``cache=``, ``verify=``,
    ``dequantize=``, …). ``path_or_url`` may also be an opened :class:`File`."""
    if isinstance(path_or_url, File):
        if read_options:
            raise InvalidInputError(
                f"read options {sorted(read_options)} are given to open(); this File is open already"
            )
        f = path_or_url
    else:
        f = open(path_or_url, **read_options)
    return f.load_slices(plan, pages=pages, framework=_framework(framework), threads=threads)


def load(data: Union[bytes, bytearray, memoryview], framework: str = "np", **kwargs: Any) -> File:
    """Opens a container held in memory (the bytes are copied once). Reads check the
    stored digests unless ``verify=False``; ``dequantize`` as for :func:`open`."""
    dequantize = kwargs.pop("dequantize", None)
    return File(_tessera.open_bytes(bytes(data), **kwargs), framework, dequantize=dequantize)


def convert(
    src: PathLike,
    dst: PathLike,
    format: Optional[str] = None,
    *,
    verify: bool = True,
    **options: Any,
) -> SaveReport:
    """Converts a file of any readable format into ``format`` (default: from ``dst``'s
    extension). See :meth:`File.convert`. Every tensor and chunk is checked against the
    digests the source stores before it is written, unless ``verify=False``."""
    with open(src, verify=verify) as f:
        return f.convert(dst, format, **options)


# huggingface_hub's size units (``max_shard_size="5GB"`` is 5 * 10**9 bytes), and the
# binary ones transformers also takes (``"5GiB"``).
_SIZE_UNITS = {
    "": 1, "B": 1,
    "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40,
}


def _parse_size(value: Union[int, str]) -> int:
    """``max_shard_size`` as bytes: an int, or a number with a unit as huggingface_hub
    spells it (``"5GB"``, ``"500MB"``, ``"2.5GB"``; ``"4GiB"`` for powers of two)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidInputError(f"max_shard_size must be an int or a size such as '5GB', not {value!r}")
    if isinstance(value, int):
        n = value
    else:
        m = _re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*", value)
        unit = m.group(2).upper() if m else None
        if m is None or unit not in _SIZE_UNITS:
            raise InvalidInputError(
                f"max_shard_size {value!r}: expected bytes or a size such as '5GB', '500MB', '4GiB'"
            )
        n = int(float(m.group(1)) * _SIZE_UNITS[unit])
    if n <= 0:
        raise InvalidInputError(f"max_shard_size {value!r}: must be positive")
    return n


def _split_options(options: Dict[str, Any]) -> Dict[str, Any]:
    """Takes ``max_shard_size`` and ``shards`` out of the options, as the native call
    takes them."""
    size = options.pop("max_shard_size", None)
    shards = options.pop("shards", None)
    if size is not None and shards is not None:
        raise InvalidInputError("max_shard_size and shards: give one")
    if shards is not None and (isinstance(shards, bool) or not isinstance(shards, int) or shards < 1):
        raise InvalidInputError(f"shards must be a positive int, not {shards!r}")
    return {"max_shard_size": None if size is None else _parse_size(size), "shards": shards}


def _json_chunks(options: Dict[str, Any]) -> None:
    """FOLD's ``chunks={NAME: value}`` as the writer takes it: a dict, list, number…
    as ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))`` (pyfolds'
    own spelling), ``str`` as JSON text, ``bytes`` as JSON bytes, a path as the file
    to read (``--chunk NAME=FILE``). The writer checks names and JSON."""
    for key in ("chunks", "chunk"):
        value = options.get(key)
        if not isinstance(value, Mapping):
            continue
        items: List[Any] = []
        for name, obj in value.items():
            if not isinstance(name, str):
                raise InvalidInputError(f"{key}: chunk names must be str, not {type(name).__name__}")
            if isinstance(obj, _os.PathLike):
                items.append(f"{name}={_os.fspath(obj)}")
                continue
            if isinstance(obj, (bytes, bytearray, memoryview)):
                data = bytes(obj)
            elif isinstance(obj, str):
                data = obj.encode("utf-8")
            else:
                data = _json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            items.append(name.encode("utf-8") + b"=" + data)
        options[key] = items


def save(
    tensors: Mapping,
    path: Optional[PathLike] = None,
    format: Optional[str] = None,
    metadata: Optional[Mapping] = None,
    **options: Any,
) -> Union[SaveReport, bytes]:
    """Writes a dict of numpy arrays, torch tensors, :class:`Tensor` objects or
    ``scipy.sparse`` matrices.

    ``format`` is a format name (``safetensors``, ``ztensor``, ``fold``, ``aero``,
    ``gptrs``, ``wtxt``, ``npz``, …); by default the path's extension decides. With a
    path the file is written atomically (a temporary file renamed into place) and,
    unless ``durable=False``, durably (fsynced, with its directory), and a
    :class:`SaveReport` is returned; without one the file's bytes are returned.

    Options are the writer options of the target format, spelled as ``tessera convert
    -O NAME=VALUE`` spells them; :func:`formats` lists each format's (``"options"``) and
    an option the format does not take raises :class:`InvalidInputError` naming it and
    the format. ``compression`` ("none", "zstd", "zstd:LEVEL" with levels 1–22, a level,
    True/False; zTensor, FOLD, npz) with ``compression_level``, ``digests`` ("crc32c",
    "sha256" or a list; zTensor), ``ecc`` (FOLD parity bytes), ``timestamp`` (WTXT, FOLD),
    ``hmac_key``, ``sign_key`` (32-byte Ed25519 seed or key file path), ``prev``,
    ``generation``, ``build``, ``host``, ``cuda``, ``audit``, ``rows_per_chunk``,
    ``streaming``, ``fixed_salt`` (WTXT), ``checkpoint`` (FOLD: ``torch_state``,
    ``llm_manifest``, ``nuclear_arrays`` instead of a chunk per tensor), ``chunks``
    (FOLD: ``{"metrics": {...}, "history": ..., "telemetry": ..., "llm_manifest": ...}``,
    values JSON-encoded, ``str``/``bytes`` taken as JSON text, a path read),
    ``nuclear`` (FOLD checkpoint: tensor names also copied into ``nuclear_arrays``),
    ``recode`` (FOLD source: re-encode instead of copying its chunks), ``shard_size``, ``tensor_hashes``,
    ``control_integrity``, ``page_hashes``, ``uuid`` (AERO), ``zero_base_id`` (GPTRS);
    the CLI's older names (``compress``, ``digest``, ``gen``, ``ts``, ``salt``) work too.
    And the losses a format may need, each explicit: ``cast``, ``densify``,
    ``drop_metadata``, ``dequantize`` ("f32", "f16" or "bf16": decode GGUF's quantized
    tensors as gguf-py does) and ``quantize`` ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1":
    writing GGUF, encode float tensors as gguf-py does; 1-D tensors and ragged rows
    stay float). ``progress=True`` shows a bar on stderr while it writes (tqdm's when
    installed, on a terminal; a plain line otherwise), a callable gets
    ``(done_bytes, total_bytes)`` after each tensor.

    ``max_shard_size`` (bytes, or a size as huggingface_hub takes it: ``"5GB"`` is
    5·10⁹ bytes, ``"4GiB"`` 4·2³⁰) or ``shards`` (a count) write a model set instead of
    one file, as ``tessera convert --max-shard-size`` does: for safetensors
    ``model-00001-of-0000N.safetensors`` … and ``model.safetensors.index.json`` (the
    Hugging Face layout), GGUF splits for GGUF, and shards with a
    ``*.tessera-set.json`` index for the other formats; all written atomically as a set.
    ``path`` names the set (``dir/model.safetensors``); the report's ``extra_files``
    lists every file written, the index last. A model that fits one shard is written
    as one plain file at ``path``. :func:`open` opens the set by its index.
    """
    bar = _progress.reporter(options.pop("progress", None), "writing")
    split = _split_options(options)
    _json_chunks(options)
    if not isinstance(tensors, Mapping):
        raise InvalidInputError("tensors must be a dict of name -> array")
    items = []
    for name, x in tensors.items():
        if not isinstance(name, str):
            raise InvalidInputError(f"tensor names must be str, not {type(name).__name__}")
        items.append(from_array(name, x))
    notes, extra, data = _tessera.save(
        items,
        None if path is None else _os.fspath(path),
        format=format,
        metadata=dict(metadata) if metadata is not None else None,
        options=options,
        progress=bar,
        **split,
    )
    report = _report(notes, extra, path)
    if path is None:
        return data
    return report


# --- safetensors-compatible safe_open ---------------------------------------------


class _Slice:
    """``safe_open(...).get_slice(name)``: shape and dtype without reading, then
    ``[...]`` for a sub-array."""

    def __init__(self, owner: "safe_open", name: str) -> None:
        self._owner = owner
        self._name = name
        self._info = owner._file.tensor_info(name)

    def get_shape(self) -> List[int]:
        return list(self._info["shape"])

    def get_dtype(self) -> str:
        d = self._owner._dequantized(self._info) or self._info["dtype"]
        return SAFETENSORS_NAMES.get(d, d.upper())

    def __len__(self) -> int:
        shape = self._info["shape"]
        if not shape:
            raise TypeError("len() of a 0-d tensor")
        return shape[0]

    def __getitem__(self, index: Any) -> Any:
        owner = self._owner
        owner._check_open()
        dq = owner._dequantized(self._info)
        if dq is None:
            _refuse_packed(self._info)
        index = _check_index(index, self._info["shape"])
        checked = owner._verify and bool(self._info["storage"]["digests"])
        if dq is None and not checked and self._info["layout"] == "dense" and owner._copy:
            # Only the bytes of the selected elements are read (tessera's slice reader).
            # With copy=False the part stays a read-only view of the map (zero-copy, as
            # get_tensor), below.
            return owner._file._read_slices([(self._name, index)], framework=owner._framework)[self._name]
        # Only the selected part is copied (a view of the map first, then its copy),
        # unless the tensor has a stored digest to check: then the whole tensor is read
        # into a private buffer and checked there (a checked copy), and the part taken
        # from that buffer. Dequantized tensors are decoded whole.
        checked = owner._verify and bool(self._info["storage"]["digests"])
        arr = owner._file.get_tensor(
            self._name, framework="np", densify=True, copy=checked and owner._copy, dequantize=dq
        )
        if owner._framework == "np" and not owner._copy:
            return arr[index]
        part = _np.array(arr[index], copy=True)
        if owner._framework == "pt":
            dt = dq or self._info["dtype"]
            raw = _np.ascontiguousarray(part).reshape(-1).view(_np.uint8)
            if dt in _PACKED:
                raw = _pack(part, dt)
            return to_torch(raw, dt, part.shape, owner._device)
        return part


def _is_packed(info: Dict[str, Any]) -> bool:
    """A tensor stored in packed blocks (GGUF ``q8_0``, ``q4_k``, …)."""
    return info["layout"] not in ("dense", "sparse_csr", "sparse_coo")


def _refuse_packed(info: Dict[str, Any]) -> None:
    """Arrays of a tensor stored in packed blocks need ``dequantize=``: say so."""
    if _is_packed(info):
        raise UnsupportedError(
            f"tensor {info['name']!r} is {info['dtype']}, stored in packed GGUF blocks: "
            f"pass dequantize='f32' (or 'f16', 'bf16') to get it as an array, decoded as "
            f"gguf-py's dequantize does; tessera.open(path).get_tensor(name) gives the "
            f"packed bytes as a tessera.Tensor"
        )


def _refuse_unasked(f: "File", dequantize: Optional[str]) -> None:
    """The array loaders (``load_file``) return arrays only: a packed tensor without
    ``dequantize=`` is refused, naming it, before anything is read."""
    if dequantize is None:
        for info in f.tensor_infos():
            _refuse_packed(info)


def _check_index(index: Any, shape: Sequence[int]) -> Tuple[Any, ...]:
    """safetensors' slicing rules, with its error texts: ints, slices and one ``...``
    only (no fancy indexing, no ``None``; an empty list selects nothing of the first
    dimension), every bound inside its dimension (no silent clamping), at most as many
    indices as dimensions. Beyond safetensors: negative slice bounds and positive steps.
    Raises :class:`InvalidInputError` (a ``ValueError``, a ``SafetensorError``)."""
    if isinstance(index, list):
        if index:
            raise InvalidInputError("Non empty lists are not implemented")
        index = (slice(0, 0),)
    items = index if isinstance(index, tuple) else (index,)
    dims = list(shape)
    if sum(1 for x in items if x is Ellipsis) > 1:
        raise InvalidInputError("an index can only have a single ellipsis ('...')")
    for pos, x in enumerate(items):
        if x is Ellipsis:
            continue
        if isinstance(x, bool) or not isinstance(x, (int, _np.integer, slice)):
            raise InvalidInputError(
                f"unsupported slice index at position {pos}: expected slice, int, or ellipsis, "
                f"not {type(x).__name__}"
            )
    fixed = [x for x in items if x is not Ellipsis]
    if len(fixed) > len(dims):
        raise InvalidInputError(f"{len(fixed)} indices for a tensor of {len(dims)} dimensions {dims}")
    # Which dimension each index applies to: those before '...' from the front, those
    # after it from the back.
    if Ellipsis in items:
        e = items.index(Ellipsis)
        before, after = items[:e], items[e + 1 :]
        dim_of = list(range(len(before))) + [None] + list(range(len(dims) - len(after), len(dims)))
    else:
        dim_of = list(range(len(items)))
    # Negative positions count from the end; one before the start is refused, in
    # safetensors' words. `shown` is the index as its error messages print it.
    norm: List[Tuple[Any, Optional[int]]] = []
    for x, d in zip(items, dim_of):
        if d is None:
            norm.append((x, d))
            continue
        size = dims[d]
        if isinstance(x, slice):
            if x.step is not None and (isinstance(x.step, bool) or not isinstance(x.step, (int, _np.integer)) or x.step < 1):
                raise InvalidInputError(f"slice step {x.step!r} for dimension #{d}: only positive steps")
            bounds = []
            for bound in (x.start, x.stop):
                if bound is not None:
                    if isinstance(bound, bool) or not isinstance(bound, (int, _np.integer)):
                        raise InvalidInputError(f"slice bound {bound!r} for dimension #{d} is not an int")
                    if bound < 0:
                        if bound + size < 0:
                            raise InvalidInputError(f"Invalid index {bound} for dimension {d} of size {size}")
                        bound += size
                    bound = int(bound)
                bounds.append(bound)
            norm.append((slice(bounds[0], bounds[1], x.step), d))
        else:
            if x < 0:
                if x + size < 0:
                    raise InvalidInputError(f"Invalid index {x} for dimension {d} of size {size}")
                x += size
            norm.append((int(x), d))

    def shown() -> str:
        def one(x: Any) -> str:
            if x is Ellipsis:
                return "..."
            if isinstance(x, slice):
                text = ("" if x.start is None else str(x.start)) + ":" + ("" if x.stop is None else str(x.stop))
                return text + (f":{x.step}" if x.step not in (None, 1) else "")
            return str(x)

        return "[" + ", ".join(one(x) for x, _ in norm) + "]"

    # Bounds, last dimension first (safetensors reports the last bad one).
    for x, d in reversed(norm):
        if d is None:
            continue
        size = dims[d]
        asked = None
        if isinstance(x, slice):
            start = 0 if x.start is None else x.start
            stop = size if x.stop is None else x.stop
            if start > size:
                asked = start
            elif stop > size:
                asked = stop - 1
            elif start > stop:
                raise InvalidInputError(
                    f"Error during slicing {shown()} with shape {dims}: slice {start}:{stop} for "
                    f"dimension #{d} of size {size} ends before it starts"
                )
        elif x >= size:
            asked = x
        if asked is not None:
            raise InvalidInputError(
                f"Error during slicing {shown()} with shape {dims}: index {asked} out of bounds "
                f"for tensor dimension #{d} of size {size}"
            )
    return tuple(x for x, _ in norm)


class safe_open:
    """safetensors' ``safe_open``, for every format tessera reads::

        with tessera.safe_open("model.zt", framework="pt") as f:
            for k in f.keys():
                t = f.get_tensor(k)
            part = f.get_slice("embed")[:, :128]
            meta = f.metadata()

    As in safetensors, ``get_tensor`` and ``get_slice(...)[...]`` return arrays the
    caller owns (writable). With ``framework="np"``, ``copy=False`` returns zero-copy,
    read-only arrays over the mapped file instead (as :func:`tessera.open` does).
    ``shard``, ``token`` and ``cache`` (a remote location's disk cache) are
    :func:`tessera.open`'s.
    """

    def __init__(
        self,
        filename: PathLike,
        framework: str,
        device: Any = "cpu",
        *,
        copy: bool = True,
        verify: bool = True,
        dequantize: Optional[str] = None,
        backend: Optional[str] = None,
        shard: bool = False,
        token: Union[str, bool, None] = None,
        cache: bool = True,
    ) -> None:
        # safetensors' backend= picks its I/O path ("mmap" or "pread"); tessera maps the
        # file and makes its copies with positional reads (File.positional_reads) either way.
        if backend not in (None, "rust", "mmap", "pread"):
            raise InvalidInputError(f"backend={backend!r}: expected 'mmap' or 'pread'")
        self._closed = False
        self._framework = _framework(framework)
        self._device = device
        self._copy = bool(copy)
        self._verify = bool(verify)
        self._dequantize = dequantize
        self._shard = bool(shard)
        self._token = token
        self._cache = bool(cache)
        self._file = self._open(filename, self._verify)

    def _open(self, filename: PathLike, check: bool) -> File:
        return open(
            filename,
            self._framework,
            device=self._device,
            verify=check,
            shard=self._shard,
            token=self._token,
            cache=self._cache,
        )

    def _dequantized(self, info: Dict[str, Any]) -> Optional[str]:
        """The dtype a packed tensor is decoded to (None: not packed, or not asked)."""
        return self._dequantize if _is_packed(info) else None

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidInputError("file is closed")

    def keys(self) -> List[str]:
        """Tensor names, sorted (as safetensors returns them)."""
        self._check_open()
        return sorted(self._file.keys())

    def offset_keys(self) -> List[str]:
        """Tensor names in file order."""
        self._check_open()
        return self._file.keys()

    def metadata(self) -> Optional[Dict[str, str]]:
        """The file metadata as str -> str (non-string values as JSON), or None."""
        self._check_open()
        md = self._file.metadata
        if not md:
            return None
        return {k: v if isinstance(v, str) else _json.dumps(_jsonable(v)) for k, v in md.items()}

    def get_tensor(self, name: str) -> Any:
        self._check_open()
        info = self._file.tensor_info(name)
        dq = self._dequantized(info)
        if dq is None:
            _refuse_packed(info)
        return self._file.get_tensor(name, densify=True, copy=self._copy, dequantize=dq)

    def get_tensors(self) -> Dict[str, Any]:
        """Every tensor by name, in file order (safetensors 0.8's ``get_tensors``): read
        in one batch, as :func:`tessera.numpy.load_file` does."""
        self._check_open()
        infos = self._file.tensor_infos()
        if any(_is_packed(i) for i in infos):  # refused, or dequantized, one by one
            return {i["name"]: self.get_tensor(i["name"]) for i in infos}
        return self._file.get_tensors(densify=True, copy=self._copy)

    def get_slice(self, name: str) -> _Slice:
        self._check_open()
        return _Slice(self, name)

    def __enter__(self) -> "safe_open":
        self._check_open()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._closed = True
        self._file.close()


class _safe_open_handle(safe_open):
    """safetensors' ``_safe_open_handle``: :class:`safe_open` on a file object already
    opened (``open(path, "rb")``, an ``fsspec`` file…). When the object's ``name`` is
    the path of the very file it has open, that file is memory-mapped; otherwise its
    bytes are read once through the object (``fileno()`` or ``read()``)."""

    def __init__(
        self,
        f: Any,
        framework: str,
        device: Any = "cpu",
        *,
        copy: bool = True,
        verify: bool = True,
        dequantize: Optional[str] = None,
        backend: Optional[str] = None,
    ) -> None:
        self._source = handle_source(f)
        super().__init__(
            self._source if isinstance(self._source, str) else "<file object>",
            framework,
            device,
            copy=copy,
            verify=verify,
            dequantize=dequantize,
            backend=backend,
        )

    def _open(self, filename: PathLike, check: bool) -> File:
        if isinstance(self._source, str):
            return super()._open(self._source, check)
        f = load(self._source, self._framework, verify=check)
        f._device = self._device
        return f


# --- safetensors' bytes-level functions -------------------------------------------


def serialize(tensor_dict: Mapping, metadata: Optional[Dict[str, str]] = None) -> bytes:
    """safetensors' ``serialize``: ``{name: TensorSpec}`` to the bytes of a
    .safetensors file. A dict ``{"dtype", "shape", "data"}`` (dtype as ``"F32"`` or
    ``"float32"``, data as bytes: safetensors 0.7's input) is taken too."""
    items = [spec_item(n, t) for n, t in tensor_dict.items()]
    _, _, data = _tessera.save(items, None, format="safetensors", metadata=metadata, options={})
    return bytes(data)


def serialize_file(tensor_dict: Mapping, filename: PathLike, metadata: Optional[Dict[str, str]] = None) -> None:
    """safetensors' ``serialize_file``: as :func:`serialize`, written atomically, with
    the GIL released while it writes."""
    items = [spec_item(n, t) for n, t in tensor_dict.items()]
    _tessera.save(items, _os.fspath(filename), format="safetensors", metadata=metadata, options={})


def deserialize(data: Union[bytes, bytearray, memoryview]) -> List[Tuple[str, Dict[str, Any]]]:
    """safetensors' ``deserialize``: the bytes of a file of any format tessera reads to
    ``[(name, {"dtype": "F32", "shape": [...], "data": bytearray})]`` in file order,
    every stored digest checked first."""
    f = load(bytes(data))
    out = []
    for name in f.keys():
        info = f.tensor_info(name)
        _refuse_packed(info)
        raw = f.get_tensor(name, densify=True, copy=True)
        d = info["dtype"]
        buf = _np.ascontiguousarray(raw).reshape(-1).view(_np.uint8).tobytes()
        out.append((name, {"dtype": SAFETENSORS_NAMES.get(d, d.upper()), "shape": list(info["shape"]), "data": bytearray(buf)}))
    return out


def _jsonable(v: Any) -> Any:
    if isinstance(v, bytes):
        return {"$bytes": v.hex()}
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    return v


# The public namespace: the API only (the modules this one imports are underscored).
_SUBMODULES = ["errors", "numpy", "torch", "wtxt"]


def __dir__() -> List[str]:
    return sorted(set(__all__) | set(_SUBMODULES) | {"__version__"})


from . import wtxt  # noqa: E402  (the WTXT tools: cheap, so always there)
from ._snapshot import Restored, Snapshotter, restore  # noqa: E402
