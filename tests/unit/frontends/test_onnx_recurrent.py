"""ONNX ``LSTM``/``GRU``/``RNN`` imported as ``tg.recurrent``, against ONNX's and ORT's answers.

Three oracles: ONNX's own backend node cases for the three operators (models with inputs and
expected outputs, compared as ONNX's runner compares); ONNX Runtime on one-node models that
sweep what the cases leave out (every direction and layout -- for ``layout = 1``, which its
CPU kernels refuse, the ``layout = 0`` twin on transposed inputs --, ``sequence_lens`` with ragged
lengths, initial states, peepholes, ``clip``, ``input_forget``, GRU's ``linear_before_reset``
both ways, non-default activations with ``alpha``/``beta``, every output); and ONNX Runtime on
torch ``nn.LSTM``/``nn.GRU``/``nn.RNN`` stacks (two layers, bidirectional) exported with
``torch.onnx.export``.  Also: the model really holds one ``tg.recurrent`` per layer (no loop),
and bad operands are refused with the op's name.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_zoo import max_rel_error, one_node_model, run_ort, run_pytfrt

import pytfrt
from pytfrt.compiler.api import to_graph
from pytfrt.compiler.errors import GraphError

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _onnx_node_cases() -> list[Any]:
    """ONNX's backend node cases of LSTM, GRU and RNN (made by importing their case modules)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.case import node
        from onnx.backend.test.case.node import gru, lstm, rnn  # noqa: F401 (registers cases)
    prefixes = ("test_lstm", "test_gru", "test_rnn", "test_simple_rnn")
    seen: dict[str, Any] = {}
    for case in node._NodeTestCases:
        if case.name.startswith(prefixes):
            seen.setdefault(case.name, case)
    return list(seen.values())


NODE_CASES = _onnx_node_cases()


def test_onnx_node_cases_are_found() -> None:
    names = {c.name for c in NODE_CASES}
    want = {"test_lstm_with_peepholes", "test_gru_seq_length", "test_simple_rnn_bidirectional"}
    assert want <= names
    assert len(names) >= 15


@pytest.mark.parametrize("case", NODE_CASES, ids=lambda c: c.name)
def test_onnx_backend_node_case(case: Any) -> None:
    inputs, expected = case.data_sets[0]
    got = pytfrt.compile(case.model)(*inputs)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=case.rtol, atol=1e-5)


def _model(op: str, rng: np.random.Generator, *, seq: int = 5, batch: int = 3, inp: int = 4,
           hidden: int = 6, direction: str = "forward", layout: int = 0, bias: bool = True,
           lens: list[int] | None = None, init_h: bool = False, init_c: bool = False,
           peep: bool = False, outputs: int = 3, const_weights: bool = True,
           **attrs: Any) -> tuple[Any, dict[str, np.ndarray]]:
    """A one-node LSTM/GRU/RNN model and its feeds (weights as initializers or inputs)."""
    d = 2 if direction == "bidirectional" else 1
    g = GATES[op]

    def f(*shape: int) -> np.ndarray:
        return rng.uniform(-1, 1, shape).astype(np.float32)

    x = f(seq, batch, inp) if layout == 0 else f(batch, seq, inp)
    state = (d, batch, hidden) if layout == 0 else (batch, d, hidden)
    named: dict[str, np.ndarray | None] = {
        "X": x, "W": f(d, g * hidden, inp), "R": f(d, g * hidden, hidden),
        "B": f(d, 2 * g * hidden) if bias else None,
        "sequence_lens": None if lens is None else np.asarray(lens, np.int32),
        "initial_h": f(*state) if init_h else None,
    }
    if op == "LSTM":
        named["initial_c"] = f(*state) if init_c else None
        named["P"] = f(d, 3 * hidden) if peep else None
    while named and list(named.values())[-1] is None:  # trailing absent inputs are left off
        named.popitem()
    consts = {k: v for k, v in named.items() if k in ("W", "R", "B", "P") and v is not None}
    if not const_weights:
        consts = {}
    n_out = min(outputs, 3 if op == "LSTM" else 2)
    model = one_node_model(op, named, n_out, initializers=consts, opset=14, hidden_size=hidden,
                           direction=direction, layout=layout, **attrs)
    feeds = {k: v for k, v in named.items() if v is not None and k not in consts}
    return model, feeds


def _oracle(model: Any, feeds: dict[str, np.ndarray], layout: int) -> list[np.ndarray]:
    """ONNX Runtime's outputs.  Its CPU kernels refuse ``layout = 1``: then it runs the same
    node with ``layout = 0`` on the transposed inputs, and its outputs are transposed back."""
    if layout == 0:
        return run_ort(model, feeds)
    import onnx

    twin = onnx.ModelProto()
    twin.CopyFrom(model)
    for a in twin.graph.node[0].attribute:
        if a.name == "layout":
            a.i = 0
    for vi in twin.graph.input:
        if vi.name in ("X", "initial_h", "initial_c"):
            dims = vi.type.tensor_type.shape.dim
            dims[0].dim_value, dims[1].dim_value = dims[1].dim_value, dims[0].dim_value
    swapped = {k: v.transpose(1, 0, 2) if k in ("X", "initial_h", "initial_c") else v
               for k, v in feeds.items()}
    outs = run_ort(twin, swapped)
    return [outs[0].transpose(2, 0, 1, 3)] + [o.transpose(1, 0, 2) for o in outs[1:]]


