"""``pytfrt.quantize``: a float model -> an int8 :class:`~pytfrt.model.CompiledModel`.

(The module is ``pytfrt.quantization``: a module named ``quantize`` would, once imported,
shadow the function ``pytfrt.quantize`` as an attribute of the package.)

::

    qmodel = pytfrt.quantize(keras_model, [x0, x1, x2])             # static, min/max ranges
    qmodel = pytfrt.quantize("bert.onnx", None, method="dynamic")   # weights only, per call
    qmodel.save("dir"); pytfrt.load("dir")                          # like any CompiledModel

What it does (``docs/quantization.md`` is the user's view):

1. The model's graph (the front end, or the source a :class:`CompiledModel` was compiled from)
   goes through the float passes that change which weights and layouts the kernels see
   (:data:`PRE_PASSES`: batch-norm folding, NHWC layout, pad folding).
2. The *quantizable* ops are found in ``@main`` (``pytfrt.compiler.quantize_graph.targets``):
   ``conv2d`` and ``matmul`` with a constant float32 weight, each with the tensor it reads and
   the tensor its int8 kernel will write -- its result, or the end of the bias-add / ReLU chain
   after it.  Ops named in ``exclude`` (a source node name, an op kind such as ``"matmul"``, or
   a weight name) stay float.
3. ``method="static"``: the graph, with every such tensor added as an extra output, runs over
   ``calibration_data``; each tensor's range is its min/max, a percentile of its values
   (``"percentile"``, ``percentile=99.99``), or the threshold minimising the KL divergence
   between the histogram of ``|t|`` and that histogram quantized to 128 levels, 256 for a
   tensor without negative values (``"entropy"``, TensorRT's method).  Every such tensor ``t``
   gets a ``quantize_linear``/``dequantize_linear`` pair (u8, asymmetric: ``scale = (max -
   min) / 255`` over the range widened to hold 0, zero point ``round(-min / scale)``) that all
   its users read.  ``method="dynamic"``: a matmul's input is quantized per call
   (``dynamic_quantize_linear``, u8), its output stays float; no calibration.
4. Weights become s8 constants, symmetric (zero point 0, ``scale = max|w| / 127``), one scale per
   output channel (``per_channel=True``: the filter's last axis for HWIO and ``[K, N]`` weights,
   the first for OIHW and transposed ``[N, K]`` weights) or one per tensor, read through a
   ``dequantize_linear``.
5. The result is compiled with the default pipeline, whose quantization pass
   (``-tg-fold-quant``) folds each DQ -> conv/matmul [-> bias] [-> relu] -> Q into one int8
   kernel; a max pool of a quantized tensor runs on its u8 codes; the float ops between them
   (average pooling, softmax...) read the dequantized values.

Errors: an unknown ``method``/``calibration``, no calibration batches for ``"static"``, or a
batch the model cannot take (wrong count, name, dtype or shape) raise ``ValueError``
(:class:`QuantizeError`, the batch's index in the message); a loaded model (no source) raises
:class:`QuantizeError`.  A model with nothing to quantize warns (``UserWarning``) and returns
the float model.  Thread-safety: each call builds its own graph and models; the source model
is only read.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pytfrt.support.errors import PytfrtError

if TYPE_CHECKING:
    from pytfrt.compiler.builder import GraphModule
    from pytfrt.model import CompiledModel

__all__ = ["CALIBRATIONS", "METHODS", "PRE_PASSES", "QuantizeError", "entropy_threshold",
           "percentile_range", "quantize"]

METHODS = ("static", "dynamic")
CALIBRATIONS = ("minmax", "percentile", "entropy")
PRE_PASSES = ("tg-infer-shapes", "tg-constant-fold", "tg-dce", "tg-fold-batch-norm",
              "tg-layout-nhwc", "tg-fold-pad", "tg-dce")
"""The float passes run before quantizing: batch norms folded into the weights quantized,
NHWC layout, pads folded into convolutions (not the epilogue fusion: the quantization pass
matches the unfused bias/ReLU chain)."""

HIST_BINS = 2048
ENTROPY_LEVELS = 128
MIN_ENTROPY_SAMPLES = 16 * HIST_BINS
"""Below this many calibration values a tensor keeps its min/max range under ``"entropy"``."""


class QuantizeError(PytfrtError, ValueError):
    """Bad arguments to :func:`quantize`, or calibration data the model cannot take."""


def quantize(model: Any, calibration_data: Iterable[Any] | None = None, *,
             method: str = "static", per_channel: bool = True, exclude: Iterable[str] = (),
             calibration: str = "minmax", percentile: float = 99.99,
             input_signature: Any = None, host: Any = None) -> CompiledModel:
    """Quantize ``model`` to int8 (see the module docstring) and compile it.

    Args:
        model: what :func:`pytfrt.compile` takes, or a :class:`CompiledModel` that
            ``pytfrt.compile`` made (its source is compiled again).
        calibration_data: an iterable of input batches, each in the model's call format: an
            array (one input), a tuple of arrays (positional; a list too when it has one
            entry per input of a model of several) or a dict (by name).
            Required for ``"static"``; ignored for ``"dynamic"``.
        method: ``"static"`` (activation ranges from calibration) or ``"dynamic"``.
        per_channel: one weight scale per output channel (else one per tensor).
        exclude: ops to keep float: source node names, op kinds (``"conv2d"``...) or weight
            names.
        calibration: ``"minmax"``, ``"percentile"`` or ``"entropy"``.
        percentile: the percentile kept by ``"percentile"`` (both tails are cut).
        input_signature: passed to the front end (as for ``pytfrt.compile``).
        host: the HostContext (or work-queue type) the result runs on; default: the
            CompiledModel's own host, else ``pytfrt.model.default_host()``.

    Raises:
        QuantizeError: bad arguments or calibration data (a ``ValueError``).
        GraphError / UnsupportedOpError: the model cannot be compiled.
    """
    from pytfrt.compiler import quantize_graph as qg
    from pytfrt.compiler.api import compile_module
    from pytfrt.compiler.passes import run_passes

    if method not in METHODS:
        raise QuantizeError(f"unknown method {method!r}: expected one of {', '.join(METHODS)}")
    if calibration not in CALIBRATIONS:
        raise QuantizeError(f"unknown calibration {calibration!r}: expected one of "
                            f"{', '.join(CALIBRATIONS)}")
    if not 50.0 < percentile <= 100.0:
        raise QuantizeError(f"percentile must be in (50, 100], got {percentile}")
    if isinstance(exclude, str):
        exclude = (exclude,)
    batches: list[Any] = []
    if method == "static":
        if calibration_data is None:
            raise QuantizeError("static quantization needs calibration_data: an iterable of "
                                "input batches (or use method='dynamic')")
        if isinstance(calibration_data, np.ndarray | dict):
            raise QuantizeError("calibration_data is an iterable of batches: wrap a single "
                                "batch in a list ([batch])")
        batches = list(calibration_data)
        if not batches:
            raise QuantizeError("calibration_data is empty: give at least one input batch")
    gm, host = _source(model, input_signature, host)
    gm = run_passes(gm, PRE_PASSES)
    found = qg.targets(gm, frozenset(exclude))
    if method == "dynamic":
        found = [t for t in found if t.op.name == "tg.matmul"]
    if not found:
        warnings.warn("pytfrt.quantize: the model has no conv2d or matmul on float32 with "
                      "constant weights to quantize; returning it in float32",
                      UserWarning, stacklevel=2)
        return compile_module(gm, host=host)
    if method == "static":
        values = qg.activations(gm, found)
        ranges = _calibrate(gm, values, batches, calibration, percentile, host)
        qg.insert_static(gm, found, dict(zip(values, ranges, strict=True)), per_channel)
    else:
        qg.insert_dynamic(gm, found, per_channel)
    return compile_module(gm, host=host)


# -- the graph --------------------------------------------------------------------------------

def _source(model: Any, input_signature: Any, host: Any) -> tuple[GraphModule, Any]:
    """The graph module to quantize (never the caller's own object) and the host to run on."""
    from pytfrt.compiler.api import to_graph
    from pytfrt.compiler.quantize_graph import own
    from pytfrt.model import CompiledModel

    if isinstance(model, CompiledModel):
        source = model.source
        if source is None:
            raise QuantizeError("this CompiledModel has no source model (it was loaded from "
                                "disk): quantize the source model (what was passed to "
                                "pytfrt.compile) instead")
        obj, sig, key = source
        return own(to_graph(obj, sig, signature=key), obj), (
            host if host is not None else model.host)
    return own(to_graph(model, input_signature), model), host


def _call(model: CompiledModel, batch: Any, i: int) -> Any:
    """Call ``model`` on calibration batch ``i`` in the model's call format: a dict by name, a
    tuple positionally, a list positionally when it holds one entry per input of a model of
    several inputs (else it is one input's data), anything else as the only input."""
    from pytfrt.model import InputError

    try:
        if isinstance(batch, dict):
            return model(**batch)
        if isinstance(batch, tuple) or (
                isinstance(batch, list) and len(batch) == len(model.signature.inputs) > 1):
            return model(*batch)
        return model(batch)
    except InputError as exc:
        raise QuantizeError(f"calibration batch {i}: {exc}") from None


def _calibrate(gm: GraphModule, values: Sequence[Any], batches: Sequence[Any],
               calibration: str, percentile: float, host: Any) -> list[tuple[float, float]]:
    """Each value's (low, high) range over the calibration batches."""
    from pytfrt.compiler.api import compile_module
    from pytfrt.compiler.quantize_graph import observer

    obs = compile_module(observer(gm, values), optimize=False, host=host)
    first = len(gm.signature.outputs)
    lo = np.full(len(values), np.inf)
    hi = np.full(len(values), -np.inf)
    for i, batch in enumerate(batches):
        outs = _call(obs, batch, i)[first:]
        for j, x in enumerate(outs):
            if x.size:
                lo[j] = min(lo[j], float(np.min(x)))
                hi[j] = max(hi[j], float(np.max(x)))
    bad = ~np.isfinite(lo) | ~np.isfinite(hi)
    lo[bad], hi[bad] = 0.0, 0.0
    if calibration == "percentile":
        hists = _histograms(obs, batches, first, lo, hi, absolute=False)
        for j, h in enumerate(hists):
            if hi[j] > lo[j]:
                lo[j], hi[j] = percentile_range(h, lo[j], hi[j], percentile)
    elif calibration == "entropy":
        amax = np.maximum(np.abs(lo), np.abs(hi))
        hists = _histograms(obs, batches, first, np.zeros_like(amax), amax, absolute=True)
        for j, h in enumerate(hists):
            # a histogram of few values says little about its tails: keep min/max
            if amax[j] > 0 and h.sum() >= MIN_ENTROPY_SAMPLES:
                # a non-negative tensor has all 256 u8 levels for |x|
                t = entropy_threshold(h, amax[j], 256 if lo[j] >= 0 else ENTROPY_LEVELS)
                lo[j], hi[j] = max(lo[j], -t), min(hi[j], t)
    return [(float(lo[j]), float(hi[j])) for j in range(len(values))]


def _histograms(obs: CompiledModel, batches: Sequence[Any], first: int, lo: np.ndarray,
                hi: np.ndarray, absolute: bool) -> list[np.ndarray]:
    """Per observed tensor ``j``, the :data:`HIST_BINS`-bin histogram of its values (``|x|``
    if ``absolute``) over ``[lo[j], hi[j]]`` and all batches (zeros for an empty range)."""
    hists = [np.zeros(HIST_BINS, np.int64) for _ in lo]
    for i, batch in enumerate(batches):
        for j, x in enumerate(_call(obs, batch, i)[first:]):
            if hi[j] > lo[j]:
                hists[j] += np.histogram(np.abs(x) if absolute else x, HIST_BINS,
                                         (lo[j], hi[j]))[0]
    return hists


def percentile_range(hist: np.ndarray, lo: float, hi: float, pct: float) -> tuple[float, float]:
    """The range ``[lo', hi']`` that keeps ``pct`` percent of a histogram over ``[lo, hi]``
    from each tail (the lower cut at ``100 - pct``, the upper at ``pct``)."""
    cdf = np.cumsum(hist, dtype=np.float64)
    total = cdf[-1]
    if total <= 0:
        return lo, hi
    width = (hi - lo) / len(hist)
    cut = total * (100.0 - pct) / 100.0 * (1.0 + 1e-9)  # a count exactly at the cut is kept
    low_bin = int(np.searchsorted(cdf, cut, side="right"))
    high_bin = int(np.searchsorted(cdf, total - cut, side="left"))
    return lo + low_bin * width, lo + (high_bin + 1) * width


def entropy_threshold(hist: np.ndarray, amax: float, levels: int = ENTROPY_LEVELS) -> float:
    """The clipping threshold of ``|x|`` minimising ``KL(P || Q)`` (TensorRT's calibration).

    ``hist`` counts ``|x|`` in ``len(hist)`` equal bins over ``[0, amax]``.  For each candidate
    of ``i`` bins, P is the first ``i`` bins with the outliers added to the last, Q the first
    ``i`` bins merged into ``levels`` groups and spread back over each group's non-empty bins;
    the threshold is the end of the best candidate's last bin.  The first bin's count is
    replaced by the second's, so the spike of exact zeros a ReLU makes (which every threshold
    represents exactly) does not drive the choice.
    """
    n = len(hist)
    if n <= levels:
        return amax
    hist = hist.astype(np.float64)
    hist[0] = hist[1]
    width = amax / n
    best, best_kl = n, math.inf
    step = max(1, (n - levels) // 256)
    for i in range(levels, n + 1, step):
        p = hist[:i].copy()
        p[-1] += hist[i:].sum()
        starts = (np.arange(levels) * i) // levels
        sums = np.add.reduceat(hist[:i], starts)
        nonzero = hist[:i] > 0
        counts = np.add.reduceat(nonzero.astype(np.float64), starts)
        group = np.repeat(np.arange(levels), np.diff(np.append(starts, i)))
        per = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
        q = np.where(nonzero, per[group], 0.0)
        ps, qs = p.sum(), q.sum()
        if ps <= 0 or qs <= 0:
            continue
        p /= ps
        q /= qs
        mask = p > 0
        if np.any(q[mask] == 0):
            kl = math.inf
        else:
            kl = float(np.sum(p[mask] * np.log(p[mask] / q[mask])))
        if kl < best_kl:
            best, best_kl = i, kl
    return best * width
