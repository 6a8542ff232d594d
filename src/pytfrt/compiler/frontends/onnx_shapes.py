"""Partially known shape vectors for the ONNX front end.

Exporters compute reshape targets with small integer subgraphs (``Shape`` -> ``Gather`` ->
``Unsqueeze`` -> ``Concat`` -> ``Reshape``).  When only some dimensions are dynamic (typically
the batch), most elements of those vectors are still known at import time.  This module tracks,
per ONNX value, a :class:`Partial` -- its elements as ints or ``None`` (unknown until run time)
-- through the shape ops, so that

* a node whose result becomes fully known is not emitted at all (the importer binds the
  constant), and
* ``Reshape`` with a target that has a single unknown element uses the attribute form with
  ``-1`` there, instead of building the shape at run time.

Only element-wise integer arithmetic on these vectors is evaluated here, for vectors with
unknown elements; a node whose inputs are all known is folded through pytfrt's own ops instead
(:meth:`~pytfrt.compiler.frontends.onnx_mapping.OnnxGraphImporter._fold_emitted`).
Pure functions of the importer's state; not thread-safe beyond that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from pytfrt.compiler.frontends.onnx_mapping import OnnxGraphImporter

MAX_ELEMENTS = 64
"""Integer vectors longer than this are not tracked."""


@dataclass(frozen=True)
class Partial:
    """A rank-0 or rank-1 integer value whose elements are known (int) or not (``None``)."""

    elements: tuple[int | None, ...]
    scalar: bool
    dtype: np.dtype

    @property
    def known(self) -> bool:
        return all(e is not None for e in self.elements)

    def array(self) -> np.ndarray:
        """The value as an array (all elements must be known)."""
        a = np.asarray(self.elements, dtype=self.dtype)
        return a.reshape(()) if self.scalar else a


def partial_of(imp: OnnxGraphImporter, name: str) -> Partial | None:
    """What is known about value ``name`` (``None``: not an integer vector we track)."""
    if not name:
        return None
    k = imp.known.get(name)
    if k is not None:
        if k.dtype.kind in "iu" and k.ndim <= 1 and k.size <= MAX_ELEMENTS:
            return Partial(tuple(int(v) for v in k.reshape(-1)), k.ndim == 0, k.dtype)
        return None
    return imp.partial.get(name)


def _attr(imp: OnnxGraphImporter, node: Any, key: str, default: Any) -> Any:
    return imp.attrs(node).get(key, default)


def _const_ints(imp: OnnxGraphImporter, node: Any, i: int) -> list[int] | None:
    if len(node.input) <= i or not node.input[i]:
        return None
    k = imp.known.get(node.input[i])
    return None if k is None else [int(v) for v in k.reshape(-1)]


def _arith(op: str, a: int | None, b: int | None) -> int | None:
    if a is None or b is None:
        return None
    if op == "Add":
        return a + b
    if op == "Sub":
        return a - b
    if op == "Mul":
        return a * b
    if b == 0:
        return None
    if op == "Div":  # ONNX integer division truncates toward zero
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return a % b  # Mod with fmod = 0: the divisor's sign, as Python


def infer(imp: OnnxGraphImporter, node: Any) -> Partial | None:
    """The partial value of ``node``'s first output, or ``None`` if not tracked."""
    t = node.op_type
    ins = [partial_of(imp, n) for n in node.input]
    first = ins[0] if ins else None
    i64 = np.dtype(np.int64)
    if t == "Shape":
        v = imp.values.get(node.input[0])
        if v is None or v.shape is None:
            return None
        dims = v.shape[slice(_attr(imp, node, "start", None), _attr(imp, node, "end", None))]
        return Partial(tuple(dims), False, i64)
    if first is None:
        return None
    if t == "Identity":
        return first
    if t == "Cast":
        from pytfrt.compiler.frontends.onnx_proto import np_dtype

        to = np_dtype(int(_attr(imp, node, "to", 7)))
        if to.kind not in "iu":
            return None
        return Partial(first.elements, first.scalar, to)
    if t == "Gather" and not first.scalar and int(_attr(imp, node, "axis", 0)) == 0:
        k = imp.known.get(node.input[1])
        if k is None or k.ndim > 1:
            return None
        n = len(first.elements)
        idx = [int(i) for i in k.reshape(-1)]
        if any(not -n <= i < n for i in idx):
            return None
        return Partial(tuple(first.elements[i] for i in idx), k.ndim == 0, first.dtype)
    if t == "Unsqueeze" and first.scalar:
        axes = _const_ints(imp, node, 1) or list(_attr(imp, node, "axes", []))
        return Partial(first.elements, False, first.dtype) if axes in ([0], [-1]) else None
    if t == "Squeeze" and not first.scalar and len(first.elements) == 1:
        return Partial(first.elements, True, first.dtype)
    if t == "Concat" and int(_attr(imp, node, "axis", 0)) in (0, -1):
        parts = [p for p, n in zip(ins, node.input, strict=True) if n]
        if any(p is None or p.scalar for p in parts):
            return None
        elements = tuple(e for p in parts if p is not None for e in p.elements)
        return Partial(elements, False, first.dtype)
    if t == "Slice" and not first.scalar:
        starts, ends = _const_ints(imp, node, 1), _const_ints(imp, node, 2)
        axes = _const_ints(imp, node, 3) or [0]
        steps = _const_ints(imp, node, 4) or [1]
        if starts is None or ends is None or axes not in ([0], [-1]) or len(starts) != 1:
            return None
        return Partial(first.elements[starts[0] : ends[0] : steps[0]], False, first.dtype)
    if t in ("Add", "Sub", "Mul", "Div", "Mod") and len(ins) == 2 and ins[1] is not None:
        if t == "Mod" and int(_attr(imp, node, "fmod", 0)):
            return None
        a, b = first.elements, ins[1].elements
        if len(a) != len(b) and 1 not in (len(a), len(b)):
            return None
        if len(a) == 1:  # broadcast (to an empty vector too)
            a = a * len(b)
        elif len(b) == 1:
            b = b * len(a)
        return Partial(
            tuple(_arith(t, x, y) for x, y in zip(a, b, strict=True)),
            first.scalar and ins[1].scalar,
            first.dtype,
        )
    return None


def reshape_target(imp: OnnxGraphImporter, x: Any, name: str, copy_zero: bool) -> list[int] | None:
    """A static ``reshape {shape}`` target for shape input ``name``, or ``None``.

    ONNX's ``0`` (copy the input's dim) is resolved from ``x``'s static dims; a single unknown
    element becomes ``-1`` (when the target has no ``-1`` already).
    """
    p = partial_of(imp, name)
    if p is None or p.scalar:
        return None
    xs = x.shape
    out: list[int | None] = []
    for i, e in enumerate(p.elements):
        if e == 0 and copy_zero:
            e = xs[i] if xs is not None and i < len(xs) else None
        out.append(e)
    unknown = out.count(None)
    if unknown == 0:
        return [int(e) for e in out if e is not None]
    if unknown == 1 and -1 not in out:
        return [-1 if e is None else int(e) for e in out]
    return None
