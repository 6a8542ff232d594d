"""``vt`` kernels: a value type whose construction, moves and destruction print.

``vt.constant`` and ``vt.add`` construct a :class:`TrackedValue` (``constructed vt.value(v)``)
and move it into their result AsyncValue (``move constructed vt.value(v)``; the moved-from
temporary prints nothing when it dies).  When the result's last reference is dropped the
AsyncValue calls the payload's ``__tfrt_destroy__`` (``destroyed vt.value(v)``), so the prints
show exactly when the executor releases values (docs/executor.md).
"""

from __future__ import annotations

from pytfrt.host.async_value import CHAIN, Chain
from pytfrt.host.registry import Attr, KernelRegistry, kernel
from pytfrt.kernels.common import print_line, wrap_i32


class TrackedValue:
    """An ``!vt.value`` payload holding an int; prints its copies, moves and destruction."""

    __slots__ = ("value", "_alive")

    def __init__(self, value: int, how: str = "constructed") -> None:
        self.value = value
        self._alive = True
        print_line(f"{how} vt.value({value})")

    def copy(self) -> TrackedValue:
        """A copy (``copy constructed vt.value(v)``)."""
        return TrackedValue(self.value, "copy constructed")

    def move(self) -> TrackedValue:
        """Move into a new object (``move constructed vt.value(v)``); this one goes silent."""
        self._alive = False
        return TrackedValue(self.value, "move constructed")

    def __tfrt_destroy__(self) -> None:
        if self._alive:
            self._alive = False
            print_line(f"destroyed vt.value({self.value})")

    def __repr__(self) -> str:
        return f"vt.value({self.value})"


@kernel("vt.constant")
def vt_constant(value: Attr[int]) -> TrackedValue:
    """Constructs ``vt.value(value)`` and moves it into the result."""
    return TrackedValue(int(value)).move()


@kernel("vt.add")
def vt_add(a: TrackedValue, b: TrackedValue) -> TrackedValue:
    """Constructs ``vt.value(a + b)`` and moves it into the result."""
    return TrackedValue(wrap_i32(a.value + b.value)).move()


@kernel("vt.print")
def vt_print(value: TrackedValue) -> Chain:
    """Prints ``print vt_value(v)``."""
    print_line(f"print vt_value({value.value})")
    return CHAIN


def register(registry: KernelRegistry) -> None:
    """Register the ``vt`` kernels."""
    registry.add(vt_constant, vt_add, vt_print)
