"""ResNet-50 leads measured in one process: how the residual is added, oneDNN's channel-blocked
activation layout between consecutive convolutions, and the convolutions' split settings.

``residual``: the zoo's ResNet-50 ONNX file compiled three times and called in turn with ONNX
Runtime (two threads, no spinning), per-call paired ratios against variant A:

* **A** -- what pytfrt does: the convolution writes into its dying residual's buffer
  (``-tg-plan-buffers``) and oneDNN adds it with the ``sum`` post-op;
* **B** -- the same buffers, the residual added by a ``binary add`` post-op whose operand *is*
  the output buffer (aliasing that oneDNN does not document as safe);
* **C** -- the residual keeps its own buffer (the planner's in-place rule switched off for the
  compile) and the ``binary add`` post-op reads it from there (:data:`_dnnl_conv.
  RESIDUAL_OPERAND`; channel parts of the 7x7 stage cannot, they copy it into the output first).

B and C run their residual convolutions through :func:`_operand_launcher` (the primitives'
:mod:`_spin_pool` job called with the three addresses: about as little Python as A's
launcher).  ``--per-layer`` also times the residual convolutions inside the three models
(paired per layer shape).

``chain``: ResNet-50's bottleneck blocks (1x1 -> 3x3 -> 1x1 with ``sum`` and ReLU) of one stage
as single-threaded oneDNN primitives, activations in ``NHWC`` (what pytfrt passes) against
``nChw16c`` (oneDNN's channel-blocked layout, what ONNX Runtime's NCHWc kernels keep between
layers), interleaved; thread CPU time per chain, medians and the median paired ratio.  With
``--threads 2`` the same on both threads (wall time; :class:`_SplitChain`).

``knobs``: the zoo's ResNet-50 compiled once per ``--variant TAG:NAME=value[;NAME=value]``
(``A``: as it is), each with those module settings of :mod:`pytfrt.backends.cpu._dnnl_conv` or
:mod:`pytfrt.backends.cpu._dnnl_blocked` (``BLOCKED_MAX_PIXELS=0``: no blocked stages, read by
``-tg-dnnl-blocked`` at the compile) in force while its primitives are made (its first calls,
which also make its activation buffers), then all of them and ONNX Runtime called in turn:
per-call paired ratios over A.  Settings read only when a shape's primitives are made can differ
between the models of one process: how a convolution splits (``PARTS_PER_THREAD``,
``CHANNEL_SPLIT_MAX_PIXELS``, ...) and where its prepared filter lives (``HUGE_PAGE_FILTERS``).
``ARENA_STAGGER=<bytes>`` is the harness's own: the model's activation buffers then start
that many more bytes past a page each than the last (:func:`_staggered_empty`) instead of all
64 bytes past one.

Usage: ``python benchmarks/conv_variants.py residual [--batch 1] [--calls 40] [--per-layer]``;
``python benchmarks/conv_variants.py chain [--calls 30] [--threads 2]``;
``python benchmarks/conv_variants.py knobs [--batch 1] [--calls 40] --variant
"B:CHANNEL_SPLIT_MAX_PIXELS=0" --variant "C:ARENA_STAGGER=320"`` (``PYTFRT_NUM_THREADS=1 ...
knobs --ort-threads 1 --clock thread``: one thread each, timed by CPU time).  Run at
``chrt -f 10`` on a shared machine.  Prints only (the figures are recorded in
``docs/benchmarks.md``).
"""

from __future__ import annotations

import argparse
import ast
import ctypes
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

_NCHW16C = 78
"""oneDNN's ``dnnl_nChw16c`` (``dnnl_aBcd16b``) format tag (the same value in oneDNN 3.2-3.12)."""
_Q_SRC_MD, _Q_DST_MD = 129, 133  # dnnl_query_src_md, dnnl_query_dst_md


def _paired(a: list[float], b: list[float]) -> float:
    """Median of the per-call ratios ``b / a``."""
    return statistics.median(y / x for x, y in zip(a, b, strict=True))


