"""Compute functions of the graph dialect's nn ops, adapting the CPU kernels' API to the
catalogue's (operands positional, attributes keyword-only, see ``docs/graph_dialect.md``).

The math lives in :mod:`~pytfrt.backends.cpu.gemm`, :mod:`~pytfrt.backends.cpu.conv`,
:mod:`~pytfrt.backends.cpu.pooling` and :mod:`~pytfrt.backends.cpu.norm` (imported on first
use); this module only maps attributes, the optional fused-epilogue operands
(``epilogue_operands = [bias?, residual?]``) and run-time ``SAME`` padding.  ``conv2d`` is split
into ``conv2d.prepare`` (filter + bias -> plan, once at load) and ``conv2d`` (x, plan,
residual?).  Pure functions (plans are immutable): thread-safe.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from pytfrt.backends.cpu import _blas
from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError

GRAPH_OPS = OpTable()

SMALL_MATMUL = 1 << 22
"""``m * k * n`` up to which a 2-D matmul takes the short NumPy path (see :func:`matmul`)."""
"""Op name -> compute function (see the module docstring)."""


def _epilogue(extra: tuple[np.ndarray, ...], flags: tuple[int, ...], op: str
              ) -> tuple[np.ndarray | None, np.ndarray | None]:
    if len(extra) != sum(flags):
        raise OpError(f"{op}: expected {sum(flags)} epilogue operands, got {len(extra)}")
    i = 0
    bias = residual = None
    if flags[0]:
        bias = extra[0]
        i = 1
    if flags[1]:
        residual = extra[i]
    return bias, residual


def _small_product(a: np.ndarray, b: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """``a @ b`` for a small 2-D product on the calling thread: float32 through oneDNN's
    single-threaded GEMM when installed, else NumPy.  (NumPy's OpenBLAS threads a matrix-vector
    product such as a classifier at batch 1 and, on a loaded machine, waits for a descheduled
    thread: measured 0.08 ms median but 44 ms at the 90th percentile for 1x2048 @ 2048x1000,
    against 0.09 / 0.11 ms for oneDNN on one thread.)  A matrix-matrix product of at most
    2^18 multiply-adds goes to NumPy all the same: OpenBLAS keeps it on the calling thread
    (``gemm.BATCHED_MIN``), and ``dnnl_sgemm`` costs 8-10 us a call whatever the size --
    256x32x32 (a transformer block's projection at batch 16): 4.7 us of CPU against ~15."""
    from pytfrt.backends.cpu.gemm import BATCHED_MIN

    m, k = a.shape
    n = b.shape[1]
    if m > 1 and n > 1 and m * k * n < BATCHED_MIN:
        return np.matmul(a, b, out=out)
    if a.dtype == np.float32 and b.dtype == np.float32 and _blas.parallel_gemm():
        y = out if out is not None else np.empty((a.shape[0], b.shape[1]), np.float32)
        _blas.sgemm(a, b, y)
        return y
    return np.matmul(a, b, out=out)


@GRAPH_OPS.op("matmul")
def matmul(a: np.ndarray, b: np.ndarray, *extra: np.ndarray, transpose_a: bool,
           transpose_b: bool, activation: str, alpha: float,
           epilogue_operands: tuple[int, ...], out: np.ndarray | None = None) -> np.ndarray:
    """``activation(op(a) @ op(b) + bias + residual)`` (gemm.matmul).

    Small 2-D products with no or a ReLU activation (a dense layer at a small batch) take a
    short path -- NumPy's matmul, then the bias, residual and ReLU in place -- because there
    the general entry's checks and threading set-up cost more than the arithmetic.  So does a
    C-contiguous ``[..., K]`` left operand without epilogue against a matrix (a transformer
    block's projections and their input gradients at a small batch): one ``[rows, K]``
    product, as the general entry computes it; and a batch of small products of operands of
    one rank and batch shape (attention's scores and their gradients): NumPy's loop, where
    the general entry ends too.
    """
    if (a.ndim == b.ndim > 2 and not extra and activation == "none"
            and a.shape[:-2] == b.shape[:-2] and a.dtype == b.dtype):
        from pytfrt.backends.cpu.gemm import BATCHED_MIN

        aa = a.swapaxes(-1, -2) if transpose_a else a
        bb = b.swapaxes(-1, -2) if transpose_b else b
        if (aa.shape[-1] == bb.shape[-2]
                and aa.shape[-2] * aa.shape[-1] * bb.shape[-1] < BATCHED_MIN
                and (out is None or out.shape == (*aa.shape[:-1], bb.shape[-1]))):
            return np.matmul(aa, bb, out=out)
    if (a.ndim > 2 and b.ndim == 2 and not transpose_a and not extra and activation == "none"
            and a.flags.c_contiguous and a.shape[-1] == b.shape[1 if transpose_b else 0]
            and (out is None or out.flags.c_contiguous)):
        rows = a.reshape(-1, a.shape[-1])
        n = b.shape[0 if transpose_b else 1]
        if rows.shape[0] * b.size <= SMALL_MATMUL:
            y = matmul(rows, b, transpose_a=False, transpose_b=transpose_b, activation="none",
                       alpha=alpha, epilogue_operands=epilogue_operands,
                       out=None if out is None else out.reshape(-1, n))
            return y.reshape(*a.shape[:-1], n)
    if (a.ndim == 2 and b.ndim == 2 and a.shape[1 if transpose_a else 0] * b.size <= SMALL_MATMUL
            and (activation == "relu" or activation == "none")
            and a.dtype == b.dtype and a.dtype.kind == "f"):
        if transpose_a:  # a transposed view: the gradient products of a training step
            a = a.T
        bb = b.T if transpose_b else b
        n = bb.shape[1]
        if a.shape[1] == bb.shape[0]:
            bias = residual = None
            if extra:
                f0, f1 = epilogue_operands
                if len(extra) != f0 + f1:
                    _epilogue(extra, epilogue_operands, "matmul")  # raises the error
                bias = extra[0] if f0 else None
                residual = extra[f0] if f1 else None
            if (bias is None or bias.shape == (n,)) and (
                    residual is None or residual.shape == (a.shape[0], n)):
                if residual is None and a.dtype == np.float32 and (
                        bias is None or bias.flags.c_contiguous):
                    from pytfrt.backends.cpu.gemm import dense_rows

                    y = dense_rows(a, bb, bias, activation == "relu", out)
                    if y is not None:  # the specialised dense layer's kernel (same rounding)
                        return y
                y = _small_product(a, bb, out)
                if bias is not None:
                    y += bias
                if residual is not None:
                    y += residual
                if activation == "relu":
                    np.maximum(y, 0, out=y)
                return y
    from pytfrt.backends.cpu.gemm import matmul as gemm_matmul

    bias, residual = _epilogue(extra, epilogue_operands, "matmul")
    return gemm_matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b, bias=bias,
                       residual=residual, activation=activation, alpha=alpha, out=out)


