"""``pytfrt.quantize``: calibration, the quantization parameters, QDQ insertion and the errors.

The oracle for a quantized model is an independent NumPy re-implementation of the same
arithmetic (ONNX QuantizeLinear/DequantizeLinear: round half to even, saturate) over a NumPy
float forward pass of the same small network; the calibration helpers are checked against
NumPy's percentiles and known distributions.  The digits-CNN accuracy check (Keras) is in
``tests/unit/frontends/test_quantize_digits.py``.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pytfrt
from pytfrt.compiler.builder import GraphBuilder, GraphModule
from pytfrt.compiler.quantize_graph import activation_params, weight_params
from pytfrt.quantization import QuantizeError, entropy_threshold, percentile_range

HAVE_QOPS = True
try:
    from pytfrt.compiler.ops import get_opdef

    get_opdef("quantize_linear")
except Exception:  # noqa: BLE001  (the quantization ops are not in this tree yet)
    HAVE_QOPS = False
needs_qops = pytest.mark.skipif(not HAVE_QOPS, reason="the tg quantization ops are not here")

RNG = np.random.default_rng(7)
W_CONV = RNG.normal(0, 0.4, (3, 3, 2, 4)).astype(np.float32)
B_CONV = RNG.normal(0, 0.1, (4,)).astype(np.float32)
W_FC = RNG.normal(0, 0.3, (36, 5)).astype(np.float32)
B_FC = RNG.normal(0, 0.1, (5,)).astype(np.float32)


def cnn() -> GraphModule:
    """conv 3x3 (+bias, relu) -> max pool 2x2 -> flatten -> dense: on [N, 6, 6, 2]."""
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (None, 6, 6, 2), "f32")])
    (x,) = fn.arguments
    y = fn.op("conv2d", [x, fn.constant(W_CONV, name="conv/kernel")], layout="NHWC",
              strides=[1, 1], pads=[1, 1, 1, 1], loc="conv")
    y = fn.op("relu", [fn.op("add", [y, fn.constant(B_CONV, name="conv/bias")])])
    y = fn.op("max_pool2d", [y], layout="NHWC", ksize=[2, 2], strides=[2, 2])
    y = fn.op("reshape", [y], shape=[-1, 36])
    y = fn.op("matmul", [y, fn.constant(W_FC, name="fc/kernel")], loc="fc")
    y = fn.op("add", [y, fn.constant(B_FC, name="fc/bias")])
    fn.returns([y], names=["logits"])
    return gb.finish()


def mlp(transpose_b: bool = False, gelu: bool = False) -> GraphModule:
    """x @ w + b, x [N, 16] or [N, 3, 16] with ``transpose_b`` (a transformer's projection in
    miniature), then a GELU with ``gelu`` (a transformer's feed-forward layer)."""
    gb = GraphBuilder()
    shape = (None, 3, 16) if transpose_b else (None, 16)
    fn = gb.function("main", inputs=[("x", shape, "f32")])
    (x,) = fn.arguments
    w = W_FC[:16, :].T.copy() if transpose_b else W_FC[:16, :]
    y = fn.op("matmul", [x, fn.constant(w, name="proj/kernel")], transpose_b=transpose_b)
    y = fn.op("add", [y, fn.constant(B_FC, name="proj/bias")])
    fn.returns([fn.op("gelu", [y], approximate=False) if gelu else y])
    return gb.finish()


def np_gelu(v: np.ndarray) -> np.ndarray:
    """Exact GELU in float64 (``math.erf``)."""
    erf = np.vectorize(math.erf)
    return 0.5 * v * (1.0 + erf(v / math.sqrt(2.0)))


# -- the NumPy oracle -------------------------------------------------------------------------

def np_conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """NHWC x HWIO, stride 1, pads 1 (float64)."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(1, 2))
    return np.einsum("nhwcij,ijco->nhwo", win, w.astype(np.float64))


def np_forward(x: np.ndarray, q: Any = None) -> tuple[np.ndarray, list[np.ndarray]]:
    """The CNN in NumPy; ``q(name, t)`` is applied to each quantized tensor (None: float).
    Returns the logits and the float tensors that calibration observes."""
    q = q or (lambda name, t: t)
    x0 = q("x", x.astype(np.float64))
    c = np.maximum(np_conv(x0, q("w_conv", W_CONV)) + B_CONV, 0.0)
    c = q("conv", c)
    n = c.shape[0]
    p = c.reshape(n, 3, 2, 3, 2, 4).max(axis=(2, 4))
    p = q("pool", p)
    f = q("flat", p.reshape(n, 36))
    y = q("fc", f @ q("w_fc", W_FC) + B_FC)
    return y, [x0, c, f, y]


def np_qdq(t: np.ndarray, scale: float, zp: int) -> np.ndarray:
    """ONNX QuantizeLinear (u8, round half to even, saturate) then DequantizeLinear."""
    s = np.float64(np.float32(scale))
    return (np.clip(np.rint(t / s) + zp, 0, 255) - zp) * s


def np_weight_qdq(w: np.ndarray, axis: int) -> np.ndarray:
    """s8 symmetric per-channel quantization, dequantized."""
    others = tuple(d for d in range(w.ndim) if d != axis)
    amax = np.max(np.abs(w), axis=others, keepdims=True)
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32).astype(np.float64)
    return np.clip(np.rint(w / scale), -127, 127) * scale


def u8_params(lo: float, hi: float) -> tuple[float, int]:
    """The oracle's u8 parameters: the range widened to 0, 255 steps."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = float(np.float32((hi - lo) / 255.0))
    return scale, int(np.clip(np.rint(-lo / scale), 0, 255))


def calib_batches(n: int = 4) -> list[np.ndarray]:
    return [RNG.normal(0, 1, (3, 6, 6, 2)).astype(np.float32) for _ in range(n)]


# -- parameters ---------------------------------------------------------------------------------

@given(lo=st.floats(-1e3, 1e3), width=st.floats(1e-3, 1e3))
def test_activation_params_represent_zero_and_the_range(lo: float, width: float) -> None:
    hi = lo + width
    scale, zp = activation_params(lo, hi)
    assert scale.dtype == np.float32 and zp.dtype == np.uint8
    lo0, hi0 = min(lo, 0.0), max(hi, 0.0)
    # 0 is exactly representable (ONNX's requirement for zero padding)
    assert np_qdq(np.array([0.0]), float(scale), int(zp))[0] == 0.0
    # every value of the range comes back within half a step (plus the zero point's rounding)
    xs = np.linspace(lo0, hi0, 101)
    err = np.abs(np_qdq(xs, float(scale), int(zp)) - xs)
    assert err.max() <= 1.01 * float(scale)


def test_activation_params_of_an_empty_range() -> None:
    assert activation_params(0.0, 0.0) == (1.0, 0)
    assert activation_params(float("nan"), float("nan")) == (1.0, 0)


@pytest.mark.parametrize("axis", [None, 0, 3])
def test_weight_params_are_symmetric_s8_per_channel(axis: int | None) -> None:
    w = RNG.normal(0, 1, (3, 3, 2, 4)).astype(np.float32)
    w[..., 1] = 0.0  # an all-zero output channel
    q, scale = weight_params(w, axis)
    assert q.dtype == np.int8 and scale.dtype == np.float32
    assert q.min() >= -127
    if axis is None:
        assert scale.shape == () and np.abs(q).max() == 127
        back = q * scale
    else:
        assert scale.shape == (w.shape[axis],)
        shape = [1] * 4
        shape[axis] = -1
        back = q * scale.reshape(shape)
        others = tuple(d for d in range(4) if d != axis)
        amax = np.abs(q).max(axis=others)
        assert np.all((amax == 127) | (np.abs(w).max(axis=others) == 0))
    if axis == 3:
        assert scale[1] == 1.0 and not q[..., 1].any()
        np.testing.assert_allclose(back, np_weight_qdq(w, 3), rtol=0, atol=1e-6)
    assert np.all(np.abs(back - w) <= 0.5 * np.max(scale) + 1e-7)


# -- calibration helpers --------------------------------------------------------------------

def test_percentile_range_is_the_tightest_bin_range_keeping_the_percentile() -> None:
    x = RNG.standard_t(3, 200_000)
    lo, hi = float(x.min()), float(x.max())
    hist = np.histogram(x, 2048, (lo, hi))[0]
    a, b = percentile_range(hist, lo, hi, 99.9)
    width = (hi - lo) / 2048
    eps = width * 1e-6
    # at most 0.1 % of the samples beyond each end, and one bin less would cut more
    assert np.mean(x > b + eps) <= 0.001 < np.mean(x > b - width + eps)
    assert np.mean(x < a - eps) <= 0.001 < np.mean(x < a + width - eps)
    assert abs(b - np.percentile(x, 99.9)) < 0.05 * (hi - lo)
    assert percentile_range(hist, lo, hi, 100.0) == pytest.approx((lo, hi), abs=width)


def test_entropy_threshold_clips_outliers_and_keeps_uniform_data() -> None:
    x = np.abs(RNG.normal(0, 1, 200_000))
    x[:3] = 60.0  # three outliers set the maximum
    hist = np.histogram(x, 2048, (0, 60.0))[0]
    t = entropy_threshold(hist, 60.0)
    assert 2.5 < t < 10.0  # the Gaussian body is kept, the outliers clipped
    u = RNG.uniform(0, 1, 200_000)
    t = entropy_threshold(np.histogram(u, 2048, (0, 1.0))[0], 1.0, 256)
    assert t > 0.9  # nothing to gain from clipping a uniform distribution
    relu = np.maximum(RNG.normal(0, 1, 200_000), 0.0)  # half exact zeros
    amax = float(relu.max())
    t = entropy_threshold(np.histogram(relu, 2048, (0, amax))[0], amax, 256)
    assert 2.5 < t <= amax


# -- errors ---------------------------------------------------------------------------------

def test_bad_arguments_are_clear_errors() -> None:
    gm = cnn()
    with pytest.raises(QuantizeError, match="unknown method 'int4'"):
        pytfrt.quantize(gm, calib_batches(), method="int4")
    with pytest.raises(QuantizeError, match="unknown calibration 'mse'"):
        pytfrt.quantize(gm, calib_batches(), calibration="mse")
    with pytest.raises(QuantizeError, match="calibration_data is empty"):
        pytfrt.quantize(gm, [])
    with pytest.raises(QuantizeError, match="needs calibration_data"):
        pytfrt.quantize(gm, None)
    with pytest.raises(QuantizeError, match=r"wrap a single batch in a list"):
        pytfrt.quantize(gm, calib_batches()[0])
    with pytest.raises(QuantizeError, match="percentile"):
        pytfrt.quantize(gm, calib_batches(), calibration="percentile", percentile=20)
    assert issubclass(QuantizeError, ValueError)


@needs_qops
def test_calibration_batches_in_every_call_format() -> None:
    batches = calib_batches(3)
    x = batches[0]
    want = pytfrt.quantize(cnn(), batches)(x)
    for fmt in (lambda b: (b,), lambda b: {"x": b}, lambda b: b.tolist()):
        np.testing.assert_array_equal(pytfrt.quantize(cnn(), [fmt(b) for b in batches])(x),
                                      want)


def test_a_bad_calibration_batch_names_its_index() -> None:
    batches = calib_batches(2) + [np.zeros((3, 5, 5, 2), np.float32)]
    with pytest.raises(QuantizeError, match=r"calibration batch 2: input 0 \('x'\) must have "
                                            r"shape \[\?, 6, 6, 2\]"):
        pytfrt.quantize(cnn(), batches)


def test_a_loaded_model_cannot_be_quantized(tmp_path: Any) -> None:
    pytfrt.compile(mlp()).save(tmp_path / "m")
    loaded = pytfrt.load(tmp_path / "m")
    assert loaded.source is None
    with pytest.raises(QuantizeError, match="no source model"):
        pytfrt.quantize(loaded, [np.ones((2, 16), np.float32)])


def test_nothing_to_quantize_warns_and_returns_the_float_model() -> None:
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (None, 4), "f32")])
    (x,) = fn.arguments
    fn.returns([fn.op("tanh", [x])])
    x = RNG.normal(0, 1, (3, 4)).astype(np.float32)
    with pytest.warns(UserWarning, match="no conv2d or matmul"):
        m = pytfrt.quantize(gb.finish(), [x])
    np.testing.assert_allclose(m(x), np.tanh(x), rtol=1e-6)
    with pytest.warns(UserWarning, match="no conv2d"):  # everything excluded
        m = pytfrt.quantize(cnn(), calib_batches(), exclude=("conv2d", "fc"))
    x = calib_batches(1)[0]
    np.testing.assert_allclose(m(x), np_forward(x)[0], rtol=1e-4, atol=1e-5)


