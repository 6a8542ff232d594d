"""The XOR examples against an independent NumPy implementation of the same network.

The training program (examples/mlp_xor/xor_training.mlir) is run through the real pipeline
(MLIR -> BEF -> bef_executor) with fewer steps; every printed loss and the final predictions
must match a float32 NumPy loop written here from the maths, not from the program.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from pytfrt.tools import bef_executor, tfrt_translate

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "mlp_xor"

X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)
Y = np.array([[0], [1], [1], [0]], np.float32)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (np.float32(1) / (np.float32(1) + np.exp(-x))).astype(np.float32)


def numpy_training(steps: int, every: int = 200) -> tuple[list[tuple[int, float]], np.ndarray]:
    """Full-batch gradient descent on the MSE of a 2-2-1 sigmoid MLP (the example's maths)."""
    wh = np.array([[0.27, -0.46], [-0.92, -0.97]], np.float32)
    bh = np.zeros(2, np.float32)
    wo = np.array([[0.63], [0.83]], np.float32)
    bo = np.zeros(1, np.float32)
    lr = np.float32(8.0)
    losses = []
    for step in range(1, steps + 1):
        h = _sigmoid(X @ wh + bh)
        o = _sigmoid(h @ wo + bo)
        if step % every == 0:
            losses.append((step, float(np.mean((o - Y) ** 2, dtype=np.float32))))
        dz_o = (o - Y) * o * (np.float32(1) - o)
        dh = dz_o @ wo.T
        wo -= lr / 4 * (h.T @ dz_o)
        bo -= lr * dz_o.mean(axis=0)
        dz_h = dh * h * (np.float32(1) - h)
        wh -= lr / 4 * (X.T @ dz_h)
        bh -= lr * dz_h.mean(axis=0)
    h = _sigmoid(X @ wh + bh)
    return losses, _sigmoid(h @ wo + bo).ravel()


def _run(
    program: Path, tmp_path: Path, steps: int, capsys: pytest.CaptureFixture[str], queue: str = "s"
) -> str:
    text = program.read_text().replace(
        "%steps = tfrt.constant.i32 2000", f"%steps = tfrt.constant.i32 {steps}"
    )
    text = text.replace("%steps = hex.constant.i32 2000", f"%steps = hex.constant.i32 {steps}")
    src = tmp_path / program.name
    src.write_text(text)
    bef = tmp_path / (program.stem + ".bef")
    assert tfrt_translate.main(["--mlir-to-bef", str(src), "-o", str(bef)]) == 0
    capsys.readouterr()
    status = bef_executor.main(["--functions=xor_training", f"--work_queue_type={queue}", str(bef)])
    out = capsys.readouterr().out
    assert status == 0, out
    return out


def _parse(out: str) -> tuple[list[tuple[int, float]], np.ndarray, str]:
    losses = [(int(s), float(v)) for s, v in re.findall(r"step (\d+): loss = ([0-9.]+)", out)]
    values = re.search(r"shape = \[4, 1\], values = \[([^\]]*)\]", out)
    assert values, out
    predictions = np.array([float(v) for v in values.group(1).split(",")], np.float32)
    correct = re.search(r"correct: (\d+/\d+)", out)
    assert correct, out
    return losses, predictions, correct.group(1)


@pytest.mark.parametrize("name", ["xor_training.mlir", "xor_training_2020.mlir"])
def test_training_matches_numpy_and_learns_xor(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _run(EXAMPLES / name, tmp_path, 400, capsys)
    losses, predictions, correct = _parse(out)
    ref_losses, ref_predictions = numpy_training(400)
    assert [s for s, _ in losses] == [s for s, _ in ref_losses]
    np.testing.assert_allclose([v for _, v in losses], [v for _, v in ref_losses], rtol=1e-4)
    np.testing.assert_allclose(predictions, ref_predictions, rtol=1e-5, atol=1e-6)
    assert correct == "4/4"
    assert ((predictions > 0.5) == Y.ravel().astype(bool)).all()


def test_training_on_multithreaded_queue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _run(EXAMPLES / "xor_training.mlir", tmp_path, 200, capsys, queue="mstd:2")
    _, predictions, _ = _parse(out)
    _, ref_predictions = numpy_training(200)
    np.testing.assert_allclose(predictions, ref_predictions, rtol=1e-5, atol=1e-6)
