"""What the TensorFlow importer knows about each TF tensor while it translates a graph.

A TF tensor becomes a :class:`TV` (translated value). Most carry a ``tg`` IR value; some are
known better than that:

* ``const``: the tensor's value is known at import time (a TF ``Const``, or a shape computation
  folded by :mod:`.tf_fold`). It is materialised as a ``tg.constant`` only when an op needs it
  as an operand, so shape arithmetic never reaches the compiled program.
* ``partial``: a 1-D integer vector (a shape) whose entries are partly known, ``None`` where a
  dimension is dynamic (``tf.shape(x)`` of a ``[?, 784]`` tensor is ``[None, 784]``). Reshape,
  Fill and friends use it to keep static shapes with a single ``-1``.
* ``resource``: a TF resource handle bound to a variable; it is never a runtime value: ops
  that use it (``ReadVariableOp``, ``AssignVariableOp``...) name the variable.

Also here: TF dtype and attribute decoding, shared by every converter module.
Thread-safety: a ``TV`` belongs to one import (one thread).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pytfrt.compiler.types import dtype_name, np_dtype

_TF_TO_TG = {
    "float32": "f32",
    "float64": "f64",
    "float16": "f16",
    "bfloat16": "bf16",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "ui8",
    "uint16": "ui16",
    "uint32": "ui32",
    "uint64": "ui64",
    "bool": "i1",
    "string": "string",
}


class ConversionError(Exception):
    """Internal: a converter found a node it cannot express (turned into UnsupportedOpError)."""


class ResourceRef:
    """A resource handle bound to one variable (by its name in the compiled model)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"ResourceRef({self.name!r})"


class OtherResource(ResourceRef):
    """A captured resource that is not a variable (a lookup table, an iterator...): ``handle``
    is the eager TF handle, for converters that can read what it holds (a table's contents)."""

    __slots__ = ("handle",)

    def __init__(self, name: str, handle: Any) -> None:
        super().__init__(name)
        self.handle = handle


class Sym:
    """An unknown dimension known to be dimension ``axis`` of tensor ``tv`` (``tf.shape(x)[0]``).

    Rides along a partial shape vector (:attr:`TV.syms`), so a reshape of ``x`` to
    ``[tf.shape(x)[0], -1]`` keeps a static target. Equal when tensor and axis are the same.
    """

    __slots__ = ("tv", "axis")

    def __init__(self, tv: TV, axis: int) -> None:
        self.tv = tv
        self.axis = axis

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sym) and other.tv is self.tv and other.axis == self.axis

    def __hash__(self) -> int:
        return hash((id(self.tv), self.axis))


