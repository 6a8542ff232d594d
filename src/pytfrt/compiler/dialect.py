"""The ``tg`` xDSL dialect: one op class per catalogue entry, generic form only.

Op classes are generated from :data:`pytfrt.compiler.ops.CATALOGUE` (plain xDSL
``Operation`` subclasses, like the TFRT dialects' in :mod:`pytfrt.mlir.ops_base`), named
``<Name>Op`` with ``name = "tg.<name>"``.  They print and parse in MLIR's generic form
(``%y = "tg.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>``); the verifier checks the operand
count against the catalogue and that every operand and result is a tensor.  ``!tg.string`` is
the element type of string tensors.  :func:`tg_dialect` is what the project's xDSL context
loads (``pytfrt.mlir.context``), so ``tfrt_opt`` parses ``tg.*``.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import TensorType, UnrankedTensorType
from xdsl.ir import Dialect, Operation
from xdsl.irdl import traits_def
from xdsl.utils.exceptions import VerifyException

from pytfrt.compiler.ops import CATALOGUE, OpDef
from pytfrt.compiler.string_type import StringType


class TgOp(Operation):
    """Base of the generated ``tg`` op classes."""

    name: ClassVar[str] = "tg.op"
    opdef: ClassVar[OpDef]
    traits = traits_def()

    def verify_(self) -> None:
        lo, hi = self.opdef.operand_range
        n = len(self.operands)
        if n < lo or (hi is not None and n > hi):
            want = f"{lo}" if lo == hi else f"{lo}..{'' if hi is None else hi}"
            raise VerifyException(f"'{self.name}' op requires {want} operands, but found {n}")
        if self.opdef.num_results is not None and len(self.results) != self.opdef.num_results:
            raise VerifyException(
                f"'{self.name}' op requires {self.opdef.num_results} results, but found "
                f"{len(self.results)}"
            )
        for what, values in (("operand", self.operands), ("result", self.results)):
            for i, v in enumerate(values):
                if not isinstance(v.type, TensorType | UnrankedTensorType):
                    raise VerifyException(f"'{self.name}' op {what} #{i} must be a tensor")


def _class_name(op: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in op.split("_")) + "Op"


OP_CLASSES: dict[str, type[TgOp]] = {
    name: type(_class_name(name), (TgOp,), {"name": f"tg.{name}", "opdef": opdef})
    for name, opdef in CATALOGUE.items()
}
"""Op name (without ``tg.``) -> op class."""


def tg_dialect() -> Dialect:
    """The ``tg`` dialect (every catalogue op, the string type)."""
    return Dialect("tg", list(OP_CLASSES.values()), [StringType])


def op_class(name: str) -> type[TgOp]:
    """The op class of ``name`` (without ``tg.``); ``KeyError`` if unknown."""
    return OP_CLASSES[name]
