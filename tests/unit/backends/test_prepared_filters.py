"""A conv plan keeps one prepared copy of its filter and gives the original back exactly;
a compiled model drops the weights its plans replaced and still saves the original values.

Oracles: the filter itself (bit-exact round trips) and a NumPy direct convolution.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pytfrt
from pytfrt.backends.cpu import _dnnl_conv
from pytfrt.backends.cpu.conv import conv2d, plan_conv2d
from pytfrt.compiler import GraphBuilder
from pytfrt.compiler.api import compile_module

RNG = np.random.default_rng(7)


def _direct_nhwc(x: np.ndarray, w: np.ndarray, pads: tuple[int, int, int, int],
                 groups: int = 1) -> np.ndarray:
    """Reference NHWC convolution, stride 1: one einsum per tap."""
    kh, kw, cig, cout = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), pads[:2], pads[2:], (0, 0)))
    n, hp, wp, _ = xp.shape
    oh, ow = hp - kh + 1, wp - kw + 1
    kg = cout // groups
    y = np.zeros((n, oh, ow, cout))
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, i:i + oh, j:j + ow, g * cig:(g + 1) * cig]
                y[..., g * kg:(g + 1) * kg] += patch @ w[i, j, :, g * kg:(g + 1) * kg]
    return y


CASES = [
    # layout, (kh, kw, cin, cout), groups, dtype
    ("NHWC", (3, 3, 16, 32), 1, np.float32),
    ("NHWC", (1, 1, 8, 24), 1, np.float32),
    ("NHWC", (3, 3, 16, 16), 16, np.float32),  # depthwise
    ("NHWC", (3, 3, 16, 32), 4, np.float32),  # grouped
    ("NHWC", (3, 3, 3, 5), 1, np.float32),  # channels oneDNN pads in its blocked format
    ("NCHW", (3, 3, 8, 16), 1, np.float32),
    ("NCHW", (3, 3, 8, 8), 8, np.float32),
    ("NHWC", (3, 3, 8, 16), 4, np.float64),
    ("NHWC", (3, 3, 8, 16), 1, np.float16),
]


def _filter(layout: str, dims: tuple[int, int, int, int], groups: int, dtype: type,
            rng: np.random.Generator = RNG) -> np.ndarray:
    kh, kw, cin, cout = dims
    hwio = rng.standard_normal((kh, kw, cin // groups, cout)).astype(dtype)
    return hwio if layout == "NHWC" else np.ascontiguousarray(hwio.transpose(3, 2, 0, 1))


@pytest.mark.parametrize("layout,dims,groups,dtype", CASES)
def test_filter_round_trips_exactly_before_and_after_running(layout, dims, groups, dtype):
    w = _filter(layout, dims, groups, dtype)
    original = w.copy()
    plan = plan_conv2d(w, layout=layout, pads=(1, 1, 1, 1) if dims[0] == 3 else None,
                       groups=groups, copy=False)
    np.testing.assert_array_equal(plan.filter(), original)
    cin = dims[2]
    shape = (2, 6, 7, cin) if layout == "NHWC" else (2, cin, 6, 7)
    x = RNG.standard_normal(shape).astype(dtype)
    y = conv2d(plan, x)
    x_nhwc = x if layout == "NHWC" else x.transpose(0, 2, 3, 1)
    hwio = original if layout == "NHWC" else original.transpose(2, 3, 1, 0)
    pads = (1, 1, 1, 1) if dims[0] == 3 else (0, 0, 0, 0)
    ref = _direct_nhwc(x_nhwc, hwio.astype(np.float64), pads, groups)
    got = y if layout == "NHWC" else y.transpose(0, 2, 3, 1)
    tol = 2e-2 if dtype == np.float16 else 1e-4
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
    back = plan.filter()
    assert back.dtype == original.dtype and back.shape == original.shape
    np.testing.assert_array_equal(back, original)  # after the primitives were made
    np.testing.assert_array_equal(plan.weights.reshape(-1).size, original.size)


@pytest.mark.skipif(not _dnnl_conv.available(), reason="oneDNN library not installed")
def test_dnnl_plan_releases_the_callers_filter_after_its_first_call():
    w = _filter("NHWC", (3, 3, 16, 32), 1, np.float32)
    original = w.copy()
    ref = weakref.ref(w)
    plan = plan_conv2d(w, layout="NHWC", pads=(1, 1, 1, 1), copy=False)
    assert plan.dnnl is not None and plan.source is not None
    del w
    gc.collect()
    assert ref() is not None  # still the plan's only copy: nothing prepared yet
    conv2d(plan, RNG.standard_normal((1, 8, 8, 16)).astype(np.float32))
    gc.collect()
    assert ref() is None  # the reordered filter replaced it
    np.testing.assert_array_equal(plan.filter(), original)
    # a new input shape whose primitive wants another format reorders from the kept copy
    conv2d(plan, RNG.standard_normal((4, 3, 5, 16)).astype(np.float32))
    np.testing.assert_array_equal(plan.filter(), original)


def test_copying_plan_is_independent_of_later_changes():
    w = _filter("NHWC", (3, 3, 8, 8), 1, np.float32)
    original = w.copy()
    plan = plan_conv2d(w, layout="NHWC", pads=(1, 1, 1, 1))
    w[...] = 0
    np.testing.assert_array_equal(plan.filter(), original)


@settings(max_examples=25, deadline=None)
@given(kh=st.integers(1, 3), kw=st.integers(1, 3), cin_g=st.integers(1, 6),
       cout_g=st.integers(1, 6), groups=st.integers(1, 4), nchw=st.booleans(),
       seed=st.integers(0, 2**31 - 1))
def test_filter_round_trip_any_shape(kh, kw, cin_g, cout_g, groups, nchw, seed):
    layout = "NCHW" if nchw else "NHWC"
    dims = (kh, kw, cin_g * groups, cout_g * groups)
    w = _filter(layout, dims, groups, np.float32, np.random.default_rng(seed))
    original = w.copy()
    plan = plan_conv2d(w, layout=layout, groups=groups, copy=False)
    shape = (1, 4, 5, dims[2]) if not nchw else (1, dims[2], 4, 5)
    conv2d(plan, np.ones(shape, np.float32))
    np.testing.assert_array_equal(plan.filter(), original)


def _conv_model(w: np.ndarray, b: np.ndarray):
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (None, 8, 8, w.shape[2]), "f32")])
    (x,) = fn.arguments
    y = fn.op("conv2d", [x, fn.constant(w.copy(), name="w")], layout="NHWC", pads=[1, 1, 1, 1])
    fn.returns([fn.op("relu", [fn.op("add", [y, fn.constant(b, name="b")])])])
    return compile_module(gb.finish())


def test_compiled_model_holds_one_copy_and_saves_the_original(tmp_path: Path):
    w = RNG.standard_normal((3, 3, 16, 32)).astype(np.float32)
    b = RNG.standard_normal(32).astype(np.float32)
    model = _conv_model(w, b)
    x = RNG.standard_normal((2, 8, 8, 16)).astype(np.float32)
    ref = np.maximum(_direct_nhwc(x, w.astype(np.float64), (1, 1, 1, 1)) + b, 0)
    np.testing.assert_allclose(model(x), ref, rtol=1e-4, atol=1e-4)
    gc.collect()
    plans = [r for r in model._resources if hasattr(r, "source")]
    assert plans
    if _dnnl_conv.available():  # after a call nothing keeps the original filter alive
        assert all(p.source is None or p.source() is None for p in plans)
    held = [np.asarray(v) for v in model._weights]
    if _dnnl_conv.available():  # the filter is not an ndarray of the model any more
        assert not any(isinstance(v, np.ndarray) and v.shape == w.shape
                       for v in model._weights)
    assert any(h.shape == w.shape and np.array_equal(h, w) for h in held)
    model.save(tmp_path / "m")
    loaded = pytfrt.load(tmp_path / "m")
    np.testing.assert_allclose(loaded(x), ref, rtol=1e-4, atol=1e-4)
    loaded.save(tmp_path / "m2")  # a loaded model saves the same weights again
    assert (tmp_path / "m" / "weights.btf").read_bytes() == (
        tmp_path / "m2" / "weights.btf").read_bytes()
