"""Fused optimizer updates: one kernel applies an optimizer step to every variable of a model.

A Keras optimizer's step is, per variable, a dozen small graph ops (reads of the slots, the
update arithmetic, assigns; ``-tg-fuse-optimizer`` recognises them,
:mod:`pytfrt.compiler.passes.optimizers`).  These kernels do it for all the variables of the
group in one call, one compiled pass over each variable, with TensorFlow's float rounding
(every operation in the variable's dtype, in the graph's order, no contraction into FMAs), so
a fused step computes the same bits as the ops it replaces.

* ``tg.apply_adam(alpha, grads..., squares...)`` -- Keras' ``Adam``: per variable ``m += (g -
  m) * (1 - beta_1)``, ``v += (s - v) * (1 - beta_2)`` with ``s = g * g`` (or the operand
  ``squares`` names: the densified square of a sparse gradient, which is not the square of the
  densified gradient), ``var -= m * alpha / (sqrt(v) + epsilon)``; ``alpha`` is the step's
  bias-corrected learning rate, computed by the graph.
* ``tg.apply_momentum(learning_rate, grads...)`` -- Keras' ``SGD`` with momentum (not
  Nesterov): ``m = m * momentum - g * learning_rate``, ``var += m``.

The optimizer's slots (``m``, ``v``) are updated in place: the pass makes sure nothing else in
the program reads them, and a compiled model hands out only copies of its variables.  The
variables themselves get a new array (a value read earlier in the step, or a view of it a
kernel kept, keeps its contents), as every assign does (:mod:`graph_state`).

Thread-safety: each variable's array is replaced under its lock; a model serialises calls that
update variables.  Errors (a missing variable, a gradient of another size or dtype) raise
:class:`~pytfrt.host.registry.KernelError` naming the variable.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from pytfrt.backends.cpu._jit import numba
from pytfrt.backends.cpu.graph_state import Variable, _variable
from pytfrt.host.async_value import CHAIN, Chain
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.parallel import chunks, parallel_for
from pytfrt.host.registry import KernelError, RemainingAttrs, kernel


# error_model="numpy": a float division by zero gives inf as in NumPy/TF instead of Numba's
# Python-style check, whose branch kept the loop from vectorising (2.5 -> 1.1 ns an element)
@numba.njit(nogil=True, cache=True, error_model="numpy")
def _adam(var: Any, m: Any, v: Any, g: Any, s: Any, dense: bool, c1: Any, c2: Any, eps: Any,
          alpha: Any, out: Any) -> None:  # pragma: no cover - compiled
    for i in range(var.size):
        gi = g[i]
        mi = m[i] + (gi - m[i]) * c1
        si = gi * gi if dense else s[i]
        vi = v[i] + (si - v[i]) * c2
        m[i] = mi
        v[i] = vi
        out[i] = var[i] - (mi * alpha) / (np.sqrt(vi) + eps)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _momentum(var: Any, m: Any, g: Any, momentum: Any, lr: Any,
              out: Any) -> None:  # pragma: no cover - compiled
    for i in range(var.size):
        mi = m[i] * momentum - g[i] * lr
        m[i] = mi
        out[i] = var[i] + mi


@lru_cache(maxsize=256)
def _names(text: str) -> tuple[str, ...]:
    return tuple(text.split(",")) if text else ()


def _slot(ctx: ExecutionContext, name: str, like: np.ndarray) -> np.ndarray:
    """The flat array of optimizer slot ``name`` (C-contiguous, its own: updated in place)."""
    slot = _variable(ctx, name)
    a = slot.array
    if a.dtype != like.dtype or a.size != like.size:
        raise KernelError(f"optimizer slot '{name}' is {a.dtype}{list(a.shape)}, its variable "
                          f"{like.dtype}{list(like.shape)}")
    if not (a.flags.c_contiguous and a.flags.writeable):
        slot.array = a = np.array(a, copy=True, order="C")
    return a.reshape(-1)


def _flat(x: Any, w: np.ndarray, name: str, what: str) -> np.ndarray:
    x = getattr(x, "array", x)
    if x.dtype != w.dtype or x.size != w.size:
        raise KernelError(f"the {what} of variable '{name}' is {x.dtype}{list(x.shape)}, "
                          f"the variable {w.dtype}{list(w.shape)}")
    return np.ascontiguousarray(x).reshape(-1)


PARALLEL_MIN = 1 << 16
"""Elements of a variable from which its update is split across the helper threads (a
memory-bound pass: the MLP's 784x512 weight, 4 arrays read and 3 written)."""


def _run(loop: Any, *arrays_and_scalars: Any) -> None:
    """``loop(*args)`` over the flat arrays among ``args`` (all of one length), in shards on
    the helper threads when they are long."""
    n = arrays_and_scalars[0].size
    if n < PARALLEL_MIN:
        loop(*arrays_and_scalars)
        return
    parts = chunks(n, PARALLEL_MIN // 2)

    def shard(i: int) -> None:
        a, b = parts[i]
        loop(*(x[a:b] if isinstance(x, np.ndarray) and x.ndim == 1 else x
               for x in arrays_and_scalars))

    parallel_for(shard, len(parts))


class _Scalars:
    """The kernel's scalar operands and attributes in each variable dtype met (usually one)."""

    def __init__(self, what: str, *values: Any) -> None:
        self.what = what
        self.values = values
        self.by_dtype: dict[np.dtype, tuple[Any, ...]] = {}

    def get(self, dt: np.dtype) -> tuple[Any, ...]:
        got = self.by_dtype.get(dt)
        if got is None:
            first = np.asarray(getattr(self.values[0], "array", self.values[0]))
            if first.size != 1:
                raise KernelError(f"the {self.what} must be a scalar, got shape "
                                  f"{list(first.shape)}")
            got = self.by_dtype[dt] = (first.reshape(()).astype(dt)[()],
                                       *(dt.type(v) for v in self.values[1:]))
        return got


def _publish(var: Variable, out: np.ndarray) -> None:
    with var.lock:
        var.array = out


@kernel("tg.apply_adam", sync=True)
def apply_adam(ctx: ExecutionContext, attrs: RemainingAttrs, *args: Any) -> Chain:
    """Kernel ``tg.apply_adam``: operands ``alpha, grads..., squares..., chain``; attributes
    (name-sorted) ``epsilon, moments, one_minus_beta_1, one_minus_beta_2, squares, variables,
    velocities``."""
    epsilon, moments, one_minus_beta_1, one_minus_beta_2, squares, variables, velocities = attrs
    names, ms, vs = _names(variables), _names(moments), _names(velocities)
    n = len(names)
    if len(args) < 2 + n or len(squares) != n or len(ms) != n or len(vs) != n or any(
            not (s < 0 or 1 + n <= s < len(args) - 1) for s in squares):
        raise KernelError(f"tg.apply_adam: {len(args) - 1} operands and squares "
                          f"{list(squares)} do not fit {n} variables")
    scalars = _Scalars("Adam step size", args[0], one_minus_beta_1, one_minus_beta_2, epsilon)
    for i, name in enumerate(names):
        var = _variable(ctx, name)
        w = var.array
        alpha, c1, c2, eps = scalars.get(w.dtype)
        g = _flat(args[1 + i], w, name, "gradient")
        j = squares[i]
        dense = j < 0
        s = g if dense else _flat(args[j], w, name, "squared gradient")
        out = np.empty(w.shape, w.dtype)
        _run(_adam, np.ascontiguousarray(w).reshape(-1), _slot(ctx, ms[i], w),
             _slot(ctx, vs[i], w), g, s, dense, c1, c2, eps, alpha, out.reshape(-1))
        _publish(var, out)
    return CHAIN


@kernel("tg.apply_momentum", sync=True)
def apply_momentum(ctx: ExecutionContext, attrs: RemainingAttrs, *args: Any) -> Chain:
    """Kernel ``tg.apply_momentum``: operands ``learning_rate, grads..., chain``; attributes
    (name-sorted) ``moments, momentum, variables``."""
    moments, momentum, variables = attrs
    names, ms = _names(variables), _names(moments)
    if len(args) != 2 + len(names) or len(ms) != len(names):
        raise KernelError(f"tg.apply_momentum: {len(args) - 1} operands do not fit "
                          f"{len(names)} variables")
    scalars = _Scalars("learning rate", args[0], momentum)
    for i, name in enumerate(names):
        var = _variable(ctx, name)
        w = var.array
        lr, mu = scalars.get(w.dtype)
        out = np.empty(w.shape, w.dtype)
        _run(_momentum, np.ascontiguousarray(w).reshape(-1), _slot(ctx, ms[i], w),
             _flat(args[1 + i], w, name, "gradient"), mu, lr, out.reshape(-1))
        _publish(var, out)
    return CHAIN


KERNELS: tuple[Any, ...] = (apply_adam, apply_momentum)
"""The chained kernels of this module (registered by ``graph_kernels.register``)."""
