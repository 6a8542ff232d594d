"""``pytfrt bench models``: the model zoo through pytfrt vs ONNX Runtime, TF and PyTorch.

The harness is ``benchmarks/models.py`` (with the exporters in ``benchmarks/zoo.py``); like the
other benchmark subcommands this is a thin shim that loads it from the repository's
``benchmarks/`` folder (:func:`pytfrt.tools.bench.load_harness`).  Outside a source checkout
the command says so and exits with status 2.
"""

from __future__ import annotations

import argparse

from pytfrt.tools.bench import add_harness_arguments, run_harness

HARNESS = "models.py"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The harness's options (none outside a source checkout)."""
    add_harness_arguments(HARNESS, parser)


def run(args: argparse.Namespace) -> int:
    """Run the harness; exit status 2 outside a source checkout."""
    return run_harness("models", HARNESS, args)
