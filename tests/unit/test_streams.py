"""Stream analysis (docs/executor.md) and the ReadyKernelQueue order model (docs/executor.md).

Oracles: the expected stream ids/costs/parents are the ``expected-remark`` annotations of
TFRT's ``compiler/stream_analysis.mlir`` and the scheduling cases of TFRT's tests (allocator,
lifetimes ``test_linear``, scheduling ``lifo_scheduling`` / ``print_thread_id``), whose kernel
orders are the CHECK lines of those tests.  Programs are built by hand with
:func:`pytfrt.bef.builder.build_function`.
"""

from __future__ import annotations

import pytest

from pytfrt.bef import Program, ProgramError
from pytfrt.bef.builder import CHAIN, build_function
from pytfrt.bef.streams import RETURN, ROOT, analyze_streams, assign_stream_ids, simulate_order

pytestmark = pytest.mark.timeout(60)


def facts(analysis, which):  # type: ignore[no-untyped-def]
    f = analysis.op(which)
    return (f.stream_id, f.stream_cost, f.parent_stream)


def test_stream_function() -> None:
    """``@stream`` (cost_threshold 5): the a-chain and the b-chain form streams 0 and 1."""
    fn = build_function(
        "stream",
        ["a", "b"],
        [
            ("tfrt.constant.i32", [], ["a0"]),
            ("tfrt.add.i32", ["a", "a0"], ["a1"]),
            ("tfrt.add.i32", ["a", "a1"], ["a2"]),
            ("tfrt.constant.i32", [], ["b0"]),
            ("tfrt.add.i32", ["b", "b0"], ["b1"]),
            ("tfrt.add.i32", ["b", "b1"], ["b2"]),
            ("tfrt.add.i32", ["a2", "b2"], ["result"]),
        ],
        ["result"],
        cost_threshold=5,
    )
    a = analyze_streams(fn)
    s0, s1 = (0, 22, -1), (1, 15, 0)
    assert [facts(a, k) for k in range(7)] == [s0, s0, s0, s1, s1, s1, s0]
    assert facts(a, RETURN) == s0
    assert facts(a, ROOT) == s0
    assert a.root.child_streams == (1,)
    assert a.root.remark() == "stream id: 0, stream cost: 22, parent stream: -1, child streams: [1]"


def test_no_merge() -> None:
    """``@no_merge`` (module threshold 10): three expensive constants, three streams."""
    fn = build_function(
        "no_merge",
        [],
        [("tfrt.constant.i32", [], [v]) for v in ("x0", "x1", "x2")],
        ["x0", "x1", "x2"],
        cost_threshold=10,
    )
    a = analyze_streams(fn)
    assert [facts(a, k) for k in range(3)] == [(0, 12, -1), (2, 10, 0), (1, 10, 0)]
    assert facts(a, RETURN) == facts(a, ROOT) == (0, 12, -1)


def _cost_op(src: str, dst: str, cost: int, ident: int):  # type: ignore[no-untyped-def]
    from pytfrt.support.attributes import IntAttr

    return (
        "tfrt_test.test_cost",
        [src],
        [dst],
        {"cost": cost, "attributes": [("id", IntAttr(ident))]},
    )


def test_merge() -> None:
    """``@merge``: cheap independent streams are merged into stream 4 (cost 12)."""
    costs = [4, 4, 11, 4, 4]
    ops = [_cost_op("ch0", f"ch{i + 1}", c, i) for i, c in enumerate(costs)]
    ops.append(("tfrt.merge.chains", [f"ch{i}" for i in range(1, 6)], ["ch6"]))
    types = {f"ch{i}": CHAIN for i in range(7)}
    fn = build_function("merge", ["ch0"], ops, ["ch6"], types=types, cost_threshold=10)
    a = analyze_streams(fn)
    s0, s4 = (0, 18, -1), (4, 12, 0)
    assert [facts(a, k) for k in range(6)] == [s4, s4, s0, s4, s0, s0]
    assert facts(a, RETURN) == facts(a, ROOT) == s0


