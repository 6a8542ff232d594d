"""Single-precision GEMM for the conv and matmul kernels: oneDNN's ``dnnl_sgemm`` or NumPy.

Private helper of :mod:`pytfrt.backends.cpu.conv` and :mod:`pytfrt.backends.cpu.gemm`.

NumPy's OpenBLAS is limited to its AVX2 kernels on this project's machines (the environment
pins ``OPENBLAS_CORETYPE``), while oneDNN picks its kernels from the CPU's instruction set at
run time (AVX-512 where present): measured ~1.8x faster at ResNet-50's GEMM shapes
(``docs/kernels.md``).  oneDNN is optional: if the shared library of the ``onednn-cpu-gomp``
wheel (``<prefix>/lib/libdnnl.so.3``, or any ``libdnnl.so.3`` the dynamic loader finds) is
present it is used for float32, otherwise NumPy's ``matmul``.  ``PYTFRT_GEMM=numpy`` forces
NumPy (read once, at first use).

:func:`sgemm` takes 2-D float32 views whose rows are contiguous (any row stride: slices of a
larger matrix work without copies).  Thread-safety: ``dnnl_sgemm`` is re-entrant; the call
releases the GIL (ctypes) and runs on oneDNN's OpenMP threads.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pytfrt import config

_lock = threading.Lock()
_loaded = False
_dnnl_sgemm: Callable[..., int] | None = None


def _find_library() -> ctypes.CDLL | None:
    candidates = [
        Path(sys.prefix) / "lib" / "libdnnl.so.3",
        Path(sys.base_prefix) / "lib" / "libdnnl.so.3",
    ]
    for path in [*candidates, "libdnnl.so.3"]:
        if isinstance(path, Path) and not path.exists():
            continue
        try:
            return ctypes.CDLL(str(path))
        except OSError:
            continue
    return None


def _load() -> Callable[..., int] | None:
    global _loaded, _dnnl_sgemm
    if _loaded:  # the per-call path: no lock once loaded
        return _dnnl_sgemm
    with _lock:
        if _loaded:
            return _dnnl_sgemm
        _loaded = True
        if config.choice("PYTFRT_GEMM") == "numpy":
            return None
        lib = _find_library()
        if lib is None:
            return None
        fn = lib.dnnl_sgemm
        i64, ptr = ctypes.c_int64, ctypes.c_void_p
        fn.argtypes = [
            ctypes.c_char,
            ctypes.c_char,
            i64,
            i64,
            i64,
            ctypes.c_float,
            ptr,
            i64,
            ptr,
            i64,
            ctypes.c_float,
            ptr,
            i64,
        ]
        fn.restype = ctypes.c_int
        _dnnl_sgemm = fn
        return fn


def parallel_gemm() -> bool:
    """Whether callers should split GEMMs across threads themselves (oneDNN is single-threaded
    per call); NumPy's BLAS threads internally."""
    return _load() is not None


def backend() -> str:
    """``"onednn"`` if float32 GEMMs run in oneDNN, else ``"numpy"``."""
    return "onednn" if _load() is not None else "numpy"


