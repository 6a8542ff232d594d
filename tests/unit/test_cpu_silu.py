"""The compiled float32 SiLU (``_silu``) against NumPy's float64 ``x * sigmoid(x)``, alone over
float32's range and as the activation of oneDNN convolutions (whole, split in row bands and in
output-channel parts, with a residual), and the post-op path it replaces."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from pytfrt.backends.cpu import _dnnl_conv, _silu, conv

pytestmark = pytest.mark.skipif(not _silu.address(), reason="no C compiler or CPU without AVX2")


def _silu64(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    with np.errstate(over="ignore"):
        return x / (1.0 + np.exp(-x))


ISAS = [pytest.param(i, id=name) for i, name in enumerate(("avx512", "avx2"))]


@pytest.fixture(params=ISAS)
def isa(request, monkeypatch):
    """Each version this CPU runs (the AVX2 one through ``_silu.ISA`` on an AVX-512 CPU)."""
    if not _silu.addresses()[request.param]:
        pytest.skip("the CPU lacks this instruction set")
    monkeypatch.setattr(_silu, "ISA", "avx2" if request.param else None)
    assert _silu.address() == _silu.addresses()[request.param]
    return request.param


def test_the_function_over_float32s_range(isa):
    f = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int64)(_silu.address())
    rng = np.random.default_rng(0)
    x = np.concatenate([
        rng.standard_normal(5000) * 4,
        rng.uniform(-100, 100, 5000),
        np.float32(10.0) ** rng.uniform(-30, 38, 1000) * rng.choice([-1, 1], 1000),
        [0.0, -0.0, 87.0, -87.0, 88.5, -88.5, 88.8, -88.8, 1e-45, np.finfo(np.float32).max,
         -np.finfo(np.float32).max],
    ]).astype(np.float32)
    for n in (len(x), 1, 7, 17):  # the vector loop, and the tails of its last vector
        buf = np.concatenate([x[:n], np.float32([7.0] * 16)])
        y = buf[:n]
        assert f(y.ctypes.data, n) == 0
        assert (buf[n:] == 7.0).all()  # nothing written past the n-th element
        want = _silu64(x[:n])
        tiny = np.abs(want) < 1e-30  # exp(-x) beyond float32: both ~0
        np.testing.assert_allclose(y[~tiny], want[~tiny], rtol=5e-6)
        np.testing.assert_allclose(y[tiny], want[tiny], rtol=0, atol=1e-30)
    y = np.array([np.nan, np.inf, -np.inf, -89.0, -1e30], np.float32)
    f(y.ctypes.data, 5)
    assert np.isnan(y[0]) and y[1] == np.inf and np.isnan(y[2])
    assert (y[3:] == 0).all() and np.signbit(y[3:]).all()  # exp(-x) overflows: -0


@pytest.mark.parametrize("size,cin,cout,res", [(4, 8, 24, False), (28, 32, 48, True),
                                               (7, 64, 256, True), (7, 64, 256, False)])
def test_convolutions_apply_it_after_the_primitive(size, cin, cout, res, isa):
    """A 1x1 convolution with ``silu``: one part, row bands, channel parts (7x7 at batch 1),
    with and without the residual in ``out``; the same values as the float64 reference, and
    within float32 rounding of oneDNN's own post-op."""
    rng = np.random.default_rng(size)
    w = (rng.standard_normal((1, 1, cin, cout)) * 0.2).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    x = rng.standard_normal((1, size, size, cin)).astype(np.float32)
    r = rng.standard_normal((1, size, size, cout)).astype(np.float32)
    want = _silu64(x.reshape(-1, cin).astype(np.float64) @ w.reshape(cin, cout) + b
                   + (r.reshape(-1, cout) if res else 0)).reshape(r.shape)
    runs = []
    for enabled in (True, False):
        _silu.ENABLED = enabled
        try:
            plan = conv.plan_conv2d(w, layout="NHWC", bias=b, activation="silu")
        finally:
            _silu.ENABLED = True
        run = conv.runner(plan)
        for _ in range(2):  # the first call and the short path
            out = r.copy()
            assert run(x, out if res else None, out) is out
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
        runs.append(out)
        assert plan.dnnl._act_fn == (_silu.addresses()[isa] if enabled else 0)
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-6, atol=1e-6)
    if _dnnl_conv.available() and size == 7:
        assert plan.dnnl.parts(x.shape, 1 if res else 0) >= 1
