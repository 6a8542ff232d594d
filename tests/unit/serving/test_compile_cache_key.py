"""The serving compile cache is keyed by the compiler's fingerprint, not only pytfrt's version.

Oracle: ONNX Runtime on the same model; the log lines say whether an entry was reused.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from serving_helpers import make_onnx_mlp, ort_run

import pytfrt.compiler.api as compiler_api
from pytfrt.compiler import fingerprint
from pytfrt.serving import pytfrt_backend
from pytfrt.serving.servable import ONNX


def test_the_fingerprint_is_stable_and_names_the_compiler_source() -> None:
    assert fingerprint() == fingerprint()
    assert len(fingerprint()) == 64 and int(fingerprint(), 16) >= 0


def test_a_cache_entry_of_another_compiler_is_not_served(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    model_path = make_onnx_mlp(tmp_path / "1" / "model.onnx", seed=3)
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    cache = tmp_path / "cache"
    log: list[str] = []

    def compiled() -> object:
        model = pytfrt_backend.compile_cached(model_path, ONNX, cache, log.append)
        np.testing.assert_allclose(np.asarray(next(iter(_outputs(model(x))))),
                                   ort_run(model_path, x), rtol=1e-5, atol=1e-6)
        return model

    compiled()
    compiled()
    assert "compiled" in log[0] and "loaded from the compile cache" in log[1]
    monkeypatch.setattr(compiler_api, "fingerprint", lambda: "a different compiler")
    compiled()
    assert "compiled" in log[2] and "compile cache" not in log[2]
    assert len([p for p in cache.iterdir() if not p.name.startswith(".")]) == 2


def _outputs(result: object) -> list[object]:
    if isinstance(result, dict):
        return list(result.values())
    if isinstance(result, (list, tuple)):
        return list(result)
    return [result]
