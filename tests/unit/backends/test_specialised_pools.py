"""The compiled call path's specialised pools (``graph_nn.max_pool2d.specialize``,
``avg_pool2d.specialize``, ``global_avg_pool.specialize``): the window (and divisors) worked
out once per input shape, the global mean straight to its C loop.

Oracles: torch's ``max_pool2d``/``avg_pool2d`` and NumPy's mean (float64), the unspecialised compute
functions (bit-identical results, the same errors), and compiled models against NumPy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import graph_nn
from pytfrt.backends.cpu.ops import OpError
from pytfrt.compiler import GraphBuilder
from pytfrt.compiler.api import compile_module

MAX_POOL: Any = graph_nn.max_pool2d
AVG_POOL: Any = graph_nn.avg_pool2d
GLOBAL_AVG: Any = graph_nn.global_avg_pool


def _max_attrs(k: int, s: int, p: int, padding: str, ceil: bool, layout: str
               ) -> dict[str, object]:
    return dict(layout=layout, ksize=(k, k), strides=(s, s), pads=(p, p, p, p),
                padding=padding, dilations=(1, 1), count_include_pad=False, ceil_mode=ceil)


def _torch_max(x: np.ndarray, k: int, s: int, p: int, ceil: bool, layout: str) -> np.ndarray:
    t = torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2) if layout == "NHWC"
                                              else x))
    y = F.max_pool2d(t, k, s, p, ceil_mode=ceil).numpy()
    return y.transpose(0, 2, 3, 1) if layout == "NHWC" else y


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 3), c=st.integers(1, 9), h=st.integers(3, 12), w=st.integers(3, 12),
       k=st.integers(1, 3), s=st.integers(1, 3), pad=st.booleans(), ceil=st.booleans(),
       layout=st.sampled_from(["NHWC", "NCHW"]), dtype=st.sampled_from(["float32", "float64"]),
       seed=st.integers(0, 2**16))
def test_specialised_max_pool_matches_torch_and_the_general_path(
        n: int, c: int, h: int, w: int, k: int, s: int, pad: bool, ceil: bool, layout: str,
        dtype: str, seed: int) -> None:
    p = k // 2 if pad else 0
    attrs = _max_attrs(k, s, p, "EXPLICIT", ceil, layout)
    pool = MAX_POOL.specialize({}, **attrs)
    rng = np.random.default_rng(seed)
    shape = (n, h, w, c) if layout == "NHWC" else (n, c, h, w)
    for _ in range(2):  # the second call uses the kept window
        x = rng.standard_normal(shape).astype(dtype)
        want = graph_nn.max_pool2d(x, **attrs)  # type: ignore[arg-type]
        got = pool(x)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, _torch_max(x, k, s, p, ceil, layout))
        out = np.full_like(want, np.nan)
        assert pool(x, out) is out
        np.testing.assert_array_equal(out, want)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 2), c=st.integers(1, 6), h=st.integers(3, 11), w=st.integers(3, 11),
       k=st.integers(1, 3), s=st.integers(1, 3), pad=st.booleans(), ceil=st.booleans(),
       include_pad=st.booleans(), layout=st.sampled_from(["NHWC", "NCHW"]),
       dtype=st.sampled_from(["float32", "float64"]), seed=st.integers(0, 2**16))
def test_specialised_avg_pool_matches_torch_and_the_general_path(
        n: int, c: int, h: int, w: int, k: int, s: int, pad: bool, ceil: bool,
        include_pad: bool, layout: str, dtype: str, seed: int) -> None:
    p = k // 2 if pad else 0
    attrs = {**_max_attrs(k, s, p, "EXPLICIT", ceil, layout), "count_include_pad": include_pad}
    pool = AVG_POOL.specialize({}, **attrs)
    rng = np.random.default_rng(seed)
    shape = (n, h, w, c) if layout == "NHWC" else (n, c, h, w)
    for _ in range(2):  # the second call uses the kept window and divisors
        x = rng.standard_normal(shape).astype(dtype)
        want = graph_nn.avg_pool2d(x, **attrs)  # type: ignore[arg-type]
        got = pool(x)
        np.testing.assert_array_equal(got, want)
        t = torch.from_numpy(np.ascontiguousarray(
            x.transpose(0, 3, 1, 2) if layout == "NHWC" else x))
        ref = F.avg_pool2d(t, k, s, p, ceil_mode=ceil, count_include_pad=include_pad).numpy()
        np.testing.assert_allclose(got, ref.transpose(0, 2, 3, 1) if layout == "NHWC" else ref,
                                   rtol=1e-5, atol=1e-6)
        out = np.full_like(want, np.nan)
        assert pool(x, out) is out
        np.testing.assert_array_equal(out, want)
    with pytest.raises(OpError) as general:
        graph_nn.avg_pool2d(x.astype(np.int32), **attrs)  # type: ignore[arg-type]
    with pytest.raises(OpError) as special:
        pool(x.astype(np.int32))
    assert str(special.value) == str(general.value)


def test_specialised_max_pool_same_padding_per_input_shape_and_errors() -> None:
    attrs = _max_attrs(3, 2, 0, "SAME", False, "NHWC")
    pool = MAX_POOL.specialize({}, **attrs)
    rng = np.random.default_rng(3)
    for hw in (7, 8, 7, 5):  # SAME pads depend on the input size: one window per shape
        x = rng.standard_normal((1, hw, hw, 2)).astype(np.float32)
        np.testing.assert_array_equal(pool(x), graph_nn.max_pool2d(x, **attrs))  # type: ignore[arg-type]
    bad = _max_attrs(5, 1, 0, "VALID", False, "NHWC")
    bad_pool = MAX_POOL.specialize({}, **bad)
    for x in (np.ones((1, 3, 3, 1), np.float32), np.ones((3, 3, 1), np.float32)):
        with pytest.raises(OpError) as general:
            graph_nn.max_pool2d(x, **bad)  # type: ignore[arg-type]
        with pytest.raises(OpError) as special:
            bad_pool(x)
        assert str(special.value) == str(general.value)
    with pytest.raises(OpError, match="out must be"):
        pool(np.ones((1, 8, 8, 2), np.float32), np.empty((1, 3, 3, 2), np.float32))


def test_prepared_max_pool_per_shape_types_layouts_and_threads() -> None:
    """The oneDNN launcher kept per input shape (``pooling.max_pool2d_launcher``): every
    operand it must not take (another type at a kept shape, a strided input, an ``out`` that
    overlaps the input or is strided) goes to the general path; int8 and uint8 inputs, a
    read-only input and calls from several threads give torch's results."""
    from concurrent.futures import ThreadPoolExecutor

    from pytfrt.backends.cpu import _dnnl_conv
    from pytfrt.backends.cpu.pooling import _window, max_pool2d_launcher

    attrs = _max_attrs(3, 2, 1, "EXPLICIT", False, "NHWC")
    pool = MAX_POOL.specialize({}, **attrs)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 13, 11, 5)).astype(np.float32)
    want = _torch_max(x, 3, 2, 1, False, "NHWC")
    if _dnnl_conv.library() is not None:  # the prepared path exists for this shape
        win = _window("max_pool2d", x.shape, "NHWC", (3, 3), (2, 2), (1, 1, 1, 1), (1, 1),
                      False)
        assert max_pool2d_launcher(x.shape, x.dtype, "NHWC", win) is not None
    x.flags.writeable = False
    for _ in range(3):
        np.testing.assert_array_equal(pool(x), want)
    for dtype in (np.float64, np.int8, np.uint8, np.int32):  # another type at the kept shape
        xi = (x * 40).astype(dtype)
        np.testing.assert_array_equal(pool(xi), graph_nn.max_pool2d(xi, **attrs))  # type: ignore[arg-type]
        np.testing.assert_array_equal(pool(xi), _torch_max(xi.astype(np.float64), 3, 2, 1,
                                                           False, "NHWC").astype(dtype))
    wide = np.repeat(x, 2, axis=3)[..., ::2]  # strided, same shape
    np.testing.assert_array_equal(pool(wide), want)
    out_wide = np.full((1, 7, 6, 10), np.nan, np.float32)
    assert pool(x, out_wide[..., ::2]) is not None
    np.testing.assert_array_equal(out_wide[..., ::2], want)
    buf = np.zeros(x.size + want.size, np.float32)  # an out overlapping the input
    xs = buf[:x.size].reshape(x.shape)
    xs[...] = x
    over = buf[x.size - want.size:x.size].reshape(want.shape)
    np.testing.assert_array_equal(pool(xs, over), want)
    xs[...] = x  # the same in float64 (the NumPy path)
    b64 = np.zeros(x.size + want.size, np.float64)
    b64[:x.size] = x.ravel()
    np.testing.assert_array_equal(
        pool(b64[:x.size].reshape(x.shape), b64[x.size - want.size:x.size].reshape(want.shape)),
        want)
    with pytest.raises(OpError, match="out must be"):
        pool(x, np.empty((1, 7, 6, 4), np.float32))
    xs2 = [rng.standard_normal((1, 13, 11, 5)).astype(np.float32) for _ in range(16)]
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(pool, xs2))
    for xi, g in zip(xs2, got, strict=True):
        np.testing.assert_array_equal(g, _torch_max(xi, 3, 2, 1, False, "NHWC"))


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 3), c=st.integers(1, 20), h=st.integers(1, 9), w=st.integers(1, 9),
       layout=st.sampled_from(["NHWC", "NCHW"]), strided=st.booleans(),
       seed=st.integers(0, 2**16))
