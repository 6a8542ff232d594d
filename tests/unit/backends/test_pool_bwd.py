"""Max-pooling backward's compiled NHWC pass against the NumPy tap loop (NCHW), with ties,
padding, overlapping and dilated windows, and ``-inf`` inputs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import pooling


def _both(x, y, dy, **attrs):  # type: ignore[no-untyped-def]
    fast = pooling.max_pool2d_grad(x, y, dy, layout="NHWC", **attrs)
    t = (0, 3, 1, 2)
    slow = pooling.max_pool2d_grad(*(np.ascontiguousarray(a.transpose(t)) for a in (x, y, dy)),
                                   layout="NCHW", **attrs)
    return fast, slow.transpose(0, 2, 3, 1)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 3), h=st.integers(1, 9), w=st.integers(1, 9), c=st.integers(1, 6),
       k=st.integers(1, 3), s=st.integers(1, 3), d=st.integers(1, 2), pad=st.integers(0, 1),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16))
def test_matches_numpy_path(n, h, w, c, k, s, d, pad, dtype, seed):  # type: ignore[no-untyped-def]
    if (k - 1) * d + 1 > h + 2 * pad or (k - 1) * d + 1 > w + 2 * pad or pad >= k:
        return
    rng = np.random.default_rng(seed)
    x = np.round(rng.standard_normal((n, h, w, c)) * 2).astype(dtype)  # many ties
    attrs = {"ksize": (k, k), "strides": (s, s), "pads": (pad,) * 4, "dilations": (d, d)}
    y = pooling.max_pool2d(x, layout="NHWC", **attrs)
    dy = rng.standard_normal(y.shape).astype(dtype)
    fast, slow = _both(x, y, dy, **attrs)
    assert fast.dtype == dtype and fast.shape == x.shape
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-5)


def test_minus_infinity_window_drops_into_padding() -> None:
    x = np.full((1, 3, 3, 2), -np.inf, np.float32)
    x[0, 1, 1, 1] = 1.0
    attrs = {"ksize": (3, 3), "strides": (1, 1), "pads": (1, 1, 1, 1)}
    y = pooling.max_pool2d(x, layout="NHWC", **attrs)
    dy = np.ones(y.shape, np.float32)
    fast, slow = _both(x, y, dy, **attrs)
    np.testing.assert_array_equal(fast, slow)
    assert fast[0, 1, 1, 1] == 9.0  # every window's maximum
