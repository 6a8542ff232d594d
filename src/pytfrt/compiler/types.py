"""Tensor types of the graph dialect: :class:`TType` (dtype name + shape) and its xDSL form.

A ``TType`` is what the catalogue's inference functions compute: ``dtype`` is an element type
name of ``docs/graph_dialect.md`` (``f32``, ``i1``, ``ui8``, ``string`` ...) and ``shape`` a tuple
with ``None`` for a dimension unknown until run time, or ``None`` for an unknown rank.
:func:`to_xdsl` / :func:`from_xdsl` convert to and from MLIR's builtin ``tensor<...>`` types.
Immutable and thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pytfrt.compiler.errors import GraphError
from pytfrt.tensor.dtype import DTypeError, dtype_from_numpy
from pytfrt.tensor.dtype import np_dtype as np_dtype  # the compiler's name for it (re-exported)

Shape = tuple[int | None, ...]

DTYPES = (
    "f16", "bf16", "f32", "f64", "i1", "i8", "i16", "i32", "i64",
    "ui8", "ui16", "ui32", "ui64", "string",
)  # fmt: skip
FLOAT_DTYPES = frozenset({"f16", "bf16", "f32", "f64"})
INT_DTYPES = frozenset({"i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64"})


@dataclass(frozen=True)
class TType:
    """A tensor type: element type name and shape (``None`` dims are dynamic)."""

    dtype: str
    shape: Shape | None

    @property
    def rank(self) -> int | None:
        """The rank, or ``None`` if unknown."""
        return None if self.shape is None else len(self.shape)

    @property
    def static(self) -> bool:
        """True if every dimension is known."""
        return self.shape is not None and all(d is not None for d in self.shape)

    def __str__(self) -> str:
        elem = "!tg.string" if self.dtype == "string" else self.dtype
        if self.shape is None:
            return f"tensor<*x{elem}>"
        dims = "".join(("?" if d is None else str(d)) + "x" for d in self.shape)
        return f"tensor<{dims}{elem}>"


def check_dtype(name: str) -> str:
    """``name`` if it is an element type of the dialect (``bool`` is read as ``i1``).

    Raises:
        GraphError: for an unknown name.
    """
    if name == "bool":
        return "i1"
    if name not in DTYPES:
        raise GraphError(f"unknown element type '{name}' (expected one of {', '.join(DTYPES)})")
    return name


def dtype_name(dtype: Any) -> str:
    """The element type name of a NumPy dtype (or anything ``np.dtype`` accepts).

    Raises:
        GraphError: for a dtype the dialect has no name for.
    """
    d = np.dtype(dtype)
    if d.kind in "OUS":
        return "string"
    try:
        return check_dtype(dtype_from_numpy(d).mlir_name)
    except (DTypeError, GraphError):
        raise GraphError(f"NumPy dtype {d} has no graph-dialect element type") from None


def normalize_shape(shape: Any) -> Shape | None:
    """A shape tuple from a sequence of ints/``None`` (``-1`` also means dynamic).

    Raises:
        GraphError: for anything else.
    """
    if shape is None:
        return None
    try:
        dims = tuple(shape)
    except TypeError:
        raise GraphError(f"a shape must be a sequence, got {shape!r}") from None
    out: list[int | None] = []
    for d in dims:
        if d is None or (isinstance(d, int | np.integer) and int(d) == -1):
            out.append(None)
        elif isinstance(d, int | np.integer) and int(d) >= 0:
            out.append(int(d))
        else:
            raise GraphError(f"bad dimension {d!r} in shape {shape!r}")
    return tuple(out)


def ttype_of_array(array: np.ndarray) -> TType:
    """The static type of an array."""
    return TType(dtype_name(array.dtype), tuple(int(d) for d in array.shape))


# -- xDSL conversion (imported lazily: this module is also used by the runtime-free parts) ----
def to_xdsl(t: TType) -> Any:
    """The xDSL ``TensorType`` / ``UnrankedTensorType`` of ``t``."""
    from xdsl.dialects.builtin import DYNAMIC_INDEX, TensorType, UnrankedTensorType

    elem = element_xdsl(t.dtype)
    if t.shape is None:
        return UnrankedTensorType(elem)
    return TensorType(elem, [DYNAMIC_INDEX if d is None else d for d in t.shape])


def element_xdsl(dtype: str) -> Any:
    """The xDSL element type of an element type name."""
    if dtype == "string":
        from pytfrt.compiler.string_type import StringType

        return StringType()
    from pytfrt.mlir.types import make_type

    return make_type(dtype)


def from_xdsl(attr: Any) -> TType:
    """The :class:`TType` of an xDSL tensor type.

    Raises:
        GraphError: if ``attr`` is not a tensor type of a known element type.
    """
    from xdsl.dialects.builtin import TensorType, UnrankedTensorType

    if isinstance(attr, TensorType):
        shape: Shape | None = tuple(None if d < 0 else int(d) for d in attr.get_shape())
    elif isinstance(attr, UnrankedTensorType):
        shape = None
    else:
        raise GraphError(f"expected a tensor type, got {attr}")
    return TType(element_name(attr.element_type), shape)


def element_name(elem: Any) -> str:
    """The element type name of an xDSL element type."""
    from pytfrt.mlir.printer import attr_to_str

    text = attr_to_str(elem)
    if text == "!tg.string":
        return "string"
    return check_dtype(text)
