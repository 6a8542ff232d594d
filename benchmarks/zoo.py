"""The model zoo: ONNX models exported locally, with random weights and fixed seeds.

Nothing is downloaded (torchvision is not a dependency): the architectures are written here in
plain PyTorch and exported with PyTorch's TorchScript-based exporter (``dynamo=False``, which
works offline), and the Keras ResNet50 is built by ``keras.applications`` with ``weights=None``
and converted by tf2onnx.  Every model has a *full* configuration (the real input size, used by
``benchmarks/models.py``) and a *small* one (the same architecture and op types, narrower and on
small images, used by the unit tests in ``tests/unit/frontends/test_onnx_zoo.py``).

=====================  ==================================================================
name                   what
=====================  ==================================================================
``resnet50``           ResNet-50 v1.5 (bottleneck blocks 3-4-6-3), NCHW 224x224
``mobilenet_v3_small`` MobileNetV3-small (squeeze-excite, hard-swish), NCHW 224x224
``efficientnet_b0``    EfficientNet-B0 (MBConv, SiLU, squeeze-excite), NCHW 224x224
``transformer``        token embedding + learned positions + ``nn.TransformerEncoder``
                       (2 layers, BERT-base width: d=768, 12 heads, ff=3072), ids ``[batch, 128]``
``keras_resnet50``     ``keras.applications.ResNet50`` (NHWC, logits, as built by
                       ``benchmarks/tf_models.py``) through tf2onnx
``bert``               BERT-base (``transformers.BertModel`` from a ``BertConfig``: 12 layers,
                       d=768, 12 heads, ff=3072), ids ``[batch, 128]`` -> last hidden state
``gpt2``               GPT-2 small (``transformers.GPT2LMHeadModel`` from a ``GPT2Config``:
                       12 layers, d=768, vocab 50,257), ids ``[batch, 64]`` -> logits
=====================  ==================================================================

``bert`` and ``gpt2`` need the ``transformers`` package (the ``bench`` extra; only its model
definitions are used: the configurations are written here and the weights are random, so
nothing is downloaded); without it :func:`export` raises ``RuntimeError``.  Their batch and
sequence dimensions are both dynamic in the exported file (eager attention, so the TorchScript
exporter records the shapes as computed).

The batch dimension is dynamic in every exported file (the transformer's sequence length is
fixed at export: PyTorch's TorchScript exporter bakes it into ``nn.MultiheadAttention``).
BatchNorm running statistics are randomised so batch norm is not the identity.

Use :func:`export` (cached: a file already exported with the same configuration is reused)::

    from benchmarks.zoo import export
    m = export("resnet50", "/tmp/zoo", small=True)   # -> ZooModel
    m.path, m.make_inputs(batch=2), m.torch_module    # .onnx file, feeds, the eager peer

Not thread-safe (exports write files); errors: ``KeyError`` for an unknown name,
``RuntimeError`` when a converter is unavailable (e.g. tf2onnx for ``keras_resnet50``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

OPSET = 17
SEED = 0


@dataclass
class ZooModel:
    """An exported model: its file, input description and (for torch models) the eager module."""

    name: str
    path: Path
    inputs: dict[str, tuple[tuple[int | None, ...], str]]
    """Input name -> (shape with ``None`` for dynamic dims, NumPy dtype name)."""
    config: dict[str, Any]
    make_inputs: Callable[..., dict[str, np.ndarray]]
    """``make_inputs(batch=1, seq=None, seed=0)`` -> feeds, deterministic for a seed."""
    torch_module: Any = None
    source: str = "torch"
    notes: list[str] = field(default_factory=list)
    keras: Any = None
    """The Keras model (``keras_resnet50`` in the benchmark; TF peers), else ``None``."""


# -- architectures (plain torch; imported lazily) --------------------------------------------


def _torch() -> Any:
    import torch

    return torch


def _randomise_batch_norm(module: Any, seed: int) -> None:
    """Give every BatchNorm random affine parameters and running statistics (fixed seed)."""
    torch = _torch()
    gen = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            n = m.num_features
            with torch.no_grad():
                m.weight.copy_(0.5 + torch.rand(n, generator=gen))
                m.bias.copy_(0.2 * torch.randn(n, generator=gen))
                m.running_mean.copy_(0.2 * torch.randn(n, generator=gen))
                m.running_var.copy_(0.5 + torch.rand(n, generator=gen))


def _make_divisible(v: float, divisor: int = 8) -> int:
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def _conv_bn(
    cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: Any = None
) -> list[Any]:
    """Conv (no bias, "same" padding for odd k) + BatchNorm (+ the activation module ``act``)."""
    nn = _torch().nn
    layers = [
        nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    return layers + ([act()] if act is not None else [])


def build_resnet50(width: float = 1.0, num_classes: int = 1000) -> Any:
    """ResNet-50 v1.5 (stride on the 3x3 conv), ``width`` scales every channel count."""
    torch = _torch()
    nn = torch.nn

    class Bottleneck(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self, cin: int, planes: int, stride: int, expansion: int = 4) -> None:
            super().__init__()
            cout = planes * expansion
            self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(
                    nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
                )

        def forward(self, x: Any) -> Any:
            idt = x if self.down is None else self.down(x)
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return self.relu(y + idt)

    class ResNet(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            c = [max(8, int(p * width)) for p in (64, 128, 256, 512)]
            self.stem = nn.Sequential(
                nn.Conv2d(3, c[0], 7, 2, 3, bias=False),
                nn.BatchNorm2d(c[0]),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(3, 2, 1),
            )
            blocks: list[Any] = []
            cin = c[0]
            for i, (planes, n) in enumerate(zip(c, (3, 4, 6, 3), strict=True)):
                for j in range(n):
                    stride = 2 if (i > 0 and j == 0) else 1
                    blocks.append(Bottleneck(cin, planes, stride))
                    cin = planes * 4
            self.blocks = nn.Sequential(*blocks)
            self.pool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(cin, num_classes)

        def forward(self, x: Any) -> Any:
            x = self.blocks(self.stem(x))
            return self.fc(torch.flatten(self.pool(x), 1))

    return ResNet()


_MBV3_SMALL = [
    # cin, kernel, expanded, cout, squeeze-excite, activation, stride
    (16, 3, 16, 16, True, "RE", 2),
    (16, 3, 72, 24, False, "RE", 2),
    (24, 3, 88, 24, False, "RE", 1),
    (24, 5, 96, 40, True, "HS", 2),
    (40, 5, 240, 40, True, "HS", 1),
    (40, 5, 240, 40, True, "HS", 1),
    (40, 5, 120, 48, True, "HS", 1),
    (48, 5, 144, 48, True, "HS", 1),
    (48, 5, 288, 96, True, "HS", 2),
    (96, 5, 576, 96, True, "HS", 1),
    (96, 5, 576, 96, True, "HS", 1),
]


def build_mobilenet_v3_small(width: float = 1.0, num_classes: int = 1000) -> Any:
    """MobileNetV3-small as in the paper (the torchvision configuration), width-scaled."""
    torch = _torch()
    nn = torch.nn

    def ch(c: int) -> int:
        return _make_divisible(c * width)

    class SqueezeExcite(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self, c: int) -> None:
            super().__init__()
            s = _make_divisible(c // 4)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc1 = nn.Conv2d(c, s, 1)
            self.relu = nn.ReLU(inplace=True)
            self.fc2 = nn.Conv2d(s, c, 1)
            self.gate = nn.Hardsigmoid()

        def forward(self, x: Any) -> Any:
            return x * self.gate(self.fc2(self.relu(self.fc1(self.pool(x)))))

    class InvertedResidual(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(
            self, cin: int, k: int, exp: int, cout: int, se: bool, act: str, stride: int
        ) -> None:
            super().__init__()
            Act = nn.Hardswish if act == "HS" else nn.ReLU
            layers = _conv_bn(cin, exp, 1, act=Act) if exp != cin else []
            layers += _conv_bn(exp, exp, k, stride, groups=exp, act=Act)
            if se:
                layers.append(SqueezeExcite(exp))
            layers += _conv_bn(exp, cout, 1)
            self.block = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x: Any) -> Any:
            y = self.block(x)
            return x + y if self.residual else y

    class MobileNetV3(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            layers = _conv_bn(3, ch(16), 3, 2, act=nn.Hardswish)
            for cin, k, exp, cout, se, act, stride in _MBV3_SMALL:
                layers.append(InvertedResidual(ch(cin), k, ch(exp), ch(cout), se, act, stride))
            last_in = ch(96)
            last = 6 * last_in
            layers += _conv_bn(last_in, last, 1, act=nn.Hardswish)
            self.features = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2d(1)
            hidden = ch(1024)
            self.classifier = nn.Sequential(
                nn.Linear(last, hidden),
                nn.Hardswish(),
                nn.Dropout(0.2),
                nn.Linear(hidden, num_classes),
            )

        def forward(self, x: Any) -> Any:
            return self.classifier(torch.flatten(self.pool(self.features(x)), 1))

    return MobileNetV3()


_EFFNET_B0 = [
    # expand ratio, kernel, stride, cin, cout, repeats
    (1, 3, 1, 32, 16, 1),
    (6, 3, 2, 16, 24, 2),
    (6, 5, 2, 24, 40, 2),
    (6, 3, 2, 40, 80, 3),
    (6, 5, 1, 80, 112, 3),
    (6, 5, 2, 112, 192, 4),
    (6, 3, 1, 192, 320, 1),
]


def build_efficientnet_b0(width: float = 1.0, num_classes: int = 1000) -> Any:
    """EfficientNet-B0 (MBConv blocks with SiLU and squeeze-excite), width-scaled."""
    torch = _torch()
    nn = torch.nn

    def ch(c: int) -> int:
        return _make_divisible(c * width)

    class MBConv(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self, ratio: int, k: int, stride: int, cin: int, cout: int) -> None:
            super().__init__()
            exp = cin * ratio
            layers = _conv_bn(cin, exp, 1, act=nn.SiLU) if exp != cin else []
            layers += _conv_bn(exp, exp, k, stride, groups=exp, act=nn.SiLU)
            self.expand_dw = nn.Sequential(*layers)
            sq = max(1, cin // 4)
            self.se_pool = nn.AdaptiveAvgPool2d(1)
            self.se_reduce = nn.Conv2d(exp, sq, 1)
            self.se_act = nn.SiLU()
            self.se_expand = nn.Conv2d(sq, exp, 1)
            self.project = nn.Sequential(*_conv_bn(exp, cout, 1))
            self.residual = stride == 1 and cin == cout

        def forward(self, x: Any) -> Any:
            y = self.expand_dw(x)
            s = torch.sigmoid(self.se_expand(self.se_act(self.se_reduce(self.se_pool(y)))))
            y = self.project(y * s)
            return x + y if self.residual else y

    class EfficientNet(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            layers = _conv_bn(3, ch(32), 3, 2, act=nn.SiLU)
            for ratio, k, stride, cin, cout, n in _EFFNET_B0:
                for i in range(n):
                    layers.append(
                        MBConv(
                            ratio, k, stride if i == 0 else 1, ch(cin if i == 0 else cout), ch(cout)
                        )
                    )
            head = ch(1280)
            layers += _conv_bn(ch(320), head, 1, act=nn.SiLU)
            self.features = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(head, num_classes))

        def forward(self, x: Any) -> Any:
            return self.classifier(torch.flatten(self.pool(self.features(x)), 1))

    return EfficientNet()


def build_transformer(
    d_model: int = 768,
    heads: int = 12,
    ff: int = 3072,
    layers: int = 2,
    vocab: int = 8192,
    max_len: int = 512,
) -> Any:
    """Token embedding + learned positions + ``nn.TransformerEncoder`` (post-norm, GELU)."""
    torch = _torch()
    nn = torch.nn

    class Encoder(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, d_model)
            self.pos = nn.Parameter(0.02 * torch.randn(max_len, d_model))
            layer = nn.TransformerEncoderLayer(
                d_model, heads, ff, dropout=0.0, activation="gelu", batch_first=True
            )
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

        def forward(self, ids: Any) -> Any:
            x = self.embed(ids) + self.pos[: ids.shape[1]]
            return self.encoder(x)

    return Encoder()


# -- configurations ------------------------------------------------------------------------

_IMAGE_FULL = {"image": 224, "width": 1.0, "classes": 1000}
_IMAGE_SMALL = {"image": 32, "width": 0.25, "classes": 10}

CONFIGS: dict[str, dict[str, dict[str, Any]]] = {
    "resnet50": {"full": _IMAGE_FULL, "small": _IMAGE_SMALL},
    "mobilenet_v3_small": {"full": _IMAGE_FULL, "small": {**_IMAGE_SMALL, "width": 0.5}},
    "efficientnet_b0": {"full": _IMAGE_FULL, "small": {**_IMAGE_SMALL, "width": 0.5}},
    "transformer": {
        "full": {"d_model": 768, "heads": 12, "ff": 3072, "layers": 2, "vocab": 8192, "seq": 128},
        "small": {"d_model": 64, "heads": 4, "ff": 128, "layers": 2, "vocab": 100, "seq": 16},
    },
    "keras_resnet50": {"full": {"image": 224}, "small": {"image": 32}},
    "bert": {
        "full": {"layers": 12, "d_model": 768, "heads": 12, "ff": 3072, "vocab": 30522,
                 "seq": 128},
        "small": {"layers": 2, "d_model": 64, "heads": 4, "ff": 128, "vocab": 200, "seq": 16},
    },
    "gpt2": {
        "full": {"layers": 12, "d_model": 768, "heads": 12, "vocab": 50257, "seq": 64},
        "small": {"layers": 2, "d_model": 64, "heads": 4, "vocab": 300, "seq": 16},
    },
}
HF_MODELS = ("bert", "gpt2")
"""Zoo models built from ``transformers`` configurations (random weights)."""
TOKEN_MODELS = ("transformer", *HF_MODELS)
"""Zoo models whose input is token ids ``[batch, seq]``."""

NAMES = tuple(CONFIGS)


def _image_inputs(image: int, layout: str = "NCHW") -> Callable[..., dict[str, np.ndarray]]:
    def make(batch: int = 1, seq: int | None = None, seed: int = 0) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        shape = (batch, 3, image, image) if layout == "NCHW" else (batch, image, image, 3)
        return {"x": rng.standard_normal(shape, dtype=np.float32)}

    return make


def _export_torch(
    module: Any,
    example: tuple[Any, ...],
    path: Path,
    input_names: list[str],
    dynamic_axes: dict[str, dict[int, str]],
    output_axes: dict[int, str] | None = None,
) -> None:
    import warnings

    torch = _torch()
    tmp = path.with_suffix(".tmp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            example,
            str(tmp),
            dynamo=False,
            opset_version=OPSET,
            input_names=input_names,
            output_names=["y"],
            dynamic_axes={**dynamic_axes, "y": output_axes or {0: "batch"}},
            do_constant_folding=True,
        )
    os.replace(tmp, path)


def build_hf(name: str, cfg: dict[str, Any]) -> Any:
    """``bert`` / ``gpt2`` from a ``transformers`` configuration, random weights (seeded by the
    caller), eager attention, wrapped so that ``forward(ids)`` returns one tensor (BERT's last
    hidden state, GPT-2's logits)."""
    try:
        import transformers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError(f"{name} needs the transformers package: {exc}") from exc
    nn = _torch().nn
    if name == "bert":
        config = transformers.BertConfig(
            vocab_size=cfg["vocab"], hidden_size=cfg["d_model"], num_hidden_layers=cfg["layers"],
            num_attention_heads=cfg["heads"], intermediate_size=cfg["ff"],
            attn_implementation="eager",
        )
        inner = transformers.BertModel(config, add_pooling_layer=False)
    else:
        config = transformers.GPT2Config(
            vocab_size=cfg["vocab"], n_embd=cfg["d_model"], n_layer=cfg["layers"],
            n_head=cfg["heads"], n_positions=max(1024, cfg["seq"]), use_cache=False,
            attn_implementation="eager",
        )
        inner = transformers.GPT2LMHeadModel(config)

    class Wrapped(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, ids: Any) -> Any:
            # An explicit all-ones attention mask (as a caller passes for unpadded input):
            # without one, transformers looks for packed sequences with aten::diff, which the
            # ONNX exporter does not support.
            mask = _torch().ones_like(ids)
            out = self.inner(input_ids=ids, attention_mask=mask, return_dict=False, **(
                {"use_cache": False} if name == "gpt2" else {}))
            return out[0]

    return Wrapped()


def _build_torch(name: str, cfg: dict[str, Any]) -> Any:
    torch = _torch()
    torch.manual_seed(SEED)
    if name in HF_MODELS:
        return build_hf(name, cfg).eval()
    if name == "resnet50":
        m = build_resnet50(cfg["width"], cfg["classes"])
    elif name == "mobilenet_v3_small":
        m = build_mobilenet_v3_small(cfg["width"], cfg["classes"])
    elif name == "efficientnet_b0":
        m = build_efficientnet_b0(cfg["width"], cfg["classes"])
    else:
        m = build_transformer(cfg["d_model"], cfg["heads"], cfg["ff"], cfg["layers"], cfg["vocab"])
    _randomise_batch_norm(m, SEED + 1)
    return m.eval()


def keras_resnet50(image: int) -> Any:
    """The Keras ResNet50 of ``keras_resnet50``: ``benchmarks/tf_models.py``'s (logits out,
    random batch-norm statistics, seed :data:`SEED`), the same model the TF front end's
    benchmark compiles."""
    import sys

    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import tf_models  # the TensorFlow front end's benchmark models

    return tf_models.resnet50(size=image, seed=SEED)


def _export_keras_resnet50(cfg: dict[str, Any], path: Path) -> None:
    try:
        import tensorflow as tf
        import tf2onnx
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError(f"keras_resnet50 needs tensorflow and tf2onnx: {exc}") from exc
    image = cfg["image"]
    model = keras_resnet50(image)
    spec = (tf.TensorSpec((None, image, image, 3), tf.float32, name="x"),)

    @tf.function(input_signature=spec)  # type: ignore[misc]
    def forward(x: Any) -> Any:
        return model(x, training=False)

    proto, _ = tf2onnx.convert.from_function(forward, input_signature=spec, opset=OPSET)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(proto.SerializeToString())
    os.replace(tmp, path)


def _key(name: str, cfg: dict[str, Any]) -> str:
    blob = json.dumps(
        {"name": name, "cfg": cfg, "opset": OPSET, "seed": SEED, "v": 4}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def export(
    name: str, out_dir: str | os.PathLike[str], *, small: bool = False, with_torch: bool = True
) -> ZooModel:
    """Export zoo model ``name`` into ``out_dir`` (reused when already there) -> :class:`ZooModel`.

    ``small`` selects the test configuration.  ``with_torch`` (torch models) also keeps the
    eager ``torch.nn.Module`` (rebuilt from the same seed) in ``ZooModel.torch_module``.
    """
    if name not in CONFIGS:
        raise KeyError(f"unknown zoo model {name!r}; known: {', '.join(NAMES)}")
    cfg = CONFIGS[name]["small" if small else "full"]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}{'_small' if small else ''}-{_key(name, cfg)}.onnx"
    if name == "keras_resnet50":
        if not path.exists():
            _export_keras_resnet50(cfg, path)
        return ZooModel(
            name,
            path,
            {"x": ((None, cfg["image"], cfg["image"], 3), "float32")},
            cfg,
            _image_inputs(cfg["image"], "NHWC"),
            None,
            "keras",
        )
    module = None
    if with_torch or not path.exists():
        module = _build_torch(name, cfg)
    torch = _torch()
    if name in HF_MODELS:

        def make_hf_ids(
            batch: int = 1, seq: int | None = None, seed: int = 0
        ) -> dict[str, np.ndarray]:
            rng = np.random.default_rng(seed)
            shape = (batch, cfg["seq"] if seq is None else seq)
            return {"ids": rng.integers(0, cfg["vocab"], shape, dtype=np.int64)}

        if not path.exists():
            example = (torch.from_numpy(make_hf_ids(2)["ids"]),)
            _export_torch(module, example, path, ["ids"], {"ids": {0: "batch", 1: "seq"}},
                          {0: "batch", 1: "seq"})
        return ZooModel(name, path, {"ids": ((None, cfg["seq"]), "int64")}, cfg, make_hf_ids,
                        module)
    if name == "transformer":
        seq = cfg["seq"]

        def make_ids(
            batch: int = 1, seq: int | None = None, seed: int = 0
        ) -> dict[str, np.ndarray]:
            if seq is not None and seq != cfg["seq"]:
                raise ValueError(
                    f"the transformer is exported for sequence {cfg['seq']}, not {seq}"
                )
            rng = np.random.default_rng(seed)
            return {"ids": rng.integers(0, cfg["vocab"], (batch, cfg["seq"]), dtype=np.int64)}

        if not path.exists():
            example = (torch.from_numpy(make_ids(2)["ids"]),)
            # Only the batch is dynamic: the TorchScript exporter bakes the example's sequence
            # length into nn.MultiheadAttention's reshapes.
            _export_torch(module, example, path, ["ids"], {"ids": {0: "batch"}})
        return ZooModel(name, path, {"ids": ((None, seq), "int64")}, cfg, make_ids, module)
    image = cfg["image"]
    make = _image_inputs(image)
    if not path.exists():
        example = (torch.from_numpy(make(2)["x"]),)
        _export_torch(module, example, path, ["x"], {"x": {0: "batch"}})
    return ZooModel(name, path, {"x": ((None, 3, image, image), "float32")}, cfg, make, module)


def run_onnxruntime(
    path: str | os.PathLike[str], feeds: dict[str, np.ndarray], threads: int | None = None
) -> list[np.ndarray]:
    """The oracle: run ``path`` under ONNX Runtime (CPU) on ``feeds``."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    return list(sess.run(None, feeds))


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """``max|got - want| / max|want|`` (the zoo's agreement measure; 0 for two empty arrays)."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise ValueError(f"shape mismatch: {got.shape} vs {want.shape}")
    if want.size == 0:
        return 0.0
    scale = float(np.max(np.abs(want))) or 1.0
    return float(np.max(np.abs(got - want))) / scale


if __name__ == "__main__":  # pragma: no cover - manual use
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", default=list(NAMES))
    p.add_argument("--out", default="/tmp/pytfrt-zoo")
    p.add_argument("--small", action="store_true")
    a = p.parse_args()
    from pytfrt.tools.bench import progress_bar

    for n in progress_bar(a.names, "export", unit="model"):
        zm = export(n, a.out, small=a.small, with_torch=False)
        print(n, zm.path, f"{zm.path.stat().st_size / 1e6:.1f} MB")
