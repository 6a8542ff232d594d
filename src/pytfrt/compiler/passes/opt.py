"""The ``tfrt_opt`` side of the graph passes: run named passes on a parsed module.

``tfrt_opt -tg-infer-shapes -tg-fuse-epilogue in.mlir`` parses ``in.mlir``, wraps the module
in a :class:`~pytfrt.compiler.builder.GraphModule` without weights (constants then need inline
``value``s to be folded), runs the passes in command-line order and prints the result; with
``-tg-print-after-all`` the module is also printed after every pass, to the ``dump`` stream, as
MLIR's ``// -----// IR Dump After <pass> //----- //`` blocks.
"""

from __future__ import annotations

from typing import TextIO

from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp

from pytfrt.compiler.builder import GraphModule, signature_of
from pytfrt.compiler.passes import DEFAULT_PIPELINE, PASSES
from pytfrt.signature import Signature

FLAGS: tuple[str, ...] = (*PASSES, "tg-default-pipeline")
"""The pass flags ``tfrt_opt`` accepts (without dashes)."""


def run_on_module(module: ModuleOp, flags: list[str], print_after_all: bool = False,
                  dump: TextIO | None = None) -> None:
    """Run the passes named by ``flags`` (``tg-default-pipeline`` expands) on ``module``.

    Raises:
        GraphError: a pass found the module malformed.
    """
    from pytfrt.mlir.printer import print_module

    has_main = any(isinstance(op, FuncOp) and op.sym_name.data == "main"
                   for op in module.body.block.ops)
    gm = GraphModule(module, {}, signature_of(module) if has_main else Signature())
    names: list[str] = []
    for f in flags:
        names.extend(DEFAULT_PIPELINE if f == "tg-default-pipeline" else [f])
    for name in names:
        PASSES[name](gm)
        if print_after_all and dump is not None:
            dump.write(f"// -----// IR Dump After {name} //----- //\n")
            dump.write(print_module(module))
