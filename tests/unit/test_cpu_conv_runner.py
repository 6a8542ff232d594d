"""``conv.runner``: a plan's call path for compiled models gives exactly what ``conv2d`` gives
-- on its short path (a repeated shape with ``out``, no residual or the residual in ``out``)
and on every case it hands to ``conv2d`` (first call, separate residual, strided input,
other shapes, float64) -- and raises ``conv2d``'s errors; checked against PyTorch's
convolution.  Also that a compiled model's conv kernels are bound to their plans."""

from __future__ import annotations

import numpy as np
import pytest

from pytfrt.backends.cpu import _dnnl_conv, conv, graph_nn
from pytfrt.backends.cpu.ops import OpError

torch = pytest.importorskip("torch")


def _reference(w, b, x, r=None):
    y = torch.nn.functional.conv2d(
        torch.from_numpy(np.ascontiguousarray(x, np.float64)).permute(0, 3, 1, 2),
        torch.from_numpy(w.astype(np.float64)).permute(3, 2, 0, 1),
        torch.from_numpy(b.astype(np.float64)), padding=1,
    ).permute(0, 2, 3, 1).numpy()
    return np.maximum(y if r is None else y + r, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_runner_matches_conv2d_and_torch(dtype):
    rng = np.random.default_rng(4)
    w = (rng.standard_normal((3, 3, 32, 48)) * 0.1).astype(dtype)
    b = rng.standard_normal(48).astype(dtype)
    plan = conv.plan_conv2d(w, layout="NHWC", pads=(1,) * 4, bias=b, activation="relu")
    run = conv.runner(plan)
    tol = dict(rtol=1e-4, atol=1e-4)
    for n in (1, 2, 1):  # a shape, another, the first again
        x = rng.standard_normal((n, 14, 14, 32)).astype(dtype)
        r = rng.standard_normal((n, 14, 14, 48)).astype(dtype)
        for _ in range(2):  # the first call of a shape goes through conv2d, then the short path
            out = np.empty((n, 14, 14, 48), dtype)
            assert run(x, None, out) is out
            np.testing.assert_array_equal(out, conv.conv2d(plan, x))
            np.testing.assert_allclose(out, _reference(w, b, x), **tol)
            out, expected = r.copy(), r.copy()
            assert run(x, out, out) is out  # the residual in place
            np.testing.assert_array_equal(out, conv.conv2d(plan, x, expected, out=expected))
            np.testing.assert_allclose(out, _reference(w, b, x, r), **tol)
            # a separate residual, no out, a strided input: conv2d's paths
            np.testing.assert_array_equal(run(x, r), conv.conv2d(plan, x, r))
            xs = np.concatenate([x, x], axis=2)[:, :, ::2]
            np.testing.assert_array_equal(run(xs, None, np.empty_like(out)),
                                          conv.conv2d(plan, xs))


def test_runner_raises_conv2d_errors():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((3, 3, 8, 16)).astype(np.float32)
    plan = conv.plan_conv2d(w, layout="NHWC", pads=(1,) * 4)
    run = conv.runner(plan)
    x = rng.standard_normal((1, 8, 8, 8)).astype(np.float32)
    run(x, None, np.empty((1, 8, 8, 16), np.float32))
    with pytest.raises(OpError, match="out must be an array of shape"):
        run(x, None, np.empty((1, 8, 8, 15), np.float32))
    with pytest.raises(OpError, match="channels"):
        run(rng.standard_normal((1, 8, 8, 7)).astype(np.float32), None,
            np.empty((1, 8, 8, 16), np.float32))
    big = np.zeros((1, 8, 8, 16), np.float32)  # out overlapping the input
    with pytest.raises(OpError, match="overlap"):
        run(big[..., :8], None, big)
    with pytest.raises(OpError, match="residual"):
        run(x, np.empty((1, 8, 8, 8), np.float32), np.empty((1, 8, 8, 16), np.float32))


def test_compiled_conv_kernels_are_bound_to_their_plans():
    rng = np.random.default_rng(6)
    w = rng.standard_normal((3, 3, 8, 16)).astype(np.float32)
    plan = conv.plan_conv2d(w, layout="NHWC", pads=(1,) * 4)
    bound = graph_nn.conv2d.specialize({1: plan})
    x = rng.standard_normal((1, 8, 8, 8)).astype(np.float32)
    out = np.empty((1, 8, 8, 16), np.float32)
    for _ in range(2):
        assert bound(x, plan, out=out) is out
        np.testing.assert_array_equal(out, conv.conv2d(plan, x))
    assert graph_nn.conv2d.specialize({1: "not a plan"}) is None
    if _dnnl_conv.available():
        assert plan.dnnl.prepared(x.shape, _dnnl_conv.NO_RESIDUAL)
        assert not plan.dnnl.prepared((2, 8, 8, 8), _dnnl_conv.NO_RESIDUAL)


@pytest.mark.parametrize("cin,size", [(8, 4), (32, 24)])  # one part; split over the threads
def test_the_short_path_on_several_threads(cin, size):
    """Each calling thread runs the short path with its own oneDNN stream and memory objects
    (made on its first call): a small convolution (one part on the calling thread) and a
    split one, from the main thread and two others at once, the same bits as conv2d."""
    import threading

    rng = np.random.default_rng(7)
    w = (rng.standard_normal((1, 1, cin, 24)) * 0.1).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    plan = conv.plan_conv2d(w, layout="NHWC", bias=b, activation="silu")
    run = conv.runner(plan)
    x = rng.standard_normal((1, size, size, cin)).astype(np.float32)
    x.flags.writeable = False
    want = conv.conv2d(plan, x)
    np.testing.assert_allclose(want, (lambda v: v / (1 + np.exp(-v)))(
        x.astype(np.float64).reshape(-1, cin) @ w.reshape(cin, 24) + b).reshape(want.shape),
        rtol=1e-5, atol=1e-5)
    if _dnnl_conv.available():
        assert plan.dnnl.parts(x.shape) == (1 if size == 4 else min(2, _parallel_threads()))
    errors: list[BaseException] = []

    def calls() -> None:
        try:
            for _ in range(20):
                out = np.empty_like(want)
                assert run(x, None, out) is out
                np.testing.assert_array_equal(out, want)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=calls) for _ in range(2)]
    for t in threads:
        t.start()
    calls()
    for t in threads:
        t.join()
    assert not errors, errors


def _parallel_threads() -> int:
    from pytfrt.backends.cpu import _parallel

    return _parallel.num_threads()
