"""Low-level building blocks for GIL-free native loops: atomics, a pause, a cycle counter,
calls through C function addresses and raw copies, as Numba intrinsics.

Private helper of :mod:`pytfrt.backends.cpu._spin_pool`.  Numba has no atomic operations on
CPU arrays, no ``volatile`` loads (a plain load in a spin loop may be hoisted out of it) and no
way to call a C function whose address is only known at run time without baking the address
into the compiled code (which keeps it from being cached on disk).  Each intrinsic here emits
the few LLVM instructions that do one of those things:

* :func:`load_acquire`, :func:`store_release`, :func:`store_seq_cst`, :func:`load_seq_cst`,
  :func:`fetch_add`, :func:`compare_exchange` -- atomic operations on one ``int64`` element
  of a C-contiguous ``int64`` array (``i`` must be in range: no bounds check);
* :func:`cpu_pause` -- the spin-wait hint (``pause`` on x86; nothing elsewhere);
* :func:`cycles` -- the CPU's cycle counter (``llvm.readcyclecounter``: ``rdtsc`` on x86);
* :func:`call4`, :func:`call2`, :func:`call1`, :func:`call0` -- call the C function at an
  address with 4 / 2 / 1 / 0 ``int64`` arguments (pointers and C ``int``s travel in 64-bit
  registers in the x86-64 and AArch64 calling conventions) and get its ``int32`` result
  (oneDNN's ``dnnl_status_t``);
* :func:`copy_bytes` -- ``memcpy`` between two addresses;
* :func:`f32_pointer` -- the ``float32 *`` at an integer address (for ``numba.carray``: the
  arrays a call part's context names, :func:`pytfrt.backends.cpu._dnnl_conv.run_calls`).

Nothing here checks its arguments: callers pass addresses they own.  Functions using these
intrinsics may be compiled with ``cache=True``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic as _intrinsic

intrinsic: Callable[[Callable[..., Any]], Any] = _intrinsic
"""Numba's decorator, typed so that the intrinsics below are called like functions."""

_I64 = ir.IntType(64)
_I32 = ir.IntType(32)


def _element_ptr(context: Any, builder: Any, sig: Any, args: Any) -> Any:
    """Pointer to ``arr[i]`` of an int64 array (no bounds check)."""
    arr_ty = sig.args[0]
    arr = context.make_array(arr_ty)(context, builder, args[0])
    return builder.gep(arr.data, [args[1]])


def _check_array(arr: Any) -> None:
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64 and arr.layout == "C"):
        raise TypeError("atomic operations need a C-contiguous int64 array")


def _load(ordering: str) -> Any:
    def load(typingctx: Any, arr: Any, i: Any) -> Any:
        _check_array(arr)

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            return builder.load_atomic(_element_ptr(context, builder, sig, args), ordering, 8)

        return types.int64(arr, types.intp), codegen

    load.__doc__ = f"``arr[i]`` read with {ordering} ordering (never hoisted out of a loop)."
    return intrinsic(load)


def _store(ordering: str) -> Any:
    def store(typingctx: Any, arr: Any, i: Any, value: Any) -> Any:
        _check_array(arr)

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            ptr = _element_ptr(context, builder, sig, args)
            builder.store_atomic(args[2], ptr, ordering, 8)
            return context.get_dummy_value()

        return types.void(arr, types.intp, types.int64), codegen

    store.__doc__ = f"``arr[i] = value`` with {ordering} ordering."
    return intrinsic(store)


load_acquire = _load("acquire")
load_seq_cst = _load("seq_cst")
store_release = _store("release")
"""Earlier writes are visible to a thread that reads the value with acquire ordering."""
store_seq_cst = _store("seq_cst")
"""A full fence on x86: with :data:`load_seq_cst` on the other side, of two threads that each
store one word and then load the other's, at least one sees the other's store."""


@intrinsic
def fetch_add(typingctx: Any, arr: Any, i: Any, value: Any) -> Any:
    """Atomically ``arr[i] += value``; returns the old value (sequentially consistent)."""
    _check_array(arr)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        ptr = _element_ptr(context, builder, sig, args)
        return builder.atomic_rmw("add", ptr, args[2], "seq_cst")

    return types.int64(arr, types.intp, types.int64), codegen


@intrinsic
def compare_exchange(typingctx: Any, arr: Any, i: Any, expected: Any, new: Any) -> Any:
    """Atomically: if ``arr[i] == expected`` set it to ``new``.  Returns whether it did
    (sequentially consistent)."""
    _check_array(arr)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        ptr = _element_ptr(context, builder, sig, args)
        pair = builder.cmpxchg(ptr, args[2], args[3], "seq_cst", "seq_cst")
        return builder.extract_value(pair, 1)

    return types.boolean(arr, types.intp, types.int64, types.int64), codegen


@intrinsic
def cpu_pause(typingctx: Any) -> Any:
    """The spin-wait hint: x86's ``pause`` (lets the core's sibling and the memory system
    breathe while a thread polls), nothing on other targets."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        if "x86" in builder.module.triple or "i686" in builder.module.triple:
            fnty = ir.FunctionType(ir.VoidType(), [])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.x86.sse2.pause")
            builder.call(fn, [])
        return context.get_dummy_value()

    return types.void(), codegen


@intrinsic
def cycles(typingctx: Any) -> Any:
    """The CPU's cycle counter (``rdtsc`` on x86: constant rate, comparable across cores)."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        fnty = ir.FunctionType(_I64, [])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.readcyclecounter")
        return builder.call(fn, [])

    return types.int64(), codegen


def _call_codegen(n: int) -> Any:
    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        fnty = ir.FunctionType(_I32, [_I64] * n)
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        return builder.call(fn, list(args[1:]))

    return codegen


@intrinsic
def call4(typingctx: Any, address: Any, a: Any, b: Any, c: Any, d: Any) -> Any:
    """``((int (*)(int64, int64, int64, int64)) address)(a, b, c, d)``."""
    return types.int32(types.int64, types.int64, types.int64, types.int64, types.int64), \
        _call_codegen(4)


@intrinsic
def call2(typingctx: Any, address: Any, a: Any, b: Any) -> Any:
    """``((int (*)(int64, int64)) address)(a, b)``."""
    return types.int32(types.int64, types.int64, types.int64), _call_codegen(2)


@intrinsic
def call1(typingctx: Any, address: Any, a: Any) -> Any:
    """``((int (*)(int64)) address)(a)``."""
    return types.int32(types.int64, types.int64), _call_codegen(1)


@intrinsic
def call0(typingctx: Any, address: Any) -> Any:
    """``((int (*)(void)) address)()``."""
    return types.int32(types.int64), _call_codegen(0)


@intrinsic
def copy_bytes(typingctx: Any, dst: Any, src: Any, n: Any) -> Any:
    """``memcpy(dst, src, n)`` between two addresses (int64); the ranges must not overlap."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        i8p = ir.IntType(8).as_pointer()
        d = builder.inttoptr(args[0], i8p)
        s = builder.inttoptr(args[1], i8p)
        cgutils.raw_memcpy(builder, d, s, args[2], 1)
        return context.get_dummy_value()

    return types.void(types.int64, types.int64, types.int64), codegen


@intrinsic
def f32_pointer(typingctx: Any, address: Any) -> Any:
    """The ``float32 *`` at an integer address (int64)."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.inttoptr(args[0], context.get_value_type(sig.return_type))

    return types.CPointer(types.float32)(types.int64), codegen
