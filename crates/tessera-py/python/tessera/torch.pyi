from os import PathLike
from typing import Any, Dict, Optional, Union

def save(
    tensors: Dict[str, Any],
    metadata: Optional[Dict[str, str]] = None,
    *,
    format: str = "safetensors",
    **options: Any,
) -> bytes: ...
def save_file(
    tensors: Dict[str, Any],
    filename: Union[str, PathLike[str]],
    metadata: Optional[Dict[str, str]] = None,
    *,
    format: Optional[str] = None,
    durable: bool = ...,
    **options: Any,
) -> None: ...
def load(
    data: bytes, device: Any = "cpu", *, verify: bool = True, dequantize: Optional[str] = None
) -> Dict[str, Any]: ...
def load_file(
    filename: Union[str, PathLike[str]],
    device: Any = "cpu",
    *,
    verify: bool = True,
    dequantize: Optional[str] = None,
) -> Dict[str, Any]: ...