def _specialize_matmul(constants: dict[int, np.ndarray], *, transpose_a: bool,
                       transpose_b: bool, activation: str, alpha: float,
                       epilogue_operands: tuple[int, ...]) -> Any:
    """A dense layer whose weight (and bias) are constants of the model: :func:`matmul`'s short
    path with the weight checks done once, or ``None`` when it does not apply.

    ``constants`` maps operand indices to the arrays those operands always are (the function
    returned relies on it); other calls go to :func:`matmul` with the attributes.
    """
    w = constants.get(1)
    f0, f1 = epilogue_operands
    bias = constants.get(2) if f0 else None
    if w is None or transpose_a or w.ndim != 2 or w.dtype.kind != "f" or (f0 and bias is None):
        return None
    packed = _packed_dense(w.T if transpose_b else w, bias, activation, alpha, bool(f1),
                           epilogue_operands, transpose_b)
    if f1 or hasattr(packed, "release"):  # a large weight: every product in the runner
        return packed
    ww = w.T if transpose_b else w
    k, n = ww.shape
    if bias is not None and (bias.shape != (n,) or bias.dtype != w.dtype):
        return None
    from pytfrt.backends.cpu.conv import DENSE_MAX_ROWS, dense_runner

    big = dense_runner(ww, bias, activation, alpha)  # a large weight at a small batch
    attrs = dict(transpose_a=transpose_a, transpose_b=transpose_b, activation=activation,
                 alpha=alpha, epilogue_operands=epilogue_operands)
    if activation not in ("relu", "none"):
        if big is None:
            return packed

        def dense_act(a: np.ndarray, b: np.ndarray, *extra: np.ndarray,
                      out: np.ndarray | None = None) -> np.ndarray:
            if packed is not None and (a.ndim != 2 or a.shape[0] > DENSE_MAX_ROWS):
                return packed(a, b, *extra, out=out)  # type: ignore[no-any-return]
            y = big(a, out)
            return y if y is not None else matmul(a, b, *extra, **attrs, out=out)

        return dense_act
    rows = SMALL_MATMUL // max(w.size, 1)
    dt = w.dtype
    relu = activation == "relu"
    maximum = np.maximum
    gemv = None
    if dt == np.float32 and ww.flags.c_contiguous and (bias is None or bias.flags.c_contiguous):
        from pytfrt.backends.cpu.gemm import GEMV_ROWS, dense_rows

        gemv = min(GEMV_ROWS, rows)

    def dense(a: np.ndarray, b: np.ndarray, *extra: np.ndarray,
              out: np.ndarray | None = None) -> np.ndarray:
        if packed is not None and (a.ndim != 2 or a.shape[0] > max(rows, DENSE_MAX_ROWS)):
            return packed(a, b, *extra, out=out)  # type: ignore[no-any-return]
        if big is not None:
            y = big(a, out)
            if y is not None:
                return y
        if gemv is not None and a.ndim == 2 and a.shape[0] <= gemv and a.dtype is dt:
            y = dense_rows(a, ww, bias, relu, out)
            if y is not None:
                return y
        if a.ndim == 2 and a.shape[1] == k and a.dtype is dt and a.shape[0] <= rows:
            y = _small_product(a, ww, out)
            if bias is not None:
                y += bias
            if relu:
                maximum(y, 0, out=y)
            return y
        return matmul(a, b, *extra, **attrs, out=out)

    return dense


matmul.specialize = _specialize_matmul  # type: ignore[attr-defined]


