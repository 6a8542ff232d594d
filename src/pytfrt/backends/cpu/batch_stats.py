"""Batch-statistics kernels of a training step: ``tg.moments``, ``tg.sum_and_dot``,
``tg.relu_grad_sums`` and ``tg.relu_grad_sums2``.

A batch-norm layer in training computes per-channel statistics over every other axis, forward
and backward.  TensorFlow's graph of it (Keras' ``BatchNormalization`` through
``tf.nn.moments``, and the ops its gradient adds) reads each activation-sized tensor several
times: ``reduce_mean(x)``, a materialised ``squared_difference(x, mean)`` and its
``reduce_mean`` forward; ``reduce_sum(dy)`` and a materialised ``mul(x, dy)`` with its
``reduce_sum`` backward.  ``-tg-fuse-batch-stats`` (:mod:`pytfrt.compiler.passes.batch_stats`)
replaces each group with one op whose kernel here makes a single pass:

* ``moments(x) {axes, keepdims}`` -> ``(mean, variance)``: the mean and the (biased)
  variance over ``axes``, from float64 sums of ``x - shift`` and its square (``shift`` = the
  first row: no cancellation for float32 data).
* ``sum_and_dot(a, b) {axes, keepdims}`` -> ``(sum(a), sum(a * b))`` over ``axes``, float64
  accumulators; ``relu_grad_sums(dy, y, b[, dy2])`` -> ``(g, sum(g), sum(g * b))`` with
  ``g = relu_grad(dy [+ dy2], y)`` written in the same pass (the ReLU before a batch norm;
  ``dy2``: a residual block's second branch gradient, added in that pass).  A ``b``
  that is a per-channel vector (it broadcasts over the reduced axes only: TF's gradient of a
  product with a per-channel factor) is not read per element: ``sum(a * b) = sum(a) * b``,
  from the same float64 sums (10x faster than NumPy's broadcasting product on a ResNet-50
  activation).  ``relu_grad_sums2(dy, y, b, b2[, dy2])`` adds ``sum(g * b2)`` to the same
  pass (two batch norms reading one gradient: a residual stage's projection shortcut).

The fast path is a reduction over the leading axes ``0..k-1`` of C-contiguous float32/float64
operands of one shape (an NHWC tensor's ``N, H, W``): the rows are split into shards run on the
CPU kernels' helper threads (:func:`pytfrt.backends.cpu._parallel.parallel_for`), each shard
summing into float64 arrays of its own and adding them to its own result row at its end, the
rows added last.  (Shards that accumulated into their result rows directly wrote cache lines
their neighbours wrote too: on a 32x32x32x16 activation two threads took 3x one thread's time;
now 0.7x.)  Other axes, layouts or shapes (operands
that broadcast) take NumPy with the same results' meaning.  Results have the operand's dtype.

Thread-safety: pure functions.  Errors: :class:`pytfrt.backends.cpu.ops.OpError` for non-float
operands or axes out of range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pytfrt.backends.cpu._jit import numba
from pytfrt.backends.cpu._parallel import chunks, parallel_for
from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError

GRAPH_OPS = OpTable()

_SHARD_ELEMENTS = 1 << 15
"""Elements from which a shard of rows is worth a helper thread."""


@numba.njit(nogil=True, cache=True)
def _flush(a1, a2, s1, s2):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``s1 += a1``, ``s2 += a2``: a shard's sums, kept in its own arrays while it runs (the
    shards' result rows share cache lines: accumulating in them directly made two threads
    slower than one)."""
    for c in range(a1.shape[0]):
        s1[c] += a1[c]
        s2[c] += a2[c]