def _operand_launcher(dnnl: Any, shape: tuple[int, ...]) -> Callable[..., None] | None:
    """``go(x, y, r)``: the residual-operand primitives of one input shape run with the three
    arrays' addresses (``None``: oneDNN has none for the shape)."""
    import threading

    from pytfrt.backends.cpu import _dnnl_conv as dc

    if not dnnl.ready(shape, dc.RESIDUAL_OPERAND):
        return None
    prims = dnnl._prims[(shape, dc.RESIDUAL_OPERAND)]
    lib, lock = dnnl._lib, threading.Lock()
    job = dc._job(prims, dnnl._attrs["cout"], lock) if len(prims) > 1 else None

    def go(x: np.ndarray, y: np.ndarray, r: np.ndarray) -> None:
        xa, ya, ra = x.ctypes.data, y.ctypes.data, r.ctypes.data
        if job is None or not dc.run_job(lib, job, xa, ya, ra):
            dnnl.forward(x, dc.RESIDUAL_OPERAND, y, r)

    return go


def _residual_models(batch: int, per_layer: dict[str, Any] | None) -> tuple[dict[str, Any], Any]:
    """Variants A, B, C of the zoo's ResNet-50 (see the module docstring) and its feeds."""
    import zoo

    import pytfrt
    from pytfrt.backends.cpu import conv as convmod
    from pytfrt.compiler.passes import buffers

    zm = zoo.export("resnet50", "/tmp/pytfrt-zoo", small=False, with_torch=False)
    orig_runner, orig_residual = convmod.runner, buffers._conv_residual

    def variant(tag: str) -> Callable[[Any], Any]:
        def runner(plan: Any) -> Any:
            fn, dnnl = orig_runner(plan), plan.dnnl
            launchers: dict[tuple[int, ...], Any] = {}

            def run(x: np.ndarray, residual: np.ndarray | None = None,
                    out: np.ndarray | None = None) -> np.ndarray:
                if residual is None:
                    return fn(x, residual, out)
                t0 = time.perf_counter()
                go = None
                if tag != "A" and out is not None and dnnl is not None:
                    if x.shape not in launchers:
                        launchers[x.shape] = _operand_launcher(dnnl, x.shape)
                    go = launchers[x.shape]
                y: Any = out
                if go is not None:
                    go(x, out, residual)
                else:
                    y = fn(x, residual, out)
                if per_layer is not None and per_layer["on"]:
                    per_layer[tag][tuple(x.shape)].append(time.perf_counter() - t0)
                return y

            return run

        return runner

    models = {}
    try:
        for tag in "ABC":
            convmod.runner = variant(tag)  # type: ignore[assignment]
            if tag == "C":  # the residual keeps its own buffer
                buffers._conv_residual = lambda op: None  # type: ignore[assignment]
            models[tag] = pytfrt.compile(str(zm.path))
    finally:
        convmod.runner = orig_runner  # type: ignore[assignment]
        buffers._conv_residual = orig_residual  # type: ignore[assignment]
    return models, zm.make_inputs(batch=batch)


def _first(y: Any) -> np.ndarray:
    if isinstance(y, dict):
        y = next(iter(y.values()))
    if isinstance(y, (list, tuple)):
        y = y[0]
    return np.asarray(y)


