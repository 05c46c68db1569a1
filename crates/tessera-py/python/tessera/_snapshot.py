"""``tessera.Snapshotter`` and ``tessera.restore``: snapshots from a live training loop
(the native pipeline is ``tessera::snapshot``; see the README's "Snapshots" section)."""

from __future__ import annotations

import os as _os
import warnings as _warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _tessera
from ._convert import from_array
from .errors import InvalidInputError, UnsupportedError

PathLike = Union[str, "_os.PathLike[str]"]


def _key_bytes(key: Union[bytes, PathLike], public: bool) -> bytes:
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key)
    return _tessera._read_key_file(_os.fspath(key), public).encode()


class Snapshotter:
    """Snapshots of a training state into the ring directory ``ring``.

    ``request(state, step=…)`` appends one fsynced line to the ring's log, copies the
    arrays into a staging arena reused between generations (or, with ``copy=False``,
    holds them: do not change them while :meth:`pinned` says so) and returns the
    generation number at once; a background thread writes the snapshot atomically into
    the ring in ``format`` (any writable format: "wtxt", "safetensors", "ztensor",
    "fold", …), chained to the previous generation, signed with ``sign_key`` (a key file
    or key bytes: a detached signed manifest per generation, and WTXT's own ``sign``
    line for an Ed25519 key), HMAC'd (``hmac_key``/``hmac_key_file``, WTXT) and
    age-encrypted (``age_recipients``, WTXT) as asked; the ring keeps the newest
    ``keep`` generations and every ``keep_every``-th, and never drops one a target
    still lacks. Each ``push`` target (``file://DIR`` or a directory in this build) gets
    every generation once, in order, from its own thread; failures stay queued in the
    log and are retried with backoff (``retry=(first, max)`` seconds), also by the next
    Snapshotter on the ring or ``tessera snapshots push``.

    When the pipeline is behind (the previous generation still being written, or
    ``max_backlog`` generations — default ``keep`` — waiting for a push),
    ``on_backlog="skip"`` skips the request (``None`` is returned, a warning is issued,
    :attr:`skipped` counts it) and ``"block"`` waits. Other keyword arguments are the
    format's writer options, as :func:`tessera.save` takes them.
    """

    def __init__(
        self,
        ring: PathLike,
        format: str = "wtxt",
        *,
        keep: int = 5,
        keep_every: int = 0,
        sign_key: Union[bytes, PathLike, None] = None,
        hmac_key: Optional[bytes] = None,
        hmac_key_file: Optional[PathLike] = None,
        age_recipients: Optional[Sequence[str]] = None,
        delta: bool = False,
        push: Sequence[str] = (),
        on_backlog: str = "skip",
        max_backlog: Optional[int] = None,
        retry: Tuple[float, float] = (0.5, 60.0),
        **options: Any,
    ) -> None:
        if delta:
            raise UnsupportedError(
                "delta=True (DELTA v2 generations) is not built yet: each generation is a full snapshot"
            )
        if keep < 1:
            raise InvalidInputError(f"keep={keep}: at least 1")
        if hmac_key_file is not None:
            with open(hmac_key_file, "rb") as f:
                hmac_key = f.read()
        if hmac_key is not None:
            options["hmac_key"] = bytes(hmac_key)
        if age_recipients:
            options["age_recipients"] = list(age_recipients)
        if isinstance(push, str):
            push = [push]
        self._native = _tessera.NativeSnapshotter(
            _os.fspath(ring),
            format,
            keep,
            keep_every,
            options,
            None if sign_key is None else _key_bytes(sign_key, False),
            [str(p) for p in push],
            on_backlog,
            max_backlog,
            (float(retry[0]), float(retry[1])),
        )
        self.ring = _os.fspath(ring)
        for note in self._native.recovered():
            _warnings.warn(f"snapshot ring {self.ring}: {note}", RuntimeWarning, stacklevel=2)

    def request(
        self,
        state: Mapping[str, Any],
        step: Optional[int] = None,
        metadata: Optional[Mapping[str, Any]] = None,
        copy: bool = True,
    ) -> Optional[int]:
        """Pins ``state`` (a dict of numpy arrays or torch tensors; CUDA tensors are
        copied to the host first) as the next generation and returns its number once
        pinned, or ``None`` when skipped (``on_backlog="skip"``)."""
        items = []
        for name, x in state.items():
            if not isinstance(name, str):
                raise InvalidInputError(f"tensor names must be str, not {type(name).__name__}")
            items.append(from_array(name, x))
        meta = {str(k): str(v) for k, v in (metadata or {}).items()}
        gen = self._native.request(items, step, meta, copy)
        if gen is None:
            _warnings.warn(
                f"snapshot skipped: the pipeline is behind ({self.skipped} skipped so far)",
                RuntimeWarning,
                stacklevel=2,
            )
        return gen

    def pinned(self, gen: int) -> bool:
        """Whether generation ``gen`` is still being written (under ``copy=False`` its
        arrays must not change until this is False)."""
        return self._native.pinned(gen)

    def wait(self, gen: int, timeout: Optional[float] = None) -> None:
        """Waits until generation ``gen`` is written; raises if its write failed."""
        self._native.wait(gen, timeout)

    def flush(self) -> None:
        """Waits until no generation is being written."""
        self._native.flush()

    def wait_pushed(self, timeout: float = 60.0) -> bool:
        """Waits until every target holds every generation; False on timeout."""
        return self._native.wait_pushed(timeout)

    @property
    def skipped(self) -> int:
        """Requests skipped because the pipeline was behind."""
        return self._native.skipped()

    @property
    def pending(self) -> Dict[str, List[int]]:
        """Per target, the generations it still lacks (the resend queue)."""
        return dict(self._native.pending())

    @property
    def errors(self) -> List[str]:
        """Write failures so far (each also in the ring's log)."""
        return self._native.errors()

    def generations(self) -> List[Dict[str, Any]]:
        """The ring's generations as its log says."""
        return self._native.generations()

    @property
    def arena_bytes(self) -> int:
        """Bytes the staging arena holds (its copy of the state)."""
        return self._native.arena_bytes()

    def close(self, push_timeout: float = 60.0) -> None:
        """Waits for the writes, then up to ``push_timeout`` seconds for the pushes;
        pushes still pending stay queued in the ring's log."""
        self._native.close(push_timeout)

    @property
    def closed(self) -> bool:
        return self._native.closed

    def __enter__(self) -> "Snapshotter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@dataclass