def _ld(a: np.ndarray) -> int | None:
    """Leading dimension (row stride in elements) of a 2-D array with unit column stride."""
    s0, s1 = a.strides
    if (s1 != a.itemsize and a.shape[1] > 1) or s0 < 0 or s0 % a.itemsize:
        return None
    if a.shape[0] > 1 and s0 // a.itemsize < a.shape[1]:
        return None
    return max(s0 // a.itemsize, a.shape[1], 1)


def sgemm(a: np.ndarray, b: np.ndarray, c: np.ndarray, beta: float = 0.0) -> None:
    """``c = a @ b + beta * c`` for 2-D arrays (float32 through oneDNN when available and the
    product is larger than :data:`TINY_MACS`).

    ``a`` is ``(m, k)``, ``b`` ``(k, n)``, ``c`` ``(m, n)``; callers check the shapes.
    Transposed operands are passed as transposed views (``x.T``): a view whose *columns* are
    contiguous is handed to oneDNN as a transposed matrix, without a copy.  oneDNN runs on the
    calling thread only (callers parallelise with :mod:`pytfrt.backends.cpu._parallel`).
    """
    fn = _load()
    m, k = a.shape
    n = b.shape[1]
    if (fn is None or c.dtype != np.float32 or a.dtype != np.float32 or b.dtype != np.float32
            or m * k * n <= TINY_MACS):
        _numpy_gemm(a, b, c, beta)
        return
    pin_thread()
    if m == 0 or n == 0:
        return
    ldc = _ld(c)
    ta, lda = layout(a)
    tb, ldb = layout(b)
    if ldc is None or lda is None or ldb is None or k == 0:
        _numpy_gemm(a, b, c, beta)
        return
    status = fn(
        ta, tb, m, n, k, 1.0, a.ctypes.data, lda, b.ctypes.data, ldb, beta, c.ctypes.data, ldc
    )
    if status != 0:  # pragma: no cover - oneDNN only fails on bad arguments, checked above
        raise RuntimeError(f"dnnl_sgemm failed with status {status}")


TINY_MACS = 1 << 15
"""Multiply-adds up to which :func:`sgemm` calls NumPy: ``dnnl_sgemm`` costs about 8 us per call
whatever the size (a classifier's ``1 x 512 x 10`` took 10.4 us against NumPy's 2.3), and
OpenBLAS runs products this small on the calling thread."""

_local = threading.local()


def pin_thread() -> None:
    """Pin oneDNN's OpenMP to one thread for calls made from this thread (once per thread)."""
    if not getattr(_local, "pinned", False):
        _pin_one_thread()


_cfunc: Any = None


def gemm_cfunc() -> Any:
    """``dnnl_sgemm`` as a ctypes function Numba's ``nopython`` code can call, or ``None``.

    Same C function as :func:`gemm_fn`, typed ``(uint8 transa, uint8 transb, int64 m, n, k,
    float32 alpha, int64 a_address, int64 lda, int64 b_address, int64 ldb, float32 beta,
    int64 c_address, int64 ldc) -> int32`` (addresses as integers: the same x86-64/AArch64
    calling convention as pointers), so a compiled loop can run a batch of GEMMs without a
    Python call per product.  Callers pin the thread first (:func:`pin_thread`).
    """
    global _cfunc
    fn = _load()
    if fn is None:
        return None
    if _cfunc is None:
        i64, u8, f32 = ctypes.c_int64, ctypes.c_uint8, ctypes.c_float
        proto = ctypes.CFUNCTYPE(ctypes.c_int, u8, u8, i64, i64, i64, f32, i64, i64, i64, i64,
                                 f32, i64, i64)
        address = ctypes.cast(fn, ctypes.c_void_p).value  # type: ignore[arg-type]
        assert address is not None
        _cfunc = proto(address)
    return _cfunc


_address: list[int] = []


def gemm_address() -> int:
    """The address of ``dnnl_sgemm`` (:func:`gemm_cfunc`'s function) for native code that calls
    it, or ``0`` without oneDNN."""
    if not _address:
        f = gemm_cfunc()
        _address.append(0 if f is None else int(ctypes.cast(f, ctypes.c_void_p).value or 0))
    return _address[0]


def _pin_one_thread() -> None:
    """Make oneDNN's OpenMP use one thread when called from this thread (a per-thread setting)."""
    _local.pinned = True
    try:
        gomp = ctypes.CDLL("libgomp.so.1")
    except OSError:  # pragma: no cover - the oneDNN build we load links libgomp
        return
    gomp.omp_set_num_threads(1)


def layout(x: np.ndarray) -> tuple[bytes, int | None]:
    """(``b"N"``/``b"T"``, leading dimension) to pass a 2-D view to a row-major GEMM."""
    ld = _ld(x)
    if ld is not None:
        return b"N", ld
    ldt = _ld(x.T)
    return b"T", ldt


def _numpy_gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray, beta: float) -> None:
    if beta == 0.0:
        np.matmul(a, b, out=c)
    else:
        c *= beta
        c += a @ b


def gemm_fn() -> Any:
    """The raw ``dnnl_sgemm`` ctypes function, or ``None`` (for kernels that loop over GEMMs)."""
    return _load()
