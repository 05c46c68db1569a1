"""WTXT tools, as the CLI's ``tessera wtxt`` verbs: deltas between snapshots, applying
them, signing, finalizing a streamed snapshot, age encryption.

Every output is written atomically (a temporary sibling renamed into place: an
interrupted call never leaves a half file under the name). A signing key is a 32-byte
Ed25519 seed (``bytes``) or the path of a key file (``tessera keygen``); an HMAC key is
``bytes`` (or ``str``, its UTF-8 bytes). Errors are :mod:`tessera.errors` exceptions
naming the file.

>>> import tessera.wtxt
>>> tessera.wtxt.delta("gen1.wtxt", "gen2.wtxt", "gen2.wtxtdelta")   # doctest: +SKIP
>>> tessera.wtxt.apply("gen1.wtxt", "gen2.wtxtdelta", "rebuilt.wtxt")  # doctest: +SKIP
"""

from __future__ import annotations

import os as _os
from typing import Optional, Sequence, Union

from . import _tessera

_Path = Union[str, "_os.PathLike[str]"]
_Key = Union[bytes, _Path]

__all__ = ["delta", "apply", "sign", "finalize", "encrypt", "decrypt"]


def delta(base: _Path, target: _Path, out: _Path, *, with_target_root: bool = False) -> int:
    """Write the chunks that changed from ``base`` to ``target`` as a DELTA v2 file at
    ``out``; return its size in bytes. ``with_target_root`` adds Tessera's extension
    (the target's ``cap``/``root`` lines and HMACs), which rebuilds any target byte for
    byte but which a conforming DELTA v2 reader rejects."""
    return _tessera.wtxt_delta(base, target, out, with_target_root=with_target_root)


def apply(base: _Path, delta: _Path, out: _Path, *, sign_key: Optional[_Key] = None) -> None:
    """Apply ``delta`` to ``base``, writing the target snapshot at ``out`` (unsigned
    unless ``sign_key`` re-signs it). A delta made for another base is refused."""
    _tessera.wtxt_apply(base, delta, out, sign_key=sign_key)


def sign(path: _Path, key: _Key, *, out: Optional[_Path] = None) -> str:
    """Sign a snapshot (or a ``.wsum``) with an Ed25519 key, in place or to ``out``;
    return the key id (16 hex digits)."""
    return _tessera.wtxt_sign(path, key, out=out)


def finalize(
    path: _Path,
    *,
    out: Optional[_Path] = None,
    prev: Optional[_Path] = None,
    sign_key: Optional[_Key] = None,
    hmac_key: Optional[Union[bytes, str]] = None,
) -> str:
    """Write the WSUM of a streamed snapshot (WTXT-S, ``root_pending``) written without
    one, and return its path: ``out``, by default ``path + ".wsum"`` (which must not
    exist yet). Every array is checked first (and its HMAC when ``hmac_key`` is given):
    a damaged one refuses it, as does a snapshot that is final already. ``prev`` chains
    it to the previous snapshot; ``sign_key`` signs it."""
    return _os.fspath(
        _tessera.wtxt_finalize(path, out=out, prev=prev, sign_key=sign_key, hmac_key=hmac_key)
    )


def encrypt(
    path: _Path,
    out: _Path,
    *,
    recipients: Sequence[str] = (),
    passphrase: Optional[str] = None,
) -> None:
    """Encrypt a file with age (ASCII armor) for ``recipients`` (``age1…``) or a
    passphrase. ``tessera.open`` reads the result with ``age_identities=`` or
    ``age_passphrase=``."""
    _tessera.wtxt_encrypt(path, out, recipients=list(recipients), passphrase=passphrase)


def decrypt(
    path: _Path,
    out: _Path,
    *,
    identities: Sequence[str] = (),
    passphrase: Optional[str] = None,
) -> None:
    """Decrypt an age-armored file with ``identities`` (``AGE-SECRET-KEY-1…``) or a
    passphrase."""
    _tessera.wtxt_decrypt(path, out, identities=list(identities), passphrase=passphrase)
