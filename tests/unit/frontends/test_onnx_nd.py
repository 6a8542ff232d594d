"""The ``onnx_nd`` kernels and the sequence import against ONNX Runtime, on random shapes.

ONNX's node suite checks each mode of ``Resize``, N-D pooling and ``ConvTranspose`` on one or
two fixed shapes; here Hypothesis draws ranks, sizes, windows, strides, dilations and pads,
builds one-node models and compares pytfrt with ONNX Runtime (1e-4 relative).  Sequences: one
prepared ``pytfrt.onnx_backend`` model is run on input sequences of several lengths (it is
specialised per length) and must return ORT's lists.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from onnx_zoo import feeds_of, max_rel_error, one_node_model, run_ort, run_pytfrt  # noqa: E402

SETTINGS = settings(max_examples=12, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
TOL = 1e-4


def _check(model: Any, feeds: dict[str, np.ndarray]) -> None:
    want = run_ort(model, feeds)
    got = run_pytfrt(model, feeds)
    assert max_rel_error(got, want) <= TOL


@st.composite
def _pool(draw: Any) -> tuple[str, np.ndarray, dict[str, Any]]:
    nd = draw(st.integers(1, 3))
    kernel = draw(st.lists(st.integers(1, 3), min_size=nd, max_size=nd))
    dil = draw(st.lists(st.integers(1, 2), min_size=nd, max_size=nd))
    strides = draw(st.lists(st.integers(1, 3), min_size=nd, max_size=nd))
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dil, strict=True)]
    pads = [draw(st.integers(0, max(s // 2, 0))) for s in span] * 2  # pads smaller than windows
    spatial = [draw(st.integers(sp, sp + 5)) for sp in span]
    op = draw(st.sampled_from(["MaxPool", "AveragePool", "LpPool"]))
    attrs: dict[str, Any] = {"kernel_shape": kernel, "strides": strides, "pads": pads}
    if op != "LpPool":
        attrs["dilations"] = dil
        attrs["ceil_mode"] = draw(st.integers(0, 1))
    if op == "AveragePool":
        attrs["count_include_pad"] = draw(st.integers(0, 1))
    if op == "LpPool":
        attrs["p"] = draw(st.integers(1, 3))
    x = np.random.default_rng(nd).standard_normal((2, 3, *spatial)).astype(np.float32)
    return op, x, attrs


@SETTINGS
@given(_pool())
def test_pooling_matches_onnxruntime(case: tuple[str, np.ndarray, dict[str, Any]]) -> None:
    op, x, attrs = case
    _check(one_node_model(op, {"x": x}, opset=19, **attrs), {"x": x})


@SETTINGS
@given(_pool(), st.integers(0, 1))
def test_max_pool_indices_and_unpool_match_onnxruntime(
        case: tuple[str, np.ndarray, dict[str, Any]], order: int) -> None:
    """``MaxPool``'s ``Indices`` output (either storage order) and, from them, ``MaxUnpool``
    (the pooled values put back) where the size ``MaxUnpool`` infers is the pooled input's
    (no dilations, no ``ceil_mode``, windows that tile the padded input exactly)."""
    import onnx
    from onnx import TensorProto, helper

    _, x, attrs = case
    attrs.pop("p", None)
    attrs.pop("count_include_pad", None)
    k, st_, pads = attrs["kernel_shape"], attrs["strides"], attrs["pads"]
    nd = len(k)
    tiles = all((x.shape[2 + i] + pads[i] + pads[i + nd] - k[i]) % st_[i] == 0
                for i in range(nd))
    unpool = (order == 0 and tiles and attrs.get("ceil_mode", 0) == 0
              and set(attrs.get("dilations", [])) <= {1})
    nodes = [helper.make_node("MaxPool", ["x"], ["y", "i"], storage_order=order, **attrs)]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * x.ndim),
            helper.make_tensor_value_info("i", TensorProto.INT64, [None] * x.ndim)]
    if unpool:
        nodes.append(helper.make_node("MaxUnpool", ["y", "i"], ["u"],
                                      kernel_shape=attrs["kernel_shape"],
                                      strides=attrs["strides"], pads=attrs["pads"]))
        outs.append(helper.make_tensor_value_info("u", TensorProto.FLOAT, [None] * x.ndim))
    graph = helper.make_graph(
        nodes, "pool_indices", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    want = run_ort(model, {"x": x})
    got = run_pytfrt(model, {"x": x})
    np.testing.assert_array_equal(got[1], want[1])
    assert max_rel_error(got, want) <= TOL


@st.composite
def _grid_sample(draw: Any) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    nd = draw(st.integers(2, 3))
    mode = draw(st.sampled_from(["nearest", "linear", "cubic"] if nd == 2 else
                                ["nearest", "linear"]))
    spatial = draw(st.lists(st.integers(1, 5), min_size=nd, max_size=nd))
    out = draw(st.lists(st.integers(1, 4), min_size=nd, max_size=nd))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = rng.standard_normal((2, 3, *spatial)).astype(np.float32)
    grid = rng.uniform(-1.3, 1.3, (2, *out, nd)).astype(np.float32)
    attrs = {"mode": mode, "align_corners": draw(st.integers(0, 1)),
             "padding_mode": draw(st.sampled_from(["zeros", "border", "reflection"]))}
    return x, grid, attrs


@SETTINGS
@given(_grid_sample())
def test_grid_sample_matches_onnxruntime(case: tuple[np.ndarray, np.ndarray, dict[str, Any]]
                                         ) -> None:
    """``GridSample`` on 2-D and 3-D inputs, every mode and padding mode (opset 20)."""
    x, grid, attrs = case
    _check(one_node_model("GridSample", {"x": x, "g": grid}, opset=20, **attrs),
           {"x": x, "g": grid})


@st.composite
def _deform_conv(draw: Any) -> tuple[dict[str, np.ndarray | None], dict[str, Any]]:
    group, offset_group = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    c = group * offset_group * draw(st.integers(1, 2))
    oc = group * draw(st.integers(1, 2))
    k = draw(st.lists(st.integers(1, 3), min_size=2, max_size=2))
    strides = draw(st.lists(st.integers(1, 2), min_size=2, max_size=2))
    dil = draw(st.lists(st.integers(1, 2), min_size=2, max_size=2))
    pads = draw(st.lists(st.integers(0, 1), min_size=4, max_size=4))
    hw = [draw(st.integers((k[i] - 1) * dil[i] + 1, (k[i] - 1) * dil[i] + 5)) for i in range(2)]
    out = [(hw[i] + pads[i] + pads[i + 2] - ((k[i] - 1) * dil[i] + 1)) // strides[i] + 1
           for i in range(2)]
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    n = 2
    inputs: dict[str, np.ndarray | None] = {
        "x": rng.standard_normal((n, c, *hw)).astype(np.float32),
        "w": rng.standard_normal((oc, c // group, *k)).astype(np.float32),
        # offsets up to 2.5 pixels: taps fall between pixels and past the border
        "offset": rng.uniform(-2.5, 2.5, (n, offset_group * k[0] * k[1] * 2, *out))
        .astype(np.float32),
        "b": rng.standard_normal(oc).astype(np.float32) if draw(st.booleans()) else None,
        "mask": (rng.uniform(0, 1, (n, offset_group * k[0] * k[1], *out)).astype(np.float32)
                 if draw(st.booleans()) else None),
    }
    if inputs["mask"] is None:
        inputs.pop("mask")
        if inputs["b"] is None:
            inputs.pop("b")
    attrs = {"group": group, "offset_group": offset_group, "kernel_shape": k,
             "strides": strides, "dilations": dil, "pads": pads}
    return inputs, attrs


@SETTINGS
@given(_deform_conv())
def test_deform_conv_matches_onnxruntime(
        case: tuple[dict[str, np.ndarray | None], dict[str, Any]]) -> None:
    inputs, attrs = case
    model = one_node_model("DeformConv", inputs, opset=19, **attrs)
    feeds = {k: v for k, v in inputs.items() if v is not None}
    _check(model, feeds)


@st.composite
def _tensor_scatter(draw: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    rank = draw(st.integers(2, 4))
    shape = draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    axis = draw(st.integers(1, rank - 1))
    cache = shape[axis] + draw(st.integers(0, 3))
    mode = draw(st.sampled_from(["linear", "circular"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    past_shape = list(shape)
    past_shape[axis] = cache
    inputs = {"past": rng.standard_normal(past_shape).astype(np.float32),
              "update": rng.standard_normal(shape).astype(np.float32)}
    if draw(st.booleans()):
        hi = cache - shape[axis] + 1 if mode == "linear" else 2 * cache
        inputs["w"] = rng.integers(0, hi, shape[0]).astype(np.int64)
    negative = draw(st.booleans())
    return inputs, {"axis": axis - rank if negative else axis, "mode": mode}


@SETTINGS
@given(_tensor_scatter())
def test_tensor_scatter_matches_onnxruntime(
        case: tuple[dict[str, np.ndarray], dict[str, Any]]) -> None:
    inputs, attrs = case
    model = one_node_model("TensorScatter", inputs, opset=24, **attrs)
    want = run_ort(model, inputs)
    got = run_pytfrt(model, inputs)
    np.testing.assert_array_equal(got[0], want[0])


@st.composite
def _resize(draw: Any) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    mode = draw(st.sampled_from(["nearest", "linear", "cubic"]))
    # ONNX Runtime's CPU kernel interpolates (bi)linearly/cubically on the spatial axes of
    # 4-D inputs only; nearest on any axes
    rank = draw(st.integers(3, 5)) if mode == "nearest" else 4
    shape = [draw(st.integers(2, 6)) for _ in range(rank)]
    ctm = draw(st.sampled_from(["half_pixel", "align_corners", "asymmetric",
                                "pytorch_half_pixel"]))
    axes = (sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1, max_size=rank)))
            if mode == "nearest" else [2, 3])
    # (pytorch_half_pixel to a size of 1 with antialias: ONNX Runtime departs from ONNX's
    # reference there, pytfrt follows the reference; not drawn)
    low = 2 if ctm == "pytorch_half_pixel" else 1
    sizes = np.asarray([draw(st.integers(low, 9)) for _ in axes], np.int64)
    attrs: dict[str, Any] = {"mode": mode, "coordinate_transformation_mode": ctm,
                             "axes": axes}
    if mode != "nearest":
        attrs["antialias"] = draw(st.integers(0, 1))
    if mode == "cubic":
        attrs["exclude_outside"] = draw(st.integers(0, 1))
    x = np.random.default_rng(rank).standard_normal(shape).astype(np.float32)
    return x, sizes, attrs


@SETTINGS
@given(_resize())
def test_resize_matches_onnxruntime(case: tuple[np.ndarray, np.ndarray, dict[str, Any]]
                                    ) -> None:
    x, sizes, attrs = case
    model = one_node_model("Resize", {"x": x, "roi": None, "scales": None, "sizes": sizes},
                           initializers={"sizes": sizes}, opset=19, **attrs)
    _check(model, {"x": x})


@st.composite
def _conv_t(draw: Any) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    nd = draw(st.integers(1, 3))
    group = draw(st.integers(1, 2))
    kernel = draw(st.lists(st.integers(1, 3), min_size=nd, max_size=nd))
    attrs: dict[str, Any] = {
        "strides": draw(st.lists(st.integers(1, 3), min_size=nd, max_size=nd)),
        "dilations": draw(st.lists(st.integers(1, 2), min_size=nd, max_size=nd)),
        "group": group,
    }
    if draw(st.booleans()):
        attrs["auto_pad"] = draw(st.sampled_from(["SAME_UPPER", "SAME_LOWER"]))
        # a stride past the dilated window asks for negative SAME padding: ONNX's reference
        # (and pytfrt) pad the output with zeros, ONNX Runtime clamps it to 0; not drawn
        attrs["strides"] = [min(s, (k - 1) * d + 1) for s, k, d in
                            zip(attrs["strides"], kernel, attrs["dilations"], strict=True)]
    else:
        attrs["pads"] = [draw(st.integers(0, k - 1)) for k in kernel] * 2
    rng = np.random.default_rng(nd + group)
    x = rng.standard_normal((1, 2 * group, *[draw(st.integers(1, 4)) for _ in kernel]))
    w = rng.standard_normal((2 * group, 2, *kernel))
    return x.astype(np.float32), w.astype(np.float32), attrs


@SETTINGS
@given(_conv_t())
def test_conv_transpose_matches_onnxruntime(case: tuple[np.ndarray, np.ndarray, dict[str, Any]]
                                            ) -> None:
    x, w, attrs = case
    model = one_node_model("ConvTranspose", {"x": x, "w": w}, initializers={"w": w}, opset=17,
                           **attrs)
    _check(model, {"x": x})


def test_sequence_inputs_of_several_lengths() -> None:
    """``SplitToSequence`` + ``SequenceInsert`` + ``ConcatFromSequence`` over a sequence
    input: one prepared model, run on lists of 1, 3 and 2 arrays."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from pytfrt import onnx_backend

    f32 = TensorProto.FLOAT
    seq_t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(f32, None))
    nodes = [
        helper.make_node("SplitToSequence", ["x"], ["parts"], axis=0, keepdims=1),
        helper.make_node("SequenceInsert", ["s", "x"], ["s2"]),
        helper.make_node("SequenceLength", ["s2"], ["n"]),
        helper.make_node("ConcatFromSequence", ["s2"], ["cat"], axis=1),
    ]
    graph = helper.make_graph(
        nodes, "seq",
        [helper.make_value_info("s", seq_t), helper.make_tensor_value_info("x", f32, [2, 3])],
        [helper.make_value_info("parts", seq_t), helper.make_tensor_value_info("n", 7, []),
         helper.make_tensor_value_info("cat", f32, [2, None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rep = onnx_backend.prepare(model)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    for n in (1, 3, 2):
        s = [rng.standard_normal((2, k + 1)).astype(np.float32) for k in range(n)]
        want = sess.run(None, {"s": s, "x": x})
        got = rep.run([s, x])
        assert isinstance(got[0], list) and len(got[0]) == len(want[0]) == 2
        for g, w in zip(got[0], want[0], strict=True):
            np.testing.assert_array_equal(g, w)
        assert int(got[1]) == int(want[1]) == n + 1
        np.testing.assert_allclose(got[2], want[2], rtol=1e-6)


@st.composite
def _tree_ensemble(draw: Any) -> tuple[Any, np.ndarray]:
    """A random ``TreeEnsemble`` model (opset ai.onnx.ml 5) and features with some NaNs."""
    from onnx import TensorProto, helper

    n_features = draw(st.integers(1, 4))
    n_targets = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    nodes: dict[str, list[Any]] = {k: [] for k in (
        "feat", "mode", "split", "true", "false", "tleaf", "fleaf", "miss")}
    leaves: tuple[list[int], list[float]] = ([], [])
    members: list[float] = []

    def leaf() -> int:
        leaves[0].append(int(rng.integers(0, n_targets)))
        leaves[1].append(float(np.round(rng.normal(), 3)))
        return len(leaves[0]) - 1

    def build(depth: int) -> int:
        i = len(nodes["feat"])
        for k in nodes:
            nodes[k].append(0)
        nodes["feat"][i] = int(rng.integers(0, n_features))
        nodes["mode"][i] = int(rng.integers(0, 7))
        nodes["split"][i] = float(rng.integers(-2, 3))  # whole numbers: == and sets can hit
        nodes["miss"][i] = int(rng.integers(0, 2))
        if nodes["mode"][i] == 6:
            members.extend(float(v) for v in rng.choice([-2, -1, 0, 1, 2], 2, replace=False))
            members.append(float("nan"))
        for side, flag in (("true", "tleaf"), ("false", "fleaf")):
            if depth == 0 or rng.random() < 0.3:
                nodes[side][i], nodes[flag][i] = leaf(), 1
            else:
                nodes[side][i], nodes[flag][i] = build(depth - 1), 0
        return i

    roots = [build(draw(st.integers(0, 3))) for _ in range(draw(st.integers(1, 4)))]
    attrs: dict[str, Any] = dict(
        nodes_featureids=nodes["feat"], nodes_truenodeids=nodes["true"],
        nodes_falsenodeids=nodes["false"], nodes_trueleafs=nodes["tleaf"],
        nodes_falseleafs=nodes["fleaf"], nodes_missing_value_tracks_true=nodes["miss"],
        nodes_modes=helper.make_tensor("modes", TensorProto.UINT8, [len(nodes["mode"])],
                                       nodes["mode"]),
        nodes_splits=helper.make_tensor("splits", TensorProto.FLOAT, [len(nodes["split"])],
                                        nodes["split"]),
        leaf_targetids=leaves[0],
        leaf_weights=helper.make_tensor("w", TensorProto.FLOAT, [len(leaves[1])], leaves[1]),
        tree_roots=roots, n_targets=n_targets,
        aggregate_function=draw(st.integers(0, 3)), post_transform=draw(st.integers(0, 3)))
    if members:
        attrs["membership_values"] = helper.make_tensor("m", TensorProto.FLOAT, [len(members)],
                                                        members)
    x = rng.integers(-2, 3, (5, n_features)).astype(np.float32)
    x[rng.random(x.shape) < 0.15] = np.nan
    node = helper.make_node("TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", **attrs)
    graph = helper.make_graph(
        [node], "trees", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("ai.onnx.ml", 5)])
    model.ir_version = 10
    return model, x


@SETTINGS
@given(_tree_ensemble())
def test_tree_ensemble_matches_onnxruntime(case: tuple[Any, np.ndarray]) -> None:
    """``ai.onnx.ml`` ``TreeEnsemble``: random trees with every comparison mode (membership
    sets included), NaN features taking their node's missing-value branch, every aggregation
    and the post transforms.  ONNX Runtime's post transforms differ from ONNX's definition
    (it reads 1 as logistic and 2 as softmax, and transforms no single-target scores): for a
    post transform the oracle is ONNX Runtime's untransformed scores with ONNX's transform
    (1 SOFTMAX, 2 LOGISTIC, 3 SOFTMAX_ZERO) applied here."""
    model, x = case
    attr = next(a for a in model.graph.node[0].attribute if a.name == "post_transform")
    post = attr.i
    got = run_pytfrt(model, {"x": x})[0]
    attr.i = 0
    raw = run_ort(model, {"x": x})[0].astype(np.float64)
    if post == 2:
        want = 1 / (1 + np.exp(-raw))
    elif post in (1, 3):
        keep = (raw != 0) if post == 3 else np.ones(raw.shape, bool)
        top = np.where(keep, raw, -np.inf).max(axis=1, keepdims=True)
        e = np.where(keep, np.exp(raw - np.where(np.isfinite(top), top, 0)), 0)
        total = e.sum(axis=1, keepdims=True)
        want = e / np.where(total > 0, total, 1)
    else:
        want = raw
    assert max_rel_error([got], [want.astype(np.float32)]) <= TOL


@st.composite
def _dft(draw: Any) -> tuple[dict[str, np.ndarray], dict[str, Any], dict[str, np.ndarray]]:
    rank = draw(st.integers(2, 3))  # signal axes, then the complex axis
    shape = draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank))
    inverse, onesided = draw(st.booleans()), draw(st.booleans())
    if inverse and onesided:
        onesided = False  # ONNX Runtime's CPU kernel refuses an inverse one-sided DFT
    complex_in = inverse or (not onesided and draw(st.booleans()))  # one-sided: real input
    axis = draw(st.integers(0, rank - 1))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = rng.standard_normal((*shape, 2 if complex_in else 1)).astype(np.float32)
    consts: dict[str, np.ndarray] = {"axis": np.asarray(axis - rank - 1 if draw(st.booleans())
                                                         else axis, np.int64)}
    inputs: dict[str, Any] = {"x": x, "n": None, "axis": consts["axis"]}
    if draw(st.booleans()):
        inputs["n"] = consts["n"] = np.asarray(draw(st.integers(1, 8)), np.int64)
    return inputs, {"inverse": int(inverse), "onesided": int(onesided)}, consts


@SETTINGS
@given(_dft())
def test_dft_matches_onnxruntime(
        case: tuple[dict[str, np.ndarray], dict[str, Any], dict[str, np.ndarray]]) -> None:
    """``DFT`` (opset 20): real and complex signals, every signal axis (negative too), forward
    (one-sided or not) and inverse, with and without ``dft_length`` (cutting or padding)."""
    inputs, attrs, consts = case
    model = one_node_model("DFT", inputs, initializers=consts, opset=20, **attrs)
    _check(model, {"x": inputs["x"]})


@st.composite
def _stft(draw: Any) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], int]:
    length = draw(st.integers(4, 24))
    frame = draw(st.integers(2, length))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    sig = rng.standard_normal((2, length, draw(st.sampled_from([1, 2])))).astype(np.float32)
    consts = {"step": np.asarray(draw(st.integers(1, 4)), np.int64)}
    inputs: dict[str, Any] = {"sig": sig, "step": consts["step"]}
    if draw(st.booleans()):
        inputs["window"] = np.hanning(frame).astype(np.float32)
    else:
        inputs["window"] = None
        inputs["frame"] = consts["frame"] = np.asarray(frame, np.int64)
    onesided = int(sig.shape[-1] == 1 and draw(st.booleans()))
    return inputs, consts, onesided


