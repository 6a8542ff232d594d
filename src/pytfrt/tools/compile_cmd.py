"""``pytfrt compile SRC -o DIR``: compile a model and save it (``model.bef``, ``weights.btf``,
``manifest.json``).

SRC is a SavedModel directory, a ``.keras``/``.h5`` file, an ``.onnx`` file or a ``.mlir`` file
of the graph dialect (weights zero-filled).  Prints one summary line; ``--print-ir`` also
prints the optimised graph.  Exit status 1 with a one-line error on failure.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommand's arguments."""
    parser.add_argument("source", help="SavedModel dir, .keras/.h5, .onnx or .mlir file")
    parser.add_argument("-o", "--output", required=True, help="directory to save the model to")
    parser.add_argument("--signature", default=None, help="SavedModel signature key")
    parser.add_argument("--no-optimize", action="store_true", help="skip the pass pipeline")
    parser.add_argument("--print-ir", action="store_true", help="print the optimised graph")


def run(args: argparse.Namespace) -> int:
    """Compile and save; returns the exit status."""
    from pytfrt.compiler.api import to_graph
    from pytfrt.compiler.errors import GraphError
    from pytfrt.compiler.lowering import lower
    from pytfrt.compiler.passes import default_pipeline
    from pytfrt.mlir.diagnostics import MlirError
    from pytfrt.model import CompiledModel, ModelError
    from pytfrt.support.errors import PytfrtError

    try:
        gm = to_graph(args.source, signature=args.signature)
        if not args.no_optimize:
            gm = default_pipeline(gm)
        if args.print_ir:
            print(gm)
        low = lower(gm)
        model = CompiledModel(low.program, [low.weights[n] for n in low.init_inputs],
                              low.signature, low.num_resources, low.init_inputs, low.variables)
        model.save(args.output)
    except MlirError as exc:
        print(str(exc).rstrip(), file=sys.stderr)
        return 1
    except (GraphError, ModelError, PytfrtError, OSError, ValueError) as exc:
        print(f"pytfrt compile: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - a front end's own error type, reported in one line
        print(f"pytfrt compile: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    main = low.program.get("main")
    nbytes = sum(w.nbytes for w in low.weights.values())
    sig = model.signature
    print(f"compiled {args.source}: {len(sig.inputs)} inputs, {len(sig.outputs)} outputs, "
          f"{len(main.kernels)} kernels in @main, {len(low.weights)} weights ({nbytes} bytes) "
          f"-> {args.output}")
    return 0
