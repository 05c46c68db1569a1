"""Tensors that are not plain dense arrays: sparse (CSR, COO) and other named-component
layouts (zTensor's ``quantized_4bit``, GGUF's packed blocks, …)."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from ._convert import numpy_dtype

__all__ = ["Tensor"]


class Tensor:
    """A tensor stored in a layout other than dense.

    ``parts`` maps each component's role to a numpy array: for ``sparse_csr``
    ``values`` (of ``dtype``), ``indices`` and ``indptr`` (uint64); for ``sparse_coo``
    ``values`` and ``coords`` (uint64, shape ``(ndim, nnz)``); for other layouts the raw
    bytes of each component (uint8). Pass a ``Tensor`` to :func:`tessera.save` to write
    it back unchanged.
    """

    __slots__ = ("name", "dtype", "shape", "layout", "parts", "attrs")

    def __init__(
        self,
        dtype: str,
        shape: Sequence[int],
        layout: str,
        parts: Dict[str, np.ndarray],
        name: str = "",
        attrs: Optional[Dict[str, Any]] = None,
    ) -> None:
        self.name = name
        self.dtype = dtype
        self.shape: Tuple[int, ...] = tuple(int(d) for d in shape)
        self.layout = layout
        self.parts = dict(parts)
        self.attrs = dict(attrs or {})

    @classmethod
    def _from_raw(cls, info: Dict[str, Any], raw: Dict[str, np.ndarray]) -> "Tensor":
        layout = info["layout"]
        parts: Dict[str, np.ndarray] = {}
        for role, a in raw.items():
            if layout in ("sparse_csr", "sparse_coo") and role == "values":
                parts[role] = a.view(numpy_dtype(info["dtype"]))
            elif layout in ("sparse_csr", "sparse_coo"):
                u = a.view("<u8")
                if role == "coords" and len(info["shape"]) > 0:
                    u = u.reshape(len(info["shape"]), -1)
                parts[role] = u
            else:
                parts[role] = a
        return cls(info["dtype"], info["shape"], layout, parts, info["name"], info.get("attrs"))

    def to_scipy(self):
        """A ``scipy.sparse`` matrix (2-D CSR or COO tensors only)."""
        import scipy.sparse as sp

        if len(self.shape) != 2:
            raise ValueError(f"tensor {self.name!r}: scipy.sparse holds 2-D matrices, not {len(self.shape)}-D")
        if self.layout == "sparse_csr":
            p = self.parts
            return sp.csr_matrix((p["values"], p["indices"].astype(np.int64), p["indptr"].astype(np.int64)), shape=self.shape)
        if self.layout == "sparse_coo":
            c = self.parts["coords"]
            return sp.coo_matrix((self.parts["values"], (c[0].astype(np.int64), c[1].astype(np.int64))), shape=self.shape)
        raise ValueError(f"tensor {self.name!r} is {self.layout}, not sparse")

    def to_dense(self) -> np.ndarray:
        """The dense array (sparse layouts only)."""
        out = np.zeros(self.shape, dtype=numpy_dtype(self.dtype))
        if self.layout == "sparse_coo":
            out[tuple(self.parts["coords"].astype(np.intp))] = self.parts["values"]
            return out
        if self.layout == "sparse_csr" and len(self.shape) == 2:
            indptr = self.parts["indptr"].astype(np.intp)
            rows = np.repeat(np.arange(self.shape[0], dtype=np.intp), np.diff(indptr))
            out[rows, self.parts["indices"].astype(np.intp)] = self.parts["values"]
            return out
        raise ValueError(f"tensor {self.name!r} is {self.layout}; only sparse tensors densify")

    def __repr__(self) -> str:
        roles = ", ".join(f"{r}[{a.size}]" for r, a in self.parts.items())
        return f"<tessera.Tensor {self.name!r} {self.layout} {self.dtype}{list(self.shape)}: {roles}>"