def test_merge_inter_dependent_streams_option() -> None:
    """``@merge_inter_dependent_streams``: chains only, so the base rules decide (3 and 0)."""
    types = {f"ch{i}": CHAIN for i in range(10)}
    ops = [
        _cost_op("ch0", "ch1", 5, 1),
        _cost_op("ch0", "ch2", 5, 2),
        ("tfrt.merge.chains", ["ch1", "ch2"], ["ch3"]),
        _cost_op("ch0", "ch4", 5, 3),
        _cost_op("ch0", "ch5", 5, 4),
        ("tfrt.merge.chains", ["ch4", "ch5"], ["ch6"]),
        ("tfrt.merge.chains", ["ch4", "ch5"], ["ch7"]),
        ("tfrt.merge.chains", ["ch6", "ch7"], ["ch8"]),
        ("tfrt.merge.chains", ["ch3", "ch8"], ["ch9"]),
    ]
    fn = build_function(
        "m",
        ["ch0"],
        ops,
        ["ch9"],
        types=types,
        cost_threshold=10,
        merge_inter_dependent_streams=True,
    )
    a = analyze_streams(fn)
    s0, s3 = (0, 16, -1), (3, 11, 0)
    assert [facts(a, k) for k in range(9)] == [s3, s3, s3, s0, s0, s0, s0, s0, s0]
    assert facts(a, ROOT) == s0


@pytest.mark.parametrize("revision", ["main", "de22adc4"])
def test_inter_dependent_side_uses_merge_cheap_streams(monkeypatch: pytest.MonkeyPatch,
                                                      revision: str) -> None:
    """A non-chain side use (d uses a, but d's parent is b) links the streams of a and b.

    Without the option the root's walk leaves a (merged with p) and b (merged with q) in
    different streams; with it, b (cost 6 + 1 < 10) is merged into a's stream first.
    """
    monkeypatch.setenv("PYTFRT_TFRT_REVISION", revision)
    ops = [
        ("k.a", [], ["a"], {"cost": 6}),
        ("k.p", [], ["p"], {"cost": 5}),
        ("k.q", [], ["q"], {"cost": 5}),
        ("k.b", [], ["b"], {"cost": 6}),
        ("k.d", ["b", "a"], ["d"], {"cost": 1}),
    ]
    plain = analyze_streams(build_function("f", [], ops, [], cost_threshold=10))
    assert plain.kernels[0].stream_id != plain.kernels[3].stream_id
    merged = analyze_streams(
        build_function("f", [], ops, [], cost_threshold=10, merge_inter_dependent_streams=True)
    )
    a, b, d = merged.kernels[0], merged.kernels[3], merged.kernels[4]
    assert a.stream_id == b.stream_id == d.stream_id
    if revision == "main":  # the root joins the operand-less return's stream
        assert a.stream_cost == 6 + 6 + 1
        assert merged.root.stream_id == merged.return_op.stream_id != a.stream_id
        assert merged.root.stream_cost == 1 + 1
    else:  # the root joins the costliest stream, and so does the return's cheap one
        assert a.stream_cost == 6 + 6 + 1 + 1 + 1
        assert merged.root.stream_id == a.stream_id


def allocator_function():  # type: ignore[no-untyped-def]
    ops = [("tfrt_test.make_tensor", [], [f"x{i}"]) for i in range(3)]
    return build_function("allocator", [], ops, [])


@pytest.mark.parametrize("revision", ["main", "de22adc4"])
def test_allocator_example(monkeypatch: pytest.MonkeyPatch, revision: str) -> None:
    """TFRT's allocator.mlir case: return 0, x2 1, x1 2, x0 3; run order x0, x2, x1.

    TFRT's main branch keeps the return in the root stream (0).  At de22adc4 the return had
    no operands, so its stream was an ordinary child of the root, and the root joined the
    first of the equally costly children, x0's stream (3).  Both run x0, x2, x1."""
    monkeypatch.setenv("PYTFRT_TFRT_REVISION", revision)
    fn = allocator_function()
    a = analyze_streams(fn)
    assert a.cost_from_root_mode and a.threshold == 1
    assert [k.stream_id for k in a.kernels] == [3, 2, 1]
    if revision == "main":
        assert a.return_op.stream_id == a.root.stream_id == 0
        assert a.root.child_streams == (3, 2, 1)
    else:
        assert a.return_op.stream_id == 0 and a.root.stream_id == 3
        assert a.return_op.parent_stream == 3
    program = assign_stream_ids(Program([fn]))
    assert program.streams_assigned
    assert simulate_order(fn) == [0, 2, 1]


