"""Catalogue family: 3-D (volume) convolution and pooling, and their gradients, ``NDHWC``.

``conv3d(x, w)``, ``conv3d_backprop_input(w, dy) {input_shape}``,
``conv3d_backprop_filter(x, dy) {filter_shape}``, ``max_pool3d(x)``, ``avg_pool3d(x)``,
``max_pool3d_grad(x, y, dy)``, ``avg_pool3d_grad(dy) {input_shape}``: TF's ``Conv3D``,
``Conv3DBackpropInputV2``, ``Conv3DBackpropFilterV2``, ``MaxPool3D``, ``AvgPool3D`` and their
gradient ops (what Keras' ``Conv3D``, ``Conv3DTranspose``, ``*Pooling3D`` and ``ConvLSTM3D``
layers and their train steps use).  Filters ``[kd, kh, kw, cin, cout]``; ``pads`` six ints
(before, after for D, H, W); ``input_shape`` may hold ``-1`` for the batch.  Compute
functions: :mod:`pytfrt.backends.cpu.volume`.  ``pytfrt.grad`` has no rules for them yet (the
TF front end imports TF's own gradient ops): their ``no_grad`` says so.
"""

from __future__ import annotations

from pytfrt.backends.cpu.volume import out_size
from pytfrt.compiler.ops.base import REQUIRED, AttrSpec, InferContext, define, same_dtype
from pytfrt.compiler.types import FLOAT_DTYPES, TType

_WINDOW = {
    "strides": AttrSpec("ints", (1, 1, 1)),
    "pads": AttrSpec("ints", (0, 0, 0, 0, 0, 0)),
}
_CONV = {**_WINDOW, "dilations": AttrSpec("ints", (1, 1, 1))}
_POOL = {**_WINDOW, "ksize": AttrSpec("ints", REQUIRED)}


def _check(ctx: InferContext, t: TType, what: str) -> None:
    if t.dtype not in FLOAT_DTYPES:
        raise ctx.error(f"the {what} must be floating point, got {t.dtype}")
    if t.shape is not None and len(t.shape) != 5:
        raise ctx.error(f"the {what} must be NDHWC (rank 5), got {t}")


def _three(ctx: InferContext, name: str, n: int = 3) -> list[int]:
    v = [int(i) for i in ctx.attrs[name]]
    if len(v) != n or (name != "pads" and min(v) < 1) or min(v) < 0:
        raise ctx.error(f"'{name}' must be {n} {'non-negative' if name == 'pads' else 'positive'}"
                        f" ints, got {v}")
    return v


def _spatial_out(ctx: InferContext, shape: tuple[int | None, ...], k: list[int],
                 dilations: list[int]) -> list[int | None]:
    s, p = _three(ctx, "strides"), _three(ctx, "pads", 6)
    out: list[int | None] = []
    for i in range(3):
        size = shape[1 + i]
        if size is None:
            out.append(None)
            continue
        o = out_size(size, k[i], s[i], dilations[i], p[2 * i], p[2 * i + 1])
        if o < 1:
            raise ctx.error(f"the window {k} does not fit the input {list(shape)}")
        out.append(o)
    return out


def _conv3d(ctx: InferContext) -> list[TType]:
    x, w = ctx.inputs
    _check(ctx, x, "input")
    _check(ctx, w, "filter")
    dtype = same_dtype(ctx)
    if x.shape is None or w.shape is None or None in w.shape[:3]:
        return [TType(dtype, None)]
    if w.shape[3] is not None and x.shape[4] is not None and w.shape[3] != x.shape[4]:
        raise ctx.error(f"filter {w} does not fit input {x} (input channels)")
    k = [int(d or 0) for d in w.shape[:3]]
    out = _spatial_out(ctx, x.shape, k, _three(ctx, "dilations"))
    return [TType(dtype, (x.shape[0], *out, w.shape[4]))]


def _shape_attr(ctx: InferContext, name: str, n: int) -> tuple[int | None, ...]:
    v = [int(d) for d in ctx.attrs[name]]
    if len(v) != n:
        raise ctx.error(f"'{name}' must have {n} entries, got {v}")
    return tuple(None if d < 0 else d for d in v)


def _backprop_input(ctx: InferContext) -> list[TType]:
    w, dy = ctx.inputs
    _check(ctx, w, "filter")
    _check(ctx, dy, "gradient")
    shape = _shape_attr(ctx, "input_shape", 5)
    return [TType(same_dtype(ctx), (dy.shape[0] if dy.shape else None, *shape[1:]))]


def _backprop_filter(ctx: InferContext) -> list[TType]:
    x, dy = ctx.inputs
    _check(ctx, x, "input")
    _check(ctx, dy, "gradient")
    return [TType(same_dtype(ctx), _shape_attr(ctx, "filter_shape", 5))]


def _pool3d(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    _check(ctx, x, "input")
    if x.shape is None:
        return [x]
    out = _spatial_out(ctx, x.shape, _three(ctx, "ksize"), [1, 1, 1])
    return [TType(x.dtype, (x.shape[0], *out, x.shape[4]))]


def _max_pool3d_grad(ctx: InferContext) -> list[TType]:
    x, _y, dy = ctx.inputs
    _check(ctx, x, "input")
    _check(ctx, dy, "gradient")
    same_dtype(ctx)
    return [x]


def _avg_pool3d_grad(ctx: InferContext) -> list[TType]:
    (dy,) = ctx.inputs
    _check(ctx, dy, "gradient")
    shape = _shape_attr(ctx, "input_shape", 5)
    return [TType(dy.dtype, (dy.shape[0] if dy.shape else None, *shape[1:]))]


_SHAPE = AttrSpec("ints", REQUIRED)
_NO_GRAD = ("3-D ops come from TF graphs, whose gradients TF's own gradient ops compute; no "
            "pytfrt.grad rule yet")

define("conv3d", ("x", "w"), _conv3d, dict(_CONV), family="volume", no_grad=_NO_GRAD)
define("conv3d_backprop_input", ("w", "dy"), _backprop_input,
       {**_CONV, "input_shape": _SHAPE}, family="volume", no_grad=_NO_GRAD)
define("conv3d_backprop_filter", ("x", "dy"), _backprop_filter,
       {**_CONV, "filter_shape": _SHAPE}, family="volume", no_grad=_NO_GRAD)
define("max_pool3d", ("x",), _pool3d, dict(_POOL), family="volume", no_grad=_NO_GRAD)
define("avg_pool3d", ("x",), _pool3d, dict(_POOL), family="volume", no_grad=_NO_GRAD)
define("max_pool3d_grad", ("x", "y", "dy"), _max_pool3d_grad, dict(_POOL), family="volume",
       no_grad=_NO_GRAD)
define("avg_pool3d_grad", ("dy",), _avg_pool3d_grad, {**_POOL, "input_shape": _SHAPE},
       family="volume", no_grad=_NO_GRAD)
