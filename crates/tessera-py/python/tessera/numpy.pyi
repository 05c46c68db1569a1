from os import PathLike
from typing import Any, Dict, Optional, Union

import numpy as np

def save(
    tensor_dict: Dict[str, np.ndarray],
    metadata: Optional[Dict[str, str]] = None,
    *,
    format: str = "safetensors",
    **options: Any,
) -> bytes: ...
def save_file(
    tensor_dict: Dict[str, np.ndarray],
    filename: Union[str, PathLike[str]],
    metadata: Optional[Dict[str, str]] = None,
    *,
    format: Optional[str] = None,
    durable: bool = ...,
    **options: Any,
) -> None: ...
def load(
    data: bytes, *, copy: bool = True, verify: bool = True, dequantize: Optional[str] = None
) -> Dict[str, np.ndarray]: ...
def load_file(
    filename: Union[str, PathLike[str]],
    *,
    copy: bool = True,
    verify: bool = True,
    dequantize: Optional[str] = None,
    progress: Any = False,
    shard: bool = False,
    token: Union[str, bool, None] = None,
    cache: bool = True,
) -> Dict[str, np.ndarray]: ...
