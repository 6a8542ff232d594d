"""Declared ranges of kernel attributes, checked when an untrusted program is loaded.

The BEF reader (:mod:`pytfrt.bef.reader`) checks a file's structure; this module checks the
*values* of the ``tg.*`` kernels' geometry attributes -- pads, strides, dilations, window and
block sizes, axes, permutations and shapes -- against the ranges those kernels accept, so a
damaged or hostile program is refused at load time instead of computing a plausible-looking
wrong answer (a single flipped byte can turn conv pads ``[0, 1, 0, 1]`` into
``[34304, 1, 0, 1]``) or asking for terabytes.

The table :data:`RANGES` maps an attribute name to its :class:`Range`;
:data:`KERNEL_RANGES` overrides it for one kernel (``tg.pad``'s pads may be negative and large).
Every ``tg.*`` kernel attribute with a name in either table is checked, whatever the kernel;
``.buf`` kernels are checked as their plain kernel.  The limits are stated in
docs/security.md.  Pure functions over a :class:`~pytfrt.bef.program.Program`: thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pytfrt.bef.program import Program
from pytfrt.support.attributes import ArrayAttr, Attribute, IntAttr
from pytfrt.support.errors import PytfrtError

__all__ = ["KERNEL_RANGES", "MAX_ELEMENTS", "MAX_RANK", "MAX_SPATIAL", "RANGES",
           "AttributeRangeError", "Range", "check_attributes", "check_value"]

MAX_SPATIAL = 4096
"""The largest pad, stride, dilation, window or block size a ``tg`` kernel accepts."""

MAX_RANK = 32
"""The largest rank (and so the range of an axis) a ``tg`` kernel accepts."""

MAX_ELEMENTS = 1 << 34
"""The most elements a shape attribute may describe (16 Gi elements)."""


class AttributeRangeError(PytfrtError):
    """A kernel attribute is outside its declared range."""


@dataclass(frozen=True)
class Range:
    """What an attribute may hold.

    Attributes:
        low: the smallest value of each element (an int, or each int of a list).
        high: the largest value of each element.
        product: the elements' product (their positive ones) may be at most this (shapes).
        permutation: the list must be a permutation of ``0 .. len - 1``.
        max_len: the longest list.
    """

    low: int
    high: int
    product: int | None = None
    permutation: bool = False
    max_len: int = MAX_RANK * 2


RANGES: dict[str, Range] = {
    "pads": Range(0, MAX_SPATIAL),
    "output_padding": Range(0, MAX_SPATIAL),
    "strides": Range(1, MAX_SPATIAL),
    "dilations": Range(1, MAX_SPATIAL),
    "ksize": Range(1, MAX_SPATIAL),
    "block_size": Range(1, MAX_SPATIAL),
    "depth_radius": Range(0, MAX_SPATIAL),
    "groups": Range(1, 1 << 20),
    "axis": Range(-MAX_RANK, MAX_RANK),
    "axes": Range(-MAX_RANK, MAX_RANK - 1),
    "batch_dims": Range(-MAX_RANK, MAX_RANK),
    "perm": Range(0, MAX_RANK - 1, permutation=True),
    "shape": Range(-1, MAX_ELEMENTS, product=MAX_ELEMENTS, max_len=MAX_RANK),
    "static_shape": Range(-1, MAX_ELEMENTS, product=MAX_ELEMENTS, max_len=MAX_RANK),
    "multiples": Range(0, MAX_ELEMENTS, product=MAX_ELEMENTS, max_len=MAX_RANK),
    "size": Range(0, MAX_ELEMENTS, product=MAX_ELEMENTS, max_len=MAX_RANK),
    "sizes": Range(-1, MAX_ELEMENTS, max_len=1 << 16),
    "buffer": Range(0, 1 << 31),
}
"""Attribute name -> its range, for every ``tg.*`` kernel."""

KERNEL_RANGES: dict[tuple[str, str], Range] = {
    # tg.pad: negative pads crop (ONNX Pad); a pad may be as large as a shape
    ("tg.pad", "pads"): Range(-MAX_ELEMENTS, MAX_ELEMENTS, max_len=MAX_RANK * 2),
    # quantize/dequantize: block_size 0 means per tensor or per axis (not blocked)
    ("tg.quantize_linear", "block_size"): Range(0, MAX_ELEMENTS),
    ("tg.dequantize_linear", "block_size"): Range(0, MAX_ELEMENTS),
}
"""(kernel, attribute) -> its range, overriding :data:`RANGES` for that kernel."""


def _ints(attr: Attribute) -> tuple[list[int], bool] | None:
    """The integers of an int or int-array attribute and whether it is a list (``None``
    for any other kind)."""
    if isinstance(attr, IntAttr) and attr.type != "i1":
        return [attr.data], False
    if isinstance(attr, ArrayAttr) and all(isinstance(e, IntAttr) for e in attr.elements):
        return [e.data for e in attr.elements if isinstance(e, IntAttr)], True
    return None


def check_value(kernel: str, name: str, attr: Attribute) -> str | None:
    """Why attribute ``name`` of ``kernel`` is out of its declared range (``None``: it is in
    range, or the attribute has no declared range)."""
    base = kernel[:-4] if kernel.endswith(".buf") else kernel
    spec = KERNEL_RANGES.get((base, name)) or RANGES.get(name)
    if spec is None:
        return None
    got = _ints(attr)
    if got is None:
        return f"attribute '{name}' must be an integer or a list of integers"
    values, is_list = got
    if len(values) > spec.max_len:
        return f"attribute '{name}' has {len(values)} elements (at most {spec.max_len})"
    for v in values:
        if not spec.low <= v <= spec.high:
            shown = values if len(values) <= 8 else values[:8] + ["..."]
            return (f"attribute '{name}' = {shown if is_list else v} is out of range "
                    f"(each value in [{spec.low}, {spec.high}])")
    if spec.permutation and sorted(values) != list(range(len(values))):
        return f"attribute '{name}' = {values} is not a permutation"
    if spec.product is not None:
        n = 1
        for v in values:
            n *= max(v, 1)
        if n > spec.product:
            return (f"attribute '{name}' describes {n} elements, more than the limit of "
                    f"{spec.product}")
    return None


def check_attributes(program: Program | Iterable[Any]) -> None:
    """Check every ``tg.*`` kernel attribute that has a declared range.

    Raises:
        AttributeRangeError: for the first attribute out of range, naming the kernel, its
            function and the attribute.
    """
    functions = program.functions if isinstance(program, Program) else program
    for fn in functions:
        for k in getattr(fn, "kernels", ()):
            if not k.name.startswith("tg."):
                continue
            for name, attr in k.attributes:
                why = check_value(k.name, name, attr)
                if why is not None:
                    raise AttributeRangeError(
                        f"{k.name} in @{fn.name or '<anonymous>'}: {why}")
