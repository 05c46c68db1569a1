from collections.abc import Mapping
from dataclasses import dataclass
from os import PathLike
from typing import Any, Dict, Iterator, List, Literal, Optional, Sequence, Tuple, Union, overload

import numpy as np

from .errors import (
    FormatError as FormatError,
    IntegrityError as IntegrityError,
    InvalidInputError as InvalidInputError,
    IoError as IoError,
    LimitError as LimitError,
    NotFoundError as NotFoundError,
    SafetensorError as SafetensorError,
    TesseraError as TesseraError,
    TesseraFileNotFoundError as TesseraFileNotFoundError,
    TesseraIsADirectoryError as TesseraIsADirectoryError,
    TesseraPermissionError as TesseraPermissionError,
    ConversionWarning as ConversionWarning,
    UnknownFormatError as UnknownFormatError,
    UnsupportedError as UnsupportedError,
    UnsupportedVersionError as UnsupportedVersionError,
)
from .tensor import Tensor as Tensor

__version__: str
_Path = Union[str, PathLike[str]]
_Framework = Literal["np", "numpy", "pt", "torch", "pytorch"]
_Dequantize = Literal["f32", "f16", "bf16"]

def formats() -> List[Dict[str, Any]]: ...
def public_key(secret: bytes) -> bytes: ...
def id(
    path: _Path,
    *,
    metadata: bool = False,
    pages: Union[None, int, str] = None,
    output: Optional[_Path] = None,
    **kwargs: Any,
) -> Dict[str, Any]: ...
def sign(
    path: _Path,
    secret_key: Union[bytes, _Path],
    output: Optional[_Path] = None,
    *,
    metadata: bool = False,
    embed: bool = False,
    **kwargs: Any,
) -> str: ...
def verify_signature(
    path: _Path,
    signature: Union[str, bytes, _Path],
    public_key: Union[bytes, _Path],
    *,
    tensors: Optional[Sequence[str]] = None,
    **kwargs: Any,
) -> VerifyReport: ...
def diff(
    a: Union[_Path, File],
    b: Union[_Path, File],
    *,
    atol: float = 0.0,
    rtol: float = 0.0,
    **kwargs: Any,
) -> Dict[str, Any]: ...

@dataclass(frozen=True)
class Check:
    subject: str
    layer: str
    status: str
    detail: Optional[str] = ...

@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    checks: List[Check] = ...
    warnings: List[str] = ...
    @property
    def failures(self) -> List[Check]: ...
    def __bool__(self) -> bool: ...
    def raise_for_failure(self) -> None: ...

@dataclass(frozen=True)
class SaveReport:
    notes: List[str]
    extra_files: List[str]

