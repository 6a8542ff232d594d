"""ScalarHostTensor: a tensor whose every element is one value (docs/conformance.md).

Prints as ``ScalarHostTensor dtype = i32, shape = [2, 2], value = 1``.  Immutable.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from pytfrt.tensor.dense_host_tensor import DenseHostTensor
from pytfrt.tensor.dtype import DType
from pytfrt.tensor.printing import format_scalar
from pytfrt.tensor.shape import TensorMetadata, TensorShape, format_dims


class ScalarHostTensor:
    """A splat tensor: dtype, shape and the single value of every element."""

    __slots__ = ("dtype", "dims", "value")

    def __init__(self, dtype: DType, dims: Iterable[int], value: Any) -> None:
        self.dtype = dtype
        self.dims = tuple(int(d) for d in dims)
        self.value = dtype.np_dtype.type(value)

    @property
    def shape(self) -> TensorShape:
        """The shape."""
        return TensorShape._trusted(self.dims)

    @property
    def metadata(self) -> TensorMetadata:
        """dtype and shape."""
        return TensorMetadata(self.dtype, self.shape)

    def to_dense(self) -> DenseHostTensor:
        """An equivalent (unaccounted) DenseHostTensor."""
        return DenseHostTensor(self.dtype, np.full(self.dims, self.value, self.dtype.np_dtype))

    def __str__(self) -> str:
        return format_scalar(self.dtype, self.dims, self.value)

    def __repr__(self) -> str:
        return f"ScalarHostTensor({self.dtype.name}, {format_dims(self.dims)}, {self.value!r})"
