"""The fused elementwise runtime: the flat loop and the broadcasting ufunc agree with NumPy,
including scalars, true broadcasting and writing in place into an input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pytfrt.backends.cpu.fused import run

# y = tanh(a * s - b) + relu(a)  (s a scalar)
PROGRAM = json.dumps({"n": 3, "ops": [["mul", [0, 2], {}], ["sub", [3, 1], {}],
                                       ["tanh", [4], {}], ["relu", [0], {}],
                                       ["add", [5, 6], {}]]}, separators=(",", ":"),
                     sort_keys=True)


def _ref(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    a64, b64, s64 = (np.asarray(v, np.float64) for v in (a, b, s))
    return np.tanh(a64 * s64 - b64) + np.maximum(a64, 0)


def test_flat_and_broadcast_paths_match_numpy() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 6)).astype(np.float32)
    b = rng.standard_normal((4, 6)).astype(np.float32)
    s = np.array(0.7, np.float32)
    flat = run(PROGRAM, a, b, s)  # same shapes + a scalar: the flat loop
    assert flat.dtype == np.float32 and flat.shape == (4, 6)
    np.testing.assert_allclose(flat, _ref(a, b, s), rtol=1e-6, atol=1e-6)
    row = b[:1]
    bcast = run(PROGRAM, a, row, s)  # a true broadcast: the ufunc
    np.testing.assert_allclose(bcast, _ref(a, row, s), rtol=1e-6, atol=1e-6)
    strided = run(PROGRAM, a[:, ::2], b[:, ::2], s)  # non-contiguous inputs: the ufunc
    np.testing.assert_allclose(strided, _ref(a[:, ::2], b[:, ::2], s), rtol=1e-6, atol=1e-6)
    a64 = a.astype(np.float64)
    mixed = run(PROGRAM, a64, b, s)
    assert mixed.dtype == np.float64


def test_in_place_into_an_input() -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal(1000).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    s = np.array(-1.5, np.float32)
    want = _ref(a, b, s)
    out = run(PROGRAM, a, b, s, out=a)
    assert out is a
    np.testing.assert_allclose(a, want, rtol=1e-6, atol=1e-6)


def test_large_outputs_run_in_shards_and_match_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """At PARALLEL_MIN elements and more the flat loop runs in shards on the helper threads;
    every element is computed once (also in place), with any shard count."""
    from pytfrt.backends.cpu import fused

    calls: list[int] = []
    real = fused.parallel_for

    def counting(fn, n, serial=False):  # type: ignore[no-untyped-def]
        calls.append(n)
        return real(fn, n, serial)

    monkeypatch.setattr(fused, "parallel_for", counting)
    monkeypatch.setattr(fused, "num_threads", lambda: 2)
    rng = np.random.default_rng(2)
    n = fused.PARALLEL_MIN * 3 + 17
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal((n,)).astype(np.float32)
    s = np.array(0.3, np.float32)
    np.testing.assert_allclose(run(PROGRAM, a, b, s), _ref(a, b, s), rtol=1e-6, atol=1e-6)
    assert calls and calls[-1] >= 2
    want = _ref(a, b, s)
    run(PROGRAM, a, b, s, out=a)
    np.testing.assert_allclose(a, want, rtol=1e-6, atol=1e-6)
    small = rng.standard_normal(100).astype(np.float32)
    calls.clear()
    run(PROGRAM, small, small, s)
    assert not calls  # small outputs: one call on this thread
