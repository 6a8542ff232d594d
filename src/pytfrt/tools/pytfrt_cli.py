"""The ``pytfrt`` umbrella command: ``pytfrt compile``, ``pytfrt run``, ``pytfrt serve``,
``pytfrt demo``, ``pytfrt bench ...``, ``pytfrt profile``; ``pytfrt --version``.

Subcommands live in their own modules, imported only when chosen (start-up stays fast).  Each
module exposes ``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("pytfrt.tools.demo", "compile Keras ResNet-50 and run it against TensorFlow"),
    "bench": ("pytfrt.tools.bench", "run a benchmark harness (e.g. 'pytfrt bench nqueens')"),
    "profile": ("pytfrt.tools.profile", "run a function N times and print a per-kernel profile"),
    "serve": ("pytfrt.tools.serve_cmd", "serve models over TensorFlow Serving's REST API"),
    "compile": ("pytfrt.tools.compile_cmd", "compile a SavedModel/Keras/ONNX/.mlir model to a dir"),
    "run": ("pytfrt.tools.run_cmd", "run a compiled model on .npy inputs"),
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``pytfrt`` command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = "pytfrt {" + ",".join(SUBCOMMANDS) + "} ..."
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: {usage}\n\ncommands:")
        for name, (_, help_text) in SUBCOMMANDS.items():
            print(f"  {name:<10} {help_text}")
        print("\n  --version  print pytfrt's version and exit")
        return 0 if argv else 2
    command = argv[0]
    if command in ("--version", "-V"):
        from pytfrt import __version__

        print(f"pytfrt {__version__}")
        return 0
    if command not in SUBCOMMANDS:
        close = difflib.get_close_matches(command, SUBCOMMANDS, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        print(f"pytfrt: unknown command '{command}' (choose from {', '.join(SUBCOMMANDS)})"
              f"{hint}", file=sys.stderr)
        return 2
    module_name, help_text = SUBCOMMANDS[command]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            print(f"pytfrt: '{command}' is not yet available in this version", file=sys.stderr)
            return 1
        raise
    parser = argparse.ArgumentParser(prog=f"pytfrt {command}", description=help_text)
    module.add_arguments(parser)
    args = parser.parse_args(argv[1:])
    return int(module.run(args))


if __name__ == "__main__":
    sys.exit(main())
