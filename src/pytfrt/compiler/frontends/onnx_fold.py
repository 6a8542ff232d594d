"""Import-time evaluation of the simple ONNX ops exported models fold, in NumPy.

The ONNX front end evaluates a node whose inputs are all known at import time
(:meth:`pytfrt.compiler.frontends.onnx_mapping.OnnxGraphImporter._evaluate`).  ONNX's reference
implementation (``onnx.reference``) does that for every op, but needs the ``onnx`` package,
whose import costs more memory than the import itself (:mod:`.onnx_proto`).  The nodes
exporters leave to fold are few and simple: ``Constant``, ``Identity``, ``ConstantOfShape``
and the shape arithmetic around ``Reshape`` (``Shape``, ``Gather``, ``Squeeze``,
``Unsqueeze``, ``Concat``, ``Add``/``Sub``/``Mul``) -- BERT's and GPT-2's exports fold only
these (the zoo's small transformer also ``Slice``, ``Div``, ``Mod``, ``Cast``, ``Sqrt``).
:func:`fold` evaluates them exactly as ``onnx.reference`` does (same NumPy calls,
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

from pytfrt.compiler.frontends.onnx_proto import (
    FIXED_TYPES,
    TensorProto,
    attribute_value,
    np_dtype,
    to_array,
)

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


def _truncating_divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``Div``: integers rounded toward zero (C's division, as ``onnx.reference``)."""
    if x.dtype.kind not in "iu":
        return np.asarray(np.divide(x, y))
    q, r = np.floor_divide(x, y), np.remainder(x, y)
    return np.asarray(q + ((r != 0) & ((x < 0) ^ (y < 0))).astype(q.dtype))


_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], Any]] = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": _truncating_divide}


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


@_folder("Mod")
def _mod(ins: Sequence[np.ndarray], attrs: dict[str, Any], opset: int) -> np.ndarray | None:
    if (len(ins) != 2 or set(attrs) - {"fmod"} or opset < 13 or ins[0].dtype != ins[1].dtype
            or ins[0].dtype.kind not in "iuf"):
        return None
    fmod = int(attrs.get("fmod", 0))
    if fmod not in (0, 1) or (fmod == 0 and ins[0].dtype.kind == "f"):
        return None  # (Mod of floats must be fmod=1)
    return np.asarray((np.fmod if fmod else np.mod)(ins[0], ins[1]))


@_folder("Sqrt")
def _sqrt(ins: Sequence[np.ndarray], attrs: dict[str, Any], opset: int) -> np.ndarray | None:
    if len(ins) != 1 or attrs or ins[0].dtype.kind != "f":
        return None
    return np.asarray(np.sqrt(ins[0]).astype(ins[0].dtype))


@_folder("Cast")
def _cast(ins: Sequence[np.ndarray], attrs: dict[str, Any], opset: int) -> np.ndarray | None:
    """Between the fixed-width numeric types other than bfloat16 (``astype``, as
    ``onnx.reference``; its saturation and rounding modes concern float8 only)."""
    if (len(ins) != 1 or "to" not in attrs or set(attrs) - {"to", "saturate", "round_mode"}
            or ins[0].dtype.kind not in "biuf" or opset < 13):
        return None
    to = int(attrs["to"])
    if to not in FIXED_TYPES or to == TensorProto.BFLOAT16:
        return None
    return np.asarray(ins[0].astype(np_dtype(to)))


@_folder("Slice")
def _slice(ins: Sequence[np.ndarray], attrs: dict[str, Any], opset: int) -> np.ndarray | None:
    """Python slicing of the data by ``starts``/``ends``[/``axes``[/``steps``]] (which clamps
    as ONNX's Slice does), as ``onnx.reference``."""
    if not 3 <= len(ins) <= 5 or attrs or opset < 13 or ins[0].ndim == 0:
        return None
    data, *index = ins
    if any(v.dtype.kind != "i" or v.ndim > 1 for v in index):
        return None
    starts, ends, *rest = (np.atleast_1d(v) for v in index)
    axes = rest[0] if rest else np.arange(len(starts))
    steps = rest[1] if len(rest) > 1 else np.ones(len(starts), np.int64)
    if not len(starts) == len(ends) == len(axes) == len(steps) or not np.all(steps):
        return None
    slices = [slice(0, n) for n in data.shape]
    for st, en, ax, sp in zip(starts, ends, axes, steps, strict=True):
        slices[int(ax)] = slice(int(st), int(en), int(sp))
    return np.asarray(data[tuple(slices)])


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
