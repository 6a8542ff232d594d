"""``pytfrt compile SRC -o DIR``: compile a model and save it (``model.bef``, ``weights.btf``,
``manifest.json``).

SRC is a SavedModel directory, a ``.keras``/``.h5`` file, an ``.onnx`` file or a ``.mlir`` file
of the graph dialect (weights zero-filled).  Prints each stage as it ends, with its time (the
front end's import, every pass of the default pipeline, lowering, kernel preparation, saving,
the Numba kernels of small-graph regions compiled into the on-disk cache), then
one summary line; ``--quiet`` prints only the summary, ``--print-ir`` also prints the optimised
graph.  Stage lines go to standard error so that standard output stays the summary (and the IR).
Exit status 1 with a one-line error on failure.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommand's arguments."""
    parser.add_argument("source", help="SavedModel dir, .keras/.h5, .onnx or .mlir file")
    parser.add_argument("-o", "--output", required=True, help="directory to save the model to")
    parser.add_argument("--signature", default=None, help="SavedModel signature key")
    parser.add_argument("--no-optimize", action="store_true", help="skip the pass pipeline")
    parser.add_argument("--print-ir", action="store_true", help="print the optimised graph")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="print only the summary line, not each stage with its time")


class _Stages:
    """Prints ``  <stage> <seconds>`` to standard error as each stage of the compile ends."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.start = self.last = time.perf_counter()

    def done(self, stage: str) -> None:
        now = time.perf_counter()
        if not self.quiet:
            print(f"  {stage:<28} {now - self.last:7.2f} s", file=sys.stderr, flush=True)
        self.last = now

    def total(self) -> float:
        return time.perf_counter() - self.start


def _precompile_regions(saved: str, program: Any) -> int:
    """Fill the on-disk cache with the program's whole-region Numba kernels
    (``tg.fused_graph``), so that serving or running the saved model on this machine loads
    them instead of compiling them while it serves: the saved model is loaded and called on
    zeros until the regions compile, as a later process calls them (the same argument types,
    read-only weights included).  Returns how many regions there are (0 also when the call
    fails: then the kernels compile when the saved model runs)."""
    texts = {dict(k.attributes)["program"] for f in program.functions for k in f.kernels
             if k.name == "tg.fused_graph"}
    if not texts:
        return 0
    import numpy as np

    from pytfrt.backends.cpu import small_graph
    from pytfrt.model import load

    try:
        model = load(saved)
        if any(spec.shape is None for spec in model.signature.inputs):
            return 0  # an input of unknown rank: no zeros to call it with
        feeds = [np.zeros([1 if d is None else d for d in spec.shape or ()], spec.dtype)
                 for spec in model.signature.inputs]
        for _ in range(small_graph.COMPILE_AFTER + 1):
            model(*feeds)
    except Exception:  # noqa: BLE001 - best effort: the saved model compiles them when it runs
        return 0
    small_graph.wait_for_compiles()
    return len(texts)


def run(args: argparse.Namespace) -> int:
    """Compile and save; returns the exit status."""
    from pytfrt.compiler.api import to_graph
    from pytfrt.compiler.errors import GraphError
    from pytfrt.compiler.lowering import lower
    from pytfrt.compiler.passes import DEFAULT_PIPELINE, run_passes
    from pytfrt.mlir.diagnostics import MlirError
    from pytfrt.model import CompiledModel, ModelError
    from pytfrt.support.errors import PytfrtError

    stages = _Stages(args.quiet)
    if not args.quiet:
        print(f"pytfrt compile {args.source}", file=sys.stderr, flush=True)
    try:
        gm = to_graph(args.source, signature=args.signature)
        stages.done("import")
        if not args.no_optimize:
            gm = run_passes(gm, DEFAULT_PIPELINE, after=lambda name, _: stages.done(name))
        if args.print_ir:
            print(gm)
        low = lower(gm)
        stages.done("lowering to BEF")
        model = CompiledModel(low.program, [low.weights[n] for n in low.init_inputs],
                              low.signature, low.num_resources, low.init_inputs, low.variables)
        stages.done("kernel preparation")
        model.save(args.output)
        stages.done("save")
        if _precompile_regions(args.output, low.program):
            stages.done("Numba kernels (cached)")
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
          f"-> {args.output} in {stages.total():.1f} s")
    return 0
