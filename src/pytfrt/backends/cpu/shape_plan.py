"""Shape computations run once per input shape: the compute function of ``tg.shape_plan``.

An exported Transformer computes its reshape targets, position ranges and attention masks at
run time from the shapes of its tensors (``shape``, ``gather``, ``expand_dims``, ``concat``,
``range``... of small integer vectors): with a dynamic batch and sequence, GPT-2 ran about 850
such kernels per call for some 30 distinct values.  ``-tg-shape-plans``
(:mod:`pytfrt.compiler.passes.shape_plan`) moves each group of them into the region of one
``tg.shape_plan`` op, whose operands are the tensors whose *shapes* the region reads (the
*key* operands) and the constants it uses.  Its results depend on nothing else, so this kernel
runs the region once per distinct tuple of key shapes -- op by op, through the runtime table's
compute functions (the same functions the separate kernels ran: the same values) -- and keeps
the results; every later call with those shapes returns them as they are.

The program (a JSON string, made by :func:`pytfrt.compiler.kernel_programs.shape_plan_program`):
``{"inputs": n, "key": [indices of the key operands], "ops": [[compute key, [value ids],
{attributes}], ...], "outputs": [value ids]}``; values ``0 .. n - 1`` are the operands, then
each op's results in order.  The op ``"constant"`` (``{"dtype", "shape", "value"}``: NumPy's
dtype string, the shape, the elements in C order) is a constant of the region: the program's
text is all it computes with, so runs of one text may share results.

Cached results are read-only arrays shared by every call (kernels never write their operands);
at most :data:`MAX_ENTRIES` shape tuples are kept per program, the oldest dropped first, and
results of more than :data:`MAX_BYTES` are not kept at all.
Thread-safe: a miss in two threads at once computes the same values twice, and either result
is kept.  Errors: whatever the region's ops raise (an op of the region given shapes it does
not accept raises as the separate kernel would have).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from pytfrt.backends.cpu.op_table import OpTable

GRAPH_OPS = OpTable()

MAX_ENTRIES = 32
"""Distinct key-shape tuples whose results one program keeps."""

MAX_BYTES = 1 << 22
"""Results larger than this (all outputs of one run together) are not kept."""

Step = tuple[Callable[..., Any], list[int], dict[str, Any]]


class _Plan:
    """One program: its steps (made on first use) and its cache of results by key shapes."""

    def __init__(self, text: str) -> None:
        program = json.loads(text)
        self.n = int(program["inputs"])
        self.key = [int(i) for i in program["key"]]
        self.ops = program["ops"]
        self.outputs = [int(i) for i in program["outputs"]]
        self.steps: list[Step] | None = None
        self.cache: dict[tuple[tuple[int, ...], ...], Any] = {}
        self.lock = threading.Lock()

    def _compile(self) -> list[Step]:
        from pytfrt.backends.cpu.graph_kernels import graph_ops

        table = graph_ops()
        steps: list[Step] = []
        for name, operands, attrs in self.ops:
            if name == "constant":
                value = np.array(attrs["value"], np.dtype(attrs["dtype"])).reshape(attrs["shape"])
                value.flags.writeable = False
                steps.append((_constant(value), [], {}))
                continue
            kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in attrs.items()}
            steps.append((table[name], [int(j) for j in operands], kw))
        return steps

    def evaluate(self, inputs: tuple[Any, ...]) -> Any:
        steps = self.steps
        if steps is None:
            steps = self.steps = self._compile()
        values = list(inputs)
        for fn, operands, kw in steps:
            res = fn(*[values[j] for j in operands], **kw)
            if isinstance(res, tuple | list):
                values.extend(res)
            else:
                values.append(res)
        outs = []
        for j in self.outputs:
            v = values[j]
            if isinstance(v, np.ndarray):
                v = v.view()
                v.flags.writeable = False
            outs.append(v)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __call__(self, *inputs: Any) -> Any:
        try:
            key = tuple([inputs[i].shape for i in self.key])  # arrays: 1 us, not 3
        except AttributeError:
            key = tuple(tuple(np.shape(inputs[i])) for i in self.key)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        result = self.evaluate(inputs)
        outs = result if isinstance(result, tuple) else (result,)
        if sum(getattr(v, "nbytes", 0) for v in outs) > MAX_BYTES:
            return result  # not kept: recomputed per call, as the separate kernels were
        with self.lock:
            if len(self.cache) >= MAX_ENTRIES:
                self.cache.pop(next(iter(self.cache)))
            self.cache[key] = result
        return result


def _constant(value: np.ndarray) -> Callable[[], np.ndarray]:
    return lambda: value


_PLANS: dict[str, _Plan] = {}
_PLANS_LOCK = threading.Lock()


def plan(program: str) -> _Plan:
    """The process's plan of ``program`` (one per distinct program text)."""
    p = _PLANS.get(program)
    if p is None:
        with _PLANS_LOCK:
            p = _PLANS.setdefault(program, _Plan(program))
    return p


@GRAPH_OPS.op("shape_plan")
def shape_plan(*inputs: Any, program: str) -> Any:
    """The region's outputs for these operands' shapes (see the module docstring): a tuple,
    or the one array of a one-output program."""
    return plan(program)(*inputs)


def _specialize(constants: dict[int, Any], program: str) -> Any:
    """``CompiledModel``'s call path binds the plan once (no lookup per call)."""
    return plan(program)


shape_plan.specialize = _specialize  # type: ignore[attr-defined]
