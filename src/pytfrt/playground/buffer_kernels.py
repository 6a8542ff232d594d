"""The XOR programs' kernels on NumPy-free tensors: a kernel library for processes without NumPy.

``bef_executor`` runs a program whose kernels are all in :data:`KERNEL_NAMES` (plus the
``tfrt.*`` basic kernels) NumPy-free (:mod:`pytfrt.host.numpy_free`, docs/host.md): its
tensors keep their elements in a ``bytearray`` (``DenseHostTensor.raw``) and these kernels
compute on those buffers without importing NumPy, so a small program does not pay NumPy's
import (about 0.09 s, more than the XOR seed's 2,000 training steps take).

Where the kernels come from (one implementation each):

* ``tfrt_dht.*`` (float32 creation, fill, set, ``print_tensor``) and ``ts.build_shape``: the
  tensor library's own kernels, which keep a NumPy-free buffer;
* ``eigen.matmul.f32``, the ``tfrt_test.*`` float32 kernels, ``sigmoid_*``, ``mlp.*`` tensor
  kernels: the C code of fused segments (:func:`~pytfrt.backends.cpu.fusible_kernels.
  buffer_kernel_functions`, compiled once per machine), so the unfused steps compute exactly
  what the fused ones do;
* ``mlp.print_progress``: :mod:`pytfrt.playground.progress`, as in the NumPy library;
* ``tfrt_test.broadcast.f32.R`` (a copy) and ``mlp.print_accuracy.f32``: here.

Any operand these paths do not take (an ndarray-backed tensor, another dtype, a failing shape
check, no C compiler) goes to the library's NumPy kernel of the same name, imported then: it
computes, or reports the error, exactly as in any other process.  In a NumPy-free process the
float32 results differ from the NumPy kernels' in the last bits at most (``exp`` in double
rounded to float32, matrix products summed in order in float32, where NumPy calls its own SIMD
``exp`` and BLAS); the XOR programs print the same text either way (tested).

Thread-safety: as the kernels they call (the dataflow program orders writers and readers).
"""

from __future__ import annotations

import importlib
import math
import threading
from collections.abc import Callable
from typing import Any

from pytfrt.host.async_value import CHAIN, Chain
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.registry import KernelRegistry
from pytfrt.playground.progress import print_progress
from pytfrt.tensor.dense_host_tensor import DenseHostTensor, allocate_dense
from pytfrt.tensor.dtype import F32
from pytfrt.tensor.kernels import dht_kernels
from pytfrt.tensor.kernels.shape_kernels import build_shape
from pytfrt.tensor.kernels.util import print_line
from pytfrt.tensor.shape import TensorShape

_C_KERNELS = (
    "eigen.matmul.f32", "mlp.mse_loss.f32", "mlp.multiply_inplace.f32",
    "sigmoid_grad_inplace.f32", "sigmoid_inplace.f32", "tfrt_test.flatten.f32",
    "tfrt_test.gradient_descent.f32", "tfrt_test.mean_axis_zero.f32",
    "tfrt_test.subtract_inplace.f32", "tfrt_test.tensor_transpose.f32",
)
"""Kernels computed by the fused-segment C code (their NumPy twins are the fallback)."""

_BROADCAST_RANKS = range(1, 5)

_ORIGIN = (
    ("tfrt_dht.", "pytfrt.tensor.kernels"),
    ("ts.", "pytfrt.tensor.kernels"),
    ("eigen.", "pytfrt.backends.cpu.kernels"),
    ("tfrt_test.", "pytfrt.backends.cpu.kernels"),
    ("sigmoid", "pytfrt.playground.mlp"),
    ("mlp.", "pytfrt.playground.mlp"),
)
"""The library whose NumPy kernel of a name is the fallback (by name prefix)."""

_lock = threading.Lock()
_functions: dict[str, Any] | None = None
_fallbacks: dict[str, Callable[..., Any]] = {}


def _c_functions() -> dict[str, Any]:
    """``{kernel name: C function}`` (empty if the C module cannot be built)."""
    global _functions
    if _functions is None:
        with _lock:
            if _functions is None:
                from pytfrt.backends.cpu import _ccompile, fusible_kernels

                try:
                    found = fusible_kernels.buffer_kernel_functions()
                except _ccompile.CompileError:
                    found = {}
                _functions = {name: fn for name, (_roles, fn) in found.items()}
    return _functions


def numpy_kernel(name: str) -> Callable[..., Any]:
    """The NumPy kernel ``name`` of its own library (imported on first use), which the
    kernels here call for operands they do not take."""
    fn = _fallbacks.get(name)
    if fn is None:
        module_name = next(m for prefix, m in _ORIGIN if name.startswith(prefix))
        registry = KernelRegistry()
        registry.add_module(importlib.import_module(module_name))
        fn = _fallbacks[name] = registry.get(name).fn
    return fn


def _raw(*tensors: Any) -> bool:
    """Whether every operand is a NumPy-free float32 tensor."""
    for t in tensors:
        if t.__class__ is not DenseHostTensor or t.dtype is not F32 or t.raw is None:
            return False
    return True


# -- the fused-segment C kernels, unfused --------------------------------------------------------


