"""``pytfrt bench serve``: the model server under load, per backend (``benchmarks/serve.py``).

The harness lives in the source tree's ``benchmarks/serve.py`` (loaded by path with
:func:`pytfrt.tools.bench.load_harness`); this module forwards ``add_arguments``/``run``.
Outside a source checkout the command says so and exits with status 2.
"""

from __future__ import annotations

import argparse

from pytfrt.tools.bench import add_harness_arguments, run_harness

HARNESS = "serve.py"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The harness's options (none outside a source checkout)."""
    add_harness_arguments(HARNESS, parser)


def run(args: argparse.Namespace) -> int:
    """Run the harness; exit status 2 outside a source checkout."""
    return run_harness("serve", HARNESS, args)
