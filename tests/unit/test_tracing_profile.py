"""``pytfrt profile``: kernel counts against the program text, the table, the plot, errors."""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

import pytest

from pytfrt.tools import profile
from pytfrt.tools.pytfrt_cli import main as pytfrt_main

pytestmark = pytest.mark.timeout(60)

PROGRAM = """
func.func @work() -> i32 {
  %a = tfrt.constant.i32 3
  %b = tfrt.add.i32 %a, %a
  %c = tfrt.add.i32 %b, %a
  %d = tfrt.call @twice(%c) : (i32) -> i32
  tfrt.return %d : i32
}
func.func @twice(%x: i32) -> i32 {
  %y = tfrt.add.i32 %x, %x
  tfrt.return %y : i32
}
"""


def parse_table(text: str) -> dict[str, tuple[int, float]]:
    """name -> (count, share %) from the printed table."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"^(\S+)\s+(kernel|task)\s+(\d+)\s+\S+\s+\S+\s+\S+\s+([\d.]+)%", line)
        if m:
            rows[m.group(1)] = (int(m.group(3)), float(m.group(4)))
    return rows


def test_counts_follow_the_program(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    plot = tmp_path / "timeline.png"
    trace = tmp_path / "t.json"
    runs = 4
    status = pytfrt_main(["profile", str(path), "--function", "work", "-n", str(runs),
                          "--warmup", "0", "--plot", str(plot), "--trace_file", str(trace)])
    out = capsys.readouterr().out
    assert status == 0
    # Oracle: kernel names counted from the program text (both functions run once per run).
    names = Counter(re.findall(r"=\s+(tfrt\.[a-z_.0-9]+)", PROGRAM))
    expected = {name: n * runs for name, n in names.items()}
    table = parse_table(out)
    assert {name: count for name, (count, _) in table.items()} == expected
    assert 0 < sum(share for _, share in table.values()) <= 100.0
    assert "MainThread" in out
    assert plot.stat().st_size > 1000 and plot.read_bytes()[:4] == b"\x89PNG"
    assert trace.stat().st_size > 0


def test_aggregate_self_time_excludes_nested_kernels() -> None:
    from pytfrt.host.trace_events import Slice

    outer = Slice("tfrt.call", "kernel", 1, 0, 100, 0, child_time=60)
    inner = Slice("tfrt.add.i32", "kernel", 1, 20, 80, 1, queue_delay=5)
    rows = {r.name: r for r in profile.aggregate([outer, inner])}
    assert rows["tfrt.call"].self_ns == 40 and rows["tfrt.call"].total_ns == 100
    assert rows["tfrt.add.i32"].self_ns == 60 and rows["tfrt.add.i32"].delay_ns == 5
    assert profile._union_length([(0, 10), (5, 20), (30, 40), (32, 35)]) == 30


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--function", "nope"], "couldn't find function nope"),
        (["--function", "twice"], "takes arguments"),
        (["-n", "0"], "--runs must be at least 1"),
    ],
)
def test_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                message: str) -> None:
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    parser = argparse.ArgumentParser()
    profile.add_arguments(parser)
    assert profile.run(parser.parse_args([str(path), *argv])) == 1
    assert message in capsys.readouterr().err


def test_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    profile.add_arguments(parser)
    assert profile.run(parser.parse_args(["/nonexistent/x.mlir"])) == 1
    assert "could not open input file" in capsys.readouterr().err
