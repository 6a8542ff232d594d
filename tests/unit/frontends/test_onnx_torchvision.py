"""torchvision's classification models, exported with ``torch.onnx.export``, vs ONNX Runtime.

The model definitions are torchvision's own files, read out of its wheel (see
``torchvision_wheel.py``: torchvision is not installed, its registry wheels do not load beside
the CPU build of torch).  Random weights with a fixed seed (every BatchNorm given random
statistics, zero-initialised classifier heads given random values so that no output is
trivially zero), 64x64 images, ten classes, and the
batch dynamic: one compiled model is checked at batch 1 and 3 against ONNX Runtime to 1e-4
relative, and torch itself is checked against ONNX Runtime too (the export is faithful).
Models too big for a unit test are narrowed through their own constructors' arguments
(``width_mult``, DenseNet's growth rate, ConvNeXt's stage list, ViT's sizes).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from onnx_zoo import max_rel_error, run_ort, zoo_module
from torchvision_wheel import load_models, wheel_path

import pytfrt

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

TOL = 1e-4
IMAGE = 64
CLASSES = 10

# name -> how to build it from the loaded ``torchvision.models`` files
MODELS: dict[str, Callable[[dict[str, ModuleType]], Any]] = {
    "resnet18": lambda m: m["resnet"].resnet18(num_classes=CLASSES),
    "resnext_narrow": lambda m: m["resnet"].ResNet(
        m["resnet"].Bottleneck, [1, 1, 1, 1], groups=4, width_per_group=8, num_classes=CLASSES),
    "mobilenet_v2": lambda m: m["mobilenetv2"].mobilenet_v2(num_classes=CLASSES, width_mult=0.5),
    "mobilenet_v3_small": lambda m: m["mobilenetv3"].mobilenet_v3_small(num_classes=CLASSES),
    "squeezenet1_1": lambda m: m["squeezenet"].squeezenet1_1(num_classes=CLASSES),
    "shufflenet_v2_x0_5": lambda m: m["shufflenetv2"].shufflenet_v2_x0_5(num_classes=CLASSES),
    "mnasnet0_5": lambda m: m["mnasnet"].mnasnet0_5(num_classes=CLASSES),
    "regnet_y_400mf": lambda m: m["regnet"].regnet_y_400mf(num_classes=CLASSES),
    "densenet_small": lambda m: m["densenet"].DenseNet(
        growth_rate=8, block_config=(2, 2, 2, 2), num_init_features=16, num_classes=CLASSES),
    "googlenet": lambda m: m["googlenet"].GoogLeNet(
        num_classes=CLASSES, aux_logits=False, init_weights=True),
    "convnext_small": lambda m: m["convnext"].ConvNeXt(
        [m["convnext"].CNBlockConfig(16, 32, 1), m["convnext"].CNBlockConfig(32, None, 1)],
        num_classes=CLASSES),
    "vit_small": lambda m: m["vision_transformer"].VisionTransformer(
        image_size=IMAGE, patch_size=16, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
        num_classes=CLASSES),
}
FILES = ["resnet", "mobilenetv2", "mobilenetv3", "squeezenet", "shufflenetv2", "mnasnet",
         "regnet", "densenet", "googlenet", "convnext", "vision_transformer"]


@pytest.fixture(scope="session")
def tv_models() -> dict[str, ModuleType]:
    wheel = wheel_path()
    if wheel is None:
        pytest.skip("the torchvision wheel could not be downloaded (pip download failed)")
    return load_models(wheel, FILES)


def _randomise(net: Any, seed: int) -> None:
    """Random BatchNorm statistics, and random values for parameters initialised to zero (the
    classifier heads of ViT and GoogLeNet), so that every layer shapes the output."""
    zoo_module()._randomise_batch_norm(net, seed)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in net.parameters():
            if p.dim() >= 2 and not bool(p.any()):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


@pytest.fixture(scope="session")
def exported(tv_models: dict[str, ModuleType],
             tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Path, Any]]:
    """``exported(name)`` -> (the .onnx path, the torch module), exported once per session."""
    out = tmp_path_factory.mktemp("torchvision")
    done: dict[str, tuple[Path, Any]] = {}

    def get(name: str) -> tuple[Path, Any]:
        if name not in done:
            torch.manual_seed(0)
            net = MODELS[name](tv_models).eval()
            _randomise(net, 1)
            path = out / f"{name}.onnx"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(net, (torch.zeros(1, 3, IMAGE, IMAGE),), str(path),
                                  dynamo=False, opset_version=17, input_names=["x"],
                                  output_names=["y"],
                                  dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
            done[name] = (path, net)
        return done[name]

    return get


def test_nothing_named_torchvision_is_imported(tv_models: dict[str, ModuleType]) -> None:
    """The definitions come from the wheel under a private name: ``transformers`` (which imports
    torchvision when it finds it) still finds none."""
    import sys

    assert "torchvision" not in sys.modules
    assert all(m.__name__.startswith("_tv_wheel.models.") for m in tv_models.values())
    assert str(tv_models["resnet"].__file__).endswith("torchvision/models/resnet.py")


@pytest.mark.parametrize("name", list(MODELS))
def test_matches_onnxruntime(name: str, exported: Callable[[str], tuple[Path, Any]]) -> None:
    path, net = exported(name)
    compiled = pytfrt.compile(path)
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 3, IMAGE, IMAGE),
                                                         dtype=np.float32)
        want = run_ort(path, {"x": x})
        got = np.asarray(compiled(x=x))
        assert got.shape == (batch, CLASSES)
        assert float(np.abs(want[0]).max()) > 1e-3, "a trivially small output proves nothing"
        err = max_rel_error([got], want)
        assert err <= TOL, f"{name} batch {batch}: relative error {err:.3g} > {TOL}"
        with torch.no_grad():
            ref = net(torch.from_numpy(x)).numpy()
        assert max_rel_error([ref], want) <= TOL, "the export itself disagrees with torch"
