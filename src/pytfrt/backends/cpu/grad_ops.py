"""Compute functions of the graph dialect's gradient ops (catalogue family ``grad``).

Operands positional, attributes keyword-only (the runtime table's convention, see
:mod:`pytfrt.backends.cpu.graph_kernels`). Activation, bias, normalisation and cross-entropy
gradients are NumPy here (``relu_grad``/``relu6_grad`` on large arrays one compiled loop);
convolution gradients try oneDNN (:mod:`pytfrt.backends.cpu._dnnl_conv_bwd`), else call
:mod:`pytfrt.backends.cpu.conv`, pooling gradients :mod:`pytfrt.backends.cpu.pooling`.
Results keep the operands' float dtype. Pure functions: thread-safe.
"""

from __future__ import annotations

import importlib
import inspect
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pytfrt.backends.cpu.ops import OpError

GRAPH_OPS: dict[str, Callable[..., Any]] = {}
"""Op name -> compute function."""


def _register(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        GRAPH_OPS[name] = fn
        return fn

    return mark


GRAD_SCALAR: dict[str, str] = {
    "sigmoid_grad": "({1} * ({0} * (1.0 - {0})))",         # (y, dy)
    "tanh_grad": "({1} * (1.0 - {0} * {0}))",                # (y, dy)
    "relu_grad": "({0} if {1} > 0 else 0.0)",               # (dy, x)
    "relu6_grad": "({0} if ({1} > 0 and {1} < 6) else 0.0)",  # (dy, x)
}
"""The gradient ops of two same-shaped operands as scalar formulas over their operands
(``{0}``, ``{1}``), next to their NumPy compute functions below: the whole-region kernels
(:mod:`pytfrt.backends.cpu.small_graph`) and :func:`_flat`'s compiled loop are generated from
them."""


def _same(op: str, a: np.ndarray, b: np.ndarray) -> None:
    if a.shape != b.shape:
        raise OpError(f"{op}: operand shapes differ: {list(a.shape)} vs {list(b.shape)}")


_FLAT_GRAD_MIN = 1 << 14
"""Elements from which the two-operand gradient ops run as a compiled loop (:func:`_flat`)."""
_FLAT_GRADS: dict[str, Callable[..., Any]] = {}
_flat_lock = threading.Lock()


def _flat(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """``op`` (a :data:`GRAD_SCALAR` formula: used for the selects ``relu_grad`` and
    ``relu6_grad``, exact in any precision) over two same-shaped C-contiguous
    float32/float64 arrays of one dtype as one ``nogil`` Numba loop, split into shards on the
    CPU kernels' helper threads: one pass, no temporaries (NumPy's ``where`` over a mask costs
    ~7x the loop).  ``None`` for other operands (the caller runs NumPy)."""
    if (a.size < _FLAT_GRAD_MIN or a.dtype != b.dtype or a.dtype.kind != "f"
            or a.dtype.itemsize < 4 or not (a.flags.c_contiguous and b.flags.c_contiguous)):
        return None
    fn = _FLAT_GRADS.get(op)
    if fn is None:
        import numba

        from pytfrt.support.codegen import exec_generated

        with _flat_lock:
            fn = _FLAT_GRADS.get(op)
            if fn is None:
                formula = GRAD_SCALAR[op].format("a[i]", "b[i]")
                src = (f"def _grad(out, a, b):\n    for i in range(out.shape[0]):\n"
                       f"        out[i] = {formula}\n")
                fn = numba.njit(nogil=True, error_model="numpy")(
                    exec_generated(src, f"grad_ops {op}", {})["_grad"])
                _FLAT_GRADS[op] = fn
    from pytfrt.backends.cpu._parallel import chunks, parallel_for

    out = np.empty_like(a)
    o, fa, fb = out.reshape(-1), a.reshape(-1), b.reshape(-1)
    parts = chunks(o.shape[0], _FLAT_GRAD_MIN)
    parallel_for(lambda i: fn(o[parts[i][0]:parts[i][1]], fa[parts[i][0]:parts[i][1]],
                              fb[parts[i][0]:parts[i][1]]), len(parts))
    return out


@_register("relu_grad")
def relu_grad(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``dy`` where ``x > 0``, else 0 (TF's ``ReluGrad(gradients, features)``)."""
    _same("relu_grad", dy, x)
    out = _flat("relu_grad", dy, x)
    return np.where(x > 0, dy, np.zeros((), dy.dtype)) if out is None else out


@_register("relu6_grad")
def relu6_grad(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``dy`` where ``0 < x < 6``, else 0."""
    _same("relu6_grad", dy, x)
    out = _flat("relu6_grad", dy, x)
    return np.where((x > 0) & (x < 6), dy, np.zeros((), dy.dtype)) if out is None else out


@_register("sigmoid_grad")
def sigmoid_grad(y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """``dy * y * (1 - y)`` for ``y = sigmoid(x)``."""
    _same("sigmoid_grad", y, dy)
    return dy * (y * (1 - y))


@_register("tanh_grad")
def tanh_grad(y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """``dy * (1 - y**2)`` for ``y = tanh(x)``."""
    _same("tanh_grad", y, dy)
    return dy * (1 - y * y)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@_register("gelu_grad")
def gelu_grad(dy: np.ndarray, x: np.ndarray, *, approximate: bool) -> np.ndarray:
    """The derivative of GELU at ``x`` times ``dy`` (erf form, or the tanh approximation)."""
    _same("gelu_grad", dy, x)
    xd = x.astype(np.float64)
    if approximate:
        inner = _SQRT_2_OVER_PI * (xd + 0.044715 * xd**3)
        t = np.tanh(inner)
        d = 0.5 * (1 + t) + 0.5 * xd * (1 - t * t) * _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * xd**2)
    else:
        from pytfrt.backends.cpu.array_ops import GRAPH_OPS as ARRAY_OPS

        cdf = 0.5 * (1 + ARRAY_OPS["erf"](xd / math.sqrt(2.0)))
        pdf = np.exp(-0.5 * xd * xd) / math.sqrt(2 * math.pi)
        d = cdf + xd * pdf
    return (dy * d.astype(dy.dtype)).astype(dy.dtype)


@_register("bias_add_grad")
def bias_add_grad(dy: np.ndarray, *, layout: str) -> np.ndarray:
    """The sum of ``dy`` over every axis but the channel axis (last for NHWC, 1 for NCHW);
    a C-contiguous NHWC float operand is summed in float64 on the helper threads
    (:func:`pytfrt.backends.cpu.batch_stats.channel_sums`)."""
    if dy.ndim < 1 or (layout == "NCHW" and dy.ndim < 2):
        raise OpError(f"bias_add_grad: dy of rank {dy.ndim} has no {layout} channel axis")
    from pytfrt.backends.cpu.array_ops import reduce_sum  # the one reduce_sum
    from pytfrt.backends.cpu.batch_stats import channel_sums

    if layout == "NHWC":  # on the helper threads (float64 sums), else the blocked reduce_sum
        sums = channel_sums(dy)
        if sums is not None:
            return sums.astype(dy.dtype)
    channel = dy.ndim - 1 if layout == "NHWC" else 1
    axes = tuple(a for a in range(dy.ndim) if a != channel)
    if not axes:  # a vector: nothing to sum (reduce_sum reads no axes as all of them)
        return dy.copy()
    return reduce_sum(dy, axes=axes, keepdims=False)  # NHWC: its blocked leading-axes sum




@_register("softmax_grad")
def softmax_grad(y: np.ndarray, dy: np.ndarray, *, axis: int) -> np.ndarray:
    """``(dy - sum(dy * y, axis, keepdims)) * y`` (NumPy broadcasting; float32 along the last
    axis of one shape: one compiled pass per row, ``softmax_rows``)."""
    from pytfrt.backends.cpu.softmax_rows import softmax_grad_last

    if y.ndim and -y.ndim <= axis < y.ndim:
        out = softmax_grad_last(y, dy, axis)
        if out is not None:
            return out
    try:
        prod = np.multiply(dy, y)
        return ((dy - np.sum(prod, axis=axis, keepdims=True)) * y).astype(y.dtype, copy=False)
    except (ValueError, np.exceptions.AxisError) as e:
        raise OpError(f"softmax_grad: {e}") from None

_ATTENTION_SHARD = 1 << 18
"""``Sq * Sk * D`` summed over the heads of one shard of ``attention_grad`` (or
``attention_probs``) on the helper threads (each head costs four, or two, products of that
size).  A Transformer block's train step at sequence 16 (64 heads of ``16 x 16 x 8``) stays
on one thread: split in two, the backward cost 0.33 ms of CPU for 0.21 ms of wall time on a
loaded machine."""


def _attention_operands(op: str, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                        *more: np.ndarray) -> tuple[int, int, int, int, int]:
    """``(B, Sq, H, D, Sk)`` of rank-4 ``q`` ``[B, Sq, H, D]``, ``k``/``v`` ``[B, Sk, H, D]``
    and ``more``, all of one float dtype.

    Raises:
        OpError: other ranks, dtypes or mismatched dimensions.
    """
    arrays = (q, k, v, *more)
    if any(not isinstance(a, np.ndarray) or a.ndim != 4 for a in arrays):
        raise OpError(f"{op}: operands must be rank-4 arrays")
    if len({a.dtype for a in arrays}) != 1 or q.dtype.kind != "f":
        raise OpError(f"{op}: operands must share one float dtype, got "
                      + ", ".join(str(a.dtype) for a in arrays))
    b, sq, h, d = q.shape
    sk = k.shape[1]
    if k.shape != (b, sk, h, d) or v.shape != k.shape:
        raise OpError(f"{op}: expected q [B, Sq, H, D], k, v [B, Sk, H, D]; got q "
                      f"{list(q.shape)}, k {list(k.shape)}, v {list(v.shape)}")
    return b, sq, h, d, sk


def _over_heads(count: int, size: int, run: Callable[[int, int], None]) -> None:
    """``run(lo, hi)`` over the ``count`` heads, in shards of about
    :data:`_ATTENTION_SHARD` / ``size`` heads on the helper threads."""
    from pytfrt.backends.cpu._parallel import chunks, parallel_for

    if count:
        shards = chunks(count, max(1, _ATTENTION_SHARD // max(1, size)))
        parallel_for(lambda i: run(*shards[i]), len(shards))


@_register("attention_probs")
def attention_probs(q: np.ndarray, k: np.ndarray, v: np.ndarray, *,
                    scale: float) -> tuple[np.ndarray, np.ndarray]:
    """``(y, p)``: ``p = softmax(scale * Q K^T)`` per head (``[B, H, Sq, Sk]``) and ``y = p V``
    in ``q``'s layout ``[B, Sq, H, D]`` (``k``, ``v``: ``[B, Sk, H, D]``); the forward of a
    train step's attention, whose backward (``attention_grad``) reads ``p``.  Float32: one
    compiled pass per head (:mod:`pytfrt.backends.cpu._attention_grad`); other float types in
    NumPy.

    Raises:
        OpError: operands of other ranks, dtypes or mismatched dimensions.
    """
    b, sq, h, d, sk = _attention_operands("attention_probs", q, k, v)
    if q.dtype == np.float32:
        from pytfrt.backends.cpu._attention_grad import attention_probs_heads

        y, p = np.empty_like(q), np.empty((b, h, sq, sk), np.float32)
        _over_heads(b * h, sq * sk * d,
                    lambda lo, hi: attention_probs_heads(q, k, v, float(scale), y, p, lo, hi))
        return y, p
    from pytfrt.backends.cpu.norm import softmax  # the one softmax

    sc = np.matmul(q.transpose(0, 2, 1, 3), k.transpose(0, 2, 3, 1)) * q.dtype.type(scale)
    p = softmax(sc, -1)
    y = np.ascontiguousarray(np.matmul(p, v.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3))
    return y.astype(q.dtype, copy=False), p.astype(q.dtype, copy=False)


@_register("attention_grad")
def attention_grad(q: np.ndarray, k: np.ndarray, v: np.ndarray, p: np.ndarray, dy: np.ndarray,
                   *, scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dq, dk, dv) of ``o = softmax(scale * Q K^T) V`` per head, given ``p`` (the softmax,
    ``[B, H, Sq, Sk]``) and ``dy`` (the gradient of ``o``); ``q``, ``dy``: ``[B, Sq, H, D]``,
    ``k``, ``v``: ``[B, Sk, H, D]`` (heads-second, as the projections write them), results in
    the layouts of ``q``, ``k``, ``v``.  Float32: one compiled pass per head
    (:mod:`pytfrt.backends.cpu._attention_grad`); other float types in NumPy.

    Raises:
        OpError: operands of other ranks, dtypes or mismatched dimensions.
    """
    b, sq, h, d, sk = _attention_operands("attention_grad", q, k, v, p, dy)
    if dy.shape != q.shape or p.shape != (b, h, sq, sk):
        raise OpError(
            f"attention_grad: expected dy [B, Sq, H, D] and p [B, H, Sq, Sk]; got q "
            f"{list(q.shape)}, k {list(k.shape)}, p {list(p.shape)}, dy {list(dy.shape)}"
        )
    if q.dtype == np.float32:
        from pytfrt.backends.cpu._attention_grad import attention_grad_heads

        dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
        _over_heads(b * h, sq * sk * d, lambda lo, hi: attention_grad_heads(
            q, k, v, p, dy, float(scale), dq, dk, dv, lo, hi))
        return dq, dk, dv
    qh, kh, vh, gh = (a.transpose(0, 2, 1, 3) for a in (q, k, v, dy))
    dvh = np.matmul(p.swapaxes(-1, -2), gh)
    dp = np.matmul(gh, vh.swapaxes(-1, -2))
    ds = softmax_grad(p, dp, axis=-1) * q.dtype.type(scale)
    dqh = np.matmul(ds, kh)
    dkh = np.matmul(ds.swapaxes(-1, -2), qh)
    return tuple(  # type: ignore[return-value]
        np.ascontiguousarray(x.transpose(0, 2, 1, 3)).astype(q.dtype, copy=False)
        for x in (dqh, dkh, dvh)
    )


@_register("unsorted_segment_sum")
def unsorted_segment_sum(data: np.ndarray, ids: np.ndarray, *, num_segments: int) -> np.ndarray:
    """``out[s] = sum of data[i] over the i with ids[i] == s`` for ``s < num_segments``
    (``data`` ``[n, w]``, integer ``ids`` ``[n]``; ids out of range add nothing, as TF's
    ``UnsortedSegmentSum``)."""
    if data.ndim != 2 or ids.ndim != 1 or ids.shape[0] != data.shape[0]:
        raise OpError(f"unsorted_segment_sum: needs data [n, w] and ids [n], got "
                      f"{list(data.shape)} and {list(ids.shape)}")
    if not np.issubdtype(ids.dtype, np.integer):
        raise OpError(f"unsorted_segment_sum: ids must be integers, got {ids.dtype}")
    out = np.zeros((int(num_segments), data.shape[1]), data.dtype)
    if data.dtype in (np.float32, np.float64):
        from pytfrt.backends.cpu._segment_sum import segment_sum_rows

        segment_sum_rows(np.ascontiguousarray(data), ids.astype(np.int64, copy=False), out)
        return out
    ok = (ids >= 0) & (ids < num_segments)
    np.add.at(out, ids[ok], data[ok])
    return out

def _softmax_parts(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if logits.ndim != 2:
        raise OpError(f"cross entropy: logits must be 2-D, got shape {list(logits.shape)}")
    from pytfrt.backends.cpu.norm import log_softmax  # the one (log-)softmax

    log_p = log_softmax(logits, 1)
    return log_p, np.exp(log_p)


@_register("softmax_cross_entropy")
def softmax_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(per-row loss ``-sum(labels * log_softmax(logits))``, ``softmax(logits) - labels``)."""
    _same("softmax_cross_entropy", logits, labels)
    log_p, p = _softmax_parts(logits)
    loss = -(labels * log_p).sum(axis=1)
    return loss.astype(logits.dtype), (p - labels).astype(logits.dtype)


@_register("sparse_softmax_cross_entropy")
def sparse_softmax_cross_entropy(
    logits: np.ndarray, labels: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """As :func:`softmax_cross_entropy` with integer class labels (one per row).

    Raises:
        OpError: a label outside ``[0, classes)``.
    """
    log_p, p = _softmax_parts(logits)
    if labels.shape != logits.shape[:1]:
        raise OpError(
            f"sparse_softmax_cross_entropy: labels shape {list(labels.shape)} does not match "
            f"logits {list(logits.shape)}"
        )
    classes = logits.shape[1]
    if labels.size and (labels.min() < 0 or labels.max() >= classes):
        raise OpError(f"sparse_softmax_cross_entropy: labels must be in [0, {classes})")
    rows = np.arange(logits.shape[0])
    idx = labels.astype(np.int64)
    loss = -log_p[rows, idx]
    grad = p.copy()
    grad[rows, idx] -= 1
    return loss.astype(logits.dtype), grad.astype(logits.dtype)


def _channel_view(op: str, x: np.ndarray, axis: int) -> tuple[int, tuple[int, ...], list[int]]:
    if not -x.ndim <= axis < x.ndim:
        raise OpError(f"{op}: axis {axis} out of range for rank {x.ndim}")
    axis %= x.ndim
    reduce_axes = tuple(a for a in range(x.ndim) if a != axis)
    bshape = [1] * x.ndim
    bshape[axis] = x.shape[axis]
    return axis, reduce_axes, bshape


@_register("batch_norm_grad")
def batch_norm_grad(
    dy: np.ndarray,
    x: np.ndarray,
    scale: np.ndarray,
    mean: np.ndarray,
    variance: np.ndarray,
    *,
    epsilon: float,
    axis: int,
    is_training: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dx, dscale, doffset) of batch norm over all axes but ``axis``.

    ``mean``/``variance`` are the batch statistics (training) or the moving ones (inference,
    where they are constants of the forward pass).
    """
    _same("batch_norm_grad", dy, x)
    _, axes, bshape = _channel_view("batch_norm_grad", x, axis)
    dt = x.dtype
    inv = (1.0 / np.sqrt(variance.astype(np.float64) + epsilon)).reshape(bshape)
    xhat = (x - mean.reshape(bshape)) * inv
    dyd = dy.astype(np.float64)
    doffset = dyd.sum(axis=axes)
    dscale = (dyd * xhat).sum(axis=axes)
    g = scale.astype(np.float64).reshape(bshape) * inv
    if is_training:
        n = x.size // x.shape[axis % x.ndim]
        dx = g * (dyd - doffset.reshape(bshape) / n - xhat * dscale.reshape(bshape) / n)
    else:
        dx = g * dyd
    return dx.astype(dt), dscale.astype(dt), doffset.astype(dt)


@_register("layer_norm_grad")
def layer_norm_grad(
    dy: np.ndarray, x: np.ndarray, gamma: np.ndarray, *, axis: int, epsilon: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dx, dgamma, dbeta) of layer norm over axes ``axis..rank-1`` (float32 along the last
    axis: one compiled pass over the rows, ``layer_norm_rows``)."""
    from pytfrt.backends.cpu.layer_norm_rows import layer_norm_grad_last

    _same("layer_norm_grad", dy, x)
    if not -x.ndim <= axis < x.ndim:
        raise OpError(f"layer_norm_grad: axis {axis} out of range for rank {x.ndim}")
    fast = layer_norm_grad_last(dy, x, gamma, axis, epsilon)
    if fast is not None:
        return fast
    axis %= x.ndim
    norm_axes = tuple(range(axis, x.ndim))
    lead_axes = tuple(range(axis))
    xd = x.astype(np.float64)
    mu = xd.mean(axis=norm_axes, keepdims=True)
    inv = 1.0 / np.sqrt(((xd - mu) ** 2).mean(axis=norm_axes, keepdims=True) + epsilon)
    xhat = (xd - mu) * inv
    dyd = dy.astype(np.float64)
    dgamma = (dyd * xhat).sum(axis=lead_axes)
    dbeta = dyd.sum(axis=lead_axes)
    g = dyd * gamma.astype(np.float64)
    dx = inv * (
        g
        - g.mean(axis=norm_axes, keepdims=True)
        - xhat * (g * xhat).mean(axis=norm_axes, keepdims=True)
    )
    return dx.astype(x.dtype), dgamma.astype(gamma.dtype), dbeta.astype(gamma.dtype)


@_register("broadcast_gradient_args")
def broadcast_gradient_args(s0: np.ndarray, s1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TF's ``BroadcastGradientArgs``: the axes each operand's gradient is summed over.

    Raises:
        OpError: shapes that do not broadcast.
    """
    a = [int(v) for v in s0.reshape(-1)]
    b = [int(v) for v in s1.reshape(-1)]
    rank = max(len(a), len(b))
    a = [1] * (rank - len(a)) + a
    b = [1] * (rank - len(b)) + b
    r0: list[int] = []
    r1: list[int] = []
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x != y and x != 1 and y != 1:
            raise OpError(f"broadcast_gradient_args: incompatible shapes {a} and {b}")
        if x == 1 and y == 1:
            r0.append(i)
            r1.append(i)
        elif x == 1:
            r0.append(i)
        elif y == 1:
            r1.append(i)
    return np.asarray(r0, dtype=s0.dtype), np.asarray(r1, dtype=s0.dtype)


def _forward(
    op: str, module: str, operands: tuple[str, ...], attrs: tuple[str, ...], doc: str,
    fast: str | None = None,
) -> Callable[..., Any]:
    """Register ``op`` as ``pytfrt.backends.cpu.<module>.<op>`` called with ``operands`` and
    ``attrs`` (all required), minus ``static_shape`` (the result's shape, which the callee works
    out itself). The explicit signature is what ``graph_kernels.make_kernel`` reads.

    ``fast`` names a function of :mod:`pytfrt.backends.cpu._dnnl_conv_bwd` tried first with
    the same arguments; its ``None`` (oneDNN does not take the call) means the module's op runs.
    """

    def compute(*args: np.ndarray, **kw: Any) -> np.ndarray:
        kw.pop("static_shape", None)
        if fast is not None:
            from pytfrt.backends.cpu import _dnnl_conv_bwd

            out = getattr(_dnnl_conv_bwd, fast)(*args, **kw)
            if out is not None:
                return out  # type: ignore[no-any-return]
        # Imported at first call: the convolution and pooling modules are heavy (Numba).
        target = getattr(importlib.import_module(f"pytfrt.backends.cpu.{module}"), op)
        return target(*args, **kw)  # type: ignore[no-any-return]

    P = inspect.Parameter  # noqa: N806 - a short alias for the class
    compute.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [P(n, P.POSITIONAL_OR_KEYWORD) for n in operands] + [P(n, P.KEYWORD_ONLY) for n in attrs]
    )
    compute.__name__ = compute.__qualname__ = op
    compute.__doc__ = doc
    return _register(op)(compute)


_CONV = ("layout", "strides", "dilations", "pads", "groups", "static_shape")
_POOL = ("layout", "ksize", "strides", "pads", "dilations", "ceil_mode")
conv2d_backprop_input = _forward(
    "conv2d_backprop_input", "conv", ("input_shape", "w", "dy"), _CONV,
    "The gradient of ``conv2d`` with respect to its input (oneDNN's backward data, else "
    "``conv.conv2d_backprop_input``).",
    fast="backprop_input",
)
conv2d_backprop_filter = _forward(
    "conv2d_backprop_filter", "conv", ("x", "filter_shape", "dy"), _CONV,
    "The gradient of ``conv2d`` with respect to its filter (oneDNN's backward weights, else "
    "``conv.conv2d_backprop_filter``).",
    fast="backprop_filter",
)


@_register("conv2d_grads")
def conv2d_grads(x: np.ndarray, w: np.ndarray, dy: np.ndarray, *, layout: str,
                 strides: Sequence[int], dilations: Sequence[int], pads: Sequence[int],
                 groups: int) -> tuple[np.ndarray, ...]:
    """``(dx, dw)`` of ``y = conv2d(x, w)`` for the output gradient ``dy``: what
    ``conv2d_backprop_input`` and ``conv2d_backprop_filter`` give.  float32 on two or more
    threads: both at once, one per thread
    (:func:`pytfrt.backends.cpu._dnnl_conv_bwd.backprop_both`); otherwise one after the other
    (the two ops' kernels, which report bad operands)."""
    return _conv_grads(x, w, dy, None, layout=layout, strides=strides, dilations=dilations,
                       pads=pads, groups=groups)


@_register("conv2d_bias_grads")
def conv2d_bias_grads(x: np.ndarray, w: np.ndarray, dy: np.ndarray, *, layout: str,
                      strides: Sequence[int], dilations: Sequence[int], pads: Sequence[int],
                      groups: int) -> tuple[np.ndarray, ...]:
    """``(dx, dw, db)``: :func:`conv2d_grads` and ``bias_add_grad(dy)`` (the gradient of a
    bias added to the convolution's output), the bias gradient on whichever thread finishes
    its convolution gradient first."""
    return _conv_grads(x, w, dy, lambda: bias_add_grad(dy, layout=layout), layout=layout,
                       strides=strides, dilations=dilations, pads=pads, groups=groups)


def _conv_grads(x: np.ndarray, w: np.ndarray, dy: np.ndarray,
                extra: Callable[[], np.ndarray] | None, **attrs: Any) -> tuple[np.ndarray, ...]:
    if x.dtype == np.float32:
        from pytfrt.backends.cpu import _dnnl_conv_bwd

        both = _dnnl_conv_bwd.backprop_both(x, w, dy, extra=extra, **attrs)
        if both is not None:
            return both
    grads = (conv2d_backprop_input(np.asarray(x.shape, np.int64), w, dy, static_shape=None,
                                   **attrs),
             conv2d_backprop_filter(x, np.asarray(w.shape, np.int64), dy, static_shape=None,
                                    **attrs))
    return grads if extra is None else (*grads, extra())


max_pool2d_grad = _forward(
    "max_pool2d_grad", "pooling", ("x", "y", "dy"), _POOL,
    "The gradient of ``max_pool2d`` (``pooling.max_pool2d_grad``: the first maximum wins).",
)
avg_pool2d_grad = _forward(
    "avg_pool2d_grad", "pooling", ("input_shape", "dy"),
    (*_POOL, "count_include_pad", "static_shape"),
    "The gradient of ``avg_pool2d`` (``pooling.avg_pool2d_grad``).",
)


# -- stateless random numbers (Philox4x32-10, as TF's CPU kernels) -------------------------------

_PHILOX_M = (np.uint64(0xD2511F53), np.uint64(0xCD9E8D57))
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)
_LOW32 = np.uint64(0xFFFFFFFF)
_SEED_KEY = (0x3EC8F720, 0x02461E29)
"""The fixed key TF scrambles a seed pair with (``StatelessRandomGetKeyCounter``)."""


def philox(counter: list[np.ndarray], key: tuple[int, int]) -> list[np.ndarray]:
    """Philox4x32-10 on vectors: four uint32 words (held in uint64 arrays) per block."""
    c = list(counter)
    k0, k1 = key
    for _ in range(10):
        p0 = _PHILOX_M[0] * c[0]
        p1 = _PHILOX_M[1] * c[2]
        c = [
            (p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0),
            p1 & _LOW32,
            (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1),
            p0 & _LOW32,
        ]
        k0 = (k0 + _PHILOX_W[0]) & 0xFFFFFFFF
        k1 = (k1 + _PHILOX_W[1]) & 0xFFFFFFFF
    return c


@_register("random_key_counter")
def random_key_counter(seed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TF's ``StatelessRandomGetKeyCounter`` for Philox: a seed pair -> (key[1], counter[2]).

    Raises:
        OpError: a seed that is not two integers.
    """
    if seed.shape != (2,) or seed.dtype.kind not in "iu":
        raise OpError(
            f"random_key_counter: the seed must be two integers, got {seed.dtype}{list(seed.shape)}"
        )
    s0, s1 = (int(v) & 0xFFFFFFFFFFFFFFFF for v in seed)
    words = [s0 & 0xFFFFFFFF, s0 >> 32, s1 & 0xFFFFFFFF, s1 >> 32]
    mix = [int(w[0]) for w in philox([np.array([w], np.uint64) for w in words], _SEED_KEY)]
    key = np.array([mix[0] | (mix[1] << 32)], np.uint64)
    counter = np.array([0, mix[2] | (mix[3] << 32)], np.uint64)
    return key, counter


@_register("random_uniform")
def random_uniform(
    shape: np.ndarray,
    key: np.ndarray,
    counter: np.ndarray,
    *,
    dtype: str,
    static_shape: Sequence[int],
) -> np.ndarray:
    """Uniform floats in [0, 1) from Philox (TF's ``StatelessRandomUniformV2``, bit for bit).

    Element ``i`` is word ``i % 4`` of block ``counter + i // 4``; a word ``u`` becomes the float
    with mantissa ``u & 0x7fffff`` in [1, 2), minus 1 (f32).

    Raises:
        OpError: a dtype other than f32, or a bad key/counter.
    """
    dims = [int(d) for d in shape.reshape(-1)]
    bits = _philox_words("random_uniform", math.prod(dims), key, counter, dtype)
    return _unit_floats(bits).reshape(dims)


@_register("random_uniform_int")
def random_uniform_int(
    shape: np.ndarray,
    key: np.ndarray,
    counter: np.ndarray,
    minval: np.ndarray,
    maxval: np.ndarray,
    *,
    dtype: str,
    static_shape: Sequence[int],
) -> np.ndarray:
    """Uniform integers in ``[minval, maxval)`` from Philox (TF's
    ``StatelessRandomUniformIntV2``, bit for bit): ``minval + bits % (maxval - minval)``, one
    word per i32 element, two (low, high) per i64 element.

    Raises:
        OpError: a dtype other than i32/i64, an empty range, or a bad key/counter.
    """
    lo, hi = int(minval.reshape(())), int(maxval.reshape(()))
    if hi <= lo:
        raise OpError(f"random_uniform_int: need minval < maxval, got {lo} and {hi}")
    dims = [int(d) for d in shape.reshape(-1)]
    n = math.prod(dims)
    if dtype == "i32":
        bits = _philox_words("random_uniform_int", n, key, counter, "f32").astype(np.uint64)
    elif dtype == "i64":
        w = _philox_words("random_uniform_int", 2 * n, key, counter, "f32").astype(np.uint64)
        bits = w[0::2] | (w[1::2] << np.uint64(32))
    else:
        raise OpError(f"random_uniform_int: only i32 and i64 are supported, got {dtype}")
    out = lo + (bits % np.uint64(hi - lo)).astype(np.int64)
    return out.astype(np.int32 if dtype == "i32" else np.int64).reshape(dims)


def _unit_floats(bits: np.ndarray) -> np.ndarray:
    """TF's ``Uint32ToFloat``: mantissa bits in [1, 2), minus 1."""
    return ((bits & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)).view(np.float32) - np.float32(1)


@_register("random_normal")
def random_normal(
    shape: np.ndarray,
    key: np.ndarray,
    counter: np.ndarray,
    *,
    dtype: str,
    static_shape: Sequence[int],
) -> np.ndarray:
    """Standard normal floats from Philox (TF's ``StatelessRandomNormalV2``).

    Each pair of words ``(a, b)`` gives two values by Box-Muller in f32, as TF's
    ``BoxMullerFloat``: ``r = sqrt(-2 log(max(u(a), 1e-7)))``, ``(r sin 2pi u(b), r cos 2pi
    u(b))``; the same words as :func:`random_uniform` (equal up to f32 rounding of the
    transcendental functions, which come from NumPy rather than glibc).

    Raises:
        OpError: a dtype other than f32, or a bad key/counter.
    """
    dims = [int(d) for d in shape.reshape(-1)]
    n = math.prod(dims)
    u = _unit_floats(_philox_words("random_normal", n + n % 2, key, counter, dtype))
    u = u.reshape(-1, 2)
    r = np.sqrt(np.float32(-2) * np.log(np.maximum(u[:, 0], np.float32(1e-7))))
    v = np.float32(2 * np.pi) * u[:, 1]
    out = np.stack([np.sin(v) * r, np.cos(v) * r], axis=1).astype(np.float32)
    return out.reshape(-1)[:n].reshape(dims)


def _philox_words(
    op: str, n: int, key: np.ndarray, counter: np.ndarray, dtype: str
) -> np.ndarray:
    """The first ``n`` uint32 words of TF's Philox stream for ``key``/``counter``: word ``i``
    is word ``i % 4`` of block ``counter + i // 4``."""
    if dtype != "f32":
        raise OpError(f"{op}: only f32 is supported, got {dtype}")
    if key.size != 1 or counter.size != 2:
        raise OpError(f"{op}: key must have 1 element and counter 2")
    groups = (n + 3) // 4
    c0 = np.uint64(int(counter.reshape(-1)[0]))
    c1 = int(counter.reshape(-1)[1])
    g = np.arange(groups, dtype=np.uint64)
    lo = c0 + g  # 128-bit counter: carry into the high half
    hi = np.uint64(c1) + (lo < c0).astype(np.uint64)
    k = int(key.reshape(-1)[0])
    words = philox(
        [lo & _LOW32, lo >> np.uint64(32), hi & _LOW32, hi >> np.uint64(32)],
        (k & 0xFFFFFFFF, k >> 32),
    )
    return np.stack(words, axis=1).reshape(-1)[:n].astype(np.uint32)



_GAMMA_BLOCKS = 256
"""Philox blocks TF reserves for each gamma sample (``kReservedSamplesPerOutput``)."""


def _unit_doubles(w0: np.ndarray, w1: np.ndarray) -> np.ndarray:
    """TF's ``Uint64ToDouble``: 20 mantissa bits from ``w0``, 32 from ``w1``, in [1, 2), minus 1."""
    man = ((w0 & np.uint64(0xFFFFF)) << np.uint64(32)) | (w1 & _LOW32)
    return (man | np.uint64(1023 << 52)).view(np.float64) - 1.0


class _Blocks:
    """The Philox blocks of gamma sample ``i``: block ``j`` is ``counter + 256 i + j`` (the
    first ``ahead`` for every sample computed at once, later ones on demand)."""

    def __init__(self, n: int, key: np.ndarray, counter: np.ndarray, ahead: int = 4) -> None:
        if key.size != 1 or counter.size != 2:
            raise OpError("random_gamma: key must have 1 element and counter 2")
        k = int(key.reshape(-1)[0])
        self.key = (k & 0xFFFFFFFF, k >> 32)
        self.c0 = int(counter.reshape(-1)[0])
        self.c1 = int(counter.reshape(-1)[1])
        self.ahead = ahead
        offsets = (np.arange(n, dtype=np.uint64)[:, None] * np.uint64(_GAMMA_BLOCKS)
                   + np.arange(ahead, dtype=np.uint64)[None, :])
        self.first = self._words(offsets.reshape(-1)).reshape(n, ahead, 4)

    def _words(self, offsets: np.ndarray) -> np.ndarray:
        lo = np.uint64(self.c0) + offsets  # 128-bit counter: carry into the high half
        hi = np.uint64(self.c1) + (lo < np.uint64(self.c0)).astype(np.uint64)
        words = philox([lo & _LOW32, lo >> np.uint64(32), hi & _LOW32, hi >> np.uint64(32)],
                       self.key)
        return np.stack(words, axis=1)

    def block(self, i: int, j: int) -> np.ndarray:
        if j < self.ahead:
            return self.first[i, j]
        return self._words(np.array([i * _GAMMA_BLOCKS + j], np.uint64))[0]


def _gamma_sample(blocks: _Blocks, i: int, alpha: float) -> float:
    """One Gamma(alpha, 1) sample as TF's CPU kernel draws it (``stateless_random_gamma_op``):
    Marsaglia-Tsang with the normals (Box-Muller, two per block) and uniforms (two per block)
    taken last first from the sample's own blocks; ``-log1p(-u)`` for ``alpha == 1``."""
    j = 0
    normals: list[float] = []
    uniforms: list[float] = []

    def uniform() -> float:
        nonlocal j
        if not uniforms:
            w = blocks.block(i, j).astype(np.uint64)
            j += 1
            uniforms.extend(float(u) for u in _unit_doubles(w[0::2], w[1::2]))
        return uniforms.pop()

    def normal() -> float:
        nonlocal j
        if not normals:
            w = blocks.block(i, j).astype(np.uint64)
            j += 1
            u1, u2 = (float(u) for u in _unit_doubles(w[0::2], w[1::2]))
            r = math.sqrt(-2.0 * math.log(max(u1, 1.0e-7)))
            v = 2 * math.pi * u2
            normals.extend((math.sin(v) * r, math.cos(v) * r))
        return normals.pop()

    if alpha == 1.0:
        return -math.log1p(-uniform())
    small = alpha < 1
    d = alpha + (2.0 / 3 if small else -1.0 / 3)
    c = 1.0 / 3 / math.sqrt(d)
    while True:
        x = normal()
        v = 1 + c * x
        if v <= 0:
            continue
        v = v * v * v
        u = uniform()
        if u < 1 - 0.0331 * (x * x) * (x * x) or math.log(u) < 0.5 * x * x + d * (
            1 - v + math.log(v)
        ):
            res = d * v
            if small:
                res *= math.pow(uniform(), 1 / alpha)
            return res


@_register("random_gamma")
def random_gamma(
    shape: np.ndarray,
    key: np.ndarray,
    counter: np.ndarray,
    alpha: np.ndarray,
    *,
    dtype: str,
    static_shape: Sequence[int],
) -> np.ndarray:
    """Gamma(alpha, 1) samples from Philox (TF's ``StatelessRandomGammaV3``, bit for bit up to
    the C library's ``log``/``sin``/``cos``, which Python's ``math`` shares on Linux).

    ``alpha``'s shape is a suffix of ``shape``; sample ``s`` of alpha ``a`` is element
    ``s * alpha.size + a`` and uses the Philox blocks from ``counter + 256 * (a * per_alpha +
    s)`` on (:func:`_gamma_sample`).

    Raises:
        OpError: a dtype other than f32/f64, ``alpha``'s shape not a suffix of ``shape``, or a
            bad key/counter.
    """
    if dtype not in ("f32", "f64"):
        raise OpError(f"random_gamma: only f32 and f64 are supported, got {dtype}")
    dims = [int(d) for d in shape.reshape(-1)]
    if alpha.ndim > len(dims) or list(alpha.shape) != dims[len(dims) - alpha.ndim:]:
        raise OpError(f"random_gamma: alpha's shape {list(alpha.shape)} is not a suffix of "
                      f"the shape {dims}")
    n = math.prod(dims)
    alphas = [float(a) for a in alpha.reshape(-1)]
    out = np.empty(n, np.float64)
    if n:
        per = n // len(alphas)
        blocks = _Blocks(n, key, counter)
        for a, value in enumerate(alphas):
            for s in range(per):
                out[s * len(alphas) + a] = _gamma_sample(blocks, a * per + s, value)
    np_type = np.float32 if dtype == "f32" else np.float64
    result = out.astype(np_type)
    result[np.abs(result) < np.finfo(np_type).tiny] = 0  # TF's CPU kernels flush denormals
    return result.reshape(dims)
