"""``pytfrt bench nqueens``: a thin shim over the harness in ``benchmarks/nqueens_harness.py``.

Benchmark harnesses are not part of the installed package: they live in the repository's
``benchmarks/`` folder, and this subcommand loads the N-Queens one from there when pytfrt runs
from a checkout (see :func:`pytfrt.tools.bench.load_harness`).  From an installed wheel it says
so instead of failing obscurely.
"""

from __future__ import annotations

import argparse

from pytfrt.tools.bench import add_harness_arguments, run_harness

HARNESS = "nqueens_harness.py"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The harness's options (none outside a source checkout)."""
    add_harness_arguments(HARNESS, parser)


def run(args: argparse.Namespace) -> int:
    """Run the harness; exit status 2 outside a source checkout."""
    return run_harness("nqueens", HARNESS, args)
