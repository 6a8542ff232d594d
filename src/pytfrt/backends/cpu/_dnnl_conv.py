"""float32 forward convolution through oneDNN's convolution primitive (C API, via ctypes).

Private helper of :mod:`pytfrt.backends.cpu.conv`.  When the ``onednn-cpu-gomp`` wheel's
``libdnnl.so.3`` is present (found like the GEMM's, :func:`pytfrt.backends.cpu._blas.
_find_library`), :func:`pytfrt.backends.cpu.conv.plan_conv2d` attaches a :class:`DnnlConv` to
float32 plans and ``algorithm="auto"`` runs it (``docs/kernels.md``).  ``PYTFRT_CONV=builtin``
(read once, at first use) keeps the built-in algorithms.

What it does: one oneDNN convolution primitive per input shape (created on first use of the
shape, forward inference), with bias and the plan's epilogue as fused post-ops (``sum`` for the
residual, then an ``eltwise`` for the activation).  Activations stay in the plan's plain layout
(``NHWC`` = oneDNN's ``acdb``, or ``NCHW``): callers see ordinary arrays.  The filter is
reordered once per primitive into the blocked format the primitive prefers.

Threading: every primitive runs single-threaded on the calling thread (OpenMP team size one,
as for the GEMMs of :mod:`pytfrt.backends.cpu._blas`); a convolution is split (by batch,
output rows or, for small images, output channels: :class:`DnnlConv`) into parts that
:mod:`pytfrt.backends.cpu._spin_pool` runs on pytfrt's own threads without the GIL (or, for
a second caller while one uses it, :func:`pytfrt.backends.cpu._parallel.parallel_for`).  Measured:
oneDNN's two-thread OpenMP teams waited up to a scheduler tick (4 ms) per call on this
project's shared 2-core machines, where the caller-runs-the-rest shards of ``_parallel``
never wait for a descheduled thread (``docs/kernels.md``).  Primitives use user-managed
scratchpads, so one primitive may run from several threads at once: every thread
has its own stream, memory objects and scratchpad buffer.  Prepared filters live in
transparent-huge-page memory (:func:`_filter_memory`).
"""

from __future__ import annotations

import ctypes
import mmap
import threading
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from pytfrt import config
from pytfrt.backends.cpu import _blas, _parallel, _part_balance, _silu, _spin_pool
from pytfrt.backends.cpu._geometry import out_size
from pytfrt.backends.cpu.op_math import ACTIVATIONS

# -- the C API: enum values of oneDNN 3.x (oneapi/dnnl/dnnl_types.h, dnnl_common_types.h) ------
_F32 = 3  # dnnl_f32
_CPU = 1  # dnnl_cpu
_STREAM_IN_ORDER = 1  # dnnl_stream_in_order
_FORMAT_ANY = 1  # dnnl_format_tag_any
_FORWARD_INFERENCE = 96  # dnnl_forward_inference
_CONV_DIRECT = 0x1  # dnnl_convolution_direct
_SCRATCHPAD_USER = 1  # dnnl_scratchpad_mode_user
_Q_IMPL_INFO = 8  # dnnl_query_impl_info_str
_Q_WEIGHTS_MD = 131  # dnnl_query_weights_md
_Q_SCRATCHPAD_MD = 136  # dnnl_query_scratchpad_md
_ARG_SRC, _ARG_DST, _ARG_WEIGHTS, _ARG_BIAS, _ARG_SCRATCHPAD = 1, 17, 33, 41, 80
_ARG_FROM, _ARG_TO = 1, 17
_ARG_POST_OP0_SRC1 = 32768 * 1 | 2  # DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1
_BINARY_ADD = 0x1FFF0  # dnnl_binary_add
NO_RESIDUAL, RESIDUAL_IN_DST, RESIDUAL_OPERAND = 0, 1, 2
BINARY_RESIDUAL_IMPLS = ("brgconv",)
"""Implementations trusted with :data:`RESIDUAL_OPERAND` (``brgconv``, ``brgconv_1x1``: the
dense NHWC convolutions; oneDNN 3.2's ``jit:avx512_core`` grouped kernels gave wrong sums
with a full-tensor binary post-op in this project's tests, so other kernels copy instead)."""
"""Residual modes of a primitive: none; ``sum`` post-op (the output buffer holds the residual
on entry); ``binary add`` post-op reading the residual from its own buffer (no copy)."""
_ALLOCATE = ctypes.c_void_p(ctypes.c_size_t(-1).value)  # DNNL_MEMORY_ALLOCATE
_ELT_ALGS = {"eltwise_relu": 0x20, "eltwise_tanh": 0x21, "eltwise_logistic": 0x29,
             "eltwise_gelu_tanh": 0x2B, "eltwise_swish": 0x2C, "eltwise_clip_v2": 0x2F,
             "eltwise_gelu_erf": 0x31, "eltwise_hardswish": 0x34}
"""oneDNN's ``dnnl_alg_kind_t`` values of the eltwise algorithms the activations use."""

_DIMS = ctypes.c_int64 * 12  # dnnl_dims_t
_GIL_HELD = frozenset({"dnnl_memory_set_data_handle", "dnnl_memory_get_data_handle"})
"""oneDNN calls made without releasing the GIL (they only store or read a pointer)."""


class _ExecArg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", ctypes.c_void_p)]


def eltwise_for(activation: str, alpha: float) -> tuple[int, float, float] | None:
    """``(alg_kind, alpha, beta)`` of oneDNN's eltwise post-op for a pytfrt activation (its
    :data:`pytfrt.backends.cpu.op_math.ACTIVATIONS` record; ``None`` for ``"none"``)."""
    act = ACTIVATIONS.get(activation)
    if act is None or act.dnnl is None:
        return None
    alg, a, beta = act.dnnl
    return _ELT_ALGS[alg], (alpha if a is None else a), beta


class _Lib:
    """The loaded library with argument types set, one engine, and a stream per thread."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        p = ctypes.c_void_p
        pp = ctypes.POINTER(ctypes.c_void_p)
        sigs: dict[str, tuple[list[Any], Any]] = {
            "dnnl_engine_create": ([pp, ctypes.c_int, ctypes.c_size_t], ctypes.c_int),
            "dnnl_stream_create": ([pp, p, ctypes.c_uint], ctypes.c_int),
            "dnnl_stream_wait": ([p], ctypes.c_int),
            "dnnl_memory_desc_create_with_strides": (
                [pp, ctypes.c_int, _DIMS, ctypes.c_int, _DIMS],
                ctypes.c_int,
            ),
            "dnnl_memory_desc_create_with_tag": (
                [pp, ctypes.c_int, _DIMS, ctypes.c_int, ctypes.c_int],
                ctypes.c_int,
            ),
            "dnnl_memory_desc_destroy": ([p], ctypes.c_int),
            "dnnl_memory_desc_clone": ([pp, p], ctypes.c_int),
            "dnnl_memory_desc_equal": ([p, p], ctypes.c_int),
            "dnnl_memory_desc_get_size": ([p], ctypes.c_size_t),
            "dnnl_memory_desc_create_submemory": ([pp, p, _DIMS, _DIMS], ctypes.c_int),
            "dnnl_memory_desc_query": ([p, ctypes.c_int, p], ctypes.c_int),
            "dnnl_primitive_attr_create": ([pp], ctypes.c_int),
            "dnnl_primitive_attr_destroy": ([p], ctypes.c_int),
            "dnnl_primitive_attr_set_scratchpad_mode": ([p, ctypes.c_int], ctypes.c_int),
            "dnnl_primitive_attr_set_post_ops": ([p, p], ctypes.c_int),
            "dnnl_post_ops_create": ([pp], ctypes.c_int),
            "dnnl_post_ops_destroy": ([p], ctypes.c_int),
            "dnnl_post_ops_append_eltwise": (
                [p, ctypes.c_int, ctypes.c_float, ctypes.c_float],
                ctypes.c_int,
            ),
            "dnnl_post_ops_append_binary": ([p, ctypes.c_int, p], ctypes.c_int),
            # int8 primitives (_dnnl_int8): run-time scales and zero points, matmul
            "dnnl_primitive_attr_set_scales_mask": ([p, ctypes.c_int, ctypes.c_int], ctypes.c_int),
            "dnnl_primitive_attr_set_zero_points_mask": (
                [p, ctypes.c_int, ctypes.c_int], ctypes.c_int),
            "dnnl_matmul_primitive_desc_create": ([pp, p, p, p, p, p, p], ctypes.c_int),
            "dnnl_post_ops_append_sum": (
                [p, ctypes.c_float, ctypes.c_int32, ctypes.c_int],
                ctypes.c_int,
            ),
            "dnnl_convolution_forward_primitive_desc_create": (
                [pp, p, ctypes.c_int, ctypes.c_int, p, p, p, p, _DIMS, _DIMS, _DIMS, _DIMS, p],
                ctypes.c_int,
            ),
            "dnnl_reorder_primitive_desc_create": ([pp, p, p, p, p, p], ctypes.c_int),
            "dnnl_binary_primitive_desc_create": ([pp, p, ctypes.c_int, p, p, p, p],
                                                  ctypes.c_int),
            "dnnl_pooling_forward_primitive_desc_create": (
                [pp, p, ctypes.c_int, ctypes.c_int, p, p, _DIMS, _DIMS, _DIMS, _DIMS, _DIMS, p],
                ctypes.c_int,
            ),
            "dnnl_primitive_desc_query_md": ([p, ctypes.c_int, ctypes.c_int], p),
            "dnnl_primitive_desc_query": ([p, ctypes.c_int, ctypes.c_int, p], ctypes.c_int),
            "dnnl_primitive_desc_next_impl": ([p], ctypes.c_int),
            "dnnl_primitive_desc_destroy": ([p], ctypes.c_int),
            "dnnl_primitive_create": ([pp, p], ctypes.c_int),
            "dnnl_primitive_destroy": ([p], ctypes.c_int),
            "dnnl_primitive_execute": ([p, p, ctypes.c_int, p], ctypes.c_int),
            "dnnl_memory_create": ([pp, p, p, p], ctypes.c_int),
            "dnnl_memory_destroy": ([p], ctypes.c_int),
            "dnnl_memory_set_data_handle": ([p, p], ctypes.c_int),
            "dnnl_memory_get_data_handle": ([p, pp], ctypes.c_int),
        }
        # Calls that only set a pointer keep the GIL (PyDLL): each GIL release of a ctypes call
        # is a chance for a helper thread to take the GIL and make the caller wait for it;
        # only the primitive's execution (and creation) should hand it over.
        keep_gil = ctypes.PyDLL(lib._name, handle=lib._handle)
        self.fn: dict[str, Callable[..., Any]] = {}
        for name, (argtypes, restype) in sigs.items():
            f = getattr(keep_gil if name in _GIL_HELD else lib, name)
            f.argtypes = argtypes
            f.restype = restype
            self.fn[name] = f
        self.engine = self.new("dnnl_engine_create", _CPU, 0)
        self.local = threading.local()
        execute, wait, set_handle = (
            int(ctypes.cast(self.fn[name], ctypes.c_void_p).value or 0)  # type: ignore[arg-type]
            for name in ("dnnl_primitive_execute", "dnnl_stream_wait",
                         "dnnl_memory_set_data_handle")
        )
        self.addresses = (execute, wait, set_handle)
        """Addresses of the C functions :mod:`_spin_pool`'s native loops call."""
        self.fns = np.array(self.addresses, np.int64)
        """The same, as the array :func:`_spin_pool.run_row` takes."""

    def call(self, name: str, *args: Any) -> None:
        status = self.fn[name](*args)
        if status != 0:
            raise RuntimeError(f"oneDNN {name} failed with status {status}")

    def new(self, name: str, *args: Any) -> ctypes.c_void_p:
        """Call a ``dnnl_*_create`` function and return the handle it made."""
        h = ctypes.c_void_p()
        self.call(name, ctypes.byref(h), *args)
        return h

    def stream(self) -> ctypes.c_void_p:
        s = getattr(self.local, "stream", None)
        if s is None:
            s = self.new("dnnl_stream_create", self.engine, _STREAM_IN_ORDER)
            self.local.stream = s
        return s

    def stream_handle(self) -> int:
        """This thread's stream (:meth:`stream`) as an integer handle."""
        h = getattr(self.local, "stream_int", 0)
        if not h:
            h = self.local.stream_int = int(self.stream().value or 0)
        return h

    def new_stream_handle(self) -> int:
        """A new stream as an integer handle (for :mod:`_spin_pool`'s thread slots; never
        destroyed: one per slot per process)."""
        return int(self.new("dnnl_stream_create", self.engine, _STREAM_IN_ORDER).value or 0)

    def strided_md(self, dims: tuple[int, ...], strides: tuple[int, ...],
                   dtype: int = _F32) -> ctypes.c_void_p:
        """A memory descriptor of ``dims`` with element ``strides`` (``dtype``: oneDNN's
        ``dnnl_data_type_t``, float32 by default)."""
        return self.new(
            "dnnl_memory_desc_create_with_strides", len(dims), _DIMS(*dims), dtype,
            _DIMS(*strides)
        )