# -- quantized models against the oracle ----------------------------------------------------

def expected_static(x: np.ndarray, batches: list[np.ndarray]) -> tuple[np.ndarray, float]:
    """The oracle's quantized logits and their scale."""
    obs = [np_forward(b)[1] for b in batches]
    ranges = {name: (min(o[i].min() for o in obs), max(o[i].max() for o in obs))
              for i, name in enumerate(("x", "conv", "flat", "fc"))}
    params = {k: u8_params(*v) for k, v in ranges.items()}

    def q(name: str, t: np.ndarray) -> np.ndarray:
        if name == "w_conv":
            return np_weight_qdq(t, 3)
        if name == "w_fc":
            return np_weight_qdq(t, 1)
        if name == "pool":  # the max of dequantized values (pytfrt takes it of the u8 codes)
            return t
        return np_qdq(t, *params[name])

    return np_forward(x, q)[0], params["fc"][0]


@needs_qops
def test_static_quantization_matches_the_numpy_oracle(tmp_path: Any) -> None:
    batches = calib_batches()
    m = pytfrt.quantize(cnn(), batches)
    x = RNG.normal(0, 1, (5, 6, 6, 2)).astype(np.float32)
    got = m(x)
    want, scale = expected_static(x, batches)
    # within one output step (an input exactly between two steps may round either way)
    assert np.max(np.abs(got - want)) <= scale * 1.01
    assert np.mean(np.abs(got - want) < 1e-4) > 0.9
    # the logits are on the output's quantization grid: they were quantized
    steps = got / scale
    assert np.max(np.abs(steps - np.rint(steps))) < 1e-2
    # and close to float on data inside the calibrated ranges (new data may saturate)
    ref = np_forward(batches[0])[0]
    assert np.max(np.abs(m(batches[0]) - ref)) < 0.05 * np.max(np.abs(ref))
    # saves and loads like any other model
    m.save(tmp_path / "q")
    np.testing.assert_array_equal(pytfrt.load(tmp_path / "q")(x), got)