@numba.njit(nogil=True, cache=True, fastmath=True)
def _moment_rows(x, shift, r0, r1, s1, s2):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``s1[c] += sum(x[r, c] - shift[c])``, ``s2[c] += sum((x[r, c] - shift[c]) ** 2)`` over
    rows ``r0 <= r < r1`` (float64)."""
    k = x.shape[1]
    a1 = np.zeros(k)
    a2 = np.zeros(k)
    for r in range(r0, r1):
        for c in range(k):
            d = np.float64(x[r, c]) - shift[c]
            a1[c] += d
            a2[c] += d * d
    _flush(a1, a2, s1, s2)


@numba.njit(nogil=True, cache=True, fastmath=True)
def _dot_rows(a, b, r0, r1, s1, s2):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``s1[c] += sum(a[r, c])``, ``s2[c] += sum(a[r, c] * b[r, c])`` over rows ``r0..r1``."""
    k = a.shape[1]
    a1 = np.zeros(k)
    a2 = np.zeros(k)
    for r in range(r0, r1):
        for c in range(k):
            v = np.float64(a[r, c])
            a1[c] += v
            a2[c] += v * np.float64(b[r, c])
    _flush(a1, a2, s1, s2)


@numba.njit(nogil=True, cache=True, fastmath=True)
def _sum_rows(a, r0, r1, s1, s2):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``s1[c] += sum(a[r, c])`` over rows ``r0..r1`` (``s2`` unused: the shape of
    :func:`_sharded`'s kernels)."""
    k = a.shape[1]
    a1 = np.zeros(k)
    for r in range(r0, r1):
        for c in range(k):
            a1[c] += np.float64(a[r, c])
    for c in range(k):
        s1[c] += a1[c]


@numba.njit(nogil=True, cache=True, fastmath=True)
def _relu_rows(dy, y, g, r0, r1, s1, s2):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``g = dy if y > 0 else 0`` and ``s1[c] += sum(g[r, c])`` over rows ``r0..r1``."""
    k = dy.shape[1]
    a1 = np.zeros(k)
    for r in range(r0, r1):
        for c in range(k):
            g[r, c] = dy[r, c] if y[r, c] > 0 else 0.0
        for c in range(k):
            a1[c] += np.float64(g[r, c])
    for c in range(k):
        s1[c] += a1[c]


@numba.njit(nogil=True, cache=True, fastmath=True)
def _relu_dot_rows(dy, y, b, g, r0, r1, s1, s2):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``g = dy if y > 0 else 0`` over rows ``r0..r1``, and :func:`_dot_rows`' sums of ``g``
    (two inner loops per row: a select beside the sums keeps LLVM from vectorising, 7x).
    ``dy`` has ``y``'s rows, or one row per ``P`` rows of ``y`` (``dy`` ``(N, K)``, ``y``
    ``(N * P, K)``: the gradient of a global average pool, never broadcast)."""
    k = dy.shape[1]
    per = y.shape[0] // dy.shape[0]
    a1 = np.zeros(k)
    a2 = np.zeros(k)
    for r in range(r0, r1):
        d = r // per
        for c in range(k):
            g[r, c] = dy[d, c] if y[r, c] > 0 else 0.0
        for c in range(k):
            v = np.float64(g[r, c])
            a1[c] += v
            a2[c] += v * np.float64(b[r, c])
    _flush(a1, a2, s1, s2)


@numba.njit(nogil=True, cache=True, fastmath=True)
def _relu2_rows(dy, dy2, y, g, r0, r1, s1, s2):  # type: ignore[no-untyped-def]  # pragma: no cover
    """:func:`_relu_rows` of the gradient ``dy + dy2`` (two branches' gradients: a residual
    block's input), the sum never materialised."""
    k = dy.shape[1]
    a1 = np.zeros(k)
    for r in range(r0, r1):
        for c in range(k):
            g[r, c] = dy[r, c] + dy2[r, c] if y[r, c] > 0 else 0.0
        for c in range(k):
            a1[c] += np.float64(g[r, c])
    for c in range(k):
        s1[c] += a1[c]


@numba.njit(nogil=True, cache=True, fastmath=True)
def _relu2_dot_rows(dy, dy2, y, b, g, r0, r1, s1, s2):  # type: ignore[no-untyped-def]  # pragma: no cover
    """:func:`_relu_dot_rows` of the gradient ``dy + dy2`` (same shapes, no broadcast)."""
    k = dy.shape[1]
    a1 = np.zeros(k)
    a2 = np.zeros(k)
    for r in range(r0, r1):
        for c in range(k):
            g[r, c] = dy[r, c] + dy2[r, c] if y[r, c] > 0 else 0.0
        for c in range(k):
            v = np.float64(g[r, c])
            a1[c] += v
            a2[c] += v * np.float64(b[r, c])
    _flush(a1, a2, s1, s2)


@numba.njit(nogil=True, cache=True, fastmath=True)
def _relu_dots_rows(dy, dy2, two, y, b, b2, g, r0, r1, s1, s2, s3):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``g = relu_grad(dy [+ dy2 if two], y)`` over rows ``r0..r1`` and three sums of it:
    ``s1 += sum(g)``, ``s2 += sum(g * b)``, ``s3 += sum(g * b2)`` (two batch norms reading one
    gradient: a residual stage's main branch and its projection shortcut)."""
    k = dy.shape[1]
    a1 = np.zeros(k)
    a2 = np.zeros(k)
    a3 = np.zeros(k)
    for r in range(r0, r1):
        if two:
            for c in range(k):
                g[r, c] = dy[r, c] + dy2[r, c] if y[r, c] > 0 else 0.0
        else:
            for c in range(k):
                g[r, c] = dy[r, c] if y[r, c] > 0 else 0.0
        for c in range(k):
            v = np.float64(g[r, c])
            a1[c] += v
            a2[c] += v * np.float64(b[r, c])
            a3[c] += v * np.float64(b2[r, c])
    _flush(a1, a2, s1, s2)
    for c in range(k):
        s3[c] += a3[c]


def _per_item(dy_shape: tuple[int, ...], shape: tuple[int, ...], k: int) -> bool:
    """Whether ``dy_shape`` is ``shape`` with axes ``1..k-1`` of size 1 (one row per batch item
    broadcast over the reduced axes after the batch axis)."""
    return (len(dy_shape) == len(shape) and k >= 2 and dy_shape[0] == shape[0]
            and all(d == 1 for d in dy_shape[1:k]) and dy_shape[k:] == shape[k:])


def _relu_sum2(dy: np.ndarray, dy2: np.ndarray, y: np.ndarray, b: np.ndarray,
               ax: tuple[int, ...], keepdims: bool
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`relu_grad_sums` of ``dy + dy2`` by the sharded row kernels, or ``None`` when the
    operands are not C-contiguous rows of one shape (then the caller adds them first)."""
    view = _rows(y, ax)
    if view is None or not (dy.flags.c_contiguous and dy2.flags.c_contiguous):
        return None
    g = np.empty_like(dy)
    shape = _shape_of_result(y, ax, keepdims)
    flat = [v.reshape(view) for v in (dy, dy2, y)]
    row = None if b.shape == y.shape else _row_of(b, y.shape, len(ax))
    if row is not None:  # a per-channel b: sum(g * b) = sum(g) * b
        s1, _ = _sharded(_relu2_rows, *view, *flat, g.reshape(view))
        return (g, s1.astype(y.dtype).reshape(shape), (s1 * row).astype(y.dtype).reshape(shape))
    if b.shape != y.shape or not b.flags.c_contiguous:
        return None
    s1, s2 = _sharded(_relu2_dot_rows, *view, *flat, b.reshape(view), g.reshape(view))
    return g, s1.astype(y.dtype).reshape(shape), s2.astype(y.dtype).reshape(shape)


def _norm_axes(op: str, ndim: int, axes: Sequence[int]) -> tuple[int, ...]:
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise OpError(f"{op}: axis {a} out of range for rank {ndim}")
        out.append(a % ndim)
    return tuple(sorted(set(out))) if out else tuple(range(ndim))


def _float(op: str, *xs: np.ndarray) -> None:
    for x in xs:
        if x.dtype not in (np.float32, np.float64):
            raise OpError(f"{op}: operands must be float32 or float64, got {x.dtype}")
    if any(x.dtype != xs[0].dtype for x in xs):
        raise OpError(f"{op}: operands must share one dtype, got "
                      f"{', '.join(str(x.dtype) for x in xs)}")


def _rows(x: np.ndarray, axes: tuple[int, ...]) -> tuple[int, int] | None:
    """``(rows, width)`` of the 2-D view of ``x`` whose rows the leading ``axes`` index, or
    ``None`` if ``axes`` are not ``0..k-1`` (``k < ndim``) or ``x`` is not C-contiguous."""
    k = len(axes)
    if axes != tuple(range(k)) or k >= x.ndim or not x.flags.c_contiguous or x.size == 0:
        return None
    width = math.prod(x.shape[k:])
    return x.size // width, width


def _row_of(b: np.ndarray, shape: tuple[int, ...], k: int) -> np.ndarray | None:
    """``b`` as one float64 row of ``shape[k:]`` if it broadcasts over the leading ``k`` axes
    only (its shape, padded with leading 1s, is ``(1,) * k + shape[k:]``): then
    ``sum(a * b)`` over those axes is ``sum(a) * b`` (a per-channel ``b``: TF's gradient of a
    product with a per-channel vector).  ``None`` for any other ``b``."""
    if b.ndim > len(shape):
        return None
    dims = (1,) * (len(shape) - b.ndim) + tuple(b.shape)
    if any(d != 1 for d in dims[:k]) or dims[k:] != tuple(shape[k:]):
        return None
    return b.reshape(-1).astype(np.float64)


def _shape_of_result(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def _sharded(kernel: object, rows: int, width: int, *args: object, sums: int = 2
             ) -> tuple[np.ndarray, ...]:
    """Run ``kernel(*args, r0, r1, s1, ..., s<sums>)`` over row shards; the summed
    ``(s1, ..., s<sums>)``."""
    parts = chunks(rows, max(1, _SHARD_ELEMENTS // max(width, 1)))
    acc = [np.zeros((len(parts), width)) for _ in range(sums)]

    def run(i: int) -> None:
        r0, r1 = parts[i]
        kernel(*args, r0, r1, *(a[i] for a in acc))  # type: ignore[operator]

    parallel_for(run, len(parts))
    return tuple(a.sum(axis=0) for a in acc)


def channel_sums(x: np.ndarray) -> np.ndarray | None:
    """The float64 sums of a C-contiguous float32/float64 ``x`` over every axis but the last
    (an NHWC gradient's per-channel sums: ``bias_add_grad``), by the sharded row sum on the
    helper threads; ``None`` for other operands (the caller then sums otherwise)."""
    if x.dtype not in (np.float32, np.float64) or x.ndim < 2:
        return None
    view = _rows(x, tuple(range(x.ndim - 1)))
    if view is None:
        return None
    s1, _ = _sharded(_sum_rows, *view, x.reshape(view))
    return s1


@GRAPH_OPS.op("moments")
def moments(x: np.ndarray, *, axes: Sequence[int], keepdims: bool = True
            ) -> tuple[np.ndarray, np.ndarray]:
    """``(mean(x, axes), mean((x - mean) ** 2, axes))``, as ``tf.nn.moments`` (see the module
    docstring).

    Raises:
        OpError: a non-float operand or an axis out of range.
    """
    op = "moments"
    _float(op, x)
    ax = _norm_axes(op, x.ndim, axes)
    shape = _shape_of_result(x, ax, keepdims)
    view = _rows(x, ax)
    if view is None:
        xd = x.astype(np.float64)
        mean = xd.mean(axis=ax, keepdims=True)
        var = np.square(xd - mean).mean(axis=ax, keepdims=True)
        return mean.astype(x.dtype).reshape(shape), var.astype(x.dtype).reshape(shape)
    rows, width = view
    x2 = x.reshape(rows, width)
    shift = x2[0].astype(np.float64)
    s1, s2 = _sharded(_moment_rows, rows, width, x2, shift)
    d = s1 / rows
    mean = shift + d
    var = np.maximum(s2 / rows - d * d, 0.0)
    return mean.astype(x.dtype).reshape(shape), var.astype(x.dtype).reshape(shape)


@GRAPH_OPS.op("sum_and_dot")
def sum_and_dot(a: np.ndarray, b: np.ndarray, *, axes: Sequence[int], keepdims: bool = True
                ) -> tuple[np.ndarray, np.ndarray]:
    """``(sum(a, axes), sum(a * b, axes))`` (``a * b`` broadcast as NumPy does; see the module
    docstring).

    Raises:
        OpError: non-float or mixed-dtype operands, an axis out of range, or operands that do
            not broadcast to ``a``'s shape.
    """
    op = "sum_and_dot"
    _float(op, a, b)
    ax = _norm_axes(op, a.ndim, axes)
    shape = _shape_of_result(a, ax, keepdims)
    view = _rows(a, ax)
    row = None if view is None or b.shape == a.shape else _row_of(b, a.shape, len(ax))
    if view is not None and row is not None:  # a per-channel b: sum(a * b) = sum(a) * b
        s1, _ = _sharded(_sum_rows, *view, a.reshape(view))
        return s1.astype(a.dtype).reshape(shape), (s1 * row).astype(a.dtype).reshape(shape)
    if b.shape != a.shape or not b.flags.c_contiguous:
        view = None
    if view is None:
        try:
            prod = np.multiply(a, b, dtype=np.float64)
        except ValueError as e:
            raise OpError(f"{op}: operands do not broadcast: {list(a.shape)} vs "
                          f"{list(b.shape)}") from e
        if prod.shape != a.shape:
            raise OpError(f"{op}: b must broadcast to a's shape {list(a.shape)}, got "
                          f"{list(b.shape)}")
        s1 = a.astype(np.float64).sum(axis=ax, keepdims=True)
        s2 = prod.sum(axis=ax, keepdims=True)
        return s1.astype(a.dtype).reshape(shape), s2.astype(a.dtype).reshape(shape)
    rows, width = view
    s1, s2 = _sharded(_dot_rows, rows, width, a.reshape(rows, width), b.reshape(rows, width))
    return s1.astype(a.dtype).reshape(shape), s2.astype(a.dtype).reshape(shape)


@GRAPH_OPS.op("relu_grad_sums")
def relu_grad_sums(dy: np.ndarray, y: np.ndarray, b: np.ndarray, dy2: np.ndarray | None = None,
                   *, axes: Sequence[int], keepdims: bool = True
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``g = relu_grad(dy, y)`` and :func:`sum_and_dot` ``(g, b)``: ``(g, sum(g), sum(g * b))``
    in one pass (a batch norm's gradient statistics behind a ReLU).  ``dy`` has ``y``'s shape
    or broadcasts to it (same rank); one row per batch item with the sums over axes
    ``0..k-1`` (``dy`` of shape ``(N, 1, ..., 1, *y.shape[k:])``: a global average pool's
    gradient, which TF's graph broadcasts with a ``BroadcastTo``) is read per row, never
    broadcast.  With ``dy2`` the gradient is ``dy + dy2`` (a residual block's input gets its
    two branches' gradients), added in the same pass when both have ``y``'s shape (else
    added first, broadcasting as ``add`` does).

    Raises:
        OpError: ``dy`` (or ``dy + dy2``) that does not broadcast to ``y``'s shape, or what
            :func:`sum_and_dot` raises.
    """
    op = "relu_grad_sums"
    _float(op, dy, y, b)
    ax = _norm_axes(op, y.ndim, axes)
    if dy2 is not None:
        _float(op, dy, dy2)
        summed = None
        if dy.shape == y.shape and dy2.shape == y.shape:
            summed = _relu_sum2(dy, dy2, y, b, ax, keepdims)
        if summed is not None:
            return summed
        try:
            dy = np.add(dy, dy2)
        except ValueError as e:
            raise OpError(f"{op}: dy and dy2 do not broadcast: {list(dy.shape)} vs "
                          f"{list(dy2.shape)}") from e
    if dy.shape != y.shape:
        try:
            np.broadcast_shapes(dy.shape, y.shape)
        except ValueError:
            ok = False
        else:
            ok = dy.ndim == y.ndim and np.broadcast_shapes(dy.shape, y.shape) == y.shape
        if not ok:
            raise OpError(f"{op}: dy of shape {list(dy.shape)} does not broadcast to y's "
                          f"{list(y.shape)}")
        view = _rows(y, ax) if _per_item(dy.shape, y.shape, len(ax)) else None
        if (view is not None and b.shape == y.shape and b.flags.c_contiguous
                and dy.flags.c_contiguous):
            g = np.empty_like(y)
            s1, s2 = _sharded(_relu_dot_rows, *view, dy.reshape(y.shape[0], -1),
                              y.reshape(view), b.reshape(view), g.reshape(view))
            shape = _shape_of_result(y, ax, keepdims)
            return g, s1.astype(y.dtype).reshape(shape), s2.astype(y.dtype).reshape(shape)
        dy = np.ascontiguousarray(np.broadcast_to(dy, y.shape))
    view = _rows(dy, ax) if y.flags.c_contiguous else None
    row = None if view is None or b.shape == dy.shape else _row_of(b, dy.shape, len(ax))
    if view is not None and row is not None:  # a per-channel b: sum(g * b) = sum(g) * b
        g = np.empty_like(dy)
        s1, _ = _sharded(_relu_rows, *view, dy.reshape(view), y.reshape(view), g.reshape(view))
        shape = _shape_of_result(dy, ax, keepdims)
        return (g, s1.astype(dy.dtype).reshape(shape),
                (s1 * row).astype(dy.dtype).reshape(shape))
    if b.shape != dy.shape or not b.flags.c_contiguous:
        view = None
    if view is None:
        g = np.where(y > 0, dy, np.zeros((), dy.dtype))  # TF's ReluGrad (as grad_ops')
        return (g, *sum_and_dot(g, b, axes=axes, keepdims=keepdims))
    rows, width = view
    g = np.empty_like(dy)
    shape = _shape_of_result(dy, ax, keepdims)
    two = (rows, width)
    s1, s2 = _sharded(_relu_dot_rows, rows, width, dy.reshape(two), y.reshape(two),
                      b.reshape(two), g.reshape(two))
    return g, s1.astype(dy.dtype).reshape(shape), s2.astype(dy.dtype).reshape(shape)


@GRAPH_OPS.op("relu_grad_sums2")
def relu_grad_sums2(dy: np.ndarray, y: np.ndarray, b: np.ndarray, b2: np.ndarray,
                    dy2: np.ndarray | None = None, *, axes: Sequence[int], keepdims: bool = True
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`relu_grad_sums` with a second product's sum: ``(g, sum(g), sum(g * b),
    sum(g * b2))`` for ``g = relu_grad(dy [+ dy2], y)``, in one pass when ``dy``, ``dy2``,
    ``y``, ``b`` and ``b2`` are C-contiguous float arrays of one shape and the sums are over
    the leading axes (a residual stage's first block: the main branch's last batch norm and
    the projection shortcut's batch norm both read the block input's gradient).  Otherwise
    :func:`relu_grad_sums` then :func:`sum_and_dot` of ``g`` and ``b2`` (the same values).

    Raises:
        OpError: what :func:`relu_grad_sums` and :func:`sum_and_dot` raise.
    """
    op = "relu_grad_sums2"
    _float(op, dy, y, b, b2, *(() if dy2 is None else (dy2,)))
    ax = _norm_axes(op, y.ndim, axes)
    view = _rows(y, ax)
    same = [a for a in (dy, b, b2) + (() if dy2 is None else (dy2,))
            if a.shape == y.shape and a.flags.c_contiguous]
    if view is not None and len(same) == (3 if dy2 is None else 4):
        g = np.empty_like(y)
        flat = [a.reshape(view) for a in (dy, y, b, b2, g)]
        second = flat[0] if dy2 is None else dy2.reshape(view)
        s1, s2, s3 = _sharded(_relu_dots_rows, *view, flat[0], second, dy2 is not None,
                              *flat[1:], sums=3)
        shape = _shape_of_result(y, ax, keepdims)
        return (g, s1.astype(y.dtype).reshape(shape), s2.astype(y.dtype).reshape(shape),
                s3.astype(y.dtype).reshape(shape))
    g, s, t = relu_grad_sums(dy, y, b, dy2, axes=axes, keepdims=keepdims)
    return g, s, t, sum_and_dot(g, b2, axes=axes, keepdims=keepdims)[1]
