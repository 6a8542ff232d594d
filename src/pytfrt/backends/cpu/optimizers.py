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

import numba
import numpy as np

from pytfrt.backends.cpu.graph_state import Variable, _variable
from pytfrt.host.async_value import CHAIN, Chain
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.registry import KernelError, RemainingAttrs, kernel


@numba.njit(nogil=True, cache=True)
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


@numba.njit(nogil=True, cache=True)
def _momentum(var: Any, m: Any, g: Any, momentum: Any, lr: Any,
              out: Any) -> None:  # pragma: no cover - compiled
    for i in range(var.size):
        mi = m[i] * momentum - g[i] * lr
        m[i] = mi
        out[i] = var[i] + mi


@lru_cache(maxsize=256)
def _names(text: str) -> tuple[str, ...]:
    return tuple(text.split(",")) if text else ()


def _slot(ctx: ExecutionContext, name: str, like: np.ndarray) -> Variable:
    """The optimizer slot ``name`` with an array it owns, C-contiguous, ``like``'s type."""
    slot = _variable(ctx, name)
    a = slot.array
    if a.dtype != like.dtype or a.size != like.size:
        raise KernelError(f"optimizer slot '{name}' is {a.dtype}{list(a.shape)}, its variable "
                          f"{like.dtype}{list(like.shape)}")
    if not (a.flags.c_contiguous and a.flags.writeable):
        slot.array = a = np.array(a, copy=True, order="C")
    return slot


def _flat(x: np.ndarray, var: Variable, what: str) -> np.ndarray:
    if x.dtype != var.array.dtype or x.size != var.array.size:
        raise KernelError(f"the {what} of variable '{var.name}' is {x.dtype}{list(x.shape)}, "
                          f"the variable {var.array.dtype}{list(var.array.shape)}")
    return np.ascontiguousarray(x).reshape(-1)


def _scalar(x: Any, dtype: np.dtype, what: str) -> Any:
    a = np.asarray(getattr(x, "array", x))
    if a.size != 1:
        raise KernelError(f"the {what} must be a scalar, got shape {list(a.shape)}")
    return a.reshape(()).astype(dtype)[()]


def _publish(var: Variable, out: np.ndarray) -> None:
    with var.lock:
        var.array = out.reshape(var.array.shape)


@kernel("tg.apply_adam", sync=True)
def apply_adam(ctx: ExecutionContext, attrs: RemainingAttrs, *args: Any) -> Chain:
    """Kernel ``tg.apply_adam``: operands ``alpha, grads..., squares..., chain``; attributes
    (name-sorted) ``epsilon, moments, one_minus_beta_1, one_minus_beta_2, squares, variables,
    velocities``."""
    epsilon, moments, one_minus_beta_1, one_minus_beta_2, squares, variables, velocities = attrs
    names, ms, vs = _names(variables), _names(moments), _names(velocities)
    n = len(names)
    operands = [getattr(a, "array", a) for a in args[:-1]]
    if len(operands) < 1 + n or len(squares) != n or len(ms) != n or len(vs) != n or any(
            not (s < 0 or 1 + n <= s < len(operands)) for s in squares):
        raise KernelError(f"tg.apply_adam: {len(operands)} operands and squares "
                          f"{list(squares)} do not fit {n} variables")
    alpha, grads = operands[0], operands[1:1 + n]
    for i, name in enumerate(names):
        var = _variable(ctx, name)
        w = var.array
        dt = w.dtype
        m, v = _slot(ctx, ms[i], w), _slot(ctx, vs[i], w)
        g = _flat(grads[i], var, "gradient")
        j = int(squares[i])
        s = g if j < 0 else _flat(operands[j], var, "squared gradient")
        out = np.empty(w.size, dt)
        _adam(np.ascontiguousarray(w).reshape(-1), m.array.reshape(-1), v.array.reshape(-1),
              g, s, j < 0, dt.type(one_minus_beta_1), dt.type(one_minus_beta_2),
              dt.type(epsilon), _scalar(alpha, dt, "Adam step size"), out)
        _publish(var, out)
    return CHAIN


@kernel("tg.apply_momentum", sync=True)
def apply_momentum(ctx: ExecutionContext, attrs: RemainingAttrs, *args: Any) -> Chain:
    """Kernel ``tg.apply_momentum``: operands ``learning_rate, grads..., chain``; attributes
    (name-sorted) ``moments, momentum, variables``."""
    moments, momentum, variables = attrs
    names, ms = _names(variables), _names(moments)
    operands = [getattr(a, "array", a) for a in args[:-1]]
    if len(operands) != 1 + len(names) or len(ms) != len(names):
        raise KernelError(f"tg.apply_momentum: {len(operands)} operands do not fit "
                          f"{len(names)} variables")
    lr, grads = operands[0], operands[1:]
    for i, name in enumerate(names):
        var = _variable(ctx, name)
        w = var.array
        dt = w.dtype
        m = _slot(ctx, ms[i], w)
        out = np.empty(w.size, dt)
        _momentum(np.ascontiguousarray(w).reshape(-1), m.array.reshape(-1),
                  _flat(grads[i], var, "gradient"), dt.type(momentum),
                  _scalar(lr, dt, "learning rate"), out)
        _publish(var, out)
    return CHAIN


KERNELS: tuple[Any, ...] = (apply_adam, apply_momentum)
"""The chained kernels of this module (registered by ``graph_kernels.register``)."""