class TV:
    """One translated TF tensor: a tg value, a known constant, a partial shape or a resource.

    Attributes:
        const: the full value when known at import time.
        partial: for 1-D (or scalar) integer tensors, entries with ``None`` where unknown.
        resource: the variable a resource handle refers to.
        dtype: the tg element type name (``"f32"``...), always set except for resources.
        shape: the static shape (``None`` dims dynamic; ``None`` if the rank is unknown).
        name: for a constant, the weight name to give it (a variable's or node's name).
        list_elem: for a TF TensorList (held as the stacked tensor ``[n, *elem]``), the element
            shape as far as known (see :mod:`.tf_lists`).
        list_items: for a TensorList whose every element is known at import time (a while
            loop's gradient accumulator, filled by an unrolled loop), the elements' TVs; the
            stacked tensor is then built only if an op needs it.
        dense_rows: for the indices, values and shape of a sparse tensor that holds every
            entry of a dense ``[batch, k]`` tensor in row-major order (a ``SparseCross`` of
            dense columns), that dense tensor: ``SparseToDense`` of the three is that tensor.
        parts: for a complex tensor (the dialect has no complex type), its real and
            imaginary parts, two real tensors of one shape (see :mod:`.tf_complex`).
    """

    __slots__ = (
        "_value",
        "_thunk",
        "const",
        "partial",
        "resource",
        "dtype",
        "shape",
        "name",
        "list_elem",
        "list_items",
        "syms",
        "dense_rows",
        "parts",
    )

    def __init__(
        self,
        value: Any = None,
        *,
        const: np.ndarray | None = None,
        partial: list[int | None] | None = None,
        thunk: Callable[[], Any] | None = None,
        resource: ResourceRef | None = None,
        dtype: str | None = None,
        shape: Any = ...,
        name: str | None = None,
    ) -> None:
        self._value = value
        self.name = name
        self.list_elem: tuple[int | None, ...] | None = None
        self.list_items: list[TV] | None = None
        self.syms: list[Sym | None] | None = None
        self.dense_rows: TV | None = None
        self.parts: tuple[TV, TV] | None = None
        self._thunk = thunk
        self.const = const
        self.partial = partial
        self.resource = resource
        if const is not None:
            dtype = dtype or np_to_tg(const.dtype)
            shape = tuple(const.shape)
        elif value is not None:
            dtype = dtype or value.dtype
            if shape is ...:
                shape = tuple(value.shape) if value.shape is not None else None
        self.dtype = dtype
        self.shape: tuple[int | None, ...] | None = None if shape is ... else shape

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def known_vector(self) -> list[int | None] | None:
        """The entries of an integer vector as far as known (``const`` or ``partial``)."""
        if self.const is not None:
            return [int(v) for v in np.asarray(self.const).reshape(-1)]
        return self.partial

    def __repr__(self) -> str:
        kind = (
            "const"
            if self.const is not None
            else "partial"
            if self.partial is not None
            else "resource"
            if self.resource is not None
            else "value"
        )
        return f"TV({kind}, {self.dtype}, {self.shape})"


def tf_dtype_name(dt: Any) -> str:
    """The tg element type of a TF ``DataType`` enum value or ``tf.DType``."""
    import tensorflow as tf

    name = tf.dtypes.as_dtype(dt).name
    if name not in _TF_TO_TG:
        raise ConversionError(f"TF dtype {name} has no tg element type")
    return _TF_TO_TG[name]


def np_to_tg(dt: Any) -> str:
    """The tg element type of a NumPy dtype."""
    return dtype_name(dt)


def tg_to_np(dtype: str) -> np.dtype[Any]:
    """The NumPy dtype of a tg element type."""
    return np_dtype(dtype)


# -- node attributes --------------------------------------------------------------------------


def attr(node: Any, name: str, default: Any = ...) -> Any:
    """A NodeDef attribute decoded to Python (ints, floats, bytes -> str, lists, dtypes, funcs).

    Raises:
        ConversionError: the attribute is missing and no default was given.
    """
    if name not in node.attr:
        if default is ...:
            raise ConversionError(f"attribute '{name}' missing")
        return default
    a = node.attr[name]
    kind = a.WhichOneof("value")
    if kind == "s":
        return a.s.decode()
    if kind in ("i", "f", "b"):
        return getattr(a, kind)
    if kind == "type":
        return a.type
    if kind == "shape":
        if a.shape.unknown_rank:
            return None
        return tuple(None if d.size < 0 else int(d.size) for d in a.shape.dim)
    if kind == "func":
        return a.func.name
    if kind == "tensor":
        import tensorflow as tf

        return tf.make_ndarray(a.tensor)
    if kind == "list":
        lst = a.list
        if lst.func:
            return [f.name for f in lst.func]
        if lst.shape:
            return [
                None
                if s.unknown_rank
                else tuple(None if d.size < 0 else int(d.size) for d in s.dim)
                for s in lst.shape
            ]
        for field in ("i", "f", "s", "b", "type"):
            values = list(getattr(lst, field))
            if values:
                return [v.decode() if isinstance(v, bytes) else v for v in values]
        return []
    return default if default is not ... else None
