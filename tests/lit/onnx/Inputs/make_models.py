"""Write the small ONNX models the ONNX lit tests import: ``make_models.py OUT_DIR``.

* ``heads.onnx``: ``x[batch, 4, 8]`` -> Reshape to ``[batch, 4, 2, 4]`` through a
  Shape/Gather/Unsqueeze/Concat subgraph -> Transpose -> Softmax (dynamic batch);
* ``conv.onnx``: ``x[batch, 3, 8, 8]`` -> Conv 3x3 (pads 1, bias) -> Relu -> MaxPool 2x2 ->
  GlobalAveragePool -> Flatten -> Gemm (weights from a fixed seed);
* ``einsum.onnx``: one ``Einsum`` node (an ONNX family op);
* ``det.onnx``: one ``RandomUniformLike`` node (not supported by the front end: no random
  generator matching another runtime's).
"""

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(nodes, inputs, outputs, inits, path):
    graph = helper.make_graph(
        nodes, path.stem, inputs, outputs,
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    save(
        [
            helper.make_node("Shape", ["x"], ["s"], name="shape"),
            helper.make_node("Gather", ["s", "zero"], ["b"], axis=0, name="batch"),
            helper.make_node("Unsqueeze", ["b", "axes0"], ["b1"], name="unsqueeze"),
            helper.make_node("Concat", ["b1", "tail"], ["target"], axis=0, name="target"),
            helper.make_node("Reshape", ["x", "target"], ["r"], name="split_heads"),
            helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3], name="transpose"),
            helper.make_node("Softmax", ["t"], ["y"], axis=-1, name="softmax"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2, 4, 4])],
        {"zero": np.asarray(0, np.int64), "axes0": np.asarray([0], np.int64),
         "tail": np.asarray([4, 2, 4], np.int64)},
        out / "heads.onnx",
    )
    save(
        [
            helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
            helper.make_node("Relu", ["c"], ["r"], name="relu"),
            helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2],
                             name="pool"),
            helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
            helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
            helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1, name="fc"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5])],
        {"w": rng.standard_normal((6, 3, 3, 3)).astype(np.float32),
         "b": rng.standard_normal(6).astype(np.float32),
         "fc_w": rng.standard_normal((5, 6)).astype(np.float32),
         "fc_b": rng.standard_normal(5).astype(np.float32)},
        out / "conv.onnx",
    )
    save(
        [helper.make_node("Einsum", ["a", "b"], ["y"], equation="ij,jk->ik", name="mm")],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        {},
        out / "einsum.onnx",
    )
    save(
        [helper.make_node("RandomUniformLike", ["a"], ["y"], name="random")],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 1, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])],
        {},
        out / "det.onnx",
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
