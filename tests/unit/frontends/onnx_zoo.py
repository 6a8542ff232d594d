"""Helpers for the ONNX front-end tests: one-node models, the zoo, ONNX Runtime as the oracle.

``benchmarks/zoo.py`` is loaded by file path (``pytfrt.tools.bench.load_harness``; the name
``benchmarks`` is taken by a package that xDSL installs).  Functions here build models with
``onnx.helper``, run them under ONNX Runtime and under pytfrt (``pytfrt.compile``), and compare
with the zoo's relative error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np


def zoo_module() -> ModuleType:
    """``benchmarks/zoo.py`` as a module (loaded once, by path)."""
    from pytfrt.tools.bench import load_harness

    module = load_harness("zoo.py")
    assert module is not None, "benchmarks/zoo.py not found"
    return module


def outputs_list(result: Any, names: Sequence[str]) -> list[np.ndarray]:
    """A compiled model's result (array, tuple or dict) as a list in output order."""
    if isinstance(result, Mapping):
        return [np.asarray(result[n]) for n in names]
    if isinstance(result, tuple | list):
        return [np.asarray(r) for r in result]
    return [np.asarray(result)]


def run_ort(model: Any, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """ONNX Runtime's outputs for ``model`` (a ModelProto or path)."""
    import onnxruntime as ort

    blob = model.SerializeToString() if hasattr(model, "SerializeToString") else str(model)
    sess = ort.InferenceSession(blob, providers=["CPUExecutionProvider"])
    return [np.asarray(o) for o in sess.run(None, dict(feeds))]


def run_pytfrt(model: Any, feeds: Mapping[str, np.ndarray], **compile_kw: Any) -> list[np.ndarray]:
    """pytfrt's outputs for ``model`` (compiled through ``pytfrt.compile``)."""
    import onnx

    import pytfrt

    proto = model if isinstance(model, onnx.ModelProto) else onnx.load(str(model))
    compiled = pytfrt.compile(model, **compile_kw)
    names = [o.name for o in proto.graph.output]
    return outputs_list(compiled(**feeds), names)


def max_rel_error(got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> float:
    """The zoo's agreement measure, maximum over outputs (shapes and dtypes must match)."""
    zoo = zoo_module()
    assert len(got) == len(want), (len(got), len(want))
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        worst = max(worst, zoo.relative_error(g, w))
    return worst


def one_node_model(
    op_type: str,
    inputs: Mapping[str, np.ndarray | None],
    n_outputs: int = 1,
    *,
    initializers: Mapping[str, np.ndarray] | None = None,
    dynamic: Sequence[str] = (),
    opset: int = 17,
    **attrs: Any,
) -> Any:
    """A model of one ``op_type`` node.

    ``inputs``: graph inputs in node order (a ``None`` value = an absent optional input, given
    as ``""``); ``initializers`` are constant node inputs appended after them in order (use
    ``inputs`` names for order control: a name present in both is a constant).  ``dynamic``
    names inputs whose every dim becomes a ``dim_param``.
    """
    import onnx
    from onnx import helper, numpy_helper

    initializers = dict(initializers or {})
    node_inputs: list[str] = []
    graph_inputs = []
    for name, arr in inputs.items():
        if arr is None:
            node_inputs.append("")
            continue
        node_inputs.append(name)
        if name in initializers:
            continue
        elem = helper.np_dtype_to_tensor_dtype(arr.dtype)
        shape: list[Any] = list(arr.shape)
        if name in dynamic:
            shape = [f"{name}_d{i}" for i in range(arr.ndim)]
        graph_inputs.append(helper.make_tensor_value_info(name, elem, shape))
    for name in initializers:
        if name not in inputs:
            node_inputs.append(name)
    outs = [f"out{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, node_inputs, outs, name=f"the_{op_type.lower()}", **attrs)
    graph = helper.make_graph(
        [node],
        f"{op_type}_test",
        graph_inputs,
        [helper.make_value_info(o, onnx.TypeProto()) for o in outs],
        initializer=[numpy_helper.from_array(v, k) for k, v in initializers.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def feeds_of(model: Any, inputs: Mapping[str, np.ndarray | None]) -> dict[str, np.ndarray]:
    """The graph-input feeds of ``inputs`` (constants and absent inputs left out)."""
    names = {i.name for i in model.graph.input}
    return {k: v for k, v in inputs.items() if v is not None and k in names}
