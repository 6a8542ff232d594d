"""Tensor shapes: TensorShape, PartialTensorShape, FixedRankShape and TensorMetadata.

* :class:`TensorShape` -- a fully known shape (the payload of ``!ts.shape``); prints ``[2, 3]``
  (``[]`` for rank 0).  TFRT's 16/32/64-bit shape representations are an implementation detail
  (docs/conformance.md); plain Python ints are stored here, so every size round-trips.
* :class:`PartialTensorShape` -- unknown rank (``dims is None``) or unknown dimensions (``-1``);
  payload of ``!ts.partial_shape``.
* :class:`FixedRankShape` -- ``!ts.fixed_rank_shape.N``.
* :class:`TensorMetadata` -- dtype plus shape.

All are immutable, hashable and thread-safe.  Constructors validate (dimensions are
non-negative ints) and raise :class:`ShapeError` with a clear message.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytfrt.tensor.dtype import DType


class ShapeError(ValueError):
    """An invalid shape, or a shape that does not fit an operation."""


def format_dims(dims: Iterable[int]) -> str:
    """``[d0, d1, ...]`` as TFRT prints shapes."""
    return "[" + ", ".join(str(d) for d in dims) + "]"


def checked_dims(dims: Iterable[int]) -> tuple[int, ...]:
    """``dims`` as a tuple of non-negative ints.

    A tuple of non-negative ``int`` is returned as it is (the common case, without the
    per-dimension conversion); anything else is converted with ``int``.

    Raises:
        ShapeError: ``invalid dimension <d> in shape [..]`` for a negative dimension.
    """
    if type(dims) is tuple:
        for d in dims:
            if d.__class__ is not int or d < 0:
                break
        else:
            return dims
    t = tuple(int(d) for d in dims)
    for d in t:
        if d < 0:
            raise ShapeError(f"invalid dimension {d} in shape {format_dims(t)}")
    return t


class TensorShape:
    """A fully known tensor shape."""

    __slots__ = ("dims",)

    dims: tuple[int, ...]

    def __init__(self, dims: Iterable[int] = ()) -> None:
        object.__setattr__(self, "dims", checked_dims(dims))

    @classmethod
    def _trusted(cls, dims: tuple[int, ...]) -> TensorShape:
        """Build from a tuple of non-negative ints without checking (hot paths)."""
        s = object.__new__(cls)
        object.__setattr__(s, "dims", dims)
        return s

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("TensorShape is immutable")

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self.dims)

    @property
    def num_elements(self) -> int:
        """Product of the dimensions (1 for rank 0)."""
        n = 1
        for d in self.dims:
            n *= d
        return n

    def dimension(self, i: int) -> int:
        """Dimension ``i``.

        Raises:
            ShapeError: if ``i`` is out of range.
        """
        if not 0 <= i < len(self.dims):
            raise ShapeError(f"dimension index {i} out of range for shape {self}")
        return self.dims[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TensorShape):
            return self.dims == other.dims
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("TensorShape", self.dims))

    def __iter__(self) -> Any:
        return iter(self.dims)

    def __len__(self) -> int:
        return len(self.dims)

    def __getitem__(self, i: int) -> int:
        return self.dims[i]

    def __str__(self) -> str:
        return format_dims(self.dims)

    def __repr__(self) -> str:
        return f"TensorShape({list(self.dims)})"


class PartialTensorShape:
    """A shape with unknown rank (``dims is None``) or unknown dimensions (``-1``)."""

    __slots__ = ("dims",)

    dims: tuple[int, ...] | None

    def __init__(self, dims: Iterable[int] | None = None) -> None:
        if dims is None:
            object.__setattr__(self, "dims", None)
            return
        t = tuple(int(d) for d in dims)
        for d in t:
            if d < -1:
                raise ShapeError(f"invalid dimension {d} in partial shape {format_dims(t)}")
        object.__setattr__(self, "dims", t)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("PartialTensorShape is immutable")

    @property
    def is_unranked(self) -> bool:
        """True if the rank is unknown."""
        return self.dims is None

    @property
    def rank(self) -> int | None:
        """The rank, or ``None`` if unknown."""
        return None if self.dims is None else len(self.dims)

    @property
    def unknown_dims(self) -> list[int]:
        """Indices of unknown dimensions (empty if unranked)."""
        return [] if self.dims is None else [i for i, d in enumerate(self.dims) if d < 0]

    @property
    def is_fully_defined(self) -> bool:
        """True if the rank and every dimension are known."""
        return self.dims is not None and all(d >= 0 for d in self.dims)

    def to_shape(self) -> TensorShape:
        """The fully known shape.

        Raises:
            ShapeError: ``Unknown rank`` or ``Unknown dimensions at following indices = [..]``
                (TFRT's messages).
        """
        if self.dims is None:
            raise ShapeError("Unknown rank")
        unknown = self.unknown_dims
        if unknown:
            raise ShapeError(
                f"Unknown dimensions at following indices = {format_dims(unknown)}"
            )
        return TensorShape._trusted(self.dims)

    @classmethod
    def from_shape(cls, shape: TensorShape) -> PartialTensorShape:
        """The partial shape equal to a known shape."""
        return cls(shape.dims)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PartialTensorShape):
            return self.dims == other.dims
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("PartialTensorShape", self.dims))

    def __str__(self) -> str:
        return "Unknown rank" if self.dims is None else format_dims(self.dims)

    def __repr__(self) -> str:
        return f"PartialTensorShape({None if self.dims is None else list(self.dims)})"


class FixedRankShape:
    """A shape of statically known rank (``!ts.fixed_rank_shape.N``)."""

    __slots__ = ("dims",)

    dims: tuple[int, ...]

    def __init__(self, dims: Iterable[int]) -> None:
        object.__setattr__(self, "dims", tuple(int(d) for d in dims))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("FixedRankShape is immutable")

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self.dims)

    @property
    def num_elements(self) -> int:
        """Product of the dimensions."""
        n = 1
        for d in self.dims:
            n *= d
        return n

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FixedRankShape):
            return self.dims == other.dims
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("FixedRankShape", self.dims))

    def __str__(self) -> str:
        # Quirk (docs/conformance.md): TFRT prints ``[]`` whenever the element count is 0.
        if self.num_elements == 0:
            return "[]"
        return format_dims(self.dims)

    def __repr__(self) -> str:
        return f"FixedRankShape({list(self.dims)})"


class TensorMetadata:
    """A tensor's dtype and shape (what shape functions compute without data)."""

    __slots__ = ("dtype", "shape")

    dtype: DType
    shape: TensorShape

    def __init__(self, dtype: DType, shape: TensorShape | Iterable[int]) -> None:
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(
            self, "shape", shape if isinstance(shape, TensorShape) else TensorShape(shape)
        )

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("TensorMetadata is immutable")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TensorMetadata):
            return self.dtype is other.dtype and self.shape == other.shape
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.dtype.code, self.shape))

    def __str__(self) -> str:
        return f"{self.dtype.name} {self.shape}"

    def __repr__(self) -> str:
        return f"TensorMetadata({self.dtype.name}, {self.shape})"
