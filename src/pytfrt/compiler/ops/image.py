"""Catalogue family: image warps (``projective_transform``), ``matrix_inverse``, ``matrix_solve``.

``projective_transform(images, transforms, output_shape, fill_value) {interpolation,
fill_mode}`` is TF's ``ImageProjectiveTransformV3`` on an NHWC batch (``transforms`` ``[1 or
N, 8]``, ``output_shape`` two ints, ``fill_value`` a scalar); ``matrix_inverse(x)`` inverts
``[..., n, n]``; ``matrix_solve(a, b)`` solves ``a x = b``.  Compute functions:
:mod:`pytfrt.backends.cpu.image_ops`.  No ``pytfrt.grad`` rules (TF's gradient graph of a warp
is another warp by the inverse transform, which the TF front end imports as such): their
``no_grad`` says why.
"""

from __future__ import annotations

from pytfrt.compiler.ops.base import REQUIRED, AttrSpec, InferContext, const_ints, define
from pytfrt.compiler.types import FLOAT_DTYPES, TType


def _projective_transform(ctx: InferContext) -> list[TType]:
    images = ctx.inputs[0]
    if images.dtype not in FLOAT_DTYPES:
        raise ctx.error(f"the images must be floating point, got {images.dtype}")
    if images.shape is not None and len(images.shape) != 4:
        raise ctx.error(f"the images must be NHWC (rank 4), got {images}")
    size = const_ints(ctx, 2)
    oh, ow = (None, None) if size is None or len(size) != 2 else size
    if images.shape is None:
        return [TType(images.dtype, (None, oh, ow, None))]
    return [TType(images.dtype, (images.shape[0], oh, ow, images.shape[3]))]


def _matrix_inverse(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    if x.dtype not in FLOAT_DTYPES:
        raise ctx.error(f"the matrices must be floating point, got {x.dtype}")
    if x.shape is not None and (len(x.shape) < 2 or None not in x.shape[-2:]
                                and x.shape[-1] != x.shape[-2]):
        raise ctx.error(f"expected square matrices [..., n, n], got {x}")
    return [x]


define("projective_transform", ("images", "transforms", "output_shape", "fill_value"),
       _projective_transform,
       {"interpolation": AttrSpec("str", REQUIRED, choices=("nearest", "bilinear")),
        "fill_mode": AttrSpec("str", "constant",
                              choices=("constant", "reflect", "wrap", "nearest"))},
       family="image",
       no_grad="imported from TF graphs, whose gradient is another warp (by the inverse "
               "transform); no pytfrt.grad rule yet")
define("matrix_inverse", ("x",), _matrix_inverse, family="image",
       no_grad="imported from TF graphs (an image warp's inverse transform); no pytfrt.grad "
               "rule yet")


def _matrix_solve(ctx: InferContext) -> list[TType]:
    a, b = ctx.inputs
    if a.dtype not in FLOAT_DTYPES or b.dtype != a.dtype:
        raise ctx.error(f"a and b must have one floating-point type, got {a.dtype}, {b.dtype}")
    return [b]


define("matrix_solve", ("a", "b"), _matrix_solve, family="image",
       no_grad="imported from TF graphs (a perspective warp's coefficients); no pytfrt.grad "
               "rule yet")