class File(Mapping[str, Any]):
    @property
    def format(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def path(self) -> Optional[str]: ...
    @property
    def metadata(self) -> Dict[str, Any]: ...
    @property
    def chunks(self) -> List[Dict[str, Any]]: ...
    @property
    def warnings(self) -> List[str]: ...
    @property
    def positional_reads(self) -> bool: ...
    def chunk(self, name: str) -> bytes: ...
    def verify(
        self,
        *,
        hmac_key: Union[bytes, str, None] = None,
        public_key: Union[bytes, _Path, None] = None,
        control_only: bool = False,
        tensors: Optional[Sequence[str]] = None,
    ) -> VerifyReport: ...
    def convert(self, path: _Path, format: Optional[str] = None, **options: Any) -> SaveReport: ...
    def identity(self, *, metadata: bool = False) -> Dict[str, Any]: ...
    def sign(self, secret_key: Union[bytes, _Path], *, metadata: bool = False) -> str: ...
    def verify_signature(
        self,
        signature: Union[str, bytes, _Path],
        public_key: Union[bytes, _Path],
        *,
        tensors: Optional[Sequence[str]] = None,
    ) -> VerifyReport: ...
    def tensor_info(self, name: str) -> Dict[str, Any]: ...
    def tensor_infos(self) -> List[Dict[str, Any]]: ...
    def get_tensor(
        self,
        name: str,
        *,
        framework: Optional[_Framework] = None,
        densify: bool = False,
        copy: bool = False,
        dequantize: Optional[_Dequantize] = None,
    ) -> Any: ...
    def get_tensors(
        self,
        names: Optional[Sequence[str]] = None,
        *,
        framework: Optional[_Framework] = None,
        densify: bool = False,
        copy: bool = False,
        dequantize: Optional[_Dequantize] = None,
    ) -> Dict[str, Any]: ...
    def __getitem__(self, name: str) -> Any: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...
    def __contains__(self, name: object) -> bool: ...
    def keys(self) -> List[str]: ...  # type: ignore[override]
    def close(self) -> None: ...
    def __enter__(self) -> File: ...
    def __exit__(self, *exc: Any) -> None: ...

class TensorSlice:
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> str: ...
    def get_shape(self) -> List[int]: ...
    def __len__(self) -> int: ...
    def __getitem__(self, index: Any) -> Any: ...

def load_slices(
    path_or_url: Union[_Path, File],
    plan: Mapping[str, Any],
    *,
    pages: Optional[_Path] = None,
    framework: _Framework = "np",
    threads: Optional[int] = None,
    **read_options: Any,
) -> Dict[str, Any]: ...

def open(
    path: _Path,
    framework: _Framework = "np",
    *,
    device: Any = "cpu",
    mmap: bool = True,
    salvage: bool = False,
    verify: bool = True,
    dequantize: Optional[_Dequantize] = None,
    hmac_key: Optional[bytes] = None,
    age_identities: Optional[Sequence[str]] = None,
    age_passphrase: Optional[str] = None,
    signature: Optional[Union[str, bytes, _Path]] = None,
    public_key: Optional[Union[bytes, _Path]] = None,
    shard: bool = False,
    token: Union[str, bool, None] = None,
    cache: bool = True,
) -> File: ...
def convert(
    src: _Path, dst: _Path, format: Optional[str] = None, *, verify: bool = True, **options: Any
) -> SaveReport: ...
def load(data: Union[bytes, bytearray, memoryview], framework: _Framework = "np", **kwargs: Any) -> File: ...
@overload
def save(
    tensors: Mapping[str, Any],
    path: _Path,
    format: Optional[str] = None,
    metadata: Optional[Mapping[str, Any]] = None,
    *,
    max_shard_size: Union[int, str, None] = None,
    shards: Optional[int] = None,
    **options: Any,
) -> SaveReport: ...
@overload
def save(
    tensors: Mapping[str, Any],
    path: None = None,
    format: Optional[str] = None,
    metadata: Optional[Mapping[str, Any]] = None,
    **options: Any,
) -> bytes: ...

class _Slice:
    def get_shape(self) -> List[int]: ...
    def get_dtype(self) -> str: ...
    def __len__(self) -> int: ...
    def __getitem__(self, index: Any) -> Any: ...

class safe_open:
    def __init__(
        self,
        filename: _Path,
        framework: _Framework,
        device: Any = "cpu",
        *,
        copy: bool = True,
        verify: bool = True,
        dequantize: Optional[_Dequantize] = None,
        backend: Optional[str] = None,
        shard: bool = False,
        token: Union[str, bool, None] = None,
        cache: bool = True,
    ) -> None: ...
    def keys(self) -> List[str]: ...
    def offset_keys(self) -> List[str]: ...
    def metadata(self) -> Optional[Dict[str, str]]: ...
    def get_tensor(self, name: str) -> Any: ...
    def get_tensors(self) -> Dict[str, Any]: ...
    def get_slice(self, name: str) -> _Slice: ...
    def __enter__(self) -> safe_open: ...
    def __exit__(self, *exc: Any) -> None: ...

class _safe_open_handle(safe_open):
    def __init__(
        self,
        f: Any,
        framework: _Framework,
        device: Any = "cpu",
        *,
        copy: bool = True,
        verify: Optional[bool] = None,
        backend: Optional[str] = None,
    ) -> None: ...

class TensorSpec:
    def __init__(
        self,
        *,
        dtype: str,
        shape: Sequence[int],
        data_ptr: Optional[int] = None,
        data_len: Optional[int] = None,
        data: Any = None,
    ) -> None: ...
    @property
    def dtype(self) -> str: ...
    @property
    def shape(self) -> List[int]: ...
    @property
    def data_ptr(self) -> int: ...
    @property
    def data_len(self) -> int: ...

def serialize(tensor_dict: Mapping[str, Union[TensorSpec, Dict[str, Any]]], metadata: Optional[Dict[str, str]] = None) -> bytes: ...
def serialize_file(
    tensor_dict: Mapping[str, Union[TensorSpec, Dict[str, Any]]], filename: _Path, metadata: Optional[Dict[str, str]] = None
) -> None: ...
def deserialize(data: Union[bytes, bytearray, memoryview]) -> List[tuple[str, Dict[str, Any]]]: ...