@SETTINGS
@given(_stft())
def test_stft_matches_onnxruntime(case: tuple[dict[str, np.ndarray], dict[str, np.ndarray], int]
                                  ) -> None:
    inputs, consts, onesided = case
    model = one_node_model("STFT", inputs, initializers=consts, opset=17, onesided=onesided)
    _check(model, feeds_of(model, inputs))


@st.composite
def _roi_align(draw: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    h, w = draw(st.integers(2, 8)), draw(st.integers(2, 8))
    x = rng.standard_normal((2, 3, h, w)).astype(np.float32)
    r = draw(st.integers(1, 4))
    p1 = rng.uniform(-1, [w, h], (r, 2))
    p2 = p1 + rng.uniform(0, 4, (r, 2))
    rois = np.concatenate([p1, p2], axis=1).astype(np.float32)
    attrs = {"mode": draw(st.sampled_from(["avg", "max"])),
             "output_height": draw(st.integers(1, 3)), "output_width": draw(st.integers(1, 3)),
             "sampling_ratio": draw(st.integers(0, 2)),
             "spatial_scale": draw(st.sampled_from([1.0, 0.5])),
             "coordinate_transformation_mode": draw(st.sampled_from(["half_pixel",
                                                                      "output_half_pixel"]))}
    return {"x": x, "rois": rois, "i": rng.integers(0, 2, r).astype(np.int64)}, attrs


@SETTINGS
@given(_roi_align())
def test_roi_align_matches_onnxruntime(case: tuple[dict[str, np.ndarray], dict[str, Any]]
                                       ) -> None:
    """``RoiAlign`` (opset 16): regions partly outside the image, both modes, adaptive and
    fixed sampling, both coordinate conventions."""
    inputs, attrs = case
    _check(one_node_model("RoiAlign", inputs, opset=16, **attrs), inputs)


def test_bad_operands_are_clear_errors() -> None:
    """Run-time operands the new kernels cannot take end in a ``ModelError`` naming the op
    and the problem (never a wrong answer or a NumPy traceback)."""
    from pytfrt.model import ModelError

    f32 = np.float32
    cases = [
        ("TensorScatter", {"past": np.zeros((2, 4, 3), f32), "update": np.ones((2, 2, 3), f32),
                           "w": np.array([0, 3], np.int64)}, {"axis": 1}, 24,
         "tensor_scatter: rows 3..4 outside a cache of 4"),
        ("MaxUnpool", {"x": np.ones((1, 1, 2, 2), f32),
                       "i": np.array([0, 1, 2, 99], np.int64).reshape(1, 1, 2, 2)},
         {"kernel_shape": [2, 2], "strides": [2, 2]}, 17, "max_unpool: indices out of range"),
        ("RoiAlign", {"x": np.ones((1, 1, 4, 4), f32), "rois": np.zeros((1, 4), f32),
                      "i": np.array([3], np.int64)}, {}, 16,
         "roi_align: a batch index outside"),
    ]
    for op, inputs, attrs, opset, message in cases:
        with pytest.raises(ModelError, match=message):
            run_pytfrt(one_node_model(op, inputs, opset=opset, **attrs), inputs)
