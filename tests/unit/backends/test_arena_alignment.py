"""``arena.empty``: 64-byte aligned results that the call arena keeps as slot buffers, while
views (of them or of anything else) are never kept; the kernels that make their results with
it (convolution, squeeze-and-excite, the input image's NCHW -> NHWC copy) return aligned
arrays with the same values as NumPy's."""

from __future__ import annotations

import numpy as np
import pytest

from pytfrt.backends.cpu import _layout_copy, arena, conv, squeeze_excite


@pytest.mark.parametrize("shape,dtype", [((1, 56, 56, 144), np.float32), ((3,), np.float64),
                                         ((0, 4), np.float32), ((2, 5, 7), np.int8)])
def test_empty_is_aligned_owned_and_writable(shape, dtype):
    a = arena.empty(shape, dtype)
    assert a.shape == shape and a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable
    assert a.size == 0 or a.ctypes.data % arena.ALIGNMENT == 0  # (no data: any address)
    assert arena.owns(a)
    a[...] = 1  # the whole array is usable memory
    assert (a == 1).all()


def test_views_are_not_owned():
    a = arena.empty((4, 8), np.float32)
    plain = np.empty((4, 8), np.float32)
    assert arena.owns(plain)
    for v in (a[:], a.reshape(-1), a.view(np.int32), plain[1:], plain.reshape(-1)):
        assert not arena.owns(v)


def test_the_arena_keeps_aligned_results_and_not_views():
    ar = arena.Arena()
    a = arena.empty((2, 3), np.float32)
    assert ar.keep(0, 0, [(2, 3)], a) is a and ar.slots[0] is a
    v = arena.empty((6,), np.float32).reshape(2, 3)  # a view of an aligned array
    ar.keep(1, 1, [(2, 3)], v)
    assert 1 not in ar.slots
    calls = []

    def fn(x, out=None):
        calls.append(out)
        r = arena.empty(x.shape, x.dtype) if out is None else out
        np.add(x, 1, out=r)
        return r

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    first = ar.run(2, 2, fn, [x], {})
    second = ar.run(2, 2, fn, [x], {})
    assert calls == [None, first] and second is first  # the second call writes into the first's
    np.testing.assert_array_equal(second, x + 1)


def test_kernels_return_aligned_results():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 9, 9, 24)).astype(np.float32)
    w = (rng.standard_normal((3, 3, 1, 24)) * 0.3).astype(np.float32)
    plan = conv.plan_conv2d(w, layout="NHWC", pads=(1, 1, 1, 1), groups=24)
    y = conv.conv2d(plan, x)
    assert y.ctypes.data % arena.ALIGNMENT == 0 and arena.owns(y)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = sum(xp[:, i:i + 9, j:j + 9] * w[i, j, 0] for i in range(3) for j in range(3))
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)

    w1 = rng.standard_normal((24, 6)).astype(np.float32)
    b1 = rng.standard_normal(6).astype(np.float32)
    w2 = rng.standard_normal((6, 24)).astype(np.float32)
    b2 = rng.standard_normal(24).astype(np.float32)
    s = squeeze_excite.squeeze_excite(x, w1, b1, w2, b2)
    assert s.ctypes.data % arena.ALIGNMENT == 0 and arena.owns(s)
    m = x.mean(axis=(1, 2), dtype=np.float64)
    gate = 1 / (1 + np.exp(-(np.maximum(m @ w1 + b1, 0) @ w2 + b2)))
    np.testing.assert_allclose(s, x * gate[:, None, None, :], rtol=1e-5, atol=1e-6)

    img = rng.standard_normal((1, 3, 40, 40)).astype(np.float32)
    t = _layout_copy.nchw_to_nhwc(img)
    assert t.ctypes.data % arena.ALIGNMENT == 0 and arena.owns(t)
    np.testing.assert_array_equal(t, img.transpose(0, 2, 3, 1))


@pytest.mark.parametrize("perm,shape", [((0, 2, 3, 1), (1, 3, 20, 24)),
                                        ((0, 2, 3, 1), (2, 4, 5, 6)),
                                        ((1, 0, 2), (3, 4, 5)), ((0, 1), (2, 3))])
def test_transpose_writes_into_out(perm, shape):
    """The transpose kernel takes the arena's buffer (``out``): the same values as NumPy's,
    into a C-contiguous ``out`` or a strided one."""
    from pytfrt.backends.cpu import data_ops

    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    want = np.transpose(x, perm)
    out = arena.empty(want.shape, np.float32)
    assert data_ops.transpose(x, perm=perm, out=out) is out
    np.testing.assert_array_equal(out, want)
    wide = np.zeros(want.shape[:-1] + (2 * want.shape[-1],), np.float32)
    strided = wide[..., ::2]
    assert data_ops.transpose(x, perm=perm, out=strided) is strided
    np.testing.assert_array_equal(strided, want)
    assert (wide[..., 1::2] == 0).all()
