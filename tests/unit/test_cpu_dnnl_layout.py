"""A CNN's NCHW input image to NHWC on both threads (``_dnnl_layout``, through
``transpose`` with ``perm = [0, 2, 3, 1]``) against NumPy's transpose: odd sizes, read-only
inputs, and the one-thread copy it falls back to."""

from __future__ import annotations

import numpy as np
import pytest

from pytfrt.backends.cpu import _dnnl_conv, _dnnl_layout, _layout_copy, _parallel
from pytfrt.backends.cpu.data_ops import transpose


@pytest.mark.parametrize("shape", [(1, 3, 224, 224), (1, 3, 257, 131), (1, 5, 130, 512),
                                   (2, 3, 160, 160), (1, 3, 20, 20)])
def test_images_match_numpy(monkeypatch, shape):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(_layout_copy, "NATIVE", False)  # not the one-thread C copy
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    x.flags.writeable = False
    y = transpose(x, perm=(0, 2, 3, 1))
    assert y.flags.c_contiguous
    np.testing.assert_array_equal(y, x.transpose(0, 2, 3, 1))
    split = (shape[0] == 1 and x.size >= _dnnl_layout.SPLIT_MIN_ELEMENTS
             and _parallel.num_threads() >= 2 and _dnnl_conv.available())
    if shape[0] == 1:  # one image of 64k elements or more: the split job was made
        assert (_dnnl_layout._jobs.get(shape[1:]) is not None) == split
