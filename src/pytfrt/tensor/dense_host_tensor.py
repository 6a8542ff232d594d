"""DenseHostTensor (a NumPy array, or a plain buffer, plus its TFRT dtype) and HostBuffer.

A :class:`DenseHostTensor` (DHT) is TFRT's row-major host tensor.  Its storage is a NumPy
array: :meth:`DenseHostTensor.from_numpy` wraps an array without copying and
:meth:`DenseHostTensor.numpy` returns that same array, so kernels compute with NumPy directly
on the tensor's memory (in-place kernels write into it).

**NumPy-free storage.**  In a process that keeps NumPy out (:mod:`pytfrt.host.numpy_free`,
chosen by ``bef_executor`` for programs whose kernels all have NumPy-free implementations),
:meth:`DenseHostTensor.create` gives tensors of the dtypes the :mod:`array` module has a code
for (``DType.typecode``) a plain buffer instead: a ``bytearray`` seen through a memoryview of
the tensor's element format and shape (``.raw``).  Reading ``.array`` of such a tensor
imports NumPy and turns it into an ordinary ndarray-backed tensor whose array is a zero-copy
view of that same buffer (``.raw`` becomes ``None``), so every kernel works on every tensor:
the NumPy-free kernels take the buffer while ``.raw`` is set, the others see an ndarray.

Allocator accounting (docs/host.md): a tensor created for a running program
(:func:`allocate_dense`, used by every kernel that makes a new tensor) asks the HostContext's
allocator for :func:`~pytfrt.host.allocator.host_buffer_size` bytes (``64 + nbytes``); a refusal
raises :class:`AllocationError` (``Cannot allocate tensor``), which a kernel reports as its
error.  The accounting is released once, by ``__tfrt_destroy__`` (called when the owning
AsyncValue's reference count reaches zero) or, failing that, when the object is collected.
Tensors made with :meth:`from_numpy` are not accounted.

Thread-safety: a DHT's metadata is immutable; its data is not synchronised -- the dataflow
program (chains) orders writers and readers, as in TFRT.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pytfrt.host import numpy_free
from pytfrt.host.allocator import HOST_BUFFER_HEADER
from pytfrt.support.errors import PytfrtError
from pytfrt.tensor.dtype import DType, dtype_from_numpy
from pytfrt.tensor.printing import format_dense
from pytfrt.tensor.shape import (
    ShapeError,
    TensorMetadata,
    TensorShape,
    checked_dims,
    format_dims,
)

if TYPE_CHECKING:
    import numpy as np


class AllocationError(PytfrtError):
    """The host allocator refused a tensor buffer (``Cannot allocate tensor``)."""


class _Accounting:
    """One accounted allocation, released at most once (``list.pop`` is atomic).

    Released explicitly (``__tfrt_destroy__`` of its owner) or, failing that, when it is
    collected together with its owner: the finalizer lives here, so the many unaccounted
    tensors pay no ``__del__`` call.
    """

    __slots__ = ("_token", "nbytes")

    def __init__(self, allocator: Any, nbytes: int) -> None:
        self._token = [allocator]
        self.nbytes = nbytes

    def release(self) -> None:
        try:
            allocator = self._token.pop()
        except IndexError:
            return
        allocator.deallocate(self.nbytes)

    __del__ = release


def _account(allocator: Any, nbytes: int) -> _Accounting | None:
    """Ask ``allocator`` for a tensor buffer of ``nbytes`` data bytes.

    Raises:
        AllocationError: if the allocator refuses.
    """
    if allocator is None:
        return None
    size = nbytes + HOST_BUFFER_HEADER
    if not allocator.allocate(size):
        raise AllocationError("Cannot allocate tensor")
    return _Accounting(allocator, size)


class HostBuffer:
    """A raw, byte-addressed host buffer (``!ht.host_buffer``): a flat uint8 NumPy array."""

    __slots__ = ("data", "_acct", "__weakref__")

    def __init__(self, data: np.ndarray, _acct: _Accounting | None = None) -> None:
        self.data = data
        self._acct = _acct

    @classmethod
    def allocate(cls, size: int, allocator: Any = None) -> HostBuffer:
        """A zero-filled buffer of ``size`` bytes, accounted with ``allocator`` if given.

        Raises:
            AllocationError: if the allocator refuses.
        """
        import numpy as np

        acct = _account(allocator, size)
        return cls(np.zeros(size, np.uint8), acct)

    @property
    def size(self) -> int:
        """Size in bytes."""
        return int(self.data.shape[0])

    def slice(self, offset: int, size: int) -> HostBuffer:
        """A buffer sharing bytes ``[offset, offset + size)`` of this one.

        Raises:
            ValueError: if the range does not fit.
        """
        if offset < 0 or size < 0 or offset + size > self.size:
            raise ValueError(
                f"buffer slice [{offset}, {offset + size}) out of range for a buffer of "
                f"{self.size} bytes"
            )
        return HostBuffer(self.data[offset : offset + size])

    def __tfrt_destroy__(self) -> None:
        acct = self._acct
        if acct is not None:
            acct.release()

    def __str__(self) -> str:
        return f"HostBuffer<pointer=0x{self.data.ctypes.data:x}, size={self.size}>"


class DenseHostTensor:
    """A dense row-major host tensor: TFRT dtype + NumPy array (shared, not copied), or a
    NumPy-free buffer (``raw``, see the module docstring) until ``array`` is first read."""

    __slots__ = ("dtype", "array", "_acct", "raw", "__weakref__")

    def __init__(self, dtype: DType, array: np.ndarray, _acct: _Accounting | None = None) -> None:
        """Wrap ``array`` (whose NumPy dtype must be ``dtype.np_dtype``) without copying."""
        self.dtype = dtype
        self.array = array
        self._acct = _acct
        self.raw: Any = None
        """The NumPy-free storage (a memoryview of format ``dtype.typecode`` and the tensor's
        shape over a ``bytearray``), or ``None`` for an ndarray-backed tensor."""

    @classmethod
    def from_raw(cls, dtype: DType, raw: Any, _acct: _Accounting | None = None
                  ) -> DenseHostTensor:
        """A tensor whose storage is ``raw`` (format ``dtype.typecode``, C-contiguous, shaped
        as the tensor, writeable); NumPy stays unimported until ``.array`` is read."""
        t = cls.__new__(cls)
        t.dtype = dtype
        t._acct = _acct
        t.raw = raw
        return t

    def __getattr__(self, attr: str) -> Any:
        # ``array`` is unset only for a tensor made by from_raw: its first read imports NumPy
        # and makes the tensor an ordinary one over the same buffer.
        if attr != "array":
            raise AttributeError(attr)
        raw = self.raw
        if raw is None:
            raise AttributeError(attr)
        import numpy as np

        array = np.asarray(raw)
        self.array = array
        self.raw = None
        return array

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_numpy(cls, array: Any, dtype: DType | None = None) -> DenseHostTensor:
        """Wrap an ndarray without copying (anything else is converted with ``np.asarray``).

        ``dtype`` defaults to the TFRT dtype of the array's NumPy dtype; when given (e.g. a
        quantized type over int8 storage) the storage must match.

        Raises:
            DTypeError: if the NumPy dtype has no TFRT equivalent.
            ShapeError: if ``dtype`` does not match the array's storage.
        """
        import numpy as np

        arr = array if isinstance(array, np.ndarray) else np.asarray(array)
        if dtype is None:
            dtype = dtype_from_numpy(arr.dtype)
        elif arr.dtype != dtype.np_dtype:
            raise ShapeError(
                f"array of NumPy dtype {arr.dtype} cannot hold TFRT dtype {dtype.name}"
            )
        return cls(dtype, arr)

    @classmethod
    def create(
        cls, dtype: DType, dims: Iterable[int], allocator: Any = None
    ) -> DenseHostTensor:
        """A new zero-filled tensor, accounted with ``allocator`` (docs/host.md) if given.

        Raises:
            AllocationError: ``Cannot allocate tensor`` if the allocator refuses.
            ShapeError: for a negative dimension.
        """
        shape = checked_dims(dims)
        if numpy_free.ENABLED and dtype.typecode is not None:
            n = math.prod(shape)
            if n:
                size = n * dtype.itemsize
                raw = memoryview(bytearray(size)).cast(dtype.typecode, shape)  # type: ignore[call-overload]
                return cls.from_raw(
                    dtype, raw, None if allocator is None else _account(allocator, size))
        import numpy as np

        array = np.zeros(shape, dtype.np_dtype)
        if allocator is None:
            return cls(dtype, array)
        return cls(dtype, array, _account(allocator, array.nbytes))

    # -- metadata -------------------------------------------------------------------------

    @property
    def shape(self) -> TensorShape:
        """The shape (a new :class:`TensorShape` each call; use ``.array.shape`` in hot code)."""
        return TensorShape._trusted(self.dims)

    @property
    def dims(self) -> tuple[int, ...]:
        """The dimensions as a tuple."""
        raw = self.raw
        return tuple(self.array.shape if raw is None else raw.shape)

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        raw = self.raw
        return self.array.ndim if raw is None else raw.ndim

    @property
    def num_elements(self) -> int:
        """Number of elements."""
        raw = self.raw
        return int(self.array.size) if raw is None else raw.nbytes // raw.itemsize

    @property
    def nbytes(self) -> int:
        """Size of the data in bytes."""
        raw = self.raw
        return int(self.array.nbytes if raw is None else raw.nbytes)

    def flat_view(self) -> memoryview:
        """The NumPy-free storage as a flat memoryview of the elements (``raw`` must be set)."""
        raw = self.raw
        assert raw is not None
        return raw.cast("B").cast(raw.format)  # type: ignore[no-any-return]

    @property
    def metadata(self) -> TensorMetadata:
        """dtype and shape."""
        return TensorMetadata(self.dtype, self.shape)

    def numpy(self) -> np.ndarray:
        """The storage array itself (writes are visible in the tensor)."""
        return self.array

    def buffer(self) -> HostBuffer:
        """The tensor's bytes as a :class:`HostBuffer` sharing the storage (C-contiguous)."""
        import numpy as np

        arr = np.ascontiguousarray(self.array)
        if arr is not self.array:
            self.array = arr
        return HostBuffer(arr.reshape(-1).view(np.uint8))

    # -- lifetime -------------------------------------------------------------------------

    def __tfrt_destroy__(self) -> None:
        """Release the allocator accounting (idempotent)."""
        acct = self._acct
        if acct is not None:
            acct.release()

    # -- printing -------------------------------------------------------------------------

    def __str__(self) -> str:
        if self.raw is not None:
            return format_dense(self.dtype, self.raw.shape, self.flat_view())
        return format_dense(self.dtype, self.array.shape, self.array)

    def __repr__(self) -> str:
        return f"DenseHostTensor({self.dtype.name}, {format_dims(self.dims)})"


