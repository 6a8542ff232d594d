"""pytfrt.backends.cpu.activations against torch.nn.functional (float64 references)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from cpu_refs import activation_refs

from pytfrt.backends.cpu import activations
from pytfrt.backends.cpu.ops import OpError

REFS = activation_refs(0.3)


def test_every_activation_has_a_reference():
    assert set(activations.ACTIVATIONS) == set(REFS)


@pytest.mark.parametrize("name", sorted(REFS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activation_matches_torch(name, dtype):
    rng = np.random.default_rng(0)
    x64 = np.concatenate([rng.standard_normal(500) * 4, [0.0, -0.0, 3.0, -3.0, 6.0, 60.0, -60.0]])
    x = x64.astype(dtype).reshape(-1, 3)[:, ::2]  # non-contiguous view, written in place
    base = x.base
    expected = REFS[name](torch.from_numpy(x.astype(np.float64))).numpy()
    got = activations.apply_activation(x, name, alpha=0.3)
    assert got is x and x.base is base
    tol = 2e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(x, expected, rtol=tol, atol=tol)


def test_sigmoid_is_stable_at_extremes():
    x = np.array([-1000.0, 1000.0, np.nan], np.float32)
    activations.apply_activation(x, "sigmoid")
    assert x[0] == 0.0 and x[1] == 1.0 and np.isnan(x[2])


def test_errors():
    with pytest.raises(OpError, match="unknown activation 'swish'"):
        activations.apply_activation(np.ones(3, np.float32), "swish")
    with pytest.raises(OpError, match="float32 or float64"):
        activations.apply_activation(np.ones(3, np.int32), "relu")
    ro = np.ones(3, np.float32)
    ro.flags.writeable = False
    with pytest.raises(OpError, match="read-only"):
        activations.apply_activation(ro, "relu")