SWEEP: list[tuple[str, dict[str, Any]]] = [
    ("LSTM", {}),
    ("LSTM", {"direction": "reverse", "init_h": True, "init_c": True}),
    ("LSTM", {"direction": "bidirectional", "layout": 1, "init_h": True, "init_c": True}),
    ("LSTM", {"lens": [5, 2, 0], "direction": "bidirectional", "init_h": True}),
    ("LSTM", {"lens": [3, 5, 1], "direction": "reverse", "layout": 1}),
    ("LSTM", {"peep": True, "init_c": True, "bias": False}),
    ("LSTM", {"clip": 0.5}),
    ("LSTM", {"peep": True, "init_c": True, "clip": 0.3, "direction": "bidirectional"}),
    ("LSTM", {"input_forget": 1}),
    ("LSTM", {"activations": ["HardSigmoid", "LeakyRelu", "Softsign"],
              "activation_alpha": [0.3, 0.2], "activation_beta": [0.4]}),
    ("LSTM", {"const_weights": False, "batch": 1, "seq": 7}),
    ("GRU", {}),
    ("GRU", {"linear_before_reset": 1}),
    ("GRU", {"linear_before_reset": 1, "direction": "bidirectional", "init_h": True}),
    ("GRU", {"lens": [4, 1, 5], "direction": "reverse", "layout": 1}),
    ("GRU", {"activations": ["Sigmoid", "Relu", "HardSigmoid", "Elu"],
             "direction": "bidirectional", "activation_alpha": [0.25, 0.5],
             "activation_beta": [0.3]}),
    ("GRU", {"clip": 0.7, "linear_before_reset": 0}),
    ("RNN", {}),
    ("RNN", {"direction": "bidirectional", "lens": [2, 5, 3], "init_h": True}),
    ("RNN", {"activations": ["Relu"], "layout": 1}),
    ("RNN", {"activations": ["ScaledTanh", "Affine"], "direction": "bidirectional",
             "activation_alpha": [1.5, 0.5], "activation_beta": [0.7, 0.1]}),
]


@pytest.mark.parametrize("op, kw", SWEEP, ids=lambda v: v if isinstance(v, str) else
                         "-".join(f"{k}={v[k]}" for k in sorted(v)) or "defaults")
def test_matches_onnx_runtime(op: str, kw: dict[str, Any]) -> None:
    rng = np.random.default_rng(SWEEP.index((op, kw)))
    model, feeds = _model(op, rng, **kw)
    want = _oracle(model, feeds, kw.get("layout", 0))
    got = run_pytfrt(model, feeds)
    assert [g.shape for g in got] == [w.shape for w in want]
    assert max_rel_error(got, want) < 1e-4


def test_only_y_h_is_used() -> None:
    """A node whose Y output is absent (as torch exports a last-state-only model)."""
    from onnx import helper

    model, feeds = _model("GRU", np.random.default_rng(7), outputs=2)
    model.graph.node[0].output[0] = ""
    model.graph.output.pop(0)
    assert len(helper.printable_graph(model.graph)) > 0
    assert max_rel_error(run_pytfrt(model, feeds), run_ort(model, feeds)) < 1e-4


def test_one_recurrent_op_and_no_loop() -> None:
    model, _ = _model("LSTM", np.random.default_rng(3), direction="bidirectional")
    text = str(to_graph(model))
    assert text.count('"tg.recurrent"') == 1
    assert '"tg.while"' not in text


def test_bad_operands_are_refused() -> None:
    model, _ = _model("LSTM", np.random.default_rng(4))
    w = next(i for i in model.graph.initializer if i.name == "W")
    w.dims[1] = 5 * 6  # 5 gate blocks: not an LSTM's 4
    del w.float_data[:]
    w.raw_data = np.zeros((1, 30, 4), np.float32).tobytes()
    with pytest.raises(GraphError, match="tg.recurrent: w must be"):
        pytfrt.compile(model)


# -- torch exports -----------------------------------------------------------------------------
def _torch_model(kind: str) -> tuple[Any, np.ndarray, str]:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}[kind]
    net = cls(input_size=8, hidden_size=16, num_layers=2, bidirectional=True,
              batch_first=True).eval()
    x = np.random.default_rng(0).normal(size=(2, 11, 8)).astype(np.float32)
    return net, x, kind


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn"])
def test_torch_export_matches_onnx_runtime(kind: str, tmp_path: Any) -> None:
    torch = pytest.importorskip("torch")
    net, x, _ = _torch_model(kind)
    path = tmp_path / f"{kind}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.from_numpy(x),), str(path), input_names=["x"],
                          dynamo=False, opset_version=17,
                          dynamic_axes={"x": {0: "batch"}})
    import onnx

    model = onnx.load(str(path))
    assert sum(n.op_type == kind.upper() for n in model.graph.node) == 2
    compiled = pytfrt.compile(model)
    feeds = {"x": x}
    want = run_ort(model, feeds)
    got = run_pytfrt(model, feeds)
    assert max_rel_error(got, want) < 1e-4
    with torch.no_grad():  # torch itself agrees too
        ref = net(torch.from_numpy(x))[0].numpy()
    assert max_rel_error([got[0]], [ref]) < 1e-4
    x1 = x[:1].copy()  # the batch stays dynamic
    assert max_rel_error(list(compiled(x1)), run_ort(model, {"x": x1})) < 1e-4


def test_saved_and_loaded(tmp_path: Any) -> None:
    """The op's attributes survive BEF: a saved model loads (without the compiler) and agrees."""
    model, feeds = _model("GRU", np.random.default_rng(9), direction="bidirectional",
                          activations=["HardSigmoid", "Softsign"] * 2, linear_before_reset=1)
    compiled = pytfrt.compile(model)
    compiled.save(str(tmp_path / "gru"))
    loaded = pytfrt.load(str(tmp_path / "gru"))
    for a, b in zip(loaded(**feeds), compiled(**feeds), strict=True):
        np.testing.assert_array_equal(a, b)
    assert max_rel_error(list(loaded(**feeds)), run_ort(model, feeds)) < 1e-4
