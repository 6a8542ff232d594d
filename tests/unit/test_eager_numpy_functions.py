"""NumPy functions, ufuncs and ndarray methods that pytfrt writes with its eager ops: under
``@pytfrt.function`` (traced), on eager Tensors, and through ``pytfrt.grad``, each checked
against NumPy itself (values) and central finite differences of the NumPy code (gradients)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import pytfrt
from pytfrt import eager

X = np.random.default_rng(0).standard_normal((4, 3))

CASES: dict[str, Callable[[Any], Any]] = {
    "arctan": np.arctan,
    "exp2": np.exp2,
    "log2": lambda x: np.log2(np.abs(x) + 1),
    "log10": lambda x: np.log10(np.abs(x) + 1),
    "logaddexp": lambda x: np.logaddexp(x, 0.5 * x),
    "dot 1-D": lambda x: np.dot(x[0], x[1]),
    "dot 2-D x 1-D": lambda x: np.dot(x, x[0]),
    "dot 1-D x 2-D": lambda x: np.dot(x[:, 0], x),
    "stack": lambda x: np.stack([x, 2 * x], axis=-1),
    "hstack": lambda x: np.hstack([x, x]),
    "vstack": lambda x: np.vstack([x[0], x]),
    "ravel": np.ravel,
    "outer": lambda x: np.outer(x[0], x[1]),
    "var": lambda x: np.var(x, axis=1, ddof=1),
    "std": lambda x: np.std(x, axis=0, keepdims=True),
    "average": np.average,
    "linalg.norm": lambda x: np.linalg.norm(x, axis=1),
    "ndim and shape": lambda x: x * np.ndim(x) + np.shape(x)[0],
    ".max": lambda x: x.max(axis=1),
    ".min": lambda x: x.min(),
    ".var": lambda x: x.var(axis=0),
    ".std": lambda x: x.std(),
    ".ravel": lambda x: x.ravel(),
    ".flatten": lambda x: x.flatten(),
    ".transpose": lambda x: x.transpose(1, 0),
    ".squeeze": lambda x: x.reshape(1, 4, 3).squeeze(),
}
INDEX_CASES: dict[str, Callable[[Any], Any]] = {
    "argmax": np.argmax,
    "argmin axis 0": lambda x: np.argmin(x, axis=0),
    ".argmax axis 1": lambda x: x.argmax(axis=1),
}


@pytest.mark.parametrize("name", [*CASES, *INDEX_CASES])
def test_traced_and_eager_match_numpy(name: str) -> None:
    f = {**CASES, **INDEX_CASES}[name]
    want = f(X)
    traced = np.asarray(pytfrt.function(f)(X))
    on_tensor = np.asarray(f(eager.constant(X)))
    for got in (traced, on_tensor):
        assert got.shape == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("name", list(CASES))
def test_the_gradient_matches_finite_differences(name: str) -> None:
    def loss(x: Any) -> Any:
        return np.sum(np.sin(CASES[name](x)))

    grad = np.asarray(pytfrt.grad(loss)(X))
    eps = 1e-6
    numeric = np.zeros_like(X)
    for i in np.ndindex(X.shape):
        d = np.zeros_like(X)
        d[i] = eps
        numeric[i] = (loss(X + d) - loss(X - d)) / (2 * eps)
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-6)


def test_what_is_still_unsupported_says_so() -> None:
    with pytest.raises(eager.EagerOpError, match=r"numpy\.linalg\.norm \(ord=1\)"):
        pytfrt.function(lambda x: np.linalg.norm(x, ord=1))(X)
    with pytest.raises(eager.EagerOpError, match=r"numpy\.average \(weights\)"):
        pytfrt.function(lambda x: np.average(x, weights=x))(X)
