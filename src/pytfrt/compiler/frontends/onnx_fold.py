"""Import-time evaluation of the simple ONNX ops exported models fold, in NumPy.

The ONNX front end evaluates a node whose inputs are all known at import time
(:meth:`pytfrt.compiler.frontends.onnx_mapping.OnnxGraphImporter._evaluate`).  ONNX's reference
implementation (``onnx.reference``) does that for every op, but needs the ``onnx`` package,
whose import costs more memory than the import itself (:mod:`.onnx_proto`).  The nodes
exporters leave to fold are few and simple: ``Constant``, ``Identity``, ``ConstantOfShape``
and the shape arithmetic around ``Reshape`` (``Shape``, ``Gather``, ``Squeeze``,
``Unsqueeze``, ``Concat``, ``Add``/``Sub``/``Mul``) -- BERT's and GPT-2's exports fold only
these.  :func:`fold` evaluates them exactly as ``onnx.reference`` does (same NumPy calls,
same result dtypes; tests compare the two) and returns ``None`` for everything else -- another
op, a case it does not reproduce (attribute references, opsets before 13, mixed dtypes),
or an input the op rejects -- which the caller then hands to ``onnx.reference``, so the
results and errors are ``onnx.reference``'s in every case.

Thread-safety: pure functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pytfrt.compiler.frontends.onnx_proto import attribute_value, to_array

Folder = Callable[[Sequence[np.ndarray], dict[str, Any], int], np.ndarray | None]

_FOLDERS: dict[str, Folder] = {}


def _folder(*op_types: str) -> Callable[[Folder], Folder]:
    def register(fn: Folder) -> Folder:
        for t in op_types:
            _FOLDERS[t] = fn
        return fn

    return register


def fold(node: Any, inputs: Sequence[np.ndarray | None], opset: int) -> list[np.ndarray] | None:
    """The outputs of default-domain ``node`` on the known ``inputs`` (in input order, ``None``
    for an absent optional input), or ``None`` when this module does not evaluate it (see the
    module docstring)."""
    fn = _FOLDERS.get(node.op_type)
    if (fn is None or node.domain not in ("", "ai.onnx") or len(node.output) != 1
            or any(a.ref_attr_name for a in node.attribute)
            or any(x is None for x in inputs)):
        return None
    attrs = {a.name: attribute_value(a) for a in node.attribute}
    try:
        with np.errstate(all="ignore"):
            out = fn(inputs, attrs, opset)  # type: ignore[arg-type]
    except (ValueError, TypeError, IndexError):  # onnx.reference says what is wrong
        return None
    return None if out is None else [out]


@_folder("Identity")
def _identity(ins: Sequence[np.ndarray], attrs: dict[str, Any], opset: int) -> np.ndarray | None:
    return ins[0].copy() if len(ins) == 1 and not attrs else None


_CONSTANT_LISTS = {"value_float": np.float32, "value_floats": np.float32,
                   "value_int": np.int64, "value_ints": np.int64}


@_folder("Constant")
def _constant(ins: Sequence[np.ndarray], attrs: dict[str, Any], opset: int) -> np.ndarray | None:
    if ins or len(attrs) != 1 or opset < 13:
        return None
    (name, value), = attrs.items()
    if name == "value":
        return to_array(value)
    dtype = _CONSTANT_LISTS.get(name)
    return None if dtype is None else np.array(value, dtype=dtype)


@_folder("ConstantOfShape")
def _constant_of_shape(ins: Sequence[np.ndarray], attrs: dict[str, Any], opset: int
                       ) -> np.ndarray | None:
    if len(ins) != 1 or set(attrs) - {"value"}:
        return None
    value = to_array(attrs["value"]) if "value" in attrs else np.array(0, dtype=np.float32)
    if value.size != 1 or value.dtype.kind not in "biuf":
        return None
    return np.full(tuple(ins[0]), value.flat[0])


@_folder("Shape")
def _shape(ins: Sequence[np.ndarray], attrs: dict[str, Any], opset: int) -> np.ndarray | None:
    return np.array(ins[0].shape, dtype=np.int64) if len(ins) == 1 and not attrs else None


@_folder("Squeeze")
def _squeeze13(ins: Sequence[np.ndarray], attrs: dict[str, Any], opset: int) -> np.ndarray | None:
    if opset < 13 or attrs or len(ins) != 2 or ins[1].ndim != 1 or len(ins[1]) == 0:
        return None
    return np.squeeze(ins[0], axis=tuple(int(a) for a in ins[1]))


@_folder("Unsqueeze")
def _unsqueeze13(ins: Sequence[np.ndarray], attrs: dict[str, Any], opset: int
                 ) -> np.ndarray | None:
    if opset < 13 or attrs or len(ins) != 2 or ins[1].ndim != 1 or len(ins[1]) == 0:
        return None
    return np.expand_dims(ins[0], axis=tuple(int(a) for a in ins[1]))


@_folder("Concat")
def _concat(ins: Sequence[np.ndarray], attrs: dict[str, Any], opset: int) -> np.ndarray | None:
    if not ins or set(attrs) != {"axis"} or any(x.ndim == 0 for x in ins):
        return None
    axis = int(attrs["axis"])
    if not -ins[0].ndim <= axis < ins[0].ndim or len({x.dtype for x in ins}) != 1:
        return None
    return np.concatenate(tuple(ins), axis)


_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}


def _make_binary(op_type: str) -> Folder:
    ufunc = _BINARY[op_type]

    def run(ins: Sequence[np.ndarray], attrs: dict[str, Any], opset: int) -> np.ndarray | None:
        if (len(ins) != 2 or attrs or opset < 13 or ins[0].dtype != ins[1].dtype
                or ins[0].dtype.kind not in "iuf"):
            return None
        return np.asarray(ufunc(ins[0], ins[1]))

    return run


for _t in _BINARY:
    _FOLDERS[_t] = _make_binary(_t)


@_folder("Gather")
def _gather(ins: Sequence[np.ndarray], attrs: dict[str, Any], opset: int) -> np.ndarray | None:
    if len(ins) != 2 or set(attrs) - {"axis"} or ins[1].dtype.kind != "i":
        return None
    x, idx = ins
    axis = int(attrs.get("axis", 0))
    if x.ndim == 0 or not -x.ndim <= axis < x.ndim:
        return None
    n = x.shape[axis]
    if idx.size and (int(idx.min()) < -n or int(idx.max()) >= n):
        return None
    return np.asarray(np.take(x, idx, axis=axis))


@_folder("Reshape")
def _reshape(ins: Sequence[np.ndarray], attrs: dict[str, Any], opset: int) -> np.ndarray | None:
    if len(ins) != 2 or set(attrs) - {"allowzero"} or ins[1].ndim != 1 or opset < 13:
        return None
    shape = np.copy(ins[1])
    if not int(attrs.get("allowzero", 0)):
        zeros = np.where(ins[1] == 0)
        if zeros[0].size and int(zeros[0].max()) >= ins[0].ndim:
            return None
        shape[zeros] = np.array(ins[0].shape)[zeros]
    return np.reshape(ins[0], shape)
