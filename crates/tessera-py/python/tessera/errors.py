"""Exceptions raised by tessera.

Every error is a :class:`TesseraError`; the subclass says what kind of problem it is,
mapped one to one from the Rust library's error kinds. Each instance carries

- ``kind``: the Rust kind's name (``"malformed"``, ``"integrity"``, …),
- ``format``: the format the error came from (``"safetensors"``) or None,
- ``subject``: the tensor, chunk or line concerned, or None,
- ``offset``: the byte offset in the file, or None,
- ``hints``: the keyword arguments that would lift the error (``["cast"]``), or [],
- ``refusals``: every refusal of a conversion, each ``(tensor or None, reason,
  keyword or None)``, or [] (the message lists them grouped).

Some classes also derive from the matching built-in exception, so code that already
catches ``KeyError``, ``ValueError`` or ``OSError`` keeps working.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

__all__ = [
    "TesseraError",
    "FormatError",
    "UnknownFormatError",
    "UnsupportedError",
    "UnsupportedVersionError",
    "IntegrityError",
    "LimitError",
    "InvalidInputError",
    "NotFoundError",
    "IoError",
    "TesseraFileNotFoundError",
    "TesseraIsADirectoryError",
    "TesseraPermissionError",
    "ConversionWarning",
    "SafetensorError",
]


class TesseraError(Exception):
    """Base class of every tessera error."""

    kind: str = "error"
    format: Optional[str] = None
    subject: Optional[str] = None
    offset: Optional[int] = None
    hints: List[str] = []
    refusals: List[Tuple[Optional[str], str, Optional[str]]] = []


# safetensors' one exception class, by its name: every tessera error is one, so code
# written for safetensors (``except SafetensorError``) catches tessera's errors.
SafetensorError = TesseraError


class FormatError(TesseraError):
    """The file breaks its format's spec (malformed, truncated, inconsistent)."""


class UnknownFormatError(FormatError):
    """The bytes match no known format."""


class UnsupportedError(TesseraError):
    """A valid request tessera does not support (a format not implemented, a lossy
    conversion without the option that allows it, …)."""


class UnsupportedVersionError(UnsupportedError):
    """The format is known but this version of it is not supported."""


class IntegrityError(TesseraError):
    """A checksum, hash, HMAC or signature does not match."""


class LimitError(TesseraError):
    """A number in the file exceeds one of tessera's limits."""


class InvalidInputError(TesseraError, ValueError):
    """The caller's input is invalid (bad option, bad tensor data)."""


class NotFoundError(TesseraError, KeyError):
    """A named tensor or chunk does not exist."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return Exception.__str__(self)


class IoError(TesseraError, OSError):
    """An operating-system I/O error; ``errno``, ``strerror`` and ``filename`` are set
    when the system gave a number. A missing file, a directory and a permission problem
    raise the subclasses below, which are also the built-in ``FileNotFoundError``,
    ``IsADirectoryError`` and ``PermissionError``."""

    def __str__(self) -> str:  # OSError would format "[Errno …]" once errno is set
        return Exception.__str__(self)


class TesseraFileNotFoundError(IoError, FileNotFoundError):
    """The file does not exist (``errno`` is ``ENOENT``)."""


class TesseraIsADirectoryError(IoError, IsADirectoryError):
    """The path is a directory (``errno`` is ``EISDIR``)."""


class TesseraPermissionError(IoError, PermissionError):
    """The file may not be read or written (``errno`` is ``EACCES`` or ``EPERM``)."""


class ConversionWarning(UserWarning):
    """A save or conversion changed what it wrote, as its options allowed (``cast``,
    ``densify``, ``drop_metadata``, …): the message lists each change, as the CLI prints
    it; the returned :class:`tessera.SaveReport` has them in ``notes``."""
