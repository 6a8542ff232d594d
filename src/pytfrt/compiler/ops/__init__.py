"""The op catalogue of the graph dialect: every ``tg`` op's attributes, inference and compute.

:data:`CATALOGUE` maps an op name (without ``tg.``) to its :class:`OpDef`; importing this
package imports every family module (elementwise, nn, shape, reductions, state, control, and
other helpers' families such as ``grad`` when present), which register their ops with
:func:`define`.  No xDSL here: the catalogue is plain Python + NumPy.
"""

from __future__ import annotations

import importlib

from pytfrt.compiler.ops import control as control
from pytfrt.compiler.ops import elementwise as elementwise
from pytfrt.compiler.ops import nn as nn
from pytfrt.compiler.ops import reductions as reductions
from pytfrt.compiler.ops import shape as shape
from pytfrt.compiler.ops import state as state
from pytfrt.compiler.ops.base import CATALOGUE as CATALOGUE
from pytfrt.compiler.ops.base import REQUIRED as REQUIRED
from pytfrt.compiler.ops.base import AttrSpec as AttrSpec
from pytfrt.compiler.ops.base import InferContext as InferContext
from pytfrt.compiler.ops.base import OpDef as OpDef
from pytfrt.compiler.ops.base import define as define

#: Family modules of other owners, imported when they exist.
OPTIONAL_FAMILIES = ("pytfrt.compiler.ops.grad", "pytfrt.compiler.ops.onnx_extra",
                     "pytfrt.compiler.ops.recurrent", "pytfrt.compiler.ops.onnx_more",
                     "pytfrt.compiler.ops.onnx_nd", "pytfrt.compiler.ops.onnx_text",
                     "pytfrt.compiler.ops.quant", "pytfrt.compiler.ops.quant_dynamic",
                     "pytfrt.compiler.ops.volume", "pytfrt.compiler.ops.image",
                     "pytfrt.compiler.ops.strings", "pytfrt.compiler.ops.dynamic",
                     "pytfrt.compiler.ops.transformer", "pytfrt.compiler.ops.shape_plan")

for _mod in OPTIONAL_FAMILIES:
    try:
        importlib.import_module(_mod)
    except ModuleNotFoundError as _exc:
        if _exc.name != _mod:
            raise


def get_opdef(name: str) -> OpDef:
    """The OpDef of ``name`` (with or without ``tg.``).

    Raises:
        pytfrt.compiler.GraphError: for an unknown op.
    """
    from pytfrt.compiler.errors import GraphError

    key = name[3:] if name.startswith("tg.") else name
    opdef = CATALOGUE.get(key)
    if opdef is None:
        raise GraphError(f"unknown op 'tg.{key}' (not in the catalogue, docs/graph_dialect.md)")
    return opdef


__all__ = ["CATALOGUE", "REQUIRED", "AttrSpec", "InferContext", "OpDef", "define", "get_opdef"]
