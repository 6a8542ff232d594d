"""Compute functions of the ONNX-specific catalogue ops (``pytfrt.compiler.ops.onnx_extra``).

Same conventions as :mod:`pytfrt.backends.cpu.array_ops`: operands positional, attributes
keyword-only, new arrays returned, :class:`~pytfrt.backends.cpu.ops.OpError` for bad data
(out-of-range indices).  Pure functions: thread-safe.
"""

from __future__ import annotations

import numpy as np

from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError

GRAPH_OPS = OpTable()
"""Op name -> compute function."""


def _normalise(indices: np.ndarray, dim: int, op: str) -> np.ndarray:
    idx = np.asarray(indices, dtype=np.int64)
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        raise OpError(f"{op}: an index is out of range [-{dim}, {dim})")
    return np.where(idx < 0, idx + dim, idx)


@GRAPH_OPS.op("gather_elements")
def gather_elements(x: np.ndarray, indices: np.ndarray, *, axis: int) -> np.ndarray:
    """``out[i][j][k] = x[i][indices[i][j][k]][k]`` for ``axis = 1`` (ONNX GatherElements)."""
    axis = axis % x.ndim
    idx = _normalise(indices, x.shape[axis], "gather_elements")
    return np.take_along_axis(x, idx, axis=axis)


@GRAPH_OPS.op("scatter_elements")
def scatter_elements(
    data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *, axis: int, reduction: str
) -> np.ndarray:
    """A copy of ``data`` with ``updates`` written (or reduced) along ``axis``."""
    axis = axis % data.ndim
    idx = _normalise(indices, data.shape[axis], "scatter_elements")
    out = data.copy()
    grid: list[np.ndarray] = list(np.indices(idx.shape, sparse=True))
    grid[axis] = idx
    where = tuple(grid)
    if reduction == "none":
        out[where] = updates
    else:
        ufunc = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[reduction]
        ufunc.at(out, where, updates)
    return out


@GRAPH_OPS.op("einsum")
def einsum(*inputs: np.ndarray, equation: str) -> np.ndarray:
    """NumPy ``einsum`` (the BLAS path where it applies)."""
    return np.asarray(np.einsum(equation, *inputs, optimize=len(inputs) > 2))


@GRAPH_OPS.op("trilu")
def trilu(x: np.ndarray, *, upper: bool, k: int) -> np.ndarray:
    """The upper (``triu``) or lower (``tril``) triangle of the last two axes."""
    return np.triu(x, k) if upper else np.tril(x, k)