class Restored:
    """What :func:`restore` returns: the state and which generation it is."""

    state: Dict[str, Any]
    generation: int
    step: Optional[int]
    time: str
    format: str
    root: str
    path: str
    metadata: Dict[str, str] = field(default_factory=dict)
    #: Newer generations that did not verify, with why.
    skipped: List[Tuple[int, str]] = field(default_factory=list)
    #: Log lines ignored (a torn last line after a crash).
    log_problems: List[str] = field(default_factory=list)


def restore(
    ring: PathLike,
    framework: str = "np",
    *,
    public_key: Union[bytes, PathLike, None] = None,
    generation: Optional[int] = None,
    hmac_key: Optional[bytes] = None,
    age_identities: Optional[Sequence[str]] = None,
    age_passphrase: Optional[str] = None,
) -> Restored:
    """The newest generation of the ring that verifies (every integrity layer of its
    format, its identity root against the log, the chain to its predecessor, its
    signature by ``public_key`` when given), and the newer ones it skipped and why.
    Raises :class:`IntegrityError` when none verifies."""
    from . import open as _open

    gen, path, side, skipped, problems = _tessera.snapshot_restore(
        _os.fspath(ring),
        public_key=None if public_key is None else _key_bytes(public_key, True),
        generation=generation,
        hmac_key=hmac_key,
        identities=list(age_identities or []),
        passphrase=age_passphrase,
    )
    f = _open(
        path,
        framework,
        hmac_key=hmac_key,
        age_identities=age_identities,
        age_passphrase=age_passphrase,
    )
    state = f.get_tensors(copy=True)
    return Restored(
        state=state,
        generation=gen,
        step=side["step"],
        time=side["time"],
        format=side["format"],
        root=side["root"],
        path=path,
        metadata=dict(side["metadata"]),
        skipped=list(skipped),
        log_problems=list(problems),
    )
