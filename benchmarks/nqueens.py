"""N-Queens scheduling benchmark with the settings recorded in docs/benchmarks.md.

Runs ``pytfrt bench nqueens`` (harness: ``benchmarks/nqueens_harness.py``) over n = 8..14, 1
and 2 threads, schedule levels 2..4, 3 interleaved repetitions, with the Numba solver and every
variant (the C++ references if g++ is present, dask if installed).  Writes
``benchmarks/results/nqueens.json`` and ``nqueens.png``.  Takes about 6-10 minutes on 2 cores.

Extra command-line arguments are passed on, e.g. ``python benchmarks/nqueens.py --n 12-13``.
"""

from __future__ import annotations

import sys

from pytfrt.tools.pytfrt_cli import main

RECORDED = ["--n", "8-14", "--threads", "1,2", "--levels", "2,3,4", "--repetitions", "3"]

if __name__ == "__main__":
    sys.exit(main(["bench", "nqueens", *RECORDED, *sys.argv[1:]]))
