"""Real exported models through pytfrt vs ONNX Runtime: torchvision's classification nets.

``resnet18``, ``mobilenet_v3_small`` and ``squeezenet1_1`` as torchvision defines them (random
weights from fixed seeds, nothing downloaded), at 64x64 so the file stays cheap, exported once
per session with ``torch.onnx.export`` (TorchScript exporter, opset 17, dynamic batch) into
pytest's temporary directory, compiled with ``pytfrt.compile`` and compared with ONNX Runtime
to a relative 1e-4 at two batch sizes from one compiled model.

Only torchvision's model definitions are imported: its package ``__init__`` registers C++
operators that do not load beside a CPU-only torch, so :func:`_torchvision_models` loads
``torchvision.models`` under a bare package module.  The other real models of the same check
live next to this file: torch ``nn.LSTM``/``nn.GRU`` stacks in ``test_onnx_recurrent.py``,
BERT and GPT-2 (``transformers`` definitions) and the zoo CNNs in ``test_onnx_zoo.py``.
"""

from __future__ import annotations

import importlib.util
import sys
import types
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

from onnx_zoo import max_rel_error, run_ort  # noqa: E402

TOL = 1e-4
MODELS = ("resnet18", "mobilenet_v3_small", "squeezenet1_1")


def _torchvision_models() -> Any:
    """``torchvision.models`` without running ``torchvision/__init__`` (skips if absent)."""
    if "torchvision.models" in sys.modules:
        return sys.modules["torchvision.models"]
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torchvision is not installed")
    if "torchvision" not in sys.modules:
        pkg = types.ModuleType("torchvision")
        pkg.__path__ = list(spec.submodule_search_locations)
        sys.modules["torchvision"] = pkg
    import torchvision.models as tvm

    return tvm


def _randomise_batch_norm(net: Any, seed: int) -> None:
    """Random running statistics, so batch norm is not the identity."""
    g = torch.Generator().manual_seed(seed)
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)


@pytest.fixture(scope="session")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tvm = _torchvision_models()
    out = tmp_path_factory.mktemp("onnx_models")
    paths = {}
    for k, name in enumerate(MODELS):
        torch.manual_seed(k)
        net = getattr(tvm, name)(weights=None, num_classes=10).eval()
        _randomise_batch_norm(net, k)
        path = out / f"{name}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(net, (torch.zeros(1, 3, 64, 64),), str(path), dynamo=False,
                              opset_version=17, input_names=["x"], output_names=["y"],
                              dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})
        paths[name] = path
    return paths


@pytest.mark.parametrize("name", MODELS)
def test_torchvision_model_matches_onnxruntime(name: str, exported: dict[str, Path]) -> None:
    import pytfrt

    path = exported[name]
    compiled = pytfrt.compile(path)
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 3, 64, 64)).astype(np.float32)
        (want,) = run_ort(path, {"x": x})
        got = np.asarray(compiled(x=x))
        assert got.shape == want.shape == (batch, 10)
        err = max_rel_error([got], [want])
        assert err <= TOL, f"{name} batch {batch}: relative error {err:.3g} > {TOL}"
