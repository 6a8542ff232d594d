"""AsyncValue: every state transition, waiters, indirect values, refcounts, helpers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pytfrt.host import (
    CHAIN,
    AsyncValue,
    AsyncValueError,
    Chain,
    IndirectAsyncValue,
    make_available,
    make_constructed,
    make_error,
    make_indirect,
    make_ready_chain,
    make_unconstructed,
    run_when_ready,
)
from pytfrt.host.async_value import all_available
from pytfrt.support.errors import ErrorCode, Status

STATE_QUERIES = ("is_available", "is_unavailable", "is_concrete", "is_error", "is_constructed")


def flags(av: AsyncValue[Any]) -> dict[str, bool]:
    return {name: getattr(av, name)() for name in STATE_QUERIES}


# -- states and transitions ----------------------------------------------------------------------


def test_new_value_is_unconstructed() -> None:
    av: AsyncValue[int] = AsyncValue()
    assert av.state == "unconstructed"
    assert flags(av) == {
        "is_available": False,
        "is_unavailable": True,
        "is_concrete": False,
        "is_error": False,
        "is_constructed": False,
    }
    assert av.get_error_or_none() is None


def test_emplace_makes_concrete() -> None:
    av: AsyncValue[list[int]] = make_unconstructed()
    payload = [1, 2]
    av.emplace(payload)
    assert av.state == "concrete"
    assert flags(av)["is_concrete"] and flags(av)["is_available"]
    assert av.get() is payload
    assert av.get_error_or_none() is None


def test_construct_then_set_state_concrete() -> None:
    av: AsyncValue[list[int]] = make_unconstructed()
    av.construct([])
    assert av.state == "constructed"
    assert av.is_constructed() and av.is_unavailable()
    av.get_constructed().append(3)  # the producer may still write into it
    with pytest.raises(AsyncValueError, match="state constructed"):
        av.get()
    av.set_state_concrete()
    assert av.is_concrete()
    assert av.get() == [3]


@pytest.mark.parametrize("make", [make_unconstructed, lambda: make_constructed("payload")])
def test_set_error_from_both_unavailable_states(make: Callable[[], AsyncValue[Any]]) -> None:
    av = make()
    av.set_error(Status("bad input", ErrorCode.INVALID_ARGUMENT))
    assert av.state == "error"
    assert av.is_error() and av.is_available() and not av.is_concrete()
    assert av.error == Status("bad input", ErrorCode.INVALID_ARGUMENT)
    assert av.get_error_or_none() == av.error


def test_set_error_from_string_is_internal() -> None:
    av: AsyncValue[int] = make_unconstructed()
    av.set_error("something broke")
    assert av.error == Status("something broke", ErrorCode.INTERNAL)


ILLEGAL: list[tuple[str, Callable[[], AsyncValue[Any]], Callable[[AsyncValue[Any]], None]]] = [
    ("emplace on constructed", lambda: make_constructed(1), lambda av: av.emplace(2)),
    ("emplace on concrete", lambda: make_available(1), lambda av: av.emplace(2)),
    ("emplace on error", lambda: make_error("e"), lambda av: av.emplace(2)),
    ("construct on constructed", lambda: make_constructed(1), lambda av: av.construct(2)),
    ("construct on concrete", lambda: make_available(1), lambda av: av.construct(2)),
    ("construct on error", lambda: make_error("e"), lambda av: av.construct(2)),
    ("concrete on unconstructed", make_unconstructed, lambda av: av.set_state_concrete()),
    ("concrete on concrete", lambda: make_available(1), lambda av: av.set_state_concrete()),
    ("concrete on error", lambda: make_error("e"), lambda av: av.set_state_concrete()),
    ("error on concrete", lambda: make_available(1), lambda av: av.set_error("x")),
    ("error on error", lambda: make_error("e"), lambda av: av.set_error("x")),
]


@pytest.mark.parametrize(("case", "make", "step"), ILLEGAL, ids=[c[0] for c in ILLEGAL])
def test_illegal_transitions_raise_and_leave_the_value_unchanged(
    case: str, make: Callable[[], AsyncValue[Any]], step: Callable[[AsyncValue[Any]], None]
) -> None:
    av = make()
    before = (av.state, av._value)
    with pytest.raises(AsyncValueError, match=r"in state (constructed|concrete|error|unconst)"):
        step(av)
    assert (av.state, av._value) == before


def test_get_and_error_accessors_check_the_state() -> None:
    with pytest.raises(AsyncValueError, match="state unconstructed"):
        make_unconstructed().get()
    with pytest.raises(AsyncValueError, match="error AsyncValue: boom"):
        make_error("boom").get()
    with pytest.raises(AsyncValueError, match="state concrete"):
        _ = make_available(1).error
    with pytest.raises(AsyncValueError, match="state unconstructed"):
        _ = make_unconstructed().error
    with pytest.raises(AsyncValueError, match="not constructed"):
        make_unconstructed().get_constructed()


def test_get_returns_falsy_payloads() -> None:
    payloads: tuple[Any, ...] = (0, None, "", [], False)
    for payload in payloads:
        assert make_available(payload).get() is payload


def test_repr_shows_state() -> None:
    assert repr(make_available(3)) == "AsyncValue(concrete: 3)"
    assert repr(make_error("nope")) == "AsyncValue(error: 'nope')"
    assert repr(make_unconstructed()) == "AsyncValue(unconstructed)"
    assert repr(make_constructed(1)) == "AsyncValue(constructed)"


# -- waiters ---------------------------------------------------------------------------------


def test_and_then_on_available_value_runs_immediately() -> None:
    ran: list[str] = []
    for av in (make_available(1), make_error("e")):
        av.and_then(lambda av=av: ran.append(av.state))
    assert ran == ["concrete", "error"]


def test_and_then_is_deferred_until_emplace() -> None:
    av: AsyncValue[int] = make_unconstructed()
    seen: list[int] = []
    av.and_then(lambda: seen.append(av.get()))
    assert seen == []
    av.emplace(11)
    assert seen == [11]


def test_and_then_is_not_run_by_construct_only_by_publication() -> None:
    av: AsyncValue[int] = make_unconstructed()
    ran: list[str] = []
    av.and_then(lambda: ran.append("x"))
    av.construct(1)
    assert ran == []
    av.set_state_concrete()
    assert ran == ["x"]


@pytest.mark.parametrize("publish", ["emplace", "set_error", "constructed", "constructed_error"])
def test_waiters_run_lifo_exactly_once(publish: str) -> None:
    av: AsyncValue[int] = make_constructed(0) if publish.startswith("constructed") else AsyncValue()
    order: list[int] = []
    for i in range(6):
        av.and_then(lambda i=i: order.append(i))
    if publish == "emplace":
        av.emplace(1)
    elif publish == "set_error":
        av.set_error("e")
    elif publish == "constructed":
        av.set_state_concrete()
    else:
        av.set_error("e")
    assert order == [5, 4, 3, 2, 1, 0]  # TFRT runs its waiter list from the head: LIFO
    av.and_then(lambda: order.append(99))  # later waiters run at once
    assert order == [5, 4, 3, 2, 1, 0, 99]


def test_waiter_cannot_tell_error_from_concrete_except_by_asking() -> None:
    results: list[tuple[bool, Any]] = []
    for publish in ("value", "error"):
        av: AsyncValue[int] = make_unconstructed()
        av.and_then(lambda av=av: results.append(
            (av.is_error(), av.error.message if av.is_error() else av.get())
        ))
        if publish == "value":
            av.emplace(4)
        else:
            av.set_error("bad")
    assert results == [(False, 4), (True, "bad")]


def test_waiter_exceptions_reach_the_producer_after_all_waiters_ran() -> None:
    av: AsyncValue[int] = make_unconstructed()
    ran: list[str] = []

    def boom(tag: str) -> Callable[[], None]:
        def waiter() -> None:
            ran.append(tag)
            raise RuntimeError(tag)

        return waiter

    av.and_then(lambda: ran.append("first-registered"))
    av.and_then(boom("second"))
    av.and_then(boom("third"))
    with pytest.raises(RuntimeError, match="^third$"):  # LIFO: "third" raises first
        av.emplace(1)
    assert ran == ["third", "second", "first-registered"]
    assert av.is_concrete()


def test_waiter_exception_on_available_value_reaches_the_consumer() -> None:
    def bad() -> None:
        raise KeyError("consumer")

    with pytest.raises(KeyError):
        make_available(1).and_then(bad)


def test_waiter_may_register_more_waiters_on_the_same_value() -> None:
    av: AsyncValue[int] = make_unconstructed()
    order: list[str] = []

    def outer() -> None:
        av.and_then(lambda: order.append("inner"))  # available now: runs at once
        order.append("outer")

    av.and_then(outer)
    av.emplace(0)
    assert order == ["inner", "outer"]


# -- indirect values -----------------------------------------------------------------------------


def test_indirect_forward_to_available_value_resolves_at_once() -> None:
    ind = make_indirect()
    assert ind.is_indirect() and ind.is_unresolved_indirect() and ind.is_unavailable()
    ran: list[int] = []
    ind.and_then(lambda: ran.append(ind.get()))
    target = make_available(8)
    ind.forward_to(target)
    assert ran == [8]
    assert ind.is_concrete() and not ind.is_unresolved_indirect()
    assert ind.target is target


def test_indirect_forward_to_unavailable_value_resolves_later() -> None:
    ind: IndirectAsyncValue[str] = make_indirect()
    target: AsyncValue[str] = make_unconstructed()
    ran: list[str] = []
    ind.and_then(lambda: ran.append(ind.get()))
    ind.forward_to(target)
    assert ran == [] and ind.is_unresolved_indirect()
    target.emplace("late")
    assert ran == ["late"]
    assert ind.state == "concrete"


def test_indirect_forwards_errors() -> None:
    ind = make_indirect()
    target: AsyncValue[int] = make_unconstructed()
    ind.forward_to(target)
    target.set_error(Status("failed", ErrorCode.ABORTED))
    assert ind.is_error()
    assert ind.error == Status("failed", ErrorCode.ABORTED)


def test_indirect_to_indirect_is_unwrapped_to_the_final_target() -> None:
    outer = make_indirect()
    inner = make_indirect()
    final: AsyncValue[int] = make_unconstructed()
    outer.forward_to(inner)
    inner.forward_to(final)
    assert outer.is_unresolved_indirect()
    final.emplace(3)
    assert outer.get() == 3
    assert outer.target is final
    assert inner.target is final


def test_indirect_to_resolved_indirect_is_unwrapped() -> None:
    inner = make_indirect()
    final = make_available("x")
    inner.forward_to(final)
    outer = make_indirect()
    outer.forward_to(inner)
    assert outer.target is final
    assert outer.get() == "x"


def test_indirect_emplace_and_set_error() -> None:
    a = make_indirect()
    a.emplace(5)
    assert a.get() == 5 and a.target is not None and a.target.get() == 5
    b = make_indirect()
    waiters: list[bool] = []
    b.and_then(lambda: waiters.append(b.is_error()))
    b.set_error("unresolved failure")
    assert waiters == [True]
    assert b.error == Status("unresolved failure")
    assert b.target is not None and b.target.is_error()


def test_indirect_forward_twice_or_to_itself_raises() -> None:
    ind = make_indirect()
    with pytest.raises(AsyncValueError, match="itself"):
        ind.forward_to(ind)
    ind.forward_to(make_unconstructed())  # the failed self-forward did not consume the slot
    with pytest.raises(AsyncValueError, match="twice"):
        ind.forward_to(make_available(1))
    with pytest.raises(AsyncValueError, match="twice"):
        ind.set_error("too late")


def test_indirect_waiters_run_lifo() -> None:
    ind = make_indirect()
    order: list[int] = []
    for i in range(4):
        ind.and_then(lambda i=i: order.append(i))
    ind.forward_to(make_available(None))
    assert order == [3, 2, 1, 0]


# -- reference counting --------------------------------------------------------------------------


class Tracked:
    """A payload that records when the runtime destroys it."""

    def __init__(self, log: list[str], name: str) -> None:
        self.log = log
        self.name = name

    def __tfrt_destroy__(self) -> None:
        self.log.append(self.name)


def test_refcount_and_destroy_hook() -> None:
    log: list[str] = []
    av = make_available(Tracked(log, "p"))
    assert av.ref_count == 1 and av.is_unique()
    assert av.add_ref(2) is av
    assert av.ref_count == 3 and not av.is_unique()
    av.drop_ref()
    av.drop_ref()
    assert av.is_unique() and log == []
    av.drop_ref()
    assert log == ["p"]
    assert av.ref_count == 0


def test_destroy_hook_runs_for_constructed_but_not_for_error_values() -> None:
    log: list[str] = []
    constructed = make_constructed(Tracked(log, "c"))
    constructed.drop_ref()
    assert log == ["c"]
    err = make_error("e")
    err.drop_ref()
    plain = make_available(42)  # payloads without the hook are fine
    plain.drop_ref()
    assert log == ["c"]


def test_drop_ref_below_zero_raises() -> None:
    av = make_available(1)
    av.drop_ref()
    with pytest.raises(AsyncValueError, match="below zero"):
        av.drop_ref()


def test_indirect_is_never_unique_and_owns_one_ref_of_its_target() -> None:
    log: list[str] = []
    ind = make_indirect()
    assert ind.ref_count == 1 and not ind.is_unique()
    target = make_available(Tracked(log, "t"))
    ind.forward_to(target)  # takes over the caller's reference
    assert not ind.is_unique()
    ind.drop_ref()
    assert log == ["t"]
    assert target.ref_count == 0


def test_indirect_destroy_keeps_a_shared_target_alive() -> None:
    log: list[str] = []
    target = make_available(Tracked(log, "shared"))
    ind = make_indirect()
    ind.forward_to(target.add_ref())
    ind.drop_ref()
    assert log == [] and target.is_unique()
    target.drop_ref()
    assert log == ["shared"]


# -- Chain and the make_* helpers ---------------------------------------------------------------


def test_chain_is_a_singleton() -> None:
    assert Chain() is CHAIN is Chain()
    assert repr(CHAIN) == "Chain()"
    ready = make_ready_chain()
    assert ready.is_concrete() and ready.get() is CHAIN
    assert make_ready_chain() is not ready  # a fresh value each time (own refcount)


def test_make_helpers_states() -> None:
    assert make_available(1).state == "concrete"
    assert make_unconstructed().state == "unconstructed"
    assert make_constructed(1).state == "constructed"
    assert make_constructed(1).get_constructed() == 1
    assert make_error("m").state == "error"
    assert make_error(Status("c", ErrorCode.CANCELLED)).error.code is ErrorCode.CANCELLED
    ind = make_indirect()
    assert isinstance(ind, IndirectAsyncValue) and ind.state == "unconstructed"
    for av in (make_available(1), make_unconstructed(), make_error("x")):
        assert av.ref_count == 1 and not av.is_indirect() and not av.is_unresolved_indirect()


# -- run_when_ready ------------------------------------------------------------------------------


def test_run_when_ready_with_no_pending_values_runs_at_once() -> None:
    ran: list[int] = []
    run_when_ready([], lambda: ran.append(0))
    run_when_ready([make_available(1), make_error("e")], lambda: ran.append(1))
    assert ran == [0, 1]


def test_run_when_ready_with_one_pending_value() -> None:
    pending: AsyncValue[int] = make_unconstructed()
    ran: list[int] = []
    run_when_ready([make_available(1), pending], lambda: ran.append(1))
    assert ran == []
    pending.set_error("errors count as ready")
    assert ran == [1]


@pytest.mark.parametrize("order", [(0, 1, 2, 3), (3, 2, 1, 0), (2, 0, 3, 1)])
def test_run_when_ready_with_many_pending_values(order: tuple[int, ...]) -> None:
    values: list[AsyncValue[int]] = [make_unconstructed() for _ in range(4)]
    values.append(values[1])  # a value listed twice is waited for once per listing
    ran: list[bool] = []
    run_when_ready([make_available(9), *values], lambda: ran.append(all_available(values)))
    for n, i in enumerate(order):
        assert ran == []
        values[i].emplace(i) if n % 2 else values[i].set_error("e")
    assert ran == [True]


def test_all_available() -> None:
    assert all_available([])
    assert all_available([make_available(1), make_error("e")])
    assert not all_available([make_available(1), make_unconstructed()])
