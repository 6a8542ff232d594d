"""``slice`` and constant ``pad`` on arrays large enough for the copy to be split over the
helper threads, against NumPy's own slicing and ``np.pad`` (every axis split, crops, steps,
batch 1, non-constant modes left to NumPy)."""

from __future__ import annotations

import numpy as np
import pytest

from pytfrt.backends.cpu import data_ops


@pytest.mark.parametrize("shape", [(8, 114, 114, 64), (1, 300, 40, 50), (1, 1, 2000, 300)])
def test_slice_matches_numpy(shape: tuple[int, ...]) -> None:
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    got = data_ops.slice_(x, starts=(1, 1, 3), ends=(-1, -2, 1000), axes=(1, 2, 3),
                          steps=(1, 2, 1))
    want = x[:, 1:-1, 1:-2:2, 3:1000]
    assert got.flags.c_contiguous and not np.shares_memory(got, x)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", [(8, 112, 112, 64), (1, 600, 30, 40), (2, 1, 1, 300000)])
@pytest.mark.parametrize("value", [0.0, -1.5])
def test_constant_pad_matches_numpy(shape: tuple[int, ...], value: float) -> None:
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    pads = (0, 1, 2, 0, 1, 1, 0, 3)
    got = data_ops.pad(x, pads=pads, mode="constant", value=value)
    want = np.pad(x, [(0, 1), (1, 1), (2, 0), (0, 3)], constant_values=np.float32(value))
    np.testing.assert_array_equal(got, want)
    crop = data_ops.pad(x, pads=(0, -1, 1, 0, 0, 0, 1, 0), mode="constant", value=value)
    np.testing.assert_array_equal(
        crop, np.pad(x[:, 1:], [(0, 0), (0, 0), (1, 1), (0, 0)],
                     constant_values=np.float32(value)))
    edge = data_ops.pad(x, pads=(0, 1, 0, 0, 0, 1, 0, 0), mode="edge", value=0.0)
    np.testing.assert_array_equal(edge, np.pad(x, [(0, 0), (1, 1), (0, 0), (0, 0)], "edge"))