def test_specialised_global_avg_pool_matches_numpy_and_the_general_path(
        n: int, c: int, h: int, w: int, layout: str, strided: bool, seed: int) -> None:
    pool = GLOBAL_AVG.specialize({}, layout=layout)
    if pool is None:
        pytest.skip("no C compiler: the general path runs")
    shape = (n, h, w, c) if layout == "NHWC" else (n, c, h, w)
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    if strided:  # a non-contiguous input takes the general path
        x = np.repeat(x, 2, axis=0)[::2]
    want = graph_nn.global_avg_pool(x, layout=layout)
    axes = (1, 2) if layout == "NHWC" else (2, 3)
    np.testing.assert_allclose(want, x.astype(np.float64).mean(axis=axes, keepdims=True),
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(pool(x), want)
    out = np.full(want.shape, np.nan, np.float32)
    assert pool(x, out) is out
    np.testing.assert_array_equal(out, want)


def test_specialised_global_avg_pool_errors_are_the_general_ones() -> None:
    pool = GLOBAL_AVG.specialize({}, layout="NHWC")
    if pool is None:
        pytest.skip("no C compiler: the general path runs")
    cases = [(np.ones((1, 0, 2, 3), np.float32), None),
             (np.ones((2, 3, 3), np.float32), None),
             (np.ones((1, 2, 2, 3), np.int32), None),
             (np.ones((1, 2, 2, 3), np.float32), np.empty((1, 1, 1, 4), np.float32))]
    for x, out in cases:
        with pytest.raises(OpError) as general:
            graph_nn.global_avg_pool(x, layout="NHWC", out=out)
        with pytest.raises(OpError) as special:
            pool(x, out)
        assert str(special.value) == str(general.value)
    assert GLOBAL_AVG.specialize({}, layout="NCWH") is None


def test_compiled_pools_use_the_specialised_functions_and_match_numpy() -> None:
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (None, 8, 8, 3), "f32")])
    (x,) = fn.arguments
    y = fn.op("max_pool2d", [fn.op("relu", [x])], layout="NHWC", ksize=[2, 2], strides=[2, 2])
    y = fn.op("avg_pool2d", [y], layout="NHWC", ksize=[2, 2], strides=[2, 2])
    fn.returns([fn.op("global_avg_pool", [y], layout="NHWC")])
    model = compile_module(gb.finish())
    names = [getattr(v, "__qualname__", "") for v in model._call.__globals__.values()]
    assert names.count("_per_shape.<locals>.pool") == 2  # the max and the average pool
    assert "_specialize_global_avg_pool.<locals>.pool" in names or \
        GLOBAL_AVG.specialize({}, layout="NHWC") is None
    rng = np.random.default_rng(5)
    for batch in (1, 2, 1):
        xv = rng.standard_normal((batch, 8, 8, 3)).astype(np.float32)
        r = np.maximum(xv, 0).reshape(batch, 4, 2, 4, 2, 3).max(axis=(2, 4))
        r = r.reshape(batch, 2, 2, 2, 2, 3).mean(axis=(2, 4))
        np.testing.assert_allclose(model(xv), r.astype(np.float64).mean(axis=(1, 2),
                                                                        keepdims=True),
                                   rtol=1e-6, atol=1e-7)
