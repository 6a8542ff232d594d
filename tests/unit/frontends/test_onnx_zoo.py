"""The model zoo (``benchmarks/zoo.py``, small configurations) through pytfrt vs ONNX Runtime.

Every model is exported once per session into a temporary directory, compiled with
``pytfrt.compile`` and checked against ONNX Runtime to a relative 1e-4 (max over outputs) at
two batch sizes (and two sequence lengths for the transformer), from one compiled model: the
batch (and sequence) stay dynamic.  The real input sizes run in ``benchmarks/models.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("torch")

from onnx_zoo import max_rel_error, run_ort, zoo_module

TOL = 1e-4


@pytest.fixture(scope="session")
def zoo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx_zoo")


def _check(zm: Any, sizes: list[dict[str, int]]) -> None:
    import pytfrt

    compiled = pytfrt.compile(zm.path)
    for kw in sizes:
        feeds = zm.make_inputs(**kw, seed=kw.get("batch", 1))
        want = run_ort(zm.path, feeds)
        got = compiled(**feeds)
        got_list = (
            [np.asarray(got)]
            if not isinstance(got, tuple | list | dict)
            else (list(got.values()) if isinstance(got, dict) else [np.asarray(g) for g in got])
        )
        err = max_rel_error(got_list, want)
        assert err <= TOL, f"{zm.name} {kw}: relative error {err:.3g} > {TOL}"


@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v3_small", "efficientnet_b0"])
def test_cnn_matches_onnxruntime(name: str, zoo_dir: Path) -> None:
    zm = zoo_module().export(name, zoo_dir, small=True, with_torch=False)
    _check(zm, [{"batch": 1}, {"batch": 3}])


def test_transformer_matches_onnxruntime(zoo_dir: Path) -> None:
    zm = zoo_module().export("transformer", zoo_dir, small=True, with_torch=False)
    _check(zm, [{"batch": 1}, {"batch": 3}])


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_hf_transformer_matches_onnxruntime(name: str, zoo_dir: Path) -> None:
    """BERT and GPT-2 (``transformers`` definitions, small configurations, random weights):
    GELU (erf / tanh) fused into the MLP's matmul, batch and sequence dynamic: one compiled
    model serves two batch sizes and two sequence lengths."""
    pytest.importorskip("transformers")
    zm = zoo_module().export(name, zoo_dir, small=True, with_torch=False)
    _check(zm, [{"batch": 1}, {"batch": 2, "seq": 9}])


@pytest.mark.slow
def test_keras_resnet50_through_tf2onnx_matches_onnxruntime(zoo_dir: Path) -> None:
    pytest.importorskip("tensorflow")
    pytest.importorskip("tf2onnx")
    zm = zoo_module().export("keras_resnet50", zoo_dir, small=True)
    _check(zm, [{"batch": 2}])


def test_zoo_export_is_cached_and_deterministic(zoo_dir: Path, tmp_path: Path) -> None:
    zoo = zoo_module()
    a = zoo.export("mobilenet_v3_small", zoo_dir, small=True, with_torch=False)
    mtime = a.path.stat().st_mtime_ns
    b = zoo.export("mobilenet_v3_small", zoo_dir, small=True, with_torch=False)
    assert b.path == a.path and b.path.stat().st_mtime_ns == mtime
    c = zoo.export("mobilenet_v3_small", tmp_path, small=True, with_torch=False)
    feeds = a.make_inputs(batch=1)
    np.testing.assert_array_equal(run_ort(a.path, feeds)[0], run_ort(c.path, feeds)[0])
    with pytest.raises(KeyError, match="unknown zoo model"):
        zoo.export("vgg", zoo_dir)


def test_torch_attention_with_dynamic_batch_and_sequence(tmp_path: Path) -> None:
    """A self-attention block whose reshapes read the shape at run time (the TorchScript
    exporter keeps ``x.shape`` symbolic here): one compiled model, several (batch, seq)."""
    import warnings

    import torch

    import pytfrt

    class Attention(torch.nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self, d: int = 16, heads: int = 2) -> None:
            super().__init__()
            self.heads = heads
            self.emb = torch.nn.Embedding(50, d)
            self.pos = torch.nn.Parameter(torch.randn(64, d))
            self.qkv = torch.nn.Linear(d, 3 * d)
            self.out = torch.nn.Linear(d, d)
            self.norm = torch.nn.LayerNorm(d)

        def forward(self, ids: Any) -> Any:
            b, s = ids.shape
            x = self.emb(ids) + self.pos[:s]
            q, k, v = self.qkv(x).reshape(b, s, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            att = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, s, -1)
            return self.norm(x + torch.nn.functional.gelu(self.out(y)))

    torch.manual_seed(0)
    path = tmp_path / "attention.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Attention().eval(),
            (torch.zeros(2, 5, dtype=torch.int64),),
            str(path),
            dynamo=False,
            opset_version=17,
            input_names=["ids"],
            output_names=["y"],
            dynamic_axes={"ids": {0: "b", 1: "s"}},
        )
    compiled = pytfrt.compile(path)
    for b, s in ((1, 3), (2, 5), (3, 11)):
        ids = np.random.default_rng(b * s).integers(0, 50, (b, s)).astype(np.int64)
        (want,) = run_ort(path, {"ids": ids})
        got = np.asarray(compiled(ids=ids))
        assert max_rel_error([got], [want]) <= TOL, (b, s)


def test_zoo_models_compile_without_importing_onnx(zoo_dir: Path) -> None:
    """Compiling and calling the zoo's models in a fresh process leaves the ``onnx`` package
    unimported (the front end reads ONNX's protobuf module only; docs/compiler.md)."""
    import json
    import os
    import subprocess
    import sys

    names = ["resnet50", "mobilenet_v3_small", "efficientnet_b0", "transformer"]
    try:
        import transformers  # noqa: F401

        names += ["bert", "gpt2"]
    except ImportError:
        pass
    zms = [zoo_module().export(n, zoo_dir, small=True, with_torch=False) for n in names]
    feeds = {zm.name: zm.make_inputs(batch=1, seed=1) for zm in zms}
    for zm in zms:
        np.savez(zoo_dir / f"{zm.name}.feeds.npz", **feeds[zm.name])
    code = f"""
import json, sys
import numpy as np
import pytfrt
outs = {{}}
for name, path in {[(zm.name, str(zm.path)) for zm in zms]!r}:
    feeds = dict(np.load({str(zoo_dir)!r} + "/" + name + ".feeds.npz"))
    got = pytfrt.compile(path)(**feeds)
    outs[name] = np.asarray(got if not isinstance(got, (tuple, list, dict)) else
                            (list(got.values()) if isinstance(got, dict) else got)[0]).tolist()
print(json.dumps({{"outs": outs, "onnx": sorted(m for m in sys.modules
                                              if m == "onnx" or m.startswith("onnx."))}}))
"""
    src = str(Path(__file__).resolve().parents[3] / "src")
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["onnx"] == []
    for zm in zms:
        want = run_ort(zm.path, feeds[zm.name])[0]
        err = max_rel_error([np.asarray(got["outs"][zm.name], want.dtype)], [want])
        assert err <= TOL, f"{zm.name}: relative error {err:.3g} > {TOL}"
