"""TF 3-D convolution and pooling (``NDHWC``) and their gradient ops -> the ``volume`` family.

``Conv3D``, ``Conv3DBackpropInputV2`` (also Keras' ``Conv3DTranspose``),
``Conv3DBackpropFilterV2``, ``MaxPool3D``, ``AvgPool3D``, ``MaxPool3DGrad`` and
``AvgPool3DGrad`` become the ops of :mod:`pytfrt.compiler.ops.volume`.  ``SAME`` padding is
resolved here into explicit pads (TF's rule, :func:`~pytfrt.backends.cpu._geometry.same_pad`),
which needs the spatial sizes at import time; the shape operands of the gradient ops must be
known but for the batch.  Pure functions of their node.
"""

from __future__ import annotations

from typing import Any

from pytfrt.backends.cpu._geometry import same_pad
from pytfrt.compiler.frontends.tf_registry import tf_op
from pytfrt.compiler.frontends.tf_values import TV, ConversionError, attr


def _window(node: Any, name: str, default: int = 1) -> list[int]:
    v = attr(node, name, [default] * 5)
    if len(v) != 5 or int(v[0]) != 1 or int(v[4]) != 1:
        raise ConversionError(f"'{name}' {v} (batch and channel entries must be 1)")
    return [int(i) for i in v[1:4]]


def _attrs(node: Any, spatial: Any, k: list[int], dilated: bool) -> dict[str, Any]:
    """``strides``, ``pads`` (and ``dilations`` for a convolution) of a 3-D window node."""
    if attr(node, "data_format", "NDHWC") != "NDHWC":
        raise ConversionError("only the NDHWC layout is supported (TF's CPU layout)")
    strides = _window(node, "strides")
    dilations = _window(node, "dilations") if dilated else [1, 1, 1]
    padding = attr(node, "padding", "VALID")
    pads = [0] * 6
    if padding == "SAME":
        if spatial is None or any(d is None for d in spatial):
            raise ConversionError("SAME padding needs the spatial sizes at import time")
        for i in range(3):
            pads[2 * i], pads[2 * i + 1] = same_pad(int(spatial[i]), k[i], strides[i],
                                                    dilations[i])
    elif padding != "VALID":
        raise ConversionError(f"padding {padding!r} (SAME or VALID)")
    out: dict[str, Any] = {"strides": strides, "pads": pads}
    if dilated:
        out["dilations"] = dilations
    return out


def _static_filter(w: Any) -> list[int]:
    if w is None or len(w) != 5 or any(d is None for d in w):
        raise ConversionError("the 3-D filter's shape must be static")
    return [int(d) for d in w]


def _spatial(shape: Any) -> Any:
    return None if shape is None else list(shape[1:4])


def _shape_operand(tv: TV, what: str) -> list[int]:
    """A shape operand known but for its batch entry (``-1`` there)."""
    dims = tv.known_vector()
    if dims is None or len(dims) != 5 or any(d is None for d in dims[1:]):
        raise ConversionError(f"the {what} must be known at import time (but for the batch)")
    return [-1 if d is None else int(d) for d in dims]


@tf_op("Conv3D", tg="`conv3d`", note="NDHWC", family="tf_volume")
def _conv3d(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, w = ins
    k = _static_filter(w.shape)
    if x.shape is not None and x.shape[4] is not None and x.shape[4] != k[3]:
        raise ConversionError("grouped 3-D convolutions are not supported")
    return [cx.op("conv3d", [x, w], **_attrs(node, _spatial(x.shape), k[:3], True))]


@tf_op("Conv3DBackpropInputV2", tg="`conv3d_backprop_input`",
       note="NDHWC; also Keras' `Conv3DTranspose`", family="tf_volume")
def _conv3d_backprop_input(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    sizes, w, dy = ins
    shape = _shape_operand(sizes, "input shape")
    k = _static_filter(w.shape)
    a = _attrs(node, shape[1:4], k[:3], True)
    return [cx.op("conv3d_backprop_input", [w, dy], input_shape=shape, **a)]


@tf_op("Conv3DBackpropFilterV2", tg="`conv3d_backprop_filter`", note="NDHWC",
       family="tf_volume")
def _conv3d_backprop_filter(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, sizes, dy = ins
    fs = _shape_operand(sizes, "filter shape")
    if -1 in fs:
        raise ConversionError("the filter shape must be static")
    a = _attrs(node, _spatial(x.shape), fs[:3], True)
    return [cx.op("conv3d_backprop_filter", [x, dy], filter_shape=fs, **a)]


@tf_op("MaxPool3D", "AvgPool3D", tg="`max_pool3d` / `avg_pool3d`",
       note="NDHWC; the average excludes padding, as TF", family="tf_volume")
def _pool3d(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    (x,) = ins
    k = _window(node, "ksize")
    op = "max_pool3d" if node.op == "MaxPool3D" else "avg_pool3d"
    return [cx.op(op, [x], ksize=k, **_attrs(node, _spatial(x.shape), k, False))]


@tf_op("MaxPool3DGrad", tg="`max_pool3d_grad`", note="to each window's first maximum, as TF",
       family="tf_volume")
def _max_pool3d_grad(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, y, dy = ins
    k = _window(node, "ksize")
    a = _attrs(node, _spatial(x.shape), k, False)
    return [cx.op("max_pool3d_grad", [x, y, dy], ksize=k, **a)]


@tf_op("AvgPool3DGrad", tg="`avg_pool3d_grad`", family="tf_volume")
def _avg_pool3d_grad(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    sizes, dy = ins
    shape = _shape_operand(sizes, "input shape")
    k = _window(node, "ksize")
    a = _attrs(node, shape[1:4], k, False)
    return [cx.op("avg_pool3d_grad", [dy], input_shape=shape, ksize=k, **a)]
