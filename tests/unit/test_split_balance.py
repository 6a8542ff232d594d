"""``benchmarks/split_balance.py``'s grouping of the spin pool's trace records into jobs
(known answers; no model is compiled or run)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
split_balance = pytest.importorskip("split_balance")


def test_trace_records_are_grouped_into_jobs_with_caller_and_helper_parts() -> None:
    helpers = 1  # slot 1 is the caller's, slot 0 the helper's
    records = np.array([
        [7, 0, 0, 0],  # a part before any job record (tracing started mid-job): ignored
        [-1, 2, 100, 5000],  # job: 2 parts, published at 100, first part's primitive 5000
        [1, 0, 101, 400],
        [0, 1, 103, 420],
        [-1, 2, 500, 6000],  # the caller ran both parts (the helper was busy)
        [1, 0, 501, 700],
        [1, 1, 700, 900],
    ], np.int64)
    jobs = split_balance._jobs(records, helpers)
    assert [(j["parts"], j["publish"], j["prim"]) for j in jobs] == [(2, 100, 5000),
                                                                     (2, 500, 6000)]
    assert jobs[0]["caller"] == [(101, 400)] and jobs[0]["helper"] == [(103, 420)]
    assert jobs[1]["caller"] == [(501, 700), (700, 900)] and jobs[1]["helper"] == []
