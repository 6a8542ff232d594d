"""Compute functions of the graph dialect's image-warp ops (catalogue family ``image``).

``projective_transform`` is TF's ``ImageProjectiveTransformV3`` (what Keras' ``RandomRotation``,
``RandomZoom``, ``RandomTranslation``, ``RandomShear`` apply): output pixel ``(y, x)`` of image
``b`` samples the input at ``((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k)``, ``k = c0 x +
c1 y + 1``, from the row ``[a0, a1, a2, b0, b1, b2, c0, c1]`` of ``transforms`` (one row, or
one per image); a sample point outside the image is first mapped back by ``fill_mode``
(``reflect``, ``wrap``, ``nearest``; ``constant`` keeps it), then read with ``nearest`` or
``bilinear`` interpolation, every neighbour outside the image reading ``fill_value`` -- as TF's
CPU kernel (``image_ops.h``).  ``matrix_inverse`` inverts a batch of square matrices (the
transform's gradient applies the inverse transform), ``matrix_solve`` solves ``a x = b`` for a
batch (``RandomPerspective``'s coefficients).

Operands positional, attributes keyword-only.  Pure functions: thread-safe.
"""

from __future__ import annotations

import numpy as np

from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError

GRAPH_OPS = OpTable()
"""Op name -> compute function."""


def _map(coord: np.ndarray, n: int, mode: str) -> np.ndarray:
    """Sample coordinates along an axis of ``n`` pixels mapped into it (TF's MapCoordinate)."""
    if mode == "constant":
        return coord
    if n <= 1:
        return np.zeros_like(coord)
    if mode == "nearest":
        return np.clip(coord, 0, n - 1)
    c = coord.astype(np.float64, copy=True)
    low, high = c < 0, c > n - 1  # one branch per coordinate, as TF's if / else if
    if mode == "reflect":
        sz2 = 2.0 * n
        cl = c[low]
        far = cl < -sz2
        cl[far] = sz2 * np.trunc(-cl[far] / sz2) + cl[far]
        c[low] = np.where(cl < -n, cl + sz2, -cl - 1)
        ch = c[high]
        ch = ch - sz2 * np.trunc(ch / sz2)
        c[high] = np.where(ch >= n, sz2 - ch - 1, ch)
    elif mode == "wrap":
        sz = n - 1.0
        c[low] = c[low] + n * (np.trunc(-c[low] / sz) + 1)
        c[high] = c[high] - n * np.trunc(c[high] / sz)
    else:
        raise OpError(f"projective_transform: unknown fill mode {mode!r}")
    return np.clip(c, 0, n - 1)


@GRAPH_OPS.op("projective_transform")
def projective_transform(images: np.ndarray, transforms: np.ndarray, output_shape: np.ndarray,
                         fill_value: np.ndarray, *, interpolation: str,
                         fill_mode: str) -> np.ndarray:
    """TF's ``ImageProjectiveTransformV3`` on an NHWC batch (see the module docstring)."""
    if images.ndim != 4 or transforms.ndim != 2 or transforms.shape[1] != 8:
        raise OpError(f"projective_transform: images must be NHWC and transforms [N, 8], got "
                      f"{list(images.shape)} and {list(transforms.shape)}")
    b, h, w, ch = images.shape
    if transforms.shape[0] not in (1, b):
        raise OpError(f"projective_transform: {transforms.shape[0]} transforms for {b} images")
    oh, ow = (int(v) for v in np.asarray(output_shape).reshape(-1)[:2])
    t = np.broadcast_to(transforms.astype(np.float64), (b, 8))[:, :, None, None]
    ys, xs = np.mgrid[0:oh, 0:ow].astype(np.float64)
    k = t[:, 6] * xs + t[:, 7] * ys + 1.0
    in_x = _map((t[:, 0] * xs + t[:, 1] * ys + t[:, 2]) / k, w, fill_mode)
    in_y = _map((t[:, 3] * xs + t[:, 4] * ys + t[:, 5]) / k, h, fill_mode)
    fill = np.asarray(fill_value, images.dtype).reshape(())
    bi = np.arange(b)[:, None, None]

    def read(y: np.ndarray, x: np.ndarray) -> np.ndarray:
        inside = (y >= 0) & (y < h) & (x >= 0) & (x < w)
        yi = np.clip(y, 0, h - 1).astype(np.int64)
        xi = np.clip(x, 0, w - 1).astype(np.int64)
        return np.where(inside[..., None], images[bi, yi, xi], fill)

    if interpolation == "nearest":
        out = read(np.where(in_y >= 0, np.floor(in_y + 0.5), np.ceil(in_y - 0.5)),
                   np.where(in_x >= 0, np.floor(in_x + 0.5), np.ceil(in_x - 0.5)))
    elif interpolation == "bilinear":
        y0, x0 = np.floor(in_y), np.floor(in_x)
        y1, x1 = y0 + 1, x0 + 1
        wx0, wx1 = (x1 - in_x)[..., None], (in_x - x0)[..., None]
        top = wx0 * read(y0, x0) + wx1 * read(y0, x1)
        bottom = wx0 * read(y1, x0) + wx1 * read(y1, x1)
        out = (y1 - in_y)[..., None] * top + (in_y - y0)[..., None] * bottom
    else:
        raise OpError(f"projective_transform: unknown interpolation {interpolation!r}")
    del ch
    return np.ascontiguousarray(out.astype(images.dtype, copy=False))


@GRAPH_OPS.op("matrix_inverse")
def matrix_inverse(x: np.ndarray) -> np.ndarray:
    """The inverse of each square matrix of ``[..., n, n]`` (``OpError`` if one is singular)."""
    try:
        return np.linalg.inv(x).astype(x.dtype, copy=False)
    except np.linalg.LinAlgError as exc:
        raise OpError(f"matrix_inverse: {exc}") from None


@GRAPH_OPS.op("matrix_solve")
def matrix_solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``x`` with ``a @ x = b`` for ``a`` ``[..., n, n]``, ``b`` ``[..., n, k]``."""
    try:
        return np.linalg.solve(a, b).astype(b.dtype, copy=False)
    except (np.linalg.LinAlgError, ValueError) as exc:
        raise OpError(f"matrix_solve: {exc}") from None
