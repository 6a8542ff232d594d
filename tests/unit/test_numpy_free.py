"""NumPy-free host tensors (docs/host.md): the XOR seed as ``bef_executor`` runs it, without NumPy.

* The seed program in a fresh interpreter never imports NumPy, runs its steps fused, and prints
  exactly what the NumPy path prints (``PYTFRT_NUMPY_FREE=0``, the oracle).
* A tensor with a NumPy-free buffer prints as an ndarray-backed one with the same values, and
  reading ``.array`` gives a zero-copy ndarray over the same buffer.
* Each NumPy-free kernel against the NumPy kernel of the same name on random float32 inputs:
  the same bits (element-wise kernels, copies, small float32 sums), or within a few ulps where
  the NumPy-free path computes ``exp`` in double and sums products in order (``sigmoid_inplace``,
  ``matmul``); a bad operand gets the NumPy kernel's own error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.host import numpy_free
from pytfrt.playground import buffer_kernels
from pytfrt.tensor.dense_host_tensor import DenseHostTensor
from pytfrt.tensor.dtype import F32
from pytfrt.tensor.shape import TensorShape

XOR = Path(__file__).resolve().parents[2] / "examples" / "mlp_xor" / "xor_training.mlir"


def _child(path: Path, numpy_free_on: bool, **env_vars: str) -> tuple[str, bool, int]:
    """bef_executor on ``path`` in a fresh interpreter: its stdout, whether NumPy was imported,
    and how many steps ran fused."""
    code = textwrap.dedent(f"""
        import contextlib, gc, io, json, sys
        from pytfrt.tools import bef_executor
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = bef_executor.main([{str(path)!r}])
        from pytfrt.executor.fused_segments import FusedSegment
        hits = sum(o.hits for o in gc.get_objects() if isinstance(o, FusedSegment))
        print(json.dumps([status, out.getvalue(), "numpy" in sys.modules, hits]))
    """)
    env = {**os.environ, "PYTFRT_NUMPY_FREE": "1" if numpy_free_on else "0", **env_vars}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=False, env=env)
    assert proc.returncode == 0, proc.stderr
    status, out, loaded, hits = json.loads(proc.stdout.strip().splitlines()[-1])
    assert status == 0, proc.stderr
    return out, loaded, hits


@pytest.fixture(scope="module")
def oracle() -> str:
    """What the seed prints on the NumPy path."""
    out, loaded, _ = _child(XOR, False)
    assert loaded
    return out


def test_the_seed_program_runs_without_numpy_and_prints_what_the_numpy_path_prints(
        oracle: str) -> None:
    out, loaded, hits = _child(XOR, True)
    assert not loaded
    assert hits > 0  # the training steps ran in fused segments
    assert "correct: 4/4" in out
    assert out == oracle


def test_without_a_c_compiler_the_numpy_kernels_take_over(oracle: str, tmp_path: Path) -> None:
    # an empty kernel cache and no compiler: no C kernels, no fused segments
    short = tmp_path / "xor.mlir"
    short.write_text(XOR.read_text())
    out, loaded, hits = _child(short, True, CC=str(tmp_path / "no-such-cc"),
                               PYTFRT_CACHE_DIR=str(tmp_path / "cache"))
    assert loaded and hits == 0
    assert out == oracle


# -- tensors ---------------------------------------------------------------------------------


@pytest.fixture
def free(monkeypatch: pytest.MonkeyPatch) -> None:
    """NumPy-free tensors for one test (the process has NumPy; only the storage changes)."""
    monkeypatch.setattr(numpy_free, "ENABLED", True)


def _raw(values: np.ndarray) -> DenseHostTensor:
    t = DenseHostTensor.create(F32, values.shape)
    assert t.raw is not None
    t.flat_view()[:] = memoryview(np.ascontiguousarray(values, np.float32).reshape(-1))  # type: ignore[arg-type]
    return t


def test_a_numpy_free_tensor_prints_and_converts_as_an_ndarray_backed_one(free: None) -> None:
    values = np.array([[1.5, -2.0, np.inf], [np.nan, 0.0, 3.25e-5]], np.float32)
    t = _raw(values)
    assert t.dims == (2, 3) and t.rank == 2 and t.num_elements == 6 and t.nbytes == 24
    assert str(t) == str(DenseHostTensor.from_numpy(values))
    flat = t.flat_view()
    array = t.array  # NumPy now: the same buffer, no copy
    assert t.raw is None and array.dtype == np.float32 and array.shape == (2, 3)
    array[0, 0] = 7.0
    assert flat[0] == 7.0
    assert str(t) == str(DenseHostTensor.from_numpy(array))


def test_without_the_switch_tensors_are_ndarrays() -> None:
    t = DenseHostTensor.create(F32, (2, 2))
    assert t.raw is None and isinstance(t.array, np.ndarray)


# -- kernels against their NumPy twins ---------------------------------------------------------

KERNELS = buffer_kernels._kernels()


def _as_numpy(t: DenseHostTensor) -> DenseHostTensor:
    """An ndarray-backed copy (leaves a NumPy-free ``t`` NumPy-free)."""
    values = t.array if t.raw is None else t.flat_view()
    return DenseHostTensor.from_numpy(np.array(values, np.float32).reshape(t.dims))


def _both(name: str, *args: Any) -> tuple[Any, list[DenseHostTensor], Any, list[DenseHostTensor]]:
    """Run the NumPy-free kernel on NumPy-free copies of the tensor operands and the NumPy
    kernel on ndarray-backed ones; results and the (mutated) tensors of each."""
    raw = [a for a in args]
    ref = [_as_numpy(a) if isinstance(a, DenseHostTensor) else a for a in args]
    got = KERNELS[name](*raw)
    want = buffer_kernels.numpy_kernel(name)(*ref)
    return (got, [a for a in raw if isinstance(a, DenseHostTensor)],
            want, [a for a in ref if isinstance(a, DenseHostTensor)])


def _ulps(a: np.ndarray, b: np.ndarray) -> int:
    ia = a.astype(np.float32).view(np.int32).astype(np.int64)
    ib = b.astype(np.float32).view(np.int32).astype(np.int64)
    return int(np.max(np.abs(ia - ib))) if a.size else 0


floats = st.floats(-8, 8, width=32, allow_subnormal=False)


def _tensor(draw: Any, shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    return np.array(draw(st.lists(floats, min_size=n, max_size=n)), np.float32).reshape(shape)


@st.composite
def _case(draw: Any) -> tuple[int, int, int, np.ndarray, np.ndarray, np.ndarray, float, float]:
    m, k, n = draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 5))
    return (m, k, n, _tensor(draw, (m, k)), _tensor(draw, (k, n)), _tensor(draw, (m, n)),
            draw(st.sampled_from([1.0, -2.0, 0.5])), draw(st.sampled_from([0.0, 1.0, 0.25])))


@settings(max_examples=40, deadline=None)
@given(_case())
def test_kernels_match_the_numpy_kernels(case: Any) -> None:
    m, k, n, a, b, c, alpha, beta = case
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(numpy_free, "ENABLED", True)
        _check_kernels(m, k, n, a, b, c, alpha, beta)


def _check_kernels(m: int, k: int, n: int, a: np.ndarray, b: np.ndarray, c: np.ndarray,
                   alpha: float, beta: float) -> None:
    ta, tb, tc = _raw(a), _raw(b), _raw(c)
    _, (_, _, product), _, (_, _, oracle) = _both("eigen.matmul.f32", alpha, ta, tb, beta, tc)
    # products summed in order in float32 (BLAS may fuse or reorder): a few ulps of the sum
    scale = np.abs(a) @ np.abs(b) * abs(alpha) + np.abs(c) * abs(beta)
    assert np.all(np.abs(product.array - oracle.array)
                  <= 4 * np.finfo(np.float32).eps * scale + 1e-30)
    for name in ("sigmoid_inplace.f32",):
        _, (activated,), _, (expected,) = _both(name, _raw(a))
        assert _ulps(activated.array, expected.array) <= 2  # exp in double vs NumPy's SIMD exp
    exact2 = ("sigmoid_grad_inplace.f32", "mlp.multiply_inplace.f32",
              "tfrt_test.subtract_inplace.f32")
    for name in exact2:
        _, got, _, want = _both(name, _raw(a), _raw(a[::-1].copy()))
        assert got[1].array.tobytes() == want[1].array.tobytes(), name
    _, got, _, want = _both("tfrt_test.tensor_transpose.f32", _raw(a),
                            DenseHostTensor.create(F32, (k, m)))
    assert got[1].array.tobytes() == want[1].array.tobytes()
    _, got, _, want = _both("tfrt_test.flatten.f32", _raw(a), DenseHostTensor.create(F32, (m, k)))
    assert got[1].array.tobytes() == want[1].array.tobytes()
    _, got, _, want = _both("tfrt_test.mean_axis_zero.f32", _raw(a),
                            DenseHostTensor.create(F32, (k,)))
    assert got[1].array.tobytes() == want[1].array.tobytes()
    lr = _raw(np.array([0.5], np.float32))
    _, got, _, want = _both("tfrt_test.gradient_descent.f32", _raw(a), lr, _raw(a[::-1].copy()))
    assert got[2].array.tobytes() == want[2].array.tobytes()
    if a.size < 8:  # NumPy sums 8 or more elements pairwise
        loss, _, want_loss, _ = _both("mlp.mse_loss.f32", _raw(a), _raw(a[::-1].copy()))
        assert loss == want_loss
    bias = _raw(a[0])
    got_b = KERNELS["tfrt_test.broadcast.f32.2"](bias, TensorShape((3, k)), None)
    want_b = buffer_kernels.numpy_kernel("tfrt_test.broadcast.f32.2")(
        _as_numpy(bias), TensorShape((3, k)), None)
    assert got_b.raw is not None and got_b.array.tobytes() == want_b.array.tobytes()


def test_a_bad_operand_gets_the_numpy_kernels_error(free: None) -> None:
    a, c = _raw(np.ones((2, 3), np.float32)), _raw(np.ones((2, 2), np.float32))
    with pytest.raises(Exception) as got:
        KERNELS["eigen.matmul.f32"](1.0, a, a, 0.0, c)
    with pytest.raises(Exception) as want:
        buffer_kernels.numpy_kernel("eigen.matmul.f32")(1.0, _as_numpy(a), _as_numpy(a), 0.0,
                                                        _as_numpy(c))
    assert type(got.value) is type(want.value) and str(got.value) == str(want.value)
    assert "inner dimension mismatch" in str(got.value)


def test_only_programs_of_numpy_free_kernels_qualify(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from pytfrt.tools import bef_executor

    opts = bef_executor.parse_args([str(XOR)])
    program = bef_executor.read_program(str(XOR))
    other = tmp_path / "other.mlir"
    other.write_text(XOR.read_text().replace('"tfrt_test.flatten.f32"', '"tfrt_test.relu.f32"'))
    other_program = bef_executor.read_program(str(other))
    assert not bef_executor.numpy_free_program(opts, program)  # NumPy already imported
    with monkeypatch.context() as mp:
        mp.delitem(sys.modules, "numpy")  # as in a fresh bef_executor process
        assert bef_executor.numpy_free_program(opts, program)
        assert not bef_executor.numpy_free_program(opts, other_program)
        mp.setenv("PYTFRT_NUMPY_FREE", "0")
        assert not bef_executor.numpy_free_program(opts, program)
