"""``pytfrt bench serve``: the model server under load, per backend (``benchmarks/serve.py``).

The harness lives in the source tree's ``benchmarks/serve.py`` (loaded by path with
:func:`pytfrt.tools.bench.load_harness`); this module forwards ``add_arguments``/``run``.
Outside a source checkout the command says so and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys

from pytfrt.tools.bench import load_harness

HARNESS = "serve.py"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The harness's options (none outside a source checkout)."""
    harness = load_harness(HARNESS)
    if harness is not None:
        harness.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Run the harness; 2 if ``benchmarks/serve.py`` is not there."""
    harness = load_harness(HARNESS)
    if harness is None:
        print("pytfrt bench serve: benchmarks/serve.py not found (the serving benchmark runs "
              "from a source checkout)", file=sys.stderr)
        return 2
    return int(harness.run(args))
