"""Resource caps: hostile BEF sections and huge parallel loops stay bounded in memory.

Memory is measured with ``tracemalloc`` (Python allocations, which is where the blow-ups
were: 40 MB of NUL strings used to become 3 GB of dict entries).
"""

from __future__ import annotations

import threading
import tracemalloc
from collections import deque
from collections.abc import Sequence
from typing import Any

import pytest

from pytfrt.bef.format import BefError, SectionId
from pytfrt.bef.reader import read_bef, read_sections
from pytfrt.bef.writer import _section, write_bef
from pytfrt.host import HostContext
from pytfrt.host.async_value import AsyncValue
from pytfrt.host.function import Function
from pytfrt.kernels.basic import parallel
from pytfrt.kernels.basic.parallel import parallel_for_i32
from pytfrt.mlir import compile_mlir

pytestmark = pytest.mark.timeout(60)

MB = 1024 * 1024


def padded_bef(section: int, filler: bytes) -> bytes:
    """A valid one-function BEF whose ``section`` has ``filler`` appended."""
    program = compile_mlir("func.func @main() -> i32 {\n  %x = tfrt.constant.i32 1\n"
                           "  tfrt.return %x : i32\n}\n", "m.mlir")
    base = write_bef(program)
    out = bytearray(base[:3])
    for sid, (start, end) in sorted(read_sections(base).items(), key=lambda kv: kv[1][0]):
        _section(out, sid, base[start:end] + (filler if sid == section else b""))
    return bytes(out)


def peak_bytes(data: bytes) -> tuple[int, str]:
    tracemalloc.start()
    try:
        try:
            read_bef(data)
            outcome = "ok"
        except BefError as exc:
            outcome = str(exc)
        return tracemalloc.get_traced_memory()[1], outcome
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("section", [SectionId.STRINGS, SectionId.LOCATION_STRINGS,
                                     SectionId.LOCATIONS, SectionId.ATTRIBUTES,
                                     SectionId.FUNCTIONS])
def test_section_of_nul_strings_costs_no_more_than_its_bytes(section: int) -> None:
    data = padded_bef(section, b"\0" * (4 * MB))
    peak, outcome = peak_bytes(data)
    assert peak < 2 * len(data), (peak, outcome)  # was ~75x the file for Strings


def test_junk_location_records_are_refused() -> None:
    _, outcome = peak_bytes(padded_bef(SectionId.LOCATIONS, b"\0" * MB))
    assert outcome.startswith("more location records than the Functions section can reference")


def test_truncated_and_oversized_sections_are_errors() -> None:
    data = padded_bef(SectionId.STRINGS, b"")
    with pytest.raises(BefError):
        read_bef(data[:-3])
    with pytest.raises(BefError):  # a section header claiming more bytes than the file has
        read_bef(data[:3] + bytes([SectionId.STRINGS]) + b"\xff\xff\xff\x7f" + b"\0" * 16)


# -- tfrt.parallel_for with very many blocks ---------------------------------------------------


class Body(Function):
    """A synchronous body that records the queue's length while it runs."""

    name = "body"
    argument_types = ("i32", "i32")
    result_types = ()

    def __init__(self, host: HostContext) -> None:
        self.host = host
        self.blocks = 0
        self.max_queued = 0
        self.lock = threading.Lock()

    def execute(self, exec_ctx: Any, arguments: Sequence[AsyncValue[Any]]) -> list[Any]:
        with self.lock:
            self.blocks += 1
            queued = getattr(self.host.work_queue, "_tasks", None)
            if isinstance(queued, deque):
                self.max_queued = max(self.max_queued, len(queued))
        return []


def test_parallel_for_with_many_blocks_keeps_the_queue_bounded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "MAX_BLOCK_TASKS", 16)
    with HostContext("s") as host:
        body = Body(host)
        ctx = host.new_execution_context()
        done = parallel_for_i32(ctx, body, 0, 100_000, 1)
        host.await_values([done])
        assert done.is_concrete()
        assert body.blocks == 100_000  # every block ran once
        assert body.max_queued <= 16


def test_parallel_for_below_the_cap_spreads_one_task_per_block() -> None:
    with HostContext("s") as host:
        body = Body(host)
        done = parallel_for_i32(host.new_execution_context(), body, 0, 64, 1)
        host.await_values([done])
        assert body.blocks == 64
        assert body.max_queued > 16  # recursive halving: many single-block tasks


def test_parallel_for_with_many_blocks_on_mstd_runs_every_block_once() -> None:
    with HostContext("mstd:2") as host:
        body = Body(host)
        done = parallel_for_i32(host.new_execution_context(), body, 0, 50_000, 3)
        host.await_values([done])
        assert done.is_concrete() and body.blocks == -(-50_000 // 3)
