"""``pytfrt.tools.bench.save_results``: the shared ending of the benchmark scripts.

The oracle is the code the scripts had before (``json.dumps`` written by hand, then the plot
function called with ``<stem>.png``): the helper must produce byte-identical files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytfrt.tools.bench import save_results

RECORD = {"meta": {"date": "2026-11-25", "nproc": 2}, "rows": [{"name": "a", "us": 1.5}]}


@pytest.mark.parametrize(("indent", "newline"), [(2, True), (2, False), (1, False), (None, True)])
def test_json_bytes_match_the_hand_written_form(tmp_path: Path, indent: int | None,
                                                newline: bool) -> None:
    path = save_results("x", RECORD, indent=indent, newline=newline, results_dir=tmp_path,
                        quiet=True)
    assert path == tmp_path / "x.json"
    assert path.read_text() == json.dumps(RECORD, indent=indent) + ("\n" if newline else "")


def test_plot_gets_the_png_path_and_the_wrote_line_names_both(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[Path] = []

    def plot(png: Path) -> None:
        seen.append(png)
        png.write_bytes(b"\x89PNG")

    save_results("sub/run-1.5", RECORD, plot, results_dir=tmp_path)
    assert seen == [tmp_path / "sub" / "run-1.5.png"]  # a dot in the stem is kept
    assert (tmp_path / "sub" / "run-1.5.json").exists()
    assert capsys.readouterr().out == (
        f"wrote {tmp_path / 'sub' / 'run-1.5.json'} and {tmp_path / 'sub' / 'run-1.5.png'}\n")


def test_without_a_plot_only_the_json_is_written(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    save_results("only", [1, 2], results_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["only.json"]
    assert capsys.readouterr().out == f"wrote {tmp_path / 'only.json'}\n"
