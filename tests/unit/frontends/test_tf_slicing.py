"""TF's ``StridedSlice`` (every mask) and ``Slice`` through pytfrt, on random specs (Hypothesis).

The spec is constant (as in real graphs) and the sliced tensor an input, so the importer's
decoding into ``slice`` + ``squeeze`` + ``expand_dims`` runs; TF running the same function is
the oracle. Also checked: the same spec folded at import time on a constant.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytfrt


def _put(begin: list[int], end: list[int], strides: list[int], b: int, e: int, s: int) -> None:
    begin.append(b)
    end.append(e)
    strides.append(s)


@st.composite
def strided_specs(draw: Any) -> tuple[tuple[int, ...], dict[str, Any]]:
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    n = draw(st.integers(1, len(shape) + 1))
    begin: list[int] = []
    end: list[int] = []
    strides: list[int] = []
    masks = {
        "begin_mask": 0,
        "end_mask": 0,
        "ellipsis_mask": 0,
        "new_axis_mask": 0,
        "shrink_axis_mask": 0,
    }
    ellipsis_at = draw(st.one_of(st.none(), st.integers(0, n - 1)))
    kinds = [draw(st.sampled_from(["slice", "slice", "shrink", "new"])) for _ in range(n)]
    dim = 0
    for i in range(n):
        bit = 1 << i
        if i == ellipsis_at:
            masks["ellipsis_mask"] |= bit
            _put(begin, end, strides, 0, 0, 1)
            # The entries after the ellipsis index the last dimensions; new axes index none.
            after = sum(k != "new" for k in kinds[i + 1:])
            dim = max(dim, len(shape) - after)
            continue
        kind = kinds[i]
        size = shape[dim] if dim < len(shape) else None
        if kind == "new" or size is None:
            masks["new_axis_mask"] |= bit
            _put(begin, end, strides, 0, 0, 1)
            continue
        if kind == "shrink":
            masks["shrink_axis_mask"] |= bit
            b = draw(st.integers(-size, size - 1))
            _put(begin, end, strides, b, b + 1, 1)
        else:
            step = draw(st.sampled_from([1, 1, 2, 3, -1, -2]))
            begin.append(draw(st.integers(-size - 1, size + 1)))
            end.append(draw(st.integers(-size - 1, size + 1)))
            strides.append(step)
            if draw(st.booleans()):
                masks["begin_mask"] |= bit
            if draw(st.booleans()):
                masks["end_mask"] |= bit
        dim += 1
    return shape, {"begin": begin, "end": end, "strides": strides, **masks}


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(spec=strided_specs())
def test_strided_slice(tf: Any, spec: tuple[tuple[int, ...], dict[str, Any]]) -> None:
    shape, kw = spec
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)

    @tf.function(input_signature=[tf.TensorSpec(shape, tf.float32)])
    def f(t: Any) -> Any:
        return tf.raw_ops.StridedSlice(input=t, **kw), tf.raw_ops.StridedSlice(
            input=tf.constant(x) + 1, **kw
        )

    ref = [r.numpy() for r in f(x)]
    out = pytfrt.compile(f)(x)
    for o, r in zip(out, ref, strict=True):
        assert o.shape == r.shape
        np.testing.assert_array_equal(o, r)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_slice(tf: Any, data: Any) -> None:
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    begin = [data.draw(st.integers(0, d - 1)) for d in shape]
    size = [data.draw(st.integers(-1, d - b)) for b, d in zip(begin, shape, strict=True)]
    x = np.random.default_rng(0).normal(size=shape).astype(np.float32)

    @tf.function(input_signature=[tf.TensorSpec((None, *shape[1:]), tf.float32)])
    def f(t: Any) -> Any:
        return tf.slice(t, begin, size)

    np.testing.assert_array_equal(pytfrt.compile(f)(x), f(x).numpy())


def test_run_time_bounds_crop_and_its_gradient(tf: Any) -> None:
    """``x[:, i : i + 4, j : j + 3]`` with ``i``, ``j`` known only at run time (Keras'
    ``RandomCrop``): the crop keeps its static size, and its gradient (``StridedSliceGrad``
    with run-time bounds) matches TF's; a crop running past the edge is refused at run time
    (TF would return a smaller crop than the compiled program's static shape)."""
    w = tf.constant(np.random.default_rng(0).standard_normal((4, 3, 2)).astype(np.float32))

    @tf.function(
        input_signature=[
            tf.TensorSpec((None, 6, 6, 2), tf.float32),
            tf.TensorSpec((), tf.int32),
            tf.TensorSpec((), tf.int32),
        ]
    )
    def f(x: Any, i: Any, j: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = x[:, i : i + 4, j : j + 3, :]
            loss = tf.reduce_sum(y * w)
        return y, tape.gradient(loss, x)

    compiled = pytfrt.compile(f)
    assert compiled.signature.outputs[0].shape == (None, 4, 3, 2)
    x = np.random.default_rng(1).standard_normal((3, 6, 6, 2)).astype(np.float32)
    for i, j in ((0, 0), (2, 3), (1, 2), (-6, -4)):
        a, b = np.int32(i), np.int32(j)
        for ours, ref in zip(compiled(x, a, b), f(x, a, b), strict=True):
            np.testing.assert_array_equal(ours, ref.numpy())
    with pytest.raises(pytfrt.model.ModelError, match="expects 4"):
        compiled(x, np.int32(3), np.int32(0))


def test_run_time_bounds_of_every_mask(tf: Any) -> None:
    """Begin and end vectors known only at run time, with begin, end and shrink masks: the
    sizes are dynamic then, and every bound (negative, past the edge) is TF's."""
    x = np.arange(5 * 4 * 3, dtype=np.float32).reshape(5, 4, 3)
    rng = np.random.default_rng(2)
    for begin_mask, end_mask, shrink in ((0, 0, 0), (1, 4, 0), (0, 2, 1), (6, 1, 4)):

        @tf.function(
            input_signature=[
                tf.TensorSpec((None, 4, 3), tf.float32),
                tf.TensorSpec((3,), tf.int32),
                tf.TensorSpec((3,), tf.int32),
            ]
        )
        def f(x: Any, b: Any, e: Any, bm: int = begin_mask, em: int = end_mask,
              sm: int = shrink) -> Any:
            return tf.strided_slice(x, b, e, begin_mask=bm, end_mask=em, shrink_axis_mask=sm)

        compiled = pytfrt.compile(f)
        for _ in range(12):
            b = rng.integers(-6, 6, 3).astype(np.int32)
            e = rng.integers(-6, 7, 3).astype(np.int32)
            for axis in range(3):  # a shrunk axis needs an index in range
                if shrink >> axis & 1:
                    b[axis] = rng.integers(-x.shape[axis], x.shape[axis])
            np.testing.assert_array_equal(compiled(x, b, e), f(x, b, e).numpy())
