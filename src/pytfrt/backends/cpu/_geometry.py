"""Window geometry shared by convolution and pooling: attribute checks, output sizes, padding.

Private helper of :mod:`pytfrt.backends.cpu.conv` and :mod:`pytfrt.backends.cpu.pooling`;
:func:`same_pad` (the one ``SAME`` padding rule) is also the compiler's (importers, gradients).
All layouts are reduced to NHWC here: a 2-D window op sees ``(N, H, W, C)`` arrays and the
public modules transpose NCHW operands (or pick an NCHW-specific path) themselves.

Conventions (the graph dialect's, ``docs/graph_dialect.md``): ``pads`` is ``(top, bottom,
left, right)``; ``strides``, ``dilations`` and ``ksize`` are ``(h, w)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pytfrt.backends.cpu._scratch import scratch
from pytfrt.backends.cpu.ops import OpError

LAYOUTS = ("NHWC", "NCHW")


def check_layout(op: str, layout: str) -> str:
    """``layout`` if it is ``"NHWC"`` or ``"NCHW"``, else :class:`OpError`."""
    if layout not in LAYOUTS:
        raise OpError(f"{op}: layout must be 'NHWC' or 'NCHW', got {layout!r}")
    return layout


def pair(op: str, name: str, value: Sequence[int] | int, *, minimum: int = 1) -> tuple[int, int]:
    """Two ints ``>= minimum`` from ``value`` (an int is repeated)."""
    vals = (value, value) if isinstance(value, int | np.integer) else tuple(value)
    if len(vals) != 2 or not all(isinstance(v, int | np.integer) for v in vals):
        raise OpError(f"{op}: {name} must be two integers, got {value!r}")
    if any(v < minimum for v in vals):
        raise OpError(f"{op}: {name} must be >= {minimum}, got {list(vals)}")
    return int(vals[0]), int(vals[1])


def quad(op: str, pads: Sequence[int] | None) -> tuple[int, int, int, int]:
    """``(top, bottom, left, right)`` pads, all ``>= 0`` (``None`` means no padding)."""
    if pads is None:
        return (0, 0, 0, 0)
    vals = tuple(pads)
    if len(vals) != 4 or not all(isinstance(v, int | np.integer) for v in vals):
        raise OpError(f"{op}: pads must be four integers (top, bottom, left, right), got {pads!r}")
    if any(v < 0 for v in vals):
        raise OpError(f"{op}: pads must be >= 0, got {list(vals)}")
    return int(vals[0]), int(vals[1]), int(vals[2]), int(vals[3])


def out_size(
    size: int | None, k: int, stride: int, dilation: int, p0: int, p1: int, *, ceil: bool = False
) -> int | None:
    """Output length of a window op along one dimension (``None`` stays ``None``).

    ``floor((size + p0 + p1 - eff_k) / stride) + 1`` with ``eff_k = dilation * (k - 1) + 1``;
    with ``ceil`` the division rounds up, but (PyTorch's and ONNX's rule) the last window must
    start inside the input or the leading padding.  May be ``<= 0`` for too small an input:
    callers report that.
    """
    if size is None:
        return None
    span = size + p0 + p1 - (dilation * (k - 1) + 1)
    if span < 0:
        return 0
    if not ceil:
        return span // stride + 1
    n = -(-span // stride) + 1
    if (n - 1) * stride >= size + p0:
        n -= 1
    return n


def same_pad(size: int, k: int, stride: int, dilation: int, *, upper: bool = True
             ) -> tuple[int, int]:
    """``SAME`` padding along one dimension: ``(before, after)`` giving ``ceil(size / stride)``
    outputs.  The one place this rule lives (the kernels, the TF and ONNX importers and the
    gradients all call it).

    ``upper`` (TensorFlow's ``SAME``, ONNX's ``SAME_UPPER``): an odd total puts the extra
    row/column at the end; otherwise (ONNX's ``SAME_LOWER``) at the start.
    """
    total = max((-(-size // stride) - 1) * stride + dilation * (k - 1) + 1 - size, 0)
    small = total // 2
    return (small, total - small) if upper else (total - small, small)


def padded_nhwc(
    x: np.ndarray,
    pt: int,
    pb: int,
    pl: int,
    pr: int,
    value: float = 0.0,
    out_role: str | None = None,
) -> np.ndarray:
    """``x`` (N, H, W, C) with ``value`` rows/columns added around H and W (``x`` if none).

    With ``out_role`` the result lives in this thread's scratch arena of that role.
    """
    if pt == pb == pl == pr == 0:
        return x
    n, h, w, c = x.shape
    shape = (n, h + pt + pb, w + pl + pr, c)
    xp = np.empty(shape, dtype=x.dtype) if out_role is None else scratch(out_role, shape, x.dtype)
    if pt:
        xp[:, :pt] = value
    if pb:
        xp[:, h + pt :] = value
    if pl:
        xp[:, pt : h + pt, :pl] = value
    if pr:
        xp[:, pt : h + pt, w + pl :] = value
    xp[:, pt : h + pt, pl : w + pl] = x
    return xp


def tap(
    i: int, j: int, oh: int, ow: int, sh: int, sw: int, dh: int, dw: int
) -> tuple[slice, slice]:
    """The (H, W) slices of a padded input read by window tap ``(i, j)`` for all outputs."""
    return (
        slice(i * dh, i * dh + (oh - 1) * sh + 1, sh),
        slice(j * dw, j * dw + (ow - 1) * sw + 1, sw),
    )


def to_nhwc(x: np.ndarray, layout: str) -> np.ndarray:
    """A view of a rank-4 ``layout`` array as NHWC."""
    return x if layout == "NHWC" else x.transpose(0, 2, 3, 1)


def nhwc_shape(shape: Sequence[int], layout: str) -> tuple[int, int, int, int]:
    """``(N, H, W, C)`` from a rank-4 shape in ``layout``."""
    n, a, b, c = shape
    return (n, a, b, c) if layout == "NHWC" else (n, b, c, a)


def from_nhwc_shape(n: int, h: int, w: int, c: int, layout: str) -> tuple[int, int, int, int]:
    """The rank-4 shape in ``layout`` for NHWC dimensions."""
    return (n, h, w, c) if layout == "NHWC" else (n, c, h, w)


def check_rank4(op: str, x: np.ndarray, what: str = "input") -> None:
    """:class:`OpError` unless ``x`` is a rank-4 ndarray."""
    if not isinstance(x, np.ndarray) or x.ndim != 4:
        shape = getattr(x, "shape", None)
        raise OpError(f"{op}: {what} must be a rank-4 array, got shape {shape}")


def check_out(op: str, out: np.ndarray | None, shape: Sequence[int], dtype: np.dtype) -> None:
    """:class:`OpError` unless ``out`` is ``None`` or an ndarray of ``shape`` and ``dtype``."""
    if out is None:
        return
    if not isinstance(out, np.ndarray) or out.shape != tuple(shape) or out.dtype != dtype:
        raise OpError(
            f"{op}: out must be an array of shape {list(shape)} and dtype {dtype}, got "
            f"{getattr(out, 'shape', None)} {getattr(out, 'dtype', None)}"
        )
