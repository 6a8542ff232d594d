"""CooHostTensor: a sparse host tensor in coordinate format (``coo.*``, docs/conformance.md).

Holds the dense shape, an ``i64`` indices array of shape ``[nnz, rank]`` and a values array of
shape ``[nnz]``.  Prints as ``CooHostTensor dtype = i32, shape = [3, 2], indices = [...],
values = [...]`` followed by a newline (TFRT's printer ends with one).

:func:`dense_to_coo` reproduces TFRT's quirky index computation: the index row of flat position
``i`` is built as ``for r in 0..R-1: idx[R-1-r] = i % dims[r]; i //= dims[r]`` (so for shape
``[3, 2]`` the rows are (0,0),(0,1),(0,2),(1,0),(1,1),(1,2)); :func:`coo_to_dense` scatters
values at the row-major offsets of their indices.  Both are vectorised.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pytfrt.tensor.dense_host_tensor import DenseHostTensor
from pytfrt.tensor.dtype import DType
from pytfrt.tensor.printing import format_coo
from pytfrt.tensor.shape import ShapeError, TensorMetadata, TensorShape, format_dims


class CooHostTensor:
    """Sparse tensor: dense shape + ``indices`` (i64 ``[nnz, rank]``) + ``values`` (``[nnz]``)."""

    __slots__ = ("dtype", "dims", "indices", "values")

    def __init__(
        self, dtype: DType, dims: Sequence[int], indices: np.ndarray, values: np.ndarray
    ) -> None:
        self.dtype = dtype
        self.dims = tuple(int(d) for d in dims)
        self.indices = indices
        self.values = values

    @property
    def shape(self) -> TensorShape:
        """The dense shape."""
        return TensorShape._trusted(self.dims)

    @property
    def metadata(self) -> TensorMetadata:
        """dtype and dense shape."""
        return TensorMetadata(self.dtype, self.shape)

    @property
    def nnz(self) -> int:
        """Number of stored values."""
        return int(self.values.shape[0])

    def approx_equal(self, other: CooHostTensor) -> bool:
        """Same metadata, equal indices and approximately equal values (TFRT's ``==``)."""
        if self.dtype is not other.dtype or self.dims != other.dims:
            return False
        if self.indices.shape != other.indices.shape or self.values.shape != other.values.shape:
            return False
        if not np.array_equal(self.indices, other.indices):
            return False
        if self.dtype.kind in ("float", "complex"):
            return bool(np.allclose(self.values, other.values, rtol=1e-6, atol=1e-6))
        return bool(np.array_equal(self.values, other.values))

    def __str__(self) -> str:
        return format_coo(self.dtype, self.dims, self.indices, self.values)

    def __repr__(self) -> str:
        return f"CooHostTensor({self.dtype.name}, {format_dims(self.dims)}, nnz={self.nnz})"


def dense_to_coo(t: DenseHostTensor) -> CooHostTensor:
    """The non-zero elements of ``t`` with TFRT's (quirky) index rows; see the module doc."""
    dims = t.array.shape
    rank = len(dims)
    flat = t.array.reshape(-1)
    positions = np.flatnonzero(flat)
    values = flat[positions].copy()
    indices = np.zeros((positions.shape[0], rank), np.int64)
    rest = positions.astype(np.int64)
    for r in range(rank):
        indices[:, rank - 1 - r] = rest % dims[r] if dims[r] else 0
        if dims[r]:
            rest = rest // dims[r]
    return CooHostTensor(t.dtype, dims, indices, values)


def coo_to_dense(s: CooHostTensor, out: DenseHostTensor) -> DenseHostTensor:
    """Zero ``out`` (of ``s``'s shape) and scatter ``s``'s values at their row-major offsets.

    Raises:
        ShapeError: if ``out`` has the wrong shape or an index row lies outside the shape.
    """
    if tuple(out.array.shape) != s.dims:
        raise ShapeError(
            f"COO tensor shape {format_dims(s.dims)} does not match the output shape "
            f"{format_dims(out.array.shape)}"
        )
    flat = out.array.reshape(-1)
    flat[...] = 0
    if s.nnz == 0:
        return out
    strides = np.ones(len(s.dims), np.int64)
    for k in range(len(s.dims) - 2, -1, -1):
        strides[k] = strides[k + 1] * s.dims[k + 1]
    offsets = s.indices @ strides if s.dims else np.zeros(s.nnz, np.int64)
    if offsets.min() < 0 or offsets.max() >= flat.shape[0]:
        raise ShapeError(f"COO index out of range for shape {format_dims(s.dims)}")
    flat[offsets] = s.values
    return out
