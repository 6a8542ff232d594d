"""``corert.cond`` and ``corert.while``: control flow on TensorHandle predicates (docs/eager.md).

Both call BEF functions through the :class:`~pytfrt.host.Function` interface (never the
executor).  The functions take ``(chain, args...)`` and return ``(chain, results...)``; a
predicate is read from a waited-for tensor: a dense tensor with one element is true if the
element is non-zero; a string tensor if its first string is non-empty; anything else is the
error ``tensor predicate does not support type <t>``.

``corert.while``: the cond function returns ``(chain, predicate)``; while true, the body runs
on the current values.  An error chain from the cond function (it failed) ends the loop: every
result is that error.  Iterations whose values are already available run in a loop (no
recursion), so long loops do not grow the stack.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pytfrt.core_runtime.host_tensors import tensor_kind
from pytfrt.core_runtime.tensor_handle import TensorHandle
from pytfrt.host.async_value import AsyncValue, make_error
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.function import Function
from pytfrt.host.registry import KernelFrame, KernelRegistry, kernel
from pytfrt.tensor.string_host_tensor import StringHostTensor


class PredicateError(ValueError):
    """A tensor that cannot serve as a predicate."""


def tensor_predicate(tensor: Any) -> bool:
    """The truth value of a predicate tensor (module docstring).

    Raises:
        PredicateError: for tensors that are neither one-element dense nor string tensors.
    """
    if isinstance(tensor, np.ndarray):
        if tensor.size != 1:
            raise PredicateError(
                f"tensor predicate must have exactly one element, got {tensor.size}"
            )
        return bool(tensor.reshape(-1)[0] != 0)
    if isinstance(tensor, StringHostTensor):
        strings = tensor.strings()
        return bool(strings and strings[0])
    raise PredicateError(f"tensor predicate does not support type {tensor_kind(tensor)}")


def _errors(status: Any, n: int) -> list[AsyncValue[Any]]:
    """``n`` error values (one per result: each result owns its value)."""
    return [make_error(status) for _ in range(n)]


def _forward(frame: KernelFrame, outs: Sequence[AsyncValue[Any]]) -> None:
    for i, av in enumerate(outs):
        slot = frame.results[i]
        if slot is None:
            frame.set_result(i, av)
        else:
            slot.forward_to(av)  # type: ignore[attr-defined]


@kernel("corert.cond")
def cond(
    frame: KernelFrame,
    true_fn: Function,
    false_fn: Function,
    pred: TensorHandle,
    *args: AsyncValue[Any],
) -> None:
    """``%ch, %r = corert.cond %p @t @f (%ch0, %a) : (T) -> (T)``."""
    exec_ctx: ExecutionContext = frame.exec_ctx
    if pred.is_available():
        _run_cond(frame, exec_ctx, true_fn, false_fn, pred, list(args))
        return
    for i in range(frame.num_results):
        frame.allocate_indirect_result(i)
    pred.and_then(lambda: _run_cond(frame, exec_ctx, true_fn, false_fn, pred, list(args)))


def _run_cond(
    frame: KernelFrame,
    exec_ctx: ExecutionContext,
    true_fn: Function,
    false_fn: Function,
    pred: TensorHandle,
    args: list[AsyncValue[Any]],
) -> None:
    err = pred.error
    if err is not None:
        _forward(frame, _errors(err, frame.num_results))
        return
    try:
        which = tensor_predicate(pred.get_tensor())
    except PredicateError as exc:
        frame.report_error(str(exc))
        return
    fn = true_fn if which else false_fn
    _forward(frame, fn.execute(exec_ctx, args))


@kernel("corert.while")
def while_(
    frame: KernelFrame, cond_fn: Function, body_fn: Function, *args: AsyncValue[Any]
) -> None:
    """``%ch, %r = corert.while @cond @body (%ch0, %x) : (T) -> (T)``."""
    for i in range(frame.num_results):
        frame.allocate_indirect_result(i)
    _WhileLoop(frame, frame.exec_ctx, cond_fn, body_fn).run(list(args))


class _WhileLoop:
    """State of one ``corert.while``: iterate while the values are available synchronously."""

    def __init__(
        self, frame: KernelFrame, exec_ctx: ExecutionContext, cond_fn: Function, body_fn: Function
    ) -> None:
        self.frame = frame
        self.exec_ctx = exec_ctx
        self.cond_fn = cond_fn
        self.body_fn = body_fn

    def run(self, values: list[AsyncValue[Any]]) -> None:
        while True:
            cond_out = self.cond_fn.execute(self.exec_ctx, values)
            if self._decide(values, cond_out) is not True:
                return
            values = self.body_fn.execute(self.exec_ctx, values)

    def _decide(
        self, values: list[AsyncValue[Any]], cond_out: list[AsyncValue[Any]]
    ) -> bool | None:
        """True: run the body; False: the loop is finished; None: resumes when values exist."""
        pending = next((av for av in cond_out if av.is_unavailable()), None)
        if pending is not None:
            pending.and_then(lambda: self._continue(values, cond_out))
            return None
        if len(cond_out) > 1 and cond_out[0].is_error():
            # The cond function failed (its chain is an error): the loop ends with it.
            _forward(self.frame, _errors(cond_out[0].error, self.frame.num_results))
            return False
        pred_av = cond_out[-1]
        if pred_av.is_error():
            return self._step(values, TensorHandle.from_error(pred_av.error))
        pred: TensorHandle = pred_av.get()
        if not pred.is_available():
            pred.and_then(lambda: self._continue(values, cond_out))
            return None
        return self._step(values, pred)

    def _continue(self, values: list[AsyncValue[Any]], cond_out: list[AsyncValue[Any]]) -> None:
        if self._decide(values, cond_out) is True:
            self.run(self.body_fn.execute(self.exec_ctx, values))

    def _step(self, values: list[AsyncValue[Any]], pred: TensorHandle) -> bool:
        """Finish the loop (False) or ask for another iteration (True)."""
        err = pred.error
        if err is not None:
            _forward(self.frame, _errors(err, self.frame.num_results))
            return False
        try:
            go = tensor_predicate(pred.get_tensor())
        except PredicateError as exc:
            self.frame.report_error(str(exc))
            return False
        if not go:
            _forward(self.frame, [v.add_ref() for v in values])
            return False
        return True


def register(registry: KernelRegistry) -> None:
    """Register ``corert.cond`` and ``corert.while``."""
    registry.add(cond, while_)
