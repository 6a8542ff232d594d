"""``pytfrt run DIR --input NAME=file.npy ...``: run a saved model on NumPy inputs.

Inputs are ``.npy`` files given by input name (``--input x=x.npy``); outputs are printed (name,
dtype, shape, values) or, with ``--output out.npz``, saved by output name.  Loads the model with
:func:`pytfrt.load` (no compiler needed).  Exit status 1 with a one-line error on failure.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommand's arguments."""
    parser.add_argument("model", help="a directory written by 'pytfrt compile' or model.save")
    parser.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                        help="an input, by name (repeat for each input)")
    parser.add_argument("--output", default=None, help="save the outputs to this .npz file")


def _fail(message: str) -> int:
    print(f"pytfrt run: error: {message}", file=sys.stderr)
    return 1


def run(args: argparse.Namespace) -> int:
    """Load, run, print or save; returns the exit status."""
    import numpy as np

    from pytfrt.model import ModelError, load

    try:
        model = load(args.model)
    except ModelError as exc:
        return _fail(str(exc))
    inputs = {}
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            return _fail(f"--input must be NAME=FILE.npy, got '{item}'")
        try:
            inputs[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            return _fail(f"cannot read input '{name}' from '{path}': {exc}")
    try:
        result = model(**inputs)
    except (ValueError, ModelError) as exc:
        return _fail(str(exc))
    names = [s.name for s in model.signature.outputs]
    if isinstance(result, dict):
        values = [result[n] for n in names]
    elif isinstance(result, tuple | list):
        values = list(result)
    else:
        values = [result]
    if args.output:
        try:
            np.savez(args.output, **dict(zip(names, values, strict=True)))
        except OSError as exc:
            return _fail(f"cannot write '{args.output}': {exc.strerror or exc}")
        print(f"saved {len(values)} outputs to {args.output}")
        return 0
    with np.printoptions(threshold=64, precision=6, suppress=True):
        for n, v in zip(names, values, strict=True):
            print(f"{n}: {v.dtype} {list(v.shape)}")
            print(np.array2string(v))
    return 0
