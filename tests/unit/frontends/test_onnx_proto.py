"""The ONNX front end's common path needs only ONNX's protobuf module, not the ``onnx`` package.

* Compiling and running an ONNX file (a conv net with a folded shape subgraph) in a fresh
  process leaves ``onnx`` out of ``sys.modules``; its outputs match ONNX Runtime's.
* ``onnx_proto``'s classes are ``onnx``'s, whichever is imported first.
* ``onnx_proto``'s helpers agree with ``onnx``'s (``numpy_helper.to_array``,
  ``helper.get_attribute_value``, ``helper.make_node``, ``tensor_dtype_to_np_dtype``) -- the
  oracles (import-time folding: ``test_onnx_import_fold.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from pytfrt.compiler.frontends import onnx_proto  # noqa: E402

_SRC = str(Path(__file__).resolve().parents[3] / "src")


def _run(code: str) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter (this tree's ``pytfrt``); its last stdout line,
    parsed as JSON."""
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = _SRC + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _conv_net(path: Path) -> None:
    """A conv + relu + global pool + a reshape whose target is computed from constants
    (``Constant``, ``Gather``, ``Mul``, ``Shape``, ``Sub``, ``Unsqueeze``, ``Squeeze``,
    ``Identity``, ``Concat``: folded at import) + a ``ConstantOfShape`` bias; the batch
    dimension is dynamic."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Constant", [], ["dims"],
                         value=numpy_helper.from_array(np.array([1, 8], np.int64))),
        helper.make_node("Constant", [], ["one"], value_ints=[1]),
        helper.make_node("Gather", ["dims", "one"], ["g"], axis=0),
        helper.make_node("Mul", ["g", "one"], ["eight"]),
        helper.make_node("Shape", ["dims"], ["two"]),
        helper.make_node("Sub", ["two", "one"], ["axes"]),
        helper.make_node("Constant", [], ["m1"], value_ints=[-1]),
        helper.make_node("Unsqueeze", ["m1", "axes"], ["m1u"]),
        helper.make_node("Squeeze", ["m1u", "axes"], ["m1s"]),
        helper.make_node("Identity", ["m1s"], ["m1i"]),
        helper.make_node("Concat", ["m1i", "eight"], ["target"], axis=0),
        helper.make_node("Reshape", ["p", "target"], ["flat"]),
        helper.make_node("ConstantOfShape", ["eight"], ["bias"],
                         value=numpy_helper.from_array(np.array([0.5], np.float32))),
        helper.make_node("Add", ["flat", "bias"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_compile_and_run_without_importing_onnx(tmp_path: Path) -> None:
    path = tmp_path / "conv.onnx"
    _conv_net(path)
    x = np.random.default_rng(1).standard_normal((2, 3, 16, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    got = _run(f"""
import json, sys
import numpy as np
import pytfrt
model = pytfrt.compile({str(path)!r})
y = np.asarray(model(np.load({str(tmp_path / 'x.npy')!r})))
print(json.dumps({{"y": y.tolist(), "onnx": sorted(m for m in sys.modules
                                                  if m == "onnx" or m.startswith("onnx."))}}))
""")
    assert got["onnx"] == []
    (want,) = ort.InferenceSession(str(path)).run(None, {"x": x})
    np.testing.assert_allclose(np.asarray(got["y"], np.float32), want, rtol=1e-5, atol=1e-5)


def test_model_proto_and_a_later_import_of_onnx_work() -> None:
    """A ModelProto made by ``onnx`` after the front end loaded the classes is accepted, and
    the classes are the same objects in either import order."""
    got = _run("""
import json
from pytfrt.compiler.frontends import onnx_proto
import onnx
from onnx import helper
from pytfrt.compiler.frontends.onnx import import_onnx
node = helper.make_node("Relu", ["x"], ["y"])
graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [2])],
                          [helper.make_tensor_value_info("y", 1, [2])])
gm = import_onnx(helper.make_model(graph))
print(json.dumps({"same": onnx.ModelProto is onnx_proto.ModelProto
                  and onnx.TensorProto is onnx_proto.TensorProto,
                  "pb2": onnx_proto.pb2.__name__, "ops": "relu" in str(gm)}))
""")
    assert got == {"same": True, "pb2": onnx_proto.PB2_NAME, "ops": True}
    got = _run("""
import json
import onnx
from pytfrt.compiler.frontends import onnx_proto
print(json.dumps({"same": onnx.ModelProto is onnx_proto.ModelProto,
                  "pb2": onnx_proto.pb2.__name__}))
