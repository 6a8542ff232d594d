"""Fused segments under the host allocators, as ``bef_executor`` runs the seed program.

``bef_executor examples/mlp_xor/xor_training.mlir`` with default flags uses the leak-checking
allocator: the fused path must run there (tensors that leave a segment are accounted, and the
run ends with no leak), and print exactly what the unfused run prints (the oracle:
``PYTFRT_FUSE_SEGMENTS=0``).  Under the profiling allocator, whose report shows every count,
segments that make tensors stay unfused, so its report equals the unfused run's.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest

from pytfrt.executor import fused_segments
from pytfrt.executor.whole_function import FUSE_SWITCH
from pytfrt.tools import bef_executor

XOR = Path(__file__).resolve().parents[3] / "examples" / "mlp_xor" / "xor_training.mlir"
pytestmark = pytest.mark.timeout(300)


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fuse: bool,
         *flags: str) -> tuple[int, str, str, list[Any]]:
    program = tmp_path / "xor.mlir"
    program.write_text(XOR.read_text().replace("tfrt.constant.i32 2000",
                                               "tfrt.constant.i32 300"))
    monkeypatch.setenv(FUSE_SWITCH, "1" if fuse else "0")
    made: list[Any] = []
    init = fused_segments.FusedSegment.__init__

    def spy(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(fused_segments.FusedSegment, "__init__", spy)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = bef_executor.main([*flags, str(program)])
    return status, out.getvalue(), err.getvalue(), made


def test_the_default_leak_checking_allocator_runs_fused_and_leaks_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    status, out, err, segments = _run(tmp_path, monkeypatch, True)
    assert status == 0, err
    assert "Memory leak detected" not in out + err
    assert sum(s.hits for s in segments) > 0  # the fused path ran
    ref_status, ref_out, ref_err, ref_segments = _run(tmp_path, monkeypatch, False)
    assert ref_status == 0 and ref_segments == []
    assert out == ref_out
    assert "correct: 4/4" in out


def test_the_profiling_allocator_keeps_segments_that_make_tensors_unfused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flag = "--host_allocator_type=profiled_allocator"
    status, out, err, segments = _run(tmp_path, monkeypatch, True, flag)
    ref_status, ref_out, ref_err, _ = _run(tmp_path, monkeypatch, False, flag)
    assert status == ref_status == 0
    assert out == ref_out
    assert "Total number of allocations" in out + err
    profile = [ln for ln in (out + err).splitlines() if "number of" in ln]
    ref_profile = [ln for ln in (ref_out + ref_err).splitlines() if "number of" in ln]
    assert profile == ref_profile  # every count as unfused