@needs_qops
def test_a_compiled_model_is_quantized_from_its_source() -> None:
    gm = cnn()
    fm = pytfrt.compile(gm)
    batches = calib_batches()
    x = batches[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = pytfrt.quantize(fm, batches)(x)
    b = pytfrt.quantize(cnn(), batches)(x)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(fm(x), np_forward(x)[0], rtol=1e-4, atol=1e-5)  # untouched


@needs_qops
def test_exclude_keeps_an_op_float() -> None:
    batches = calib_batches()
    x = batches[1]
    full = pytfrt.quantize(cnn(), batches)(x)
    for exclude in (("fc",), ("fc/kernel",), ("matmul",)):
        part = pytfrt.quantize(cnn(), batches, exclude=exclude)(x)
        _, scale = expected_static(x, batches)
        steps = part / scale
        assert np.max(np.abs(steps - np.rint(steps))) > 0.05, exclude  # logits not quantized
        assert not np.array_equal(part, full)


@needs_qops
@pytest.mark.parametrize("calibration", ["percentile", "entropy"])
def test_histogram_calibrations_stay_close_to_float(calibration: str) -> None:
    batches = calib_batches()
    x = batches[2]
    got = pytfrt.quantize(cnn(), batches, calibration=calibration)(x)
    ref = np_forward(x)[0]
    assert np.max(np.abs(got - ref)) < 0.1 * np.max(np.abs(ref))


@needs_qops
@pytest.mark.parametrize(("per_channel", "transpose_b", "gelu"), [
    (True, False, False), (False, False, False), (True, True, False), (True, True, True)])
def test_dynamic_quantization_matches_the_numpy_oracle(per_channel: bool, transpose_b: bool,
                                                       gelu: bool, tmp_path: Any) -> None:
    m = pytfrt.quantize(mlp(transpose_b, gelu), None, method="dynamic",
                        per_channel=per_channel)
    kernels = {k.name for f in m.program.functions for k in f.kernels}
    assert "tg.qmatmul_dynamic" in kernels and "tg.matmul" not in kernels
    assert "tg.gelu" not in kernels  # the GELU runs in the product's epilogue
    w = W_FC[:16, :]
    shape = (3, 16) if transpose_b else (16,)
    for x in (RNG.normal(0, 1, (4, *shape)), RNG.uniform(2, 3, (1, *shape))):
        x = x.astype(np.float32)
        lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
        scale, zp = u8_params(lo, hi)
        wq = np_weight_qdq(w, 1) if per_channel else (
            np.clip(np.rint(w / (np.float32(np.abs(w).max() / 127))), -127, 127)
            * np.float64(np.float32(np.abs(w).max() / 127)))
        want = np_qdq(x.astype(np.float64), scale, zp) @ wq + B_FC
        flt = x @ w + B_FC
        if gelu:
            want, flt = np_gelu(want), np_gelu(flt)
        np.testing.assert_allclose(m(x), want, rtol=1e-4, atol=1e-4)
        assert np.max(np.abs(m(x) - flt)) > 1e-5  # it did quantize
    m.save(tmp_path / "d")
    np.testing.assert_array_equal(pytfrt.load(tmp_path / "d")(x), m(x))


# -- the qmatmul_dynamic kernel -----------------------------------------------------------------

@needs_qops
@given(m=st.integers(1, 9), k=st.integers(1, 40), n=st.integers(1, 24),
       kind=st.sampled_from(["normal", "positive", "negative", "zeros", "wide"]),
       seed=st.integers(0, 2**16), with_bias=st.booleans(),
       act=st.sampled_from(["none", "gelu", "relu"]))
def test_qmatmul_dynamic_kernel_matches_the_numpy_oracle(m: int, k: int, n: int, kind: str,
                                                         seed: int, with_bias: bool,
                                                         act: str) -> None:
    from pytfrt.backends.cpu.quant_dynamic import DynamicPlan, qmatmul_dynamic

    rng = np.random.default_rng(seed)
    x = {"normal": rng.normal(0, 1, (m, k)), "positive": rng.uniform(1, 2, (m, k)),
         "negative": -rng.uniform(0.5, 3, (m, k)), "zeros": np.zeros((m, k)),
         "wide": rng.normal(0, 1, (m, k)) * 10.0 ** rng.integers(-3, 4)}[kind]
    x = x.astype(np.float32)
    w = rng.integers(-127, 128, (k, n)).astype(np.int8)
    ws = rng.uniform(1e-3, 1e-1, n).astype(np.float32)
    bias = rng.normal(0, 1, n).astype(np.float32) if with_bias else None
    plan = DynamicPlan(w, ws, bias, act)
    # the oracle: ONNX DynamicQuantizeLinear, dequantize, float64 product
    lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    scale = np.float32((np.float32(hi) - np.float32(lo)) / np.float32(255))
    if scale == 0:
        scale, zp = np.float32(1), 0
    else:
        zp = int(np.clip(np.rint(-np.float32(lo) / scale), 0, 255))
    xq = np.clip(np.rint(x / scale) + zp, 0, 255)
    want = ((xq - zp) * np.float64(scale)) @ (w.astype(np.float64) * ws)
    if bias is not None:
        want += bias
    want = {"none": want, "gelu": np_gelu(want), "relu": np.maximum(want, 0.0)}[act]
    for use_dnnl in (True, False):
        if not use_dnnl:
            plan.dnnl = None
        got = qmatmul_dynamic(x, plan)
        assert got.dtype == np.float32 and got.shape == (m, n)
        np.testing.assert_allclose(got, want, rtol=1e-5,
                                   atol=1e-5 * max(1.0, float(np.abs(want).max())))


@needs_qops
def test_a_dynamic_model_refuses_nan_inputs() -> None:
    m = pytfrt.quantize(mlp(), None, method="dynamic")
    x = np.ones((2, 16), np.float32)
    x[1, 3] = np.nan
    with pytest.raises(pytfrt.ModelError, match="NaN or infinity"):
        m(x)


@needs_qops
def test_a_max_pool_between_convolutions_runs_on_the_codes() -> None:
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (None, 6, 6, 2), "f32")])
    (x,) = fn.arguments
    y = fn.op("conv2d", [x, fn.constant(W_CONV, name="c1")], layout="NHWC", pads=[1, 1, 1, 1])
    y = fn.op("max_pool2d", [fn.op("relu", [y])], layout="NHWC", ksize=[2, 2], strides=[2, 2])
    w2 = RNG.normal(0, 0.3, (1, 1, 4, 3)).astype(np.float32)
    fn.returns([fn.op("conv2d", [y, fn.constant(w2, name="c2")], layout="NHWC")])
    batches = calib_batches()
    m = pytfrt.quantize(gb.finish(), batches)
    kernels = [k.name for f in m.program.functions if f.name == "main" for k in f.kernels]
    # the input's quantize and the result's dequantize only: the pool reads and writes codes
    assert kernels.count("tg.quantize_linear") == 1, kernels
    assert kernels.count("tg.dequantize_linear") == 1, kernels
    x0 = batches[0]
    conv = np.maximum(np_conv(x0, W_CONV), 0.0)
    ref = np.einsum("nhwc,co->nhwo", conv.reshape(3, 3, 2, 3, 2, 4).max(axis=(2, 4)), w2[0, 0])
    assert np.max(np.abs(m(x0) - ref)) < 0.05 * np.max(np.abs(ref))
