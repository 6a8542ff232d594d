"""``benchmarks/call_account.py``'s bookkeeping: ONNX Runtime's profile split per run and its
convolutions matched to pytfrt's by shape (known answers; no model is compiled or run)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
call_account = pytest.importorskip("call_account")


def _node(op: str, ts: int, dur: int, x: list[int] | None = None,
          y: list[int] | None = None) -> dict[str, object]:
    args: dict[str, object] = {"op_name": op}
    if x is not None:
        args["input_type_shape"] = [{"float": x}, {"float": [1]}]
        args["output_type_shape"] = [{"float": y}]
    return {"cat": "Node", "name": f"{op}_{ts}_kernel_time", "ts": ts, "dur": dur, "args": args}


def test_ort_profile_is_split_per_run_and_warm_up_runs_are_skipped(tmp_path: Path) -> None:
    conv_a = ([1, 64, 56, 56], [1, 256, 56, 56])
    conv_b = ([1, 256, 56, 56], [1, 64, 56, 56])
    events: list[dict[str, object]] = []
    for run, t0 in enumerate((0, 1000, 2000)):
        events.append({"cat": "Session", "name": "model_run", "ts": t0, "dur": 900})
        events.append(_node("Conv", t0 + 10, 100 + run, *conv_a))
        events.append(_node("Relu", t0 + 200, 5))
        events.append(_node("Conv", t0 + 300, 200 + run, *conv_b))
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(events))
    shapes: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    runs = call_account._ort_nodes(str(path), 1, 5, shapes)
    # the first run is warm-up; durations are in microseconds, returned in nanoseconds
    assert runs == [[("Conv", 101e3), ("Relu", 5e3), ("Conv", 201e3)],
                    [("Conv", 102e3), ("Relu", 5e3), ("Conv", 202e3)]]
    assert shapes == [(tuple(conv_a[0]), tuple(conv_a[1])), (tuple(conv_b[0]), tuple(conv_b[1]))]
    assert not path.exists()  # the profile file is removed once read


def test_layers_are_matched_by_shape_in_order_of_occurrence() -> None:
    # pytfrt (NHWC) runs 1x1 64->256, then 3x3 64->64, then 1x1 64->256 again;
    # ONNX Runtime (NCHW) runs the 3x3 first: matching is by shape, not by position
    mine = [((1, 56, 56, 64), (1, 56, 56, 256)), ((1, 56, 56, 64), (1, 56, 56, 64)),
            ((1, 56, 56, 64), (1, 56, 56, 256))]
    theirs = [((1, 64, 56, 56), (1, 64, 56, 56)), ((1, 64, 56, 56), (1, 256, 56, 56)),
              ((1, 64, 56, 56), (1, 256, 56, 56)), ((1, 3, 224, 224), (1, 64, 112, 112))]
    my_wall = np.array([[110.0, 300.0, 120.0], [130.0, 330.0, 100.0], [90.0, 290.0, 140.0]])
    their_wall = np.array([[300.0, 100.0, 100.0, 50.0], [300.0, 100.0, 100.0, 50.0],
                           [300.0, 100.0, 100.0, 50.0]])
    rows = call_account._paired_layers(mine, my_wall, theirs, their_wall)
    assert [(r["index"], r["cin"], r["cout"]) for r in rows] == [(0, 64, 256), (1, 64, 64),
                                                                 (2, 64, 256)]
    assert [r["us"] for r in rows] == [110e-3, 300e-3, 120e-3]
    assert [r["ort_us"] for r in rows] == [100e-3, 300e-3, 100e-3]
    assert rows[0]["paired"] == pytest.approx(1.1)
    assert rows[1]["paired"] == pytest.approx(1.0)
    assert rows[2]["paired"] == pytest.approx(1.2)
