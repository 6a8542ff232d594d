"""``!tg.string``, the graph dialect's element type of string tensors (an xDSL type).

Kept apart from :mod:`pytfrt.compiler.dialect` (which builds the op classes from the
catalogue) so that :mod:`pytfrt.compiler.types` can name it without importing the catalogue.
"""

from __future__ import annotations

from xdsl.ir import ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition


@irdl_attr_definition
class StringType(ParametrizedAttribute, TypeAttribute):
    """``!tg.string``: the element type of string tensors."""

    name = "tg.string"
