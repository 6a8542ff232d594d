"""A compiled CNN's steady-state call path with the spin pool's C module: a bound split
convolution's whole call -- the runner's shape checks (``_spin_pool.native_runner``), the
pool's lock and budget, the job (``_spin_pool.bound``) -- runs with no Python frame between
the generated call code and oneDNN.  Checked: the native runner gives ``conv2d``'s bits on
its short path and hands every other case (residual operand, overlapping or non-contiguous
arrays, another dtype, byte order or shape) to the Python runner; it rejects bad arguments with
``TypeError``; and a compiled ONNX CNN called from two threads at once with two batch sizes
agrees with ONNX Runtime while its split convolutions run as pool jobs."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from pytfrt.backends.cpu import _dnnl_conv, _parallel, _spin_native, _spin_pool, conv, graph_nn
from pytfrt.backends.cpu.ops import OpError

needs_native = pytest.mark.skipif(
    _spin_native.module() is None or not _dnnl_conv.available()
    or _parallel.num_threads() < 2, reason="needs the C loops, oneDNN and two threads")


def _jobs_run() -> int:
    pool = _spin_pool._pool
    return 0 if pool is None else int(pool.ctrl[_spin_pool._SEQ * _spin_pool._LINE])


def _split_plan(seed: int = 0) -> tuple[conv.ConvPlan, np.random.Generator]:
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((3, 3, 64, 64)) * 0.05).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    plan = conv.plan_conv2d(w, layout="NHWC", pads=(1,) * 4, bias=b, activation="relu",
                            algorithm="dnnl")
    return plan, rng


@needs_native
def test_native_runner_short_path_and_every_other_case_through_conv2d():
    plan, rng = _split_plan(1)
    run: Any = conv.runner(plan)
    kernel = graph_nn.conv2d.specialize({1: plan})
    # the compiled model calls the native runner itself (no Python wrapper around it)
    assert getattr(kernel, "func", None) is run.kernel.func is _spin_native.module().run_launcher
    x = rng.standard_normal((1, 28, 28, 64)).astype(np.float32)
    r = rng.standard_normal((1, 28, 28, 64)).astype(np.float32)
    want = conv.conv2d(plan, x)
    want_r = conv.conv2d(plan, x, r)
    assert plan.dnnl is not None and plan.dnnl.parts(x.shape) == 2
    out = np.empty_like(want)
    assert run(x, None, out) is out  # the first call: conv2d, then the launchers are known
    np.testing.assert_array_equal(out, want)
    for call in (lambda o: run(x, None, o), lambda o: run(x, out=o),
                 lambda o: kernel(x, plan, out=o)):
        before = _jobs_run()
        out = np.full_like(want, np.nan)
        assert call(out) is out and _jobs_run() == before + 1  # one job of the pool
        np.testing.assert_array_equal(out, want)
    out = r.copy()
    assert kernel(x, plan, out, out=out) is out  # the residual in place
    np.testing.assert_array_equal(out, want_r)
    # a residual operand, no out, a non-contiguous input, float64: the Python runner
    np.testing.assert_array_equal(kernel(x, plan, r, out=np.empty_like(want)), want_r)
    np.testing.assert_array_equal(run(x), want)
    xs = np.repeat(x, 2, axis=2)[:, :, ::2]  # x itself, strided
    np.testing.assert_array_equal(run(xs, None, np.empty_like(want)), want)
    with pytest.raises(OpError):
        run(x, None, np.empty((1, 28, 28, 63), np.float32))  # not the shape's output shape
    # float32 in the other byte order (NumPy's type number is float32's): the Python runner,
    # which names the dtype (the launcher would read or write the bytes as native float32)
    with pytest.raises(OpError, match="dtype"):
        run(x.astype(x.dtype.newbyteorder()), None, np.empty_like(want))
    with pytest.raises(OpError, match="dtype"):
        run(x, None, np.empty(want.shape, want.dtype.newbyteorder()))
    # out overlapping a C-contiguous input: conv2d's error, not the launcher
    flat = np.zeros(2 * x.size, np.float32)
    xo = flat[:x.size].reshape(x.shape)
    xo[...] = x
    with pytest.raises(OpError, match="overlap"):
        run(xo, None, flat[x.size // 2:x.size // 2 + want.size].reshape(want.shape))


@needs_native
def test_native_runner_rejects_bad_arguments():
    plan, rng = _split_plan(2)
    run: Any = conv.runner(plan)
    x = rng.standard_normal((1, 28, 28, 64)).astype(np.float32)
    out = np.empty((1, 28, 28, 64), np.float32)
    with pytest.raises(TypeError, match="unexpected keyword"):
        run(x, out=out, residual=None)
    with pytest.raises(TypeError, match="unexpected keyword"):
        run(x, None, out, out=out)
    with pytest.raises(TypeError, match="positional"):
        run(x, None, out, out)
    with pytest.raises(TypeError, match="positional"):
        run.kernel(x)


def _onnx_cnn():
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)

    def weight(name: str, *shape: int) -> TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32),
                                       name)

    inits = [weight("w0", 64, 16, 3, 3), weight("b0", 64), weight("w1", 64, 64, 3, 3),
             weight("b1", 64), weight("w2", 10, 64)]
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1] * 4, kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c0"], ["h0"]),
        helper.make_node("Conv", ["h0", "w1", "b1"], ["c1"], pads=[1] * 4, kernel_shape=[3, 3]),
        helper.make_node("Add", ["c1", "h0"], ["s1"]),
        helper.make_node("Relu", ["s1"], ["h1"]),
        helper.make_node("GlobalAveragePool", ["h1"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "w2"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16, 28, 28])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@needs_native
def test_compiled_cnn_on_two_threads_and_two_batch_sizes_matches_onnxruntime(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    import onnx

    import pytfrt

    path = tmp_path / "cnn.onnx"
    onnx.save(_onnx_cnn(), str(path))
    model = pytfrt.compile(str(path))
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((n, 16, 28, 28)).astype(np.float32) for n in (1, 2, 1, 2)]
    wants = [sess.run(None, {"x": x})[0] for x in xs]
    before = _jobs_run()
    for x, want in zip(xs, wants, strict=True):  # each shape's first call, then the steady state
        np.testing.assert_allclose(model(x), want, rtol=1e-4, atol=1e-4)
    steady = _jobs_run()
    assert steady > before
    np.testing.assert_allclose(model(xs[0]), wants[0], rtol=1e-4, atol=1e-4)
    assert _jobs_run() > steady  # a steady-state call's split convolutions ran as pool jobs
    errors: list[BaseException] = []

    def calls(offset: int) -> None:
        try:
            for i in range(12):
                k = (i + offset) % len(xs)
                np.testing.assert_allclose(model(xs[k]), wants[k], rtol=1e-4, atol=1e-4)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=calls, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
