"""How the core runtime stores host tensors inside TensorHandles, and converts between kinds.

A dense host tensor whose dtype has its own NumPy dtype is held as the bare ``numpy.ndarray``
(the eager fast path then creates no wrapper object); :func:`as_dht` wraps it in a
:class:`~pytfrt.tensor.DenseHostTensor` without copying when a DHT is needed (printing, BEF
kernels that take ``!t.tensor``).  Every other tensor (quantized DHTs, strings, scalars, COO) is
held as its ``pytfrt.tensor`` object.

Pure functions; thread-safe.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np

from pytfrt.tensor.coo_host_tensor import CooHostTensor, coo_to_dense
from pytfrt.tensor.dense_host_tensor import DenseHostTensor
from pytfrt.tensor.dtype import DType, dtype_from_numpy
from pytfrt.tensor.printing import format_dense
from pytfrt.tensor.scalar_host_tensor import ScalarHostTensor
from pytfrt.tensor.shape import TensorMetadata, TensorShape
from pytfrt.tensor.string_host_tensor import StringHostTensor

__all__ = [
    "CooHostTensor",
    "DenseHostTensor",
    "ScalarHostTensor",
    "StringHostTensor",
    "as_dht",
    "format_tensor",
    "make_metadata",
    "metadata_of",
    "normalize",
    "to_dense_array",
    "tensor_kind",
]

_DTYPE_CACHE: dict[Any, DType] = {}

DENSE: Final = "DenseHostTensor"
SCALAR: Final = "ScalarHostTensor"
STRING: Final = "StringHostTensor"
COO: Final = "CooHostTensor"


def dtype_of_array(array: np.ndarray) -> DType:
    """The TFRT dtype of an ndarray (cached per NumPy dtype)."""
    np_dtype = array.dtype
    dtype = _DTYPE_CACHE.get(np_dtype)
    if dtype is None:
        dtype = dtype_from_numpy(np_dtype)
        _DTYPE_CACHE[np_dtype] = dtype
    return dtype


def make_metadata(dtype: DType, dims: tuple[int, ...]) -> TensorMetadata:
    """A TensorMetadata from a dtype and a tuple of non-negative ints (no re-validation)."""
    return TensorMetadata(dtype, TensorShape._trusted(tuple(dims)))


def metadata_of(tensor: Any) -> TensorMetadata:
    """The dtype and shape of a stored tensor (ndarray or host tensor object)."""
    if isinstance(tensor, np.ndarray):
        return make_metadata(dtype_of_array(tensor), tensor.shape)
    return tensor.metadata  # type: ignore[no-any-return]


def tensor_kind(tensor: Any) -> str:
    """``DenseHostTensor``, ``ScalarHostTensor``, ``StringHostTensor`` or ``CooHostTensor``."""
    if isinstance(tensor, (np.ndarray, DenseHostTensor)):
        return DENSE
    if isinstance(tensor, ScalarHostTensor):
        return SCALAR
    if isinstance(tensor, StringHostTensor):
        return STRING
    if isinstance(tensor, CooHostTensor):
        return COO
    return type(tensor).__name__


def normalize(tensor: Any) -> Any:
    """The stored form of a tensor: a DHT with a plain NumPy dtype becomes its array."""
    if type(tensor) is DenseHostTensor and tensor.dtype.kind != "quant":
        return tensor.array
    return tensor


def as_dht(tensor: Any) -> Any:
    """A DenseHostTensor for a stored ndarray (zero-copy); other tensors unchanged."""
    if isinstance(tensor, np.ndarray):
        return DenseHostTensor(dtype_of_array(tensor), tensor)
    return tensor


def to_dense_array(tensor: Any) -> np.ndarray:
    """The ndarray of a dense-convertible tensor (implicit scalar/COO -> dense conversion).

    Raises:
        TypeError: for string tensors and unknown tensor kinds.
    """
    if isinstance(tensor, np.ndarray):
        return tensor
    if isinstance(tensor, DenseHostTensor):
        return tensor.array
    if isinstance(tensor, ScalarHostTensor):
        return tensor.to_dense().array
    if isinstance(tensor, CooHostTensor):
        out = DenseHostTensor.create(tensor.dtype, tensor.dims)
        return coo_to_dense(tensor, out).array
    raise TypeError(f"cannot convert {tensor_kind(tensor)} to DenseHostTensor")


def format_tensor(tensor: Any) -> str:
    """TFRT's print of a stored tensor (docs/conformance.md)."""
    if isinstance(tensor, np.ndarray):
        return format_dense(dtype_of_array(tensor), tensor.shape, tensor)
    return str(tensor)
