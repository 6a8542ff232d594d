"""Catalogue family ``shape_plan``: shape computations run once per input shape.

``shape_plan(inputs*) ({region})`` -- the region's ops (``shape``, ``gather``, ``concat``,
``range``, ``select``... of values that depend only on the shapes of some tensors and on
constants) run by one kernel, which keeps their results per distinct tuple of those tensors'
shapes (:mod:`pytfrt.backends.cpu.shape_plan`).  Its operands are the tensors whose shapes the
region reads and the constants it uses; its results are what the region's ``yield`` returns.
Made by ``-tg-shape-plans``, never by front ends; not differentiable (it runs after
differentiation, and shapes carry no gradient).
"""

from __future__ import annotations

from pytfrt.compiler.ops.base import InferContext, define
from pytfrt.compiler.types import TType


def _made_by_pass(ctx: InferContext) -> list[TType]:
    raise ctx.error("is made by -tg-shape-plans, not by front ends")


define("shape_plan", ("inputs*",), _made_by_pass, family="shape_plan", compute=None,
       num_results=None,
       no_grad="made by -tg-shape-plans, which runs after differentiation",
       doc="shape computations run once per distinct tuple of its key operands' shapes (made "
           "by -tg-shape-plans; results: the values its yield returns)")
