"""Compute functions of the graph dialect's run-time slices (catalogue family ``dynamic``).

``dynamic_slice(x, begin, end) {begin_mask, end_mask, shrink_mask, sizes}`` is TF's
``StridedSlice`` with unit strides whose bounds arrive at run time (Keras' ``RandomCrop``
crops at a random offset): per axis ``i`` the start is 0 when bit ``i`` of ``begin_mask`` is
set, else ``begin[i]`` (``+ dim`` when negative), clamped to ``[0, dim]``; the stop likewise
from ``end``/``end_mask`` (``dim`` when masked); a ``shrink_mask`` axis takes the one element
at its start and is dropped.  ``sizes[i] >= 0`` is the size the compiler assumed for axis
``i``: a run-time slice of another size raises :class:`OpError` (never a silently different
shape).  ``dynamic_slice_grad(dy, shape, begin, end)`` is its gradient (TF's
``StridedSliceGrad``): zeros of ``shape`` with ``dy`` at the slice.

Operands positional, attributes keyword-only.  Pure functions: thread-safe.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError

GRAPH_OPS = OpTable()
"""Op name -> compute function."""


def _bounds(op: str, dims: Sequence[int], begin: np.ndarray, end: np.ndarray, begin_mask: int,
            end_mask: int, shrink_mask: int) -> list[slice]:
    """Each axis' ``slice(start, stop)`` by TF's rules (see the module docstring)."""
    b = [int(v) for v in begin.reshape(-1)]
    e = [int(v) for v in end.reshape(-1)]
    if len(b) != len(dims) or len(e) != len(dims):
        raise OpError(f"{op}: begin and end need {len(dims)} entries, got {len(b)} and {len(e)}")
    out: list[slice] = []
    for i, d in enumerate(dims):
        if shrink_mask >> i & 1:
            start = b[i] + d if b[i] < 0 else b[i]
            if not 0 <= start < d:
                raise OpError(f"{op}: index {b[i]} of axis {i} is out of range for size {d}")
            out.append(slice(start, start + 1))
            continue
        start = 0 if begin_mask >> i & 1 else b[i] + d if b[i] < 0 else b[i]
        stop = d if end_mask >> i & 1 else e[i] + d if e[i] < 0 else e[i]
        start = min(max(start, 0), d)
        out.append(slice(start, max(min(max(stop, 0), d), start)))
    return out


@GRAPH_OPS.op("dynamic_slice")
def dynamic_slice(x: np.ndarray, begin: np.ndarray, end: np.ndarray, *, begin_mask: int,
                  end_mask: int, shrink_mask: int, sizes: Sequence[int]) -> np.ndarray:
    """``x`` sliced by run-time bounds (see the module docstring).

    Raises:
        OpError: bounds of the wrong length, a shrunk index out of range, or a slice whose
            size is not the compiled one."""
    spans = _bounds("dynamic_slice", x.shape, begin, end, begin_mask, end_mask, shrink_mask)
    for i, (s, want) in enumerate(zip(spans, sizes, strict=True)):
        if want >= 0 and s.stop - s.start != want:
            raise OpError(f"dynamic_slice: axis {i} slices [{s.start}:{s.stop}] of size "
                          f"{x.shape[i]}, {s.stop - s.start} elements where the compiled "
                          f"program expects {want}")
    y = x[tuple(spans)]
    keep = [i for i in range(x.ndim) if not shrink_mask >> i & 1]
    return np.ascontiguousarray(y.reshape([y.shape[i] for i in keep]))


@GRAPH_OPS.op("dynamic_slice_grad")
def dynamic_slice_grad(dy: np.ndarray, shape: np.ndarray, begin: np.ndarray, end: np.ndarray,
                       *, begin_mask: int, end_mask: int, shrink_mask: int,
                       static_shape: Sequence[int]) -> np.ndarray:
    """Zeros of ``shape`` with ``dy`` at the slice ``dynamic_slice`` took.

    Raises:
        OpError: bounds of the wrong length, or ``dy`` not of the slice's size."""
    dims = [int(d) for d in shape.reshape(-1)]
    spans = _bounds("dynamic_slice_grad", dims, begin, end, begin_mask, end_mask, shrink_mask)
    out = np.zeros(dims, dy.dtype)
    target = [s.stop - s.start for s in spans]
    if dy.size != int(np.prod(target)):
        raise OpError(f"dynamic_slice_grad: dy has shape {list(dy.shape)}, the slice {target}")
    out[tuple(spans)] = dy.reshape(target)
    return out
