from os import PathLike
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Union

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
    backend: Optional[str] = None,
    verify: bool = True,
    dequantize: Optional[str] = None,
    shard: bool = False,
    token: Union[str, bool, None] = None,
    cache: bool = True,
) -> Dict[str, Any]: ...
def save_model(
    model: Any,
    filename: Union[str, PathLike[str]],
    metadata: Optional[Dict[str, str]] = None,
    force_contiguous: bool = True,
) -> None: ...
def load_model(
    model: Any,
    filename: Union[str, PathLike[str]],
    strict: bool = True,
    device: Any = "cpu",
    *,
    backend: Optional[str] = None,
    verify: bool = True,
) -> Tuple[List[str], List[str]]: ...
def load_sharded(
    path_or_url: Union[str, PathLike[str]],
    mesh: Any,
    placements: Any = None,
    *,
    names: Optional[Sequence[str]] = None,
    pages: Any = None,
    as_dtensor: bool = True,
    device: Any = None,
    threads: Optional[int] = None,
    **read_options: Any,
) -> Dict[str, Any]: ...
def storage_ptr(tensor: Any) -> int: ...
def storage_size(tensor: Any) -> int: ...
def _end_ptr(tensor: Any) -> int: ...
def _is_complete(tensor: Any) -> bool: ...
def _find_shared_tensors(state_dict: Dict[str, Any]) -> List[Set[str]]: ...
def _remove_duplicate_names(
    state_dict: Dict[str, Any],
    *,
    preferred_names: Optional[List[str]] = None,
    discard_names: Optional[List[str]] = None,
) -> Dict[str, List[str]]: ...