def _c_kernel(name: str, arity: int) -> Callable[..., Any]:
    """A kernel of ``arity`` tensor operands computed by the C function of ``name``."""

    def call(*tensors: Any) -> Any:
        fn = _c_functions().get(name)
        if fn is not None and _raw(*tensors):
            r = fn(*[t.raw for t in tensors])
            if r[0]:
                return r[1] if len(r) > 1 else CHAIN
        return numpy_kernel(name)(*tensors)

    if arity == 1:
        def one(a: DenseHostTensor) -> Chain:
            return call(a)  # type: ignore[no-any-return]

        one.__name__ = name
        return one

    def two(a: DenseHostTensor, b: DenseHostTensor) -> Chain:
        return call(a, b)  # type: ignore[no-any-return]

    two.__name__ = name
    return two


def mse_loss_f32(prediction: DenseHostTensor, target: DenseHostTensor) -> float:
    """``mlp.mse_loss.f32``: mean((prediction - target)**2) as a float32 value."""
    fn = _c_functions().get("mlp.mse_loss.f32")
    if fn is not None and _raw(prediction, target):
        r = fn(prediction.raw, target.raw)
        if r[0]:
            return r[1]  # type: ignore[no-any-return]
    return numpy_kernel("mlp.mse_loss.f32")(prediction, target)  # type: ignore[no-any-return]


def gradient_descent_f32(grad: Any, lr: Any, out: Any) -> Chain:
    """``tfrt_test.gradient_descent.f32``: out -= grad * lr[0]."""
    fn = _c_functions().get("tfrt_test.gradient_descent.f32")
    if fn is not None and _raw(grad, lr, out) and fn(grad.raw, lr.raw, out.raw)[0]:
        return CHAIN
    return numpy_kernel("tfrt_test.gradient_descent.f32")(grad, lr, out)  # type: ignore[no-any-return]


def matmul_f32(alpha: Any, a: Any, b: Any, beta: Any, c: Any) -> Chain:
    """``eigen.matmul.f32``: C = alpha A B + beta C."""
    fn = _c_functions().get("eigen.matmul.f32")
    if (fn is not None and alpha.__class__ is float and beta.__class__ is float
            and _raw(a, b, c) and fn(a.raw, b.raw, c.raw, alpha, beta)[0]):
        return CHAIN
    return numpy_kernel("eigen.matmul.f32")(alpha, a, b, beta, c)  # type: ignore[no-any-return]


# -- here ----------------------------------------------------------------------------------------


def _broadcast(name: str) -> Callable[..., Any]:
    def broadcast(bias: Any, shape: TensorShape, exec_ctx: ExecutionContext) -> DenseHostTensor:
        """A new tensor of ``shape`` whose rows are the rank-1 ``bias``."""
        target = shape.dims
        if (_raw(bias) and bias.raw.ndim == 1 and target and target[-1] == bias.raw.shape[0]
                and math.prod(target) > 0):
            out = allocate_dense(exec_ctx, F32, target)
            if out.raw is not None:
                row = bytes(bias.raw.cast("B"))
                out.raw.cast("B")[:] = row * (math.prod(target) // target[-1])
                return out
        return numpy_kernel(name)(bias, shape, exec_ctx)  # type: ignore[no-any-return]

    return broadcast


def print_accuracy_f32(prediction: DenseHostTensor, target: DenseHostTensor) -> Chain:
    """``mlp.print_accuracy.f32``: ``correct: <rows whose outputs all match>/<rows>`` (an
    output matches when both it and its target are above 0.5 or both are not)."""
    if (_raw(prediction, target) and prediction.raw.shape == target.raw.shape
            and prediction.raw.ndim >= 1):
        rows = prediction.raw.shape[0]
        p, t = prediction.flat_view().tolist(), target.flat_view().tolist()
        width = len(p) // rows if rows else 0
        ok = sum(
            all((p[i] > 0.5) == (t[i] > 0.5) for i in range(r * width, (r + 1) * width))
            for r in range(rows))
        print_line(f"correct: {ok}/{rows}")
        return CHAIN
    return numpy_kernel("mlp.print_accuracy.f32")(prediction, target)  # type: ignore[no-any-return]


def _kernels() -> dict[str, Callable[..., Any]]:
    kernels = dict(dht_kernels.numpy_free_kernels())
    kernels["ts.build_shape"] = build_shape
    for name in _C_KERNELS:
        kernels[name] = _c_kernel(name, 1 if name == "sigmoid_inplace.f32" else 2)
    kernels["mlp.mse_loss.f32"] = mse_loss_f32
    kernels["tfrt_test.gradient_descent.f32"] = gradient_descent_f32
    kernels["eigen.matmul.f32"] = matmul_f32
    for rank in _BROADCAST_RANKS:
        name = f"tfrt_test.broadcast.f32.{rank}"
        kernels[name] = _broadcast(name)
    kernels["mlp.print_progress"] = print_progress
    kernels["mlp.print_accuracy.f32"] = print_accuracy_f32
    return kernels


KERNEL_NAMES: frozenset[str] = frozenset(_kernels())
"""Every kernel name this library defines."""


def register(registry: KernelRegistry) -> None:
    """Register every kernel of this library (fused segments are offered to the executor, as
    by the playground's own library)."""
    from pytfrt.backends.cpu import provide_fused_segment_kernels

    provide_fused_segment_kernels()
    for name, fn in _kernels().items():
        registry.add_kernel(name, fn)
