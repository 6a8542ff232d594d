"""Integer and boolean kernels of the ``tfrt`` dialect: constants, arithmetic with
C++ wrap-around, truncating division, comparisons, ``tfrt.and.i1`` and integer prints.

Payloads are Python ints (``bool`` for ``i1``) already in range for their type; every result is
wrapped back into range the way C++ fixed-width arithmetic does.  Division by zero reports
``Divide by zero`` (emitted at the kernel's location).  Prints use TFRT's exact formats
(docs/conformance.md) and flush every line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytfrt.host.async_value import CHAIN, Chain
from pytfrt.host.registry import Attr, KernelError, KernelKind, KernelRegistry, kernel
from pytfrt.kernels.common import print_line, wrap_i32, wrap_i64, wrap_u32, wrap_u64

# -- constants ---------------------------------------------------------------------------------


def _int_constant(wrap: Callable[[int], int]) -> Callable[[int], int]:
    def constant(value: Attr[int]) -> int:
        return wrap(int(value))

    return constant


@kernel("tfrt.constant.i1")
def constant_i1(value: Attr[Any]) -> bool:
    """``tfrt.constant.i1 1`` -> ``True``."""
    return bool(value)


INT_CONSTANTS: dict[str, Callable[[int], int]] = {
    "i32": wrap_i32,
    "i64": wrap_i64,
    "ui32": wrap_u32,
    "ui64": wrap_u64,
}

# -- arithmetic --------------------------------------------------------------------------------


@kernel("tfrt.add.i32")
@kernel("tfrt.add_s.i32", sync=True)
def add_i32(a: int, b: int) -> int:
    """Wrapping 32-bit addition."""
    return ((a + b + 0x80000000) & 0xFFFFFFFF) - 0x80000000


@kernel("tfrt.add.i64")
@kernel("tfrt.add_s.i64", sync=True)
def add_i64(a: int, b: int) -> int:
    """Wrapping 64-bit addition."""
    return ((a + b + 0x8000000000000000) & 0xFFFFFFFFFFFFFFFF) - 0x8000000000000000


@kernel("tfrt.minus.i32")
def minus_i32(a: int, b: int) -> int:
    """Wrapping 32-bit subtraction."""
    return ((a - b + 0x80000000) & 0xFFFFFFFF) - 0x80000000


@kernel("tfrt.minus.i64")
def minus_i64(a: int, b: int) -> int:
    """Wrapping 64-bit subtraction."""
    return ((a - b + 0x8000000000000000) & 0xFFFFFFFFFFFFFFFF) - 0x8000000000000000


@kernel("tfrt.mul.i32")
@kernel("tfrt.mul_s.i32", sync=True)
def mul_i32(a: int, b: int) -> int:
    """Wrapping 32-bit multiplication."""
    return ((a * b + 0x80000000) & 0xFFFFFFFF) - 0x80000000


@kernel("tfrt.mul.i64")
@kernel("tfrt.mul_s.i64", sync=True)
def mul_i64(a: int, b: int) -> int:
    """Wrapping 64-bit multiplication."""
    return ((a * b + 0x8000000000000000) & 0xFFFFFFFFFFFFFFFF) - 0x8000000000000000


def truncating_divmod(a: int, b: int) -> tuple[int, int]:
    """C++ ``(a / b, a % b)``: the quotient rounds toward zero, the remainder takes ``a``'s sign.

    Raises:
        KernelError: ``Divide by zero`` if ``b == 0``.
    """
    if b == 0:
        raise KernelError("Divide by zero")
    q = abs(a) // abs(b)
    if (a < 0) != (b < 0):
        q = -q
    return q, a - b * q


@kernel("tfrt.div.i32")
def div_i32(a: int, b: int) -> tuple[int, int]:
    """Truncating quotient and remainder (``INT32_MIN / -1`` wraps to ``INT32_MIN``, 0)."""
    q, r = truncating_divmod(a, b)
    return wrap_i32(q), r


@kernel("tfrt.div.i64")
def div_i64(a: int, b: int) -> tuple[int, int]:
    """Truncating quotient and remainder (``INT64_MIN / -1`` wraps to ``INT64_MIN``, 0)."""
    q, r = truncating_divmod(a, b)
    return wrap_i64(q), r


# -- comparisons and logic ---------------------------------------------------------------------


@kernel("tfrt.equal.i32", "tfrt.equal.i64")
def equal(a: int, b: int) -> bool:
    """``a == b``."""
    return a == b


@kernel("tfrt.lessequal.i32", "tfrt.lessequal.i64")
def lessequal(a: int, b: int) -> bool:
    """``a <= b`` (a trailing chain operand is ignored by the binding rules)."""
    return a <= b


@kernel("tfrt.and.i1")
def and_i1(a: bool, b: bool) -> bool:
    """Logical and."""
    return bool(a) and bool(b)


# -- prints ------------------------------------------------------------------------------------


@kernel("tfrt.print.i1")
def print_i1(value: bool) -> Chain:
    """Prints ``int1 = 0`` or ``int1 = 1``."""
    print_line(f"int1 = {1 if value else 0}")
    return CHAIN


@kernel("tfrt.print.i32")
def print_i32(value: int) -> Chain:
    """Prints ``int32 = <n>``."""
    print_line(f"int32 = {value}")
    return CHAIN


@kernel("tfrt.print.i64")
def print_i64(value: int) -> Chain:
    """Prints ``int64 = <n>``."""
    print_line(f"int64 = {value}")
    return CHAIN


def register(registry: KernelRegistry) -> None:
    """Register every integer kernel."""
    registry.add(constant_i1)
    for suffix, wrap in INT_CONSTANTS.items():
        fn = _int_constant(wrap)
        fn.__doc__ = f"``tfrt.constant.{suffix}``: the ``value`` attribute."
        registry.add_kernel(f"tfrt.constant.{suffix}", fn)
        if suffix in ("i32", "i64"):
            registry.add_kernel(f"tfrt.constant_s.{suffix}", fn, KernelKind.SYNC)
    registry.add(
        add_i32, add_i64, minus_i32, minus_i64, mul_i32, mul_i64, div_i32, div_i64,
        equal, lessequal, and_i1, print_i1, print_i32, print_i64,
    )
