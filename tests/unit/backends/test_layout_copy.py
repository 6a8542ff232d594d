"""``tg.transpose {perm = [0, 2, 3, 1]}``'s compiled plane copy against NumPy's transpose."""

from __future__ import annotations

import numpy as np
import pytest

from pytfrt.backends.cpu.data_ops import transpose


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.float16, np.uint8,
                                   np.int8])
@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("channels", [3, 1, 5])  # one channel: a plain copy
def test_nchw_to_nhwc_matches_numpy(dtype, strided, channels):  # type: ignore[no-untyped-def]
    x = (np.random.default_rng(0).standard_normal((2, channels, 9, 8)) * 50).astype(dtype)
    x.flags.writeable = False
    if strided:
        x = x[:, ::-1, 1::2, ::3]
    want = np.transpose(x, (0, 2, 3, 1))
    y = transpose(x, perm=(0, 2, 3, 1))
    assert y.flags.c_contiguous and y.dtype == x.dtype
    np.testing.assert_array_equal(y, want)
    out = np.zeros(want.shape, x.dtype)  # a compiled model's arena buffer
    assert transpose(x, perm=(0, 2, 3, 1), out=out) is out
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("shape", [(1, 3, 224, 224), (2, 3, 7, 5), (1, 4, 3, 33)])
def test_the_c_copy_matches_the_other_paths(monkeypatch, shape):  # type: ignore[no-untyped-def]
    """Contiguous float32 images through the C copy (RGB interleaved in one pass, other
    channel counts plane by plane) and with it switched off (the oneDNN split copy or the
    Numba one): the same bytes as NumPy's transpose, the input unchanged."""
    from pytfrt.backends.cpu import _layout_copy

    if _layout_copy.native() is None:
        pytest.skip("no C compiler")
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    x.flags.writeable = False
    want = np.transpose(x, (0, 2, 3, 1))
    for native in (True, False):
        monkeypatch.setattr(_layout_copy, "NATIVE", native)
        out = np.full(want.shape, np.nan, np.float32)
        assert _layout_copy.nchw_to_nhwc(x, out) is out
        np.testing.assert_array_equal(out, want)
    with pytest.raises(TypeError, match="float32"):
        _layout_copy.native().nchw_to_nhwc(x, np.zeros(want.shape, np.float64))


def test_other_permutations_still_copy():
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    y = transpose(x, perm=(0, 3, 1, 2))
    assert y.flags.c_contiguous
    np.testing.assert_array_equal(y, np.transpose(x, (0, 3, 1, 2)))
