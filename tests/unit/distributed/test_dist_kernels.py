# ruff: noqa: E501  (MLIR text: one op per line)
"""The tfrt_dist.* kernels: an MLIR program on the driver drives the cluster (NumPy oracle)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from pytfrt.host import ExecutionContext, HostContext, make_available
from pytfrt.kernel_libraries import builtin_registry
from pytfrt.support.errors import ErrorCode
from pytfrt.tensor import DenseHostTensor

DRIVER_PROGRAM = """
func.func @pipeline(%x: !t.tensor, %y: !t.tensor) -> (!t.tensor, !t.tensor, !t.tensor, i32) {
  %n = "tfrt_dist.num_workers"() : () -> i32
  %a = "tfrt_dist.remote_execute"(%x) {program = "basic", function = "scale", worker = 0 : i32}
      : (!t.tensor) -> !tfrt_dist.remote
  %b = "tfrt_dist.remote_execute"(%y) {program = "basic", function = "scale", worker = 1 : i32}
      : (!t.tensor) -> !tfrt_dist.remote
  %sum = "tfrt_dist.all_reduce"(%a, %b) {op = "sum"} : (!tfrt_dist.remote, !tfrt_dist.remote) -> !tfrt_dist.remote
  %mx = "tfrt_dist.all_reduce"(%a, %y) {op = "max"} : (!tfrt_dist.remote, !t.tensor) -> !tfrt_dist.remote
  %cat = "tfrt_dist.all_gather"(%a, %b) {axis = 0 : i64} : (!tfrt_dist.remote, !tfrt_dist.remote) -> !tfrt_dist.remote
  %bc = "tfrt_dist.broadcast"(%sum) {root = 0 : i32} : (!tfrt_dist.remote) -> !tfrt_dist.remote
  %again = "tfrt_dist.remote_execute"(%bc) {program = "basic", function = "scale", worker = 1 : i32}
      : (!tfrt_dist.remote) -> !tfrt_dist.remote
  %t0 = "tfrt_dist.fetch"(%again) : (!tfrt_dist.remote) -> !t.tensor
  %t1 = "tfrt_dist.fetch"(%mx) : (!tfrt_dist.remote) -> !t.tensor
  %t2 = "tfrt_dist.fetch"(%cat) : (!tfrt_dist.remote) -> !t.tensor
  tfrt.return %t0, %t1, %t2, %n : !t.tensor, !t.tensor, !t.tensor, i32
}

func.func @two_results(%p: i32) -> (i32, i32) {
  %s, %f = "tfrt_dist.remote_execute"(%p, %p) {program = "basic", function = "sum_and_first", worker = 1 : i32}
      : (i32, i32) -> (!tfrt_dist.remote, !tfrt_dist.remote)
  %put = "tfrt_dist.put"(%p) {worker = 0 : i32} : (i32) -> !tfrt_dist.remote
  %a = "tfrt_dist.fetch"(%s) : (!tfrt_dist.remote) -> i32
  %b = "tfrt_dist.fetch"(%put) : (!tfrt_dist.remote) -> i32
  tfrt.return %a, %b : i32, i32
}

func.func @remote_failure() -> !t.tensor {
  %r = "tfrt_dist.remote_execute"() {program = "basic", function = "fail", worker = 0 : i32}
      : () -> !tfrt_dist.remote
  %t = "tfrt_dist.fetch"(%r) : (!tfrt_dist.remote) -> !t.tensor
  tfrt.return %t : !t.tensor
}

func.func @wrong_arity(%p: i32) -> !tfrt_dist.remote {
  %r = "tfrt_dist.remote_execute"(%p, %p) {program = "basic", function = "sum_and_first", worker = 0 : i32}
      : (i32, i32) -> !tfrt_dist.remote
  tfrt.return %r : !tfrt_dist.remote
}
"""


@pytest.fixture(scope="module")
def driver(cluster: Any, basic: Any) -> Iterator[tuple[HostContext, Any, list[str]]]:
    from pytfrt.executor import load_program
    from pytfrt.mlir import compile_mlir

    diagnostics: list[str] = []
    host = HostContext("mstd:1", builtin_registry(), lambda d: diagnostics.append(d.message))
    cluster.attach(host)
    bef = load_program(compile_mlir(DRIVER_PROGRAM, "driver.mlir"), host)
    yield host, bef, diagnostics
    host.shutdown()


def _run(driver: tuple[HostContext, Any, list[str]], name: str, *args: Any) -> list[Any]:
    host, bef, _ = driver
    fn = bef.get_function(name)
    results = fn.execute(ExecutionContext(host.new_request()), [make_available(a) for a in args])
    host.await_values(results)
    return results


def test_a_program_drives_remote_execution_and_collectives(driver: Any) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((2, 3), 3.0, np.float32)
    t0, t1, t2, n = _run(driver, "pipeline", DenseHostTensor.from_numpy(x),
                         DenseHostTensor.from_numpy(y))
    assert n.get() == 2
    np.testing.assert_array_equal(t0.get().array, 2 * (2 * x + 2 * y))
    np.testing.assert_array_equal(t1.get().array, np.maximum(2 * x, y))
    np.testing.assert_array_equal(t2.get().array, np.concatenate([2 * x, 2 * y]))
    t0.get().array[0, 0] = -1  # fetched tensors are writable driver memory


def test_several_results_and_put(driver: Any) -> None:
    a, b = _run(driver, "two_results", 21)
    assert (a.get(), b.get()) == (42, 21)


def test_a_remote_failure_is_an_error_value(driver: Any) -> None:
    (t,) = _run(driver, "remote_failure")
    assert t.is_error() and t.error.code is ErrorCode.INTERNAL
    assert "worker 0: 'fail' failed" in t.error.message


def test_result_count_mismatch_is_diagnosed(driver: Any) -> None:
    (r,) = _run(driver, "wrong_arity", 1)
    assert r.is_error()
    assert "'sum_and_first' has 2 result(s), the op 1" in r.error.message
    assert any("the op 1" in d for d in driver[2])


def test_the_driver_program_example(cluster: Any) -> None:
    import importlib.util
    from pathlib import Path

    path = (Path(__file__).resolve().parents[3] / "examples" / "distributed"
            / "run_driver_program.py")
    spec = importlib.util.spec_from_file_location("dist_run_driver_program", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    x0 = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    x1 = np.full((3, 4), 0.25, np.float32)
    np.testing.assert_array_equal(example.run(cluster, x0, x1), 2 * (x0 + x1))
