"""``pytfrt demo``: the main job -- compile the XOR training program to BEF and run it.

The program (``examples/mlp_xor/xor_training.mlir``) trains a 2-2-1 sigmoid MLP on XOR with
forward pass, backward pass and SGD updates written as TFRT kernels in MLIR.  The demo does what
a user would do with the tools, in one process: ``tfrt_translate --mlir-to-bef`` (MLIR -> BEF
file) and ``bef_executor --functions=xor_training`` (load the BEF, run it), then prints the
result: the loss every 200 steps, the final predictions and how many XOR outputs are correct.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_PROGRAM = REPO_ROOT / "examples" / "mlp_xor" / "xor_training.mlir"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the demo's options."""
    parser.add_argument(
        "--program",
        default=str(DEFAULT_PROGRAM),
        help="the MLIR program to run (default: %(default)s)",
    )
    parser.add_argument("--function", default="xor_training", help="the function to run")
    parser.add_argument(
        "--work_queue_type", default="s", help="work queue: s, mstd, mstd:N or mstd:N,M"
    )


def run(args: argparse.Namespace) -> int:
    """Compile and run the program; returns the exit status."""
    from pytfrt.tools import bef_executor, tfrt_translate

    program = Path(args.program)
    if not program.is_file():
        print(f"pytfrt demo: program '{program}' not found", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="pytfrt-demo-") as tmp:
        bef_path = os.path.join(tmp, program.stem + ".bef")
        print(f"== compiling {program.name} to BEF (tfrt_translate --mlir-to-bef)", flush=True)
        start = time.perf_counter()
        status = tfrt_translate.main(["--mlir-to-bef", str(program), "-o", bef_path])
        if status != 0:
            return status
        size = os.path.getsize(bef_path)
        print(f"   {size} bytes of BEF in {time.perf_counter() - start:.2f} s", flush=True)
        print(f"== running '{args.function}' (bef_executor)", flush=True)
        start = time.perf_counter()
        status = bef_executor.main(
            [f"--functions={args.function}", f"--work_queue_type={args.work_queue_type}", bef_path]
        )
        print(f"== done in {time.perf_counter() - start:.2f} s", flush=True)
    return status
