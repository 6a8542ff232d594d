"""Compute functions of the graph dialect's 3-D (volume) ops: convolution, pooling, gradients.

Layout ``NDHWC`` (TF's ``Conv3D``/``AvgPool3D``/``MaxPool3D`` on CPU), filters
``[kd, kh, kw, cin, cout]``; ``pads`` are ``(d0, d1, h0, h1, w0, w1)`` (before, after per
spatial axis), ``strides``/``dilations``/``ksize`` three ints.  Every op loops over the
window's offsets (a handful for the small kernels 3-D layers use) and does the work of each
offset as one strided view of the padded input: a matrix product (convolution), a maximum
or a sum (pooling), scattered back for the gradients.  Results follow TF's kernels: average
pooling divides by the number of real (unpadded) elements in the window, and a max pooling
gradient goes to the first maximum of each window in scan order.

Operands positional, attributes keyword-only (the runtime table's convention, see
:mod:`pytfrt.backends.cpu.graph_kernels`).  Pure functions: thread-safe.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np

from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError

GRAPH_OPS = OpTable()
"""Op name -> compute function."""


def out_size(size: int, k: int, stride: int, dilation: int, before: int, after: int) -> int:
    """Outputs along one axis of a window op (``k`` taps dilated, padded ``before``/``after``)."""
    return (size + before + after - dilation * (k - 1) - 1) // stride + 1


def _windows(
    spatial: Sequence[int],
    ksize: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads: Sequence[int],
) -> tuple[tuple[int, int, int], Iterator[tuple[tuple[int, int, int], tuple[slice, ...]]]]:
    """The output's spatial shape, and for each window offset the slices of the padded input
    that offset reads for every output position (as ``x[:, sd, sh, sw, :]``)."""
    outs = tuple(
        out_size(spatial[i], ksize[i], strides[i], dilations[i], pads[2 * i], pads[2 * i + 1])
        for i in range(3)
    )
    if min(outs) < 1:
        raise OpError(f"the window {list(ksize)} does not fit the input {list(spatial)}")

    def offsets() -> Iterator[tuple[tuple[int, int, int], tuple[slice, ...]]]:
        for k in itertools.product(*(range(n) for n in ksize)):
            sl = tuple(
                slice(k[i] * dilations[i], k[i] * dilations[i] + strides[i] * (outs[i] - 1) + 1,
                      strides[i])
                for i in range(3)
            )
            yield k, (slice(None), *sl, slice(None))  # type: ignore[misc]

    return outs, offsets()  # type: ignore[return-value]


def _padded(x: np.ndarray, pads: Sequence[int], value: float = 0.0) -> np.ndarray:
    if not any(pads):
        return x
    width = [(0, 0), *((pads[2 * i], pads[2 * i + 1]) for i in range(3)), (0, 0)]
    return np.pad(x, width, constant_values=value)


def _unpadded(xp: np.ndarray, pads: Sequence[int]) -> np.ndarray:
    d, h, w = (xp.shape[1 + i] - pads[2 * i + 1] for i in range(3))
    return xp[:, pads[0]:d, pads[2]:h, pads[4]:w, :]


def _check5(op: str, x: np.ndarray, name: str = "input") -> None:
    if x.ndim != 5:
        raise OpError(f"{op}: the {name} must be NDHWC (rank 5), got shape {list(x.shape)}")


@GRAPH_OPS.op("conv3d")
def conv3d(x: np.ndarray, w: np.ndarray, *, strides: Sequence[int], dilations: Sequence[int],
           pads: Sequence[int]) -> np.ndarray:
    """``y[n, o..., co] = sum x[n, o*s + k*d - pad, ci] * w[k, ci, co]`` (TF's ``Conv3D``)."""
    _check5("conv3d", x)
    if w.ndim != 5 or w.shape[3] != x.shape[4]:
        raise OpError(f"conv3d: filter {list(w.shape)} does not fit input {list(x.shape)}")
    outs, offsets = _windows(x.shape[1:4], w.shape[:3], strides, dilations, pads)
    xp = _padded(x, pads)
    y = np.zeros((x.shape[0], *outs, w.shape[4]), np.result_type(x, w))
    for k, sl in offsets:
        y += xp[sl] @ w[k]
    return y


@GRAPH_OPS.op("conv3d_backprop_input")
def conv3d_backprop_input(w: np.ndarray, dy: np.ndarray, *, input_shape: Sequence[int],
                          strides: Sequence[int], dilations: Sequence[int],
                          pads: Sequence[int]) -> np.ndarray:
    """The gradient of :func:`conv3d` for its input of shape ``input_shape`` (``-1``: the
    batch of ``dy``)."""
    _check5("conv3d_backprop_input", dy, "gradient")
    spatial = [int(d) for d in input_shape[1:4]]
    outs, offsets = _windows(spatial, w.shape[:3], strides, dilations, pads)
    if tuple(dy.shape[1:4]) != outs:
        raise OpError(f"conv3d_backprop_input: gradient {list(dy.shape)} does not fit input "
                      f"{list(input_shape)}")
    padded = [spatial[i] + pads[2 * i] + pads[2 * i + 1] for i in range(3)]
    dxp = np.zeros((dy.shape[0], *padded, w.shape[3]), np.result_type(w, dy))
    for k, sl in offsets:
        dxp[sl] += dy @ w[k].T
    return _unpadded(dxp, pads)


@GRAPH_OPS.op("conv3d_backprop_filter")
def conv3d_backprop_filter(x: np.ndarray, dy: np.ndarray, *, filter_shape: Sequence[int],
                           strides: Sequence[int], dilations: Sequence[int],
                           pads: Sequence[int]) -> np.ndarray:
    """The gradient of :func:`conv3d` for its filter of shape ``filter_shape``."""
    _check5("conv3d_backprop_filter", x)
    fs = tuple(int(d) for d in filter_shape)
    _outs, offsets = _windows(x.shape[1:4], fs[:3], strides, dilations, pads)
    xp = _padded(x, pads)
    dw = np.zeros(fs, np.result_type(x, dy))
    for k, sl in offsets:
        dw[k] = np.tensordot(xp[sl], dy, axes=([0, 1, 2, 3], [0, 1, 2, 3]))
    return dw


@GRAPH_OPS.op("max_pool3d")
def max_pool3d(x: np.ndarray, *, ksize: Sequence[int], strides: Sequence[int],
               pads: Sequence[int]) -> np.ndarray:
    """The maximum of each window (padding never wins)."""
    _check5("max_pool3d", x)
    _outs, offsets = _windows(x.shape[1:4], ksize, strides, (1, 1, 1), pads)
    xp = _padded(x, pads, -np.inf)
    y: np.ndarray | None = None
    for _k, sl in offsets:
        y = xp[sl].copy() if y is None else np.maximum(y, xp[sl])
    assert y is not None
    return y.astype(x.dtype, copy=False)


def _counts(spatial: Sequence[int], ksize: Sequence[int], strides: Sequence[int],
            pads: Sequence[int]) -> np.ndarray:
    """Real (unpadded) elements of each window, shaped ``[1, od, oh, ow, 1]``."""
    _outs, offsets = _windows(spatial, ksize, strides, (1, 1, 1), pads)
    ones = _padded(np.ones((1, *spatial, 1), np.float64), pads)
    total: np.ndarray | None = None
    for _k, sl in offsets:
        total = ones[sl].copy() if total is None else total + ones[sl]
    assert total is not None
    return total


@GRAPH_OPS.op("avg_pool3d")
def avg_pool3d(x: np.ndarray, *, ksize: Sequence[int], strides: Sequence[int],
               pads: Sequence[int]) -> np.ndarray:
    """The mean of each window's real elements (TF's ``AvgPool3D``)."""
    _check5("avg_pool3d", x)
    _outs, offsets = _windows(x.shape[1:4], ksize, strides, (1, 1, 1), pads)
    xp = _padded(x, pads)
    total: np.ndarray | None = None
    for _k, sl in offsets:
        total = xp[sl].astype(x.dtype, copy=True) if total is None else total + xp[sl]
    assert total is not None
    return (total / _counts(x.shape[1:4], ksize, strides, pads)).astype(x.dtype, copy=False)


@GRAPH_OPS.op("max_pool3d_grad")
def max_pool3d_grad(x: np.ndarray, y: np.ndarray, dy: np.ndarray, *, ksize: Sequence[int],
                    strides: Sequence[int], pads: Sequence[int]) -> np.ndarray:
    """The gradient of :func:`max_pool3d`: each window's ``dy`` to its first maximum."""
    _check5("max_pool3d_grad", x)
    _outs, offsets = _windows(x.shape[1:4], ksize, strides, (1, 1, 1), pads)
    xp = _padded(x, pads, -np.inf)
    dxp = np.zeros(xp.shape, dy.dtype)
    taken = np.zeros(y.shape, bool)
    for _k, sl in offsets:
        hit = (xp[sl] == y) & ~taken
        taken |= hit
        dxp[sl] += np.where(hit, dy, np.zeros((), dy.dtype))
    return _unpadded(dxp, pads)


@GRAPH_OPS.op("avg_pool3d_grad")
def avg_pool3d_grad(dy: np.ndarray, *, input_shape: Sequence[int], ksize: Sequence[int],
                    strides: Sequence[int], pads: Sequence[int]) -> np.ndarray:
    """The gradient of :func:`avg_pool3d` for an input of shape ``input_shape`` (``-1``: the
    batch of ``dy``)."""
    _check5("avg_pool3d_grad", dy, "gradient")
    spatial = [int(d) for d in input_shape[1:4]]
    _outs, offsets = _windows(spatial, ksize, strides, (1, 1, 1), pads)
    share = (dy / _counts(spatial, ksize, strides, pads)).astype(dy.dtype, copy=False)
    padded = [spatial[i] + pads[2 * i] + pads[2 * i + 1] for i in range(3)]
    dxp = np.zeros((dy.shape[0], *padded, dy.shape[4]), dy.dtype)
    for _k, sl in offsets:
        dxp[sl] += share
    return _unpadded(dxp, pads)