@pytest.mark.parametrize("revision", ["main", "de22adc4"])
def test_lifetimes_test_linear(monkeypatch: pytest.MonkeyPatch, revision: str) -> None:
    """TFRT's lifetimes test_linear: stream ids and the vt.value construction order.

    TFRT's main branch: the root joins the return's stream (0), so every kernel without
    operands runs as a task in stream order -- new.chain (5), constant 5 (1), constant 4 (2),
    constant 1 (3), whose add and print follow inline after constant 2 (4): values 5, 4, 1, 2,
    3, as that revision's mlir_tests/bef_executor/lifetimes.mlir expects.  At de22adc4 the
    operand-less return was on no data path, so the root joined the costliest child stream,
    the one of constant 1, add and print (3): constant 1 runs inline first, then the other
    streams' tasks in stream order (5, 4, 2), then add -- values 1, 5, 4, 2, 3 as its file
    expects."""
    monkeypatch.setenv("PYTFRT_TFRT_REVISION", revision)
    types = {"ch0": CHAIN, "pch": CHAIN}
    ops = [
        ("tfrt.new.chain", [], ["ch0"]),
        ("vt.constant", [], ["v1"]),
        ("vt.constant", [], ["v2"]),
        ("vt.add", ["v1", "v2"], ["r"]),
        ("vt.print", ["r", "ch0"], ["pch"]),
        ("vt.constant", [], ["v4"]),
        ("vt.constant", [], ["v5"]),
    ]
    fn = build_function("test_linear", [], ops, [], types=types, cost_threshold=1)
    program = assign_stream_ids(Program([fn]))
    ids = [k.stream_id for k in program.functions[0].kernels]
    assert ids == [5, 3, 4, 3, 3, 2, 1]
    if revision == "main":
        assert fn.root_stream_id == 0
        # new.chain, constant 5, constant 4, constant 1, constant 2, add, print.
        assert simulate_order(fn) == [0, 6, 5, 1, 2, 3, 4]
    else:
        assert fn.root_stream_id == 3
        # constant 1, constant 5, constant 4, constant 2, add, new.chain, print.
        assert simulate_order(fn) == [1, 6, 5, 2, 3, 0, 4]


def lifo_function():  # type: ignore[no-untyped-def]
    types = {f"ch{i}": CHAIN for i in range(5)}
    ops = [
        ("tfrt.new.chain", [], ["ch0"]),
        _cost_op("ch0", "ch1", 1, 0),
        _cost_op("ch0", "ch2", 1, 1),
        _cost_op("ch1", "ch3", 1, 2),
        ("tfrt.merge.chains", ["ch2", "ch3"], ["ch4"]),
    ]
    return build_function("lifo_scheduling", [], ops, ["ch4"], types=types, cost_threshold=10)


def test_lifo_scheduling() -> None:
    """TFRT's scheduling.mlir lifo case: all in stream 0; id 0 then id 2 run back to back."""
    fn = lifo_function()
    assign_stream_ids(Program([fn]))
    assert {k.stream_id for k in fn.kernels} == {0}
    order = simulate_order(fn)
    assert order == [0, 1, 3, 2, 4]


def test_print_thread_id() -> None:
    """Only the second get_thread_id on %ch0 (t1) gets its own stream (1)."""
    types = {v: CHAIN for v in ("ch", "ch0", "ch1", "ch2", "ch3")}
    ops = [
        ("tfrt.new.chain", [], ["ch"]),
        ("tfrt_test.get_thread_id", ["ch"], ["t"]),
        ("tfrt.print.i32", ["t", "ch"], ["ch0"]),
        ("tfrt_test.get_thread_id", ["ch0"], ["t0"]),
        ("tfrt_test.get_thread_id", ["ch0"], ["t1"]),
        ("tfrt.print.i32", ["t0", "ch0"], ["ch1"]),
        ("tfrt.print.i32", ["t1", "ch1"], ["ch2"]),
        ("tfrt.merge.chains", ["ch1", "ch2"], ["ch3"]),
    ]
    fn = build_function("print_thread_id", [], ops, ["ch3"], types=types, cost_threshold=10)
    assign_stream_ids(Program([fn]))
    assert [k.stream_id for k in fn.kernels] == [0, 0, 0, 0, 1, 0, 0, 0]
    # t1 (index 4) is deferred to a task: it runs after everything that does not need it.
    order = simulate_order(fn)
    assert order.index(4) > order.index(5)


def test_invalid_cost_is_rejected() -> None:
    fn = build_function("f", [], [("k", [], ["x"], {"cost": 0})], ["x"])
    with pytest.raises(ProgramError, match="non-positive cost"):
        analyze_streams(fn)
