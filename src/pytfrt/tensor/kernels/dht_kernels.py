"""``tfrt_dht.*`` kernels: dense host tensors and host buffers (docs/conformance.md).

Families are registered for every numeric dtype (``ui8 ui16 ui32 ui64 i1/bool i8 i16 i32 i64
f16 bf16 f32 f64 complex64 complex128``):

* ``create_uninitialized_tensor.T.R`` (R 0..5) -- a new zero-filled tensor from the ``shape``
  attribute; allocation refused -> ``Cannot allocate tensor``.  The rank suffix is an upper
  bound: a shape with more than R dimensions is an error at the kernel, a shorter one is
  accepted (TFRT's MNIST integration program and the XOR playground create their rank-1 biases
  with ``.f32.2`` and ``shape = [2]``);
* ``fill_tensor_with_constant.T``, ``set_tensor_with_constant_values.T`` (count mismatch ->
  ``Incorrect number of values for the tensor: <given>, but expected <n>``),
  ``set_tensor_with_values.T``, ``make_tensor.T``;
* ``tensor_equal.T`` and ``tensor_allclose[.3ulp|.1000ulp|.2000ulp|.100000ulp].T``;
* dtype-free: ``print_tensor`` (any host tensor), ``print_tensor_shape``, ``get_tensor_shape``,
  ``no_op_ht``, ``allocate_buffer``, ``get_buffer``, ``get_buffer_slice``, ``print_buffer``.

Sync twins (``tfrt_dht_sync.*``) exist for the creation, fill, set, equality and print kernels.
The comparison logic is reachable as plain functions (:func:`dense_equal`,
:func:`dense_allclose`).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pytfrt.host.async_value import CHAIN, Chain
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.registry import Attr, KernelError, KernelRegistry
from pytfrt.tensor.dense_host_tensor import (
    AllocationError,
    DenseHostTensor,
    HostBuffer,
    allocate_dense,
)
from pytfrt.tensor.dtype import F32, NUMERIC_DTYPES, DType
from pytfrt.tensor.kernels.util import check_dht, dims_of, print_line, suffixes
from pytfrt.tensor.shape import ShapeError, TensorShape, format_dims

if TYPE_CHECKING:
    import numpy as np

# NumPy is imported by the functions that use it: a NumPy-free process (docs/host.md) uses the
# creation, fill, set and print kernels of this module on tensors without it.

ULP_VARIANTS: tuple[tuple[str, int], ...] = (
    ("", 2),
    ("3ulp.", 3),
    ("1000ulp.", 1000),
    ("2000ulp.", 2000),
    ("100000ulp.", 100000),
)


# -- plain functions ---------------------------------------------------------------------------


def dense_equal(a: DenseHostTensor, b: DenseHostTensor) -> bool:
    """Same dtype and shape, and element-wise equal bytes (TFRT's DHT ``==``)."""
    import numpy as np

    if a.dtype is not b.dtype or a.array.shape != b.array.shape:
        return False
    x = np.ascontiguousarray(a.array)
    y = np.ascontiguousarray(b.array)
    return bool(x.tobytes() == y.tobytes()) if a.dtype.kind == "float" else bool(
        np.array_equal(x, y)
    )


def dense_allclose(a: DenseHostTensor, b: DenseHostTensor, ulp: int = 2) -> bool:
    """Metadata equal and every pair close (docs/conformance.md).

    ``abs(x - y) <= eps * abs(x + y) * ulp`` or ``abs(x - y) < tiny`` (eps and tiny of the
    dtype), computed in the dtype's own precision; non-float dtypes must be equal.
    """
    import numpy as np

    if a.dtype is not b.dtype or a.array.shape != b.array.shape:
        return False
    kind = a.dtype.kind
    if kind not in ("float", "complex"):
        return bool(np.array_equal(a.array, b.array))
    x = a.array
    y = b.array
    if kind == "complex":
        info = np.finfo(x.real.dtype)
    else:
        info = np.finfo(a.dtype.np_dtype)  # type: ignore[arg-type]
    eps = x.dtype.type(info.eps) if kind == "float" else info.eps
    diff = np.abs(x - y)
    close = (diff <= eps * np.abs(x + y) * ulp) | (diff < info.smallest_normal)
    return bool(np.all(close))


def _convert_values(dtype: DType, values: Any) -> np.ndarray:
    """Attribute values as an array of ``dtype`` (complex given as pairs is accepted)."""
    import numpy as np

    if dtype.kind == "complex":
        values = [complex(*v) if isinstance(v, tuple) else complex(v) for v in values]
    try:
        return np.asarray(values, dtype=dtype.np_dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        raise KernelError(f"cannot convert values to {dtype.name}: {exc}") from None


def _raw_values(t: DenseHostTensor, values: Any) -> bool:
    """Store ``values`` into a NumPy-free float tensor (``t.raw``, docs/host.md) if they are
    plain numbers: the :mod:`array` module rounds them as NumPy's conversion does (to nearest;
    beyond the range: inf).  False if ``t`` is not such a tensor or a value is not a number
    (the NumPy path then converts, or reports, as for any tensor)."""
    typecode = t.dtype.typecode
    if t.raw is None or t.dtype.kind != "float" or typecode is None:
        return False
    try:
        converted = array(typecode, values)
    except (TypeError, ValueError, OverflowError):
        return False
    t.flat_view()[:] = memoryview(converted)
    return True


def _scalar(dtype: DType, value: Any) -> Any:
    if dtype.kind == "complex" and isinstance(value, tuple):
        value = complex(*value)
    try:
        return dtype.np_dtype.type(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise KernelError(f"cannot convert {value!r} to {dtype.name}: {exc}") from None


# -- per-dtype kernel factories ------------------------------------------------------------------


def _create(dtype: DType, rank: int) -> Callable[..., Any]:
    def create_uninitialized_tensor(shape: Attr[Any], exec_ctx: ExecutionContext) -> Any:
        try:
            dims = dims_of(shape)
            if len(dims) > rank:
                raise KernelError(
                    f"shape {list(dims)} has {len(dims)} dimensions, more than the kernel's "
                    f"rank {rank}"
                )
            return allocate_dense(exec_ctx, dtype, dims)
        except (AllocationError, ShapeError) as exc:
            raise KernelError(str(exc)) from None

    return create_uninitialized_tensor


def _fill(dtype: DType) -> Callable[..., Any]:
    def fill_tensor_with_constant(t: DenseHostTensor, value: Attr[Any]) -> Chain:
        if t.dtype is not dtype:
            check_dht(t, dtype)
        if t.raw is None or not _raw_values(t, [value] * t.num_elements):
            t.array.fill(_scalar(dtype, value))
        return CHAIN

    return fill_tensor_with_constant


def _set_constant_values(dtype: DType) -> Callable[..., Any]:
    def set_tensor_with_constant_values(t: DenseHostTensor, values: Attr[Any]) -> Chain:
        if t.dtype is not dtype:
            check_dht(t, dtype)
        n = t.num_elements
        if len(values) != n:
            raise KernelError(
                f"Incorrect number of values for the tensor: {len(values)}, but expected {n}"
            )
        if t.raw is None or not _raw_values(t, values):
            t.array.reshape(-1)[:] = _convert_values(dtype, values)
        return CHAIN

    return set_tensor_with_constant_values


def _set_values(dtype: DType) -> Callable[..., Any]:
    def set_tensor_with_values(t: DenseHostTensor, chain: Any, *values: Any) -> Chain:
        check_dht(t, dtype)
        n = t.array.size
        if len(values) != n:
            raise KernelError(
                f"Incorrect number of values for the tensor: {len(values)}, but expected {n}"
            )
        if n:
            t.array.reshape(-1)[:] = _convert_values(dtype, list(values))
        return CHAIN

    return set_tensor_with_values


def _make_tensor(dtype: DType) -> Callable[..., Any]:
    def make_tensor(buffer: HostBuffer, shape: TensorShape) -> tuple[DenseHostTensor, Chain]:
        expected = shape.num_elements * dtype.itemsize
        if buffer.size != expected:
            raise KernelError(
                f"dht.make_tensor failed: buffer_size ({buffer.size}) is not equal to the "
                f"number of elements in shape ({shape}) times element size ({dtype.itemsize})"
            )
        array = buffer.data.view(dtype.np_dtype).reshape(shape.dims)
        return DenseHostTensor(dtype, array), CHAIN

    return make_tensor


def _equal(dtype: DType) -> Callable[..., Any]:
    def tensor_equal(a: DenseHostTensor, b: DenseHostTensor) -> tuple[bool, Chain]:
        check_dht(a, dtype, "first tensor")
        check_dht(b, dtype, "second tensor")
        return dense_equal(a, b), CHAIN

    return tensor_equal


def _allclose(dtype: DType, ulp: int) -> Callable[..., Any]:
    def tensor_allclose(a: DenseHostTensor, b: DenseHostTensor) -> tuple[bool, Chain]:
        check_dht(a, dtype, "first tensor")
        check_dht(b, dtype, "second tensor")
        return dense_allclose(a, b, ulp), CHAIN

    return tensor_allclose


def _sync_equal(dtype: DType) -> Callable[..., Any]:
    def tensor_equal_sync(a: DenseHostTensor, b: DenseHostTensor) -> bool:
        check_dht(a, dtype, "first tensor")
        check_dht(b, dtype, "second tensor")
        return dense_equal(a, b)

    return tensor_equal_sync


def _sync_fill(dtype: DType) -> Callable[..., Any]:
    fill = _fill(dtype)

    def fill_tensor_with_constant_sync(t: DenseHostTensor, value: Attr[Any]) -> None:
        fill(t, value)

    return fill_tensor_with_constant_sync


def _sync_set(dtype: DType) -> Callable[..., Any]:
    set_values = _set_constant_values(dtype)

    def set_tensor_with_constant_values_sync(t: DenseHostTensor, values: Attr[Any]) -> None:
        set_values(t, values)

    return set_tensor_with_constant_values_sync


# -- dtype-free kernels ----------------------------------------------------------------------


def print_tensor(t: Any) -> Chain:
    """``tfrt_dht.print_tensor %t, %ch``: prints any host tensor (docs/conformance.md)."""
    print_line(str(t))
    return CHAIN


def print_tensor_sync(t: Any) -> None:
    """``tfrt_dht_sync.print_tensor %t``."""
    print_line(str(t))


def print_tensor_shape(t: DenseHostTensor) -> Chain:
    """``tfrt_dht.print_tensor_shape``: prints the shape ``[..]``."""
    if not isinstance(t, DenseHostTensor):
        raise KernelError(f"expected a DenseHostTensor, got {type(t).__name__}")
    print_line(format_dims(t.array.shape))
    return CHAIN


def get_tensor_shape(t: Any) -> TensorShape:
    """``tfrt_dht.get_tensor_shape %t`` -> ``!ts.shape``."""
    shape = getattr(t, "shape", None)
    if not isinstance(shape, TensorShape):
        raise KernelError(f"expected a host tensor, got {type(t).__name__}")
    return shape


def no_op_ht(t: DenseHostTensor) -> Chain:
    """``tfrt_dht.no_op_ht``: consumes a tensor."""
    return CHAIN


def get_buffer(t: DenseHostTensor) -> tuple[HostBuffer, Chain]:
    """``tfrt_dht.get_buffer %t, %ch`` -> (buffer sharing the tensor's bytes, chain)."""
    if not isinstance(t, DenseHostTensor):
        raise KernelError(f"expected a DenseHostTensor, got {type(t).__name__}")
    return t.buffer(), CHAIN


def get_buffer_slice(buffer: HostBuffer, offset: int, size: int) -> HostBuffer:
    """``tfrt_dht.get_buffer_slice %buf, %offset, %size`` -> the slice (sharing the bytes)."""
    try:
        return buffer.slice(int(offset), int(size))
    except ValueError as exc:
        raise KernelError(str(exc)) from None


def allocate_buffer(size: int, alignment: int, exec_ctx: ExecutionContext) -> HostBuffer:
    """``tfrt_dht.allocate_buffer %size, %alignment`` -> an uninitialized buffer of ``size``
    bytes (TFRT's ``AllocateBuffer``); refused -> ``Cannot allocate host buffer``."""
    try:
        return HostBuffer.allocate(int(size), exec_ctx.host.allocator)
    except AllocationError:
        raise KernelError("Cannot allocate host buffer") from None


def print_buffer(buffer: HostBuffer) -> Chain:
    """``tfrt_dht.print_buffer %buf, %ch``: prints ``HostBuffer<pointer=0x.., size=N>``."""
    print_line(str(buffer))
    return CHAIN


def numpy_free_kernels() -> dict[str, Callable[..., Any]]:
    """The kernels of this module that keep a NumPy-free tensor's buffer (docs/host.md), by
    name: the float32 creation, fill and set kernels and ``print_tensor`` (the same functions
    :func:`register` adds)."""
    kernels: dict[str, Callable[..., Any]] = {
        f"tfrt_dht.create_uninitialized_tensor.f32.{rank}": _create(F32, rank)
        for rank in range(0, 6)
    }
    kernels["tfrt_dht.fill_tensor_with_constant.f32"] = _fill(F32)
    kernels["tfrt_dht.set_tensor_with_constant_values.f32"] = _set_constant_values(F32)
    kernels["tfrt_dht.print_tensor"] = print_tensor
    return kernels


def register(registry: KernelRegistry) -> None:
    """Register every ``tfrt_dht.*`` (and ``tfrt_dht_sync.*``) kernel."""
    add = registry.add_kernel
    add_sync = registry.add_sync_kernel
    for dtype in NUMERIC_DTYPES:
        creates = [_create(dtype, rank) for rank in range(0, 6)]
        for sfx in suffixes(dtype):
            for rank, create in enumerate(creates):
                add(f"tfrt_dht.create_uninitialized_tensor.{sfx}.{rank}", create)
                add_sync(f"tfrt_dht_sync.create_uninitialized_tensor.{sfx}.{rank}", create)
            add(f"tfrt_dht.fill_tensor_with_constant.{sfx}", _fill(dtype))
            add(f"tfrt_dht.set_tensor_with_constant_values.{sfx}", _set_constant_values(dtype))
            add(f"tfrt_dht.set_tensor_with_values.{sfx}", _set_values(dtype))
            add(f"tfrt_dht.make_tensor.{sfx}", _make_tensor(dtype))
            add(f"tfrt_dht.tensor_equal.{sfx}", _equal(dtype))
            for infix, ulp in ULP_VARIANTS:
                add(f"tfrt_dht.tensor_allclose.{infix}{sfx}", _allclose(dtype, ulp))
            add_sync(f"tfrt_dht_sync.fill_tensor_with_constant.{sfx}", _sync_fill(dtype))
            add_sync(
                f"tfrt_dht_sync.set_tensor_with_constant_values.{sfx}", _sync_set(dtype)
            )
            add_sync(f"tfrt_dht_sync.tensor_equal.{sfx}", _sync_equal(dtype))
    add("tfrt_dht.print_tensor", print_tensor)
    add_sync("tfrt_dht_sync.print_tensor", print_tensor_sync)
    add("tfrt_dht.print_tensor_shape", print_tensor_shape)
    add("tfrt_dht.get_tensor_shape", get_tensor_shape)
    add_sync("tfrt_dht_sync.get_tensor_shape", get_tensor_shape)
    add("tfrt_dht.no_op_ht", no_op_ht)
    add("tfrt_dht.get_buffer", get_buffer)
    add("tfrt_dht.get_buffer_slice", get_buffer_slice)
    add("tfrt_dht.allocate_buffer", allocate_buffer)
    add("tfrt_dht.print_buffer", print_buffer)
