"""Attribute values: what a kernel's attributes are, from MLIR through BEF to the kernel.

Each class is an immutable, hashable value with the MLIR type needed to encode it in BEF
(docs/bef.md).  :attr:`value` is what a kernel receives for an ``Attr[...]`` parameter:

=================  ==========================================  ==============================
class              MLIR                                        ``.value`` given to kernels
=================  ==========================================  ==============================
IntAttr            ``42 : i32``, ``true`` (type ``i1``)        ``int`` (``bool`` for ``i1``)
FloatAttr          ``1.0 : f32``, ``f16``/``bf16``/``f64``     ``float``
StringAttr         ``"abc"``                                   ``str``
TypeAttr           ``i32``, ``f32``, ``!tfrt.chain``           the :class:`TypeAttr` itself
ArrayAttr          ``[1 : i32, 2 : i32]``                      ``tuple`` of element values
AggregateAttr      ``[["a", [1 : i32]], [1.0 : f32]]``         ``tuple`` of element values
DenseAttr          ``dense<[1.0, 2.0]> : tensor<2xf32>``       the :class:`DenseAttr` itself
ShapeAttr          ``#corert.shape<2x?x3>`` / ``<*>``          the :class:`ShapeAttr` itself
UnitAttr           ``unit`` (presence flag)                    ``True``
=================  ==========================================  ==============================

An :class:`ArrayAttr` has elements of one fixed-size scalar kind (BEF encodes it as a flat
array); anything else made of several values is an :class:`AggregateAttr`.
Dtype names are TFRT's: ``i1 i8 i16 i32 i64 ui8 ui16 ui32 ui64 f16 bf16 f32 f64 complex64
complex128 string``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

INT_TYPES = ("i1", "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64")
FLOAT_TYPES = ("f16", "bf16", "f32", "f64")


class Attribute:
    """Base class of attribute values."""

    __slots__ = ()

    @property
    def value(self) -> Any:
        """The plain value a kernel receives."""
        return self


@dataclass(frozen=True, slots=True)
class IntAttr(Attribute):
    """An integer (or ``i1`` boolean) attribute with its MLIR type name."""

    data: int
    type: str = "i64"

    def __post_init__(self) -> None:
        if self.type not in INT_TYPES:
            raise ValueError(f"invalid integer attribute type {self.type!r}")

    @property
    def value(self) -> Any:
        return bool(self.data) if self.type == "i1" else self.data


@dataclass(frozen=True, slots=True)
class FloatAttr(Attribute):
    """A floating-point attribute with its MLIR type name."""

    data: float
    type: str = "f32"

    def __post_init__(self) -> None:
        if self.type not in FLOAT_TYPES:
            raise ValueError(f"invalid float attribute type {self.type!r}")

    @property
    def value(self) -> Any:
        return self.data


@dataclass(frozen=True, slots=True)
class StringAttr(Attribute):
    """A string attribute."""

    data: str

    @property
    def value(self) -> Any:
        return self.data


@dataclass(frozen=True, slots=True)
class UnitAttr(Attribute):
    """A presence-only attribute."""

    @property
    def value(self) -> Any:
        return True


@dataclass(frozen=True, slots=True)
class TypeAttr(Attribute):
    """A type used as an attribute (its printed MLIR form, e.g. ``f32`` or ``!tfrt.chain``)."""

    name: str


@dataclass(frozen=True, slots=True)
class ArrayAttr(Attribute):
    """An array of scalars of one kind (``element_type`` is an int/float type name)."""

    elements: tuple[Attribute, ...]
    element_type: str = "i32"

    @property
    def value(self) -> Any:
        return tuple(e.value for e in self.elements)


@dataclass(frozen=True, slots=True)
class AggregateAttr(Attribute):
    """A heterogeneous or nested array of attributes."""

    elements: tuple[Attribute, ...]

    @property
    def value(self) -> Any:
        return tuple(e.value for e in self.elements)


@dataclass(frozen=True, slots=True)
class DenseAttr(Attribute):
    """A dense tensor constant: dtype name, shape and raw little-endian row-major bytes.

    Splats are expanded; ``i1`` is one byte per element; complex values are (re, im) pairs.
    """

    dtype: str
    shape: tuple[int, ...]
    data: bytes

    @property
    def num_elements(self) -> int:
        """Product of the dimensions."""
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True, slots=True)
class ShapeAttr(Attribute):
    """A (possibly unranked or partially known) shape; ``dims is None`` means unranked.

    Unknown dimensions are ``-1``.
    """

    dims: tuple[int, ...] | None

    @property
    def rank(self) -> int | None:
        """The rank, or ``None`` if unranked."""
        return None if self.dims is None else len(self.dims)
