"""Floating-point and complex kernels of the ``tfrt`` dialect (docs/conformance.md).

Payload types: ``f32`` -> ``numpy.float32`` (every operation rounds to float32, as C++ ``float``
does: ``f32 = 312.271362`` where f64 gives ``312.271370``); ``f64`` -> Python ``float``; ``f16`` ->
``numpy.float16``; ``bf16`` -> ``ml_dtypes.bfloat16``; ``complex64`` -> ``numpy.complex64``;
``complex128`` -> Python ``complex``.  Casts follow C++ ``static_cast`` (float to int truncates
toward zero; NaN or out-of-range gives ``INT64_MIN``, the x86 result).  Prints use C ``%f``;
``f16`` and ``bf16`` print their raw 16-bit patterns (docs/conformance.md).  Division by
``0.0`` reports ``Divide by zero``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pytfrt.host import numpy_free
from pytfrt.host.async_value import CHAIN, Chain
from pytfrt.host.registry import Attr, KernelError, KernelKind, KernelRegistry, kernel
from pytfrt.kernels.common import I64_MIN, print_line

# NumPy is imported on first use (``_load_numpy``), so that a program without float kernels
# starts without it (it is most of ``bef_executor``'s start-up time).
np: Any = None
F32: Any = None  # numpy.float32
_F16: Any = None  # numpy.float16
_F32_INF: Any = None
_F32_NEG_INF: Any = None


def _load_numpy() -> None:
    global np, F32, _F16, _F32_INF, _F32_NEG_INF
    import numpy

    F32 = numpy.float32
    _F16 = numpy.float16
    _F32_INF = F32(numpy.inf)
    _F32_NEG_INF = F32(-numpy.inf)
    np = numpy  # last: ``np is not None`` means everything above is set


_BF16: Any = None  # ml_dtypes.bfloat16, imported on first use


def bfloat16(value: float) -> Any:
    """``value`` as an ``ml_dtypes.bfloat16`` scalar (imported on first use).

    ``bfloat16`` is registered as a ``numbers.Real`` (as NumPy registers its own float
    scalars): the executor checks that a ``bf16`` result is a real number."""
    global _BF16
    if _BF16 is None:
        import numbers

        import ml_dtypes

        numbers.Real.register(ml_dtypes.bfloat16)
        _BF16 = ml_dtypes.bfloat16
    return _BF16(value)


def bf16_bits(value: Any) -> int:
    """The raw 16-bit pattern of ``value`` as a bfloat16."""
    if np is None:
        _load_numpy()
    return int(np.asarray(bfloat16(float(value))).view(np.uint16))


# -- constants ---------------------------------------------------------------------------------


def constant_f16(value: Attr[float]) -> Any:
    """``tfrt.constant.f16``."""
    if np is None:
        _load_numpy()
    return _F16(value)


def constant_bf16(value: Attr[float]) -> Any:
    """``tfrt.constant.bf16``."""
    return bfloat16(value)


def constant_f32(value: Attr[float]) -> Any:
    """``tfrt.constant.f32`` (rounded to float32)."""
    return to_f32(float(value))


def constant_f64(value: Attr[float]) -> float:
    """``tfrt.constant.f64``."""
    return float(value)


FLOAT_CONSTANTS: dict[str, Callable[..., Any]] = {
    "f16": constant_f16,
    "bf16": constant_bf16,
    "f32": constant_f32,
    "f64": constant_f64,
}


# Attributes bind in name order: ``imaginary`` before ``real``.
@kernel("tfrt.constant.complex64")
def constant_complex64(imaginary: Attr[float], real: Attr[float]) -> Any:
    """``tfrt.constant.complex64 <real>, <imaginary>``."""
    if np is None:
        _load_numpy()
    return np.complex64(complex(real, imaginary))


@kernel("tfrt.constant.complex128")
def constant_complex128(imaginary: Attr[float], real: Attr[float]) -> complex:
    """``tfrt.constant.complex128 <real>, <imaginary>``."""
    return complex(real, imaginary)


# -- arithmetic --------------------------------------------------------------------------------
# float32 results: compute in double, then round once to float32.  For +, -, *, / of float32
# operands this equals the float32 operation (double has more than 2 * 24 + 2 bits), and it
# avoids NumPy's overflow warnings: values past the float32 overflow threshold become +-inf.

_F32_OVERFLOW = float.fromhex("0x1.ffffffp+127")  # FLT_MAX + half an ulp: rounds to inf


def to_f32(x: float) -> Any:
    """``x`` rounded to float32 (to nearest even), without overflow warnings: a
    ``numpy.float32``, or in a NumPy-free process (:mod:`pytfrt.host.numpy_free`) a Python
    float holding the float32 value."""
    if np is None:
        if numpy_free.ENABLED:
            return numpy_free.to_f32(x)
        _load_numpy()
    if -_F32_OVERFLOW < x < _F32_OVERFLOW:
        return F32(x)
    if x != x:
        return F32(x)
    return _F32_INF if x > 0 else _F32_NEG_INF


@kernel("tfrt.add.f32")
def add_f32(a: Any, b: Any) -> Any:
    """float32 addition."""
    return to_f32(float(a) + float(b))


@kernel("tfrt.add.f64")
def add_f64(a: float, b: float) -> float:
    """Double addition."""
    return a + b


@kernel("tfrt.multiply.f32")
def multiply_f32(a: Any, b: Any) -> Any:
    """float32 multiplication."""
    return to_f32(float(a) * float(b))


@kernel("tfrt.multiply.f64")
def multiply_f64(a: float, b: float) -> float:
    """Double multiplication."""
    return a * b


@kernel("tfrt.minimum.f32", "tfrt.minimum.f64")
def minimum(a: Any, b: Any) -> Any:
    """C++ ``std::min(a, b)``: ``b`` if ``b < a`` else ``a`` (so NaN in ``a`` wins)."""
    return b if b < a else a


@kernel("tfrt.div.f32")
def div_f32(a: Any, b: Any) -> Any:
    """float32 division; ``Divide by zero`` if ``b == 0.0``."""
    if b == 0.0:
        raise KernelError("Divide by zero")
    return to_f32(float(a) / float(b))


@kernel("tfrt.div.f64")
def div_f64(a: float, b: float) -> float:
    """Double division; ``Divide by zero`` if ``b == 0.0``."""
    if b == 0.0:
        raise KernelError("Divide by zero")
    return a / b


# -- casts -------------------------------------------------------------------------------------


def float_to_i64(value: float) -> int:
    """C++ ``static_cast<int64_t>`` on x86: truncate toward zero; NaN/out of range -> INT64_MIN."""
    if math.isnan(value) or not (-9.223372036854775808e18 <= value < 9.223372036854775808e18):
        return I64_MIN
    return int(value)


@kernel("tfrt.cast.i64_to_f32")
def cast_i64_to_f32(value: int) -> Any:
    """int64 -> float32 with one rounding (not via double)."""
    if np is None:
        _load_numpy()
    return np.int64(value).astype(np.float32)


@kernel("tfrt.cast.i64_to_f64")
def cast_i64_to_f64(value: int) -> float:
    """int64 -> double (round to nearest)."""
    return float(value)


@kernel("tfrt.cast.f32_to_i64", "tfrt.cast.f64_to_i64")
def cast_float_to_i64(value: Any) -> int:
    """float -> int64, truncating toward zero."""
    return float_to_i64(float(value))


# -- prints ------------------------------------------------------------------------------------


def _print(text: str) -> Chain:
    print_line(text)
    return CHAIN


@kernel("tfrt.print.f32")
def print_f32(value: Any) -> Chain:
    """Prints ``f32 = <%f>``."""
    return _print(f"f32 = {float(value):f}")


@kernel("tfrt.print.f64")
def print_f64(value: float) -> Chain:
    """Prints ``f64 = <%f>``."""
    return _print(f"f64 = {float(value):f}")


def f16_bits(value: Any) -> int:
    """The raw 16-bit pattern of ``value`` as a float16."""
    if np is None:
        _load_numpy()
    return int(np.asarray(value, dtype=np.float16).view(np.uint16))


@kernel("tfrt.print.f16")
def print_f16(value: Any) -> Chain:
    """Prints ``f16 = <raw bits as unsigned>``."""
    return _print(f"f16 = {f16_bits(value)}")


@kernel("tfrt.print.bf16")
def print_bf16(value: Any) -> Chain:
    """Prints ``bf16 = <raw bits as unsigned>`` (as ``tfrt.print.f16`` and as tensors print
    their bf16 elements)."""
    return _print(f"bf16 = {bf16_bits(value)}")


@kernel("tfrt.print.complex64")
def print_complex64(value: Any) -> Chain:
    """Prints ``complex64 = <re %f>+<im %f>i``."""
    return _print(f"complex64 = {float(value.real):f}+{float(value.imag):f}i")


@kernel("tfrt.print.complex128")
def print_complex128(value: Any) -> Chain:
    """Prints ``complex128 = <re %f>+<im %f>i``."""
    return _print(f"complex128 = {float(value.real):f}+{float(value.imag):f}i")


def register(registry: KernelRegistry) -> None:
    """Register every float/complex kernel."""
    for suffix, fn in FLOAT_CONSTANTS.items():
        registry.add_kernel(f"tfrt.constant.{suffix}", fn)
        registry.add_kernel(f"tfrt.constant_s.{suffix}", fn, KernelKind.SYNC)
    registry.add(
        constant_complex64, constant_complex128,
        add_f32, add_f64, multiply_f32, multiply_f64, minimum, div_f32, div_f64,
        cast_i64_to_f32, cast_i64_to_f64, cast_float_to_i64,
        print_f32, print_f64, print_f16, print_bf16, print_complex64, print_complex128,
    )