def _packed_dense(ww: np.ndarray, bias: np.ndarray | None, activation: str, alpha: float,
                  residual: bool, epilogue_operands: tuple[int, ...], transpose_b: bool) -> Any:
    """A float32 dense layer on a constant weight ``ww [K, N]`` run in oneDNN's matmul
    primitive with the weight packed once (:mod:`pytfrt.backends.cpu._dnnl_matmul`), or
    ``None`` (oneDNN absent, another dtype, a small weight, an activation oneDNN has no post-op
    for).

    A weight of at least :data:`~pytfrt.backends.cpu._dnnl_matmul.RELEASE_MIN_WEIGHTS`
    elements: every product runs in the runner (inputs and residuals made C-contiguous and
    full-size first) and the function has ``release(j)``, which the compiled model's call
    (:mod:`pytfrt.model`) uses when the weight (operand ``j`` = 1) is read by nothing else:
    the runner drops the user's copy, the function stops reading its ``b`` operand, and
    ``release`` returns a function rebuilding the weight (for ``save``); ``None`` if it
    cannot.  Smaller weights: products of at least ``MIN_MACS`` multiply-adds with
    C-contiguous operands run in the runner, others in :func:`matmul`.
    """
    from pytfrt.backends.cpu import _dnnl_matmul
    from pytfrt.backends.cpu.arena import Recycler
    from pytfrt.backends.cpu.gemm import GEMV_ROWS, matmul_output_shape

    if ww.dtype != np.float32 or ww.shape[0] * ww.shape[1] < _dnnl_matmul.MIN_MACS // 64:
        return None
    runner = _dnnl_matmul.make(ww, bias, activation, alpha, residual)
    if runner is None:
        return None
    k, n = ww.shape
    f32 = np.dtype(np.float32)
    whole = ww.size >= _dnnl_matmul.RELEASE_MIN_WEIGHTS
    min_rows = 1 if whole else max(GEMV_ROWS + 1, -(-_dnnl_matmul.MIN_MACS // (k * n)))
    attrs = dict(transpose_a=False, transpose_b=transpose_b, activation=activation,
                 alpha=alpha, epilogue_operands=epilogue_operands)
    n_extra = sum(epilogue_operands)
    ri = epilogue_operands[0]
    released = False
    results = Recycler()  # a large result (the LM head's logits) reused once dropped

    def dense(a: np.ndarray, b: np.ndarray, *extra: np.ndarray,
              out: np.ndarray | None = None) -> np.ndarray:
        if (isinstance(a, np.ndarray) and a.dtype == f32 and a.ndim >= 1 and a.shape[-1] == k
                and len(extra) == n_extra):
            m = a.size // k
            shape = (*a.shape[:-1], n)
            res = extra[ri] if residual else None
            if whole:
                a = np.ascontiguousarray(a)
                if res is not None and (res.shape != shape or not res.flags.c_contiguous
                                        or res.dtype != f32):
                    try:
                        res = np.ascontiguousarray(np.broadcast_to(res, shape), f32)
                    except ValueError:
                        res = None  # not broadcastable: the general path's error
            if (m >= min_rows and a.flags.c_contiguous and (not residual or (
                    res is not None and res.shape == shape and res.dtype == f32
                    and res.flags.c_contiguous)) and runner.ready((m, k))):
                y = out if (out is not None and out.shape == shape
                            and out.flags.c_contiguous) else results.empty(shape, f32)
                runner.run(a.reshape(m, k), y.reshape(m, n),
                           None if res is None else res.reshape(m, n))
                if out is not None and y is not out:
                    out[...] = y
                    return out
                return y
        if released:  # the checks and errors of the general path, on the rebuilt weight
            if not isinstance(a, np.ndarray) or a.ndim < 1:
                raise OpError("matmul: operands must be ndarrays of rank >= 1")
            w = runner.weight(transpose_b)
            matmul_output_shape(a.shape, (k, n))
            return matmul(a, w, *extra, **attrs, out=out)
        return matmul(a, b, *extra, **attrs, out=out)

    if whole:
        def release(j: int) -> Any:
            nonlocal released
            if j != 1 or not runner.release_weight(64):
                return None
            released = True
            return lambda: runner.weight(transpose_b)

        dense.release = release  # type: ignore[attr-defined]
    return dense


def _same_pads(x_shape: tuple[int, ...], k: tuple[int, int], layout: str,
               strides: tuple[int, ...], dilations: tuple[int, ...]) -> tuple[int, int, int, int]:
    """TF's SAME padding for the input's spatial size (conv.same_pads on a window of ``k``)."""
    from pytfrt.backends.cpu.conv import same_pads

    w_shape = (k[0], k[1], 1, 1) if layout == "NHWC" else (1, 1, k[0], k[1])
    return same_pads(x_shape, w_shape, layout=layout, strides=strides, dilations=dilations)


class _DeferredConv:
    """A conv plan whose pads depend on the input size (``padding = "SAME"``, dynamic dims):
    one plan per input spatial size, made on first use and cached.

    A training step prepares its convolutions on every call (the filter is a variable), so
    each call would make a new plan and new oneDNN primitives.  :meth:`per_call` spots that
    pattern -- a new deferred conv whose geometry's previous one served exactly one call --
    and then runs the convolution through primitives kept per geometry, the filter reordered
    per call (:func:`pytfrt.backends.cpu._dnnl_conv_bwd.forward`; float32, no
    epilogue).  A model's constant filter keeps one deferred conv for all its calls: it takes
    that path at most on its first call (when another model's conv of the same geometry ran
    just once before), with the same results.  Thread-safety: the bookkeeping is a benign race
    (a wrong guess costs time, never correctness)."""

    _last: dict[tuple[Any, ...], tuple[int, int]] = {}
    """Geometry -> (serial number of the deferred conv that last ran it, its call count)."""
    _serials = itertools.count()

    def __init__(self, w: np.ndarray, bias: np.ndarray | None, attrs: dict[str, Any]) -> None:
        self.w, self.bias, self.attrs = w, bias, attrs
        self.plans: dict[tuple[int, ...], Any] = {}
        self.serial = next(_DeferredConv._serials)

    def per_call(self, x: np.ndarray, out: np.ndarray | None) -> np.ndarray | None:
        """The convolution by the per-call-filter path when this looks like a training step's
        (see the class docstring), else ``None`` (then :meth:`plan_for`)."""
        a = self.attrs
        if (a["activation"] != "none" or x.dtype != np.float32
                or self.w.dtype != np.float32 or x.ndim != 4):
            return None
        key = (x.shape, self.w.shape, a["layout"], a["strides"], a["dilations"], a["groups"])
        if not _made_per_call(key, self.serial):
            return None
        from pytfrt.backends.cpu import _dnnl_conv_bwd

        kh, kw = (self.w.shape[0], self.w.shape[1]) if a["layout"] == "NHWC" else (
            self.w.shape[2], self.w.shape[3])
        pads = _same_pads(x.shape, (kh, kw), a["layout"], a["strides"], a["dilations"])
        return _dnnl_conv_bwd.forward(x, self.w, layout=a["layout"], strides=a["strides"],
                                      dilations=a["dilations"], pads=pads, groups=a["groups"],
                                      out=out, bias=self.bias)

    def plan_for(self, x: np.ndarray) -> Any:
        key = x.shape[1:]
        plan = self.plans.get(key)
        if plan is None:
            from pytfrt.backends.cpu.conv import plan_conv2d

            a = self.attrs
            kh, kw = (self.w.shape[0], self.w.shape[1]) if a["layout"] == "NHWC" else (
                self.w.shape[2], self.w.shape[3])
            pads = _same_pads(x.shape, (kh, kw), a["layout"], a["strides"], a["dilations"])
            plan = plan_conv2d(self.w, layout=a["layout"], strides=a["strides"],
                               dilations=a["dilations"], pads=pads, groups=a["groups"],
                               bias=self.bias, activation=a["activation"], alpha=a["alpha"],
                               copy=False)  # self.w is kept (and never modified) anyway
            self.plans[key] = plan  # a benign race: two threads may both build one
        return plan


def _made_per_call(key: tuple[Any, ...], serial: int) -> bool:
    """Whether the conv ``serial`` of geometry ``key`` looks like a training step's, made anew
    for each call: the previous conv of this geometry was another one and served exactly one
    call (:class:`_DeferredConv`'s bookkeeping, shared with :func:`_per_call_plan`)."""
    last = _DeferredConv._last.get(key)
    calls = last[1] + 1 if last is not None and last[0] == serial else 1
    _DeferredConv._last[key] = (serial, calls)
    return last is not None and last[0] != serial and last[1] == 1


def _per_call_plan(plan: Any, x: np.ndarray, out: np.ndarray | None) -> np.ndarray | None:
    """A plan with explicit pads (``conv2d.prepare`` of a filter that is a variable: a new
    plan every step, whose oneDNN primitives and prepared filter would be made on its first
    and only run) run through the primitives kept per geometry, as :meth:`_DeferredConv.
    per_call` does for SAME padding: float32, no epilogue (a bias is the primitive's), the
    filter still referenced.  ``None``: run the plan.  Results are oneDNN's direct
    convolution, as the plan's oneDNN path computes them (equal on the residual CNN's
    convolutions); its stem and 16-channel convolutions: 1.0 -> 0.4 and 2.3 -> 1.9 ms per
    call (load ~15)."""
    from pytfrt.backends.cpu.conv import ConvPlan

    if (not isinstance(plan, ConvPlan) or plan.activation != "none"
            or plan.dtype != np.float32 or x.dtype != np.float32 or x.ndim != 4
            or plan.source is None):
        return None
    w = plan.source()
    if w is None or w.shape != plan.filter_shape or w.dtype != np.float32:
        return None
    key = (x.shape, w.shape, plan.layout, plan.strides, plan.dilations, plan.pads, plan.groups)
    if not _made_per_call(key, id(plan)):
        return None
    from pytfrt.backends.cpu import _dnnl_conv_bwd

    return _dnnl_conv_bwd.forward(x, w, layout=plan.layout, strides=plan.strides,
                                  dilations=plan.dilations, pads=plan.pads, groups=plan.groups,
                                  out=out, bias=plan.bias)


@GRAPH_OPS.op("conv2d.prepare")
def conv2d_prepare(w: np.ndarray, *extra: np.ndarray, layout: str, strides: tuple[int, ...],
                   pads: tuple[int, ...], padding: str, dilations: tuple[int, ...], groups: int,
                   activation: str, alpha: float, epilogue_operands: tuple[int, ...]) -> Any:
    """The weight-dependent plan of a conv2d (filter, bias?), made once at load."""
    from pytfrt.backends.cpu.conv import plan_conv2d

    bias = extra[0] if epilogue_operands[0] and extra else None
    if layout == "NCHW16c":  # -tg-dnnl-blocked's convolutions (explicit pads)
        from pytfrt.backends.cpu._dnnl_blocked import BlockedConv

        return BlockedConv(w, bias, strides=strides, dilations=dilations, pads=pads,
                           groups=groups, activation=activation, alpha=alpha)
    if layout == "NCHW>NHWC":  # -tg-conv-nchw-input's first convolutions (explicit pads)
        from pytfrt.backends.cpu.conv import StemConv

        return StemConv(w, bias, strides=strides, dilations=dilations, pads=pads,
                        groups=groups, activation=activation, alpha=alpha)
    if padding == "SAME":
        return _DeferredConv(w, bias, dict(layout=layout, strides=strides, dilations=dilations,
                                           groups=groups, activation=activation, alpha=alpha))
    # copy=False: the model's weights are never modified; the plan's prepared filter then
    # replaces the model's copy (CompiledModel releases weights a plan can give back)
    return plan_conv2d(w, layout=layout, strides=strides, dilations=dilations, pads=pads,
                       groups=groups, bias=bias, activation=activation, alpha=alpha, copy=False)


conv2d_prepare.opaque_result = True  # type: ignore[attr-defined]


@GRAPH_OPS.op("conv2d")
def conv2d(x: np.ndarray, plan: Any, *residual: np.ndarray,
           out: np.ndarray | None = None) -> np.ndarray:
    """``activation(conv(x, w) + bias + residual)`` with a prepared plan."""
    from pytfrt.backends.cpu._dnnl_blocked import BlockedConv
    from pytfrt.backends.cpu.conv import StemConv
    from pytfrt.backends.cpu.conv import conv2d as conv_run

    if isinstance(plan, BlockedConv | StemConv):
        return plan(x, residual[0] if residual else None, out)
    if isinstance(plan, _DeferredConv):
        y = None if residual or plan.plans else plan.per_call(x, out)
        if y is not None:
            return y
        plan = plan.plan_for(x)
    elif not residual:
        y = _per_call_plan(plan, x, out)
        if y is not None:
            return y
    return conv_run(plan, x, residual[0] if residual else None, out=out)


conv2d.opaque_operands = frozenset({1})  # type: ignore[attr-defined]


def _specialize_conv2d(constants: dict[int, Any]) -> Any:
    """:func:`conv2d` bound to a plan that is a constant of the model: the short path of
    :func:`pytfrt.backends.cpu.conv.runner` (``None`` for plans made per input size)."""
    from pytfrt.backends.cpu._dnnl_blocked import BlockedConv
    from pytfrt.backends.cpu.conv import ConvPlan, StemConv, runner

    plan = constants.get(1)
    if isinstance(plan, BlockedConv | StemConv):
        run = plan.runner()
    elif not isinstance(plan, ConvPlan):
        return None
    else:
        run = runner(plan)
    kernel = getattr(run, "kernel", None)  # the native short path in the kernel's own form
    if kernel is not None:
        kernel.num_arrays = 1
        return kernel

    def conv(x: np.ndarray, _plan: Any, *residual: np.ndarray,
             out: np.ndarray | None = None) -> np.ndarray:
        return run(x, residual[0] if residual else None, out)

    conv.num_arrays = 1  # type: ignore[attr-defined]
    return conv


conv2d.specialize = _specialize_conv2d  # type: ignore[attr-defined]


@GRAPH_OPS.op("conv2d_transpose")
def conv2d_transpose(x: np.ndarray, w: np.ndarray, *, layout: str, strides: tuple[int, ...],
                     pads: tuple[int, ...], dilations: tuple[int, ...], groups: int,
                     output_padding: tuple[int, ...]) -> np.ndarray:
    """Transposed convolution (conv.conv2d_transpose)."""
    from pytfrt.backends.cpu.conv import conv2d_transpose as impl

    return impl(x, w, layout=layout, strides=strides, dilations=dilations, pads=pads,
                groups=groups, output_padding=output_padding)


@GRAPH_OPS.op("batch_norm")
def batch_norm(x: np.ndarray, scale: np.ndarray, offset: np.ndarray, mean: np.ndarray,
               variance: np.ndarray, *, epsilon: float, axis: int,
               out: np.ndarray | None = None) -> np.ndarray:
    """Inference batch normalisation (norm.batch_norm)."""
    from pytfrt.backends.cpu.norm import batch_norm as impl

    return impl(x, scale, offset, mean, variance, epsilon=epsilon, axis=axis, out=out)


@GRAPH_OPS.op("layer_norm")
def layer_norm(x: np.ndarray, *params: np.ndarray, axis: int, epsilon: float, has_gamma: bool,
               has_beta: bool, out: np.ndarray | None = None) -> np.ndarray:
    """Layer normalisation over ``axis..rank-1`` (norm.layer_norm)."""
    from pytfrt.backends.cpu.norm import layer_norm as impl

    gamma = params[0] if has_gamma else None
    beta = params[int(has_gamma)] if has_beta else None
    return impl(x, gamma, beta, axis=axis, epsilon=epsilon, out=out)


@GRAPH_OPS.op("add_layer_norm")
def add_layer_norm(a: np.ndarray, b: np.ndarray, *params: np.ndarray, axis: int,
                   epsilon: float, has_gamma: bool,
                   has_beta: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(a + b, layer_norm(a + b))`` (norm.add_layer_norm)."""
    from pytfrt.backends.cpu.norm import add_layer_norm as impl

    gamma = params[0] if has_gamma else None
    beta = params[int(has_gamma)] if has_beta else None
    return impl(a, b, gamma, beta, axis=axis, epsilon=epsilon)


@GRAPH_OPS.op("softmax")
def softmax(x: np.ndarray, *, axis: int, out: np.ndarray | None = None) -> np.ndarray:
    """Softmax along ``axis`` (float32 rows of a short last axis: ``softmax_rows``, the
    reductions vectorised across rows; else norm.softmax)."""
    from pytfrt.backends.cpu.softmax_rows import softmax_last

    y = softmax_last(x, axis, out)
    if y is not None:
        return y
    from pytfrt.backends.cpu.norm import softmax as impl

    return impl(x, axis, out)


@GRAPH_OPS.op("log_softmax")
def log_softmax(x: np.ndarray, *, axis: int, out: np.ndarray | None = None) -> np.ndarray:
    """Log-softmax along ``axis`` (norm.log_softmax)."""
    from pytfrt.backends.cpu.norm import log_softmax as impl

    return impl(x, axis, out)


@GRAPH_OPS.op("l2_normalize")
def l2_normalize(x: np.ndarray, *, axis: tuple[int, ...], epsilon: float) -> np.ndarray:
    """``x / sqrt(max(sum(x**2, axis), epsilon))`` (TF ``l2_normalize``)."""
    acc = np.float64 if x.dtype == np.float64 else np.float32
    ss = np.sum(np.square(x, dtype=acc), axis=tuple(axis), keepdims=True)
    return (x / np.sqrt(np.maximum(ss, epsilon))).astype(x.dtype, copy=False)


@GRAPH_OPS.op("lrn")
def lrn(x: np.ndarray, *, depth_radius: int, bias: float, alpha: float, beta: float,
        axis: int) -> np.ndarray:
    """Local response normalisation across ``axis`` (TF's formula)."""
    acc = np.float64 if x.dtype == np.float64 else np.float32
    y = np.moveaxis(x.astype(acc), axis, -1)
    sq = np.square(y)
    c = y.shape[-1]
    csum = np.concatenate([np.zeros(sq.shape[:-1] + (1,), acc), np.cumsum(sq, axis=-1)], -1)
    lo = np.clip(np.arange(c) - depth_radius, 0, c)
    hi = np.clip(np.arange(c) + depth_radius + 1, 0, c)
    window = csum[..., hi] - csum[..., lo]
    out = y / np.power(bias + alpha * window, beta)
    return np.ascontiguousarray(np.moveaxis(out, -1, axis)).astype(x.dtype, copy=False)


def _pool_pads(x: np.ndarray, ksize: tuple[int, ...], layout: str, strides: tuple[int, ...],
               dilations: tuple[int, ...], pads: tuple[int, ...], padding: str) -> Any:
    if padding == "SAME":
        return _same_pads(x.shape, (ksize[0], ksize[1]), layout, strides, dilations)
    return pads


@GRAPH_OPS.op("max_pool2d")
def max_pool2d(x: np.ndarray, *, layout: str, ksize: tuple[int, ...], strides: tuple[int, ...],
               pads: tuple[int, ...], padding: str, dilations: tuple[int, ...],
               count_include_pad: bool, ceil_mode: bool,
               out: np.ndarray | None = None) -> np.ndarray:
    """Windowed maximum (pooling.max_pool2d)."""
    from pytfrt.backends.cpu.pooling import max_pool2d as impl

    p = _pool_pads(x, ksize, layout, strides, dilations, pads, padding)
    return impl(x, layout=layout, ksize=ksize, strides=strides, pads=p, dilations=dilations,
                ceil_mode=ceil_mode, out=out)


MAX_POOL_SHAPES = 64
"""Input shapes whose pooling window a specialised pool keeps (further shapes work their
window out per call)."""


def _per_shape(general: Any, attrs: dict[str, Any], floats: bool, make: Any, run: Any) -> Any:
    """A window pool bound to its attributes ``attrs``: ``make(x)`` (the window, and what else
    depends only on the input shape) is worked out once per shape of a rank-4 ndarray (of a
    float type, with ``floats``) and kept; the call is ``run(x, kept, out)``.  Any other
    operand goes to ``general(x, **attrs, out=out)``, which reports it; ``make`` raises the
    general path's errors before anything is kept.  Thread-safe (kept values are immutable)."""
    kept: dict[tuple[int, ...], Any] = {}

    def pool(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        ok = type(x) is np.ndarray and (not floats or x.dtype.kind == "f")
        got = kept.get(x.shape) if ok else None
        if got is None:
            if not ok or x.ndim != 4:
                return general(x, **attrs, out=out)  # type: ignore[no-any-return]
            got = make(x)
            if len(kept) < MAX_POOL_SHAPES:
                kept[x.shape] = got
        return run(x, got, out)  # type: ignore[no-any-return]

    return pool


def _pool_window(op: str, x: np.ndarray, a: dict[str, Any]) -> Any:
    """The pooling window (``pooling._window``) of ``x`` under the op's attributes ``a``."""
    from pytfrt.backends.cpu.pooling import _window

    p = _pool_pads(x, a["ksize"], a["layout"], a["strides"], a["dilations"], a["pads"],
                   a["padding"])
    return _window(op, x.shape, a["layout"], a["ksize"], a["strides"], p, a["dilations"],
                   a["ceil_mode"])


def _specialize_max_pool2d(constants: dict[int, Any], **attrs: Any) -> Any:
    """:func:`max_pool2d` bound to its attributes: the window (pads, output size, checks) is
    worked out once per input shape, not per call -- it was most of a small pool's cost
    (a ``1x28x28x8`` pool: ~10 of ~25 us); a pool on the calling thread in oneDNN is also
    prepared per shape (``pooling.max_pool2d_launcher``: one native call, ~8 -> ~2 us)."""
    from pytfrt.backends.cpu.pooling import max_pool2d_launcher, max_pool2d_window

    layout = attrs["layout"]
    nd, overlap = np.ndarray, np.may_share_memory

    def make(x: np.ndarray) -> tuple[Any, ...]:
        win = _pool_window("max_pool2d", x, attrs)
        prepared = max_pool2d_launcher(x.shape, x.dtype, layout, win)
        return (win, x.dtype, *(prepared or (None, None)))

    def run(x: np.ndarray, got: tuple[Any, ...], out: np.ndarray | None) -> np.ndarray:
        win, dtype, shape, go = got
        if go is not None and x.dtype == dtype and x.flags.c_contiguous:
            if out is None:
                out = np.empty(shape, dtype)
                go(x, out)
                return out
            if (out.__class__ is nd and out.shape == shape and out.dtype == dtype
                    and out.flags.c_contiguous and not overlap(x, out)):
                go(x, out)
                return out
        return max_pool2d_window(x, layout, win, out)

    return _per_shape(max_pool2d, attrs, False, make, run)


max_pool2d.specialize = _specialize_max_pool2d  # type: ignore[attr-defined]


@GRAPH_OPS.op("avg_pool2d")
def avg_pool2d(x: np.ndarray, *, layout: str, ksize: tuple[int, ...], strides: tuple[int, ...],
               pads: tuple[int, ...], padding: str, dilations: tuple[int, ...],
               count_include_pad: bool, ceil_mode: bool,
               out: np.ndarray | None = None) -> np.ndarray:
    """Windowed mean (pooling.avg_pool2d)."""
    from pytfrt.backends.cpu.pooling import avg_pool2d as impl

    p = _pool_pads(x, ksize, layout, strides, dilations, pads, padding)
    return impl(x, layout=layout, ksize=ksize, strides=strides, pads=p, dilations=dilations,
                ceil_mode=ceil_mode, count_include_pad=count_include_pad, out=out)


@GRAPH_OPS.op("global_avg_pool")
def global_avg_pool(x: np.ndarray, *, layout: str, out: np.ndarray | None = None) -> np.ndarray:
    """Mean over the spatial dims, kept as size 1 (pooling.global_avg_pool; a channel-blocked
    ``NCHW16c`` image: _dnnl_blocked.global_avg_pool)."""
    if layout == "NCHW16c":
        from pytfrt.backends.cpu import _dnnl_blocked

        return _dnnl_blocked.global_avg_pool(x, out)
    from pytfrt.backends.cpu.pooling import global_avg_pool as impl

    return impl(x, layout=layout, out=out)


@GRAPH_OPS.op("reorder_layout")
def reorder_layout(x: np.ndarray, *, src_layout: str, dst_layout: str,
                   strides: tuple[int, ...] = (1, 1),
                   out: np.ndarray | None = None) -> np.ndarray:
    """An image from one layout to another, ``NHWC <-> NCHW16c``, NHWC -> ``NCHW16c``
    subsampled by ``strides`` (_dnnl_blocked.reorder)."""
    from pytfrt.backends.cpu import _dnnl_blocked

    return _dnnl_blocked.reorder(x, src_layout, dst_layout, out, strides=strides)


def _specialize_reorder_layout(constants: dict[int, Any], **attrs: Any) -> Any:
    """:func:`reorder_layout` bound to its attributes: per input shape the result's shape and
    oneDNN's prepared reorder are looked up once (``_dnnl_blocked.reorder_launcher``), so that
    a call on a C-contiguous float32 image into a C-contiguous ``out`` of the result's shape
    not overlapping it is one native call.  Measured in ResNet-50 at batch 1: the general
    path's checks and look-ups took 20-40 us of Python per reorder inside the model (its
    interpreter state cold after the convolutions), against ~5 us alone; eight reorders per
    call.  Any other operand goes to :func:`reorder_layout`.  Thread-safe."""
    from pytfrt.backends.cpu._dnnl_blocked import reorder_launcher

    src, dst = attrs["src_layout"], attrs["dst_layout"]
    strides = tuple(attrs.get("strides", (1, 1)))
    kept: dict[tuple[int, ...], Any] = {}
    nd, overlap, f32 = np.ndarray, np.may_share_memory, np.dtype(np.float32)

    def reorder(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if x.__class__ is nd and out is not None and out.__class__ is nd:
            got = kept.get(x.shape)
            if got is None and len(kept) < MAX_POOL_SHAPES:
                got = kept[x.shape] = reorder_launcher(x.shape, src, dst, strides) or (None, None)
            if got is not None:
                shape, go = got
                if (go is not None and x.dtype == f32 and out.dtype == f32 and out.shape == shape
                        and x.flags.c_contiguous and out.flags.c_contiguous
                        and not overlap(x, out)):
                    go(x, out)
                    return out
        return reorder_layout(x, src_layout=src, dst_layout=dst, strides=strides, out=out)

    return reorder


reorder_layout.specialize = _specialize_reorder_layout  # type: ignore[attr-defined]


def _specialize_avg_pool2d(constants: dict[int, Any], **attrs: Any) -> Any:
    """:func:`avg_pool2d` bound to its attributes: the window and the divisors worked out
    once per input shape (as :func:`_specialize_max_pool2d`), not per call."""
    from pytfrt.backends.cpu.pooling import _counts, _counts_bcast, avg_pool2d_window

    def make(x: np.ndarray) -> tuple[Any, np.ndarray]:
        win = _pool_window("avg_pool2d", x, attrs)
        pads = _pool_pads(x, attrs["ksize"], attrs["layout"], attrs["strides"],
                          attrs["dilations"], attrs["pads"], attrs["padding"])
        counts = _counts("avg_pool2d", x.shape[win[10]], x.shape[win[11]], win, pads,
                         attrs["count_include_pad"])
        return win, _counts_bcast(counts, win[10])

    return _per_shape(avg_pool2d, attrs, True, make,
                      lambda x, got, out: avg_pool2d_window(x, got[0], got[1], out))


avg_pool2d.specialize = _specialize_avg_pool2d  # type: ignore[attr-defined]


def _specialize_global_avg_pool(constants: dict[int, Any], *, layout: str) -> Any:
    """:func:`global_avg_pool` bound to its layout: a C-contiguous, non-empty float32 input
    goes straight to the C loop (``_se_native.spatial_mean``, which the general path also
    runs), without the general path's checks per call (~4 of its ~6 us on a ``1x14x14x16``
    input); anything else takes the general path, errors included.  ``None`` without a C
    compiler or for a bad layout (the general path reports it)."""
    from pytfrt.backends.cpu import _se_native

    if layout == "NCHW16c":
        return _blocked_global_avg_pool()
    native = _se_native.module() if layout in ("NHWC", "NCHW") else None
    if native is None:
        return None
    mean = native.spatial_mean
    nhwc = layout == "NHWC"
    f32 = np.dtype(np.float32)
    nd = np.ndarray

    def pool(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if type(x) is nd and x.dtype == f32 and x.ndim == 4 and x.size \
                and x.flags.c_contiguous:
            n, c = x.shape[0], x.shape[3] if nhwc else x.shape[1]
            shape = (n, 1, 1, c) if nhwc else (n, c, 1, 1)
            if out is None:
                out = np.empty(shape, f32)
            elif type(out) is not nd or out.shape != shape or out.dtype != f32 \
                    or not out.flags.c_contiguous:
                return global_avg_pool(x, layout=layout, out=out)
            mean(x.reshape((n, -1, c) if nhwc else (n, c, -1)), nhwc, out.reshape(n, c))
            return out
        return global_avg_pool(x, layout=layout, out=out)

    return pool


global_avg_pool.specialize = _specialize_global_avg_pool  # type: ignore[attr-defined]


def _blocked_global_avg_pool() -> Any:
    """The ``NCHW16c`` :func:`global_avg_pool` of a compiled model: per input shape the
    two-thread launcher (``_dnnl_blocked.pool_launcher``) looked up once, then one native job
    per call for a C-contiguous float32 image into a fitting ``out`` not overlapping it; any
    other operand, or a shape without a launcher, takes the general path."""
    from pytfrt.backends.cpu._dnnl_blocked import pool_launcher

    kept: dict[tuple[int, ...], Any] = {}
    nd, overlap, f32 = np.ndarray, np.may_share_memory, np.dtype(np.float32)

    def pool(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if x.__class__ is nd and out is not None and out.__class__ is nd:
            go = kept.get(x.shape)
            if go is None and x.shape not in kept and len(kept) < MAX_POOL_SHAPES:
                go = kept[x.shape] = pool_launcher(x.shape)
            if (go is not None and x.dtype == f32 and out.dtype == f32
                    and out.shape == (*x.shape[:2], 1, 1, x.shape[-1])
                    and x.flags.c_contiguous and out.flags.c_contiguous
                    and not overlap(x, out)):
                go(x, out)
                return out
        return global_avg_pool(x, layout="NCHW16c", out=out)

    return pool


@GRAPH_OPS.op("global_max_pool")
def global_max_pool(x: np.ndarray, *, layout: str, out: np.ndarray | None = None) -> np.ndarray:
    """Maximum over the spatial dims, kept as size 1 (pooling.global_max_pool)."""
    from pytfrt.backends.cpu.pooling import global_max_pool as impl

    return impl(x, layout=layout, out=out)
