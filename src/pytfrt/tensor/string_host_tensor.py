"""StringHostTensor: a host tensor of strings (``tfrt_sht.*``), stored as a NumPy object array.

Prints as ``StringHostTensor shape = [2], values = ["a", "b"]`` (docs/conformance.md).  Metadata is
immutable; the data is not synchronised (chains order writers and readers).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from pytfrt.tensor.dtype import STRING, DType
from pytfrt.tensor.printing import format_strings
from pytfrt.tensor.shape import ShapeError, TensorMetadata, TensorShape, format_dims


class StringHostTensor:
    """A host tensor whose elements are Python strings (dtype ``str``)."""

    __slots__ = ("array",)

    dtype: DType = STRING

    def __init__(self, array: np.ndarray) -> None:
        """Wrap an object array of ``str`` (not copied)."""
        self.array = array

    @classmethod
    def create(cls, dims: Iterable[int], values: Sequence[str] | None = None) -> StringHostTensor:
        """A tensor of shape ``dims`` holding ``values`` (empty strings if omitted).

        Raises:
            ShapeError: if the number of values does not match the shape.
        """
        shape = tuple(int(d) for d in dims)
        n = 1
        for d in shape:
            if d < 0:
                raise ShapeError(f"invalid dimension {d} in shape {format_dims(shape)}")
            n *= d
        array = np.empty(shape, dtype=object)
        if values is None:
            array.reshape(-1)[:] = ""
        else:
            if len(values) != n:
                raise ShapeError(
                    f"Incorrect number of values for the tensor: {len(values)}, but expected {n}"
                )
            flat = array.reshape(-1)
            for i, v in enumerate(values):
                flat[i] = v.decode() if isinstance(v, bytes) else str(v)
        return cls(array)

    @property
    def shape(self) -> TensorShape:
        """The shape."""
        return TensorShape._trusted(tuple(self.array.shape))

    @property
    def metadata(self) -> TensorMetadata:
        """dtype ``str`` and the shape."""
        return TensorMetadata(STRING, self.shape)

    @property
    def num_elements(self) -> int:
        """Number of strings."""
        return int(self.array.size)

    def strings(self) -> list[str]:
        """The strings in row-major order."""
        return list(self.array.reshape(-1).tolist())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StringHostTensor):
            return NotImplemented
        return self.array.shape == other.array.shape and self.strings() == other.strings()

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        return format_strings(self.array.shape, self.strings())

    def __repr__(self) -> str:
        return f"StringHostTensor({format_dims(self.array.shape)})"