_lock = threading.Lock()
_loaded = False
_lib: _Lib | None = None


def library() -> _Lib | None:
    """The oneDNN library (loaded once), or ``None`` if absent or ``PYTFRT_CONV=builtin``."""
    global _loaded, _lib
    if _loaded:
        return _lib
    with _lock:
        if not _loaded:
            if config.choice("PYTFRT_CONV") != "builtin":
                raw = _blas._find_library()
                if raw is not None:
                    try:
                        _lib = _Lib(raw)
                    except (AttributeError, RuntimeError):  # pragma: no cover - old library
                        _lib = None
            _loaded = True
    return _lib


def available() -> bool:
    """Whether oneDNN convolutions may be used (library present, not disabled)."""
    return library() is not None


BLOCKED = "NCHW16c"
"""The channel-blocked activation layout (oneDNN's ``nChw16c``): an NHWC image of ``C``
channels (a multiple of :data:`BLOCK`) stored as ``(N, C / 16, H, W, 16)``, what ``-tg-dnnl-
blocked`` gives runs of convolutions (:mod:`pytfrt.backends.cpu._dnnl_blocked`); filters stay
HWIO as for ``NHWC``."""
BLOCK = 16
STEM = "NCHW>NHWC"
"""The layout of a convolution reading an NCHW image and writing NHWC (``-tg-conv-nchw-input``:
a network's first convolution reads the caller's NCHW image without the transpose before it).
Filters are HWIO as for ``NHWC``.  oneDNN 3.2 has a fast (``jit:avx512_core``) kernel for an
NCHW source only with an ``nChw16c`` destination, which is NHWC when the output has exactly
16 channels (MobileNetV3's stem); other channel counts get its reference kernel, which
:class:`DnnlConv` does not use (the caller falls back to a transpose and an NHWC convolution)."""
_TAG_NCHW16C = 78
"""oneDNN's ``dnnl_nChw16c`` (``dnnl_aBcd16b``) format tag (the same value in oneDNN 3.2-3.12)."""


