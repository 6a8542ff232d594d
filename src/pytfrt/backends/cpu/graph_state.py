"""Runtime kernels of the graph dialect that are not array math: variables and control-flow
glue.

* Variables live in the request's :class:`~pytfrt.host.ResourceContext` (a
  ``CompiledModel`` keeps one per model) under ``tg.variable/<name>``, as a :class:`Variable`
  holding the current array.  ``tg.create_variable`` (in ``@tg_init``) makes one from its
  initial value (copied); ``tg.read_variable`` returns the current array, and the assigns
  replace it with a new array -- arrays are never written in place, so a value read earlier
  keeps its contents.  Each kernel takes and returns a chain (program order).
* ``tg.to_pred`` / ``tg.to_index``: a scalar tensor as the ``i1``/``i64`` value ``tfrt.if``,
  ``tfrt.while`` and ``tfrt.case`` branch on; ``tg.new_chain``: a chain in sync functions.

Thread-safety: a variable's array reference is replaced atomically under a lock; the model
serialises calls that update variables.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from pytfrt.host.async_value import CHAIN, Chain
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.registry import Attr, KernelError, kernel
from pytfrt.tensor.dense_host_tensor import DenseHostTensor

PREFIX = "tg.variable/"


class Variable:
    """A model variable: its current array (replaced, never mutated)."""

    __slots__ = ("name", "array", "lock")

    def __init__(self, name: str, array: np.ndarray) -> None:
        self.name = name
        self.array = array
        self.lock = threading.Lock()


def _variable(ctx: ExecutionContext, name: str) -> Variable:
    rc = ctx.resource_context
    var = rc.get_resource(PREFIX + name) if rc is not None else None
    if var is None:
        raise KernelError(f"variable '{name}' does not exist (no resource context or not "
                          "created)")
    return var  # type: ignore[no-any-return]


@kernel("tg.create_variable", sync=True)
def create_variable(value: DenseHostTensor, name: Attr[str], ctx: ExecutionContext) -> Chain:
    """Create variable ``name`` with a copy of ``value`` (replacing an existing one)."""
    rc = ctx.resource_context
    if rc is None:
        raise KernelError("tg.create_variable needs a resource context")
    rc.delete_resource(PREFIX + name)
    rc.create_resource(PREFIX + name, Variable(name, np.array(value.array, copy=True)))
    return CHAIN


@kernel("tg.read_variable", sync=True)
def read_variable(chain: Chain, name: Attr[str], ctx: ExecutionContext
                  ) -> tuple[DenseHostTensor, Chain]:
    """The current value of variable ``name``."""
    var = _variable(ctx, name)
    return DenseHostTensor.from_numpy(var.array), CHAIN


def _assign(ctx: ExecutionContext, name: str, value: np.ndarray, op: str) -> Chain:
    var = _variable(ctx, name)
    with var.lock:
        old = var.array
        if value.dtype != old.dtype or value.shape != old.shape:
            raise KernelError(
                f"{op}: variable '{name}' is {old.dtype}{list(old.shape)}, the value is "
                f"{value.dtype}{list(value.shape)}"
            )
        if op == "tg.assign_add_variable":
            value = old + value
        elif op == "tg.assign_sub_variable":
            value = old - value
        else:
            value = value.copy()
        var.array = value
    return CHAIN


@kernel("tg.assign_variable", sync=True)
def assign_variable(value: DenseHostTensor, chain: Chain, name: Attr[str],
                    ctx: ExecutionContext) -> Chain:
    """Variable ``name`` := ``value``."""
    return _assign(ctx, name, value.array, "tg.assign_variable")


@kernel("tg.assign_add_variable", sync=True)
def assign_add_variable(value: DenseHostTensor, chain: Chain, name: Attr[str],
                        ctx: ExecutionContext) -> Chain:
    """Variable ``name`` += ``value``."""
    return _assign(ctx, name, value.array, "tg.assign_add_variable")


@kernel("tg.assign_sub_variable", sync=True)
def assign_sub_variable(value: DenseHostTensor, chain: Chain, name: Attr[str],
                        ctx: ExecutionContext) -> Chain:
    """Variable ``name`` -= ``value``."""
    return _assign(ctx, name, value.array, "tg.assign_sub_variable")


@kernel("tg.to_pred", sync=True)
def to_pred(x: DenseHostTensor) -> bool:
    """A one-element tensor as a bool."""
    if x.array.size != 1:
        raise KernelError(f"a condition must have one element, got shape {list(x.array.shape)}")
    return bool(x.array.reshape(()))


@kernel("tg.to_index", sync=True)
def to_index(x: DenseHostTensor) -> int:
    """A one-element integer tensor as an int."""
    if x.array.size != 1 or x.array.dtype.kind not in "iu":
        raise KernelError(f"a branch index must be one integer, got {x!r}")
    return int(x.array.reshape(()))


@kernel("tg.after_chain", sync=True)
def after_chain(value: Any, chain: Chain) -> Any:
    """``value`` once ``chain`` is done (an error if the chain is one: the effects before a
    call's results, such as an assertion, fail the call)."""
    return value


@kernel("tg.new_chain", sync=True)
def new_chain() -> Chain:
    """A fresh chain."""
    return CHAIN


KERNELS: tuple[Any, ...] = (create_variable, read_variable, assign_variable,
                            assign_add_variable, assign_sub_variable, to_pred, to_index,
                            new_chain, after_chain)
"""The kernels of this module (registered by ``graph_kernels.register``)."""


def variable_values(ctx: ExecutionContext, names: list[str]) -> dict[str, np.ndarray]:
    """Copies of the named variables' current values."""
    return {n: _variable(ctx, n).array.copy() for n in names}
