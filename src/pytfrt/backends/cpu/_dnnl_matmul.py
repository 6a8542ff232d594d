"""float32 dense layers with weights packed once, through oneDNN's matmul primitive (C API).

Private helper of :mod:`pytfrt.backends.cpu.graph_nn` (the ``matmul`` compute function
specialised for a constant weight).  It reuses :mod:`pytfrt.backends.cpu._dnnl_conv`'s
library binding, primitive holder, huge-page weight memory and :mod:`_spin_pool` job runner;
read that module's docstring for the threading model.

What it computes: ``y = act(x @ w + bias + residual)`` for a float32 ``x [M, K]`` (C-contiguous),
a fixed ``w [K, N]`` (any unit-stride layout: a transposed view is fine), an optional fixed
``bias [N]``, an optional residual ``[M, N]`` (C-contiguous, a run-time operand) and an
activation with a oneDNN eltwise equivalent (:func:`pytfrt.backends.cpu._dnnl_conv.eltwise_for`).

Why: ``dnnl_sgemm`` copies (packs) the whole weight into its blocked layout on every call --
for a Transformer's ``64 x 768 x 3072`` projection that is a sizeable part of the product --
and the GEMM tiles of :mod:`pytfrt.backends.cpu.gemm` are dispatched from Python threads that
need the GIL between tiles.  Here the product is split by *columns* into one part per thread
(each part streams only its own columns of the weight once per call), every part's columns are
reordered once into the blocked format its primitive prefers, and the parts run on
:mod:`_spin_pool`'s native helpers without the GIL; bias, residual and activation are fused
post-ops, so the result is written once.

Per row count ``M`` (a sequence length, a batch) primitives are made on first use; the packed
columns are shared by every ``M`` whose primitive asks for the same format (the column parts
are fixed per weight).  :meth:`PackedMatMul.release_weight` drops the reference to the user's
weight once its columns are packed (later formats are reordered from the packed copies) and
:meth:`PackedMatMul.weight` rebuilds it.  Thread-safe: any number of threads may call
:meth:`PackedMatMul.run`.
"""

from __future__ import annotations

import ctypes
import weakref
from typing import Any

import numpy as np

from pytfrt.backends.cpu import _dnnl_conv as dc
from pytfrt.backends.cpu import _gelu_native, _parallel, _spin_pool
from pytfrt.backends.cpu._dnnl_int8 import _Runner

MIN_MACS = 1 << 21
"""Fewest multiply-adds (``M * K * N``) for which a specialised dense layer takes a runner
when it may still use the weight itself (smaller products keep
:mod:`pytfrt.backends.cpu.gemm`'s paths, whose set-up costs less)."""
RELEASE_MIN_WEIGHTS = 1 << 19
"""Fewest weight elements (2 MB) for which a specialised dense layer runs every product in
its runner, so that the model can drop the user's copy of the weight
(:meth:`PackedMatMul.release_weight`): the transformers' weights, about half a model's
memory otherwise twice over."""
PART_MIN_WEIGHTS = 1 << 15
"""Fewest weight elements per column part (a smaller weight is one part)."""
ENABLED = True
"""Whether :func:`make` makes runners (``False``: dense layers keep ``dnnl_sgemm``; read when a
model is compiled, e.g. ``benchmarks/models.py --set`` for an A/B run)."""
MAX_PART_WEIGHTS = 1 << 22
"""Most weight elements (16 MB) per column part before a weight is split into more parts than
threads: a language model's LM head (``768 x 50257``, 154 MB) into 10.  The spin pool's
threads claim parts as they finish, so a thread that loses its core for a while (a loaded
machine, a virtual CPU's neighbours) delays the product by one part instead of by half of
it; on one thread the product costs the same in 2 to 16 parts (docs/kernels.md)."""
MAX_PART_COLUMNS = 768
"""Most columns per column part: a wider weight gets more parts (a multiple of the thread
count, at most :data:`pytfrt.backends.cpu._spin_pool.MAX_PARTS`).  oneDNN's matmul primitive
runs a part of 384-896 columns at ``K = 768`` 8-15% faster per thread than one of 1024-1536
(one thread, ``128 x 768 x 3072``: 155 GFLOP/s in parts of 768 columns, 125-129 in parts of
1024 or 1536; the LM head ``64 x 768 x 50257``: 35.2 ms in parts of 832 against 39.7 in ten
parts of 5056 and 52.7 in parts of 1024) -- docs/kernels.md, "How wide a column part is"."""
_COLUMN_ALIGN = 64
"""Column parts start at multiples of this many columns (whole 64-float blocks of the packed
weight, 256-byte aligned output columns)."""