def _nchw_dims(layout: str, shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """``(N, C, H, W)`` of an activation shape in ``layout``."""
    if layout == "NHWC":
        n, h, w, c = shape
        return n, c, h, w
    if layout == BLOCKED:
        n, cb, h, w, b = shape
        return n, cb * b, h, w
    n, c, h, w = shape
    return n, c, h, w


def activation_md(lib: _Lib, layout: str, dims: tuple[int, int, int, int]) -> ctypes.c_void_p:
    """A new memory descriptor of a C-contiguous float32 activation of NCHW ``dims`` in
    ``layout`` (``NHWC``, ``NCHW`` or :data:`BLOCKED`), to be freed by the caller.

    Raises:
        RuntimeError: oneDNN returned an error status.
    """
    if layout == BLOCKED:
        return lib.new("dnnl_memory_desc_create_with_tag", 4, _DIMS(*dims), _F32, _TAG_NCHW16C)
    return lib.strided_md(dims, _md_strides(layout, dims))


def _md_strides(layout: str, dims: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    """Element strides of a C-contiguous activation of NCHW ``dims`` in ``layout``."""
    _, c, h, w = dims
    if layout == "NHWC":
        return (h * w * c, 1, w * c, c)
    return (c * h * w, h * w, w, 1)


def _weights_md_dims(
    layout: str, kh: int, kw: int, cig: int, cout: int, groups: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """oneDNN weight dims (``OIHW`` or ``GOIHW``) and strides of a C-contiguous HWIO/OIHW."""
    cog = cout // groups
    if layout in ("NHWC", BLOCKED, STEM):  # [kh, kw, cig, cout]
        s_o, s_i, s_h, s_w = 1, cout, kw * cig * cout, cig * cout
        s_g = cog
    else:  # [cout, cig, kh, kw]
        s_o, s_i, s_h, s_w = cig * kh * kw, kh * kw, kw, 1
        s_g = cog * s_o
    if groups == 1:
        return (cout, cig, kh, kw), (s_o, s_i, s_h, s_w)
    return (groups, cog, cig, kh, kw), (s_g, s_o, s_i, s_h, s_w)


class _Prim:
    """One primitive (one part of one input shape): descriptors, weights, offsets."""

    def __init__(self, lib: _Lib) -> None:
        self.lib = lib
        self.handles: list[tuple[str, ctypes.c_void_p]] = []
        """What :meth:`destroy` frees: ``(destroy function, handle)``."""
        self.prim = ctypes.c_void_p()
        self.pd = ctypes.c_void_p()
        self.src_md = ctypes.c_void_p()
        self.dst_md = ctypes.c_void_p()
        self.weights = ctypes.c_void_p()
        self.bias: ctypes.c_void_p | None = None
        self.scratch = 0
        self.src_off = 0
        self.dst_off = 0
        self.residual = NO_RESIDUAL
        self.channels: tuple[int, int] | None = None
        """Output channels ``[c0, c1)`` of a channel part (it writes a dense per-thread buffer
        that :meth:`DnnlConv.forward` copies into the output), ``None`` for other parts."""
        self.in_place = False
        """A channel part that writes its channels of the output directly (a batch-1
        :data:`BLOCKED` output, where channel blocks ``[c0, c1)`` are one dense run): no
        buffer, no copy."""
        self.pixels = 0
        """Output pixels of the part (batch x rows x columns)."""
        self.src_dims: tuple[int, int, int, int] = (0, 0, 0, 0)
        """The part's input dims, NCHW order."""
        self.act_fn = 0
        """The address of a function applied in place to the part's output after the
        primitive (:data:`_spin_pool.ACT_FN`; 0: none)."""
        self.act_n = 0
        """How many output elements it applies to (the part's)."""
        self.impl = ""
        self.keep: Any = None
        """What owns memory handed to oneDNN (a prepared filter's :func:`_filter_memory`)."""
        self.per_thread: dict[int, tuple[Any, ctypes.c_void_p, ctypes.c_void_p, Any, Any]] = {}
        self.rows: dict[int, np.ndarray] = {}
        """Per thread, the :mod:`_spin_pool` row of :attr:`per_thread`'s memory objects
        (:meth:`DnnlConv._run`)."""
        self.variants: list[tuple[float, list[_Prim]]] | None = None
        """On the first part of a two-part split that follows the threads' speeds
        (:mod:`_part_balance`): every variant of the split, ``(the caller's share of the work,
        its parts)`` by ascending share, this split among them."""
        self.macs = 0
        """Multiply-adds of the whole convolution (on a variant's first part)."""
        self.extra: list[tuple[int, ctypes.c_void_p]] = []
        """More ``(argument, memory)`` pairs every execution passes (the run-time scales and
        zero points of an int8 primitive, :mod:`_dnnl_int8`)."""

    def own(self, kind: str, h: ctypes.c_void_p) -> ctypes.c_void_p:
        self.handles.append((kind, h))
        return h

    def create_primitive(self) -> None:
        """Make :attr:`prim` from :attr:`pd` (freed by :meth:`destroy`).

        Raises:
            RuntimeError: oneDNN returned an error status.
        """
        prim = self.lib.new("dnnl_primitive_create", self.pd)
        self.prim = self.own("dnnl_primitive_destroy", prim)

    def state(self, tid: int,
              lock: threading.Lock) -> tuple[Any, ctypes.c_void_p, ctypes.c_void_p, Any, Any]:
        """``(argument array, src, dst, scratchpad, residual memory)`` of one thread's calls
        (``tid``; :data:`_POOL_STATE` for :mod:`_spin_pool`'s), made on first use and kept in
        :attr:`per_thread` (``lock`` guards the dict)."""
        state = self.per_thread.get(tid)
        if state is not None:
            return state
        lib = self.lib
        src = lib.new("dnnl_memory_create", self.src_md, lib.engine, None)
        dst = lib.new("dnnl_memory_create", self.dst_md, lib.engine, None)
        pairs = [(_ARG_SRC, src), (_ARG_DST, dst)]
        if self.weights.value:
            pairs.append((_ARG_WEIGHTS, self.weights))
        if self.bias is not None:
            pairs.append((_ARG_BIAS, self.bias))
        sp = None
        if self.scratch:
            sp_md = lib.fn["dnnl_primitive_desc_query_md"](self.pd, _Q_SCRATCHPAD_MD, 0)
            sp = lib.new("dnnl_memory_create", sp_md, lib.engine, None)
            pairs.append((_ARG_SCRATCHPAD, sp))
        res = None
        if self.residual == RESIDUAL_OPERAND:
            res = lib.new("dnnl_memory_create", self.dst_md, lib.engine, None)
            pairs.append((_ARG_POST_OP0_SRC1, res))
        pairs.extend(self.extra)
        args = (_ExecArg * len(pairs))(*(_ExecArg(k, m.value) for k, m in pairs))
        state = (args, src, dst, sp, res)
        with lock:  # another thread may have made the same key's state meanwhile: keep one
            kept = self.per_thread.setdefault(tid, state)
        if kept is not state:
            for mem in state[1:]:
                if mem:
                    lib.fn["dnnl_memory_destroy"](mem)
        return kept

    def destroy(self) -> None:
        for state in self.per_thread.values():
            for mem in state[1:]:
                if mem:
                    self.lib.fn["dnnl_memory_destroy"](mem)
        self.per_thread.clear()
        self.rows.clear()
        for kind, h in reversed(self.handles):
            self.lib.fn[kind](h)
        self.handles.clear()


_Part = tuple[
    tuple[int, int, int, int], tuple[int, int, int, int], tuple[int, int, int, int], int, int,
    tuple[int, int] | None,
]
"""``(src NCHW dims, dst NCHW dims, pads t/b/l/r, src byte offset, dst byte offset, output
channels [c0, c1) of a channel part or None)``."""

JIT_DW_MIN_TAPS = 25
"""Depthwise convolutions (``groups == cin``) with at least this many filter taps, or with
at most :data:`JIT_DW_MAX_CHANNELS` channels, run oneDNN's ``jit_dw`` kernel instead of its
first choice on NHWC, ``brdgmm_dw``.  Measured on EfficientNet-B0's ten depthwise shapes
(batch 1, two row bands, 200 interleaved calls at real-time priority, without / with SiLU,
``jit_dw`` / ``brdgmm_dw`` medians): 5x5 filters 0.73-0.91x / 0.82-0.93x (one 1.10x with
SiLU at 14x14x672 stride 2), 112x112x32 3x3 0.75x / 0.88x; 3x3 filters on 96-480 channels
1.02-1.31x / 0.94-1.09x, so those keep ``brdgmm_dw``."""
JIT_DW_MAX_CHANNELS = 32
"""See :data:`JIT_DW_MIN_TAPS`."""


def prefers_jit_dw(attrs: dict[str, Any]) -> bool:
    """Whether a convolution with these plan attributes is a depthwise one that runs oneDNN's
    ``jit_dw`` kernel when oneDNN offers it (:data:`JIT_DW_MIN_TAPS`)."""
    groups, cin = attrs["groups"], attrs["cin"]
    return groups > 1 and groups == cin == attrs["cout"] and (
        attrs["kh"] * attrs["kw"] >= JIT_DW_MIN_TAPS or cin <= JIT_DW_MAX_CHANNELS)


def _impl_name(lib: _Lib, pd: ctypes.c_void_p) -> str:
    """oneDNN's name of a primitive descriptor's implementation (``brgconv:avx512_core``)."""
    info = ctypes.c_char_p()
    lib.call("dnnl_primitive_desc_query", pd, _Q_IMPL_INFO, 0, ctypes.byref(info))
    return (info.value or b"").decode()


PARALLEL_MIN_MACS = 250_000
"""Fewest multiply-adds for which a convolution is split into parts run in parallel.  The
mobile nets' convolutions are mostly 0.1-4M multiply-adds (10-200 us each on one core):
splitting them too (this was 4M) measured MobileNetV3-small at batch 1 3.00 -> 2.67 ms and
EfficientNet-B0 13.0 -> 11.5 ms with 500k (medians of 100 / 40 interleaved calls, the
benchmark at real-time priority on the shared machine); later runs, 500k / 250k / 125k:
MobileNetV3-small 2.03 / 1.98 / 1.91 ms (2.12 / 1.92 at 500k / 250k in another run),
EfficientNet-B0 8.94 / 9.08 / 8.85 (within the noise).  Below ~250k a part gains less than
the fork-join costs (~4 us), but splitting every convolution keeps each output-row band on
the core that wrote it for the next one.  125k -> 250k: a small CNN's lone 225k convolution
(``benchmarks/call_overhead.py``, 8->16 3x3 on 14x14) cost ~11 us of wall time split against
~9 on one thread, and 3x the process CPU (the helper's spin); MobileNetV3-small b1 /
ONNX Runtime 1.01 -> 0.97x and EfficientNet-B0 1.04 -> 1.02x (means of three interleaved
rounds of 100 calls, ``benchmarks/models.py --set``, load ~5)."""
PARTS_PER_THREAD = 1
"""Parts per thread of a split convolution (batch items or output-row bands); measured on
ResNet-50 b1 on a quiet machine: 1 part per thread 26.5-27.9 ms, 2: 31.3, 3: 30.4, 8: 34.1."""
PART_MIN_MACS = 60_000
"""Fewest multiply-adds per part."""
CHANNEL_SPLIT_MAX_PIXELS = 64
"""At batch 1, a convolution with at most this many output pixels (ResNet-50's 7x7 stage) is
split by output channels instead of rows: each thread then streams only its half of the
filter (these layers' filters are 1-9 MB, their outputs 0.1-0.4 MB), and 7 rows do not split
evenly in two.  Measured in isolation with cold filters (8 layers round-robin, CPU time per
layer): 3x3 512->512 1.15 vs 1.25-1.31 ms by rows, 1x1 512->2048 0.60 vs 0.64 ms.  In
ResNet-50 (CPU time per call of the 7x7 layers, ``benchmarks/conv_profile.py``): 3x3 3.2-3.4
vs 3.7 ms, 1x1 with residual 1.33-1.37 vs 1.55, 1x1 2048->512 1.24-1.31 vs 1.40.  Extending it
to the 14x14 layers did not pay: the 3x3 no change, 1x1 1024->256 2.76 vs 2.59-2.69 ms (the
copies of the larger outputs)."""


CHANNEL_SPLIT_MAX_ROWS = 64
"""Most output pixels over the whole batch (rows of the ``(pixels, channels)`` output) for
which a convolution on images of at most :data:`CHANNEL_SPLIT_MAX_PIXELS` pixels is split
by output channels rather than by batch (64: batch 1 only).  ResNet-50 at batch 8 with 512
(stage 4 by channels, each thread streaming half of each filter): CPU per call 279-281 vs
277-286 ms, within the noise (load 3-4), so not raised."""
SPIN_POOL = True
"""Whether split convolutions run on :mod:`_spin_pool`'s native helpers (else, and when
another thread is using them, through :func:`pytfrt.backends.cpu._parallel.parallel_for`)."""
_POOL_STATE = -1
"""Key of a part's memory objects used by :mod:`_spin_pool` (under its lock), beside the
per-thread ones of the Python path (keyed by thread id)."""


def channel_bounds(cout: int, k: int) -> list[int]:
    """``k + 1`` bounds of ``k`` output-channel parts of ``cout`` channels (``cout >= 16 * k``)
    as even as whole 16-channel blocks allow (every part but the last starts and ends on a
    block, so each writes whole 64-byte lines of a channel row): a classifier's 1000 outputs
    in two parts are 496 + 504."""
    return [cout if i == k else 16 * ((cout * i // k + 8) // 16) for i in range(k + 1)]


BATCH_MIDDLE_IMAGES = True
"""Whether a batch of at least four images split between two threads puts its two middle
images in parts of their own (``batch_bounds``)."""


def batch_bounds(n: int, k: int) -> list[int]:
    """``k + 1`` bounds of ``k`` parts of a batch of ``n`` images: ``k`` runs as even as
    whole images allow -- except that for two parts of at least four images
    (:data:`BATCH_MIDDLE_IMAGES`) the two middle images are parts of their own, four parts in
    all (8 images: 3 + 1 + 1 + 3).  The caller claims parts from the front and the helper
    from the back, so on two threads of one speed each still runs half the batch, while a
    thread that finishes its run first also takes the middle image(s) the other has not
    started: a vCPU running 1.4x slower for a while then costs the job 5/8 instead of 5.6/8
    of the batch's time, with no estimate to learn (``docs/kernels.md``)."""
    if k == 2 and n >= 4 and BATCH_MIDDLE_IMAGES:
        h = n // 2
        return [0, h - 1, h, h + 1, n]
    return [n * i // k for i in range(k + 1)]


CHANNEL_SPLIT_FILTER_RATIO = 8.0
"""At batch 1, a convolution whose filter has at least this many times as many elements as
its output (and at most :data:`CHANNEL_SPLIT_FILTER_MAX_ROWS` output pixels) is split by
output channels too, like the small images of :data:`CHANNEL_SPLIT_MAX_PIXELS` (0: never).
Split by rows, each thread streams the whole filter, and a filter larger than a core's L2 (2
MB here: ResNet-50's 14x14 3x3 256 -> 256, 2.4 MB) comes from L3 again for each block of
output it computes; split by channels each thread reads half of it (and copies its half of a
small output out of its part buffer).  Measured per layer on two threads (twelve filters in
turn, paired, channels over rows, three runs each): 14x14 3x3 256 -> 256 (filter / output
11.8) 0.954-0.983, 28x28 3x3 stride 2 256 -> 256 (11.8) 0.981-0.992, but 14x14 1x1 1024 ->
256 (5.2: a 1 MB filter, which fits) 1.022-1.061 and 256 -> 1024 with the residual (1.3)
1.084, hence 8; the 7x7 stage's layers are split by channels already."""
CHANNEL_SPLIT_FILTER_MAX_ROWS = 256
"""See :data:`CHANNEL_SPLIT_FILTER_RATIO`."""


def filter_heavy(rows: int, taps_in: int) -> bool:
    """Whether a convolution of ``rows`` output pixels and ``taps_in`` multiply-adds per output
    (``kh * kw * cin / groups``: its filter has ``taps_in / rows`` times as many elements as its
    output) is split by output channels for its filter's size
    (:data:`CHANNEL_SPLIT_FILTER_RATIO`)."""
    return (CHANNEL_SPLIT_FILTER_RATIO > 0 and rows <= CHANNEL_SPLIT_FILTER_MAX_ROWS
            and taps_in >= CHANNEL_SPLIT_FILTER_RATIO * rows)


class _Job(NamedTuple):
    """A split convolution as a :mod:`_spin_pool` job: its parts table and the largest
    scratchpad and channel-part buffer (bytes) a thread needs to run any part."""

    table: np.ndarray
    scratch: int
    buf: int
    keep: Any = None
    """What the table's rows point into besides the primitives (a balanced job's variant
    tables and contexts, :mod:`_part_balance`)."""


class DnnlConv:
    """A float32 convolution (fixed filter, bias and epilogue) run by oneDNN primitives.

    Made by :func:`make`; :meth:`ready` then :meth:`forward` run it.  Per input shape, a large
    convolution is split into up to :func:`pytfrt.backends.cpu._parallel.num_threads` parts
    (by batch, or at batch 1 in ``NHWC`` by output rows: both keep every part's activations
    dense, which oneDNN's fast kernels need; at batch 1 with at most
    :data:`CHANNEL_SPLIT_MAX_PIXELS` output pixels by output channels, each part writing a
    dense per-thread buffer copied into the output), each one single-threaded primitive, run
    by :mod:`pytfrt.backends.cpu._spin_pool` (:data:`SPIN_POOL`) or
    :func:`pytfrt.backends.cpu._parallel.parallel_for`.  Primitives whose implementation is
    oneDNN's reference code (``ref:``) are not used (the caller falls back).  Thread-safe: any
    number of threads may call :meth:`forward` at once.
    """

    def __init__(
        self,
        lib: _Lib,
        w: np.ndarray,
        bias: np.ndarray | None,
        attrs: dict[str, Any],
        eltwise: tuple[int, float, float] | None,
    ) -> None:
        self._lib = lib
        self._w: np.ndarray | None = np.ascontiguousarray(w, dtype=np.float32)
        """The filter in the user's format until the first reorder (then ``None``: the first
        reordered copy is the only one kept, see :meth:`user_filter`)."""
        self._w_shape = tuple(w.shape)
        self._bias = None if bias is None else np.array(bias, np.float32, order="C", copy=True)
        self._attrs = attrs
        self._act_fn = 0
        """The address of the in-place activation each part applies after its primitive
        (:mod:`pytfrt.backends.cpu._silu` for ``silu``; then :attr:`_eltwise` is ``None``)."""
        if eltwise is not None and eltwise[0] == _ELT_ALGS["eltwise_swish"] and eltwise[1] == 1.0:
            self._act_fn = _silu.address()
            if self._act_fn:
                eltwise = None
        self._eltwise = eltwise
        self._macs = attrs["kh"] * attrs["kw"] * attrs["cin"] // attrs["groups"]
        self._prims: dict[tuple[tuple[int, ...], int], list[_Prim] | None] = {}
        self._weights: list[_Prim] = []
        """Holders of reordered filters (shared by primitives wanting the same format and
        output channels; a holder's ``channels`` are the ones it holds)."""
        self._origin: list[_Prim] = []
        """The holders that together hold every output channel once the user's filter is
        released (:meth:`user_filter` reads the filter back from them)."""
        self._views_only = False
        """Set while split variants are made: a filter must be a view (:meth:`_view`)."""
        self._variant_prims: list[list[_Prim]] = []
        """The parts of the split variants (:meth:`_make_variants`) besides :attr:`_prims`'."""
        self._jobs: dict[tuple[tuple[int, ...], int], _Job] = {}
        """The :mod:`_spin_pool` job of each split shape and mode (made on first use)."""
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _destroy, self._prims, self._weights,
                                           self._variant_prims)

    def ready(self, x_shape: tuple[int, ...], residual: int) -> bool:
        """Whether oneDNN has (non-reference) primitives for this input shape (made now if
        new; creation errors mean ``False``)."""
        return self._get(tuple(x_shape), residual) is not None

    def prepared(self, x_shape: tuple[int, ...], residual: int) -> bool:
        """Whether :meth:`ready` has made primitives for this input shape and mode (never
        makes them: the check of a call path that falls back otherwise)."""
        return bool(self._prims.get((x_shape, residual)))

    def impl(self, x_shape: tuple[int, ...], residual: int = NO_RESIDUAL) -> str | None:
        """oneDNN's implementation name for an input shape (``None``: not used for it)."""
        prims = self._get(tuple(x_shape), residual)
        return None if prims is None else prims[0].impl

    def parts(self, x_shape: tuple[int, ...], residual: int = NO_RESIDUAL) -> int:
        """How many parts the convolution of this input shape is split into (0: not used)."""
        prims = self._get(tuple(x_shape), residual)
        return 0 if prims is None else len(prims)

    def _get(self, shape: tuple[int, ...], residual: int) -> list[_Prim] | None:
        key = (shape, int(residual))
        try:
            return self._prims[key]
        except KeyError:
            pass
        with self._lock:
            if key not in self._prims:
                made: list[_Prim] = []
                parts = self._split(shape)
                whole = self._whole_filter(shape, residual, parts)
                try:
                    for part in parts:
                        p = _Prim(self._lib)
                        made.append(p)
                        self._create(p, part, residual)
                        if p.impl.startswith("ref"):
                            raise RuntimeError(f"oneDNN reference implementation {p.impl}")
                        if residual == RESIDUAL_OPERAND and not p.impl.startswith(
                                BINARY_RESIDUAL_IMPLS):
                            raise RuntimeError(f"no residual operand for {p.impl}")
                except RuntimeError:
                    for p in made:
                        p.destroy()
                    self._prims[key] = None
                else:
                    self._prims[key] = made
                    if (made[0].channels is None if whole is None
                            else all(self._is_view(p.weights) for p in made)):
                        self._make_variants(shape, residual, made)
                if whole is not None and not self._in_use(whole):
                    self._weights.remove(whole)  # the parts could not take views of it
                    whole.destroy()
                if self._prims[key] is not None:
                    if self._w is not None:  # keep one prepared copy of the filter only
                        self._origin = [h for h in self._weights
                                        if any(p.weights is h.weights for p in made)]
                        self._w = None
            return self._prims[key]

    def _split(self, shape: tuple[int, ...]) -> list[_Part]:
        """The parts of the convolution of an input shape."""
        a = self._attrs
        layout = a["layout"]
        if layout == BLOCKED:
            return self._blocked_split(shape)
        n, c, h, w = _nchw_dims(layout, shape)
        kh, kw = a["kh"], a["kw"]
        sh, sw = a["strides"]
        dh, dw = a["dilations"]
        pt, pb, pl, pr = a["pads"]
        oh = (h + pt + pb - (dh * (kh - 1) + 1)) // sh + 1
        ow = (w + pl + pr - (dw * (kw - 1) + 1)) // sw + 1
        cout = a["cout"]
        whole: _Part = ((n, c, h, w), (n, cout, oh, ow), (pt, pb, pl, pr), 0, 0, None)
        macs = n * oh * ow * cout * self._macs
        if _parallel.num_threads() < 2 or macs < PARALLEL_MIN_MACS:
            return [whole]
        parts_wanted = min(PARTS_PER_THREAD * _parallel.num_threads(), macs // PART_MIN_MACS)
        k = parts_wanted
        if (layout == "NHWC" and a["groups"] == 1 and k >= 2 and cout >= 16 * k
                and (oh * ow <= CHANNEL_SPLIT_MAX_PIXELS and n * oh * ow <= CHANNEL_SPLIT_MAX_ROWS
                     or n == 1 and filter_heavy(oh * ow, self._macs))):
            return self._channel_parts(shape, channel_bounds(cout, k))
        if n >= 2:
            k = min(parts_wanted, n)
            return self._batch_parts(shape, batch_bounds(n, k))
        if layout != "NHWC":  # STEM too: a band of NCHW rows is not dense (oneDNN's ref kernel)
            return [whole]
        k = min(k, oh)
        if k < 2:
            return [whole]
        return self._row_parts(shape, [oh * i // k for i in range(k + 1)])

    def _out_hw(self, h: int, w: int) -> tuple[int, int]:
        """The output's rows and columns for an input of ``h`` rows and ``w`` columns (a shape
        the primitives are made for: the window fits)."""
        a = self._attrs
        pt, pb, pl, pr = a["pads"]
        oh = out_size(h, a["kh"], a["strides"][0], a["dilations"][0], pt, pb)
        ow = out_size(w, a["kw"], a["strides"][1], a["dilations"][1], pl, pr)
        assert oh is not None and ow is not None
        return oh, ow

    def _row_parts(self, shape: tuple[int, ...], bounds: list[int]) -> list[_Part]:
        """The parts of a batch-1 NHWC convolution in bands of output rows ``[bounds[i],
        bounds[i + 1])``: each part's input rows and pads from the geometry."""
        a = self._attrs
        _, c, h, w = _nchw_dims(a["layout"], shape)
        kh, sh, dh = a["kh"], a["strides"][0], a["dilations"][0]
        pt, _, pl, pr = a["pads"]
        ow = self._out_hw(h, w)[1]
        cout = a["cout"]
        parts: list[_Part] = []
        for r0, r1 in zip(bounds, bounds[1:], strict=False):
            first = r0 * sh - pt  # input row of the part's first tap (may be negative)
            last = (r1 - 1) * sh - pt + dh * (kh - 1)
            i0, i1 = max(first, 0), min(last, h - 1)
            pads = (i0 - first, last - i1, pl, pr)
            src = (1, c, i1 - i0 + 1, w)
            parts.append(
                (src, (1, cout, r1 - r0, ow), pads, 4 * i0 * w * c, 4 * r0 * ow * cout, None)
            )
        return parts

    def _variant_splits(self, shape: tuple[int, ...], made: list[_Prim]
                        ) -> list[tuple[float, list[_Part] | None]]:
        """The two-part splits of this shape for :data:`_part_balance.SHARES` (``None`` for
        the split ``made`` already is), or ``[]`` when its split does not get variants
        (:meth:`_balanced`): each share rounded to whole units of the split -- images, 16-channel
        blocks or output rows -- the even share being ``made``'s; shares that round alike are
        made once."""
        a = self._attrs
        kind = _split_kind(shape, made)
        if not self._balanced(shape, len(made), kind, sum(p.pixels for p in made)):
            return []
        make: Callable[[tuple[int, ...], list[int]], list[_Part]]
        if kind == "batch":  # whole images
            units, even, scale, make = shape[0], made[0].src_dims[0], 1, self._batch_parts
        elif kind == "channels":  # whole 16-channel blocks (cout is a multiple: _balanced)
            assert made[0].channels is not None
            units, even = a["cout"] // BLOCK, made[0].channels[1] // BLOCK
            scale, make = BLOCK, self._channel_parts
        else:  # whole rows; the even share is _split's first part
            _, _, h, w = _nchw_dims(a["layout"], shape)
            units = self._out_hw(h, w)[0]
            even, scale, make = units // 2, 1, self._row_parts
        wanted = {even} | {min(max(round(share * units), 1), units - 1)
                           for share in _part_balance.SHARES if share != 0.5}
        return [(b / units, None if b == even else make(shape, [0, scale * b, scale * units]))
                for b in sorted(wanted)]

    def _balanced(self, shape: tuple[int, ...], parts: int, kind: str, pixels: int) -> bool:
        """Whether a split of ``parts`` parts of this input shape by ``kind`` (``"batch"``,
        ``"rows"``, ``"channels"``: :func:`_split_kind`) with ``pixels`` output pixels in all
        gets variants that follow the threads' speeds (:mod:`_part_balance`): two parts of at
        least :data:`_part_balance.MIN_MACS` multiply-adds -- of at least three images, or of
        one image by rows in ``NHWC`` or by output channels in ``NHWC`` and :data:`BLOCKED`
        (the variants' filters then views of one prepared filter, :meth:`_whole_filter`)."""
        a = self._attrs
        if (parts != 2 or a["groups"] != 1 or not _part_balance.stamp_address()
                or pixels * a["cout"] * self._macs < _part_balance.MIN_MACS):
            return False
        if kind == "batch":
            return shape[0] >= 3
        if kind == "channels":
            return shape[0] == 1 and a["layout"] in ("NHWC", BLOCKED) and a["cout"] % BLOCK == 0
        return shape[0] == 1 and a["layout"] == "NHWC"

    def _whole_filter(self, shape: tuple[int, ...], residual: int,
                      parts: list[_Part]) -> _Prim | None:
        """For a split by output channels that gets variants: the holder of the whole filter
        prepared as the whole convolution's primitive wants it, made now (its primitive is
        not kept), from which the parts take their channels as views (:meth:`_view`) -- so
        that variants with other channel bounds cost no copy of the filter.  ``None`` when
        the split gets no variants or oneDNN makes no fast primitive of the whole.  Called
        with ``self._lock`` held."""
        if not parts or parts[0][5] is None:
            return None
        dst = parts[0][1]
        if not self._balanced(shape, len(parts), "channels", dst[0] * dst[2] * dst[3]):
            return None
        cout = self._attrs["cout"]
        temp = _Prim(self._lib)
        try:
            self._create(temp, self._channel_parts(shape, [0, cout])[0], residual)
        except RuntimeError:
            return None
        finally:
            temp.destroy()
        for holder in self._weights:
            if holder.channels == (0, cout) and not isinstance(holder.keep, _Prim):
                return holder
        return None

    def _is_view(self, weights: ctypes.c_void_p) -> bool:
        """Whether a prepared filter is a view of another holder's (:meth:`_view`)."""
        return any(h.weights is weights and isinstance(h.keep, _Prim) for h in self._weights)

    def _in_use(self, holder: _Prim) -> bool:
        """Whether a primitive reads ``holder``'s filter, directly or through a view."""
        readers = {id(h.weights) for h in self._weights if h.keep is holder}
        readers.add(id(holder.weights))
        return any(id(p.weights) in readers
                   for ps in [*self._prims.values(), *self._variant_prims] for p in ps or ())

    def _view(self, user_md: ctypes.c_void_p, w_md: int,
              channels: tuple[int, int]) -> ctypes.c_void_p | None:
        """Output channels ``[c0, c1)`` of the filter in format ``w_md`` as a view into a
        holder of the whole filter (``channels (0, cout)``), if that holder's bytes at ``c0``'s
        offset are exactly what reordering those channels into ``w_md`` gives (the formats
        whose output-channel blocks are outermost: ``OIhw16i16o`` of oneDNN's blocked
        kernels), else ``None``.  Decided from the memory descriptors
        (:func:`_channels_are_submemory`) or, where they do not show it, by reordering those
        channels into a probe buffer and comparing bytes.  Called with ``self._lock`` held."""
        lib, cout = self._lib, self._attrs["cout"]
        c0, c1 = channels
        size = int(lib.fn["dnnl_memory_desc_get_size"](w_md))
        for whole in self._weights:
            if whole.channels != (0, cout) or channels == (0, cout) or isinstance(
                    whole.keep, _Prim):
                continue
            total = int(lib.fn["dnnl_memory_desc_get_size"](whole.src_md))
            if total % cout or size != total // cout * (c1 - c0):
                continue
            addr = _data_handle(lib, whole.weights) + total // cout * c0
            if not (_channels_are_submemory(lib, whole.src_md, w_md, channels, total // cout)
                    or self._reorders_to(user_md, w_md, c0, addr, size)):
                continue
            holder = _Prim(lib)
            holder.channels, holder.keep = channels, whole
            holder.src_md = holder.own("dnnl_memory_desc_destroy", _clone_md(lib, w_md))
            holder.weights = holder.own("dnnl_memory_destroy", lib.new(
                "dnnl_memory_create", w_md, lib.engine, ctypes.c_void_p(addr)))
            self._weights.append(holder)
            return holder.weights
        return None

    def _reorders_to(self, user_md: ctypes.c_void_p, w_md: int, c0: int, addr: int,
                     size: int) -> bool:
        """Whether reordering the user's filter channels from ``c0`` (``user_md``) into the
        format ``w_md`` gives exactly the ``size`` bytes at ``addr`` (a reorder into a probe
        buffer).  Called with ``self._lock`` held."""
        lib = self._lib
        probe = np.empty(size, np.uint8)
        temp = _Prim(lib)
        try:
            md = temp.own("dnnl_memory_desc_destroy", _clone_md(lib, w_md))
            mem = temp.own("dnnl_memory_destroy", lib.new(
                "dnnl_memory_create", md, lib.engine, probe.ctypes.data))
            user = self._w if self._w is not None else self._read_back()
            self._reorder(user_md, user.ctypes.data + 4 * c0 * self._o_stride(), md, mem)
        finally:
            temp.destroy()
        return bool(np.array_equal(probe, np.ctypeslib.as_array(
            (ctypes.c_uint8 * size).from_address(addr))))

    def _make_variants(self, shape: tuple[int, ...], residual: int, made: list[_Prim]) -> None:
        """Give ``made`` (a new split) its variants (:attr:`_Prim.variants`) where it gets
        them; a variant oneDNN makes no fast primitive for is left out.  Called with
        ``self._lock`` held."""
        splits = self._variant_splits(shape, made)
        if len(splits) < 2:
            return
        variants: list[tuple[float, list[_Prim]]] = []
        for share, parts in splits:
            if parts is None:
                variants.append((share, made))
                continue
            prims: list[_Prim] = []
            self._views_only = made[0].channels is not None
            try:
                for part in parts:
                    p = _Prim(self._lib)
                    prims.append(p)
                    self._create(p, part, residual)
                    if p.impl not in (made[0].impl, made[1].impl):
                        raise RuntimeError(f"another implementation {p.impl}")
            except RuntimeError:
                for p in prims:
                    p.destroy()
                continue
            finally:
                self._views_only = False
            variants.append((share, prims))
            self._variant_prims.append(prims)
        if len(variants) >= 2:
            made[0].variants = variants
            made[0].macs = sum(p.pixels for p in made) * self._attrs["cout"] * self._macs

    def _blocked_split(self, shape: tuple[int, ...]) -> list[_Part]:
        """The parts of a :data:`BLOCKED` convolution: one, or per thread a run of batch
        items, or at batch 1 a run of whole 16-channel output blocks (each part writes its
        blocks of the output in place and streams its share of the filter).  Rows never split
        (a band of rows is not dense in ``nChw16c``)."""
        a = self._attrs
        n, c, h, w = _nchw_dims(BLOCKED, shape)
        pt, pb, pl, pr = a["pads"]
        oh, ow = self._out_hw(h, w)
        cout = a["cout"]
        whole: _Part = ((n, c, h, w), (n, cout, oh, ow), (pt, pb, pl, pr), 0, 0, None)
        macs = n * oh * ow * cout * self._macs
        threads = _parallel.num_threads()
        k = min(PARTS_PER_THREAD * threads, macs // PART_MIN_MACS)
        if threads < 2 or macs < PARALLEL_MIN_MACS or k < 2:
            return [whole]
        if n >= 2:
            k = min(k, n)
            return self._batch_parts(shape, batch_bounds(n, k))
        k = min(k, cout // BLOCK)
        if k < 2:
            return [whole]
        return self._channel_parts(shape, [BLOCK * (cout // BLOCK * i // k)
                                           for i in range(k + 1)])

    def _batch_parts(self, shape: tuple[int, ...], bounds: list[int]) -> list[_Part]:
        """The parts computing images ``[bounds[i], bounds[i + 1])`` of the batch (dense
        slices of input and output in every layout)."""
        a = self._attrs
        _, c, h, w = _nchw_dims(a["layout"], shape)
        pt, pb, pl, pr = a["pads"]
        oh, ow = self._out_hw(h, w)
        cout = a["cout"]
        return [((b1 - b0, c, h, w), (b1 - b0, cout, oh, ow), (pt, pb, pl, pr),
                 4 * b0 * c * h * w, 4 * b0 * cout * oh * ow, None)
                for b0, b1 in zip(bounds, bounds[1:], strict=False)]

    def _channel_parts(self, shape: tuple[int, ...], bounds: list[int]) -> list[_Part]:
        """The parts writing output channels ``[bounds[i], bounds[i + 1])``: each reads the
        whole input; in :data:`BLOCKED` (batch 1) each writes its blocks of the output in place,
        else its own buffer."""
        a = self._attrs
        n, c, h, w = _nchw_dims(a["layout"], shape)
        pt, pb, pl, pr = a["pads"]
        oh, ow = self._out_hw(h, w)
        step = oh * ow if a["layout"] == BLOCKED else 0  # output elements per channel
        return [((n, c, h, w), (n, c1 - c0, oh, ow), (pt, pb, pl, pr), 0, 4 * c0 * step,
                 (c0, c1)) for c0, c1 in zip(bounds, bounds[1:], strict=False)]

    def _create(self, p: _Prim, part: _Part, residual: int) -> None:
        lib, a = self._lib, self._attrs
        layout, groups = a["layout"], a["groups"]
        src, dst, (pt, pb, pl, pr), p.src_off, p.dst_off, p.channels = part
        p.residual = int(residual)
        p.in_place = layout == BLOCKED and p.channels is not None
        p.pixels = dst[0] * dst[2] * dst[3]
        p.src_dims = src
        p.act_fn, p.act_n = self._act_fn, p.pixels * dst[1]
        if p.channels is not None and residual == RESIDUAL_OPERAND:
            raise RuntimeError("channel parts add the residual from their own buffer")
        md_free, temp = "dnnl_memory_desc_destroy", _Prim(lib)
        _pin_one_thread()
        try:
            if layout == STEM:  # NCHW images -> NHWC (= nChw16c at 16 channels)
                p.src_md = p.own(md_free, activation_md(lib, "NCHW", src))
                p.dst_md = p.own(md_free, activation_md(
                    lib, BLOCKED if dst[1] == BLOCK else "NHWC", dst))
            else:
                p.src_md = p.own(md_free, activation_md(lib, layout, src))
                p.dst_md = p.own(md_free, activation_md(lib, layout, dst))
            cout, kh, kw = a["cout"], a["kh"], a["kw"]
            c0, c1 = p.channels or (0, cout)
            wdims, wstrides = _weights_md_dims(layout, kh, kw, a["cin"] // groups, cout, groups)
            wdims = (c1 - c0, *wdims[1:]) if groups == 1 else wdims
            user_w_md = temp.own(md_free, lib.strided_md(wdims, wstrides))
            any_w_md = temp.own(
                md_free,
                lib.new(
                    "dnnl_memory_desc_create_with_tag",
                    len(wdims),
                    _DIMS(*wdims),
                    _F32,
                    _FORMAT_ANY,
                ),
            )
            bias_md = None
            if self._bias is not None:
                bias_md = temp.own(md_free, lib.strided_md((c1 - c0,), (1,)))
                p.bias = p.own(
                    "dnnl_memory_destroy",
                    lib.new("dnnl_memory_create", bias_md, lib.engine,
                            self._bias.ctypes.data + 4 * c0),
                )
            attr = user_scratchpad_attr(lib, temp.own)
            if residual or self._eltwise is not None:
                po = temp.own("dnnl_post_ops_destroy", lib.new("dnnl_post_ops_create"))
                if residual == RESIDUAL_OPERAND:  # same dims and strides as the output
                    lib.call("dnnl_post_ops_append_binary", po, _BINARY_ADD, p.dst_md)
                elif residual:
                    lib.call("dnnl_post_ops_append_sum", po, 1.0, 0, 0)
                if self._eltwise is not None:
                    lib.call("dnnl_post_ops_append_eltwise", po, *self._eltwise)
                lib.call("dnnl_primitive_attr_set_post_ops", attr, po)
            sh, sw = a["strides"]
            dh, dw = a["dilations"]
            pd_args = (lib.engine, _FORWARD_INFERENCE, _CONV_DIRECT, p.src_md, any_w_md,
                       bias_md, p.dst_md, _DIMS(sh, sw), _DIMS(dh - 1, dw - 1), _DIMS(pt, pl),
                       _DIMS(pb, pr), attr)
            pd = lib.new("dnnl_convolution_forward_primitive_desc_create", *pd_args)
            impl = _impl_name(lib, pd)
            if impl.startswith("brdgmm_dw") and prefers_jit_dw(a):
                while not impl.startswith(("jit_dw", "ref")):  # the next one oneDNN offers
                    if lib.fn["dnnl_primitive_desc_next_impl"](pd) != 0:
                        break
                    impl = _impl_name(lib, pd)
                if not impl.startswith("jit_dw"):  # none: back to oneDNN's first choice
                    lib.call("dnnl_primitive_desc_destroy", pd)
                    pd = lib.new("dnnl_convolution_forward_primitive_desc_create", *pd_args)
                    impl = _impl_name(lib, pd)
            p.pd = p.own("dnnl_primitive_desc_destroy", pd)
            p.impl = impl
            if p.impl.startswith("ref"):
                return
            w_md = lib.fn["dnnl_primitive_desc_query_md"](p.pd, _Q_WEIGHTS_MD, 0)
            sp_md = lib.fn["dnnl_primitive_desc_query_md"](p.pd, _Q_SCRATCHPAD_MD, 0)
            p.scratch = int(lib.fn["dnnl_memory_desc_get_size"](sp_md)) if sp_md else 0
            p.weights = self._reordered(user_w_md, w_md, (c0, c1))
            p.create_primitive()
        finally:
            temp.destroy()

    def _reordered(self, user_md: ctypes.c_void_p, w_md: int,
                   channels: tuple[int, int]) -> ctypes.c_void_p:
        """Output channels ``[c0, c1)`` of the filter in the format ``w_md`` (reordered once
        per distinct format and channel range, from the user's filter while the plan has it,
        later from a copy read back by :meth:`user_filter`).  ``user_md`` describes those
        channels of the user's filter.  Called with ``self._lock`` held."""
        lib = self._lib
        for holder in self._weights:
            if holder.channels == channels and lib.fn["dnnl_memory_desc_equal"](
                    holder.src_md, w_md):
                return holder.weights
        view = self._view(user_md, w_md, channels)
        if view is not None:
            return view
        if self._views_only:
            raise RuntimeError("a split variant would need its own copy of the filter")
        holder = _Prim(lib)
        holder.channels = channels
        holder.src_md = holder.own("dnnl_memory_desc_destroy", _clone_md(lib, w_md))
        where: Any = _ALLOCATE
        if HUGE_PAGE_FILTERS:
            holder.keep, addr = _filter_memory(int(lib.fn["dnnl_memory_desc_get_size"](w_md)))
            where = ctypes.c_void_p(addr)
        holder.weights = holder.own(
            "dnnl_memory_destroy", lib.new("dnnl_memory_create", w_md, lib.engine, where)
        )
        user = self._w if self._w is not None else self._read_back()
        offset = 4 * channels[0] * self._o_stride()
        try:
            self._reorder(user_md, user.ctypes.data + offset, holder.src_md, holder.weights)
        except RuntimeError:
            holder.destroy()
            raise
        self._weights.append(holder)
        return holder.weights

    def _o_stride(self) -> int:
        """Elements between consecutive output channels of the user's filter."""
        a = self._attrs
        _, strides = _weights_md_dims(a["layout"], a["kh"], a["kw"], a["cin"] // a["groups"],
                                      a["cout"], a["groups"])
        return strides[0] if a["groups"] == 1 else strides[1]

    def _reorder(self, src_md: Any, src_addr: int, dst_md: Any, dst_mem: Any) -> None:
        """Copy the filter at ``src_addr`` (format ``src_md``) into the memory ``dst_mem``."""
        reorder(self._lib, src_md, src_addr, dst_md, dst_mem)

    def user_filter(self) -> np.ndarray:
        """The filter in the user's format (HWIO for NHWC, OIHW for NCHW), read-only: the
        array given to :func:`make` until the first primitives are made, afterwards a reorder
        back from the prepared copies (exact: reorders of float32 copy bits).  Thread-safe."""
        with self._lock:
            if self._w is not None:
                return self._w
            out = self._read_back()
        out.flags.writeable = False
        return out

    def _read_back(self) -> np.ndarray:
        """A new array holding the user's filter, reordered back from :attr:`_origin`
        (called with ``self._lock`` held)."""
        a = self._attrs
        groups = a["groups"]
        wdims, wstrides = _weights_md_dims(
            a["layout"], a["kh"], a["kw"], a["cin"] // groups, a["cout"], groups
        )
        out = np.empty(self._w_shape, np.float32)
        for holder in self._origin:
            c0, c1 = holder.channels or (0, a["cout"])
            dims = (c1 - c0, *wdims[1:]) if groups == 1 else wdims
            temp = _Prim(self._lib)
            try:
                user_md = temp.own("dnnl_memory_desc_destroy",
                                   self._lib.strided_md(dims, wstrides))
                user_mem = temp.own(
                    "dnnl_memory_destroy",
                    self._lib.new("dnnl_memory_create", user_md, self._lib.engine,
                                  out.ctypes.data + 4 * c0 * self._o_stride()),
                )
                self._reorder(holder.src_md, _data_handle(self._lib, holder.weights),
                              user_md, user_mem)
            finally:
                temp.destroy()
        return out

    def forward(self, x: np.ndarray, residual: int, y: np.ndarray,
                r: np.ndarray | None = None) -> None:
        """``y = act(conv(x) + bias [+ residual])`` for C-contiguous float32 ``x`` and ``y`` in
        the plan's layout.  ``residual``: :data:`NO_RESIDUAL`; :data:`RESIDUAL_IN_DST` (``y``
        holds it on entry); :data:`RESIDUAL_OPERAND` (``r``, C-contiguous, ``y``'s shape, not
        overlapping ``y``).  :meth:`ready` must have returned true for the shape and mode.
        """
        key = (tuple(x.shape), int(residual))
        prims = self._prims[key]
        assert prims is not None
        xa, ya = int(x.ctypes.data), int(y.ctypes.data)
        ra = int(r.ctypes.data) if r is not None and residual == RESIDUAL_OPERAND else 0
        if len(prims) == 1:
            self._run(prims[0], xa, ya, ra)
            return
        job = self._jobs.get(key)
        if job is None:
            job = _job(prims, self._attrs["cout"], self._lock)
            with self._lock:
                job = self._jobs.setdefault(key, job)
        if run_job(self._lib, job, xa, ya, ra):
            return
        if prims[0].channels is not None and not prims[0].in_place:
            y2 = y.reshape(-1, y.shape[-1])
            _parallel.parallel_for(lambda i: self._run_channels(prims[i], xa, y2), len(prims))
        else:
            _parallel.parallel_for(lambda i: self._run(prims[i], xa, ya, ra), len(prims))

    def launcher(self, x_shape: tuple[int, ...],
                 residual: int) -> Callable[[np.ndarray, np.ndarray], None] | None:
        """``go(x, y)``: :meth:`forward` of one input shape and residual mode
        (:data:`NO_RESIDUAL` or :data:`RESIDUAL_IN_DST`) with everything that does not change
        between calls looked up once -- the primitives, the :mod:`_spin_pool` job, per calling
        thread its row of memory objects and stream -- and the arrays passed to the native
        code as they are (their addresses taken there).  ``x`` and ``y`` must be what
        :meth:`forward` takes (C-contiguous float32 of the shape and its output shape, not
        overlapping; the caller checks).  ``None`` unless :meth:`ready` has made the
        primitives of the shape and mode (or for a residual operand).  Thread-safe."""
        key = (tuple(x_shape), int(residual))
        prims = self._prims.get(key)
        if not prims or residual not in (NO_RESIDUAL, RESIDUAL_IN_DST):
            return None
        lib, lock = self._lib, self._lock
        if len(prims) > 1:
            job = self._jobs.get(key)
            if job is None:
                job = _job(prims, self._attrs["cout"], lock)
                with lock:
                    job = self._jobs.setdefault(key, job)
            forward = self.forward

            def go_split(x: np.ndarray, y: np.ndarray) -> None:
                if not run_job(lib, job, 0, 0, 0, x, y):
                    forward(x, residual, y)

            return bind_job(job, go_split)
        return row_launcher(lib, prims[0], lock)

    def _run_channels(self, p: _Prim, xa: int, y2: np.ndarray) -> None:
        """Run a channel part into this thread's buffer and copy it into its channels of the
        output (``y2``: the output as pixels x channels); with the ``sum`` post-op the buffer
        first receives those channels of the residual that ``y2`` holds."""
        assert p.channels is not None
        c0, c1 = p.channels
        part = y2[:, c0:c1]
        buf = _part_buffer(part.shape)
        if p.residual == RESIDUAL_IN_DST:
            np.copyto(buf, part)
        self._run(p, xa, int(buf.ctypes.data), 0)
        np.copyto(part, buf)

    def _run(self, p: _Prim, xa: int, ya: int, ra: int) -> None:
        """Run one part on the calling thread (:func:`run_part`)."""
        run_part(self._lib, p, self._lock, xa, ya, ra)


def user_scratchpad_attr(lib: _Lib,
                         own: Callable[[str, ctypes.c_void_p], ctypes.c_void_p]) -> ctypes.c_void_p:
    """A new primitive attribute whose scratchpad the caller passes at each execution (every
    primitive here runs with a per-thread scratchpad), handed to ``own`` (a :meth:`_Prim.own`)
    to be freed with its owner.

    Raises:
        RuntimeError: oneDNN returned an error status.
    """
    _blas.pin_thread()  # a primitive made on a thread of two OpenMP threads keeps using two
    attr = own("dnnl_primitive_attr_destroy", lib.new("dnnl_primitive_attr_create"))
    lib.call("dnnl_primitive_attr_set_scratchpad_mode", attr, _SCRATCHPAD_USER)
    return attr


def query_impl(lib: _Lib, p: _Prim) -> None:
    """Set ``p.impl`` (oneDNN's implementation name) and ``p.scratch`` (its scratchpad bytes)
    from ``p.pd``.

    Raises:
        RuntimeError: the implementation is oneDNN's reference code (``ref:``: too slow to use).
    """
    p.impl = _impl_name(lib, p.pd)
    if p.impl.startswith("ref"):
        raise RuntimeError(f"oneDNN reference implementation {p.impl}")
    sp_md = lib.fn["dnnl_primitive_desc_query_md"](p.pd, _Q_SCRATCHPAD_MD, 0)
    p.scratch = int(lib.fn["dnnl_memory_desc_get_size"](sp_md)) if sp_md else 0


def reorder(lib: _Lib, src_md: Any, src_addr: int, dst_md: Any, dst_mem: Any) -> None:
    """Copy the weights at ``src_addr`` (format ``src_md``) into the memory ``dst_mem``
    (format ``dst_md``): a oneDNN reorder on the calling thread."""
    temp = _Prim(lib)
    try:
        pd = temp.own("dnnl_primitive_desc_destroy", lib.new(
            "dnnl_reorder_primitive_desc_create", src_md, lib.engine, dst_md, lib.engine, None))
        src = temp.own("dnnl_memory_destroy",
                       lib.new("dnnl_memory_create", src_md, lib.engine, src_addr))
        prim = temp.own("dnnl_primitive_destroy", lib.new("dnnl_primitive_create", pd))
        args = (_ExecArg * 2)(_ExecArg(_ARG_FROM, src.value), _ExecArg(_ARG_TO, dst_mem.value))
        stream = lib.stream()
        lib.call("dnnl_primitive_execute", prim, stream, 2, args)
        lib.call("dnnl_stream_wait", stream)
    finally:
        temp.destroy()


def run_part(lib: _Lib, p: _Prim, lock: threading.Lock, xa: int, ya: int, ra: int,
             cout: int = 0, itemsize: int = 4) -> None:
    """Run one part of a split primitive on the calling thread: one native call
    (:func:`pytfrt.backends.cpu._spin_pool.run_row`) that sets the data addresses and executes
    and waits for the primitive, with this thread's row of memory objects (made on first use;
    ``lock`` guards ``p``'s per-thread tables).  A channel part (``cout``, ``itemsize``: as
    :func:`fill_channels`) goes through this thread's part buffer."""
    if not getattr(_blas._local, "pinned", False):
        _pin_one_thread()
    tid = threading.get_ident()
    row = p.rows.get(tid)
    if row is None:
        row = np.zeros(_spin_pool.NF, np.int64)
        _fill_row(row, p, p.state(tid, lock))
        if cout:  # else the caller copies a channel part's buffer itself (_run_channels)
            fill_channels(row, p, cout, itemsize)
        with lock:
            row = p.rows.setdefault(tid, row)
    buf = 0
    if row[_spin_pool.CH_BYTES]:  # (the float32 buffer holds at least as many bytes)
        nbytes = int(row[_spin_pool.CH_BYTES] * row[_spin_pool.CH_ROWS])
        buf = int(_part_buffer((1, (nbytes + 3) // 4)).ctypes.data)
    st = _spin_pool.run_row(row, lib.fns, xa, ya, ra, lib.stream_handle(),
                            _scratch(lib, p.scratch) if p.scratch else 0, buf)
    if st != 0:
        raise RuntimeError(f"oneDNN dnnl_primitive_execute failed with status {st}")


def row_launcher(lib: _Lib, p: _Prim, lock: threading.Lock
                 ) -> Callable[[np.ndarray, np.ndarray], None]:
    """``go(x, y)``: run the whole (unsplit) primitive ``p`` -- no residual operand, not a
    channel part -- on the calling thread for the C-contiguous arrays ``x`` and ``y`` (checked
    by the caller) in one native call (:func:`_spin_pool.run_row_arrays`); the first call on
    each thread goes through :func:`run_part`, which makes that thread's row (``lock``: as
    there) and pins the thread, and later calls reuse the row and the thread's stream.  Per
    call this is ~1 us of Python against ~5-8 us for the ctypes calls that set the data
    handles and execute and wait.  Thread-safe.

    Raises:
        RuntimeError: oneDNN returned an error status.
    """
    fns, size = lib.fns, p.scratch
    mine: dict[int, tuple[np.ndarray, int]] = {}
    """Per thread id: its row of :attr:`_Prim.rows` and its stream."""
    get_ident, run_row = threading.get_ident, _spin_pool.run_row_arrays

    def go(x: np.ndarray, y: np.ndarray) -> None:
        got = mine.get(get_ident())
        if got is None:  # this thread's first call: make its row and pin it
            run_part(lib, p, lock, int(x.ctypes.data), int(y.ctypes.data), 0)
            mine[get_ident()] = (p.rows[get_ident()], lib.stream_handle())
            return
        st = run_row(got[0], fns, x, y, got[1], _scratch(lib, size) if size else 0, 0)
        if st != 0:
            raise RuntimeError(f"oneDNN dnnl_primitive_execute failed with status {st}")

    return go


def _fill_row(row: np.ndarray, p: _Prim, state: tuple[Any, ...]) -> None:
    """The fields of a :mod:`_spin_pool` part row that run primitive ``p`` with one thread's
    memory objects (``state``: :meth:`_Prim.state`); the channel-part fields stay zero."""
    args, src, dst, sp, res = state
    row[_spin_pool.PRIM] = p.prim.value or 0
    row[_spin_pool.NARGS] = len(args)
    row[_spin_pool.ARGS] = ctypes.addressof(args)
    row[_spin_pool.SRC_MEM] = src.value or 0
    row[_spin_pool.SRC_OFF] = p.src_off
    row[_spin_pool.DST_MEM] = dst.value or 0
    row[_spin_pool.DST_OFF] = p.dst_off
    row[_spin_pool.RES_MEM] = 0 if res is None else res.value or 0
    row[_spin_pool.SP_MEM] = 0 if sp is None else sp.value or 0
    row[_spin_pool.ACT_FN] = p.act_fn
    row[_spin_pool.ACT_N] = p.act_n


def fill_channels(row: np.ndarray, p: _Prim, cout: int, itemsize: int = 4) -> int:
    """The channel-part fields of ``p``'s :mod:`_spin_pool` row (``cout``: output channels of
    the whole convolution; ``itemsize``: bytes per output element, 1 for int8 results);
    returns the part buffer's size in bytes (0 for other parts)."""
    if p.channels is None or p.in_place:
        return 0
    c0, c1 = p.channels
    row[_spin_pool.CH_OFF] = itemsize * c0
    row[_spin_pool.CH_BYTES] = itemsize * (c1 - c0)
    row[_spin_pool.CH_ROWS] = p.pixels
    row[_spin_pool.CH_STRIDE] = itemsize * cout
    row[_spin_pool.CH_COPY_IN] = int(p.residual == RESIDUAL_IN_DST)
    return itemsize * (c1 - c0) * p.pixels


def _job(prims: list[_Prim], cout: int, lock: threading.Lock, itemsize: int = 4) -> _Job:
    """The :mod:`_spin_pool` job of a split primitive (``cout``: output channels of the whole
    convolution, for channel parts, whose outputs have ``itemsize`` bytes per element); its
    memory objects (:data:`_POOL_STATE`) are used only under the pool's lock."""
    table, buf = _table(prims, cout, lock, itemsize)
    variants = prims[0].variants
    if not variants or not _part_balance.stamp_address():  # (switched off since they were made)
        return _Job(table, max(p.scratch for p in prims), buf)
    tables: list[tuple[float, np.ndarray]] = []
    scratch = 0
    for share, parts in variants:
        t, b = _table(parts, cout, lock, itemsize)
        tables.append((share, t))
        buf, scratch = max(buf, b), max(scratch, *(p.scratch for p in parts))
    current = next(k for k, (_, parts) in enumerate(variants) if parts is prims)
    nominal = prims[0].macs / _part_balance.MACS_PER_US * _spin_pool.cycles_per_us()
    keep = _part_balance.job_context(table, tables, current, nominal, _spin_pool.ACT_FN,
                                     _spin_pool.ACT_N)
    return _Job(table, scratch, buf, (tables, keep))


def _table(prims: list[_Prim], cout: int, lock: threading.Lock,
           itemsize: int) -> tuple[np.ndarray, int]:
    """The :mod:`_spin_pool` table of a split's parts and the largest part buffer one needs."""
    table = np.zeros((len(prims), _spin_pool.NF), np.int64)
    buf = 0
    for i, p in enumerate(prims):
        row = table[i]
        _fill_row(row, p, p.state(_POOL_STATE, lock))
        buf = max(buf, fill_channels(row, p, cout, itemsize))
    return table, buf


def run_job(lib: _Lib, job: _Job, xa: int, ya: int, ra: int, x: np.ndarray | None = None,
            y: np.ndarray | None = None) -> bool:
    """Run a split primitive's job on :mod:`_spin_pool` for these source, destination and
    residual addresses (or, given ``x`` and ``y``, for those C-contiguous arrays' addresses
    and no residual operand).  ``False`` (nothing run) when the pool is off (:data:`SPIN_POOL`),
    has no helpers, the job has too many parts, or another thread is using it: the caller
    then runs the parts through :func:`pytfrt.backends.cpu._parallel.parallel_for`.

    Raises:
        RuntimeError: oneDNN returned an error status.
    """
    if not SPIN_POOL or len(job.table) > _spin_pool.MAX_PARTS:
        return False
    _blas.pin_thread()  # the caller runs parts too: one OpenMP thread (see _pin_one_thread)
    if x is not None and y is not None:
        xa, ya, ra = int(x.ctypes.data), int(y.ctypes.data), 0
    if _spin_pool.try_job(job.table, job.scratch, job.buf, xa, ya, ra):  # one native call
        return True
    pool = _spin_pool.pool(lib.addresses, _parallel.num_threads() - 1, lib.new_stream_handle)
    if pool is None or not pool.lock.acquire(blocking=False):
        return False
    try:
        pool.reserve(job.scratch, job.buf)
        st = (pool.run(job.table, xa, ya, ra) if x is None or y is None
              else pool.run_arrays(job.table, x, y))
    finally:
        pool.lock.release()
    if st != 0:
        raise RuntimeError(f"oneDNN dnnl_primitive_execute failed with status {st}")
    return True


def bind_job(job: _Job, slow: Callable[[np.ndarray, np.ndarray], None]
             ) -> Callable[[np.ndarray, np.ndarray], None]:
    """``go(x, y)``: :func:`run_job` of ``job`` for the C-contiguous arrays ``x`` and ``y`` in
    one native call (:func:`_spin_pool.bound`: no Python frame) while :data:`SPIN_POOL` is on
    and the pool is free, else ``slow(x, y)`` (which should try :func:`run_job` itself, then
    its other path).  ``slow`` itself without the spin pool's C module.  Thread-safe.

    Raises (from ``go``):
        RuntimeError: oneDNN returned an error status.
    """
    return _spin_pool.bound(job.table, job.scratch, job.buf, slow, globals())  # type: ignore[no-any-return]


def run_calls(fn: int, context: int, n: int) -> bool:
    """Run ``fn(context, i)`` for ``0 <= i < n`` as call parts on :mod:`_spin_pool`
    (:func:`_spin_pool.call_table`; this thread and the helpers, the thread pinned to one
    oneDNN thread first by :func:`run_job`).  ``False`` (nothing run) with one thread,
    without oneDNN (no pool), with more than :data:`_spin_pool.MAX_PARTS` parts or while
    another thread uses the pool: the caller then takes its other path.  Whatever
    ``context`` points at must stay alive until this returns.

    Raises:
        RuntimeError: a part returned a nonzero status.
    """
    if n < 2 or n > _spin_pool.MAX_PARTS or _parallel.num_threads() < 2:
        return False
    lib = library()
    if lib is None:
        return False
    return run_job(lib, _Job(_spin_pool.call_table(fn, context, n), 0, 0), 0, 0, 0)


HUGE_PAGE_FILTERS = True
"""Whether prepared filters live in transparent-huge-page memory (:func:`_filter_memory`)."""
_HUGE = 2 << 20
_CHUNK = 32 << 20
_chunk_lock = threading.Lock()
_chunk: list[Any] = [None, 0, 0]  # [array over the current chunk, its aligned start, used bytes]


def _filter_memory(size: int) -> tuple[np.ndarray, int]:
    """``(owner, address)`` of ``size`` bytes (64-byte aligned) for a prepared filter, carved
    from anonymous mappings advised ``MADV_HUGEPAGE`` (2 MiB pages where the kernel's
    transparent huge pages allow it): a network's filters are streamed from memory once per
    call, and with 4 KiB pages every 4 KiB costs a TLB miss and stops the hardware prefetcher.
    Filters share chunks of :data:`_CHUNK` bytes (one mapping per filter would waste most of a
    huge page on small filters); a chunk is unmapped once no filter carved from it is alive
    (the owner arrays keep it) and a newer chunk is being carved.  Thread-safe."""
    size = (size + 63) & ~63
    with _chunk_lock:
        arr, start, used = _chunk
        if arr is None or used + size > arr.size - (start - arr.ctypes.data):
            length = max(_CHUNK, size) + _HUGE
            m = mmap.mmap(-1, length, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            advise = getattr(mmap, "MADV_HUGEPAGE", None)
            if advise is not None:
                m.madvise(advise)
            arr = np.frombuffer(m, np.uint8)
            start = (arr.ctypes.data + _HUGE - 1) & ~(_HUGE - 1)
            used = 0
        off = start - arr.ctypes.data + used
        _chunk[:] = [arr, start, used + size]
        return arr[off:off + size], start + used


def _data_handle(lib: _Lib, mem: ctypes.c_void_p) -> int:
    """The data address of a oneDNN memory object."""
    h = ctypes.c_void_p()
    lib.call("dnnl_memory_get_data_handle", mem, ctypes.byref(h))
    return int(h.value or 0)


_Q_NDIMS, _Q_DIMS, _Q_SUBMEMORY_OFFSET = 256, 257, 259
"""``dnnl_query_ndims_s32``, ``dnnl_query_dims``, ``dnnl_query_submemory_offset_s64``."""


def _channels_are_submemory(lib: _Lib, whole_md: Any, w_md: Any, channels: tuple[int, int],
                            channel_bytes: int) -> bool:
    """Whether output channels ``[c0, c1)`` of a filter laid out as ``whole_md`` (its first
    dimension the output channels) are, from byte ``c0 * channel_bytes`` on, laid out exactly
    as ``w_md`` lays out a filter of ``c1 - c0`` channels: oneDNN's sub-memory of those
    channels starts there and, moved to channel 0, equals ``w_md``.  ``False`` where oneDNN
    makes no such sub-memory (channel bounds inside a block) or the layouts differ."""
    c0, c1 = channels
    ndims = ctypes.c_int()
    dims = ctypes.POINTER(_DIMS)()
    query = lib.fn["dnnl_memory_desc_query"]
    if (query(whole_md, _Q_NDIMS, ctypes.byref(ndims)) != 0
            or query(whole_md, _Q_DIMS, ctypes.byref(dims)) != 0):
        return False
    n = ndims.value
    sub_dims = _DIMS(c1 - c0, *list(dims.contents)[1:n])
    temp = _Prim(lib)
    try:
        at_c0, at_0 = ctypes.c_void_p(), ctypes.c_void_p()
        create = lib.fn["dnnl_memory_desc_create_submemory"]
        if create(ctypes.byref(at_c0), whole_md, sub_dims, _DIMS(c0, *[0] * (n - 1))) != 0:
            return False
        temp.own("dnnl_memory_desc_destroy", at_c0)
        if create(ctypes.byref(at_0), whole_md, sub_dims, _DIMS(*[0] * n)) != 0:
            return False
        temp.own("dnnl_memory_desc_destroy", at_0)
        offset = ctypes.c_int64()
        if query(at_c0, _Q_SUBMEMORY_OFFSET, ctypes.byref(offset)) != 0:
            return False
        return (offset.value * 4 == c0 * channel_bytes
                and lib.fn["dnnl_memory_desc_equal"](at_0, w_md) == 1)
    finally:
        temp.destroy()


def _clone_md(lib: _Lib, md: int) -> ctypes.c_void_p:
    return lib.new("dnnl_memory_desc_clone", md)


def _pin_one_thread() -> None:
    """oneDNN runs single-threaded on the calling thread (see the module docstring)."""
    _blas._pin_one_thread()


def _scratch(lib: _Lib, size: int) -> int:
    """The address of this thread's scratchpad (64-byte aligned, at least ``size`` bytes);
    the address is kept with the buffer (``ndarray.ctypes`` costs ~1-2 us a call)."""
    kept = getattr(lib.local, "scratch", None)
    if kept is not None and kept[0] >= size:
        return kept[1]  # type: ignore[no-any-return]
    buf = np.empty(max(size + 64, 1 << 20), np.uint8)
    addr = (int(buf.ctypes.data) + 63) & ~63
    lib.local.scratch = (buf.size - 64, addr, buf)
    return addr


def _part_buffer(shape: tuple[int, ...]) -> np.ndarray:
    """This thread's buffer for a channel part's output (reused by its next channel part)."""
    size = shape[0] * shape[1]
    buf = getattr(_part_local, "buf", None)
    if buf is None or buf.size < size:
        buf = np.empty(size, np.float32)
        _part_local.buf = buf
    return buf[:size].reshape(shape)


_part_local = threading.local()


def _split_kind(shape: tuple[int, ...], parts: list[_Prim]) -> str:
    """How an input shape's ``parts`` split it: ``"channels"`` (output channels), ``"batch"``
    (images) or ``"rows"`` (bands of output rows of one image)."""
    if parts[0].channels is not None:
        return "channels"
    return "batch" if parts[0].src_dims[0] < shape[0] else "rows"


def _destroy(prims: dict[Any, list[_Prim] | None], weights: list[_Prim],
             more: list[list[_Prim]] | None = None) -> None:
    for ps in [*prims.values(), *(more or ())]:
        for p in ps or ():
            p.destroy()
    prims.clear()
    if more is not None:
        more.clear()
    for holder in weights:
        holder.destroy()
    weights.clear()


def make(w: np.ndarray, bias: np.ndarray | None, attrs: dict[str, Any]) -> DnnlConv | None:
    """A :class:`DnnlConv` for a float32 filter (HWIO for NHWC, OIHW for NCHW), or ``None``
    if oneDNN is unavailable or cannot express the epilogue."""
    lib = library()
    if lib is None or w.dtype != np.float32:
        return None
    eltwise = None
    if attrs["activation"] != "none":
        eltwise = eltwise_for(attrs["activation"], attrs["alpha"])
        if eltwise is None:
            return None
    return DnnlConv(lib, w, bias, attrs, eltwise)