def _ort_session(path: Any, threads: int = 2) -> Any:
    """ONNX Runtime on ``path`` with two threads (or ``threads``), no spinning (as
    ``models.py`` runs it)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def _error(tag: str, model: Any, feeds: dict[str, np.ndarray], ref: np.ndarray) -> None:
    """Call ``model`` three times (its first calls make its primitives and buffers) and print
    its output's largest difference from ONNX Runtime's ``ref``."""
    for _ in range(3):
        y = _first(model(**feeds))
    err = float(np.max(np.abs(y - ref)) / np.max(np.abs(ref)))
    print(f"{tag}: max |difference| / max |ONNX Runtime| = {err:.2e}")


def _interleaved(calls: dict[str, Callable[[], Any]], n: int,
                 before: Callable[[], None] = lambda: None,
                 clock: Callable[[], float] = time.perf_counter) -> dict[str, list[float]]:
    """``n`` rounds calling every entry of ``calls`` once (its last entry ONNX Runtime, its first
    the reference variant A), each round starting one later; prints the medians and the paired
    ratios over A and over ONNX Runtime, and returns the times (``clock``: wall by default)."""
    times: dict[str, list[float]] = {t: [] for t in calls}
    order = list(calls)
    before()
    for i in range(n):
        for tag in order[i % len(order):] + order[:i % len(order)]:
            t0 = clock()
            calls[tag]()
            times[tag].append(clock() - t0)
    for tag, t in times.items():
        print(f"{tag:>3}: median {1e3 * statistics.median(t):.2f} ms")
    for tag in order[1:]:
        print(f"{tag} / A paired median {_paired(times[order[0]], times[tag]):.3f}")
    for tag in order[:-1]:
        print(f"{tag} / ONNX Runtime paired median {_paired(times[order[-1]], times[tag]):.3f}")
    return times


def residual(args: argparse.Namespace) -> None:
    per_layer: dict[str, Any] | None = None
    if args.per_layer:
        per_layer = {"on": False, **{t: defaultdict(list) for t in "ABC"}}
    models, feeds = _residual_models(args.batch, per_layer)
    from zoo import export

    sess = _ort_session(export("resnet50", "/tmp/pytfrt-zoo", small=False, with_torch=False).path)
    ref = sess.run(None, feeds)[0]
    for tag, m in models.items():
        _error(tag, m, feeds, ref)
    calls: dict[str, Callable[[], Any]] = {t: partial(m, **feeds) for t, m in models.items()}
    calls["ORT"] = lambda: sess.run(None, feeds)

    def start_timing_layers() -> None:
        if per_layer is not None:
            per_layer["on"] = True

    _interleaved(calls, args.calls, start_timing_layers)
    if per_layer is not None:
        print("residual convolutions in the models, by input shape (paired per call):")
        for shape, a in per_layer["A"].items():
            b, c = per_layer["B"][shape], per_layer["C"][shape]
            print(f"  {shape}: calls {len(a)}, A {1e6 * statistics.median(a):.0f} us, "
                  f"B/A {_paired(a, b):.3f}, C/A {_paired(a, c):.3f}")


def _conv_pd(dc: Any, src_md: Any, dst_md: Any, cin: int, cout: int, k: int, add: bool,
             user_scratchpad: bool) -> tuple[Any, Any]:
    """A stride-1 SAME ``k`` x ``k`` convolution's primitive descriptor (weights in oneDNN's
    preferred format, a bias, the residual as a ``sum`` post-op when ``add``, then ReLU) and
    its bias descriptor."""
    lib = dc.library()
    w_any = lib.new("dnnl_memory_desc_create_with_tag", 4, dc._DIMS(cout, cin, k, k), dc._F32,
                    dc._FORMAT_ANY)
    b_md = lib.strided_md((cout,), (1,))
    attr = lib.new("dnnl_primitive_attr_create")
    if user_scratchpad:
        lib.call("dnnl_primitive_attr_set_scratchpad_mode", attr, dc._SCRATCHPAD_USER)
    po = lib.new("dnnl_post_ops_create")
    if add:
        lib.call("dnnl_post_ops_append_sum", po, 1.0, 0, 0)
    lib.call("dnnl_post_ops_append_eltwise", po, *dc.eltwise_for("relu", 0.0))
    lib.call("dnnl_primitive_attr_set_post_ops", attr, po)
    pad = dc._DIMS(k // 2, k // 2)
    pd = lib.new("dnnl_convolution_forward_primitive_desc_create", lib.engine,
                 dc._FORWARD_INFERENCE, dc._CONV_DIRECT, src_md, w_any, b_md, dst_md,
                 dc._DIMS(1, 1), dc._DIMS(0, 0), pad, pad, attr)
    return pd, b_md


class _Chain:
    """One stage's bottleneck blocks as oneDNN primitives (one thread, one layout)."""

    def __init__(self, blocked: bool, h: int, c: int, mid: int, blocks: int) -> None:
        from pytfrt.backends.cpu import _dnnl_conv as dc

        self.dc, self.lib = dc, dc.library()
        if self.lib is None:
            raise SystemExit("oneDNN is not available")
        self.blocked = blocked
        self.keep: list[Any] = []
        self.steps: list[tuple[Any, Any]] = []
        self.impls: set[str] = set()
        io_md = self._md(c, h)
        x, _ = self._memory(io_md)
        for _ in range(blocks):
            p1, m1 = self._conv(io_md, self._md(mid, h), c, mid, 1, False)
            t1, _ = self._memory(m1)
            p2, m2 = self._conv(m1, self._md(mid, h), mid, mid, 3, False)
            t2, _ = self._memory(m2)
            p3, _ = self._conv(m2, io_md, mid, c, 1, True)
            for prim, src, dst in ((p1, x, t1), (p2, t1, t2), (p3, t2, x)):
                self._step(prim, src, dst)

    def _md(self, c: int, h: int) -> Any:
        lib, dims = self.lib, (1, c, h, h)
        if self.blocked:
            return lib.new("dnnl_memory_desc_create_with_tag", 4, self.dc._DIMS(*dims),
                           self.dc._F32, _NCHW16C)
        return lib.strided_md(dims, (h * h * c, 1, h * c, c))

    def _memory(self, md: Any) -> tuple[Any, np.ndarray]:
        """A memory object over new random data (small values: no denormals, no overflow)."""
        size = int(self.lib.fn["dnnl_memory_desc_get_size"](md))
        a = (np.random.default_rng(len(self.keep)).standard_normal(size // 4) * 0.05
             ).astype(np.float32)
        self.keep.append(a)
        mem = self.lib.new("dnnl_memory_create", md, self.lib.engine,
                           ctypes.c_void_p(a.ctypes.data))
        return mem, a

    def _conv(self, src_md: Any, dst_md: Any, cin: int, cout: int, k: int,
              add: bool) -> tuple[tuple[Any, Any, Any], Any]:
        lib, dc = self.lib, self.dc
        pd, b_md = _conv_pd(dc, src_md, dst_md, cin, cout, k, add, user_scratchpad=False)
        self.impls.add(dc._impl_name(lib, pd))
        w, _ = self._memory(lib.fn["dnnl_primitive_desc_query_md"](pd, dc._Q_WEIGHTS_MD, 0))
        b, _ = self._memory(b_md)
        dst = lib.fn["dnnl_primitive_desc_query_md"](pd, _Q_DST_MD, 0)
        return (lib.new("dnnl_primitive_create", pd), w, b), dst

    def _step(self, prim: tuple[Any, Any, Any], src: Any, dst: Any) -> None:
        dc = self.dc
        handle, w, b = prim
        args = (dc._ExecArg * 4)(dc._ExecArg(dc._ARG_SRC, src.value),
                                 dc._ExecArg(dc._ARG_DST, dst.value),
                                 dc._ExecArg(dc._ARG_WEIGHTS, w.value),
                                 dc._ExecArg(dc._ARG_BIAS, b.value))
        self.keep.append(args)
        self.steps.append((handle, args))

    def run(self) -> float:
        """Thread CPU seconds of one pass over the chain."""
        lib = self.lib
        stream = lib.stream()
        t0 = time.thread_time()
        for handle, args in self.steps:
            lib.call("dnnl_primitive_execute", handle, stream, 4, args)
        lib.call("dnnl_stream_wait", stream)
        return time.thread_time() - t0


class _SplitChain:
    """The same blocks on both threads (:mod:`_spin_pool`, as pytfrt runs its convolutions):
    ``NHWC`` through pytfrt's own plans (split as they split: output rows at 14x14 and 28x28,
    output channels into per-thread buffers at 7x7), or ``nChw16c`` with every layer split
    into two output-channel halves, each a primitive writing its channel blocks of the output
    in place and streaming its half of the filter."""

    def __init__(self, blocked: bool, h: int, c: int, mid: int, blocks: int) -> None:
        from pytfrt.backends.cpu import _dnnl_conv as dc

        self.dc, self.lib = dc, dc.library()
        self.blocked, self.h = blocked, h
        self.impls: set[str] = set()
        self.keep: list[Any] = []
        rng = np.random.default_rng(0)
        self.x = np.ascontiguousarray((rng.standard_normal((1, h, h, c)) * 0.05), np.float32)
        t1 = np.empty((1, h, h, mid), np.float32)
        t2 = np.empty((1, h, h, mid), np.float32)
        self.keep.extend((t1, t2))  # the blocked steps hold their addresses only
        self.steps: list[Callable[[], None]] = []
        for _ in range(blocks):
            for cin, cout, k, src, dst, add in ((c, mid, 1, self.x, t1, False),
                                                (mid, mid, 3, t1, t2, False),
                                                (mid, c, 1, t2, self.x, True)):
                w = (rng.standard_normal((k, k, cin, cout)) * (0.5 / (k * k * cin) ** 0.5)
                     ).astype(np.float32)
                b = np.zeros(cout, np.float32)
                self.steps.append(self._blocked(w, b, src, dst, add) if blocked
                                  else self._nhwc(w, b, src, dst, add))

    def _nhwc(self, w: np.ndarray, b: np.ndarray, src: np.ndarray, dst: np.ndarray,
              add: bool) -> Callable[[], None]:
        from pytfrt.backends.cpu import conv

        k = w.shape[0]
        plan = conv.plan_conv2d(w, layout="NHWC", pads=(k // 2,) * 4, bias=b,
                                activation="relu", algorithm="dnnl")
        run = conv.runner(plan)
        residual = dst if add else None
        run(src, residual, dst)  # the first call makes the primitives and the launcher
        assert plan.dnnl is not None
        self.impls.add(str(plan.dnnl.impl(src.shape, self.dc.RESIDUAL_IN_DST if add else 0)))
        self.keep.append(plan)
        return lambda: run(src, residual, dst)

    def _blocked(self, w: np.ndarray, b: np.ndarray, src: np.ndarray, dst: np.ndarray,
                 add: bool) -> Callable[[], None]:
        import threading

        dc, lib, h = self.dc, self.lib, self.h
        k, _, cin, cout = w.shape
        bounds = dc.channel_bounds(cout, 2)
        prims = []
        for c0, c1 in zip(bounds, bounds[1:], strict=False):
            p = dc._Prim(lib)
            tag = (lib.new("dnnl_memory_desc_create_with_tag", 4, dc._DIMS(*dims), dc._F32,
                           _NCHW16C) for dims in ((1, cin, h, h), (1, c1 - c0, h, h)))
            p.src_md, p.dst_md = next(tag), next(tag)
            p.pd, b_md = _conv_pd(dc, p.src_md, p.dst_md, cin, c1 - c0, k, add,
                                  user_scratchpad=True)
            dc.query_impl(lib, p)
            self.impls.add(p.impl)
            w_md = lib.fn["dnnl_primitive_desc_query_md"](p.pd, dc._Q_WEIGHTS_MD, 0)
            size = int(lib.fn["dnnl_memory_desc_get_size"](w_md))
            wb = (np.random.default_rng(c0).standard_normal(size // 4)
                  * (0.5 / (k * k * cin) ** 0.5)).astype(np.float32)
            bb = b[c0:c1].copy()
            self.keep.extend((wb, bb))
            p.weights = lib.new("dnnl_memory_create", w_md, lib.engine,
                                ctypes.c_void_p(wb.ctypes.data))
            p.bias = lib.new("dnnl_memory_create", b_md, lib.engine,
                             ctypes.c_void_p(bb.ctypes.data))
            p.prim = lib.new("dnnl_primitive_create", p.pd)
            p.dst_off = 4 * c0 * h * h  # channel blocks c0 // 16 ... of nChw16c
            p.residual = dc.RESIDUAL_IN_DST if add else dc.NO_RESIDUAL
            prims.append(p)
        self.keep.append(prims)
        lock = threading.Lock()
        job = dc._job(prims, cout, lock)
        xa, ya = src.ctypes.data, dst.ctypes.data  # (same sizes: nChw16c of 16k channels)

        def go() -> None:
            if not dc.run_job(lib, job, xa, ya, 0):
                for p in prims:
                    dc.run_part(lib, p, lock, xa, ya, 0)

        return go

    def run(self) -> float:
        """Wall seconds of one pass over the chain."""
        t0 = time.perf_counter()
        for step in self.steps:
            step()
        return time.perf_counter() - t0


def chain(args: argparse.Namespace) -> None:
    from pytfrt.backends.cpu import _dnnl_conv as dc

    dc._pin_one_thread()
    kind = _SplitChain if args.threads == 2 else _Chain
    for h, c, mid, blocks in ((28, 512, 128, 4), (14, 1024, 256, 6), (7, 2048, 512, 3)):
        plain: Any = kind(False, h, c, mid, blocks)
        blocked: Any = kind(True, h, c, mid, blocks)
        for _ in range(3):
            plain.run()
            blocked.run()
        ta: list[float] = []
        tb: list[float] = []
        for i in range(args.calls):
            first, second = (plain, blocked) if i % 2 else (blocked, plain)
            t1, t2 = first.run(), second.run()
            ta.append(t1 if first is plain else t2)
            tb.append(t2 if first is plain else t1)
        print(f"{h}x{h} {c} -> {mid} -> {c}, {blocks} blocks: "
              f"NHWC {1e3 * statistics.median(ta):.2f} ms ({', '.join(sorted(plain.impls))}); "
              f"nChw16c {1e3 * statistics.median(tb):.2f} ms "
              f"({', '.join(sorted(blocked.impls))}); nChw16c / NHWC {_paired(ta, tb):.3f}")


def _setting(text: str) -> tuple[str, dict[str, Any]]:
    """``"B:NAME=value;NAME=value"`` -> ``("B", {NAME: value})`` (``--variant``)."""
    tag, _, rest = text.partition(":")
    values: dict[str, Any] = {}
    for item in filter(None, rest.split(";")):
        name, _, value = item.partition("=")
        values[name.strip()] = ast.literal_eval(value.strip())  # numbers, strings, tuples
    return tag, values


def _staggered_empty(plain: Callable[..., np.ndarray], step: int) -> Callable[..., np.ndarray]:
    """:func:`pytfrt.backends.cpu.arena.empty` whose successive arrays start ``step`` more
    bytes (modulo 4 KiB) past a page than the last (``ARENA_STAGGER``): activation buffers
    then differ in their low address bits instead of all starting 64 bytes past a page."""
    count = [0]

    def empty(shape: Any, dtype: Any) -> np.ndarray:
        count[0] += 1
        off = (count[0] * step) % 4096
        dt = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        raw = plain((nbytes + off + 4096,), np.uint8)
        start = (-raw.ctypes.data % 4096) + off
        return raw[start:start + nbytes].view(dt).reshape(shape)

    return empty


def knobs(args: argparse.Namespace) -> None:
    """ResNet-50 compiled once per ``--variant`` (``A`` as it is), each variant's
    :mod:`_dnnl_conv` settings in force while its primitives are made (its first calls) and
    restored after, then every model and ONNX Runtime called in turn: per-call paired ratios
    over A.  Only settings read when a shape's primitives are made (how convolutions split)
    can differ between the models of one process."""
    import zoo

    import pytfrt
    from pytfrt.backends.cpu import _dnnl_blocked as blocked
    from pytfrt.backends.cpu import _dnnl_conv as dc
    from pytfrt.backends.cpu import arena

    zm = zoo.export("resnet50", "/tmp/pytfrt-zoo", small=False, with_torch=False)
    feeds = zm.make_inputs(batch=args.batch)
    sess = _ort_session(zm.path, args.ort_threads)
    ref = sess.run(None, feeds)[0]
    calls: dict[str, Callable[[], Any]] = {}
    plain_empty = arena.empty
    for tag, values in [("A", {}), *map(_setting, args.variant)]:
        values = dict(values)
        stagger = int(values.pop("ARENA_STAGGER", 0))
        where = {name: next((m for m in (dc, blocked) if hasattr(m, name)), None)
                 for name in values}
        unknown = [name for name, m in where.items() if not name.isupper() or m is None]
        if unknown:
            raise SystemExit(f"--variant {tag}: no setting {', '.join(unknown)} in _dnnl_conv "
                             "or _dnnl_blocked")
        saved = {name: getattr(where[name], name) for name in values}
        for name, value in values.items():
            setattr(where[name], name, value)
        if stagger:
            arena.empty = _staggered_empty(plain_empty, stagger)  # type: ignore[assignment]
        try:
            model = pytfrt.compile(str(zm.path))
            _error(f"{tag} {values} ARENA_STAGGER={stagger}", model, feeds, ref)
        finally:
            for name, value in saved.items():
                setattr(where[name], name, value)
            arena.empty = plain_empty  # type: ignore[assignment]
        calls[tag] = partial(model, **feeds)
    calls["ORT"] = lambda: sess.run(None, feeds)
    _interleaved(calls, args.calls,
                 clock=time.thread_time if args.clock == "thread" else time.perf_counter)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("residual", help="sum vs binary-add residual in ResNet-50")
    r.add_argument("--batch", type=int, default=1)
    r.add_argument("--calls", type=int, default=40)
    r.add_argument("--per-layer", action="store_true")
    c = sub.add_parser("chain", help="NHWC vs nChw16c bottleneck chains, one thread")
    c.add_argument("--calls", type=int, default=30)
    c.add_argument("--threads", type=int, choices=(1, 2), default=1,
                   help="2: both threads, layers split as described in _SplitChain")
    k = sub.add_parser("knobs", help="ResNet-50 with different split settings, interleaved")
    k.add_argument("--batch", type=int, default=1)
    k.add_argument("--calls", type=int, default=40)
    k.add_argument("--variant", action="append", default=[],
                   help="TAG:NAME=value[;NAME=value] of _dnnl_conv settings (repeatable)")
    k.add_argument("--ort-threads", type=int, default=2,
                   help="ONNX Runtime's threads (with PYTFRT_NUM_THREADS=1: one thread each)")
    k.add_argument("--clock", choices=("wall", "thread"), default="wall",
                   help="thread: the calling thread's CPU time (one thread each: what the "
                        "load does not change)")
    args = ap.parse_args(argv)
    {"residual": residual, "chain": chain, "knobs": knobs}[args.what](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
