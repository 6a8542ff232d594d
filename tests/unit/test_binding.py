"""The binding planner: one plan per kernel and op shape, shared by every executor."""

from __future__ import annotations

from typing import Any

import pytest

from pytfrt.executor.call_plan import plan_slots
from pytfrt.host.async_value import CHAIN, AsyncValue, make_available
from pytfrt.host.binding import analyze_signature, plan_binding
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.function import Function
from pytfrt.host.kernel_frame import KernelError, result_list
from pytfrt.host.registry import (
    Attr,
    KernelEntry,
    KernelFrame,
    KernelKind,
    RemainingAttrs,
    RemainingFunctions,
)


def mixed(x: int, scale: Attr[int], fn: Function, rest: RemainingAttrs,
          ctx: ExecutionContext, *more: int) -> int:
    return x


def frame_kernel(frame: KernelFrame, x: int) -> None:
    return None


def av_kernel(x: AsyncValue[Any], fns: RemainingFunctions) -> int:
    return 0


def test_plan_binds_arguments_attributes_functions_and_context_in_order() -> None:
    sig = analyze_signature(mixed)
    plan = plan_binding("k", sig, 3, False, 3, 1)
    assert plan == (("v", 0), ("c", 0), ("f", 0), ("C", 1), ("x", 0), ("v", 1), ("v", 2))


def test_trailing_chain_rule_only_for_a_chain() -> None:
    sig = analyze_signature(lambda a, b: a)
    assert plan_binding("k", sig, 3, True, 0, 0) == (("v", 0), ("v", 1))
    with pytest.raises(KernelError, match="kernel 'k' takes 2 arguments but the op has 3"):
        plan_binding("k", sig, 3, False, 0, 0)


def test_missing_attribute_function_and_sync_asyncvalue_are_errors() -> None:
    with pytest.raises(KernelError, match="missing an attribute"):
        plan_binding("k", analyze_signature(mixed), 1, False, 0, 1)
    with pytest.raises(KernelError, match="missing a function"):
        plan_binding("k", analyze_signature(mixed), 1, False, 1, 0)
    with pytest.raises(KernelError, match="sync kernel 'k' cannot take an AsyncValue"):
        plan_binding("k", analyze_signature(av_kernel), 1, False, 0, 0, sync=True)


def test_interpreter_and_generated_call_follow_the_same_plan() -> None:
    entry = KernelEntry("k", mixed, KernelKind.ASYNC, analyze_signature(mixed))
    values = [7, 8, CHAIN]
    fn_marker = object()
    bound = entry.bind(values, [make_available(v) for v in values], ["s", "r1", "r2"],
                       [fn_marker], None, None)  # type: ignore[list-item]
    assert bound == [7, "s", fn_marker, ["r1", "r2"], None, 8, CHAIN]
    # The async executor's rendering: register numbers and constants of the same plan.
    slots, constants = plan_slots(entry, [10, 11, 12], 3, 1, ["i32"] * 10 + ["i32", "i32", "i32"])
    assert [k for k, _ in slots] == ["v", "c", "c", "l", "x", "v", "v"]
    assert [r for k, r in slots if k == "v"] == [10, 11, 12]
    assert constants == [("attr", 0), ("func", 0), ("attrs", 1)]
    # A kernel that needs its frame is not rendered statically.
    frame_entry = KernelEntry("f", frame_kernel, KernelKind.ASYNC, analyze_signature(frame_kernel))
    assert plan_slots(frame_entry, [0], 0, 0, ["i32"]) is None


def test_result_rules() -> None:
    assert result_list(None, 0, "k") == []
    assert result_list((1, 2), 1, "k") == [(1, 2)]
    assert result_list((1, 2), 2, "k") == [1, 2]
    with pytest.raises(KernelError, match="must return 2 results"):
        result_list(1, 2, "k")
    with pytest.raises(KernelError, match="returned no value"):
        result_list(None, 1, "k")
