"""The compiler's exceptions: a bad graph (:class:`GraphError`) and an unsupported source op.

Both are ``PytfrtError`` and ``ValueError`` subclasses so callers can catch either.
"""

from __future__ import annotations

from pytfrt.support.errors import PytfrtError


class GraphError(PytfrtError, ValueError):
    """An op of the graph dialect got a bad attribute, operand or type (the message names it)."""


NEXT_STEPS = (" (docs/ops.md lists what pytfrt compiles; to run this model meanwhile, serve it "
              "on its own framework with 'pytfrt serve --backend=tensorflow' or "
              "'--backend=onnxruntime')")
"""What every unsupported-op message ends with: where to look, and what else runs the model."""


class UnsupportedOpError(GraphError):
    """A front end met a source op it cannot express in the graph dialect.

    Attributes:
        op_type: the source op type (``"Conv3D"``, ``"NonMaxSuppression"``).
        node: the node name in the source graph.
        where: the source (a file, or the Python frame that created the node).
        detail: why, when more is known than the op type (e.g. an attribute or operand).
    """

    def __init__(self, op_type: str, node: str = "", where: str = "", detail: str = "") -> None:
        self.op_type = op_type
        self.node = node
        self.where = where
        self.detail = detail
        msg = f"unsupported op '{op_type}'"
        if node:
            msg += f" (node '{node}')"
        if where:
            msg += f" in {where}"
        if detail:
            msg += f": {detail}"
        super().__init__(msg + NEXT_STEPS)
