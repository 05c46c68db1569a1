from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

class Tensor:
    name: str
    dtype: str
    shape: Tuple[int, ...]
    layout: str
    parts: Dict[str, np.ndarray]
    attrs: Dict[str, Any]
    def __init__(
        self,
        dtype: str,
        shape: Sequence[int],
        layout: str,
        parts: Dict[str, np.ndarray],
        name: str = "",
        attrs: Optional[Dict[str, Any]] = None,
    ) -> None: ...
    def to_scipy(self) -> Any: ...
    def to_dense(self) -> np.ndarray: ...
