"""The inlined float32/float64 path of the eager binary ops (``add``, ``subtract``, ...):
same results, dtypes and errors as the general path.  Oracle: NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from pytfrt import eager


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32])
@pytest.mark.parametrize("op,ref", [(eager.add, np.add), (eager.subtract, np.subtract),
                                    (eager.multiply, np.multiply),
                                    (eager.maximum, np.maximum)])
def test_tensor_and_numpy_operands_match_numpy(dtype: type, op: object, ref: object) -> None:
    rng = np.random.default_rng(0)
    a: np.ndarray = (rng.standard_normal((4, 2)) * 10).astype(dtype)
    b: np.ndarray = (rng.standard_normal((2,)) * 10).astype(dtype)
    for x, y in [(eager.constant(a), eager.constant(b)), (a, b), (eager.constant(a), b)]:
        eager.fast_path_counts.reset()
        got = op(x, y).numpy()  # type: ignore[operator]
        want = ref(a, b)  # type: ignore[operator]
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        assert eager.fast_path_counts.fast == 1 and eager.fast_path_counts.general == 0


def test_the_inlined_path_leaves_errors_and_scalars_to_the_general_path() -> None:
    a = eager.constant(np.ones((4, 2), np.float32))
    with pytest.raises(eager.EagerOpError):
        eager.add(a, eager.constant(np.ones((3,), np.float32)))  # does not broadcast
    with pytest.raises(eager.EagerOpError):
        eager.add(a, eager.constant(np.ones((4, 2), np.float64)))  # two dtypes
    s = eager.add(np.float32(1.5), np.float32(2.0))  # 0-d: NumPy returns a scalar
    assert float(s.numpy()) == 3.5 and s.numpy().dtype == np.float32