def allocate_dense(exec_ctx: Any, dtype: DType, dims: Iterable[int]) -> DenseHostTensor:
    """A new zero-filled tensor accounted with ``exec_ctx``'s host allocator (if any).

    The helper every kernel uses to make a new tensor.

    Raises:
        AllocationError: ``Cannot allocate tensor`` if the allocator refuses.
    """
    if exec_ctx is None:
        return DenseHostTensor.create(dtype, dims)
    return DenseHostTensor.create(dtype, dims, exec_ctx.request_context.host.allocator)


def wrap_result(exec_ctx: Any, dtype: DType, array: np.ndarray) -> DenseHostTensor:
    """Wrap a freshly computed array as a new tensor accounted like :func:`allocate_dense`.

    Raises:
        AllocationError: ``Cannot allocate tensor`` if the allocator refuses.
    """
    allocator = None if exec_ctx is None else exec_ctx.request_context.host.allocator
    return DenseHostTensor(dtype, array, _account(allocator, array.nbytes))


def wrap_raw(exec_ctx: Any, dtype: DType, data: bytearray, dims: tuple[int, ...]
             ) -> DenseHostTensor:
    """Wrap a freshly computed buffer (``bytearray`` of the elements, row-major) as a new
    NumPy-free tensor of ``dims``, accounted like :func:`allocate_dense` when ``exec_ctx`` is
    given.

    Raises:
        AllocationError: ``Cannot allocate tensor`` if the allocator refuses.
    """
    assert dtype.typecode is not None
    raw = memoryview(data).cast(dtype.typecode, dims)  # type: ignore[call-overload]
    if exec_ctx is None:
        return DenseHostTensor.from_raw(dtype, raw)
    return DenseHostTensor.from_raw(
        dtype, raw, _account(exec_ctx.request_context.host.allocator, len(data)))
