"""``ts.*`` kernels: tensor shapes (docs/conformance.md).

Payloads: ``!ts.shape`` = :class:`TensorShape`, ``!ts.partial_shape`` =
:class:`PartialTensorShape`, ``!ts.fixed_rank_shape.N`` = :class:`FixedRankShape`.
Print kernels write one line to stdout and flush.  Errors (``ts.to_shape`` of an unknown shape,
bad dimension values) are kernel errors, reported as diagnostics.
"""

from __future__ import annotations

from typing import Any

from pytfrt.host.async_value import CHAIN, Chain
from pytfrt.host.registry import Attr, KernelError, KernelRegistry
from pytfrt.tensor.kernels.util import dims_of, print_line
from pytfrt.tensor.shape import (
    FixedRankShape,
    PartialTensorShape,
    ShapeError,
    TensorShape,
    format_dims,
)


def build_shape(value: Attr[Any]) -> TensorShape:
    """``ts.build_shape [1 : i64, 2 : i64]`` -> ``!ts.shape``."""
    try:
        return TensorShape(dims_of(value))
    except ShapeError as exc:
        raise KernelError(str(exc)) from None


def equal_shape(a: TensorShape, b: TensorShape) -> bool:
    """``ts.equal_shape %a, %b`` -> i1."""
    return a.dims == b.dims


def get_num_elements(shape: TensorShape) -> int:
    """``ts.get_num_elements %s`` -> i64."""
    return shape.num_elements


def get_dimension(shape: TensorShape, index: int) -> int:
    """``ts.get_dimension %s, %i`` -> i64."""
    try:
        return shape.dimension(int(index))
    except ShapeError as exc:
        raise KernelError(str(exc)) from None


def print_shape(shape: TensorShape) -> Chain:
    """``ts.print_shape %s, %ch`` prints ``shape = [..]``."""
    print_line(f"shape = {format_dims(shape.dims)}")
    return CHAIN


def build_partial_shape(value: Attr[Any]) -> PartialTensorShape:
    """``ts.build_partial_shape [-1 : i64, 2 : i64]`` -> ``!ts.partial_shape``."""
    try:
        return PartialTensorShape(dims_of(value))
    except ShapeError as exc:
        raise KernelError(str(exc)) from None


def build_unranked_partial_shape() -> PartialTensorShape:
    """``ts.build_unranked_partial_shape`` -> a partial shape of unknown rank."""
    return PartialTensorShape(None)


def print_partial_shape(shape: PartialTensorShape) -> Chain:
    """Prints ``partial_tensor_shape = [..]`` or ``partial_tensor_shape = Unknown rank``."""
    print_line(f"partial_tensor_shape = {shape}")
    return CHAIN


def to_shape(shape: PartialTensorShape) -> TensorShape:
    """``ts.to_shape %p``; errors ``Unknown rank`` / ``Unknown dimensions at ... = [..]``."""
    try:
        return shape.to_shape()
    except ShapeError as exc:
        raise KernelError(str(exc)) from None


def to_partial_shape(shape: TensorShape) -> PartialTensorShape:
    """``ts.to_partial_shape %s``."""
    return PartialTensorShape.from_shape(shape)


def _as_fixed_rank(rank: int) -> Any:
    def as_fixed_rank_shape(shape: TensorShape) -> FixedRankShape:
        if shape.rank != rank:
            raise KernelError(
                f"cannot convert shape {shape} of rank {shape.rank} to a fixed rank {rank} shape"
            )
        return FixedRankShape(shape.dims)

    return as_fixed_rank_shape


def print_fixed_rank_shape(shape: FixedRankShape) -> Chain:
    """Prints ``fixed_rank_shape = [..]`` (``[]`` whenever the element count is 0)."""
    print_line(f"fixed_rank_shape = {shape}")
    return CHAIN


def register(registry: KernelRegistry) -> None:
    """Register every ``ts.*`` kernel."""
    registry.add_kernel("ts.build_shape", build_shape)
    registry.add_kernel("ts.equal_shape", equal_shape)
    registry.add_kernel("ts.get_num_elements", get_num_elements)
    registry.add_kernel("ts.get_dimension", get_dimension)
    registry.add_kernel("ts.print_shape", print_shape)
    registry.add_kernel("ts.build_partial_shape", build_partial_shape)
    registry.add_kernel("ts.build_unranked_partial_shape", build_unranked_partial_shape)
    registry.add_kernel("ts.print_partial_shape", print_partial_shape)
    registry.add_kernel("ts.to_shape", to_shape)
    registry.add_kernel("ts.to_partial_shape", to_partial_shape)
    for rank in range(0, 6):
        registry.add_kernel(f"ts.as_fixed_rank_shape.{rank}", _as_fixed_rank(rank))
        registry.add_kernel(f"ts.print_fixed_rank_shape.{rank}", print_fixed_rank_shape)
