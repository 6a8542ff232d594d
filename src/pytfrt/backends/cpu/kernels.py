"""CPU tensor kernels: ``eigen.*`` and the CPU ``tfrt_test.*`` tensor kernels (docs/kernels.md).

Thin registration wrappers: each checks its operands' dtypes and shapes (TFRT's messages, as
kernel errors / diagnostics) and calls the plain functions of :mod:`pytfrt.backends.cpu.ops`
and :mod:`pytfrt.backends.cpu.nn_ops`.  In-place kernels return a fresh chain; kernels that
make a tensor allocate it through the host allocator (``Cannot allocate tensor``).

=========================================  ==================================================
kernel                                     operands -> results
=========================================  ==================================================
``eigen.matmul.T``, ``tfrt_test.matmul.T.2``  (alpha, A, B, beta, C, ch) -> ch;
                                           C = alpha A B + beta C (T f32 f64 i32 i64)
``tfrt_test.broadcast.T.R`` (R 1..4)       (bias, shape, ch) -> new tensor (see ops docstring
                                           for rank-2 biases, as the XOR playground uses)
``tfrt_test.relu.T`` / ``relu_inplace.T``  (A, B, ch) / (A, ch)
``tfrt_test.add.T`` / ``add_inplace.T``    (A, B, C, ch): C = A + B / (A, B, ch): B = A + B
``tfrt_test.equal.T`` / ``equal_inplace.T``  same, (A == B) as T
``tfrt_test.argmax.T.2``                   (A, ch) -> i32 [rows]
``tfrt_test.reduce_mean.T.1``              (A, ch) -> rank-0 tensor
``tfrt_test.cast.S_to_D``                  (A, B, ch): B = A as D
``tfrt_test.relu_grad_inplace.T``          (activation, grad, ch)
``tfrt_test.slice_inplace.T.3``            (input, begin i64, ch, output)
``tfrt_test.max_pooling_2d.f32``,          (in, out, ch) {padding, pool_size, strides}
``eigen.max_pooling_2d.f32``
``eigen.conv2d.f32``                       (in, filter, out, ch) {padding, strides}
``eigen.batch_norm.f32``                   (x, scale, offset, mean, variance, ch) {epsilon}
``tfrt_test.zero_padding.f32``,            (in, out, ch) {padding}
``eigen.zero_padding.f32``
``tfrt_test.flatten.f32``, ``tensor_transpose.f32``, ``mean_axis_zero.f32``,
``subtract_inplace.f32``, ``global_average_pooling.f32``   (in, out, ch)
``tfrt_test.softmax_inplace.f32``          (A, ch)
``tfrt_test.gradient_descent.f32``         (grad, lr, out, ch): out -= grad * lr[0]
=========================================  ==================================================

The ``eigen.*`` kernels evaluate inline (TFRT's Eigen pool would also run small problems
inline); large NumPy/BLAS work releases the GIL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

from pytfrt.backends.cpu import nn_ops, ops, provide_fused_segment_kernels
from pytfrt.host.async_value import CHAIN, Chain
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.registry import Attr, KernelError, KernelRegistry
from pytfrt.tensor import dtype as dt
from pytfrt.tensor.dense_host_tensor import AllocationError, DenseHostTensor, wrap_result
from pytfrt.tensor.dtype import DType
from pytfrt.tensor.shape import TensorShape

Kernel = Callable[..., Any]

MATMUL_DTYPES = (dt.F32, dt.F64, dt.I32, dt.I64)
ELEMENTWISE_DTYPES = (dt.F16, dt.F32, dt.F64, dt.I32, dt.I64)
FLOAT_DTYPES = (dt.F32, dt.F64)
CASTS = (
    (dt.I32, dt.F32), (dt.F32, dt.I32), (dt.I64, dt.F32), (dt.F32, dt.I64),
    (dt.F32, dt.F16), (dt.F16, dt.F32), (dt.F32, dt.F64), (dt.F64, dt.F32),
    (dt.I32, dt.I64), (dt.I64, dt.I32),
)


def _type_error(t: Any, dtype: DType) -> NoReturn:
    if not isinstance(t, DenseHostTensor):
        raise KernelError(f"expected a DenseHostTensor, got {type(t).__name__}")
    raise KernelError(f"tensor has dtype {t.dtype.name} but the kernel expects {dtype.name}")


def _arr(t: Any, dtype: DType) -> np.ndarray:
    """The array of ``t`` if it is a DenseHostTensor of ``dtype``, else a kernel error."""
    if type(t) is DenseHostTensor and t.dtype is dtype:
        return t.array
    _type_error(t, dtype)


def _new(exec_ctx: ExecutionContext, dtype: DType, array: np.ndarray) -> DenseHostTensor:
    try:
        return wrap_result(exec_ctx, dtype, array)
    except AllocationError as exc:
        raise KernelError(str(exc)) from None


# -- linear algebra ----------------------------------------------------------------------------


def _matmul(dtype: DType) -> Kernel:
    scalar = dtype.np_dtype.type

    def matmul(alpha: Any, a: Any, b: Any, beta: Any, c: Any) -> Chain:
        if (a.__class__ is DenseHostTensor and b.__class__ is DenseHostTensor
                and c.__class__ is DenseHostTensor and a.dtype is dtype and b.dtype is dtype
                and c.dtype is dtype):
            x, y, z = a.array, b.array, c.array
        else:
            x, y, z = _arr(a, dtype), _arr(b, dtype), _arr(c, dtype)
        if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[0] or z.shape != (
            x.shape[0], y.shape[1]
        ):
            ops.matmul_shape(x.shape, y.shape, z.shape)
        if alpha.__class__ is not scalar:
            alpha = scalar(alpha)
        if beta.__class__ is not scalar:
            beta = scalar(beta)
        ops.matmul(alpha, x, y, beta, z)
        return CHAIN

    return matmul


def _broadcast(dtype: DType) -> Kernel:
    def broadcast(bias: Any, shape: TensorShape, exec_ctx: ExecutionContext) -> DenseHostTensor:
        x = _arr(bias, dtype)
        target = shape.dims
        if not target or target[-1] != x.size or x.ndim == 0:
            ops.broadcast_shape(x.shape, target)
        return _new(exec_ctx, dtype, ops.broadcast(x, target))

    return broadcast


# -- element-wise --------------------------------------------------------------------------------


def _same(op: str, x: np.ndarray, y: np.ndarray) -> None:
    if x.shape != y.shape:
        ops.same_shape(op, x.shape, y.shape)


def _arr2(a: Any, b: Any, dtype: DType) -> tuple[np.ndarray, np.ndarray]:
    """The arrays of two DenseHostTensors of ``dtype`` (else the kernel error of :func:`_arr`)."""
    if (a.__class__ is DenseHostTensor and b.__class__ is DenseHostTensor and a.dtype is dtype
            and b.dtype is dtype):
        return a.array, b.array
    return _arr(a, dtype), _arr(b, dtype)


def _unary_out(op: str, dtype: DType, fn: Callable[..., object]) -> Kernel:
    def kernel(a: Any, b: Any) -> Chain:
        x, y = _arr2(a, b, dtype)
        _same(op, x, y)
        fn(x, y)
        return CHAIN

    return kernel


def _unary_inplace(dtype: DType, fn: Callable[..., object]) -> Kernel:
    def kernel(a: Any) -> Chain:
        fn(_arr(a, dtype))
        return CHAIN

    return kernel


def _binary_out(
    op: str, dtype: DType, fn: Callable[..., object]
) -> Kernel:
    def kernel(a: Any, b: Any, c: Any) -> Chain:
        x, y, z = _arr(a, dtype), _arr(b, dtype), _arr(c, dtype)
        _same(op, x, y)
        _same(op, x, z)
        fn(x, y, z)
        return CHAIN

    return kernel


def _binary_inplace(
    op: str, dtype: DType, fn: Callable[..., object]
) -> Kernel:
    def kernel(a: Any, b: Any) -> Chain:
        x, y = _arr(a, dtype), _arr(b, dtype)
        _same(op, x, y)
        fn(x, y, y)
        return CHAIN

    return kernel


def _cast(src: DType, dst: DType) -> Kernel:
    def cast(a: Any, b: Any) -> Chain:
        x, y = _arr(a, src), _arr(b, dst)
        _same("Cast", x, y)
        ops.cast(x, y)
        return CHAIN

    return cast


def _argmax(dtype: DType) -> Kernel:
    def argmax(a: Any, exec_ctx: ExecutionContext) -> DenseHostTensor:
        x = _arr(a, dtype)
        ops.argmax_shape(x.shape)
        return _new(exec_ctx, dt.I32, ops.argmax(x))

    return argmax


def _reduce_mean(dtype: DType) -> Kernel:
    def reduce_mean(a: Any, exec_ctx: ExecutionContext) -> DenseHostTensor:
        x = _arr(a, dtype)
        ops.reduce_mean_shape(x.shape)
        return _new(exec_ctx, dtype, ops.reduce_mean(x))

    return reduce_mean


def _slice(dtype: DType) -> Kernel:
    def slice_inplace(a: Any, begin: Any, chain: Any, out: Any) -> Chain:
        x, z = _arr(a, dtype), _arr(out, dtype)
        b = tuple(int(v) for v in _arr(begin, dt.I64).reshape(-1).tolist())
        ops.slice_shape(x.shape, b, z.shape)
        ops.slice_copy(x, b, z)
        return CHAIN

    return slice_inplace


def _in_out(
    dtype: DType,
    shape_rule: Callable[[tuple[int, ...], tuple[int, ...]], Any],
    fn: Callable[[np.ndarray, np.ndarray], None],
) -> Kernel:
    def kernel(a: Any, b: Any) -> Chain:
        x, y = _arr2(a, b, dtype)
        shape_rule(x.shape, y.shape)
        fn(x, y)
        return CHAIN

    return kernel


def _gradient_descent(dtype: DType) -> Kernel:
    def gradient_descent(grad: Any, lr: Any, out: Any) -> Chain:
        g, r, z = _arr(grad, dtype), _arr(lr, dtype), _arr(out, dtype)
        ops.gradient_descent_check(r)
        _same("GradientDescent", g, z)
        ops.gradient_descent(g, r, z)
        return CHAIN

    return gradient_descent


# -- NHWC ops --------------------------------------------------------------------------------


def _max_pool(dtype: DType, positive_floor: bool) -> Kernel:
    def max_pooling_2d(
        a: Any, b: Any, padding: Attr[str], pool_size: Attr[Any], strides: Attr[Any]
    ) -> Chain:
        x, y = _arr(a, dtype), _arr(b, dtype)
        nn_ops.pool_shape("MaxPool2D", x.shape, y.shape, padding, pool_size, strides)
        nn_ops.max_pool_2d(x, y, padding, pool_size, strides, positive_floor)
        return CHAIN

    return max_pooling_2d


def _conv2d(dtype: DType) -> Kernel:
    def conv2d(a: Any, w: Any, out: Any, padding: Attr[str], strides: Attr[Any]) -> Chain:
        x, f, y = _arr(a, dtype), _arr(w, dtype), _arr(out, dtype)
        nn_ops.conv2d_shape(x.shape, f.shape, y.shape, padding, strides)
        nn_ops.conv2d(x, f, y, padding, strides)
        return CHAIN

    return conv2d


def _batch_norm(dtype: DType) -> Kernel:
    def batch_norm(
        x: Any, scale: Any, offset: Any, mean: Any, variance: Any, epsilon: Attr[float]
    ) -> Chain:
        nn_ops.batch_norm_inplace(
            _arr(x, dtype), _arr(scale, dtype), _arr(offset, dtype), _arr(mean, dtype),
            _arr(variance, dtype), float(epsilon),
        )
        return CHAIN

    return batch_norm


def _zero_padding(dtype: DType) -> Kernel:
    def zero_padding(a: Any, b: Any, padding: Attr[Any]) -> Chain:
        x, y = _arr(a, dtype), _arr(b, dtype)
        pad = tuple(int(p) for p in padding)
        nn_ops.zero_padding_shape(x.shape, y.shape, pad)
        nn_ops.zero_padding(x, y, pad)
        return CHAIN

    return zero_padding


def register(registry: KernelRegistry) -> None:
    """Register every CPU tensor kernel (``eigen.*`` and the CPU ``tfrt_test.*`` ones)."""
    provide_fused_segment_kernels()
    add = registry.add_kernel
    for d in MATMUL_DTYPES:
        n = d.mlir_name
        add(f"eigen.matmul.{n}", _matmul(d))
        add(f"tfrt_test.matmul.{n}.2", _matmul(d))
    for d in ELEMENTWISE_DTYPES:
        n = d.mlir_name
        for rank in range(1, 5):
            add(f"tfrt_test.broadcast.{n}.{rank}", _broadcast(d))
        add(f"tfrt_test.relu.{n}", _unary_out("Relu", d, ops.relu))
        add(f"tfrt_test.relu_inplace.{n}", _unary_inplace(d, lambda x: ops.relu(x, x)))
        add(f"tfrt_test.relu_grad_inplace.{n}", _unary_out("ReluGrad", d, ops.relu_grad_inplace))
        add(f"tfrt_test.add.{n}", _binary_out("Add", d, ops.add))
        add(f"tfrt_test.add_inplace.{n}", _binary_inplace("Add", d, ops.add))
        add(f"tfrt_test.equal.{n}", _binary_out("Equal", d, ops.equal))
        add(f"tfrt_test.equal_inplace.{n}", _binary_inplace("Equal", d, ops.equal))
        add(f"tfrt_test.argmax.{n}.2", _argmax(d))
        add(f"tfrt_test.reduce_mean.{n}.1", _reduce_mean(d))
        add(f"tfrt_test.slice_inplace.{n}.3", _slice(d))
        add(f"tfrt_test.subtract_inplace.{n}", _unary_out("Subtract", d, ops.subtract_inplace))
        add(f"tfrt_test.flatten.{n}", _in_out(d, ops.flatten_shape, ops.flatten))
    for src, dst in CASTS:
        add(f"tfrt_test.cast.{src.mlir_name}_to_{dst.mlir_name}", _cast(src, dst))
    for d in FLOAT_DTYPES:
        n = d.mlir_name
        add(f"tfrt_test.max_pooling_2d.{n}", _max_pool(d, True))
        add(f"eigen.max_pooling_2d.{n}", _max_pool(d, False))
        add(f"eigen.conv2d.{n}", _conv2d(d))
        add(f"eigen.batch_norm.{n}", _batch_norm(d))
        add(f"eigen.zero_padding.{n}", _zero_padding(d))
        add(f"tfrt_test.zero_padding.{n}", _zero_padding(d))
        add(f"tfrt_test.softmax_inplace.{n}", _unary_inplace(d, ops.softmax_inplace))
        add(f"tfrt_test.gradient_descent.{n}", _gradient_descent(d))
        add(f"tfrt_test.tensor_transpose.{n}", _in_out(d, ops.transpose_shape, ops.transpose))
        add(
            f"tfrt_test.mean_axis_zero.{n}",
            _in_out(d, ops.mean_axis_zero_shape, ops.mean_axis_zero),
        )
        add(
            f"tfrt_test.global_average_pooling.{n}",
            _in_out(d, nn_ops.global_average_pooling_shape, nn_ops.global_average_pooling),
        )
