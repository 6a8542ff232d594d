"""``pytfrt run DIR --input NAME=file.npy ...``: run a saved model on NumPy inputs.

Inputs are ``.npy`` files given by input name (``--input x=x.npy``); a model with one input also
takes ``--input x.npy``.  Outputs are printed (name, dtype, shape, values) or, with
``--output out.npz``, saved by output name.  Loads the model with :func:`pytfrt.load` (no
compiler needed).  Exit status 1 with a one-line error on failure; when DIR is a model that has
not been compiled yet (a SavedModel, ``.keras``, ``.onnx`` ...), the error names the
``pytfrt compile`` command to run first.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommand's arguments."""
    parser.add_argument("model", help="a directory written by 'pytfrt compile' or model.save")
    parser.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                        help="an input, by name (repeat for each input); FILE.npy alone for a "
                             "model with one input")
    parser.add_argument("--output", default=None, help="save the outputs to this .npz file")


def _fail(message: str) -> int:
    print(f"pytfrt run: error: {message}", file=sys.stderr)
    return 1


_SOURCE_SUFFIXES = {".onnx": "an ONNX model", ".keras": "a Keras model", ".h5": "a Keras model",
                    ".mlir": "a graph-dialect program"}


def _uncompiled(path: str) -> str | None:
    """What ``path`` is, if it is a model ``pytfrt compile`` takes rather than a compiled one."""
    from pathlib import Path

    p = Path(path)
    if p.is_dir():
        if (p / "saved_model.pb").is_file() or (p / "saved_model.pbtxt").is_file():
            return "a TensorFlow SavedModel"
        return None
    return _SOURCE_SUFFIXES.get(p.suffix.lower()) if p.is_file() else None


def run(args: argparse.Namespace) -> int:
    """Load, run, print or save; returns the exit status."""
    import numpy as np

    from pytfrt.model import ModelError, load

    kind = _uncompiled(args.model)
    if kind is not None:
        base = args.model.rstrip("/") or "model"
        stem, dot, suffix = base.rpartition(".")
        out = (stem if dot and f".{suffix.lower()}" in _SOURCE_SUFFIXES else base) + "_pytfrt"
        return _fail(f"'{args.model}' is {kind}, not a compiled model: compile it first with "
                     f"'pytfrt compile {args.model} -o {out}', then run 'pytfrt run {out}'")
    try:
        model = load(args.model)
    except ModelError as exc:
        return _fail(str(exc))
    inputs = {}
    input_names = [s.name for s in model.signature.inputs]
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep:
            if len(input_names) != 1 or len(args.input) != 1:
                return _fail(f"--input '{item}' has no name; the model takes "
                             f"{len(input_names)} inputs ({', '.join(input_names)}): pass "
                             f"--input NAME=FILE.npy for each")
            name, path = input_names[0], item
        if not name or not path:
            return _fail(f"--input must be NAME=FILE.npy (or FILE.npy for a model with one "
                         f"input), got '{item}'")
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
