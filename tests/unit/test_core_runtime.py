"""Core runtime: OpAttrs printing, TensorHandle states, op handlers, dispatch semantics."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest

from pytfrt.core_runtime import (
    CoreRuntime,
    CpuOpHandler,
    LoggingOpHandler,
    NullOpHandler,
    OpAttrs,
    OpAttrsError,
    OpAttrType,
    OpError,
    OpNotSupportedError,
    TensorHandle,
    TensorHandleError,
)
from pytfrt.core_runtime.op_attrs import attrs_from_dict
from pytfrt.host import AsyncValue, DiagnosticCollector, HostContext
from pytfrt.support.attributes import DenseAttr
from pytfrt.tensor.dtype import F32, I32
from pytfrt.tensor.shape import TensorMetadata, TensorShape


@pytest.fixture
def rt() -> Any:
    host = HostContext("s", diagnostic_handler=DiagnosticCollector())
    core = CoreRuntime.of(host)
    yield core
    host.shutdown()


def _th(a: Any) -> TensorHandle:
    return TensorHandle.from_tensor(np.asarray(a))


# -- OpAttrs -----------------------------------------------------------------------------------


def test_op_attrs_print_format() -> None:
    attrs = OpAttrs()
    assert attrs.format() == "OpAttrs is empty\n"
    attrs.set_bool("b", True)
    attrs.set_int("i", 7, OpAttrType.I32)
    attrs.set_float("f", 2.0)
    attrs.set_string("s", "hello")
    attrs.set_dtype("d", "f32")
    attrs.set_array("arr", [1, 2, 3, 4, 5, 6], OpAttrType.I64)
    attrs.set_array("short", [1.5, 2.5], OpAttrType.F32)
    attrs.set_shape("shape", (1, -1, 3))
    attrs.set_shape("unranked", None)
    attrs.set_dense("dense", DenseAttr("i32", (2, 2), bytes(16)))
    attrs.set_aggregate("agg", ((OpAttrType.DENSE, False, DenseAttr("f32", (3,), bytes(12))),
                                (OpAttrType.I32, False, 1)))
    expected = (
        "OpAttrs contains 11 entries:\n"
        "  'agg' type=AGGREGATE value=elt_count=2 [{dtype=F32, rank=1, elt_count=3}, {unknown}]\n"
        "  'arr' type=I64 value=[1, 2, 3, 4, 5...]\n"
        "  'b' type=BOOL value=1\n"
        "  'd' type=DTYPE value=F32\n"
        "  'dense' type=DENSE value=dtype=I32, rank=2, elt_count=4\n"
        "  'f' type=F32 value=2.000000e+00\n"
        "  'i' type=I32 value=7\n"
        "  's' type=CHAR value=hello\n"
        "  'shape' type=SHAPE value=<1x?x3>\n"
        "  'short' type=F32 value=[1.500000e+00, 2.500000e+00]\n"
        "  'unranked' type=SHAPE value=<*>\n"
        "\n"
    )
    assert attrs.format() == expected


def test_op_attrs_freeze_and_set_twice() -> None:
    attrs = OpAttrs()
    attrs.set_int("a", 1)
    with pytest.raises(OpAttrsError, match="already set"):
        attrs.set_int("a", 2)
    frozen = attrs.freeze()
    assert frozen is attrs.freeze()
    # Freezing takes a snapshot (TFRT's core runtime): the map stays usable afterwards, and
    # the earlier snapshot keeps only the entries it had.
    attrs.set_int("b", 2)
    later = attrs.freeze()
    assert later is not frozen
    assert frozen.get("b") is None and later.get("b") == 2
    assert frozen.get("a") == 1 and frozen.get_typed("a", OpAttrType.I64) == 1
    with pytest.raises(OpAttrsError, match="has type I64"):
        frozen.get_typed("a", OpAttrType.F32)


# -- TensorHandle ------------------------------------------------------------------------------


def test_tensor_handle_print_states() -> None:
    md = TensorMetadata(F32, TensorShape((2, 3)))
    av: AsyncValue[Any] = AsyncValue()
    h = TensorHandle(md, av)
    assert h.format() == "future TensorHandle with metadata f32 [2, 3]"
    assert h.metadata == md and not h.is_available()
    with pytest.raises(TensorHandleError, match="not available"):
        h.get_tensor()
    av.emplace(np.zeros((2, 3), np.float32))
    assert h.format().startswith("DenseHostTensor dtype = f32, shape = [2, 3]")
    assert TensorHandle(None, AsyncValue()).format() == (
        "fully future TensorHandle with unresolved metadata"
    )
    err = AsyncValue()
    err.set_error("bad md")
    assert TensorHandle(err, AsyncValue()).format() == (
        "future TensorHandle with error metadata 'bad md'"
    )
    assert TensorHandle.from_error("boom").format() == "Error TensorHandle: 'boom'"


def test_tensor_handle_metadata_from_tensor() -> None:
    h = _th(np.ones((4, 1), np.int32))
    assert h.metadata == TensorMetadata(I32, TensorShape((4, 1)))
    assert h.tensor_av.get() is h.get_tensor()


# -- handlers and dispatch ---------------------------------------------------------------------


def test_null_handler_and_fallback(rt: CoreRuntime) -> None:
    cpu = CpuOpHandler(fallback=NullOpHandler())
    with pytest.raises(OpNotSupportedError, match="tf.invalidop was not supported by "
                                                  "NullOpHandler."):
        rt.execute("tf.invalidop", cpu, [])


def test_registered_handlers(rt: CoreRuntime) -> None:
    cpu = rt.create_cpu_op_handler()
    rt.register_op_handler("cpu", cpu)
    assert rt.get_op_handler("cpu") is cpu
    with pytest.raises(Exception, match="op_handler not found: gpu"):
        rt.get_op_handler("gpu")
    (r,) = rt.execute("tfrt_test.add", "cpu", [_th([1, 2]), _th([3, 4])])
    assert r.get_tensor().tolist() == [4, 6]


def test_metadata_error_is_synchronous_and_nothing_runs(rt: CoreRuntime) -> None:
    cpu = rt.create_cpu_op_handler()
    fut_av: AsyncValue[Any] = AsyncValue()
    a = TensorHandle(TensorMetadata(F32, TensorShape((2, 3))), fut_av)
    with pytest.raises(OpError, match="matmul arguments have incompatible shapes"):
        rt.execute("tfrt_test.matmul", cpu, [a, a])


def test_deferred_dispatch_runs_when_input_arrives(rt: CoreRuntime) -> None:
    cpu = rt.create_cpu_op_handler()
    src: AsyncValue[Any] = AsyncValue()
    a = TensorHandle(TensorMetadata(F32, TensorShape((2,))), src)
    (r,) = rt.execute("tfrt_test.relu", cpu, [a])
    assert r.format() == "future TensorHandle with metadata f32 [2]"
    src.emplace(np.array([-1.0, 2.0], np.float32))
    assert r.is_available() and r.get_tensor().tolist() == [0.0, 2.0]


def test_argument_error_propagates_without_running(rt: CoreRuntime) -> None:
    cpu = rt.create_cpu_op_handler()
    (r,) = rt.execute("tfrt_test.relu", cpu, [TensorHandle.from_error("upstream")])
    assert r.error is not None and r.error.message == "upstream"


def test_cancelled_request_gives_cancelled_results(rt: CoreRuntime) -> None:
    cpu = rt.create_cpu_op_handler()
    ctx = rt.host.new_execution_context()
    src: AsyncValue[Any] = AsyncValue()
    a = TensorHandle(TensorMetadata(F32, TensorShape((1,))), src)
    (r,) = rt.execute("tfrt_test.relu", cpu, [a], exec_ctx=ctx)
    ctx.request_context.cancel()
    src.emplace(np.ones(1, np.float32))
    assert r.error is not None and r.error.message == "Cancelled"


def test_async_op_and_no_metadata_op(rt: CoreRuntime) -> None:
    cpu = rt.create_cpu_op_handler()
    x = _th(np.arange(3, dtype=np.int32))
    (a,) = rt.execute("tfrt_test.async.noop", cpu, [x])
    (b,) = rt.execute("tfrt_test.async.noop_no_md", cpu, [x])
    assert a.format() == "future TensorHandle with metadata i32 [3]"
    assert b.format() == "fully future TensorHandle with unresolved metadata"
    rt.await_handles([a, b])
    assert a.get_tensor().tolist() == b.get_tensor().tolist() == [0, 1, 2]


def test_side_effecting_op_waits_for_chain(rt: CoreRuntime, capsys: Any) -> None:
    cpu = rt.create_cpu_op_handler()
    op = cpu.make_op("tfrt_test.print")
    chain: AsyncValue[Any] = AsyncValue()
    ctx = rt.host.new_execution_context()
    _, out_chain = op(ctx, [_th(np.array([1], np.int32))], attrs_from_dict({}), 0, chain)
    assert capsys.readouterr().out == "" and out_chain is not None
    assert not out_chain.is_available()
    from pytfrt.host import CHAIN

    chain.emplace(CHAIN)
    assert capsys.readouterr().out == "DenseHostTensor dtype = i32, shape = [1], values = [1]\n"
    assert out_chain.is_concrete()


def test_odd_collector_and_errors(rt: CoreRuntime) -> None:
    cpu = rt.create_cpu_op_handler()
    (r,) = rt.execute("tfrt_test.odd_collector", cpu, [_th(np.arange(6, dtype=np.int32))])
    assert r.get_tensor().tolist() == [1, 3, 5]
    (e,) = rt.execute("tfrt_test.odd_collector", cpu, [_th(np.ones((2, 2), np.int32))])
    assert e.error is not None and e.error.message == "expected a 1D tensor input"
    (e,) = rt.execute("tfrt_test.odd_collector", cpu, [_th(np.ones(2, np.float32))])
    assert e.error is not None and e.error.message == "expected a i32 element type"


def test_logging_handler_output(rt: CoreRuntime) -> None:
    stream = io.StringIO()
    log = LoggingOpHandler(rt.create_cpu_op_handler(), sync_log_results=True, stream=stream)
    rt.execute("tfrt_test.create_dense_tensor", log, [],
               {"shape": [2], "values": [3]})
    (r,) = rt.execute("tfrt_test.relu", log, [_th(np.array([-1, 2], np.int64))])
    assert stream.getvalue() == (
        "[0] dispatch 'tfrt_test.create_dense_tensor' 0 arguments, 1 result, "
        "OpAttrs contains 2 entries:\n"
        "  'shape' type=I64 value=[2]\n"
        "  'values' type=I64 value=[3]\n"
        "\n"
        "Inputs for [0]: 'tfrt_test.create_dense_tensor':\n"
        "\n"
        "Outputs for [0]: 'tfrt_test.create_dense_tensor':\n"
        "  Output for [0] tensor 0: DenseHostTensor dtype = i64, shape = [2], values = [3, 3]\n"
        "\n"
        "[1] dispatch 'tfrt_test.relu' 1 argument, 1 result, no attributes\n"
        "Inputs for [1]: 'tfrt_test.relu':\n"
        "  Input for [1] tensor 0: DenseHostTensor dtype = i64, shape = [2], values = [-1, 2]\n"
        "\n"
        "Outputs for [1]: 'tfrt_test.relu':\n"
        "  Output for [1] tensor 0: DenseHostTensor dtype = i64, shape = [2], values = [0, 2]\n"
        "\n"
    )
    assert log.name == "sync_logging"


def test_scalar_tensors_and_conversion(rt: CoreRuntime) -> None:
    cpu = rt.create_cpu_op_handler()
    (s,) = rt.execute("tfrt_test.create_from_scalar", cpu, [], {"shape": [2, 2], "value": 1})
    assert s.format() == "ScalarHostTensor dtype = i64, shape = [2, 2], value = 1"
    (t,) = rt.execute("tfrt_test.add", cpu, [s, s])
    assert t.format() == "ScalarHostTensor dtype = i64, shape = [2, 2], value = 2"
    (d,) = rt.execute("tfrt_test.relu", cpu, [s])  # implicit scalar -> dense conversion
    assert d.get_tensor().tolist() == [[1, 1], [1, 1]]


def test_every_op_has_docs_or_metadata() -> None:
    from pytfrt.core_runtime import cpu_op_registry

    names = cpu_op_registry().names()
    assert all(n.startswith("tfrt_test.") for n in names)
    for required in ("tfrt_test.matmul", "tfrt_test.add", "tfrt_test.relu", "tfrt_test.sigmoid",
                     "tfrt_test.softmax", "tfrt_test.reduce_mean", "tfrt_test.cast",
                     "tfrt_test.reshape", "tfrt_test.transpose", "tfrt_test.equal",
                     "tfrt_test.argmax", "tfrt_test.async.noop", "tfrt_test.print",
                     "tfrt_test.error.tensor", "tfrt_test.odd_collector",
                     "tfrt_test.create_dense_tensor", "tfrt_test.create_from_scalar"):
        assert required in names
