"""``tg.transpose {perm = [0, 2, 3, 1]}``'s compiled plane copy against NumPy's transpose."""

from __future__ import annotations

import numpy as np
import pytest

from pytfrt.backends.cpu.data_ops import transpose


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.float16, np.uint8,
                                   np.int8])
@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("channels", [3, 1])  # one channel: a plain copy
def test_nchw_to_nhwc_matches_numpy(dtype, strided, channels):  # type: ignore[no-untyped-def]
    x = (np.random.default_rng(0).standard_normal((2, channels, 9, 8)) * 50).astype(dtype)
    if strided:
        x = x[:, ::-1, 1::2, ::3]
    want = np.transpose(x, (0, 2, 3, 1))
    y = transpose(x, perm=(0, 2, 3, 1))
    assert y.flags.c_contiguous and y.dtype == x.dtype
    np.testing.assert_array_equal(y, want)
    out = np.zeros(want.shape, x.dtype)  # a compiled model's arena buffer
    assert transpose(x, perm=(0, 2, 3, 1), out=out) is out
    np.testing.assert_array_equal(out, want)


def test_other_permutations_still_copy():
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    y = transpose(x, perm=(0, 3, 1, 2))
    assert y.flags.c_contiguous
    np.testing.assert_array_equal(y, np.transpose(x, (0, 3, 1, 2)))
