"""The heap policy of a train step (:mod:`pytfrt.host.heap`): freed tensor-sized blocks are
reused instead of coming back as fresh pages (page faults counted by ``getrusage``)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from pytfrt.host import heap

# Allocates eight 2 MB arrays, frees them, five times over; prints the minor page faults of
# the last four rounds (the first round faults in any case) and whether the policy is on.
_CHILD = """
import resource, sys
import numpy as np
from pytfrt.host import heap
on = heap.keep_freed_memory() if sys.argv[1] == "keep" else False
def round_():
    arrays = [np.ones(1 << 19, np.float32) for _ in range(8)]
    del arrays
round_()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):
    round_()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before, on)
"""


def _faults(mode: str, **env: str) -> tuple[int, bool]:
    environ = {k: v for k, v in os.environ.items()
               if k not in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                            "PYTFRT_KEEP_HEAP")}
    out = subprocess.run([sys.executable, "-c", _CHILD, mode], capture_output=True,
                         text=True, check=True, env={**environ, **env}, timeout=60)
    faults, on = out.stdout.split()
    return int(faults), on == "True"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_blocks_are_reused_without_page_faults() -> None:
    default, _ = _faults("default")
    kept, on = _faults("keep")
    if not on:
        pytest.skip("not glibc")
    # 4 rounds x 16 MB: 16384 pages that fault again unless the heap keeps them
    assert default > 4000
    assert kept < default // 4


def test_switched_off_and_user_thresholds_stand() -> None:
    assert _faults("keep", PYTFRT_KEEP_HEAP="0")[1] is False
    assert _faults("keep", MALLOC_TRIM_THRESHOLD_="1000000")[1] is False


def test_idempotent_in_process() -> None:
    first = heap.keep_freed_memory()
    assert heap.keep_freed_memory() is first
    np.ones(1 << 20, np.float32).sum()  # allocation still works under the policy