""")
    assert got == {"same": True, "pb2": "onnx.onnx_ml_pb2"}


_DTYPES = [TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16,
           TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16, TensorProto.UINT16,
           TensorProto.INT32, TensorProto.UINT32, TensorProto.INT64, TensorProto.UINT64,
           TensorProto.BOOL, TensorProto.STRING, TensorProto.COMPLEX64, TensorProto.INT4]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dtype=st.sampled_from(_DTYPES), raw=st.booleans(),
       shape=st.lists(st.integers(0, 3), max_size=3), seed=st.integers(0, 2**31))
def test_to_array_matches_numpy_helper(dtype: int, raw: bool, shape: list[int],
                                       seed: int) -> None:
    rng = np.random.default_rng(seed)
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    n = int(np.prod(shape))
    if dtype == TensorProto.STRING:
        vals: Any = [f"s{int(v)}".encode() for v in rng.integers(0, 99, n)]
        raw = False
    elif dtype == TensorProto.INT4:
        vals = rng.integers(-8, 8, n).tolist()
    elif np.dtype(np_type).kind in "iub":
        info = np.iinfo(np.int32 if np_type == np.bool_ else np_type)
        lo, hi = (0, 2) if np_type == np.bool_ else (max(info.min, -2**40), min(info.max, 2**40))
        vals = rng.integers(lo, hi, n, endpoint=False).astype(np_type)
    else:
        vals = (rng.standard_normal(n) * 100).astype(np_type)
    if raw and dtype != TensorProto.INT4:
        tensor = numpy_helper.from_array(np.asarray(vals, np_type).reshape(shape), "t")
    else:
        tensor = helper.make_tensor("t", dtype, shape, vals, raw=False)
    want = numpy_helper.to_array(tensor)
    got = onnx_proto.to_array(tensor)
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "V":  # bfloat16, int4: compare the bits
        assert got.tobytes() == want.tobytes()
    else:
        np.testing.assert_array_equal(got, want)
    if dtype != TensorProto.STRING:
        assert onnx_proto.np_dtype(dtype) == np.dtype(np_type)


_ATTRS: list[Any] = [1, -7, 2.5, "tanh", b"raw", [1, 2, 3], [0.5, 1], [1, 2.5], ["a", "b"],
                     numpy_helper.from_array(np.arange(3, dtype=np.int64)), True,
                     np.int64(4), np.float32(0.25)]


@pytest.mark.parametrize("value", _ATTRS, ids=[type(v).__name__ + str(i)
                                              for i, v in enumerate(_ATTRS)])
def test_make_node_and_attribute_value_match_onnx_helper(value: Any) -> None:
    want = helper.make_node("Op", ["a", ""], ["b"], name="n", domain="d", z=value, a=1)
    got = onnx_proto.make_node("Op", ["a", ""], ["b"], name="n", domain="d", z=value, a=1)
    assert got.SerializeToString() == want.SerializeToString()
    for g, w in zip(got.attribute, want.attribute, strict=True):
        gv, wv = onnx_proto.attribute_value(g), helper.get_attribute_value(w)
        assert type(gv) is type(wv) and gv == wv


def test_attribute_value_errors_as_onnx() -> None:
    ref = onnx.AttributeProto(name="a", ref_attr_name="b", type=onnx.AttributeProto.INT)
    with pytest.raises(ValueError, match="reference attribute"):
        onnx_proto.attribute_value(ref)
    assert onnx_proto.attribute_value(onnx.AttributeProto(name="u")) is None


def _relu_matmul(opset: int) -> tuple[Any, np.ndarray]:
    w = np.random.default_rng(2).standard_normal((64, 32)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "mm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 32])],
        [numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), w


@pytest.mark.parametrize("suffix, opset, external", [
    (".textproto", 17, False),  # a text format: read by onnx.load, as before
    (".onnx", 11, True),  # old opset: load_model + version converter, external data
    (".onnx", 17, True),  # load_split: the external initializer read by onnx's reader
])
def test_load_model_reads_what_onnx_load_reads(tmp_path: Path, suffix: str, opset: int,
                                               external: bool) -> None:
    from pytfrt.compiler.frontends.onnx import load_model

    model, w = _relu_matmul(opset)
    path = tmp_path / f"m{suffix}"
    onnx.save_model(model, str(path), save_as_external_data=external,
                    all_tensors_to_one_file=True, location="w.bin", size_threshold=0)
    got, origin = load_model(path)
    assert origin == str(path)
    assert got.SerializeToString() == onnx.load(str(path)).SerializeToString()
    import pytfrt

    x = np.random.default_rng(3).standard_normal((2, 64)).astype(np.float32)
    compiled = pytfrt.compile(str(path) if suffix == ".onnx" else got)
    np.testing.assert_allclose(np.asarray(compiled(x)), np.maximum(x @ w, 0), rtol=1e-5,
                               atol=1e-5)
