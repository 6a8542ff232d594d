"""``tfrt_tutorial`` kernels from TFRT's tutorial: a user-defined ``!my.coordinate`` type
(docs/conformance.md)."""

from __future__ import annotations

from dataclasses import dataclass

from pytfrt.host.async_value import CHAIN, Chain
from pytfrt.host.registry import KernelRegistry, kernel
from pytfrt.kernels.common import print_line


@dataclass(frozen=True, slots=True)
class Coordinate:
    """A 2-D integer coordinate."""

    x: int
    y: int


@kernel("tfrt_tutorial.create_coordinate")
def create_coordinate(x: int, y: int) -> Coordinate:
    """``Coordinate(x, y)``."""
    return Coordinate(x, y)


@kernel("tfrt_tutorial.print_coordinate")
def print_coordinate(coordinate: Coordinate) -> Chain:
    """Prints ``(x, y)``."""
    print_line(f"({coordinate.x}, {coordinate.y})")
    return CHAIN


def register(registry: KernelRegistry) -> None:
    """Register the tutorial kernels."""
    registry.add(create_coordinate, print_coordinate)
