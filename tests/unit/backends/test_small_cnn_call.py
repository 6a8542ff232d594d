"""A small ONNX CNN's compiled call (``benchmarks/call_overhead.py``'s model): the prepared
per-shape paths -- the convolutions' and the max pool's oneDNN launchers, a convolution below
``_dnnl_conv.PARALLEL_MIN_MACS`` on the calling thread, one just above split -- against torch,
with the input shape changing between calls (each shape prepared once, then reused).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

import pytfrt


def _model(path: Path, rng: np.random.Generator) -> dict[str, np.ndarray]:
    w = {"c1w": rng.standard_normal((8, 1, 3, 3)), "c1b": rng.standard_normal(8),
         "c2w": rng.standard_normal((16, 8, 3, 3)) * 0.3, "c2b": rng.standard_normal(16),
         "c3w": rng.standard_normal((48, 16, 3, 3)) * 0.2, "c3b": rng.standard_normal(48)}
    w = {k: v.astype(np.float32) for k, v in w.items()}
    layers: list[tuple[str, list[str], dict[str, Any]]] = [
        ("Conv", ["c1w", "c1b"], {"pads": [1] * 4}), ("Relu", [], {}),
        ("MaxPool", [], {"kernel_shape": [2, 2], "strides": [2, 2]}),
        ("Conv", ["c2w", "c2b"], {"pads": [1] * 4}), ("Relu", [], {}),
        ("MaxPool", [], {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1] * 4}),
        ("Conv", ["c3w", "c3b"], {"pads": [1] * 4})]
    nodes = [helper.make_node(op, [f"t{i}", *extra], [f"t{i + 1}"], **attrs)
             for i, (op, extra, attrs) in enumerate(layers)]
    nodes[-1].output[0] = "y"
    nodes[0].input[0] = "x"
    graph = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                     ["n", 1, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in w.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return w


def _torch(x: np.ndarray, w: dict[str, np.ndarray]) -> np.ndarray:
    t = {k: torch.from_numpy(v.astype(np.float64)) for k, v in w.items()}
    y = torch.from_numpy(x.astype(np.float64))
    y = F.max_pool2d(F.relu(F.conv2d(y, t["c1w"], t["c1b"], padding=1)), 2, 2)
    y = F.max_pool2d(F.relu(F.conv2d(y, t["c2w"], t["c2b"], padding=1)), 3, 1, 1)
    return F.conv2d(y, t["c3w"], t["c3b"], padding=1).numpy()


def test_small_cnn_matches_torch_as_the_input_shape_changes(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    w = _model(tmp_path / "cnn.onnx", rng)
    model = pytfrt.compile(str(tmp_path / "cnn.onnx"))
    # 28x28: the second conv ~225k multiply-adds (one thread), the third ~1.35M (split);
    # 30x26 and batch 2 are new shapes, then the kept ones again
    for n, h, wd in [(1, 28, 28), (1, 28, 28), (2, 28, 28), (1, 30, 26), (1, 28, 28),
                     (2, 28, 28)]:
        x = rng.standard_normal((n, 1, h, wd)).astype(np.float32)
        x.flags.writeable = False
        got = model(x)
        want = _torch(x, w)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
