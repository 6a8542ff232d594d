"""CompiledModel.save / pytfrt.load: round trips, a load without the compiler's dependencies,
and clear errors for directories that are not saved models."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import pytfrt
from pytfrt.compiler import GraphBuilder
from pytfrt.compiler.api import compile_module
from pytfrt.model import ModelError

RNG = np.random.default_rng(7)


def _model():  # type: ignore[no-untyped-def]
    w = RNG.standard_normal((3, 3, 2, 4)).astype(np.float32)
    wd = RNG.standard_normal((4, 3)).astype(np.float32)
    half = RNG.standard_normal(4).astype(np.float16)
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("image", (None, 6, 6, 2), "f32"), ("scale", (), "f32")])
    x, s = fn.arguments
    h = fn.op("conv2d", [x, fn.constant(w, name="conv/w")], layout="NHWC", pads=[1, 1, 1, 1])
    h = fn.op("mul", [fn.op("relu", [h]), s])
    h = fn.op("add", [h, fn.op("cast", [fn.constant(half, name="half_bias"), ], to="f32")])
    h = fn.op("reduce_mean", [h], axes=[1, 2])
    y = fn.op("matmul", [h, fn.constant(wd, name="dense/w")])
    fn.returns([y, fn.op("argmax", [y], axis=1)], names=["logits", "label"])
    return compile_module(gb.finish())


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    model = _model()
    model.save(tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [
        "manifest.json", "model.bef", "weights.btf"]
    loaded = pytfrt.load(tmp_path / "m")
    assert loaded.signature == model.signature
    x = RNG.standard_normal((2, 6, 6, 2)).astype(np.float32)
    s = np.float32(0.5)
    a, b = model(x, s), loaded(image=x, scale=np.asarray(s))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_load_works_when_tensorflow_onnx_and_xdsl_cannot_be_imported(tmp_path: Path) -> None:
    model = _model()
    model.save(tmp_path / "m")
    x = RNG.standard_normal((1, 6, 6, 2)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "want.npy", model(x, np.float32(2.0))[0])
    code = textwrap.dedent(f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("tensorflow", "onnx", "xdsl", "onnxruntime"):
                    raise ImportError(f"blocked: {{name}}")
                return None
        sys.meta_path.insert(0, Block())
        import numpy as np
        import pytfrt
        m = pytfrt.load({str(tmp_path / "m")!r})
        y = m(np.load({str(tmp_path / "x.npy")!r}), np.float32(2.0))[0]
        np.testing.assert_array_equal(y, np.load({str(tmp_path / "want.npy")!r}))
        assert not any(k.split(".")[0] in ("xdsl", "tensorflow", "onnx") for k in sys.modules)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_load_rejects_what_is_not_a_saved_model(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="no such directory"):
        pytfrt.load(tmp_path / "missing")
    with pytest.raises(ModelError, match="no manifest.json"):
        pytfrt.load(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "tensorflow"}))
    with pytest.raises(ModelError, match="is not a pytfrt saved model"):
        pytfrt.load(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ModelError, match="not valid JSON"):
        pytfrt.load(tmp_path)
    _model().save(tmp_path / "m")
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    manifest["version"] = 99
    (tmp_path / "m" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ModelError, match="format version 99"):
        pytfrt.load(tmp_path / "m")
    manifest["version"] = 1
    (tmp_path / "m" / "manifest.json").write_text(json.dumps(manifest))
    (tmp_path / "m" / "model.bef").write_bytes(b"garbage")
    with pytest.raises(ModelError, match="program .* does not match its SHA-256"):
        pytfrt.load(tmp_path / "m")
    with pytest.raises(ModelError, match="not a valid BEF file"):
        pytfrt.load(tmp_path / "m", verify=False)
    _model().save(tmp_path / "m2")
    data = (tmp_path / "m2" / "weights.btf").read_bytes()
    (tmp_path / "m2" / "weights.btf").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match="weights_file .* does not match its SHA-256"):
        pytfrt.load(tmp_path / "m2")
    with pytest.raises(ModelError, match="not a valid BTF weights file"):
        pytfrt.load(tmp_path / "m2", verify=False)


def test_a_scalar_weight_keeps_its_rank_through_save_and_load(tmp_path: Path) -> None:
    # A 0-d constant used to be saved as shape [1], so the loaded model broadcast its scalar
    # result to [1] (the output check now reports such a program).
    from pytfrt.compiler.api import parse_graph

    gm = parse_graph("""
module {
  func.func @main(%x: tensor<f32>) -> tensor<f32>
      attributes {tg.input_names = ["x"], tg.output_names = ["y"]} {
    %c = "tg.constant"() {value = dense<2.5> : tensor<f32>} : () -> tensor<f32>
    %y = "tg.mul"(%x, %c) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    func.return %y : tensor<f32>
  }
}""")
    model = compile_module(gm, optimize=False)
    model.save(tmp_path / "m")
    out = pytfrt.load(tmp_path / "m")(np.float32(2))
    assert out.shape == () and out == np.float32(5)
