"""``pytfrt.tools.bench.progress_bar``: the benchmarks' progress bars go to stderr only, only on
a terminal or with ``PYTFRT_PROGRESS=1``, and leave the loop's items and standard output as
they were (the tables and JSON the harnesses print)."""

from __future__ import annotations

import pytest

from pytfrt.tools import bench

pytest.importorskip("tqdm")


def test_a_bar_on_request_goes_to_stderr_only(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PYTFRT_PROGRESS", "1")
    seen = []
    for i in bench.progress_bar(range(4), "rounds of demo", unit="round"):
        seen.append(i)
        if i == 2:
            bench.progress("a message during the loop")
    out, err = capsys.readouterr()
    assert seen == [0, 1, 2, 3]
    assert out == ""
    assert "rounds of demo" in err and "/4" in err
    assert "a message during the loop\n" in err


@pytest.mark.parametrize("setting", ["0", ""])
def test_no_bar_off_a_terminal_or_when_turned_off(setting: str, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PYTFRT_PROGRESS", setting)
    items = [1, 2, 3]
    assert bench.progress_bar(items, "quiet demo") is items  # stderr here is not a terminal
    assert capsys.readouterr() == ("", "")


def test_quiet_draws_nothing(monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PYTFRT_PROGRESS", "1")
    items = range(3)
    assert bench.progress_bar(items, "demo", quiet=True) is items
    assert capsys.readouterr() == ("", "")