class PackedMatMul(_Runner):
    """``act(x @ w + bias + residual)`` with ``w`` packed per column part (see the module
    docstring).  Made by :func:`make`; :meth:`ready` (per input shape ``(M, K)``) then
    :meth:`run` compute a product."""

    def __init__(self, lib: dc._Lib, w: np.ndarray, bias: np.ndarray | None,
                 eltwise: tuple[int, float, float] | None, residual: bool,
                 act_fn: int = 0) -> None:
        super().__init__(lib)
        self._act_fn = act_fn
        """:func:`pytfrt.backends.cpu._gelu_native.address` when the activation is ``gelu``
        and that function takes the post-op's place (applied to each part's block by the
        spin pool after the primitive), else 0."""
        self._w: np.ndarray | None = w
        self.k, self.n = w.shape
        self._bias = None if bias is None else np.ascontiguousarray(bias, np.float32)
        self._eltwise = eltwise
        self.residual = residual
        self._cols = column_parts(self.k, self.n)
        self._packed: list[dc._Prim] = []
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, dc._destroy, self._prims, self._packed)

    def _make(self, shape: tuple[int, ...], made: list[dc._Prim]) -> None:
        """One primitive per column part (:func:`column_parts`, fixed per weight)."""
        for c0, c1 in self._cols:
            p = dc._Prim(self._lib)
            made.append(p)
            p.dst_off = 4 * c0
            self._create(p, shape[0], c0, c1)

    def _create(self, p: dc._Prim, m: int, c0: int, c1: int) -> None:
        lib, k, n = self._lib, self.k, self.n
        free, temp = "dnnl_memory_desc_destroy", dc._Prim(lib)
        dc._pin_one_thread()
        try:
            p.src_md = p.own(free, lib.strided_md((m, k), (k, 1)))
            p.dst_md = p.own(free, lib.strided_md((m, c1 - c0), (n, 1)))
            any_w = temp.own(free, lib.new("dnnl_memory_desc_create_with_tag", 2,
                                           dc._DIMS(k, c1 - c0), dc._F32, dc._FORMAT_ANY))
            eltwise = self._eltwise
            block = _gelu_native.geometry(m, c1 - c0, n) if self._act_fn else None
            if block is not None:  # the part's GELU after the primitive, not as a post-op
                eltwise = None
                p.act_fn, p.act_n = self._act_fn, block
            bias_md = None
            if self._bias is not None:
                bias_md = temp.own(free, lib.strided_md((1, c1 - c0), (n, 1)))
                p.bias = p.own("dnnl_memory_destroy", lib.new(
                    "dnnl_memory_create", bias_md, lib.engine, self._bias.ctypes.data + 4 * c0))
            attr = dc.user_scratchpad_attr(lib, temp.own)
            if self.residual or eltwise is not None:
                po = temp.own("dnnl_post_ops_destroy", lib.new("dnnl_post_ops_create"))
                if self.residual:  # read from its own buffer, same strides as the output
                    p.residual = dc.RESIDUAL_OPERAND
                    lib.call("dnnl_post_ops_append_binary", po, dc._BINARY_ADD, p.dst_md)
                if eltwise is not None:
                    lib.call("dnnl_post_ops_append_eltwise", po, *eltwise)
                lib.call("dnnl_primitive_attr_set_post_ops", attr, po)
            p.pd = p.own("dnnl_primitive_desc_destroy", lib.new(
                "dnnl_matmul_primitive_desc_create", lib.engine, p.src_md, any_w, bias_md,
                p.dst_md, attr))
            dc.query_impl(lib, p)
            w_md = lib.fn["dnnl_primitive_desc_query_md"](p.pd, dc._Q_WEIGHTS_MD, 0)
            p.weights = self._packed_columns(w_md, c0, c1)
            p.create_primitive()
        finally:
            temp.destroy()

    def _packed_columns(self, w_md: int, c0: int, c1: int) -> ctypes.c_void_p:
        """Columns ``[c0, c1)`` of the weight in the format ``w_md`` (reordered once per
        distinct format and column range, from the user's weight while the runner holds it,
        else from another packed copy of the same columns).  Called with ``self._lock``
        held."""
        lib = self._lib
        for holder in self._packed:
            if holder.channels == (c0, c1) and lib.fn["dnnl_memory_desc_equal"](
                    holder.src_md, w_md):
                return holder.weights
        holder = dc._Prim(lib)
        holder.channels = (c0, c1)
        holder.src_md = holder.own("dnnl_memory_desc_destroy", dc._clone_md(lib, w_md))
        holder.keep, addr = dc._filter_memory(int(lib.fn["dnnl_memory_desc_get_size"](w_md)))
        holder.weights = holder.own("dnnl_memory_destroy", lib.new(
            "dnnl_memory_create", w_md, lib.engine, ctypes.c_void_p(addr)))
        temp = dc._Prim(lib)
        try:
            if self._w is not None:
                src_md: Any = temp.own("dnnl_memory_desc_destroy",
                                       self._user_md(c0, c1, self._w.strides))
                src_addr = self._w.ctypes.data + c0 * self._w.strides[1]
            else:
                other = next(h for h in self._packed if h.channels == (c0, c1))
                src_md, src_addr = other.src_md, dc._data_handle(lib, other.weights)
            dc.reorder(lib, src_md, src_addr, holder.src_md, holder.weights)
        except (RuntimeError, StopIteration):
            holder.destroy()
            raise RuntimeError(f"cannot pack columns {c0}:{c1}") from None
        finally:
            temp.destroy()
        self._packed.append(holder)
        return holder.weights

    def _user_md(self, c0: int, c1: int, strides: tuple[int, ...]) -> ctypes.c_void_p:
        """A memory descriptor of columns ``[c0, c1)`` of a plain weight with byte ``strides``."""
        return self._lib.strided_md((self.k, c1 - c0), tuple(st // 4 for st in strides))

    def release_weight(self, rows: int) -> bool:
        """Pack every column part (for products of ``rows`` rows) and drop the reference to the
        user's weight: later formats are reordered from the packed copies.  ``False`` (the
        weight is kept) when the primitives cannot be made."""
        if not self.ready((rows, self.k)):
            return False
        with self._lock:
            self._w = None
        return True

    def weight(self, transposed: bool) -> np.ndarray:
        """The weight rebuilt from the packed columns (exact: reorders of float32 copy bits):
        ``[K, N]``, or with ``transposed`` ``[N, K]``, C-contiguous.  Needs every column part
        packed (:meth:`release_weight` or a :meth:`run`)."""
        lib = self._lib
        out = np.empty((self.n, self.k) if transposed else (self.k, self.n), np.float32)
        view = out.T if transposed else out
        temp = dc._Prim(lib)
        try:
            with self._lock:
                for c0, c1 in self._cols:
                    h = next(h for h in self._packed if h.channels == (c0, c1))
                    md = temp.own("dnnl_memory_desc_destroy", self._user_md(c0, c1, view.strides))
                    addr = view.ctypes.data + c0 * view.strides[1]
                    mem = temp.own("dnnl_memory_destroy",
                                   lib.new("dnnl_memory_create", md, lib.engine, addr))
                    dc.reorder(lib, h.src_md, dc._data_handle(lib, h.weights), md, mem)
        finally:
            temp.destroy()
        out.flags.writeable = False
        return out

    def run(self, x: np.ndarray, y: np.ndarray, residual: np.ndarray | None = None) -> None:
        """``y = act(x @ w + bias + residual)`` for C-contiguous float32 ``x [M, K]``, ``y`` and
        ``residual [M, N]`` (given exactly when made with ``residual=True``), after
        :meth:`ready` returned true for its shape."""
        shape = x.shape
        parts = self._prims[shape]
        assert parts is not None
        xa, ya = int(x.ctypes.data), int(y.ctypes.data)
        ra = 0 if residual is None else int(residual.ctypes.data)
        if len(parts) == 1:
            self._run(parts[0], xa, ya, ra)
            return
        job = self._jobs.get(shape)
        if job is None:
            job = dc._job(parts, 0, self._lock)
            with self._lock:
                job = self._jobs.setdefault(shape, job)
        if dc.run_job(self._lib, job, xa, ya, ra):
            return
        _parallel.parallel_for(lambda i: self._run(parts[i], xa, ya, ra), len(parts))

    def _run(self, p: dc._Prim, xa: int, ya: int, ra: int = 0) -> None:
        """One part on the calling thread (as the convolutions' parts)."""
        dc.run_part(self._lib, p, self._lock, xa, ya, ra)


def column_parts(k: int, n: int, parts: int | None = None) -> list[tuple[int, int]]:
    """The column parts ``[c0, c1)`` of a ``[k, n]`` weight: ``parts`` of them, by default as
    many as threads, or a multiple of that for a weight of more than
    :data:`MAX_PART_WEIGHTS` elements or :data:`MAX_PART_COLUMNS` columns per thread (at most
    :data:`~pytfrt.backends.cpu._spin_pool.MAX_PARTS`); fewer for a small weight
    (:data:`PART_MIN_WEIGHTS` each at least), starting at multiples of 64 columns.  A runner
    keeps them for every row count, so its packed columns serve them all."""
    if parts is None:
        threads = _parallel.num_threads()
        parts = min(_spin_pool.MAX_PARTS, threads * max(
            1, -(-k * n // (MAX_PART_WEIGHTS * threads)), -(-n // (MAX_PART_COLUMNS * threads))))
    parts = max(1, min(parts, (k * n) // PART_MIN_WEIGHTS, -(-n // _COLUMN_ALIGN)))
    width = -(-n // parts)
    width = -(-width // _COLUMN_ALIGN) * _COLUMN_ALIGN
    return [(c0, min(n, c0 + width)) for c0 in range(0, n, width)]


def make(w: np.ndarray, bias: np.ndarray | None, activation: str, alpha: float,
         residual: bool) -> PackedMatMul | None:
    """A :class:`PackedMatMul` for a float32 weight ``w [K, N]`` (a view with one unit stride)
    and optional ``bias [N]``, or ``None`` when oneDNN is absent (or ``PYTFRT_CONV=builtin``)
    or cannot express the activation.  ``w`` and ``bias`` must not change afterwards."""
    lib = dc.library() if ENABLED else None
    if lib is None or w.dtype != np.float32 or w.ndim != 2 or 0 in w.shape:
        return None
    if bias is not None and (bias.dtype != np.float32 or bias.shape != (w.shape[1],)):
        return None
    s0, s1 = w.strides
    if s0 % 4 or s1 % 4 or s0 <= 0 or s1 <= 0 or 4 not in (s0, s1):
        return None
    eltwise = dc.eltwise_for(activation, alpha)
    if eltwise is None and activation != "none":
        return None
    act_fn = _gelu_native.address() if activation == "gelu" else 0
    return PackedMatMul(lib, w, bias, eltwise, residual, act_fn)
